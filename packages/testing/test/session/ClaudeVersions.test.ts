/**
 * Claude Code from 2.1.197, the oldest supported release, to 2.1.332, the pinned newest, simulated on TestClock
 * (`MockClaude.make(turns, { version })` through `MockTransport`), so the behaviours issue 12 found broken on the
 * real 2.1.197 stay guarded without its binary (the real-CLI suite proves them on both binaries).
 *
 * 2.1.197 sends no receipt (no `command_lifecycle`), replays a prompt only with the turn's first assistant message,
 * answers `set_model` without a payload and replays its output under a uuid of its own. What a host sees must not
 * differ: everything the CLI prints after the prompt's write is the running turn's (events, stall progress), the
 * first of it acknowledges the prompt, an interrupt is sent and honoured, and controls succeed with what the CLI
 * sent. Every test runs on both versions.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { type EventLog, Permission, type SessionEvent, Transport } from "@tether/core"
import { MockClaude, MockTransport, PinnedClaude } from "@tether/testing"
import { Effect, Exit, Fiber, Scope, Stream } from "effect"
import {
  advance,
  now,
  settle,
  snapshotEvents,
  timeouts,
  withSession,
  writtenFrames
} from "../support/ClaudeSessions.ts"

/** The turn's own events, from its start to its terminal event. */
const turnEvents = (turn: ClaudeSession.Turn) =>
  settle(
    Effect.map(
      Stream.runCollect(turn.events),
      (all) =>
        Array.from(all).flatMap((delivery: EventLog.Delivery<SessionEvent.SessionEvent>) =>
          delivery._tag === "Event" ? [delivery.event] : []
        )
    )
  )

const isTag = <T extends SessionEvent.SessionEvent["_tag"]>(tag: T) =>
(
  event: SessionEvent.SessionEvent
): event is Extract<SessionEvent.SessionEvent, { readonly _tag: T }> => event._tag === tag

const isFrame = (type: string, subtype?: string) => (event: SessionEvent.SessionEvent) =>
  event._tag === "Frame" && event.type === type && (subtype === undefined || event.subtype === subtype)

/** set_model's output, replayed by the CLI as a user frame under a uuid of its own. */
const isLocalCommandReplay = (event: SessionEvent.SessionEvent) =>
  isFrame("user", "replay")(event) && JSON.stringify(event.raw).includes("<local-command-stdout>")

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i} `)

for (const version of PinnedClaude.versions) {
  const oldest = version === PinnedClaude.oldest
  const mock = (turns: ReadonlyArray<MockClaude.Turn>, options: Parameters<typeof MockClaude.make>[1] = {}) =>
    Effect.provide(MockTransport.layer(MockClaude.make(turns, { ...options, version })))

  describe(`claude ${version} (simulated)`, () => {
    it.effect("streamed text reaches turn.events: every delta, the turn's, after the turn's acknowledgement", () =>
      withSession({}, (session) =>
        Effect.gen(function*() {
          const atHandshake = yield* session.capabilities
          // 2.1.197's handshake does not name its version: its first system/init does.
          assert.deepStrictEqual(
            [atHandshake.receipts, atHandshake.notes],
            oldest ? ["first-output", []] : ["explicit", [`claude ${version}`]]
          )
          const turn = yield* session.send("hello")
          const events = yield* turnEvents(turn)
          const result = yield* turn.result
          const deltas = events.filter(isTag("TextDelta"))
          assert.deepStrictEqual(deltas.map((delta) => delta.text), ["Hel", "lo ", "there"])
          assert.strictEqual(result.text, "Hello there")
          assert.isTrue(events.every((event) => event.turnId === turn.id))
          assert.deepStrictEqual([events[0]._tag, events.at(-1)?._tag], ["TurnStarted", "TurnCompleted"])
          const acknowledged = events.findIndex(isTag("TurnAcknowledged"))
          const firstDelta = events.findIndex(isTag("TextDelta"))
          assert.isAbove(acknowledged, 0)
          assert.isBelow(acknowledged, firstDelta)
          // The replay: 2.1.332's right before the first stream event, 2.1.197's only after the block's deltas.
          const replay = events.findIndex(isFrame("user", "replay"))
          if (oldest) assert.isAbove(replay, events.findLastIndex(isTag("TextDelta")))
          else assert.isBelow(replay, firstDelta)
          const afterTurn = yield* session.capabilities
          assert.deepStrictEqual(
            [afterTurn.receipts, afterTurn.notes],
            [oldest ? "first-output" : "explicit", [`claude ${version}`]]
          )
        })).pipe(mock([MockClaude.turn(MockClaude.text(["Hel", "lo ", "there"]))])))

    it.effect("a steady stream longer than the stall budget is progress: the turn completes", () =>
      withSession({ timeouts: timeouts({ stall: "1 second" }) }, (session, cli) =>
        Effect.gen(function*() {
          const started = yield* now
          const turn = yield* session.send("stream")
          const events = yield* turnEvents(turn)
          const result = yield* turn.result
          assert.isAtLeast((yield* now) - started, 6_000, "six times the stall budget")
          assert.strictEqual(events.filter(isTag("TextDelta")).length, 12)
          assert.strictEqual(result.text, words(12).join(""))
          const interrupts = (yield* writtenFrames(cli)).filter((frame) => frame.request?.subtype === "interrupt")
          assert.deepStrictEqual(interrupts, [])
        })).pipe(mock([MockClaude.turn(MockClaude.text(words(12), { delay: "500 millis" }))])))

    it.effect("a stream that goes quiet past the stall budget is interrupted in the CLI, and the session goes on", () =>
      withSession({ timeouts: timeouts({ stall: "1 second" }) }, (session, cli) =>
        Effect.gen(function*() {
          const error = yield* settle(Effect.flip(session.run("quiet")))
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag === "TurnInterrupted") {
            assert.strictEqual(error.reason, "stall")
            assert.isTrue(error.acknowledged)
          }
          const interrupts = (yield* writtenFrames(cli)).filter((frame) => frame.request?.subtype === "interrupt")
          assert.strictEqual(interrupts.length, 1)
          assert.strictEqual(yield* session.status, "idle")
          assert.isTrue(yield* cli.isAlive)
          assert.strictEqual((yield* settle(session.run("after"))).text, "after")
        })).pipe(mock([MockClaude.turn(MockClaude.text(["a ", { text: "b", delay: "5 seconds" }]))])))

    it.effect("an interrupt mid-stream is sent and honoured: interrupted, not retired, the CLI alive", () =>
      withSession({}, (session, cli) =>
        Effect.gen(function*() {
          const turn = yield* session.send("slow")
          yield* advance("700 millis")
          assert.strictEqual(yield* settle(session.interrupt), "interrupted")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag === "TurnInterrupted") {
            assert.strictEqual(error.reason, "host")
            assert.isTrue(error.acknowledged)
            assert.isFalse(error.deliveryUncertain)
          }
          const events = yield* turnEvents(turn)
          assert.isAbove(events.filter(isTag("TextDelta")).length, 0, "the deltas so far were the turn's")
          assert.strictEqual(events.at(-1)?._tag, "TurnFailed")
          assert.strictEqual(yield* session.status, "idle")
          assert.strictEqual((yield* session.process)._tag, "Running")
          assert.isTrue(yield* cli.isAlive)
          assert.strictEqual((yield* settle(session.run("after"))).text, "after")
        })).pipe(mock([MockClaude.turn(MockClaude.text(words(40), { delay: "100 millis" }))])))

    it.effect("an interrupt before the CLI's first frame for the turn: delivery uncertain, the session retired", () =>
      withSession({}, (session) =>
        Effect.gen(function*() {
          const turn = yield* session.send("hello")
          yield* advance("100 millis")
          assert.strictEqual(yield* settle(session.interrupt), "retired")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "TurnInterrupted")
          assert.isTrue(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "failed")
        })).pipe(mock([], { timing: { receipt: "2 seconds", init: "2 seconds" } })))

    it.effect("controls succeed with what the CLI sent; set_model's replay is no turn's, even after a prompt", () =>
      withSession({}, (session) =>
        Effect.gen(function*() {
          // 2.1.197 answers set_model without a payload (the model did change); both answer
          // set_max_thinking_tokens without one.
          assert.deepStrictEqual(
            yield* settle(session.setModel("claude-sonnet-4-5")),
            oldest ? {} : { model: "claude-sonnet-4-5" }
          )
          yield* settle(session.setMaxThinkingTokens(1024))
          assert.deepStrictEqual(yield* settle(session.setPermissionMode("plan")), { mode: "plan" })

          // set_model written right before a prompt: its output comes after the prompt's write.
          const model = yield* Effect.forkChild(session.setModel("claude-opus-5-5"))
          const turn = yield* session.send("hello")
          yield* settle(Fiber.join(model))
          const events = yield* turnEvents(turn)
          assert.strictEqual((yield* turn.result).text, "hello")
          assert.isFalse(events.some(isLocalCommandReplay), "not the turn's")
          const all = yield* snapshotEvents(session)
          const local = all.filter(isLocalCommandReplay)
          if (oldest) assert.strictEqual(local.length, 2, "2.1.197 replays set_model's output")
          assert.isTrue(local.every((event) => event.turnId === undefined))
          if (oldest) {
            assert.isAbove(
              all.indexOf(local[1]),
              all.findIndex((event) => event._tag === "TurnStarted" && event.turnId === turn.id),
              "the replay came after the prompt's write"
            )
          }
          // The turn was acknowledged by its own first frame, not by the replay.
          const acknowledged = all.findIndex((event) => event._tag === "TurnAcknowledged" && event.turnId === turn.id)
          const next = all[acknowledged + 1]
          assert.strictEqual(next._tag, "Frame")
          assert.strictEqual(next.turnId, turn.id)
          assert.isFalse(isLocalCommandReplay(next))
          assert.strictEqual(yield* session.status, "idle")
        })).pipe(mock([])))

    it.effect("a tool's permission is the turn's, and the allowed tool's result too", () =>
      withSession({ policy: Permission.allowAll }, (session) =>
        Effect.gen(function*() {
          const turn = yield* session.send("touch")
          const events = yield* turnEvents(turn)
          const result = yield* turn.result
          assert.strictEqual(result.text, "Done")
          assert.strictEqual(events.filter(isTag("PermissionRequested")).length, 1)
          assert.deepStrictEqual(events.filter(isTag("ToolResult")).map((event) => event.content), ["ran"])
          assert.isTrue(events.every((event) => event.turnId === turn.id))
        })).pipe(mock([
          MockClaude.turn(
            MockClaude.tool({ name: "Bash", input: { command: "touch x" }, output: "ran" }),
            MockClaude.text("Done")
          )
        ])))

    it.effect("after a clean close the process is Completed and no longer alive", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const session = yield* settle(ClaudeSession.make({}).pipe(Scope.provide(scope)))
        yield* settle(session.run("hi"))
        yield* settle(Scope.close(scope, Exit.void))
        const state = yield* session.process
        assert.strictEqual(state._tag, "Completed")
        if (state._tag === "Completed") assert.deepStrictEqual(state.status, Transport.ExitStatus.Exited({ code: 0 }))
        assert.isFalse(yield* session.isAlive)
        assert.strictEqual(yield* session.status, "closed")
      }).pipe(mock([])))
  })
}
