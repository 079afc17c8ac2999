/**
 * The Agent Client Protocol as a protocol machine: JSON-RPC lines in, neutral items out; host commands in, JSON-RPC
 * lines out. Pure and synchronous (see `Provider.ts`); the state is one record ({@link State}) and every step is a
 * top-level function over it.
 *
 * What it knows of an agent (docs/protocol/acp.md): the handshake is `initialize` (optionally `authenticate`), then
 * `session/new` or `session/load`, whose session id every later request names; a prompt is a `session/prompt`
 * request whose response (with its `stopReason`) is the turn's only end, and which the agent does not acknowledge
 * before it: the turn's first `session/update` is its receipt; `session/cancel` is a notification (no answer), after
 * which the agent ends the prompt with `cancelled`; permission requests, file and terminal requests are requests of
 * the agent with ids of its own.
 *
 * @internal
 */
import { detachedPrefix } from "@tether/core/codec/Detached"
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import type { ProtocolError } from "@tether/core/TetherError"
import { TurnFailed, type Usage } from "@tether/core/Turn"
import * as Result from "effect/Result"
import { TurnLimitReached, TurnRefused } from "../AcpError.ts"
import * as Decode from "./protocol/runtime.ts"
import * as Wire from "./protocol/wire.ts"

/**
 * The result of an ACP turn: the neutral result plus the agent's stop reason.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult {
  readonly turnId: string
  /** The agent's session id: load it again with the `resume` option. */
  readonly sessionId: string | undefined
  /** The text of the turn's `agent_message_chunk`s, joined. */
  readonly text: string
  /** The agent's token usage for the turn where it reports one (see `usageOf`), zeros where it does not. */
  readonly usage: Usage
  readonly durationMs: number | undefined
  readonly raw: unknown
  /** `end_turn` for a completed turn. */
  readonly stopReason: string
}

/** How a session is opened: a new one, or one the agent loads (and replays) by id. */
export type Opening =
  | {
    readonly _tag: "New"
    readonly cwd: string
    readonly mcpServers: ReadonlyArray<unknown>
    readonly additionalDirectories: ReadonlyArray<string> | undefined
  }
  | {
    readonly _tag: "Load"
    readonly sessionId: string
    readonly cwd: string
    readonly mcpServers: ReadonlyArray<unknown>
    readonly additionalDirectories: ReadonlyArray<string> | undefined
  }

/** What the client offers the agent (`clientCapabilities`): all off unless the host serves them. */
export interface ClientCapabilities {
  readonly readTextFile: boolean
  readonly writeTextFile: boolean
  readonly terminal: boolean
}

export interface MachineOptions {
  readonly clientInfo: { readonly name: string; readonly title: string | null; readonly version: string }
  readonly clientCapabilities: ClientCapabilities
  readonly opening: Opening
  /** An `authenticate` method id to call before opening the session. */
  readonly authMethod: string | undefined
  /** Other agent methods the host answers (by its `requests` handler). */
  readonly hostMethods: ReadonlySet<string>
}

/** A request of the agent that the host answers: a file or terminal request, or a method the host serves. */
export interface AgentRequest {
  readonly _tag: "AgentRequest"
  readonly method: string
  readonly params: unknown
}

/** What the handshake returns (`session.handshake`). */
export interface HandshakeInfo {
  readonly protocolVersion: number
  readonly agentCapabilities: { readonly [key: string]: unknown }
  readonly agentInfo: { readonly name?: string; readonly version?: string; readonly [key: string]: unknown } | null
  readonly authMethods: ReadonlyArray<unknown>
  readonly sessionId: string
  /** The session's modes (`session/set_mode`), if the agent has any. */
  readonly modes:
    | {
      readonly currentModeId: string
      readonly availableModes: ReadonlyArray<{ readonly id: string; readonly name: string }>
    }
    | null
  /** The session's configuration options (`session/set_config_option`; the model is the one of category `model`). */
  readonly configOptions: ReadonlyArray<
    { readonly id: string; readonly name: string; readonly category?: string | null; readonly type: string }
  >
  /**
   * The session's models as the agent advertised them outside configuration options (`models`: Gemini CLI,
   * claude-agent-acp; chosen by the unstable `session/set_model`), if it did.
   */
  readonly models:
    | {
      readonly currentModelId: string
      readonly availableModels: ReadonlyArray<{ readonly modelId: string; readonly name: string }>
    }
    | null
  /** Whether the session was loaded (`session/load`) rather than created. */
  readonly loaded: boolean
}

/** `models` of a `session/new` or `session/load` answer (not in ACP v1's schema: checked here), if well formed. */
const modelsOf = (result: unknown): HandshakeInfo["models"] => {
  const models = (result as { readonly models?: unknown } | null)?.models as
    | { readonly currentModelId?: unknown; readonly availableModels?: unknown }
    | null
    | undefined
  if (typeof models !== "object" || models === null) return null
  const available = models.availableModels
  if (typeof models.currentModelId !== "string" || !Array.isArray(available)) return null
  const valid = available.every((model: { readonly modelId?: unknown; readonly name?: unknown } | null) =>
    typeof model === "object" && model !== null && typeof model.modelId === "string" && typeof model.name === "string"
  )
  return valid ? { currentModelId: models.currentModelId, availableModels: available } : null
}

type Pending =
  | { readonly _tag: "Initialize" }
  | { readonly _tag: "Authenticate" }
  | { readonly _tag: "Open" }
  | { readonly _tag: "Prompt"; readonly turnId: string }
  | { readonly _tag: "Control"; readonly ref: number }

interface PromptTrack {
  readonly hostId: string
  cancelling: boolean
}

/**
 * What the agent said since the last prompt ended. Prompts run one at a time on the wire (the session writes the
 * next only once the running one ended), so everything said in between belongs to the prompt that ends next: its
 * result's text. Which turn an update belongs to is the session's to say (a prompt may be queued, or dropped, before
 * it is written): the machine leaves the update's `turnId` open.
 */
interface Output {
  text: string
  /** The text of the agent's message being streamed (it ends at a tool call or with the turn). */
  message: string
  /** How many updates about the running prompt the agent sent (any kind but the session-wide ones). */
  updates: number
}

interface PermissionTrack {
  readonly id: Wire.Id
  readonly options: ReadonlyArray<{ readonly optionId: string; readonly kind: string; readonly name: string }>
}

/** The machine's state: what one ACP session's protocol has seen and is waiting for. */
export interface State {
  readonly options: MachineOptions
  nextId: number
  readonly pending: Map<number, Pending>
  phase: "initializing" | "opening" | "ready"
  initialize: Decode.InitializeResult | undefined
  sessionId: string | undefined
  /** The prompts sent (written, or waiting in the session's queue) and not answered yet, by host turn id. */
  readonly prompts: Map<string, PromptTrack>
  readonly output: Output
  /** Permission requests waiting for the host, by the agent's request id as a string. */
  readonly permissions: Map<string, PermissionTrack>
  /** Other agent requests waiting for the host. */
  readonly requests: Map<string, Wire.Id>
  /** What the running prompt's tool calls said of themselves so far, by `toolCallId` (updates merged in). */
  readonly toolCalls: Map<string, ToolCallFields>
}

/** The fields of a tool call a permission request may leave out (claude-agent-acp names only id, title, input). */
interface ToolCallFields {
  readonly name?: string | null
  readonly kind?: string | null
  readonly title?: string | null
  readonly rawInput?: unknown
}

/** `fields` with the defined ones of `update` over them. */
const mergeFields = (fields: ToolCallFields | undefined, update: ToolCallFields): ToolCallFields => {
  const merged: { -readonly [K in keyof ToolCallFields]: ToolCallFields[K] } = { ...fields }
  if (update.name !== undefined && update.name !== null) merged.name = update.name
  if (update.kind !== undefined && update.kind !== null) merged.kind = update.kind
  if (update.title !== undefined && update.title !== null) merged.title = update.title
  if (update.rawInput !== undefined) merged.rawInput = update.rawInput
  return merged
}

const SESSION_UPDATE = "session/update"

const frame = (
  type: string,
  subtype: string | undefined,
  raw: unknown,
  turnId: string | undefined,
  scope?: "session"
): Provider.Item => ({ _tag: "Frame", type, subtype, raw, turnId, scope })

const malformed = (message: Wire.Message, error: ProtocolError): Provider.Item => ({
  _tag: "Malformed",
  error,
  raw: message.raw
})

const request = (s: State, method: string, params: unknown, pending: Pending): Provider.Item => {
  const id = ++s.nextId
  s.pending.set(id, pending)
  return { _tag: "Write", line: Wire.encodeRequest(id, method, params) }
}

const errorText = (error: { readonly code: number; readonly message: string }): string =>
  `${error.message} (${error.code})`

// ---------------------------------------------------------------------------------------------------------------
// The handshake
// ---------------------------------------------------------------------------------------------------------------

/** The first request: `initialize` with the client's capabilities. */
export const start = (s: State): Provider.Items =>
  request(s, "initialize", {
    protocolVersion: 1,
    clientCapabilities: {
      fs: {
        readTextFile: s.options.clientCapabilities.readTextFile,
        writeTextFile: s.options.clientCapabilities.writeTextFile
      },
      terminal: s.options.clientCapabilities.terminal
    },
    clientInfo: s.options.clientInfo
  }, { _tag: "Initialize" })

const open = (s: State): Provider.Item => {
  const opening = s.options.opening
  const common = {
    cwd: opening.cwd,
    mcpServers: opening.mcpServers,
    ...(opening.additionalDirectories === undefined ? {} : { additionalDirectories: opening.additionalDirectories })
  }
  s.phase = "opening"
  return opening._tag === "New"
    ? request(s, "session/new", common, { _tag: "Open" })
    : request(s, "session/load", { ...common, sessionId: opening.sessionId }, { _tag: "Open" })
}

const initialized = (s: State, message: Wire.Message): Provider.Items => {
  if (message._tag === "ErrorResponse") {
    return { _tag: "Refused", reason: `the agent refused initialize: ${errorText(message.error)}` }
  }
  if (message._tag !== "Response") return undefined
  const decoded = Decode.decodeInitializeResponse("initialize", message.result)
  if (Result.isFailure(decoded)) {
    return {
      _tag: "Refused",
      reason: `the agent's initialize result does not fit the protocol: ${decoded.failure.detail}`
    }
  }
  const result = decoded.success
  if (result.protocolVersion !== 1) {
    return {
      _tag: "Refused",
      reason: `the agent speaks ACP version ${result.protocolVersion}; Tether speaks version 1`
    }
  }
  s.initialize = result
  const opening = s.options.opening
  if (opening._tag === "Load" && result.agentCapabilities?.loadSession !== true) {
    return {
      _tag: "Refused",
      reason: `session/load of ${opening.sessionId}: the agent does not advertise loadSession`
    }
  }
  const additional = opening.additionalDirectories
  if (
    additional !== undefined && additional.length > 0 &&
    (result.agentCapabilities?.sessionCapabilities?.additionalDirectories ?? null) === null
  ) {
    // The agent would ignore them (or refuse the session): the host asked for a workspace it cannot have.
    return {
      _tag: "Refused",
      reason: "additionalDirectories: the agent does not advertise sessionCapabilities.additionalDirectories"
    }
  }
  const event = frame("initialize", undefined, message.raw, undefined, "session")
  if (s.options.authMethod !== undefined) {
    return [event, request(s, "authenticate", { methodId: s.options.authMethod }, { _tag: "Authenticate" })]
  }
  return [event, open(s)]
}

const authenticated = (s: State, message: Wire.Message): Provider.Items => {
  if (message._tag === "ErrorResponse") {
    return { _tag: "Refused", reason: `the agent refused authenticate: ${errorText(message.error)}` }
  }
  return [frame("authenticate", undefined, message.raw, undefined, "session"), open(s)]
}

const opened = (s: State, message: Wire.Message): Provider.Items => {
  const opening = s.options.opening
  const method = opening._tag === "New" ? "session/new" : "session/load"
  if (message._tag === "ErrorResponse") {
    return {
      _tag: "Refused",
      reason: opening._tag === "New"
        ? `the agent refused session/new: ${errorText(message.error)}`
        : `session/load of ${opening.sessionId} failed: ${errorText(message.error)}`
    }
  }
  if (message._tag !== "Response") return undefined
  const decoded = opening._tag === "New"
    ? Decode.decodeNewSessionResponse(method, message.result)
    : Decode.decodeLoadSessionResponse(method, message.result)
  if (Result.isFailure(decoded)) {
    return {
      _tag: "Refused",
      reason: `the agent's ${method} result does not fit the protocol: ${decoded.failure.detail}`
    }
  }
  const result = decoded.success as Decode.OpenResult
  const sessionId = opening._tag === "New" ? (result as { readonly sessionId: string }).sessionId : opening.sessionId
  s.sessionId = sessionId
  s.phase = "ready"
  const init = s.initialize!
  const info: HandshakeInfo = {
    protocolVersion: init.protocolVersion,
    agentCapabilities: (init.agentCapabilities ?? {}) as HandshakeInfo["agentCapabilities"],
    agentInfo: (init.agentInfo ?? null) as HandshakeInfo["agentInfo"],
    authMethods: init.authMethods ?? [],
    sessionId,
    modes: (result.modes ?? null) as HandshakeInfo["modes"],
    configOptions: (result.configOptions ?? []) as HandshakeInfo["configOptions"],
    models: modelsOf(message.result),
    loaded: opening._tag === "Load"
  }
  return [
    frame(method, undefined, message.raw, undefined, "session"),
    { _tag: "SessionId", sessionId },
    { _tag: "Ready", info }
  ]
}

// ---------------------------------------------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------------------------------------------

const count = (value: unknown): number => typeof value === "number" && Number.isFinite(value) ? value : 0

const record = (value: unknown): { readonly [key: string]: unknown } | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as { readonly [key: string]: unknown }
    : undefined

/**
 * The turn's token usage, where the agent reports it outside ACP v1's schema: `usage` on the prompt's response
 * (`inputTokens`, `outputTokens`, `cachedReadTokens`, `cachedWriteTokens`: claude-agent-acp, and ACP's unstable
 * draft) or `_meta.quota.token_count` (`input_tokens`, `output_tokens`: Gemini CLI). Zeros when it reports neither.
 */
export const usageOf = (result: unknown): Usage => {
  const usage = record(record(result)?.usage)
  if (usage !== undefined) {
    return {
      inputTokens: count(usage.inputTokens),
      outputTokens: count(usage.outputTokens),
      cacheCreationInputTokens: count(usage.cachedWriteTokens),
      cacheReadInputTokens: count(usage.cachedReadTokens)
    }
  }
  const tokens = record(record(record(record(result)?._meta)?.quota)?.token_count)
  return {
    inputTokens: count(tokens?.input_tokens),
    outputTokens: count(tokens?.output_tokens),
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0
  }
}

/**
 * A prompt's answer that reports token usage, all of it zero: no model call ran for it. claude-agent-acp ends the
 * prompt after a cancelled or failed one so, at once, before its model call for that prompt starts (whose answer
 * then reaches no prompt). An agent that reports no usage (Gemini CLI reports it in `_meta`) is never taken for it.
 */
const answeredUnasked = (result: unknown): boolean => {
  const usage = record(record(result)?.usage)
  if (usage === undefined) return false
  const used = usageOf(result)
  return used.inputTokens === 0 && used.outputTokens === 0 && count(usage.totalTokens) === 0
}

const resultOf = (
  s: State,
  text: string,
  raw: unknown,
  stopReason: string,
  usage: Usage
): Omit<TurnResult, "turnId"> => ({
  sessionId: s.sessionId,
  text,
  usage,
  durationMs: undefined,
  raw,
  stopReason
})

/**
 * The agent's requests still open when its prompt ends: withdrawn from the host, and answered, so that the agent
 * (which may still hold them: a `terminal/wait_for_exit` on a terminal it left running) never waits on an answer
 * that cannot come: a permission `cancelled`, any other request `-32800` "Request cancelled".
 */
const withdrawRequests = (s: State): Array<Provider.Item> => {
  const items: Array<Provider.Item> = []
  for (const [key, track] of s.permissions) {
    items.push(
      { _tag: "Cancel", requestId: key },
      { _tag: "Write", line: Wire.encodeResponse(track.id, { outcome: { outcome: "cancelled" } }) }
    )
  }
  s.permissions.clear()
  for (const [key, id] of s.requests) {
    items.push(
      { _tag: "Cancel", requestId: key },
      { _tag: "Write", line: Wire.encodeErrorResponse(id, Wire.errorCodes.requestCancelled, "Request cancelled") }
    )
  }
  s.requests.clear()
  return items
}

/** `cancelled` answers to every open permission request (the protocol's rule when a client cancels). */
const cancelPermissions = (s: State): Array<Provider.Item> => {
  const items: Array<Provider.Item> = []
  for (const [key, track] of s.permissions) {
    items.push({ _tag: "Write", line: Wire.encodeResponse(track.id, { outcome: { outcome: "cancelled" } }) })
    items.push({ _tag: "Cancel", requestId: key })
  }
  s.permissions.clear()
  return items
}

/** The agent's message streamed so far, as one `AssistantMessage` (none if it said nothing since the last one). */
const flushMessage = (s: State, raw: unknown, turnId: string | undefined): Array<Provider.Item> => {
  if (s.output.message === "") return []
  const text = s.output.message
  s.output.message = ""
  return [{ _tag: "AssistantMessage", turnId, raw, text }]
}

/**
 * Prompts are encoded when the host sends them (queued ones too) and written in that order, one at a time: when
 * `turnId`'s prompt ends, the prompts sent before it and still unanswered were dropped by the session (a queued turn
 * interrupted, a prompt never taken): forgotten, with their requests' ids.
 */
const forgetDropped = (s: State, turnId: string): void => {
  for (const earlier of s.prompts.keys()) {
    if (earlier === turnId) return
    s.prompts.delete(earlier)
    for (const [id, pending] of s.pending) {
      if (pending._tag === "Prompt" && pending.turnId === earlier) s.pending.delete(id)
    }
  }
}

const promptEnded = (s: State, message: Wire.Message, turnId: string): Provider.Items => {
  const track = s.prompts.get(turnId)
  if (track === undefined) return frame("session/prompt", undefined, message.raw, undefined, "session")
  forgetDropped(s, turnId)
  s.prompts.delete(turnId)
  s.toolCalls.clear()
  const withdrawn = withdrawRequests(s)
  const said = flushMessage(s, message.raw, turnId)
  const text = s.output.text
  const updates = s.output.updates
  s.output.text = ""
  s.output.updates = 0
  const end = (outcome: Provider.TurnOutcome, stopReason: string): Array<Provider.Item> => [
    ...withdrawn,
    ...said,
    {
      _tag: "TurnEnd",
      turnId,
      outcome,
      result: resultOf(
        s,
        text,
        message.raw,
        stopReason,
        usageOf(message._tag === "Response" ? message.result : undefined)
      )
    }
  ]
  if (message._tag === "ErrorResponse") {
    // The protocol asks agents to answer a cancelled prompt with `cancelled`; some answer "Request cancelled".
    if (track.cancelling && message.error.code === -32800) return end({ _tag: "Interrupted" }, "cancelled")
    return end({ _tag: "Api", status: httpStatus(message.error), detail: errorText(message.error) }, "error")
  }
  if (message._tag !== "Response") return undefined
  const decoded = Decode.decodePromptResponse("session/prompt", message.result)
  if (Result.isFailure(decoded)) {
    const detail = decoded.failure.detail
    return [
      malformed(message, decoded.failure),
      ...end({
        _tag: "Failed",
        error: (id) =>
          new TurnFailed({ turnId: id, subtype: "malformed-response", terminalReason: null, errors: [detail] })
      }, "malformed")
    ]
  }
  const stopReason = decoded.success.stopReason
  const sessionId = s.sessionId ?? null
  switch (stopReason) {
    case "end_turn":
      return updates === 0 && answeredUnasked(message.result)
        ? end({
          _tag: "Failed",
          error: (id) =>
            new TurnFailed({
              turnId: id,
              subtype: "empty-answer",
              terminalReason: null,
              errors: [
                "the agent ended the prompt at once, with no update and zero token usage: the model's answer did not " +
                "reach the turn (claude-agent-acp answers so the prompt after a cancelled or failed one)"
              ]
            })
        }, stopReason)
        : end({ _tag: "Success" }, stopReason)
    case "cancelled":
      return end({ _tag: "Interrupted" }, stopReason)
    case "refusal":
      return end({
        _tag: "Failed",
        error: (id) => new TurnRefused({ turnId: id, sessionId, text })
      }, stopReason)
    case "max_tokens":
    case "max_turn_requests":
      return end({
        _tag: "Failed",
        error: (id) => new TurnLimitReached({ turnId: id, sessionId, limit: stopReason, text })
      }, stopReason)
  }
}

/**
 * The model API's HTTP status behind a prompt's error answer, if the agent says it: in the error's `data`
 * (`{ status }` or `{ statusCode }`), as the error's `code` (Gemini CLI answers with the HTTP status itself; JSON-RPC's
 * own codes are negative), or in its message as `API Error: <status>` (claude-agent-acp's `-32603` "Internal error:
 * API Error: 429 {…}"). docs/protocol/acp-agents.md §4.9.
 */
const httpStatus = (
  error: { readonly code: number; readonly message: string; readonly data?: unknown }
): number | null => {
  const data = error.data
  if (typeof data === "object" && data !== null) {
    const { status, statusCode } = data as { readonly status?: unknown; readonly statusCode?: unknown }
    const value = typeof status === "number" ? status : statusCode
    if (typeof value === "number" && Number.isInteger(value)) return value
  }
  if (isHttpStatus(error.code)) return error.code
  const said = /\bAPI Error: (\d{3})\b/.exec(error.message)
  return said !== null && isHttpStatus(Number(said[1])) ? Number(said[1]) : null
}

/** An HTTP error status (4xx, 5xx). */
const isHttpStatus = (code: number): boolean => Number.isInteger(code) && code >= 400 && code <= 599

// ---------------------------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------------------------

const textOf = (content: unknown): string | undefined => {
  const block = content as { readonly type?: unknown; readonly text?: unknown }
  return block.type === "text" && typeof block.text === "string" ? block.text : undefined
}

/**
 * A tool call's input as the host's policy reads it: the agent's `rawInput` when it is an object. Without one, an
 * `execute` call's `title` is its command line (Gemini CLI sends no `rawInput` for `run_shell_command`, and its title
 * is the command), so `input.command` holds it as it does for agents that send `rawInput.command`; any other call
 * without a `rawInput` has its title alone.
 */
const inputOf = (
  rawInput: unknown,
  title: string | null | undefined,
  kind: string | null | undefined
): { readonly [key: string]: unknown } =>
  typeof rawInput === "object" && rawInput !== null && !Array.isArray(rawInput)
    ? rawInput as { readonly [key: string]: unknown }
    : rawInput === undefined
    ? (title === undefined || title === null ? {} : kind === "execute" ? { command: title, title } : { title })
    : { input: rawInput }

const toolName = (call: { readonly name?: string | null; readonly kind?: string | null }): string =>
  call.name ?? call.kind ?? "other"

/**
 * Updates about the session rather than the running prompt. Agents send them whenever they like: claude-agent-acp
 * and Gemini CLI announce their commands from a timer started when `session/new` is answered, which in practice
 * fires after the client's first prompt was written; Gemini replays a loaded conversation (`user_message_chunk`
 * first) after answering `session/load`.
 */
const sessionWide: ReadonlySet<string> = new Set([
  "available_commands_update",
  "current_mode_update",
  "config_option_update",
  "session_info_update",
  "usage_update",
  "user_message_chunk"
])

const update = (s: State, message: Extract<Wire.Message, { readonly _tag: "Notification" }>): Provider.Items => {
  const params = message.params as { readonly sessionId?: unknown; readonly update?: unknown } | undefined
  const raw = message.raw
  const body = params?.update as { readonly sessionUpdate?: unknown } | undefined
  if (typeof params?.sessionId !== "string" || typeof body?.sessionUpdate !== "string") {
    return malformed(
      message,
      Wire.paramsError(SESSION_UPDATE, "expected { sessionId: string, update: { sessionUpdate } }")
    )
  }
  const kind = body.sessionUpdate
  // Replayed history (during session/load, before any prompt), anything outside a prompt, and what says nothing
  // about the running prompt (the session's commands, mode, options, usage; the user's own words, which an agent
  // sends only when it replays a conversation) is the session's: never a turn's output, nor its receipt.
  if (s.prompts.size === 0 || params.sessionId !== s.sessionId || sessionWide.has(kind)) {
    return frame(SESSION_UPDATE, kind, raw, undefined, "session")
  }
  // The running turn's: the session attributes it.
  const turnId = undefined
  s.output.updates++
  const decoder = (Decode.updates as { readonly [key: string]: Decode.Decoder<unknown> | undefined })[kind]
  if (decoder === undefined) return frame(SESSION_UPDATE, kind, raw, turnId)
  const decoded = decoder(`${SESSION_UPDATE} ${kind}`, body)
  if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
  switch (kind) {
    case "agent_message_chunk": {
      const text = textOf((decoded.success as { readonly content: unknown }).content)
      if (text === undefined) return frame(SESSION_UPDATE, kind, raw, turnId)
      s.output.text += text
      s.output.message += text
      return { _tag: "TextDelta", turnId, raw, text }
    }
    case "tool_call": {
      const call = decoded.success as Decode.ToolCall
      s.toolCalls.set(call.toolCallId, mergeFields(undefined, call as ToolCallFields))
      const use: Provider.Item = {
        _tag: "ToolUse",
        turnId,
        raw,
        toolUseId: call.toolCallId,
        name: toolName(call),
        input: inputOf(call.rawInput, call.title, call.kind)
      }
      const said = flushMessage(s, raw, turnId)
      if (call.status !== "completed" && call.status !== "failed") return [...said, use]
      return [...said, use, toolResult(turnId, raw, call.toolCallId, call.status, call.rawOutput, call.content)]
    }
    case "tool_call_update": {
      const call = decoded.success as Decode.ToolCallUpdate
      s.toolCalls.set(call.toolCallId, mergeFields(s.toolCalls.get(call.toolCallId), call as ToolCallFields))
      if (call.status !== "completed" && call.status !== "failed") return frame(SESSION_UPDATE, kind, raw, turnId)
      return toolResult(turnId, raw, call.toolCallId, call.status, call.rawOutput, call.content)
    }
    default:
      return frame(SESSION_UPDATE, kind, raw, turnId)
  }
}

const toolResult = (
  turnId: string | undefined,
  raw: unknown,
  toolCallId: string,
  status: "completed" | "failed",
  rawOutput: unknown,
  content: unknown
): Provider.Item => ({
  _tag: "ToolResult",
  turnId,
  raw,
  toolUseId: toolCallId,
  isError: status === "failed",
  content: rawOutput !== undefined ? rawOutput : content ?? []
})

// ---------------------------------------------------------------------------------------------------------------
// The agent's requests
// ---------------------------------------------------------------------------------------------------------------

/** The client methods each capability serves. */
const capabilityOf = (method: string): keyof ClientCapabilities | undefined => {
  switch (method) {
    case "fs/read_text_file":
      return "readTextFile"
    case "fs/write_text_file":
      return "writeTextFile"
    case "terminal/create":
    case "terminal/output":
    case "terminal/release":
    case "terminal/wait_for_exit":
    case "terminal/kill":
      return "terminal"
    default:
      return undefined
  }
}

const agentRequest = (s: State, message: Extract<Wire.Message, { readonly _tag: "Request" }>): Provider.Items => {
  const { id, method, params, raw } = message
  const key = String(id)
  if (method === "session/request_permission") {
    const decoded = Decode.decodeRequestPermission(method, params)
    if (Result.isFailure(decoded)) {
      return [
        malformed(message, decoded.failure),
        { _tag: "Write", line: Wire.encodeErrorResponse(id, Wire.errorCodes.invalidParams, decoded.failure.detail) }
      ]
    }
    const p = decoded.success
    s.permissions.set(key, { id, options: p.options })
    // What the agent said of the tool call before, under what the request says of it now.
    const call = {
      ...mergeFields(s.toolCalls.get(p.toolCall.toolCallId), p.toolCall),
      toolCallId: p.toolCall.toolCallId
    }
    const allowAlways = p.options.filter((option) => option.kind === "allow_always")
    return {
      _tag: "PermissionRequest",
      request: {
        requestId: key,
        kind: "tool",
        toolName: toolName(call),
        toolUseId: call.toolCallId,
        input: inputOf(call.rawInput, call.title, call.kind),
        description: call.title ?? undefined,
        raw,
        ...(allowAlways.length === 0 ? {} : {
          suggestions: allowAlways.map((option) => ({
            type: allowAlwaysType,
            optionId: option.optionId,
            name: option.name
          }))
        })
      }
    }
  }
  const capability = capabilityOf(method)
  const served = capability !== undefined
    ? s.options.clientCapabilities[capability]
    : s.options.hostMethods.has(method)
  if (!served) {
    return [
      frame(method, undefined, raw, undefined, "session"),
      {
        _tag: "Write",
        line: Wire.encodeErrorResponse(id, Wire.errorCodes.methodNotFound, `Method not found: ${method}`)
      }
    ]
  }
  s.requests.set(key, id)
  return [frame(method, undefined, raw, undefined), {
    _tag: "HostRequest",
    requestId: key,
    request: { _tag: "AgentRequest", method, params } satisfies AgentRequest,
    bound: "turn"
  }]
}

/**
 * The `type` of a permission suggestion that stands for one of the agent's `allow_always` options: hand it back in
 * an allow's `updatedPermissions` to select that option instead of `allow_once`.
 */
export const allowAlwaysType = "acp/allow_always"

// ---------------------------------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------------------------------

const response = (
  s: State,
  message: Extract<Wire.Message, { readonly _tag: "Response" | "ErrorResponse" }>
): Provider.Items => {
  const id = message.id
  const pending = typeof id === "number" ? s.pending.get(id) : undefined
  if (pending === undefined) return frame("response", undefined, message.raw, undefined, "session")
  s.pending.delete(id as number)
  switch (pending._tag) {
    case "Initialize":
      return initialized(s, message)
    case "Authenticate":
      return authenticated(s, message)
    case "Open":
      return opened(s, message)
    case "Prompt":
      return promptEnded(s, message, pending.turnId)
    case "Control":
      return [frame("response", undefined, message.raw, undefined, "session"), {
        _tag: "ControlAnswer",
        ref: pending.ref,
        answer: message._tag === "Response"
          ? { _tag: "Success", payload: message.result }
          : { _tag: "Error", message: message.error.message, code: String(message.error.code) }
      }]
  }
}

const CANCEL_REQUEST = "$/cancel_request"

/**
 * The agent's `$/cancel_request { requestId }`: it no longer wants the answer to one of its requests. The request
 * is withdrawn from the host (its handler stopped, a permission expired) and answered `-32800` "Request cancelled",
 * as the protocol's cancellation asks; one the machine does not hold is a session frame.
 */
const cancelRequest = (s: State, message: Extract<Wire.Message, { readonly _tag: "Notification" }>): Provider.Items => {
  const event = frame(CANCEL_REQUEST, undefined, message.raw, undefined, "session")
  const requestId = (message.params as { readonly requestId?: unknown } | undefined)?.requestId
  if (typeof requestId !== "string" && typeof requestId !== "number") return event
  const key = String(requestId)
  const id = s.permissions.get(key)?.id ?? s.requests.get(key)
  if (id === undefined) return event
  s.permissions.delete(key)
  s.requests.delete(key)
  return [
    event,
    { _tag: "Cancel", requestId: key },
    { _tag: "Write", line: Wire.encodeErrorResponse(id, Wire.errorCodes.requestCancelled, "Request cancelled") }
  ]
}

/** Decodes one line of the agent's stdout. */
export const receive = (s: State, line: string): Provider.Items => {
  const message = Wire.decodeLineOrError(line)
  switch (message._tag) {
    case "ProtocolError":
      return { _tag: "Malformed", error: message, raw: detachedPrefix(line, 4096) }
    case "Response":
    case "ErrorResponse":
      return response(s, message)
    case "Notification":
      return message.method === SESSION_UPDATE
        ? update(s, message)
        : message.method === CANCEL_REQUEST
        ? cancelRequest(s, message)
        : frame(message.method, undefined, message.raw, undefined, "session")
    case "Request":
      return agentRequest(s, message)
  }
}

/** The `session/prompt` request of a turn. */
export const prompt = (
  s: State,
  turnId: string,
  input: string | ReadonlyArray<{ readonly type: string }>
): Provider.Items => {
  const blocks = typeof input === "string" ? [{ type: "text", text: input }] : input
  const line = request(s, "session/prompt", { sessionId: s.sessionId, prompt: blocks }, { _tag: "Prompt", turnId })
  s.prompts.set(turnId, { hostId: turnId, cancelling: false })
  return line
}

/**
 * `session/cancel` for the running turn: a notification the agent does not answer, so the interrupt's control is
 * answered here; the turn ends when the agent answers the prompt (`cancelled`), or the session's interrupt deadline
 * retires the session. Open permission requests are answered `cancelled`, as the protocol asks of a client that
 * cancels.
 */
export const interrupt = (s: State, turnId: string, ref: number): Provider.Items => {
  const track = s.prompts.get(turnId)
  if (track === undefined) {
    throw new Error(`turn ${turnId} is not the agent's running prompt`)
  }
  track.cancelling = true
  return [
    ...cancelPermissions(s),
    { _tag: "Write", line: Wire.encodeNotification("session/cancel", { sessionId: s.sessionId }) },
    { _tag: "ControlAnswer", ref, answer: { _tag: "Success", payload: null } }
  ]
}

/** A raw request `{ method, params }`; `params.sessionId` defaults to the session's. */
export const control = (s: State, ref: number, input: unknown): Provider.Items => {
  const { method, params } = (input ?? {}) as { readonly method?: unknown; readonly params?: unknown }
  if (typeof method !== "string") throw new Error("an ACP control is { method, params }")
  if (params !== undefined && (typeof params !== "object" || params === null || Array.isArray(params))) {
    throw new Error("an ACP control's params are an object")
  }
  return request(s, method, { sessionId: s.sessionId, ...(params as object | undefined) }, { _tag: "Control", ref })
}

const optionOf = (track: PermissionTrack, ...kinds: ReadonlyArray<string>): string | undefined => {
  for (const kind of kinds) {
    const option = track.options.find((candidate) => candidate.kind === kind)
    if (option !== undefined) return option.optionId
  }
  return undefined
}

/**
 * The answer to a permission request: allow selects the agent's `allow_once` option (or the `allow_always` one the
 * host handed back from the request's suggestions); deny selects `reject_once` (else `reject_always`), with the
 * reason in `_meta.tether.reason` (the protocol has no field for it); deny with `interrupt` answers `cancelled` and
 * cancels the prompt.
 */
export const answerPermission = (
  s: State,
  request: Permission.PermissionRequest,
  verdict: Permission.Verdict
): Provider.Items => {
  const track = s.permissions.get(request.requestId)
  if (track === undefined) return undefined
  if (verdict._tag === "Allow") {
    if (verdict.updatedInput !== undefined) {
      throw new Error("an ACP agent runs what it asked about or nothing: approve the original input or deny")
    }
    const always = verdict.updatedPermissions?.find((update) => update.type === allowAlwaysType)
    // An agent that offers no allow_once (only allow_always and rejects) is allowed by its allow_always: an allow
    // never becomes a reject.
    const chosen = always !== undefined && typeof always["optionId"] === "string"
      ? always["optionId"]
      : optionOf(track, "allow_once", "allow_always")
    if (chosen === undefined) throw new Error("the agent offered no option that allows")
    s.permissions.delete(request.requestId)
    return {
      _tag: "Write",
      line: Wire.encodeResponse(track.id, { outcome: { outcome: "selected", optionId: chosen } })
    }
  }
  s.permissions.delete(request.requestId)
  const meta = { tether: { reason: verdict.message } }
  // The prompt the request belongs to is the one cancelled (never a queued one, which the agent has not seen).
  const running = request.turnId === undefined ? undefined : s.prompts.get(request.turnId)
  if (verdict.interrupt === true && running !== undefined) {
    running.cancelling = true
    return [
      { _tag: "Write", line: Wire.encodeResponse(track.id, { outcome: { outcome: "cancelled" }, _meta: meta }) },
      ...cancelPermissions(s),
      { _tag: "Write", line: Wire.encodeNotification("session/cancel", { sessionId: s.sessionId }) }
    ]
  }
  const reject = optionOf(track, "reject_once", "reject_always")
  return {
    _tag: "Write",
    line: Wire.encodeResponse(
      track.id,
      reject === undefined
        ? { outcome: { outcome: "cancelled" }, _meta: meta }
        : { outcome: { outcome: "selected", optionId: reject }, _meta: meta }
    )
  }
}

/** The answer to an agent request the host handled (or could not). */
export const reply = (s: State, requestId: string, answer: Provider.Reply): Provider.Items => {
  const permission = s.permissions.get(requestId)
  if (permission !== undefined) {
    // A permission the host could not answer (an invalid answer): rejected.
    s.permissions.delete(requestId)
    const reject = optionOf(permission, "reject_once", "reject_always")
    return {
      _tag: "Write",
      line: Wire.encodeResponse(
        permission.id,
        reject === undefined
          ? { outcome: { outcome: "cancelled" } }
          : { outcome: { outcome: "selected", optionId: reject } }
      )
    }
  }
  const id = s.requests.get(requestId)
  if (id === undefined) return undefined
  s.requests.delete(requestId)
  return answer._tag === "Success"
    ? { _tag: "Write", line: Wire.encodeResponse(id, answer.payload) }
    : {
      _tag: "Write",
      line: Wire.encodeErrorResponse(id, answer.code ?? Wire.errorCodes.internalError, answer.message)
    }
}

/** What the provider can do, as the agent's `initialize` showed it. */
export const capabilities = (s: State): Provider.Capabilities => {
  const agent = s.initialize?.agentInfo
  return {
    provider: "acp",
    receipts: "first-output",
    interrupt: true,
    permissionKinds: ["tool"],
    resume: s.initialize?.agentCapabilities?.loadSession === true,
    sandbox: undefined,
    notes: [
      ...(agent === undefined || agent === null ? [] : [`agent ${agent.name} ${agent.version}`]),
      "no receipt: the turn's first session/update acknowledges its prompt",
      "a permission cannot run a rewritten input; a deny's reason travels in _meta only"
    ]
  }
}

/** A fresh state. */
export const initial = (options: MachineOptions): State => ({
  options,
  nextId: 0,
  pending: new Map(),
  phase: "initializing",
  initialize: undefined,
  sessionId: undefined,
  prompts: new Map(),
  output: { text: "", message: "", updates: 0 },
  permissions: new Map(),
  requests: new Map(),
  toolCalls: new Map()
})

/** The protocol machine of one ACP session: its state, and the provider's operations over it. */
export const make = (options: MachineOptions): Provider.ProtocolMachine => {
  const s = initial(options)
  return {
    start: () => start(s),
    receive: (line) => receive(s, line),
    prompt: (turnId, input) => prompt(s, turnId, input),
    interrupt: (turnId, ref) => interrupt(s, turnId, ref),
    control: (ref, input) => control(s, ref, input),
    answerPermission: (request, verdict) => answerPermission(s, request, verdict),
    reply: (requestId, answer) => reply(s, requestId, answer),
    capabilities: () => capabilities(s)
  }
}
