/**
 * Warm pools on the cluster's runners, in one process, on the TestClock: Effect's `TestRunner` (in-memory sharding)
 * per node, the registry's tables in a real PostgreSQL shared by the nodes, and sessions of the simulated Claude CLI
 * (`MockTransport`, whose connections count the CLIs a node spawned). The simulated CLI keeps no transcript: a test
 * writes the conversation's file where the CLI's `CLAUDE_CONFIG_DIR` points, while its turn runs, as the real CLI
 * does.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, layer } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry } from "@tether/cluster"
import { Permission, SessionRegistry, Timeouts } from "@tether/core"
import { MockClaude, MockTransport, Postgres } from "@tether/testing"
import { Context, Deferred, type Duration, Effect, Exit, Fiber, Layer, Schema, Scope } from "effect"
import { TestRunner } from "effect/cluster"
import * as SqlClient from "effect/sql/SqlClient"
import { TestClock } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Store from "../src/internal/store.ts"

const ChatConfig = Schema.Struct({ model: Schema.optional(Schema.String) })
type ChatConfig = typeof ChatConfig.Type

const timeouts = Effect.runSync(Timeouts.make({ closeGrace: "200 millis", termGrace: "200 millis" }))

class Chats extends SessionRegistry.Service<Chats>()("test/WarmChats", {
  acquire: (_id, config: ChatConfig) =>
    ClaudeSession.make({
      ...(config.model === undefined ? {} : { model: config.model }),
      timeouts,
      policy: Permission.denyAll
    }),
  fingerprint: SessionRegistry.fingerprint
}) {}

const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })

// A turn that waits on the clock: the test writes the conversation's file while it runs.
const script = MockClaude.make([MockClaude.when(/^slow/, MockClaude.text(["a ", "b"], { delay: "1 second" }))])

const Database = Layer.unwrap(Effect.map(Postgres.Postgres, (server) => PgClient.layer({ url: server.url }))).pipe(
  Layer.provideMerge(Postgres.layer())
)

const prefix = "tether_warm"

/** A directory for a node's `stateDirectory`, removed with the test. */
const stateRoot = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-warm-test-"))),
  (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
)

/**
 * A node (a runner and its client, or a client alone) with its own sharding and simulated CLIs, on the shared
 * database, built in a scope the test closes (the node's shutdown).
 */
const node = (settings: ClusterRegistry.RunnerSettings<ChatConfig> | "client-only") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const scope = yield* Scope.make()
    // A test that fails closes the node too, moving the clock (a second at a time: past any drain's bounds) until it
    // is closed. Closing it twice is closing it once.
    yield* Effect.addFinalizer(() => settle(Scope.close(scope, Exit.void), { step: "1 second", steps: 120 }))
    const registry = settings === "client-only"
      ? ChatsCluster.layerClient({ tablePrefix: prefix })
      : ChatsCluster.layer({ tablePrefix: prefix, capacity: 3, warmRefillDelay: "1 second", ...settings })
    const context = yield* Layer.build(
      registry.pipe(
        Layer.provideMerge(TestRunner.layer),
        Layer.provideMerge(MockTransport.layer(script)),
        Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))
      )
    ).pipe(Scope.provide(scope))
    return { chats: Context.get(context, Chats), clis: Context.get(context, MockTransport.MockTransport), scope }
  })

const ready = (chats: Chats["Service"]) =>
  Effect.map(chats.pools, (pools) => pools.reduce((total, pool) => total + pool.ready, 0))

const spawned = (clis: MockTransport.MockTransport["Service"]) => Effect.map(clis.connections, (all) => all.length)

const configDir = (cli: MockTransport.MockConnection) => String(cli.spec.env.set["CLAUDE_CONFIG_DIR"])

const transcript = (directory: string, conversationId: string) =>
  Path.join(directory, "projects", "mock", `${conversationId}.jsonl`)

/** A pause of the real clock, for the database and the file system to answer between two steps of the TestClock. */
const breathe = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 5)))

/**
 * Moves the clock 10 ms at a time until `condition` holds; fails the test after 60 s of the clock. Each step also
 * waits 5 ms of real time: the database and the disk answer in real time, and the runner's bounds on them (a turn's
 * wait for its save, the last save's `finalSaveTimeout`) are on the TestClock, which must not outrun them.
 */
const advanceUntil = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  options: { readonly message?: string; readonly step?: Duration.Input; readonly steps?: number } = {}
) =>
  Effect.gen(function*() {
    for (let step = 0; step < (options.steps ?? 6_000); step++) {
      if (yield* condition) return
      yield* breathe
      yield* TestClock.adjust(options.step ?? "10 millis")
    }
    assert.fail(options.message ?? "the condition never held")
  })

/** Runs `effect` while the clock moves, until it completes. */
const settle = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: { readonly step?: Duration.Input; readonly steps?: number } = {}
) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    yield* advanceUntil(Effect.sync(() => fiber.pollUnsafe() !== undefined), { ...options, message: "never completed" })
    return yield* Fiber.join(fiber)
  })

let ids = 0
const freshId = () => `chat-${Date.now().toString(36)}-${ids++}`

layer(Database, { timeout: 120_000, excludeTestServices: true })("warm pools on runners", (it) => {
  it.effect(
    "a new conversation takes the runner's warm CLI and is saved from its directory; a restore goes cold",
    () =>
      Effect.gen(function*() {
        const root = yield* stateRoot
        const id = freshId()
        const a = yield* node({ stateDirectory: root, warm: [{ config: {}, size: 1 }] })
        yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 1), { message: "the pool fills" })
        assert.strictEqual(yield* spawned(a.clis), 1)
        const warm = yield* a.clis.connection(0)
        const warmDir = configDir(warm)
        assert.strictEqual(Path.dirname(Path.dirname(warmDir)), root, "under the runner's own directory")
        assert.match(Path.basename(warmDir), /^warm-/)

        // A new conversation: the warm CLI, no spawn.
        // Under `settle`: a start that went cold (it needs the clock) fails the checks below instead of hanging.
        const turn = yield* settle(Effect.scoped(
          Effect.flatMap(a.chats.getOrCreate(id, {}), (chat) => chat.send("slow one"))
        ))
        assert.strictEqual(yield* spawned(a.clis), 1, "no CLI spawned for the conversation")
        assert.strictEqual(yield* ready(a.chats), 0)
        let conversation: string | undefined
        yield* advanceUntil(Effect.map(a.chats.snapshot(id), (found) => {
          conversation = found.sessionId
          return conversation !== undefined
        }))
        // The CLI writes its transcript where it was started: the warm directory.
        const file = transcript(warmDir, conversation!)
        Fs.mkdirSync(Path.dirname(file), { recursive: true })
        Fs.writeFileSync(file, "turn 1\n")
        // No refill before warmRefillDelay (1 s) from the hand-out: the CLI taken starts its turn alone.
        yield* TestClock.adjust("900 millis")
        assert.strictEqual(yield* spawned(a.clis), 1)
        const fiber = yield* Effect.forkChild(turn.result)
        yield* advanceUntil(Effect.sync(() => fiber.pollUnsafe() !== undefined))
        assert.strictEqual((yield* Fiber.join(fiber)).text, "a b")
        // The turn's save took the transcript from the warm CLI's directory.
        const store = yield* Store.make({ entityType: ChatsCluster.entityType, prefix, migrate: false })
        const savedFiles = Effect.map(store.read(id), (saved) => Object.keys(saved?.files ?? {}))
        yield* advanceUntil(Effect.map(savedFiles, (files) => files.length > 0), { message: "the turn is saved" })
        assert.deepStrictEqual(yield* savedFiles, [`projects/mock/${conversation}.jsonl`])

        // Then the pool refills.
        yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 1), { message: "the pool refills" })
        assert.strictEqual(yield* spawned(a.clis), 2)

        // What the CLI appends up to its exit is in the last save, from the same directory.
        Fs.appendFileSync(file, "at exit\n")
        yield* settle(Scope.close(a.scope, Exit.void))
        assert.isFalse(yield* warm.isAlive)
        assert.isFalse(yield* (yield* a.clis.connection(1)).isAlive, "the refilled warm CLI is closed too")
        assert.deepStrictEqual(Fs.readdirSync(root), [], "nothing left in the state directory")

        // Another runner restores it: a cold CLI resuming the conversation; its pool's warm CLI stays in the pool.
        const b = yield* node({ stateDirectory: root, warm: [{ config: {}, size: 1 }] })
        yield* advanceUntil(Effect.map(ready(b.chats), (n) => n === 1), { message: "the new runner's pool fills" })
        const again = yield* settle(Effect.scoped(
          Effect.flatMap(b.chats.getOrCreate(id, {}), (chat) => Effect.as(chat.run("two"), chat.generation))
        ))
        assert.strictEqual(again, 2)
        assert.strictEqual(yield* spawned(b.clis), 2, "the restore spawned its own CLI")
        assert.strictEqual(yield* ready(b.chats), 1, "the warm CLI was not taken")
        const cold = yield* b.clis.connection(1)
        assert.include(cold.spec.args, `--resume=${conversation}`)
        assert.match(Path.basename(configDir(cold)), /^chat-.*-g2$/, "the generation's own directory")
        assert.strictEqual(
          Fs.readFileSync(transcript(configDir(cold), conversation!), "utf8"),
          "turn 1\nat exit\n",
          "the transcript restored as the warm CLI left it"
        )
        yield* settle(Scope.close(b.scope, Exit.void))
      }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
  )

  it.effect(
    "warm CLIs count against the runner's capacity and go before any conversation; a pool's directories go with it",
    () =>
      Effect.gen(function*() {
        const root = yield* stateRoot
        const a = yield* node({ stateDirectory: root, capacity: 2, warm: [{ config: {}, size: 2 }] })
        const warmDirs = () =>
          Fs.readdirSync(root).flatMap((own) =>
            Fs.readdirSync(Path.join(root, own)).filter((name) => name.startsWith("warm-"))
          )
        yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 2), { message: "the pool fills" })
        assert.strictEqual(warmDirs().length, 2)
        const first = freshId()
        yield* settle(Effect.scoped(a.chats.getOrCreate(first, {})))
        const adopted = configDir(yield* a.clis.connection(0))
        // One conversation and one warm CLI fill the runner: the pool stays one short.
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(yield* ready(a.chats), 1)
        assert.strictEqual(yield* spawned(a.clis), 2)
        // Another key starts cold; the full runner closes the warm CLI to make room, not the idle conversation.
        const second = freshId()
        yield* settle(Effect.scoped(a.chats.getOrCreate(second, { model: "other" })))
        assert.strictEqual(yield* spawned(a.clis), 3)
        assert.strictEqual(yield* ready(a.chats), 0)
        assert.isFalse(yield* (yield* a.clis.connection(1)).isAlive)
        assert.strictEqual((yield* a.chats.snapshot(first)).generation, 1, "the conversation is still live")
        assert.deepStrictEqual(
          warmDirs(),
          [Path.basename(adopted)],
          "the closed warm CLI's directory is gone; the adopted one is the live conversation's"
        )
        // The adopted directory goes with its conversation.
        yield* settle(a.chats.evict(first))
        assert.isFalse(Fs.existsSync(adopted))
        // The pool refills into the slot freed; resized through the node's client, it empties.
        yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 1), { message: "the pool refills" })
        assert.strictEqual(warmDirs().length, 1)
        yield* settle(a.chats.warm({}, 0))
        assert.deepStrictEqual(yield* a.chats.pools, [])
        assert.deepStrictEqual(warmDirs(), [])
        assert.isFalse(yield* (yield* a.clis.latest).isAlive)
        // A bad size in a runner's settings is its InvalidConfig.
        const invalid = yield* Effect.flip(node({ stateDirectory: root, warm: [{ config: {}, size: -1 }] }))
        assert.strictEqual(invalid._tag, "InvalidConfig")
        yield* settle(Scope.close(a.scope, Exit.void))
      }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
  )

  it.effect("a session replaced or evicted starts a new conversation: it takes a warm CLI", () =>
    Effect.gen(function*() {
      const root = yield* stateRoot
      const a = yield* node({
        stateDirectory: root,
        capacity: 4,
        warm: [{ config: {}, size: 1 }, { config: { model: "opus" }, size: 1 }]
      })
      const full = Effect.map(ready(a.chats), (n) => n === 2)
      /** The ready warm CLI of a pool (opus or not), and whether it took `prompt` since. */
      const warmOf = (opus: boolean) =>
        Effect.map(a.clis.connections, (all) => {
          const found = all.filter((cli) => cli.spec.args.join(" ").includes("opus") === opus)
          return found[found.length - 1]
        })
      const took = (cli: MockTransport.MockConnection, prompt: string) =>
        Effect.map(cli.writtenLines, (lines) => lines.some((line) => line.includes(prompt)))
      yield* advanceUntil(full, { message: "the pools fill" })
      const id = freshId()
      yield* settle(Effect.scoped(Effect.flatMap(a.chats.getOrCreate(id, {}), (chat) => chat.run("one"))))
      yield* advanceUntil(full, { message: "the pools refill" })
      // Replaced with another configuration: the conversation starts over, in the other pool's warm CLI.
      const opus = yield* warmOf(true)
      const replaced = yield* settle(Effect.scoped(
        Effect.flatMap(
          a.chats.getOrCreate(id, { model: "opus" }, { onConflict: "replace" }),
          (chat) => Effect.as(chat.run("two"), chat.generation)
        )
      ))
      assert.strictEqual(replaced, 2)
      assert.isTrue(yield* took(opus, "two"), "the replaced session runs in the opus pool's warm CLI")
      // Evicted (its conversation forgotten), then opened again: new, warm.
      yield* settle(a.chats.evict(id))
      yield* advanceUntil(full, { message: "the pools refill" })
      const plain = yield* warmOf(false)
      yield* settle(Effect.scoped(Effect.flatMap(a.chats.getOrCreate(id, {}), (chat) => chat.run("three"))))
      assert.isTrue(yield* took(plain, "three"), "the reopened session runs in the pool's warm CLI")
      assert.notInclude(plain.spec.args.join(" "), "--resume")
      yield* settle(Scope.close(a.scope, Exit.void))
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())))

  it.effect("a runner that drains empties its pools first: no warm CLI starts in the slots its sessions free", () =>
    Effect.gen(function*() {
      const root = yield* stateRoot
      const a = yield* node({ stateDirectory: root, capacity: 3, warm: [{ config: {}, size: 2 }] })
      yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 2), { message: "the pool fills" })
      const busy = freshId()
      yield* settle(Effect.scoped(a.chats.getOrCreate(busy, {})))
      yield* settle(Effect.scoped(a.chats.getOrCreate(freshId(), {})))
      // Full: two conversations and one warm CLI; the pool is one short.
      yield* advanceUntil(Effect.map(ready(a.chats), (n) => n === 1), { message: "the pool refills" })
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* spawned(a.clis), 3)
      // The drain waits for the busy one's turn; the idle one closes at once and frees its slot.
      yield* a.chats.send(busy, "slow turn")
      yield* settle(Scope.close(a.scope, Exit.void))
      assert.strictEqual(yield* spawned(a.clis), 3, "no CLI started during the drain")
      for (const cli of yield* a.clis.connections) assert.isFalse(yield* cli.isAlive)
      assert.deepStrictEqual(Fs.readdirSync(root), [])
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())))

  it.effect("a conversation saved after the admission's read but before the start: the warm CLI goes, it resumes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const root = yield* stateRoot
      const id = freshId()
      // A session with nothing to resume, as the database has it.
      const a = yield* node({ stateDirectory: root })
      yield* settle(Effect.scoped(a.chats.getOrCreate(id, {})))
      yield* settle(Scope.close(a.scope, Exit.void))
      yield* sql`UPDATE tether_warm_sessions SET conversation_id = NULL, files = '{}'::jsonb WHERE id = ${id}`
      const b = yield* node({ stateDirectory: root, warm: [{ config: {}, size: 1 }] })
      yield* advanceUntil(Effect.map(ready(b.chats), (n) => n === 1), { message: "the pool fills" })
      const warm = yield* b.clis.connection(0)
      // The row is held while the admission reads it (reads do not wait), so the start's `begin` waits for it; then
      // a conversation is saved (as a runner writing what it could not save earlier would).
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT id FROM tether_warm_sessions WHERE id = ${id} FOR UPDATE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
        yield* sql`UPDATE tether_warm_sessions SET conversation_id = 'conversation-saved-late' WHERE id = ${id}`
      })))
      yield* Deferred.await(locked)
      const opening = yield* Effect.forkChild(Effect.scoped(b.chats.getOrCreate(id, {})))
      const waiting = Effect.map(
        sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'`,
        (rows) => rows[0].n > 0
      )
      yield* advanceUntil(waiting, { message: "the start waits for the row" })
      assert.strictEqual(yield* ready(b.chats), 0, "the admission took the warm CLI")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      const handle = yield* settle(Fiber.join(opening))
      assert.strictEqual(handle.generation, 2)
      const resumed = (yield* b.clis.connections).filter((cli) =>
        cli.spec.args.includes("--resume=conversation-saved-late")
      )
      assert.strictEqual(resumed.length, 1, "a CLI of its own resumes the conversation")
      assert.isFalse(yield* warm.isAlive, "the warm CLI taken is closed")
      assert.isFalse(Fs.existsSync(configDir(warm)), "with its directory")
      yield* settle(Scope.close(b.scope, Exit.void))
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())))

  it.effect("a node without a runner has no pools: warm is InvalidConfig, not a silent no-op", () =>
    Effect.gen(function*() {
      const client = yield* node("client-only")
      const refused = yield* Effect.flip(client.chats.warm({}, 1))
      assert.strictEqual(refused._tag, "InvalidConfig")
      assert.match(refused.message, /RunnerSettings\.warm/)
      assert.deepStrictEqual(yield* client.chats.pools, [])
      yield* Scope.close(client.scope, Exit.void)
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())))
})
