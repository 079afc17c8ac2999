/**
 * The contract every provider's session keeps, whatever its protocol: one suite, run for each provider's adapter
 * (Adapter.ts) on TestClock through MockTransport and the provider's simulator. A provider that passes it gives a
 * host the same guarantees as the others: the same operations, events, permissions, deadlines, errors and
 * dispositions. Where a provider lacks a capability (its adapter says which), the suite checks the documented
 * substitute instead.
 */
import { assert, describe, it } from "@effect/vitest"
import { EventLog, Permission, TetherError, Timeouts, Transport } from "@tether/core"
import { MockTransport } from "@tether/testing"
import { type Duration, Effect, Exit, Option, Scope, Stream } from "effect"
import * as SessionLog from "../../../core/test/support/SessionLog.ts"
import { tagged } from "../../../core/test/support/SessionLog.ts"
import * as TestTime from "../../../core/test/support/TestTime.ts"
import * as Sessions from "../support/Sessions.ts"
import { advance, settle } from "../support/Sessions.ts"
import type { Adapter, AnySession, Options, Script } from "./Adapter.ts"

const now = Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe()))

const timeouts = (overrides: Partial<{ readonly [K in keyof Timeouts.Timeouts]: Duration.Input }>) =>
  Effect.runSync(Timeouts.make(overrides))

const eventsOf = SessionLog.events

/** Runs a turn that a deadline interrupts: it fails with TurnInterrupted for `reason`, within `[min, max]` ms. */
const interruptedWithin = (
  session: AnySession,
  prompt: string,
  reason: string,
  [min, max]: readonly [number, number]
) =>
  Effect.gen(function*() {
    const started = yield* now
    const error = yield* settle(Effect.flip(session.run(prompt)))
    assert.strictEqual(error._tag, "TurnInterrupted")
    if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, reason)
    const took = (yield* now) - started
    assert.isAtLeast(took, min)
    assert.isAtMost(took, max)
  })

const errorOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrThrow(Exit.findErrorOption(exit))
}

/** Runs the whole contract for one provider. */
export const contract = (adapter: Adapter) => {
  /** Starts a session in a scope of its own, runs `body`, then closes the session on TestClock. */
  const withSession = <A, E, R>(
    options: Options,
    body: (session: AnySession, cli: MockTransport.MockConnection) => Effect.Effect<A, E, R>
  ) => Sessions.withSession(adapter.make(options), body)

  const cli = (script: Script = {}, options?: MockTransport.LayerOptions) =>
    Effect.provide(adapter.transport(script, options))

  const tool = { command: "touch contract.txt", output: "tool-output-42" } as const
  const tools: Script = { rules: [["touch", { _tag: "Tool", ...tool }]] }
  const slow: Script = {
    rules: [["slow", { _tag: "Text", chunks: Array.from({ length: 40 }, (_, i) => `w${i} `), delay: "100 millis" }]]
  }

  describe(`the contract: ${adapter.name}`, () => {
    describe("handshake and capabilities", () => {
      it.effect("the session starts idle, and declares what its provider can do", () =>
        withSession({}, (session, connection) =>
          Effect.gen(function*() {
            assert.strictEqual(session.protocol, adapter.provider)
            assert.strictEqual(yield* session.status, "idle")
            assert.isTrue(yield* session.isAlive)
            assert.isTrue(yield* connection.isAlive)
            const capabilities = yield* session.capabilities
            assert.strictEqual(capabilities.provider, adapter.provider)
            assert.isTrue(capabilities.interrupt)
            assert.isTrue(capabilities.resume)
            assert.include(capabilities.permissionKinds, adapter.permissionKind)
            // Claude says "explicit" once its first turn showed receipts; until then, "first-output".
            assert.include(["explicit", "first-output"], capabilities.receipts)
          })).pipe(cli()))

      it.effect("a CLI that never finishes its handshake: StartupTimeout within the budget, safe to fall back", () =>
        Effect.gen(function*() {
          const started = yield* now
          const exit = yield* settle(
            Effect.scoped(adapter.make({ timeouts: timeouts({ startup: "2 seconds", control: "1 second" }) })).pipe(
              Effect.exit
            )
          )
          const error = errorOf(exit)
          assert.strictEqual(error._tag, "StartupTimeout")
          assert.isTrue(error.safeToFallback)
          assert.isTrue(error.safeToRequeue)
          assert.isFalse(error.deliveryUncertain)
          assert.isAtMost((yield* now) - started, 2_100)
          assert.isFalse(yield* (yield* (yield* MockTransport.MockTransport).latest).isAlive)
        }).pipe(cli({ neverAnswerHandshake: true })))

      it.effect("a CLI that exits during the handshake: HandshakeFailed with its stderr, safe to fall back", () =>
        Effect.gen(function*() {
          const error = errorOf(yield* settle(Effect.scoped(adapter.make({})).pipe(Effect.exit)))
          assert.strictEqual(error._tag, "HandshakeFailed")
          assert.include(error._tag === "HandshakeFailed" ? error.reason : "", "bad flag")
          assert.isTrue(error.safeToFallback)
        }).pipe(cli({ exitAtStart: { code: 2, stderr: "error: bad flag\n" } })))

      it.effect("a CLI that cannot be started: its spawn error, safe to fall back", () =>
        Effect.gen(function*() {
          const error = errorOf(yield* Effect.exit(Effect.scoped(adapter.make({}))))
          assert.strictEqual(error._tag, "ExecutableNotFound")
          assert.isTrue(error.safeToFallback)
        }).pipe(
          cli({}, { spawnError: (spec) => new TetherError.ExecutableNotFound({ program: spec.program, searched: [] }) })
        ))
    })

    describe("a streamed turn", () => {
      it.effect("events attributed to the turn, in order, with increasing seqs; its stream ends with its result", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            const turn = yield* session.send("stream please")
            const result = yield* settle(turn.result)
            assert.strictEqual(result.turnId, turn.id)
            assert.strictEqual(result.text, "one two three")
            if (adapter.lacks.has("usage")) {
              assert.strictEqual(result.usage.inputTokens, 0)
              assert.strictEqual(result.usage.outputTokens, 0)
            } else {
              assert.isAbove(result.usage.inputTokens, 0)
              assert.isAbove(result.usage.outputTokens, 0)
            }
            assert.strictEqual(result.sessionId, Option.getOrUndefined(yield* session.sessionId))
            assert.isDefined(result.sessionId)
            // A result ends the turn, not the process.
            assert.isTrue(yield* session.isAlive)
            assert.strictEqual(yield* session.status, "idle")

            const deliveries = yield* SessionLog.snapshot(session)
            for (let i = 1; i < deliveries.length; i++) assert.strictEqual(deliveries[i].seq, deliveries[i - 1].seq + 1)
            const own = deliveries.map((d) => d.event).filter((e) => e.turnId === turn.id)
            const tags = own.map((e) => e._tag).filter((tag) => tag !== "Status" && tag !== "Frame")
            assert.deepStrictEqual(tags.slice(0, 2), ["TurnStarted", "TurnAcknowledged"])
            assert.strictEqual(tags.at(-1), "TurnCompleted")
            assert.deepStrictEqual(tagged(own, "TextDelta").map((e) => e.text), ["one ", "two ", "three"])
            assert.deepStrictEqual(tagged(own, "AssistantMessage").map((e) => e.text), ["one two three"])
            // A provider without usage reports zeros, in the result and in the turn's Usage event alike.
            assert.deepStrictEqual(tagged(own, "Usage").map((e) => e.usage), [result.usage])

            // The turn's own stream replays from its start and ends with its terminal event.
            const stream = Array.from(yield* Stream.runCollect(turn.events)).filter(EventLog.isEvent)
            assert.isTrue(stream.every((d) => d.event.turnId === turn.id))
            assert.strictEqual(stream[0].event._tag, "TurnStarted")
            assert.strictEqual(stream.at(-1)?.event._tag, "TurnCompleted")
            assert.strictEqual(yield* turn.phase, "completed")
          })).pipe(cli({ rules: [["stream", { _tag: "Text", chunks: ["one ", "two ", "three"] }]] })))
    })

    describe("one turn at a time", () => {
      it.effect("a second send while a turn runs: TurnInFlight, safe to requeue, nothing written", () =>
        withSession({}, (session, connection) =>
          Effect.gen(function*() {
            const first = yield* session.send("first")
            const error = yield* Effect.flip(session.send("second"))
            assert.strictEqual(error._tag, "TurnInFlight")
            assert.isTrue(error.safeToRequeue)
            assert.isFalse(error.deliveryUncertain)
            yield* settle(first.result)
            assert.strictEqual(adapter.prompts(yield* connection.written), 1)
            const again = yield* settle(session.run("second"))
            assert.strictEqual(again.text, "second")
          })).pipe(cli()))

      it.effect("with a queue: queued prompts have a visible lifecycle and run in order; a full queue refuses", () =>
        withSession({ queue: true, queueCapacity: 1 }, (session) =>
          Effect.gen(function*() {
            const a = yield* session.send("alpha")
            const b = yield* session.send("beta")
            assert.strictEqual(yield* b.phase, "queued")
            const full = yield* Effect.flip(session.send("gamma"))
            assert.strictEqual(full._tag, "QueueFull")
            assert.isTrue(full.safeToRequeue)
            const [ra, rb] = yield* settle(Effect.all([a.result, b.result]))
            assert.deepStrictEqual([ra.text, rb.text], ["alpha", "beta"])
            const tags = (yield* eventsOf(session)).filter((e) => e.turnId === b.id).map((e) => e._tag).filter((t) =>
              t !== "Status" && t !== "Frame"
            )
            assert.deepStrictEqual(tags.slice(0, 3), ["TurnQueued", "TurnStarted", "TurnAcknowledged"])
            assert.strictEqual(tags.at(-1), "TurnCompleted")
          })).pipe(cli()))
    })

    describe("permissions", () => {
      it.effect("allow: the tool runs; the request and its resolution are events of the turn", () =>
        withSession({ policy: Permission.allowAll }, (session) =>
          Effect.gen(function*() {
            const turn = yield* session.send("touch it")
            const result = yield* settle(turn.result)
            assert.include(result.text, tool.output)
            const events = yield* eventsOf(session)
            const [requested] = tagged(events, "PermissionRequested")
            assert.strictEqual(requested.turnId, turn.id)
            assert.strictEqual(requested.request.kind, adapter.permissionKind)
            assert.include(JSON.stringify(requested.request.input), tool.command)
            assert.deepStrictEqual(tagged(events, "PermissionResolved").map((e) => e.resolution), [
              { _tag: "Decided", by: "policy", decision: Permission.allow() }
            ])
            assert.deepStrictEqual(tagged(events, "ToolResult").map((e) => e.isError), [false])
          })).pipe(cli(tools)))

      it.effect("deny: the tool does not run, the model is told, and the turn goes on", () =>
        withSession(
          { policy: () => Effect.succeed(Permission.deny("not today")) },
          (session) =>
            Effect.gen(function*() {
              const result = yield* settle(session.run("touch it"))
              assert.notInclude(result.text, tool.output)
              assert.deepStrictEqual(tagged(yield* eventsOf(session), "ToolResult").map((e) => e.isError), [true])
              assert.strictEqual(yield* session.status, "idle")
            })
        ).pipe(cli(tools)))

      it.effect("deny and interrupt: the turn ends interrupted by the permission decision; the session goes on", () =>
        withSession(
          { policy: () => Effect.succeed(Permission.deny("stop", { interrupt: true })) },
          (session) =>
            Effect.gen(function*() {
              const error = yield* settle(Effect.flip(session.run("touch it")))
              assert.strictEqual(error._tag, "TurnInterrupted")
              if (error._tag !== "TurnInterrupted") return
              assert.strictEqual(error.reason, "permission")
              assert.isTrue(error.acknowledged)
              assert.isFalse(error.deliveryUncertain)
              assert.strictEqual(yield* session.status, "idle")
              assert.strictEqual((yield* settle(session.run("after"))).text, "after")
            })
        ).pipe(cli(tools)))

      it.effect("defer: answered later, exactly once; unknown ids are typed errors; waiting is not a stall", () =>
        withSession({
          policy: () => Effect.succeed(Permission.defer),
          timeouts: timeouts({ stall: "1 second", permission: "1 minute" })
        }, (session) =>
          Effect.gen(function*() {
            const turn = yield* session.send("touch it")
            yield* TestTime.advanceUntil(Effect.map(session.pendingPermissions, (pending) => pending.length > 0), {
              step: "5 millis"
            })
            const [pending] = yield* session.pendingPermissions
            assert.strictEqual(pending.kind, adapter.permissionKind)
            assert.strictEqual(pending.turnId, turn.id)
            assert.strictEqual(yield* session.status, "awaiting-permission")
            // Much longer than the stall timeout: waiting on a decision is not a stall.
            yield* advance("5 seconds")
            assert.strictEqual(yield* session.status, "awaiting-permission")
            yield* session.answerPermission(pending.requestId, Permission.allow())
            const again = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
            assert.strictEqual(again._tag, "PermissionAlreadyResolved")
            const unknown = yield* Effect.flip(session.answerPermission("nope", Permission.allow()))
            assert.strictEqual(unknown._tag, "PermissionNotFound")
            const result = yield* settle(turn.result)
            assert.include(result.text, tool.output)
          })).pipe(cli(tools)))

      it.effect("a deferred request expires after the permission timeout: denied, and a late answer is refused", () =>
        withSession({
          policy: () => Effect.succeed(Permission.defer),
          timeouts: timeouts({ permission: "2 seconds" })
        }, (session) =>
          Effect.gen(function*() {
            const turn = yield* session.send("touch it")
            yield* TestTime.advanceUntil(Effect.map(session.pendingPermissions, (pending) => pending.length > 0), {
              step: "5 millis"
            })
            const [pending] = yield* session.pendingPermissions
            const result = yield* settle(turn.result)
            assert.notInclude(result.text, tool.output)
            const events = yield* eventsOf(session)
            assert.deepStrictEqual(tagged(events, "PermissionResolved").map((e) => e.resolution), [
              { _tag: "Expired", why: "timeout" }
            ])
            assert.deepStrictEqual(tagged(events, "ToolResult").map((e) => e.isError), [true])
            const late = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
            assert.strictEqual(late._tag, "PermissionAlreadyResolved")
          })).pipe(cli(tools)))

      it.effect("the default policy denies", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            const result = yield* settle(session.run("touch it"))
            assert.notInclude(result.text, tool.output)
            const events = yield* eventsOf(session)
            const [toolResult] = tagged(events, "ToolResult")
            assert.isTrue(toolResult.isError)
            const resolutions = tagged(events, "PermissionResolved").map((event) => event.resolution)
            if (adapter.lacks.has("default-deny-events")) {
              assert.deepStrictEqual(resolutions, [])
            } else {
              assert.deepStrictEqual(
                resolutions.map((resolution) =>
                  resolution._tag === "Decided" ? `${resolution.by} ${resolution.decision._tag}` : resolution._tag
                ),
                ["policy Deny"]
              )
            }
          })).pipe(cli(tools)))

      it.effect(
        adapter.lacks.has("rewrite-input")
          ? "allow with a rewritten input: the provider cannot run it, so it is declined and nothing runs"
          : "allow with a rewritten input: the rewritten input runs",
        () =>
          withSession({
            policy: (request) => Effect.succeed(Permission.allow({ ...request.input, command: "echo rewritten" }))
          }, (session) =>
            Effect.gen(function*() {
              const result = yield* settle(session.run("touch it"))
              const [toolResult] = tagged(yield* eventsOf(session), "ToolResult")
              if (adapter.lacks.has("rewrite-input")) {
                assert.isTrue(toolResult.isError)
                assert.notInclude(result.text, tool.output)
                assert.notInclude(result.text, "echo rewritten")
              } else {
                assert.isFalse(toolResult.isError)
                assert.include(result.text, "ran echo rewritten")
              }
            })).pipe(cli(tools))
      )
    })

    describe("interrupts", () => {
      it.effect("mid-stream, acknowledged: the turn ends interrupted, delivery certain; the session goes on", () =>
        withSession({}, (session, connection) =>
          Effect.gen(function*() {
            const turn = yield* session.send("slow please")
            yield* advance("500 millis")
            assert.strictEqual(yield* turn.phase, "acknowledged")
            const outcome = yield* settle(session.interrupt)
            assert.strictEqual(outcome, "interrupted")
            const error = yield* Effect.flip(turn.result)
            assert.strictEqual(error._tag, "TurnInterrupted")
            if (error._tag !== "TurnInterrupted") return
            assert.strictEqual(error.reason, "host")
            assert.isTrue(error.acknowledged)
            assert.isFalse(error.deliveryUncertain)
            assert.strictEqual(adapter.interrupts(yield* connection.written), 1)
            assert.strictEqual(yield* session.status, "idle")
            assert.strictEqual((yield* settle(session.run("after"))).text, "after")
          })).pipe(cli(slow)))

      it.effect("before the CLI acknowledged the prompt: the session is retired, delivery uncertain", () =>
        withSession({}, (session, connection) =>
          Effect.gen(function*() {
            const turn = yield* session.send("hello")
            const outcome = yield* settle(session.interrupt)
            assert.strictEqual(outcome, "retired")
            const error = yield* Effect.flip(turn.result)
            assert.strictEqual(error._tag, "TurnInterrupted")
            assert.isTrue(error.deliveryUncertain)
            assert.strictEqual(yield* session.status, "failed")
            assert.strictEqual(adapter.interrupts(yield* connection.written), 0)
            yield* advance("10 seconds")
            assert.isFalse(yield* connection.isAlive)
          })).pipe(cli({ slowReceipt: "2 seconds" })))

      it.effect("an interrupt that does not settle within the interrupt timeout retires the session", () =>
        withSession(
          { timeouts: timeouts({ interrupt: "3 seconds" }) },
          (session, connection) =>
            Effect.gen(function*() {
              const turn = yield* session.send("slow please")
              yield* advance("500 millis")
              const outcome = yield* settle(session.interrupt)
              assert.strictEqual(outcome, "retired")
              const error = yield* Effect.flip(turn.result)
              assert.strictEqual(error._tag, "InterruptTimeout")
              assert.isFalse(error.deliveryUncertain)
              assert.strictEqual(yield* session.status, "failed")
              yield* advance("10 seconds")
              assert.isFalse(yield* connection.isAlive)
            })
        ).pipe(cli({ ...slow, ignoreInterrupts: true })))

      it.effect("with no active turn, the interrupt says so", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            assert.strictEqual(yield* session.interrupt, "no-active-turn")
          })).pipe(cli()))
    })

    describe("stall and turn deadlines", () => {
      it.effect("a stalled stream is interrupted after the stall timeout", () =>
        withSession({ timeouts: timeouts({ stall: "2 seconds" }) }, (session) =>
          Effect.gen(function*() {
            yield* interruptedWithin(session, "stall please", "stall", [2_000, 2_300])
            assert.strictEqual(yield* session.status, "idle")
          })).pipe(cli({ rules: [["stall", { _tag: "Stall", before: "partial" }]] })))

      it.effect("the turn deadline interrupts a turn that keeps streaming", () =>
        withSession({
          timeouts: timeouts({
            turn: "2 seconds",
            stall: "1 second",
            ack: "1 second",
            interrupt: "1 second",
            permission: "1 second",
            control: "1 second",
            delivery: "1 second"
          })
        }, (session) => interruptedWithin(session, "slow please", "turn-timeout", [2_000, 2_200])).pipe(cli(slow)))
    })

    describe("a CLI that crashes", () => {
      it.effect("mid-turn: CliExited with its exit code and stderr, acknowledged; the session is failed", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            const error = yield* settle(Effect.flip(session.run("crash please")))
            assert.strictEqual(error._tag, "CliExited")
            if (error._tag !== "CliExited") return
            assert.strictEqual(error.code, 3)
            assert.include(error.stderrTail, "segfault")
            assert.isTrue(error.acknowledged)
            assert.isFalse(error.deliveryUncertain)
            assert.strictEqual(yield* session.status, "failed")
            const refused = yield* Effect.flip(session.send("again"))
            assert.strictEqual(refused._tag, "SessionUnavailable")
            assert.isTrue(refused.safeToFallback)
            assert.strictEqual((yield* session.process)._tag, "Failed")
          })).pipe(
            cli({ rules: [["crash", { _tag: "Crash", before: "partial", code: 3, stderr: "segfault in tool\n" }]] })
          ))

      it.effect("before the acknowledgement: delivery is uncertain", () =>
        withSession({}, (session, connection) =>
          Effect.gen(function*() {
            const turn = yield* session.send("hello")
            yield* connection.trigger(adapter.crash(1, "boom\n"))
            const error = yield* settle(Effect.flip(turn.result))
            assert.strictEqual(error._tag, "CliExited")
            if (error._tag === "CliExited") assert.isFalse(error.acknowledged)
            assert.isTrue(error.deliveryUncertain)
          })).pipe(cli({ slowReceipt: "1 second" })))
    })

    describe("model API errors", () => {
      it.effect("an API error fails the turn with its status, delivery certain; the next turn works", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            const error = yield* settle(Effect.flip(session.run("api down")))
            assert.strictEqual(error._tag, "ApiError")
            if (error._tag === "ApiError") assert.strictEqual(error.status, 429)
            assert.isFalse(error.deliveryUncertain)
            assert.strictEqual(yield* session.status, "idle")
            assert.strictEqual((yield* settle(session.run("fine now"))).text, "fine now")
          })).pipe(cli({ rules: [["api down", { _tag: "ApiError", status: 429 }]] })))
    })

    describe("controls", () => {
      it.effect("a raw control request is answered with the CLI's payload", () =>
        withSession({}, (session) =>
          Effect.gen(function*() {
            const payload = yield* settle(session.control(adapter.control.request))
            assert.isTrue(adapter.control.answered(payload), JSON.stringify(payload))
            assert.strictEqual(yield* session.status, "idle")
          })).pipe(cli()))

      it.effect("a control left unanswered past its deadline: ControlTimeout, the session retired and torn down", () =>
        withSession({ timeouts: timeouts({ control: "2 seconds" }) }, (session, connection) =>
          Effect.gen(function*() {
            const started = yield* now
            const error = errorOf(yield* settle(Effect.exit(session.control(adapter.control.request))))
            assert.strictEqual(error._tag, "ControlTimeout")
            assert.isTrue(error.deliveryUncertain)
            assert.strictEqual((yield* now) - started, 2_000)
            assert.strictEqual(yield* session.status, "failed")
            yield* advance("10 seconds")
            assert.isFalse(yield* connection.isAlive)
          })).pipe(cli({ neverAnswerControl: true })))
    })

    describe("release", () => {
      it.effect("closing the scope ends stdin; the CLI exits 0; the session is closed and its process Completed", () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const session = yield* settle(adapter.make({}).pipe(Scope.provide(scope)))
          const connection = yield* (yield* MockTransport.MockTransport).latest
          yield* settle(session.run("hi"))
          yield* settle(Scope.close(scope, Exit.void))
          assert.isTrue(yield* connection.stdinEnded)
          assert.isFalse(yield* connection.isAlive)
          assert.deepStrictEqual(yield* connection.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
          assert.strictEqual(yield* session.status, "closed")
          assert.isFalse(yield* session.isAlive)
          const state = yield* session.process
          assert.strictEqual(state._tag, "Completed")
        }).pipe(cli()))
    })

    describe("resume", () => {
      it.effect("a new session resumes the conversation by its id, in a new process", () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const session = yield* settle(adapter.make({}).pipe(Scope.provide(scope)))
          yield* settle(session.run("remember pelican"))
          const first = Option.getOrThrow(yield* session.sessionId)
          yield* settle(Scope.close(scope, Exit.void))

          const { resumed, spec, written } = yield* withSession({ resume: first }, (session, connection) =>
            Effect.gen(function*() {
              const result = yield* settle(session.run("which word?"))
              assert.strictEqual(result.sessionId, first)
              return {
                resumed: Option.getOrThrow(yield* session.sessionId),
                spec: connection.spec,
                written: yield* connection.written
              }
            }))
          assert.strictEqual(resumed, first)
          assert.isTrue(adapter.resumed(spec, written, first))
          assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 2)
        }).pipe(cli()))
    })
  })
}
