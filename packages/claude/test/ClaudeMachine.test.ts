import { assert, describe, it } from "@effect/vitest"
import * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import { Bench } from "../../core/test/support/MachineHarness.ts"
import { describeItem, itemsOf } from "../../core/test/support/ProviderItems.ts"
import * as ClaudeMachine from "../src/internal/machine.ts"
import { F, line, S } from "./support/ClaudeFrames.ts"

// Claude's protocol machine as tables: stdout lines (built with the codec's own encoder, so every frame here is one
// the decoder accepts) → the neutral items the session machine reads; host commands → the lines written. Then the
// session machine over it, for the rules that depend on what Claude sends (2.1.332's receipts, 2.1.197's silence).

const machine = (options: Partial<ClaudeMachine.MachineOptions> = {}) =>
  ClaudeMachine.make({ hooks: {}, initialize: undefined, maxLineLength: 10_000, ...options })

const receive = (m: Provider.ProtocolMachine, frame: object | string): Array<Provider.Item> =>
  itemsOf(m.receive(typeof frame === "string" ? frame : line(frame)))

// --- stdout → items ---------------------------------------------------------------------------------------------

describe("Claude machine: stdout lines → items", () => {
  const rows: ReadonlyArray<{ readonly name: string; readonly frame: object | string; readonly items: Array<string> }> =
    [
      {
        name: "a text delta (no turn named: the running turn's)",
        frame: F.delta("hi"),
        items: ["TextDelta \"hi\""]
      },
      { name: "a text delta naming its turn", frame: F.delta("hi", "t1"), items: ["TextDelta \"hi\"@t1"] },
      {
        name: "another delta is a stream_event frame",
        frame: F.jsonDelta("{\"a\""),
        items: ["Frame stream_event/content_block_delta"]
      },
      {
        name: "another stream event, naming its turn",
        frame: F.blockStop("t1"),
        items: ["Frame stream_event/content_block_stop@t1"]
      },
      {
        name: "an assistant message: its text blocks joined",
        frame: F.assistant([{ type: "text", text: "a" }, { type: "thinking", thinking: "hm" }, {
          type: "text",
          text: "b"
        }], "t1"),
        items: ["AssistantMessage \"ab\"@t1"]
      },
      {
        name: "an assistant tool use, no text: the tool use only",
        frame: F.assistant([{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "ls" } }]),
        items: ["ToolUse Bash toolu_1 {\"command\":\"ls\"}"]
      },
      {
        name: "an assistant tool use with text: both",
        frame: F.assistant([{ type: "text", text: "running" }, {
          type: "tool_use",
          id: "toolu_1",
          name: "Bash",
          input: {}
        }], "t1"),
        items: ["ToolUse Bash toolu_1 {}@t1", "AssistantMessage \"running\"@t1"]
      },
      {
        name: "an assistant message with no text and no tool: an empty message",
        frame: F.assistant([{ type: "thinking", thinking: "hm" }]),
        items: ["AssistantMessage \"\""]
      },
      {
        name: "a replay of no prompt this machine wrote (set_model's output, a uuid the CLI minted) is no turn's",
        frame: F.user("<local-command-stdout>Set model to claude-sonnet-4-5</local-command-stdout>", {
          isReplay: true
        }),
        items: ["Frame user/replay (session)"]
      },
      {
        name: "a user frame that is not a replay is only a frame",
        frame: F.user([{ type: "text", text: "[Request interrupted by user]" }], { isReplay: false }),
        items: ["Frame user"]
      },
      {
        name: "a user frame with string content",
        frame: F.user("hello"),
        items: ["Frame user"]
      },
      {
        name: "tool results",
        frame: F.user([
          { type: "tool_result", tool_use_id: "toolu_1", content: "hi", is_error: false },
          { type: "text", text: "x" },
          { type: "tool_result", tool_use_id: "toolu_2", content: [{ type: "text", text: "no" }], is_error: true },
          { type: "tool_result", tool_use_id: "toolu_3", content: "?" }
        ]),
        items: [
          "ToolResult toolu_1 \"hi\"",
          "ToolResult toolu_2 error [{\"type\":\"text\",\"text\":\"no\"}]",
          "ToolResult toolu_3 \"?\""
        ]
      },
      {
        name: "a result: the CLI's session id, then the turn's end",
        frame: F.result({ user_message_uuid: "t1" }),
        items: ["SessionId session-1", "TurnEnd@t1 Success"]
      },
      {
        name: "a result naming no turn (2.1.197)",
        frame: F.result(),
        items: ["SessionId session-1", "TurnEnd Success"]
      },
      {
        name: "an API error is a success with is_error",
        frame: F.result({
          is_error: true,
          api_error_status: 400,
          result: "API Error: 400",
          terminal_reason: "api_error"
        }),
        items: ["SessionId session-1", "TurnEnd Api(400,API Error: 400)"]
      },
      {
        name: "an API error without status or text",
        frame: F.result({ is_error: true, result: undefined }),
        items: ["SessionId session-1", "TurnEnd Api(null,API error)"]
      },
      {
        name: "interrupted mid-stream",
        frame: F.result({ subtype: "error_during_execution", is_error: true, terminal_reason: "aborted_streaming" }),
        items: ["SessionId session-1", "TurnEnd Interrupted"]
      },
      {
        name: "interrupted mid-tool",
        frame: F.result({ subtype: "error_during_execution", is_error: true, terminal_reason: "aborted_tools" }),
        items: ["SessionId session-1", "TurnEnd Interrupted"]
      },
      {
        name: "an interrupt marker wins over the subtype",
        frame: F.result({ subtype: "success", is_error: false, terminal_reason: "aborted_streaming" }),
        items: ["SessionId session-1", "TurnEnd Interrupted"]
      },
      {
        name: "max turns",
        frame: F.result({ subtype: "error_max_turns", is_error: true, result: undefined }),
        items: [
          "SessionId session-1",
          "TurnEnd Failed MaxTurnsExceeded {\"_tag\":\"MaxTurnsExceeded\",\"turnId\":\"T\",\"sessionId\":\"session-1\"}"
        ]
      },
      {
        name: "budget",
        frame: F.result({ subtype: "error_max_budget_usd", is_error: true, total_cost_usd: 2.5 }),
        items: [
          "SessionId session-1",
          "TurnEnd Failed BudgetExceeded {\"_tag\":\"BudgetExceeded\",\"turnId\":\"T\",\"sessionId\":\"session-1\",\"totalCostUsd\":2.5}"
        ]
      },
      {
        name: "another error: the CLI's subtype, terminal reason and messages",
        frame: F.result({
          subtype: "error_during_execution",
          is_error: true,
          terminal_reason: "model_error",
          errors: ["boom"]
        }),
        items: [
          "SessionId session-1",
          "TurnEnd Failed TurnFailed {\"_tag\":\"TurnFailed\",\"turnId\":\"T\",\"subtype\":\"error_during_execution\",\"terminalReason\":\"model_error\",\"errors\":[\"boom\"]}"
        ]
      },
      {
        name: "another error without terminal reason or messages",
        frame: F.result({ subtype: "error_during_execution", is_error: true }),
        items: [
          "SessionId session-1",
          "TurnEnd Failed TurnFailed {\"_tag\":\"TurnFailed\",\"turnId\":\"T\",\"subtype\":\"error_during_execution\",\"terminalReason\":null,\"errors\":[]}"
        ]
      },
      {
        name: "command_lifecycle queued is the receipt (2.1.332)",
        frame: F.lifecycle("queued", "t1"),
        items: ["Receipt t1", "Frame command_lifecycle/queued@t1"]
      },
      {
        name: "the other lifecycle states only name their turn",
        frame: F.lifecycle("completed", "t1"),
        items: ["Frame command_lifecycle/completed@t1"]
      },
      {
        name: "system/init: the session id, and a frame of the running turn",
        frame: F.init(),
        items: ["SessionId session-1", "Frame system/init"]
      },
      {
        name: "system/api_retry",
        frame: F.system("api_retry", {
          attempt: 1,
          max_retries: 2,
          retry_delay_ms: 615,
          error_status: 529,
          error: "overloaded"
        }),
        items: ["Retry 1/2 after 615 (529: overloaded)"]
      },
      {
        name: "system/api_retry without a status",
        frame: F.system("api_retry", { attempt: 2, max_retries: 2, retry_delay_ms: 1, error_status: null, error: "x" }),
        items: ["Retry 2/2 after 1 (undefined: x)"]
      },
      {
        name: "session_state_changed idle is session traffic (it may follow the next prompt's write)",
        frame: F.system("session_state_changed", { state: "idle" }),
        items: ["Frame system/session_state_changed (session)"]
      },
      {
        name: "session_state_changed running is the turn's",
        frame: F.system("session_state_changed", { state: "running" }),
        items: ["Frame system/session_state_changed"]
      },
      {
        name: "status null answers a permission-mode change: session traffic",
        frame: F.system("status", { status: null }),
        items: ["Frame system/status (session)"]
      },
      {
        name: "status requesting is the turn's",
        frame: F.system("status", { status: "requesting" }),
        items: ["Frame system/status"]
      },
      {
        name: "background_tasks_changed is session traffic",
        frame: F.system("background_tasks_changed", { tasks: [] }),
        items: ["Frame system/background_tasks_changed (session)"]
      },
      {
        name: "a turn's system frame (a task that started)",
        frame: F.system("task_started", { task_id: "b1", description: "d" }),
        items: ["Frame system/task_started"]
      },
      {
        name: "an unknown system subtype is a frame of the running turn",
        frame: JSON.stringify(F.system("brand_new", { extra: 1 })),
        items: ["Frame system/brand_new"]
      },
      {
        name: "can_use_tool is a permission request",
        frame: F.canUseTool("req-1"),
        items: ["PermissionRequest req-1 tool Bash toolu_1 {\"command\":\"touch x\"} mock command"]
      },
      {
        name: "a hook callback: a frame, and a request for the host",
        frame: F.hook("req-2", "toolu_9"),
        items: [
          "Frame control_request/hook_callback",
          "HostRequest req-2 (turn) {\"_tag\":\"HookCallback\",\"callbackId\":\"hook_prompt\",\"input\":{\"prompt\":\"hi\"},\"toolUseId\":\"toolu_9\"}"
        ]
      },
      {
        name: "a hook callback with no tool use",
        frame: F.hook("req-2"),
        items: [
          "Frame control_request/hook_callback",
          "HostRequest req-2 (turn) {\"_tag\":\"HookCallback\",\"callbackId\":\"hook_prompt\",\"input\":{\"prompt\":\"hi\"}}"
        ]
      },
      {
        name: "an MCP message",
        frame: F.mcp("req-3"),
        items: [
          "Frame control_request/mcp_message",
          "HostRequest req-3 {\"_tag\":\"McpMessage\",\"serverName\":\"host\",\"message\":{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}"
        ]
      },
      {
        name: "any other request from the CLI is the host's to answer",
        frame: F.otherRequest("req-4"),
        items: [
          "Frame control_request/oauth_token_refresh",
          "HostRequest req-4 {\"_tag\":\"Other\",\"subtype\":\"oauth_token_refresh\",\"request\":{\"subtype\":\"oauth_token_refresh\",\"message\":\"pick one\"}}"
        ]
      },
      {
        name: "the CLI withdraws a request",
        frame: F.cancel("req-1"),
        items: ["Cancel req-1", "Frame control_cancel_request"]
      },
      { name: "keep_alive is session traffic", frame: { type: "keep_alive" }, items: ["Frame keep_alive (session)"] },
      {
        name: "a known loose frame",
        frame: { type: "rate_limit_event", rate_limit_info: {}, uuid: "u", session_id: S },
        items: ["Frame rate_limit_event"]
      },
      {
        name: "a known loose frame with a subtype",
        frame: { type: "tool_progress", subtype: "running", uuid: "u", session_id: S },
        items: ["Frame tool_progress/running"]
      },
      {
        name: "a known loose frame whose subtype is not a string",
        frame: { type: "tool_progress", subtype: 3, uuid: "u", session_id: S },
        items: ["Frame tool_progress"]
      },
      {
        name: "commands_changed (not a system frame the codec knows) is session traffic",
        frame: JSON.stringify(F.system("commands_changed", { commands: [] })),
        items: ["Frame system/commands_changed (session)"]
      },
      {
        name: "an unknown frame that is not a system frame is the turn's, whatever its subtype",
        frame: JSON.stringify({ type: "brand_new", subtype: "commands_changed" }),
        items: ["Frame brand_new/commands_changed"]
      },
      {
        name: "an echo whose id has digits where the session's refs would be is only a frame",
        frame: F.controlOk("request12"),
        items: ["Frame control_response/success (session)"]
      },
      {
        name: "an unknown frame type, with its subtype",
        frame: JSON.stringify({ type: "brand_new", subtype: "kind", payload: [1] }),
        items: ["Frame brand_new/kind"]
      },
      {
        name: "an unknown frame type whose subtype is not a string",
        frame: JSON.stringify({ type: "brand_new", subtype: 7 }),
        items: ["Frame brand_new"]
      },
      {
        name: "an answer to a control request of the session",
        frame: F.controlOk("tether_7", { model: "claude-opus-5-5" }),
        items: ["Frame control_response/success (session)", "ControlAnswer #7 ok {\"model\":\"claude-opus-5-5\"}"]
      },
      {
        name: "an answer with no payload (older CLIs): an empty one",
        frame: F.controlOk("tether_8"),
        items: ["Frame control_response/success (session)", "ControlAnswer #8 ok {}"]
      },
      {
        name: "an error answer, with its code",
        frame: F.controlError("tether_9", "Unsupported control request subtype: x", "unsupported_request"),
        items: [
          "Frame control_response/error (session)",
          "ControlAnswer #9 error Unsupported control request subtype: x (unsupported_request)"
        ]
      },
      {
        name: "an error answer without a code",
        frame: F.controlError("tether_9", "no"),
        items: ["Frame control_response/error (session)", "ControlAnswer #9 error no (null)"]
      },
      {
        name: "the echo of the host's own answer (--replay-user-messages) is only a frame",
        frame: F.controlOk("406bb5dd-8197-495f-b3cf-7e3a6aef2930", { behavior: "allow" }),
        items: ["Frame control_response/success (session)"]
      },
      {
        name: "an answer to an id that is the session's prefix but no ref is only a frame",
        frame: F.controlOk("tether_x"),
        items: ["Frame control_response/success (session)"]
      },
      {
        name: "an answer to initialize outside the handshake is only a frame",
        frame: F.initOk(),
        items: ["Frame control_response/success (session)"]
      },
      {
        name: "a line that is not JSON",
        frame: "not json",
        items: ["Malformed not-json"]
      },
      {
        name: "a known frame that does not match its schema",
        frame: JSON.stringify({ type: "result", subtype: "success" }),
        items: ["Malformed malformed"]
      },
      {
        name: "a line longer than the limit",
        frame: `{"type":"keep_alive","pad":"${"x".repeat(10_000)}"}`,
        items: ["Malformed too-long"]
      }
    ]
  for (const row of rows) {
    it(row.name, () => {
      assert.deepStrictEqual(receive(machine(), row.frame).map(describeItem), row.items)
    })
  }

  it("the replay of a prompt the machine wrote is its receipt, once", () => {
    const m = machine()
    m.prompt("t1", "hi")
    assert.deepStrictEqual(receive(m, F.replay("t1")).map(describeItem), ["Receipt t1", "Frame user/replay@t1"])
    assert.deepStrictEqual(receive(m, F.replay("t1")).map(describeItem), ["Frame user/replay (session)"])
  })

  it("a machine remembers the last 1024 prompts for their replays", () => {
    const m = machine()
    for (let i = 0; i <= 1024; i++) m.prompt(`t${i}`, "hi")
    assert.deepStrictEqual(receive(m, F.replay("t0")).map(describeItem), ["Frame user/replay (session)"])
    assert.deepStrictEqual(receive(m, F.replay("t1")).map(describeItem), ["Receipt t1", "Frame user/replay@t1"])
    assert.deepStrictEqual(receive(m, F.replay("t1024")).map(describeItem), [
      "Receipt t1024",
      "Frame user/replay@t1024"
    ])
  })

  it("a prompt that cannot be encoded is not remembered", () => {
    const m = machine()
    assert.throws(() => m.prompt("t1", [{ type: "image", data: 1n }]))
    assert.deepStrictEqual(receive(m, F.replay("t1")).map(describeItem), ["Frame user/replay (session)"])
  })

  it("the replay of set_model's output while idle (2.1.197 and 2.1.332) is neither a receipt nor a turn's", () => {
    const m = machine()
    m.prompt("t1", "hi")
    const local = F.user("<local-command-stdout>Set model to claude-opus-5-5</local-command-stdout>", {
      uuid: "00000000-0000-4000-8000-000000000020",
      isReplay: true
    })
    assert.deepStrictEqual(receive(m, local).map(describeItem), ["Frame user/replay (session)"])
    assert.deepStrictEqual(receive(m, F.replay("t1")).map(describeItem), ["Receipt t1", "Frame user/replay@t1"])
  })

  it("every frame's event keeps the raw frame, unknown fields included", () => {
    const unknown = { type: "brand_new", subtype: "kind", payload: [1], nested: { deep: true } }
    const known = { ...F.delta("hi"), future_field: { x: 1 } }
    const m = machine()
    const [u] = receive(m, JSON.stringify(unknown))
    assert.deepStrictEqual((u as { readonly raw: unknown }).raw, unknown)
    const [k] = receive(m, known)
    assert.deepStrictEqual((k as { readonly raw: unknown }).raw, known)
    const system = F.system("brand_new", { extra: { a: 1 } })
    const [s] = receive(m, JSON.stringify(system))
    assert.deepStrictEqual((s as { readonly raw: unknown }).raw, system)
  })

  it("a result becomes Claude's turn result", () => {
    const frame = F.result({
      user_message_uuid: "t1",
      stop_reason: "end_turn",
      terminal_reason: "completed",
      permission_denials: [{ tool_name: "Bash", tool_use_id: "toolu_1", tool_input: { command: "rm" } }]
    })
    const end = receive(machine(), frame)[1] as Extract<Provider.Item, { readonly _tag: "TurnEnd" }>
    assert.deepStrictEqual(end.result, {
      sessionId: S,
      text: "done",
      isError: false,
      subtype: "success",
      stopReason: "end_turn",
      terminalReason: "completed",
      usage: { inputTokens: 3, outputTokens: 4, cacheCreationInputTokens: 5, cacheReadInputTokens: 6 },
      totalCostUsd: 0.25,
      durationMs: 10,
      numTurns: 1,
      permissionDenials: [{ toolName: "Bash", toolUseId: "toolu_1", input: { command: "rm" } }],
      output: undefined,
      raw: frame
    } as never)
  })

  it("a result with the least the CLI sends", () => {
    const frame = F.result({ usage: {}, result: undefined, stop_reason: null })
    const end = receive(machine(), frame)[1] as Extract<Provider.Item, { readonly _tag: "TurnEnd" }>
    const result = end.result as unknown as ClaudeMachine.TurnResult
    assert.deepStrictEqual(result.usage, {
      inputTokens: 0,
      outputTokens: 0,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 0
    })
    assert.strictEqual(result.text, "")
    assert.isUndefined(result.stopReason)
    assert.isUndefined(result.terminalReason)
  })

  it("a malformed line keeps its first 4096 characters", () => {
    const long = `not json ${"y".repeat(5000)}`
    const [item] = receive(machine(), long)
    assert.strictEqual((item as { readonly raw: string }).raw, long.slice(0, 4096))
    const [short] = receive(machine(), "nope")
    assert.strictEqual((short as { readonly raw: string }).raw, "nope")
  })

  it("a permission request carries the raw frame", () => {
    const frame = F.canUseTool("req-1", { future: 1 })
    const [item] = receive(machine(), frame)
    assert.deepStrictEqual((item as Extract<Provider.Item, { readonly _tag: "PermissionRequest" }>).request.raw, frame)
  })
})

// --- the handshake and capabilities -----------------------------------------------------------------------------

describe("Claude machine: handshake", () => {
  it("start writes initialize with the hooks and the extra fields", () => {
    const hooks = { PreToolUse: [{ matcher: "Bash", hookCallbackIds: ["h1"] }] }
    const [start] = itemsOf(machine({ hooks, initialize: { systemPrompt: ["be brief"] } }).start())
    assert.strictEqual(start._tag, "Write")
    assert.deepStrictEqual(JSON.parse((start as { readonly line: string }).line), {
      type: "control_request",
      request_id: "tether_init",
      request: { subtype: "initialize", hooks, systemPrompt: ["be brief"] }
    })
  })

  it("the initialize answer completes it, and the CLI's version is reported", () => {
    const m = machine()
    assert.deepStrictEqual(m.capabilities().notes, [])
    m.start()
    const payload = { claude_code_version: "2.1.332", commands: [], extra: 1 }
    assert.deepStrictEqual(receive(m, F.initOk(payload)).map(describeItem), [
      "Frame control_response/success (session)",
      `Ready ${JSON.stringify(payload)}`
    ])
    assert.deepStrictEqual(m.capabilities().notes, ["claude 2.1.332"])
    // A second answer to initialize is not a second handshake.
    assert.deepStrictEqual(receive(m, F.initOk(payload)).map(describeItem), [
      "Frame control_response/success (session)"
    ])
  })

  it("2.1.197 names its version only in system/init: the notes name it from the first turn on", () => {
    const m = machine()
    m.start()
    // 2.1.197's answer: commands, agents, output styles, models, account, pid; no version.
    receive(m, F.initOk({ commands: [], pid: 10001 }))
    assert.deepStrictEqual(m.capabilities().notes, [])
    receive(m, F.init({ claude_code_version: "2.1.197" }))
    assert.deepStrictEqual(m.capabilities().notes, ["claude 2.1.197"])
  })

  it("an initialize answer with no payload (older CLIs) is ready with nothing", () => {
    const m = machine()
    m.start()
    assert.deepStrictEqual(receive(m, F.controlOk("tether_init")).map(describeItem), [
      "Frame control_response/success (session)",
      "Ready {}"
    ])
    assert.deepStrictEqual(m.capabilities().notes, [])
  })

  it("during the handshake, other control answers are not its answer", () => {
    const m = machine()
    m.start()
    assert.deepStrictEqual(receive(m, F.controlOk("tether_1")).map(describeItem), [
      "Frame control_response/success (session)",
      "ControlAnswer #1 ok {}"
    ])
    assert.deepStrictEqual(receive(m, F.controlOk("406bb5dd-8197")).map(describeItem), [
      "Frame control_response/success (session)"
    ])
    assert.strictEqual(receive(m, F.initOk())[1]._tag, "Ready")
  })

  it("a control error is an Error answer with the CLI's message and code", () => {
    const [, answer] = receive(machine(), F.controlError("tether_2", "no", "bad"))
    assert.deepStrictEqual(answer, {
      _tag: "ControlAnswer",
      ref: 2,
      answer: { _tag: "Error", message: "no", code: "bad" }
    })
  })

  it("an error answer refuses the handshake", () => {
    const m = machine()
    m.start()
    assert.deepStrictEqual(receive(m, F.initError("bad hooks")).map(describeItem), [
      "Frame control_response/error (session)",
      "Refused bad hooks"
    ])
  })

  it("an initialize answer that does not decode refuses the handshake", () => {
    const m = machine()
    m.start()
    const items = receive(m, F.initOk({ commands: "not a list" }))
    assert.strictEqual(items.length, 2)
    assert.strictEqual(items[1]._tag, "Refused")
    assert.include((items[1] as { readonly reason: string }).reason, "commands")
  })

  it("capabilities: receipts are explicit once the CLI shows its lifecycle frames, else first output", () => {
    const base = {
      provider: "claude",
      interrupt: true,
      permissionKinds: ["tool"],
      resume: true,
      sandbox: undefined,
      notes: []
    }
    const old = machine()
    assert.deepStrictEqual(old.capabilities(), { ...base, receipts: "first-output" })
    receive(old, F.init())
    receive(old, F.init({ capabilities: ["interrupt_receipt_v1"] }))
    assert.strictEqual(old.capabilities().receipts, "first-output")

    const byInit = machine()
    receive(byInit, F.init({ capabilities: ["interrupt_receipt_v1", "msg_lifecycle_v1"] }))
    assert.strictEqual(byInit.capabilities().receipts, "explicit")

    const byFrame = machine()
    receive(byFrame, F.lifecycle("started", "t1"))
    assert.strictEqual(byFrame.capabilities().receipts, "explicit")
  })

  it("capabilities: a handshake that names 2.1.332 or later says explicit receipts before any turn", () => {
    const handshake = (payload: object) => {
      const m = machine()
      m.start()
      receive(m, F.initOk(payload))
      return m
    }
    assert.strictEqual(handshake({ claude_code_version: "2.1.332" }).capabilities().receipts, "explicit")
    assert.strictEqual(handshake({ claude_code_version: "2.2.0" }).capabilities().receipts, "explicit")
    assert.strictEqual(handshake({ claude_code_version: "10.0.1" }).capabilities().receipts, "explicit")
    // Older or unknown: first output until the CLI shows more.
    assert.strictEqual(handshake({ claude_code_version: "2.1.331" }).capabilities().receipts, "first-output")
    assert.strictEqual(handshake({ claude_code_version: "2.0.400" }).capabilities().receipts, "first-output")
    assert.strictEqual(handshake({ claude_code_version: "next" }).capabilities().receipts, "first-output")
    assert.strictEqual(handshake({ commands: [] }).capabilities().receipts, "first-output")
    // What a turn's system/init says settles it, both ways.
    const said = handshake({ claude_code_version: "2.1.332" })
    receive(said, F.init({ claude_code_version: "2.1.332", capabilities: ["interrupt_receipt_v1"] }))
    assert.strictEqual(said.capabilities().receipts, "first-output")
    const shown = handshake({ claude_code_version: "2.1.250" })
    receive(shown, F.init({ capabilities: ["msg_lifecycle_v1"] }))
    assert.strictEqual(shown.capabilities().receipts, "explicit")
    // A lifecycle frame is a receipt whatever was said before.
    receive(said, F.lifecycle("queued", "t1"))
    assert.strictEqual(said.capabilities().receipts, "explicit")
  })
})

// --- host commands → lines --------------------------------------------------------------------------------------

describe("Claude machine: host commands → lines", () => {
  const lineOf = (items: Provider.Items): unknown => {
    const all = itemsOf(items)
    assert.strictEqual(all.length, 1)
    assert.strictEqual(all[0]._tag, "Write")
    return JSON.parse((all[0] as { readonly line: string }).line)
  }

  const request: Permission.PermissionRequest = {
    requestId: "req-1",
    turnId: "t1",
    kind: "tool",
    toolName: "Bash",
    toolUseId: "toolu_1",
    input: { command: "touch x" },
    description: undefined,
    raw: {}
  }

  it("a prompt is a user message stamped with the turn's id", () => {
    assert.deepStrictEqual(lineOf(machine().prompt("t1", "hello")), {
      type: "user",
      message: { role: "user", content: "hello" },
      parent_tool_use_id: null,
      session_id: "",
      uuid: "t1"
    })
    assert.deepStrictEqual(
      (lineOf(machine().prompt("t2", [{ type: "text", text: "a" }])) as { message: unknown }).message,
      { role: "user", content: [{ type: "text", text: "a" }] }
    )
  })

  it("a prompt that is not a valid frame throws (the session makes it InvalidPrompt)", () => {
    assert.throws(() => machine().prompt("t1", [{ type: "image", data: 1n }]))
  })

  it("an interrupt is a control request under the session's ref", () => {
    assert.deepStrictEqual(lineOf(machine().interrupt("t1", 3)), {
      type: "control_request",
      request_id: "tether_3",
      request: { subtype: "interrupt" }
    })
  })

  it("a control request goes under the session's ref, as given", () => {
    assert.deepStrictEqual(lineOf(machine().control(4, { subtype: "set_model", model: "opus" })), {
      type: "control_request",
      request_id: "tether_4",
      request: { subtype: "set_model", model: "opus" }
    })
    assert.throws(() => machine().control(5, { subtype: "set_model", model: 1n }))
  })

  it("allow: the original input and the tool use id", () => {
    assert.deepStrictEqual(lineOf(machine().answerPermission(request, Permission.allow())), {
      type: "control_response",
      response: {
        subtype: "success",
        request_id: "req-1",
        response: { behavior: "allow", updatedInput: { command: "touch x" }, toolUseID: "toolu_1" }
      }
    })
  })

  it("allow with a rewritten input, for a request without a tool use id", () => {
    assert.deepStrictEqual(
      lineOf(machine().answerPermission({ ...request, toolUseId: undefined }, Permission.allow({ command: "ls" }))),
      {
        type: "control_response",
        response: {
          subtype: "success",
          request_id: "req-1",
          response: { behavior: "allow", updatedInput: { command: "ls" } }
        }
      }
    )
  })

  it("deny, with and without interrupting", () => {
    assert.deepStrictEqual(
      (lineOf(machine().answerPermission(request, Permission.deny("no"))) as any).response.response,
      { behavior: "deny", message: "no" }
    )
    assert.deepStrictEqual(
      (lineOf(machine().answerPermission(request, Permission.deny("no", { interrupt: true }))) as any).response
        .response,
      { behavior: "deny", message: "no", interrupt: true }
    )
    assert.deepStrictEqual(
      (lineOf(machine().answerPermission(request, Permission.deny("no", { interrupt: false }))) as any).response
        .response,
      { behavior: "deny", message: "no" }
    )
  })

  it("an allow whose input is not JSON throws (the session sends an error reply instead)", () => {
    assert.throws(() => machine().answerPermission(request, Permission.allow({ n: 1n })))
  })

  it("replies: an object payload as is, anything else as an empty object; errors as control errors", () => {
    assert.deepStrictEqual(lineOf(machine().reply("h1", { _tag: "Success", payload: { continue: true } })), {
      type: "control_response",
      response: { subtype: "success", request_id: "h1", response: { continue: true } }
    })
    for (const payload of [null, "text", [1, 2], 3, undefined]) {
      assert.deepStrictEqual(
        (lineOf(machine().reply("h1", { _tag: "Success", payload })) as any).response.response,
        {}
      )
    }
    assert.deepStrictEqual(lineOf(machine().reply("h1", { _tag: "Error", message: "nope" })), {
      type: "control_response",
      response: { subtype: "error", request_id: "h1", error: "nope" }
    })
  })
})

// --- the session machine over Claude's ----------------------------------------------------------------------------

type ClaudeBench = Bench & { readonly cli: (frame: object | string) => Array<string> }

const session = (version = "2.1.332", options: Partial<ClaudeMachine.MachineOptions> = {}): ClaudeBench => {
  const bench = new Bench(machine(options)) as Bench & { cli: ClaudeBench["cli"] }
  bench.cli = (frame) => bench.step((m, now) => m.receive(now, typeof frame === "string" ? frame : line(frame)))
  bench.input((m, now) => m.start(now))
  bench.cli(F.initOk({ claude_code_version: version }))
  bench.trace()
  return bench
}

const sendPrompt = (b: Bench, prompt = "hello") => b.input((m, now) => m.send(now, prompt, undefined, true))

describe("session machine over Claude", () => {
  it("2.1.332: the prompt carries the turn's id, command_lifecycle queued acknowledges it", () => {
    const b = session()
    sendPrompt(b)
    assert.deepStrictEqual(JSON.parse(b.wrote().at(-1)!).uuid, "t1")
    assert.deepStrictEqual(b.cli(F.lifecycle("queued", "t1")), [
      "TurnAcknowledged@t1",
      "Frame:command_lifecycle/queued@t1"
    ])
    assert.deepStrictEqual(b.cli(F.init({ capabilities: ["msg_lifecycle_v1"] })), ["Frame:system/init@t1"])
    assert.deepStrictEqual(b.cli(F.delta("Hel")), ["TextDelta@t1 Hel"])
    assert.deepStrictEqual(b.cli(F.result({ user_message_uuid: "t1" })), [
      "Usage@t1",
      "TurnCompleted@t1",
      "Status:idle",
      "settle t1 ok"
    ])
    assert.deepStrictEqual(b.cli(F.lifecycle("completed", "t1")), ["Frame:command_lifecycle/completed@t1"])
    assert.deepStrictEqual(b.cli(F.system("session_state_changed", { state: "idle" })), [
      "Frame:system/session_state_changed"
    ])
    assert.strictEqual(b.m.sessionId, S)
    assert.strictEqual(b.m.provider.capabilities().receipts, "explicit")
  })

  it("2.1.197 (no receipt, the replay only after the first response): the first output acknowledges, every delta is the turn's", () => {
    const b = session("2.1.197")
    sendPrompt(b)
    b.at(100)
    assert.deepStrictEqual(b.cli(F.init()), ["TurnAcknowledged@t1", "Frame:system/init@t1"])
    for (const text of ["a", "b", "c"]) b.at(b.now + 600).cli(F.delta(text))
    // The steady stream is progress: no stall after 1 800 ms of a 1 000 ms stall budget.
    assert.strictEqual(b.m.nextDeadline(), b.now + 1000)
    assert.deepStrictEqual(b.cli(F.replay("t1")), ["Frame:user/replay@t1"])
    assert.deepStrictEqual(b.cli(F.result()), ["Usage@t1", "TurnCompleted@t1", "Status:idle", "settle t1 ok"])
    assert.deepStrictEqual(
      b.events().filter((e) => e._tag === "TextDelta").map((e) => e.turnId),
      ["t1", "t1", "t1"]
    )
    assert.strictEqual(b.m.provider.capabilities().receipts, "first-output")
  })

  it("a result that names an earlier turn does not end the running one", () => {
    const b = session()
    sendPrompt(b)
    assert.deepStrictEqual(b.cli(F.result({ user_message_uuid: "t0" })), ["Frame:result@t0"])
    assert.strictEqual(b.m.active?.id, "t1")
  })

  it("an interrupt is sent as a control request, its answer is the session's own, the result settles the turn", () => {
    const b = session()
    sendPrompt(b)
    b.cli(F.lifecycle("queued", "t1"))
    const outcome = b.input((m, now) => m.interruptActive(now, "host"))
    assert.deepStrictEqual(outcome, { waiter: 1 })
    assert.deepStrictEqual(JSON.parse(b.wrote().at(-1)!), {
      type: "control_request",
      request_id: "tether_1",
      request: { subtype: "interrupt" }
    })
    // 2.1.197 answers an interrupt without a payload.
    assert.deepStrictEqual(b.cli(F.controlOk("tether_1")), ["Frame:control_response/success"])
    assert.deepStrictEqual(
      b.cli(F.result({ subtype: "error_during_execution", is_error: true, terminal_reason: "aborted_streaming" })),
      [
        "Usage@t1",
        "TurnFailed@t1 TurnInterrupted(host,acknowledged,written)",
        "Status:idle",
        "settle t1 TurnInterrupted(host,acknowledged,written)",
        "interrupt waiter 1 interrupted"
      ]
    )
    assert.strictEqual(b.m.nextDeadline(), Infinity)
  })

  it("2.1.197: set_model's replay while idle is published as the session's, and the next turn waits for its own frame", () => {
    const b = session("2.1.197")
    b.input((m, now) => m.control(now, { subtype: "set_model", model: "claude-sonnet-4-5" }))
    const local = F.user("<local-command-stdout>Set model to claude-sonnet-4-5</local-command-stdout>", {
      uuid: "cli-minted",
      isReplay: true
    })
    assert.deepStrictEqual(b.cli(local), ["Frame:user/replay"])
    assert.isUndefined(b.events().at(-1)!.turnId)
    assert.deepStrictEqual(b.cli(F.controlOk("tether_1")), ["Frame:control_response/success", "control #1 ok {}"])
    sendPrompt(b)
    // Were it to arrive after the prompt's write, it would still not be the turn's, nor its receipt.
    assert.deepStrictEqual(b.cli({ ...local, uuid: "cli-minted-2" }), ["Frame:user/replay"])
    assert.isFalse(b.m.active?.acknowledged)
    assert.deepStrictEqual(b.cli(F.init()), ["TurnAcknowledged@t1", "Frame:system/init@t1"])
  })

  it("a control answered without a payload (older CLIs) succeeds with what the CLI sent", () => {
    const b = session("2.1.197")
    const ref = b.input((m, now) => m.control(now, { subtype: "set_model", model: "opus" }))
    assert.strictEqual(ref, 1)
    assert.deepStrictEqual(b.cli(F.controlOk("tether_1")), ["Frame:control_response/success", "control #1 ok {}"])
  })

  it("a permission: the policy's allow is written as Claude's answer; the echo of it is only a frame", () => {
    const b = session()
    sendPrompt(b)
    b.cli(F.lifecycle("queued", "t1"))
    assert.deepStrictEqual(b.cli(F.canUseTool("req-1")), [
      "Status:awaiting-permission@t1",
      "PermissionRequested@t1 req-1",
      "decide req-1@t1"
    ])
    b.input((m, now) => m.decided(now, "req-1", Permission.allow()))
    const answer = JSON.parse(b.wrote().at(-1)!)
    assert.deepStrictEqual(answer.response.response, {
      behavior: "allow",
      updatedInput: { command: "touch x" },
      toolUseID: "toolu_1"
    })
    assert.deepStrictEqual(b.cli(F.controlOk("req-1", answer.response.response)), ["Frame:control_response/success"])
    assert.deepStrictEqual(b.m.pendingPermissions(), [])
  })

  it("without a policy (reportDenials), a tool the CLI denies on its own is the default policy's deny", () => {
    const denial = F.system("permission_denied", {
      tool_name: "Bash",
      tool_use_id: "toolu_1",
      message: "touch needs approval"
    })
    const b = session("2.1.332", { reportDenials: true })
    sendPrompt(b)
    b.cli(F.lifecycle("queued", "t1"))
    b.cli(F.assistant([{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "touch x" } }]))
    assert.deepStrictEqual(b.cli(denial), [
      "PermissionRequested@t1 permission_denied:toolu_1",
      "decided permission_denied:toolu_1@t1",
      "stop deciding permission_denied:toolu_1",
      "PermissionResolved@t1 permission_denied:toolu_1 policy:deny",
      "permission wait 0"
    ])
    // The request as the policy would have seen it: the tool use's input, the raw frame; the deny, the CLI's message.
    const events = b.records.flatMap((r) => r._tag === "Event" ? [r.event] : [])
    const requested = events.find((e) => e._tag === "PermissionRequested")
    assert.deepStrictEqual(requested?._tag === "PermissionRequested" ? requested.request : undefined, {
      requestId: "permission_denied:toolu_1",
      turnId: "t1",
      kind: "tool",
      toolName: "Bash",
      toolUseId: "toolu_1",
      input: { command: "touch x" },
      description: undefined,
      raw: denial
    })
    const resolved = events.find((e) => e._tag === "PermissionResolved")
    assert.deepStrictEqual(
      resolved?._tag === "PermissionResolved" ? resolved.resolution : undefined,
      { _tag: "Decided", by: "policy", decision: Permission.deny("touch needs approval") }
    )
    assert.deepStrictEqual(b.wrote().filter((written) => written.includes("permission_denied")), [])
    // A denial of a tool use whose input the machine did not see: an empty input. With a policy, only a frame.
    assert.deepStrictEqual(
      itemsOf(
        machine({ reportDenials: true }).receive(
          line(F.system("permission_denied", { tool_name: "Bash", tool_use_id: "toolu_2" }))
        )
      ).map((item) => item._tag === "PermissionDenied" ? [item.request.input, item.message] : item._tag),
      [[{}, "Bash needs approval, and there was no one to ask"]]
    )
    assert.deepStrictEqual(receive(machine(), denial).map(describeItem), ["Frame system/permission_denied"])
    // A denial with a reason of its own (a deny rule, the mode): the CLI denies it as well when it can ask, and
    // says so the same way. A frame either way.
    const byRule = F.system("permission_denied", {
      tool_name: "Bash",
      tool_use_id: "toolu_3",
      decision_reason_type: "rule",
      message: "Permission to use Bash with command touch x has been denied."
    })
    assert.deepStrictEqual(receive(machine({ reportDenials: true }), byRule).map(describeItem), [
      "Frame system/permission_denied"
    ])
  })

  it("reportDenials keeps a tool use's input only until its result, and forgets them all at the turn's result", () => {
    const m = machine({ reportDenials: true })
    const toolUse = (id: string) =>
      receive(m, F.assistant([{ type: "tool_use", id, name: "Bash", input: { command: id } }]))
    const inputOf = (id: string) => {
      const [item] = receive(m, F.system("permission_denied", { tool_name: "Bash", tool_use_id: id }))
      return item._tag === "PermissionDenied" ? item.request.input : undefined
    }
    toolUse("toolu_a")
    receive(m, F.user([{ type: "tool_result", tool_use_id: "toolu_a", content: "ok" }]))
    assert.deepStrictEqual(inputOf("toolu_a"), {})
    toolUse("toolu_b")
    receive(m, F.result())
    assert.deepStrictEqual(inputOf("toolu_b"), {})
    toolUse("toolu_c")
    assert.deepStrictEqual(inputOf("toolu_c"), { command: "toolu_c" })
  })

  it("a permission the CLI cancels (an interrupt mid-permission) expires unanswered", () => {
    const b = session()
    sendPrompt(b)
    b.cli(F.lifecycle("queued", "t1"))
    b.cli(F.canUseTool("req-1"))
    assert.deepStrictEqual(b.cli(F.cancel("req-1")), [
      "stop deciding req-1",
      "PermissionResolved@t1 req-1 expired:cancelled-by-cli",
      "permission wait 0",
      "Status:running@t1",
      "Frame:control_cancel_request@t1"
    ])
  })

  it("a hook callback goes to the host's handler and its answer is written", () => {
    const b = session()
    assert.deepStrictEqual(b.cli(F.hook("req-2")), [
      "Frame:control_request/hook_callback",
      "handle req-2 {\"_tag\":\"HookCallback\",\"callbackId\":\"hook_prompt\",\"input\":{\"prompt\":\"hi\"}}"
    ])
    b.input((m, now) => m.handled(now, "req-2", { _tag: "Success", payload: { continue: true } }))
    assert.deepStrictEqual(JSON.parse(b.wrote().at(-1)!), {
      type: "control_response",
      response: { subtype: "success", request_id: "req-2", response: { continue: true } }
    })
  })

  it("an unknown frame during a turn is the turn's, with its raw fields", () => {
    const b = session()
    sendPrompt(b)
    const unknown = { type: "brand_new", data: { a: [1, 2] } }
    assert.deepStrictEqual(b.cli(JSON.stringify(unknown)), ["TurnAcknowledged@t1", "Frame:brand_new@t1"])
    assert.deepStrictEqual(b.events().at(-1)!.raw, unknown)
  })

  it("the idle after a result does not acknowledge the next queued turn", () => {
    const b = session()
    sendPrompt(b)
    b.cli(F.lifecycle("queued", "t1"))
    b.input((m, now) => m.send(now, "next", true, true))
    b.cli(F.result({ user_message_uuid: "t1" }))
    assert.strictEqual(b.m.active?.id, "t2")
    b.cli(F.lifecycle("completed", "t1"))
    b.cli(F.system("session_state_changed", { state: "idle" }))
    assert.isFalse(b.m.active?.acknowledged)
    assert.deepStrictEqual(b.cli(F.lifecycle("queued", "t2")), [
      "TurnAcknowledged@t2",
      "Frame:command_lifecycle/queued@t2"
    ])
  })

  it("a malformed line is a protocol error event, and the session goes on", () => {
    const b = session()
    sendPrompt(b)
    assert.deepStrictEqual(b.cli("{not json"), [
      "ProtocolError",
      "log Warning: protocol error (not-json): " +
      (b.events().at(-1) as { readonly error: { readonly detail: string } }).error.detail
    ])
    assert.strictEqual(b.m.status, "running")
  })

  it("a refused handshake fails startup", () => {
    const b = new Bench(machine())
    b.input((m, now) => m.start(now))
    assert.deepStrictEqual(b.step((m, now) => m.receive(now, line(F.initError("no")))), [
      "Frame:control_response/error",
      "start failed (refused): no []",
      "Status:failed",
      "log Warning: session retired (handshake-refused): the CLI refused the handshake: no",
      "teardown"
    ])
  })
})

// --- in-process MCP calls and questions to the user ---------------------------------------------------------------

const mcpMessage = (requestId: string, message: object, server = "host") => ({
  type: "control_request",
  request_id: requestId,
  request: { subtype: "mcp_message", server_name: server, message: { jsonrpc: "2.0", ...message } }
})

const toolsCall = (requestId: string, id: unknown, server = "host") =>
  mcpMessage(requestId, { id, method: "tools/call", params: { name: "add", arguments: {} } }, server)

const cancelled = (requestId: string, callId: unknown, server = "host") =>
  mcpMessage(requestId, { method: "notifications/cancelled", params: { requestId: callId } }, server)

/** The items without the frames, tags and ids only: what the session machine acts on. */
const acts = (items: ReadonlyArray<Provider.Item>): Array<string> =>
  items.flatMap((item) =>
    item._tag === "HostRequest"
      ? [`HostRequest ${item.requestId} ${item.bound ?? "control"}`]
      : item._tag === "Cancel"
      ? [`Cancel ${item.requestId}`]
      : []
  )

describe("Claude machine: in-process MCP calls", () => {
  it("a tools/call is the turn's work; other MCP messages are bounded as controls", () => {
    const m = machine()
    assert.deepStrictEqual(acts(receive(m, toolsCall("req-1", 7))), ["HostRequest req-1 turn"])
    assert.deepStrictEqual(acts(receive(m, mcpMessage("req-2", { id: 8, method: "tools/list" }))), [
      "HostRequest req-2 control"
    ])
  })

  it("the CLI's notifications/cancelled for a running call cancels that call (and is answered itself)", () => {
    const m = machine()
    receive(m, toolsCall("req-1", 7))
    assert.deepStrictEqual(acts(receive(m, cancelled("req-2", 7))), ["Cancel req-1", "HostRequest req-2 control"])
    // Forgotten once cancelled: a second cancellation names no call.
    assert.deepStrictEqual(acts(receive(m, cancelled("req-3", 7))), ["HostRequest req-3 control"])
  })

  it("string and numeric ids, and servers, are told apart", () => {
    const m = machine()
    receive(m, toolsCall("req-1", 7))
    receive(m, toolsCall("req-2", "7"))
    receive(m, toolsCall("req-3", 7, "other"))
    assert.deepStrictEqual(acts(receive(m, cancelled("req-4", "7"))), ["Cancel req-2", "HostRequest req-4 control"])
    assert.deepStrictEqual(acts(receive(m, cancelled("req-5", 7, "other"))), [
      "Cancel req-3",
      "HostRequest req-5 control"
    ])
    assert.deepStrictEqual(acts(receive(m, cancelled("req-6", 7))), ["Cancel req-1", "HostRequest req-6 control"])
  })

  it("a call without a usable id, or a cancellation naming none, cancels nothing", () => {
    const m = machine()
    receive(m, toolsCall("req-1", null))
    assert.deepStrictEqual(acts(receive(m, cancelled("req-2", null))), ["HostRequest req-2 control"])
    assert.deepStrictEqual(
      acts(receive(m, mcpMessage("req-3", { method: "notifications/cancelled" }))),
      ["HostRequest req-3 control"]
    )
    assert.deepStrictEqual(acts(receive(m, cancelled("req-4", 99))), ["HostRequest req-4 control"])
  })

  it("a call the host answered, or whose turn ended, is forgotten: a late cancellation cancels nothing", () => {
    const m = machine()
    receive(m, toolsCall("req-1", 1))
    receive(m, toolsCall("req-2", 2))
    m.reply("req-1", { _tag: "Success", payload: {} })
    assert.deepStrictEqual(acts(receive(m, cancelled("req-3", 1))), ["HostRequest req-3 control"])
    // Another reply (not a call's) leaves the running call alone.
    m.reply("req-9", { _tag: "Success", payload: {} })
    assert.deepStrictEqual(acts(receive(m, cancelled("req-4", 2))), ["Cancel req-2", "HostRequest req-4 control"])
    receive(m, toolsCall("req-5", 5))
    receive(m, F.result())
    assert.deepStrictEqual(acts(receive(m, cancelled("req-6", 5))), ["HostRequest req-6 control"])
  })
})

describe("Claude machine: questions to the user", () => {
  for (const subtype of ["elicitation", "request_user_dialog"]) {
    it(`${subtype} waits as long as the turn`, () => {
      const m = machine()
      const request = subtype === "elicitation"
        ? { subtype, mcp_server_name: "host", message: "pick one", requested_schema: { type: "object" } }
        : { subtype, dialog_kind: "refusal_fallback_prompt", payload: {} }
      const items = receive(m, { type: "control_request", request_id: "req-1", request })
      assert.deepStrictEqual(acts(items), ["HostRequest req-1 turn"])
    })
  }
  it("another request of the CLI is bounded as a control", () => {
    assert.deepStrictEqual(acts(receive(machine(), F.otherRequest("req-1"))), ["HostRequest req-1 control"])
  })
})
