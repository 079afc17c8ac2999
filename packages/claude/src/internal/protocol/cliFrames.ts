/**
 * The Claude codec, CLI → host: the schemas of every frame the CLI writes on stdout, what a decoded line is, and the
 * guards that narrow decoded frames. The line decoder and the CLI-side encoder (`decodeLine`, `encodeFrame`) are in
 * runtime.ts, where they check the frames with guards generated from these schemas, without loading them.
 *
 * - `decodeLine` parses one line once, dispatches on `type` (and `subtype` / `request.subtype`) and runs the guard of
 *   that frame only. Unknown `type` values and unknown `system` subtypes decode to {@link Decoded} `Unknown` with the
 *   raw object; a known type with a malformed body is a `ProtocolError` with reason `"malformed"`, never `Unknown`.
 * - Unknown fields are preserved at every level: decoding and then encoding a frame gives back the same JSON.
 *
 * Public through `ClaudeProtocol`. A change to a schema here needs `pnpm codegen` (a test fails until it is run).
 *
 * @internal
 */
import * as Schema from "effect/Schema"
import { open, otherThan, StringArray, type Unrecognized, withCatchAll } from "./shared.ts"

// ---------------------------------------------------------------------------------------------------------------
// Shared message parts
// ---------------------------------------------------------------------------------------------------------------

/**
 * Token usage of a model call or a turn. The CLI adds many fields (cache details, server tool use, …); they are
 * kept.
 *
 * @category message parts
 * @since 0.1.0
 */
export const Usage = open({
  input_tokens: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  output_tokens: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  cache_creation_input_tokens: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  cache_read_input_tokens: Schema.optionalKey(Schema.NullOr(Schema.Finite))
})

/**
 * @category message parts
 * @since 0.1.0
 */
export type Usage = typeof Usage.Type

/**
 * A text content block.
 *
 * @category message parts
 * @since 0.1.0
 */
export const TextBlock = open({ type: Schema.Literal("text"), text: Schema.String })

/**
 * @category message parts
 * @since 0.1.0
 */
export type TextBlock = typeof TextBlock.Type

/**
 * A thinking content block.
 *
 * @category message parts
 * @since 0.1.0
 */
export const ThinkingBlock = open({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.optionalKey(Schema.String)
})

/**
 * @category message parts
 * @since 0.1.0
 */
export type ThinkingBlock = typeof ThinkingBlock.Type

/**
 * A tool call requested by the model. In a `content_block_start` stream event its `input` is still `{}`; the
 * input arrives as `input_json_delta` pieces and is complete in the `assistant` frame.
 *
 * @category message parts
 * @since 0.1.0
 */
export const ToolUseBlock = open({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: Schema.Record(Schema.String, Schema.Unknown)
})

/**
 * @category message parts
 * @since 0.1.0
 */
export type ToolUseBlock = typeof ToolUseBlock.Type

/**
 * The result of a tool call, in a `user` frame the CLI adds after running a tool.
 *
 * @category message parts
 * @since 0.1.0
 */
export const ToolResultBlock = open({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String,
  content: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(Schema.Unknown)])),
  is_error: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category message parts
 * @since 0.1.0
 */
export type ToolResultBlock = typeof ToolResultBlock.Type

const knownContentBlockTypes = ["text", "thinking", "tool_use", "tool_result"]

/**
 * Any other content block (`redacted_thinking`, `image`, `server_tool_use`, …), kept as it came. Its `type` is
 * never one of the known block types.
 *
 * @category message parts
 * @since 0.1.0
 */
export const OtherContentBlock = open({ type: otherThan(knownContentBlockTypes) })

/**
 * @category message parts
 * @since 0.1.0
 */
export type OtherContentBlock = typeof OtherContentBlock.Type

/**
 * A content block of an assistant or user message, discriminated by `type`.
 *
 * @category message parts
 * @since 0.1.0
 */
export const ContentBlock = withCatchAll([TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock], OtherContentBlock)

/**
 * @category message parts
 * @since 0.1.0
 */
export type ContentBlock = typeof ContentBlock.Type

/**
 * A tool call that was denied during a turn, listed in the turn's `result`.
 *
 * @category message parts
 * @since 0.1.0
 */
export const PermissionDenial = open({
  tool_name: Schema.String,
  tool_use_id: Schema.String,
  tool_input: Schema.Record(Schema.String, Schema.Unknown)
})

/**
 * @category message parts
 * @since 0.1.0
 */
export type PermissionDenial = typeof PermissionDenial.Type

// ---------------------------------------------------------------------------------------------------------------
// CLI → host: control frames
// ---------------------------------------------------------------------------------------------------------------

/**
 * A successful answer to a control request. `response` is the request's payload (absent for some requests, for
 * example `set_max_thinking_tokens`, or `interrupt` on 2.1.197); decode it with the matching response decoder
 * ({@link decodeInitializeResponse}, …).
 *
 * @category control
 * @since 0.1.0
 */
export const ControlSuccessResponse = open({
  subtype: Schema.Literal("success"),
  request_id: Schema.String,
  response: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/**
 * @category control
 * @since 0.1.0
 */
export type ControlSuccessResponse = typeof ControlSuccessResponse.Type

/**
 * A refused control request (`error_code` is set by 2.1.332, e.g. `"unsupported_request"`).
 *
 * @category control
 * @since 0.1.0
 */
export const ControlErrorResponse = open({
  subtype: Schema.Literal("error"),
  request_id: Schema.String,
  error: Schema.String,
  error_code: Schema.optionalKey(Schema.String)
})

/**
 * @category control
 * @since 0.1.0
 */
export type ControlErrorResponse = typeof ControlErrorResponse.Type

/**
 * The answer to a control request. Gotcha: with `--replay-user-messages` the CLI also echoes every success
 * response the host sent it; ignore responses whose `request_id` the host did not originate.
 *
 * @category control
 * @since 0.1.0
 */
export const ControlResponseFrame = open({
  type: Schema.Literal("control_response"),
  response: Schema.Union([ControlSuccessResponse, ControlErrorResponse])
})

/**
 * @category control
 * @since 0.1.0
 */
export type ControlResponseFrame = typeof ControlResponseFrame.Type

/**
 * The body of a `can_use_tool` request: the CLI asks whether a tool call may run.
 *
 * @category control
 * @since 0.1.0
 */
export const CanUseToolParams = open({
  subtype: Schema.Literal("can_use_tool"),
  tool_name: Schema.String,
  input: Schema.Record(Schema.String, Schema.Unknown),
  tool_use_id: Schema.String,
  display_name: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String),
  title: Schema.optionalKey(Schema.String),
  permission_suggestions: Schema.optionalKey(Schema.Array(Schema.Record(Schema.String, Schema.Unknown))),
  blocked_path: Schema.optionalKey(Schema.String),
  decision_reason: Schema.optionalKey(Schema.String),
  decision_reason_type: Schema.optionalKey(Schema.String),
  agent_id: Schema.optionalKey(Schema.String),
  mcp_server: Schema.optionalKey(open({ name: Schema.String, source: Schema.optionalKey(Schema.String) }))
})

/**
 * @category control
 * @since 0.1.0
 */
export type CanUseToolParams = typeof CanUseToolParams.Type

/**
 * The body of a `hook_callback` request: the CLI runs a hook the host registered in `initialize`.
 *
 * @category control
 * @since 0.1.0
 */
export const HookCallbackParams = open({
  subtype: Schema.Literal("hook_callback"),
  callback_id: Schema.String,
  input: Schema.Record(Schema.String, Schema.Unknown),
  tool_use_id: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category control
 * @since 0.1.0
 */
export type HookCallbackParams = typeof HookCallbackParams.Type

/**
 * The body of an `mcp_message` request: a JSON-RPC message for an SDK MCP server hosted by the host.
 *
 * @category control
 * @since 0.1.0
 */
export const McpMessageParams = open({
  subtype: Schema.Literal("mcp_message"),
  server_name: Schema.String,
  message: Schema.Record(Schema.String, Schema.Unknown)
})

/**
 * @category control
 * @since 0.1.0
 */
export type McpMessageParams = typeof McpMessageParams.Type

/**
 * The body of an `elicitation` request: an MCP server the CLI runs (not an in-process one) asks the user for input,
 * with a form (`requested_schema`) or a URL to open. Answer with an {@link ElicitResult}.
 *
 * @category control
 * @since 0.1.0
 */
export const ElicitationParams = open({
  subtype: Schema.Literal("elicitation"),
  mcp_server_name: Schema.String,
  message: Schema.String,
  mode: Schema.optionalKey(Schema.Literals(["form", "url"])),
  url: Schema.optionalKey(Schema.String),
  elicitation_id: Schema.optionalKey(Schema.String),
  requested_schema: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  title: Schema.optionalKey(Schema.String),
  display_name: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String)
})

/**
 * @category control
 * @since 0.1.0
 */
export type ElicitationParams = typeof ElicitationParams.Type

/**
 * The body of a `request_user_dialog` request: a dialog of a kind the host declared in `initialize`
 * (`supportedDialogKinds`). Answer with a {@link UserDialogResult}.
 *
 * @category control
 * @since 0.1.0
 */
export const RequestUserDialogParams = open({
  subtype: Schema.Literal("request_user_dialog"),
  dialog_kind: Schema.String,
  payload: Schema.Record(Schema.String, Schema.Unknown),
  tool_use_id: Schema.optionalKey(Schema.String)
})

/**
 * @category control
 * @since 0.1.0
 */
export type RequestUserDialogParams = typeof RequestUserDialogParams.Type

const knownCliControlSubtypes = [
  "can_use_tool",
  "hook_callback",
  "mcp_message",
  "elicitation",
  "request_user_dialog"
]

/**
 * The body of any other request from the CLI (`oauth_token_refresh`, …). The host must still
 * answer it, with an error (as the SDK does: `"Unsupported control request subtype: …"`).
 *
 * @category control
 * @since 0.1.0
 */
export const OtherControlParams = open({ subtype: otherThan(knownCliControlSubtypes) })

/**
 * @category control
 * @since 0.1.0
 */
export type OtherControlParams = typeof OtherControlParams.Type

const controlRequest = <S extends Schema.Top>(request: S) =>
  open({ type: Schema.Literal("control_request"), request_id: Schema.String, request })

/**
 * The CLI asks the host for permission to run a tool. Answer with {@link encodeControlSuccess} and a
 * {@link PermissionResult}, or with {@link encodeControlError}.
 *
 * @category control
 * @since 0.1.0
 */
export const CanUseToolRequest = controlRequest(CanUseToolParams)

/**
 * @category control
 * @since 0.1.0
 */
export type CanUseToolRequest = typeof CanUseToolRequest.Type

/**
 * The CLI runs a host hook. Answer with {@link encodeControlSuccess} and a {@link HookCallbackOutput}.
 *
 * @category control
 * @since 0.1.0
 */
export const HookCallbackRequest = controlRequest(HookCallbackParams)

/**
 * @category control
 * @since 0.1.0
 */
export type HookCallbackRequest = typeof HookCallbackRequest.Type

/**
 * The CLI sends a JSON-RPC message to a host MCP server. Answer with an {@link McpMessageResponse}.
 *
 * @category control
 * @since 0.1.0
 */
export const McpMessageRequest = controlRequest(McpMessageParams)

/**
 * @category control
 * @since 0.1.0
 */
export type McpMessageRequest = typeof McpMessageRequest.Type

/**
 * An MCP server the CLI runs asks the user for input. Answer with an {@link ElicitResult}.
 *
 * @category control
 * @since 0.1.0
 */
export const ElicitationRequest = controlRequest(ElicitationParams)

/**
 * @category control
 * @since 0.1.0
 */
export type ElicitationRequest = typeof ElicitationRequest.Type

/**
 * The CLI asks the host to show a dialog. Answer with a {@link UserDialogResult}.
 *
 * @category control
 * @since 0.1.0
 */
export const RequestUserDialogRequest = controlRequest(RequestUserDialogParams)

/**
 * @category control
 * @since 0.1.0
 */
export type RequestUserDialogRequest = typeof RequestUserDialogRequest.Type

/**
 * Any other request from the CLI. Answer it with {@link encodeControlError}: an unanswered request blocks the CLI.
 *
 * @category control
 * @since 0.1.0
 */
export const OtherControlRequest = controlRequest(OtherControlParams)

/**
 * @category control
 * @since 0.1.0
 */
export type OtherControlRequest = typeof OtherControlRequest.Type

/**
 * A request from the CLI to the host, discriminated by `request.subtype`.
 *
 * @category control
 * @since 0.1.0
 */
export const ControlRequestFrame = Schema.Union([
  CanUseToolRequest,
  HookCallbackRequest,
  McpMessageRequest,
  ElicitationRequest,
  RequestUserDialogRequest,
  OtherControlRequest
])

/**
 * @category control
 * @since 0.1.0
 */
export type ControlRequestFrame = typeof ControlRequestFrame.Type

/**
 * The CLI withdraws one of its own pending requests (for example a `can_use_tool` when an interrupt arrives).
 * No reply; a late answer is ignored by the CLI.
 *
 * @category control
 * @since 0.1.0
 */
export const ControlCancelRequestFrame = open({
  type: Schema.Literal("control_cancel_request"),
  request_id: Schema.String
})

/**
 * @category control
 * @since 0.1.0
 */
export type ControlCancelRequestFrame = typeof ControlCancelRequestFrame.Type

/**
 * A keep-alive, to be ignored.
 *
 * @category control
 * @since 0.1.0
 */
export const KeepAliveFrame = open({ type: Schema.Literal("keep_alive") })

/**
 * @category control
 * @since 0.1.0
 */
export type KeepAliveFrame = typeof KeepAliveFrame.Type

// ---------------------------------------------------------------------------------------------------------------
// CLI → host: system frames
// ---------------------------------------------------------------------------------------------------------------

const system = <const Subtype extends string, const Fields extends Schema.Struct.Fields>(
  subtype: Subtype,
  fields: Fields
) =>
  open({
    type: Schema.Literal("system"),
    subtype: Schema.Literal(subtype),
    uuid: Schema.String,
    session_id: Schema.String,
    ...fields
  })

/**
 * `system/init`: emitted at the start of every turn (not at process start).
 *
 * @category system
 * @since 0.1.0
 */
export const SystemInitFrame = system("init", {
  cwd: Schema.String,
  tools: StringArray,
  mcp_servers: Schema.Array(open({ name: Schema.String, status: Schema.String })),
  model: Schema.String,
  permissionMode: Schema.String,
  apiKeySource: Schema.optionalKey(Schema.String),
  claude_code_version: Schema.optionalKey(Schema.String),
  slash_commands: Schema.optionalKey(StringArray),
  output_style: Schema.optionalKey(Schema.String),
  agents: Schema.optionalKey(StringArray),
  skills: Schema.optionalKey(StringArray),
  plugins: Schema.optionalKey(Schema.Array(Schema.Unknown)),
  capabilities: Schema.optionalKey(StringArray),
  user_message_uuids: Schema.optionalKey(StringArray)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemInitFrame = typeof SystemInitFrame.Type

/**
 * `system/status`: `"requesting"` per API request (with partial messages), `"compacting"`, or `null`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemStatusFrame = system("status", {
  status: Schema.NullOr(Schema.String),
  permissionMode: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemStatusFrame = typeof SystemStatusFrame.Type

/**
 * `system/api_retry`: the CLI retries a failed API request after `retry_delay_ms`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemApiRetryFrame = system("api_retry", {
  attempt: Schema.Finite,
  max_retries: Schema.Finite,
  retry_delay_ms: Schema.Finite,
  error_status: Schema.NullOr(Schema.Finite),
  error: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemApiRetryFrame = typeof SystemApiRetryFrame.Type

/**
 * `system/session_state_changed` (2.1.332 with `CLAUDE_CODE_SDK_READS_SESSION_STATE=1`).
 *
 * @category system
 * @since 0.1.0
 */
export const SystemSessionStateChangedFrame = system("session_state_changed", {
  state: Schema.Literals(["idle", "running", "requires_action"])
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemSessionStateChangedFrame = typeof SystemSessionStateChangedFrame.Type

/**
 * `system/task_started`: a background task (e.g. a long Bash command) is tracked.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemTaskStartedFrame = system("task_started", {
  task_id: Schema.String,
  tool_use_id: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String),
  task_type: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemTaskStartedFrame = typeof SystemTaskStartedFrame.Type

/**
 * `system/task_progress`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemTaskProgressFrame = system("task_progress", {
  task_id: Schema.String,
  tool_use_id: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemTaskProgressFrame = typeof SystemTaskProgressFrame.Type

/**
 * `system/task_notification`: a tracked task ended (`status`: `completed`, `failed`, `stopped`, …).
 *
 * @category system
 * @since 0.1.0
 */
export const SystemTaskNotificationFrame = system("task_notification", {
  task_id: Schema.String,
  status: Schema.String,
  tool_use_id: Schema.optionalKey(Schema.String),
  output_file: Schema.optionalKey(Schema.String),
  summary: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemTaskNotificationFrame = typeof SystemTaskNotificationFrame.Type

/**
 * `system/task_updated`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemTaskUpdatedFrame = system("task_updated", { task_id: Schema.String })

/**
 * @category system
 * @since 0.1.0
 */
export type SystemTaskUpdatedFrame = typeof SystemTaskUpdatedFrame.Type

/**
 * `system/permission_denied`: the CLI denied a tool use without asking. `decision_reason_type` says what denied it (a
 * deny rule, the permission mode, the auto-mode classifier, …; 2.1.332), with or without a permission prompt tool;
 * without one, a tool use that needed approval is denied as well, with no `decision_reason_type` (no one could be
 * asked). `message` is what the model reads. 2.1.197 sends none of these.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemPermissionDeniedFrame = system("permission_denied", {
  tool_name: Schema.String,
  tool_use_id: Schema.String,
  decision_reason_type: Schema.optionalKey(Schema.String),
  message: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemPermissionDeniedFrame = typeof SystemPermissionDeniedFrame.Type

/**
 * `system/compact_boundary`: the conversation was compacted.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemCompactBoundaryFrame = system("compact_boundary", {
  compact_metadata: open({
    trigger: Schema.optionalKey(Schema.String),
    pre_tokens: Schema.optionalKey(Schema.Finite)
  })
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemCompactBoundaryFrame = typeof SystemCompactBoundaryFrame.Type

/**
 * `system/background_tasks_changed`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemBackgroundTasksChangedFrame = system("background_tasks_changed", {
  tasks: Schema.Array(Schema.Unknown)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemBackgroundTasksChangedFrame = typeof SystemBackgroundTasksChangedFrame.Type

const hookFields = {
  hook_id: Schema.String,
  hook_name: Schema.String,
  hook_event: Schema.String
}

/**
 * `system/hook_started` (shell hooks, with `--include-hook-events`).
 *
 * @category system
 * @since 0.1.0
 */
export const SystemHookStartedFrame = system("hook_started", hookFields)

/**
 * @category system
 * @since 0.1.0
 */
export type SystemHookStartedFrame = typeof SystemHookStartedFrame.Type

/**
 * `system/hook_progress`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemHookProgressFrame = system("hook_progress", {
  ...hookFields,
  stdout: Schema.optionalKey(Schema.String),
  stderr: Schema.optionalKey(Schema.String),
  output: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemHookProgressFrame = typeof SystemHookProgressFrame.Type

/**
 * `system/hook_response`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemHookResponseFrame = system("hook_response", {
  ...hookFields,
  output: Schema.optionalKey(Schema.String),
  stdout: Schema.optionalKey(Schema.String),
  stderr: Schema.optionalKey(Schema.String),
  exit_code: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  outcome: Schema.optionalKey(Schema.String)
})

/**
 * @category system
 * @since 0.1.0
 */
export type SystemHookResponseFrame = typeof SystemHookResponseFrame.Type

/**
 * The known `system` frames. Other subtypes decode to {@link Decoded} `Unknown`.
 *
 * @category system
 * @since 0.1.0
 */
export const SystemFrame = Schema.Union([
  SystemInitFrame,
  SystemStatusFrame,
  SystemApiRetryFrame,
  SystemSessionStateChangedFrame,
  SystemTaskStartedFrame,
  SystemTaskProgressFrame,
  SystemTaskNotificationFrame,
  SystemTaskUpdatedFrame,
  SystemPermissionDeniedFrame,
  SystemCompactBoundaryFrame,
  SystemBackgroundTasksChangedFrame,
  SystemHookStartedFrame,
  SystemHookProgressFrame,
  SystemHookResponseFrame
])

/**
 * @category system
 * @since 0.1.0
 */
export type SystemFrame = typeof SystemFrame.Type

// ---------------------------------------------------------------------------------------------------------------
// CLI → host: conversation frames
// ---------------------------------------------------------------------------------------------------------------

/**
 * `command_lifecycle` (2.1.332): the progress of a uuid-stamped user message. `queued` (≈10 ms after the write)
 * is the reliable "the CLI has received my message" acknowledgement.
 *
 * @category conversation
 * @since 0.1.0
 */
export const CommandLifecycleFrame = open({
  type: Schema.Literal("command_lifecycle"),
  command_uuid: Schema.String,
  state: Schema.Literals(["queued", "started", "completed", "cancelled"]),
  uuid: Schema.String,
  session_id: Schema.String
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type CommandLifecycleFrame = typeof CommandLifecycleFrame.Type

/**
 * The model message inside an `assistant` frame. `stop_reason` is `null` and `usage` is not final: the real ones
 * come in the `result`.
 *
 * @category conversation
 * @since 0.1.0
 */
export const AssistantMessage = open({
  id: Schema.String,
  type: Schema.optionalKey(Schema.Literal("message")),
  role: Schema.Literal("assistant"),
  model: Schema.String,
  content: Schema.Array(ContentBlock),
  stop_reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
  stop_sequence: Schema.optionalKey(Schema.NullOr(Schema.String)),
  usage: Schema.optionalKey(Usage)
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type AssistantMessage = typeof AssistantMessage.Type

const messageFields = {
  parent_tool_use_id: Schema.NullOr(Schema.String),
  session_id: Schema.String,
  uuid: Schema.String,
  timestamp: Schema.optionalKey(Schema.String),
  user_message_uuid: Schema.optionalKey(Schema.String),
  user_message_uuids: Schema.optionalKey(StringArray)
}

/**
 * An `assistant` frame: one per completed content block. `aborted: true` marks a message cut by an interrupt
 * (2.1.332); an API error is a synthetic message with `is_api_error_message: true`, `error` and
 * `api_error_status`.
 *
 * @category conversation
 * @since 0.1.0
 */
export const AssistantFrame = open({
  type: Schema.Literal("assistant"),
  message: AssistantMessage,
  ...messageFields,
  request_id: Schema.optionalKey(Schema.String),
  aborted: Schema.optionalKey(Schema.Boolean),
  error: Schema.optionalKey(Schema.String),
  is_api_error_message: Schema.optionalKey(Schema.Boolean),
  api_error_status: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  api_error_type: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type AssistantFrame = typeof AssistantFrame.Type

/**
 * The message inside a `user` frame.
 *
 * @category conversation
 * @since 0.1.0
 */
export const UserMessage = open({
  role: Schema.Literal("user"),
  content: Schema.Union([Schema.String, Schema.Array(ContentBlock)])
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type UserMessage = typeof UserMessage.Type

/**
 * A `user` frame from the CLI: the replay of the host's own message (`isReplay: true`, same `uuid`; only with
 * `--replay-user-messages`), a tool result the CLI adds, or an interrupt marker (`[Request interrupted by user]`).
 * Gotcha: the replay comes when the turn commits the prompt, not on receipt (see {@link CommandLifecycleFrame}).
 *
 * @category conversation
 * @since 0.1.0
 */
export const UserFrame = open({
  type: Schema.Literal("user"),
  message: UserMessage,
  ...messageFields,
  isReplay: Schema.optionalKey(Schema.Boolean),
  isSynthetic: Schema.optionalKey(Schema.Boolean),
  tool_use_result: Schema.optionalKey(Schema.Unknown)
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type UserFrame = typeof UserFrame.Type

/**
 * A text delta.
 *
 * @category stream events
 * @since 0.1.0
 */
export const TextDelta = open({ type: Schema.Literal("text_delta"), text: Schema.String })

/**
 * @category stream events
 * @since 0.1.0
 */
export type TextDelta = typeof TextDelta.Type

/**
 * A piece of a tool call's input JSON.
 *
 * @category stream events
 * @since 0.1.0
 */
export const InputJsonDelta = open({ type: Schema.Literal("input_json_delta"), partial_json: Schema.String })

/**
 * @category stream events
 * @since 0.1.0
 */
export type InputJsonDelta = typeof InputJsonDelta.Type

/**
 * A thinking delta.
 *
 * @category stream events
 * @since 0.1.0
 */
export const ThinkingDelta = open({ type: Schema.Literal("thinking_delta"), thinking: Schema.String })

/**
 * @category stream events
 * @since 0.1.0
 */
export type ThinkingDelta = typeof ThinkingDelta.Type

/**
 * A thinking block's signature.
 *
 * @category stream events
 * @since 0.1.0
 */
export const SignatureDelta = open({ type: Schema.Literal("signature_delta"), signature: Schema.String })

/**
 * @category stream events
 * @since 0.1.0
 */
export type SignatureDelta = typeof SignatureDelta.Type

/**
 * Any other delta (`citations_delta`, …), kept as it came.
 *
 * @category stream events
 * @since 0.1.0
 */
export const OtherDelta = open({
  type: otherThan(["text_delta", "input_json_delta", "thinking_delta", "signature_delta"])
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type OtherDelta = typeof OtherDelta.Type

/**
 * The delta of a `content_block_delta` event, discriminated by `type`.
 *
 * @category stream events
 * @since 0.1.0
 */
export const ContentDelta = withCatchAll([TextDelta, InputJsonDelta, ThinkingDelta, SignatureDelta], OtherDelta)

/**
 * @category stream events
 * @since 0.1.0
 */
export type ContentDelta = typeof ContentDelta.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const MessageStartEvent = open({
  type: Schema.Literal("message_start"),
  message: open({
    id: Schema.String,
    model: Schema.optionalKey(Schema.String),
    usage: Schema.optionalKey(Usage)
  })
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type MessageStartEvent = typeof MessageStartEvent.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const ContentBlockStartEvent = open({
  type: Schema.Literal("content_block_start"),
  index: Schema.Finite,
  content_block: ContentBlock
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type ContentBlockStartEvent = typeof ContentBlockStartEvent.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const ContentBlockDeltaEvent = open({
  type: Schema.Literal("content_block_delta"),
  index: Schema.Finite,
  delta: ContentDelta
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type ContentBlockDeltaEvent = typeof ContentBlockDeltaEvent.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const ContentBlockStopEvent = open({ type: Schema.Literal("content_block_stop"), index: Schema.Finite })

/**
 * @category stream events
 * @since 0.1.0
 */
export type ContentBlockStopEvent = typeof ContentBlockStopEvent.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const MessageDeltaEvent = open({
  type: Schema.Literal("message_delta"),
  delta: open({
    stop_reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
    stop_sequence: Schema.optionalKey(Schema.NullOr(Schema.String))
  }),
  usage: Schema.optionalKey(Usage)
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type MessageDeltaEvent = typeof MessageDeltaEvent.Type

/**
 * @category stream events
 * @since 0.1.0
 */
export const MessageStopEvent = open({ type: Schema.Literal("message_stop") })

/**
 * @category stream events
 * @since 0.1.0
 */
export type MessageStopEvent = typeof MessageStopEvent.Type

/**
 * Any other Messages API event (`ping` is not forwarded by the CLI, but others may come), kept as it came.
 *
 * @category stream events
 * @since 0.1.0
 */
export const OtherStreamEvent = open({
  type: otherThan([
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop"
  ])
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type OtherStreamEvent = typeof OtherStreamEvent.Type

/**
 * A raw Messages API streaming event, discriminated by `type`.
 *
 * @category stream events
 * @since 0.1.0
 */
export const StreamEvent = withCatchAll([
  MessageStartEvent,
  ContentBlockStartEvent,
  ContentBlockDeltaEvent,
  ContentBlockStopEvent,
  MessageDeltaEvent,
  MessageStopEvent
], OtherStreamEvent)

/**
 * @category stream events
 * @since 0.1.0
 */
export type StreamEvent = typeof StreamEvent.Type

/**
 * A `stream_event` frame (only with `--include-partial-messages`). The complete `assistant` frame for a block comes
 * before that block's `content_block_stop`.
 *
 * @category stream events
 * @since 0.1.0
 */
export const StreamEventFrame = open({
  type: Schema.Literal("stream_event"),
  event: StreamEvent,
  parent_tool_use_id: Schema.NullOr(Schema.String),
  session_id: Schema.String,
  uuid: Schema.String,
  api_message_id: Schema.optionalKey(Schema.String),
  ttft_ms: Schema.optionalKey(Schema.Finite),
  user_message_uuid: Schema.optionalKey(Schema.String),
  user_message_uuids: Schema.optionalKey(StringArray)
})

/**
 * @category stream events
 * @since 0.1.0
 */
export type StreamEventFrame = typeof StreamEventFrame.Type

/**
 * How a turn ended.
 *
 * @category conversation
 * @since 0.1.0
 */
export const ResultSubtype = Schema.Literals([
  "success",
  "error_during_execution",
  "error_max_turns",
  "error_max_budget_usd",
  "error_max_structured_output_retries"
])

/**
 * @category conversation
 * @since 0.1.0
 */
export type ResultSubtype = typeof ResultSubtype.Type

/**
 * A `result` frame: exactly one per turn, the turn-complete signal; the process stays alive afterwards.
 *
 * Gotcha: API errors are `subtype: "success"` with `is_error: true` and `terminal_reason: "api_error"`;
 * interrupts are `error_during_execution` with `terminal_reason` `aborted_streaming` or `aborted_tools`. Check
 * `is_error` and `terminal_reason`, not `subtype`. Error subtypes carry `errors` instead of `result`.
 * `total_cost_usd` is cumulative over the process; `usage` is per turn.
 *
 * @category conversation
 * @since 0.1.0
 */
export const ResultFrame = open({
  type: Schema.Literal("result"),
  subtype: ResultSubtype,
  is_error: Schema.Boolean,
  session_id: Schema.String,
  uuid: Schema.String,
  duration_ms: Schema.Finite,
  duration_api_ms: Schema.Finite,
  num_turns: Schema.Finite,
  total_cost_usd: Schema.Finite,
  usage: Usage,
  permission_denials: Schema.Array(PermissionDenial),
  result: Schema.optionalKey(Schema.String),
  errors: Schema.optionalKey(StringArray),
  stop_reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
  terminal_reason: Schema.optionalKey(Schema.String),
  api_error_status: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  user_message_uuid: Schema.optionalKey(Schema.String),
  user_message_uuids: Schema.optionalKey(StringArray),
  modelUsage: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  structured_output: Schema.optionalKey(Schema.Unknown)
})

/**
 * @category conversation
 * @since 0.1.0
 */
export type ResultFrame = typeof ResultFrame.Type

const loose = <const Type extends string>(type: Type) =>
  open({
    type: Schema.Literal(type),
    uuid: Schema.optionalKey(Schema.String),
    session_id: Schema.optionalKey(Schema.String)
  })

/**
 * `tool_progress` (decoded loosely: only `type` is checked).
 *
 * @category other frames
 * @since 0.1.0
 */
export const ToolProgressFrame = loose("tool_progress")

/**
 * @category other frames
 * @since 0.1.0
 */
export type ToolProgressFrame = typeof ToolProgressFrame.Type

/**
 * `auth_status` (decoded loosely).
 *
 * @category other frames
 * @since 0.1.0
 */
export const AuthStatusFrame = loose("auth_status")

/**
 * @category other frames
 * @since 0.1.0
 */
export type AuthStatusFrame = typeof AuthStatusFrame.Type

/**
 * `tool_use_summary` (decoded loosely).
 *
 * @category other frames
 * @since 0.1.0
 */
export const ToolUseSummaryFrame = loose("tool_use_summary")

/**
 * @category other frames
 * @since 0.1.0
 */
export type ToolUseSummaryFrame = typeof ToolUseSummaryFrame.Type

/**
 * `rate_limit_event` (decoded loosely).
 *
 * @category other frames
 * @since 0.1.0
 */
export const RateLimitEventFrame = loose("rate_limit_event")

/**
 * @category other frames
 * @since 0.1.0
 */
export type RateLimitEventFrame = typeof RateLimitEventFrame.Type

/**
 * `prompt_suggestion` (decoded loosely).
 *
 * @category other frames
 * @since 0.1.0
 */
export const PromptSuggestionFrame = loose("prompt_suggestion")

/**
 * @category other frames
 * @since 0.1.0
 */
export type PromptSuggestionFrame = typeof PromptSuggestionFrame.Type

/**
 * `conversation_reset` (decoded loosely).
 *
 * @category other frames
 * @since 0.1.0
 */
export const ConversationResetFrame = loose("conversation_reset")

/**
 * @category other frames
 * @since 0.1.0
 */
export type ConversationResetFrame = typeof ConversationResetFrame.Type

/**
 * `transcript_mirror` (2.1.3xx, with `--session-mirror`, which the `sessionStore` option sets): the transcript
 * entries the CLI just wrote to its local file, for a session store.
 *
 * @category other frames
 * @since 0.1.0
 */
export const TranscriptMirrorFrame = open({
  type: Schema.Literal("transcript_mirror"),
  filePath: Schema.String,
  entries: Schema.Array(Schema.Record(Schema.String, Schema.Unknown))
})

/**
 * @category other frames
 * @since 0.1.0
 */
export type TranscriptMirrorFrame = typeof TranscriptMirrorFrame.Type

// The frames decoded loosely (only `type` is checked).
const looseFrames = [
  ToolProgressFrame,
  AuthStatusFrame,
  ToolUseSummaryFrame,
  RateLimitEventFrame,
  PromptSuggestionFrame,
  ConversationResetFrame
] as const

/**
 * Every known frame the CLI writes on stdout, discriminated by `type` (then `subtype` for `system`,
 * `response.subtype` for `control_response` and `request.subtype` for `control_request`).
 *
 * @category frames
 * @since 0.1.0
 */
export const Frame = Schema.Union([
  ControlResponseFrame,
  ...ControlRequestFrame.members,
  ControlCancelRequestFrame,
  KeepAliveFrame,
  ...SystemFrame.members,
  CommandLifecycleFrame,
  AssistantFrame,
  UserFrame,
  StreamEventFrame,
  ResultFrame,
  TranscriptMirrorFrame,
  ...looseFrames
])

/**
 * @category frames
 * @since 0.1.0
 */
export type Frame = typeof Frame.Type

/**
 * Narrows a value of a union discriminated by `type` (content blocks, stream events, deltas) to its member with
 * that `type`, as a type guard (`filter`, `find`).
 *
 * @example
 * ```ts
 * import { ClaudeProtocol } from "@tether/claude"
 *
 * declare const block: ClaudeProtocol.ContentBlock
 * if (ClaudeProtocol.isType(block, "text")) {
 *   console.log(block.text)
 * }
 * ```
 *
 * @category guards
 * @since 0.1.0
 */
export const isType = <A extends { readonly type: string | Unrecognized }, const T extends string>(
  value: A,
  type: T
): value is Extract<A, { readonly type: T }> => value.type === type

/**
 * Narrows a control request from the CLI by its `request.subtype`.
 *
 * @example
 * ```ts
 * import { ClaudeProtocol } from "@tether/claude"
 *
 * declare const frame: ClaudeProtocol.ControlRequestFrame
 * if (ClaudeProtocol.isControlRequest(frame, "can_use_tool")) {
 *   console.log(frame.request.tool_name)
 * }
 * ```
 *
 * @category guards
 * @since 0.1.0
 */
export const isControlRequest = <
  const T extends "can_use_tool" | "hook_callback" | "mcp_message" | "elicitation" | "request_user_dialog"
>(
  frame: ControlRequestFrame,
  subtype: T
): frame is Extract<ControlRequestFrame, { readonly request: { readonly subtype: T } }> =>
  frame.request.subtype === subtype

// ---------------------------------------------------------------------------------------------------------------
// Decoded stdout lines (the decoder is in runtime.ts)
// ---------------------------------------------------------------------------------------------------------------

/**
 * The result of decoding one stdout line: a known {@link Frame}, or an explicit `Unknown` for a `type` (or a
 * `system` subtype) this version of Tether does not know, carrying the raw object. The CLI's own rule is that
 * unknown types must be ignored, so `Unknown` is not an error.
 *
 * @category decoding
 * @since 0.1.0
 */
export type Decoded =
  | { readonly _tag: "Frame"; readonly frame: Frame }
  | {
    readonly _tag: "Unknown"
    readonly type: string
    readonly subtype: string | undefined
    readonly raw: { readonly [k: string]: unknown }
  }
