import { assert, describe, it } from "@effect/vitest"
import { AcpProtocol } from "@tether/acp"
import { Permission } from "@tether/core"
import type * as Provider from "@tether/core/Provider"
import { describeItem, itemsOf } from "../../core/test/support/ProviderItems.ts"
import * as AcpMachine from "../src/internal/machine.ts"

// The ACP protocol machine as tables: the agent's lines (built with the codec's own encoders) → the neutral items
// the session machine reads; host commands → the lines written (docs/protocol/acp.md).

const CWD = "/home/user/project"
const SESSION = "sess-1"

const options = (overrides: Partial<AcpMachine.MachineOptions> = {}): AcpMachine.MachineOptions => ({
  clientInfo: { name: "test", title: null, version: "0" },
  clientCapabilities: { readTextFile: false, writeTextFile: false, terminal: false },
  opening: { _tag: "New", cwd: CWD, mcpServers: [], additionalDirectories: undefined },
  authMethod: undefined,
  hostMethods: new Set(),
  ...overrides
})

const machine = (overrides: Partial<AcpMachine.MachineOptions> = {}) => AcpMachine.make(options(overrides))

const L = {
  response: (id: AcpProtocol.Id, result: unknown) => AcpProtocol.encodeResponse(id, result),
  error: (id: AcpProtocol.Id, code: number, message: string, data?: unknown) =>
    JSON.stringify({ jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } }),
  request: (id: AcpProtocol.Id, method: string, params: unknown) => AcpProtocol.encodeRequest(id, method, params),
  initialize: (id: number, extra: object = {}) =>
    AcpProtocol.encodeResponse(id, {
      protocolVersion: 1,
      agentCapabilities: { loadSession: true },
      agentInfo: { name: "agent", version: "1.0" },
      ...extra
    }),
  update: (update: object, sessionId = SESSION) =>
    AcpProtocol.encodeNotification("session/update", { sessionId, update }),
  chunk: (text: string) => L.update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } }),
  permission: (id: AcpProtocol.Id) =>
    AcpProtocol.encodeRequest(id, "session/request_permission", {
      sessionId: SESSION,
      toolCall: { toolCallId: "call-1", title: "Running ls", kind: "execute", rawInput: { command: "ls" } },
      options: [
        { optionId: "always", name: "Always", kind: "allow_always" },
        { optionId: "once", name: "Allow", kind: "allow_once" },
        { optionId: "no", name: "Reject", kind: "reject_once" }
      ]
    })
}

const describe_ = (items: Provider.Items): Array<string> => itemsOf(items).map(describeItem)
const receive = (m: Provider.ProtocolMachine, line: string): Array<string> => describe_(m.receive(line))

/** The JSON of each line written. */
const written = (items: Provider.Items): Array<any> =>
  itemsOf(items).flatMap((item) => item._tag === "Write" ? [JSON.parse(item.line)] : [])

/** A machine through its handshake: `initialize` is request 1, `session/new` request 2. */
const ready = (overrides: Partial<AcpMachine.MachineOptions> = {}) => {
  const m = machine(overrides)
  m.start()
  m.receive(L.initialize(1))
  m.receive(L.response(2, { sessionId: SESSION }))
  return m
}

/** A ready machine running the host's turn `t1` (its `session/prompt` is request 3). */
const running = (overrides: Partial<AcpMachine.MachineOptions> = {}) => {
  const m = ready(overrides)
  m.prompt("t1", "hello")
  return m
}

const request = (overrides: Partial<AcpMachine.MachineOptions>, line: string) =>
  itemsOf(running(overrides).receive(line))

describe("AcpMachine", () => {
  describe("the handshake", () => {
    it("initialize offers protocol version 1 and no client capability unless the host serves it", () => {
      assert.deepStrictEqual(written(machine().start()), [{
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: 1,
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          clientInfo: { name: "test", title: null, version: "0" }
        }
      }])
      const served = machine({ clientCapabilities: { readTextFile: true, writeTextFile: true, terminal: false } })
      assert.deepStrictEqual(written(served.start())[0].params.clientCapabilities.fs, {
        readTextFile: true,
        writeTextFile: true
      })
    })

    it("then session/new in the cwd; its answer makes the session ready with the agent's capabilities", () => {
      const m = machine()
      m.start()
      const next = m.receive(L.initialize(1))
      assert.deepStrictEqual(written(next), [{
        jsonrpc: "2.0",
        id: 2,
        method: "session/new",
        params: { cwd: CWD, mcpServers: [] }
      }])
      const items = itemsOf(m.receive(L.response(2, {
        sessionId: SESSION,
        modes: { currentModeId: "default", availableModes: [{ id: "default", name: "Default" }] }
      })))
      assert.deepStrictEqual(items.map((item) => item._tag), ["Frame", "SessionId", "Ready"])
      const info = (items[2] as { readonly info: AcpMachine.HandshakeInfo }).info
      assert.strictEqual(info.sessionId, SESSION)
      assert.strictEqual(info.agentInfo?.name, "agent")
      assert.strictEqual(info.modes?.currentModeId, "default")
      assert.isFalse(info.loaded)
      const capabilities = m.capabilities()
      assert.strictEqual(capabilities.provider, "acp")
      assert.strictEqual(capabilities.receipts, "first-output")
      assert.isTrue(capabilities.resume)
    })

    it("with an authMethod, authenticate comes before session/new", () => {
      const m = machine({ authMethod: "gemini-api-key" })
      m.start()
      assert.deepStrictEqual(written(m.receive(L.initialize(1))).map((line) => [line.method, line.params]), [
        ["authenticate", { methodId: "gemini-api-key" }]
      ])
      assert.deepStrictEqual(written(m.receive(L.response(2, {}))).map((line) => line.method), ["session/new"])
    })

    const refusals: ReadonlyArray<readonly [string, Partial<AcpMachine.MachineOptions>, ReadonlyArray<string>]> = [
      ["initialize answered with an error", {}, [L.error(1, -32603, "boom")]],
      ["another protocol version", {}, [L.initialize(1, { protocolVersion: 2 })]],
      ["an initialize result that does not fit", {}, [L.response(1, { protocolVersion: "one" })]],
      ["session/new refused", {}, [L.initialize(1), L.error(2, -32000, "Authentication required")]],
      [
        "a load the agent does not advertise",
        { opening: { _tag: "Load", sessionId: "old", cwd: CWD, mcpServers: [], additionalDirectories: undefined } },
        [L.initialize(1, { agentCapabilities: { loadSession: false } })]
      ],
      [
        "a session/load that fails",
        { opening: { _tag: "Load", sessionId: "old", cwd: CWD, mcpServers: [], additionalDirectories: undefined } },
        [L.initialize(1), L.error(2, -32002, "Resource not found")]
      ]
    ]
    for (const [name, overrides, lines] of refusals) {
      it(`refuses the handshake: ${name}`, () => {
        const m = machine(overrides)
        m.start()
        const last = lines.map((line) => receive(m, line)).at(-1)!
        assert.strictEqual(last.length, 1)
        assert.match(last[0], /^Refused /)
      })
    }

    it("additionalDirectories only where the agent advertises them; then they are named in session/new", () => {
      const opening = { _tag: "New", cwd: CWD, mcpServers: [], additionalDirectories: ["/srv/lib"] } as const
      const refused = machine({ opening })
      refused.start()
      assert.deepStrictEqual(receive(refused, L.initialize(1)), [
        "Refused additionalDirectories: the agent does not advertise sessionCapabilities.additionalDirectories"
      ])
      const m = machine({ opening })
      m.start()
      const sent = written(
        m.receive(L.initialize(1, {
          agentCapabilities: { loadSession: true, sessionCapabilities: { additionalDirectories: {} } }
        }))
      )
      assert.deepStrictEqual(sent.map((line) => [line.method, line.params.additionalDirectories]), [
        ["session/new", ["/srv/lib"]]
      ])
    })

    it("a failed session/load names the session and the agent's error", () => {
      const m = machine({
        opening: { _tag: "Load", sessionId: "old", cwd: CWD, mcpServers: [], additionalDirectories: undefined }
      })
      m.start()
      assert.deepStrictEqual(written(m.receive(L.initialize(1)))[0].params, {
        cwd: CWD,
        mcpServers: [],
        sessionId: "old"
      })
      assert.deepStrictEqual(receive(m, L.error(2, -32002, "Resource not found")), [
        "Refused session/load of old failed: Resource not found (-32002)"
      ])
    })

    it("updates replayed during session/load are session events, and the loaded session is ready", () => {
      const m = machine({
        opening: { _tag: "Load", sessionId: SESSION, cwd: CWD, mcpServers: [], additionalDirectories: undefined }
      })
      m.start()
      m.receive(L.initialize(1))
      assert.deepStrictEqual(receive(m, L.chunk("earlier answer")), [
        "Frame session/update/agent_message_chunk (session)"
      ])
      const items = itemsOf(m.receive(L.response(2, {})))
      assert.deepStrictEqual(items.map((item) => item._tag), ["Frame", "SessionId", "Ready"])
      assert.isTrue((items[2] as { readonly info: AcpMachine.HandshakeInfo }).info.loaded)
    })
  })

  describe("a turn", () => {
    it("is a session/prompt request of text blocks", () => {
      const m = ready()
      assert.deepStrictEqual(written(m.prompt("t1", "hello")), [{
        jsonrpc: "2.0",
        id: 3,
        method: "session/prompt",
        params: { sessionId: SESSION, prompt: [{ type: "text", text: "hello" }] }
      }])
      const blocks = [{ type: "text", text: "a" }, { type: "resource_link", uri: "file:///x", name: "x" }]
      assert.deepStrictEqual(written(ready().prompt("t1", blocks))[0].params.prompt, blocks)
    })

    it("its updates are the running turn's events; the prompt's answer ends it with the text said", () => {
      const m = running()
      const table: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
        [L.chunk("Hel"), [`TextDelta "Hel"`]],
        [L.chunk("lo"), [`TextDelta "lo"`]],
        [
          L.update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "hmm" } }),
          ["Frame session/update/agent_thought_chunk"]
        ],
        [
          L.update({
            sessionUpdate: "tool_call",
            toolCallId: "c1",
            title: "Running ls",
            kind: "execute",
            status: "pending",
            rawInput: { command: "ls" }
          }),
          [`AssistantMessage "Hello"`, `ToolUse execute c1 {"command":"ls"}`]
        ],
        [
          L.update({ sessionUpdate: "tool_call_update", toolCallId: "c1", status: "in_progress" }),
          ["Frame session/update/tool_call_update"]
        ],
        [
          L.update({
            sessionUpdate: "tool_call_update",
            toolCallId: "c1",
            status: "completed",
            content: [{ type: "content", content: { type: "text", text: "a.txt" } }]
          }),
          [`ToolResult c1 [{"type":"content","content":{"type":"text","text":"a.txt"}}]`]
        ],
        [
          L.update({ sessionUpdate: "tool_call_update", toolCallId: "c2", status: "failed", rawOutput: "denied" }),
          [`ToolResult c2 error "denied"`]
        ],
        [
          L.update({ sessionUpdate: "plan", entries: [{ content: "x", priority: "high", status: "pending" }] }),
          ["Frame session/update/plan"]
        ],
        [L.update({ sessionUpdate: "current_mode_update", currentModeId: "yolo" }), [
          "Frame session/update/current_mode_update (session)"
        ]],
        [L.update({ sessionUpdate: "something_new", x: 1 }), ["Frame session/update/something_new"]],
        [L.update({ sessionUpdate: "tool_call", toolCallId: "c3" }), ["Malformed malformed"]],
        [L.update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x" } }, "other"), [
          "Frame session/update/agent_message_chunk (session)"
        ]],
        [L.chunk(" done"), [`TextDelta " done"`]],
        [L.response(3, { stopReason: "end_turn" }), [`AssistantMessage " done"@t1`, "TurnEnd@t1 Success"]]
      ]
      for (const [line, expected] of table) assert.deepStrictEqual(receive(m, line), expected, line)
      // Between turns, updates are the session's.
      assert.deepStrictEqual(receive(m, L.chunk("later")), ["Frame session/update/agent_message_chunk (session)"])
    })

    it("what is about the session is never the prompt's receipt or output, even while a prompt runs", () => {
      // claude-agent-acp and Gemini announce their commands from a timer: after the client's first prompt. Gemini
      // replays a loaded conversation after its load answer, user_message_chunk first.
      const m = running()
      for (
        const update of [
          { sessionUpdate: "available_commands_update", availableCommands: [] },
          { sessionUpdate: "current_mode_update", currentModeId: "yolo" },
          { sessionUpdate: "config_option_update", configOptions: [] },
          { sessionUpdate: "usage_update", used: 1, size: 2 },
          { sessionUpdate: "session_info_update", title: "t" },
          { sessionUpdate: "user_message_chunk", content: { type: "text", text: "old question" } }
        ]
      ) {
        assert.deepStrictEqual(receive(m, L.update(update)), [`Frame session/update/${update.sessionUpdate} (session)`])
      }
    })

    it("the result carries every chunk's text and the stop reason, no usage", () => {
      const m = running()
      m.receive(L.chunk("a"))
      m.receive(L.chunk("b"))
      const end = itemsOf(m.receive(L.response(3, { stopReason: "end_turn" }))).find((item) => item._tag === "TurnEnd")
      assert.deepStrictEqual(end?._tag === "TurnEnd" ? { ...end.result, raw: undefined } : undefined, {
        sessionId: SESSION,
        text: "ab",
        usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
        durationMs: undefined,
        raw: undefined,
        stopReason: "end_turn"
      } as never)
    })

    const ends: ReadonlyArray<readonly [string, string, string]> = [
      ["end_turn", L.response(3, { stopReason: "end_turn" }), "TurnEnd@t1 Success"],
      ["cancelled", L.response(3, { stopReason: "cancelled" }), "TurnEnd@t1 Interrupted"],
      [
        "max_tokens",
        L.response(3, { stopReason: "max_tokens" }),
        `TurnEnd@t1 Failed TurnLimitReached {"_tag":"TurnLimitReached","turnId":"T","sessionId":"sess-1","limit":"max_tokens","text":""}`
      ],
      [
        "max_turn_requests",
        L.response(3, { stopReason: "max_turn_requests" }),
        `TurnEnd@t1 Failed TurnLimitReached {"_tag":"TurnLimitReached","turnId":"T","sessionId":"sess-1","limit":"max_turn_requests","text":""}`
      ],
      [
        "refusal",
        L.response(3, { stopReason: "refusal" }),
        `TurnEnd@t1 Failed TurnRefused {"_tag":"TurnRefused","turnId":"T","sessionId":"sess-1","text":""}`
      ],
      [
        "an error answer, with the HTTP status in its data",
        L.error(3, -32603, "quota", { status: 429 }),
        "TurnEnd@t1 Api(429,quota (-32603))"
      ],
      ["an error answer without status", L.error(3, -32603, "boom"), "TurnEnd@t1 Api(null,boom (-32603))"],
      // The real agents' shapes (docs/protocol/acp-agents.md §4.9; the transcripts `modelError`).
      ["Gemini CLI's: the HTTP status as the code", L.error(3, 429, "mock 429"), "TurnEnd@t1 Api(429,mock 429 (429))"],
      [
        "claude-agent-acp's: the HTTP status in the message",
        L.error(3, -32603, `Internal error: API Error: 429 {"type":"error"}`),
        `TurnEnd@t1 Api(429,Internal error: API Error: 429 {"type":"error"} (-32603))`
      ],
      ["a positive code that is no HTTP error status", L.error(3, 7, "odd"), "TurnEnd@t1 Api(null,odd (7))"],
      [
        "\"Request cancelled\" with no cancel sent is an error like any other",
        L.error(3, -32800, "Request cancelled"),
        "TurnEnd@t1 Api(null,Request cancelled (-32800))"
      ]
    ]
    for (const [name, line, expected] of ends) {
      it(`ends: ${name}`, () => assert.deepStrictEqual(receive(running(), line).at(-1), expected))
    }

    it("ends: a result that does not fit PromptResponse is a protocol error and the turn's failure", () => {
      const items = receive(running(), L.response(3, { stopReason: "bored" }))
      assert.strictEqual(items[0], "Malformed malformed")
      assert.match(items[1], /^TurnEnd@t1 Failed TurnFailed .*"subtype":"malformed-response"/)
    })

    it("after a cancel, \"Request cancelled\" is the interrupt's end", () => {
      const m = running()
      m.interrupt("t1", 1)
      assert.deepStrictEqual(receive(m, L.error(3, -32800, "Request cancelled")).at(-1), "TurnEnd@t1 Interrupted")
    })

    it("an answer to a prompt the machine does not know is a session frame", () => {
      assert.deepStrictEqual(receive(ready(), L.response(9, { stopReason: "end_turn" })), ["Frame response (session)"])
    })
  })

  describe("interrupt", () => {
    it("writes session/cancel and settles its control at once (the protocol does not answer it)", () => {
      const m = running()
      assert.deepStrictEqual(describe_(m.interrupt("t1", 7)), [
        `Write {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`,
        "ControlAnswer #7 ok null"
      ])
    })

    it("answers every open permission request cancelled first, and withdraws it", () => {
      const m = running()
      m.receive(L.permission(0))
      assert.deepStrictEqual(describe_(m.interrupt("t1", 7)), [
        `Write {"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}`,
        "Cancel 0",
        `Write {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`,
        "ControlAnswer #7 ok null"
      ])
    })

    it("of a turn that is not a prompt of the agent: refused", () => {
      assert.throws(() => ready().interrupt("t9", 1))
    })
  })

  describe("permissions", () => {
    const asked = () => {
      const m = running()
      const [item] = itemsOf(m.receive(L.permission(0)))
      assert.strictEqual(item._tag, "PermissionRequest")
      return {
        m,
        request: { ...(item as Extract<Provider.Item, { _tag: "PermissionRequest" }>).request, turnId: "t1" }
      }
    }

    it("a request names the tool call, its input and the agent's allow_always options as suggestions", () => {
      const { request } = asked()
      assert.deepStrictEqual({ ...request, raw: undefined }, {
        requestId: "0",
        turnId: "t1",
        kind: "tool",
        toolName: "execute",
        toolUseId: "call-1",
        input: { command: "ls" },
        description: "Running ls",
        raw: undefined,
        suggestions: [{ type: AcpMachine.allowAlwaysType, optionId: "always", name: "Always" }]
      })
    })

    const answers: ReadonlyArray<readonly [string, Permission.Verdict, ReadonlyArray<unknown>]> = [
      ["allow selects allow_once", Permission.allow(), [{ outcome: { outcome: "selected", optionId: "once" } }]],
      [
        "allow with the allow_always suggestion selects it",
        Permission.allow(undefined, {
          updatedPermissions: [{ type: AcpMachine.allowAlwaysType, optionId: "always", name: "Always" }]
        }),
        [{ outcome: { outcome: "selected", optionId: "always" } }]
      ],
      [
        "deny selects reject_once, with the reason in _meta",
        Permission.deny("not now"),
        [{ outcome: { outcome: "selected", optionId: "no" }, _meta: { tether: { reason: "not now" } } }]
      ],
      [
        "deny with interrupt answers cancelled, then cancels the prompt",
        Permission.deny("stop", { interrupt: true }),
        [{ outcome: { outcome: "cancelled" }, _meta: { tether: { reason: "stop" } } }, { sessionId: SESSION }]
      ]
    ]
    for (const [name, verdict, expected] of answers) {
      it(name, () => {
        const { m, request } = asked()
        assert.deepStrictEqual(
          written(m.answerPermission(request, verdict)).map((line) => line.result ?? line.params),
          expected
        )
        // Answered once: a second answer writes nothing.
        assert.deepStrictEqual(written(m.answerPermission(request, verdict)), [])
      })
    }

    it("allow where the agent offers no allow_once selects its allow_always; with no allowing option, refused", () => {
      const m = running()
      const ask = (id: number, kinds: ReadonlyArray<string>) => {
        const [item] = itemsOf(m.receive(AcpProtocol.encodeRequest(id, "session/request_permission", {
          sessionId: SESSION,
          toolCall: { toolCallId: `call-${id}`, title: "Running ls" },
          options: kinds.map((kind) => ({ optionId: kind, name: kind, kind }))
        })))
        return { ...(item as Extract<Provider.Item, { _tag: "PermissionRequest" }>).request, turnId: "t1" }
      }
      const onlyAlways = ask(10, ["allow_always", "reject_once"])
      assert.deepStrictEqual(written(m.answerPermission(onlyAlways, Permission.allow())).map((line) => line.result), [
        { outcome: { outcome: "selected", optionId: "allow_always" } }
      ])
      assert.throws(() => m.answerPermission(ask(11, ["reject_once"]), Permission.allow()))
    })

    it("names the tool by what the agent said of the call before (claude-agent-acp's requests omit its kind)", () => {
      const m = running()
      m.receive(L.update({
        sessionUpdate: "tool_call",
        toolCallId: "tu1",
        title: "`rm -rf x`",
        kind: "execute",
        status: "pending",
        rawInput: { command: "rm -rf x" }
      }))
      const [item] = itemsOf(m.receive(AcpProtocol.encodeRequest(0, "session/request_permission", {
        sessionId: SESSION,
        toolCall: { toolCallId: "tu1", title: "`rm -rf x`" },
        options: [{ kind: "allow_once", name: "Allow", optionId: "allow" }]
      })))
      const request = (item as Extract<Provider.Item, { _tag: "PermissionRequest" }>).request
      assert.deepStrictEqual([request.toolName, request.input], ["execute", { command: "rm -rf x" }])
    })

    it("deny with interrupt cancels the prompt the request belongs to, never a queued one", () => {
      const { m, request } = asked()
      m.prompt("t2", "queued")
      const items = itemsOf(m.answerPermission(request, Permission.deny("stop", { interrupt: true })))
      assert.isTrue(items.length > 0)
      // t1 ends cancelled (an interrupt); t2, written next, ends on its own answer as a success.
      assert.deepStrictEqual(receive(m, L.response(3, { stopReason: "cancelled" })).at(-1), "TurnEnd@t1 Interrupted")
      assert.deepStrictEqual(
        receive(m, L.error(4, -32800, "Request cancelled")).at(-1)?.startsWith("TurnEnd@t2 Api"),
        true
      )
    })

    it("the agent's $/cancel_request withdraws its request and answers it -32800", () => {
      const m = running({ clientCapabilities: { readTextFile: true, writeTextFile: false, terminal: false } })
      m.receive(L.permission(7))
      m.receive(L.request(8, "fs/read_text_file", { sessionId: SESSION, path: `${CWD}/a.txt` }))
      for (const id of [7, 8]) {
        const items = itemsOf(m.receive(AcpProtocol.encodeNotification("$/cancel_request", { requestId: id })))
        assert.deepStrictEqual(items.flatMap((item) => item._tag === "Cancel" ? [item.requestId] : []), [String(id)])
        assert.deepStrictEqual(written(items), [
          { jsonrpc: "2.0", id, error: { code: -32800, message: "Request cancelled" } }
        ])
      }
      // Withdrawn: the host's late answers write nothing, and the prompt's end has nothing left to answer.
      assert.deepStrictEqual(written(m.reply("8", { _tag: "Success", payload: { content: "x" } })), [])
      assert.deepStrictEqual(written(m.receive(L.response(3, { stopReason: "end_turn" }))), [])
    })

    it("a rewritten input cannot be honoured: refused before anything is written; the host's failure rejects", () => {
      const { m, request } = asked()
      assert.throws(() => m.answerPermission(request, Permission.allow({ command: "rm -rf /" })))
      assert.deepStrictEqual(written(m.reply("0", { _tag: "Error", message: "invalid" })).map((line) => line.result), [
        { outcome: { outcome: "selected", optionId: "no" } }
      ])
    })

    it("a request whose params do not fit is answered with invalid params", () => {
      const items = request({}, L.request(5, "session/request_permission", { sessionId: SESSION }))
      assert.deepStrictEqual(items.map((item) => item._tag), ["Malformed", "Write"])
      assert.strictEqual(written(items)[0].error.code, -32602)
    })
  })

  describe("the agent's other requests", () => {
    const read = L.request(4, "fs/read_text_file", { sessionId: SESSION, path: `${CWD}/a.txt` })

    it("a capability the client did not offer is answered 'method not found', never left unanswered", () => {
      for (const line of [read, L.request(5, "terminal/create", { sessionId: SESSION, command: "ls" })]) {
        const out = written(running().receive(line))
        assert.deepStrictEqual(out.map((line) => line.error?.code), [-32601])
      }
    })

    it("an unknown method is answered 'method not found', unless the host serves it", () => {
      assert.deepStrictEqual(written(running().receive(L.request(6, "_zed/thing", {}))).map((l) => l.error?.code), [
        -32601
      ])
      assert.deepStrictEqual(
        describe_(running({ hostMethods: new Set(["_zed/thing"]) }).receive(L.request(6, "_zed/thing", { a: 1 }))),
        [
          "Frame _zed/thing",
          `HostRequest 6 (turn) {"_tag":"AgentRequest","method":"_zed/thing","params":{"a":1}}`
        ]
      )
    })

    it("a served request goes to the host; its answer (or failure) is the response", () => {
      const m = running({ clientCapabilities: { readTextFile: true, writeTextFile: false, terminal: false } })
      assert.deepStrictEqual(
        describe_(m.receive(read)).at(-1),
        `HostRequest 4 (turn) ${
          JSON.stringify({
            _tag: "AgentRequest",
            method: "fs/read_text_file",
            params: { sessionId: SESSION, path: `${CWD}/a.txt` }
          })
        }`
      )
      assert.deepStrictEqual(written(m.reply("4", { _tag: "Success", payload: { content: "x" } })), [
        { jsonrpc: "2.0", id: 4, result: { content: "x" } }
      ])
      m.receive(read.replace(`"id":4`, `"id":5`))
      assert.deepStrictEqual(written(m.reply("5", { _tag: "Error", message: "refused" })), [
        { jsonrpc: "2.0", id: 5, error: { code: -32603, message: "refused" } }
      ])
      assert.deepStrictEqual(written(m.reply("5", { _tag: "Error", message: "again" })), [])
      // An error with a code of its own (a missing file: -32002) keeps it.
      m.receive(read.replace(`"id":4`, `"id":6`))
      assert.deepStrictEqual(written(m.reply("6", { _tag: "Error", message: "Resource not found: x", code: -32002 })), [
        { jsonrpc: "2.0", id: 6, error: { code: -32002, message: "Resource not found: x" } }
      ])
    })
  })

  describe("the prompt's end", () => {
    it("answers every request of the agent still open: a permission cancelled, any other -32800; forgets them", () => {
      const m = running({ clientCapabilities: { readTextFile: false, writeTextFile: false, terminal: true } })
      m.receive(L.permission(7))
      m.receive(L.request(8, "terminal/wait_for_exit", { sessionId: SESSION, terminalId: "terminal-1" }))
      const items = itemsOf(m.receive(L.response(3, { stopReason: "end_turn" })))
      assert.deepStrictEqual(items.flatMap((item) => item._tag === "Cancel" ? [item.requestId] : []), ["7", "8"])
      assert.deepStrictEqual(written(items), [
        { jsonrpc: "2.0", id: 7, result: { outcome: { outcome: "cancelled" } } },
        { jsonrpc: "2.0", id: 8, error: { code: -32800, message: "Request cancelled" } }
      ])
      assert.strictEqual(items.at(-1)?._tag, "TurnEnd")
      // Answered once: a late answer of the host writes nothing.
      assert.deepStrictEqual(written(m.reply("8", { _tag: "Success", payload: { exitCode: 0 } })), [])
    })
  })

  describe("prompts the session dropped", () => {
    it("are forgotten when a later prompt ends: the machine then has no prompt open", () => {
      const m = ready()
      m.prompt("t1", "first")
      m.prompt("dropped", "queued, then interrupted before it was written")
      m.prompt("t3", "third")
      assert.deepStrictEqual(receive(m, L.response(3, { stopReason: "end_turn" })).at(-1), "TurnEnd@t1 Success")
      assert.deepStrictEqual(receive(m, L.response(5, { stopReason: "end_turn" })).at(-1), "TurnEnd@t3 Success")
      // Nothing is open: what the agent says now is the session's.
      assert.deepStrictEqual(receive(m, L.chunk("idle")), ["Frame session/update/agent_message_chunk (session)"])
      assert.deepStrictEqual(receive(m, L.response(4, { stopReason: "end_turn" })), ["Frame response (session)"])
    })
  })

  describe("controls", () => {
    it("a raw request gets the session id; its answer is the control's", () => {
      const m = ready()
      assert.deepStrictEqual(written(m.control(1, { method: "session/set_mode", params: { modeId: "yolo" } })), [
        { jsonrpc: "2.0", id: 3, method: "session/set_mode", params: { sessionId: SESSION, modeId: "yolo" } }
      ])
      assert.deepStrictEqual(receive(m, L.response(3, {})), ["Frame response (session)", "ControlAnswer #1 ok {}"])
      m.control(2, { method: "session/set_mode", params: { modeId: "nope" } })
      assert.deepStrictEqual(
        receive(m, L.error(4, -32602, "Invalid params")).at(-1),
        "ControlAnswer #2 error Invalid params (-32602)"
      )
      assert.throws(() => m.control(3, { params: {} }))
    })
  })

  describe("lines that are not messages", () => {
    it("are protocol errors, and the session goes on", () => {
      const m = running()
      assert.deepStrictEqual(receive(m, "not json"), ["Malformed not-json"])
      assert.deepStrictEqual(receive(m, "[1]"), ["Malformed malformed"])
      assert.deepStrictEqual(receive(m, `{"jsonrpc":"2.0","method":"session/update","params":{}}`), [
        "Malformed malformed"
      ])
      assert.deepStrictEqual(receive(m, L.chunk("still")), [`TextDelta "still"`])
    })
  })

  describe("what real agents send outside ACP v1's schema (the recorded transcripts' shapes)", () => {
    const usageOfEnd = (result: object) => {
      const m = running()
      const end = itemsOf(m.receive(L.response(3, result))).find((item) => item._tag === "TurnEnd")
      return end?._tag === "TurnEnd" ? end.result.usage : undefined
    }

    it("the turn's usage from claude-agent-acp's `usage` and from Gemini CLI's `_meta.quota.token_count`", () => {
      assert.deepStrictEqual(
        usageOfEnd({
          stopReason: "end_turn",
          usage: { inputTokens: 23450, outputTokens: 3, cachedReadTokens: 7, cachedWriteTokens: 11, totalTokens: 23471 }
        }),
        { inputTokens: 23450, outputTokens: 3, cacheCreationInputTokens: 11, cacheReadInputTokens: 7 }
      )
      assert.deepStrictEqual(
        usageOfEnd({
          stopReason: "end_turn",
          _meta: { quota: { token_count: { input_tokens: 9948, output_tokens: 3 }, model_usage: [] } }
        }),
        { inputTokens: 9948, outputTokens: 3, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 }
      )
      assert.deepStrictEqual(usageOfEnd({ stopReason: "end_turn" }), {
        inputTokens: 0,
        outputTokens: 0,
        cacheCreationInputTokens: 0,
        cacheReadInputTokens: 0
      })
    })

    it("an end_turn at once with no update and zero usage (claude-agent-acp after a cancel) fails as an empty answer", () => {
      const zero = { inputTokens: 0, outputTokens: 0, cachedReadTokens: 0, cachedWriteTokens: 0, totalTokens: 0 }
      const empty = itemsOf(running().receive(L.response(3, { stopReason: "end_turn", usage: zero })))
        .find((item) => item._tag === "TurnEnd")
      assert.isTrue(
        empty?._tag === "TurnEnd" && empty.outcome._tag === "Failed" &&
          empty.outcome.error("T")._tag === "TurnFailed" &&
          (empty.outcome.error("T") as { readonly subtype?: string }).subtype === "empty-answer",
        JSON.stringify(empty)
      )
      // Something said, or no usage reported at all (Gemini CLI): an ordinary end.
      const said = running()
      said.receive(L.chunk(""))
      assert.deepStrictEqual(
        receive(said, L.response(3, { stopReason: "end_turn", usage: zero })).filter((line) =>
          line.startsWith("TurnEnd")
        ),
        ["TurnEnd@t1 Success"]
      )
      assert.deepStrictEqual(
        receive(running(), L.response(3, { stopReason: "end_turn" })).filter((line) => line.startsWith("TurnEnd")),
        ["TurnEnd@t1 Success"]
      )
    })

    it("an execute call with no rawInput (Gemini CLI's shell tool) has its title as input.command", () => {
      const m = running()
      const [item] = itemsOf(m.receive(L.request(0, "session/request_permission", {
        sessionId: SESSION,
        toolCall: { toolCallId: "run_shell_command_1", status: "pending", title: "touch allowed.txt", kind: "execute" },
        options: [{ optionId: "proceed_once", name: "Allow", kind: "allow_once" }]
      })))
      assert.strictEqual(item._tag, "PermissionRequest")
      const request = (item as Extract<Provider.Item, { _tag: "PermissionRequest" }>).request
      assert.deepStrictEqual(request.input, { command: "touch allowed.txt", title: "touch allowed.txt" })
      const [edit] = itemsOf(
        running().receive(L.request(0, "session/request_permission", {
          sessionId: SESSION,
          toolCall: { toolCallId: "edit_1", title: "Edit a.txt", kind: "edit" },
          options: [{ optionId: "proceed_once", name: "Allow", kind: "allow_once" }]
        }))
      )
      assert.deepStrictEqual((edit as Extract<Provider.Item, { _tag: "PermissionRequest" }>).request.input, {
        title: "Edit a.txt"
      })
    })
  })
})
