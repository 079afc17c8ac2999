import { assert, describe, it, layer } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { Permission, TetherError, Transport } from "@tether/core"
import { HostTest, MockClaude, MockTransport } from "@tether/testing"
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"

// Everything here runs under it.effect: TestClock stands still unless a helper moves it. None of these tests moves the
// clock itself, which is the point: a host's test should not have to.

const now = Clock.currentTimeMillis

/** A host's service that owns one session, built the way the README's host builds it. */
class Assistant extends Context.Service<Assistant, ClaudeSession.ClaudeSession>()("test/Assistant") {
  static readonly layerNoDeps = Layer.effect(
    Assistant,
    ClaudeSession.make({ policy: Permission.denyTools(["Bash"]) })
  )
}

const script = MockClaude.make([
  MockClaude.when("deploy", MockClaude.tool({ name: "Bash", input: { command: "make deploy" } }))
])

/** The defect an effect died with, if it died. */
const defectOf = <A, E>(exit: Exit.Exit<A, E>): unknown => Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined

describe("HostTest.settle", () => {
  it.effect("runs a session's startup, a turn and its release to the end, moving the clock only as far as needed", () =>
    Effect.gen(function*() {
      const result = yield* HostTest.settle(Effect.scoped(Effect.flatMap(ClaudeSession.make(), (s) => s.run("hello"))))
      assert.strictEqual(result.text, "hello")
      const cli = yield* (yield* MockTransport.MockTransport).connection(0)
      assert.isTrue(yield* cli.stdinEnded, "released: stdin ended")
      assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
      // Startup (300 ms), one turn (~150 ms) and a graceful close (25 ms): far below the 2 s close grace.
      assert.isBelow(yield* now, 1_000)
    }).pipe(Effect.provide(MockTransport.layer())))

  it.effect("is pipeable, and leaves the clock alone for an effect that needs no time", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Effect.succeed(42).pipe(HostTest.settle()), 42)
      assert.strictEqual(yield* now, 0)
    }))

  it.effect("fails as the effect fails: a startup error is the host's to handle", () =>
    Effect.gen(function*() {
      const error = yield* HostTest.settle(Effect.flip(Effect.scoped(ClaudeSession.make())))
      assert.strictEqual(error._tag, "ExecutableNotFound")
      assert.isTrue(TetherError.hasDisposition(error) && error.safeToFallback)
    }).pipe(Effect.provide(MockTransport.layer(MockClaude.defaultScript, {
      spawnError: () => new TetherError.ExecutableNotFound({ program: "claude", searched: ["PATH"] })
    }))))

  it.effect("dies with Unsettled when the budget is spent, and interrupts what it ran", () =>
    Effect.gen(function*() {
      let interrupted = false
      const exit = yield* Effect.exit(
        HostTest.settle(
          Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted = true))),
          { within: "2 seconds", step: "100 millis" }
        )
      )
      const defect = defectOf(exit)
      assert.instanceOf(defect, HostTest.Unsettled)
      assert.include(
        (defect as HostTest.Unsettled).message,
        "the effect did not settle within 2s of TestClock time (steps of 100ms)"
      )
      assert.strictEqual(yield* now, 2_000)
      yield* Effect.yieldNow
      assert.isTrue(interrupted)
    }))

  it.effect("a turn the script never ends is Unsettled, not a hung test", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        HostTest.settle(Effect.scoped(Effect.flatMap(ClaudeSession.make(), (s) => s.run("hello"))), {
          within: "5 seconds"
        })
      )
      assert.instanceOf(defectOf(exit), HostTest.Unsettled)
    }).pipe(Effect.provide(MockTransport.layer(MockClaude.make([], { faults: [MockClaude.hang] })))))
})

describe("HostTest.layer", () => {
  it.effect("starts a host's sessions when provided and releases them when the test is done", () =>
    Effect.gen(function*() {
      const result = yield* Effect.gen(function*() {
        const assistant = yield* Assistant
        assert.strictEqual(yield* assistant.status, "idle")
        return yield* HostTest.settle(assistant.run("deploy to production"))
      }).pipe(Effect.provide(HostTest.layer(Assistant.layerNoDeps)))
      assert.deepStrictEqual(result.permissionDenials.map((denial) => denial.toolName), ["Bash"])
      // The layer was released when the provided effect ended: the session closed the CLI gracefully.
      const cli = yield* (yield* MockTransport.MockTransport).connection(0)
      assert.isFalse(yield* cli.isAlive)
      assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
    }).pipe(Effect.provide(MockTransport.layer(script))))

  it.effect("a layer that fails to build fails the test with its error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(Assistant, HostTest.layer(Assistant.layerNoDeps)))
      assert.strictEqual(error._tag, "HandshakeFailed")
    }).pipe(Effect.provide(MockTransport.layer(MockClaude.make([], { faults: [MockClaude.crash({ code: 2 })] })))))
})

// One session shared by a suite: the layer is built before the first test and released after the last.
layer(HostTest.layer(Assistant.layerNoDeps).pipe(Layer.provideMerge(MockTransport.layer(script))))(
  "HostTest.layer shared by a suite",
  (it) => {
    it.effect("the first test starts the session", () =>
      Effect.gen(function*() {
        const assistant = yield* Assistant
        assert.strictEqual((yield* HostTest.settle(assistant.run("one"))).text, "one")
      }))

    it.effect("the next test uses the same session", () =>
      Effect.gen(function*() {
        const assistant = yield* Assistant
        assert.strictEqual((yield* HostTest.settle(assistant.run("two"))).text, "two")
        assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 1)
      }))
  }
)

describe("HostTest.advance", () => {
  it.effect("moves the clock by the duration, in steps, the remainder included", () =>
    Effect.gen(function*() {
      const woken: Array<number> = []
      for (const at of [5, 15, 1_000, 1_234]) {
        yield* Effect.forkChild(Effect.andThen(Effect.sleep(Duration.millis(at)), Effect.sync(() => woken.push(at))))
      }
      yield* HostTest.advance("1234 millis", { step: "100 millis" })
      assert.strictEqual(yield* now, 1_234)
      yield* Effect.yieldNow
      assert.deepStrictEqual(woken, [5, 15, 1_000, 1_234])
    }))
})

describe("HostTest.advanceUntil", () => {
  it.effect("moves the clock until a deferred permission is pending; the host answers it and the turn goes on", () =>
    Effect.gen(function*() {
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const session = yield* HostTest.settle(ClaudeSession.make({ policy: () => Effect.succeed(Permission.defer) }))
          const turn = yield* Effect.forkChild(session.run("deploy"))
          yield* HostTest.advanceUntil(Effect.map(session.pendingPermissions, (pending) => pending.length > 0))
          const [request] = yield* session.pendingPermissions
          assert.strictEqual(request.toolName, "Bash")
          yield* session.answerPermission(request.requestId, Permission.deny("not today"))
          return yield* HostTest.settle(Fiber.join(turn))
        })
      ).pipe(HostTest.settle())
      assert.deepStrictEqual(result.permissionDenials.map((denial) => denial.toolName), ["Bash"])
    }).pipe(Effect.provide(MockTransport.layer(script))))

  it.effect("dies with Unsettled when the condition never holds", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(HostTest.advanceUntil(Effect.succeed(false), { within: "1 second" }))
      assert.include((defectOf(exit) as HostTest.Unsettled).message, "the condition did not settle within 1s")
    }))
})
