/**
 * Claude Code's stream-json protocol as a protocol machine: stdout lines in, neutral items out; host commands in,
 * stream-json lines out. Pure and synchronous (see `Provider.ts`).
 *
 * What it knows of the CLI (docs/protocol/claude-stream-json.md §4.1, §5.1, §5.3, §5.6, §5.8, §5.9): the handshake is
 * one `initialize` control request; a prompt is a user message stamped with the host's turn id as its uuid;
 * `command_lifecycle queued` (2.1.3xx) or the replay of the message is the receipt (2.1.197 sends no lifecycle, and
 * replays only with the first model response); `user_message_uuid` names a frame's turn where the CLI gives it; a
 * `result` ends a turn, and the process stays alive; permission requests and hook callbacks are control requests from
 * the CLI; with `--replay-user-messages` the CLI echoes the host's own answers.
 *
 * @internal
 */
import { detachedPrefix } from "@tether/core/codec/Detached"
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import { TurnFailed as TurnFailedError, type Usage } from "@tether/core/Turn"
import * as Result from "effect/Result"
import {
  BudgetExceeded,
  MaxTurnsExceeded,
  StructuredOutputInvalid,
  StructuredOutputMissing,
  StructuredOutputRetriesExhausted
} from "../ClaudeError.ts"
import * as ClaudeProtocol from "./protocol/runtime.ts"

/**
 * A tool use the CLI refused during the turn because permission was denied.
 *
 * @category models
 * @since 0.1.0
 */
export interface PermissionDenial {
  readonly toolName: string
  readonly toolUseId: string
  readonly input: unknown
}

/**
 * The result of a Claude turn: the neutral result plus what Claude's `result` frame says.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult {
  readonly turnId: string
  /** The CLI's session id: resume the conversation with it (`resume` option). */
  readonly sessionId: string | undefined
  readonly text: string
  readonly usage: Usage
  readonly durationMs: number | undefined
  readonly raw: unknown
  readonly isError: boolean
  /** `success`, `error_during_execution`, `error_max_turns`, `error_max_budget_usd`, … */
  readonly subtype: string
  readonly stopReason: string | undefined
  readonly terminalReason: string | undefined
  /** Claude reports cost cumulatively over the process; this is the CLI's figure as reported. */
  readonly totalCostUsd: number | undefined
  readonly numTurns: number | undefined
  readonly permissionDenials: ReadonlyArray<PermissionDenial>
  /**
   * The turn's structured output: decoded by the session's `outputSchema` when it has one, else as the CLI sent it
   * (`structured_output`), or undefined.
   */
  readonly output: unknown
}

/** The hook configuration sent in `initialize`: callback ids by hook event. */
export type HookConfig = {
  readonly [event: string]: ReadonlyArray<
    { readonly matcher?: string; readonly hookCallbackIds: ReadonlyArray<string>; readonly timeout?: number }
  >
}

export interface MachineOptions {
  readonly hooks: HookConfig
  /** Extra fields of the `initialize` request. */
  readonly initialize: { readonly [key: string]: unknown } | undefined
  readonly maxLineLength: number
  /**
   * Decodes the structured output of a turn (the session's `outputSchema`): a success without it, or with one that
   * does not decode, fails the turn.
   */
  readonly structuredOutput?: ((value: unknown) => Result.Result<unknown, string>) | undefined
  /** Mark every prompt `client_composed: true`: the CLI takes it as the user typed it (no slash commands). */
  readonly verbatimPrompts?: boolean | undefined
  /**
   * The session has no permission policy of the host's (its default denies everything) and its CLI runs without
   * `--permission-prompt-tool`, so the CLI denies what needs approval on its own (`system/permission_denied` with no
   * `decision_reason_type`): each such denial is reported as the default policy's (`PermissionDenied`), as when the
   * CLI asks and the policy denies. Denials with a reason (a deny rule, the mode) stay frames, as they are when the CLI
   * can ask.
   */
  readonly reportDenials?: boolean | undefined
}

/** A request from the CLI that the host answers (see `ClaudeSession`'s handler). */
export type HostRequest =
  | {
    readonly _tag: "HookCallback"
    readonly callbackId: string
    readonly input: object
    readonly toolUseId: string | undefined
  }
  | { readonly _tag: "McpMessage"; readonly serverName: string; readonly message: object }
  | { readonly _tag: "Other"; readonly subtype: string; readonly request: object }

const initializeId = "tether_init"
const refPrefix = "tether_"

const toUsage = (usage: ClaudeProtocol.Usage): Usage => ({
  inputTokens: usage.input_tokens ?? 0,
  outputTokens: usage.output_tokens ?? 0,
  cacheCreationInputTokens: usage.cache_creation_input_tokens ?? 0,
  cacheReadInputTokens: usage.cache_read_input_tokens ?? 0
})

const toResult = (frame: ClaudeProtocol.ResultFrame): Omit<TurnResult, "turnId"> => ({
  sessionId: frame.session_id,
  text: frame.result ?? "",
  isError: frame.is_error,
  subtype: frame.subtype,
  stopReason: frame.stop_reason ?? undefined,
  terminalReason: frame.terminal_reason ?? undefined,
  usage: toUsage(frame.usage),
  totalCostUsd: frame.total_cost_usd,
  durationMs: frame.duration_ms,
  numTurns: frame.num_turns,
  permissionDenials: frame.permission_denials.map((d) => ({
    toolName: d.tool_name,
    toolUseId: d.tool_use_id,
    input: d.tool_input
  })),
  output: frame.structured_output,
  raw: frame
})

const outcomeOf = (frame: ClaudeProtocol.ResultFrame): Provider.TurnOutcome => {
  const terminal = frame.terminal_reason ?? null
  if (terminal === "aborted_streaming" || terminal === "aborted_tools") return { _tag: "Interrupted" }
  switch (frame.subtype) {
    case "success":
      return frame.is_error
        ? { _tag: "Api", status: frame.api_error_status ?? null, detail: frame.result ?? "API error" }
        : { _tag: "Success" }
    case "error_max_turns":
      return {
        _tag: "Failed",
        error: (turnId) => new MaxTurnsExceeded({ turnId, sessionId: frame.session_id ?? null })
      }
    case "error_max_budget_usd":
      return {
        _tag: "Failed",
        error: (turnId) =>
          new BudgetExceeded({
            turnId,
            sessionId: frame.session_id ?? null,
            totalCostUsd: frame.total_cost_usd ?? null
          })
      }
    case "error_max_structured_output_retries":
      return {
        _tag: "Failed",
        error: (turnId) => new StructuredOutputRetriesExhausted({ turnId, errors: frame.errors ?? [], raw: frame })
      }
    default:
      return {
        _tag: "Failed",
        error: (turnId) =>
          new TurnFailedError({ turnId, subtype: frame.subtype, terminalReason: terminal, errors: frame.errors ?? [] })
      }
  }
}

/**
 * How a turn ended and what it gave, with the session's structured output decoded: a success without the output, or
 * with one that does not decode, fails the turn (the raw frame goes with the error).
 */
const endOf = (
  frame: ClaudeProtocol.ResultFrame,
  decode: MachineOptions["structuredOutput"]
): { readonly outcome: Provider.TurnOutcome; readonly result: Omit<TurnResult, "turnId"> } => {
  const result = toResult(frame)
  const outcome = outcomeOf(frame)
  if (decode === undefined || outcome._tag !== "Success") return { outcome, result }
  if (!("structured_output" in frame)) {
    return {
      outcome: { _tag: "Failed", error: (turnId) => new StructuredOutputMissing({ turnId, raw: frame }) },
      result
    }
  }
  const value = frame.structured_output
  const decoded = decode(value)
  return Result.isSuccess(decoded)
    ? { outcome, result: { ...result, output: decoded.success } }
    : {
      outcome: {
        _tag: "Failed",
        error: (turnId) => new StructuredOutputInvalid({ turnId, reason: decoded.failure, value, raw: frame })
      },
      result
    }
}

/** Narrows a content block by its `type` (the catch-all block's `type` is a string too, so `===` alone does not). */
const isBlock = <T extends ClaudeProtocol.ContentBlock["type"]>(
  block: ClaudeProtocol.ContentBlock,
  type: T
): block is Extract<ClaudeProtocol.ContentBlock, { readonly type: T }> => block.type === type

const frame = (
  type: string,
  subtype: string | undefined,
  raw: unknown,
  turnId: string | undefined,
  scope?: "session"
): Provider.Item => ({ _tag: "Frame", type, subtype, raw, turnId, scope })

const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined

/** Frames that say nothing about the running turn: never its progress, never its receipt. */
const sessionSystemSubtypes: ReadonlySet<string> = new Set(["background_tasks_changed", "commands_changed"])

/**
 * The oldest release known to send `command_lifecycle` receipts: 2.1.332 does (`msg_lifecycle_v1` in `system/init`),
 * 2.1.197 does not, and the initialize answer says nothing of them. A CLI whose handshake names this version or a
 * later one is reported with explicit receipts from the handshake on; what its first `system/init` says (or a
 * lifecycle frame) settles it.
 */
const receiptsSince: ReadonlyArray<number> = [2, 1, 332]

/** How many prompt uuids a machine remembers for their replays (a queued turn's prompt is encoded when sent). */
const promptMemory = 1024

/** Is `version` (`"2.1.332"`) at least `floor`? A version that does not parse is not. */
export const atLeast = (version: string, floor: ReadonlyArray<number>): boolean => {
  const parts = version.split(".")
  for (let i = 0; i < floor.length; i++) {
    const part = Number.parseInt(parts[i] ?? "", 10)
    if (!Number.isFinite(part)) return false
    if (part !== floor[i]) return part > floor[i]
  }
  return true
}

/** The machine's state: what one Claude session's protocol has seen and is waiting for. */
interface State {
  readonly options: MachineOptions
  readonly decodeOptions: { readonly maxLineLength: number }
  handshaking: boolean
  /** A `command_lifecycle` frame came: the CLI sends receipts. */
  lifecycle: boolean
  /** What the last `system/init` said of receipts (`msg_lifecycle_v1`); undefined before the first one. */
  initLifecycle: boolean | undefined
  /** The CLI's version, from the handshake (2.1.3xx) or from `system/init` (2.1.197 says it only there). */
  version: string | undefined
  /**
   * The uuids of the prompts this machine wrote, until their replay: only those replays are receipts and a turn's.
   * The CLI also replays output of its own under a uuid it mints (`set_model`'s `<local-command-stdout>`, seen while
   * idle on 2.1.197 and 2.1.332): that is the session's, whatever turn runs when it comes.
   */
  readonly prompts: Set<string>
  /**
   * The in-process tool calls the host is running, by server and JSON-RPC id, and the other way round: the CLI
   * cancels one with a JSON-RPC `notifications/cancelled` of its own, never with a control_cancel_request.
   */
  readonly calls: Map<string, string>
  readonly callKeys: Map<string, string>
  /**
   * With `reportDenials`: the input of each tool use until its result, so that a denial (which names the tool use but
   * not its input) is reported with it. Cleared at each turn's result.
   */
  readonly toolInputs: Map<string, { readonly [key: string]: unknown }>
}

type FrameOf<T extends ClaudeProtocol.Frame["type"]> = Extract<ClaudeProtocol.Frame, { readonly type: T }>

// --- decoding: each frame of the CLI, by type, over the state -------------------------------------------------

/** A decoded frame, to the neutral items it means. */
const route = (s: State, value: ClaudeProtocol.Frame): Provider.Items => {
  switch (value.type) {
    case "stream_event":
      return streamEvent(value)
    case "assistant":
      return assistant(s, value)
    case "user":
      return user(s, value)
    case "result":
      return result(s, value)
    case "command_lifecycle":
      return commandLifecycle(s, value)
    case "system":
      return system(s, value)
    case "control_response":
      return controlResponse(s, value)
    case "control_request":
      return controlRequest(s, value)
    case "control_cancel_request":
      return [
        { _tag: "Cancel", requestId: value.request_id },
        frame("control_cancel_request", undefined, value, undefined)
      ]
    case "keep_alive":
      return frame("keep_alive", undefined, value, undefined, "session")
    default:
      return frame(value.type, str((value as { readonly subtype?: unknown }).subtype), value, undefined)
  }
}

const streamEvent = (value: FrameOf<"stream_event">): Provider.Items => {
  const event = value.event
  if (event.type === "content_block_delta" && "delta" in event && event.delta.type === "text_delta") {
    return { _tag: "TextDelta", turnId: value.user_message_uuid, raw: value, text: event.delta.text }
  }
  return frame("stream_event", String(event.type), value, value.user_message_uuid)
}

const assistant = (s: State, value: FrameOf<"assistant">): Provider.Items => {
  const turnId = value.user_message_uuid
  const out: Array<Provider.Item> = []
  let text = ""
  for (const block of value.message.content) {
    if (isBlock(block, "tool_use")) {
      if (s.options.reportDenials === true) s.toolInputs.set(block.id, block.input)
      out.push({ _tag: "ToolUse", turnId, raw: value, toolUseId: block.id, name: block.name, input: block.input })
    } else if (isBlock(block, "text")) {
      text += block.text
    }
  }
  if (out.length === 0 || text.length > 0) out.push({ _tag: "AssistantMessage", turnId, raw: value, text })
  return out
}

const user = (s: State, value: FrameOf<"user">): Provider.Items => {
  if (value.isReplay === true) {
    return typeof value.uuid === "string" && s.prompts.delete(value.uuid)
      ? [{ _tag: "Receipt", turnId: value.uuid }, frame("user", "replay", value, value.uuid)]
      : frame("user", "replay", value, undefined, "session")
  }
  const content = value.message.content
  const out: Array<Provider.Item> = []
  if (typeof content !== "string") {
    for (const block of content) {
      if (isBlock(block, "tool_result")) {
        s.toolInputs.delete(block.tool_use_id)
        out.push({
          _tag: "ToolResult",
          turnId: undefined,
          raw: value,
          toolUseId: block.tool_use_id,
          isError: block.is_error === true,
          content: block.content
        })
      }
    }
  }
  if (out.length === 0) out.push(frame("user", undefined, value, undefined))
  return out
}

const result = (s: State, value: FrameOf<"result">): Provider.Items => {
  // The session stops the tool calls of the turn that ends, unanswered: forget them.
  if (s.calls.size > 0) {
    s.calls.clear()
    s.callKeys.clear()
  }
  s.toolInputs.clear()
  const ended = endOf(value, s.options.structuredOutput)
  return [
    { _tag: "SessionId", sessionId: value.session_id },
    { _tag: "TurnEnd", turnId: value.user_message_uuid, outcome: ended.outcome, result: ended.result }
  ]
}

const commandLifecycle = (s: State, value: FrameOf<"command_lifecycle">): Provider.Items => {
  s.lifecycle = true
  return value.state === "queued"
    ? [
      { _tag: "Receipt", turnId: value.command_uuid },
      frame("command_lifecycle", "queued", value, value.command_uuid)
    ]
    : frame("command_lifecycle", value.state, value, value.command_uuid)
}

const system = (s: State, value: FrameOf<"system">): Provider.Items => {
  switch (value.subtype) {
    case "init":
      s.initLifecycle = value.capabilities?.includes("msg_lifecycle_v1") === true
      if (value.claude_code_version !== undefined) s.version = value.claude_code_version
      return [{ _tag: "SessionId", sessionId: value.session_id }, frame("system", "init", value, undefined)]
    case "api_retry":
      return {
        _tag: "Retry",
        turnId: undefined,
        raw: value,
        attempt: value.attempt,
        maxRetries: value.max_retries,
        delayMs: value.retry_delay_ms,
        errorStatus: value.error_status ?? undefined,
        message: value.error
      }
    case "session_state_changed":
      // `idle` comes after the turn's result (and may come after the next prompt was written).
      return frame("system", value.subtype, value, undefined, value.state === "idle" ? "session" : undefined)
    case "status":
      // `status: null` answers a permission-mode change, not the turn.
      return frame("system", value.subtype, value, undefined, value.status === null ? "session" : undefined)
    case "permission_denied":
      // Without a reason, the CLI had no one to ask (the default policy's deny); a rule, the mode or the classifier
      // denies with a reason of its own whether or not the CLI can ask, and stays a frame, as it is with one.
      return s.options.reportDenials === true && value.decision_reason_type === undefined
        ? denied(s, value)
        : frame("system", value.subtype, value, undefined)
    default:
      return frame(
        "system",
        value.subtype,
        value,
        undefined,
        sessionSystemSubtypes.has(value.subtype) ? "session" : undefined
      )
  }
}

/** Prefix of the request id a denial the CLI made on its own is reported under (it has no request of its own). */
const deniedPrefix = "permission_denied:"

/** A tool use the CLI denied with no one to ask, as the default policy's denial (see `reportDenials`). */
const denied = (s: State, value: ClaudeProtocol.SystemPermissionDeniedFrame): Provider.Item => {
  const input = s.toolInputs.get(value.tool_use_id) ?? {}
  s.toolInputs.delete(value.tool_use_id)
  return {
    _tag: "PermissionDenied",
    request: {
      requestId: `${deniedPrefix}${value.tool_use_id}`,
      kind: "tool",
      toolName: value.tool_name,
      toolUseId: value.tool_use_id,
      input,
      description: undefined,
      raw: value
    },
    message: value.message ?? `${value.tool_name} needs approval, and there was no one to ask`
  }
}

const controlResponse = (s: State, value: ClaudeProtocol.ControlResponseFrame): Provider.Items => {
  const response = value.response
  const id = response.request_id
  const event = frame("control_response", response.subtype, value, undefined, "session")
  if (id === initializeId && s.handshaking) {
    s.handshaking = false
    if (response.subtype !== "success") return [event, { _tag: "Refused", reason: response.error }]
    const decoded = ClaudeProtocol.decodeInitializeResponse(response.response ?? {})
    if (Result.isFailure(decoded)) return [event, { _tag: "Refused", reason: decoded.failure.message }]
    s.version = decoded.success.claude_code_version
    return [event, { _tag: "Ready", info: decoded.success }]
  }
  if (!id.startsWith(refPrefix)) return event
  const ref = Number(id.slice(refPrefix.length))
  if (!Number.isSafeInteger(ref)) return event
  return [event, {
    _tag: "ControlAnswer",
    ref,
    answer: response.subtype === "success"
      ? { _tag: "Success", payload: response.response ?? {} }
      : { _tag: "Error", message: response.error, code: response.error_code ?? null }
  }]
}

const controlRequest = (s: State, value: FrameOf<"control_request">): Provider.Items => {
  const request = value.request
  switch (request.subtype) {
    case "can_use_tool":
      return {
        _tag: "PermissionRequest",
        request: {
          requestId: value.request_id,
          kind: "tool",
          toolName: request.tool_name,
          toolUseId: request.tool_use_id,
          input: request.input,
          description: request.description,
          raw: value,
          suggestions: request.permission_suggestions as ReadonlyArray<Permission.PermissionUpdate> | undefined
        }
      }
    case "hook_callback":
      // A hook is the turn's work (its own timeout bounds it in the host): bound by the turn.
      return [frame("control_request", "hook_callback", value, undefined), {
        _tag: "HostRequest",
        requestId: value.request_id,
        request: {
          _tag: "HookCallback",
          callbackId: request.callback_id,
          input: request.input,
          toolUseId: request.tool_use_id ?? undefined
        } satisfies HostRequest,
        bound: "turn"
      }]
    case "mcp_message":
      return [frame("control_request", "mcp_message", value, undefined), ...mcpMessage(s, value.request_id, request)]
    default: {
      const subtype = String(request.subtype)
      return [frame("control_request", subtype, value, undefined), {
        _tag: "HostRequest",
        requestId: value.request_id,
        request: { _tag: "Other", subtype, request } satisfies HostRequest,
        // A question to the user (a form an MCP server needs, a dialog) waits as long as the turn does.
        bound: subtype === "elicitation" || subtype === "request_user_dialog" ? "turn" : "control"
      }]
    }
  }
}

const callKey = (server: string, id: unknown): string | undefined =>
  typeof id === "string" || typeof id === "number" ? `${server}\u0000${typeof id}:${id}` : undefined

const mcpMessage = (
  s: State,
  requestId: string,
  request: ClaudeProtocol.McpMessageParams
): ReadonlyArray<Provider.Item> => {
  const message = request.message
  const hostRequest: Provider.Item = {
    _tag: "HostRequest",
    requestId,
    request: { _tag: "McpMessage", serverName: request.server_name, message } satisfies HostRequest,
    // A tool call is the turn's work: it may take as long as the turn (and its own timeout) allows.
    bound: message.method === "tools/call" ? "turn" : "control"
  }
  if (message.method === "tools/call") {
    const key = callKey(request.server_name, message.id)
    if (key !== undefined) {
      s.calls.set(key, requestId)
      s.callKeys.set(requestId, key)
    }
    return [hostRequest]
  }
  if (message.method === "notifications/cancelled") {
    const params = message.params as { readonly requestId?: unknown } | undefined
    const key = callKey(request.server_name, params?.requestId)
    const call = key === undefined ? undefined : s.calls.get(key)
    if (call !== undefined) {
      forgetCall(s, call)
      return [{ _tag: "Cancel", requestId: call }, hostRequest]
    }
  }
  return [hostRequest]
}

const forgetCall = (s: State, requestId: string): void => {
  const key = s.callKeys.get(requestId)
  if (key === undefined) return
  s.callKeys.delete(requestId)
  s.calls.delete(key)
}

// --- encoding: the host's commands, as lines to write -----------------------------------------------------------

const success = (requestId: string, payload: unknown): Provider.Item => ({
  _tag: "Write",
  line: ClaudeProtocol.encodeControlSuccess(
    requestId,
    (typeof payload === "object" && payload !== null && !Array.isArray(payload) ? payload : {}) as {
      readonly [key: string]: unknown
    }
  )
})

const verdictPayload = (request: Permission.PermissionRequest, verdict: Permission.Verdict) =>
  verdict._tag === "Allow"
    ? {
      behavior: "allow",
      updatedInput: verdict.updatedInput ?? request.input,
      ...(request.toolUseId !== undefined ? { toolUseID: request.toolUseId } : {}),
      // Allowing with permission updates is an "always allow" (the CLI records it as the user's lasting choice).
      ...(verdict.updatedPermissions !== undefined
        ? { updatedPermissions: verdict.updatedPermissions, decisionClassification: "user_permanent" }
        : {})
    }
    : {
      behavior: "deny",
      message: verdict.message,
      ...(verdict.interrupt === true ? { interrupt: true } : {})
    }

/**
 * The protocol machine of one Claude session: its state, and the provider's operations over it (the decoders and
 * encoders above).
 */
export const make = (options: MachineOptions): Provider.ProtocolMachine => {
  const s: State = {
    options,
    decodeOptions: { maxLineLength: options.maxLineLength },
    handshaking: false,
    lifecycle: false,
    initLifecycle: undefined,
    version: undefined,
    prompts: new Set(),
    calls: new Map(),
    callKeys: new Map(),
    toolInputs: new Map()
  }
  return {
    start: () => {
      s.handshaking = true
      return {
        _tag: "Write",
        line: ClaudeProtocol.encodeControlRequest(
          initializeId,
          { subtype: "initialize", hooks: options.hooks, ...options.initialize } as ClaudeProtocol.ControlRequestInput
        )
      }
    },
    receive: (line) => {
      const value = ClaudeProtocol.decodeLineOrError(line, s.decodeOptions)
      if (value._tag === "ProtocolError") return { _tag: "Malformed", error: value, raw: detachedPrefix(line, 4096) }
      if (value._tag === "Unknown") {
        // The codec does not know every session-level system frame (`commands_changed`): they stay session traffic.
        const session = value.type === "system" && sessionSystemSubtypes.has(value.subtype ?? "")
        return frame(value.type, value.subtype, value.raw, undefined, session ? "session" : undefined)
      }
      return route(s, value.frame)
    },
    prompt: (turnId, prompt) => {
      const line = ClaudeProtocol.encodeUserMessage({
        type: "user",
        message: { role: "user", content: prompt },
        parent_tool_use_id: null,
        session_id: "",
        uuid: turnId,
        ...(options.verbatimPrompts === true ? { client_composed: true } : {})
      })
      s.prompts.add(turnId)
      if (s.prompts.size > promptMemory) s.prompts.delete(s.prompts.values().next().value!)
      return { _tag: "Write", line }
    },
    interrupt: (_turnId, ref) => ({
      _tag: "Write",
      line: ClaudeProtocol.encodeControlRequest(`${refPrefix}${ref}`, { subtype: "interrupt" })
    }),
    control: (ref, request) => ({
      _tag: "Write",
      line: ClaudeProtocol.encodeControlRequest(`${refPrefix}${ref}`, request as ClaudeProtocol.ControlRequestInput)
    }),
    answerPermission: (request: Permission.PermissionRequest, verdict: Permission.Verdict) =>
      success(request.requestId, verdictPayload(request, verdict)),
    reply: (requestId, reply) => {
      if (s.calls.size > 0) forgetCall(s, requestId)
      return reply._tag === "Success"
        ? success(requestId, reply.payload)
        : { _tag: "Write", line: ClaudeProtocol.encodeControlError(requestId, reply.message) }
    },
    capabilities: () => ({
      provider: "claude",
      receipts: s.lifecycle || (s.initLifecycle ?? (s.version !== undefined && atLeast(s.version, receiptsSince)))
        ? "explicit"
        : "first-output",
      interrupt: true,
      permissionKinds: ["tool"],
      resume: true,
      sandbox: undefined,
      notes: s.version === undefined ? [] : [`claude ${s.version}`]
    })
  }
}
