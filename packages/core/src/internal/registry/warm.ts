/**
 * The registry's warm pools, the Effect shell over `pool.ts`: starting warm CLIs in the registry's scope, watching
 * them until they are handed out, handing one out (checked, bound, adapted), closing them (to make room, when a
 * pool shrinks, at shutdown), and the one fiber that refills the pools whenever the registry changes.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Scope from "effect/Scope"
import type { PoolSnapshot } from "../../SessionRegistry.ts"
import { InvalidConfig } from "../../TetherError.ts"
import type { TurnResult } from "../../Turn.ts"
import * as Entries from "./entries.ts"
import type { Entry, Registry } from "./entries.ts"
import { RegistryClosed } from "./errors.ts"
import { metrics } from "./metrics.ts"
import * as Pool from "./pool.ts"

type Reason = "died" | "adapt-failed" | "capacity" | "surplus" | "shutdown" | "failed-start"

const discarded = (reason: Reason) => Metric.update(Metric.withAttributes(metrics.warmDiscards, { reason }), 1)

/** Closes a warm CLI that is no longer in its pool; it holds its slot until its teardown is done. */
const closeItem = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  item: Pool.Item<C, A, TE>,
  reason: Reason
): Effect.Effect<void> =>
  Effect.suspend(() => {
    self.pools.closing++
    return Effect.andThen(discarded(reason), Scope.close(item.scope, Exit.void)).pipe(
      Effect.andThen(release(self, item.directory)),
      Effect.ensuring(Effect.sync(() => {
        self.pools.closing--
        Entries.notify(self)
      })),
      Effect.uninterruptible
    )
  })

/** Removes a directory no conversation uses (a warm CLI's that was never handed out); a failure is logged. */
export const release = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  directory: string | undefined
): Effect.Effect<void> =>
  directory === undefined || self.dormancy === undefined
    ? Effect.void
    : Effect.ignore(self.dormancy.store.release(directory), { log: "Warn" })

/** Withdraws a ready CLI from its pool and closes it; nothing if it is no longer ready. */
const dropReady = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  item: Pool.Item<C, A, TE>,
  reason: Reason
): Effect.Effect<void> =>
  Effect.suspend(() =>
    Pool.withdraw(self.pools, item)
      ? Effect.andThen(Metric.modify(metrics.warmReady, -1), closeItem(self, item, reason))
      : Effect.void
  )

/** Starts one warm CLI for `pool`, in its own scope (a child of the sessions scope), in a fiber of the registry. */
const fill = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  pool: Pool.Pool<C, A, TE>
) {
  const scope = Scope.forkUnsafe(self.sessions, "sequential")
  // Forked before the CLI is acquired into the same scope, so it is closed after the CLI's release.
  const watchers = Scope.forkUnsafe(scope, "parallel")
  const { bind, config } = Pool.bindable(pool.config)
  // With dormancy, the CLI keeps its conversation in a directory of the store from the start.
  const directory = self.dormancy === undefined ? undefined : yield* Effect.option(self.dormancy.store.allocate)
  if (directory !== undefined && directory._tag === "None") {
    pool.failures++
    pool.retryAt = Entries.now(self) + Pool.backoff(pool.failures)
    yield* discarded("failed-start")
    return yield* Scope.close(scope, Exit.void)
  }
  const placement = directory === undefined ? undefined : { directory: directory.value, resume: undefined }
  const exit = yield* self.startWarm(pool.key, config, scope, placement).pipe(
    // The first turn's work the kind can do ahead, before the CLI is ready; a failure leaves it as it is.
    Effect.tap((session) =>
      self.prime === undefined ? Effect.void : Effect.ignore(self.prime(session, pool.config), { log: "Warn" })
    ),
    Effect.withSpan("SessionRegistry.warm", { attributes: { "tether.pool.key": pool.key } }),
    // Stopped by the shutdown: what the start acquired goes with its scope.
    Effect.onInterrupt(() => Scope.close(scope, Exit.void)),
    Effect.exit
  )
  if (Exit.isFailure(exit)) {
    pool.failures++
    pool.retryAt = Entries.now(self) + Pool.backoff(pool.failures)
    yield* Effect.logWarning(
      `a warm CLI failed to start (${pool.failures} in a row): the pool retries in ${
        pool.retryAt - Entries.now(self)
      } ms`,
      exit.cause
    )
    yield* discarded("failed-start")
    yield* Scope.close(scope, exit)
    return yield* release(self, placement?.directory)
  }
  pool.failures = 0
  const item: Pool.Item<C, A, TE> = {
    key: pool.key,
    scope,
    session: exit.value,
    directory: placement?.directory,
    config: pool.config,
    bind,
    state: "ready",
    readyAt: Entries.now(self)
  }
  // The pool shrank, was replaced or closed while this one started.
  if (self.pools.closed || self.pools.byKey.get(pool.key) !== pool || pool.ready.length >= pool.target) {
    item.state = "closing"
    return yield* closeItem(self, item, self.pools.closed ? "shutdown" : "surplus")
  }
  pool.ready.push(item)
  yield* Metric.modify(metrics.warmReady, 1)
  // A warm CLI whose process exits leaves its pool (and is refilled); once handed out, the entry watches it.
  yield* Effect.forkIn(
    Effect.andThen(exit.value.awaitExit, Effect.suspend(() => dropReady(self, item, "died"))),
    watchers
  )
})

/** Forks a start for `pool`; the start counts in the pool (and holds a slot) from now until it ends. */
const startOne = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  pool: Pool.Pool<C, A, TE>
): Effect.Effect<void> =>
  Effect.uninterruptible(Effect.suspend(() => {
    const start: Pool.Start = { fiber: undefined }
    pool.starting.add(start)
    const run = fill(self, pool).pipe(
      Effect.ensuring(Effect.sync(() => {
        pool.starting.delete(start)
        Pool.prune(self.pools, pool)
        Entries.notify(self)
      }))
    )
    return Effect.map(Effect.forkIn(run, self.fibers), (fiber) => {
      start.fiber = fiber
    })
  }))

/** Slots free for warm CLIs: capacity less the sessions and the warm CLIs that hold one. */
const free = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): number =>
  self.settings.capacity - self.state.entries.size - Pool.occupied(self.pools)

/**
 * The refiller: one fiber for the whole registry. Whenever the registry changes (a conversation took a warm CLI, a
 * slot was freed, a start ended, the host changed a pool), it starts what the pools lack in the free slots; after a
 * failed start it also wakes when the pool's backoff ends.
 */
export const refiller = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>) {
  while (!self.pools.closed && !self.state.closed) {
    const signal = self.changed
    while (true) {
      const pools = Pool.toStart(self.pools, free(self), Entries.now(self))
      if (pools.length === 0) break
      for (const pool of pools) yield* startOne(self, pool)
    }
    const retry = Pool.nextRetry(self.pools, Entries.now(self))
    yield* retry === undefined
      ? Deferred.await(signal)
      : Effect.timeoutOption(Deferred.await(signal), Duration.millis(retry - Entries.now(self)))
  }
})

/** A warm CLI an admission took for its entry, and the scope of the entry's adoption of it (when there is one). */
export interface Taken<C, A extends TurnResult, TE> {
  readonly item: Pool.Item<C, A, TE>
  /** Forked before the warm CLI was attached: it closes after the CLI, so what the adoption registers runs then. */
  readonly adoption: Scope.Closeable | undefined
}

/**
 * Makes a warm CLI just taken from its pool the entry's, in the admission's step that took it (before the entry's
 * start is forked): the entry's close closes it, and its directory is the entry's, whatever becomes of the start (it
 * may be closed or interrupted before it runs). Uninterruptible, as the admission is.
 */
export const take = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  item: Pool.Item<C, A, TE>
): Effect.Effect<Taken<C, A, TE>> =>
  Effect.suspend(() => {
    const adoption = self.adopt === undefined ? undefined : Scope.forkUnsafe(entry.scope, "sequential")
    entry.directory = item.directory
    return Effect.andThen(
      Metric.modify(metrics.warmReady, -1),
      Effect.as(Scope.addFinalizer(entry.scope, Scope.close(item.scope, Exit.void)), { item, adoption })
    )
  })

/**
 * The warm CLI for a new conversation of `config`, taken from its pool by the admission (so no one else can take
 * it) and the entry's since ({@link take}): checked alive and never used, bound to `config` and adapted to it.
 * `undefined` when there was none or it could not serve (then it is closed, its directory released, and no longer
 * the entry's): the caller starts cold.
 */
export const handOut = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  taken: Taken<C, A, TE> | undefined,
  pooled: boolean,
  config: C
): Effect.fn.Return<Pool.Item<C, A, TE> | undefined> {
  if (taken === undefined) {
    if (pooled) yield* Metric.update(metrics.warmMisses, 1)
    return undefined
  }
  const item = taken.item
  const session = item.session
  const status = yield* session.status
  // Never used: a warm CLI is idle until it is handed out (a turn, or a failure, shows a CLI that is not fresh).
  if (status !== "idle" || !(yield* session.isAlive)) {
    entry.directory = undefined
    yield* closeItem(self, item, "died")
    yield* Metric.update(metrics.warmMisses, 1)
    return undefined
  }
  item.bind(config)
  const adapted = yield* Effect.exit(self.adapt(session, item.config, config))
  if (Exit.isFailure(adapted)) {
    yield* Effect.logWarning("a warm CLI could not be adapted to its conversation; starting one cold", adapted.cause)
    entry.directory = undefined
    yield* closeItem(self, item, "adapt-failed")
    yield* Metric.update(metrics.warmMisses, 1)
    return undefined
  }
  yield* Metric.update(metrics.warmHits, 1)
  return item
})

/** Closes a ready warm CLI to give its slot to a conversation: false when there is none. */
export const evictOne = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const item = Pool.evictionCandidate(self.pools)
    return item === undefined ? Effect.succeed(false) : Effect.as(dropReady(self, item, "capacity"), true)
  })

/** `Registry.warm`: sets the pool's target and configuration; a smaller target closes the surplus before it returns. */
export const warm = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  config: C,
  size: number
): Effect.Effect<void, InvalidConfig | RegistryClosed> =>
  Effect.suspend((): Effect.Effect<void, InvalidConfig | RegistryClosed> => {
    if (!Number.isSafeInteger(size) || size < 0) {
      return Effect.fail(new InvalidConfig({ problems: [`a warm pool's size must be an integer >= 0 (got ${size})`] }))
    }
    if (self.pools.closed || self.state.closed) return Effect.fail(new RegistryClosed())
    const key = self.poolKey(config)
    let pool = self.pools.byKey.get(key)
    if (pool === undefined) {
      pool = { key, config, target: size, ready: [], starting: new Set(), failures: 0, retryAt: 0 }
      self.pools.byKey.set(key, pool)
    }
    pool.config = config
    pool.target = size
    // A host asking again retries now.
    pool.retryAt = 0
    // Starts in progress that the pool no longer needs are stopped (what they started goes with their scope), and
    // the ready CLIs beyond the target closed: none of them is left when this returns.
    const starts = Pool.surplusStarts(pool).flatMap((start) => start.fiber ?? [])
    const surplus = Pool.surplus(pool)
    const current = pool
    Entries.notify(self)
    return Effect.andThen(
      Effect.forEach(starts, Fiber.interrupt, { concurrency: "unbounded", discard: true }),
      Effect.forEach(surplus, (item) => dropReady(self, item, "surplus"), { concurrency: "unbounded", discard: true })
    ).pipe(
      Effect.ensuring(Effect.sync(() => Pool.prune(self.pools, current)))
    )
  }).pipe(Effect.withSpan("SessionRegistry.warm.resize", { attributes: { "tether.pool.size": size } }))

export const snapshots = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>
): Effect.Effect<ReadonlyArray<PoolSnapshot>> =>
  Effect.sync(() =>
    [...self.pools.byKey.values()].map((pool) => ({
      key: pool.key,
      target: pool.target,
      ready: pool.ready.length,
      starting: pool.starting.size
    }))
  )

/** Closes the pools: stops the starts in progress, closes every ready CLI, and waits for those being closed. */
export const shutdown = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>): Effect.Effect<void> =>
  Effect.suspend(() => {
    self.pools.closed = true
    Entries.notify(self)
    const pools = [...self.pools.byKey.values()]
    const starts = pools.flatMap((pool) => [...pool.starting].flatMap((start) => start.fiber ?? []))
    const ready = pools.flatMap((pool) => [...pool.ready])
    return Effect.andThen(
      Effect.forEach(starts, Fiber.interrupt, { concurrency: "unbounded", discard: true }),
      Effect.forEach(ready, (item) => dropReady(self, item, "shutdown"), {
        concurrency: self.settings.shutdownConcurrency,
        discard: true
      })
    ).pipe(
      Effect.andThen(Entries.waitUntil(self, () => self.pools.closing === 0, Number.POSITIVE_INFINITY))
    )
  }).pipe(Effect.withSpan("SessionRegistry.warm.shutdown"))

/** The slots warm CLIs hold, for an admission of `key`: a vacant id with a warm CLI ready takes that CLI's slot. */
export const reserved = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>, key: string): number =>
  Pool.occupied(self.pools) - (Pool.hasReady(self.pools, key) ? 1 : 0)
