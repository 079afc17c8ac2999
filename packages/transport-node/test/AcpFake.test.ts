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
import { Effect, Exit, Option, Scope } from "effect"
import { isAlive, marked, scopedMark } from "./utils.ts"

const session = (
  mark: string,
  faults: string,
  timeouts?: Timeouts.Timeouts,
  client?: AcpSession.Options["client"]
) =>
  AcpSession.make({
    client,
    agent: AcpAgent.command([FakeAcp.path], {
      env: { set: { TEST_MARK: mark, FAKE_ACP_FAULTS: faults, FAKE_ACP_CHUNKS: "2" } }
    }),
    cwd: process.cwd(),
    timeouts
  })

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
        // close grace + term grace + the transport's kill grace (1 s) + slack for a loaded machine.
        assert.isAtMost(took, 300 + 300 + 1_000 + 1_000)
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
        const result = yield* acp.run("run: echo hi-from-terminal; echo to-stderr >&2")
        assert.include(result.text, "Tool said: hi-from-terminal\nto-stderr")
      }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ containment: "process-tree" }))),
    30_000
  )

  it.live("a terminal left running is torn down with the session, whatever it started", () =>
    Effect.gen(function*() {
      const mark = yield* scopedMark
      const scope = yield* Scope.make()
      const acp = yield* session(mark, "", undefined, { terminal: true }).pipe(Scope.provide(scope))
      const result = yield* acp.run("background: sleep 300 & sleep 301")
      assert.include(result.text, "started terminal-1")
      const sleeps = () => marked(mark).filter((proc) => proc.args.startsWith("sleep"))
      yield* Effect.promise(() =>
        new Promise<void>((resolve) => {
          const check = () => (sleeps().length >= 2 ? resolve() : setTimeout(check, 20))
          check()
        })
      ).pipe(Effect.timeout("5 seconds"))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(marked(mark), [])
    }).pipe(Effect.provide(NodeTransport.layer({ containment: "process-tree" }))), 30_000)
})
