/**
 * A runner's warm pool with the real `claude`, offline against `MockAnthropic`: one node (a runner and its client) in
 * this process over a real PostgreSQL. A new conversation takes the runner's warm CLI (its registry's hit counter),
 * the real CLI keeps its transcript in the warm CLI's directory, which the runner saves from; at the node's release
 * nothing of it is left (no process, no directory); a second node restores the conversation cold, and the model sees
 * the first turn. Bounded: three CLI starts, two turns.
 */
import { assert, describe, it } from "@effect/vitest"
import { NodeCluster } from "@tether/cluster"
import { SessionRegistry } from "@tether/core"
import { MockAnthropic, PinnedClaude, Postgres } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Context, Effect, Exit, Layer, Metric, Option, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { killAllMarked, marked, waitUntil } from "../../../transport-node/test/utils.ts"
import { Chats, ChatsCluster, markVariable, sharding } from "./world.ts"

const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

const hits = Effect.map(Metric.value(SessionRegistry.metrics.warmHits), (state) => state.count)

describe("warm pool on a runner, real claude", () => {
  it.live(
    "a new conversation takes the warm CLI and is saved from its directory; another node restores it cold",
    () =>
      Effect.gen(function*() {
        const mark = randomUUID()
        yield* Effect.addFinalizer(() => killAllMarked(mark, markVariable, 5_000))
        const postgres = yield* Postgres.make()
        const anthropic = yield* MockAnthropic.make((request) =>
          MockAnthropic.text(`Hello from the mock: ${request.prompt}`, { chunks: 3 })
        )
        const home = yield* tempDir("tether-it-warm-home-")
        for (const dir of [".claude", "tmp", "run"]) Fs.mkdirSync(Path.join(home, dir))
        const work = yield* tempDir("tether-it-warm-work-")
        const state = yield* tempDir("tether-it-warm-state-")
        // What world.ts's `acquire` reads, at each start, from the environment of the process that runs the runner
        // (this one, for the test), put back as it was after it.
        const world = {
          TETHER_IT_ANTHROPIC: anthropic.url,
          TETHER_IT_HOME: home,
          TETHER_IT_WORK: work,
          TETHER_IT_RUNNER_MARK: mark
        }
        const saved = Object.fromEntries(Object.keys(world).map((key) => [key, process.env[key]]))
        Object.assign(process.env, world)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const [key, value] of Object.entries(saved)) {
              if (value === undefined) delete process.env[key]
              else process.env[key] = value
            }
          })
        )
        const node = (warm: boolean) =>
          Effect.gen(function*() {
            // A child of the test's scope: a test that fails closes the node too.
            const scope = yield* Scope.fork(yield* Effect.scope, "sequential")
            const port = yield* freePort
            const context = yield* Layer.build(
              ChatsCluster.layer({
                capacity: 4,
                stateDirectory: state,
                ...(warm ? { warm: [{ config: { provider: "claude" as const }, size: 1 }] } : {})
              }).pipe(
                Layer.provide(
                  NodeTransport.layer({ executables: { claude: PinnedClaude.resolveSync(PinnedClaude.latest) } })
                ),
                Layer.provideMerge(
                  NodeCluster.layer({ postgres: postgres.url, runner: { host: "127.0.0.1", port }, sharding })
                )
              )
            ).pipe(Scope.provide(scope))
            return { chats: Context.get(context, Chats), scope }
          })

        const id = `warm-${randomUUID()}`
        const a = yield* node(true)
        yield* Effect.gen(function*() {
          const deadline = Date.now() + 90_000
          while ((yield* a.chats.pools).reduce((n, pool) => n + pool.ready, 0) < 1) {
            if (Date.now() > deadline) return assert.fail("the warm pool did not fill")
            yield* Effect.sleep("100 millis")
          }
        })
        const before = yield* hits
        const first = yield* Effect.scoped(
          Effect.flatMap(a.chats.getOrCreate(id, { provider: "claude" }), (chat) => chat.run("Remember the word kiwi"))
        )
        assert.strictEqual(first.text, "Hello from the mock: Remember the word kiwi")
        assert.strictEqual((yield* hits) - before, 1, "the conversation took the warm CLI")
        const own = Fs.readdirSync(state)
        assert.strictEqual(own.length, 1)
        const adopted = Fs.readdirSync(Path.join(state, own[0])).filter((name) => name.startsWith("warm-"))
        // The adopted directory and the refill's.
        assert.isAtLeast(adopted.length, 1)
        const transcripts = adopted.flatMap((dir) =>
          Fs.readdirSync(Path.join(state, own[0], dir), { recursive: true, encoding: "utf8" }).filter((path) =>
            path.endsWith(".jsonl") && path.includes("projects")
          )
        )
        assert.strictEqual(transcripts.length, 1, "the real CLI's transcript is in the warm CLI's directory")

        // The node's release: the conversation saved, every CLI closed, nothing left on disk.
        yield* Scope.close(a.scope, Exit.void)
        yield* waitUntil("the first node's CLIs gone", () => marked(mark, markVariable).length === 0, 10_000)
        assert.deepStrictEqual(Fs.readdirSync(state), [])

        // Another node restores it cold: the model sees the first turn.
        const b = yield* node(false)
        const again = yield* b.chats.run(id, "Which word?")
        assert.strictEqual(again.text, "Hello from the mock: Which word?")
        const requests = yield* anthropic.requests
        const asked = requests.flatMap((entry) =>
          Option.isSome(entry.messages) && entry.messages.value.prompt === "Which word?" ? [entry.messages.value] : []
        )
        assert.isNotEmpty(asked)
        assert.include(JSON.stringify(asked[0].body), "Remember the word kiwi", "the restored conversation's history")
        yield* Scope.close(b.scope, Exit.void)
      }).pipe(Effect.scoped),
    180_000
  )
})
