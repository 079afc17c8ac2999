/**
 * The Claude codec, host → CLI: the schemas of every frame the host writes on the CLI's stdin, their encoders, and
 * the decoder of those lines (what a simulated CLI or a transcript check reads them with).
 *
 * Every encoder validates the frame against its schema before it becomes a line, because a single line the CLI
 * cannot parse kills the CLI. An invalid value is a defect (the encoder throws): the types rule it out, so it can
 * only come from a programming error such as a non-JSON value inside a payload.
 *
 * Public through `ClaudeProtocol`.
 *
 * @internal
 */
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { ProtocolError } from "../../../TetherError.ts"
import { type DecodeOptions, defaultMaxLineLength } from "../../ClaudeWire.ts"
import { ControlRequestInput, ControlSuccessPayload } from "./controls.ts"
import { checkFor, inputOtherThan, malformed, openJson, parseJson, tooLong } from "./shared.ts"

// ---------------------------------------------------------------------------------------------------------------
// Host → CLI: frames written on stdin
// ---------------------------------------------------------------------------------------------------------------

/**
 * A text block in a host user message.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostTextBlock = openJson({ type: Schema.Literal("text"), text: Schema.String })

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostTextBlock = typeof HostTextBlock.Type

/**
 * Any other block in a host user message (`image`, `document`, …): JSON, forwarded as given.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostOtherBlock = openJson({ type: inputOtherThan(["text"]) })

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostOtherBlock = typeof HostOtherBlock.Type

/**
 * A content block of a host user message.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostContentBlock = Schema.Union([HostTextBlock, HostOtherBlock])

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostContentBlock = typeof HostContentBlock.Type

/**
 * A user message written to the CLI. `uuid` (host-chosen) is echoed as `command_uuid`, `user_message_uuid(s)` and
 * the replay's `uuid`; `session_id` may be `""`. `shouldQuery: false` appends to the transcript without a turn.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostUserMessage = openJson({
  type: Schema.Literal("user"),
  message: openJson({
    role: Schema.Literal("user"),
    content: Schema.Union([Schema.String, Schema.Array(HostContentBlock)])
  }),
  parent_tool_use_id: Schema.NullOr(Schema.String),
  session_id: Schema.String,
  uuid: Schema.optionalKey(Schema.String),
  priority: Schema.optionalKey(Schema.Literals(["now", "next", "later"])),
  shouldQuery: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostUserMessage = typeof HostUserMessage.Type

/**
 * A control request from the host. The CLI answers with exactly one `control_response` with the same
 * `request_id`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostControlRequest = openJson({
  type: Schema.Literal("control_request"),
  request_id: Schema.String,
  request: ControlRequestInput
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostControlRequest = typeof HostControlRequest.Type

/**
 * A `control_response` from the host, answering a CLI request.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostControlResponse = openJson({
  type: Schema.Literal("control_response"),
  response: Schema.Union([
    openJson({
      subtype: Schema.Literal("success"),
      request_id: Schema.String,
      response: Schema.optionalKey(ControlSuccessPayload)
    }),
    openJson({
      subtype: Schema.Literal("error"),
      request_id: Schema.String,
      error: Schema.String,
      error_code: Schema.optionalKey(Schema.String)
    })
  ])
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostControlResponse = typeof HostControlResponse.Type

/**
 * The host withdraws one of its own pending requests. No reply.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostControlCancelRequest = openJson({
  type: Schema.Literal("control_cancel_request"),
  request_id: Schema.String
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostControlCancelRequest = typeof HostControlCancelRequest.Type

/**
 * Every frame the host writes on the CLI's stdin.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HostFrame = Schema.Union([
  HostUserMessage,
  HostControlRequest,
  HostControlResponse,
  HostControlCancelRequest
])

/**
 * @category host frames
 * @since 0.1.0
 */
export type HostFrame = typeof HostFrame.Type

// ---------------------------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------------------------

/**
 * Validates a host frame and writes it as JSON. The frame's Type is its JSON form (no transformations), so the
 * validated value itself is serialized.
 */
const encoderFor = <S extends Schema.Codec<unknown, unknown>>(schema: S, name: string) => {
  const check = checkFor(schema)
  return (value: S["Type"]): string => {
    const problem = check(value as object)
    if (problem !== undefined) {
      throw new Error(`ClaudeProtocol.${name}: refusing to write an invalid frame: ${problem}`)
    }
    return JSON.stringify(value)
  }
}

const writeHostFrame = encoderFor(HostFrame, "encodeHostFrame")
const checkedUserMessage = encoderFor(HostUserMessage, "encodeUserMessage")

const isPlainObject = (u: unknown): u is { readonly [k: string]: unknown } =>
  typeof u === "object" && u !== null && Object.getPrototypeOf(u) === Object.prototype

const isTextBlock = (u: unknown): boolean =>
  isPlainObject(u) && u.type === "text" && typeof u.text === "string" && Object.keys(u).length === 2

/**
 * The prompt a session sends every turn, `{ type: "user", message: { role: "user", content }, parent_tool_use_id,
 * session_id, uuid? }` with text content and no other keys, checked by hand (plain objects and strings are JSON by
 * construction). It accepts only what {@link HostUserMessage} accepts (a property test holds it to that); any other
 * message goes through the schema check.
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
const writeControlRequest = encoderFor(HostControlRequest, "encodeControlRequest")
const writeControlResponse = encoderFor(HostControlResponse, "encodeControlSuccess")
const writeControlCancel = encoderFor(HostControlCancelRequest, "encodeControlCancel")

/**
 * What {@link encodeUserMessage} takes: the user message frame as it goes on the wire.
 *
 * @category encoding
 * @since 0.1.0
 */
export type UserMessageInput = HostUserMessage

/**
 * Encodes a user message as one line (no trailing newline).
 *
 * Throws (a defect) if the value is not a valid frame, e.g. a content block holding a non-JSON value.
 *
 * @example
 * ```ts
 * import { ClaudeProtocol } from "@tether/core"
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
 * import { ClaudeProtocol } from "@tether/core"
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
 * host-supplied payloads first with the {@link PermissionResult} schema to turn that into a typed error.
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

const checkHostFrame = checkFor(HostFrame)

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
  const problem = checkHostFrame(json)
  return problem === undefined ? Result.succeed(json as HostFrame) : malformed(line, problem)
}
