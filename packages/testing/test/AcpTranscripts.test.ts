/**
 * The recorded transcripts of the real ACP agents (test/fixtures/acp/<agent>-<version>/, recorded offline by
 * `pnpm fixtures:record:acp`), read as JSON-RPC 2.0 and held to the invariants every ACP client relies on: each
 * request answered exactly once, in both directions (the client's ids and the agent's are separate spaces, each
 * counting from 0 in each process); a `session/prompt` answered with a `stopReason` or an error; a prompt that was
 * in flight when the client sent `session/cancel` answered `cancelled`; updates and permission requests shaped as
 * the protocol says; and every line decoded by `@tether/acp`'s codec, its params or result by the schema generated
 * from the protocol's JSON Schema for its method. docs/protocol/acp-agents.md describes what the transcripts show.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpProtocol } from "@tether/acp"
import { Result, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.join(import.meta.dirname, "fixtures", "acp")

/** The agents and the scenarios each one must have a transcript of (scripts/fixtures/acp/scenarios.ts). */
const agents = ["gemini-0.61.0", "claude-agent-acp-0.23.1"]
const scenarios = [
  "cancelDuringPermission",
  "cancelMidStream",
  "eofIdle",
  "modelError",
  "permissionAllowed",
  "permissionDenied",
  "prompt",
  "resume",
  "twoTurns"
]

type Json = { readonly [key: string]: any }

type Entry =
  | { readonly t: number; readonly dir: ">" | "<"; readonly msg: Json }
  | { readonly t: number; readonly dir: ">" | "<"; readonly raw: string }
  | { readonly t: number; readonly dir: "err" | "note"; readonly text: string }

interface Transcript {
  readonly agent: string
  readonly name: string
  readonly entries: ReadonlyArray<Entry>
}

const read = (agent: string, name: string): Transcript => ({
  agent,
  name,
  entries: Fs.readFileSync(Path.join(root, agent, `${name}.ndjson`), "utf8").split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Entry)
})

const transcripts: ReadonlyArray<Transcript> = agents.flatMap((agent) =>
  Fs.existsSync(Path.join(root, agent))
    ? Fs.readdirSync(Path.join(root, agent)).filter((file) => file.endsWith(".ndjson")).sort().map((file) =>
      read(agent, file.slice(0, -".ndjson".length))
    )
    : []
)

/** The stop reasons of ACP v1 (`session/prompt`'s `stopReason`). */
const stopReasons = new Set(["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"])

/** The `session/update` kinds the agents send (`usage_update`: claude-agent-acp's, new in the protocol's schema). */
const updateKinds = new Set([
  "user_message_chunk",
  "agent_message_chunk",
  "agent_thought_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "available_commands_update",
  "current_mode_update",
  "config_option_update",
  "session_info_update",
  "usage_update"
])

const permissionKinds = new Set(["allow_once", "allow_always", "reject_once", "reject_always"])

type Message = { readonly t: number; readonly dir: ">" | "<"; readonly msg: Json }

/**
 * The messages of each process of a transcript, in order: a process starts at the recorder's `spawned process <n>`
 * note (request ids start again from 0 there).
 */
const processesOf = (transcript: Transcript): ReadonlyArray<ReadonlyArray<Message>> => {
  const processes: Array<Array<Message>> = []
  for (const entry of transcript.entries) {
    if (entry.dir === "note" && /^spawned process \d+$/.test(entry.text)) processes.push([])
    else if ("msg" in entry) {
      assert.isAbove(processes.length, 0, `${transcript.name}: a message before any process was spawned`)
      processes[processes.length - 1].push(entry)
    }
  }
  return processes
}

const isRequest = (msg: Json) => typeof msg.method === "string" && "id" in msg
const isNotification = (msg: Json) => typeof msg.method === "string" && !("id" in msg)
const isResponse = (msg: Json) => !("method" in msg) && "id" in msg

/**
 * Checks one process's messages and returns the problems found (empty: it holds). Exported shape: the checks are
 * the invariants of the module comment.
 */
const problemsOf = (messages: ReadonlyArray<Message>): ReadonlyArray<string> => {
  const problems: Array<string> = []
  /** Requests by direction and id: the method, the session, and how many times answered. */
  const requests = new Map<string, { method: string; sessionId: unknown; answers: number; response?: Json }>()
  /** Per session, the ids of the client's prompts in flight. */
  const inFlight = new Map<unknown, Set<number | string>>()
  const cancelled = new Set<number | string>()
  for (const { dir, msg } of messages) {
    const where = `${dir} ${JSON.stringify(msg).slice(0, 160)}`
    if (msg.jsonrpc !== "2.0") problems.push(`not JSON-RPC 2.0: ${where}`)
    if (isRequest(msg)) {
      const key = `${dir}${String(msg.id)}`
      if (requests.has(key)) problems.push(`request id used twice in one direction: ${where}`)
      requests.set(key, { method: msg.method, sessionId: msg.params?.sessionId, answers: 0 })
      if (dir === ">" && msg.method === "session/prompt") {
        const set = inFlight.get(msg.params?.sessionId) ?? new Set()
        set.add(msg.id)
        inFlight.set(msg.params?.sessionId, set)
      }
      if (dir === "<" && msg.method === "session/request_permission") {
        const options: ReadonlyArray<Json> = msg.params?.options ?? []
        if (options.length === 0) problems.push(`a permission request without options: ${where}`)
        for (const option of options) {
          if (typeof option.optionId !== "string" || typeof option.name !== "string") {
            problems.push(`a permission option without optionId or name: ${where}`)
          }
          if (!permissionKinds.has(option.kind)) problems.push(`a permission option of unknown kind: ${where}`)
        }
        if (typeof msg.params?.toolCall?.toolCallId !== "string") problems.push(`no toolCall.toolCallId: ${where}`)
        if (typeof msg.params?.sessionId !== "string") problems.push(`no sessionId: ${where}`)
      }
    } else if (isNotification(msg)) {
      if (dir === ">" && msg.method === "session/cancel") {
        for (const id of inFlight.get(msg.params?.sessionId) ?? []) cancelled.add(id)
      }
      if (dir === "<" && msg.method === "session/update") {
        if (typeof msg.params?.sessionId !== "string") problems.push(`an update without sessionId: ${where}`)
        if (!updateKinds.has(msg.params?.update?.sessionUpdate)) problems.push(`an update of unknown kind: ${where}`)
      }
    } else if (isResponse(msg)) {
      // A response goes the other way: the agent's (`<`) answers the client's requests (`>`).
      const request = requests.get(`${dir === "<" ? ">" : "<"}${String(msg.id)}`)
      if (request === undefined) {
        problems.push(`a response to no request: ${where}`)
        continue
      }
      request.answers++
      request.response = msg
      if (("result" in msg) === ("error" in msg)) {
        problems.push(`a response needs exactly one of result, error: ${where}`)
      }
      if ("error" in msg && (typeof msg.error?.code !== "number" || typeof msg.error?.message !== "string")) {
        problems.push(`an error without a numeric code and a message: ${where}`)
      }
      if (dir === "<" && request.method === "session/prompt") {
        inFlight.get(request.sessionId)?.delete(msg.id)
        if ("result" in msg && !stopReasons.has(msg.result?.stopReason)) {
          problems.push(`a prompt answered without a valid stopReason: ${where}`)
        }
        if (cancelled.has(msg.id) && msg.result?.stopReason !== "cancelled") {
          problems.push(`a prompt in flight at session/cancel was not answered cancelled: ${where}`)
        }
      }
    } else {
      problems.push(`neither a request, a notification nor a response: ${where}`)
    }
  }
  for (const [key, request] of requests) {
    if (request.answers !== 1) problems.push(`request ${key} (${request.method}) answered ${request.answers} times`)
  }
  return problems
}

const exitNote = /^exit code=(\S+) signal=(\S+)$/

/** The generated schema of each request's params, by method (the client's requests and the agent's). */
const requestSchemas: { readonly [method: string]: Schema.Codec<unknown, unknown> } = {
  "initialize": AcpProtocol.InitializeRequest,
  "session/new": AcpProtocol.NewSessionRequest,
  "session/load": AcpProtocol.LoadSessionRequest,
  "session/prompt": AcpProtocol.PromptRequest,
  "session/cancel": AcpProtocol.CancelNotification,
  "session/update": AcpProtocol.SessionNotification,
  "session/request_permission": AcpProtocol.RequestPermissionRequest
}

/** The generated schema of each request's result, by the request's method. */
const resultSchemas: { readonly [method: string]: Schema.Codec<unknown, unknown> } = {
  "initialize": AcpProtocol.InitializeResponse,
  "session/new": AcpProtocol.NewSessionResponse,
  "session/load": AcpProtocol.LoadSessionResponse,
  "session/prompt": AcpProtocol.PromptResponse,
  "session/request_permission": AcpProtocol.RequestPermissionResponse
}

/** What in one process does not fit the codec or its method's generated schema (empty: every line fits). */
const schemaProblemsOf = (messages: ReadonlyArray<Message>): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const methods = new Map<string, string>()
  const check = (schema: Schema.Codec<unknown, unknown> | undefined, value: unknown, where: string): void => {
    if (schema === undefined) {
      problems.push(`no schema for ${where}`)
      return
    }
    const decoded = Schema.decodeUnknownResult(schema)(value)
    if (Result.isFailure(decoded)) problems.push(`${where}: ${decoded.failure.message}`)
  }
  for (const { dir, msg } of messages) {
    const where = `${dir} ${JSON.stringify(msg).slice(0, 120)}`
    const line = AcpProtocol.decodeLine(JSON.stringify(msg))
    if (Result.isFailure(line)) {
      problems.push(`${where}: ${line.failure.message}`)
      continue
    }
    const message = line.success
    switch (message._tag) {
      case "Request":
        methods.set(`${dir}${String(message.id)}`, message.method)
        check(requestSchemas[message.method], message.params, where)
        break
      case "Notification":
        check(requestSchemas[message.method], message.params, where)
        break
      case "Response": {
        const method = methods.get(`${dir === "<" ? ">" : "<"}${String(message.id)}`) ?? "?"
        check(resultSchemas[method], message.result, `the result of ${method}: ${where}`)
        break
      }
      case "ErrorResponse":
        break
    }
  }
  return problems
}

describe("the recorded ACP transcripts", () => {
  it("every agent has every scenario, and nothing else", () => {
    assert.deepStrictEqual(Fs.readdirSync(root).sort(), [...agents].sort())
    for (const agent of agents) {
      assert.deepStrictEqual(
        transcripts.filter((transcript) => transcript.agent === agent).map((transcript) => transcript.name),
        scenarios,
        agent
      )
    }
  })

  for (const transcript of transcripts) {
    describe(`${transcript.agent} ${transcript.name}`, () => {
      it("is JSON-RPC 2.0 in both directions: every request answered exactly once, prompts with a stopReason", () => {
        const first = transcript.entries[0]
        assert.strictEqual(first.dir, "note")
        const [name, version] = [transcript.agent.replace(/-[^-]+$/, ""), transcript.agent.replace(/^.*-/, "")]
        assert.isTrue(
          "text" in first && first.text.startsWith(`${name} ${version} `),
          "the transcript says which agent and version recorded it"
        )
        assert.isFalse(transcript.entries.some((entry) => "raw" in entry), "every stdout line is JSON")
        const processes = processesOf(transcript)
        assert.isAbove(processes.length, 0)
        for (const [i, messages] of processes.entries()) {
          assert.deepStrictEqual(problemsOf(messages), [], `process ${i + 1}`)
          const initialize = messages.find(({ msg }) => msg.method === "initialize")
          assert.strictEqual(initialize?.msg.id, 0, "each process starts with initialize, id 0")
        }
        const exits = transcript.entries.filter((entry) => entry.dir === "note" && exitNote.test(entry.text))
        assert.strictEqual(exits.length, processes.length, "every process's exit is recorded")
      })
    })
  }

  it("every line fits @tether/acp's codec, and its params or result the method's generated schema", () => {
    for (const transcript of transcripts) {
      for (const [i, messages] of processesOf(transcript).entries()) {
        assert.deepStrictEqual(
          schemaProblemsOf(messages),
          [],
          `${transcript.agent} ${transcript.name} process ${i + 1}`
        )
      }
    }
  })

  it("the cancel scenarios send session/cancel while a prompt is in flight, which ends cancelled", () => {
    for (const transcript of transcripts.filter((transcript) => transcript.name.startsWith("cancel"))) {
      const messages = processesOf(transcript).flat()
      const cancel = messages.findIndex(({ dir, msg }) => dir === ">" && msg.method === "session/cancel")
      assert.isAtLeast(cancel, 0, `${transcript.agent} ${transcript.name} sends session/cancel`)
      const prompt = messages.slice(0, cancel).findLast(({ msg }) => msg.method === "session/prompt")
      const answer = messages.slice(cancel).find(({ dir, msg }) =>
        dir === "<" && isResponse(msg) && msg.id === prompt?.msg.id
      )
      assert.strictEqual(answer?.msg.result?.stopReason, "cancelled", `${transcript.agent} ${transcript.name}`)
    }
  })

  it("the permission scenarios ask, and the command runs only when allowed", () => {
    for (const transcript of transcripts.filter((transcript) => transcript.name.startsWith("permission"))) {
      const asked = processesOf(transcript).flat().filter(({ msg }) => msg.method === "session/request_permission")
      assert.strictEqual(asked.length, 1, `${transcript.agent} ${transcript.name} asks once`)
      const notes = transcript.entries.flatMap((entry) => entry.dir === "note" ? [entry.text] : [])
      assert.include(
        notes,
        transcript.name === "permissionAllowed" ? "allowed.txt exists" : "denied.txt does not exist",
        `${transcript.agent} ${transcript.name}`
      )
    }
  })

  it("the invariants catch a broken transcript", () => {
    const message = (dir: ">" | "<", msg: Json): Message => ({ t: 0, dir, msg: { jsonrpc: "2.0", ...msg } })
    const prompt = message(">", { id: 1, method: "session/prompt", params: { sessionId: "s", prompt: [] } })
    const cancel = message(">", { method: "session/cancel", params: { sessionId: "s" } })
    assert.deepStrictEqual(
      problemsOf([prompt, cancel, message("<", { id: 1, result: { stopReason: "cancelled" } })]),
      []
    )
    assert.lengthOf(problemsOf([prompt, cancel, message("<", { id: 1, result: { stopReason: "end_turn" } })]), 1)
    assert.lengthOf(problemsOf([prompt]), 1, "unanswered")
    assert.lengthOf(
      problemsOf([
        prompt,
        message("<", { id: 1, result: { stopReason: "end_turn" } }),
        message("<", { id: 1, result: {} })
      ]),
      2,
      "answered twice, the second without a stopReason"
    )
    assert.lengthOf(problemsOf([prompt, message("<", { id: 1, result: {} })]), 1, "no stopReason")
    assert.lengthOf(problemsOf([message("<", { id: 7, result: {} })]), 1, "a response to no request")
    assert.lengthOf(
      problemsOf([message("<", { id: 0, method: "session/request_permission", params: { sessionId: "s" } })]),
      3,
      "no options, no tool call, unanswered"
    )
    assert.lengthOf(
      problemsOf([{ t: 0, dir: "<", msg: { id: 1, method: "x" } }, message(">", { id: 1, result: {} })]),
      1
    )
  })
})
