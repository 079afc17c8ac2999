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
 * import { ClaudeRegistry } from "@tether/claude"
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
 * Several providers side by side: {@link kinds} makes one kind of several providers' kinds. Its configuration names
 * the provider and carries that provider's options, typed per provider; the fingerprint includes the provider, so
 * asking for a live id with another provider is a {@link SessionConflict} (or, with `onConflict: "replace"`, a new
 * generation with the other provider).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { ClaudeSession } from "@tether/claude"
 * import { CodexSession } from "@tether/codex"
 * import { SessionRegistry } from "@tether/core"
 * import { NodeTransport } from "@tether/transport-node"
 *
 * class Agents extends SessionRegistry.Service<Agents>()(
 *   "app/Agents",
 *   SessionRegistry.kinds({ claude: ClaudeSession.kind, codex: CodexSession.kind })
 * ) {}
 *
 * const program = Effect.gen(function*() {
 *   const agents = yield* Agents
 *   // Pinned until the scope closes; a Claude session and a Codex session, by id.
 *   const writer = yield* agents.getOrCreate("writer", { provider: "claude", options: { model: "opus" } })
 *   const reviewer = yield* agents.getOrCreate("reviewer", { provider: "codex", options: { model: "gpt-5" } })
 *   const draft = yield* writer.run("Fix the failing test")
 *   const review = yield* reviewer.run(`Review this change:\n${draft.text}`)
 *   console.log(review.text)
 * })
 *
 * program.pipe(
 *   Effect.scoped,
 *   Effect.provide(Agents.layer({ capacity: 16 }).pipe(Layer.provide(NodeTransport.layer())))
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as DormantStore from "./DormantStore.ts"
import type * as EventLog from "./EventLog.ts"
import type {
  CapacityExceeded,
  DormantNotFound,
  DormantStateCorrupt,
  DormantStoreFailed,
  GenerationChanged,
  RegistryClosed,
  RestoreFailed,
  SessionConflict,
  SessionNotFound
} from "./internal/registry/errors.ts"
import * as fingerprints from "./internal/registry/fingerprint.ts"
import * as internalKinds from "./internal/registry/kinds.ts"
import * as internalMetrics from "./internal/registry/metrics.ts"
import * as internal from "./internal/registry/registry.ts"
import type * as Permission from "./Permission.ts"
import type * as Session from "./Session.ts"
import type { SessionEvent, Status } from "./SessionEvent.ts"
import type { InvalidConfig, SessionUnavailable } from "./TetherError.ts"
import type * as TetherError from "./TetherError.ts"
import type * as Transport from "./Transport.ts"
import type { KnownProviderTurnError, Prompt, Turn, TurnError, TurnResult } from "./Turn.ts"

// ---------------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------------

// Defined in a leaf module, which the registry's implementation imports without importing this one.
export {
  /** @since 0.1.0 */
  CapacityExceeded,
  /** @since 0.1.0 */
  DormantNotFound,
  /** @since 0.1.0 */
  DormantStateCorrupt,
  /** @since 0.1.0 */
  DormantStoreFailed,
  /** @since 0.1.0 */
  GenerationChanged,
  /** @since 0.1.0 */
  RegistryClosed,
  /** @since 0.1.0 */
  RestoreFailed,
  /** @since 0.1.0 */
  SessionConflict,
  /** @since 0.1.0 */
  SessionNotFound
} from "./internal/registry/errors.ts"

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
export type AdmissionError =
  | SessionConflict
  | CapacityExceeded
  | SessionUnavailable
  | RegistryClosed
  | DormantStateCorrupt
  | DormantStoreFailed
  | RestoreFailed

/**
 * What `send` and `run` by id can fail with when they wake a dormant conversation (see `Settings.dormancy`): its
 * state is unreadable, the store failed, the CLI did not resume it, no slot was free, or its configuration changed.
 *
 * @category errors
 * @since 0.1.0
 */
export type WakeError =
  | DormantStateCorrupt
  | DormantStoreFailed
  | RestoreFailed
  | CapacityExceeded
  | SessionConflict
  | SessionUnavailable

// ---------------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------------

/**
 * How to start sessions of one provider: `acquire` starts the session for an id in the scope it is given (the
 * registry gives each session its own), `fingerprint` reduces a configuration to a string; two configurations
 * with the same fingerprint are the same session as far as the registry is concerned.
 *
 * `C` is the configuration, `E` what starting a session can fail with, `R` what starting one requires (the
 * `Transport`), `A` and `TE` the provider's turn result and turn errors. A provider's module exports its kind
 * (`ClaudeSession.kind`); {@link kinds} makes one kind of several providers' kinds.
 *
 * @category models
 * @since 0.1.0
 */
export interface Kind<C, E, R, A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
  readonly acquire: (id: string, config: C) => Effect.Effect<Session.Session<A, TE>, E, Scope.Scope | R>
  readonly fingerprint: (config: C) => string
  /** How the kind's CLIs are kept warm (see {@link Warm}); by default, pooled by their configuration's shape. */
  readonly warm?: Warm<C, A, TE> | undefined
}

/**
 * How a kind's warm CLIs are pooled and handed out (see `Registry.warm`).
 *
 * - `key`: configurations with the same key share a pool. It must change with everything the CLI's command line
 *   and environment depend on, and with where the configuration holds functions (`SessionRegistry.shape` does
 *   both); it leaves out what `adapt` can change after start.
 * - `adapt`: makes a warm CLI started with `from` serve `to` (same key), before it is handed out: Claude sends
 *   `set_model` and `set_permission_mode` when they differ. A failure (a control refused or unanswered) discards the warm CLI and the conversation
 *   starts cold.
 *
 * - `prime` (optional): work a started CLI would otherwise do on its first turn, done before it joins its pool, off
 *   the conversation's first token, given the CLI and the pool's configuration: Claude asks `get_context_usage`
 *   (as the configuration's `warmPrime` says), which builds the system prompt, the tools' definitions and the model
 *   client that the first request needs. It must not touch the conversation. A failure is logged and the CLI joins
 *   its pool anyway (the hand-out's checks still apply).
 *
 * The configuration's functions (a permission policy, hooks, tool handlers) need no `adapt`: the registry starts a
 * warm CLI with a configuration whose functions call, at call time, those of the configuration it is handed to.
 *
 * @category models
 * @since 0.1.0
 */
export interface Warm<C, A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
  readonly key: (config: C) => string
  readonly adapt: (session: Session.Session<A, TE>, from: C, to: C) => Effect.Effect<void, Session.ControlError>
  readonly prime?:
    | ((session: Session.Session<A, TE>, config: C) => Effect.Effect<void, Session.ControlError>)
    | undefined
}

/**
 * A warm pool, as `Registry.pools` reports it.
 *
 * @category models
 * @since 0.1.0
 */
export interface PoolSnapshot {
  /** The pool key (see {@link Warm}). */
  readonly key: string
  /** How many warm CLIs the host asked for. */
  readonly target: number
  /** Started, initialized CLIs waiting for a conversation. */
  readonly ready: number
  /** CLIs starting for the pool. */
  readonly starting: number
}

/**
 * Types read off a {@link Kind}.
 *
 * @category models
 * @since 0.1.0
 */
export declare namespace Kind {
  /**
   * Any kind (a constraint).
   *
   * @category models
   * @since 0.1.0
   */
  export type Any = Kind<any, any, any, any, any>

  /**
   * A kind's configuration.
   *
   * @category models
   * @since 0.1.0
   */
  export type Config<K extends Any> = K extends Kind<infer C, infer _E, infer _R, infer _A, infer _TE> ? C : never

  /**
   * What starting a kind's session can fail with.
   *
   * @category models
   * @since 0.1.0
   */
  export type StartError<K extends Any> = K extends Kind<infer _C, infer E, infer _R, infer _A, infer _TE> ? E
    : never

  /**
   * What starting a kind's session requires.
   *
   * @category models
   * @since 0.1.0
   */
  export type Services<K extends Any> = K extends Kind<infer _C, infer _E, infer R, infer _A, infer _TE> ? R
    : never

  /**
   * The turn result of a kind's sessions.
   *
   * @category models
   * @since 0.1.0
   */
  export type Result<K extends Any> = K extends Kind<infer _C, infer _E, infer _R, infer A, infer _TE> ? A
    : never

  /**
   * The provider's own turn errors of a kind's sessions.
   *
   * @category models
   * @since 0.1.0
   */
  export type TurnError<K extends Any> = K extends Kind<infer _C, infer _E, infer _R, infer _A, infer TE> ? TE
    : never
}

/**
 * The configuration of a registry made with {@link kinds}: the provider's name (a key of `Kinds`) and that
 * provider's options, typed per provider. For `kinds({ claude: ClaudeSession.kind, codex })` it is
 * `{ provider: "claude"; options: ClaudeSession.Options } | { provider: "codex"; options: <codex's options> }`.
 *
 * @category models
 * @since 0.1.0
 */
export type KindsConfig<Kinds extends Record<string, Kind.Any>> = {
  readonly [P in keyof Kinds & string]: { readonly provider: P; readonly options: Kind.Config<Kinds[P]> }
}[keyof Kinds & string]

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
 * | `dormancy` | `false` | keep conversations dormant instead of closing them (needs a `DormantStore` in context) |
 * | `warmRefillDelay` | 500 ms | after a conversation takes a warm CLI, no warm CLI starts for this long (`0`: at once) |
 *
 * With `dormancy`, a conversation idle for `idleTimeToLive`, evicted to make room, or live when the registry is
 * released goes dormant: its CLI is closed, its conversation state is kept by the `DormantStore`, and the next
 * `getOrCreate`, `send` or `run` for its id resumes it (see `Registry.wake`). `evict`, `forceEvict`, a replacement
 * and a failure end a conversation for good. Capacity counts live CLIs only; dormant conversations are bounded by
 * the store's disk.
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
  readonly dormancy?: boolean | undefined
  /**
   * How long the warm pools wait to refill after a conversation took a warm CLI: the CLI just handed out does its
   * first turn's work (Claude builds its system prompt and sends its first request) without a CLI start competing
   * for the CPU, which on a small machine delays its first token. Each hand-out extends the wait.
   */
  readonly warmRefillDelay?: Duration.Input | undefined
}

/**
 * A warm CLI handed to {@link Adoption}'s `adopt`: the session, and `discard`, which closes it now (an adoption that
 * finds the conversation cannot take it, and starts the session another way).
 *
 * @category models
 * @since 0.1.0
 */
export interface WarmCli<A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
  readonly session: Session.Session<A, TE>
  readonly discard: Effect.Effect<void>
}

/**
 * For a registry whose `acquire` does more than start a CLI (a runner of `@tether/cluster` begins the session's
 * generation in its database and restores its conversation first): how its warm CLIs start, and how one becomes the
 * session of an id. Without it, a warm CLI starts with `acquire` (its id `warm:<pool key>`) and is handed out as it
 * is.
 *
 * - `start`: starts a warm CLI for the pool of `key` with the pool's configuration, in the scope it is given (closed
 *   when the CLI leaves its pool unused, or after the session it becomes has closed).
 * - `adopt`: makes a warm CLI that a new conversation took (checked alive and unused, bound and adapted) the session
 *   of `id`, and returns that session. It runs in a scope of the session that closes after the warm CLI's own: what
 *   it registers there (a last save of the conversation) runs once the CLI has exited. A failure fails the session's
 *   start, as `acquire`'s would; an adoption that finds the conversation cannot take a new CLI (it has one to resume)
 *   calls `discard` and starts the session itself.
 * - `resumes` (optional): whether the next start of `id` resumes a conversation, asked at its admission: such a
 *   start takes no warm CLI (and counts no miss), like a dormant conversation's wake.
 *
 * @category models
 * @since 0.1.0
 */
export interface Adoption<C, E, R, A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
  readonly start: (key: string, config: C) => Effect.Effect<Session.Session<A, TE>, E, Scope.Scope | R>
  readonly adopt: (
    id: string,
    config: C,
    warm: WarmCli<A, TE>
  ) => Effect.Effect<Session.Session<A, TE>, E, Scope.Scope | R>
  readonly resumes?: ((id: string) => boolean) | undefined
}

/**
 * Options of {@link make}: a {@link Kind} and the {@link Settings}, and, for a registry whose `acquire` does more than
 * start a CLI, how its warm CLIs start and are adopted ({@link Adoption}).
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<C, E, R, A extends TurnResult = TurnResult, TE = KnownProviderTurnError>
  extends Kind<C, E, R, A, TE>, Settings
{
  readonly adoption?: Adoption<C, E, R, A, TE> | undefined
}

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
export interface Handle<A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
  readonly id: string
  readonly generation: number
  /**
   * Sends a prompt; returns the turn as soon as it is written (or queued). A local registry never fails it with
   * `SessionRetired`; a cluster binding does when the runner that had the prompt is lost (delivery uncertain: see
   * `ClusterRegistry.isRunnerLost`).
   */
  readonly send: (
    prompt: Prompt,
    options?: Session.SendOptions
  ) => Effect.Effect<Turn<A, TE>, Session.SendError | LookupError | TetherError.SessionRetired>
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
export interface Registry<C, E, A extends TurnResult = TurnResult, TE = KnownProviderTurnError> {
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
  /**
   * Sends a prompt to the id's live session; returns the turn as soon as it is written (or queued). A local
   * registry never fails it with `SessionRetired`; a cluster binding does when the runner that had the prompt is
   * lost: whether the CLI ran it is unknown (`deliveryUncertain`, see `ClusterRegistry.isRunnerLost`); sending it
   * again with the same `promptId` (`ClusterRegistry.SendOptions`) is answered by the session's ledger, never run
   * twice.
   */
  readonly send: (
    id: string,
    prompt: Prompt,
    options?: SendOptions
  ) => Effect.Effect<Turn<A, TE>, Session.SendError | LookupError | TetherError.SessionRetired | WakeError>
  readonly run: (
    id: string,
    prompt: Prompt,
    options?: SendOptions
  ) => Effect.Effect<A, Session.SendError | TurnError | TE | LookupError | WakeError>
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
  /**
   * A local registry fails only with `SessionNotFound`; a registry across machines (`@tether/cluster`) also with
   * `SessionUnavailable` when it cannot reach the session's runner or its database.
   */
  readonly snapshot: (id: string) => Effect.Effect<Snapshot, SessionNotFound | SessionUnavailable>
  /**
   * Snapshots of every session, least recently used first. Never fails locally; across machines, with
   * `SessionUnavailable` when the cluster's database cannot be read.
   */
  readonly list: Effect.Effect<ReadonlyArray<Snapshot>, SessionUnavailable>
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
  /**
   * Sessions in the registry (starting, live, draining and closing). Never fails locally; across machines, with
   * `SessionUnavailable` when the cluster's database cannot be read.
   */
  readonly size: Effect.Effect<number, SessionUnavailable>
  /**
   * Keeps `size` started, initialized CLIs ready for new conversations whose configuration has the pool key of
   * `config` (see {@link Warm}); `0` empties the pool (its CLIs are closed before this returns). A `getOrCreate`
   * that starts a session takes a warm CLI of its key instead of spawning one, binds it to its configuration and
   * adapts what the protocol can change (Claude's model and permission mode); the pool refills in the background.
   *
   * Warm CLIs count against `capacity`: a pool fills only into free slots (never while an admission waits for
   * one), and a full registry closes a warm CLI before it evicts any conversation. A warm CLI that died (its
   * process exited) is dropped, one is handed out at most once, and never to a configuration of another key.
   * Starts that fail back off (1 s, doubling, at most a minute). On a cluster each runner keeps its own pools (its
   * settings name them): a node's registry reaches its own runner's, and a node without a runner fails with
   * `InvalidConfig`.
   */
  readonly warm: (config: C, size: number) => Effect.Effect<void, InvalidConfig | RegistryClosed>
  /** The warm pools (on a cluster, the node's own runner's; none on a node without a runner). */
  readonly pools: Effect.Effect<ReadonlyArray<PoolSnapshot>>
  /**
   * The dormant conversations (see `Settings.dormancy`), and those whose state cannot be read. Empty without
   * dormancy.
   */
  readonly dormant: Effect.Effect<ReadonlyArray<DormantStore.Listing>, DormantStoreFailed>
  /**
   * Resumes a dormant conversation now, ahead of its next message: its CLI starts and resumes the conversation, and
   * the id is live (unpinned) when this returns. `config` is needed when this registry does not know the
   * conversation's configuration (it went dormant before a host restart); a configuration with another fingerprint
   * is a {@link SessionConflict}. An id that is live already succeeds at once.
   */
  readonly wake: (
    id: string,
    config?: C
  ) => Effect.Effect<void, E | AdmissionError | DormantNotFound | InvalidConfig>
  /** Forgets a dormant conversation: its state is deleted. A live one is not dormant: `DormantNotFound`. */
  readonly deleteDormant: (id: string) => Effect.Effect<void, DormantNotFound | DormantStoreFailed>
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
 * | `tether_registry_warm_hits` | counter: sessions started from a warm CLI |
 * | `tether_registry_warm_misses` | counter: sessions started cold while their key has a pool |
 * | `tether_registry_warm_discards` | counter, attribute `reason` (`died`, `adapt-failed`, `capacity`, `surplus`, `shutdown`, `failed-start`) |
 * | `tether_registry_warm_ready` | gauge: warm CLIs ready |
 * | `tether_registry_dormant` | counter: conversations that went dormant |
 * | `tether_registry_wakes` | counter, attribute `outcome` (`resumed`, `failed`) |
 *
 * How long permission requests wait is recorded by every session, in a registry or not (`Session.metrics`).
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics: typeof internalMetrics.metrics = internalMetrics.metrics

// ---------------------------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * A fingerprint of plain configuration data: a hash of its canonical JSON (keys sorted; functions and `undefined`
 * ignored; `Redacted` values and `Duration`s by value). Two configurations that differ only in functions (a
 * permission policy, hook callbacks) have the same fingerprint.
 *
 * @category fingerprints
 * @since 0.1.0
 */
export const fingerprint: (config: unknown) => string = fingerprints.fingerprint

/**
 * The fingerprint of a configuration's shape: its data, as {@link fingerprint}, and where it holds functions (not
 * which ones). The default pool key of warm CLIs (see {@link Warm}).
 *
 * @category fingerprints
 * @since 0.1.0
 */
export const shape: (config: unknown) => string = fingerprints.shape

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
 * import { ClaudeSession } from "@tether/claude"
 * import { SessionRegistry } from "@tether/core"
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
export const make: <C, E, R, A extends TurnResult = TurnResult, TE = KnownProviderTurnError>(
  options: Options<C, E, R, A, TE>
) => Effect.Effect<Registry<C, E, A, TE>, InvalidConfig, Scope.Scope | R> = internal.make

/**
 * One kind made of several providers' kinds, so that one registry holds sessions of every provider side by side.
 * Its configuration names the provider and carries that provider's options, typed per provider
 * ({@link KindsConfig}); its fingerprint is the provider's name, a colon and the provider's own fingerprint of the
 * options, so the same id asked for with another provider is a {@link SessionConflict} (or a replacement). A
 * provider the kind does not know (a configuration read from outside) fails to start with `InvalidConfig`. The
 * turn results and errors of its sessions are the union of the providers'.
 *
 * @example
 * ```ts
 * import { ClaudeSession } from "@tether/claude"
 * import { CodexSession } from "@tether/codex"
 * import { SessionRegistry } from "@tether/core"
 *
 * const agents = SessionRegistry.kinds({ claude: ClaudeSession.kind, codex: CodexSession.kind })
 * agents.fingerprint({ provider: "codex", options: { model: "gpt-5" } }) // "codex:…"
 *
 * class Agents extends SessionRegistry.Service<Agents>()("app/Agents", agents) {}
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const kinds: <Kinds extends Record<string, Kind.Any>>(kinds: Kinds) => Kind<
  KindsConfig<Kinds>,
  Kind.StartError<Kinds[keyof Kinds]> | InvalidConfig,
  Kind.Services<Kinds[keyof Kinds]>,
  Kind.Result<Kinds[keyof Kinds]>,
  Kind.TurnError<Kinds[keyof Kinds]>
> = internalKinds.kinds

// ---------------------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------------------

/**
 * Reads {@link Settings} from Effect `Config`: `capacity`, `idleTimeToLive`, `onConflict`, `admissionTimeout`,
 * `shutdownConcurrency`, `dormancy`, `warmRefillDelay`, each optional. Nest it to read prefixed names.
 *
 * Gotcha: a `Config` value is built when its module loads, so importing `SessionRegistry` (or `ClaudeRegistry`) loads
 * `effect/Config` (and the `effect/Schema` it imports), whether or not the host reads Config. Sessions themselves do
 * not import this module.
 *
 * @example
 * ```ts
 * import { Config, ConfigProvider, Layer } from "effect"
 * import { ClaudeRegistry } from "@tether/claude"
 * import { SessionRegistry } from "@tether/core"
 *
 * // TETHER_REGISTRY_CAPACITY=32 TETHER_REGISTRY_IDLE_TIME_TO_LIVE="20 minutes"
 * const Registry = ClaudeRegistry.layerConfig(Config.nested(SessionRegistry.config, "tetherRegistry")).pipe(
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
  shutdownConcurrency: Config.option(Config.Int("shutdownConcurrency")),
  dormancy: Config.option(Config.Boolean("dormancy")),
  warmRefillDelay: Config.option(Config.Duration("warmRefillDelay"))
}).pipe(
  Config.map((read): Settings => ({
    capacity: Option.getOrUndefined(read.capacity),
    idleTimeToLive: Option.getOrUndefined(read.idleTimeToLive),
    onConflict: Option.getOrUndefined(read.onConflict),
    admissionTimeout: Option.getOrUndefined(read.admissionTimeout),
    shutdownConcurrency: Option.getOrUndefined(read.shutdownConcurrency),
    dormancy: Option.getOrUndefined(read.dormancy),
    warmRefillDelay: Option.getOrUndefined(read.warmRefillDelay)
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
  TE = KnownProviderTurnError
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
 * import { ClaudeSession } from "@tether/claude"
 * import { SessionRegistry } from "@tether/core"
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
  <const Id extends string, C, E, R, A extends TurnResult = TurnResult, TE = KnownProviderTurnError>(
    id: Id,
    kind: Kind<C, E, R, A, TE>
  ): ServiceClass<Self, Id, C, E, R, A, TE> => {
    const Tag = Context.Service<Self, Registry<C, E, A, TE>>()(id)
    const layer = (settings: Settings = {}): Layer.Layer<Self, InvalidConfig, R> =>
      Layer.effect(Tag)(
        make<C, E, R, A, TE>({ ...settings, acquire: kind.acquire, fingerprint: kind.fingerprint, warm: kind.warm })
      )
    const layerConfig = (
      settings: Config.Config<Settings> = config
    ): Layer.Layer<Self, Config.ConfigError | InvalidConfig, R> => Layer.unwrap(Effect.map(settings, layer))
    return Object.assign(Tag, { kind, layer, layerConfig })
  }
