/**
 * The cluster registry in one process: Effect's `TestRunner` (in-memory sharding, message storage and runner
 * storage) with the registry's own tables in a real PostgreSQL, and sessions of the simulated Claude CLI
 * (`MockTransport`) on the real clock. What needs several processes (a runner SIGKILLed, a drain) is the
 * integration suite's (`test/integration/`).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry } from "@tether/cluster"
import {
  EventLog,
  Permission,
  type Session,
  type SessionEvent,
  SessionRegistry,
  type TetherError,
  Timeouts,
  type Turn
} from "@tether/core"
import { MockClaude, MockTransport, Postgres } from "@tether/testing"
import {
  Cause,
  Context,
  type Duration,
  Effect,
  Exit,
  Fiber,
  Latch,
  Layer,
  Metric,
  Option,
  Redacted,
  Schedule,
  Schema,
  Stream
} from "effect"
import { TestRunner } from "effect/cluster"
import * as SqlClient from "effect/sql/SqlClient"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Client from "../src/internal/client.ts"

const ChatConfig = Schema.Struct({
  model: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Boolean),
  slowSend: Schema.optional(Schema.Boolean)
})
type ChatConfig = typeof ChatConfig.Type

const timeouts = Effect.runSync(Timeouts.make({ closeGrace: "200 millis", termGrace: "200 millis" }))

/** A session whose `send` takes a while before it writes (a slow pipe): a window for a second delivery. */
const slowSend = <A extends Turn.TurnResult, E>(session: Session.Session<A, E>): Session.Session<A, E> => {
  const send: Session.Session<A, E>["send"] = (prompt, options) =>
    Effect.delay(session.send(prompt, options), "500 millis")
  return new Proxy(session, { get: (target, key) => key === "send" ? send : Reflect.get(target, key, target) })
}

/** Tool uses wait for the host's answer when the configuration allows tools, else they are denied. */
class Chats extends SessionRegistry.Service<Chats>()("test/Chats", {
  acquire: (_id, config: ChatConfig) =>
    ClaudeSession.make({
      ...(config.model === undefined ? {} : { model: config.model }),
      timeouts,
      policy: config.tools === true ? () => Effect.succeed(Permission.defer) : Permission.denyAll
    }).pipe(Effect.map((session) => config.slowSend === true ? slowSend(session) : session)),
  fingerprint: SessionRegistry.fingerprint
}) {}

const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })

const script = MockClaude.make([
  MockClaude.when(/^slow/, MockClaude.text(["a ", "b ", "c"], { delay: "300 millis" })),
  MockClaude.when(
    /^deploy/,
    MockClaude.tool({ name: "Bash", input: { command: "make deploy" } }),
    MockClaude.text("done")
  )
])

const Database = Layer.unwrap(Effect.map(Postgres.Postgres, (server) => PgClient.layer({ url: server.url }))).pipe(
  Layer.provideMerge(Postgres.layer())
)

const Live = ChatsCluster.layer({
  capacity: 4,
  idleTimeToLive: "2 seconds",
  durableEvents: true,
  finalSaveTimeout: "1 second"
}).pipe(
  Layer.provideMerge(TestRunner.layer),
  Layer.provideMerge(MockTransport.layer(script)),
  Layer.provideMerge(Database)
)

/**
 * Waits until the runner's registry has closed `id` after its idle TTL (2 s), so that it is dormant: real time, at
 * least the TTL and a margin, then polled (a snapshot does not count as use) for as long as a loaded machine needs.
 */
const dormant = (id: string) =>
  Effect.gen(function*() {
    const chats = yield* Chats
    yield* Effect.sleep("2500 millis")
    yield* chats.snapshot(id).pipe(
      Effect.flatMap(() => Effect.fail("still live")),
      Effect.catchTag("SessionNotFound", () => Effect.void),
      Effect.retry(Schedule.spaced("100 millis")),
      Effect.timeout("20 seconds"),
      Effect.orDie
    )
  })

let ids = 0
const freshId = () => `chat-${Date.now().toString(36)}-${ids++}`

const events = (deliveries: ReadonlyArray<EventLog.Delivery<SessionEvent.SessionEvent>>) =>
  deliveries.flatMap((delivery) => delivery._tag === "Event" ? [delivery.event] : [])

layer(Live, { timeout: 120_000, excludeTestServices: true })("ClusterRegistry", (it) => {
  it.effect("a caller's code is the local registry's: open, run, snapshot, events numbered across the cluster", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const chat = yield* chats.getOrCreate(id, { model: "sonnet" })
          assert.strictEqual(chat.generation, 1)
          const snapshot = yield* chat.snapshot
          assert.strictEqual(snapshot.id, id)
          assert.strictEqual(snapshot.generation, 1)
          assert.strictEqual(snapshot.pins, 1)
          assert.strictEqual((snapshot as ClusterRegistry.ClusterSnapshot).runner, "localhost:34431")
          return yield* chat.run("hello there")
        })
      )
      assert.strictEqual(result.text, "hello there")
      const turn = yield* chats.send(id, "again")
      const deliveries = yield* Stream.runCollect(turn.events)
      assert.deepStrictEqual(events(deliveries).at(-1)?._tag, "TurnCompleted")
      assert.strictEqual((yield* turn.result).text, "again")
      assert.strictEqual(yield* turn.phase, "completed")
      const seqs = deliveries.flatMap((delivery) => delivery._tag === "Event" ? [delivery.seq] : [])
      assert.isTrue(seqs.every((seq, i) => i === 0 || seq === seqs[i - 1] + 1), "consecutive seqs")
      // The runner's metrics carry its address.
      const attributes = { runner: "localhost:34431", registry: "test/Chats" }
      const started = yield* Metric.value(
        Metric.withAttributes(ClusterRegistry.metrics.restores, { ...attributes, previous: "new" })
      )
      assert.isAtLeast(started.count, 1)
      const saves = yield* Metric.value(Metric.withAttributes(ClusterRegistry.metrics.saveDuration, attributes))
      assert.isAtLeast(saves.count, 2, "a save after each turn")
    }))

  it.effect("a session closed on its runner (idle) comes back with the next message: a new generation, resumed", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      const first = yield* chats.run(id, "x").pipe(Effect.flip)
      assert.strictEqual(first._tag, "SessionNotFound", "a session is opened before it is used")
      yield* Effect.scoped(Effect.flatMap(chats.getOrCreate(id, {}), (chat) => chat.run("one")))
      const before = yield* chats.snapshot(id)
      // The runner's registry closes it after its idle TTL (2 s): it is dormant, not gone.
      yield* dormant(id)
      const gone = yield* Effect.flip(chats.snapshot(id))
      assert.strictEqual(gone._tag, "SessionNotFound")
      const result = yield* chats.run(id, "two")
      assert.strictEqual(result.text, "two")
      const after = yield* chats.snapshot(id)
      assert.strictEqual(after.generation, before.generation + 1)
      const cli = yield* (yield* MockTransport.MockTransport).latest
      assert.include(cli.spec.args, `--resume=${before.sessionId}`, "the conversation is resumed")
      assert.match(String(cli.spec.env.set["CLAUDE_CONFIG_DIR"]), /tether-cluster-/)
    }))

  it.effect("the same configuration is the same session; another one is a conflict, or a new conversation", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, { model: "a" }))
      const conflict = yield* Effect.flip(Effect.scoped(chats.getOrCreate(id, { model: "b" })))
      assert.strictEqual(conflict._tag, "SessionConflict")
      const replaced = yield* Effect.scoped(
        Effect.map(chats.getOrCreate(id, { model: "b" }, { onConflict: "replace" }), (chat) => chat.generation)
      )
      assert.strictEqual(replaced, 2)
      const cli = yield* (yield* MockTransport.MockTransport).latest
      assert.notInclude(cli.spec.args.join(" "), "--resume", "a replaced configuration starts a new conversation")
    }))

  it.effect("a handle acts on its own generation only; evict ends the session for good", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      const handle = yield* Effect.scoped(chats.getOrCreate(id, {}))
      yield* chats.evict(id)
      const stale = yield* Effect.flip(handle.run("hi"))
      assert.strictEqual(stale._tag, "GenerationChanged")
      assert.isTrue(stale.safeToRequeue)
      const missing = yield* Effect.flip(chats.run(id, "hi"))
      assert.strictEqual(missing._tag, "SessionNotFound", "an evicted session is not restored")
      const next = yield* Effect.scoped(Effect.map(chats.getOrCreate(id, {}), (chat) => chat.generation))
      assert.strictEqual(next, 2)
    }))

  it.effect("permission ids name their generation: an answer for a generation that is gone is GenerationChanged", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, { tools: true }))
      const turn = yield* chats.send(id, "deploy now")
      const requested = yield* turn.events.pipe(
        Stream.flatMap((delivery) =>
          delivery._tag === "Event" && delivery.event._tag === "PermissionRequested"
            ? Stream.succeed(delivery.event.request)
            : Stream.empty
        ),
        Stream.runHead,
        Effect.map(Option.getOrThrow)
      )
      assert.match(requested.requestId, /^1\//, "the generation, a slash, the CLI's id")
      const pending = yield* chats.pendingPermissions(id)
      assert.deepStrictEqual(pending.map((request) => request.requestId), [requested.requestId])
      const stale = yield* Effect.flip(
        chats.answerPermission(id, `7/${requested.requestId.slice(2)}`, Permission.allow())
      )
      assert.strictEqual(stale._tag, "GenerationChanged")
      yield* chats.answerPermission(id, requested.requestId, Permission.allow())
      assert.strictEqual((yield* turn.result).text, "done")
    }))

  it.effect("a send the cluster delivers again is answered from the ledger: the prompt reaches the CLI once", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const sql = yield* SqlClient.SqlClient
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      yield* chats.run(id, "first")
      // A prompt the ledger has as dispatched by a generation that is gone (its runner died mid-turn).
      yield* sql`INSERT INTO tether_turns (entity_type, id, prompt_id, generation, state)
        VALUES (${ChatsCluster.entityType}, ${id}, 'lost-prompt', 0, 'dispatched')`
      const options: ClusterRegistry.SendOptions = { promptId: "lost-prompt" }
      const lost = yield* Effect.flip(chats.run(id, "again", options))
      assert.strictEqual(lost._tag, "SessionRetired")
      assert.isTrue(lost.deliveryUncertain)
      assert.isTrue(ClusterRegistry.isRunnerLost(lost))
      const cli = yield* (yield* MockTransport.MockTransport).latest
      const prompts = (yield* cli.written).filter((frame: any) => frame?.type === "user")
      assert.strictEqual(prompts.length, 1, "only the first prompt was written")
    }))

  it.effect("durable events: a subscriber from an old seq gets the saved events, then the live ones", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      yield* chats.run(id, "one")
      const snapshotOne = yield* chats.snapshot(id)
      yield* dormant(id) // idle: dormant, saved
      yield* chats.run(id, "two")
      const snapshotTwo = yield* chats.snapshot(id)
      assert.strictEqual(snapshotTwo.generation, snapshotOne.generation + 1)
      const deliveries = yield* Effect.scoped(
        Effect.flatMap(chats.subscribe(id, "start"), (stream) =>
          stream.pipe(
            Stream.takeUntil((delivery) =>
              delivery._tag === "Event" && delivery.event._tag === "TurnCompleted" &&
              (delivery.event.result as { readonly text: string }).text === "two"
            ),
            Stream.runCollect,
            Effect.timeout("10 seconds")
          ))
      )
      const texts = events(deliveries).flatMap((event) => event._tag === "TurnCompleted" ? [event.result.text] : [])
      assert.deepStrictEqual(texts, ["one", "two"], "the first generation's turn came from the database")
      assert.isFalse(deliveries.some((delivery) => delivery._tag === "Lag"), "a clean close leaves no gap")
    }))
})

layer(Live, { timeout: 120_000, excludeTestServices: true })("ClusterRegistry (failures)", (it) => {
  it.effect("a second delivery of a prompt that is still being sent joins its turn: not reported lost", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, { slowSend: true }))
      for (let i = 0; i < 3; i++) {
        const options: ClusterRegistry.SendOptions = { promptId: `twice-${i}` }
        const both = yield* Effect.all([
          Effect.exit(chats.run(id, `prompt ${i}`, options)),
          Effect.exit(chats.run(id, `prompt ${i}`, options))
        ], { concurrency: 2 })
        for (const exit of both) {
          assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
        }
      }
      const cli = yield* (yield* MockTransport.MockTransport).latest
      const prompts = (yield* cli.written).filter((frame: any) => frame?.type === "user")
      assert.strictEqual(prompts.length, 3, "each prompt was written once")
    }))

  it.effect("retrying a send or a run effect retries the same prompt id: the ledger answers, the CLI gets it once", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const send = chats.send(id, "sent once")
      const first = yield* send
      yield* first.result
      const again = yield* send
      assert.strictEqual(again.id, first.id)
      const run = chats.run(id, "run once")
      assert.strictEqual((yield* run).text, (yield* run).text)
      const cli = yield* (yield* MockTransport.MockTransport).latest
      const prompts = (yield* cli.written).filter((frame: any) => frame?.type === "user")
      assert.strictEqual(prompts.length, 2)
    }))

  it.effect("the last save of a closing session is bounded: a database that hangs does not hang the eviction", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const sql = yield* SqlClient.SqlClient
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      yield* chats.run(id, "one")
      const failures = Metric.withAttributes(ClusterRegistry.metrics.saveFailures, {
        runner: "localhost:34431",
        registry: "test/Chats"
      })
      const before = (yield* Metric.value(failures)).count
      // The session's record stays locked (as by a database that hangs) for 6 seconds.
      const locked = yield* Latch.make()
      const holder = yield* Effect.forkChild(sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT * FROM tether_sessions WHERE id = ${id} FOR UPDATE`
        yield* locked.open
        yield* Effect.sleep("6 seconds")
      })))
      yield* locked.await
      const evicting = yield* Effect.forkChild(chats.evict(id))
      const recorded = yield* Metric.value(failures).pipe(
        Effect.filterOrFail((value) => value.count > before, () => "no save failure yet"),
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("20 seconds"),
        Effect.orDie
      )
      assert.strictEqual(recorded.count, before + 1)
      assert.isUndefined(
        holder.pollUnsafe(),
        "the last save gave up after finalSaveTimeout (1 s), with the database still locked (6 s)"
      )
      yield* Fiber.join(holder)
      yield* Fiber.join(evicting).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual((yield* Effect.flip(chats.snapshot(id)))._tag, "SessionNotFound")
    }))

  it.effect("a database that refuses the runner: the layers fail (and calls fail) typed, not as defects", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const server = yield* Postgres.Postgres
      // A role that may neither create tables (PostgreSQL 15+: not in `public`) nor read the registry's.
      yield* sql`DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tether_ro') THEN
          CREATE ROLE tether_ro LOGIN PASSWORD 'tether_ro';
        END IF;
      END $$`
      const url = Redacted.value(server.url).replace(/\/\/[^@]*@/, "//tether_ro:tether_ro@")
      const Refused = PgClient.layer({ url: Redacted.make(url) })
      const runner = yield* Effect.exit(Effect.scoped(Layer.build(
        ChatsCluster.layerRunner({ tablePrefix: "tether_refused" }).pipe(
          Layer.provide(TestRunner.layer),
          Layer.provide(MockTransport.layer(script)),
          Layer.provide(Refused)
        )
      )))
      assert.isTrue(Exit.isFailure(runner))
      if (Exit.isFailure(runner)) {
        const error = Cause.findErrorOption(runner.cause)
        assert.isTrue(Option.isSome(error), `a typed failure, not a defect: ${Cause.pretty(runner.cause)}`)
      }
      const unavailable = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(
          ChatsCluster.layerClient().pipe(Layer.provide(TestRunner.layer), Layer.provide(Refused))
        )
        const chats = Context.get(context, Chats)
        return [yield* Effect.flip(chats.list), yield* Effect.flip(chats.size)]
      }))
      assert.deepStrictEqual(unavailable.map((error) => error._tag), ["SessionUnavailable", "SessionUnavailable"])
    }))

  it.effect("a runner with a state directory sweeps what a runner killed there left, and nothing else", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-state-test-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
      // What a runner SIGKILLed with sessions left: its directory, named after its pid, which no process has now.
      const gone = ChildProcess.spawnSync(process.execPath, ["-e", "process.pid"]).pid!
      const left = Path.join(root, `tether-cluster-${gone}-0123abcd`, "chat-1-g1", "projects")
      Fs.mkdirSync(left, { recursive: true })
      Fs.writeFileSync(Path.join(root, "keep.txt"), "the host's own file")
      const swept = yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(
          ChatsCluster.layerRunner({ stateDirectory: root, tablePrefix: "tether_state" }).pipe(
            Layer.provide(TestRunner.layer),
            Layer.provide(MockTransport.layer(script)),
            Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))
          )
        )
        return Fs.readdirSync(root)
      }))
      assert.deepStrictEqual(swept, ["keep.txt"], "the dead runner's directory is gone, the host's file is not")
    }))

  it.effect("infinite admission and eviction timeouts mean what they mean locally: wait as long as it takes", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      const result = yield* Effect.scoped(
        Effect.flatMap(chats.getOrCreate(id, {}, { admissionTimeout: "Infinity" }), (chat) => chat.run("unbounded"))
      )
      assert.strictEqual(result.text, "unbounded")
      yield* chats.evict(id, { timeout: "Infinity" })
      assert.strictEqual((yield* Effect.flip(chats.snapshot(id)))._tag, "SessionNotFound")
    }))

  it.effect("a negative eviction timeout is no time, as locally: the running turn is interrupted at once", () =>
    Effect.gen(function*() {
      const chats = yield* Chats
      const id = freshId()
      yield* Effect.scoped(chats.getOrCreate(id, {}))
      const turn = yield* chats.send(id, "slow, three chunks 300 ms apart")
      const result = yield* Effect.forkChild(Effect.flip(turn.result))
      yield* chats.evict(id, { timeout: "-Infinity" })
      const failure = yield* Fiber.join(result)
      assert.strictEqual(failure._tag, "TurnInterrupted")
      assert.strictEqual((failure as { readonly reason?: string }).reason, "evicted")
    }))

  it.effect("a runner's drain and final-save timeouts that are not positive durations: InvalidConfig, not a defect", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const error = yield* Effect.flip(Effect.scoped(Layer.build(
        ChatsCluster.layerRunner({ drainTimeout: "soon" as Duration.Input, finalSaveTimeout: 0 }).pipe(
          Layer.provide(TestRunner.layer),
          Layer.provide(MockTransport.layer(script)),
          Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))
        )
      )))
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.deepStrictEqual((error as TetherError.InvalidConfig).problems, [
        "drainTimeout must be a non-negative duration, got soon",
        "finalSaveTimeout must be a positive duration, got 0"
      ])
    }))
})

describe("ClusterRegistry client errors", () => {
  // Every failure of the cluster's own, RpcClientError above all: the socket to the runner broke after the request
  // was written, so the runner may have it.
  const transport = [
    "MailboxFull",
    "AlreadyProcessingMessage",
    "PersistenceError",
    "EntityNotAssignedToRunner",
    "RunnerUnavailable",
    "RpcClientError"
  ]

  it("a send (or the wait for its turn) that the cluster fails may have been delivered: runner lost", () => {
    for (const _tag of transport) {
      const error = Client.fromCall("chat-1", { promptId: "p-1" })({ _tag })
      assert.strictEqual(error._tag, "SessionRetired", _tag)
      assert.isTrue(error.deliveryUncertain, _tag)
      assert.isFalse(error.safeToRequeue, _tag)
      assert.isTrue(ClusterRegistry.isRunnerLost(error), _tag)
      assert.include(error.message, "p-1", "names the prompt id to retry with")
    }
  })

  it("any other call that the cluster fails delivered nothing: unavailable, safe to requeue", () => {
    for (const _tag of transport) {
      const error = Client.fromCall("chat-1")({ _tag })
      assert.strictEqual(error._tag, "SessionUnavailable", _tag)
      assert.isTrue(error.safeToRequeue, _tag)
    }
  })
})

describe("ClusterRegistry client outcomes", () => {
  it("an interrupt that reaches a call is its runner's: runner lost for a send, unavailable for the rest", () => {
    const interrupted = Cause.interrupt(42)
    const lost = Cause.findErrorOption(Client.causeOfCall("chat-1", { promptId: "p-1" })(interrupted))
    assert.isTrue(Option.isSome(lost) && ClusterRegistry.isRunnerLost(lost.value), String(lost))
    assert.isTrue(Option.isSome(lost) && (lost.value as TetherError.SessionRetired).deliveryUncertain)
    const unavailable = Cause.findErrorOption(Client.causeOfCall("chat-1")(interrupted))
    assert.isTrue(Option.isSome(unavailable) && unavailable.value._tag === "SessionUnavailable", String(unavailable))
  })

  it("a defect that is the cluster's own error is typed; any other defect stays a defect", () => {
    const undelivered = Cause.die({ _tag: "RunnerUnavailable", address: "10.0.0.1:1" })
    const lost = Cause.findErrorOption(Client.causeOfCall("chat-1", { promptId: "p-1" })(undelivered))
    assert.isTrue(Option.isSome(lost) && ClusterRegistry.isRunnerLost(lost.value), String(lost))
    const bug = Cause.die(new Error("a bug"))
    const kept = Client.causeOfCall("chat-1")(bug)
    assert.isTrue(Cause.hasDies(kept) && !Cause.hasFails(kept))
  })

  it("a typed error of the session is the session's, whatever else the cause holds", () => {
    const cause = Cause.combine(Cause.fail(new SessionRegistry.SessionNotFound({ id: "chat-1" })), Cause.interrupt(1))
    const error = Cause.findErrorOption(Client.causeOfCall("chat-1", { promptId: "p-1" })(cause))
    assert.isTrue(Option.isSome(error) && error.value._tag === "SessionNotFound", String(error))
  })
})

describe("ClusterRegistry.isGap", () => {
  it("tells a cluster gap from a plain lag", () => {
    assert.isTrue(ClusterRegistry.isGap({ _tag: "Lag", missed: 3, resumeSeq: 9, reason: "lost" } as EventLog.Lag))
    assert.isFalse(ClusterRegistry.isGap({ _tag: "Lag", missed: 3, resumeSeq: 9 }))
  })
})
