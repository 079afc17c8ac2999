/**
 * The Claude codec, controls: the bodies of the control requests the host sends (`initialize`, `interrupt`,
 * `set_model`, …), the payloads the host answers the CLI's requests with (permission results, hook outputs, MCP
 * responses), and the payloads of the CLI's answers to the host's requests. Their decoders
 * (`decodeInitializeResponse`, …) are in runtime.ts, where generated guards check them; {@link decodeControlPayload}
 * builds one for any schema, with Effect's decoder.
 *
 * Public through `ClaudeProtocol`. A change to a schema here needs `pnpm codegen` (a test fails until it is run).
 *
 * @internal
 */
import * as SchemaGuard from "@tether/core/codec/SchemaGuard"
import type { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { malformed } from "./lineErrors.ts"
import { inputOtherThan, JsonRecord, JsonValue, open, openJson, StringArray, withoutKeys } from "./shared.ts"

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
  /** Seconds the CLI waits for the hook. */
  timeout: Schema.optionalKey(Schema.Finite),
  /** `"block"`: a failed hook blocks what it guards (2.1.3xx; the answer says `hook_on_failure_supported`). */
  onFailure: Schema.optionalKey(Schema.Literals(["continue", "block"]))
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type HookMatcher = typeof HookMatcher.Type

/**
 * A subagent the host defines (`initialize.agents`, by name): the model delegates to it with the `Task` tool.
 * Unknown fields (newer CLIs add some) are kept.
 *
 * @category host frames
 * @since 0.1.0
 */
export const AgentDefinition = openJson({
  /** When to use the agent, in natural language: what the model reads to choose it. */
  description: Schema.String,
  /** The agent's system prompt. */
  prompt: Schema.String,
  /** The tools it may use (default: all of its parent's). */
  tools: Schema.optionalKey(StringArray),
  disallowedTools: Schema.optionalKey(StringArray),
  /** A model alias (`"sonnet"`, `"opus"`, …), a model id, or `"inherit"`. */
  model: Schema.optionalKey(Schema.String),
  /** MCP servers by name, or inline configurations. */
  mcpServers: Schema.optionalKey(Schema.Array(Schema.Union([Schema.String, JsonRecord]))),
  /** Skills preloaded into the agent's context. */
  skills: Schema.optionalKey(StringArray),
  maxTurns: Schema.optionalKey(Schema.Finite),
  effort: Schema.optionalKey(Schema.Union([Schema.Literals(["low", "medium", "high", "xhigh", "max"]), Schema.Finite])),
  permissionMode: Schema.optionalKey(PermissionMode),
  background: Schema.optionalKey(Schema.Boolean),
  initialPrompt: Schema.optionalKey(Schema.String),
  memory: Schema.optionalKey(Schema.Literals(["user", "project", "local"]))
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type AgentDefinition = typeof AgentDefinition.Type

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
  /** Record the system prompt once per conversation (a preset or a custom prompt). */
  systemPromptSnapshot: Schema.optionalKey(Schema.Boolean),
  /** With Claude Code's prompt: leave out its per-machine sections (cwd, git status, …) for better caching. */
  excludeDynamicSections: Schema.optionalKey(Schema.Boolean),
  /** The servers the host runs in process: the CLI talks to them with `mcp_message` control requests. */
  sdkMcpServers: Schema.optionalKey(StringArray),
  /** Per in-process server: `timeout` (milliseconds the CLI waits for a tool call), tool policies. */
  sdkMcpServerConfigs: Schema.optionalKey(Schema.Record(Schema.String, JsonRecord)),
  /** The JSON Schema of the turn's structured output (the CLI adds a `StructuredOutput` tool). */
  jsonSchema: Schema.optionalKey(JsonRecord),
  agents: Schema.optionalKey(Schema.Record(Schema.String, AgentDefinition)),
  planModeInstructions: Schema.optionalKey(Schema.String),
  /** Tool names the model sees, mapped to the CLI's own tool names. */
  toolAliases: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  /** The title of a new session (a resumed one keeps its own). */
  title: Schema.optionalKey(Schema.String),
  skills: Schema.optionalKey(StringArray),
  promptSuggestions: Schema.optionalKey(Schema.Boolean),
  agentProgressSummaries: Schema.optionalKey(Schema.Boolean),
  forwardSubagentText: Schema.optionalKey(Schema.Boolean),
  /** The `request_user_dialog` kinds the host answers; the CLI sends no other (it fails closed). */
  supportedDialogKinds: Schema.optionalKey(StringArray),
  perTaskStopAffordance: Schema.optionalKey(Schema.Boolean)
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

const control = <const Subtype extends string, const Fields extends Schema.Struct.Fields>(
  subtype: Subtype,
  fields: Fields
) => openJson({ subtype: Schema.Literal(subtype), ...fields })

/**
 * `rewind_files`: restores the files the CLI changed since the user message `user_message_id` (needs file
 * checkpointing, `enableFileCheckpointing`). `dry_run` only says what would change.
 *
 * @category host frames
 * @since 0.1.0
 */
export const RewindFilesRequest = control("rewind_files", {
  user_message_id: Schema.String,
  dry_run: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type RewindFilesRequest = typeof RewindFilesRequest.Type

/**
 * `mcp_set_servers`: replaces the MCP servers added at run time (an in-process server is `{ type: "sdk", name }`).
 *
 * @category host frames
 * @since 0.1.0
 */
export const McpSetServersRequest = control("mcp_set_servers", { servers: Schema.Record(Schema.String, JsonRecord) })

/**
 * @category host frames
 * @since 0.1.0
 */
export type McpSetServersRequest = typeof McpSetServersRequest.Type

/**
 * `mcp_reconnect`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const McpReconnectRequest = control("mcp_reconnect", { serverName: Schema.String })

/**
 * @category host frames
 * @since 0.1.0
 */
export type McpReconnectRequest = typeof McpReconnectRequest.Type

/**
 * `mcp_toggle`: enables or disables a server.
 *
 * @category host frames
 * @since 0.1.0
 */
export const McpToggleRequest = control("mcp_toggle", { serverName: Schema.String, enabled: Schema.Boolean })

/**
 * @category host frames
 * @since 0.1.0
 */
export type McpToggleRequest = typeof McpToggleRequest.Type

/**
 * `mcp_read_resource` (2.1.3xx, capability `mcp_read_resource_v1`; refused for in-process servers).
 *
 * @category host frames
 * @since 0.1.0
 */
export const McpReadResourceRequest = control("mcp_read_resource", { serverName: Schema.String, uri: Schema.String })

/**
 * @category host frames
 * @since 0.1.0
 */
export type McpReadResourceRequest = typeof McpReadResourceRequest.Type

/**
 * `set_mcp_permission_mode_override`: `"auto"` lets a server's tools run without asking, `null` clears it.
 *
 * @category host frames
 * @since 0.1.0
 */
export const SetMcpPermissionModeOverrideRequest = control("set_mcp_permission_mode_override", {
  serverName: Schema.String,
  mode: Schema.NullOr(Schema.Literals(["default", "auto"]))
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type SetMcpPermissionModeOverrideRequest = typeof SetMcpPermissionModeOverrideRequest.Type

/**
 * `stop_task`: stops a background task (a `task_notification` with `status: "stopped"` follows).
 *
 * @category host frames
 * @since 0.1.0
 */
export const StopTaskRequest = control("stop_task", { task_id: Schema.String })

/**
 * @category host frames
 * @since 0.1.0
 */
export type StopTaskRequest = typeof StopTaskRequest.Type

/**
 * `background_tasks`: moves the running tool (or the one of `tool_use_id`) to the background.
 *
 * @category host frames
 * @since 0.1.0
 */
export const BackgroundTasksRequest = control("background_tasks", { tool_use_id: Schema.optionalKey(Schema.String) })

/**
 * @category host frames
 * @since 0.1.0
 */
export type BackgroundTasksRequest = typeof BackgroundTasksRequest.Type

/**
 * `reload_plugins`. `refuse_if_busy` needs the capability `reload_plugins_refuse_if_busy_v1`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const ReloadPluginsRequest = control("reload_plugins", {
  hold_on_cache_impact: Schema.optionalKey(Schema.Boolean),
  add_plugins: Schema.optionalKey(Schema.Array(JsonRecord)),
  refuse_if_busy: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type ReloadPluginsRequest = typeof ReloadPluginsRequest.Type

/**
 * `reload_skills`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const ReloadSkillsRequest = control("reload_skills", {})

/**
 * @category host frames
 * @since 0.1.0
 */
export type ReloadSkillsRequest = typeof ReloadSkillsRequest.Type

/**
 * `reload_output_styles`.
 *
 * @category host frames
 * @since 0.1.0
 */
export const ReloadOutputStylesRequest = control("reload_output_styles", {})

/**
 * @category host frames
 * @since 0.1.0
 */
export type ReloadOutputStylesRequest = typeof ReloadOutputStylesRequest.Type

/**
 * `apply_flag_settings`: settings applied as if given with `--settings` (refused when a value would make the CLI
 * drop the flag layer).
 *
 * @category host frames
 * @since 0.1.0
 */
export const ApplyFlagSettingsRequest = control("apply_flag_settings", { settings: JsonRecord })

/**
 * @category host frames
 * @since 0.1.0
 */
export type ApplyFlagSettingsRequest = typeof ApplyFlagSettingsRequest.Type

/**
 * `update_settings`: writes a setting file the CLI allows the host to write (`localSettings` `outputStyle`,
 * `userSettings` `effortLevel`).
 *
 * @category host frames
 * @since 0.1.0
 */
export const UpdateSettingsRequest = control("update_settings", {
  source: Schema.Literals(["localSettings", "userSettings"]),
  settings: JsonRecord
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type UpdateSettingsRequest = typeof UpdateSettingsRequest.Type

/**
 * `get_settings`: the effective settings and where each came from.
 *
 * @category host frames
 * @since 0.1.0
 */
export const GetSettingsRequest = control("get_settings", {})

/**
 * @category host frames
 * @since 0.1.0
 */
export type GetSettingsRequest = typeof GetSettingsRequest.Type

/**
 * `read_file`: a file as the CLI sees it (`encoding` and `lossy` in the answer are 2.1.3xx).
 *
 * @category host frames
 * @since 0.1.0
 */
export const ReadFileRequest = control("read_file", {
  path: Schema.String,
  max_bytes: Schema.optionalKey(Schema.Finite),
  encoding: Schema.optionalKey(Schema.Literals(["utf-8", "base64"]))
})

/**
 * @category host frames
 * @since 0.1.0
 */
export type ReadFileRequest = typeof ReadFileRequest.Type

/**
 * `seed_read_state`: tells the CLI the host has read `path` as of `mtime`, so an edit needs no fresh read.
 *
 * @category host frames
 * @since 0.1.0
 */
export const SeedReadStateRequest = control("seed_read_state", { path: Schema.String, mtime: Schema.Finite })

/**
 * @category host frames
 * @since 0.1.0
 */
export type SeedReadStateRequest = typeof SeedReadStateRequest.Type

/**
 * `get_usage`: the session's usage and the account's rate limits.
 *
 * @category host frames
 * @since 0.1.0
 */
export const GetUsageRequest = control("get_usage", { skip_behaviors: Schema.optionalKey(Schema.Boolean) })

/**
 * @category host frames
 * @since 0.1.0
 */
export type GetUsageRequest = typeof GetUsageRequest.Type

const knownHostControlSubtypes = [
  "initialize",
  "interrupt",
  "set_permission_mode",
  "set_model",
  "set_max_thinking_tokens",
  "mcp_status",
  "get_context_usage",
  "rewind_files",
  "mcp_set_servers",
  "mcp_reconnect",
  "mcp_toggle",
  "mcp_read_resource",
  "set_mcp_permission_mode_override",
  "stop_task",
  "background_tasks",
  "reload_plugins",
  "reload_skills",
  "reload_output_styles",
  "apply_flag_settings",
  "update_settings",
  "get_settings",
  "read_file",
  "seed_read_state",
  "get_usage"
]

/**
 * Any other control request (`rename_session`, `get_hooks_listing`, `cancel_async_message`, …) with JSON fields. Its `subtype` is
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
  RewindFilesRequest,
  McpSetServersRequest,
  McpReconnectRequest,
  McpToggleRequest,
  McpReadResourceRequest,
  SetMcpPermissionModeOverrideRequest,
  StopTaskRequest,
  BackgroundTasksRequest,
  ReloadPluginsRequest,
  ReloadSkillsRequest,
  ReloadOutputStylesRequest,
  ApplyFlagSettingsRequest,
  UpdateSettingsRequest,
  GetSettingsRequest,
  ReadFileRequest,
  SeedReadStateRequest,
  GetUsageRequest,
  GenericControlRequest
])

/**
 * @category host frames
 * @since 0.1.0
 */
export type ControlRequestInput = typeof ControlRequestInput.Type

/**
 * Where a permission update is written: a settings file, or the session only.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionUpdateDestination = Schema.Literals([
  "userSettings",
  "projectSettings",
  "localSettings",
  "session",
  "cliArg"
])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionUpdateDestination = typeof PermissionUpdateDestination.Type

/**
 * A permission rule: a tool, and for some tools what it applies to (`Bash` `ruleContent: "npm test"`).
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionRule = openJson({ toolName: Schema.String, ruleContent: Schema.optionalKey(Schema.String) })

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionRule = typeof PermissionRule.Type

/**
 * A change to the CLI's permissions: the CLI suggests some with each `can_use_tool` request
 * (`permission_suggestions`: "always allow this command", "add this directory", "switch to acceptEdits"), and an
 * allow answer may carry them (`updatedPermissions`), which is how "always allow" works.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const PermissionUpdate = Schema.Union([
  openJson({
    type: Schema.Literals(["addRules", "replaceRules", "removeRules"]),
    rules: Schema.Array(PermissionRule),
    behavior: Schema.Literals(["allow", "deny", "ask"]),
    destination: PermissionUpdateDestination
  }),
  openJson({ type: Schema.Literal("setMode"), mode: PermissionMode, destination: PermissionUpdateDestination }),
  openJson({
    type: Schema.Literals(["addDirectories", "removeDirectories"]),
    directories: StringArray,
    destination: PermissionUpdateDestination
  })
])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type PermissionUpdate = typeof PermissionUpdate.Type

/**
 * How the user decided, for the CLI's records (`tool_result_meta`): unset, the CLI infers a one-time allow or a
 * reject.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const DecisionClassification = Schema.Literals(["user_temporary", "user_permanent", "user_reject"])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type DecisionClassification = typeof DecisionClassification.Type

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
  decisionClassification: Schema.optionalKey(DecisionClassification)
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
  decisionClassification: Schema.optionalKey(DecisionClassification)
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
}).check(withoutKeys(["behavior", "mcp_response"], "a hook output cannot carry `behavior` or `mcp_response`"))

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
 * The answer to an `elicitation` request (an MCP server the CLI runs asks the user for input): an MCP
 * `ElicitResult`, passed to the server as it is.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const ElicitResult = openJson({
  action: Schema.Literals(["accept", "decline", "cancel"]),
  content: Schema.optionalKey(JsonRecord)
})

/**
 * @category permission answers
 * @since 0.1.0
 */
export type ElicitResult = typeof ElicitResult.Type

/**
 * The answer to a `request_user_dialog` request: `completed` with the dialog's `result`, or `cancelled` (the CLI
 * then applies the dialog's default).
 *
 * @category permission answers
 * @since 0.1.0
 */
export const UserDialogResult = Schema.Union([
  openJson({ behavior: Schema.Literal("completed"), result: Schema.optionalKey(JsonValue) }),
  openJson({ behavior: Schema.Literal("cancelled") })
])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type UserDialogResult = typeof UserDialogResult.Type

/**
 * The payload of a success answer to a CLI request.
 *
 * @category permission answers
 * @since 0.1.0
 */
export const ControlSuccessPayload = Schema.Union([
  PermissionResult,
  McpMessageResponse,
  ElicitResult,
  UserDialogResult,
  HookCallbackOutput
])

/**
 * @category permission answers
 * @since 0.1.0
 */
export type ControlSuccessPayload = typeof ControlSuccessPayload.Type

// ---------------------------------------------------------------------------------------------------------------
// Control response payloads the host decodes
// ---------------------------------------------------------------------------------------------------------------

/**
 * A slash command or skill the CLI offers (`initialize.commands`, `reload_skills`). `builtin` and `aliases` are
 * absent on older CLIs.
 *
 * @category responses
 * @since 0.1.0
 */
export const SlashCommand = open({
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  argumentHint: Schema.optionalKey(Schema.String),
  aliases: Schema.optionalKey(StringArray),
  builtin: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type SlashCommand = typeof SlashCommand.Type

/**
 * A subagent the CLI can delegate to (`initialize.agents`).
 *
 * @category responses
 * @since 0.1.0
 */
export const AgentInfo = open({
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  model: Schema.optionalKey(Schema.String)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type AgentInfo = typeof AgentInfo.Type

/**
 * A model the CLI offers (`initialize.models`): `value` is what `setModel` takes.
 *
 * @category responses
 * @since 0.1.0
 */
export const ModelInfo = open({
  value: Schema.String,
  resolvedModel: Schema.optionalKey(Schema.String),
  displayName: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String),
  supportsEffort: Schema.optionalKey(Schema.Boolean),
  supportedEffortLevels: Schema.optionalKey(StringArray),
  supportsAdaptiveThinking: Schema.optionalKey(Schema.Boolean),
  supportsFastMode: Schema.optionalKey(Schema.Boolean),
  supportsAutoMode: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type ModelInfo = typeof ModelInfo.Type

/**
 * The account the CLI runs as (`initialize.account`).
 *
 * @category responses
 * @since 0.1.0
 */
export const AccountInfo = open({
  email: Schema.optionalKey(Schema.String),
  organization: Schema.optionalKey(Schema.String),
  subscriptionType: Schema.optionalKey(Schema.String),
  tokenSource: Schema.optionalKey(Schema.String),
  apiKeySource: Schema.optionalKey(Schema.String),
  apiProvider: Schema.optionalKey(Schema.String)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type AccountInfo = typeof AccountInfo.Type

/**
 * The payload of a successful `initialize` (2.1.197 sends only `commands, agents, output_style,
 * available_output_styles, models, account, pid`). Every field is optional; unknown fields are kept.
 *
 * @category responses
 * @since 0.1.0
 */
export const InitializeResponse = open({
  commands: Schema.optionalKey(Schema.Array(SlashCommand)),
  agents: Schema.optionalKey(Schema.Array(AgentInfo)),
  models: Schema.optionalKey(Schema.Array(ModelInfo)),
  account: Schema.optionalKey(AccountInfo),
  output_style: Schema.optionalKey(Schema.String),
  available_output_styles: Schema.optionalKey(StringArray),
  pid: Schema.optionalKey(Schema.Finite),
  claude_code_version: Schema.optionalKey(Schema.String),
  current_permission_mode: Schema.optionalKey(Schema.String),
  session_state: Schema.optionalKey(Schema.String),
  capabilities: Schema.optionalKey(StringArray),
  /** The hooks of `initialize` were registered (2.1.3xx). */
  hooks_applied: Schema.optionalKey(Schema.Boolean),
  hook_on_failure_supported: Schema.optionalKey(Schema.Boolean),
  mcp_servers_applied: Schema.optionalKey(Schema.Boolean),
  plugins_applied: Schema.optionalKey(Schema.Boolean)
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
 * The answer to `rewind_files` (`canRewind: false` with `error` on a dry run; the CLI answers an error instead when
 * it cannot rewind for real).
 *
 * @category responses
 * @since 0.1.0
 */
export const RewindFilesResponse = open({
  canRewind: Schema.optionalKey(Schema.Boolean),
  error: Schema.optionalKey(Schema.String),
  filesChanged: Schema.optionalKey(StringArray),
  insertions: Schema.optionalKey(Schema.Finite),
  deletions: Schema.optionalKey(Schema.Finite)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type RewindFilesResponse = typeof RewindFilesResponse.Type

/**
 * The answer to `mcp_set_servers`: the servers added and removed, and the errors of those that failed, by name.
 *
 * @category responses
 * @since 0.1.0
 */
export const McpSetServersResponse = open({
  added: Schema.optionalKey(StringArray),
  removed: Schema.optionalKey(StringArray),
  errors: Schema.optionalKey(Schema.Record(Schema.String, Schema.String))
})

/**
 * @category responses
 * @since 0.1.0
 */
export type McpSetServersResponse = typeof McpSetServersResponse.Type

/**
 * The answer to `mcp_read_resource`: the resource's contents.
 *
 * @category responses
 * @since 0.1.0
 */
export const McpReadResourceResponse = open({
  contents: Schema.Array(open({
    uri: Schema.String,
    mimeType: Schema.optionalKey(Schema.String),
    text: Schema.optionalKey(Schema.String),
    blob: Schema.optionalKey(Schema.String)
  }))
})

/**
 * @category responses
 * @since 0.1.0
 */
export type McpReadResourceResponse = typeof McpReadResourceResponse.Type

/**
 * The answer to `reload_plugins`: what the CLI now offers (`held` and `cache_impact` are 2.1.3xx).
 *
 * @category responses
 * @since 0.1.0
 */
export const ReloadPluginsResponse = open({
  commands: Schema.optionalKey(Schema.Array(SlashCommand)),
  agents: Schema.optionalKey(Schema.Array(AgentInfo)),
  plugins: Schema.optionalKey(Schema.Array(Schema.Unknown)),
  mcpServers: Schema.optionalKey(Schema.Array(Schema.Unknown)),
  error_count: Schema.optionalKey(Schema.Finite),
  held: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type ReloadPluginsResponse = typeof ReloadPluginsResponse.Type

/**
 * The answer to `reload_skills`.
 *
 * @category responses
 * @since 0.1.0
 */
export const ReloadSkillsResponse = open({ skills: Schema.optionalKey(Schema.Array(SlashCommand)) })

/**
 * @category responses
 * @since 0.1.0
 */
export type ReloadSkillsResponse = typeof ReloadSkillsResponse.Type

/**
 * The answer to `reload_output_styles`.
 *
 * @category responses
 * @since 0.1.0
 */
export const ReloadOutputStylesResponse = open({ available_output_styles: Schema.optionalKey(StringArray) })

/**
 * @category responses
 * @since 0.1.0
 */
export type ReloadOutputStylesResponse = typeof ReloadOutputStylesResponse.Type

/**
 * The answer to `read_file`.
 *
 * @category responses
 * @since 0.1.0
 */
export const ReadFileResponse = open({
  contents: Schema.String,
  absPath: Schema.optionalKey(Schema.String),
  truncated: Schema.optionalKey(Schema.Boolean),
  encoding: Schema.optionalKey(Schema.String),
  lossy: Schema.optionalKey(Schema.Boolean)
})

/**
 * @category responses
 * @since 0.1.0
 */
export type ReadFileResponse = typeof ReadFileResponse.Type

/**
 * The answer to `background_tasks`.
 *
 * @category responses
 * @since 0.1.0
 */
export const BackgroundTasksResponse = open({ backgrounded: Schema.optionalKey(Schema.Boolean) })

/**
 * @category responses
 * @since 0.1.0
 */
export type BackgroundTasksResponse = typeof BackgroundTasksResponse.Type

/**
 * The answer to `set_mcp_permission_mode_override`.
 *
 * @category responses
 * @since 0.1.0
 */
export const McpPermissionModeOverrideResponse = open({ warning: Schema.optionalKey(Schema.String) })

/**
 * @category responses
 * @since 0.1.0
 */
export type McpPermissionModeOverrideResponse = typeof McpPermissionModeOverrideResponse.Type

/**
 * A payload this version of Tether does not type beyond being an object (`get_settings`, `get_usage`): its fields
 * are kept as the CLI sent them.
 *
 * @category responses
 * @since 0.1.0
 */
export const OpenResponse = open({})

/**
 * @category responses
 * @since 0.1.0
 */
export type OpenResponse = typeof OpenResponse.Type

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
    return Result.isSuccess(result)
      ? Result.succeed(result.success)
      : malformed(JSON.stringify(payload) ?? "", result.failure.message)
  }
}
