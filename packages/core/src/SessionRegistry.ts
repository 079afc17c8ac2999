/**
 * Many sessions, owned by stable caller-chosen ids.
 *
 * A registry starts sessions on demand (`getOrCreate(id, config)`), keeps at most `capacity` of them alive, closes
 * the ones idle for longer than `idleTimeToLive` and, when it is full, the least recently used idle one. A session
 * that a caller has pinned (it holds a handle in an open scope) or that is running a turn is never evicted.
 *
 * Hosts never see a process or a fiber: they hold ids and short-lived {@link Handle}s. Each incarnation of an id
 * has a generation, and a handle acts only on its own generation: once the session it was made for is gone, every
 * call on the handle fails with {@link GenerationChanged}, even if the id has a new session by then.
 *
 * Every session lives in its own child scope of the registry's scope. Releasing the registry's layer (or
 * interrupting the host that provided it) closes every session through the transport's teardown, concurrently and
 * bounded by `shutdownConcurrency`. A session that fails, retires or whose process exits is removed and its scope
 * closed, so the next `getOrCreate` for its id starts a fresh generation.
 *
 * The registry is provider-neutral: it is built from a {@link Kind} (how to start a session for an id and a
 * configuration, and how to fingerprint a configuration). Each provider binds it: `ClaudeRegistry` is the registry
 * of Claude Code sessions (`ClaudeSession.kind`); {@link Service} makes a registry service for any kind, and
 * {@link kinds} one that holds several providers' sessions side by side.
 *
 * Why not `effect/RcMap`: its capacity refuses new keys instead of evicting the least recently used one, it knows
 * nothing about a session's running turn, configuration conflicts or generations, and it closes its entries one by
 * one at shutdown. The registry keeps a plain `Map` of entries (the map's insertion order is the recency order, so
 * eviction and the idle sweep look only at the oldest entries) with one `Scope.Closeable` per session.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { ClaudeRegistry } from "@tether/core"
 * import { NodeTransport } from "@tether/transport-node"
 *
 * const program = Effect.gen(function*() {
 *   const registry = yield* ClaudeRegistry.ClaudeRegistry
 *   const result = yield* Effect.scoped(
 *     Effect.gen(function*() {
 *       const chat = yield* registry.getOrCreate("chat-42", { model: "sonnet" }) // pinned while this scope is open
 *       return yield* chat.run("Summarize the README")
 *     })
 *   )
 *   console.log(result.text)
 * })
 *
 * program.pipe(Effect.provide(ClaudeRegistry.layer({ capacity: 32 }).pipe(Layer.provide(NodeTransport.layer()))))
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as EventLog from "./EventLog.ts"
import { fixDisposition } from "./internal/disposition.ts"
import type * as Permission from "./Permission.ts"
import type * as Session from "./Session.ts"
import type { SessionEvent, Status } from "./SessionEvent.ts"
import { InvalidConfig, SessionUnavailable } from "./TetherError.ts"
import type * as TetherError from "./TetherError.ts"
import type * as Transport from "./Transport.ts"
import type { Prompt, ProviderTurnError, Turn, TurnError, TurnResult } from "./Turn.ts"

// ---------------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of SessionConflict, set once on its prototype.
export interface SessionConflict extends TetherError.Disposition {}

/**
 * The id has a live session started with a different configuration. Nothing was started and nothing was sent:
 * the request can be requeued (for example once the live session is evicted), or sent with `onConflict:
 * "replace"`.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionConflict extends Schema.TaggedError<SessionConflict>()("SessionConflict", {
  id: Schema.String,
  generation: Schema.Finite,
  liveFingerprint: Schema.String,
  requestedFingerprint: Schema.String
}) {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `session ${this.id} (generation ${this.generation}) is live with a different configuration`
  }
}

// The disposition flags of CapacityExceeded, set once on its prototype.
export interface CapacityExceeded extends TetherError.Disposition {}

/**
 * The registry is at capacity and no session could be evicted (every one is pinned or running a turn), or a
 * slot did not free up within the admission timeout. Nothing was started: requeue later.
 *
 * @category errors
 * @since 0.1.0
 */
export class CapacityExceeded extends Schema.TaggedError<CapacityExceeded>()("CapacityExceeded", {
  id: Schema.String,
  capacity: Schema.Finite,
  waitedMillis: Schema.Finite
}) {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `no room for session ${this.id}: all ${this.capacity} sessions are pinned or busy` +
      (this.waitedMillis > 0 ? ` (waited ${this.waitedMillis} ms)` : "")
  }
}

// The disposition flags of GenerationChanged, set once on its prototype.
export interface GenerationChanged extends TetherError.Disposition {}

/**
 * A handle (or a call that named a generation) refers to an incarnation of the id that is gone. Nothing was sent
 * to the session that replaced it, if any (`current` is its generation, `null` when the id has none).
 *
 * @category errors
 * @since 0.1.0
 */
export class GenerationChanged extends Schema.TaggedError<GenerationChanged>()("GenerationChanged", {
  id: Schema.String,
  expected: Schema.Finite,
  current: Schema.NullOr(Schema.Finite)
}) {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `session ${this.id} is no longer generation ${this.expected}` +
      (this.current === null ? " (it has no live session)" : ` (it is generation ${this.current})`)
  }
}

// The disposition flags of SessionNotFound, set once on its prototype.
export interface SessionNotFound extends TetherError.Disposition {}

/**
 * No session is registered under the id. Nothing was sent.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  id: Schema.String
}) {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `no session ${this.id}`
  }
}

// The disposition flags of RegistryClosed, set once on its prototype.
export interface RegistryClosed extends TetherError.Disposition {}

/**
 * The registry is shutting down (its layer is being released). Nothing was started or sent.
 *
 * @category errors
 * @since 0.1.0
 */
export class RegistryClosed extends Schema.TaggedError<RegistryClosed>()("RegistryClosed", {}) {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return "the session registry is closed"
  }
}

/**
 * What finding a session by id (or by handle) can fail with. A session that is being evicted, or that failed, is
 * `SessionUnavailable`.
 *
 * @category errors
 * @since 0.1.0
 */
export type LookupError = SessionNotFound | GenerationChanged | SessionUnavailable | RegistryClosed

/**
 * What `getOrCreate` can fail with, besides the kind's own start errors.
 *
 * @category errors
 * @since 0.1.0
 */
export type AdmissionError = SessionConflict | CapacityExceeded | SessionUnavailable | RegistryClosed

// ---------------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------------

/**
 * How to start sessions of one provider: `acquire` starts the session for an id in the scope it is given (the
 * registry gives each session its own), `fingerprint` reduces a configuration to a string; two configurations
 * with the same fingerprint are the same session as far as the registry is concerned.
 *
 * @category models
 * @since 0.1.0
 */
export interface Kind<C, E, R, A extends TurnResult = TurnResult, TE = ProviderTurnError> {
  readonly acquire: (id: string, config: C) => Effect.Effect<Session.Session<A, TE>, E, Scope.Scope | R>
  readonly fingerprint: (config: C) => string
}

/**
 * What `getOrCreate` does when the id is live with a different configuration: `"fail"` with
 * {@link SessionConflict}, or `"replace"`: force-evict the live session (its running turn fails with
 * `TurnInterrupted`, reason `"evicted"`) and start a new generation.
 *
 * @category models
 * @since 0.1.0
 */
export type ConflictPolicy = "fail" | "replace"

/**
 * The registry's limits and policies.
 *
 * | setting | default | meaning |
 * | --- | --- | --- |
 * | `capacity` | 12 | sessions alive at once (starting, live and closing ones count) |
 * | `idleTimeToLive` | 15 minutes | an idle, unpinned session is closed after this long without use (`Infinity`: never) |
 * | `onConflict` | `"fail"` | see {@link ConflictPolicy} |
 * | `admissionTimeout` | none | when full, wait this long for a slot instead of failing at once |
 * | `shutdownConcurrency` | 16 | sessions closed at once when the registry is released |
 *
 * @category models
 * @since 0.1.0
 */
export interface Settings {
  readonly capacity?: number | undefined
  readonly idleTimeToLive?: Duration.Input | undefined
  readonly onConflict?: ConflictPolicy | undefined
  readonly admissionTimeout?: Duration.Input | undefined
  readonly shutdownConcurrency?: number | undefined
}

/**
 * Options of {@link make}: a {@link Kind} and the {@link Settings}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<C, E, R, A extends TurnResult = TurnResult, TE = ProviderTurnError>
  extends Kind<C, E, R, A, TE>, Settings
{}

/**
 * Per-call options of `getOrCreate`, overriding the registry's settings.
 *
 * @category models
 * @since 0.1.0
 */
export interface GetOptions {
  readonly onConflict?: ConflictPolicy | undefined
  /** Wait this long for a slot when the registry is full (`0`: fail at once). */
  readonly admissionTimeout?: Duration.Input | undefined
}

/**
 * Per-call options of the operations by id. `generation` fences the call: it fails with
 * {@link GenerationChanged} unless the id's live session is that generation.
 *
 * @category models
 * @since 0.1.0
 */
export interface Target {
  readonly generation?: number | undefined
}

/**
 * Options of `send` and `run` by id.
 *
 * @category models
 * @since 0.1.0
 */
export interface SendOptions extends Session.SendOptions, Target {}

/**
 * Options of `evict`: the graceful eviction waits for the running turn to end and the pins to be released; after
 * `timeout` (if given) it force-evicts.
 *
 * @category models
 * @since 0.1.0
 */
export interface EvictOptions extends Target {
  readonly timeout?: Duration.Input | undefined
}

/**
 * Where an entry is in its life in the registry.
 *
 * @category models
 * @since 0.1.0
 */
export type Phase = "starting" | "live" | "draining" | "closing"

/**
 * Why a session left the registry.
 *
 * - `idle`: unused for longer than the idle TTL;
 * - `capacity`: the least recently used idle session, closed to admit another;
 * - `evicted`: `evict` (graceful);
 * - `forced`: `forceEvict`, or an `evict` whose timeout passed;
 * - `replaced`: `getOrCreate` with a different configuration under `onConflict: "replace"`;
 * - `failed`: the session failed or retired, or its process exited;
 * - `shutdown`: the registry was released.
 *
 * @category models
 * @since 0.1.0
 */
export type EvictionReason = "idle" | "capacity" | "evicted" | "forced" | "replaced" | "failed" | "shutdown"

/**
 * A point-in-time view of one session.
 *
 * @category models
 * @since 0.1.0
 */
export interface Snapshot {
  readonly id: string
  readonly generation: number
  readonly fingerprint: string
  readonly phase: Phase
  /** The session's own status (`"starting"` until it has started). */
  readonly status: Status
  readonly pins: number
  /** Turns sent through the registry that have not ended. */
  readonly turnsInFlight: number
  readonly pendingPermissions: number
  /** Epoch milliseconds. */
  readonly createdAt: number
  /** Epoch milliseconds of the last use (a call, a pin released, a turn ended). */
  readonly lastUsedAt: number
  /** The CLI's process id, where the transport has one. */
  readonly pid: number | undefined
  /** The CLI's conversation id, once known. */
  readonly sessionId: string | undefined
  /** How the process ended, if it has. */
  readonly exit: Transport.ExitStatus | undefined
}

/**
 * A short-lived handle on one generation of a session. Every call fails with {@link GenerationChanged} once that
 * generation is gone. A handle from `getOrCreate` or `get` pins the session until the scope it was obtained in
 * closes; the handle itself stays usable (unpinned) afterwards.
 *
 * @category models
 * @since 0.1.0
 */
export interface Handle<A extends TurnResult = TurnResult, TE = ProviderTurnError> {
  readonly id: string
  readonly generation: number
  /** Sends a prompt; returns the turn as soon as it is written (or queued). */
  readonly send: (
    prompt: Prompt,
    options?: Session.SendOptions
  ) => Effect.Effect<Turn<A, TE>, Session.SendError | LookupError>
  /** Sends a prompt and waits for its result. */
  readonly run: (
    prompt: Prompt,
    options?: Session.SendOptions
  ) => Effect.Effect<A, Session.SendError | TurnError | TE | LookupError>
  readonly interrupt: Effect.Effect<Session.InterruptOutcome, LookupError>
  readonly answerPermission: (
    requestId: string,
    decision: Exclude<Permission.Decision, { _tag: "Defer" }>
  ) => Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved | LookupError>
  readonly pendingPermissions: Effect.Effect<ReadonlyArray<Permission.PermissionRequest>, LookupError>
  /** A raw provider control request (for Claude, e.g. `{ subtype: "set_model", model }`). */
  readonly control: (
    request: unknown
  ) => Effect.Effect<unknown, Session.ControlError | LookupError>
  readonly subscribe: (
    from?: EventLog.From
  ) => Effect.Effect<
    Stream.Stream<EventLog.Delivery<SessionEvent>>,
    EventLog.ReplayUnavailable | LookupError,
    Scope.Scope
  >
  readonly snapshot: Effect.Effect<Snapshot, LookupError>
}

/**
 * A session registry for configurations of type `C` whose sessions fail to start with `E`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Registry<C, E, A extends TurnResult = TurnResult, TE = ProviderTurnError> {
  /**
   * Returns a handle on the id's live session, starting one (a new generation) if there is none. The handle pins
   * the session until the current scope closes. The same id with a different configuration is a
   * {@link SessionConflict} (or a replacement, see {@link ConflictPolicy}); a full registry evicts its least
   * recently used idle session, or fails with {@link CapacityExceeded} (after `admissionTimeout`, if set).
   */
  readonly getOrCreate: (
    id: string,
    config: C,
    options?: GetOptions
  ) => Effect.Effect<Handle<A, TE>, E | AdmissionError, Scope.Scope>
  /** A pinned handle on the id's live session, without starting one. */
  readonly get: (id: string, options?: Target) => Effect.Effect<Handle<A, TE>, LookupError, Scope.Scope>
  readonly send: (
    id: string,
    prompt: Prompt,
    options?: SendOptions
  ) => Effect.Effect<Turn<A, TE>, Session.SendError | LookupError>
  readonly run: (
    id: string,
    prompt: Prompt,
    options?: SendOptions
  ) => Effect.Effect<A, Session.SendError | TurnError | TE | LookupError>
  readonly interrupt: (id: string, options?: Target) => Effect.Effect<Session.InterruptOutcome, LookupError>
  readonly answerPermission: (
    id: string,
    requestId: string,
    decision: Exclude<Permission.Decision, { _tag: "Defer" }>,
    options?: Target
  ) => Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved | LookupError>
  readonly pendingPermissions: (
    id: string,
    options?: Target
  ) => Effect.Effect<ReadonlyArray<Permission.PermissionRequest>, LookupError>
  readonly control: (
    id: string,
    request: unknown,
    options?: Target
  ) => Effect.Effect<unknown, Session.ControlError | LookupError>
  /** The session's events from a starting point; the stream ends when the session closes. */
  readonly subscribe: (
    id: string,
    from?: EventLog.From,
    options?: Target
  ) => Effect.Effect<
    Stream.Stream<EventLog.Delivery<SessionEvent>>,
    EventLog.ReplayUnavailable | LookupError,
    Scope.Scope
  >
  readonly snapshot: (id: string) => Effect.Effect<Snapshot, SessionNotFound>
  /** Snapshots of every session, least recently used first. */
  readonly list: Effect.Effect<ReadonlyArray<Snapshot>>
  /**
   * Graceful eviction: refuses new turns at once, waits for the running turn to end and the pins to be released
   * (force-evicting after `timeout`, if given), then closes the session (stdin EOF, close grace, teardown).
   */
  readonly evict: (id: string, options?: EvictOptions) => Effect.Effect<void, LookupError>
  /**
   * Closes the session now, pins or not. A running turn fails with `TurnInterrupted` (reason `"evicted"`;
   * `deliveryUncertain` when the CLI had not acknowledged the prompt).
   */
  readonly forceEvict: (id: string, options?: Target) => Effect.Effect<void, LookupError>
  /** Sessions in the registry (starting, live, draining and closing). */
  readonly size: Effect.Effect<number>
}

// ---------------------------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------------------------

/**
 * The registry's metrics (shared by every registry in the process).
 *
 * | metric | kind |
 * | --- | --- |
 * | `tether_registry_sessions` | gauge: live sessions |
 * | `tether_registry_turns_in_flight` | gauge: turns sent through a registry that have not ended |
 * | `tether_registry_session_start` | timer: spawn to handshake done |
 * | `tether_registry_turn_duration` | timer: send to the turn's end |
 * | `tether_registry_evictions` | counter, attribute `reason` ({@link EvictionReason}) |
 * | `tether_registry_teardown_duration` | timer: closing one session |
 *
 * How long permission requests wait is recorded by every session, in a registry or not (`Session.metrics`).
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics = {
  sessions: Metric.gauge("tether_registry_sessions", { description: "Sessions live in session registries" }),
  turnsInFlight: Metric.gauge("tether_registry_turns_in_flight", {
    description: "Turns sent through session registries that have not ended"
  }),
  sessionStart: Metric.timer("tether_registry_session_start", { description: "Session start, spawn to handshake" }),
  turnDuration: Metric.timer("tether_registry_turn_duration", { description: "Turn duration, send to end" }),
  evictions: Metric.counter("tether_registry_evictions", {
    description: "Sessions that left a registry, by reason",
    incremental: true
  }),
  teardownDuration: Metric.timer("tether_registry_teardown_duration", { description: "Closing one session" })
} as const

// ---------------------------------------------------------------------------------------------------------------
// Fingerprints
// ---------------------------------------------------------------------------------------------------------------

const canonical = (value: unknown, seen: Set<object>): string | undefined => {
  switch (typeof value) {
    case "undefined":
    case "function":
    case "symbol":
      return undefined
    case "bigint":
      return `"${value}n"`
    case "number":
    case "boolean":
    case "string":
      return JSON.stringify(value)
  }
  if (value === null) return "null"
  if (Redacted.isRedacted(value)) return `{"$redacted":${JSON.stringify(Redacted.value(value))}}`
  if (Duration.isDuration(value)) return `{"$duration":${JSON.stringify(String(Duration.toMillis(value)))}}`
  const object = value as object
  if (seen.has(object)) return `"$cycle"`
  seen.add(object)
  let out: string
  if (Array.isArray(object)) {
    out = `[${object.map((item) => canonical(item, seen) ?? "null").join(",")}]`
  } else {
    const record = object as { readonly [key: string]: unknown }
    const parts: Array<string> = []
    for (const key of Object.keys(record).sort()) {
      const encoded = canonical(record[key], seen)
      if (encoded !== undefined) parts.push(`${JSON.stringify(key)}:${encoded}`)
    }
    out = `{${parts.join(",")}}`
  }
  seen.delete(object)
  return out
}

// cyrb53: a fast 53-bit string hash. Fingerprints only need to tell configurations apart, and hashing keeps
// secrets (Redacted values) out of snapshots and logs.
const hash53 = (input: string): string => {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < input.length; i++) {
    const ch = input.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0")
}

/**
 * A fingerprint of plain configuration data: a hash of its canonical JSON (keys sorted; functions and `undefined`
 * ignored; `Redacted` values and `Duration`s by value). Two configurations that differ only in functions (a
 * permission policy, hook callbacks) have the same fingerprint.
 *
 * @category fingerprints
 * @since 0.1.0
 */
export const fingerprint = (config: unknown): string => hash53(canonical(config, new Set()) ?? "undefined")

// ---------------------------------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------------------------------

interface Entry<E, A extends TurnResult, TE> {
  readonly id: string
  readonly generation: number
  readonly fingerprint: string
  readonly scope: Scope.Closeable
  /** Fibers that watch the session (its exit, its turns); closed after the session itself. */
  readonly watchers: Scope.Closeable
  readonly createdAt: number
  readonly started: Deferred.Deferred<Session.Session<A, TE>, E | SessionUnavailable>
  readonly closed: Deferred.Deferred<void>
  phase: Phase
  session: Session.Session<A, TE> | undefined
  startFiber: Fiber.Fiber<void> | undefined
  closeReason: EvictionReason | undefined
  pins: number
  turns: number
  lastUsed: number
}

// A registry only holds sessions whose handshake is done, so "starting" never shows up here.
const busyStatuses: ReadonlySet<Status> = new Set(["running", "awaiting-permission", "cancelling"])

const unavailable = <E, A extends TurnResult, TE>(entry: Entry<E, A, TE>): SessionUnavailable =>
  new SessionUnavailable({
    status: entry.phase,
    reason: entry.closeReason === undefined
      ? `session ${entry.id} is ${entry.phase}`
      : `session ${entry.id} is being closed (${entry.closeReason})`
  })

const decodeDuration = (
  input: Duration.Input | undefined,
  fallback: Duration.Duration
): Duration.Duration | undefined => {
  if (input === undefined) return fallback
  const decoded = Duration.fromInput(input)
  return Option.isSome(decoded) ? decoded.value : undefined
}

const validateSettings = (settings: Settings) => {
  const problems: Array<string> = []
  const capacity = settings.capacity ?? 12
  if (!Number.isSafeInteger(capacity) || capacity < 1) {
    problems.push(`capacity must be a positive integer (got ${capacity})`)
  }
  const shutdownConcurrency = settings.shutdownConcurrency ?? 16
  if (!Number.isSafeInteger(shutdownConcurrency) || shutdownConcurrency < 1) {
    problems.push(`shutdownConcurrency must be a positive integer (got ${shutdownConcurrency})`)
  }
  const ttl = decodeDuration(settings.idleTimeToLive, Duration.minutes(15))
  if (ttl === undefined || !Duration.isPositive(ttl)) problems.push("idleTimeToLive must be a positive duration")
  const admission = decodeDuration(settings.admissionTimeout, Duration.zero)
  if (admission === undefined || !Duration.isFinite(admission)) {
    problems.push("admissionTimeout must be a finite duration")
  }
  const onConflict = settings.onConflict ?? "fail"
  if (onConflict !== "fail" && onConflict !== "replace") problems.push(`onConflict must be "fail" or "replace"`)
  return {
    problems,
    capacity,
    shutdownConcurrency,
    ttl: ttl ?? Duration.infinity,
    admission: admission ?? Duration.zero,
    onConflict
  }
}

/**
 * Creates a registry in the current scope. Closing the scope closes every session (concurrently, at most
 * `shutdownConcurrency` at a time) and waits for their teardown.
 *
 * The kind's requirements (`R`, e.g. the `Transport`) are captured here: sessions start with this context
 * whoever calls `getOrCreate`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClaudeSession, SessionRegistry } from "@tether/core"
 *
 * const registry = SessionRegistry.make({
 *   acquire: (_id, options: ClaudeSession.Options) => ClaudeSession.make(options),
 *   fingerprint: SessionRegistry.fingerprint,
 *   capacity: 4,
 *   idleTimeToLive: "5 minutes"
 * }) // Effect<Registry<ClaudeSession.Options, ...>, InvalidConfig, Scope | Transport>
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*<C, E, R, A extends TurnResult = TurnResult, TE = ProviderTurnError>(
  options: Options<C, E, R, A, TE>
) {
  const settings = validateSettings(options)
  if (settings.problems.length > 0) return yield* new InvalidConfig({ problems: settings.problems })
  const { capacity, shutdownConcurrency, onConflict: defaultOnConflict } = settings
  const ttlMillis = Duration.toMillis(settings.ttl)
  const context = yield* Effect.context<R>()
  const clock = yield* Clock.Clock
  const scope = yield* Effect.scope
  // Order matters at release (finalizers run in reverse): the shutdown finalizer first closes every session,
  // bounded; then the (by then empty) sessions scope; then the background fibers, which the shutdown still uses.
  const fibers = yield* Scope.fork(scope, "parallel")
  const sessions = yield* Scope.fork(scope, "parallel")

  const entries = new Map<string, Entry<E, A, TE>>()
  let nextGeneration = 1
  let closed = false
  let changed = Deferred.makeUnsafe<void>()

  const now = () => clock.currentTimeMillisUnsafe()

  /** Wakes everyone waiting for a slot or for a drain. */
  const notify = () => {
    const previous = changed
    changed = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(previous, Exit.void)
  }

  /** Marks the entry used now and moves it to the most recently used end of the map. */
  const touch = (entry: Entry<E, A, TE>) => {
    entry.lastUsed = now()
    if (entries.get(entry.id) === entry) {
      entries.delete(entry.id)
      entries.set(entry.id, entry)
    }
  }

  const inContext = <A, E2>(effect: Effect.Effect<A, E2, R>): Effect.Effect<A, E2> =>
    Effect.provideContext(effect, context)

  const background = <A, E2>(effect: Effect.Effect<A, E2>) => Effect.asVoid(Effect.forkIn(effect, fibers))

  // Effects built per call (per turn, per start, per eviction) come from `Effect.fnUntraced` (or `Effect.fn`)
  // functions created once per registry, never from `(...) => Effect.gen(function*() {...})`: V8 gives each new
  // generator function its own map, allocated in the old generation, and that map keeps the closure (with whatever
  // it captures: a turn, its result) alive through every minor GC until the next full one. For the same reason the
  // closures Effect stores per turn (a stream's consumer, an `ensuring`) close over the entry, never the turn.

  // --- closing ---------------------------------------------------------------------------------------------------

  /** A closed entry leaves the map (unless a newer one took its id) and wakes those waiting for it. */
  const removeEntry = (entry: Entry<E, A, TE>): void => {
    if (entries.get(entry.id) === entry) entries.delete(entry.id)
    Deferred.doneUnsafe(entry.closed, Exit.void)
    notify()
  }

  const evictable = (entry: Entry<E, A, TE>) => entry.phase === "live" && entry.pins === 0 && entry.turns === 0

  /** Closes a session that `closeEntry` has marked closing; removes the entry and wakes its waiters however it ends. */
  const teardown = Effect.fnUntraced(
    function*(entry: Entry<E, A, TE>, reason: EvictionReason, wasLive: boolean) {
      yield* Metric.update(Metric.withAttributes(metrics.evictions, { reason }), 1)
      const start = entry.startFiber
      if (start !== undefined) yield* Fiber.interrupt(start)
      if (!Deferred.isDoneUnsafe(entry.started)) {
        Deferred.doneUnsafe(
          entry.started,
          Exit.fail(
            new SessionUnavailable({
              status: "closing",
              reason: `session ${entry.id} was closed (${reason}) while starting`
            })
          )
        )
      }
      const t0 = now()
      // The session itself says why its running turn ended: evicted, or closed with the registry.
      if (entry.session !== undefined) yield* entry.session.close(reason === "shutdown" ? "closed" : "evicted")
      yield* Scope.close(entry.scope, Exit.void)
      yield* Metric.update(metrics.teardownDuration, Duration.millis(now() - t0))
      if (wasLive) yield* Metric.modify(metrics.sessions, -1)
    },
    (effect, entry, reason) =>
      effect.pipe(
        Effect.ensuring(Effect.sync(() => removeEntry(entry))),
        Effect.withSpan("SessionRegistry.teardown", {
          attributes: { "tether.session.id": entry.id, "tether.session.generation": entry.generation, reason }
        }),
        Effect.uninterruptible
      )
  )

  /**
   * Closes the entry's scope (the session's release: stdin EOF, close grace, the transport's teardown) in a fiber
   * of the registry, so that an interrupted caller never leaves a half-closed entry, and waits for it. With
   * `onlyIfEvictable` it does nothing (and returns false) for a session that is pinned or busy by now.
   */
  const closeEntry = (
    entry: Entry<E, A, TE>,
    reason: EvictionReason,
    onlyIfEvictable = false
  ): Effect.Effect<boolean> =>
    Effect.suspend(() => {
      if (entry.phase === "closing") return Effect.as(Deferred.await(entry.closed), true)
      if (onlyIfEvictable && !evictable(entry)) return Effect.succeed(false)
      const wasLive = entry.session !== undefined
      entry.phase = "closing"
      entry.closeReason = reason
      notify()
      return Effect.forkIn(teardown(entry, reason, wasLive), fibers).pipe(
        Effect.andThen(Deferred.await(entry.closed)),
        Effect.as(true)
      )
    })

  // --- watching sessions -----------------------------------------------------------------------------------------

  /** Removes a session that failed, retired or whose process exited, so the id's next use starts afresh. */
  const onGone = (entry: Entry<E, A, TE>) =>
    entry.phase === "live" || entry.phase === "draining" ? background(closeEntry(entry, "failed")) : Effect.void

  const isDead = (status: Status) => status === "failed" || status === "closed"

  /** Watches a turn sent through the registry until it ends: its metrics, its span, the entry's count of turns. */
  const trackTurn = Effect.fnUntraced(
    function*(_entry: Entry<E, A, TE>, turn: Turn<A, TE>) {
      const start = now()
      const exit = yield* turn.settled
      yield* Metric.update(metrics.turnDuration, Duration.millis(now() - start))
      yield* Effect.annotateCurrentSpan("tether.turn.outcome", Exit.isSuccess(exit) ? "completed" : "failed")
    },
    (effect, entry, turn) =>
      effect.pipe(
        Effect.withSpan("SessionRegistry.turn", {
          attributes: {
            "tether.session.id": entry.id,
            "tether.session.generation": entry.generation,
            "tether.turn.id": turn.id
          }
        }),
        // Closes over the entry alone (not the turn): the registry keeps entries anyway.
        Effect.ensuring(
          Effect.suspend(() => {
            entry.turns--
            touch(entry)
            notify()
            return Metric.modify(metrics.turnsInFlight, -1)
          })
        )
      )
  )

  // --- starting --------------------------------------------------------------------------------------------------

  const startEntry = Effect.fnUntraced(function*(entry: Entry<E, A, TE>, config: C) {
    const t0 = now()
    const exit = yield* options.acquire(entry.id, config).pipe(
      Scope.provide(entry.scope),
      inContext,
      Effect.withSpan("SessionRegistry.start", {
        attributes: { "tether.session.id": entry.id, "tether.session.generation": entry.generation }
      }),
      Effect.exit
    )
    entry.startFiber = undefined
    if (entry.phase !== "starting") return
    if (Exit.isFailure(exit)) {
      entry.phase = "closing"
      entry.closeReason = "failed"
      Deferred.doneUnsafe(entry.started, exit)
      yield* Scope.close(entry.scope, exit)
      removeEntry(entry)
      return
    }
    const session = exit.value
    entry.session = session
    entry.phase = "live"
    touch(entry)
    yield* Metric.modify(metrics.sessions, 1)
    yield* Metric.update(metrics.sessionStart, Duration.millis(now() - t0))
    yield* Effect.forkIn(Effect.andThen(session.awaitExit, Effect.suspend(() => onGone(entry))), entry.watchers)
    Deferred.doneUnsafe(entry.started, Exit.succeed(session))
    notify()
  })

  const createEntry = (id: string, fp: string): Entry<E, A, TE> => {
    const entryScope = Scope.forkUnsafe(sessions, "sequential")
    // Forked before the session is acquired into the same scope, so it is closed after the session's release.
    const watchers = Scope.forkUnsafe(entryScope, "parallel")
    const t = now()
    const entry: Entry<E, A, TE> = {
      id,
      generation: nextGeneration++,
      fingerprint: fp,
      scope: entryScope,
      watchers,
      createdAt: t,
      started: Deferred.makeUnsafe(),
      closed: Deferred.makeUnsafe(),
      phase: "starting",
      session: undefined,
      startFiber: undefined,
      closeReason: undefined,
      pins: 0,
      turns: 0,
      lastUsed: t
    }
    entries.set(id, entry)
    return entry
  }

  // --- lookups ---------------------------------------------------------------------------------------------------

  type Intent = "work" | "control"

  /** The entry for an id (and generation), whatever its phase. */
  const findEntry = (id: string, target: Target | undefined): Effect.Effect<Entry<E, A, TE>, LookupError> =>
    Effect.suspend((): Effect.Effect<Entry<E, A, TE>, LookupError> => {
      if (closed) return Effect.fail(new RegistryClosed())
      const generation = target?.generation
      const entry = entries.get(id)
      if (entry === undefined) {
        return Effect.fail(
          generation === undefined
            ? new SessionNotFound({ id })
            : new GenerationChanged({ id, expected: generation, current: null })
        )
      }
      if (generation !== undefined && entry.generation !== generation) {
        return Effect.fail(new GenerationChanged({ id, expected: generation, current: entry.generation }))
      }
      return Effect.succeed(entry)
    })

  /** The live entry for an id (and generation), waiting for one that is starting. */
  const resolve = (
    id: string,
    generation: number | undefined,
    intent: Intent
  ): Effect.Effect<Entry<E, A, TE>, LookupError> =>
    Effect.flatMap(findEntry(id, { generation }), (entry): Effect.Effect<Entry<E, A, TE>, LookupError> => {
      switch (entry.phase) {
        case "starting":
          return Deferred.await(entry.started).pipe(
            Effect.mapError(() => unavailable(entry)),
            Effect.andThen(resolve(id, entry.generation, intent))
          )
        case "closing":
          return Effect.fail(unavailable(entry))
        case "draining":
          if (intent === "work") return Effect.fail(unavailable(entry))
      }
      const session = entry.session!
      return Effect.flatMap(session.status, (status) => {
        if (!isDead(status)) return Effect.succeed(entry)
        return Effect.andThen(
          onGone(entry),
          Effect.fail(new SessionUnavailable({ status, reason: `session ${id} has ${status}` }))
        )
      })
    })

  /**
   * Pins a live entry until the caller's scope closes; false (and no pin) for an entry no longer live. The pin and
   * its release are registered together: an interruption in between would leak the pin.
   */
  const pin = (entry: Entry<E, A, TE>, callerScope: Scope.Scope): Effect.Effect<boolean> =>
    Effect.uninterruptible(Effect.suspend(() => {
      if (entry.phase !== "live") return Effect.succeed(false)
      entry.pins++
      touch(entry)
      return Effect.as(
        Scope.addFinalizer(
          callerScope,
          Effect.sync(() => {
            entry.pins--
            touch(entry)
            notify()
          })
        ),
        true
      )
    }))

  // --- operations --------------------------------------------------------------------------------------------------

  const send = Effect.fn("SessionRegistry.send")(function*(id: string, prompt: Prompt, sendOptions?: SendOptions) {
    const entry = yield* resolve(id, sendOptions?.generation, "work")
    yield* Effect.annotateCurrentSpan({ "tether.session.id": entry.id, "tether.session.generation": entry.generation })
    // Counted before the write so that no eviction can slip in between.
    entry.turns++
    touch(entry)
    const sent = yield* Effect.exit(entry.session!.send(prompt, sendOptions))
    if (Exit.isFailure(sent)) {
      entry.turns--
      notify()
      return yield* sent
    }
    const turn = sent.value
    yield* Metric.modify(metrics.turnsInFlight, 1)
    yield* Effect.forkIn(trackTurn(entry, turn), entry.watchers)
    // The session's own turn: when the registry closes the session under it, the session reports why ("evicted").
    return turn
  })

  const run = (id: string, prompt: Prompt, sendOptions?: SendOptions) =>
    Effect.flatMap(send(id, prompt, sendOptions), (turn) => turn.result)

  const interrupt = Effect.fn("SessionRegistry.interrupt")(function*(id: string, target?: Target) {
    const entry = yield* resolve(id, target?.generation, "control")
    yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
    touch(entry)
    return yield* entry.session!.interrupt
  })

  const answerPermission = Effect.fn("SessionRegistry.answerPermission")(function*(
    id: string,
    requestId: string,
    decision: Exclude<Permission.Decision, { _tag: "Defer" }>,
    target?: Target
  ) {
    const entry = yield* resolve(id, target?.generation, "control")
    yield* Effect.annotateCurrentSpan({
      "tether.session.id": id,
      "tether.session.generation": entry.generation,
      "tether.permission.request_id": requestId
    })
    touch(entry)
    return yield* entry.session!.answerPermission(requestId, decision)
  })

  const pendingPermissions = (id: string, target?: Target) =>
    Effect.flatMap(resolve(id, target?.generation, "control"), (entry) => entry.session!.pendingPermissions)

  const control = Effect.fn("SessionRegistry.control")(function*(id: string, request: unknown, target?: Target) {
    const entry = yield* resolve(id, target?.generation, "control")
    yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
    touch(entry)
    return yield* entry.session!.control(request)
  })

  const subscribe = (id: string, from: EventLog.From = "latest", target?: Target) =>
    Effect.flatMap(resolve(id, target?.generation, "control"), (entry) => entry.session!.subscribe(from))

  const snapshotOf = Effect.fnUntraced(function*(entry: Entry<E, A, TE>): Effect.fn.Return<Snapshot> {
    const session = entry.session
    let status: Status = "starting"
    let sessionId: string | undefined
    let exit: Transport.ExitStatus | undefined
    let pendingPermissions = 0
    if (session !== undefined) {
      status = yield* session.status
      sessionId = Option.getOrUndefined(yield* session.sessionId)
      const process = yield* session.process
      exit = process._tag === "Running" ? undefined : process.status
      pendingPermissions = (yield* session.pendingPermissions).length
    }
    return {
      id: entry.id,
      generation: entry.generation,
      fingerprint: entry.fingerprint,
      phase: entry.phase,
      status,
      pins: entry.pins,
      turnsInFlight: entry.turns,
      pendingPermissions,
      createdAt: entry.createdAt,
      lastUsedAt: entry.lastUsed,
      pid: session === undefined ? undefined : Option.getOrUndefined(session.pid),
      sessionId,
      exit
    }
  })

  const snapshot = (id: string): Effect.Effect<Snapshot, SessionNotFound> =>
    Effect.suspend(() => {
      const entry = entries.get(id)
      return entry === undefined ? Effect.fail(new SessionNotFound({ id })) : snapshotOf(entry)
    })

  const list: Effect.Effect<ReadonlyArray<Snapshot>> = Effect.suspend(() =>
    Effect.forEach([...entries.values()], snapshotOf)
  )

  /** Waits until `done()` holds, or the deadline passes (returns false). */
  const waitUntil = (done: () => boolean, deadline: number): Effect.Effect<boolean> =>
    Effect.suspend(() => {
      const signal = changed
      if (done()) return Effect.succeed(true)
      const remaining = deadline - now()
      if (remaining <= 0) return Effect.succeed(false)
      const wait = Number.isFinite(remaining)
        ? Effect.timeoutOption(Deferred.await(signal), Duration.millis(remaining))
        : Deferred.await(signal)
      return Effect.andThen(wait, waitUntil(done, deadline))
    })

  /** Waits for a draining entry's turn to end and its pins to be released (until the deadline), then closes it. */
  const drain = Effect.fnUntraced(function*(entry: Entry<E, A, TE>, deadline: number) {
    const drained = yield* waitUntil(
      () => entry.phase !== "draining" || (entry.pins === 0 && entry.turns === 0),
      deadline
    )
    yield* closeEntry(entry, drained ? "evicted" : "forced")
  })

  const evict = Effect.fn("SessionRegistry.evict")(function*(id: string, evictOptions?: EvictOptions) {
    const entry = yield* findEntry(id, evictOptions)
    yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
    if (entry.phase === "starting") yield* Effect.ignore(Deferred.await(entry.started))
    if (entry.phase === "closing") return yield* Deferred.await(entry.closed)
    entry.phase = "draining"
    notify()
    const timeout = decodeDuration(evictOptions?.timeout, Duration.infinity) ?? Duration.zero
    const deadline = Duration.isFinite(timeout) ? now() + Duration.toMillis(timeout) : Number.POSITIVE_INFINITY
    // The drain runs in the registry so that it completes (and the entry closes) even if this caller stops waiting.
    yield* background(drain(entry, deadline))
    yield* Deferred.await(entry.closed)
  })

  const forceEvict = Effect.fn("SessionRegistry.forceEvict")(function*(id: string, target?: Target) {
    const entry = yield* findEntry(id, target)
    yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
    yield* closeEntry(entry, "forced")
  })

  /** The least recently used session that can be evicted now, if any. */
  const findVictim: Effect.Effect<Entry<E, A, TE> | undefined> = Effect.gen(function*() {
    for (const entry of entries.values()) {
      if (!evictable(entry)) continue
      const status = yield* entry.session!.status
      if (!busyStatuses.has(status)) return entry
    }
    return undefined
  })

  const handleOf = (entry: Entry<E, A, TE>): Handle<A, TE> => {
    const target: Target = { generation: entry.generation }
    return {
      id: entry.id,
      generation: entry.generation,
      send: (prompt, sendOptions) => send(entry.id, prompt, { ...sendOptions, generation: entry.generation }),
      run: (prompt, sendOptions) => run(entry.id, prompt, { ...sendOptions, generation: entry.generation }),
      interrupt: interrupt(entry.id, target),
      answerPermission: (requestId, decision) => answerPermission(entry.id, requestId, decision, target),
      pendingPermissions: pendingPermissions(entry.id, target),
      control: (request) => control(entry.id, request, target),
      subscribe: (from) => subscribe(entry.id, from, target),
      snapshot: Effect.flatMap(findEntry(entry.id, target), snapshotOf)
    }
  }

  type Step =
    | { readonly _tag: "Closed" }
    | { readonly _tag: "Live"; readonly entry: Entry<E, A, TE> }
    | { readonly _tag: "Starting"; readonly entry: Entry<E, A, TE> }
    | { readonly _tag: "Leaving"; readonly entry: Entry<E, A, TE> }
    | { readonly _tag: "Conflict"; readonly entry: Entry<E, A, TE> }
    | { readonly _tag: "Full" }
    | { readonly _tag: "Created"; readonly entry: Entry<E, A, TE> }

  const getOrCreate = Effect.fn("SessionRegistry.getOrCreate")(function*(
    id: string,
    config: C,
    getOptions?: GetOptions
  ) {
    yield* Effect.annotateCurrentSpan("tether.session.id", id)
    const callerScope = yield* Scope.Scope
    const fp = options.fingerprint(config)
    const onConflict = getOptions?.onConflict ?? defaultOnConflict
    const admission = decodeDuration(getOptions?.admissionTimeout, settings.admission) ?? Duration.zero
    const startedAt = now()
    const deadline = startedAt + Duration.toMillis(admission)

    while (true) {
      const signal = changed
      // Decided in one synchronous step, so that the check for the id, the capacity check and the insertion
      // cannot interleave with another caller.
      const decide = Effect.sync((): Step => {
        if (closed) return { _tag: "Closed" }
        const existing = entries.get(id)
        if (existing !== undefined) {
          if (existing.phase === "draining" || existing.phase === "closing") return { _tag: "Leaving", entry: existing }
          if (existing.fingerprint !== fp) return { _tag: "Conflict", entry: existing }
          return existing.phase === "starting"
            ? { _tag: "Starting", entry: existing }
            : { _tag: "Live", entry: existing }
        }
        if (entries.size >= capacity) return { _tag: "Full" }
        return { _tag: "Created", entry: createEntry(id, fp) }
      })
      // An entry is created together with the fiber that starts it: a caller interrupted in between would leave
      // an entry "starting" forever, holding a slot.
      const step = yield* Effect.uninterruptible(
        Effect.flatMap(decide, (step): Effect.Effect<Step> =>
          step._tag === "Created"
            ? Effect.map(Effect.forkIn(startEntry(step.entry, config), fibers), (fiber): Step => {
              step.entry.startFiber = fiber
              return step
            })
            : Effect.succeed(step))
      )
      switch (step._tag) {
        case "Closed":
          return yield* new RegistryClosed()
        case "Leaving":
          yield* Deferred.await(step.entry.closed)
          continue
        case "Conflict": {
          if (onConflict === "fail") {
            return yield* new SessionConflict({
              id,
              generation: step.entry.generation,
              liveFingerprint: step.entry.fingerprint,
              requestedFingerprint: fp
            })
          }
          yield* closeEntry(step.entry, "replaced")
          continue
        }
        case "Created": {
          yield* Effect.annotateCurrentSpan("tether.session.generation", step.entry.generation)
          continue
        }
        case "Starting": {
          // A start that failed (or that the registry aborted) fails every caller waiting for it.
          const started = yield* Effect.exit(Deferred.await(step.entry.started))
          if (Exit.isFailure(started)) return yield* Effect.failCause(started.cause)
          continue
        }
        case "Live": {
          const entry = step.entry
          const status = yield* entry.session!.status
          if (isDead(status)) {
            yield* closeEntry(entry, "failed")
            continue
          }
          if (!(yield* pin(entry, callerScope))) continue
          yield* Effect.annotateCurrentSpan("tether.session.generation", entry.generation)
          return handleOf(entry)
        }
        case "Full": {
          const victim = yield* findVictim
          if (victim !== undefined) {
            yield* closeEntry(victim, "capacity", true)
            continue
          }
          const remaining = deadline - now()
          if (remaining <= 0) {
            return yield* new CapacityExceeded({ id, capacity, waitedMillis: now() - startedAt })
          }
          yield* Effect.timeoutOption(Deferred.await(signal), Duration.millis(remaining))
          continue
        }
      }
    }
  })

  const get = Effect.fn("SessionRegistry.get")(function*(id: string, target?: Target) {
    const callerScope = yield* Scope.Scope
    const entry = yield* resolve(id, target?.generation, "work")
    if (!(yield* pin(entry, callerScope))) return yield* unavailable(entry)
    return handleOf(entry)
  })

  // --- the idle sweep --------------------------------------------------------------------------------------------

  if (Number.isFinite(ttlMillis)) {
    // One fiber for the whole registry. The map is ordered by last use, so it looks at expired entries and stops
    // at the first idle one that has not expired; it then sleeps until that one expires (or a full TTL: any entry
    // used after now expires later than that).
    const sweep = Effect.gen(function*() {
      while (!closed) {
        const t = now()
        let wake = ttlMillis
        for (const entry of entries.values()) {
          if (!evictable(entry)) continue
          const expires = entry.lastUsed + ttlMillis
          if (expires > t) {
            wake = expires - t
            break
          }
          const status = yield* entry.session!.status
          if (isDead(status)) yield* background(closeEntry(entry, "failed"))
          else if (!busyStatuses.has(status)) yield* background(closeEntry(entry, "idle", true))
        }
        yield* Effect.sleep(Duration.millis(wake))
      }
    })
    yield* Effect.forkIn(sweep, fibers)
  }

  // --- release -----------------------------------------------------------------------------------------------------

  yield* Scope.addFinalizer(
    scope,
    Effect.suspend(() => {
      closed = true
      notify()
      return Effect.forEach([...entries.values()], (entry) => closeEntry(entry, "shutdown"), {
        concurrency: shutdownConcurrency,
        discard: true
      })
    }).pipe(Effect.withSpan("SessionRegistry.shutdown"))
  )

  const registry: Registry<C, E, A, TE> = {
    getOrCreate,
    get,
    send,
    run,
    interrupt,
    answerPermission,
    pendingPermissions,
    control,
    subscribe,
    snapshot,
    list,
    evict,
    forceEvict,
    size: Effect.sync(() => entries.size)
  }
  return registry
})

// ---------------------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------------------

/**
 * Reads {@link Settings} from Effect `Config`: `capacity`, `idleTimeToLive`, `onConflict`, `admissionTimeout`,
 * `shutdownConcurrency`, each optional. Nest it to read prefixed names.
 *
 * @example
 * ```ts
 * import { Config, ConfigProvider, Layer } from "effect"
 * import { SessionRegistry } from "@tether/core"
 *
 * // TETHER_REGISTRY_CAPACITY=32 TETHER_REGISTRY_IDLE_TIME_TO_LIVE="20 minutes"
 * const Registry = SessionRegistry.layerConfig(Config.nested(SessionRegistry.config, "tetherRegistry")).pipe(
 *   Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv().pipe(ConfigProvider.constantCase)))
 * )
 * ```
 *
 * @category configuration
 * @since 0.1.0
 */
export const config: Config.Config<Settings> = Config.all({
  capacity: Config.option(Config.Int("capacity")),
  idleTimeToLive: Config.option(Config.Duration("idleTimeToLive")),
  onConflict: Config.option(Config.Literals(["fail", "replace"], "onConflict")),
  admissionTimeout: Config.option(Config.Duration("admissionTimeout")),
  shutdownConcurrency: Config.option(Config.Int("shutdownConcurrency"))
}).pipe(
  Config.map((read): Settings => ({
    capacity: Option.getOrUndefined(read.capacity),
    idleTimeToLive: Option.getOrUndefined(read.idleTimeToLive),
    onConflict: Option.getOrUndefined(read.onConflict),
    admissionTimeout: Option.getOrUndefined(read.admissionTimeout),
    shutdownConcurrency: Option.getOrUndefined(read.shutdownConcurrency)
  }))
)

// ---------------------------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------------------------

/**
 * A registry service class made by {@link Service}: the tag, plus `layer(settings)` and `layerConfig(config)`.
 *
 * @category services
 * @since 0.1.0
 */
export interface ServiceClass<
  Self,
  Id extends string,
  C,
  E,
  R,
  A extends TurnResult = TurnResult,
  TE = ProviderTurnError
> extends Context.ServiceClass<Self, Id, Registry<C, E, A, TE>> {
  readonly kind: Kind<C, E, R, A, TE>
  /** The registry, built from the settings. Releasing the layer closes every session. */
  readonly layer: (settings?: Settings) => Layer.Layer<Self, InvalidConfig, R>
  /** The registry, built from settings read with {@link config} (or the `Config` given). */
  readonly layerConfig: (settings?: Config.Config<Settings>) => Layer.Layer<Self, Config.ConfigError | InvalidConfig, R>
}

/**
 * Makes a registry service for a {@link Kind}, the way `LayerMap.Service` makes a layer map service: the class is
 * the tag, and carries its layers.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClaudeSession, SessionRegistry } from "@tether/core"
 *
 * class Reviewers extends SessionRegistry.Service<Reviewers>()("app/Reviewers", ClaudeSession.kind) {}
 *
 * const ReviewersLive = Reviewers.layer({ capacity: 4, idleTimeToLive: "10 minutes" })
 *
 * const review = (pr: string) =>
 *   Effect.scoped(
 *     Effect.gen(function*() {
 *       const reviewers = yield* Reviewers
 *       const session = yield* reviewers.getOrCreate(`pr-${pr}`, { model: "opus" })
 *       return yield* session.run(`Review PR ${pr}`)
 *     })
 *   )
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export const Service =
  <Self>() =>
  <const Id extends string, C, E, R, A extends TurnResult = TurnResult, TE = ProviderTurnError>(
    id: Id,
    kind: Kind<C, E, R, A, TE>
  ): ServiceClass<Self, Id, C, E, R, A, TE> => {
    const Tag = Context.Service<Self, Registry<C, E, A, TE>>()(id)
    const layer = (settings: Settings = {}): Layer.Layer<Self, InvalidConfig, R> =>
      Layer.effect(Tag)(make<C, E, R, A, TE>({ ...settings, acquire: kind.acquire, fingerprint: kind.fingerprint }))
    const layerConfig = (
      settings: Config.Config<Settings> = config
    ): Layer.Layer<Self, Config.ConfigError | InvalidConfig, R> => Layer.unwrap(Effect.map(settings, layer))
    return Object.assign(Tag, { kind, layer, layerConfig })
  }
