/**
 * An `AcpSession` over the real transport against the fake ACP agent (`FakeAcp`: MockAcp's simulator as a real
 * process): turns over real stdio, and an agent that neither exits when its stdin closes nor on SIGTERM, which the
 * session's release still ends — checked in /proc by the marker in its environment, within the graces.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpAgent, AcpSession } from "@tether/acp"
import { Timeouts } from "@tether/core"
import { FakeAcp } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import { execFileSync } from "node:child_process"
import { readFile } from "node:fs/promises"
import { isAlive, marked, scopedMark, tempDir } from "./utils.ts"

/**
 * The fake agent's session, in a workspace of its own (`cwd`, else a temporary directory): a session's workspace is
 * lent to its box (and its terminals'), so never the checkout the tests run from.
 */
const session = (
  mark: string,
  faults: string,
  timeouts?: Timeouts.Timeouts,
  client?: AcpSession.Options["client"],
  cwd?: string
) =>
  Effect.flatMap(cwd === undefined ? tempDir("tether-acp-work-") : Effect.succeed(cwd), (cwd) =>
    AcpSession.make({
      client,
      agent: AcpAgent.command([FakeAcp.path], {
        env: { set: { TEST_MARK: mark, FAKE_ACP_FAULTS: faults, FAKE_ACP_CHUNKS: "2" } }
      }),
      cwd,
      timeouts
    }))

describe("AcpSession over NodeTransport, against the fake ACP agent", () => {
  it.live("runs turns over real stdio; release ends the agent with its stdin (exit 0)", () =>
    Effect.gen(function*() {
      const mark = yield* scopedMark
      const scope = yield* Scope.make()
      const acp = yield* session(mark, "").pipe(Scope.provide(scope))
      assert.strictEqual((yield* acp.run("Say hello")).text, "Hello from fake-acp #1: Say hello")
      assert.strictEqual((yield* acp.run("Again")).text, "Hello from fake-acp #2: Again")
      yield* Scope.close(scope, Exit.void)
      const status = yield* acp.awaitExit
      assert.deepStrictEqual(status, { _tag: "Exited", code: 0 })
      assert.deepStrictEqual(marked(mark), [])
    }).pipe(Effect.provide(NodeTransport.layer({ containment: "process-tree" }))), 30_000)

  it.live(
    "an agent that ignores stdin's EOF and SIGTERM: release kills it within the close and term graces",
    () =>
      Effect.gen(function*() {
        const mark = yield* scopedMark
        const timeouts = yield* Timeouts.make({ closeGrace: "300 millis", termGrace: "300 millis" })
        const scope = yield* Scope.make()
        const acp = yield* session(mark, "ignore-stdin-eof,ignore-sigterm", timeouts).pipe(Scope.provide(scope))
        yield* acp.run("hi")
        const pid = Option.getOrThrow(acp.pid)
        const started = Date.now()
        yield* Scope.close(scope, Exit.void)
        const took = Date.now() - started
        assert.isFalse(isAlive(pid))
        assert.deepStrictEqual(marked(mark), [])
        // The close grace was given (a lower bound cannot flake); that teardown ends within its graces is held on
        // TestClock (AcpSession.test.ts), not by a wall-clock upper bound here.
        assert.isAtLeast(took, 300)
      }).pipe(Effect.provide(NodeTransport.layer({ containment: "process-tree" }))),
    30_000
  )

  it.live(
    "a terminal the agent asks for runs through the session's transport, and answers its output",
    () =>
      Effect.gen(function*() {
        const mark = yield* scopedMark
        const acp = yield* session(mark, "", undefined, { terminal: true })
        // A whole shell line (as agents send it), run with no input and no pager, as Zed runs it.
        const result = yield* acp.run(
          "run: echo hi-from-terminal | tr a-z A-Z; readlink /proc/self/fd/0; echo \"pager=[$PAGER] $GIT_PAGER\"; echo to-stderr >&2"
        )
        assert.include(result.text, "Tool said: HI-FROM-TERMINAL\n/dev/null\npager=[] cat\nto-stderr")
      }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ containment: "process-tree" }))),
    30_000
  )

  it.live("a terminal left running is torn down with the session, whatever it started", () =>
    Effect.gen(function*() {
      const mark = yield* scopedMark
      const scope = yield* Scope.make()
      // The command says it has started its child through a FIFO the test reads: no polling, no clock. In the
      // session's workspace: its terminal's box sees that one of the host's directories (its /tmp is its own).
      const dir = yield* tempDir("tether-acp-fifo-")
      const acp = yield* session(mark, "", undefined, { terminal: true }, dir).pipe(Scope.provide(scope))
      const fifo = `${dir}/started`
      execFileSync("mkfifo", [fifo])
      const started = Effect.promise(() => readFile(fifo, "utf8"))
      const result = yield* acp.run(`background: sleep 300 & echo up > ${fifo}; exec sleep 301`)
      assert.include(result.text, "started terminal-1")
      assert.strictEqual(yield* started.pipe(Effect.timeout("10 seconds")), "up\n")
      // The agent, the terminal's shell, and the child it started.
      assert.isAtLeast(marked(mark).length, 3)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(marked(mark), [])
    }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ containment: "process-tree" }))), 30_000)

  it.live(
    "the fast fake (the benchmarks' agent): a prompt FRAMES:<n> streams n text chunks, else FAST_ACP_FRAMES",
    () =>
      Effect.gen(function*() {
        const acp = yield* AcpSession.make({
          agent: AcpAgent.command([FakeAcp.fastPath], { env: { set: { FAST_ACP_FRAMES: "2" } } }),
          cwd: yield* tempDir("tether-acp-work-")
        })
        // One text delta per chunk, none skipped, read as the bench's Tether host reads them: the deltas it counts.
        const deltas = yield* (yield* acp.subscribe("latest")).pipe(
          Stream.takeUntil((delivery) => delivery._tag === "Event" && delivery.event._tag === "TurnCompleted"),
          Stream.filter((delivery) => delivery._tag !== "Event" || delivery.event._tag === "TextDelta"),
          Stream.runCollect,
          Effect.forkScoped
        )
        const big = yield* acp.run("FRAMES:1000")
        assert.strictEqual(big.text, Array.from({ length: 1000 }, (_, i) => `tok ${i} `).join(""))
        assert.strictEqual(big.stopReason, "end_turn")
        const seen = yield* Fiber.join(deltas)
        assert.strictEqual(seen.length, 1000)
        assert.isTrue(seen.every((delivery) => delivery._tag === "Event"))
        assert.strictEqual((yield* acp.run("anything")).text, "tok 0 tok 1 ")
      }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ containment: "process-tree" }))),
    30_000
  )
})
