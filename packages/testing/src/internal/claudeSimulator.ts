/**
 * Claude Code's CLI side of the stream-json protocol as a simulator (see `Simulator.ts`): a {@link MockClaude.Script}
 * played against stdin lines, with every frame typed by the codec (`ClaudeProtocol.Frame`) and written by its
 * schema-free writer (`ClaudeWire.writeFrame`), and every stdin line read by its schema-free reader
 * (`ClaudeWire.readHostLine`), so the simulator and the codec cannot drift, and a fake CLI process starts without
 * loading `effect/Schema`. The schemas still run on both sides of every exchange with a Tether host: its encoders
 * validate what it writes, its decoder what the simulator prints.
 *
 * The process is a few cooperative tasks (`tasks.ts`), as the real CLI is a few concurrent loops: a reader that takes
 * stdin lines one at a time (a slow receipt holds back what comes after it), a runner that plays one turn at a time,
 * and the turn itself, which an interrupt stops wherever it waits and replaces with the frames of an aborted turn.
 *
 * Two CLI versions: 2.1.332 (the default, with receipts) and 2.1.197, the oldest supported, whose differences are
 * listed on {@link Profile}.
 *
 * @internal
 */
import type * as ClaudeProtocol from "@tether/claude/ClaudeProtocol"
import * as ClaudeWire from "@tether/claude/ClaudeWire"
import type * as MockClaude from "../MockClaude.ts"
import type * as Simulator from "../Simulator.ts"
import { apiErrorType } from "./apiError.ts"
import { type Ids, makeIds } from "./ids.ts"
import * as Json from "./json.ts"
import { pickSteps } from "./script.ts"
import { type Millis, millis, SimulatedCli, toMillis } from "./simulatedCli.ts"
import { Cell, End, type Fiber, Mailbox, never, sleep, take, type Task, wait } from "./tasks.ts"

type JsonObject = Json.JsonObject

// ---------------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------------

/**
 * What differs between the CLI versions the simulator speaks (docs/protocol/claude-stream-json.md §5, §10, and the recorded 2.1.197
 * transcripts). 2.1.197:
 *
 * - sends no `command_lifecycle`, no `system/session_state_changed`, no `user_message_uuid(s)` anywhere, no
 *   capabilities in `system/init`, no timestamps on `assistant` frames, no `api_message_id` on stream events, no
 *   `tool_result_meta` on tool results, no `is_api_error_message` / `api_error_*` on API errors, and no
 *   `result_index` / `queued_turn_count` on results;
 * - replays the user message only when the turn writes its first `assistant` message (or at an interrupt);
 * - answers `initialize` with only `commands, agents, output_style, available_output_styles, models, account,
 *   pid`, `interrupt` and `set_model` without a payload (`set_model` after replaying a `<local-command-stdout>`
 *   line), and unsupported requests without an `error_code`;
 * - ends an interrupted stream without `aborted: true` and without the closing stream events, and an API error
 *   with `terminal_reason: "completed"`.
 */
interface Profile {
  readonly legacy: boolean
}

/** 2.1.197 and older behave like 2.1.197; anything newer like 2.1.332. */
const profileOf = (version: string): Profile => ({ legacy: compareVersions(version, "2.1.197") <= 0 })

const compareVersions = (a: string, b: string): number => {
  const pa = a.split(".").map((part) => Number.parseInt(part, 10))
  const pb = b.split(".").map((part) => Number.parseInt(part, 10))
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = Number.isFinite(pa[i]) ? pa[i] : 0
    const y = Number.isFinite(pb[i]) ? pb[i] : 0
    if (x !== y) return x - y
  }
  return 0
}

type Termination =
  | { readonly _tag: "Exit"; readonly code: number; readonly stderr: string }
  | { readonly _tag: "Hang" }

type HostAnswer =
  | { readonly _tag: "Success"; readonly response: JsonObject }
  | { readonly _tag: "Failure"; readonly error: string }

type HookDecision = { readonly _tag: "Allow" } | { readonly _tag: "Ask" } | {
  readonly _tag: "Deny"
  readonly reason: string
}

type PermissionDecision =
  | { readonly _tag: "Allow"; readonly input: JsonObject; readonly source: string }
  | { readonly _tag: "Deny"; readonly message: string; readonly meta: JsonObject }
  | { readonly _tag: "DenyInterrupt"; readonly message: string }

interface HookMatcher {
  readonly matcher: string | undefined
  readonly callbackIds: ReadonlyArray<string>
}

interface UserInput {
  readonly uuid: string | undefined
  readonly message: JsonObject
  readonly prompt: string
  readonly shouldQuery: boolean
}

interface AbortRequest {
  readonly requestId: string
  readonly cancelQueued: boolean
}

interface OpenMessage {
  readonly id: string
  readonly requestId: string
  readonly first: boolean
  index: number
  /** The text block being streamed, while it streams: its chunks, and how many are out. */
  streaming: { readonly chunks: ReadonlyArray<MockClaude.Chunk>; sent: number } | undefined
  blockOpen: boolean
  stopped: boolean
}

interface ToolCall {
  readonly id: string
  readonly name: string
  input: JsonObject
  running: boolean
}

interface TurnRun {
  readonly input: UserInput
  readonly startedAt: number
  readonly denials: Array<JsonObject>
  fiber: Fiber<AbortRequest | undefined> | undefined
  replayed: boolean
  message: OpenMessage | undefined
  messages: number
  tool: ToolCall | undefined
  pending: { readonly requestId: string; readonly subtype: string; readonly rpc?: McpCall | undefined } | undefined
  /** The input of the turn's `StructuredOutput` call: the turn ends with it. */
  structured: { readonly value: unknown } | undefined
  inputTokens: number
  outputTokens: number
  lastText: string
  finished: boolean
  abortRequest: AbortRequest | undefined
}

/** A JSON-RPC request to one of the host's in-process MCP servers. */
interface McpCall {
  readonly server: string
  readonly id: number
}

interface ModelUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUSD: number
  readonly contextWindow: number
  readonly maxOutputTokens: number
}

interface ResultSpec {
  readonly structuredOutput?: unknown
  readonly subtype:
    | "success"
    | "error_during_execution"
    | "error_max_turns"
    | "error_max_budget_usd"
    | "error_max_structured_output_retries"
  readonly isError: boolean
  readonly result?: string | undefined
  readonly errors?: ReadonlyArray<string> | undefined
  readonly terminalReason?: string | undefined
  readonly stopReason: string | null
  readonly apiErrorStatus?: number | undefined
  readonly numTurns: number
}

interface Launch {
  readonly replay: boolean
  readonly partials: boolean
  readonly permissionPrompt: boolean
  readonly sessionState: boolean
  readonly sessionId: string | undefined
  readonly resume: string | undefined
  readonly model: string | undefined
  readonly permissionMode: string | undefined
  readonly maxTurns: number | undefined
  readonly maxBudgetUsd: number | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// The simulated process
// ---------------------------------------------------------------------------------------------------------------

/** Starts the simulated CLI of `script`. */
export const make = (script: MockClaude.Script): Simulator.Factory<MockClaude.Fault> => (launch, now) =>
  new ClaudeCli(script, launch, now)

class ClaudeCli extends SimulatedCli<MockClaude.Fault> {
  private readonly script: MockClaude.Script
  private readonly timing: Millis<MockClaude.Timing>
  private readonly profile: Profile
  private readonly launch: Launch
  private readonly pid: number
  private readonly ids: Ids
  private readonly sessionId: string
  private readonly cwd: string
  private readonly defaultModel: string
  private readonly turns = new Mailbox<UserInput>()

  private model: string
  private permissionMode: string
  private hooks: Readonly<Record<string, ReadonlyArray<HookMatcher>>> = {}
  private lifecycleOn: boolean
  private receipt: number
  private readonly unanswered = new Set<string>()
  /** Control subtypes answered with an error (the `Refuse` fault), with the error's text. */
  private readonly refused = new Map<string, string>()
  /** The MCP servers added at run time (`mcp_set_servers`), which the next one replaces. */
  private readonly dynamicMcp = new Set<string>()
  private ignoreInterrupts = false
  private ignoreSigterm = false
  private idle = true
  private totalCost = 0
  private readonly usageByModel: Record<string, ModelUsage> = {}
  private lastResultIsError = false
  private results = 0
  private readonly consumed = new Set<number>()
  private readonly pending = new Map<string, Cell<HostAnswer>>()
  private run: TurnRun | undefined = undefined
  private queued: Array<UserInput> = []
  /** The host's in-process MCP servers (`initialize.sdkMcpServers`): their tools, and the next JSON-RPC id. */
  private readonly mcp = new Map<string, { tools: ReadonlyArray<string>; nextId: number }>()

  constructor(script: MockClaude.Script, launch: Simulator.Launch, now: number) {
    super(now)
    const options = script.options
    this.script = script
    this.timing = toMillis(options.timing)
    this.profile = profileOf(options.version)
    this.launch = parseLaunch(launch)
    this.pid = launch.pid
    this.ids = makeIds(launch.pid)
    // `--resume <id>` continues that session under its own id (a new one only with `--fork-session --session-id`).
    this.sessionId = this.launch.sessionId ?? this.launch.resume ?? this.ids.uuid()
    this.cwd = launch.cwd
    this.defaultModel = this.launch.model ?? options.model
    this.model = this.defaultModel
    this.permissionMode = this.launch.permissionMode ?? "default"
    this.lifecycleOn = !this.profile.legacy
    this.receipt = this.timing.receipt
    // A process that ignores SIGTERM does so from its first instant; the other faults apply once it has started.
    this.ignoreSigterm = options.faults.some((fault) => fault._tag === "IgnoreSigterm")
    this.sched.fork(this.started())
  }

  // --- inputs ----------------------------------------------------------------------------------------------

  signal(now: number, signal: Simulator.Signal): void {
    if (this.ended === "exited") return
    if (signal === "SIGTERM" && this.ignoreSigterm) return
    this.sched.advance(now)
    // Killed: what it had not printed yet is lost.
    this.sched.discard()
    this.exit({ _tag: "Signaled", signal })
  }

  // --- the process -----------------------------------------------------------------------------------------

  private *started(): Task {
    yield* sleep(this.timing.startup)
    for (const fault of this.script.options.faults) this.applyFault(fault)
    this.sched.fork(this.reader())
    this.sched.fork(this.runner())
  }

  private terminate(termination: Termination): void {
    if (termination._tag === "Hang") {
      this.ended = "hung"
      this.sched.halt()
      return
    }
    if (termination.stderr.length > 0) this.sched.emit({ _tag: "Stderr", text: termination.stderr })
    this.exit({ _tag: "Exited", code: termination.code })
  }

  private *reader(): Task {
    while (true) {
      const line = yield* take(this.stdin)
      if (line === End) return this.sched.end(this.turns)
      if (line.trim().length > 0) yield* this.handleLine(line)
    }
  }

  private *runner(): Task {
    while (true) {
      const next = yield* take(this.turns)
      if (next === End) break
      this.queued = this.queued.filter((input) => input !== next)
      yield* this.runTurn(next)
    }
    // stdin is closed and every queued turn has run
    yield* sleep(this.timing.exit)
    this.terminate({ _tag: "Exit", code: this.lastResultIsError ? 1 : 0, stderr: "" })
  }

  // --- emitting --------------------------------------------------------------------------------------------

  private print(line: string): void {
    this.sched.emit({ _tag: "Stdout", line })
  }

  private emit(frame: ClaudeProtocol.Frame): void {
    this.print(ClaudeWire.writeFrame(frame))
  }

  private timestamp(): string {
    return new Date(this.sched.now).toISOString()
  }

  private *turnEmit(frame: ClaudeProtocol.Frame): Task {
    if (this.stall !== undefined) yield* this.gate()
    this.emit(frame)
  }

  private sessionState(value: "running" | "requires_action" | "idle"): void {
    if (!this.launch.sessionState || this.profile.legacy) return
    this.emit({
      type: "system",
      subtype: "session_state_changed",
      state: value,
      sdk_host_only: true,
      uuid: this.ids.uuid(),
      session_id: this.sessionId
    })
  }

  private lifecycle(commandUuid: string | undefined, value: "queued" | "started" | "completed" | "cancelled"): void {
    if (commandUuid === undefined || !this.lifecycleOn) return
    this.emit({
      type: "command_lifecycle",
      command_uuid: commandUuid,
      state: value,
      uuid: this.ids.uuid(),
      session_id: this.sessionId
    })
  }

  // The answer to `initialize` also carries the CLI's pending-request lists (2.1.332).
  private controlSuccess(requestId: string, response?: JsonObject, initialize = false): void {
    this.emit({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: requestId,
        ...(response === undefined ? {} : { response }),
        ...(initialize && !this.profile.legacy
          ? { pending_permission_requests: [], pending_user_dialog_requests: [] }
          : {})
      }
    })
  }

  private controlError(requestId: string, error: string, code: string): void {
    this.emit({
      type: "control_response",
      response: this.profile.legacy
        ? { subtype: "error", request_id: requestId, error }
        : { subtype: "error", request_id: requestId, error, error_code: code }
    })
  }

  private uuidFields(run: TurnRun): JsonObject {
    return run.input.uuid === undefined || this.profile.legacy
      ? {}
      : { user_message_uuid: run.input.uuid, user_message_uuids: [run.input.uuid] }
  }

  /** The prompt's uuid on `system/init` and `system/status` (2.1.332, and only when the prompt has one). */
  private messageUuids(input: UserInput): JsonObject {
    return input.uuid === undefined || this.profile.legacy ? {} : { user_message_uuids: [input.uuid] }
  }

  private userText(content: string): void {
    this.emit({
      type: "user",
      message: { role: "user", content: [{ type: "text", text: content }] },
      parent_tool_use_id: null,
      session_id: this.sessionId,
      uuid: this.ids.uuid(),
      timestamp: this.timestamp()
    })
  }

  private streamFrame(
    message: OpenMessage,
    event: ClaudeProtocol.StreamEvent,
    extra: JsonObject | undefined
  ): ClaudeProtocol.Frame {
    // Built field by field, not spread: a long turn builds one per delta.
    const frame: Record<string, unknown> = {
      type: "stream_event",
      event,
      session_id: this.sessionId,
      parent_tool_use_id: null,
      uuid: this.ids.uuid()
    }
    if (extra !== undefined) Object.assign(frame, extra)
    if (!this.profile.legacy) frame.api_message_id = message.id
    return frame as ClaudeProtocol.Frame
  }

  /**
   * The `content_block_delta` lines of one text block, the hot path of a long stream: the codec encodes the frame
   * once, with marks where the text and the uuid go, and each delta fills them in. `JSON.stringify` writes an
   * object as its values' encodings in order, so the lines are byte for byte what encoding each frame would give
   * (the tests hold it to that); the encoder is used per frame should a mark show up elsewhere in the line.
   */
  private textDeltas(message: OpenMessage, index: number): (text: string, uuid: string) => string {
    const encode = (text: string, uuid: string) => {
      const frame = this.streamFrame(message, {
        type: "content_block_delta",
        index,
        delta: { type: "text_delta", text }
      }, undefined)
      ;(frame as { uuid: string }).uuid = uuid
      return ClaudeWire.writeFrame(frame)
    }
    const template = encode(textMark, uuidMark)
    const at = template.indexOf(textMark)
    const uuidAt = template.indexOf(uuidMark)
    if (
      at < 0 || uuidAt < at || template.indexOf(textMark, at + 1) >= 0 || template.indexOf(uuidMark, uuidAt + 1) >= 0
    ) {
      return encode
    }
    const head = template.slice(0, at)
    const middle = template.slice(at + textMark.length, uuidAt)
    const tail = template.slice(uuidAt + uuidMark.length)
    return (text, uuid) => head + Json.stringBody(text) + middle + uuid + tail
  }

  /** A stream event of `message` (with `--include-partial-messages`), held back while the turn is stalled. */
  private *streamEvent(message: OpenMessage, event: ClaudeProtocol.StreamEvent, extra?: JsonObject): Task {
    if (!this.launch.partials) return
    if (this.stall !== undefined) yield* this.gate()
    this.emit(this.streamFrame(message, event, extra))
  }

  /** The closing events an abort writes: they go out even while the turn is stalled. */
  private closingEvent(message: OpenMessage, event: ClaudeProtocol.StreamEvent): void {
    if (this.launch.partials) this.emit(this.streamFrame(message, event, undefined))
  }

  private assistantFrame(
    run: TurnRun,
    message: OpenMessage,
    content: ReadonlyArray<ClaudeProtocol.ContentBlock>,
    extra: JsonObject = {}
  ): ClaudeProtocol.Frame {
    return {
      type: "assistant",
      message: {
        id: message.id,
        type: "message",
        role: "assistant",
        model: this.model,
        content,
        stop_reason: null,
        stop_sequence: null,
        usage: usageOf(inputTokensPerMessage, 1),
        context_management: null
      },
      parent_tool_use_id: null,
      session_id: this.sessionId,
      uuid: this.ids.uuid(),
      ...(this.profile.legacy ? {} : { timestamp: this.timestamp() }),
      request_id: message.requestId,
      ...extra,
      ...(message.first ? this.uuidFields(run) : {})
    }
  }

  /** The replay of the prompt (with `--replay-user-messages`), once per turn. */
  private *replay(run: TurnRun, gated = true): Task {
    if (run.replayed || !this.launch.replay) return
    run.replayed = true
    const frame: ClaudeProtocol.Frame = {
      type: "user",
      message: run.input.message as ClaudeProtocol.UserMessage,
      session_id: this.sessionId,
      parent_tool_use_id: null,
      uuid: run.input.uuid ?? this.ids.uuid(),
      timestamp: this.timestamp(),
      isReplay: true
    }
    if (gated) yield* this.turnEmit(frame)
    else this.emit(frame)
  }

  private resultFrame(run: TurnRun, result: ResultSpec): ClaudeProtocol.Frame {
    const now = this.sched.now
    const index = this.results++
    const legacy = this.profile.legacy
    return {
      type: "result",
      subtype: result.subtype,
      is_error: result.isError,
      duration_ms: now - run.startedAt,
      duration_api_ms: run.messages === 0 ? 0 : now - run.startedAt,
      num_turns: result.numTurns,
      ...(result.subtype === "success" ? { result: result.result ?? "" } : { errors: result.errors ?? [] }),
      stop_reason: result.stopReason,
      session_id: this.sessionId,
      total_cost_usd: this.totalCost,
      usage: { ...usageOf(run.inputTokens, run.outputTokens), service_tier: "standard" },
      modelUsage: this.usageByModel,
      permission_denials: run.denials as Array<ClaudeProtocol.PermissionDenial>,
      ...(result.terminalReason === undefined ? {} : { terminal_reason: result.terminalReason }),
      api_error_status: result.apiErrorStatus ?? null,
      uuid: this.ids.uuid(),
      ...this.uuidFields(run),
      ...(legacy ? {} : { queued_turn_count: this.queued.length, result_index: index }),
      ...(result.structuredOutput === undefined ? {} : { structured_output: result.structuredOutput })
    }
  }

  /** Ends the turn: the result, then the lifecycle state. Past this point an interrupt no longer aborts it. */
  private *finish(run: TurnRun, result: ResultSpec, outcome: "completed" | "cancelled"): Task {
    if (this.stall !== undefined) yield* this.gate()
    run.finished = true
    this.emit(this.resultFrame(run, result))
    this.lastResultIsError = result.isError
    this.lifecycle(run.input.uuid, outcome)
  }

  // --- requests to the host --------------------------------------------------------------------------------

  private *ask(run: TurnRun, request: JsonObject, afterSend: () => Task, rpc?: McpCall): Task<HostAnswer> {
    const requestId = this.ids.uuid()
    const answer = new Cell<HostAnswer>()
    this.pending.set(requestId, answer)
    run.pending = { requestId, subtype: String(request.subtype), rpc }
    yield* this.turnEmit({ type: "control_request", request_id: requestId, request } as ClaudeProtocol.Frame)
    yield* afterSend()
    const result = yield* wait(answer)
    run.pending = undefined
    return result
  }

  private *runHooks(
    run: TurnRun,
    event: string,
    fields: JsonObject,
    toolName: string | undefined,
    toolUseId: string
  ): Task<Array<HostAnswer>> {
    const answers: Array<HostAnswer> = []
    for (const matcher of this.hooks[event] ?? []) {
      if (toolName !== undefined && !matchesTool(matcher.matcher, toolName)) continue
      for (const callbackId of matcher.callbackIds) {
        answers.push(
          yield* this.ask(run, {
            subtype: "hook_callback",
            callback_id: callbackId,
            input: {
              session_id: this.sessionId,
              transcript_path: `/home/user/.claude/projects/mock/${this.sessionId}.jsonl`,
              cwd: this.cwd,
              permission_mode: this.permissionMode,
              hook_event_name: event,
              ...fields
            },
            tool_use_id: toolUseId
          }, noop)
        )
      }
    }
    return answers
  }

  /** A JSON-RPC message to one of the host's MCP servers, outside any turn (the MCP handshake). */
  private *mcpRequest(server: string, message: JsonObject): Task<HostAnswer> {
    const requestId = this.ids.uuid()
    const answer = new Cell<HostAnswer>()
    this.pending.set(requestId, answer)
    this.emit({
      type: "control_request",
      request_id: requestId,
      request: { subtype: "mcp_message", server_name: server, message }
    } as ClaudeProtocol.Frame)
    return yield* wait(answer)
  }

  /**
   * Connects to the host's in-process MCP servers as the CLI's MCP client does (`initialize`,
   * `notifications/initialized`, `tools/list`, each over `mcp_message`), then answers `initialize`.
   */
  private *connectMcp(servers: ReadonlyArray<string>, answer: () => void): Task {
    for (const server of servers) {
      const state = { tools: [] as ReadonlyArray<string>, nextId: 0 }
      this.mcp.set(server, state)
      yield* this.mcpRequest(server, {
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: {},
          clientInfo: { name: "claude-code", version: this.script.options.version }
        },
        jsonrpc: "2.0",
        id: state.nextId++
      })
      yield* this.mcpRequest(server, { jsonrpc: "2.0", method: "notifications/initialized" })
      const listed = yield* this.mcpRequest(server, { method: "tools/list", jsonrpc: "2.0", id: state.nextId++ })
      const result = listed._tag === "Success" ? mcpResult(listed.response) : undefined
      const tools = Json.isRecord(result) ? result.tools : undefined
      state.tools = Array.isArray(tools)
        ? tools.flatMap((tool) => Json.isRecord(tool) && typeof tool.name === "string" ? [tool.name] : [])
        : []
    }
    answer()
  }

  // --- the model -------------------------------------------------------------------------------------------

  private pickSteps(prompt: string): ReadonlyArray<MockClaude.Step> {
    return pickSteps(this.script.turns, this.script.otherwise, this.consumed, prompt)
  }

  private addUsage(run: TurnRun, input: number, output: number, cost: number): void {
    run.inputTokens += input
    run.outputTokens += output
    this.totalCost += cost
    const previous = this.usageByModel[this.model]
    this.usageByModel[this.model] = {
      inputTokens: (previous?.inputTokens ?? 0) + input,
      outputTokens: (previous?.outputTokens ?? 0) + output,
      costUSD: (previous?.costUSD ?? 0) + cost,
      contextWindow: 1_000_000,
      maxOutputTokens: 128_000
    }
  }

  // Opens every API request, including one that fails (the recorded v332-apiError turn carries the uuids too).
  private *requesting(run: TurnRun): Task {
    if (!this.launch.partials) return
    yield* this.turnEmit({
      type: "system",
      subtype: "status",
      status: "requesting",
      session_id: this.sessionId,
      uuid: this.ids.uuid(),
      ...this.messageUuids(run.input)
    })
  }

  /** One API round trip: the request, then the first streamed event. */
  private *beginRequest(run: TurnRun): Task<OpenMessage> {
    yield* this.requesting(run)
    yield* sleep(this.timing.firstToken)
    if (!this.profile.legacy) yield* this.replay(run)
    const message: OpenMessage = {
      id: `msg_mock${this.ids.hex(20)}`,
      requestId: `req_mock${this.ids.hex(20)}`,
      index: 0,
      streaming: undefined,
      blockOpen: false,
      stopped: false,
      first: run.messages === 0
    }
    run.message = message
    run.messages++
    this.addUsage(run, inputTokensPerMessage, 0, this.script.options.costPerMessage)
    yield* this.streamEvent(message, {
      type: "message_start",
      message: {
        id: message.id,
        type: "message",
        role: "assistant",
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usageOf(inputTokensPerMessage, 1)
      }
    }, { ttft_ms: this.timing.firstToken, ...(message.first ? this.uuidFields(run) : {}) })
    return message
  }

  /** The API message the next block goes into: the current one, or a new request after a tool result. */
  private open(run: TurnRun): Task<OpenMessage> {
    const message = run.message
    return message === undefined || message.stopped ? this.beginRequest(run) : done(message)
  }

  private *endMessage(message: OpenMessage, stopReason: string | null): Task {
    if (message.stopped) return
    message.stopped = true
    yield* this.streamEvent(message, {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: 1 }
    })
    yield* this.streamEvent(message, { type: "message_stop" })
  }

  private *streamText(run: TurnRun, message: OpenMessage, chunks: ReadonlyArray<MockClaude.Chunk>): Task {
    const index = message.index++
    message.blockOpen = true
    // The text so far is joined when it is needed (the block's end, an interrupt), not grown chunk by chunk.
    const streaming = { chunks, sent: 0 }
    message.streaming = streaming
    yield* this.streamEvent(message, { type: "content_block_start", index, content_block: { type: "text", text: "" } })
    const delta = this.launch.partials ? this.textDeltas(message, index) : undefined
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i]
      // With no wait between chunks, still a yield point every 64 deltas: the shell hands out what came before and
      // input (an interrupt) gets in, without a trip through the scheduler for every frame of a long stream.
      const pause = chunk.delay === undefined ? (i === 0 ? 0 : this.timing.chunk) : millis(chunk.delay)
      if (pause > 0 || (i & 63) === 0) yield pause
      if (this.stall !== undefined) yield* this.gate()
      streaming.sent = i + 1
      if (delta !== undefined) this.print(delta(chunk.text, this.ids.uuid()))
    }
    const full = textSent(streaming)
    message.streaming = undefined
    if (this.profile.legacy) yield* this.replay(run)
    yield* this.turnEmit(this.assistantFrame(run, message, [{ type: "text", text: full }]))
    yield* this.streamEvent(message, { type: "content_block_stop", index })
    message.blockOpen = false
    run.lastText = full
    this.addUsage(run, 0, Math.max(1, chunks.length), 0)
  }

  private toolResultFrame(
    call: ToolCall,
    content: string | ReadonlyArray<unknown>,
    isError: boolean,
    toolUseResult: unknown,
    meta: JsonObject
  ): ClaudeProtocol.Frame {
    return {
      type: "user",
      message: {
        role: "user",
        content: [
          typeof content === "string"
            ? { tool_use_id: call.id, type: "tool_result", content, is_error: isError }
            : { tool_use_id: call.id, type: "tool_result", content }
        ]
      },
      parent_tool_use_id: null,
      session_id: this.sessionId,
      uuid: this.ids.uuid(),
      timestamp: this.timestamp(),
      tool_use_result: toolUseResult,
      ...(this.profile.legacy ? {} : { tool_result_meta: [{ id: call.id, ...meta }] })
    }
  }

  private *preToolUse(run: TurnRun, call: ToolCall): Task<HookDecision> {
    const answers = yield* this.runHooks(
      run,
      "PreToolUse",
      { tool_name: call.name, tool_input: call.input, tool_use_id: call.id },
      call.name,
      call.id
    )
    let decision: HookDecision = { _tag: "Ask" }
    for (const answer of answers) {
      if (answer._tag !== "Success") continue
      const output = answer.response.hookSpecificOutput
      if (Json.isRecord(output) && output.permissionDecision === "deny") {
        return { _tag: "Deny", reason: Json.stringOr(output.permissionDecisionReason, "Blocked by hook") }
      }
      if (answer.response.decision === "block") {
        return { _tag: "Deny", reason: Json.stringOr(answer.response.reason, "Blocked by hook") }
      }
      if (Json.isRecord(output) && output.permissionDecision === "allow") decision = { _tag: "Allow" }
    }
    return decision
  }

  /** A tool call; undefined when it ended the turn (deny with interrupt). */
  private *useTool(
    run: TurnRun,
    message: OpenMessage,
    step: MockClaude.ToolUse
  ): Task<{ readonly output: string; readonly isError: boolean } | undefined> {
    const call: ToolCall = {
      id: step.id ?? `toolu_mock${this.ids.hex(20)}`,
      name: step.name,
      input: step.input,
      running: false
    }
    run.tool = call
    const index = message.index++
    yield* this.streamEvent(message, {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: call.id, name: call.name, input: {} }
    })
    const json = JSON.stringify(call.input)
    const half = Math.ceil(json.length / 2)
    for (const piece of [json.slice(0, half), json.slice(half)]) {
      yield* this.streamEvent(message, {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: piece }
      })
    }
    if (this.profile.legacy) yield* this.replay(run)
    yield* this.turnEmit(
      this.assistantFrame(run, message, [{ type: "tool_use", id: call.id, name: call.name, input: call.input }])
    )
    yield* this.streamEvent(message, { type: "content_block_stop", index })
    message.stopped = true
    yield* this.streamEvent(message, {
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 1 }
    })
    const messageStop = () => this.streamEvent(message, { type: "message_stop" })
    this.addUsage(run, 0, 1, 0)

    const hook = yield* this.preToolUse(run, call)
    let decision: PermissionDecision
    if (hook._tag === "Allow") {
      yield* messageStop()
      decision = { _tag: "Allow", input: call.input, source: "hook" }
    } else if (hook._tag === "Deny") {
      yield* messageStop()
      decision = { _tag: "Deny", message: hook.reason, meta: rejectMeta("hook") }
    } else if (!step.permission || this.permissionMode === "bypassPermissions") {
      yield* messageStop()
      decision = { _tag: "Allow", input: call.input, source: "config" }
    } else if (!this.launch.permissionPrompt) {
      // Nobody can be asked: the CLI denies on its own (pitfall 14). 2.1.332 says so, with no reason type (no rule or
      // mode denied it); 2.1.197 says nothing until the result's permission_denials.
      yield* messageStop()
      const reason = `Claude requested permissions to use ${call.name}, but you haven't granted it yet.`
      if (!this.profile.legacy) {
        yield* this.turnEmit({
          type: "system",
          subtype: "permission_denied",
          tool_name: call.name,
          tool_use_id: call.id,
          message: reason,
          session_id: this.sessionId,
          uuid: this.ids.uuid()
        })
      }
      decision = { _tag: "Deny", message: reason, meta: rejectMeta("config") }
    } else {
      this.sessionState("requires_action")
      const answer = yield* this.ask(run, {
        subtype: "can_use_tool",
        tool_name: call.name,
        display_name: call.name,
        input: call.input,
        description: Json.stringOr(call.input.description, call.name),
        permission_suggestions: [{
          type: "addRules",
          rules: [
            step.mcp === undefined
              ? { toolName: call.name, ruleContent: Json.stringOr(call.input.command, call.name) }
              : { toolName: call.name }
          ],
          behavior: "allow",
          destination: "localSettings"
        }],
        ...(step.mcp === undefined ? {} : { mcp_server: { name: step.mcp.server, source: "sdk" } }),
        tool_use_id: call.id
      }, messageStop)
      this.sessionState("running")
      decision = permissionDecision(answer, call)
    }

    switch (decision._tag) {
      case "Allow": {
        call.input = decision.input
        call.running = true
        if (step.mcp !== undefined) return yield* this.callMcp(run, call, step.mcp)
        if (call.name === "StructuredOutput") {
          run.tool = undefined
          run.structured = { value: call.input }
          const output = "Structured output provided successfully"
          yield* this.turnEmit(this.toolResultFrame(call, output, false, output, {
            permission_decision: { decision: "accept", source: decision.source }
          }))
          return { output, isError: false }
        }
        yield* sleep(step.duration === undefined ? this.timing.tool : millis(step.duration))
        const output = typeof step.output === "function" ? step.output(decision.input) : step.output
        const toolResponse = { stdout: output, stderr: "", interrupted: false, isImage: false, noOutputExpected: false }
        yield* this.runHooks(
          run,
          "PostToolUse",
          { tool_name: call.name, tool_input: call.input, tool_response: toolResponse, tool_use_id: call.id },
          call.name,
          call.id
        )
        run.tool = undefined
        yield* this.turnEmit(
          this.toolResultFrame(call, output, step.isError, toolResponse, {
            permission_decision: { decision: "accept", source: decision.source }
          })
        )
        return { output, isError: step.isError }
      }
      case "Deny": {
        run.denials.push(denial(call))
        run.tool = undefined
        yield* this.turnEmit(
          this.toolResultFrame(call, decision.message, true, `Error: ${decision.message}`, decision.meta)
        )
        return { output: decision.message, isError: true }
      }
      case "DenyInterrupt": {
        run.denials.push(denial(call))
        yield* this.turnEmit(
          this.toolResultFrame(call, rejectedText, true, "User rejected tool use", {
            non_execution_kind: "user-rejected"
          })
        )
        if (this.stall !== undefined) yield* this.gate()
        this.userText("[Request interrupted by user for tool use]")
        yield* this.finish(run, abortedTools(run), "cancelled")
        return undefined
      }
    }
  }

  /**
   * A call to a tool of the host's in-process MCP server: `tools/call` over `mcp_message`, and the host's result as
   * the tool result (an `isError` result, or a JSON-RPC error, as an error; seen on 2.1.332).
   */
  private *callMcp(
    run: TurnRun,
    call: ToolCall,
    target: { readonly server: string; readonly tool: string }
  ): Task<{ readonly output: string; readonly isError: boolean }> {
    const state = this.mcp.get(target.server)
    let content: string | ReadonlyArray<unknown>
    let isError: boolean
    if (state === undefined) {
      content = `No such tool available: ${call.name}`
      isError = true
    } else {
      const id = state.nextId++
      const answer = yield* this.ask(
        run,
        {
          subtype: "mcp_message",
          server_name: target.server,
          message: {
            method: "tools/call",
            params: {
              name: target.tool,
              arguments: call.input,
              _meta: { "claudecode/toolUseId": call.id, progressToken: id }
            },
            jsonrpc: "2.0",
            id
          }
        },
        noop,
        { server: target.server, id }
      )
      const response = answer._tag === "Success" ? answer.response.mcp_response : undefined
      const result = answer._tag === "Success" ? mcpResult(answer.response) : undefined
      const error = Json.isRecord(response) && Json.isRecord(response.error) ? response.error : undefined
      if (answer._tag === "Failure") {
        content = answer.error
        isError = true
      } else if (error !== undefined) {
        content = Json.stringOr(error.message, "MCP error")
        isError = true
      } else {
        const blocks = Json.isRecord(result) && Array.isArray(result.content) ? result.content : []
        isError = Json.isRecord(result) && result.isError === true
        content = isError ? Json.textOf(blocks) : blocks
      }
    }
    run.tool = undefined
    const output = typeof content === "string" ? content : Json.textOf(content)
    yield* this.turnEmit(
      this.toolResultFrame(call, content, isError, isError ? `Error: ${output}` : content, {
        permission_decision: { decision: "accept", source: "user_temporary" }
      })
    )
    return { output, isError }
  }

  private *failApi(run: TurnRun, step: MockClaude.ApiError): Task {
    yield* this.requesting(run)
    yield* sleep(step.delay === undefined ? this.timing.firstToken : millis(step.delay))
    yield* this.replay(run)
    const text = `API Error: ${step.status} ${step.message}`
    const legacy = this.profile.legacy
    yield* this.turnEmit({
      type: "assistant",
      message: {
        id: this.ids.uuid(),
        model: "<synthetic>",
        role: "assistant",
        stop_reason: "stop_sequence",
        stop_sequence: "",
        type: "message",
        usage: usageOf(0, 0),
        content: [{ type: "text", text }],
        context_management: null
      },
      parent_tool_use_id: null,
      session_id: this.sessionId,
      uuid: this.ids.uuid(),
      ...(legacy ? {} : { timestamp: this.timestamp() }),
      error: apiErrorKind(step.status),
      request_id: `req_mock${this.ids.hex(20)}`,
      ...(legacy ? {} : {
        is_api_error_message: true,
        api_error_status: step.status,
        api_error_type: apiErrorType(step.status)
      }),
      ...this.uuidFields(run)
    })
    yield* sleep(this.timing.result)
    yield* this.finish(run, {
      subtype: "success",
      isError: true,
      result: text,
      terminalReason: legacy ? "completed" : "api_error",
      stopReason: "stop_sequence",
      apiErrorStatus: step.status,
      numTurns: run.messages + 1
    }, "cancelled")
  }

  // --- faults ----------------------------------------------------------------------------------------------

  protected applyFault(fault: MockClaude.Fault): void {
    switch (fault._tag) {
      case "Crash":
        return this.terminate({ _tag: "Exit", code: fault.code, stderr: fault.stderr })
      case "Hang":
        return this.terminate({ _tag: "Hang" })
      case "Stall":
        return this.stallFor(fault.duration)
      case "Malformed":
      case "Raw":
        return this.print(fault.line)
      case "Oversized": {
        const limit = this.script.options.lineLimit
        const prefix = `{"type":"assistant","message":{"id":"msg_mock${this.ids.hex(20)}","type":"message","content":[`
        this.sched.emit({ _tag: "TooLong", length: fault.length ?? 2 * limit, limit, prefix })
        return
      }
      case "Flood": {
        this.sched.fork(this.flood(fault.count ?? Number.POSITIVE_INFINITY))
        return
      }
      case "SlowReceipt": {
        this.receipt = millis(fault.delay)
        return
      }
      case "NeverAnswer": {
        this.unanswered.add(fault.subtype)
        return
      }
      case "Refuse": {
        this.refused.set(fault.subtype, fault.error)
        return
      }
      case "IgnoreInterrupts": {
        this.ignoreInterrupts = true
        return
      }
      case "DropLifecycle": {
        this.lifecycleOn = false
        return
      }
      case "IgnoreSigterm": {
        this.ignoreSigterm = true
        return
      }
    }
  }

  /** A fault as a step of a turn: a stall pauses the turn here; a crash or hang never returns. */
  private *faultStep(fault: MockClaude.Fault): Task {
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
      case "Raw":
      case "Oversized": {
        if (this.stall !== undefined) yield* this.gate()
        return this.applyFault(fault)
      }
      default:
        return this.applyFault(fault)
    }
  }

  /** Stream events without end (or `count` of them), outside any turn, as fast as the shell takes them. */
  private *flood(count: number): Task {
    for (let i = 0; i < count; i++) {
      this.emit({
        type: "stream_event",
        event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `flood ${i}` } },
        session_id: this.sessionId,
        parent_tool_use_id: null,
        uuid: this.ids.uuid()
      })
      yield 0
    }
  }

  // --- turns -----------------------------------------------------------------------------------------------

  private *turnBody(run: TurnRun): Task<AbortRequest | undefined> {
    const input = run.input
    yield* sleep(this.timing.start)
    this.lifecycle(input.uuid, "started")
    yield* this.runHooks(run, "UserPromptSubmit", { prompt: input.prompt }, undefined, this.ids.uuid())
    yield* sleep(this.timing.init)
    const legacy = this.profile.legacy
    yield* this.turnEmit({
      type: "system",
      subtype: "init",
      cwd: this.cwd,
      session_id: this.sessionId,
      tools: [
        ...builtinTools,
        ...[...this.mcp].flatMap(([server, state]) => state.tools.map((tool) => `mcp__${server}__${tool}`))
      ],
      mcp_servers: [...this.mcp.keys()].map((name) => ({ name, status: "connected" })),
      model: this.model,
      permissionMode: this.permissionMode,
      slash_commands: ["compact", "context", "cost", "init", "review"],
      apiKeySource: "ANTHROPIC_API_KEY",
      claude_code_version: this.script.options.version,
      output_style: "default",
      agents: ["general-purpose", "Explore", "Plan"],
      skills: [],
      plugins: [],
      ...(legacy ? {} : {
        capabilities: this.lifecycleOn ? ["interrupt_receipt_v1", "msg_lifecycle_v1"] : ["interrupt_receipt_v1"]
      }),
      uuid: this.ids.uuid(),
      ...(legacy ? {} : { original_cwd: this.cwd, additional_directories: [] }),
      ...this.messageUuids(input)
    })
    if (!input.shouldQuery) {
      yield* this.replay(run)
      yield* this.finish(
        run,
        { subtype: "success", isError: false, result: "", stopReason: null, numTurns: 0 },
        "completed"
      )
      return undefined
    }

    let lastTool: { readonly output: string; readonly isError: boolean } | undefined
    for (const step of this.pickSteps(input.prompt)) {
      switch (step._tag) {
        case "Text": {
          yield* this.streamText(run, yield* this.open(run), step.chunks)
          lastTool = undefined
          break
        }
        case "ToolUse": {
          const outcome = yield* this.useTool(run, yield* this.open(run), step)
          if (outcome === undefined) return undefined
          lastTool = outcome
          if (run.structured !== undefined) return yield* this.finishStructured(run)
          break
        }
        case "StructuredOutputRetries": {
          if (run.message !== undefined) yield* this.endMessage(run.message, "tool_use")
          yield* sleep(this.timing.result)
          yield* this.finish(run, {
            subtype: "error_max_structured_output_retries",
            isError: true,
            errors: [
              `Failed to provide valid structured output after 5 attempts — last StructuredOutput error: ${step.error}`
            ],
            terminalReason: "structured_output_retry_exhausted",
            stopReason: "tool_use",
            numTurns: run.messages + 1
          }, "completed")
          return undefined
        }
        case "ApiError": {
          if (run.message !== undefined) yield* this.endMessage(run.message, "end_turn")
          yield* this.failApi(run, step)
          return undefined
        }
        case "MaxTurns":
        case "MaxBudget": {
          const stopReason = lastTool === undefined ? "end_turn" : "tool_use"
          if (run.message !== undefined) yield* this.endMessage(run.message, stopReason)
          yield* sleep(this.timing.result)
          yield* this.finish(
            run,
            step._tag === "MaxTurns"
              ? {
                subtype: "error_max_turns",
                isError: true,
                errors: [`Reached maximum number of turns (${step.limit ?? this.launch.maxTurns ?? 1})`],
                terminalReason: "max_turns",
                stopReason,
                numTurns: run.messages + 1
              }
              : {
                subtype: "error_max_budget_usd",
                isError: true,
                errors: [`Reached maximum budget ($${step.limitUsd ?? this.launch.maxBudgetUsd ?? this.totalCost})`],
                terminalReason: "budget_exhausted",
                stopReason,
                numTurns: run.messages
              },
            "cancelled"
          )
          return undefined
        }
        default: {
          yield* this.faultStep(step)
        }
      }
    }
    // The model always answers after a tool result; a turn with no steps still makes one (empty) request.
    if (run.message === undefined || run.message.stopped) {
      const next = yield* this.open(run)
      if (lastTool !== undefined) {
        yield* this.streamText(run, next, [{
          text: `Tool said${lastTool.isError ? " (error)" : ""}: ${lastTool.output}`
        }])
      }
    }
    if (run.message !== undefined) yield* this.endMessage(run.message, "end_turn")
    yield* sleep(this.timing.result)
    yield* this.runHooks(run, "Stop", { stop_hook_active: false }, undefined, this.ids.uuid())
    yield* this.finish(run, {
      subtype: "success",
      isError: false,
      result: run.lastText,
      terminalReason: "completed",
      stopReason: "end_turn",
      numTurns: run.messages
    }, "completed")
    return undefined
  }

  /** The StructuredOutput tool ends the turn: the result carries the value, and its JSON as the result text. */
  private *finishStructured(run: TurnRun): Task<undefined> {
    const value = run.structured!.value
    yield* sleep(this.timing.result)
    yield* this.finish(run, {
      subtype: "success",
      isError: false,
      result: JSON.stringify(value),
      terminalReason: "completed",
      stopReason: "tool_use",
      numTurns: run.messages,
      structuredOutput: value
    }, "completed")
    return undefined
  }

  /** The frames of a turn cut short by an interrupt, in the order the real CLI writes them (§6). */
  private *abortTurn(run: TurnRun, request: AbortRequest): Task {
    const legacy = this.profile.legacy
    const pending = run.pending
    if (pending?.rpc !== undefined) {
      // An MCP call is cancelled with a JSON-RPC notification of its own, not a control_cancel_request (2.1.332).
      this.emit({
        type: "control_request",
        request_id: this.ids.uuid(),
        request: {
          subtype: "mcp_message",
          server_name: pending.rpc.server,
          message: {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: { requestId: pending.rpc.id, reason: "AbortError: remote-cancel" }
          }
        }
      } as ClaudeProtocol.Frame)
    } else if (pending !== undefined) {
      this.emit({ type: "control_cancel_request", request_id: pending.requestId })
    }
    yield* sleep(this.timing.interrupt)
    if (request.cancelQueued) this.dropQueued()
    this.controlSuccess(request.requestId, legacy ? undefined : { still_queued: this.stillQueued() })
    const call = run.tool
    if (call !== undefined) {
      if (pending?.subtype === "can_use_tool") {
        run.denials.push(denial(call))
        this.sessionState("running")
      }
      this.emit(
        this.toolResultFrame(
          call,
          call.running ? `${rejectedText} ${stoppedWhileRunningText}` : rejectedText,
          true,
          "User rejected tool use",
          { non_execution_kind: "user-rejected" }
        )
      )
      this.userText("[Request interrupted by user for tool use]")
      this.emit(this.resultFrame(run, abortedTools(run)))
    } else {
      yield* this.replay(run, false)
      const message = run.message
      if (message !== undefined && message.streaming !== undefined) {
        this.emit(
          this.assistantFrame(
            run,
            message,
            [{ type: "text", text: textSent(message.streaming) }],
            legacy ? {} : { aborted: true }
          )
        )
      }
      this.userText("[Request interrupted by user]")
      if (!legacy && message !== undefined && !message.stopped) {
        if (message.blockOpen) this.closingEvent(message, { type: "content_block_stop", index: message.index - 1 })
        this.closingEvent(message, {
          type: "message_delta",
          delta: { stop_reason: null, stop_sequence: null },
          usage: { output_tokens: 0 }
        })
        this.closingEvent(message, { type: "message_stop" })
      }
      if (message !== undefined) message.stopped = true
      this.emit(this.resultFrame(run, {
        subtype: "error_during_execution",
        isError: true,
        errors: [diagnostic("null")],
        terminalReason: "aborted_streaming",
        stopReason: null,
        numTurns: run.messages + 1
      }))
    }
    this.lastResultIsError = true
    this.lifecycle(run.input.uuid, "cancelled")
  }

  private *runTurn(input: UserInput): Task {
    const run: TurnRun = {
      input,
      startedAt: this.sched.now,
      fiber: undefined,
      replayed: false,
      message: undefined,
      messages: 0,
      tool: undefined,
      pending: undefined,
      denials: [],
      inputTokens: 0,
      outputTokens: 0,
      lastText: "",
      finished: false,
      abortRequest: undefined,
      structured: undefined
    }
    this.run = run
    const fiber = this.sched.fork(this.turnBody(run))
    run.fiber = fiber
    const aborted = yield* wait(fiber.exit)
    if (aborted !== undefined) yield* this.abortTurn(run, aborted)
    this.run = undefined
    if (this.queued.length === 0) {
      this.idle = true
      this.sessionState("idle")
    }
  }

  // --- stdin -----------------------------------------------------------------------------------------------

  private stillQueued(): Array<string> {
    return this.queued.flatMap((input) => input.uuid === undefined ? [] : [input.uuid])
  }

  private dropQueued(): void {
    const dropped = this.sched.clear(this.turns)
    this.queued = this.queued.filter((input) => !dropped.includes(input))
    for (const input of dropped) this.lifecycle(input.uuid, "cancelled")
  }

  private *handleLine(line: string): Task {
    const read = ClaudeWire.readHostLine(line)
    if (read._tag === "Ignored") return
    if (read._tag !== "Frame") {
      // Unknown frame types (keep_alive, what a newer host sends) are ignored, as the CLI does; a line that is not
      // JSON, or a known frame whose envelope is not sound, kills the process: the host wrote what no CLI can read.
      const type = read._tag === "Refused" ? read.type : "unknown"
      const what = read._tag === "Refused" ? read.detail : "SyntaxError"
      this.sched.emit({
        _tag: "Stderr",
        text: `Error parsing streaming input line (type=${type}, ${line.length} chars): ${what}\n`
      })
      yield* sleep(this.timing.badInputExit)
      this.terminate({ _tag: "Exit", code: 1, stderr: "" })
      return
    }
    const frame = read.frame
    switch (frame.type) {
      case "user":
        return yield* this.receive(frame)
      case "control_request":
        return yield* this.control(frame)
      case "control_response":
        return this.answer(frame, line)
      default:
        // control_cancel_request for our answers: nothing to do
        return
    }
  }

  private *receive(frame: ClaudeProtocol.HostUserMessage): Task {
    const message = frame.message as JsonObject
    const input: UserInput = {
      uuid: frame.uuid,
      message,
      prompt: Json.textOf(message.content),
      shouldQuery: frame.shouldQuery !== false
    }
    yield* sleep(this.receipt)
    if (this.idle) {
      this.idle = false
      this.sessionState("running")
    }
    this.lifecycle(input.uuid, "queued")
    this.queued.push(input)
    this.sched.offer(this.turns, input)
  }

  private *interrupt(requestId: string, cancelQueued: boolean): Task {
    const current = this.run
    if (
      !this.ignoreInterrupts && current !== undefined && !current.finished && current.abortRequest === undefined &&
      current.fiber !== undefined
    ) {
      current.abortRequest = { requestId, cancelQueued }
      // From now on an answer to the pending request is stale: it is ignored and not echoed.
      if (current.pending !== undefined) this.pending.delete(current.pending.requestId)
      this.sched.stop(current.fiber, current.abortRequest)
      // The aborted turn is wound up before the next stdin line is read.
      yield 0
      return
    }
    yield* sleep(this.timing.control)
    if (cancelQueued) this.dropQueued()
    this.controlSuccess(requestId, this.profile.legacy ? undefined : { still_queued: this.stillQueued() })
  }

  private *control(frame: ClaudeProtocol.HostControlRequest): Task {
    const requestId = frame.request_id
    const request = frame.request as JsonObject
    const subtype = String(frame.request.subtype)
    if (this.unanswered.has(subtype)) return
    const refusal = this.refused.get(subtype)
    if (refusal !== undefined) {
      yield* sleep(this.timing.control)
      return this.controlError(requestId, refusal, "refused")
    }
    if (subtype === "interrupt") return yield* this.interrupt(requestId, request.cancel_queued === true)
    yield* sleep(this.timing.control)
    const legacy = this.profile.legacy
    switch (subtype) {
      case "initialize": {
        this.hooks = parseHooks(request.hooks)
        const response: JsonObject = {
          commands: [
            { name: "compact", description: "Clear conversation history but keep a summary", argumentHint: "" },
            { name: "review", description: "Review a pull request", argumentHint: "", builtin: true }
          ],
          agents: [
            { name: "general-purpose", description: "General-purpose agent for multi-step tasks" },
            { name: "Explore", description: "Fast read-only search agent", model: "inherit" }
          ],
          output_style: "default",
          available_output_styles: ["default", "Explanatory", "Learning"],
          models: [{
            value: "default",
            resolvedModel: this.defaultModel,
            displayName: "Default (recommended)",
            description: "The default model",
            supportsEffort: true,
            supportedEffortLevels: ["low", "medium", "high"]
          }],
          account: { tokenSource: "none", apiKeySource: "ANTHROPIC_API_KEY", apiProvider: "firstParty" },
          pid: this.pid
        }
        const payload = legacy ? response : {
          ...response,
          claude_code_version: this.script.options.version,
          current_permission_mode: this.permissionMode,
          hooks_applied: true,
          analytics_disabled: true,
          sandbox_enabled: false,
          fast_mode_state: "off",
          session_state: this.run === undefined ? "idle" : "running",
          capabilities: ["ui_surface_v1", "get_usage_detached_v1"]
        }
        const servers = Array.isArray(request.sdkMcpServers)
          ? request.sdkMcpServers.filter((name): name is string => typeof name === "string")
          : []
        if (servers.length === 0) return this.controlSuccess(requestId, payload, true)
        // The MCP handshake waits for the host's answers, which this reader must go on reading.
        this.sched.fork(this.connectMcp(servers, () => this.controlSuccess(requestId, payload, true)))
        return
      }
      case "set_permission_mode": {
        this.permissionMode = Json.stringOr(request.mode, this.permissionMode)
        this.controlSuccess(requestId, { mode: this.permissionMode })
        return this.emit({
          type: "system",
          subtype: "status",
          status: null,
          permissionMode: this.permissionMode,
          session_id: this.sessionId,
          uuid: this.ids.uuid()
        })
      }
      case "set_model": {
        const model = request.model
        this.model = typeof model === "string" && model !== "default" ? model : this.defaultModel
        if (!legacy) return this.controlSuccess(requestId, { model: this.model })
        if (this.launch.replay) {
          this.emit({
            type: "user",
            message: {
              role: "user",
              content: `<local-command-stdout>Set model to ${this.model}</local-command-stdout>`
            },
            session_id: this.sessionId,
            parent_tool_use_id: null,
            uuid: this.ids.uuid(),
            timestamp: this.timestamp(),
            isReplay: true
          })
        }
        return this.controlSuccess(requestId)
      }
      case "set_max_thinking_tokens":
        return this.controlSuccess(requestId)
      case "mcp_status":
        return this.controlSuccess(requestId, { mcpServers: [] })
      case "get_context_usage":
        return this.controlSuccess(requestId, {
          categories: [
            { id: "system_prompt", name: "System prompt", tokens: 2338, color: "promptBorder", kind: "used" },
            { id: "system_tools", name: "System tools", tokens: 10012, color: "inactive", kind: "used" },
            { id: "messages", name: "Messages", tokens: 0, color: "purple", kind: "used" },
            { id: "free", name: "Free space", tokens: 987650, color: "promptBorder", kind: "free" }
          ],
          totalTokens: 12350,
          maxTokens: 1_000_000,
          model: this.model
        })
      case "get_settings":
        return this.controlSuccess(requestId, {
          effective: {},
          sources: [],
          applied: { model: this.model, effort: "medium" }
        })
      case "mcp_set_servers": {
        if (legacy) break
        // The servers added at run time are replaced: new in-process ones are connected (the MCP handshake, as at
        // initialize); the others are taken as configured (the simulator runs no server of its own).
        const wanted = Json.isRecord(request.servers) ? request.servers : {}
        const names = Object.keys(wanted)
        const removed = [...this.dynamicMcp].filter((name) => !(name in wanted))
        for (const name of removed) {
          this.dynamicMcp.delete(name)
          this.mcp.delete(name)
        }
        const added = names.filter((name) => !this.dynamicMcp.has(name))
        for (const name of added) this.dynamicMcp.add(name)
        const connect = added.filter((name) => Json.isRecord(wanted[name]) && wanted[name].type === "sdk")
        const answer = () => this.controlSuccess(requestId, { added, removed, errors: {} })
        if (connect.length === 0) return answer()
        this.sched.fork(this.connectMcp(connect, answer))
        return
      }
    }
    return this.controlError(requestId, `Unsupported control request subtype: ${subtype}`, "unsupported_request")
  }

  // The host answers a request of ours. Unknown and stale ids are ignored; success answers are echoed back
  // verbatim with --replay-user-messages (§5.1).
  private answer(frame: ClaudeProtocol.HostControlResponse, line: string): void {
    const response = frame.response
    const pending = this.pending.get(response.request_id)
    if (pending === undefined) return
    this.pending.delete(response.request_id)
    if (response.subtype === "success") {
      if (this.launch.replay) this.print(line)
      this.sched.set(pending, {
        _tag: "Success",
        response: Json.isRecord(response.response) ? response.response : {}
      })
    } else {
      this.sched.set(pending, { _tag: "Failure", error: response.error })
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

// eslint-disable-next-line require-yield
function* noop(): Task {}

/** The JSON-RPC result inside an `mcp_message` answer (`{ mcp_response: { result } }`). */
const mcpResult = (response: JsonObject): unknown => {
  const rpc = response.mcp_response
  return Json.isRecord(rpc) ? rpc.result : undefined
}

// eslint-disable-next-line require-yield
function* done<A>(value: A): Task<A> {
  return value
}

/** Where a text delta's text and uuid go in its line (strings that encode as themselves and occur nowhere else). */
const textMark = "<<text-delta>>"
const uuidMark = "<<uuid>>"

const textSent = (streaming: { readonly chunks: ReadonlyArray<MockClaude.Chunk>; readonly sent: number }): string => {
  const parts = new Array<string>(streaming.sent)
  for (let i = 0; i < streaming.sent; i++) parts[i] = streaming.chunks[i].text
  return parts.join("")
}

/** The result of a turn whose tool use was interrupted (a deny-and-interrupt, or an interrupt while the tool ran). */
const abortedTools = (run: { readonly messages: number }): ResultSpec => ({
  subtype: "error_during_execution",
  isError: true,
  errors: [diagnostic("tool_use")],
  terminalReason: "aborted_tools",
  stopReason: "tool_use",
  numTurns: run.messages + 2
})

const inputTokensPerMessage = 13_392

const rejectedText =
  "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a " +
  "file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell " +
  "you how to proceed."

const stoppedWhileRunningText = "Correction to the text above: this call was stopped while running, not refused " +
  "before it ran. It may have run in part or in full, and its changes may have been written."

const builtinTools = [
  "Task",
  "AskUserQuestion",
  "Bash",
  "Edit",
  "Glob",
  "Grep",
  "NotebookEdit",
  "Read",
  "TaskStop",
  "ToolSearch",
  "WebFetch",
  "WebSearch",
  "Write"
]

const diagnostic = (stopReason: string) =>
  `[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=${stopReason}`

const usageOf = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0
})

const rejectMeta = (source: string): JsonObject => ({
  non_execution_kind: "permission-rule",
  permission_decision: { decision: "reject", source }
})

const denial = (call: ToolCall): JsonObject => ({
  tool_name: call.name,
  tool_use_id: call.id,
  tool_input: call.input
})

const permissionDecision = (answer: HostAnswer, call: ToolCall): PermissionDecision => {
  if (answer._tag === "Failure") {
    return {
      _tag: "Deny",
      message: `Tool permission request failed: Error: ${answer.error}`,
      meta: rejectMeta("config")
    }
  }
  const response = answer.response
  if (response.behavior === "allow") {
    return {
      _tag: "Allow",
      input: Json.isRecord(response.updatedInput) ? response.updatedInput : call.input,
      source: Json.stringOr(response.decisionClassification, "user_temporary")
    }
  }
  if (response.behavior === "deny") {
    const message = Json.stringOr(response.message, "Permission denied")
    return response.interrupt === true
      ? { _tag: "DenyInterrupt", message }
      : { _tag: "Deny", message, meta: rejectMeta("user_reject") }
  }
  return {
    _tag: "Deny",
    message: "Tool permission request failed: Error: invalid permission result",
    meta: rejectMeta("config")
  }
}

const apiErrorKind = (status: number): string =>
  status === 401 ? "authentication_failed" : status === 429 ? "rate_limit" : status >= 500 ? "server_error" : "unknown"

const parseHooks = (u: unknown): Record<string, ReadonlyArray<HookMatcher>> => {
  const hooks: Record<string, ReadonlyArray<HookMatcher>> = {}
  if (!Json.isRecord(u)) return hooks
  for (const [event, matchers] of Object.entries(u)) {
    if (!Array.isArray(matchers)) continue
    hooks[event] = matchers.flatMap((m) =>
      Json.isRecord(m) && Array.isArray(m.hookCallbackIds)
        ? [{
          matcher: typeof m.matcher === "string" ? m.matcher : undefined,
          callbackIds: m.hookCallbackIds.filter((id): id is string => typeof id === "string")
        }]
        : []
    )
  }
  return hooks
}

// Claude Code matchers are a tool name, a regular expression over tool names, or empty / "*" for every tool.
const matchesTool = (matcher: string | undefined, toolName: string): boolean => {
  if (matcher === undefined || matcher === "" || matcher === "*") return true
  if (matcher === toolName) return true
  try {
    return new RegExp(`^(?:${matcher})$`).test(toolName)
  } catch {
    return false
  }
}

const flagValue = (args: ReadonlyArray<string>, flag: string): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === flag) return args[i + 1]
    if (arg.startsWith(`${flag}=`)) return arg.slice(flag.length + 1)
  }
  return undefined
}

const parseLaunch = (launch: Simulator.Launch): Launch => {
  const args = launch.args
  const has = (flag: string) => args.some((arg) => arg === flag || arg.startsWith(`${flag}=`))
  const number = (flag: string) => {
    const value = flagValue(args, flag)
    const parsed = value === undefined ? NaN : Number(value)
    return Number.isFinite(parsed) ? parsed : undefined
  }
  return {
    replay: has("--replay-user-messages"),
    partials: has("--include-partial-messages"),
    permissionPrompt: flagValue(args, "--permission-prompt-tool") === "stdio",
    sessionState: launch.env["CLAUDE_CODE_SDK_READS_SESSION_STATE"] === "1",
    sessionId: flagValue(args, "--session-id"),
    resume: flagValue(args, "--resume"),
    model: flagValue(args, "--model"),
    permissionMode: flagValue(args, "--permission-mode"),
    maxTurns: number("--max-turns"),
    maxBudgetUsd: number("--max-budget-usd")
  }
}
