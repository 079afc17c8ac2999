/**
 * A Claude Code session: the `claude` CLI over its stream-json duplex protocol, as a scoped resource.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { ClaudeSession, Permission } from "@tether/core"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* ClaudeSession.make({ policy: Permission.allowTools(["Read"]) })
 *     const result = yield* session.run("Say hello")
 *     console.log(result.text)
 *   })
 * ) // requires a Transport (NodeTransport.layer, or MockTransport.layer in tests)
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Permission from "../Permission.ts"
import * as Session from "../Session.ts"
import { ControlFailed, HandshakeFailed, InvalidConfig, type ProtocolError } from "../TetherError.ts"
import * as Timeouts from "../Timeouts.ts"
import type { PermissionDenial, TurnResult, Usage } from "../Turn.ts"
import * as ClaudeOptions from "./ClaudeOptions.ts"
import * as ClaudeProtocol from "./ClaudeProtocol.ts"

/**
 * A hook callback, registered at initialize and run when the CLI calls it. Its result is the CLI's hook output
 * shape (e.g. `{ continue: true }`, or `{ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision:
 * "allow" } }`). A failing callback answers the CLI with an error.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookCallback {
  readonly matcher?: string | undefined
  /** Seconds the CLI waits for this hook. */
  readonly timeout?: number | undefined
  readonly callback: (
    input: { readonly [key: string]: unknown },
    toolUseId: string | undefined
  ) => Effect.Effect<{ readonly [key: string]: unknown }, Permission.PolicyError>
}

/**
 * Options of a Claude session: the CLI's typed options plus the session's own.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options extends ClaudeOptions.Options {
  readonly timeouts?: Timeouts.Timeouts | undefined
  /** Decides tool-use permissions. Default: deny everything. */
  readonly policy?: Permission.Policy | undefined
  /** Hook callbacks by hook event name (`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, …). */
  readonly hooks?: { readonly [event: string]: ReadonlyArray<HookCallback> } | undefined
  /** Extra fields for the `initialize` request (e.g. `appendSystemPrompt`). */
  readonly initialize?: { readonly [key: string]: unknown } | undefined
  readonly queue?: boolean | undefined
  readonly queueCapacity?: number | undefined
  readonly eventRing?: number | undefined
  readonly subscriberBuffer?: number | undefined
  readonly makeId?: (() => string) | undefined
}

/**
 * Errors of the Claude controls.
 *
 * @category errors
 * @since 0.1.0
 */
export type ControlError = Session.ControlError

/**
 * A live Claude session: the provider-neutral {@link Session.Session} plus Claude's controls.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaudeSession extends Session.Session {
  readonly initializeResponse: ClaudeProtocol.InitializeResponse
  /** Answers and errors are decoded: an answer that does not match its schema fails with `ControlFailed`. */
  readonly setPermissionMode: (
    mode: ClaudeProtocol.PermissionMode
  ) => Effect.Effect<ClaudeProtocol.SetPermissionModeResponse, ControlError>
  readonly setModel: (model: string | null) => Effect.Effect<ClaudeProtocol.SetModelResponse, ControlError>
  readonly setMaxThinkingTokens: (tokens: number | null) => Effect.Effect<void, ControlError>
  readonly mcpStatus: Effect.Effect<ClaudeProtocol.McpStatusResponse, ControlError>
  readonly getContextUsage: Effect.Effect<ClaudeProtocol.ContextUsageResponse, ControlError>
}

const asRecord = (u: unknown): { readonly [key: string]: unknown } =>
  Predicate.isObject(u) && !Array.isArray(u) ? u as { readonly [key: string]: unknown } : {}

const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined

// Everything `route` and its helpers read was validated by the frame's schema in `decodeLine`: they read the frames
// as typed, without checking them again.

const toUsage = (usage: ClaudeProtocol.Usage): Usage => ({
  inputTokens: usage.input_tokens ?? 0,
  outputTokens: usage.output_tokens ?? 0,
  cacheCreationInputTokens: usage.cache_creation_input_tokens ?? 0,
  cacheReadInputTokens: usage.cache_read_input_tokens ?? 0
})

const toDenials = (denials: ReadonlyArray<ClaudeProtocol.PermissionDenial>): ReadonlyArray<PermissionDenial> =>
  denials.map((d) => ({ toolName: d.tool_name, toolUseId: d.tool_use_id, input: d.tool_input }))

const outcomeOf = (frame: ClaudeProtocol.ResultFrame): Session.TurnOutcome => {
  const terminal = frame.terminal_reason ?? null
  if (terminal === "aborted_streaming" || terminal === "aborted_tools") return { _tag: "Interrupted" }
  switch (frame.subtype) {
    case "success":
      return frame.is_error
        ? { _tag: "Api", status: frame.api_error_status ?? null, detail: frame.result ?? "API error" }
        : { _tag: "Success" }
    case "error_max_turns":
      return { _tag: "MaxTurns" }
    case "error_max_budget_usd":
      return { _tag: "Budget" }
    default:
      return {
        _tag: "Failed",
        subtype: frame.subtype,
        terminalReason: terminal,
        errors: frame.errors ?? []
      }
  }
}

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
  permissionDenials: toDenials(frame.permission_denials),
  raw: frame
})

/** Narrows a content block by its `type` (the catch-all block's `type` is a string too, so `===` alone does not). */
const isBlock = <T extends ClaudeProtocol.ContentBlock["type"]>(
  block: ClaudeProtocol.ContentBlock,
  type: T
): block is Extract<ClaudeProtocol.ContentBlock, { readonly type: T }> => block.type === type

const frameEvent = (
  type: string,
  subtype: string | undefined,
  raw: unknown,
  turnId?: string | undefined
): Session.Inbound => ({ _tag: "Frame", type, subtype, raw, turnId })

/**
 * Maps one decoded frame to what the session does with it.
 *
 * @category protocol
 * @since 0.1.0
 */
export const route = (
  frame: ClaudeProtocol.Frame,
  hooks: ReadonlyMap<string, HookCallback>
): Session.Inbound | ReadonlyArray<Session.Inbound> => {
  switch (frame.type) {
    case "stream_event": {
      const event = frame.event
      if (event.type === "content_block_delta" && "delta" in event && event.delta.type === "text_delta") {
        return { _tag: "TextDelta", turnId: frame.user_message_uuid, raw: frame, text: event.delta.text }
      }
      return frameEvent("stream_event", String(event.type), frame, frame.user_message_uuid)
    }
    case "assistant": {
      const turnId = frame.user_message_uuid
      const out: Array<Session.Inbound> = []
      let text = ""
      for (const block of frame.message.content) {
        if (isBlock(block, "tool_use")) {
          out.push({ _tag: "ToolUse", turnId, raw: frame, toolUseId: block.id, name: block.name, input: block.input })
        } else if (isBlock(block, "text")) {
          text += block.text
        }
      }
      if (out.length === 0 || text.length > 0) {
        out.push({ _tag: "AssistantMessage", turnId, raw: frame, text })
      }
      return out
    }
    case "user": {
      if (frame.isReplay === true && typeof frame.uuid === "string") {
        return [{ _tag: "Ack", turnId: frame.uuid }, frameEvent("user", "replay", frame, frame.uuid)]
      }
      const content = frame.message.content
      const out: Array<Session.Inbound> = []
      if (typeof content !== "string") {
        for (const block of content) {
          if (isBlock(block, "tool_result")) {
            out.push({
              _tag: "ToolResult",
              turnId: undefined,
              raw: frame,
              toolUseId: block.tool_use_id,
              isError: block.is_error === true,
              content: block.content
            })
          }
        }
      }
      if (out.length === 0) out.push(frameEvent("user", undefined, frame))
      return out
    }
    case "result":
      return [
        { _tag: "SessionId", sessionId: frame.session_id },
        {
          _tag: "TurnEnd",
          turnId: frame.user_message_uuid,
          outcome: outcomeOf(frame),
          result: toResult(frame)
        }
      ]
    case "command_lifecycle":
      return frame.state === "queued"
        ? [
          { _tag: "Ack", turnId: frame.command_uuid },
          frameEvent("command_lifecycle", "queued", frame, frame.command_uuid)
        ]
        : [frameEvent("command_lifecycle", frame.state, frame, frame.command_uuid)]
    case "system": {
      switch (frame.subtype) {
        case "init":
          return [{ _tag: "SessionId", sessionId: frame.session_id }, frameEvent("system", "init", frame)]
        case "api_retry":
          return [{
            _tag: "ApiRetry",
            turnId: undefined,
            raw: frame,
            attempt: frame.attempt,
            maxRetries: frame.max_retries,
            delayMs: frame.retry_delay_ms,
            errorStatus: frame.error_status ?? undefined
          }]
        case "task_started":
        case "task_progress":
        case "task_notification":
        case "task_updated":
          return [{
            _tag: "Task",
            turnId: undefined,
            raw: frame,
            subtype: frame.subtype,
            taskId: frame.task_id
          }]
        default:
          return [frameEvent("system", frame.subtype, frame)]
      }
    }
    case "control_response": {
      const response = frame.response
      return [frameEvent("control_response", response.subtype, frame), {
        _tag: "ControlResponse",
        requestId: response.request_id,
        response: response.subtype === "success"
          ? { _tag: "Success", payload: response.response ?? {} }
          : { _tag: "Error", message: response.error, code: response.error_code ?? null }
      }]
    }
    case "control_request": {
      const request = frame.request
      switch (request.subtype) {
        case "can_use_tool":
          return [{
            _tag: "PermissionRequest",
            request: {
              requestId: frame.request_id,
              toolName: request.tool_name,
              toolUseId: request.tool_use_id,
              input: request.input,
              description: request.description,
              raw: frame
            }
          }]
        case "hook_callback": {
          const hook = hooks.get(request.callback_id)
          const handle: Effect.Effect<Session.Reply> = hook === undefined
            ? Effect.succeed({ _tag: "Error", message: `unknown hook callback ${request.callback_id}` })
            : hook.callback(request.input, request.tool_use_id ?? undefined).pipe(
              Effect.map((payload): Session.Reply => ({ _tag: "Success", payload })),
              Effect.catchCause((cause) =>
                Effect.logWarning("hook callback failed", cause).pipe(
                  Effect.as<Session.Reply>({ _tag: "Error", message: "the host's hook callback failed" })
                )
              )
            )
          return [frameEvent("control_request", "hook_callback", frame), {
            _tag: "Request",
            requestId: frame.request_id,
            handle
          }]
        }
        default: {
          const subtype = String(request.subtype)
          // Elicitations (an MCP server asking the user) are declined, as the official SDK does without a handler.
          const answer: Session.Reply = subtype === "elicitation"
            ? { _tag: "Success", payload: { action: "decline" } }
            : { _tag: "Error", message: `Unsupported control request subtype: ${subtype}` }
          return [frameEvent("control_request", subtype, frame), {
            _tag: "Request",
            requestId: frame.request_id,
            handle: Effect.succeed(answer)
          }]
        }
      }
    }
    case "control_cancel_request":
      return [{ _tag: "Cancel", requestId: frame.request_id }, frameEvent("control_cancel_request", undefined, frame)]
    default:
      return [frameEvent(frame.type, str(asRecord(frame)["subtype"]), frame)]
  }
}

/**
 * The Claude stream-json protocol as a {@link Session.Protocol}.
 *
 * @category protocol
 * @since 0.1.0
 */
export const protocol = (options: {
  readonly hooks?: Options["hooks"]
  readonly initialize?: Options["initialize"]
  readonly maxLineLength?: number | undefined
}): Session.Protocol => {
  const callbacks = new Map<string, HookCallback>()
  const hookConfig: Record<string, Array<{ matcher?: string; hookCallbackIds: Array<string>; timeout?: number }>> = {}
  let counter = 0
  for (const [event, list] of Object.entries(options.hooks ?? {})) {
    hookConfig[event] = list.map((hook) => {
      const id = `hook_${event}_${++counter}`
      callbacks.set(id, hook)
      return {
        ...(hook.matcher !== undefined ? { matcher: hook.matcher } : {}),
        hookCallbackIds: [id],
        ...(hook.timeout !== undefined ? { timeout: hook.timeout } : {})
      }
    })
  }
  const decodeOptions = { maxLineLength: options.maxLineLength ?? ClaudeProtocol.defaultMaxLineLength }
  return {
    name: "claude",
    decode: (line) => {
      const decoded = ClaudeProtocol.decodeLine(line, decodeOptions)
      if (Result.isFailure(decoded)) return decoded.failure
      const value = decoded.success
      if (value._tag === "Unknown") return frameEvent(value.type, value.subtype, value.raw)
      return route(value.frame, callbacks)
    },
    encodePrompt: (turnId, prompt) =>
      ClaudeProtocol.encodeUserMessage({
        type: "user",
        message: { role: "user", content: prompt },
        parent_tool_use_id: null,
        session_id: "",
        uuid: turnId
      }),
    encodeControl: (requestId, request) =>
      ClaudeProtocol.encodeControlRequest(requestId, request as ClaudeProtocol.ControlRequestInput),
    encodeReply: (requestId, reply) =>
      reply._tag === "Success"
        ? ClaudeProtocol.encodeControlSuccess(requestId, asRecord(reply.payload))
        : ClaudeProtocol.encodeControlError(requestId, reply.message),
    permissionReply: (request, decision) =>
      decision._tag === "Allow"
        ? {
          _tag: "Success",
          payload: {
            behavior: "allow",
            updatedInput: decision.updatedInput ?? request.input,
            ...(request.toolUseId !== undefined ? { toolUseID: request.toolUseId } : {})
          }
        }
        : {
          _tag: "Success",
          payload: {
            behavior: "deny",
            message: decision.message,
            ...(decision.interrupt === true ? { interrupt: true } : {})
          }
        },
    interruptRequest: () => ({ subtype: "interrupt" }),
    handshake: (control) =>
      control({ subtype: "initialize", hooks: hookConfig, ...options.initialize }).pipe(
        Effect.flatMap((response) => {
          const decoded = ClaudeProtocol.decodeInitializeResponse(response)
          return Result.isSuccess(decoded)
            ? Effect.succeed(decoded.success)
            : Effect.fail(new HandshakeFailed({ reason: decoded.failure.message, stderrTail: "" }))
        })
      )
  }
}

/**
 * Starts a Claude session in the current scope: builds the `claude` command line from the typed options,
 * opens it through the `Transport` in context, and completes the `initialize` handshake within the startup
 * timeout. Closing the scope releases it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fn("ClaudeSession.make")(function*(options: Options = {}) {
  const timeouts = options.timeouts ?? Timeouts.defaults
  const launch = yield* ClaudeOptions.toLaunchSpec(options)
  const session = yield* Session.make({
    protocol: protocol(options),
    launch,
    timeouts,
    policy: options.policy,
    queue: options.queue,
    queueCapacity: options.queueCapacity,
    eventRing: options.eventRing,
    subscriberBuffer: options.subscriberBuffer,
    makeId: options.makeId
  })
  const initializeResponse = session.handshake as ClaudeProtocol.InitializeResponse
  // Each answer is decoded by its schema; one that does not match fails the control, like an error answer.
  const control = <A>(
    request: ClaudeProtocol.ControlRequestInput,
    decode: (payload: unknown) => Result.Result<A, ProtocolError>
  ): Effect.Effect<A, ControlError> =>
    Effect.flatMap(session.control(request), (payload) => {
      const decoded = decode(payload)
      return Result.isSuccess(decoded)
        ? Effect.succeed(decoded.success)
        : Effect.fail(
          new ControlFailed({ subtype: request.subtype, reason: decoded.failure.message, code: "malformed_response" })
        )
    })
  const claude: ClaudeSession = {
    ...session,
    initializeResponse,
    setPermissionMode: (mode) =>
      control({ subtype: "set_permission_mode", mode }, ClaudeProtocol.decodeSetPermissionModeResponse),
    setModel: (model) => control({ subtype: "set_model", model }, ClaudeProtocol.decodeSetModelResponse),
    setMaxThinkingTokens: (tokens) =>
      Effect.asVoid(session.control({ subtype: "set_max_thinking_tokens", max_thinking_tokens: tokens })),
    mcpStatus: control({ subtype: "mcp_status" }, ClaudeProtocol.decodeMcpStatusResponse),
    getContextUsage: control({ subtype: "get_context_usage" }, ClaudeProtocol.decodeContextUsageResponse)
  }
  return claude
})

/**
 * What starting a Claude session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = Session.StartError | InvalidConfig
