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
import { Permission, Session, SessionRegistry, TetherError, type Turn } from "@tether/core"
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
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Files from "./files.ts"
import { type Incarnation, unavailable } from "./incarnation.ts"
import { locateAt, metrics, placeOf } from "./place.ts"
import * as Protocol from "./protocol.ts"
import * as Saving from "./saving.ts"
import * as Store from "./store.ts"
import * as Streams from "./streams.ts"
import * as Turns from "./turns.ts"
import * as Unsaved from "./unsaved.ts"
import * as Wire from "./wire.ts"

// ---------------------------------------------------------------------------------------------------------------
// Settings and metrics
// ---------------------------------------------------------------------------------------------------------------

/** A warm pool a runner keeps: `size` started CLIs for new conversations of `config`'s pool key. */
export interface WarmPool<C> {
  readonly config: C
  readonly size: number
}

/** A runner's settings: its registry's, and the cluster's own. */
export interface Settings<C = never> extends SessionRegistry.Settings {
  readonly warm?: ReadonlyArray<WarmPool<C>> | undefined
  readonly stateDirectory?: string | undefined
  readonly drainTimeout?: Duration.Input | undefined
  readonly durableEvents?: boolean | undefined
  readonly tablePrefix?: string | undefined
  readonly entityIdleTime?: Duration.Input | undefined
  readonly finalSaveTimeout?: Duration.Input | undefined
  readonly unsavedRetention?: Duration.Input | undefined
}

export { metrics } from "./place.ts"

// ---------------------------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------------------------

export interface Options<C, CE, E, R, A extends Turn.TurnResult, TE> {
  readonly name: string
  readonly entity: Protocol.SessionEntity<C, CE>
  readonly kind: SessionRegistry.Kind<C, E, R, A, TE>
  readonly config: Schema.Codec<C, CE>
  readonly settings: Settings<C>
}

const safeName = (id: string): string =>
  `${id.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 48)}-${
    Crypto.createHash("sha256").update(id).digest("hex").slice(0, 12)
  }`

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
    const pools = Layer.succeed(Protocol.localPools(options.entity.type), {
      warm: (config, size) =>
        runner.warm(config as C, size).pipe(
          Effect.catchTag(
            "RegistryClosed",
            () => Effect.fail(new TetherError.InvalidConfig({ problems: ["this node's runner has shut down"] }))
          )
        ),
      pools: runner.registry.pools
    })
    // Built after the entities, so released before them: the pools empty before the sessions drain, and no warm CLI
    // starts in the slots the drain frees.
    const emptyFirst = Layer.effectDiscard(Effect.addFinalizer(() => runner.emptyPools))
    return Layer.merge(
      pools,
      Layer.provideMerge(
        emptyFirst,
        options.entity.toLayer(
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
      )
    )
  }))

/**
 * The runner's durations, checked here so that one that does not read is `InvalidConfig` at start, not a defect at
 * the first drain. A drain may take no time (close at once, without waiting for the running turn); the last save and
 * the retention of what could not be saved need some.
 */
const durations = <C>(settings: Settings<C>) => {
  const problems: Array<string> = []
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
  const read = {
    drainTimeout: duration("drainTimeout", settings.drainTimeout, Duration.seconds(10), "allowed"),
    finalSaveTimeout: duration("finalSaveTimeout", settings.finalSaveTimeout, Duration.seconds(30), "refused"),
    unsavedRetention: duration("unsavedRetention", settings.unsavedRetention, Duration.minutes(10), "refused")
  }
  return problems.length > 0 ? Effect.fail(new TetherError.InvalidConfig({ problems })) : Effect.succeed(read)
}

const makeRunner = Effect.fnUntraced(function*<C, CE, E, R, A extends Turn.TurnResult, TE>(
  options: Options<C, CE, E, R, A, TE>
) {
  // The runner's address, learned from the first entity that starts here (every session starts through one).
  const place = placeOf(options.name)
  const locate = (runner: RunnerAddress.RunnerAddress) => locateAt(place, runner)
  const settings = options.settings
  const kind = options.kind
  const { drainTimeout, finalSaveTimeout, unsavedRetention } = yield* durations(settings)
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
  /**
   * What the next start of an id is asked to do (set by `ensure` around `getOrCreate`), and whether, as far as the
   * database said before the start, it starts a new conversation (`fresh`: it may take a warm CLI).
   */
  const starts = new Map<string, { readonly reset: boolean; readonly durable: boolean; readonly fresh: boolean }>()
  /**
   * The runner's warm CLIs, each with the directory it was started in. A warm CLI's directory goes with it, unless a
   * new conversation adopted it: then it is that generation's directory, saved from and removed at its end.
   */
  const warmDirectories = new Map<Session.Session<A, TE>, { readonly directory: string; adopted: boolean }>()
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
  const { finalize, record } = Saving.make({ store, unsaved, place, runnerScope, finalSaveTimeout, incarnations })

  // ------------------------------------------------------------------------------------------------------------
  // Starting and ending generations
  // ------------------------------------------------------------------------------------------------------------

  /**
   * A warm CLI of the runner's pools (`SessionRegistry.Adoption.start`): the host's session, started before any
   * conversation is known, in a directory of its own under the runner's (so the sweep of a dead runner's directory
   * takes it too), which goes with it unless a conversation adopts it.
   */
  const startWarm = (key: string, config: C) =>
    Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const directory = Path.join(stateDirectory, `warm-${Crypto.randomBytes(6).toString("hex")}`)
      const placed = { directory, adopted: false }
      let session: Session.Session<A, TE> | undefined
      // Registered before the CLI is acquired into the same scope: it runs after the CLI has exited.
      yield* Scope.addFinalizer(
        scope,
        Effect.suspend(() => {
          if (session !== undefined) warmDirectories.delete(session)
          return placed.adopted ? Effect.void : Effect.ignore(Files.remove(directory), { log: "Warn" })
        })
      )
      yield* Files.restore(directory, []).pipe(
        Effect.mapError((error) => unavailable(`the runner could not make a warm CLI's directory: ${error.message}`))
      )
      session = yield* kind.acquire(`warm:${key}`, config).pipe(
        Effect.provideService(Session.Conversation, { directory, resume: undefined })
      )
      warmDirectories.set(session, placed)
      return session
    })

  /**
   * The kind the runner's registry starts sessions with: the next generation in the database, the conversation
   * restored, the host's session started there (resuming it), the incarnation recorded. With `warm` (a warm CLI a new
   * conversation took, `SessionRegistry.Adoption.adopt`), the generation adopts the CLI and its directory instead of
   * starting one; a generation that turns out to have a conversation to resume (saved between the admission's read
   * and this start) discards it and starts cold.
   */
  const open = (id: string, config: C, warm: SessionRegistry.WarmCli<A, TE> | undefined) =>
    Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const start = starts.get(id) ?? { reset: false, durable: defaultDurable }
      const encoded = yield* encodeConfig(config)
      // What an earlier generation of this id could not save goes first: its last save (or its turns' outcomes).
      yield* unsaved.flush(id)
      const begun = yield* store.begin(id, {
        runner: place.address,
        fingerprint: kind.fingerprint(config),
        config: encoded,
        durable: start.durable,
        reset: start.reset
      }).pipe(Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`)))
      const resumes = begun.conversationId !== undefined || begun.files.length > 0
      const placed = warm === undefined || resumes ? undefined : warmDirectories.get(warm.session)
      if (warm !== undefined && placed === undefined) {
        yield* Effect.logInfo(`session ${id} has a conversation to resume: the warm CLI it took is closed`)
        yield* warm.discard
      }
      yield* Effect.annotateCurrentSpan("tether.warm", placed !== undefined)
      const directory = placed?.directory ?? Path.join(stateDirectory, `${safeName(id)}-g${begun.generation}`)
      if (placed === undefined) {
        yield* Files.restore(directory, begun.files).pipe(
          Effect.mapError((error) => unavailable(`the runner could not restore the conversation: ${error.message}`))
        )
      }
      const inc: Incarnation<A, TE> = {
        id,
        generation: begun.generation,
        base: begun.base,
        directory,
        durable: begun.durable,
        previous: begun.previous,
        previousRunner: begun.previousRunner,
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
      // Registered before the session is acquired into the same scope: it runs after the session has closed (an
      // adopted warm CLI's scope closes before the adoption's). From here the generation owns the directory.
      yield* Scope.addFinalizer(scope, finalize(inc))
      if (placed !== undefined) placed.adopted = true
      inc.session = placed !== undefined ? warm!.session : yield* kind.acquire(id, config).pipe(
        Effect.provideService(Session.Conversation, { directory, resume: begun.conversationId })
      )
      inc.recorder = yield* Effect.forkIn(
        Effect.catchCause(record(inc), (cause) => Effect.logWarning(`the recorder of session ${id} stopped`, cause)),
        runnerScope
      )
      incarnations.set(id, inc)
      live(id)
      yield* Metric.update(place.sessionsGauge, incarnations.size)
      yield* Metric.update(
        Metric.withAttributes(metrics.restores, { ...place.attributes, previous: begun.previous }),
        1
      )
      return inc.session
    }).pipe(
      Effect.withSpan("ClusterRegistry.restore", {
        attributes: { "tether.session.id": id, "tether.runner": place.address }
      })
    )

  const registry = yield* SessionRegistry.make<C, E | TetherError.SessionUnavailable, R, A, TE>({
    ...settings,
    acquire: (id, config) => open(id, config, undefined),
    fingerprint: kind.fingerprint,
    warm: kind.warm,
    adoption: {
      start: startWarm,
      adopt: open,
      // Unknown: the start did not come through `ensure`, and may resume.
      resumes: (id) => !(starts.get(id)?.fresh ?? false)
    }
  })
  /** The configurations of the runner's pools (the last one given for each pool key), to empty them at release. */
  const poolConfigs = new Map<string, C>()
  const poolKey = kind.warm?.key ?? SessionRegistry.shape
  const warm = (config: C, size: number) =>
    Effect.tap(registry.warm(config, size), () => Effect.sync(() => poolConfigs.set(poolKey(config), config)))
  const emptyPools = Effect.suspend(() =>
    Effect.forEach(poolConfigs.values(), (config) => Effect.ignore(registry.warm(config, 0)), {
      concurrency: "unbounded",
      discard: true
    })
  )
  // The pools the runner's settings ask for; a bad size is the runner's InvalidConfig.
  for (const pool of settings.warm ?? []) {
    yield* warm(pool.config, pool.size).pipe(Effect.catchTag("RegistryClosed", Effect.die))
  }

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
      // Nothing saved to resume, as far as the database says now.
      let blank = false
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
        blank = found === undefined || found.state === "evicted" ||
          (found.conversationId === undefined && Object.keys(found.files).length === 0)
      }
      const getOptions = {
        ...(request.onConflict === undefined ? {} : { onConflict: request.onConflict }),
        ...(request.admissionTimeout === undefined ? {} : { admissionTimeout: request.admissionTimeout })
      }
      if (config !== undefined && current !== undefined && request.onConflict === "replace") reset = true
      starts.set(id, { reset, durable, fresh: reset || blank })
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

  const { send, trackedTurn, awaitTurn, phase } = Turns.make({
    store,
    incarnations,
    place,
    drainTimeout,
    registry,
    ensure,
    translate,
    moved
  })
  const { subscribe, turnEvents } = Streams.make({ store, incarnations, ensure, trackedTurn })

  // ------------------------------------------------------------------------------------------------------------
  // The entity
  // ------------------------------------------------------------------------------------------------------------

  const snapshot = (id: string) =>
    Effect.gen(function*() {
      const inc = incarnations.get(id)
      if (inc === undefined) return yield* new SessionRegistry.SessionNotFound({ id })
      const local = yield* registry.snapshot(id)
      return { ...local, generation: inc.generation, runner: place.address }
    })

  /** Releases the session of an entity that stops (shard moved, runner draining): graceful, bounded. */
  const release = (id: string) =>
    Effect.suspend(() => {
      if (!incarnations.has(id)) return Effect.void
      return registry.evict(id, { timeout: drainTimeout }).pipe(
        Effect.ignore,
        Effect.timed,
        Effect.flatMap(([took]) => Metric.update(Metric.withAttributes(metrics.drainDuration, place.attributes), took)),
        Effect.withSpan("ClusterRegistry.drain", {
          attributes: { "tether.session.id": id, "tether.runner": place.address }
        })
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
      TurnPhase: (request) => wire(phase(id, request.payload)),
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

  return { handlers, release, keepAliveWhileLive, locate, registry, warm, emptyPools, store, incarnations } as const
})
