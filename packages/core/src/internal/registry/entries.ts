/**
 * The session registry's record and the life of its entries: how a session starts, how it is watched, how it
 * closes, the idle sweep and the shutdown. The rules come from the pure core (`state.ts`); this module does what
 * they decide: it starts and closes sessions in their scopes, reads their status, wakes waiters and keeps the
 * metrics and spans.
 *
 * Every function is defined once, at the top level, and takes the registry's record: effects built per call (per
 * turn, per start, per eviction) never come from `(...) => Effect.gen(function*() {...})`, because V8 gives each
 * new generator function its own map, allocated in the old generation, which keeps the closure (and whatever it
 * captures: a turn, its result) alive until the next full GC. For the same reason the closures Effect stores per
 * turn (an `ensuring`) close over the entry, never the turn.
 *
 * The metrics it records come from a leaf module (`metrics.ts`): it imports only types from `SessionRegistry.ts`.
 *
 * @internal
 */
import type * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { Store } from "../../DormantStore.ts"
import type * as Session from "../../Session.ts"
import type { EvictionReason } from "../../SessionRegistry.ts"
import { SessionUnavailable } from "../../TetherError.ts"
import type { Turn, TurnResult } from "../../Turn.ts"
import type { DormantStateCorrupt, DormantStoreFailed, RestoreFailed, SessionConflict } from "./errors.ts"
import { metrics } from "./metrics.ts"
import type * as Pool from "./pool.ts"
import * as State from "./state.ts"

/** An entry: the core's bookkeeping, and what the shell needs to start, watch and close its session. */
export interface Entry<E, A extends TurnResult, TE> extends State.Slot {
  /** The session's own scope, a child of the registry's: closing it releases the session. */
  readonly scope: Scope.Closeable
  /** Fibers that watch the session (its exit, its turns); closed after the session itself. */
  readonly watchers: Scope.Closeable
  readonly started: Deferred.Deferred<Session.Session<A, TE>, E | Opening>
  readonly closed: Deferred.Deferred<void>
  session: Session.Session<A, TE> | undefined
  startFiber: Fiber.Fiber<void> | undefined
  /** The configuration it was started with (kept for a dormant conversation's wake). */
  readonly config: unknown
  /** The directory its CLI keeps its conversation state in, with dormancy. */
  directory: string | undefined
  /**
   * With dormancy: the conversation id the store holds a record of while the conversation runs (written after a
   * turn, or the record it woke from), so that a host that dies finds it dormant; `undefined` while there is none.
   */
  recorded: string | undefined
}

/** What opening an entry's session can fail with besides the kind's start errors. */
export type Opening =
  | SessionUnavailable
  | SessionConflict
  | DormantStateCorrupt
  | DormantStoreFailed
  | RestoreFailed

/** A registry's dormancy: its store, the ids it holds dormant, and the configurations it knows them by. */
export interface Dormancy<C> {
  readonly store: Store
  readonly ids: Set<string>
  readonly configs: Map<string, C>
}

/** A registry: the core's state, the kind's two functions, and the scopes and signal the shell works with. */
export interface Registry<C, E, A extends TurnResult, TE> {
  readonly state: State.State<Entry<E, A, TE>>
  readonly settings: State.Resolved
  /**
   * The kind's `acquire` in the given scope, with the context captured when the registry was made, and the CLI's
   * conversation placement (with dormancy).
   */
  readonly acquire: (
    id: string,
    config: C,
    scope: Scope.Scope,
    placement: Session.Placement | undefined
  ) => Effect.Effect<Session.Session<A, TE>, E>
  /** Starts a warm CLI for a pool key (`Options.adoption.start`, or `acquire` with the id `warm:<key>`). */
  readonly startWarm: (
    key: string,
    config: C,
    scope: Scope.Scope,
    placement: Session.Placement | undefined
  ) => Effect.Effect<Session.Session<A, TE>, E>
  /** Makes a warm CLI an id's session, in `scope` (`Options.adoption.adopt`); without it, the CLI as it is. */
  readonly adopt:
    | ((
      id: string,
      config: C,
      warm: { readonly session: Session.Session<A, TE>; readonly discard: Effect.Effect<void> },
      scope: Scope.Scope
    ) => Effect.Effect<Session.Session<A, TE>, E>)
    | undefined
  /** Whether the next start of an id resumes a conversation the registry does not hold (`Options.adoption.resumes`). */
  readonly resumes: (id: string) => boolean
  /** Set when the registry keeps conversations dormant. */
  readonly dormancy: Dormancy<C> | undefined
  /** What becomes of a closed entry's conversation state (with dormancy: kept dormant, or released). */
  readonly onClosed: (
    entry: Entry<E, A, TE>,
    reason: EvictionReason,
    conversationId: string | undefined
  ) => Effect.Effect<void>
  readonly fingerprint: (config: C) => string
  /** The kind's pool key and hand-out adaptation (see `SessionRegistry.Warm`). */
  readonly poolKey: (config: C) => string
  readonly adapt: (session: Session.Session<A, TE>, from: C, to: C) => Effect.Effect<void, Session.ControlError>
  /** The kind's warm-up of a started CLI before it joins its pool (see `SessionRegistry.Warm`). */
  readonly prime:
    | ((session: Session.Session<A, TE>, config: C) => Effect.Effect<void, Session.ControlError>)
    | undefined
  /** The warm pools. */
  readonly pools: Pool.Pools<C, A, TE>
  readonly clock: Clock.Clock
  /** The registry's background fibers (starts, teardowns, drains, the sweep). */
  readonly fibers: Scope.Closeable
  /** The parent of every session's scope. */
  readonly sessions: Scope.Closeable
  /** Completed (and replaced) whenever an entry changes in a way a waiter may care about. */
  changed: Deferred.Deferred<void>
}

export const now = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): number =>
  self.clock.currentTimeMillisUnsafe()

/** Wakes everyone waiting for a slot or for a drain. */
export const notify = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): void => {
  const previous = self.changed
  self.changed = Deferred.makeUnsafe<void>()
  Deferred.doneUnsafe(previous, Exit.void)
}

/** Runs `effect` in a fiber of the registry, so that it completes even if the caller stops waiting. */
export const background = <C, E, A extends TurnResult, TE, X, EX>(
  self: Registry<C, E, A, TE>,
  effect: Effect.Effect<X, EX>
): Effect.Effect<void> => Effect.asVoid(Effect.forkIn(effect, self.fibers))

const spanAttributes = <E, A extends TurnResult, TE>(entry: Entry<E, A, TE>) => ({
  "tether.session.id": entry.id,
  "tether.session.generation": entry.generation
})

// ---------------------------------------------------------------------------------------------------------------
// Starting
// ---------------------------------------------------------------------------------------------------------------

/** A new entry for the id, starting, as the most recently used one. Its scope is a child of the sessions' scope. */
export const create = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  fingerprint: string,
  config: C
): Entry<E, A, TE> => {
  const scope = Scope.forkUnsafe(self.sessions, "sequential")
  // Forked before the session is acquired into the same scope, so it is closed after the session's release.
  const watchers = Scope.forkUnsafe(scope, "parallel")
  const t = now(self)
  const entry: Entry<E, A, TE> = {
    id,
    generation: State.claimGeneration(self.state),
    fingerprint,
    createdAt: t,
    phase: "starting",
    closeReason: undefined,
    pins: 0,
    turns: 0,
    lastUsed: t,
    scope,
    watchers,
    started: Deferred.makeUnsafe(),
    closed: Deferred.makeUnsafe(),
    session: undefined,
    startFiber: undefined,
    config,
    directory: undefined,
    recorded: undefined
  }
  State.insert(self.state, entry)
  return entry
}

/**
 * Starts the entry's session (in a fiber of the registry) and settles `started` for everyone waiting on it. A start
 * that fails leaves no entry; a session that starts is watched until its process exits.
 */
export const start = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  open: Effect.Effect<Session.Session<A, TE>, E | Opening>
) {
  const t0 = now(self)
  // A warm CLI, a dormant conversation resumed, or a cold start: `open` decides (`dormant.ts`).
  const exit = yield* open.pipe(
    Effect.withSpan("SessionRegistry.start"),
    // Every span of the session (its own `tether.session`, turns, controls) carries the registry's id for it.
    Effect.annotateSpans(spanAttributes(entry)),
    Effect.exit
  )
  entry.startFiber = undefined
  // Closed while it was starting: the teardown has settled `started` and closes the scope.
  if (entry.phase !== "starting") return
  if (Exit.isFailure(exit)) {
    State.startFailed(entry)
    Deferred.doneUnsafe(entry.started, exit)
    yield* Scope.close(entry.scope, exit)
    remove(self, entry)
    return
  }
  const session = exit.value
  entry.session = session
  State.started(self.state, entry, now(self))
  yield* Metric.modify(metrics.sessions, 1)
  yield* Metric.update(metrics.sessionStart, Duration.millis(now(self) - t0))
  yield* Effect.forkIn(Effect.andThen(session.awaitExit, Effect.suspend(() => onGone(self, entry))), entry.watchers)
  Deferred.doneUnsafe(entry.started, Exit.succeed(session))
  notify(self)
})

// ---------------------------------------------------------------------------------------------------------------
// Watching
// ---------------------------------------------------------------------------------------------------------------

/** Removes a session that failed, retired or whose process exited, so the id's next use starts afresh. */
export const onGone = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>
): Effect.Effect<void> => State.isOpen(entry) ? background(self, close(self, entry, "failed")) : Effect.void

/** Watches a turn sent through the registry until it ends: its metrics, its span, the entry's count of turns. */
export const track = Effect.fnUntraced(
  function*<C, E, A extends TurnResult, TE>(
    self: Registry<C, E, A, TE>,
    _entry: Entry<E, A, TE>,
    turn: Turn<A, TE>
  ) {
    const t0 = now(self)
    const exit = yield* turn.settled
    yield* Metric.update(metrics.turnDuration, Duration.millis(now(self) - t0))
    yield* Effect.annotateCurrentSpan("tether.turn.outcome", Exit.isSuccess(exit) ? "completed" : "failed")
  },
  (effect, self, entry, turn) =>
    effect.pipe(
      Effect.withSpan("SessionRegistry.turn", { attributes: { ...spanAttributes(entry), "tether.turn.id": turn.id } }),
      // Closes over the entry alone (not the turn): the registry keeps entries anyway.
      Effect.ensuring(Effect.suspend(() => {
        State.turnEnded(self.state, entry, now(self))
        notify(self)
        return Metric.modify(metrics.turnsInFlight, -1)
      }))
    )
)

// ---------------------------------------------------------------------------------------------------------------
// Closing
// ---------------------------------------------------------------------------------------------------------------

/** A closed entry leaves the map (unless a newer one took its id) and wakes those waiting for it. */
const remove = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>, entry: Entry<E, A, TE>): void => {
  State.remove(self.state, entry)
  Deferred.doneUnsafe(entry.closed, Exit.void)
  notify(self)
}

/** Closes a session that `close` has marked closing; removes the entry and wakes its waiters however it ends. */
const teardown = Effect.fnUntraced(
  function*<C, E, A extends TurnResult, TE>(
    self: Registry<C, E, A, TE>,
    entry: Entry<E, A, TE>,
    reason: EvictionReason,
    wasLive: boolean
  ) {
    yield* Metric.update(Metric.withAttributes(metrics.evictions, { reason }), 1)
    if (entry.startFiber !== undefined) yield* Fiber.interrupt(entry.startFiber)
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
    const t0 = now(self)
    // Read before the CLI goes: what a dormant conversation resumes.
    const conversationId = entry.session === undefined || self.dormancy === undefined
      ? undefined
      : Option.getOrUndefined(yield* entry.session.sessionId)
    // The session itself says why its running turn ended (evicted, or closed with the registry): its turn's
    // waiters and its subscribers read the same reason.
    if (entry.session !== undefined) yield* entry.session.close(State.sessionCloseReason(reason))
    yield* Scope.close(entry.scope, Exit.void)
    // Before the entry leaves: a wake of the id waits for it, and finds the conversation dormant.
    yield* self.onClosed(entry, reason, conversationId)
    yield* Metric.update(metrics.teardownDuration, Duration.millis(now(self) - t0))
    if (wasLive) yield* Metric.modify(metrics.sessions, -1)
  },
  (effect, self, entry, reason) =>
    effect.pipe(
      Effect.ensuring(Effect.sync(() => remove(self, entry))),
      Effect.withSpan("SessionRegistry.teardown", { attributes: { ...spanAttributes(entry), reason } }),
      Effect.uninterruptible
    )
)

/**
 * Closes the entry for `reason` (the session's release: stdin EOF, close grace, the transport's teardown) in a
 * fiber of the registry, so that an interrupted caller never leaves a half-closed entry, and waits for it. With
 * `onlyIfEvictable` it does nothing (and returns false) for an entry that is pinned or busy by now.
 */
export const close = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  reason: EvictionReason,
  onlyIfEvictable = false
): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    switch (State.beginClose(entry, reason, onlyIfEvictable)) {
      case "already-closing":
        return Effect.as(Deferred.await(entry.closed), true)
      case "kept":
        return Effect.succeed(false)
    }
    notify(self)
    return Effect.forkIn(teardown(self, entry, reason, entry.session !== undefined), self.fibers).pipe(
      Effect.andThen(Deferred.await(entry.closed)),
      Effect.as(true)
    )
  })

/** Waits until `done()` holds, or the deadline (epoch milliseconds) passes: false. */
export const waitUntil = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  done: () => boolean,
  deadline: number
): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const signal = self.changed
    if (done()) return Effect.succeed(true)
    const remaining = deadline - now(self)
    if (remaining <= 0) return Effect.succeed(false)
    const wait = Number.isFinite(remaining)
      ? Effect.timeoutOption(Deferred.await(signal), Duration.millis(remaining))
      : Deferred.await(signal)
    return Effect.andThen(wait, waitUntil(self, done, deadline))
  })

/** Waits for a draining entry's turns to end and its pins to be released (until the deadline), then closes it. */
export const drain = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  deadline: number
) {
  const drained = yield* waitUntil(self, () => State.isDrained(entry), deadline)
  yield* close(self, entry, drained ? "evicted" : "forced")
})

/** The least recently used entry that can be evicted now, if any. */
export const victim = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>) {
  for (const entry of State.evictionCandidates(self.state)) {
    if (State.canEvict(yield* entry.session!.status)) return entry
  }
  return undefined
})

// ---------------------------------------------------------------------------------------------------------------
// The idle sweep and the shutdown
// ---------------------------------------------------------------------------------------------------------------

/** One fiber for the whole registry: closes the expired entries, then sleeps until the next one expires. */
export const sweep = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>) {
  while (!self.state.closed) {
    const expired = State.expired(self.state, now(self), self.settings.idleTimeToLive)
    for (const entry of expired.entries) {
      const reason = State.expiry(yield* entry.session!.status)
      if (reason !== undefined) yield* background(self, close(self, entry, reason, reason === "idle"))
    }
    yield* Effect.sleep(Duration.millis(expired.wakeIn))
  }
})

/** Closes the registry and every session in it, at most `shutdownConcurrency` at a time. */
export const shutdown = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const entries = State.close(self.state)
    notify(self)
    return Effect.forEach(entries, (entry) => close(self, entry, "shutdown"), {
      concurrency: self.settings.shutdownConcurrency,
      discard: true
    })
  }).pipe(Effect.withSpan("SessionRegistry.shutdown"))
