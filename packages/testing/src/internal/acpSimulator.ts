/**
 * The simulated ACP agent of `MockAcp`: the agent side of the Agent Client Protocol as a task-scheduled process
 * (`simulatedCli.ts`), with the behaviour `MockAcp`'s module documentation describes.
 *
 * @internal
 */
import * as AcpProtocol from "@tether/acp/AcpProtocol"
import type * as MockAcp from "../MockAcp.ts"
import type * as Simulator from "../Simulator.ts"
import { type Ids, makeIds } from "./ids.ts"
import * as Json from "./json.ts"
import type { JsonObject } from "./json.ts"
import { pickSteps } from "./script.ts"
import { type Millis, millis, SimulatedCli, toMillis } from "./simulatedCli.ts"
import { Cell, End, type Fiber, never, sleep, take, type Task, wait } from "./tasks.ts"

/** A turn of a session's history, replayed by `session/load`. */
interface Exchange {
  readonly prompt: string
  readonly text: string
}

/** Sessions by script: a session outlives its process, as the real agents' files do. */
const histories = new WeakMap<MockAcp.Script, Map<string, Array<Exchange>>>()

const historiesOf = (script: MockAcp.Script): Map<string, Array<Exchange>> => {
  let sessions = histories.get(script)
  if (sessions === undefined) {
    sessions = new Map()
    histories.set(script, sessions)
  }
  return sessions
}

interface TurnRun {
  readonly requestId: AcpProtocol.Id
  readonly prompt: string
  text: string
  lastTool: string | undefined
  fiber: Fiber<unknown> | undefined
  cancelled: boolean
  finished: boolean
}

/** An answer of the client to one of the agent's requests. */
type Answer = { readonly _tag: "Result"; readonly result: unknown } | {
  readonly _tag: "Error"
  readonly message: string
}

const modes = {
  currentModeId: "default",
  availableModes: [
    { id: "default", name: "Default", description: "Asks before running tools" },
    { id: "yolo", name: "YOLO", description: "Runs tools without asking" }
  ]
}

const modelOption = (current: string) => ({
  id: "model",
  name: "Model",
  category: "model",
  type: "select",
  currentValue: current,
  options: [{ value: "mock-pro", name: "Mock Pro" }, { value: "mock-flash", name: "Mock Flash" }]
})

/**
 * The models as Gemini CLI advertises them (`models`, from the unstable `session/set_model`), and as
 * claude-agent-acp does too, beside its configuration option.
 */
const modelsOf = (current: string) => ({
  currentModelId: current,
  availableModels: [{ modelId: "mock-pro", name: "Mock Pro" }, { modelId: "mock-flash", name: "Mock Flash" }]
})

/** Starts the simulated agent of `script`. */
export const make = (script: MockAcp.Script): Simulator.Factory<MockAcp.Fault> => (launch, now) =>
  new AcpAgent(script, launch, now)

class AcpAgent extends SimulatedCli<MockAcp.Fault> {
  private readonly script: MockAcp.Script
  private readonly timing: Millis<MockAcp.Timing>
  private readonly ids: Ids
  private readonly sessions: Map<string, Array<Exchange>>
  private readonly consumed = new Set<number>()
  private readonly answers = new Map<string, Cell<Answer>>()
  private readonly unanswered = new Set<string>()
  private initialized = false
  private sessionId: string | undefined = undefined
  private mode = "default"
  private model = "mock-pro"
  private requestIds = 0
  private run: TurnRun | undefined = undefined
  private ignoreInterrupts = false
  private ignoreSigterm = false
  private ignoreStdinEof = false
  private failLoad: { readonly code: number; readonly message: string } | undefined = undefined
  private closing = false

  constructor(script: MockAcp.Script, launch: Simulator.Launch, now: number) {
    super(now)
    this.script = script
    this.timing = toMillis(script.options.timing)
    this.ids = makeIds(launch.pid)
    this.sessions = historiesOf(script)
    this.ignoreSigterm = script.options.faults.some((fault) => fault._tag === "IgnoreSigterm")
    this.sched.fork(this.started())
  }

  signal(now: number, signal: Simulator.Signal): void {
    if (this.ended === "exited") return
    this.sched.advance(now)
    if (signal === "SIGKILL" || this.ended === "hung") {
      this.sched.discard()
      return this.exit({ _tag: "Signaled", signal })
    }
    if (this.ignoreSigterm) return
    this.exit({ _tag: "Signaled", signal })
  }

  // --- the process -----------------------------------------------------------------------------------------

  private *started(): Task {
    yield* sleep(this.timing.startup)
    for (const fault of this.script.options.faults) this.applyFault(fault)
    this.sched.fork(this.reader())
  }

  private *reader(): Task {
    while (true) {
      const line = yield* take(this.stdin)
      if (line === End) break
      if (line.trim().length > 0) this.handleLine(line)
    }
    // stdin's EOF: the agent exits, unless it is one that does not.
    if (this.ignoreStdinEof) return
    this.closing = true
    yield* sleep(this.timing.exit)
    this.exit({ _tag: "Exited", code: 0 })
  }

  // --- printing --------------------------------------------------------------------------------------------

  private print(line: string): void {
    if (!this.closing) this.sched.emit({ _tag: "Stdout", line })
  }

  private respond(id: AcpProtocol.Id, result: unknown): void {
    this.print(AcpProtocol.encodeResponse(id, result))
  }

  private respondError(id: AcpProtocol.Id, code: number, message: string, data?: unknown): void {
    this.print(
      data === undefined
        ? AcpProtocol.encodeErrorResponse(id, code, message)
        : JSON.stringify({ jsonrpc: "2.0", id, error: { code, message, data } })
    )
  }

  private notifyUpdate(update: JsonObject): void {
    this.print(AcpProtocol.encodeNotification("session/update", { sessionId: this.sessionId, update }))
  }

  /** An update of the running turn, held back while the turn is stalled. */
  private *turnUpdate(update: JsonObject): Task {
    if (this.stall !== undefined) yield* this.gate()
    this.notifyUpdate(update)
  }

  private later(delay: number, f: () => void): void {
    this.sched.fork(after(delay, f))
  }

  // --- the client's lines ----------------------------------------------------------------------------------

  private handleLine(line: string): void {
    const parsed = Json.parseJson(line)
    if (parsed._tag === "None" || !Json.isRecord(parsed.value)) {
      this.sched.emit({ _tag: "Stderr", text: `Error: could not parse a message: ${line.slice(0, 80)}\n` })
      return
    }
    const message = parsed.value
    const method = message.method
    if (typeof method === "string") {
      const params = Json.isRecord(message.params) ? message.params : {}
      const id = message.id
      if (typeof id === "number" || typeof id === "string") return this.request(id, method, params)
      if (method === "session/cancel") return this.cancel(params)
      return
    }
    const id = message.id
    const cell = typeof id === "number" || typeof id === "string" ? this.answers.get(String(id)) : undefined
    if (cell === undefined) return
    this.answers.delete(String(id))
    const error = message.error
    this.sched.set(
      cell,
      Json.isRecord(error)
        ? { _tag: "Error", message: Json.stringOr(error.message, "error") }
        : { _tag: "Result", result: message.result }
    )
  }

  private request(id: AcpProtocol.Id, method: string, params: JsonObject): void {
    if (this.unanswered.has(method)) return
    const delay = this.timing.request
    switch (method) {
      case "initialize": {
        this.initialized = true
        return this.later(delay, () =>
          this.respond(id, {
            protocolVersion: 1,
            agentCapabilities: {
              loadSession: this.script.options.loadSession,
              promptCapabilities: { image: false, audio: false, embeddedContext: false },
              mcpCapabilities: { http: false, sse: false }
            },
            authMethods: [],
            agentInfo: this.script.options.agentInfo
          }))
      }
      case "session/new": {
        if (!this.initialized) return this.respondError(id, -32600, "Invalid request: not initialized")
        if (typeof params.cwd !== "string" || !params.cwd.startsWith("/")) {
          return this.respondError(id, -32602, "Invalid params: cwd must be an absolute path")
        }
        const sessionId = this.ids.uuid()
        return this.later(delay, () => {
          this.sessionId = sessionId
          this.sessions.set(sessionId, [])
          this.respond(id, { sessionId, modes, ...this.modelState() })
          this.commandsLater()
        })
      }
      case "session/load": {
        const sessionId = Json.stringOr(params.sessionId, "")
        const history = this.sessions.get(sessionId)
        const failure = this.failLoad ?? (history === undefined
          ? { code: -32002, message: `Resource not found: session ${sessionId}` }
          : undefined)
        if (!this.initialized || failure !== undefined || history === undefined) {
          const f = failure ?? { code: -32600, message: "Invalid request: not initialized" }
          return this.later(delay, () => this.respondError(id, f.code, f.message))
        }
        this.sched.fork(this.load(id, sessionId, history))
        return
      }
      case "session/prompt": {
        if (this.sessionId === undefined || params.sessionId !== this.sessionId) {
          return this.respondError(id, -32602, `Invalid params: unknown session ${Json.stringOr(params.sessionId, "")}`)
        }
        if (this.run !== undefined) return this.respondError(id, -32600, "Invalid request: a prompt is running")
        const prompt = promptOf(params.prompt)
        const run: TurnRun = {
          requestId: id,
          prompt,
          text: "",
          lastTool: undefined,
          fiber: undefined,
          cancelled: false,
          finished: false
        }
        this.run = run
        run.fiber = this.sched.fork(
          this.runTurn(run, pickSteps(this.script.turns, this.script.otherwise, this.consumed, prompt))
        )
        return
      }
      case "session/set_mode": {
        const modeId = params.modeId
        if (!modes.availableModes.some((mode) => mode.id === modeId)) {
          return this.respondError(id, -32602, `Invalid params: unknown mode ${String(modeId)}`)
        }
        return this.later(delay, () => {
          this.mode = String(modeId)
          this.respond(id, {})
          this.notifyUpdate({ sessionUpdate: "current_mode_update", currentModeId: this.mode })
        })
      }
      case "session/set_model": {
        if (params.modelId !== "mock-pro" && params.modelId !== "mock-flash") {
          return this.respondError(id, -32602, `Invalid params: unknown model ${String(params.modelId)}`)
        }
        return this.later(delay, () => {
          this.model = String(params.modelId)
          this.respond(id, {})
        })
      }
      case "session/set_config_option": {
        if (
          !this.script.options.modelOption || params.configId !== "model" ||
          (params.value !== "mock-pro" && params.value !== "mock-flash")
        ) {
          return this.respondError(id, -32602, "Invalid params: unknown option or value")
        }
        return this.later(delay, () => {
          this.model = String(params.value)
          this.respond(id, { configOptions: [modelOption(this.model)] })
        })
      }
      default:
        return this.respondError(id, -32601, `Method not found: ${method}`)
    }
  }

  /**
   * `session/load` as Gemini CLI answers it: the answer first, then the conversation replayed as updates, one
   * `timing.chunk` apart (Gemini's `loadSession` starts `streamHistory` without awaiting it: the replay runs on
   * after the answer, while the client may already prompt).
   */
  private *load(id: AcpProtocol.Id, sessionId: string, history: ReadonlyArray<Exchange>): Task {
    yield* sleep(this.timing.request)
    this.sessionId = sessionId
    this.respond(id, { modes: { ...modes, currentModeId: this.mode }, ...this.modelState() })
    this.commandsLater()
    for (const exchange of history) {
      yield* sleep(this.timing.chunk)
      this.notifyUpdate({ sessionUpdate: "user_message_chunk", content: { type: "text", text: exchange.prompt } })
      yield* sleep(this.timing.chunk)
      this.notifyUpdate({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: exchange.text } })
    }
  }

  /**
   * `available_commands_update`, from a timer started when the session is answered (Gemini CLI and
   * claude-agent-acp both `setTimeout` it): it arrives after the answer, `timing.commands` later, in practice after
   * the client's first prompt.
   */
  private commandsLater(): void {
    this.later(this.timing.commands, () =>
      this.notifyUpdate({
        sessionUpdate: "available_commands_update",
        availableCommands: [{ name: "memory", description: "Manage memory", input: null }]
      }))
  }

  /** How the session's model is advertised: `models` always; a configuration option as well with `modelOption`. */
  private modelState(): JsonObject {
    return this.script.options.modelOption
      ? { models: modelsOf(this.model), configOptions: [modelOption(this.model)] }
      : { models: modelsOf(this.model) }
  }

  private cancel(params: JsonObject): void {
    const run = this.run
    if (run === undefined || run.finished || params.sessionId !== this.sessionId || this.ignoreInterrupts) return
    if (run.cancelled) return
    run.cancelled = true
    if (run.fiber !== undefined) this.sched.stop(run.fiber, undefined)
    this.sched.fork(this.cancelled(run))
  }

  private *cancelled(run: TurnRun): Task {
    yield* sleep(this.timing.cancel)
    this.end(run, { stopReason: "cancelled" })
  }

  private end(run: TurnRun, result: { readonly stopReason: string }): void {
    if (run.finished) return
    run.finished = true
    if (this.run === run) this.run = undefined
    if (this.sessionId !== undefined) this.sessions.get(this.sessionId)?.push({ prompt: run.prompt, text: run.text })
    this.respond(run.requestId, result)
  }

  // --- the turn --------------------------------------------------------------------------------------------

  private *runTurn(run: TurnRun, steps: ReadonlyArray<MockAcp.Step>): Task {
    yield* sleep(this.timing.firstUpdate)
    for (const step of steps) {
      switch (step._tag) {
        case "Text": {
          yield* this.stream(run, step)
          break
        }
        case "Tool": {
          yield* this.tool(run, step)
          break
        }
        case "File": {
          yield* this.file(run, step)
          break
        }
        case "Terminal": {
          yield* this.terminal(run, step)
          break
        }
        case "Update": {
          yield* this.turnUpdate(step.update)
          break
        }
        case "Stop": {
          yield* sleep(this.timing.result)
          return this.end(run, { stopReason: step.stopReason })
        }
        case "ApiError": {
          if (this.stall !== undefined) yield* this.gate()
          run.finished = true
          this.run = undefined
          switch (step.as) {
            case "code":
              return this.respondError(run.requestId, step.status, step.message)
            case "message":
              return this.respondError(
                run.requestId,
                -32603,
                `Internal error: API Error: ${step.status} {"type":"error","error":{"message":${
                  JSON.stringify(step.message)
                }}}`
              )
            default:
              return this.respondError(run.requestId, -32603, step.message, { status: step.status })
          }
        }
        default:
          yield* this.faultStep(step)
      }
    }
    if (run.lastTool !== undefined) {
      yield* this.stream(run, { _tag: "Text", chunks: [{ text: `Tool said: ${run.lastTool}` }], thought: false })
    }
    yield* sleep(this.timing.result)
    if (this.stall !== undefined) yield* this.gate()
    this.end(run, { stopReason: "end_turn" })
  }

  private *stream(run: TurnRun, step: MockAcp.Text): Task {
    let first = true
    for (const chunk of step.chunks) {
      if (!first || chunk.delay !== undefined) {
        yield* sleep(chunk.delay === undefined ? this.timing.chunk : millis(chunk.delay))
      }
      first = false
      if (!step.thought) run.text += chunk.text
      yield* this.turnUpdate({
        sessionUpdate: step.thought ? "agent_thought_chunk" : "agent_message_chunk",
        content: { type: "text", text: chunk.text }
      })
    }
  }

  /** Sends a request to the client and waits for its answer. */
  private *ask(method: string, params: JsonObject): Task<Answer> {
    const id = this.requestIds++
    const answer = new Cell<Answer>()
    this.answers.set(String(id), answer)
    if (this.stall !== undefined) yield* this.gate()
    this.print(AcpProtocol.encodeRequest(id, method, params))
    return yield* wait(answer)
  }

  private *tool(run: TurnRun, step: MockAcp.Tool): Task {
    const toolCallId = `${step.kind}-${this.ids.hex(8)}`
    const call = { toolCallId, title: step.title, kind: step.kind, status: "pending", rawInput: step.rawInput }
    yield* this.turnUpdate({ sessionUpdate: "tool_call", ...call, locations: [], content: [] })
    if (step.permission && this.mode !== "yolo") {
      const answer = yield* this.ask("session/request_permission", {
        sessionId: this.sessionId,
        toolCall: call,
        options: [
          { optionId: "proceed_always", name: "Always Allow", kind: "allow_always" },
          { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
          { optionId: "cancel", name: "Reject", kind: "reject_once" }
        ]
      })
      const outcome = answer._tag === "Result" && Json.isRecord(answer.result) && Json.isRecord(answer.result.outcome)
        ? answer.result.outcome
        : undefined
      const allowed = outcome?.outcome === "selected" &&
        (outcome.optionId === "proceed_once" || outcome.optionId === "proceed_always")
      if (!allowed) {
        run.lastTool = "the tool was not allowed to run"
        yield* this.turnUpdate({
          sessionUpdate: "tool_call_update",
          toolCallId,
          status: "failed",
          content: [{ type: "content", content: { type: "text", text: "Permission denied" } }]
        })
        return
      }
    }
    yield* this.turnUpdate({ sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" })
    yield* sleep(this.timing.tool)
    run.lastTool = step.output
    yield* this.turnUpdate({
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: step.fails ? "failed" : "completed",
      content: [{ type: "content", content: { type: "text", text: step.output } }]
    })
  }

  private *file(run: TurnRun, step: MockAcp.File): Task {
    const toolCallId = `file-${this.ids.hex(8)}`
    const kind = step.method === "fs/read_text_file" ? "read" : "edit"
    yield* this.turnUpdate({
      sessionUpdate: "tool_call",
      toolCallId,
      title: `${kind} ${step.path}`,
      kind,
      status: "in_progress",
      rawInput: { path: step.path },
      locations: [{ path: step.path }]
    })
    // Gemini CLI's write tool reads the file first: only an error it takes for ENOENT lets it create a new one.
    const before = step.content === undefined
      ? undefined
      : yield* this.ask("fs/read_text_file", { sessionId: this.sessionId, path: step.path })
    const answer = before !== undefined && before._tag === "Error" && !isEnoent(before.message)
      ? before
      : yield* this.ask(
        step.method,
        step.content === undefined
          ? { sessionId: this.sessionId, path: step.path }
          : { sessionId: this.sessionId, path: step.path, content: step.content }
      )
    const output = answer._tag === "Error"
      ? answer.message
      : step.content === undefined
      ? Json.stringOr(Json.isRecord(answer.result) ? answer.result.content : undefined, "")
      : `wrote ${step.path}`
    run.lastTool = output
    yield* this.turnUpdate({
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: answer._tag === "Error" ? "failed" : "completed",
      content: [{ type: "content", content: { type: "text", text: output } }]
    })
  }

  private *terminal(run: TurnRun, step: MockAcp.Terminal): Task {
    const toolCallId = `terminal-${this.ids.hex(8)}`
    const command = [step.command, ...step.args].join(" ")
    yield* this.turnUpdate({
      sessionUpdate: "tool_call",
      toolCallId,
      title: `Running ${command}`,
      kind: "execute",
      status: "in_progress",
      rawInput: { command }
    })
    const failed = (message: string) => {
      run.lastTool = message
      return this.turnUpdate({
        sessionUpdate: "tool_call_update",
        toolCallId,
        status: "failed",
        content: [{ type: "content", content: { type: "text", text: message } }]
      })
    }
    const created = yield* this.ask("terminal/create", {
      sessionId: this.sessionId,
      command: step.command,
      args: step.args,
      env: Object.entries(step.env).map(([name, value]) => ({ name, value })),
      ...(step.outputByteLimit === undefined ? {} : { outputByteLimit: step.outputByteLimit })
    })
    if (created._tag === "Error") return yield* failed(created.message)
    const terminalId = Json.stringOr(Json.isRecord(created.result) ? created.result.terminalId : undefined, "")
    if (!step.wait) {
      run.lastTool = `started ${terminalId}`
      return yield* this.turnUpdate({
        sessionUpdate: "tool_call_update",
        toolCallId,
        status: "completed",
        content: [{ type: "terminal", terminalId }]
      })
    }
    const exited = yield* this.ask("terminal/wait_for_exit", { sessionId: this.sessionId, terminalId })
    if (exited._tag === "Error") return yield* failed(exited.message)
    const output = yield* this.ask("terminal/output", { sessionId: this.sessionId, terminalId })
    yield* this.ask("terminal/release", { sessionId: this.sessionId, terminalId })
    const text = output._tag === "Result" && Json.isRecord(output.result)
      ? Json.stringOr(output.result.output, "")
      : ""
    run.lastTool = text.trimEnd()
    yield* this.turnUpdate({
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: "completed",
      content: [{ type: "terminal", terminalId }, { type: "content", content: { type: "text", text } }]
    })
  }

  // --- faults ----------------------------------------------------------------------------------------------

  protected applyFault(fault: MockAcp.Fault): void {
    switch (fault._tag) {
      case "Crash": {
        if (fault.stderr.length > 0) this.sched.emit({ _tag: "Stderr", text: fault.stderr })
        return this.exit({ _tag: "Exited", code: fault.code })
      }
      case "Hang": {
        this.ended = "hung"
        return this.sched.halt()
      }
      case "Stall":
        return this.stallFor(fault.duration)
      case "Malformed":
      case "Raw":
        return this.sched.emit({ _tag: "Stdout", line: fault.line })
      case "NeverAnswer": {
        this.unanswered.add(fault.method)
        return
      }
      case "IgnoreInterrupts": {
        this.ignoreInterrupts = true
        return
      }
      case "IgnoreSigterm": {
        this.ignoreSigterm = true
        return
      }
      case "IgnoreStdinEof": {
        this.ignoreStdinEof = true
        return
      }
      case "FailLoad": {
        this.failLoad = { code: fault.code, message: fault.message }
        return
      }
      default:
        // A fault of another provider's simulator (`MockTransport.Fault` is the union of every provider's).
        return
    }
  }

  private *faultStep(fault: MockAcp.Fault): Task {
    switch (fault._tag) {
      case "Stall": {
        yield fault.duration === undefined ? never : millis(fault.duration)
        return
      }
      case "Crash":
      case "Hang": {
        this.applyFault(fault)
        yield never
        return
      }
      case "Malformed":
      case "Raw": {
        if (this.stall !== undefined) yield* this.gate()
        return this.applyFault(fault)
      }
      default:
        return this.applyFault(fault)
    }
  }
}

function* after(delay: number, f: () => void): Task {
  yield* sleep(delay)
  f()
}

/** The errors Gemini CLI's `AcpFileSystemService` takes for a missing file (`normalizeFileSystemError`). */
const isEnoent = (message: string): boolean =>
  ["Resource not found", "ENOENT", "does not exist", "No such file"].some((needle) => message.includes(needle))

const promptOf = (prompt: unknown): string =>
  Array.isArray(prompt)
    ? prompt.flatMap((block) =>
      Json.isRecord(block) && block.type === "text" && typeof block.text === "string" ? [block.text] : []
    ).join("\n")
    : ""
