/**
 * The Claude codec as a session runs it, without `effect/Schema`: the line decoder of the CLI's stdout, the
 * encoders of what the host writes, the decoders of the CLI's control answers, and the permission-update guard. Every
 * frame is checked by a generated guard (guards.generated.ts, made from the schemas by `pnpm codegen`), which gives
 * `Schema.is`'s answer; `ClaudeProtocol` exports these functions with the schemas, and `ClaudeSession`, the protocol
 * machine and `ClaudePermission` use them from here, so that opening a session does not load the schemas.
 *
 * Where `effect/Schema` is loaded, and why: only when a guard refuses a value.
 *
 * - A CLI line or a host line of a known type that its guard refuses: the `ProtocolError`'s detail is the message of
 *   Effect's decoder for the frame's schema, as before, which only Effect's decoder can word. So is the defect an
 *   encoder throws for an invalid host frame.
 * - A control payload its guard refuses: the detail, likewise (and if Effect's decoder accepted it after all, its
 *   decoded value, as before).
 *
 * explain.ts (the schemas and Effect's decoder) is then loaded with a synchronous `require`, once: Node (≥ 22.12)
 * requires an ES module synchronously, and decoding is synchronous. Where `require` is not available (a runtime
 * without `process.getBuiltinModule`, a bundle without explain.js), the detail names the schema the value failed
 * instead of Effect's message; the answer (refused) is the same.
 *
 * @internal
 */
import * as Explainer from "@tether/core/codec/Explainer"
import type { ProtocolError } from "@tether/core/TetherError"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import { type DecodeOptions, defaultMaxLineLength } from "../../ClaudeWire.ts"
import type { Decoded, Frame } from "./cliFrames.ts"
import type {
  BackgroundTasksResponse,
  ContextUsageResponse,
  ControlRequestInput,
  ControlSuccessPayload,
  InitializeResponse,
  InterruptResponse,
  McpPermissionModeOverrideResponse,
  McpReadResourceResponse,
  McpSetServersResponse,
  McpStatusResponse,
  OpenResponse,
  PermissionUpdate,
  ReadFileResponse,
  ReloadOutputStylesResponse,
  ReloadPluginsResponse,
  ReloadSkillsResponse,
  RewindFilesResponse,
  SetModelResponse,
  SetPermissionModeResponse
} from "./controls.ts"
import type * as Explain from "./explain.ts"
import * as Guards from "./guards.generated.ts"
import type { HostFrame, UserMessageInput } from "./hostFrames.ts"
import { malformed, malformedError, notJson, parseJson, tooLong, tooLongError } from "./lineErrors.ts"

export type { DecodeOptions } from "../../ClaudeWire.ts"
export type * from "./cliFrames.ts"
export type * from "./controls.ts"
export type * from "./hostFrames.ts"
export { defaultMaxLineLength }

// ---------------------------------------------------------------------------------------------------------------
// The failure path: Effect's decoder, loaded when a guard refuses a value
// ---------------------------------------------------------------------------------------------------------------

const explain: (schema: string, input: unknown) => Explainer.Decoded = Explainer.lazy(import.meta.url)

/** What is wrong with a frame, or undefined when it is valid. Only a refused frame pays for the explanation. */
const problemOf = (check: Guards.Check, input: object): string | undefined => {
  if (check.is(input)) return undefined
  const decoded = explain(check.schema, input)
  return decoded._tag === "Failure" ? decoded.message : undefined
}

// ---------------------------------------------------------------------------------------------------------------
// CLI → host: stdout lines
// ---------------------------------------------------------------------------------------------------------------

/** A frame classified, or why it is not a frame. Plain values: this runs once per stdout line. */
type Classified = Decoded | string

type JsonObject = { readonly [k: string]: unknown }

const isJsonObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

const isOptionalString = (u: unknown): boolean => u === undefined || typeof u === "string"

/** The string field of each known delta type (each of those schemas is `{ type, <field>: string }` plus extra keys). */
const deltaField = (type: unknown): string | undefined => {
  switch (type) {
    case "text_delta":
      return "text"
    case "input_json_delta":
      return "partial_json"
    case "thinking_delta":
      return "thinking"
    case "signature_delta":
      return "signature"
    default:
      return undefined
  }
}

/**
 * A hand-written guard for the bulk of a streamed turn, `stream_event` frames carrying a known
 * `content_block_delta`: it accepts only frames that `StreamEventFrame` accepts (a property test holds it to that),
 * in a few property reads instead of the struct walk over every key. Anything it does not accept goes to the
 * frame's guard, which decides, so it can only make decoding faster, never laxer. The input comes from `JSON.parse`:
 * no `undefined` values, no prototypes but `Object.prototype`.
 */
const isContentBlockDeltaFrame = (raw: JsonObject): boolean => {
  const event = raw.event
  if (!isJsonObject(event) || event.type !== "content_block_delta") return false
  const index = event.index
  if (typeof index !== "number" || !Number.isFinite(index)) return false
  const delta = event.delta
  if (!isJsonObject(delta)) return false
  const field = deltaField(delta.type)
  if (field === undefined || typeof delta[field] !== "string") return false
  const parent = raw.parent_tool_use_id
  if (parent !== null && typeof parent !== "string") return false
  if (typeof raw.session_id !== "string" || typeof raw.uuid !== "string") return false
  if (!isOptionalString(raw.api_message_id) || !isOptionalString(raw.user_message_uuid)) return false
  const ttft = raw.ttft_ms
  if (ttft !== undefined && (typeof ttft !== "number" || !Number.isFinite(ttft))) return false
  const uuids = raw.user_message_uuids
  if (uuids !== undefined) {
    if (!Array.isArray(uuids)) return false
    for (let i = 0; i < uuids.length; i++) if (typeof uuids[i] !== "string") return false
  }
  return true
}

const checked = (check: Guards.Check, raw: JsonObject, what: string): Classified => {
  const problem = problemOf(check, raw)
  return problem === undefined ? { _tag: "Frame", frame: raw as Frame } : `${what}: ${problem}`
}

const unknownFrame = (type: string, subtype: unknown, raw: JsonObject): Classified => ({
  _tag: "Unknown",
  type,
  subtype: typeof subtype === "string" ? subtype : undefined,
  raw
})

/**
 * Dispatches on `type` (and `subtype` / `request.subtype`) and runs the guard of that frame only. The tables come
 * from the `Frame` union (see the generator), so a frame added to it is checked, never decoded as `Unknown`.
 */
const classify = (json: unknown): Classified => {
  if (!isJsonObject(json)) return "a frame must be a JSON object"
  const raw = json
  const type = raw.type
  if (typeof type !== "string") return "a frame must have a string `type`"
  switch (type) {
    case "system": {
      const subtype = raw.subtype
      if (typeof subtype !== "string") return "a system frame must have a string `subtype`"
      const check = Guards.systemFrames.get(subtype)
      return check === undefined ? unknownFrame(type, subtype, raw) : checked(check, raw, `system/${subtype}`)
    }
    case "control_request": {
      const request = raw.request
      const subtype = Predicate.isObject(request) ? (request as { readonly subtype?: unknown }).subtype : undefined
      if (typeof subtype !== "string") return "a control_request must have a `request` object with a string `subtype`"
      const check = Guards.controlRequests.get(subtype) ?? Guards.otherControlRequest
      return checked(check, raw, `control_request/${subtype}`)
    }
    default: {
      if (type === "stream_event" && isContentBlockDeltaFrame(raw)) return { _tag: "Frame", frame: raw as Frame }
      const check = Guards.frames.get(type)
      return check === undefined ? unknownFrame(type, raw.subtype, raw) : checked(check, raw, type)
    }
  }
}

/**
 * Decodes one line of the CLI's stdout (without its newline). Synchronous and on the hot path: the line is
 * measured before anything else, parsed once, and only the guard of its `type` runs.
 *
 * Fails with `ProtocolError`: `too-long` (the line is not parsed), `not-json`, or `malformed` (not an object, no
 * string `type`, or a known type whose body does not match its schema).
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { ClaudeProtocol } from "@tether/claude"
 *
 * const decoded = ClaudeProtocol.decodeLine(`{"type":"keep_alive"}`)
 * if (Result.isSuccess(decoded) && decoded.success._tag === "Frame") {
 *   console.log(decoded.success.frame.type) // "keep_alive"
 * }
 * ```
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeLine = (line: string, options?: DecodeOptions): Result.Result<Decoded, ProtocolError> => {
  const decoded = decodeLineOrError(line, options)
  return decoded._tag === "ProtocolError" ? Result.fail(decoded) : Result.succeed(decoded)
}

/**
 * {@link decodeLine} without the `Result`: the decoded line, or its `ProtocolError` (told apart by `_tag`). What a
 * session's protocol machine runs on every stdout line.
 */
export const decodeLineOrError = (line: string, options?: DecodeOptions): Decoded | ProtocolError => {
  const limit = options?.maxLineLength ?? defaultMaxLineLength
  if (line.length > limit) return tooLongError(line, limit)
  // Parsed and classified without intermediate results: this runs once per stdout line.
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return notJson(line, error)
  }
  const classified = classify(json)
  return typeof classified === "string" ? malformedError(line, classified) : classified
}

/**
 * Encodes a decoded CLI frame back to one line, with every field it came with (round trip). Throws (a defect) if
 * the value is not a valid frame.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeFrame = (frame: Frame): string => {
  const classified = classify(frame)
  if (typeof classified === "string") {
    throw new Error(`ClaudeProtocol.encodeFrame: refusing to write an invalid frame: ${classified}`)
  }
  if (classified._tag === "Unknown") {
    throw new Error(`ClaudeProtocol.encodeFrame: not a known frame: ${classified.type}`)
  }
  return JSON.stringify(frame)
}

// ---------------------------------------------------------------------------------------------------------------
// Host → CLI: stdin lines
// ---------------------------------------------------------------------------------------------------------------

const hostCheck = (schema: Explain.SchemaName, is: (u: unknown) => boolean): Guards.Check => ({ schema, is })

/**
 * Validates a host frame and writes it as JSON. The frame's Type is its JSON form (no transformations), so the
 * validated value itself is serialized.
 */
const encoderFor = <A>(check: Guards.Check, name: string) => (value: A): string => {
  const problem = problemOf(check, value as object)
  if (problem !== undefined) {
    throw new Error(`ClaudeProtocol.${name}: refusing to write an invalid frame: ${problem}`)
  }
  return JSON.stringify(value)
}

const hostFrame = hostCheck("HostFrame", Guards.isHostFrame)
const writeHostFrame = encoderFor<HostFrame>(hostFrame, "encodeHostFrame")
const checkedUserMessage = encoderFor<UserMessageInput>(
  hostCheck("HostUserMessage", Guards.isHostUserMessage),
  "encodeUserMessage"
)

const isPlainObject = (u: unknown): u is { readonly [k: string]: unknown } =>
  typeof u === "object" && u !== null && Object.getPrototypeOf(u) === Object.prototype

const isTextBlock = (u: unknown): boolean =>
  isPlainObject(u) && u.type === "text" && typeof u.text === "string" && Object.keys(u).length === 2

/**
 * The prompt a session sends every turn, `{ type: "user", message: { role: "user", content }, parent_tool_use_id,
 * session_id, uuid? }` with text content and no other keys, checked by hand (plain objects and strings are JSON by
 * construction). It accepts only what `HostUserMessage` accepts (a property test holds it to that); any other
 * message goes through the guard.
 */
const isPlainUserMessage = (value: UserMessageInput): boolean => {
  if (!isPlainObject(value) || value.type !== "user") return false
  const parent = value.parent_tool_use_id
  if ((parent !== null && typeof parent !== "string") || typeof value.session_id !== "string") return false
  const keys = Object.keys(value).length
  if ("uuid" in value ? typeof value.uuid !== "string" || keys !== 5 : keys !== 4) return false
  const message = value.message
  if (!isPlainObject(message) || message.role !== "user" || Object.keys(message).length !== 2) return false
  const content = message.content
  if (typeof content === "string") return true
  if (!Array.isArray(content) || Object.getPrototypeOf(content) !== Array.prototype) return false
  for (let i = 0; i < content.length; i++) if (!isTextBlock(content[i])) return false
  return true
}

const writeUserMessage = (message: UserMessageInput): string =>
  isPlainUserMessage(message) ? JSON.stringify(message) : checkedUserMessage(message)
const writeControlRequest = encoderFor<HostFrame>(
  hostCheck("HostControlRequest", Guards.isHostControlRequest),
  "encodeControlRequest"
)
const writeControlResponse = encoderFor<HostFrame>(
  hostCheck("HostControlResponse", Guards.isHostControlResponse),
  "encodeControlSuccess"
)
const writeControlCancel = encoderFor<HostFrame>(
  hostCheck("HostControlCancelRequest", Guards.isHostControlCancelRequest),
  "encodeControlCancel"
)

/**
 * Encodes a user message as one line (no trailing newline).
 *
 * Throws (a defect) if the value is not a valid frame, e.g. a content block holding a non-JSON value.
 *
 * @example
 * ```ts
 * import { ClaudeProtocol } from "@tether/claude"
 *
 * const line = ClaudeProtocol.encodeUserMessage({
 *   type: "user",
 *   message: { role: "user", content: [{ type: "text", text: "Say hello" }] },
 *   parent_tool_use_id: null,
 *   session_id: "",
 *   uuid: "e965fb50-5d14-4270-bf4c-e88d19c77449"
 * })
 * ```
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeUserMessage = (message: UserMessageInput): string => writeUserMessage(message)

/**
 * Encodes a control request from the host as one line. The request id must be unique among the host's pending
 * requests. Throws (a defect) if the request is invalid.
 *
 * @example
 * ```ts
 * import { ClaudeProtocol } from "@tether/claude"
 *
 * const line = ClaudeProtocol.encodeControlRequest("req_1", { subtype: "interrupt" })
 * ```
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeControlRequest = (requestId: string, request: ControlRequestInput): string =>
  writeControlRequest({ type: "control_request", request_id: requestId, request })

/**
 * Encodes a success answer to a CLI request (`can_use_tool`, `hook_callback`, `mcp_message`). Throws (a defect)
 * if the payload is invalid, for example a permission answer carrying a non-JSON `updatedInput`; validate
 * host-supplied payloads first with the `PermissionResult` schema to turn that into a typed error.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeControlSuccess = (requestId: string, response: ControlSuccessPayload): string =>
  writeControlResponse({ type: "control_response", response: { subtype: "success", request_id: requestId, response } })

/**
 * Encodes an error answer to a CLI request (the answer to any request the host does not support).
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeControlError = (requestId: string, error: string): string =>
  writeControlResponse({ type: "control_response", response: { subtype: "error", request_id: requestId, error } })

/**
 * Encodes a `control_cancel_request` for one of the host's own pending requests.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeControlCancel = (requestId: string): string =>
  writeControlCancel({ type: "control_cancel_request", request_id: requestId })

/**
 * Encodes any host frame (validated) as one line.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeHostFrame = (frame: HostFrame): string => writeHostFrame(frame)

/**
 * Decodes one line the host wrote (or would write) to the CLI's stdin: for mock CLIs and for checking recorded
 * transcripts. Unknown fields are kept.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeHostLine = (line: string, options?: DecodeOptions): Result.Result<HostFrame, ProtocolError> => {
  const limit = options?.maxLineLength ?? defaultMaxLineLength
  if (line.length > limit) return tooLong(line, limit)
  const parsed = parseJson(line)
  if (Result.isFailure(parsed)) return Result.fail(parsed.failure)
  const json = parsed.success
  if (!Predicate.isObject(json) || Array.isArray(json)) return malformed(line, "a frame must be a JSON object")
  const problem = problemOf(hostFrame, json)
  return problem === undefined ? Result.succeed(json as HostFrame) : malformed(line, problem)
}

// ---------------------------------------------------------------------------------------------------------------
// Control response payloads
// ---------------------------------------------------------------------------------------------------------------

/**
 * The decoder of a control response payload. An absent payload decodes as `{}`, since some CLI versions answer
 * without one. The payload schemas are open objects without transformations (the generator refuses any other), so a
 * payload the guard accepts is its own decoded value.
 */
const payloadDecoder = <A>(schema: Explain.SchemaName, is: (u: unknown) => boolean) =>
(
  payload: unknown
): Result.Result<A, ProtocolError> => {
  const input = payload === undefined ? {} : payload
  if (is(input)) return Result.succeed(input as A)
  const decoded = explain(schema, input)
  // The payload's JSON stands for the line in the error, as it does for a frame.
  return decoded._tag === "Success"
    ? Result.succeed(decoded.value as A)
    : malformed(JSON.stringify(payload) ?? "", decoded.message)
}

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeInitializeResponse: (payload: unknown) => Result.Result<InitializeResponse, ProtocolError> =
  payloadDecoder("InitializeResponse", Guards.isInitializeResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeInterruptResponse: (payload: unknown) => Result.Result<InterruptResponse, ProtocolError> =
  payloadDecoder("InterruptResponse", Guards.isInterruptResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeSetPermissionModeResponse: (
  payload: unknown
) => Result.Result<SetPermissionModeResponse, ProtocolError> = payloadDecoder(
  "SetPermissionModeResponse",
  Guards.isSetPermissionModeResponse
)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeSetModelResponse: (payload: unknown) => Result.Result<SetModelResponse, ProtocolError> =
  payloadDecoder("SetModelResponse", Guards.isSetModelResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeMcpStatusResponse: (payload: unknown) => Result.Result<McpStatusResponse, ProtocolError> =
  payloadDecoder("McpStatusResponse", Guards.isMcpStatusResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeContextUsageResponse: (payload: unknown) => Result.Result<ContextUsageResponse, ProtocolError> =
  payloadDecoder("ContextUsageResponse", Guards.isContextUsageResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeRewindFilesResponse: (payload: unknown) => Result.Result<RewindFilesResponse, ProtocolError> =
  payloadDecoder("RewindFilesResponse", Guards.isRewindFilesResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeMcpSetServersResponse: (payload: unknown) => Result.Result<McpSetServersResponse, ProtocolError> =
  payloadDecoder("McpSetServersResponse", Guards.isMcpSetServersResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeMcpReadResourceResponse: (
  payload: unknown
) => Result.Result<McpReadResourceResponse, ProtocolError> = payloadDecoder(
  "McpReadResourceResponse",
  Guards.isMcpReadResourceResponse
)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeMcpPermissionModeOverrideResponse: (
  payload: unknown
) => Result.Result<McpPermissionModeOverrideResponse, ProtocolError> = payloadDecoder(
  "McpPermissionModeOverrideResponse",
  Guards.isMcpPermissionModeOverrideResponse
)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeBackgroundTasksResponse: (
  payload: unknown
) => Result.Result<BackgroundTasksResponse, ProtocolError> = payloadDecoder(
  "BackgroundTasksResponse",
  Guards.isBackgroundTasksResponse
)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeReloadPluginsResponse: (payload: unknown) => Result.Result<ReloadPluginsResponse, ProtocolError> =
  payloadDecoder("ReloadPluginsResponse", Guards.isReloadPluginsResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeReloadSkillsResponse: (payload: unknown) => Result.Result<ReloadSkillsResponse, ProtocolError> =
  payloadDecoder("ReloadSkillsResponse", Guards.isReloadSkillsResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeReloadOutputStylesResponse: (
  payload: unknown
) => Result.Result<ReloadOutputStylesResponse, ProtocolError> = payloadDecoder(
  "ReloadOutputStylesResponse",
  Guards.isReloadOutputStylesResponse
)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeReadFileResponse: (payload: unknown) => Result.Result<ReadFileResponse, ProtocolError> =
  payloadDecoder("ReadFileResponse", Guards.isReadFileResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeOpenResponse: (payload: unknown) => Result.Result<OpenResponse, ProtocolError> = payloadDecoder(
  "OpenResponse",
  Guards.isOpenResponse
)

// ---------------------------------------------------------------------------------------------------------------
// Permission updates
// ---------------------------------------------------------------------------------------------------------------

/**
 * Whether a value is a `PermissionUpdate` (what `Schema.is(PermissionUpdate)` says): how `ClaudePermission` reads
 * the CLI's suggestions.
 *
 * @category guards
 * @since 0.1.0
 */
export const isPermissionUpdate: (u: unknown) => u is PermissionUpdate = Guards.isPermissionUpdate as (
  u: unknown
) => u is PermissionUpdate
