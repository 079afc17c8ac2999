/**
 * The Claude codec, controls: the bodies of the control requests the host sends (`initialize`, `interrupt`,
 * `set_model`, …), the payloads the host answers the CLI's requests with (permission results, hook outputs, MCP
 * responses), and the payloads of the CLI's answers to the host's requests, with their decoders.
 *
 * Public through `ClaudeProtocol`.
 *
 * @internal
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaGuard from "../../../internal/schemaGuard.ts"
import { ProtocolError } from "../../../TetherError.ts"
import { inputOtherThan, JsonRecord, open, openJson, prefixOf, StringArray, truncate } from "./shared.ts"

/**
 * The CLI's permission modes.
 *
 * @category host frames
 * @since 0.1.0
 */
export const PermissionMode = Schema.Literals([
  "default",
  "acceptEdits",
  "bypassPermissions",
  "plan",
  "dontAsk",
  "auto"
])

/**
 * @category host frames
 * @since 0.1.0
 */
export type PermissionMode = typeof PermissionMode.Type

/**
 * One hook registration in `initialize`: the CLI calls back with `hook_callback` and one of `hookCallbackIds`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const HookMatcher = openJson({
  matcher: Schema.optionalKey(Schema.String),
  hookCallbackIds: StringArray,
  timeout: Schema.optionalKey(Schema.Finite)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HookMatcher = typeof HookMatcher.Type

/**
 * The `initialize` request. Gotcha: `systemPrompt` replaces Claude Code's own prompt; omit it to keep that prompt
 * (the SDK sends `[""]` by default, an almost empty prompt).
 *
 * @category host frames
 * @since 0.1.0
 */
export const InitializeRequest = openJson({
  subtype: Schema.Literal("initialize"),
  hooks: Schema.optionalKey(Schema.Record(Schema.String, Schema.Array(HookMatcher))),
  systemPrompt: Schema.optionalKey(StringArray),
  appendSystemPrompt: Schema.optionalKey(Schema.String),
  sdkMcpServers: Schema.optionalKey(StringArray),
  jsonSchema: Schema.optionalKey(JsonRecord),
  agents: Schema.optionalKey(JsonRecord)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type InitializeRequest = typeof InitializeRequest.Type

/**
 * The `interrupt` request: ends the running turn (its `result` follows).
 *
 * @category host frames
 * @since 0.1.0
 */
export const InterruptRequest = openJson({
  subtype: Schema.Literal("interrupt"),
  cancel_queued: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type InterruptRequest = typeof InterruptRequest.Type

/**
 * @category host frames
 * @since 0.1.0
 */
export const SetPermissionModeRequest = openJson({
  subtype: Schema.Literal("set_permission_mode"),
  mode: PermissionMode
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type SetPermissionModeRequest = typeof SetPermissionModeRequest.Type

/**
 * `set_model`: `null` or `"default"` resets to the default model.
 *
 * @category host frames
 * @since 0.1.0
 */
export const SetModelRequest = openJson({
  subtype: Schema.Literal("set_model"),
  model: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type SetModelRequest = typeof SetModelRequest.Type

/**
 * @category host frames
 * @since 0.1.0
 */
export const SetMaxThinkingTokensRequest = openJson({
  subtype: Schema.Literal("set_max_thinking_tokens"),
  max_thinking_tokens: Schema.NullOr(Schema.Finite)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type SetMaxThinkingTokensRequest = typeof SetMaxThinkingTokensRequest.Type

/**
 * @category host frames
 * @since 0.1.0
 */
export const McpStatusRequest = openJson({ subtype: Schema.Literal("mcp_status") })

/**
 * @category host frames
 * @since 0.1.0
 */
export type McpStatusRequest = typeof McpStatusRequest.Type

/**
 * @category host frames
 * @since 0.1.0
 */
export const GetContextUsageRequest = openJson({
  subtype: Schema.Literal("get_context_usage"),
  detail: Schema.optionalKey(Schema.String)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type GetContextUsageRequest = typeof GetContextUsageRequest.Type

const knownHostControlSubtypes = [
  "initialize",
  "interrupt",
  "set_permission_mode",
  "set_model",
  "set_max_thinking_tokens",
  "mcp_status",
  "get_context_usage"
]

/**
 * Any other control request (`get_settings`, `mcp_reconnect`, `stop_task`, …) with JSON fields. Its `subtype` is
 * never one of the typed ones, so a malformed typed request is refused instead of passing as generic.
 *
 * @category host frames
 * @since 0.1.0
 */
export const GenericControlRequest = openJson({ subtype: inputOtherThan(knownHostControlSubtypes) })

/**
 * @category host frames
 * @since 0.1.0
 */
export type GenericControlRequest = typeof GenericControlRequest.Type

/**
 * The body of a control request from the host.
 *
 * @category host frames
 * @since 0.1.0
 */
export const ControlRequestInput = Schema.Union([
  InitializeRequest,
  InterruptRequest,
  SetPermissionModeRequest,
  SetModelRequest,
  SetMaxThinkingTokensRequest,
  McpStatusRequest,
  GetContextUsageRequest,
  GenericControlRequest
])

/**
 * @category host frames
 * @since 0.1.0
 */
export type ControlRequestInput = typeof ControlRequestInput.Type

/**
 * Allows a tool call. Without `updatedInput` the original input runs; with it, `updatedInput` is what runs.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionAllow = openJson({
  behavior: Schema.Literal("allow"),
  updatedInput: Schema.optionalKey(JsonRecord),
  updatedPermissions: Schema.optionalKey(Schema.Array(JsonRecord)),
  toolUseID: Schema.optionalKey(Schema.String),
  decisionClassification: Schema.optionalKey(Schema.Literals(["user_temporary", "user_permanent", "user_reject"]))
})

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionAllow = typeof PermissionAllow.Type

/**
 * Denies a tool call; the message becomes the tool's error result. With `interrupt: true` the turn ends
 * (`result` `error_during_execution`, `terminal_reason: "aborted_tools"`).
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionDeny = openJson({
  behavior: Schema.Literal("deny"),
  message: Schema.String,
  interrupt: Schema.optionalKey(Schema.Boolean),
  toolUseID: Schema.optionalKey(Schema.String),
  decisionClassification: Schema.optionalKey(Schema.Literals(["user_temporary", "user_permanent", "user_reject"]))
})

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionDeny = typeof PermissionDeny.Type

/**
 * The answer to a `can_use_tool` request.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionResult = Schema.Union([PermissionAllow, PermissionDeny])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionResult = typeof PermissionResult.Type

/**
 * The answer to a `hook_callback` request (a `HookJSONOutput`), e.g. `{ continue: true }` or
 * `{ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }`. It cannot carry
 * `behavior` or `mcp_response`, so a malformed permission or MCP answer is never taken for a hook output.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const HookCallbackOutput = openJson({
  continue: Schema.optionalKey(Schema.Boolean),
  suppressOutput: Schema.optionalKey(Schema.Boolean),
  stopReason: Schema.optionalKey(Schema.String),
  decision: Schema.optionalKey(Schema.Literals(["approve", "block"])),
  systemMessage: Schema.optionalKey(Schema.String),
  reason: Schema.optionalKey(Schema.String),
  hookSpecificOutput: Schema.optionalKey(JsonRecord)
}).check(
  Schema.makeFilter((output: { readonly [k: string]: unknown }) =>
    "behavior" in output || "mcp_response" in output
      ? "a hook output cannot carry `behavior` or `mcp_response`"
      : undefined
  )
)

/**
 * @category permission answers
 * @since 0.1.0
 */
export type HookCallbackOutput = typeof HookCallbackOutput.Type

/**
 * The answer to an `mcp_message` request: the JSON-RPC response of the host's MCP server (for a notification the
 * SDK answers `{ jsonrpc: "2.0", result: {}, id: 0 }`).
 *
 * @category permission answers
 * @since 0.1.0
 */
export const McpMessageResponse = openJson({ mcp_response: JsonRecord })

/**
 * @category permission answers
 * @since 0.1.0
 */
export type McpMessageResponse = typeof McpMessageResponse.Type

/**
 * The payload of a success answer to a CLI request.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const ControlSuccessPayload = Schema.Union([PermissionResult, McpMessageResponse, HookCallbackOutput])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type ControlSuccessPayload = typeof ControlSuccessPayload.Type

// ---------------------------------------------------------------------------------------------------------------
// Control response payloads the host decodes
// ---------------------------------------------------------------------------------------------------------------

/**
 * The payload of a successful `initialize` (2.1.197 sends only `commands, agents, output_style,
 * available_output_styles, models, account, pid`). Every field is optional; unknown fields are kept.
 *
 * @category responses
 * @since 0.1.0
 */
export const InitializeResponse = open({
  commands: Schema.optionalKey(
    Schema.Array(open({
      name: Schema.String,
      description: Schema.optionalKey(Schema.String),
      argumentHint: Schema.optionalKey(Schema.String)
    }))
  ),
  agents: Schema.optionalKey(
    Schema.Array(open({ name: Schema.String, description: Schema.optionalKey(Schema.String) }))
  ),
  models: Schema.optionalKey(
    Schema.Array(open({
      value: Schema.String,
      displayName: Schema.optionalKey(Schema.String),
      description: Schema.optionalKey(Schema.String)
    }))
  ),
  account: Schema.optionalKey(open({
    tokenSource: Schema.optionalKey(Schema.String),
    apiKeySource: Schema.optionalKey(Schema.String),
    apiProvider: Schema.optionalKey(Schema.String),
    email: Schema.optionalKey(Schema.String)
  })),
  output_style: Schema.optionalKey(Schema.String),
  available_output_styles: Schema.optionalKey(StringArray),
  pid: Schema.optionalKey(Schema.Finite),
  claude_code_version: Schema.optionalKey(Schema.String),
  current_permission_mode: Schema.optionalKey(Schema.String),
  session_state: Schema.optionalKey(Schema.String),
  capabilities: Schema.optionalKey(StringArray)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type InitializeResponse = typeof InitializeResponse.Type

/**
 * The payload of a successful `interrupt` (2.1.332: `{ still_queued: [] }`; 2.1.197: none).
 *
 * @category responses
 * @since 0.1.0
 */
export const InterruptResponse = open({ still_queued: Schema.optionalKey(Schema.Array(Schema.Unknown)) })

/**
 * @category responses
 * @since 0.1.0
 */
export type InterruptResponse = typeof InterruptResponse.Type

/**
 * The answer to `set_permission_mode`. 2.1.3xx echoes the mode; older releases answer without a payload, so `mode`
 * is optional (the change was still made).
 *
 * @category responses
 * @since 0.1.0
 */
export const SetPermissionModeResponse = open({ mode: Schema.optionalKey(Schema.String) })

/**
 * @category responses
 * @since 0.1.0
 */
export type SetPermissionModeResponse = typeof SetPermissionModeResponse.Type

/**
 * The answer to `set_model`. 2.1.3xx echoes the resolved model; older releases (2.1.197) answer without a payload,
 * so `model` is optional (the model did change).
 *
 * @category responses
 * @since 0.1.0
 */
export const SetModelResponse = open({ model: Schema.optionalKey(Schema.NullOr(Schema.String)) })

/**
 * @category responses
 * @since 0.1.0
 */
export type SetModelResponse = typeof SetModelResponse.Type

/**
 * @category responses
 * @since 0.1.0
 */
export const McpStatusResponse = open({
  mcpServers: Schema.Array(open({ name: Schema.String, status: Schema.optionalKey(Schema.String) }))
})

/**
 * @category responses
 * @since 0.1.0
 */
export type McpStatusResponse = typeof McpStatusResponse.Type

/**
 * The payload of `get_context_usage` (decoded loosely).
 *
 * @category responses
 * @since 0.1.0
 */
export const ContextUsageResponse = open({ categories: Schema.optionalKey(Schema.Array(Schema.Unknown)) })

/**
 * @category responses
 * @since 0.1.0
 */
export type ContextUsageResponse = typeof ContextUsageResponse.Type

/**
 * Builds a decoder for the payload of a control response (`ControlSuccessResponse.response`). An absent payload
 * decodes as `{}`, since some CLI versions answer without one. Fails with `ProtocolError` `"malformed"`.
 *
 * @category responses
 * @since 0.1.0
 */
export const decodeControlPayload = <S extends Schema.Codec<unknown, unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  // A schema whose decoding gives back the payload it accepts (the response schemas here: open objects, no
  // transformations) is checked by a guard of closures, built at the first payload; Effect's decoder, which costs a
  // compilation of its own, runs only for the other schemas and to explain a payload the guard refuses.
  let guard: SchemaGuard.Guard | null | undefined
  return (payload: unknown): Result.Result<S["Type"], ProtocolError> => {
    const input = payload === undefined ? {} : payload
    if (guard === undefined) guard = SchemaGuard.makeForDecoding(schema.ast) ?? null
    if (guard !== null && guard(input)) return Result.succeed(input as S["Type"])
    const result = decode(input)
    return Result.isSuccess(result) ? Result.succeed(result.success) : Result.fail(
      new ProtocolError({
        reason: "malformed",
        detail: truncate(result.failure.message),
        linePrefix: prefixOf(JSON.stringify(payload) ?? "")
      })
    )
  }
}

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeInitializeResponse: (payload: unknown) => Result.Result<InitializeResponse, ProtocolError> =
  decodeControlPayload(InitializeResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeInterruptResponse: (payload: unknown) => Result.Result<InterruptResponse, ProtocolError> =
  decodeControlPayload(InterruptResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeSetPermissionModeResponse: (
  payload: unknown
) => Result.Result<SetPermissionModeResponse, ProtocolError> = decodeControlPayload(SetPermissionModeResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeSetModelResponse: (payload: unknown) => Result.Result<SetModelResponse, ProtocolError> =
  decodeControlPayload(SetModelResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeMcpStatusResponse: (payload: unknown) => Result.Result<McpStatusResponse, ProtocolError> =
  decodeControlPayload(McpStatusResponse)

/**
 * @category responses
 * @since 0.1.0
 */
export const decodeContextUsageResponse: (payload: unknown) => Result.Result<ContextUsageResponse, ProtocolError> =
  decodeControlPayload(ContextUsageResponse)
