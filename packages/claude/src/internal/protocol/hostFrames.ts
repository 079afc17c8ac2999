/**
 * The Claude codec, host → CLI: the schemas of every frame the host writes on the CLI's stdin. Their encoders and
 * the decoder of those lines (`encodeUserMessage`, …, `decodeHostLine`) are in runtime.ts, where they check the
 * frames with guards generated from these schemas.
 *
 * Every encoder validates the frame against its schema before it becomes a line, because a single line the CLI
 * cannot parse kills the CLI. An invalid value is a defect (the encoder throws): the types rule it out, so it can
 * only come from a programming error such as a non-JSON value inside a payload.
 *
 * Public through `ClaudeProtocol`. A change to a schema here needs `pnpm codegen` (a test fails until it is run).
 *
 * @internal
 */
import * as Schema from "effect/Schema"
import { ControlRequestInput, ControlSuccessPayload } from "./controls.ts"
import { inputOtherThan, openJson } from "./shared.ts"

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
// Encoding (the encoders are in runtime.ts)
// ---------------------------------------------------------------------------------------------------------------

/**
 * What `encodeUserMessage` takes: the user message frame as it goes on the wire.
 *
 * @category encoding
 * @since 0.1.0
 */
export type UserMessageInput = HostUserMessage
