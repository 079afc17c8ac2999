/**
 * The simulated ACP agent, sans-IO: every line it prints is a message of the protocol as its published JSON Schema
 * says (checked with the schemas generated from it), answering what a client writes the way docs/protocol/acp.md
 * says an agent does.
 *
 * The seam for recorded transcripts: {@link conforms} is what a line of any agent must satisfy; when transcripts of
 * the real agents (Gemini CLI, claude-agent-acp) are in the repository, the same check runs on their lines, and the
 * simulator's lines for the same scenario are compared with theirs.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpProtocol } from "@tether/acp"
import { MockAcp, type Simulator } from "@tether/testing"
import { Schema } from "effect"

type Line = { readonly [key: string]: any }

/** The schema of an agent's answer to each client request. */
const results: { readonly [method: string]: Schema.Top } = {
  initialize: AcpProtocol.InitializeResponse,
  "session/new": AcpProtocol.NewSessionResponse,
  "session/load": AcpProtocol.LoadSessionResponse,
  "session/prompt": AcpProtocol.PromptResponse,
  "session/set_mode": AcpProtocol.SetSessionModeResponse,
  "session/set_config_option": AcpProtocol.SetSessionConfigOptionResponse
}

/** The schema of the params of each request and notification of an agent. */
const params: { readonly [method: string]: Schema.Top } = {
  "session/update": AcpProtocol.SessionNotification,
  "session/request_permission": AcpProtocol.RequestPermissionRequest,
  "fs/read_text_file": AcpProtocol.ReadTextFileRequest,
  "fs/write_text_file": AcpProtocol.WriteTextFileRequest
}

const is = (schema: Schema.Top, value: unknown) => Schema.is(schema as Schema.Codec<unknown, unknown>)(value)

/**
 * Whether an agent's line is a protocol message: a JSON-RPC 2.0 message whose params (or whose result, for the
 * client request `sent` names by id) fit the protocol's schema. Returns what is wrong, or undefined.
 */
const conforms = (line: Line, sent: ReadonlyMap<unknown, string>): string | undefined => {
  if (line.jsonrpc !== "2.0") return "no jsonrpc 2.0"
  if (typeof line.method === "string") {
    const schema = params[line.method]
    if (schema === undefined) return `a method the protocol does not give an agent: ${line.method}`
    return is(schema, line.params) ? undefined : `${line.method} params do not fit`
  }
  const method = sent.get(line.id)
  if (method === undefined) return `an answer to no request (${line.id})`
  if ("error" in line) return is(AcpProtocol.Error, line.error) ? undefined : `${method}: an error that does not fit`
  const schema = results[method]
  return schema !== undefined && is(schema, line.result) ? undefined : `${method}: a result that does not fit`
}

/** Runs the simulator: writes each client line when the agent's output so far satisfies `when`, then drains. */
const converse = (
  script: MockAcp.Script,
  steps: ReadonlyArray<(out: ReadonlyArray<Line>) => Line | undefined>
) => {
  const agent = MockAcp.simulator(script)({ args: [], env: {}, cwd: "/p", pid: 7 }, 0)
  const out: Array<Line> = []
  const sent = new Map<unknown, string>()
  let now = 0
  const drain = (until: number) => {
    while (now <= until) {
      for (let o = agent.poll(now); o !== undefined; o = agent.poll(now)) {
        if (o._tag === "Stdout") out.push(JSON.parse(o.line))
      }
      const wake = agent.nextWake()
      if (wake === Infinity || wake > until) break
      now = wake
    }
    now = until
  }
  drain(1_000)
  for (const step of steps) {
    const line = step(out)
    if (line === undefined) continue
    if (line.id !== undefined && line.method !== undefined) sent.set(line.id, line.method)
    agent.write(now, JSON.stringify(line))
    drain(now + 5_000)
  }
  return { out, sent, agent: agent as Simulator.Simulator<MockAcp.Fault> }
}

const request = (id: number, method: string, p: object) => () => ({ jsonrpc: "2.0", id, method, params: p })

describe("MockAcp", () => {
  it("prints only protocol messages: a session, a turn with a tool that asks, a file read, a load", () => {
    const script = MockAcp.make([
      MockAcp.when(
        "work",
        MockAcp.thought("thinking"),
        MockAcp.text(["a ", "b"]),
        MockAcp.tool({ command: "ls", output: "x.txt" }),
        MockAcp.readFile("/p/x.txt"),
        MockAcp.update({ sessionUpdate: "plan", entries: [{ content: "do", priority: "high", status: "pending" }] })
      )
    ])
    const sessionOf = (out: ReadonlyArray<Line>) => out.find((line) => line.id === 1)?.result.sessionId
    const { out, sent } = converse(script, [
      request(0, "initialize", { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true } } }),
      request(1, "session/new", { cwd: "/p", mcpServers: [] }),
      (out) => ({
        jsonrpc: "2.0",
        id: 2,
        method: "session/prompt",
        params: { sessionId: sessionOf(out), prompt: [{ type: "text", text: "work" }] }
      }),
      (out) => ({
        jsonrpc: "2.0",
        id: out.find((line) => line.method === "session/request_permission")!.id,
        result: { outcome: { outcome: "selected", optionId: "proceed_once" } }
      }),
      (out) => ({
        jsonrpc: "2.0",
        id: out.find((line) => line.method === "fs/read_text_file")!.id,
        result: { content: "file body" }
      }),
      (out) => ({
        jsonrpc: "2.0",
        id: 3,
        method: "session/set_mode",
        params: { sessionId: sessionOf(out), modeId: "yolo" }
      }),
      (out) => ({
        jsonrpc: "2.0",
        id: 4,
        method: "session/load",
        params: { sessionId: sessionOf(out), cwd: "/p", mcpServers: [] }
      }),
      request(5, "nonsense/method", {})
    ])
    for (const line of out) assert.isUndefined(conforms(line, sent), JSON.stringify(line))
    const kinds = out.filter((line) => line.method === "session/update").map((line) => line.params.update.sessionUpdate)
    assert.deepStrictEqual(kinds.slice(0, 9), [
      "available_commands_update",
      "agent_thought_chunk",
      "agent_message_chunk",
      "agent_message_chunk",
      "tool_call",
      "tool_call_update",
      "tool_call_update",
      "tool_call",
      "tool_call_update"
    ])
    assert.deepStrictEqual(out.find((line) => line.id === 2)?.result, { stopReason: "end_turn" })
    // The load answered, then replayed the turn (as Gemini does: its replay is not awaited).
    const loadAnswer = out.findIndex((line) => line.id === 4)
    const replayed = out.slice(loadAnswer + 1).filter((line) =>
      line.method === "session/update" &&
      ["user_message_chunk", "agent_message_chunk"].includes(line.params.update.sessionUpdate)
    ).map((line) => line.params.update)
    assert.deepStrictEqual(replayed.map((update) => [update.sessionUpdate, update.content.text]), [
      ["user_message_chunk", "work"],
      ["agent_message_chunk", "a bTool said: file body"]
    ])
    assert.strictEqual(out.find((line) => line.id === 5)?.error.code, -32601)
  })

  it("a cancel ends the prompt with cancelled; with the fault, nothing answers it", () => {
    const slow = MockAcp.when("slow", MockAcp.text(["a", "b", "c", "d"], { delay: "1 second" }))
    const steps = (cancel: boolean) => [
      request(0, "initialize", { protocolVersion: 1 }),
      request(1, "session/new", { cwd: "/p", mcpServers: [] }),
      (out: ReadonlyArray<Line>) => ({
        jsonrpc: "2.0",
        id: 2,
        method: "session/prompt",
        params: {
          sessionId: out.find((line) => line.id === 1)?.result.sessionId,
          prompt: [{ type: "text", text: "slow" }]
        }
      }),
      (out: ReadonlyArray<Line>) =>
        cancel
          ? {
            jsonrpc: "2.0",
            method: "session/cancel",
            params: { sessionId: out.find((line) => line.id === 1)?.result.sessionId }
          }
          : undefined
    ]
    // The prompt is written when the drain before it ended: 5 s of 1 s chunks have all run; cancel a longer one.
    const answered = converse(MockAcp.make([slow], { timing: { firstUpdate: "10 seconds" } }), steps(true))
    assert.deepStrictEqual(answered.out.find((line) => line.id === 2)?.result, { stopReason: "cancelled" })
    const ignored = converse(
      MockAcp.make([slow], { timing: { firstUpdate: "10 seconds" }, faults: [MockAcp.ignoreInterrupts] }),
      steps(true)
    )
    assert.isUndefined(ignored.out.find((line) => line.id === 2))
  })
})
