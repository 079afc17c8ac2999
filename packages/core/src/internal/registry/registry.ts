/**
 * The session registry's operations: `make`, admission (`getOrCreate`), pins, lookups fenced by generation, the
 * calls by id and by handle, eviction, snapshots. Each is a short function over the registry's record
 * (`entries.ts`) that asks the pure core (`state.ts`) what to do.
 *
 * `SessionRegistry.ts` delegates to this module; the errors and metrics it shares with the public module live in
 * leaf modules (`errors.ts`, `metrics.ts`), so that this module imports only types from `SessionRegistry.ts`.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import { DormantStore } from "../../DormantStore.ts"
import type * as EventLog from "../../EventLog.ts"
import type * as Permission from "../../Permission.ts"
import * as Session from "../../Session.ts"
import type {
  ConflictPolicy,
  EvictOptions,
  GetOptions,
  Handle,
  LookupError,
  Options,
  Registry as PublicRegistry,
  SendOptions,
  Snapshot,
  Target,
  WakeError
} from "../../SessionRegistry.ts"
import { InvalidConfig, SessionUnavailable } from "../../TetherError.ts"
import type { Prompt, Turn, TurnResult } from "../../Turn.ts"
import * as Dormant from "./dormant.ts"
import * as Entries from "./entries.ts"
import type { Entry, Registry } from "./entries.ts"
import {
  CapacityExceeded,
  DormantNotFound,
  GenerationChanged,
  RegistryClosed,
  RestoreFailed,
  SessionConflict,
  SessionNotFound
} from "./errors.ts"
import * as fingerprints from "./fingerprint.ts"
import { metrics } from "./metrics.ts"
import * as Pool from "./pool.ts"
import * as State from "./state.ts"
import * as Warm from "./warm.ts"

// ---------------------------------------------------------------------------------------------------------------
// Lookups and pins
// ---------------------------------------------------------------------------------------------------------------

/** The entry for an id (and generation), whatever its phase. */
const find = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  generation: number | undefined
): Effect.Effect<Entry<E, A, TE>, LookupError> =>
  Effect.suspend((): Effect.Effect<Entry<E, A, TE>, LookupError> => {
    const found = State.lookup(self.state, id, generation)
    switch (found._tag) {
      case "Found":
        return Effect.succeed(found.entry)
      case "Closed":
        return Effect.fail(new RegistryClosed())
      case "NotFound":
        return Effect.fail(new SessionNotFound({ id }))
      case "GenerationChanged":
        return Effect.fail(new GenerationChanged({ id, expected: generation!, current: found.current }))
    }
  })

/** The live entry for an id (and generation), waiting for one that is starting; a dead session's entry is closed. */
const resolve = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  generation: number | undefined,
  intent: State.Intent
): Effect.Effect<Entry<E, A, TE>, LookupError> =>
  Effect.flatMap(find(self, id, generation), (entry): Effect.Effect<Entry<E, A, TE>, LookupError> => {
    switch (State.access(entry, intent)) {
      case "wait":
        return Deferred.await(entry.started).pipe(
          Effect.mapError(() => State.unavailable(entry)),
          Effect.andThen(resolve(self, id, entry.generation, intent))
        )
      case "unavailable":
        return Effect.fail(State.unavailable(entry))
    }
    return Effect.flatMap(entry.session!.status, (status) =>
      State.isDead(status)
        ? Effect.andThen(
          Entries.onGone(self, entry),
          Effect.fail(new SessionUnavailable({ status, reason: `session ${id} has ${status}` }))
        )
        : Effect.succeed(entry))
  })

/**
 * Pins a live entry until the caller's scope closes; false (and no pin) for an entry no longer live. The pin and
 * its release are registered together: an interruption in between would leak the pin.
 */
const pin = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  callerScope: Scope.Scope
): Effect.Effect<boolean> =>
  Effect.uninterruptible(Effect.suspend(() => {
    if (!State.pin(self.state, entry, Entries.now(self))) return Effect.succeed(false)
    return Effect.as(
      Scope.addFinalizer(
        callerScope,
        Effect.sync(() => {
          State.unpin(self.state, entry, Entries.now(self))
          Entries.notify(self)
        })
      ),
      true
    )
  }))

// ---------------------------------------------------------------------------------------------------------------
// Dormant conversations
// ---------------------------------------------------------------------------------------------------------------

const wakeErrors: ReadonlySet<string> = new Set([
  "DormantStateCorrupt",
  "DormantStoreFailed",
  "RestoreFailed",
  "CapacityExceeded",
  "SessionConflict",
  "SessionUnavailable",
  "RegistryClosed"
])

/**
 * The live entry for a message by id; an id held dormant (whose configuration this registry knows) is woken first,
 * by an admission like `getOrCreate`'s: messages that arrive while it wakes wait for the same start.
 */
const resolveWaking = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  generation: number | undefined
): Effect.Effect<Entry<E, A, TE>, LookupError | WakeError> =>
  Effect.catchTag(resolve(self, id, generation, "work"), "SessionNotFound", (notFound) =>
    Effect.flatMap(
      Effect.orElseSucceed(Dormant.configOf(self, id, undefined), () => undefined),
      (config): Effect.Effect<Entry<E, A, TE>, LookupError | WakeError> =>
        config === undefined ? Effect.fail(notFound) : Effect.andThen(
          Effect.scoped(getOrCreate(self, id, config)).pipe(
            Effect.mapError((error): LookupError | WakeError =>
              wakeErrors.has((error as { readonly _tag?: string })._tag ?? "")
                ? error as LookupError | WakeError
                : new RestoreFailed({
                  id,
                  reason: String((error as { readonly message?: unknown }).message),
                  cause: error
                })
            )
          ),
          resolve(self, id, undefined, "work")
        )
    ))

/** `Registry.wake`: resumes a dormant conversation now (a live one is left as it is). */
const wake = Effect.fn("SessionRegistry.wake")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  given: C | undefined
) {
  yield* Effect.annotateCurrentSpan("tether.session.id", id)
  if (self.state.entries.has(id)) {
    if (given !== undefined) yield* Effect.scoped(getOrCreate(self, id, given))
    return
  }
  const config = yield* Dormant.configOf(self, id, given)
  if (config === undefined) return yield* new DormantNotFound({ id })
  yield* Effect.scoped(getOrCreate(self, id, config))
})

// ---------------------------------------------------------------------------------------------------------------
// Calls by id
// ---------------------------------------------------------------------------------------------------------------

/** `send` by id: an id held dormant wakes. */
const send = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  prompt: Prompt,
  options?: SendOptions
) => sendTo(self, resolveWaking(self, id, options?.generation), prompt, options)

/** `send` by handle: its generation only, never a wake. */
const sendHandle = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  prompt: Prompt,
  options: SendOptions
) => sendTo(self, resolve(self, id, options.generation, "work"), prompt, options)

const sendTo = Effect.fn("SessionRegistry.send")(function*<C, E, A extends TurnResult, TE, X>(
  self: Registry<C, E, A, TE>,
  found: Effect.Effect<Entry<E, A, TE>, X>,
  prompt: Prompt,
  options?: SendOptions
) {
  const entry = yield* found
  yield* Effect.annotateCurrentSpan({ "tether.session.id": entry.id, "tether.session.generation": entry.generation })
  State.turnSent(self.state, entry, Entries.now(self))
  const sent = yield* Effect.exit(entry.session!.send(prompt, options))
  if (Exit.isFailure(sent)) {
    State.turnRefused(entry)
    Entries.notify(self)
    return yield* sent
  }
  yield* Metric.modify(metrics.turnsInFlight, 1)
  yield* Effect.forkIn(
    Effect.andThen(Entries.track(self, entry, sent.value), Dormant.recordLive(self, entry)),
    entry.watchers
  )
  // The session's own turn: when the registry closes the session under it, the session reports why ("evicted").
  return sent.value
})

/**
 * `send`, then the turn's settlement. From the handle's return to the wait the caller's interrupt is held, and the
 * wait's own handler interrupts the turn (unless it was sent to outlive its caller): an interrupt that landed between
 * the two, while the registry tracks the turn, would otherwise leave it running.
 */
const run = <A extends TurnResult, TE, X>(
  sent: Effect.Effect<Turn<A, TE>, X>,
  options?: SendOptions
) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(restore(sent), (turn) => {
      const settled = Effect.flatten(restore(turn.settled))
      return options?.interruptOnCancel === false
        ? settled
        // The handle's interrupt reaches the machine at once and then waits for the turn to settle, which the
        // caller that stopped waiting does not.
        : Effect.onInterrupt(
          settled,
          () => Effect.asVoid(Effect.forkDetach(turn.interrupt, { startImmediately: true }))
        )
    })
  )

/** The entry for a call that controls the session (allowed while it drains), annotated on the span, used now. */
const forControl = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  target: Target | undefined
) {
  const entry = yield* resolve(self, id, target?.generation, "control")
  yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
  State.touch(self.state, entry, Entries.now(self))
  return entry
})

const interrupt = Effect.fn("SessionRegistry.interrupt")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  target?: Target
) {
  const entry = yield* forControl(self, id, target)
  return yield* entry.session!.interrupt
})

const answerPermission = Effect.fn("SessionRegistry.answerPermission")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  requestId: string,
  decision: Exclude<Permission.Decision, { _tag: "Defer" }>,
  target?: Target
) {
  yield* Effect.annotateCurrentSpan("tether.permission.request_id", requestId)
  const entry = yield* forControl(self, id, target)
  return yield* entry.session!.answerPermission(requestId, decision)
})

const pendingPermissions = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  target?: Target
) => Effect.flatMap(resolve(self, id, target?.generation, "control"), (entry) => entry.session!.pendingPermissions)

const control = Effect.fn("SessionRegistry.control")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  request: unknown,
  target?: Target
) {
  const entry = yield* forControl(self, id, target)
  return yield* entry.session!.control(request)
})

const subscribe = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  from: EventLog.From = "latest",
  target?: Target
) => Effect.flatMap(resolve(self, id, target?.generation, "control"), (entry) => entry.session!.subscribe(from))

// ---------------------------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------------------------

const snapshotOf = Effect.fnUntraced(function*<E, A extends TurnResult, TE>(
  entry: Entry<E, A, TE>
): Effect.fn.Return<Snapshot> {
  const session = entry.session
  if (session === undefined) return State.snapshot(entry, undefined)
  return State.snapshot(entry, {
    status: yield* session.status,
    sessionId: Option.getOrUndefined(yield* session.sessionId),
    process: yield* session.process,
    pendingPermissions: (yield* session.pendingPermissions).length,
    pid: Option.getOrUndefined(session.pid)
  })
})

const snapshot = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string
): Effect.Effect<Snapshot, SessionNotFound> =>
  Effect.suspend(() => {
    const entry = self.state.entries.get(id)
    return entry === undefined ? Effect.fail(new SessionNotFound({ id })) : snapshotOf(entry)
  })

const list = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): Effect.Effect<ReadonlyArray<Snapshot>> =>
  Effect.suspend(() => Effect.forEach([...self.state.entries.values()], snapshotOf))

// ---------------------------------------------------------------------------------------------------------------
// Eviction
// ---------------------------------------------------------------------------------------------------------------

const evict = Effect.fn("SessionRegistry.evict")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  options?: EvictOptions
) {
  const entry = yield* find(self, id, options?.generation)
  yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
  if (entry.phase === "starting") yield* Effect.ignore(Deferred.await(entry.started))
  if (entry.phase === "closing") return yield* Deferred.await(entry.closed)
  State.beginDrain(entry)
  Entries.notify(self)
  // An unreadable timeout forces at once.
  const deadline = Entries.now(self) + (State.millis(options?.timeout, Number.POSITIVE_INFINITY) ?? 0)
  // The drain runs in the registry so that it completes (and the entry closes) even if this caller stops waiting.
  yield* Entries.background(self, Entries.drain(self, entry, deadline))
  yield* Deferred.await(entry.closed)
})

const forceEvict = Effect.fn("SessionRegistry.forceEvict")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  target?: Target
) {
  const entry = yield* find(self, id, target?.generation)
  yield* Effect.annotateCurrentSpan({ "tether.session.id": id, "tether.session.generation": entry.generation })
  yield* Entries.close(self, entry, "forced")
})

// ---------------------------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------------------------

type Step<E, A extends TurnResult, TE> =
  | Exclude<State.Admission<Entry<E, A, TE>>, { readonly _tag: "Vacant" }>
  | { readonly _tag: "Created"; readonly entry: Entry<E, A, TE> }

/**
 * Decides what `getOrCreate` finds and, for a vacant id, creates the entry together with the fiber that starts
 * it: a caller interrupted in between would leave an entry "starting" forever, holding a slot.
 */
const admit = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  fingerprint: string,
  config: C,
  onConflict: ConflictPolicy
): Effect.Effect<Step<E, A, TE>> =>
  Effect.uninterruptible(Effect.suspend((): Effect.Effect<Step<E, A, TE>> => {
    const key = self.poolKey(config)
    // A dormant conversation (or one the adoption resumes) resumes in a CLI of its own, never a warm one.
    const dormant = Dormant.isDormant(self, id) || self.resumes(id)
    const takes = !dormant && Pool.hasReady(self.pools, key)
    const reserved = Pool.occupied(self.pools) - (takes ? 1 : 0)
    const admission = State.admit(self.state, id, fingerprint, self.settings.capacity, reserved)
    if (admission._tag !== "Vacant") return Effect.succeed(admission)
    // Taken now, in the same step as the admission: no other conversation can take it.
    const pooled = !dormant && Pool.isPooled(self.pools, key)
    const item = takes ? Pool.take(self.pools, key) : undefined
    // The CLI taken does its first turn's work before any warm CLI starts (see `Settings.warmRefillDelay`).
    if (item !== undefined) Pool.hold(self.pools, Entries.now(self), self.settings.warmRefillDelay)
    const entry = Entries.create(self, id, fingerprint, config)
    // The warm CLI is the entry's before its start is forked: a start closed or interrupted before it runs still
    // closes it with the entry.
    const taken = item === undefined ? Effect.succeed(undefined) : Warm.take(self, entry, item)
    return Effect.flatMap(taken, (taken) => {
      const open = Dormant.open(self, entry, config, taken, pooled, onConflict)
      return Effect.map(Effect.forkIn(Entries.start(self, entry, open), self.fibers), (fiber): Step<E, A, TE> => {
        entry.startFiber = fiber
        return { _tag: "Created", entry }
      })
    })
  }))

/**
 * Makes room in a full registry: evicts the least recently used idle session (true: decide again), or waits for
 * a change until the deadline (true), or gives up (false).
 */
const makeRoom = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  signal: Deferred.Deferred<void>,
  deadline: number
) {
  // A warm CLI goes before any conversation.
  if (yield* Warm.evictOne(self)) return true
  const victim = yield* Entries.victim(self)
  if (victim !== undefined) {
    yield* Entries.close(self, victim, "capacity", true)
    return true
  }
  const remaining = deadline - Entries.now(self)
  if (remaining <= 0) return false
  yield* Effect.timeoutOption(Deferred.await(signal), remaining)
  return true
})

/** Whether an admission holds the registry's warm pools back (it found the registry full). */
interface Hold {
  held: boolean
}

const getOrCreate = Effect.fn("SessionRegistry.getOrCreate")(
  <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>, id: string, config: C, options?: GetOptions) =>
    Effect.suspend(() => {
      const hold: Hold = { held: false }
      return admission(self, id, config, options, hold).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (hold.held) self.pools.waiting--
        }))
      )
    })
)

const admission = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  config: C,
  options: GetOptions | undefined,
  hold: Hold
) {
  yield* Effect.annotateCurrentSpan("tether.session.id", id)
  const callerScope = yield* Scope.Scope
  const fingerprint = self.fingerprint(config)
  const onConflict = options?.onConflict ?? self.settings.onConflict
  const startedAt = Entries.now(self)
  // An unreadable admission timeout fails at once when full.
  const deadline = startedAt + (State.millis(options?.admissionTimeout, self.settings.admissionTimeout) ?? 0)
  while (true) {
    // Read before deciding: a change between the decision and the wait must wake the wait.
    const signal = self.changed
    const step = yield* admit(self, id, fingerprint, config, onConflict)
    switch (step._tag) {
      case "Closed":
        return yield* new RegistryClosed()
      case "Leaving":
        yield* Deferred.await(step.entry.closed)
        continue
      case "Conflict":
        if (onConflict === "fail") {
          return yield* new SessionConflict({
            id,
            generation: step.entry.generation,
            liveFingerprint: step.entry.fingerprint,
            requestedFingerprint: fingerprint
          })
        }
        yield* Entries.close(self, step.entry, "replaced")
        continue
      case "Created":
        yield* Effect.annotateCurrentSpan("tether.session.generation", step.entry.generation)
        continue
      case "Starting": {
        // A start that failed (or that the registry aborted) fails every caller waiting for it.
        const started = yield* Effect.exit(Deferred.await(step.entry.started))
        if (Exit.isFailure(started)) return yield* Effect.failCause(started.cause)
        continue
      }
      case "Live": {
        const entry = step.entry
        if (State.isDead(yield* entry.session!.status)) {
          yield* Entries.close(self, entry, "failed")
          continue
        }
        if (!(yield* pin(self, entry, callerScope))) continue
        yield* Effect.annotateCurrentSpan("tether.session.generation", entry.generation)
        return handle(self, entry)
      }
      case "Full":
        // From now until this admission ends, no warm CLI takes a slot it could have.
        if (!hold.held) {
          hold.held = true
          self.pools.waiting++
        }
        if (yield* makeRoom(self, signal, deadline)) continue
        return yield* new CapacityExceeded({
          id,
          capacity: self.settings.capacity,
          waitedMillis: Entries.now(self) - startedAt
        })
    }
  }
})

const get = Effect.fn("SessionRegistry.get")(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  target?: Target
) {
  const callerScope = yield* Scope.Scope
  const entry = yield* resolve(self, id, target?.generation, "work")
  if (!(yield* pin(self, entry, callerScope))) return yield* State.unavailable(entry)
  return handle(self, entry)
})

// ---------------------------------------------------------------------------------------------------------------
// Handles and the registry
// ---------------------------------------------------------------------------------------------------------------

/** A handle on one generation: every call names it, so it fails once that generation is gone. */
const handle = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>
): Handle<A, TE> => {
  const id = entry.id
  const generation = entry.generation
  const target: Target = { generation }
  return {
    id,
    generation,
    send: (prompt, options) => sendHandle(self, id, prompt, { ...options, generation }),
    run: (prompt, options) => run(sendHandle(self, id, prompt, { ...options, generation }), options),
    interrupt: interrupt(self, id, target),
    answerPermission: (requestId, decision) => answerPermission(self, id, requestId, decision, target),
    pendingPermissions: pendingPermissions(self, id, target),
    control: (request) => control(self, id, request, target),
    subscribe: (from) => subscribe(self, id, from, target),
    snapshot: Effect.flatMap(find(self, id, generation), snapshotOf)
  }
}

/**
 * Creates a registry in the current scope; closing the scope closes every session. Order matters at release
 * (finalizers run in reverse): the shutdown first closes every session, bounded; then the (by then empty) sessions
 * scope; then the background fibers, which the shutdown still uses.
 */
export const make = Effect.fnUntraced(function*<C, E, R, A extends TurnResult, TE>(
  options: Options<C, E, R, A, TE>
) {
  const settings = State.resolve(options)
  if (Result.isFailure(settings)) return yield* new InvalidConfig({ problems: [...settings.failure] })
  const context = yield* Effect.context<R>()
  const store = settings.success.dormancy
    ? Option.getOrUndefined(yield* Effect.serviceOption(DormantStore))
    : undefined
  if (settings.success.dormancy && store === undefined) {
    return yield* new InvalidConfig({ problems: ["dormancy needs a DormantStore in context (DormantStore.layer…)"] })
  }
  const adoption = options.adoption
  const scope = yield* Effect.scope
  const fibers = yield* Scope.fork(scope, "parallel")
  const sessions = yield* Scope.fork(scope, "parallel")
  const self: Registry<C, E, A, TE> = {
    state: State.make(),
    settings: settings.success,
    acquire: (id, config, sessionScope, placement) =>
      options.acquire(id, config).pipe(
        Effect.provideService(Session.Conversation, placement),
        Scope.provide(sessionScope),
        Effect.provideContext(context)
      ),
    startWarm: (key, config, warmScope, placement) =>
      (adoption === undefined ? options.acquire(`warm:${key}`, config) : adoption.start(key, config)).pipe(
        Effect.provideService(Session.Conversation, placement),
        Scope.provide(warmScope),
        Effect.provideContext(context)
      ),
    adopt: adoption === undefined ?
      undefined :
      (id, config, warm, sessionScope) =>
        adoption.adopt(id, config, warm).pipe(Scope.provide(sessionScope), Effect.provideContext(context)),
    resumes: adoption?.resumes ?? (() => false),
    dormancy: store === undefined ? undefined : { store, ids: new Set(), configs: new Map() },
    onClosed: (entry, reason, conversationId) => Dormant.onClosed(self, entry, reason, conversationId),
    fingerprint: options.fingerprint,
    poolKey: options.warm?.key ?? fingerprints.shape,
    adapt: options.warm?.adapt ?? (() => Effect.void),
    prime: options.warm?.prime,
    pools: Pool.make(),
    clock: yield* Clock.Clock,
    fibers,
    sessions,
    changed: Deferred.makeUnsafe()
  }
  // The conversations an earlier process left dormant.
  yield* Effect.mapError(
    Dormant.loadIds(self),
    (error) => new InvalidConfig({ problems: [`the dormant store cannot be listed: ${error.message}`] })
  )
  if (Number.isFinite(self.settings.idleTimeToLive)) yield* Effect.forkIn(Entries.sweep(self), fibers)
  yield* Effect.forkIn(Warm.refiller(self), fibers)
  yield* Scope.addFinalizer(scope, Entries.shutdown(self))
  // Runs first (finalizers run in reverse): no warm CLI starts once the shutdown has begun.
  yield* Scope.addFinalizer(scope, Warm.shutdown(self))
  const registry: PublicRegistry<C, E, A, TE> = {
    getOrCreate: (id, config, getOptions) => getOrCreate(self, id, config, getOptions),
    get: (id, target) => get(self, id, target),
    send: (id, prompt, sendOptions) => send(self, id, prompt, sendOptions),
    run: (id, prompt, sendOptions) => run(send(self, id, prompt, sendOptions), sendOptions),
    interrupt: (id, target) => interrupt(self, id, target),
    answerPermission: (id, requestId, decision, target) => answerPermission(self, id, requestId, decision, target),
    pendingPermissions: (id, target) => pendingPermissions(self, id, target),
    control: (id, request, target) => control(self, id, request, target),
    subscribe: (id, from, target) => subscribe(self, id, from, target),
    snapshot: (id) => snapshot(self, id),
    list: list(self),
    evict: (id, evictOptions) => evict(self, id, evictOptions),
    forceEvict: (id, target) => forceEvict(self, id, target),
    size: Effect.sync(() => self.state.entries.size),
    warm: (config, size) => Warm.warm(self, config, size),
    pools: Warm.snapshots(self),
    dormant: Dormant.list(self),
    wake: (id, config) => wake(self, id, config),
    deleteDormant: (id) => Dormant.remove(self, id)
  }
  return registry
})
