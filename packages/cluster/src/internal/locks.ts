/**
 * A runner's shard lock storage, as `NodeCluster.layer` wraps Effect's SQL one: what keeps a runner's sessions
 * through a short database outage, what frees a dead runner's shards at once, and what renews the host lease.
 *
 * **Riding out an outage.** Effect's `Sharding` refreshes its shard locks every lock interval, and the first refresh
 * that fails or times out makes it deem its lock storage unhealthy: it force-interrupts every entity it holds
 * (`refreshShardLocks` and `markShardLocksUnhealthy` in `effect/cluster/Sharding.ts`, 4.1.0), so every session of
 * every runner ends with the database's first hiccup. With table locks (`shardLockDisableAdvisory`, the default of
 * `NodeCluster.layer`) a lock is a row stamped at its last refresh and no other runner may take it before
 * `shardLockExpiration` has passed since; nobody can take it while the database is down at all. So a refresh that
 * fails within `tolerance` of the start of the last one that kept every shard answers "still held" for the shards
 * it asked about: `Sharding` keeps its entities, their running turns go on, and the next refresh that reaches the
 * database stamps the locks again. Past the tolerance the failure goes through and `Sharding` does what it does.
 * The tolerance must leave room for that refresh before the locks expire (checked by the layer: tolerance plus two
 * lock intervals at most the expiration). Advisory locks belong to the lock connection and are gone with it: no
 * tolerance is safe with them, and the layer refuses one.
 *
 * **A dead runner's locks** ({@link releaseGone}). Table locks outlive their runner's connection: a runner killed by
 * SIGKILL would keep its shards until its locks expire, and Effect's health check cannot help, for it runs as a
 * singleton, whose shard may be one of the dead runner's. So every runner watches the others: one whose cluster port
 * refuses every ping (its process is gone, not frozen: a frozen runner's port accepts and does not answer) is
 * marked unhealthy and its locks are released, so that its shards move within a check. A frozen runner keeps its
 * locks until they expire, when its host lease ends its CLIs: its sessions never run in two places.
 *
 * **The host lease** (`lease.ts`): renewed at each refresh that kept every shard it asked about, for its TTL from the
 * refresh's start, less what the refresh took. A refresh that failed (even one answered "still held" above), timed
 * out or lost a shard renews nothing.
 *
 * Elapsed time is read on Effect's clock.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import { PersistenceError, type RunnerUnavailable } from "effect/cluster/ClusterError"
import type * as RunnerAddress from "effect/cluster/RunnerAddress"
import type * as RunnerStorage from "effect/cluster/RunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Lease } from "./lease.ts"

/** How the runner's lock storage behaves (see the module's description). */
export interface Settings {
  /** The host lease and its TTL; none: no lease. */
  readonly lease?: { readonly lease: Lease; readonly ttl: Duration.Duration } | undefined
  /** How long after the last refresh that kept every shard a failing refresh still answers "held"; zero: none. */
  readonly tolerance: Duration.Duration
  /**
   * How long one refresh may take before it counts as failed (less than `Sharding`'s own bound on it); with no
   * tolerance, none (`Sharding`'s own).
   */
  readonly attempt: Duration.Duration
}

/** The runner's lock storage over Effect's: see the module's description. */
export const make = (
  storage: RunnerStorage.RunnerStorage["Service"],
  settings: Settings
): RunnerStorage.RunnerStorage["Service"] => {
  // The start of the last refresh that kept every shard it asked about (the layer's start counts as one).
  let kept: number | undefined
  let riding = false
  const ttl = settings.lease === undefined ? undefined : Duration.toMillis(settings.lease.ttl)
  const tolerance = Duration.toMillis(settings.tolerance)
  return {
    ...storage,
    refresh: (address, shardIds) =>
      Effect.gen(function*() {
        const asked = Array.from(shardIds)
        const started = yield* Clock.currentTimeMillis
        kept ??= started
        // Bounded only where a failure may be answered: without a tolerance, `Sharding` bounds it as it does.
        const exit = yield* Effect.exit(
          tolerance === 0 ? storage.refresh(address, asked) : storage.refresh(address, asked).pipe(
            Effect.timeoutOrElse({
              duration: settings.attempt,
              orElse: () => Effect.fail(new PersistenceError({ cause: "the shard lock refresh timed out" }))
            })
          )
        )
        if (Exit.isSuccess(exit)) {
          const held = exit.value
          const all = new Set(held.map(String))
          if (asked.every((shardId) => all.has(String(shardId)))) {
            kept = started
            if (riding) {
              riding = false
              yield* Effect.logInfo("the database answers again: the runner's shard locks are refreshed")
            }
            if (settings.lease !== undefined) {
              const took = (yield* Clock.currentTimeMillis) - started
              settings.lease.lease.renew(Math.max(0, ttl! - took))
            }
          }
          return held
        }
        // A probe (nothing asked: `Sharding` holds no shard, or checks whether storage is back) answers the truth.
        if (asked.length > 0 && started - kept < tolerance) {
          if (!riding) {
            riding = true
            yield* Effect.logWarning(
              `a shard lock refresh failed: the runner keeps its ${asked.length} shards for up to ${
                Duration.format(settings.tolerance)
              } after the last refresh that reached the database`,
              exit.cause
            )
          }
          return asked
        }
        return yield* exit
      })
  }
}

/**
 * Whether the runner at `address` is gone: its port refused every one of `attempts` pings `spacing` apart (a ping
 * that fails before `timeout`). One that answers is alive; one that times out may be a frozen runner's, whose port
 * accepts and does not answer: not gone either.
 */
export const refuses = (
  ping: (address: RunnerAddress.RunnerAddress) => Effect.Effect<void, RunnerUnavailable>,
  address: RunnerAddress.RunnerAddress,
  options: { readonly attempts: number; readonly spacing: Duration.Duration; readonly timeout: Duration.Duration }
): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < options.attempts; attempt++) {
      if (attempt > 0) yield* Effect.sleep(options.spacing)
      const answered = yield* ping(address).pipe(
        Effect.timeoutOrElse({ duration: options.timeout, orElse: () => Effect.succeed("timed out" as const) }),
        Effect.map((outcome) => outcome === "timed out" ? "timed out" as const : "answered" as const),
        Effect.catch(() => Effect.succeed("refused" as const))
      )
      if (answered !== "refused") return false
    }
    return true
  })

/**
 * Every `interval`, pings each other runner the lock storage lists (`attempts` tries `spacing` apart, each bounded by
 * `timeout`); one
 * whose port refused every try is marked unhealthy and its shard locks are released, once until it answers again. A
 * ping that times out is not a refusal: that runner may be frozen, and keeps its locks until they expire. Runs until
 * interrupted; a failure of the database is tried again at the next check.
 */
export const releaseGone = (options: {
  readonly storage: RunnerStorage.RunnerStorage["Service"]
  readonly ping: (address: RunnerAddress.RunnerAddress) => Effect.Effect<void, RunnerUnavailable>
  readonly self: RunnerAddress.RunnerAddress
  readonly interval: Duration.Duration
  readonly timeout: Duration.Duration
  readonly attempts: number
  /** The pause between two tries of one runner. */
  readonly spacing: Duration.Duration
}): Effect.Effect<never> => {
  const released = new Set<string>()
  const check = (address: RunnerAddress.RunnerAddress) =>
    Effect.gen(function*() {
      const key = `${address.host}:${address.port}`
      if (!(yield* refuses(options.ping, address, options))) return void released.delete(key)
      if (released.has(key)) return
      yield* options.storage.setRunnerHealth(address, false)
      yield* options.storage.releaseAll(address)
      released.add(key)
      yield* Effect.logInfo(`runner ${key} is gone (its port refuses pings): its shard locks are released`)
    }).pipe(Effect.ignore({ log: "Debug" }))
  return options.storage.getRunners.pipe(
    Effect.flatMap((runners) =>
      Effect.forEach(
        runners.filter(([runner]) =>
          runner.address.host !== options.self.host || runner.address.port !== options.self.port
        ),
        ([runner]) => check(runner.address),
        { concurrency: "unbounded", discard: true }
      )
    ),
    Effect.ignore({ log: "Debug" }),
    Effect.andThen(Effect.sleep(options.interval)),
    Effect.forever
  )
}
