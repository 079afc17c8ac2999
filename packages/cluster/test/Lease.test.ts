/**
 * A runner's lock storage (`internal/locks.ts`) and host lease (`internal/lease.ts`): the lease renewed at each lock
 * refresh that kept every shard, for the TTL from the refresh's start, never by a refresh that failed, hung or lost a
 * shard; a failing refresh answered "held" within the outage tolerance of the last one that kept every shard, and
 * not past it; a gone runner's locks released when the health check reports it. Effect's clock (TestClock) times the
 * refreshes; the board is the test's own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import { Runner, RunnerAddress, RunnerStorage, ShardId } from "effect/cluster"
import { PersistenceError, RunnerUnavailable } from "effect/cluster/ClusterError"
import { TestClock } from "effect/testing"
import * as Lease from "../src/internal/lease.ts"
import * as Locks from "../src/internal/locks.ts"

const address = RunnerAddress.make("127.0.0.1", 1)
const shards = [ShardId.make("default", 1), ShardId.make("default", 2)]
const ttl = Duration.seconds(6)

/**
 * Lock storage whose refresh takes `took` on the clock, then answers `held` of the shards asked about (or fails),
 * over Effect's in-memory storage for the rest; the renewals it caused, in milliseconds remaining, and the runners
 * whose locks it released.
 */
const storage = (options?: {
  readonly tolerance?: Duration.Input
  readonly attempt?: Duration.Input
}) =>
  Effect.gen(function*() {
    const memory = yield* RunnerStorage.makeMemory
    const state = { took: Duration.zero, lose: undefined as ShardId.ShardId | undefined, fail: false }
    const renewals: Array<number> = []
    const refreshing = Locks.make(
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
      {
        lease: { ttl, lease: { renew: (remaining) => renewals.push(remaining) } },
        tolerance: Duration.fromInputUnsafe(options?.tolerance ?? 0),
        attempt: Duration.fromInputUnsafe(options?.attempt ?? "60 seconds")
      }
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
      const { refreshing, renewals, state } = yield* storage()
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
      const { refreshing, renewals, state } = yield* storage()
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

describe("outage tolerance", () => {
  it.effect("a failing refresh answers its shards held within the tolerance of the last one that kept them, not past it", () =>
    Effect.gen(function*() {
      const { refreshing, renewals, state } = yield* storage({ tolerance: "30 seconds" })
      yield* refreshFor(refreshing.refresh(address, shards), 0)
      state.fail = true
      for (let second = 5; second < 30; second += 5) {
        yield* TestClock.adjust("5 seconds")
        const held = yield* refreshFor(refreshing.refresh(address, shards), 0)
        assert.deepStrictEqual(held._tag === "Success" ? held.value : held, shards, `at ${second} s`)
      }
      // 30 s after the last refresh that kept them: the failure goes through (Sharding deems its storage unhealthy).
      yield* TestClock.adjust("5 seconds")
      const late = yield* refreshFor(refreshing.refresh(address, shards), 0)
      assert.strictEqual(late._tag, "Failure")
      // Answered "held", none renewed the lease: it runs out at the TTL of the last one that reached the database.
      assert.deepStrictEqual(renewals, [6_000])
      // The database back: renewed, and a new outage is ridden out from there.
      state.fail = false
      yield* refreshFor(refreshing.refresh(address, shards), 0)
      state.fail = true
      yield* TestClock.adjust("29 seconds")
      const again = yield* refreshFor(refreshing.refresh(address, shards), 0)
      assert.deepStrictEqual(again._tag === "Success" ? again.value : again, shards)
      assert.deepStrictEqual(renewals, [6_000, 6_000])
    }))

  it.effect("a refresh that hangs counts as failed after its bound; a probe and a lost shard answer the truth", () =>
    Effect.gen(function*() {
      const { refreshing, state } = yield* storage({ tolerance: "30 seconds", attempt: "2 seconds" })
      yield* refreshFor(refreshing.refresh(address, shards), 0)
      state.took = Duration.minutes(1)
      const hung = yield* refreshFor(refreshing.refresh(address, shards), "2 seconds")
      assert.deepStrictEqual(hung._tag === "Success" ? hung.value : hung, shards)
      state.took = Duration.zero
      state.fail = true
      // A probe (no shard asked about) is how Sharding learns the database is back: never answered for it.
      const probe = yield* refreshFor(refreshing.refresh(address, []), 0)
      assert.strictEqual(probe._tag, "Failure")
      // The database answers and another runner has a shard: that is what the runner hears.
      state.fail = false
      state.lose = shards[0]
      const lost = yield* refreshFor(refreshing.refresh(address, shards), 0)
      assert.deepStrictEqual(lost._tag === "Success" ? lost.value : lost, [shards[1]])
    }))

  it.effect("without a tolerance the first failing refresh goes through, and a slow one is Sharding's to bound", () =>
    Effect.gen(function*() {
      const { refreshing, state } = yield* storage({ attempt: "1 second" })
      state.took = Duration.seconds(3)
      const slow = yield* refreshFor(refreshing.refresh(address, shards), "3 seconds")
      assert.deepStrictEqual(slow._tag === "Success" ? slow.value : slow, shards)
      state.took = Duration.zero
      state.fail = true
      const failed = yield* refreshFor(refreshing.refresh(address, shards), "1 second")
      assert.strictEqual(failed._tag, "Failure")
    }))
})

describe("a gone runner's locks", () => {
  it.effect("are released when its port refuses every ping, once until it answers again; a runner that hangs keeps them", () =>
    Effect.gen(function*() {
      const self = RunnerAddress.make("127.0.0.1", 1)
      const others = [2, 3, 4].map((port) => RunnerAddress.make("127.0.0.1", port))
      const behaviour = new Map<number, "answers" | "refuses" | "hangs">([[2, "refuses"], [3, "hangs"], [4, "answers"]])
      const memory = yield* RunnerStorage.makeMemory
      const calls: Array<string> = []
      const storage = RunnerStorage.RunnerStorage.of({
        ...memory,
        getRunners: Effect.succeed(
          [self, ...others].map((address) => [Runner.make({ address, groups: ["default"], weight: 1 }), true] as const)
        ),
        setRunnerHealth: (address, healthy) => Effect.sync(() => void calls.push(`health ${address.port} ${healthy}`)),
        releaseAll: (address) => Effect.sync(() => void calls.push(`release ${address.port}`))
      })
      const pinged: Array<number> = []
      const ping = (address: RunnerAddress.RunnerAddress) =>
        Effect.suspend(() => {
          pinged.push(address.port)
          const how = behaviour.get(address.port)
          return how === "refuses"
            ? Effect.fail(new RunnerUnavailable({ address }))
            : how === "hangs"
            ? Effect.never
            : Effect.void
        })
      yield* Effect.forkChild(Locks.releaseGone({
        storage,
        ping,
        self,
        interval: Duration.seconds(1),
        timeout: Duration.seconds(2),
        attempts: 3,
        spacing: Duration.millis(250)
      }))
      // One check: three tries 250 ms apart, each bounded by 2 s.
      yield* TestClock.adjust("7 seconds")
      assert.deepStrictEqual(calls, ["health 2 false", "release 2"])
      assert.isFalse(pinged.includes(1), "a runner does not ping itself")
      // Checked again, still refusing: nothing more.
      yield* TestClock.adjust("8 seconds")
      assert.deepStrictEqual(calls, ["health 2 false", "release 2"])
      // It answers (started again at the same address), then is gone again: released again.
      behaviour.set(2, "answers")
      yield* TestClock.adjust("8 seconds")
      behaviour.set(2, "refuses")
      yield* TestClock.adjust("8 seconds")
      assert.deepStrictEqual(calls, ["health 2 false", "release 2", "health 2 false", "release 2"])
    }))
})
