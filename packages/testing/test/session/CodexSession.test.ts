/**
 * What only a Codex session does, on TestClock through MockTransport and MockCodex (what every provider does is the
 * contract suite's, test/contract/): turns the server refuses, file-change approvals, streams the server retries,
 * interrupts mid-command, and Codex sessions beside Claude sessions in one registry.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { Permission, SessionRegistry } from "@tether/core"
import { MockClaude, MockCodex, MockTransport } from "@tether/testing"
import { Effect, Layer } from "effect"
import * as SessionLog from "../../../core/test/support/SessionLog.ts"
import * as Sessions from "../support/Sessions.ts"
import { advance, settle } from "../support/Sessions.ts"

/** Starts a Codex session in a scope of its own, runs `body`, then closes the session on TestClock. */
const withSession = <A, E, R>(
  options: CodexSession.Options,
  body: (session: CodexSession.CodexSession, cli: MockTransport.MockConnection) => Effect.Effect<A, E, R>
) => Sessions.withSession(CodexSession.make(options), body)

const mock = (...turns: ReadonlyArray<MockCodex.Turn>) => Effect.provide(MockTransport.layer(MockCodex.make(turns)))

describe("CodexSession", () => {
  it.effect("a turn the server refuses (-32001): TurnRejected, safe to requeue; the next turn runs", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const error = yield* settle(Effect.flip(session.run("busy?")))
        assert.strictEqual(error._tag, "TurnRejected")
        if (error._tag !== "TurnRejected") return
        assert.strictEqual(error.code, -32001)
        assert.isTrue(error.safeToRequeue)
        assert.isFalse(error.deliveryUncertain)
        assert.strictEqual(yield* session.status, "idle")
        const result = yield* settle(session.run("busy? again"))
        assert.strictEqual(result.text, "busy? again")
      })).pipe(mock(MockCodex.turn(MockCodex.rejectTurn()))))

  it.effect("a file change asks as `file-change`, with the changes its item announced; allowed, it is applied", () =>
    withSession({ approvalPolicy: "untrusted", policy: Permission.allowAll }, (session) =>
      Effect.gen(function*() {
        const result = yield* settle(session.run("write it"))
        assert.include(result.text, "Success. Updated the following files:\nA notes.txt")
        assert.strictEqual(result.status, "completed")
        const [requested] = SessionLog.tagged(yield* SessionLog.events(session), "PermissionRequested")
        assert.strictEqual(requested.request.kind, "file-change")
        assert.strictEqual(requested.request.toolName, "apply_patch")
        const changes = requested.request.input["changes"] as ReadonlyArray<{ readonly path: string }>
        assert.deepStrictEqual(changes.map((change) => change.path), ["/home/user/project/notes.txt"])
      })).pipe(mock(MockCodex.turn(MockCodex.fileChange({ path: "notes.txt" })))))

  it.effect("a stream the server retries is a Retry event of the turn, which goes on", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("flaky")
        const result = yield* settle(turn.result)
        assert.strictEqual(result.text, "second try")
        const retries = SessionLog.tagged(yield* SessionLog.events(session), "Retry")
        assert.deepStrictEqual(retries.map((e) => [e.turnId, e.message]), [
          [turn.id, "Reconnecting... 1/5"]
        ])
      })).pipe(mock(MockCodex.turn(MockCodex.retry({ partial: "first" }), MockCodex.text("second try")))))

  it.effect("an interrupt mid-command ends the turn interrupted; the command's item never completes", () =>
    withSession({ approvalPolicy: "never" }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("sleep")
        yield* advance("500 millis")
        assert.strictEqual(yield* settle(session.interrupt), "interrupted")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
        const events = yield* SessionLog.events(session)
        assert.deepStrictEqual(events.filter((e) => e._tag === "ToolUse").map((e) => e.turnId), [turn.id])
        assert.deepStrictEqual(events.filter((e) => e._tag === "ToolResult"), [])
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock(MockCodex.turn(MockCodex.command({ command: "sleep 300", duration: "300 seconds" })))))

  it.effect("one registry holds Claude and Codex sessions side by side, each against its own simulator", () => {
    class Agents extends SessionRegistry.Service<Agents>()(
      "test/Agents",
      SessionRegistry.kinds({ claude: ClaudeSession.kind, codex: CodexSession.kind })
    ) {}
    const transport = MockTransport.layer((spec) =>
      spec.program === "codex"
        ? MockCodex.make([], { otherwise: (prompt) => [MockCodex.text(`codex: ${prompt}`)] })
        : MockClaude.make([], { otherwise: (prompt) => [MockClaude.text(`claude: ${prompt}`)] })
    )
    return Effect.gen(function*() {
      const agents = yield* Agents
      const [writer, reviewer] = yield* Effect.scoped(
        Effect.all([
          agents.getOrCreate("writer", { provider: "claude", options: {} }),
          agents.getOrCreate("reviewer", { provider: "codex", options: {} })
        ]).pipe(Effect.flatMap(([writer, reviewer]) => Effect.all([writer.run("draft"), reviewer.run("review")])))
      )
      assert.deepStrictEqual([writer.text, reviewer.text], ["claude: draft", "codex: review"])
      const conflict = yield* Effect.flip(
        Effect.scoped(agents.getOrCreate("writer", { provider: "codex", options: {} }))
      )
      assert.strictEqual(conflict._tag, "SessionConflict")
      const listed = yield* agents.list
      assert.deepStrictEqual(listed.map((snapshot) => snapshot.id).sort(), ["reviewer", "writer"])
    }).pipe(Effect.provide(Agents.layer().pipe(Layer.provide(transport))), settle)
  })
})
