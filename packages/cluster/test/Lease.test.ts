/**
 * A runner's host lease (`internal/lease.ts`): renewed at each lock refresh that kept every shard, for the TTL from
 * the refresh's start; never by a refresh that failed, hung or lost a shard. Effect's clock (TestClock) times the
 * refreshes; the board is the test's own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import { RunnerAddress, RunnerStorage, ShardId } from "effect/cluster"
import { PersistenceError } from "effect/cluster/ClusterError"
import { TestClock } from "effect/testing"
import * as Lease from "../src/internal/lease.ts"

const address = RunnerAddress.make("127.0.0.1", 1)
const shards = [ShardId.make("default", 1), ShardId.make("default", 2)]
const ttl = Duration.seconds(6)

/**
 * Lock storage whose refresh takes `took` on the clock, then answers `held` of the shards asked about (or fails),
 * over Effect's in-memory storage for the rest; and the renewals it caused, in milliseconds remaining.
 */
const storage = Effect.gen(function*() {
  const memory = yield* RunnerStorage.makeMemory
  const state = { took: Duration.zero, lose: undefined as ShardId.ShardId | undefined, fail: false }
  const renewals: Array<number> = []
  const refreshing = Lease.renewing(
    RunnerStorage.RunnerStorage.of({
      ...memory,
      refresh: (_address, shardIds) =>
        Effect.sleep(state.took).pipe(
          Effect.andThen(
            state.fail
              ? Effect.fail(new PersistenceError({ cause: "the database is down" }))
              : Effect.succeed(Array.from(shardIds).filter((shardId) => shardId !== state.lose))
          )
        )
    }),
    ttl,
    { renew: (remaining) => renewals.push(remaining) }
  )
  return { refreshing, state, renewals }
})

const refreshFor = <A, E>(effect: Effect.Effect<A, E>, took: Duration.Input) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Effect.exit(effect))
    yield* TestClock.adjust(took)
    return yield* Fiber.join(fiber)
  })

describe("host lease", () => {
  it.effect("a refresh that kept every shard renews it for the TTL from the refresh's start", () =>
    Effect.gen(function*() {
      const { refreshing, renewals, state } = yield* storage
      yield* refreshFor(refreshing.refresh(address, shards), 0)
      state.took = Duration.millis(1_500)
      yield* refreshFor(refreshing.refresh(address, shards), "1500 millis")
      // A probe (no shards held): the database answered, every shard asked about is held.
      yield* refreshFor(refreshing.refresh(address, []), "1500 millis")
      // Slower than the TTL: renewed for nothing left (the lease has run out).
      state.took = Duration.seconds(7)
      yield* refreshFor(refreshing.refresh(address, shards), "7 seconds")
      assert.deepStrictEqual(renewals, [6_000, 4_500, 4_500, 0])
    }))

  it.effect("a refresh that lost a shard, failed or has not answered renews nothing", () =>
    Effect.gen(function*() {
      const { refreshing, renewals, state } = yield* storage
      state.lose = shards[1]
      const lost = yield* refreshFor(refreshing.refresh(address, shards), 0)
      assert.deepStrictEqual(lost._tag === "Success" ? lost.value : lost, [shards[0]])
      state.lose = undefined
      state.fail = true
      const failed = yield* refreshFor(refreshing.refresh(address, shards), 0)
      assert.strictEqual(failed._tag, "Failure")
      state.fail = false
      state.took = Duration.seconds(30)
      const hung = yield* Effect.forkChild(refreshing.refresh(address, shards))
      yield* TestClock.adjust("20 seconds")
      yield* Fiber.interrupt(hung)
      assert.deepStrictEqual(renewals, [])
    }))

  it.effect("a lease held runs for its TTL until renewed, and is gone with its scope", () =>
    Effect.gen(function*() {
      const board = { holders: new Map<object, number>(), listeners: new Set<() => void>() }
      let told = 0
      board.listeners.add(() => told++)
      const scope = yield* Scope.make()
      const lease = yield* Lease.hold(Duration.seconds(2), board).pipe(Scope.provide(scope))
      const now = performance.now()
      assert.isFalse(Lease.expired(board, now))
      assert.isTrue(Lease.expired(board, now + 2_100))
      lease.renew(5_000)
      assert.isFalse(Lease.expired(board, now + 2_100))
      lease.renew(0)
      assert.isTrue(Lease.expired(board, performance.now()))
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(board.holders.size, 0)
      assert.isFalse(Lease.expired(board))
      assert.strictEqual(told, 4)
    }))
})
