/**
 * The simulated Claude Code CLI on its own, sans-IO: stdin lines, signals and faults in at given times, stdout lines,
 * stderr and the exit out at the times the simulator hands them out. No Effect, no clock but the table's.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ClaudeProtocol from "@tether/claude/ClaudeProtocol"
import { Result } from "effect"
import * as fc from "fast-check"
import * as MockClaude from "../src/MockClaude.ts"
import * as MockTransport from "../src/MockTransport.ts"
import type * as Simulator from "../src/Simulator.ts"
import { controlRequest, initialize, user } from "./support/HostLines.ts"
import * as Play from "./support/Play.ts"
import type { Input, Out } from "./support/Play.ts"

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Frame = Record<string, any>

/** Plays `inputs` (at their times) against the simulator until `until`, collecting what it outputs and when. */
const play = (
  options: {
    readonly script?: MockClaude.Script
    readonly args?: ReadonlyArray<string>
    readonly env?: Record<string, string>
    readonly inputs: ReadonlyArray<readonly [number, Input<MockClaude.Fault>]>
    readonly until?: number
  }
): Array<Out> =>
  Play.play(
    MockClaude.simulator(options.script)({
      args: options.args ?? MockTransport.defaultArgs,
      env: options.env ?? { CLAUDE_CODE_SDK_READS_SESSION_STATE: "1" },
      cwd: "/home/user/project",
      pid: 7
    }, 0),
    options.inputs,
    options.until ?? 10_000
  )

const frames = (out: ReadonlyArray<Out>): Array<Frame> =>
  out.flatMap(({ output }) => output._tag === "Stdout" ? [JSON.parse(output.line) as Frame] : [])

/** A compact name for an output: a frame's type, subtype, state and event, or what else the process did. */
const name = (output: Simulator.Output): string => {
  switch (output._tag) {
    case "Stdout": {
      const frame = JSON.parse(output.line) as Frame
      if (frame.type === "user") return frame.isReplay === true ? "user:replay" : "user"
      if (frame.type === "control_response") return `control_response/${frame.response.subtype}`
      if (frame.type === "control_request") return `control_request/${frame.request.subtype}`
      return [frame.type, frame.subtype, frame.state, frame.event?.type].filter((part) => part !== undefined).join(":")
    }
    case "TooLong":
      return `TooLong ${output.length}`
    case "Stderr":
      return `stderr ${output.text.trim()}`
    case "Exit":
      return output.status._tag === "Exited" ? `exit ${output.status.code}` : `killed ${output.status.signal}`
  }
}

const timeline = (out: ReadonlyArray<Out>): Array<string> => out.map(({ at, output }) => `${at} ${name(output)}`)

const old = MockClaude.make([], { version: "2.1.197" })

describe("MockClaude.simulator", () => {
  describe("2.1.332", () => {
    it("a plain turn: every frame at the time the default Timing gives it", () => {
      const out = play({ inputs: [[0, initialize()], [0, user("Say hello", "u-1")]] })
      assert.deepStrictEqual(timeline(out), [
        "305 control_response/success",
        "315 system:session_state_changed:running",
        "315 command_lifecycle:queued",
        "318 command_lifecycle:started",
        "353 system:init",
        "353 system:status",
        "413 user:replay",
        "413 stream_event:message_start",
        "413 stream_event:content_block_start",
        "413 stream_event:content_block_delta",
        "413 assistant",
        "413 stream_event:content_block_stop",
        "413 stream_event:message_delta",
        "413 stream_event:message_stop",
        "423 result:success",
        "423 command_lifecycle:completed",
        "423 system:session_state_changed:idle"
      ])
      const result = frames(out).find((frame) => frame.type === "result")!
      assert.strictEqual(result.user_message_uuid, "u-1")
      assert.strictEqual(result.duration_ms, 108)
    })

    it("nothing is due before the first line: the process sleeps until startup, then waits for input", () => {
      const simulator = MockClaude.simulator()({ args: [], env: {}, cwd: "/", pid: 1 }, 1_000)
      assert.strictEqual(simulator.poll(1_000), undefined)
      assert.strictEqual(simulator.nextWake(), 1_300)
      assert.strictEqual(simulator.poll(1_300), undefined)
      assert.strictEqual(simulator.nextWake(), Number.POSITIVE_INFINITY)
    })

    it("a prompt without uuid: no lifecycle and no user_message_uuid(s) anywhere", () => {
      const all = frames(play({ inputs: [[0, user("hi")]] }))
      assert.isFalse(all.some((frame) => frame.type === "command_lifecycle"))
      assert.isFalse(all.some((frame) => "user_message_uuid" in frame || "user_message_uuids" in frame))
    })

    it("every line it prints is what the codec prints for that frame, and decodes as a known frame", () => {
      const script = MockClaude.make([
        MockClaude.turn(
          MockClaude.text(["a\"b", "\\n", "é 😀", "\u0001"]),
          MockClaude.tool({ name: "Read", permission: false })
        ),
        MockClaude.turn(MockClaude.apiError({ status: 529 }))
      ])
      const out = play({
        script,
        inputs: [[0, initialize()], [0, user("one", "u-1")], [0, user("two", "u-2")], [
          5_000,
          controlRequest("r", {
            subtype: "interrupt"
          })
        ]]
      })
      const lines = out.flatMap(({ output }) => output._tag === "Stdout" ? [output.line] : [])
      assert.isAbove(lines.length, 30)
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
      // Minted ids are UUIDs, and never twice the same (a replay carries the host's own).
      const minted = frames(out).filter((frame) => frame.isReplay !== true && frame.uuid !== undefined)
      assert.isAbove(minted.length, 30)
      for (const frame of minted) {
        assert.match(frame.uuid, uuid)
        assert.match(frame.session_id, uuid)
      }
      assert.strictEqual(new Set(minted.map((frame) => frame.uuid)).size, minted.length)
      for (const line of lines) {
        assert.strictEqual(ClaudeProtocol.encodeFrame(JSON.parse(line)), line)
        const decoded = ClaudeProtocol.decodeLine(line)
        assert.isTrue(Result.isSuccess(decoded) && decoded.success._tag === "Frame", line)
      }
    })

    it("a text delta is byte for byte the codec's encoding, whatever the text", () =>
      fc.assert(
        fc.property(fc.array(fc.string({ unit: "binary" }), { minLength: 1, maxLength: 5 }), (chunks) => {
          const script = MockClaude.make([MockClaude.turn(MockClaude.text(chunks))])
          const deltas = play({ script, inputs: [[0, user("go", "u-1")]] }).flatMap(({ output }) =>
            output._tag === "Stdout" && output.line.includes(`"content_block_delta"`) ? [output.line] : []
          )
          assert.strictEqual(deltas.length, chunks.length)
          deltas.forEach((line, i) => {
            const frame = JSON.parse(line) as Frame
            assert.strictEqual(frame.event.delta.text, chunks[i])
            assert.strictEqual(ClaudeProtocol.encodeFrame(frame as ClaudeProtocol.Frame), line)
          })
        }),
        { numRuns: 50 }
      ))
  })

  describe("2.1.197", () => {
    it("a streamed turn: no receipt, no session state, the replay only with the first assistant message", () => {
      const out = play({ script: old, inputs: [[0, initialize()], [0, user("Say hello", "u-1")]] })
      assert.deepStrictEqual(timeline(out), [
        "305 control_response/success",
        "353 system:init",
        "353 system:status",
        "413 stream_event:message_start",
        "413 stream_event:content_block_start",
        "413 stream_event:content_block_delta",
        "413 user:replay",
        "413 assistant",
        "413 stream_event:content_block_stop",
        "413 stream_event:message_delta",
        "413 stream_event:message_stop",
        "423 result:success"
      ])
      const all = frames(out)
      assert.isFalse(all.some((frame) => "user_message_uuid" in frame || "user_message_uuids" in frame))
      assert.isFalse(all.some((frame) => "api_message_id" in frame))
      const init = all.find((frame) => frame.subtype === "init")!
      assert.strictEqual(init.claude_code_version, "2.1.197")
      assert.notProperty(init, "capabilities")
      assert.notProperty(all.find((frame) => frame.type === "assistant")!, "timestamp")
      const result = all.find((frame) => frame.type === "result")!
      assert.notProperty(result, "result_index")
      assert.notProperty(result, "queued_turn_count")
    })

    it("initialize is answered with its seven fields only", () => {
      const [response] = frames(play({ script: old, inputs: [[0, initialize()]] }))
      assert.deepStrictEqual(Object.keys(response.response), ["subtype", "request_id", "response"])
      assert.deepStrictEqual(Object.keys(response.response.response), [
        "commands",
        "agents",
        "output_style",
        "available_output_styles",
        "models",
        "account",
        "pid"
      ])
    })

    it("interrupt and set_model are answered without a payload; set_model replays a local command first", () => {
      const out = frames(play({
        script: old,
        inputs: [
          [0, controlRequest("r1", { subtype: "interrupt" })],
          [0, controlRequest("r2", { subtype: "set_model", model: "claude-sonnet-4-5" })],
          [0, controlRequest("r3", { subtype: "set_permission_mode", mode: "acceptEdits" })],
          [0, controlRequest("r4", { subtype: "no_such_subtype" })]
        ]
      }))
      assert.deepStrictEqual(out.map((frame) => frame.response ?? frame.message ?? frame.subtype), [
        { subtype: "success", request_id: "r1" },
        { role: "user", content: "<local-command-stdout>Set model to claude-sonnet-4-5</local-command-stdout>" },
        { subtype: "success", request_id: "r2" },
        { subtype: "success", request_id: "r3", response: { mode: "acceptEdits" } },
        "status",
        { subtype: "error", request_id: "r4", error: "Unsupported control request subtype: no_such_subtype" }
      ])
    })

    it("an interrupt mid-stream: the replay, the partial text without aborted, no closing stream events", () => {
      const script = MockClaude.make([MockClaude.turn(MockClaude.text(["w0 ", "w1 ", "w2 "], { delay: 100 }))], {
        version: "2.1.197"
      })
      const out = play({
        script,
        inputs: [[0, user("slow", "u-1")], [550, controlRequest("r1", { subtype: "interrupt" })]]
      })
      assert.deepStrictEqual(timeline(out).slice(-6), [
        "508 stream_event:content_block_delta",
        "575 control_response/success",
        "575 user:replay",
        "575 assistant",
        "575 user",
        "575 result:error_during_execution"
      ])
      const assistant = frames(out).find((frame) => frame.type === "assistant")!
      assert.deepStrictEqual(assistant.message.content, [{ type: "text", text: "w0 " }])
      assert.notProperty(assistant, "aborted")
    })

    it("an API error ends with terminal_reason completed", () => {
      const script = MockClaude.make([MockClaude.turn(MockClaude.apiError({ status: 400 }))], { version: "2.1.197" })
      const result = frames(play({ script, inputs: [[0, user("fail", "u-1")]] })).find((f) => f.type === "result")!
      assert.strictEqual(result.is_error, true)
      assert.strictEqual(result.terminal_reason, "completed")
    })
  })

  describe("the process", () => {
    it("SIGTERM kills it at once, unless it ignores SIGTERM; SIGKILL always does", () => {
      assert.deepStrictEqual(timeline(play({ inputs: [[0, user("hi", "u-1")], [350, { signal: "SIGTERM" }]] })), [
        "310 system:session_state_changed:running",
        "310 command_lifecycle:queued",
        "313 command_lifecycle:started",
        "348 system:init",
        "348 system:status",
        "350 killed SIGTERM"
      ])
      const stubborn = MockClaude.make([], { faults: [MockClaude.ignoreSigterm] })
      assert.deepStrictEqual(
        timeline(play({ script: stubborn, inputs: [[0, { signal: "SIGTERM" }], [10, { signal: "SIGKILL" }]] })),
        ["10 killed SIGKILL"]
      )
      const hung = MockClaude.make([], { faults: [MockClaude.hang] })
      assert.deepStrictEqual(
        timeline(play({ script: hung, inputs: [[0, initialize()], [0, { eof: true }], [900, { signal: "SIGTERM" }]] })),
        ["900 killed SIGTERM"]
      )
    })

    it("stdin EOF exits once the queued turns are done: 0, or 1 after an error result", () => {
      assert.deepStrictEqual(timeline(play({ inputs: [[0, { eof: true }]] })), ["325 exit 0"])
      const failing = MockClaude.make([MockClaude.turn(MockClaude.apiError())])
      assert.deepStrictEqual(
        timeline(play({ script: failing, inputs: [[0, user("x", "u-1")], [0, { eof: true }]] })).slice(-3),
        ["418 command_lifecycle:cancelled", "418 system:session_state_changed:idle", "443 exit 1"]
      )
    })

    it("a line that is not JSON, or a known frame the codec refuses, kills it; an unknown frame type is ignored", () => {
      assert.deepStrictEqual(timeline(play({ inputs: [[0, `{"type":"keep_alive"}`], [0, "nope"]] })), [
        "300 stderr Error parsing streaming input line (type=unknown, 4 chars): SyntaxError",
        "340 exit 1"
      ])
      const [stderr] = play({ inputs: [[0, `{"type":"user","message":{"role":"user","content":"hi"}}`]] })
      assert.include(name(stderr.output), "stderr Error parsing streaming input line (type=user, ")
    })

    it("outputs are pulled one at a time: a flood produces its next frame only when asked", () => {
      const simulator = MockClaude.simulator(MockClaude.make([], { faults: [MockClaude.flood()] }))(
        { args: [], env: {}, cwd: "/", pid: 1 },
        0
      )
      for (let i = 0; i < 1_000; i++) {
        const output = simulator.poll(300)
        assert.strictEqual(output?._tag, "Stdout")
        assert.include((output as { readonly line: string }).line, `"text":"flood ${i}"`)
      }
      const bounded = play({ script: MockClaude.make([], { faults: [MockClaude.flood(3)] }), inputs: [] })
      assert.deepStrictEqual(timeline(bounded), [
        "300 stream_event:content_block_delta",
        "300 stream_event:content_block_delta",
        "300 stream_event:content_block_delta"
      ])
    })

    it("an interrupt written in the middle of a stream with no waits stops it within two batches of 64 frames", () => {
      const chunks = Array.from({ length: 1_000 }, (_, i) => `t${i} `)
      const script = MockClaude.make([MockClaude.turn(MockClaude.text(chunks))], {
        timing: Object.fromEntries(Object.keys(MockClaude.defaultTiming).map((key) => [key, 0]))
      })
      const simulator = MockClaude.simulator(script)({ args: MockTransport.defaultArgs, env: {}, cwd: "/", pid: 1 }, 0)
      simulator.write(0, user("go", "u-1"))
      let deltas = 0
      while (deltas < 10) {
        const output = simulator.poll(0)
        if (output?._tag === "Stdout" && output.line.includes(`"content_block_delta"`)) deltas++
      }
      simulator.write(0, controlRequest("r1", { subtype: "interrupt" }))
      const rest: Array<string> = []
      for (let output = simulator.poll(0); output !== undefined; output = simulator.poll(0)) rest.push(name(output))
      assert.isAtMost(rest.filter((kind) => kind === "stream_event:content_block_delta").length, 128)
      assert.include(rest, "result:error_during_execution")
    })

    it("faults triggered at any time: a stall holds the turn's frames back, controls still go through", () => {
      const script = MockClaude.make([MockClaude.turn(MockClaude.text(["a", "b"], { delay: 100 }))])
      const out = play({
        script,
        inputs: [[0, user("go", "u-1")], [450, { fault: MockClaude.stall(1_000) }], [
          500,
          controlRequest("r1", {
            subtype: "mcp_status"
          })
        ]]
      })
      assert.deepStrictEqual(
        timeline(out).filter((line) => line.includes("delta") || line.includes("control_response")),
        [
          "505 control_response/success",
          "1450 stream_event:content_block_delta",
          "1550 stream_event:content_block_delta",
          "1550 stream_event:message_delta"
        ]
      )
    })
  })
})
