import { assert, describe, it } from "@effect/vitest"
import { CodexProtocol } from "@tether/codex"
import { Permission } from "@tether/core"
import type * as Provider from "@tether/core/Provider"
import { Bench } from "../../core/test/support/MachineHarness.ts"
import { describeItem, itemsOf } from "../../core/test/support/ProviderItems.ts"
import * as CodexMachine from "../src/internal/machine.ts"

// Codex's protocol machine as tables: stdout lines (built with the codec's own encoders, so every line here is one
// the decoder accepts unless a row says otherwise) → the neutral items the session machine reads; host commands →
// the lines written. Then the session machine over it, for the rules that depend on what Codex sends (the
// `turn/start` response as the receipt, server turn ids, approvals answered by JSON-RPC responses).

const options = (overrides: Partial<CodexMachine.MachineOptions> = {}): CodexMachine.MachineOptions => ({
  clientInfo: { name: "test", title: null, version: "0" },
  capabilities: null,
  thread: { _tag: "Start", params: { cwd: "/p" } },
  turnParams: {},
  ...overrides
})

const machine = (overrides: Partial<CodexMachine.MachineOptions> = {}) => CodexMachine.make(options(overrides))

// --- lines the server prints ------------------------------------------------------------------------------------

const THREAD = "th-1"

/** A server notification line. */
const N = (method: string, params?: unknown): string => CodexProtocol.encodeServerNotification(method, params, 1)

const L = {
  response: (id: CodexProtocol.Id, result: unknown) => CodexProtocol.encodeResponse(id, result),
  error: (id: CodexProtocol.Id, message = "nope", code = -32600) =>
    CodexProtocol.encodeErrorResponse(id, code, message),
  request: (id: CodexProtocol.Id, method: string, params: unknown) => CodexProtocol.encodeRequest(id, method, params),
  thread: (id: CodexProtocol.Id, extra: object = { sandbox: { type: "workspaceWrite" } }) =>
    CodexProtocol.encodeResponse(id, { thread: { id: THREAD }, model: "m", ...extra }),
  turnStarted: (id: CodexProtocol.Id, turnId: string) =>
    CodexProtocol.encodeResponse(id, { turn: { id: turnId, status: "inProgress", items: [] } }),
  delta: (delta: string, turnId?: string) => N("item/agentMessage/delta", { threadId: THREAD, turnId, delta }),
  item: (completed: boolean, item: object, turnId?: string) =>
    N(completed ? "item/completed" : "item/started", { item, threadId: THREAD, turnId }),
  completed: (turn: object) => N("turn/completed", { threadId: THREAD, turn }),
  usage: (turnId: string | undefined, last?: object) =>
    N("thread/tokenUsage/updated", { threadId: THREAD, turnId, tokenUsage: { total: {}, last } }),
  commandApproval: (id: CodexProtocol.Id, params: object = {}) =>
    CodexProtocol.encodeRequest(id, "item/commandExecution/requestApproval", {
      threadId: THREAD,
      turnId: "s1",
      itemId: "call-1",
      command: "/bin/bash -lc ls",
      cwd: "/p",
      reason: "to list",
      ...params
    }),
  fileApproval: (id: CodexProtocol.Id, params: object = {}) =>
    CodexProtocol.encodeRequest(id, "item/fileChange/requestApproval", {
      threadId: THREAD,
      turnId: "s1",
      itemId: "call-2",
      reason: null,
      grantRoot: null,
      ...params
    }),
  resolved: (requestId: CodexProtocol.Id) => N("serverRequest/resolved", { threadId: THREAD, requestId })
}

const receive = (m: Provider.ProtocolMachine, line: string): Array<string> => itemsOf(m.receive(line)).map(describeItem)

/** The JSON of each line a command or an input wrote. */
const written = (items: Provider.Items): Array<unknown> =>
  itemsOf(items).flatMap((item) => item._tag === "Write" ? [JSON.parse(item.line)] : [])

/** The one line a host command writes. */
const lineOf = (items: Provider.Items): unknown => {
  const all = itemsOf(items)
  assert.deepStrictEqual(all.map((item) => item._tag), ["Write"])
  return JSON.parse((all[0] as { readonly line: string }).line)
}

/** A machine through its handshake: `initialize` is request 0, the thread request 1. */
const ready = (overrides: Partial<CodexMachine.MachineOptions> = {}) => {
  const m = machine(overrides)
  m.start()
  m.receive(L.response(0, { userAgent: "codex" }))
  m.receive(L.thread(1))
  return m
}

/** A ready machine whose host turn `t1` is the server's `s1` (its `turn/start` was request 2). */
const running = () => {
  const m = ready()
  m.prompt("t1", "hi")
  m.receive(L.turnStarted(2, "s1"))
  return m
}

const endOf = (items: Provider.Items) => {
  const end = itemsOf(items).find((item) => item._tag === "TurnEnd")
  assert.isDefined(end)
  return end as Extract<Provider.Item, { readonly _tag: "TurnEnd" }>
}

const permissionOf = (items: Provider.Items, turnId = "t1"): Permission.PermissionRequest => {
  const request = itemsOf(items).find((item) => item._tag === "PermissionRequest")
  assert.isDefined(request)
  return { ...(request as Extract<Provider.Item, { readonly _tag: "PermissionRequest" }>).request, turnId }
}

// --- the handshake -----------------------------------------------------------------------------------------------

describe("Codex machine: the handshake", () => {
  it("start writes initialize, with the client's info and capabilities, as request 0", () => {
    const m = machine({
      clientInfo: { name: "host", title: "Host", version: "1.2.3" },
      capabilities: { experimentalApi: true }
    })
    assert.deepStrictEqual(lineOf(m.start()), {
      method: "initialize",
      id: 0,
      params: { clientInfo: { name: "host", title: "Host", version: "1.2.3" }, capabilities: { experimentalApi: true } }
    })
  })

  it("initialize answered: the initialized notification, then thread/start with the thread's params", () => {
    const m = machine()
    m.start()
    const produced = m.receive(L.response(0, { userAgent: "codex" }))
    assert.deepStrictEqual(itemsOf(produced).map(describeItem).slice(0, 1), ["Frame response (session)"])
    assert.deepStrictEqual(written(produced), [
      { method: "initialized" },
      { method: "thread/start", id: 1, params: { cwd: "/p" } }
    ])
  })

  it("a resumed thread: thread/resume names the thread and asks for no past turns", () => {
    const m = machine({ thread: { _tag: "Resume", threadId: "th-0", params: { cwd: "/p", excludeTurns: false } } })
    m.start()
    assert.deepStrictEqual(written(m.receive(L.response(0, {}))), [
      { method: "initialized" },
      { method: "thread/resume", id: 1, params: { cwd: "/p", threadId: "th-0", excludeTurns: true } }
    ])
  })

  it("the thread answered: the thread id is the session id, and the handshake is ready", () => {
    const m = machine()
    m.start()
    m.receive(L.response(0, { userAgent: "codex" }))
    assert.deepStrictEqual(receive(m, L.thread(1)), [
      "Frame response (session)",
      "SessionId th-1",
      "Ready {\"initialize\":{\"userAgent\":\"codex\"},\"thread\":{\"thread\":{\"id\":\"th-1\"},\"model\":\"m\",\"sandbox\":{\"type\":\"workspaceWrite\"}}}"
    ])
  })

  it("initialize refused: the handshake is refused with the server's message, and nothing is written", () => {
    const m = machine()
    m.start()
    assert.deepStrictEqual(receive(m, L.error(0, "Already initialized")), [
      "Frame error (session)",
      "Refused Already initialized"
    ])
  })

  it("the thread refused: refused with the server's message", () => {
    const m = machine()
    m.start()
    m.receive(L.response(0, {}))
    assert.deepStrictEqual(receive(m, L.error(1, "thread not found: th-0")), [
      "Frame error (session)",
      "Refused thread not found: th-0"
    ])
  })

  it("a thread answer without a thread is refused, saying what was wrong with it", () => {
    const m = machine()
    m.start()
    m.receive(L.response(0, {}))
    const [frame, refused] = itemsOf(m.receive(L.response(1, { model: "m" })))
    assert.strictEqual(describeItem(frame), "Frame response (session)")
    assert.strictEqual(refused._tag, "Refused")
    assert.match((refused as { readonly reason: string }).reason, /thread\/start: /)
  })

  it("a thread/resume answer without a thread is refused, naming thread/resume", () => {
    const m = machine({ thread: { _tag: "Resume", threadId: "th-0", params: {} } })
    m.start()
    m.receive(L.response(0, {}))
    const refused = itemsOf(m.receive(L.response(1, { model: "m" })))[1]
    assert.strictEqual(refused._tag, "Refused")
    assert.match((refused as { readonly reason: string }).reason, /thread\/resume: /)
  })

  it("an answer to a request that was already answered is only a frame", () => {
    const m = ready()
    assert.deepStrictEqual(receive(m, L.response(0, {})), ["Frame response (session)"])
    assert.deepStrictEqual(receive(m, L.thread(1)), ["Frame response (session)"])
    assert.deepStrictEqual(receive(m, L.error(1)), ["Frame error (session)"])
  })

  it("capabilities: Codex's, with the thread's sandbox once the handshake names it", () => {
    const m = machine()
    const before = m.capabilities()
    assert.deepStrictEqual(before, {
      provider: "codex",
      receipts: "explicit",
      interrupt: true,
      permissionKinds: ["command", "file-change"],
      resume: true,
      sandbox: undefined,
      notes: ["interrupting a turn does not stop commands it started; teardown reaps them"]
    })
    assert.strictEqual(ready().capabilities().sandbox, "workspaceWrite")
    const bare = machine()
    bare.start()
    bare.receive(L.response(0, {}))
    bare.receive(L.thread(1, {}))
    assert.isUndefined(bare.capabilities().sandbox)
  })
})

// --- stdout → items, with the host's turn t1 running as the server's s1 -----------------------------------------

describe("Codex machine: stdout lines → items", () => {
  const rows: ReadonlyArray<{ readonly name: string; readonly line: string; readonly items: Array<string> }> = [
    // deltas
    { name: "a delta of the running turn", line: L.delta("Hi", "s1"), items: ["TextDelta \"Hi\"@t1"] },
    {
      name: "a delta of a turn this host never started",
      line: L.delta("Hi", "s9"),
      items: ["TextDelta \"Hi\" (session)"]
    },
    { name: "a delta naming no turn", line: L.delta("Hi"), items: ["TextDelta \"Hi\" (session)"] },
    {
      name: "a delta without its text",
      line: N("item/agentMessage/delta", { turnId: "s1" }),
      items: ["Malformed malformed"]
    },
    // items
    {
      name: "an agent message started is a frame of its turn",
      line: L.item(false, { type: "agentMessage", id: "msg-1", text: "" }, "s1"),
      items: ["Frame item/started@t1"]
    },
    {
      name: "an agent message started in another turn",
      line: L.item(false, { type: "agentMessage", id: "msg-1", text: "" }, "s9"),
      items: ["Frame item/started (session)"]
    },
    {
      name: "an agent message completed is the assistant's message",
      line: L.item(true, { type: "agentMessage", id: "msg-1", text: "Hi! (mock)" }, "s1"),
      items: ["AssistantMessage \"Hi! (mock)\"@t1"]
    },
    {
      name: "an agent message completed without text",
      line: L.item(true, { type: "agentMessage", id: "msg-1" }, "s1"),
      items: ["AssistantMessage \"\"@t1"]
    },
    {
      name: "an agent message completed in another turn",
      line: L.item(true, { type: "agentMessage", id: "msg-1", text: "x" }, "s9"),
      items: ["AssistantMessage \"x\" (session)"]
    },
    {
      name: "a command started is a tool use",
      line: L.item(
        false,
        { type: "commandExecution", id: "call-1", command: "ls", cwd: "/p", status: "inProgress" },
        "s1"
      ),
      items: ["ToolUse command call-1 {\"command\":\"ls\",\"cwd\":\"/p\"}@t1"]
    },
    {
      name: "a command started in another turn",
      line: L.item(false, { type: "commandExecution", id: "call-1", command: "ls" }, "s9"),
      items: ["ToolUse command call-1 {\"command\":\"ls\"} (session)"]
    },
    {
      name: "a command completed with exit code 0 is its result",
      line: L.item(true, {
        type: "commandExecution",
        id: "call-1",
        status: "completed",
        exitCode: 0,
        aggregatedOutput: "out\n"
      }, "s1"),
      items: ["ToolResult call-1 \"out\\n\"@t1"]
    },
    {
      name: "a command completed without an exit code or output",
      line: L.item(true, { type: "commandExecution", id: "call-1", status: "completed", exitCode: null }, "s1"),
      items: ["ToolResult call-1 \"\"@t1"]
    },
    {
      name: "a command that exited non-zero is an error result",
      line: L.item(true, {
        type: "commandExecution",
        id: "call-1",
        status: "completed",
        exitCode: 1,
        aggregatedOutput: "no"
      }, "s1"),
      items: ["ToolResult call-1 error \"no\"@t1"]
    },
    {
      name: "a declined command is an error result",
      line: L.item(true, { type: "commandExecution", id: "call-1", status: "declined", aggregatedOutput: null }, "s1"),
      items: ["ToolResult call-1 error \"\"@t1"]
    },
    {
      name: "a command completed in another turn",
      line: L.item(true, { type: "commandExecution", id: "call-1", status: "completed", exitCode: 0 }, "s9"),
      items: ["ToolResult call-1 \"\" (session)"]
    },
    {
      name: "a file change started is an apply_patch tool use with its changes",
      line: L.item(
        false,
        { type: "fileChange", id: "call-2", changes: [{ path: "/p/a" }], status: "inProgress" },
        "s1"
      ),
      items: ["ToolUse apply_patch call-2 {\"changes\":[{\"path\":\"/p/a\"}]}@t1"]
    },
    {
      name: "a file change started without changes",
      line: L.item(false, { type: "fileChange", id: "call-2" }, "s9"),
      items: ["ToolUse apply_patch call-2 {\"changes\":[]} (session)"]
    },
    {
      name: "a file change completed is its result, the changes as content",
      line: L.item(true, { type: "fileChange", id: "call-2", changes: [{ path: "/p/a" }], status: "completed" }, "s1"),
      items: ["ToolResult call-2 [{\"path\":\"/p/a\"}]@t1"]
    },
    {
      name: "a declined file change is an error result",
      line: L.item(true, { type: "fileChange", id: "call-2", status: "declined" }, "s1"),
      items: ["ToolResult call-2 error []@t1"]
    },
    {
      name: "a file change completed in another turn",
      line: L.item(true, { type: "fileChange", id: "call-2", changes: [], status: "completed" }, "s9"),
      items: ["ToolResult call-2 [] (session)"]
    },
    {
      name: "another item started is a frame of its turn",
      line: L.item(false, { type: "userMessage", id: "u-1", content: [] }, "s1"),
      items: ["Frame item/started@t1"]
    },
    {
      name: "another item completed is a frame of its turn",
      line: L.item(true, { type: "reasoning", id: "r-1" }, "s1"),
      items: ["Frame item/completed@t1"]
    },
    {
      name: "another item completed naming no turn",
      line: L.item(true, { type: "reasoning", id: "r-1" }),
      items: ["Frame item/completed (session)"]
    },
    {
      name: "an item without an id",
      line: N("item/started", { item: { type: "agentMessage" }, turnId: "s1" }),
      items: ["Malformed malformed"]
    },
    {
      name: "an item completed without a type",
      line: N("item/completed", { item: { id: "x" }, turnId: "s1" }),
      items: ["Malformed malformed"]
    },
    // turns
    {
      name: "turn/started of the running turn",
      line: N("turn/started", { threadId: THREAD, turn: { id: "s1", status: "inProgress" } }),
      items: ["Frame turn/started@t1"]
    },
    {
      name: "turn/started of another turn",
      line: N("turn/started", { threadId: THREAD, turn: { id: "s9" } }),
      items: ["Frame turn/started (session)"]
    },
    {
      name: "turn/started without a turn",
      line: N("turn/started", { threadId: THREAD }),
      items: ["Malformed malformed"]
    },
    {
      name: "turn/completed: the turn's end",
      line: L.completed({ id: "s1", status: "completed", error: null, durationMs: 94 }),
      items: ["TurnEnd@t1 Success"]
    },
    { name: "turn/completed without a status", line: L.completed({ id: "s1" }), items: ["TurnEnd@t1 Success"] },
    {
      name: "turn/completed interrupted",
      line: L.completed({ id: "s1", status: "interrupted" }),
      items: ["TurnEnd@t1 Interrupted"]
    },
    {
      name: "turn/completed failed: the server's message and error info",
      line: L.completed({
        id: "s1",
        status: "failed",
        error: { message: "high demand", codexErrorInfo: "internalServerError" }
      }),
      items: ["TurnEnd@t1 Api(null,high demand (internalServerError))"]
    },
    {
      name: "turn/completed failed with the upstream HTTP status in its error info",
      line: L.completed({
        id: "s1",
        status: "failed",
        error: { message: "too many", codexErrorInfo: { responseTooManyFailedAttempts: { httpStatusCode: 429 } } }
      }),
      items: ["TurnEnd@t1 Api(429,too many ({\"responseTooManyFailedAttempts\":{\"httpStatusCode\":429}}))"]
    },
    {
      name: "turn/completed failed: the status is found in any variant, a null one is none",
      line: L.completed({
        id: "s1",
        status: "failed",
        error: {
          message: "gone",
          codexErrorInfo: { a: 1, b: null, c: { httpStatusCode: null }, d: { httpStatusCode: 503 } }
        }
      }),
      items: [
        "TurnEnd@t1 Api(503,gone ({\"a\":1,\"b\":null,\"c\":{\"httpStatusCode\":null},\"d\":{\"httpStatusCode\":503}}))"
      ]
    },
    {
      name: "turn/completed failed: a status that is not a number is none",
      line: L.completed({
        id: "s1",
        status: "failed",
        error: { message: "gone", codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: "502" } } }
      }),
      items: ["TurnEnd@t1 Api(null,gone ({\"responseStreamDisconnected\":{\"httpStatusCode\":\"502\"}}))"]
    },
    {
      name: "turn/completed failed without error info",
      line: L.completed({ id: "s1", status: "failed", error: { message: "boom" } }),
      items: ["TurnEnd@t1 Api(null,boom)"]
    },
    {
      name: "turn/completed failed with a null error info",
      line: L.completed({ id: "s1", status: "failed", error: { message: "boom", codexErrorInfo: null } }),
      items: ["TurnEnd@t1 Api(null,boom)"]
    },
    {
      name: "turn/completed failed without an error",
      line: L.completed({ id: "s1", status: "failed", error: null }),
      items: ["TurnEnd@t1 Api(null,the turn ended failed)"]
    },
    {
      name: "turn/completed with a status this version does not know is an API failure",
      line: L.completed({ id: "s1", status: "cancelled" }),
      items: ["TurnEnd@t1 Api(null,the turn ended cancelled)"]
    },
    {
      name: "turn/completed of a turn this host never started ends none",
      line: L.completed({ id: "s9", status: "completed" }),
      items: ["Frame turn/completed"]
    },
    {
      name: "turn/completed without a turn id",
      line: L.completed({ status: "completed" }),
      items: ["Malformed malformed"]
    },
    // usage
    {
      name: "token usage of the running turn",
      line: L.usage("s1", { inputTokens: 1 }),
      items: ["Frame thread/tokenUsage/updated@t1"]
    },
    {
      name: "token usage of another turn",
      line: L.usage("s9", {}),
      items: ["Frame thread/tokenUsage/updated (session)"]
    },
    {
      name: "token usage that is not numbers",
      line: N("thread/tokenUsage/updated", { turnId: "s1", tokenUsage: { last: { inputTokens: "1" } } }),
      items: ["Malformed malformed"]
    },
    // errors
    {
      name: "an error the server retries is a retry of its turn",
      line: N("error", { error: { message: "Reconnecting... 1/5" }, willRetry: true, threadId: THREAD, turnId: "s1" }),
      items: ["Retry undefined/undefined after undefined (undefined: Reconnecting... 1/5)@t1"]
    },
    {
      name: "a retry of another turn",
      line: N("error", { error: { message: "again" }, willRetry: true, turnId: "s9" }),
      items: ["Retry undefined/undefined after undefined (undefined: again) (session)"]
    },
    {
      name: "an error the server does not retry is a frame of its turn (turn/completed ends it)",
      line: N("error", {
        error: { message: "boom", codexErrorInfo: "internalServerError" },
        willRetry: false,
        turnId: "s1"
      }),
      items: ["Frame error@t1"]
    },
    {
      name: "an error without willRetry, of no turn",
      line: N("error", { error: { message: "boom" } }),
      items: ["Frame error (session)"]
    },
    {
      name: "an error without a message",
      line: N("error", { error: {}, willRetry: true }),
      items: ["Malformed malformed"]
    },
    // server requests withdrawn
    {
      name: "serverRequest/resolved of no pending request is only a frame",
      line: L.resolved(5),
      items: ["Frame serverRequest/resolved (session)"]
    },
    {
      name: "serverRequest/resolved without a request id",
      line: N("serverRequest/resolved", { threadId: THREAD }),
      items: ["Malformed malformed"]
    },
    // other notifications
    ...[
      "account/rateLimits/updated",
      "account/updated",
      "configWarning",
      "remoteControl/status/changed",
      "thread/started",
      "warning",
      "mcpServer/startupStatus/updated"
    ].map((method) => ({
      name: `${method} is session traffic, even naming the running turn`,
      line: N(method, { threadId: THREAD, turnId: "s1" }),
      items: [`Frame ${method}@t1 (session)`]
    })),
    {
      name: "another notification naming the running turn is that turn's",
      line: N("turn/diff/updated", { threadId: THREAD, turnId: "s1", diff: "" }),
      items: ["Frame turn/diff/updated@t1"]
    },
    {
      name: "another notification naming another turn is session traffic",
      line: N("item/commandExecution/outputDelta", { turnId: "s9", delta: "x" }),
      items: ["Frame item/commandExecution/outputDelta (session)"]
    },
    {
      name: "another notification naming no turn is session traffic",
      line: N("thread/status/changed", { threadId: THREAD, status: { type: "idle" } }),
      items: ["Frame thread/status/changed (session)"]
    },
    { name: "a notification without params", line: N("brand/new"), items: ["Frame brand/new (session)"] },
    { name: "a notification whose params are null", line: N("brand/new", null), items: ["Frame brand/new (session)"] },
    { name: "a notification whose params are text", line: N("brand/new", "s1"), items: ["Frame brand/new (session)"] },
    // responses
    { name: "a response to no request of this machine", line: L.response(42, {}), items: ["Frame response (session)"] },
    { name: "an error response to no request of this machine", line: L.error(42), items: ["Frame error (session)"] },
    {
      name: "an error response without an id (the server could not read a line)",
      line: JSON.stringify({ id: null, error: { code: -32700, message: "parse error" } }),
      items: ["Frame error (session)"]
    },
    {
      name: "a response under a string id this machine never uses",
      line: L.response("2", {}),
      items: ["Frame response (session)"]
    },
    // malformed lines
    { name: "a line that is not JSON", line: "not json", items: ["Malformed not-json"] },
    { name: "a JSON array", line: "[1]", items: ["Malformed malformed"] },
    { name: "an object of no message shape", line: "{\"emittedAtMs\":1}", items: ["Malformed malformed"] },
    { name: "a request whose id is an object", line: "{\"method\":\"x\",\"id\":{}}", items: ["Malformed malformed"] },
    {
      name: "an error without a code",
      line: "{\"id\":1,\"error\":{\"message\":\"x\"}}",
      items: ["Malformed malformed"]
    }
  ]
  for (const row of rows) {
    it(row.name, () => {
      assert.deepStrictEqual(receive(running(), row.line), row.items)
    })
  }

  it("every event keeps the raw line, unknown fields included", () => {
    const m = running()
    const raw = { method: "turn/diff/updated", params: { turnId: "s1", future: { a: [1] } }, emittedAtMs: 3 }
    const [frame] = itemsOf(m.receive(JSON.stringify(raw)))
    assert.deepStrictEqual((frame as { readonly raw: unknown }).raw, raw)
    const delta = { method: "item/agentMessage/delta", params: { turnId: "s1", delta: "a", x: 1 }, emittedAtMs: 4 }
    const [text] = itemsOf(m.receive(JSON.stringify(delta)))
    assert.deepStrictEqual((text as { readonly raw: unknown }).raw, delta)
  })

  it("a malformed line keeps its first 4096 characters", () => {
    const long = `not json ${"y".repeat(5000)}`
    const [item] = itemsOf(machine().receive(long))
    assert.strictEqual((item as { readonly raw: string }).raw, long.slice(0, 4096))
    const exact = `x${"y".repeat(4095)}`
    const [same] = itemsOf(machine().receive(exact))
    assert.strictEqual((same as { readonly raw: string }).raw, exact)
  })

  const methods: ReadonlyArray<readonly [string, string]> = [
    ["turn/completed", L.completed({ status: "completed" })],
    ["turn/started", N("turn/started", {})],
    ["item/started", N("item/started", { item: {} })],
    ["item/completed", N("item/completed", { item: {} })],
    ["thread/tokenUsage/updated", N("thread/tokenUsage/updated", {})],
    ["error", N("error", {})],
    ["serverRequest/resolved", N("serverRequest/resolved", {})],
    ["item/commandExecution/requestApproval", L.commandApproval(0, { cwd: 1 })],
    ["item/fileChange/requestApproval", L.fileApproval(0, { grantRoot: 1 })]
  ]
  for (const [method, line] of methods) {
    it(`a malformed ${method} says it is ${method}'s`, () => {
      const [item] = itemsOf(running().receive(line))
      assert.strictEqual(item._tag, "Malformed")
      assert.match(
        (item as Extract<Provider.Item, { readonly _tag: "Malformed" }>).error.detail,
        new RegExp(`^${method}: `)
      )
    })
  }

  it("a malformed message keeps the message, and says which method", () => {
    const m = running()
    const line = N("item/agentMessage/delta", { turnId: "s1" })
    const [item] = itemsOf(m.receive(line))
    assert.strictEqual(item._tag, "Malformed")
    const malformed = item as Extract<Provider.Item, { readonly _tag: "Malformed" }>
    assert.deepStrictEqual(malformed.raw, JSON.parse(line))
    assert.match(malformed.error.detail, /^item\/agentMessage\/delta: /)
  })
})

// --- turns -------------------------------------------------------------------------------------------------------

describe("Codex machine: turns", () => {
  it("a prompt is turn/start on the thread, the turn params merged in; text becomes a text input", () => {
    const m = ready({ turnParams: { model: "gpt-5.5", threadId: "not this one" } })
    assert.deepStrictEqual(lineOf(m.prompt("t1", "hello")), {
      method: "turn/start",
      id: 2,
      params: { model: "gpt-5.5", threadId: THREAD, input: [{ type: "text", text: "hello", text_elements: [] }] }
    })
    const input = [{ type: "localImage", path: "/p/a.png" }]
    assert.deepStrictEqual(lineOf(m.prompt("t2", input)), {
      method: "turn/start",
      id: 3,
      params: { model: "gpt-5.5", threadId: THREAD, input }
    })
  })

  it("the turn/start response is the receipt of the host's turn", () => {
    const m = ready()
    m.prompt("t1", "hi")
    assert.deepStrictEqual(receive(m, L.turnStarted(2, "s1")), ["Receipt t1", "Frame turn/start@t1"])
  })

  it("turn/start refused: the turn ends rejected, with the server's code and message", () => {
    const m = ready()
    m.prompt("t1", "hi")
    const line = L.error(2, "retry later", -32001)
    const produced = m.receive(line)
    assert.deepStrictEqual(itemsOf(produced).map(describeItem), [
      "Frame error (session)",
      "TurnEnd@t1 Failed TurnRejected {\"_tag\":\"TurnRejected\",\"turnId\":\"T\",\"code\":-32001,\"reason\":\"retry later\"}"
    ])
    assert.deepStrictEqual(endOf(produced).result, {
      sessionId: THREAD,
      text: "",
      usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      durationMs: undefined,
      raw: JSON.parse(line),
      serverTurnId: "",
      status: "rejected",
      reasoningOutputTokens: 0
    } as never)
  })

  it("a turn/start response without a turn is malformed, and the turn gets no receipt", () => {
    const m = ready()
    m.prompt("t1", "hi")
    const produced = itemsOf(m.receive(L.response(2, { turn: {} })))
    assert.deepStrictEqual(produced.map(describeItem), ["Frame response (session)", "Malformed malformed"])
    assert.match((produced[1] as Extract<Provider.Item, { readonly _tag: "Malformed" }>).error.detail, /^turn\/start: /)
    assert.deepStrictEqual(receive(m, L.delta("x", "s1")), ["TextDelta \"x\" (session)"])
  })

  it("the turn's result: its last message, its usage summed over its model requests, its duration", () => {
    const m = running()
    m.receive(L.item(true, { type: "agentMessage", id: "msg-1", text: "first" }, "s1"))
    m.receive(L.item(true, { type: "agentMessage", id: "msg-2", text: "second" }, "s1"))
    m.receive(L.usage("s1", {
      inputTokens: 10,
      cachedInputTokens: 2,
      cacheWriteInputTokens: 3,
      outputTokens: 5,
      reasoningOutputTokens: 1
    }))
    m.receive(L.usage("s1", {
      inputTokens: 20,
      cachedInputTokens: 4,
      cacheWriteInputTokens: 6,
      outputTokens: 7,
      reasoningOutputTokens: 2
    }))
    m.receive(L.usage("s1", {}))
    m.receive(L.usage("s1"))
    // Another turn's usage and message are not this turn's.
    m.receive(L.usage("s9", { inputTokens: 1000 }))
    m.receive(L.item(true, { type: "agentMessage", id: "msg-3", text: "other" }, "s9"))
    const line = L.completed({ id: "s1", status: "completed", durationMs: 94 })
    assert.deepStrictEqual(endOf(m.receive(line)).result, {
      sessionId: THREAD,
      text: "second",
      usage: { inputTokens: 30, outputTokens: 12, cacheCreationInputTokens: 9, cacheReadInputTokens: 6 },
      durationMs: 94,
      raw: JSON.parse(line),
      serverTurnId: "s1",
      status: "completed",
      reasoningOutputTokens: 3
    } as never)
  })

  it("a turn with no message and no usage, and no duration", () => {
    const m = running()
    m.receive(L.item(true, { type: "agentMessage", id: "msg-1", text: "gone" }, "s1"))
    m.receive(L.item(true, { type: "agentMessage", id: "msg-2" }, "s1"))
    const result = endOf(m.receive(L.completed({ id: "s1", status: "interrupted", durationMs: null })))
      .result as unknown as CodexMachine.TurnResult
    assert.strictEqual(result.text, "")
    assert.isUndefined(result.durationMs)
    assert.strictEqual(result.status, "interrupted")
    assert.deepStrictEqual(result.usage, {
      inputTokens: 0,
      outputTokens: 0,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 0
    })
    assert.strictEqual(result.reasoningOutputTokens, 0)
  })

  it("a turn without any message has no text", () => {
    const m = running()
    const result = endOf(m.receive(L.completed({ id: "s1", status: "completed" }))).result
    assert.strictEqual(result.text, "")
  })

  it("once a turn completed, its server id names no turn of the host", () => {
    const m = running()
    m.receive(L.completed({ id: "s1", status: "completed" }))
    assert.deepStrictEqual(receive(m, L.delta("late", "s1")), ["TextDelta \"late\" (session)"])
    assert.deepStrictEqual(receive(m, L.completed({ id: "s1", status: "completed" })), ["Frame turn/completed"])
    assert.throws(() => m.interrupt("t1", 1), /not a running turn of the server/)
  })

  it("two turns: each notification goes to the turn its server id names", () => {
    const m = running()
    m.prompt("t2", "next")
    assert.deepStrictEqual(receive(m, L.turnStarted(3, "s2")), ["Receipt t2", "Frame turn/start@t2"])
    assert.deepStrictEqual(receive(m, L.delta("a", "s1")), ["TextDelta \"a\"@t1"])
    assert.deepStrictEqual(receive(m, L.delta("b", "s2")), ["TextDelta \"b\"@t2"])
    assert.deepStrictEqual(receive(m, L.completed({ id: "s2" })), ["TurnEnd@t2 Success"])
    assert.deepStrictEqual(receive(m, L.completed({ id: "s1" })), ["TurnEnd@t1 Success"])
  })
})

// --- interrupts and controls ---------------------------------------------------------------------------------------

describe("Codex machine: interrupts and controls", () => {
  it("an interrupt before the server named the turn goes out with its turn/start response", () => {
    const m = ready()
    m.prompt("t1", "hi")
    // Output of the turn may acknowledge it before the response: the interrupt waits for the server's turn id.
    assert.isUndefined(m.interrupt("t1", 4))
    const items = itemsOf(m.receive(L.turnStarted(2, "s1")))
    assert.deepStrictEqual(items.slice(0, 2).map(describeItem), ["Receipt t1", "Frame turn/start@t1"])
    const written = items.flatMap((item) => item._tag === "Write" ? [JSON.parse(item.line)] : [])
    assert.deepStrictEqual(written, [{ method: "turn/interrupt", id: 3, params: { threadId: THREAD, turnId: "s1" } }])
    assert.deepStrictEqual(receive(m, L.response(3, {})), ["Frame response (session)", "ControlAnswer #4 ok {}"])
  })

  it("an interrupt held for a turn the server refuses is dropped with it", () => {
    const m = ready()
    m.prompt("t1", "hi")
    assert.isUndefined(m.interrupt("t1", 4))
    const items = itemsOf(m.receive(L.error(2, "no")))
    assert.deepStrictEqual(items.filter((item) => item._tag === "Write"), [])
    assert.match(items.map(describeItem).at(-1)!, /^TurnEnd@t1 Failed TurnRejected/)
  })

  it("an interrupt names the thread and the server's turn; its answer is the control's", () => {
    const m = running()
    assert.deepStrictEqual(lineOf(m.interrupt("t1", 4)), {
      method: "turn/interrupt",
      id: 3,
      params: { threadId: THREAD, turnId: "s1" }
    })
    assert.deepStrictEqual(receive(m, L.response(3, {})), ["Frame response (session)", "ControlAnswer #4 ok {}"])
    assert.deepStrictEqual(receive(m, L.completed({ id: "s1", status: "interrupted" })), ["TurnEnd@t1 Interrupted"])
  })

  it("a control is a request of its method and params; its answer comes back under the session's ref", () => {
    const m = ready()
    assert.deepStrictEqual(lineOf(m.control(7, { method: "model/list", params: { limit: 1 } })), {
      method: "model/list",
      id: 2,
      params: { limit: 1 }
    })
    assert.deepStrictEqual(receive(m, L.response(2, { data: [] })), [
      "Frame response (session)",
      "ControlAnswer #7 ok {\"data\":[]}"
    ])
    assert.deepStrictEqual(receive(m, L.response(2, { data: [] })), ["Frame response (session)"])
  })

  it("a control without params sends empty params", () => {
    assert.deepStrictEqual(lineOf(ready().control(1, { method: "account/read" })), {
      method: "account/read",
      id: 2,
      params: {}
    })
  })

  it("a control refused: the server's message and code", () => {
    const m = ready()
    m.control(8, { method: "brand/new" })
    const produced = itemsOf(m.receive(L.error(2, "Invalid request: unknown variant", -32600)))
    assert.deepStrictEqual(produced.map(describeItem), [
      "Frame error (session)",
      "ControlAnswer #8 error Invalid request: unknown variant (-32600)"
    ])
    assert.deepStrictEqual(produced[1], {
      _tag: "ControlAnswer",
      ref: 8,
      answer: { _tag: "Error", message: "Invalid request: unknown variant", code: "-32600" }
    })
  })

  it("a control that is not { method, params } throws", () => {
    const m = ready()
    assert.throws(() => m.control(1, { params: {} }), /a Codex control is \{ method, params \}/)
    assert.throws(() => m.control(1, { method: 3 }))
    // Nothing was sent: the next request still takes the next id.
    assert.strictEqual((lineOf(m.control(2, { method: "account/read" })) as { readonly id: number }).id, 2)
  })
})

// --- approvals and other server requests ----------------------------------------------------------------------------

describe("Codex machine: server requests", () => {
  it("a command approval is a permission request of kind command", () => {
    assert.deepStrictEqual(receive(running(), L.commandApproval(0)), [
      "PermissionRequest 0 command command call-1 {\"command\":\"/bin/bash -lc ls\",\"cwd\":\"/p\",\"reason\":\"to list\"} to list"
    ])
  })

  it("a command approval with nothing but nulls", () => {
    assert.deepStrictEqual(
      receive(running(), L.commandApproval(0, { itemId: undefined, command: null, cwd: null, reason: null })),
      ["PermissionRequest 0 command command undefined {} undefined"]
    )
  })

  it("a file change approval names the changes its item started with", () => {
    const m = running()
    m.receive(L.item(false, { type: "fileChange", id: "call-2", changes: [{ path: "/p/a", diff: "+x" }] }, "s1"))
    assert.deepStrictEqual(receive(m, L.fileApproval(0, { reason: "write outside", grantRoot: "/p" })), [
      "PermissionRequest 0 file-change apply_patch call-2 {\"changes\":[{\"path\":\"/p/a\",\"diff\":\"+x\"}],\"reason\":\"write outside\",\"grantRoot\":\"/p\"} write outside"
    ])
  })

  it("a file change approval of an item not seen, of no item, of a completed item or of one without changes has none", () => {
    const m = running()
    assert.deepStrictEqual(receive(m, L.fileApproval(0)), [
      "PermissionRequest 0 file-change apply_patch call-2 {\"changes\":[]} undefined"
    ])
    assert.deepStrictEqual(receive(m, L.fileApproval(1, { itemId: undefined })), [
      "PermissionRequest 1 file-change apply_patch undefined {\"changes\":[]} undefined"
    ])
    m.receive(L.item(false, { type: "fileChange", id: "call-2", changes: [{ path: "/p/a" }] }, "s1"))
    m.receive(
      L.item(true, { type: "fileChange", id: "call-2", changes: [{ path: "/p/a" }], status: "completed" }, "s1")
    )
    assert.deepStrictEqual(receive(m, L.fileApproval(2)), [
      "PermissionRequest 2 file-change apply_patch call-2 {\"changes\":[]} undefined"
    ])
    m.receive(L.item(false, { type: "fileChange", id: "call-3" }, "s1"))
    assert.deepStrictEqual(receive(m, L.fileApproval(3, { itemId: "call-3" })), [
      "PermissionRequest 3 file-change apply_patch call-3 {\"changes\":[]} undefined"
    ])
  })

  it("an approval whose params do not fit is malformed, and nothing waits for an answer", () => {
    const m = running()
    assert.deepStrictEqual(receive(m, L.commandApproval(0, { command: ["ls"] })), ["Malformed malformed"])
    assert.deepStrictEqual(receive(m, L.fileApproval(1, { reason: 3 })), ["Malformed malformed"])
    assert.isUndefined(m.reply("0", { _tag: "Success", payload: {} }))
    assert.isUndefined(m.reply("1", { _tag: "Success", payload: {} }))
  })

  it("the request keeps the raw line", () => {
    const line = L.commandApproval(0, { availableDecisions: ["accept", "cancel"] })
    assert.deepStrictEqual(permissionOf(running().receive(line)).raw, JSON.parse(line))
  })

  const verdicts: ReadonlyArray<readonly [string, Permission.Verdict, string]> = [
    ["allow", Permission.allow(), "accept"],
    ["deny", Permission.deny("no"), "decline"],
    ["deny without interrupting", Permission.deny("no", { interrupt: false }), "decline"],
    ["deny and interrupt", Permission.deny("no", { interrupt: true }), "cancel"]
  ]
  for (const [name, verdict, decision] of verdicts) {
    for (const [kind, approval] of [["command", L.commandApproval], ["file change", L.fileApproval]] as const) {
      it(`${kind}: ${name} is answered ${decision}, once`, () => {
        const m = running()
        const request = permissionOf(m.receive(approval(3)))
        assert.deepStrictEqual(lineOf(m.answerPermission(request, verdict)), { id: 3, result: { decision } })
        assert.isUndefined(m.answerPermission(request, verdict))
        assert.isUndefined(m.reply(request.requestId, { _tag: "Success", payload: {} }))
      })
    }
  }

  it("an approval under a string id is answered under that string", () => {
    const m = running()
    const request = permissionOf(m.receive(L.commandApproval("req-a")))
    assert.strictEqual(request.requestId, "req-a")
    assert.deepStrictEqual(lineOf(m.answerPermission(request, Permission.allow())), {
      id: "req-a",
      result: { decision: "accept" }
    })
  })

  it("a numeric id and a string id that read alike are one request: the server's own integer is answered", () => {
    const m = running()
    const request = permissionOf(m.receive(L.commandApproval(5)))
    assert.strictEqual(request.requestId, "5")
    const line = itemsOf(m.answerPermission(request, Permission.allow()))[0] as { readonly line: string }
    assert.strictEqual(line.line, "{\"id\":5,\"result\":{\"decision\":\"accept\"}}")
  })

  it("an allow with a rewritten input is refused: Codex runs what it asked about or nothing", () => {
    const m = running()
    const request = permissionOf(m.receive(L.commandApproval(0)))
    assert.throws(() => m.answerPermission(request, Permission.allow({ command: "rm -rf /" })), /rewritten input/)
    // Still pending: the session answers it otherwise.
    assert.deepStrictEqual(lineOf(m.answerPermission(request, Permission.deny("no"))), {
      id: 0,
      result: { decision: "decline" }
    })
  })

  it("an approval the server resolved (answered, or withdrawn when its turn ended) is cancelled, never answered", () => {
    const m = running()
    const request = permissionOf(m.receive(L.commandApproval(0)))
    assert.deepStrictEqual(receive(m, L.resolved(0)), ["Cancel 0", "Frame serverRequest/resolved (session)"])
    assert.isUndefined(m.answerPermission(request, Permission.allow()))
    assert.deepStrictEqual(receive(m, L.resolved(0)), ["Frame serverRequest/resolved (session)"])
  })

  it("serverRequest/resolved names a string id the same way", () => {
    const m = running()
    m.receive(L.fileApproval("req-b"))
    assert.deepStrictEqual(receive(m, L.resolved("req-b")), ["Cancel req-b", "Frame serverRequest/resolved (session)"])
  })

  it("a reply to an approval (the host could not answer it) declines it", () => {
    const m = running()
    m.receive(L.commandApproval(4))
    assert.deepStrictEqual(lineOf(m.reply("4", { _tag: "Error", message: "timed out" })), {
      id: 4,
      result: { decision: "decline" }
    })
    assert.isUndefined(m.reply("4", { _tag: "Error", message: "timed out" }))
  })

  it("another server request is a frame and a request for the host's handler", () => {
    const params = { threadId: THREAD, questions: [{ id: "q" }] }
    assert.deepStrictEqual(receive(running(), L.request(6, "item/tool/requestUserInput", params)), [
      "Frame item/tool/requestUserInput",
      `HostRequest 6 {"_tag":"ServerRequest","method":"item/tool/requestUserInput","params":${JSON.stringify(params)}}`
    ])
  })

  it("the host's reply to it: a response with the payload, once", () => {
    const m = running()
    m.receive(L.request(6, "item/tool/requestUserInput", {}))
    assert.deepStrictEqual(lineOf(m.reply("6", { _tag: "Success", payload: { answers: {} } })), {
      id: 6,
      result: { answers: {} }
    })
    assert.isUndefined(m.reply("6", { _tag: "Success", payload: {} }))
  })

  it("the host's error reply: a JSON-RPC error under the request's own id", () => {
    const m = running()
    m.receive(L.request("r-7", "mcpServer/elicitation/request", {}))
    assert.deepStrictEqual(lineOf(m.reply("r-7", { _tag: "Error", message: "no handler" })), {
      id: "r-7",
      error: { code: -32000, message: "no handler" }
    })
  })

  it("a request the server resolved is cancelled, and a late reply writes nothing", () => {
    const m = running()
    m.receive(L.request(6, "item/tool/requestUserInput", {}))
    assert.deepStrictEqual(receive(m, L.resolved(6)), ["Cancel 6", "Frame serverRequest/resolved (session)"])
    assert.isUndefined(m.reply("6", { _tag: "Success", payload: {} }))
  })

  for (const method of ["execCommandApproval", "applyPatchApproval"]) {
    it(`the legacy ${method} is not taken for a v2 approval: the host's request handler answers it, by method`, () => {
      const m = running()
      const params = { conversationId: "c-1", callId: "call-1", command: ["ls", "-la"], cwd: "/tmp" }
      assert.deepStrictEqual(receive(m, L.request(8, method, params)), [
        `Frame ${method}`,
        `HostRequest 8 {"_tag":"ServerRequest","method":"${method}","params":${JSON.stringify(params)}}`
      ])
      // Without a handler, the session answers with an error (CodexSession's default), which Codex takes as no.
      assert.deepStrictEqual(lineOf(m.reply("8", { _tag: "Error", message: "not answered" })), {
        id: 8,
        error: { code: -32000, message: "not answered" }
      })
    })
  }

  it("a reply to a request never made writes nothing", () => {
    assert.isUndefined(running().reply("9", { _tag: "Success", payload: {} }))
    assert.isUndefined(
      running().answerPermission({ ...permissionOf(running().receive(L.commandApproval(0))) }, Permission.allow())
    )
  })
})

// --- the session machine over Codex's ------------------------------------------------------------------------------

type CodexBench = Bench & { readonly cli: (line: string) => Array<string> }

const session = (overrides: Partial<CodexMachine.MachineOptions> = {}): CodexBench => {
  const bench = new Bench(machine(overrides)) as Bench & { cli: CodexBench["cli"] }
  bench.cli = (line) => bench.step((m, now) => m.receive(now, line))
  bench.input((m, now) => m.start(now))
  bench.cli(L.response(0, { userAgent: "codex" }))
  bench.cli(L.thread(1))
  bench.trace()
  return bench
}

const sendPrompt = (b: Bench, prompt = "hello") => b.input((m, now) => m.send(now, prompt, undefined, true))

describe("session machine over Codex", () => {
  it("the handshake: initialize, initialized, thread/start, then ready with the thread as the session id", () => {
    const b = new Bench(machine())
    b.input((m, now) => m.start(now))
    b.step((m, now) => m.receive(now, L.response(0, { userAgent: "codex" })))
    const trace = b.step((m, now) => m.receive(now, L.thread(1)))
    assert.include(trace.join("\n"), "ready ")
    assert.deepStrictEqual(b.wrote().map((line) => JSON.parse(line).method), [
      "initialize",
      "initialized",
      "thread/start"
    ])
    assert.strictEqual(b.m.sessionId, THREAD)
  })

  it("a refused handshake fails startup", () => {
    const b = new Bench(machine())
    b.input((m, now) => m.start(now))
    assert.include(
      b.step((m, now) => m.receive(now, L.error(0, "Not initialized"))).join("\n"),
      "start failed (refused): Not initialized"
    )
  })

  it("a turn: the turn/start response acknowledges it, its notifications are its own, turn/completed settles it", () => {
    const b = session()
    sendPrompt(b)
    // A warning before the response is session traffic: not the turn's acknowledgement.
    assert.deepStrictEqual(b.cli(N("warning", { threadId: THREAD, message: "fallback metadata" })), ["Frame:warning"])
    assert.isFalse(b.m.active?.acknowledged)
    assert.deepStrictEqual(b.cli(L.turnStarted(2, "s1")), ["TurnAcknowledged@t1", "Frame:turn/start@t1"])
    assert.deepStrictEqual(b.cli(L.delta("Hi", "s1")), ["TextDelta@t1 Hi"])
    assert.deepStrictEqual(b.cli(L.completed({ id: "s1", status: "completed" })), [
      "Usage@t1",
      "TurnCompleted@t1",
      "Status:idle",
      "settle t1 ok"
    ])
  })

  it("a rejected turn/start fails the turn with TurnRejected, and the session goes on", () => {
    const b = session()
    sendPrompt(b)
    const trace = b.cli(L.error(2, "retry later", -32001))
    assert.include(trace.join("\n"), "settle t1 TurnRejected")
    assert.strictEqual(b.m.status, "idle")
  })

  it("an interrupt after the receipt is turn/interrupt; turn/completed interrupted settles the turn", () => {
    const b = session()
    sendPrompt(b)
    b.cli(L.turnStarted(2, "s1"))
    assert.deepStrictEqual(b.input((m, now) => m.interruptActive(now, "host")), { waiter: 1 })
    assert.deepStrictEqual(JSON.parse(b.wrote().at(-1)!), {
      method: "turn/interrupt",
      id: 3,
      params: { threadId: THREAD, turnId: "s1" }
    })
    b.cli(L.response(3, {}))
    assert.deepStrictEqual(b.cli(L.completed({ id: "s1", status: "interrupted" })), [
      "Usage@t1",
      "TurnFailed@t1 TurnInterrupted(host,acknowledged,written)",
      "Status:idle",
      "settle t1 TurnInterrupted(host,acknowledged,written)",
      "interrupt waiter 1 interrupted"
    ])
  })

  it("an approval: the policy's verdict is written as Codex's decision, and the server's resolved settles nothing more", () => {
    const b = session()
    sendPrompt(b)
    b.cli(L.turnStarted(2, "s1"))
    assert.deepStrictEqual(b.cli(L.commandApproval(0)), [
      "Status:awaiting-permission@t1",
      "PermissionRequested@t1 0",
      "decide 0@t1"
    ])
    b.input((m, now) => m.decided(now, "0", Permission.deny("no", { interrupt: true })))
    assert.deepStrictEqual(JSON.parse(b.wrote().at(-1)!), { id: 0, result: { decision: "cancel" } })
    assert.deepStrictEqual(b.cli(L.resolved(0)), ["Frame:serverRequest/resolved"])
    assert.deepStrictEqual(b.m.pendingPermissions(), [])
  })

  it("an approval the server withdraws expires unanswered", () => {
    const b = session()
    sendPrompt(b)
    b.cli(L.turnStarted(2, "s1"))
    b.cli(L.commandApproval(0))
    const trace = b.cli(L.resolved(0))
    assert.include(trace, "PermissionResolved@t1 0 expired:cancelled-by-cli")
    assert.strictEqual(b.wrote().length, 4)
  })
})
