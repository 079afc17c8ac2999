import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import * as TetherError from "@tether/core/TetherError"
import { Duration, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as MockClaude from "../src/MockClaude.ts"
import * as MockCodex from "../src/MockCodex.ts"
import * as MockTransport from "../src/MockTransport.ts"
import { allow, controlRequest, fail, initialize, user } from "./support/HostLines.ts"

// These tests drive the simulated CLI directly through its Connection, writing the raw JSON lines a host would
// write. Everything runs on TestClock: the default timing is startup 300 ms, control 5 ms, receipt 10 ms,
// start 3 ms, init 35 ms, first token 60 ms, chunk 25 ms, tool 40 ms, result 10 ms, interrupt 25 ms, exit 25 ms.

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Frame = Record<string, any>

const framesOf = (cli: MockTransport.MockConnection) => Effect.map(cli.frames, (all) => all as ReadonlyArray<Frame>)

/** A compact name for a frame: type, subtype and the state that matters for ordering. */
const kind = (frame: Frame): string => {
  switch (frame.type) {
    case "system":
      return frame.subtype === "session_state_changed"
        ? `system/session_state_changed:${frame.state}`
        : `system/${frame.subtype}`
    case "command_lifecycle":
      return `command_lifecycle:${frame.state}`
    case "stream_event":
      return `stream_event:${frame.event.type}`
    case "result":
      return `result/${frame.subtype}`
    case "control_response":
      return `control_response/${frame.response.subtype}`
    case "control_request":
      return `control_request/${frame.request.subtype}`
    case "user":
      return frame.isReplay === true ? "user:replay" : "user"
    default:
      return frame.type
  }
}

const kinds = (frames: ReadonlyArray<Frame>) => frames.map(kind)

/** Collects what a host would read from stdout. */
const collect = (cli: MockTransport.MockConnection) =>
  Effect.gen(function*() {
    const lines: Array<Transport.Line> = []
    const fiber = yield* Stream.runForEach(cli.stdout, (line) => Effect.sync(() => lines.push(line))).pipe(
      Effect.forkChild
    )
    return { lines, fiber }
  })

const find = (frames: ReadonlyArray<Frame>, predicate: (frame: Frame) => boolean): Frame => {
  const found = frames.find(predicate)
  assert.isDefined(found)
  return found!
}

const toolResults = (frames: ReadonlyArray<Frame>) =>
  frames.filter((f) => f.type === "user" && f.message.content[0]?.type === "tool_result").map((f) =>
    f.message.content[0]
  )

const results = (frames: ReadonlyArray<Frame>) => frames.filter((f) => f.type === "result")

// The order of frame kinds in fixtures/claude/v332-plain.stdout.jsonl (real CLI 2.1.332, same launch arguments).
const v332Plain = [
  "control_response/success",
  "system/session_state_changed:running",
  "command_lifecycle:queued",
  "command_lifecycle:started",
  "system/init",
  "system/status",
  "user:replay",
  "stream_event:message_start",
  "stream_event:content_block_start",
  "stream_event:content_block_delta",
  "assistant",
  "stream_event:content_block_stop",
  "stream_event:message_delta",
  "stream_event:message_stop",
  "result/success",
  "command_lifecycle:completed",
  "system/session_state_changed:idle"
]

describe("MockTransport", () => {
  describe("startup and handshake", () => {
    it.effect("prints nothing before the first stdin line", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        const stdout = yield* collect(cli)
        yield* TestClock.adjust("1 minute")
        assert.deepStrictEqual(stdout.lines, [])
        assert.isTrue(yield* cli.isAlive)
        yield* cli.write(initialize())
        yield* TestClock.adjust("4 millis")
        assert.deepStrictEqual(stdout.lines, [])
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(kinds(yield* framesOf(cli)), ["control_response/success"])
        assert.strictEqual(stdout.lines.length, 1)
      }))

    it.effect("answers initialize no earlier than startup, with a pid and the CLI version", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        const stdout = yield* collect(cli)
        yield* cli.write(initialize("req_init"))
        yield* TestClock.adjust("304 millis")
        assert.deepStrictEqual(stdout.lines, [])
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(stdout.lines.length, 1)
        const line = stdout.lines[0]
        assert.strictEqual(line._tag, "Text")
        const frame = JSON.parse((line as Extract<Transport.Line, { _tag: "Text" }>).text)
        assert.strictEqual(frame.type, "control_response")
        assert.strictEqual(frame.response.subtype, "success")
        assert.strictEqual(frame.response.request_id, "req_init")
        assert.isNumber(frame.response.response.pid)
        assert.strictEqual(frame.response.response.claude_code_version, "2.1.332")
        assert.deepStrictEqual(frame.response.pending_permission_requests, [])
        assert.deepStrictEqual(yield* cli.written, [JSON.parse(initialize("req_init"))])
        assert.isTrue(Option.isNone(cli.pid))
      }))
  })

  describe("turns", () => {
    it.effect("a plain turn emits the frames of v332-plain, in the same order", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(initialize())
        yield* cli.write(user("Say hello please", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.deepStrictEqual(kinds(frames), v332Plain)

        const init = find(frames, (f) => f.type === "system" && f.subtype === "init")
        const replay = find(frames, (f) => f.type === "user" && f.isReplay === true)
        const assistant = find(frames, (f) => f.type === "assistant")
        const [result] = results(frames)
        assert.strictEqual(replay.uuid, "u-1")
        assert.deepStrictEqual(replay.message.content, [{ type: "text", text: "Say hello please" }])
        assert.deepStrictEqual(assistant.message.content, [{ type: "text", text: "Say hello please" }])
        assert.strictEqual(result.is_error, false)
        assert.strictEqual(result.terminal_reason, "completed")
        assert.strictEqual(result.result, "Say hello please")
        assert.strictEqual(result.user_message_uuid, "u-1")
        assert.strictEqual(result.session_id, init.session_id)
        assert.strictEqual(result.num_turns, 1)
        assert.isAbove(result.total_cost_usd, 0)
        assert.isAbove(result.duration_ms, 0)
        // a result ends the turn, not the process
        assert.isTrue(yield* cli.isAlive)
        assert.isTrue(Option.isNone(yield* cli.exitStatus))
      }))

    it.effect("system/init comes with every turn and total_cost_usd accumulates", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(user("one", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.write(user("two", "u-2"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.strictEqual(frames.filter((f) => f.type === "system" && f.subtype === "init").length, 2)
        const [first, second] = results(frames)
        assert.isAbove(second.total_cost_usd, first.total_cost_usd)
        assert.strictEqual(second.result, "two")
      }))

    it.effect("without replay and partial-message flags there is no replay and no stream_event", () =>
      Effect.gen(function*() {
        const spec = MockTransport.launchSpec({
          args: ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
          env: { CLAUDE_CODE_SDK_READS_SESSION_STATE: "0" }
        })
        const cli = yield* MockTransport.open(MockClaude.defaultScript, spec)
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(kinds(yield* framesOf(cli)), [
          "command_lifecycle:queued",
          "command_lifecycle:started",
          "system/init",
          "assistant",
          "result/success",
          "command_lifecycle:completed"
        ])
      }))

    it.effect("a user message without uuid gets no lifecycle frames and a minted replay uuid", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(user("no uuid"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.isFalse(kinds(frames).some((k) => k.startsWith("command_lifecycle")))
        const replay = find(frames, (f) => f.type === "user" && f.isReplay === true)
        assert.isString(replay.uuid)
        assert.notProperty(results(frames)[0], "user_message_uuid")
      }))

    it.effect("messages sent mid-turn are queued at once and run as later turns, in order", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.text(["w0 ", "w1 ", "w2 "], { delay: "500 millis" }))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("first", "u-1"))
        yield* TestClock.adjust("1 second") // mid-stream: t = 1000, first chunk at ~913
        yield* cli.write(user("second", "u-2"))
        yield* cli.write(user("third", "u-3"))
        yield* TestClock.adjust("20 millis")
        let frames = yield* framesOf(cli)
        const lifecycle = (fs: ReadonlyArray<Frame>) =>
          fs.filter((f) => f.type === "command_lifecycle").map((f) => `${f.state}:${f.command_uuid}`)
        assert.deepStrictEqual(lifecycle(frames), ["queued:u-1", "started:u-1", "queued:u-2", "queued:u-3"])

        yield* TestClock.adjust("5 seconds")
        frames = yield* framesOf(cli)
        assert.deepStrictEqual(lifecycle(frames), [
          "queued:u-1",
          "started:u-1",
          "queued:u-2",
          "queued:u-3",
          "completed:u-1",
          "started:u-2",
          "completed:u-2",
          "started:u-3",
          "completed:u-3"
        ])
        assert.deepStrictEqual(results(frames).map((r) => [r.user_message_uuid, r.result]), [
          ["u-1", "w0 w1 w2 "],
          ["u-2", "second"],
          ["u-3", "third"]
        ])
        // the session stays busy between queued turns: one idle, at the very end
        const states = frames.filter((f) => f.subtype === "session_state_changed").map((f) => f.state)
        assert.deepStrictEqual(states, ["running", "idle"])
      }))

    it.effect("turn rules: in order, by prompt, and the default echo", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.when("weather", MockClaude.text("sunny")),
          MockClaude.turn(MockClaude.text("first answer")),
          MockClaude.turn(MockClaude.text("second answer"))
        ])
        const cli = yield* MockTransport.open(script)
        for (const prompt of ["hello", "weather?", "again", "weather again", "and more"]) {
          yield* cli.write(user(prompt))
          yield* TestClock.adjust("1 second")
        }
        assert.deepStrictEqual(results(yield* framesOf(cli)).map((r) => r.result), [
          "first answer",
          "sunny",
          "second answer",
          "sunny",
          "and more"
        ])
      }))

    it.effect("the same script gives the same lines", () =>
      Effect.gen(function*() {
        const once = Effect.scoped(Effect.gen(function*() {
          const cli = yield* MockTransport.open()
          yield* cli.write(initialize())
          yield* cli.write(user("hi", "u-1"))
          yield* TestClock.adjust("1 second")
          return yield* cli.emitted
        }))
        const first = yield* once
        yield* TestClock.setTime(0)
        const second = yield* once
        assert.isAbove(first.length, 10)
        assert.deepStrictEqual(second, first)
      }))
  })

  describe("permissions", () => {
    const bash = MockClaude.make([
      MockClaude.turn(
        MockClaude.tool({
          name: "Bash",
          input: { command: "touch x", description: "make x" },
          output: (input) => `ran ${input.command}`
        })
      )
    ])

    /** Starts a tool turn and returns the can_use_tool request. */
    const askedFor = (cli: MockTransport.MockConnection) =>
      Effect.gen(function*() {
        yield* cli.write(initialize())
        yield* cli.write(user("Run it", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        const request = find(frames, (f) => f.type === "control_request")
        assert.strictEqual(request.request.subtype, "can_use_tool")
        assert.strictEqual(request.request.tool_name, "Bash")
        assert.deepStrictEqual(request.request.input, { command: "touch x", description: "make x" })
        assert.match(request.request_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        // the tool_use block comes first, and the turn waits for the host
        const toolUse = find(frames, (f) => f.type === "assistant")
        assert.strictEqual(toolUse.message.content[0].type, "tool_use")
        assert.strictEqual(request.request.tool_use_id, toolUse.message.content[0].id)
        assert.deepStrictEqual(results(frames), [])
        return request
      })

    it.effect("allow without updatedInput runs the original input; the answer is echoed verbatim", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        const request = yield* askedFor(cli)
        const answer = allow(request.request_id, { behavior: "allow" })
        yield* cli.write(answer)
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        const echoed = (yield* cli.emitted).filter((line) => line._tag === "Text" && line.text === answer)
        assert.strictEqual(echoed.length, 1)
        const [toolResult] = toolResults(frames)
        assert.strictEqual(toolResult.content, "ran touch x")
        assert.strictEqual(toolResult.is_error, false)
        const [result] = results(frames)
        assert.strictEqual(result.subtype, "success")
        assert.strictEqual(result.terminal_reason, "completed")
        assert.strictEqual(result.result, "Tool said: ran touch x")
        assert.strictEqual(result.num_turns, 2)
        assert.deepStrictEqual(result.permission_denials, [])
      }))

    it.effect("allow with a rewritten input runs the rewritten input", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        const request = yield* askedFor(cli)
        yield* cli.write(
          allow(request.request_id, {
            behavior: "allow",
            updatedInput: { command: "echo rewritten-by-host", description: "make x" }
          })
        )
        yield* TestClock.adjust("1 second")
        const [toolResult] = toolResults(yield* framesOf(cli))
        assert.strictEqual(toolResult.content, "ran echo rewritten-by-host")
      }))

    it.effect("deny with a message: the tool fails, the turn goes on, permission_denials lists it", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        const request = yield* askedFor(cli)
        yield* cli.write(allow(request.request_id, { behavior: "deny", message: "Host says no" }))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        const [toolResult] = toolResults(frames)
        assert.strictEqual(toolResult.content, "Host says no")
        assert.strictEqual(toolResult.is_error, true)
        const [result] = results(frames)
        assert.strictEqual(result.subtype, "success")
        assert.strictEqual(result.is_error, false)
        assert.strictEqual(result.result, "Tool said (error): Host says no")
        assert.deepStrictEqual(result.permission_denials, [{
          tool_name: "Bash",
          tool_use_id: request.request.tool_use_id,
          tool_input: { command: "touch x", description: "make x" }
        }])
      }))

    it.effect("deny with interrupt ends the turn: error_during_execution, aborted_tools", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        const request = yield* askedFor(cli)
        const before = (yield* framesOf(cli)).length
        yield* cli.write(allow(request.request_id, { behavior: "deny", message: "Host says stop", interrupt: true }))
        yield* TestClock.adjust("1 second")
        const after = (yield* framesOf(cli)).slice(before)
        assert.deepStrictEqual(kinds(after), [
          "control_response/success", // the echo
          "system/session_state_changed:running",
          "user",
          "user",
          "result/error_during_execution",
          "command_lifecycle:cancelled",
          "system/session_state_changed:idle"
        ])
        assert.strictEqual(after[3].message.content[0].text, "[Request interrupted by user for tool use]")
        const [result] = results(after)
        assert.strictEqual(result.is_error, true)
        assert.strictEqual(result.terminal_reason, "aborted_tools")
        assert.strictEqual(result.permission_denials.length, 1)
      }))

    it.effect("an error control_response fails the tool and is not echoed", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        const request = yield* askedFor(cli)
        const answer = fail(request.request_id, "host exploded")
        yield* cli.write(answer)
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.isFalse((yield* cli.emitted).some((line) => line._tag === "Text" && line.text === answer))
        const [toolResult] = toolResults(frames)
        assert.strictEqual(toolResult.content, "Tool permission request failed: Error: host exploded")
        assert.strictEqual(toolResult.is_error, true)
        const [result] = results(frames)
        assert.strictEqual(result.terminal_reason, "completed")
        assert.strictEqual(result.permission_denials.length, 1)
      }))

    it.effect("tools that need no permission run without asking", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.tool({ name: "Read", input: { file_path: "/x" }, permission: false, output: "x" }))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("read", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.isFalse(frames.some((f) => f.type === "control_request"))
        assert.strictEqual(toolResults(frames)[0].content, "x")
      }))

    it.effect("without --permission-prompt-tool stdio the CLI denies on its own", () =>
      Effect.gen(function*() {
        const spec = MockTransport.launchSpec({
          args: ["--input-format", "stream-json", "--output-format", "stream-json"]
        })
        const cli = yield* MockTransport.open(bash, spec)
        yield* cli.write(user("Run it", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.isFalse(frames.some((f) => f.type === "control_request"))
        assert.isTrue(frames.some((f) => f.type === "system" && f.subtype === "permission_denied"))
        assert.strictEqual(toolResults(frames)[0].is_error, true)
        assert.strictEqual(results(frames)[0].permission_denials.length, 1)
      }))

    it.effect("a PreToolUse hook runs before can_use_tool, and its allow skips the prompt", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(bash)
        yield* cli.write(initialize("req_1", { PreToolUse: [{ matcher: "Bash", hookCallbackIds: ["hook_pre"] }] }))
        yield* cli.write(user("Run it", "u-1"))
        yield* TestClock.adjust("1 second")
        const hook = find(yield* framesOf(cli), (f) => f.type === "control_request")
        assert.strictEqual(hook.request.subtype, "hook_callback")
        assert.strictEqual(hook.request.callback_id, "hook_pre")
        assert.strictEqual(hook.request.input.hook_event_name, "PreToolUse")
        assert.strictEqual(hook.request.input.tool_name, "Bash")
        yield* cli.write(allow(hook.request_id, {
          hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" }
        }))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.deepStrictEqual(frames.filter((f) => f.type === "control_request").map((f) => f.request.subtype), [
          "hook_callback"
        ])
        assert.strictEqual(toolResults(frames)[0].content, "ran touch x")
        assert.strictEqual(results(frames)[0].terminal_reason, "completed")
      }))
  })

  describe("interrupts", () => {
    const interrupt = (requestId = "req_int") => controlRequest(requestId, { subtype: "interrupt" })

    it.effect("mid-stream: aborted partial, interrupted marker, aborted_streaming, cancelled", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.text(["w0 ", "w1 ", "w2 ", "w3 "], { delay: "250 millis" }))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(initialize())
        yield* cli.write(user("Stream slowly", "u-1"))
        yield* TestClock.adjust("1 second") // replay at 413 ms, chunks at 663 and 913 ms
        const before = (yield* framesOf(cli)).length
        yield* cli.write(interrupt())
        yield* TestClock.adjust("24 millis")
        assert.strictEqual((yield* framesOf(cli)).length, before)
        yield* TestClock.adjust("5 seconds")
        const after = (yield* framesOf(cli)).slice(before)
        assert.deepStrictEqual(kinds(after), [
          "control_response/success",
          "assistant",
          "user",
          "stream_event:content_block_stop",
          "stream_event:message_delta",
          "stream_event:message_stop",
          "result/error_during_execution",
          "command_lifecycle:cancelled",
          "system/session_state_changed:idle"
        ])
        assert.deepStrictEqual(after[0].response, {
          subtype: "success",
          request_id: "req_int",
          response: { still_queued: [] }
        })
        assert.strictEqual(after[1].aborted, true)
        assert.deepStrictEqual(after[1].message.content, [{ type: "text", text: "w0 w1 " }])
        assert.strictEqual(after[2].message.content[0].text, "[Request interrupted by user]")
        const result = after[6]
        assert.strictEqual(result.is_error, true)
        assert.strictEqual(result.terminal_reason, "aborted_streaming")

        // the session is usable afterwards
        yield* cli.write(user("After the interrupt", "u-2"))
        yield* TestClock.adjust("1 second")
        const last = results(yield* framesOf(cli)).at(-1)!
        assert.strictEqual(last.result, "After the interrupt")
        assert.strictEqual(last.is_error, false)
      }))

    it.effect("mid-permission: control_cancel_request first, aborted_tools, and a late answer is ignored", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.tool({ name: "Bash", input: { command: "touch p" } }))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("Run it", "u-1"))
        yield* TestClock.adjust("1 second")
        const request = find(yield* framesOf(cli), (f) => f.type === "control_request")
        const before = (yield* framesOf(cli)).length
        yield* cli.write(interrupt())
        yield* TestClock.adjust("1 second")
        const after = (yield* framesOf(cli)).slice(before)
        assert.deepStrictEqual(kinds(after), [
          "control_cancel_request",
          "control_response/success",
          "system/session_state_changed:running",
          "user",
          "user",
          "result/error_during_execution",
          "command_lifecycle:cancelled",
          "system/session_state_changed:idle"
        ])
        assert.strictEqual(after[0].request_id, request.request_id)
        assert.strictEqual(after[3].message.content[0].type, "tool_result")
        assert.strictEqual(after[4].message.content[0].text, "[Request interrupted by user for tool use]")
        assert.strictEqual(after[5].terminal_reason, "aborted_tools")
        assert.strictEqual(after[5].permission_denials.length, 1)

        const settled = (yield* cli.emitted).length
        yield* cli.write(allow(request.request_id, { behavior: "allow" }))
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* cli.emitted).length, settled)
      }))

    it.effect("mid-tool: the running tool is stopped, aborted_tools", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(
            MockClaude.tool({ name: "Bash", input: { command: "sleep 20" }, permission: false, duration: "20 seconds" })
          )
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("Run it", "u-1"))
        yield* TestClock.adjust("2 seconds")
        yield* cli.write(interrupt())
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        const [toolResult] = toolResults(frames)
        assert.strictEqual(toolResult.is_error, true)
        assert.include(toolResult.content, "stopped while running")
        const [result] = results(frames)
        assert.strictEqual(result.terminal_reason, "aborted_tools")
        assert.deepStrictEqual(result.permission_denials, [])
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(toolResults(yield* framesOf(cli)).length, 1)
      }))

    it.effect("while idle: just answered", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(initialize())
        yield* cli.write(interrupt())
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.deepStrictEqual(kinds(frames), ["control_response/success", "control_response/success"])
        assert.deepStrictEqual(frames[1].response.response, { still_queued: [] })
      }))

    it.effect("queued messages survive an interrupt, unless it says cancel_queued", () =>
      Effect.gen(function*() {
        const slow = MockClaude.text(["a", "b"], { delay: "1 second" })
        const script = MockClaude.make([MockClaude.turn(slow), MockClaude.turn(slow)])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("first", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.write(user("second", "u-2"))
        yield* cli.write(user("third", "u-3"))
        yield* TestClock.adjust("100 millis")
        yield* cli.write(interrupt("req_keep"))
        yield* TestClock.adjust("100 millis")
        const kept = find(yield* framesOf(cli), (f) => f.response?.request_id === "req_keep")
        assert.deepStrictEqual(kept.response.response, { still_queued: ["u-2", "u-3"] })
        // u-2 starts; cancelling now drops u-3
        yield* TestClock.adjust("1 second")
        yield* cli.write(controlRequest("req_drop", { subtype: "interrupt", cancel_queued: true }))
        yield* TestClock.adjust("5 seconds")
        const frames = yield* framesOf(cli)
        assert.deepStrictEqual(find(frames, (f) => f.response?.request_id === "req_drop").response.response, {
          still_queued: []
        })
        assert.deepStrictEqual(results(frames).map((r) => [r.user_message_uuid, r.terminal_reason]), [
          ["u-1", "aborted_streaming"],
          ["u-2", "aborted_streaming"]
        ])
        assert.isTrue(
          frames.some((f) => f.type === "command_lifecycle" && f.command_uuid === "u-3" && f.state === "cancelled")
        )
      }))

    it.effect("ignoreInterrupts: answered, but the turn runs to completion", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([MockClaude.turn(MockClaude.text(["a", "b"], { delay: "1 second" }))], {
          faults: [MockClaude.ignoreInterrupts]
        })
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("go", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.write(interrupt())
        yield* TestClock.adjust("5 seconds")
        const frames = yield* framesOf(cli)
        assert.isTrue(frames.some((f) => f.type === "control_response" && f.response.request_id === "req_int"))
        assert.strictEqual(results(frames)[0].terminal_reason, "completed")
      }))
  })

  describe("model failures and limits", () => {
    it.effect("an API error is a success result with is_error, api_error and the status", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([MockClaude.turn(MockClaude.apiError({ status: 400, message: "mock 400" }))])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("Please fail", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        // Like v332-apiError: the failing request is announced with the prompt's uuid too.
        const requesting = find(frames, (f) => f.type === "system" && f.subtype === "status")
        assert.strictEqual(requesting.status, "requesting")
        assert.deepStrictEqual(requesting.user_message_uuids, ["u-1"])
        const synthetic = find(frames, (f) => f.type === "assistant")
        assert.strictEqual(synthetic.message.model, "<synthetic>")
        assert.strictEqual(synthetic.is_api_error_message, true)
        assert.strictEqual(synthetic.api_error_status, 400)
        assert.deepStrictEqual(synthetic.message.content, [{ type: "text", text: "API Error: 400 mock 400" }])
        const [result] = results(frames)
        assert.strictEqual(result.subtype, "success")
        assert.strictEqual(result.is_error, true)
        assert.strictEqual(result.terminal_reason, "api_error")
        assert.strictEqual(result.api_error_status, 400)
        assert.strictEqual(result.result, "API Error: 400 mock 400")
        assert.strictEqual(
          find(frames, (f) => f.type === "command_lifecycle" && f.state !== "queued" && f.state !== "started").state,
          "cancelled"
        )

        yield* cli.write(user("now work", "u-2"))
        yield* TestClock.adjust("1 second")
        assert.strictEqual(results(yield* framesOf(cli))[1].is_error, false)
      }))

    it.effect("max turns and max budget results", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.text("working"), MockClaude.maxTurns(3)),
          MockClaude.turn(MockClaude.maxBudget(0.01))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("one", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.write(user("two", "u-2"))
        yield* TestClock.adjust("1 second")
        const [turns, budget] = results(yield* framesOf(cli))
        assert.strictEqual(turns.subtype, "error_max_turns")
        assert.strictEqual(turns.is_error, true)
        assert.strictEqual(turns.terminal_reason, "max_turns")
        assert.deepStrictEqual(turns.errors, ["Reached maximum number of turns (3)"])
        assert.strictEqual(budget.subtype, "error_max_budget_usd")
        assert.strictEqual(budget.terminal_reason, "budget_exhausted")
        assert.deepStrictEqual(budget.errors, ["Reached maximum budget ($0.01)"])
      }))
  })

  describe("other controls", () => {
    it.effect("are answered like the real CLI; unknown subtypes get unsupported_request", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(controlRequest("r2", { subtype: "set_permission_mode", mode: "acceptEdits" }))
        yield* cli.write(controlRequest("r3", { subtype: "set_model", model: "claude-opus-4-1" }))
        yield* cli.write(controlRequest("r4", { subtype: "set_max_thinking_tokens", max_thinking_tokens: 1024 }))
        yield* cli.write(controlRequest("r5", { subtype: "mcp_status" }))
        yield* cli.write(controlRequest("r6", { subtype: "get_context_usage", detail: "summary" }))
        yield* cli.write(controlRequest("r7", { subtype: "no_such_subtype" }))
        yield* TestClock.adjust("1 second")
        const responses = new Map(
          (yield* framesOf(cli)).filter((f) => f.type === "control_response").map((
            f
          ) => [f.response.request_id, f.response])
        )
        assert.deepStrictEqual(responses.get("r2").response, { mode: "acceptEdits" })
        assert.deepStrictEqual(responses.get("r3").response, { model: "claude-opus-4-1" })
        assert.deepStrictEqual(responses.get("r4"), { subtype: "success", request_id: "r4" })
        assert.deepStrictEqual(responses.get("r5").response, { mcpServers: [] })
        assert.isAbove(responses.get("r6").response.categories.length, 0)
        assert.deepStrictEqual(responses.get("r7"), {
          subtype: "error",
          request_id: "r7",
          error: "Unsupported control request subtype: no_such_subtype",
          error_code: "unsupported_request"
        })

        // the new model and mode show in the next turn
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("1 second")
        const init = find(yield* framesOf(cli), (f) => f.type === "system" && f.subtype === "init")
        assert.strictEqual(init.model, "claude-opus-4-1")
        assert.strictEqual(init.permissionMode, "acceptEdits")
      }))

    it.effect("neverAnswer leaves a subtype unanswered", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([], { faults: [MockClaude.neverAnswer("set_model")] }))
        yield* cli.write(controlRequest("r1", { subtype: "set_model", model: "x" }))
        yield* cli.write(controlRequest("r2", { subtype: "mcp_status" }))
        yield* TestClock.adjust("1 hour")
        const ids = (yield* framesOf(cli)).map((f) => f.response.request_id)
        assert.deepStrictEqual(ids, ["r2"])
      }))
  })

  describe("exit", () => {
    it.effect("stdin EOF while idle exits 0 and ends stdout", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        const stdout = yield* collect(cli)
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.endInput
        assert.isTrue(yield* cli.stdinEnded)
        yield* TestClock.adjust("24 millis")
        assert.isTrue(yield* cli.isAlive)
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* cli.exit, Transport.ExitStatus.Exited({ code: 0 }))
        assert.isFalse(yield* cli.isAlive)
        yield* Fiber.join(stdout.fiber) // stdout has ended
        const error = yield* Effect.flip(cli.write(user("late")))
        assert.instanceOf(error, TetherError.TransportWriteError)
      }))

    it.effect("stdin EOF after an error result exits 1", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([MockClaude.turn(MockClaude.apiError({ status: 400 }))]))
        yield* cli.write(user("fail", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.endInput
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 1 })))
      }))

    it.effect("stdin EOF mid-turn finishes the turn, then exits 0", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([MockClaude.turn(MockClaude.text(["a", "b", "c"], { delay: "1 second" }))])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("slow", "u-1"))
        yield* TestClock.adjust("1 second")
        yield* cli.endInput
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* cli.isAlive)
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(results(yield* framesOf(cli))[0].result, "abc")
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
      }))

    it.effect("a stdin line that is not JSON: stderr message, exit 1", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.write(initialize())
        yield* TestClock.adjust("1 second")
        yield* cli.write("this is not json")
        yield* TestClock.adjust("39 millis")
        assert.isTrue(yield* cli.isAlive)
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 1 })))
        assert.strictEqual(
          yield* cli.stderrTail,
          "Error parsing streaming input line (type=unknown, 16 chars): SyntaxError\n"
        )
      }))

    it.effect("a crash step mid-turn gives its exit code and stderr; stdout ends", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.text("partial"), MockClaude.crash({ code: 3, stderr: "panic: mock crash\n" }))
        ])
        const cli = yield* MockTransport.open(script, MockTransport.launchSpec(), { stderrLimit: 11 })
        const stdout = yield* collect(cli)
        yield* cli.write(user("go", "u-1"))
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 3 })))
        assert.strictEqual(yield* cli.stderrTail, "mock crash\n") // bounded tail: the last 11 characters
        yield* Fiber.join(stdout.fiber)
        assert.deepStrictEqual(results(yield* framesOf(cli)), [])
      }))

    it.effect("a crash triggered from the test", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        yield* cli.trigger(MockClaude.crash({ code: 137, stderr: "killed\n" }))
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* cli.exit, Transport.ExitStatus.Exited({ code: 137 }))
        assert.strictEqual(yield* cli.stderrTail, "killed\n")
      }))
  })

  describe("faults", () => {
    it.effect("hang: nothing is answered and EOF is ignored", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([], { faults: [MockClaude.hang] }))
        yield* cli.write(initialize())
        yield* cli.endInput
        yield* TestClock.adjust("1 hour")
        assert.deepStrictEqual(yield* cli.emitted, [])
        assert.isTrue(yield* cli.isAlive)
      }))

    it.effect("stall: a triggered stall holds the stream back, then it resumes", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([MockClaude.turn(MockClaude.text(["a", "b", "c"], { delay: "100 millis" }))])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("go", "u-1"))
        yield* TestClock.adjust("520 millis") // the first chunk streams at 513 ms
        yield* cli.trigger(MockClaude.stall("10 seconds"))
        const deltas = Effect.map(
          framesOf(cli),
          (fs) => fs.filter((f) => f.event?.type === "content_block_delta").length
        )
        assert.strictEqual(yield* deltas, 1)
        yield* TestClock.adjust("9 seconds")
        assert.strictEqual(yield* deltas, 1)
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(yield* deltas, 3)
        assert.strictEqual(results(yield* framesOf(cli))[0].result, "abc")
      }))

    it.effect("a stall step without duration stalls until interrupted", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([
          MockClaude.turn(MockClaude.text("a"), MockClaude.stall(), MockClaude.text("b"))
        ])
        const cli = yield* MockTransport.open(script)
        yield* cli.write(user("go", "u-1"))
        yield* TestClock.adjust("1 hour")
        assert.deepStrictEqual(results(yield* framesOf(cli)), [])
        yield* cli.write(controlRequest("req_int", { subtype: "interrupt" }))
        yield* TestClock.adjust("1 second")
        assert.strictEqual(results(yield* framesOf(cli))[0].terminal_reason, "aborted_streaming")
      }))

    it.effect("malformed and oversized lines, and injected raw lines", () =>
      Effect.gen(function*() {
        const script = MockClaude.make([MockClaude.turn(MockClaude.malformed(), MockClaude.oversized(1 << 30))], {
          lineLimit: 1024
        })
        const cli = yield* MockTransport.open(script)
        const stdout = yield* collect(cli)
        yield* cli.inject(`{"type":"future_frame"}`)
        yield* cli.write(user("go", "u-1"))
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(stdout.lines[0], Transport.Line.Text({ text: `{"type":"future_frame"}` }))
        const malformed = stdout.lines.find((line) =>
          line._tag === "Text" && line.text.startsWith(`{"type":"assistant"`)
        )
        assert.isDefined(malformed)
        const tooLong = stdout.lines.find((line) => line._tag === "TooLong")
        assert.deepInclude(tooLong, { _tag: "TooLong", length: 1 << 30, limit: 1024 })
        assert.strictEqual(results(yield* framesOf(cli))[0].terminal_reason, "completed")
      }))

    it.effect("oversized() defaults to twice the script's lineLimit", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([], { lineLimit: 1024 }))
        const stdout = yield* collect(cli)
        yield* cli.trigger(MockClaude.oversized())
        yield* TestClock.adjust("1 second")
        const tooLong = stdout.lines.find((line) => line._tag === "TooLong")
        assert.deepInclude(tooLong, { _tag: "TooLong", length: 2048, limit: 1024 })
      }))

    it.effect("slowReceipt delays command_lifecycle queued", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([], { faults: [MockClaude.slowReceipt("3 seconds")] }))
        yield* TestClock.adjust("1 second")
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("2999 millis")
        assert.deepStrictEqual(yield* cli.emitted, [])
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(kinds(yield* framesOf(cli)), [
          "system/session_state_changed:running",
          "command_lifecycle:queued"
        ])
      }))

    it.effect("dropLifecycle: no command_lifecycle at all, like CLI 2.1.197", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open(MockClaude.make([], { faults: [MockClaude.dropLifecycle] }))
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("1 second")
        const frames = yield* framesOf(cli)
        assert.isFalse(kinds(frames).some((k) => k.startsWith("command_lifecycle")))
        assert.strictEqual(results(frames).length, 1)
      }))
  })

  describe("teardown", () => {
    it.effect("closing the scope ends a running process with SIGTERM and ends stdout", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const cli = yield* MockTransport.open().pipe(Scope.provide(scope))
        const stdout = yield* collect(cli)
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("320 millis")
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(yield* cli.exit, Transport.ExitStatus.Signaled({ signal: "SIGTERM" }))
        assert.isFalse(yield* cli.isAlive)
        assert.isTrue(yield* cli.stdinEnded)
        yield* Fiber.join(stdout.fiber)
        // the simulated process is gone: time passing produces nothing
        const emitted = (yield* cli.emitted).length
        yield* TestClock.adjust("1 minute")
        assert.strictEqual((yield* cli.emitted).length, emitted)
        assert.instanceOf(yield* Effect.flip(cli.write(user("late"))), TetherError.TransportWriteError)
      }))

    it.effect("an exited process keeps its exit status through teardown", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const cli = yield* MockTransport.open().pipe(Scope.provide(scope))
        yield* cli.endInput
        yield* TestClock.adjust("1 second")
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
      }))

    it.effect("a process that ignores SIGTERM is SIGKILLed after termGrace", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const cli = yield* MockTransport.open(MockClaude.defaultScript, MockTransport.launchSpec(), {
          termGrace: "2 seconds"
        }).pipe(Scope.provide(scope))
        yield* cli.trigger(MockClaude.ignoreSigterm)
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("1999 millis")
        assert.isTrue(Option.isNone(yield* cli.exitStatus))
        yield* TestClock.adjust("1 millis")
        yield* Fiber.join(closing)
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Signaled({ signal: "SIGKILL" })))
      }))
  })

  describe("any simulator", () => {
    it.effect("a MockCodex script runs a simulated codex app-server; the faults both providers have work on it", () =>
      Effect.gen(function*() {
        const mock = yield* MockTransport.MockTransport
        const transport = yield* Transport.Transport
        const scope = yield* Scope.make()
        yield* transport.open(MockCodex.launchSpec(), { termGrace: Duration.seconds(1) }).pipe(Scope.provide(scope))
        const cli = yield* mock.latest
        yield* cli.write(JSON.stringify({ method: "initialize", id: 0, params: { clientInfo: { name: "t" } } }))
        yield* TestClock.adjust("155 millis")
        const [answer] = (yield* framesOf(cli)) as ReadonlyArray<Frame>
        assert.strictEqual(answer.id, 0)
        assert.include(answer.result.userAgent, "0.171.0")
        // A Claude-only fault means nothing to the Codex simulator; a crash means the same to both.
        yield* cli.trigger(MockClaude.dropLifecycle)
        assert.isTrue(yield* cli.isAlive)
        yield* cli.trigger(MockClaude.crash({ code: 4, stderr: "boom\n" }))
        assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 4 })))
        assert.include(yield* cli.stderrTail, "boom")
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provide(MockTransport.layer(MockCodex.make()))))

    it.effect("openWith runs a simulator on the clock: a 2.1.197 CLI, replay with the first assistant message", () =>
      Effect.gen(function*() {
        const old = MockClaude.simulator(MockClaude.make([], { version: "2.1.197" }))
        const cli = yield* MockTransport.openWith(old, MockTransport.launchSpec())
        yield* cli.write(initialize())
        yield* cli.write(user("hi", "u-1"))
        yield* TestClock.adjust("412 millis")
        assert.deepStrictEqual(kinds(yield* framesOf(cli)), [
          "control_response/success",
          "system/init",
          "system/status"
        ])
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(kinds(yield* framesOf(cli)).slice(3), [
          "stream_event:message_start",
          "stream_event:content_block_start",
          "stream_event:content_block_delta",
          "user:replay",
          "assistant",
          "stream_event:content_block_stop",
          "stream_event:message_delta",
          "stream_event:message_stop"
        ])
        const [handshake] = yield* framesOf(cli)
        assert.notProperty(handshake.response.response, "claude_code_version")
      }))

    it.effect("a flood reaches stdout whole and in order, without starving the reader", () =>
      Effect.gen(function*() {
        const cli = yield* MockTransport.open()
        const stdout = yield* collect(cli)
        yield* cli.trigger(MockClaude.flood(10_000))
        // Handed out a few thousand at a time: other fibers (this one, the reader) run in between.
        let turns = 0
        while (stdout.lines.length < 10_000 && turns < 1_000) {
          turns++
          yield* Effect.yieldNow
        }
        assert.isAbove(turns, 1)
        const texts = stdout.lines.map((line) => line._tag === "Text" ? JSON.parse(line.text).event.delta.text : "")
        assert.deepStrictEqual(texts.slice(-2), ["flood 9998", "flood 9999"])
        assert.strictEqual(texts.length, 10_000)
      }))
  })

  describe("layer", () => {
    it.effect("provides Transport, and MockTransport hands tests each connection", () =>
      Effect.gen(function*() {
        const transport = yield* Transport.Transport
        const mock = yield* MockTransport.MockTransport
        const waiting = yield* Effect.forkChild(mock.connection(1))
        const first = yield* transport.open(MockTransport.launchSpec(), { termGrace: Duration.seconds(1) })
        const second = yield* transport.open(MockTransport.launchSpec(), { termGrace: Duration.seconds(1) })
        assert.strictEqual(yield* Fiber.join(waiting), second)
        assert.strictEqual(yield* mock.connection(0), first)
        assert.strictEqual(yield* mock.latest, second)
        assert.strictEqual((yield* mock.connections).length, 2)
        assert.isTrue(transport.capabilities.killsDetachedDescendants)

        yield* second.write(user("through the layer", "u-1"))
        yield* TestClock.adjust("1 second")
        assert.strictEqual(results(yield* framesOf(yield* mock.latest))[0].result, "through the layer")
        assert.deepStrictEqual(yield* (yield* mock.connection(0)).emitted, [])
      }).pipe(Effect.provide(MockTransport.layer())))

    it.effect("spawnError makes open fail", () =>
      Effect.gen(function*() {
        const transport = yield* Transport.Transport
        const error = yield* Effect.flip(transport.open(MockTransport.launchSpec(), { termGrace: Duration.seconds(1) }))
        assert.strictEqual(error._tag, "ExecutableNotFound")
        assert.isTrue(error.safeToFallback)
      }).pipe(Effect.provide(MockTransport.layer(MockClaude.defaultScript, {
        spawnError: (spec) => new TetherError.ExecutableNotFound({ program: spec.program, searched: ["PATH"] })
      }))))
  })
})
