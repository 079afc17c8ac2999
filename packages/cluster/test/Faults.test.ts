/**
 * The cluster registry under faults of the cluster itself, in one process: Effect's own `Sharding` (in-memory
 * message storage, no runner transport) over shard lock storage that a test can make fail, the registry's tables in
 * a real PostgreSQL, sessions of the simulated Claude CLI. What `Sharding` does when its lock storage is unhealthy
 * (it force-interrupts the entities of every shard it held) is what a runner does under load or with its database
 * down; a caller must see typed errors, never a bare interrupt.
 *
 * Real time (the cluster's refresh loop runs on it), with short lock intervals.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, layer } from "@effect/vitest"
import { ClusterRegistry } from "@tether/cluster"
import { ClaudeSession, Permission, SessionRegistry, Timeouts } from "@tether/core"
import { MockClaude, MockTransport, Postgres } from "@tether/testing"
import { Cause, Context, Effect, Exit, Fiber, Layer, Schedule, Schema } from "effect"
import { MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "effect/cluster"

const ChatConfig = Schema.Struct({ model: Schema.optional(Schema.String) })
type ChatConfig = typeof ChatConfig.Type

const timeouts = Effect.runSync(Timeouts.make({ closeGrace: "200 millis", termGrace: "200 millis" }))

class Chats extends SessionRegistry.Service<Chats>()("test/FaultChats", {
  acquire: (_id, config: ChatConfig) =>
    ClaudeSession.make({
      ...(config.model === undefined ? {} : { model: config.model }),
      timeouts,
      policy: Permission.denyAll
    }),
  fingerprint: SessionRegistry.fingerprint
}) {}

const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })

const script = MockClaude.make([
  MockClaude.when(/^slow/, MockClaude.text(["a ", "b ", "c"], { delay: "400 millis" }))
])

/** Shard lock storage that hangs while `down` (as a database that does not answer the lock refresh in time). */
class LockStorage extends Context.Service<LockStorage, {
  readonly fail: Effect.Effect<void>
  readonly heal: Effect.Effect<void>
}>()("test/LockStorage") {}

const FaultyLocks = Layer.effectContext(Effect.gen(function*() {
  const memory = yield* RunnerStorage.makeMemory
  let down = false
  const hangWhileDown = <A, E>(effect: Effect.Effect<A, E>) => Effect.suspend(() => down ? Effect.never : effect)
  const storage = RunnerStorage.RunnerStorage.of({
    ...memory,
    acquire: (address, shardIds) => hangWhileDown(memory.acquire(address, shardIds)),
    refresh: (address, shardIds) => hangWhileDown(memory.refresh(address, shardIds))
  })
  return Context.make(RunnerStorage.RunnerStorage, storage).pipe(
    Context.add(LockStorage, {
      fail: Effect.sync(() => {
        down = true
      }),
      heal: Effect.sync(() => {
        down = false
      })
    })
  )
}))

/** `TestRunner.layer`, with the lock storage above and lock intervals of a fraction of a second. */
const Cluster = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(MessageStorage.layerMemory),
  Layer.provideMerge(FaultyLocks),
  Layer.provide(RunnerHealth.layerNoop),
  Layer.provide(ShardingConfig.layer({
    shardLockRefreshInterval: "300 millis",
    shardLockExpiration: "3 seconds",
    entityMessagePollInterval: "100 millis",
    sendRetryInterval: "50 millis"
  }))
)

const Database = Layer.unwrap(Effect.map(Postgres.Postgres, (server) => PgClient.layer({ url: server.url }))).pipe(
  Layer.provideMerge(Postgres.layer())
)

const Live = ChatsCluster.layer({ capacity: 4, drainTimeout: "10 seconds", finalSaveTimeout: "5 seconds" }).pipe(
  Layer.provideMerge(Cluster),
  Layer.provideMerge(MockTransport.layer(script)),
  Layer.provideMerge(Database)
)

let ids = 0
const freshId = () => `fault-${Date.now().toString(36)}-${ids++}`

/** How many prompts every CLI the mock transport started has been written, in all. */
const promptsWritten = Effect.gen(function*() {
  const connections = yield* (yield* MockTransport.MockTransport).connections
  let count = 0
  for (const connection of connections) {
    count += (yield* connection.written).filter((frame) => (frame as { readonly type?: unknown }).type === "user")
      .length
  }
  return count
})

/** Waits (bounded) until the CLIs have been written `n` prompts in all. */
const awaitPrompts = (n: number) =>
  promptsWritten.pipe(
    Effect.filterOrFail((count) => count >= n, () => "not written yet"),
    Effect.retry(Schedule.spaced("20 millis")),
    Effect.timeout("10 seconds"),
    Effect.orDie
  )

layer(Live, { timeout: 120_000, excludeTestServices: true })("ClusterRegistry under faults", (it) => {
  it.effect("lock storage unhealthy mid-turn: the call fails typed (delivery uncertain), the retry is answered", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const locks = yield* LockStorage
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      const options: ClusterRegistry.SendOptions = { promptId: `p-${id}` }
      const running = yield* Effect.forkChild(Effect.exit(chats.run(id, "slow, three chunks", options)))
      yield* awaitPrompts(before + 1)
      // Sharding misses a lock refresh and force-interrupts the entities of every shard it held.
      yield* locks.fail
      const exit = yield* Fiber.join(running).pipe(Effect.timeout("10 seconds"), Effect.orDie)
      yield* locks.heal
      assert.isTrue(Exit.isFailure(exit), "the turn was cut off")
      if (Exit.isFailure(exit)) {
        const error = Cause.findErrorOption(exit.cause)
        assert.isTrue(error._tag === "Some", `a typed error, not: ${Cause.pretty(exit.cause)}`)
        if (error._tag === "Some") {
          assert.strictEqual(error.value._tag, "SessionRetired")
          assert.isTrue(error.value.deliveryUncertain, "the prompt reached the CLI")
          assert.isTrue(ClusterRegistry.isRunnerLost(error.value))
        }
      }
      // The runner let the turn finish and saved it: the retry is answered from the ledger, not run again.
      const again = yield* chats.run(id, "slow, three chunks", options).pipe(Effect.timeout("30 seconds"))
      assert.strictEqual(again.text, "a b c")
      assert.strictEqual(yield* promptsWritten, before + 1, "the prompt reached a CLI once")
    }))

  it.effect("a caller that interrupts its own call is interrupted, not failed", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      const running = yield* Effect.forkChild(chats.run(id, "slow, three chunks"))
      yield* awaitPrompts(before + 1)
      yield* Fiber.interrupt(running)
      const exit = running.pollUnsafe()
      assert.isDefined(exit)
      if (exit !== undefined) {
        assert.isTrue(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause), String(exit))
      }
      // As in one process, a caller that stops waiting interrupts its turn in the CLI.
      const cli = yield* (yield* MockTransport.MockTransport).latest
      yield* cli.written.pipe(
        Effect.filterOrFail(
          (frames) =>
            frames.some((frame) =>
              (frame as { readonly request?: { readonly subtype?: unknown } }).request?.subtype === "interrupt"
            ),
          () => "no interrupt yet"
        ),
        Effect.retry(Schedule.spaced("20 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
    }))
})
