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
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry } from "@tether/cluster"
import { Permission, SessionRegistry, Timeouts } from "@tether/core"
import { MockClaude, MockTransport, Postgres } from "@tether/testing"
import {
  Cause,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Metric,
  Option,
  Redacted,
  Schedule,
  Schema,
  Stream
} from "effect"
import { MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "effect/cluster"
import * as SqlClient from "effect/sql/SqlClient"
import * as Net from "node:net"
import * as Lease from "../src/internal/lease.ts"

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
  MockClaude.when(/^slow/, MockClaude.text(["a ", "b ", "c"], { delay: "800 millis" })),
  // For the tests that need the lock refresh to cut a turn off before it ends: 6 s leaves a loaded machine's refresh
  // (300 ms intervals, a few retries) ample time.
  MockClaude.when(/^glacial/, MockClaude.text(["a ", "b ", "c"], { delay: "2 seconds" }))
])

/**
 * Shard lock storage of one runner that hangs while `down` (as a database that does not answer the lock refresh in
 * time). It keeps the set of locks held, as a database does (Effect's in-memory storage remembers only the last
 * `acquire`, so after a partial re-acquisition its refresh would report every other shard lost).
 */
class LockStorage extends Context.Service<LockStorage, {
  readonly fail: Effect.Effect<void>
  readonly heal: Effect.Effect<void>
}>()("test/LockStorage") {}

const FaultyLocks = Layer.effectContext(Effect.gen(function*() {
  const memory = yield* RunnerStorage.makeMemory
  const held = new Set<string>()
  let down = false
  const whileUp = <A>(f: () => A) => Effect.suspend(() => down ? Effect.never : Effect.sync(f))
  const storage = RunnerStorage.RunnerStorage.of({
    ...memory,
    acquire: (_address, shardIds) =>
      whileUp(() => {
        const acquired = Array.from(shardIds)
        for (const shardId of acquired) held.add(shardId.toString())
        return acquired
      }),
    refresh: (_address, shardIds) => whileUp(() => Array.from(shardIds).filter((id) => held.has(id.toString()))),
    release: (_address, shardId) => whileUp(() => void held.delete(shardId.toString())),
    releaseAll: () => whileUp(() => held.clear())
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

/** The runners' link to the database: `cut` resets every connection and refuses new ones (a database stopped). */
class DatabaseLink extends Context.Service<DatabaseLink, {
  readonly cut: Effect.Effect<void>
  readonly restore: Effect.Effect<void>
}>()("test/DatabaseLink") {}

/** A TCP proxy on 127.0.0.1 in front of the real PostgreSQL, through which every connection of the test goes. */
const proxy = (port: number) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; down: boolean }>((resume) => {
      const state = { server: Net.createServer(), sockets: new Set<Net.Socket>(), down: false }
      state.server.on("connection", (client) => {
        if (state.down) return void client.destroy()
        const upstream = Net.connect(port, "127.0.0.1")
        for (const socket of [client, upstream]) {
          state.sockets.add(socket)
          socket.on("close", () => state.sockets.delete(socket))
          socket.on("error", () => undefined)
        }
        client.pipe(upstream)
        upstream.pipe(client)
        client.on("close", () => upstream.destroy())
        upstream.on("close", () => client.destroy())
      })
      state.server.listen(0, "127.0.0.1", () => resume(Effect.succeed(state)))
    }),
    (state) =>
      Effect.callback<void>((resume) => {
        for (const socket of state.sockets) socket.destroy()
        state.server.close(() => resume(Effect.void))
      })
  )

const Database = Layer.unwrap(Effect.gen(function*() {
  const server = yield* Postgres.Postgres
  const link = yield* proxy(server.port)
  const port = (link.server.address() as Net.AddressInfo).port
  const url = Redacted.value(server.url).replace(`@127.0.0.1:${server.port}/`, `@127.0.0.1:${port}/`)
  return Layer.merge(
    PgClient.layer({ url: Redacted.make(url) }),
    Layer.succeed(DatabaseLink, {
      cut: Effect.sync(() => {
        link.down = true
        for (const socket of link.sockets) socket.destroy()
      }),
      restore: Effect.sync(() => {
        link.down = false
      })
    })
  )
})).pipe(Layer.provideMerge(Postgres.layer()))

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
      const running = yield* Effect.forkChild(Effect.exit(chats.run(id, "glacial, three chunks", options)))
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
      const again = yield* chats.run(id, "glacial, three chunks", options).pipe(Effect.timeout("30 seconds"))
      assert.strictEqual(again.text, "a b c")
      assert.strictEqual(yield* promptsWritten, before + 1, "the prompt reached a CLI once")
    }))

  it.effect("lock storage unhealthy mid-turn: a sent turn's result and its events fail typed too", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const locks = yield* LockStorage
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      const turn = yield* chats.send(id, "glacial, three chunks")
      const result = yield* Effect.forkChild(Effect.exit(turn.result))
      const events = yield* Effect.forkChild(Effect.exit(Stream.runDrain(turn.events)))
      yield* awaitPrompts(before + 1)
      yield* locks.fail
      const [resultExit, eventsExit] = yield* Effect.all([Fiber.join(result), Fiber.join(events)]).pipe(
        Effect.timeout("10 seconds"),
        Effect.ensuring(locks.heal),
        Effect.orDie
      )
      const resultError = Exit.isFailure(resultExit) ? Cause.findErrorOption(resultExit.cause) : Option.none()
      assert.isTrue(
        Option.isSome(resultError) && ClusterRegistry.isRunnerLost(resultError.value),
        `the wait for a turn may follow its delivery: ${String(resultExit)}`
      )
      // The turn's events may have ended with the turn (it finishes in the drain); if they were cut off, typed (the
      // contract's type says ReplayUnavailable only: the cluster's own failure is a SessionUnavailable).
      const eventsError = Exit.isFailure(eventsExit) ? Cause.findErrorOption(eventsExit.cause) : Option.none()
      assert.isTrue(
        Exit.isSuccess(eventsExit) ||
          (Option.isSome(eventsError) &&
            (eventsError.value as { readonly _tag: string })._tag === "SessionUnavailable"),
        String(eventsExit)
      )
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
      // As in one process, a caller that stops waiting interrupts its turn: the CLI is asked to interrupt it, or,
      // when it had not acknowledged the prompt yet, the session is retired (its CLI goes).
      const cli = yield* (yield* MockTransport.MockTransport).latest
      const interrupted = Effect.map(
        cli.written,
        (frames) =>
          frames.some((frame) =>
            (frame as { readonly request?: { readonly subtype?: unknown } }).request?.subtype === "interrupt"
          )
      )
      yield* Effect.all([interrupted, cli.isAlive]).pipe(
        Effect.filterOrFail(([asked, alive]) => asked || !alive, () => "the turn goes on"),
        Effect.retry(Schedule.spaced("20 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
    }))

  it.effect("a runner whose save is fenced (another runner owns the session) stops serving it: its CLI goes", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const sql = yield* SqlClient.SqlClient
      const transport = yield* MockTransport.MockTransport
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const cli = yield* transport.latest
      const before = yield* promptsWritten
      const running = yield* Effect.forkChild(chats.run(id, "slow, three chunks"))
      yield* awaitPrompts(before + 1)
      // Another runner begins the session's next generation while this one runs a turn (as after a partition).
      yield* sql`UPDATE tether_sessions SET generation = generation + 1
        WHERE entity_type = ${ChatsCluster.entityType} AND id = ${id}`
      // A send meanwhile is refused by the ledger, naming the generation that is live now (not this runner's).
      const stale = yield* Effect.flip(chats.run(id, "while fenced off"))
      assert.strictEqual(stale._tag, "GenerationChanged")
      assert.strictEqual(stale.message, `session ${id} is no longer generation 1 (it is generation 2)`)
      // The turn ends in the CLI; saving it is fenced, and this generation must not go on.
      yield* Fiber.join(running).pipe(Effect.timeout("10 seconds"), Effect.ignore)
      yield* cli.isAlive.pipe(
        Effect.filterOrFail((alive) => !alive, () => "still alive"),
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
      // The next message starts a generation above the other runner's, in a CLI of its own.
      const after = yield* chats.run(id, "after the fence").pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(after.text, "after the fence")
      const fencedPrompts = (yield* cli.written).filter((frame) =>
        (frame as { readonly type?: unknown }).type === "user"
      )
      assert.strictEqual(fencedPrompts.length, 1, "the fenced CLI got no prompt after its fence")
      assert.notStrictEqual((yield* transport.latest).index, cli.index)
    }))

  it.effect("a runner past its host lease writes no prompt: the send fails typed, safe to requeue", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      // The runner's lease ran out (frozen, or cut off from the database, past its locks' expiry): its keeper ends its
      // CLIs, and the prompt must not reach one.
      const options: ClusterRegistry.SendOptions = { promptId: `p-${id}` }
      const refused = yield* Effect.scoped(Effect.gen(function*() {
        yield* Lease.hold(Duration.zero)
        return yield* Effect.flip(chats.run(id, "past the lease", options))
      }))
      assert.strictEqual(refused._tag, "SessionUnavailable")
      assert.strictEqual(yield* promptsWritten, before, "no prompt was written past the lease")
      // Renewed (or gone): the retry with the same prompt id is sent, once.
      const after = yield* chats.run(id, "past the lease", options).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(after.text, "past the lease")
      assert.strictEqual(yield* promptsWritten, before + 1)
    }))

  it.effect("a redelivered prompt that an earlier generation's live runner is still finishing is answered, not lost", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const sql = yield* SqlClient.SqlClient
      const transport = yield* MockTransport.MockTransport
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const cli = yield* transport.latest
      const before = yield* promptsWritten
      const running = yield* Effect.forkChild(
        chats.run(id, "slow, three chunks", { promptId: `done-${id}` } as ClusterRegistry.SendOptions)
      )
      yield* awaitPrompts(before + 1)
      // Another runner begins generation 2 (this one's save is fenced, and it lets the session go) and is running the
      // prompt `p-<id>` when the cluster delivers that prompt again here: this runner begins generation 3.
      yield* sql`UPDATE tether_sessions SET generation = generation + 1
        WHERE entity_type = ${ChatsCluster.entityType} AND id = ${id}`
      const done = yield* Fiber.join(running).pipe(Effect.timeout("10 seconds"), Effect.orDie)
      yield* cli.isAlive.pipe(
        Effect.filterOrFail((alive) => !alive, () => "still alive"),
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
      yield* sql`INSERT INTO tether_turns (entity_type, id, prompt_id, generation, state)
        VALUES (${ChatsCluster.entityType}, ${id}, ${`p-${id}`}, 2, 'dispatched')`
      const redelivered = yield* Effect.forkChild(
        Effect.exit(chats.run(id, "again", { promptId: `p-${id}` } as ClusterRegistry.SendOptions))
      )
      // The other runner finishes the turn a second later and writes its outcome (as a draining runner does).
      yield* Effect.sleep("1 second")
      yield* sql`UPDATE tether_turns SET state = 'completed', turn_id = 'other-turn', outcome = (
          SELECT outcome FROM tether_turns WHERE entity_type = ${ChatsCluster.entityType} AND id = ${id}
            AND prompt_id = ${`done-${id}`})
        WHERE entity_type = ${ChatsCluster.entityType} AND id = ${id} AND prompt_id = ${`p-${id}`}`
      const exit = yield* Fiber.join(redelivered).pipe(Effect.timeout("20 seconds"), Effect.orDie)
      assert.isTrue(
        Exit.isSuccess(exit),
        `the turn's outcome, not: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""}`
      )
      if (Exit.isSuccess(exit)) assert.strictEqual(exit.value.text, done.text)
      assert.strictEqual(yield* promptsWritten, before + 1, "the redelivered prompt reached no CLI here")
    }))

  it.effect("a turn that completes while the database is down is saved when it returns: the retry is answered", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const locks = yield* LockStorage
      const database = yield* DatabaseLink
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      const attributes = { runner: "localhost:34431", registry: "test/FaultChats" }
      const failures = Metric.withAttributes(ClusterRegistry.metrics.saveFailures, attributes)
      const failed = (yield* Metric.value(failures)).count
      const options: ClusterRegistry.SendOptions = { promptId: `p-${id}` }
      const running = yield* Effect.forkChild(Effect.exit(chats.run(id, "glacial, three chunks", options)))
      yield* awaitPrompts(before + 1)
      // The database stops: the runner's lock refresh times out (its entities are torn down) and its saves fail.
      yield* database.cut
      yield* locks.fail
      const exit = yield* Fiber.join(running).pipe(Effect.timeout("10 seconds"), Effect.orDie)
      assert.isTrue(Exit.isFailure(exit) && Option.isSome(Cause.findErrorOption(exit.cause)), String(exit))
      // The turn finished in its CLI during the drain, and the runner let every session go (the lock storage's
      // outage took all its shards): once none is left, their last saves are over, and they failed.
      yield* Metric.value(Metric.withAttributes(ClusterRegistry.metrics.sessions, attributes)).pipe(
        Effect.filterOrFail((gauge) => gauge.value === 0, () => "sessions left"),
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("30 seconds"),
        Effect.orDie
      )
      assert.isAtLeast((yield* Metric.value(failures)).count, failed + 2, "the turn's save and the last one failed")
      yield* database.restore
      yield* locks.heal
      const again = yield* chats.run(id, "glacial, three chunks", options).pipe(Effect.timeout("30 seconds"))
      assert.strictEqual(again.text, "a b c", "the completed turn is answered from the ledger")
      assert.strictEqual(yield* promptsWritten, before + 1, "the prompt reached a CLI once")
    }))

  it.effect("a turn's save that failed while the database was down is written when it returns, with no next turn", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const sql = yield* SqlClient.SqlClient
      const database = yield* DatabaseLink
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const before = yield* promptsWritten
      const promptId = `p-${id}`
      const options: ClusterRegistry.SendOptions = { promptId }
      const running = yield* Effect.forkChild(chats.run(id, "slow, three chunks", options))
      yield* awaitPrompts(before + 1)
      yield* database.cut
      // Only the registry's database is down here, not the cluster's locks: the caller gets its result.
      const result = yield* Fiber.join(running).pipe(Effect.timeout("30 seconds"))
      assert.strictEqual(result.text, "a b c")
      yield* database.restore
      const state = sql<{ readonly state: string }>`SELECT state FROM tether_turns
        WHERE entity_type = ${ChatsCluster.entityType} AND id = ${id} AND prompt_id = ${promptId}`
      const saved = yield* state.pipe(
        Effect.filterOrFail((rows) => rows[0]?.state === "completed", () => "not in the ledger yet"),
        Effect.retry(Schedule.spaced("100 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
      assert.strictEqual(saved[0].state, "completed", "the session is still live, and its turn is in the ledger")
      assert.isTrue((yield* chats.snapshot(id)).generation === 1)
    }))

  it.effect("with a callTimeout, calls that no runner can serve fail typed at the deadline instead of waiting", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const locks = yield* LockStorage
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const cluster = yield* Effect.context<Sharding.Sharding | SqlClient.SqlClient>()
      const context = yield* Layer.build(
        ChatsCluster.layerClient({ callTimeout: "1 second" }).pipe(Layer.provide(Layer.succeedContext(cluster)))
      )
      const bounded = Context.get(context, Chats)
      // Every shard lock in doubt: the runner holds no shard until its lock storage answers again.
      yield* locks.fail
      // Answered until the runner's next lock refresh times out (within two lock intervals), then held.
      const snapshot = yield* Effect.flip(bounded.snapshot(id)).pipe(
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("10 seconds"),
        Effect.orDie
      )
      const [opened, sent] = yield* Effect.all([
        Effect.flip(Effect.scoped(bounded.getOrCreate(freshId(), {}))),
        Effect.flip(bounded.send(id, "during the outage", { promptId: `p-${id}` } as ClusterRegistry.SendOptions))
      ], { concurrency: "unbounded" }).pipe(Effect.timeout("10 seconds"), Effect.ensuring(locks.heal))
      assert.strictEqual(snapshot._tag, "SessionUnavailable")
      assert.isTrue(snapshot.safeToRequeue)
      assert.include(snapshot.message, "no answer within 1s")
      assert.strictEqual(opened._tag, "SessionUnavailable")
      assert.isTrue(ClusterRegistry.isRunnerLost(sent), "a send's prompt may have reached a runner")
      assert.include(sent.message, "no answer within 1s")
    }))

  it.effect("a callTimeout does not bound a turn's outcome: a turn longer than it completes and is read", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const cluster = yield* Effect.context<Sharding.Sharding | SqlClient.SqlClient>()
      const context = yield* Layer.build(
        ChatsCluster.layerClient({ callTimeout: "1 second" }).pipe(Layer.provide(Layer.succeedContext(cluster)))
      )
      const bounded = Context.get(context, Chats)
      // The slow turn streams for 2.4 s: more than the callTimeout, well within the turn's own deadline.
      const turn = yield* bounded.send(id, "slow, longer than the call timeout")
      const result = yield* turn.result.pipe(Effect.timeout("20 seconds"), Effect.orDie)
      assert.strictEqual(result.text, "a b c")
      const settled = yield* turn.settled
      assert.isTrue(Exit.isSuccess(settled))
    }))

  it.effect("a callTimeout that is not a positive duration is InvalidConfig", () =>
    Effect.gen(function*() {
      const cluster = yield* Effect.context<Sharding.Sharding | SqlClient.SqlClient>()
      const error = yield* Effect.flip(Effect.scoped(Layer.build(
        ChatsCluster.layerClient({ callTimeout: 0 }).pipe(Layer.provide(Layer.succeedContext(cluster)))
      )))
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.deepStrictEqual(error.problems, ["callTimeout must be a positive duration, got 0"])
    }))
})
