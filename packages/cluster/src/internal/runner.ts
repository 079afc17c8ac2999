/**
 * A runner's side of the cluster registry: the session entity's handlers over the runner's own `SessionRegistry`.
 *
 * The runner keeps an ordinary single-node registry (so admission, pins, idle TTL, capacity with LRU eviction,
 * bounded shutdown and whole-tree teardown hold per runner, as they do in one process) whose kind wraps the host's:
 * starting a session for an id begins the session's next generation in the database, restores the CLI's
 * conversation files into a directory of the runner, and starts the host's session there, resuming the
 * conversation (`Session.Conversation`). Each live session (an *incarnation*) is recorded: after every turn its
 * conversation files, its ledger entries and (when asked) its events are saved in one fenced transaction; when it
 * closes for any reason it is saved one last time and becomes dormant, to be restored by whichever runner gets the
 * next message for its id.
 *
 * Sends are deduplicated by the turn ledger: a prompt id is recorded for a generation before the prompt is
 * written, so a send that the cluster delivers again (it re-sends volatile requests whose runner died) finds the
 * prompt already dispatched and is answered with the turn's saved outcome, or, if the runner died before the turn
 * ended, with a `SessionRetired` whose delivery is uncertain. It never reaches a CLI twice.
 *
 * @internal
 */
import {
  type EventLog,
  Permission,
  Session,
  type SessionEvent,
  SessionRegistry,
  TetherError,
  type Turn
} from "@tether/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Entity from "effect/cluster/Entity"
import type * as RunnerAddress from "effect/cluster/RunnerAddress"
import type * as ShardId from "effect/cluster/ShardId"
import * as Sharding from "effect/cluster/Sharding"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Files from "./files.ts"
import type * as Protocol from "./protocol.ts"
import * as Store from "./store.ts"
import * as Unsaved from "./unsaved.ts"
import * as Wire from "./wire.ts"

// ---------------------------------------------------------------------------------------------------------------
// Settings and metrics
// ---------------------------------------------------------------------------------------------------------------

/** A runner's settings: its registry's, and the cluster's own. */
export interface Settings extends SessionRegistry.Settings {
  readonly stateDirectory?: string | undefined
  readonly drainTimeout?: Duration.Input | undefined
  readonly durableEvents?: boolean | undefined
  readonly tablePrefix?: string | undefined
  readonly entityIdleTime?: Duration.Input | undefined
  readonly finalSaveTimeout?: Duration.Input | undefined
  readonly unsavedRetention?: Duration.Input | undefined
}

/** The cluster registry's metrics; every runner records them with its address as the `runner` attribute. */
export const metrics = {
  sessions: Metric.gauge("tether_cluster_sessions", { description: "Sessions live on this runner" }),
  restores: Metric.counter("tether_cluster_restores", {
    description: "Generations started, by how the previous one ended (new, clean, lost, reset)",
    incremental: true
  }),
  saveDuration: Metric.timer("tether_cluster_save_duration", { description: "Saving a session after a turn" }),
  savedBytes: Metric.counter("tether_cluster_saved_bytes", {
    description: "Conversation bytes written to the database",
    incremental: true
  }),
  saveFailures: Metric.counter("tether_cluster_save_failures", {
    description: "Saves that failed (the database was unreachable, or another runner owns the session)",
    incremental: true
  }),
  redeliveries: Metric.counter("tether_cluster_redeliveries", {
    description: "Sends the cluster delivered again, by what they found in the ledger (joined, completed, lost)",
    incremental: true
  }),
  drainDuration: Metric.timer("tether_cluster_drain_duration", {
    description: "Releasing a session when its entity stops (a runner shutting down, a shard moving)"
  })
} as const

// ---------------------------------------------------------------------------------------------------------------
// Incarnations
// ---------------------------------------------------------------------------------------------------------------

interface TrackedTurn<A, TE> {
  readonly promptId: string
  readonly turn: Turn.Turn<A & Turn.TurnResult, TE>
  readonly saved: Deferred.Deferred<void>
}

/** One generation of a session, live on this runner. */
interface Incarnation<A, TE> {
  readonly id: string
  readonly generation: number
  readonly base: number
  readonly directory: string
  readonly durable: boolean
  readonly previous: Store.Begun["previous"]
  session: Session.Session<A & Turn.TurnResult, TE> | undefined
  localGeneration: number | undefined
  conversationId: string | undefined
  tracked: { readonly [path: string]: Files.Tracked }
  ceiling: number
  /** The cluster seq of the last event the recorder read. */
  lastSeq: number
  /** Durable events not saved yet. */
  pending: Array<Store.StoredEvent>
  /** Turns that ended and are not in the ledger yet. */
  ended: Array<{ readonly turnId: string; readonly state: "completed" | "failed"; readonly outcome: unknown }>
  readonly turns: Map<string, TrackedTurn<A, TE>>
  readonly prompts: Map<string, string>
  /**
   * Prompts claimed in the ledger whose send to the session has not returned yet: a second delivery of one waits
   * for it here instead of finding it dispatched with no turn (and reporting a running turn as lost).
   */
  readonly sending: Map<string, Deferred.Deferred<TrackedTurn<A, TE> | undefined>>
  readonly saving: Semaphore.Semaphore
  /** The last save has begun: no save after it may mark the generation live again. */
  ending: boolean
  /** A save failed: a fiber saves again until one succeeds, or the generation ends. */
  retrying: boolean
  recorder: Fiber.Fiber<void> | undefined
  readonly closed: Deferred.Deferred<void>
}

/** How many finished turns an incarnation remembers in memory (older ones are answered from the ledger). */
const rememberedTurns = 256

// ---------------------------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------------------------

export interface Options<C, CE, E, R, A extends Turn.TurnResult, TE> {
  readonly name: string
  readonly entity: Protocol.SessionEntity<C, CE>
  readonly kind: SessionRegistry.Kind<C, E, R, A, TE>
  readonly config: Schema.Codec<C, CE>
  readonly settings: Settings
}

const safeName = (id: string): string =>
  `${id.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 48)}-${
    Crypto.createHash("sha256").update(id).digest("hex").slice(0, 12)
  }`

const unavailable = (reason: string) => new TetherError.SessionUnavailable({ status: "unknown", reason })

const lostTurn = (
  id: string,
  turn: { readonly generation: number; readonly promptId: string; readonly turnId: string | null }
) =>
  new TetherError.SessionRetired({
    reason: `runner lost: generation ${turn.generation} of session ${id} stopped before turn ${
      turn.turnId ?? turn.promptId
    } ended, and whether its CLI ran the prompt is unknown`,
    acknowledged: false
  })

const isTerminal = (event: SessionEvent.SessionEvent) => event._tag === "TurnCompleted" || event._tag === "TurnFailed"

/**
 * The layer that registers the session entity on this runner: the runner's registry, its store, and the entity's
 * handlers. Releasing it drains: every session entity stops (its running turn finishes within the cluster's
 * `entityTerminationTimeout`, its session is saved and released), then the registry closes what is left.
 */
export const layer = <C, CE, E, R, A extends Turn.TurnResult, TE>(
  options: Options<C, CE, E, R, A, TE>
) =>
  Layer.unwrap(Effect.gen(function*() {
    const runner = yield* makeRunner(options)
    return options.entity.toLayer(
      Effect.gen(function*() {
        runner.locate(yield* Entity.CurrentRunnerAddress)
        const address = yield* Entity.CurrentAddress
        const id = address.entityId as string
        yield* Effect.forkScoped(runner.keepAliveWhileLive(id))
        yield* Effect.addFinalizer(() => runner.release(id))
        return runner.handlers(id, address.shardId)
      }),
      {
        concurrency: "unbounded",
        ...(options.settings.entityIdleTime === undefined ? {} : { maxIdleTime: options.settings.entityIdleTime }),
        spanAttributes: { "tether.registry": options.name }
      }
    )
  }))

const makeRunner = Effect.fnUntraced(function*<C, CE, E, R, A extends Turn.TurnResult, TE>(
  options: Options<C, CE, E, R, A, TE>
) {
  // The runner's address, learned from the first entity that starts here (every session starts through one).
  let address = "unknown"
  let attributes = { runner: address, registry: options.name }
  let sessionsGauge = Metric.withAttributes(metrics.sessions, attributes)
  const locate = (runner: RunnerAddress.RunnerAddress) => {
    if (address !== "unknown") return
    address = `${runner.host}:${runner.port}`
    attributes = { runner: address, registry: options.name }
    sessionsGauge = Metric.withAttributes(metrics.sessions, attributes)
  }
  const settings = options.settings
  const kind = options.kind
  const problems: Array<string> = []
  // Checked here, so that a duration that does not read is InvalidConfig at start, not a defect at the first drain.
  // A drain may take no time (close at once, without waiting for the running turn); the last save needs some.
  const duration = (
    name: string,
    input: Duration.Input | undefined,
    fallback: Duration.Duration,
    zero: "allowed" | "refused"
  ) => {
    if (input === undefined) return fallback
    const decoded = Duration.fromInput(input)
    const valid = Option.isSome(decoded) && !(typeof input === "number" && Number.isNaN(input)) &&
      (Duration.isPositive(decoded.value) || (zero === "allowed" && Duration.isZero(decoded.value)))
    if (valid) return decoded.value
    const shown = Duration.isDuration(input)
      ? Duration.format(input)
      : typeof input === "object"
      ? JSON.stringify(input)
      : String(input)
    problems.push(`${name} must be a ${zero === "allowed" ? "non-negative" : "positive"} duration, got ${shown}`)
    return fallback
  }
  const drainTimeout = duration("drainTimeout", settings.drainTimeout, Duration.seconds(10), "allowed")
  const finalSaveTimeout = duration("finalSaveTimeout", settings.finalSaveTimeout, Duration.seconds(30), "refused")
  const unsavedRetention = duration("unsavedRetention", settings.unsavedRetention, Duration.minutes(10), "refused")
  if (problems.length > 0) return yield* new TetherError.InvalidConfig({ problems })
  const defaultDurable = settings.durableEvents ?? false
  // The runner's own directory under the configured one (or the system's temporary directory), named after this
  // process: what a runner killed without its finalizers left there is swept by the next runner that starts there.
  const stateRoot = settings.stateDirectory ?? Os.tmpdir()
  yield* Files.sweepStale(stateRoot)
  const stateDirectory = Files.own(stateRoot)
  const runnerScope = yield* Effect.scope
  const sharding = yield* Sharding.Sharding
  yield* Effect.addFinalizer(() =>
    Effect.ignore(Files.remove(stateDirectory), { log: "Warn" }).pipe(
      Effect.ensuring(Effect.sync(() => Files.disown(stateDirectory)))
    )
  )
  const store = yield* Store.make({ entityType: options.entity.type, prefix: settings.tablePrefix ?? "tether" })
  // A configuration that does not encode, or a stored one that no longer decodes (its schema changed in a
  // deploy), fails the start with a typed error, not a defect.
  const encodeConfig = (config: C) =>
    Schema.encodeEffect(Schema.toCodecJson(options.config))(config).pipe(
      Effect.mapError((error) => unavailable(`the session's configuration does not encode: ${error.message}`))
    )
  const decodeConfig = (id: string, stored: unknown) =>
    Schema.decodeUnknownEffect(Schema.toCodecJson(options.config))(stored).pipe(
      Effect.mapError((error) => unavailable(`the stored configuration of ${id} does not decode: ${error.message}`))
    )

  const incarnations = new Map<string, Incarnation<A, TE>>()
  /** What the next start of an id is asked to do (set by `ensure` around `getOrCreate`). */
  const starts = new Map<string, { readonly reset: boolean; readonly durable: boolean }>()
  const waiters = new Map<string, Deferred.Deferred<void>>()

  const live = (id: string) => {
    const waiter = waiters.get(id)
    if (waiter !== undefined) {
      waiters.delete(id)
      Deferred.doneUnsafe(waiter, Exit.void)
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  // What could not be saved
  // ------------------------------------------------------------------------------------------------------------

  // Kept, and written when the database answers. Made before the registry, so that its last attempt (at release)
  // runs after the registry has closed, and tried to save, every session.
  const unsaved = yield* Unsaved.make({
    store,
    retention: unsavedRetention,
    writeTimeout: finalSaveTimeout,
    scope: runnerScope
  })

  // ------------------------------------------------------------------------------------------------------------
  // Saving
  // ------------------------------------------------------------------------------------------------------------

  /**
   * Saves what the incarnation did since its last save (fenced by its generation), with a few retries: `saved`,
   * `fenced` (another runner owns the session now: this generation must not go on; its turns' outcomes still go to
   * the ledger) or `failed` (the database is unreachable: saved again later, see {@link retryLater}). What the last
   * save of a generation could not write, even when it is cut short by `finalSaveTimeout`, is kept (`unsaved.ts`)
   * and written when the database returns.
   */
  const save = (inc: Incarnation<A, TE>, final: boolean) =>
    inc.saving.withPermits(1)(
      Effect.gen(function*() {
        // A save that waited behind the last one must not mark the generation live again.
        if (inc.ending && !final) return "saved" as const
        const t0 = yield* Clock.currentTimeMillis
        if (inc.session !== undefined && inc.conversationId === undefined) {
          inc.conversationId = Option.getOrUndefined(yield* inc.session.sessionId)
        }
        const collected = inc.conversationId === undefined
          ? { changes: [], tracked: inc.tracked }
          : yield* Files.collect(inc.directory, inc.conversationId, inc.tracked)
        const events = inc.pending
        const ended = inc.ended
        const turns = ended.flatMap((turn) => {
          const promptId = inc.turns.get(turn.turnId)?.promptId
          return promptId === undefined ? [] : [{ promptId, ...turn }]
        })
        const payload: Store.Save = {
          conversationId: inc.conversationId,
          changes: collected.changes,
          tracked: collected.tracked,
          events,
          seq: final ? inc.lastSeq : Math.max(inc.base, events.length > 0 ? events[events.length - 1].seq : inc.base),
          turns,
          final
        }
        const completions = turns.map((turn) => ({ ...turn, generation: inc.generation }))
        let written = false
        const exit = yield* store.save(inc.id, inc.generation, payload).pipe(
          Effect.retry({
            while: (error) => error._tag !== "Fenced",
            times: 4,
            schedule: Schedule.exponential("100 millis")
          }),
          Effect.tap(() =>
            Effect.sync(() => {
              written = true
            })
          ),
          Effect.exit,
          // The last save, cut short (by `finalSaveTimeout`) or failed: kept, to be written when the database returns.
          Effect.onExit(() =>
            final && !written
              ? unsaved.keep({ id: inc.id, generation: inc.generation, save: payload, completions })
              : Effect.void
          )
        )
        if (Exit.isFailure(exit)) {
          yield* Metric.update(Metric.withAttributes(metrics.saveFailures, attributes), 1)
          yield* Effect.logWarning(`could not save session ${inc.id} (generation ${inc.generation})`, exit.cause)
          const error = Cause.findErrorOption(exit.cause)
          if (Option.isNone(error) || error.value._tag !== "Fenced") return "failed" as const
          // Another runner owns the session now: this generation must not go on. What its turns did is still true.
          if (!final && completions.length > 0) {
            const completed = yield* Effect.exit(store.complete(inc.id, completions))
            if (Exit.isFailure(completed)) {
              yield* unsaved.keep({ id: inc.id, generation: inc.generation, save: undefined, completions })
            }
            inc.ended = inc.ended.slice(ended.length)
          }
          if (inc.session !== undefined && !final) {
            yield* inc.session.retire("another runner owns this session now")
          }
          return "fenced" as const
        }
        inc.tracked = collected.tracked
        inc.pending = inc.pending.slice(events.length)
        inc.ended = inc.ended.slice(ended.length)
        const t1 = yield* Clock.currentTimeMillis
        yield* Metric.update(Metric.withAttributes(metrics.saveDuration, attributes), Duration.millis(t1 - t0))
        const bytes = collected.changes.reduce((total, change) => total + change.data.length, 0)
        if (bytes > 0) {
          yield* Metric.update(Metric.withAttributes(metrics.savedBytes, attributes), bytes)
        }
        return "saved" as const
      })
    ).pipe(
      Effect.withSpan("ClusterRegistry.save", {
        attributes: {
          "tether.session.id": inc.id,
          "tether.session.generation": inc.generation,
          "tether.runner": address,
          "tether.save.final": final
        }
      })
    )

  /**
   * Saves the incarnation again, every second, after a save failed (the database was unreachable), until one
   * succeeds or its generation ends (whose last save takes over what is unsaved): a turn that completed reaches the
   * ledger when the database returns, not only with the session's next turn.
   */
  const retryLater = (inc: Incarnation<A, TE>) =>
    Effect.suspend(() => {
      if (inc.retrying) return Effect.void
      inc.retrying = true
      const attempt: Effect.Effect<void> = Effect.gen(function*() {
        yield* Effect.sleep(Unsaved.retryInterval)
        if (inc.ending) return
        if ((yield* save(inc, false)) === "failed") return yield* attempt
      })
      return Effect.asVoid(Effect.forkIn(
        Effect.ensuring(
          attempt,
          Effect.sync(() => {
            inc.retrying = false
          })
        ),
        runnerScope
      ))
    })

  /** Settles the saves of the turns that ended, whatever the save did: their waiters must not wait forever. */
  const settleSaved = (inc: Incarnation<A, TE>, turnIds: ReadonlyArray<string>) =>
    Effect.sync(() => {
      for (const turnId of turnIds) {
        const tracked = inc.turns.get(turnId)
        if (tracked !== undefined) Deferred.doneUnsafe(tracked.saved, Exit.void)
      }
    })

  /** Reads the incarnation's events for as long as its session lives: keeps the durable ones, saves after turns. */
  const record = (inc: Incarnation<A, TE>) =>
    Effect.scoped(Effect.gen(function*() {
      const deliveries = yield* inc.session!.subscribe("start")
      yield* Stream.runForEachArray(deliveries, (chunk) =>
        Effect.gen(function*() {
          const endedTurns: Array<string> = []
          for (const delivery of chunk) {
            if (delivery._tag === "Lag") {
              const from = inc.base + delivery.resumeSeq - delivery.missed
              if (inc.durable) {
                inc.pending.push({
                  seq: from,
                  generation: inc.generation,
                  turnId: undefined,
                  event: undefined,
                  gapTo: inc.base + delivery.resumeSeq - 1
                })
              }
              inc.lastSeq = inc.base + delivery.resumeSeq - 1
              continue
            }
            const seq = inc.base + delivery.seq
            inc.lastSeq = seq
            const event = delivery.event
            if (inc.durable) {
              inc.pending.push({
                seq,
                generation: inc.generation,
                turnId: event.turnId,
                event: Wire.eventToJson(inc.generation, event)
              })
            }
            if (isTerminal(event) && event.turnId !== undefined) {
              inc.ended.push(
                event._tag === "TurnCompleted"
                  ? { turnId: event.turnId, state: "completed", outcome: { ok: true, result: event.result } }
                  : {
                    turnId: event.turnId,
                    state: "failed",
                    outcome: { ok: false, error: Wire.errorToJson((event as { readonly error: unknown }).error) }
                  }
              )
              endedTurns.push(event.turnId)
            }
          }
          if (inc.lastSeq > inc.ceiling - Store.seqBlock / 2) {
            inc.ceiling = inc.ceiling + Store.seqBlock
            yield* Effect.ignore(store.extend(inc.id, inc.generation, inc.ceiling))
          }
          if (endedTurns.length > 0) {
            if ((yield* save(inc, false)) === "failed") yield* retryLater(inc)
            yield* settleSaved(inc, endedTurns)
          }
        }))
    }))

  // ------------------------------------------------------------------------------------------------------------
  // Starting and ending generations
  // ------------------------------------------------------------------------------------------------------------

  /**
   * Ends an incarnation (its session has closed): the last save (bounded by `finalSaveTimeout`: a database that
   * hangs must not hang a release, an eviction or a drain; what it did not save is recovered as a lost generation),
   * then the directory goes. Whatever the save and the removal do, the incarnation is forgotten and `closed` is
   * signalled: the entity's keep-alive and an `Evict` wait on it.
   */
  const finalize = (inc: Incarnation<A, TE>) =>
    Effect.gen(function*() {
      inc.ending = true
      if (inc.recorder !== undefined) {
        // The session's log ended with it; the recorder is reading its last events.
        const done = yield* Effect.timeoutOption(Fiber.await(inc.recorder), Duration.seconds(5))
        if (Option.isNone(done)) yield* Fiber.interrupt(inc.recorder)
      }
      const saved = yield* Effect.timeoutOption(save(inc, true), finalSaveTimeout)
      if (Option.isNone(saved)) {
        yield* Metric.update(Metric.withAttributes(metrics.saveFailures, attributes), 1)
        yield* Effect.logWarning(
          `the last save of session ${inc.id} (generation ${inc.generation}) took longer than ${
            Duration.format(finalSaveTimeout)
          }: given up`
        )
      }
    }).pipe(
      Effect.ensuring(Effect.suspend(() => settleSaved(inc, [...inc.turns.keys()]))),
      Effect.ensuring(Effect.ignore(Files.remove(inc.directory), { log: "Warn" })),
      Effect.ensuring(Effect.suspend(() => {
        if (incarnations.get(inc.id) === inc) incarnations.delete(inc.id)
        Deferred.doneUnsafe(inc.closed, Exit.void)
        return Metric.update(sessionsGauge, incarnations.size)
      })),
      Effect.uninterruptible
    )

  /**
   * The kind the runner's registry starts sessions with: the next generation in the database, the conversation
   * restored, the host's session started there (resuming it), the incarnation recorded.
   */
  const acquire = (id: string, config: C) =>
    Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const start = starts.get(id) ?? { reset: false, durable: defaultDurable }
      const encoded = yield* encodeConfig(config)
      // What an earlier generation of this id could not save goes first: its last save (or its turns' outcomes).
      yield* unsaved.flush(id)
      const begun = yield* store.begin(id, {
        runner: address,
        fingerprint: kind.fingerprint(config),
        config: encoded,
        durable: start.durable,
        reset: start.reset
      }).pipe(Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`)))
      const directory = Path.join(stateDirectory, `${safeName(id)}-g${begun.generation}`)
      yield* Files.restore(directory, begun.files).pipe(
        Effect.mapError((error) => unavailable(`the runner could not restore the conversation: ${error.message}`))
      )
      const inc: Incarnation<A, TE> = {
        id,
        generation: begun.generation,
        base: begun.base,
        directory,
        durable: begun.durable,
        previous: begun.previous,
        session: undefined,
        localGeneration: undefined,
        conversationId: begun.conversationId,
        tracked: begun.tracked,
        ceiling: begun.ceiling,
        lastSeq: begun.base,
        pending: [],
        ended: [],
        turns: new Map(),
        prompts: new Map(),
        sending: new Map(),
        saving: Semaphore.makeUnsafe(1),
        ending: false,
        retrying: false,
        recorder: undefined,
        closed: Deferred.makeUnsafe()
      }
      // Registered before the session is acquired into the same scope: it runs after the session has closed.
      yield* Scope.addFinalizer(scope, finalize(inc))
      inc.session = yield* kind.acquire(id, config).pipe(
        Effect.provideService(Session.Conversation, { directory, resume: begun.conversationId })
      )
      inc.recorder = yield* Effect.forkIn(
        Effect.catchCause(record(inc), (cause) => Effect.logWarning(`the recorder of session ${id} stopped`, cause)),
        runnerScope
      )
      incarnations.set(id, inc)
      live(id)
      yield* Metric.update(sessionsGauge, incarnations.size)
      yield* Metric.update(Metric.withAttributes(metrics.restores, { ...attributes, previous: begun.previous }), 1)
      return inc.session
    }).pipe(
      Effect.withSpan("ClusterRegistry.restore", {
        attributes: { "tether.session.id": id, "tether.runner": address }
      })
    )

  const registry = yield* SessionRegistry.make<C, E | TetherError.SessionUnavailable, R, A, TE>({
    ...settings,
    acquire,
    fingerprint: kind.fingerprint
  })

  // ------------------------------------------------------------------------------------------------------------
  // Finding the live incarnation
  // ------------------------------------------------------------------------------------------------------------

  /**
   * A local registry's error with its local generations replaced by the cluster's. A local session replaced under
   * the same cluster generation (the incarnation that replaces it is not recorded yet) has no live generation to
   * name: it is not reported as the generation it is no longer.
   */
  const translate = (inc: Incarnation<A, TE> | undefined, expected: number | undefined) => <X>(error: X): X => {
    if (error instanceof SessionRegistry.GenerationChanged) {
      const was = expected ?? inc?.generation ?? error.expected
      const current = incarnations.get(error.id)?.generation
      return new SessionRegistry.GenerationChanged({
        id: error.id,
        expected: was,
        current: current === undefined || current === was ? null : current
      }) as X
    }
    if (error instanceof SessionRegistry.SessionConflict) {
      return new SessionRegistry.SessionConflict({ ...error, generation: inc?.generation ?? error.generation }) as X
    }
    return error
  }

  const moved = (id: string, expected: number) => {
    const current = incarnations.get(id)?.generation
    return new SessionRegistry.GenerationChanged({
      id,
      expected,
      current: current === undefined || current === expected ? null : current
    })
  }

  /**
   * The live incarnation of an id, restoring it (with the configuration given, or the one the database has) when
   * there is none and `restore` says so, and a handle on it pinned in the caller's scope. A call that names a
   * generation never restores: the generation it meant is gone.
   */
  const ensure = (id: string, request: {
    readonly config?: C | undefined
    readonly onConflict?: SessionRegistry.ConflictPolicy | undefined
    readonly admissionTimeout?: Duration.Input | undefined
    readonly durable?: boolean | undefined
    readonly generation?: number | undefined
  }) =>
    Effect.gen(function*() {
      const current = incarnations.get(id)
      if (current !== undefined && request.generation !== undefined && current.generation !== request.generation) {
        return yield* moved(id, request.generation)
      }
      if (current === undefined && request.generation !== undefined) {
        return yield* moved(id, request.generation)
      }
      let config = request.config
      let reset = false
      let durable = request.durable ?? defaultDurable
      if (current === undefined) {
        const found = yield* store.read(id).pipe(
          Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
        )
        if (config === undefined) {
          if (found === undefined || found.state === "evicted") {
            return yield* new SessionRegistry.SessionNotFound({ id })
          }
          config = yield* decodeConfig(id, found.config)
        } else if (found !== undefined && found.state !== "evicted") {
          const requested = kind.fingerprint(config)
          if (found.fingerprint !== requested) {
            if ((request.onConflict ?? settings.onConflict ?? "fail") === "fail") {
              return yield* new SessionRegistry.SessionConflict({
                id,
                generation: found.generation,
                liveFingerprint: found.fingerprint,
                requestedFingerprint: requested
              })
            }
            reset = true
          }
        }
        if (found !== undefined && found.state !== "evicted" && !reset) durable = found.durable
      }
      const getOptions = {
        ...(request.onConflict === undefined ? {} : { onConflict: request.onConflict }),
        ...(request.admissionTimeout === undefined ? {} : { admissionTimeout: request.admissionTimeout })
      }
      if (config !== undefined && current !== undefined && request.onConflict === "replace") reset = true
      starts.set(id, { reset, durable })
      const opening: Effect.Effect<
        SessionRegistry.Handle<A, TE>,
        E | TetherError.SessionUnavailable | SessionRegistry.AdmissionError | SessionRegistry.LookupError,
        Scope.Scope
      > = config === undefined
        ? registry.get(id, { generation: current!.localGeneration })
        : registry.getOrCreate(id, config, getOptions)
      const handle = yield* opening.pipe(
        Effect.mapError(translate(current, request.generation)),
        Effect.ensuring(Effect.sync(() => starts.delete(id)))
      )
      const inc = incarnations.get(id)
      if (inc === undefined) return yield* unavailable(`session ${id} closed while it was being opened`)
      inc.localGeneration ??= handle.generation
      if (inc.localGeneration !== handle.generation) {
        return yield* unavailable(`session ${id} was replaced while it was being opened`)
      }
      return { inc, handle }
    })

  /** The live incarnation, fenced by a generation, without restoring anything. */
  const liveOnly = (id: string, generation: number | undefined) =>
    Effect.suspend(() => {
      const inc = incarnations.get(id)
      if (generation !== undefined && inc?.generation !== generation) return Effect.fail(moved(id, generation))
      return Effect.succeed(inc)
    })

  // ------------------------------------------------------------------------------------------------------------
  // Turns
  // ------------------------------------------------------------------------------------------------------------

  const remember = (inc: Incarnation<A, TE>, promptId: string, turn: Turn.Turn<A & Turn.TurnResult, TE>) => {
    const tracked: TrackedTurn<A, TE> = { promptId, turn, saved: Deferred.makeUnsafe() }
    inc.turns.set(turn.id, tracked)
    inc.prompts.set(promptId, turn.id)
    if (inc.turns.size > rememberedTurns) {
      for (const [turnId, old] of inc.turns) {
        if (inc.turns.size <= rememberedTurns) break
        if (!Deferred.isDoneUnsafe(old.saved)) continue
        inc.turns.delete(turnId)
        inc.prompts.delete(old.promptId)
      }
    }
    return tracked
  }

  /** A turn's outcome once its save is done (bounded: a database outage delays the reply, never loses it). */
  const outcome = (tracked: TrackedTurn<A, TE>, settled: boolean) =>
    Effect.gen(function*() {
      const exit = settled ? yield* tracked.turn.settled : yield* Effect.exit(tracked.turn.result)
      yield* Effect.timeoutOption(Deferred.await(tracked.saved), Duration.seconds(15))
      return yield* exit
    })

  /** A turn the ledger has: its saved outcome, or the loss of the runner that had it. */
  const fromLedger = (id: string, turn: Store.LedgerTurn) => {
    if (turn.state === "dispatched") return Effect.fail(lostTurn(id, turn))
    const saved = turn.outcome as { readonly ok: boolean; readonly result?: unknown; readonly error?: unknown }
    return saved.ok ? Effect.succeed(saved.result) : Effect.fail(Wire.errorFromJson<Wire.Known>(saved.error))
  }

  const readTurn = (id: string, promptId: string) =>
    store.turn(id, promptId).pipe(
      Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
    )

  const send = (id: string, payload: {
    readonly promptId: string
    readonly prompt: Turn.Prompt
    readonly queue?: boolean | undefined
    readonly interruptOnCancel?: boolean | undefined
    readonly generation?: number | undefined
    readonly wait: boolean
  }) =>
    Effect.scoped(Effect.gen(function*() {
      const { inc } = yield* ensure(id, { generation: payload.generation })
      const claim = yield* store.claim(id, payload.promptId, inc.generation).pipe(
        Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
      )
      // The database's live generation, not this runner's (which is the one fenced off).
      if (claim._tag === "Fenced") {
        return yield* new SessionRegistry.GenerationChanged({ id, expected: inc.generation, current: claim.current })
      }
      let tracked: TrackedTurn<A, TE> | undefined
      if (claim._tag === "Existing") {
        const inFlight = inc.sending.get(payload.promptId)
        if (inFlight !== undefined) {
          // The first delivery is still sending the prompt: its turn is this one, or nothing was written.
          const first = yield* Deferred.await(inFlight)
          if (first === undefined) {
            return yield* unavailable(`the first delivery of prompt ${payload.promptId} was refused`)
          }
        }
        const turnId = inc.prompts.get(payload.promptId)
        tracked = turnId === undefined ? undefined : inc.turns.get(turnId)
        const outcome = tracked !== undefined ? "joined" : claim.turn.state === "dispatched" ? "lost" : "completed"
        yield* Metric.update(Metric.withAttributes(metrics.redeliveries, { ...attributes, outcome }), 1)
        if (tracked === undefined) {
          const turn = claim.turn
          if (!payload.wait) {
            return { turnId: turn.turnId ?? payload.promptId, generation: turn.generation }
          }
          const result = yield* fromLedger(id, turn)
          return { turnId: turn.turnId ?? payload.promptId, generation: turn.generation, result }
        }
      } else {
        // Recorded before the send: a second delivery that claims meanwhile waits for this one's turn.
        const inFlight = Deferred.makeUnsafe<TrackedTurn<A, TE> | undefined>()
        inc.sending.set(payload.promptId, inFlight)
        const settle = (turn: TrackedTurn<A, TE> | undefined) =>
          Effect.sync(() => {
            if (inc.sending.get(payload.promptId) === inFlight) inc.sending.delete(payload.promptId)
            Deferred.doneUnsafe(inFlight, Exit.succeed(turn))
          })
        const sent = yield* Effect.exit(
          registry.send(id, payload.prompt, {
            queue: payload.queue,
            interruptOnCancel: payload.interruptOnCancel,
            generation: inc.localGeneration
          })
        ).pipe(Effect.onInterrupt(() => settle(undefined)))
        if (Exit.isFailure(sent)) {
          // Refused before anything was written: the prompt may be sent again under the same id.
          yield* Effect.ignore(store.unclaim(id, payload.promptId, inc.generation))
          yield* settle(undefined)
          return yield* Effect.failCause(Cause.map(sent.cause, translate(inc, payload.generation)))
        }
        tracked = remember(inc, payload.promptId, sent.value)
        yield* settle(tracked)
      }
      if (!payload.wait) return { turnId: tracked.turn.id, generation: inc.generation }
      const result = yield* outcome(tracked, false)
      return { turnId: tracked.turn.id, generation: inc.generation, result }
    })).pipe(
      Effect.withSpan("ClusterRegistry.send", {
        attributes: { "tether.session.id": id, "tether.runner": address, "tether.prompt.id": payload.promptId }
      })
    )

  /** The turn a client's handle names, live here, or `undefined` (then the ledger answers). */
  const trackedTurn = (id: string, ref: { readonly turnId: string; readonly generation: number }) => {
    const inc = incarnations.get(id)
    return inc !== undefined && inc.generation === ref.generation ? inc.turns.get(ref.turnId) : undefined
  }

  const awaitTurn = (id: string, ref: {
    readonly promptId: string
    readonly turnId: string
    readonly generation: number
    readonly settled: boolean
  }) =>
    Effect.suspend((): Effect.Effect<unknown, TE | Turn.TurnError | Wire.Known> => {
      const tracked = trackedTurn(id, ref)
      if (tracked !== undefined) return outcome(tracked, ref.settled)
      return Effect.flatMap(readTurn(id, ref.promptId), (turn) =>
        turn === undefined
          ? Effect.fail(moved(id, ref.generation))
          : fromLedger(id, turn))
    })

  // ------------------------------------------------------------------------------------------------------------
  // Events
  // ------------------------------------------------------------------------------------------------------------

  const toDelivery =
    (inc: Incarnation<A, TE>) => (delivery: EventLog.Delivery<SessionEvent.SessionEvent>): Wire.Delivery =>
      delivery._tag === "Event"
        ? { _tag: "Event", seq: inc.base + delivery.seq, event: Wire.eventToJson(inc.generation, delivery.event) }
        : { _tag: "Lag", missed: delivery.missed, resumeSeq: inc.base + delivery.resumeSeq, reason: "behind" }

  /** Saved events after `after`, page by page, as deliveries; and the seq the pages reached. */
  const savedEvents = (id: string, after: number) =>
    Stream.paginate(after, (cursor) =>
      Effect.map(
        // A database that cannot be read is not events lost: the subscriber gets a typed, retryable failure.
        store.eventsAfter(id, cursor, 500).pipe(
          Effect.mapError((error) => unavailable(`the saved events of ${id} cannot be read: ${error.message}`))
        ),
        (
          rows
        ): readonly [ReadonlyArray<Store.StoredEvent>, Option.Option<number>] => [
          rows,
          rows.length < 500 ? Option.none() : Option.some(rows[rows.length - 1].gapTo ?? rows[rows.length - 1].seq)
        ]
      ))

  /**
   * A subscription in the cluster's seqs: a `Position` first, then the saved events after `after` (durable
   * sessions), a lag marker for what is neither saved nor in the live session's ring, then the live events.
   */
  const subscribe = (id: string, from: typeof Protocol.From.Type, generation: number | undefined) =>
    Stream.unwrap(Effect.gen(function*() {
      // Restored if need be, but not pinned: a subscription never keeps a session from its idle TTL (as in one
      // process); its stream ends when the session closes.
      const { inc } = yield* Effect.scoped(ensure(id, { generation }))
      const session = inc.session!
      let cursor = from === "latest"
        ? inc.base + (yield* session.latestSeq)
        : from === "start"
        ? 0
        : from.after
      const position: Wire.Delivery = { _tag: "Position", seq: cursor, generation: inc.generation }
      const before: Array<Wire.Delivery> = []
      if (cursor < inc.base && inc.durable) {
        // The saved events of earlier generations (and of this one, if already saved), and the gaps between them.
        const rows = yield* Stream.runCollect(savedEvents(id, cursor))
        for (const row of rows) {
          if (row.gapTo !== undefined) {
            if (row.gapTo > cursor) {
              before.push({ _tag: "Lag", missed: row.gapTo - cursor, resumeSeq: row.gapTo + 1, reason: "lost" })
              cursor = row.gapTo
            }
          } else if (row.seq > cursor) {
            if (row.seq > cursor + 1) {
              before.push({ _tag: "Lag", missed: row.seq - cursor - 1, resumeSeq: row.seq, reason: "lost" })
            }
            before.push({ _tag: "Event", seq: row.seq, event: row.event })
            cursor = row.seq
          }
        }
      }
      if (cursor < inc.base) {
        before.push({
          _tag: "Lag",
          missed: inc.base - cursor,
          resumeSeq: inc.base + 1,
          reason: inc.durable ? "lost" : "not-durable"
        })
        cursor = inc.base
      }
      const live = yield* session.subscribe({ after: cursor - inc.base })
      return Stream.make(position, ...before).pipe(
        Stream.concat(Stream.map(live, toDelivery(inc))),
        Stream.concat(Stream.succeed<Wire.Delivery>({ _tag: "End" }))
      )
    }))

  /**
   * A turn's events: live, from the turn itself; a turn of an earlier generation, from the saved events of a
   * durable session; else (its runner died before saving them) a gap.
   */
  const turnEvents = (
    id: string,
    ref: { readonly promptId: string; readonly turnId: string; readonly generation: number }
  ) =>
    Stream.unwrap(Effect.gen(function*() {
      const inc = incarnations.get(id)
      const tracked = trackedTurn(id, ref)
      if (inc !== undefined && tracked !== undefined) {
        return tracked.turn.events.pipe(
          Stream.map(toDelivery(inc)),
          Stream.concat(Stream.succeed<Wire.Delivery>({ _tag: "End" }))
        )
      }
      const saved = yield* store.turnEvents(id, ref.turnId).pipe(
        Effect.mapError((error) =>
          unavailable(`the saved events of turn ${ref.turnId} cannot be read: ${error.message}`)
        )
      )
      const deliveries: Array<Wire.Delivery> = saved.map((row) => ({ _tag: "Event", seq: row.seq, event: row.event }))
      const ended = saved.some((row) => isTerminal(row.event as SessionEvent.SessionEvent))
      if (!ended) {
        const last = saved.length === 0 ? 0 : saved[saved.length - 1].seq
        deliveries.push({ _tag: "Lag", missed: 1, resumeSeq: last + 2, reason: "lost" })
      }
      deliveries.push({ _tag: "End" })
      return Stream.fromIterable(deliveries)
    }))

  // ------------------------------------------------------------------------------------------------------------
  // The entity
  // ------------------------------------------------------------------------------------------------------------

  const snapshot = (id: string) =>
    Effect.gen(function*() {
      const inc = incarnations.get(id)
      if (inc === undefined) return yield* new SessionRegistry.SessionNotFound({ id })
      const local = yield* registry.snapshot(id)
      return { ...local, generation: inc.generation, runner: address }
    })

  /** Releases the session of an entity that stops (shard moved, runner draining): graceful, bounded. */
  const release = (id: string) =>
    Effect.suspend(() => {
      if (!incarnations.has(id)) return Effect.void
      return registry.evict(id, { timeout: drainTimeout }).pipe(
        Effect.ignore,
        Effect.timed,
        Effect.flatMap(([took]) => Metric.update(Metric.withAttributes(metrics.drainDuration, attributes), took)),
        Effect.withSpan("ClusterRegistry.drain", { attributes: { "tether.session.id": id, "tether.runner": address } })
      )
    })

  /**
   * Keeps the entity resident while its session lives here (an entity that the cluster stops releases its
   * session, so the session and its entity move together).
   */
  const keepAliveWhileLive = (id: string) =>
    Effect.forever(Effect.gen(function*() {
      let inc = incarnations.get(id)
      if (inc === undefined) {
        let waiter = waiters.get(id)
        if (waiter === undefined) {
          waiter = Deferred.makeUnsafe<void>()
          waiters.set(id, waiter)
        }
        yield* Deferred.await(waiter)
        inc = incarnations.get(id)
        if (inc === undefined) return
      }
      yield* Entity.keepAlive(true)
      yield* Deferred.await(inc.closed)
      yield* Entity.keepAlive(false)
    }))

  const wire = <A2, E2, R2>(effect: Effect.Effect<A2, E2, R2>) => Effect.mapError(effect, Wire.toWire)

  /**
   * Runs the work of a request that waits for a turn in a fiber of the runner, not of the entity's handler. A handler
   * is interrupted when its caller stops waiting (the client's interrupt) and when its runner tears the entity down
   * (its shard moves, `Sharding` deems its shard lock storage unhealthy, the runner shuts down). Only the caller's
   * cancels the work (and so, through the local registry, the turn, as in one process); a teardown leaves it
   * running, so that the turn finishes within the entity's drain and its outcome reaches the ledger, where the
   * caller's retry with the same prompt id finds it. Its shard is no longer this runner's in every teardown
   * (`hasShardId` is false once the locks are in doubt or the runner shuts down), and still is when a caller
   * interrupts.
   */
  const detached = <A2, E2>(shardId: ShardId.ShardId, work: Effect.Effect<A2, E2>) =>
    Effect.flatMap(
      Effect.forkIn(work, runnerScope, { startImmediately: true }),
      (fiber) =>
        Effect.onInterrupt(
          Fiber.join(fiber),
          () => sharding.hasShardId(shardId) ? Fiber.interrupt(fiber) : Effect.void
        )
    )

  const handlers = (id: string, shardId: ShardId.ShardId) =>
    options.entity.of({
      Open: (request) =>
        Stream.unwrap(Effect.gen(function*() {
          const { inc } = yield* ensure(id, {
            config: request.payload.config,
            onConflict: request.payload.onConflict,
            admissionTimeout: request.payload.admissionTimeoutMillis === undefined
              ? undefined
              : request.payload.admissionTimeoutMillis === "Infinity"
              ? Duration.infinity
              : Duration.millis(request.payload.admissionTimeoutMillis),
            durable: request.payload.durableEvents,
            generation: request.payload.generation
          })
          const fingerprint = request.payload.config === undefined ? "" : kind.fingerprint(request.payload.config)
          return Stream.concat(Stream.succeed({ generation: inc.generation, fingerprint }), Stream.never)
        })).pipe(Stream.mapError(Wire.toWire)),
      Send: (request) => wire(detached(shardId, send(id, request.payload as Parameters<typeof send>[1]))),
      Await: (request) => wire(detached(shardId, awaitTurn(id, request.payload))),
      TurnEvents: (request) => turnEvents(id, request.payload),
      TurnPhase: (request) =>
        wire(Effect.suspend(() => {
          const tracked = trackedTurn(id, request.payload)
          if (tracked !== undefined) return tracked.turn.phase
          return Effect.map(
            readTurn(id, request.payload.promptId),
            (turn): Turn.Phase => turn?.state === "completed" ? "completed" : "failed"
          )
        })),
      Interrupt: (request) =>
        wire(Effect.gen(function*() {
          const inc = yield* liveOnly(id, request.payload.generation)
          if (inc === undefined) return "no-active-turn" as const
          if (request.payload.turnId !== undefined) {
            const tracked = inc.turns.get(request.payload.turnId)
            if (tracked === undefined) return "completed-first" as const
            const before = yield* tracked.turn.phase
            if (before === "completed" || before === "failed" || before === "cancelled") {
              return "completed-first" as const
            }
            yield* tracked.turn.interrupt
            return "interrupted" as const
          }
          return yield* registry.interrupt(id, { generation: inc.localGeneration }).pipe(
            Effect.mapError(translate(inc, request.payload.generation))
          )
        })),
      AnswerPermission: (request) =>
        wire(Effect.gen(function*() {
          const named = Wire.unqualify(request.payload.requestId)
          const inc = yield* liveOnly(id, named.generation ?? request.payload.generation)
          if (inc === undefined) {
            return yield* new Permission.PermissionNotFound({ requestId: request.payload.requestId })
          }
          yield* registry.answerPermission(id, named.requestId, Wire.verdictFromWire(request.payload.decision), {
            generation: inc.localGeneration
          }).pipe(Effect.mapError(translate(inc, request.payload.generation)))
        })),
      PendingPermissions: (request) =>
        wire(Effect.gen(function*() {
          const inc = yield* liveOnly(id, request.payload.generation)
          if (inc === undefined) return []
          const pending = yield* registry.pendingPermissions(id, { generation: inc.localGeneration }).pipe(
            Effect.mapError(translate(inc, request.payload.generation))
          )
          return pending.map((permission) => Wire.qualifyRequest(inc.generation, permission))
        })),
      Control: (request) =>
        wire(Effect.scoped(Effect.gen(function*() {
          const { inc } = yield* ensure(id, { generation: request.payload.generation })
          return yield* registry.control(id, request.payload.request, { generation: inc.localGeneration }).pipe(
            Effect.mapError(translate(inc, request.payload.generation))
          )
        }))),
      Subscribe: (request) =>
        subscribe(id, request.payload.from, request.payload.generation).pipe(Stream.mapError(Wire.toWire)),
      Snapshot: () => wire(snapshot(id)),
      Evict: (request) =>
        wire(Effect.gen(function*() {
          const inc = yield* liveOnly(id, request.payload.generation)
          if (inc !== undefined) {
            const target = { generation: inc.localGeneration }
            yield* (request.payload.force
              ? registry.forceEvict(id, target)
              : registry.evict(id, {
                ...target,
                ...(request.payload.timeoutMillis === undefined
                  ? {}
                  : { timeout: Duration.millis(request.payload.timeoutMillis) })
              })).pipe(Effect.catchTag("SessionNotFound", () => Effect.void))
            yield* Deferred.await(inc.closed)
          }
          const evicted = yield* store.evict(id).pipe(
            Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
          )
          if (inc === undefined && !evicted) return yield* new SessionRegistry.SessionNotFound({ id })
        }))
    })

  return { handlers, release, keepAliveWhileLive, locate, registry, store, incarnations } as const
})
