/**
 * What the cluster keeps of a session in PostgreSQL (a real one): how a generation begins after the previous one
 * ended cleanly or was lost with its runner, the fence that keeps a lost runner from writing, the turn ledger, and
 * the conversation files saved in appended chunks.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { AcpAgent } from "@tether/acp"
import { Session } from "@tether/core"
import { Postgres } from "@tether/testing"
import { Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Files from "../src/internal/files.ts"
import * as Store from "../src/internal/store.ts"

const Database = Layer.unwrap(Effect.map(Postgres.Postgres, (server) => PgClient.layer({ url: server.url }))).pipe(
  Layer.provideMerge(Postgres.layer())
)

const begin = { runner: "10.0.0.1:1", fingerprint: "f", config: { model: "m" }, durable: true, reset: false }

const empty = { conversationId: undefined, changes: [], tracked: {}, events: [], turns: [] }

let ids = 0
const freshId = () => `s-${Date.now().toString(36)}-${ids++}`

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-store-test-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

layer(Database, { timeout: 60_000, excludeTestServices: true })("Store", (it) => {
  const store = Store.make({ entityType: "test/Store", prefix: "tether_test" })

  it.effect("a clean end: the next generation continues at the exact seq, no gap", () =>
    Effect.gen(function*() {
      const s = yield* store
      const id = freshId()
      const first = yield* s.begin(id, begin)
      assert.deepStrictEqual([first.generation, first.base, first.previous], [1, 0, "new"])
      yield* s.save(id, 1, {
        ...empty,
        events: [{ seq: 1, generation: 1, turnId: "t", event: { _tag: "TurnStarted" } }],
        seq: 1,
        final: false
      })
      yield* s.save(id, 1, { ...empty, seq: 7, final: true })
      const second = yield* s.begin(id, begin)
      assert.deepStrictEqual([second.generation, second.base, second.previous], [2, 7, "clean"])
      const events = yield* s.eventsAfter(id, 0, 100)
      assert.deepStrictEqual(events.map((event) => [event.seq, event.gapTo]), [[1, undefined]])
    }))

  it.effect("a lost generation: the next one starts above its reserved seqs, the unsaved ones are a gap", () =>
    Effect.gen(function*() {
      const s = yield* store
      const id = freshId()
      yield* s.begin(id, begin)
      yield* s.save(id, 1, {
        ...empty,
        events: [{ seq: 3, generation: 1, turnId: "t", event: { _tag: "TurnCompleted" } }],
        seq: 3,
        final: false
      })
      // The runner of generation 1 dies: nothing marks it dormant.
      const next = yield* s.begin(id, { ...begin, runner: "10.0.0.2:1" })
      assert.deepStrictEqual([next.generation, next.base, next.previous], [2, Store.seqBlock, "lost"])
      const events = yield* s.eventsAfter(id, 0, 100)
      assert.deepStrictEqual(events.map((event) => [event.seq, event.gapTo]), [[3, undefined], [4, Store.seqBlock]])
      // The lost runner cannot write any more.
      const fenced = yield* Effect.flip(s.save(id, 1, { ...empty, seq: 9, final: true }))
      assert.strictEqual(fenced._tag, "Fenced")
      assert.strictEqual((yield* s.read(id))?.state, "live", "the next owner's record is untouched")
    }))

  it.effect("the ledger: a prompt is claimed once per session; a moved generation cannot claim", () =>
    Effect.gen(function*() {
      const s = yield* store
      const id = freshId()
      yield* s.begin(id, begin)
      assert.strictEqual((yield* s.claim(id, "p1", 1))._tag, "Claimed")
      const again = yield* s.claim(id, "p1", 1)
      assert.strictEqual(again._tag, "Existing")
      yield* s.save(id, 1, {
        ...empty,
        seq: 0,
        turns: [{ promptId: "p1", turnId: "t1", state: "completed", outcome: { ok: true, result: { text: "hi" } } }],
        final: false
      })
      const done = yield* s.turn(id, "p1")
      assert.deepStrictEqual(done, {
        promptId: "p1",
        generation: 1,
        turnId: "t1",
        state: "completed",
        outcome: { ok: true, result: { text: "hi" } }
      })
      yield* s.begin(id, begin) // generation 2 elsewhere
      assert.deepStrictEqual(yield* s.claim(id, "p2", 1), { _tag: "Fenced", current: 2 }, "names the live generation")
      yield* s.unclaim(id, "p1", 2)
      assert.strictEqual((yield* s.turn(id, "p1"))?.state, "completed", "a claim of another generation stays")
    }))

  it.effect("the ledger claims only for a live generation, and an evicted one cannot save", () =>
    Effect.gen(function*() {
      const s = yield* store
      const id = freshId()
      yield* s.begin(id, begin)
      assert.strictEqual((yield* s.claim(id, "live", 1))._tag, "Claimed")
      // Generation 1 ends cleanly (its last save): it is still the record's generation, but no longer live.
      yield* s.save(id, 1, { ...empty, seq: 0, final: true })
      assert.strictEqual((yield* s.read(id))?.generation, 1)
      assert.deepStrictEqual(yield* s.claim(id, "after-end", 1), { _tag: "Fenced", current: null }, "none is live")
      assert.isUndefined(yield* s.turn(id, "after-end"), "nothing was recorded")
      yield* s.begin(id, begin)
      assert.strictEqual((yield* s.claim(id, "next", 2))._tag, "Claimed")
      assert.isTrue(yield* s.evict(id))
      assert.strictEqual((yield* s.claim(id, "after-evict", 2))._tag, "Fenced")
      assert.isUndefined(yield* s.turn(id, "after-evict"))
      // A save of the evicted generation that comes late (written again once the database answered) is fenced.
      const late = yield* Effect.flip(s.save(id, 2, { ...empty, seq: 0, final: true }))
      assert.strictEqual(late._tag, "Fenced")
      assert.strictEqual((yield* s.read(id))?.state, "evicted")
    }))

  it.effect("the files saved are the ones the session says hold the conversation (Gemini CLI's: by a short id)", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const id = "3f1c9a2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
      const files = {
        ".gemini/settings.json": "{}",
        ".gemini/projects.json": "{\"projects\":{}}",
        ".gemini/tmp/work/.project_root": "/work",
        [`.gemini/tmp/work/chats/session-2026-12-04T21-50-${id.slice(0, 8)}.jsonl`]: "{}\n",
        ".gemini/tmp/work/chats/session-2026-12-04T21-51-0a1b2c3d.jsonl": "{}\n",
        [`.gemini/tmp/work/${id}/plan.md`]: "plan"
      }
      for (const [path, content] of Object.entries(files)) {
        Fs.mkdirSync(Path.dirname(Path.join(dir, path)), { recursive: true })
        Fs.writeFileSync(Path.join(dir, path), content)
      }
      const paths = (conversationFile: (path: string, id: string) => boolean) =>
        Effect.map(
          Files.collect(dir, id, {}, conversationFile),
          (collected) => collected.changes.map((change) => change.path).sort()
        )
      // By default only what names the whole id: Gemini CLI's conversation would be lost on another runner.
      assert.deepStrictEqual(yield* paths(Session.namesConversation), [`.gemini/tmp/work/${id}/plan.md`])
      assert.deepStrictEqual(yield* paths(AcpAgent.geminiConversationFile), [
        ".gemini/projects.json",
        ".gemini/tmp/work/.project_root",
        `.gemini/tmp/work/${id}/plan.md`,
        `.gemini/tmp/work/chats/session-2026-12-04T21-50-${id.slice(0, 8)}.jsonl`
      ])
    }))

  it.effect("conversation files are saved in appended chunks and restored whole; evict forgets them", () =>
    Effect.gen(function*() {
      const s = yield* store
      const id = freshId()
      const dir = yield* tempDir
      const file = Path.join(dir, "projects", "p", "conv-1.jsonl")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(Path.join(dir, "unrelated.json"), "{}")
      Fs.writeFileSync(file, "line 1\n")
      yield* s.begin(id, begin)
      const first = yield* Files.collect(dir, "conv-1", {}, Session.namesConversation)
      assert.deepStrictEqual(first.changes.map((change) => [change.path, change.mode]), [[
        "projects/p/conv-1.jsonl",
        "replace"
      ]])
      yield* s.save(id, 1, { ...empty, conversationId: "conv-1", ...first, seq: 0, final: false })
      Fs.appendFileSync(file, "line 2\n")
      const second = yield* Files.collect(dir, "conv-1", first.tracked, Session.namesConversation)
      assert.deepStrictEqual(second.changes.map((change) => [change.mode, change.chunk]), [["append", 1]])
      assert.strictEqual(new TextDecoder().decode(second.changes[0].data), "line 2\n")
      yield* s.save(id, 1, { ...empty, conversationId: "conv-1", ...second, seq: 0, final: true })
      const restored = yield* s.begin(id, begin)
      assert.strictEqual(restored.conversationId, "conv-1")
      assert.deepStrictEqual(
        restored.files.map((f) => [f.path, new TextDecoder().decode(f.data)]),
        [["projects/p/conv-1.jsonl", "line 1\nline 2\n"]]
      )
      const target = yield* tempDir
      yield* Files.restore(target, restored.files)
      assert.strictEqual(Fs.readFileSync(Path.join(target, "projects/p/conv-1.jsonl"), "utf8"), "line 1\nline 2\n")
      assert.isTrue(yield* s.evict(id))
      const fresh = yield* s.begin(id, begin)
      assert.deepStrictEqual([fresh.generation, fresh.previous, fresh.files.length], [3, "reset", 0])
    }))
})

describe("Files", () => {
  // Covered with the store above; the path guard is pure enough to check here.
  layer(Layer.empty)("restore", (it) => {
    it.effect("never writes outside the conversation directory", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        yield* Files.restore(Path.join(dir, "conv"), [{ path: "../escaped", data: new Uint8Array([1]) }])
        assert.isFalse(Fs.existsSync(Path.join(dir, "escaped")))
      }).pipe(Effect.scoped))

    it.effect("a sweep removes the directories of runners that are gone, and nothing else", () =>
      Effect.gen(function*() {
        const root = yield* tempDir
        // A process that has exited: its pid names no process (until the kernel hands it out again).
        const gone = ChildProcess.spawnSync(process.execPath, ["-e", "process.pid"]).pid!
        const dead = Path.join(root, `${Files.stalePrefix}${gone}-0123abcd`)
        const alive = Path.join(root, `${Files.stalePrefix}1-0123abcd`) // init never goes
        const restarted = Path.join(root, `${Files.stalePrefix}${process.pid}-0123abcd`) // this pid, no runner's
        const mine = Files.own(root)
        const unrelated = Path.join(root, "the-host-s-own")
        for (const dir of [dead, alive, restarted, mine, unrelated]) {
          Fs.mkdirSync(Path.join(dir, "s"), { recursive: true })
        }
        yield* Files.sweepStale(root)
        Files.disown(mine)
        assert.deepStrictEqual(
          [dead, alive, restarted, mine, unrelated].map((dir) => Fs.existsSync(dir)),
          [false, true, false, true, true]
        )
      }).pipe(Effect.scoped))

    it.effect("a disk that refuses the directory is a typed failure, not a defect", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = Path.join(dir, "a-file")
        Fs.writeFileSync(file, "")
        // Under a regular file: ENOTDIR, even for root.
        const error = yield* Effect.flip(
          Files.restore(Path.join(file, "conv"), [{ path: "t.jsonl", data: new Uint8Array([1]) }])
        )
        assert.strictEqual(error._tag, "FilesError")
      }).pipe(Effect.scoped))
  })
})
