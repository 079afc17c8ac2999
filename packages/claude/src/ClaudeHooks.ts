/**
 * Claude Code's hooks, typed per event: the events the CLI calls the host back for, what each one's input carries,
 * and what each one's answer may say. `ClaudeSession.make({ hooks })` registers the callbacks in `initialize`; the
 * CLI then sends a `hook_callback` request whenever the event fires (for tool events, when the tool matches the
 * matcher), and the session answers with the callback's output.
 *
 * Inputs keep the fields the CLI adds in newer versions (they are open records beyond what is typed here). A
 * callback's failure answers the CLI with an error: with `onFailure: "block"` the CLI then blocks what the hook
 * guards; by default it goes on. A callback runs as long as the turn it belongs to, at most its `timeout`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { ClaudeHooks } from "@tether/claude"
 *
 * const hooks: ClaudeHooks.Hooks = {
 *   PreToolUse: [{
 *     matcher: "Bash",
 *     timeout: 10,
 *     callback: (input) =>
 *       Effect.succeed(
 *         String((input.tool_input as { command?: unknown }).command).includes("rm -rf")
 *           ? {
 *             hookSpecificOutput: {
 *               hookEventName: "PreToolUse",
 *               permissionDecision: "deny",
 *               permissionDecisionReason: "not here"
 *             }
 *           }
 *           : {}
 *       )
 *   }],
 *   Stop: [{ callback: (input) => Effect.log(`stopped (hook active: ${input.stop_hook_active})`).pipe(Effect.as({})) }]
 * }
 * ```
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import type * as Effect from "effect/Effect"
import type { PermissionUpdate } from "./ClaudeProtocol.ts"

/**
 * Every hook event of Claude Code 2.1.332.
 *
 * @category models
 * @since 0.1.0
 */
export type HookEvent = keyof HookInputs

/**
 * What every hook input carries. `hook_event_name` names the event.
 *
 * @category models
 * @since 0.1.0
 */
export interface BaseHookInput {
  readonly session_id: string
  readonly transcript_path: string
  readonly cwd: string
  readonly prompt_id?: string | undefined
  readonly permission_mode?: string | undefined
  readonly agent_id?: string | undefined
  readonly agent_type?: string | undefined
  readonly [key: string]: unknown
}

interface ToolFields {
  readonly tool_name: string
  readonly tool_input: unknown
  readonly tool_use_id: string
  readonly mcp_server?: { readonly name: string; readonly source?: string | undefined } | undefined
}

interface ModelSwitchFields {
  readonly from_model: string
  readonly to_model: string
  readonly requested_model: string | null
  readonly context_tokens?: number | undefined
}

type Input<E extends string, Fields> = BaseHookInput & { readonly hook_event_name: E } & Fields

/**
 * The input of each event, by event name.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookInputs {
  readonly PreToolUse: Input<"PreToolUse", ToolFields>
  readonly PostToolUse: Input<
    "PostToolUse",
    ToolFields & { readonly tool_response: unknown; readonly duration_ms?: number | undefined }
  >
  readonly PostToolUseFailure: Input<
    "PostToolUseFailure",
    ToolFields & { readonly error: string; readonly is_interrupt?: boolean | undefined }
  >
  readonly PostToolBatch: Input<"PostToolBatch", {
    readonly tool_calls: ReadonlyArray<
      {
        readonly tool_name: string
        readonly tool_input: unknown
        readonly tool_use_id: string
        readonly tool_response?: unknown
      }
    >
  }>
  readonly Notification: Input<
    "Notification",
    { readonly message: string; readonly title?: string | undefined; readonly notification_type: string }
  >
  readonly UserPromptSubmit: Input<
    "UserPromptSubmit",
    { readonly prompt: string; readonly source?: string | undefined; readonly session_title?: string | undefined }
  >
  readonly UserPromptExpansion: Input<"UserPromptExpansion", {
    readonly expansion_type: "slash_command" | "mcp_prompt"
    readonly command_name: string
    readonly command_args: string
    readonly prompt: string
  }>
  readonly SessionStart: Input<"SessionStart", {
    readonly source: "startup" | "resume" | "clear" | "compact" | "fork"
    readonly model?: string | undefined
  }>
  readonly SessionEnd: Input<
    "SessionEnd",
    { readonly reason: "clear" | "resume" | "logout" | "prompt_input_exit" | "other" }
  >
  readonly Stop: Input<
    "Stop",
    { readonly stop_hook_active: boolean; readonly last_assistant_message?: string | undefined }
  >
  readonly StopFailure: Input<
    "StopFailure",
    { readonly error: string; readonly error_details?: unknown; readonly last_assistant_message?: string | undefined }
  >
  readonly SubagentStart: Input<"SubagentStart", { readonly agent_id: string; readonly agent_type: string }>
  readonly SubagentStop: Input<"SubagentStop", {
    readonly stop_hook_active: boolean
    readonly agent_id: string
    readonly agent_transcript_path: string
    readonly agent_type: string
    readonly last_assistant_message?: string | undefined
  }>
  readonly PreCompact: Input<
    "PreCompact",
    { readonly trigger: "manual" | "auto"; readonly custom_instructions: string | null }
  >
  readonly PostCompact: Input<"PostCompact", { readonly trigger: "manual" | "auto"; readonly compact_summary: string }>
  readonly PreModelSwitch: Input<"PreModelSwitch", ModelSwitchFields & { readonly source: string }>
  readonly PostModelSwitch: Input<"PostModelSwitch", ModelSwitchFields & { readonly source: string }>
  readonly PermissionRequest: Input<"PermissionRequest", {
    readonly tool_name: string
    readonly tool_input: unknown
    readonly permission_suggestions?: ReadonlyArray<PermissionUpdate> | undefined
  }>
  readonly PermissionDenied: Input<"PermissionDenied", ToolFields & { readonly reason: string }>
  readonly Setup: Input<"Setup", { readonly trigger: "init" | "maintenance" }>
  readonly TeammateIdle: Input<"TeammateIdle", { readonly teammate_name: string; readonly team_name: string }>
  readonly TaskCreated: Input<"TaskCreated", TaskFields>
  readonly TaskCompleted: Input<"TaskCompleted", TaskFields>
  readonly Elicitation: Input<"Elicitation", {
    readonly mcp_server_name: string
    readonly message: string
    readonly mode?: "form" | "url" | undefined
    readonly url?: string | undefined
    readonly elicitation_id?: string | undefined
    readonly requested_schema?: { readonly [key: string]: unknown } | undefined
  }>
  readonly ElicitationResult: Input<"ElicitationResult", {
    readonly mcp_server_name: string
    readonly elicitation_id?: string | undefined
    readonly action: "accept" | "decline" | "cancel"
    readonly content?: { readonly [key: string]: unknown } | undefined
  }>
  readonly ConfigChange: Input<"ConfigChange", { readonly source: string; readonly file_path?: string | undefined }>
  readonly WorktreeCreate: Input<"WorktreeCreate", { readonly name: string }>
  readonly WorktreeRemove: Input<"WorktreeRemove", { readonly worktree_path: string }>
  readonly InstructionsLoaded: Input<"InstructionsLoaded", {
    readonly file_path: string
    readonly memory_type: "User" | "Project" | "Local" | "Managed"
    readonly load_reason: string
  }>
  readonly CwdChanged: Input<"CwdChanged", { readonly old_cwd: string; readonly new_cwd: string }>
  readonly FileChanged: Input<
    "FileChanged",
    { readonly file_path: string; readonly event: "change" | "add" | "unlink" }
  >
  readonly DirectoryAdded: Input<"DirectoryAdded", { readonly directory: string; readonly source: string }>
  readonly MessageDisplay: Input<"MessageDisplay", {
    readonly turn_id: string
    readonly message_id: string
    readonly index: number
    readonly final: boolean
    readonly delta: string
  }>
  readonly PreSkillShellCommand: Input<
    "PreSkillShellCommand",
    ToolFields & {
      readonly command_name: string
      readonly invoked_by: "user" | "claude" | "other"
    }
  >
}

interface TaskFields {
  readonly task_id: string
  readonly task_subject: string
  readonly task_description?: string | undefined
  readonly teammate_name?: string | undefined
  readonly team_name?: string | undefined
}

interface Context {
  readonly additionalContext?: string | undefined
}

interface PermissionDecision<D extends string> {
  readonly permissionDecision?: D | undefined
  readonly permissionDecisionReason?: string | undefined
}

/**
 * The event-specific part of each event's answer (`hookSpecificOutput`, with `hookEventName` set to the event),
 * by event name; `never` where the event has none.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookSpecificOutputs {
  /** `allow` skips the permission prompt; `deny` refuses the tool with the reason; `updatedInput` rewrites it. */
  readonly PreToolUse: PermissionDecision<"allow" | "deny" | "ask" | "defer"> & Context & {
    readonly updatedInput?: { readonly [key: string]: unknown } | undefined
  }
  readonly PostToolUse: Context & {
    readonly updatedToolOutput?: unknown
    readonly updatedMCPToolOutput?: unknown
  }
  readonly PostToolUseFailure: Context
  readonly PostToolBatch: Context
  readonly Notification: Context
  readonly UserPromptSubmit: Context & {
    readonly sessionTitle?: string | undefined
    readonly suppressOriginalPrompt?: boolean | undefined
  }
  readonly UserPromptExpansion: Context & { readonly suppressOriginalPrompt?: boolean | undefined }
  readonly SessionStart: Context & {
    readonly initialUserMessage?: string | undefined
    readonly sessionTitle?: string | undefined
    readonly watchPaths?: ReadonlyArray<string> | undefined
  }
  readonly SessionEnd: never
  readonly Stop: Context
  readonly StopFailure: never
  readonly SubagentStart: Context
  readonly SubagentStop: Context
  readonly PreCompact: never
  readonly PostCompact: never
  readonly PreModelSwitch: PermissionDecision<"allow" | "deny" | "ask">
  readonly PostModelSwitch: Context
  readonly PermissionRequest: {
    readonly decision:
      | {
        readonly behavior: "allow"
        readonly updatedInput?: { readonly [key: string]: unknown } | undefined
        readonly updatedPermissions?: ReadonlyArray<PermissionUpdate> | undefined
      }
      | { readonly behavior: "deny"; readonly message?: string | undefined; readonly interrupt?: boolean | undefined }
  }
  readonly PermissionDenied: { readonly retry?: boolean | undefined }
  readonly Setup: Context
  readonly TeammateIdle: never
  readonly TaskCreated: never
  readonly TaskCompleted: never
  readonly Elicitation: {
    readonly action?: "accept" | "decline" | "cancel" | undefined
    readonly content?: { readonly [key: string]: unknown } | undefined
  }
  readonly ElicitationResult: {
    readonly action?: "accept" | "decline" | "cancel" | undefined
    readonly content?: { readonly [key: string]: unknown } | undefined
  }
  readonly ConfigChange: never
  /** Required: where the worktree was created. */
  readonly WorktreeCreate: { readonly worktreePath: string }
  readonly WorktreeRemove: never
  readonly InstructionsLoaded: never
  readonly CwdChanged: { readonly watchPaths?: ReadonlyArray<string> | undefined }
  readonly FileChanged: { readonly watchPaths?: ReadonlyArray<string> | undefined }
  readonly DirectoryAdded: never
  readonly MessageDisplay: { readonly displayContent?: string | undefined }
  readonly PreSkillShellCommand: PermissionDecision<"allow" | "deny" | "ask" | "defer"> & {
    readonly updatedInput?: { readonly [key: string]: unknown } | undefined
  }
}

/**
 * The answer to a hook (the CLI's `HookJSONOutput`): `{}` lets things go on; `continue: false` stops the turn with
 * `stopReason`; `decision: "block"` blocks what the hook guards with `reason`; `systemMessage` is shown to the
 * user; `hookSpecificOutput` carries the event's own answer. `{ async: true }` answers at once and lets the hook
 * finish in the background.
 *
 * @category models
 * @since 0.1.0
 */
export type HookOutput<E extends HookEvent = HookEvent> =
  | {
    readonly continue?: boolean | undefined
    readonly suppressOutput?: boolean | undefined
    readonly stopReason?: string | undefined
    readonly decision?: "approve" | "block" | undefined
    readonly systemMessage?: string | undefined
    readonly reason?: string | undefined
    readonly hookSpecificOutput?:
      | ([HookSpecificOutputs[E]] extends [never] ? never : { readonly hookEventName: E } & HookSpecificOutputs[E])
      | undefined
  }
  | { readonly async: true; readonly asyncTimeout?: number | undefined }

/**
 * What a hook callback gets besides its input: the tool use it is about, when there is one.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookContext {
  readonly toolUseId: string | undefined
}

/**
 * One hook registration: a matcher (tool events: a tool name, a regular expression over tool names, or none for
 * every tool), the callback, and its bounds.
 *
 * - `timeout`: seconds the CLI waits for the hook; the session stops the callback then too. Without it the
 *   callback runs as long as its turn.
 * - `onFailure`: `"block"` blocks what the hook guards when the callback fails (2.1.3xx); `"continue"` (default)
 *   goes on.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookMatcher<E extends HookEvent = HookEvent> {
  readonly matcher?: string | undefined
  readonly timeout?: number | undefined
  readonly onFailure?: "continue" | "block" | undefined
  readonly callback: (
    input: HookInputs[E],
    context: HookContext
  ) => Effect.Effect<HookOutput<E>, Permission.PolicyError>
}

/**
 * The hooks of a session, by event.
 *
 * @category models
 * @since 0.1.0
 */
export type Hooks = { readonly [E in HookEvent]?: ReadonlyArray<HookMatcher<E>> | undefined }

/**
 * Every event name, in the CLI's order.
 *
 * @category constants
 * @since 0.1.0
 */
export const events: ReadonlyArray<HookEvent> = [
  "PreToolUse",
  "PostToolUse",
  "PostToolUseFailure",
  "PostToolBatch",
  "Notification",
  "UserPromptSubmit",
  "UserPromptExpansion",
  "SessionStart",
  "SessionEnd",
  "Stop",
  "StopFailure",
  "SubagentStart",
  "SubagentStop",
  "PreCompact",
  "PostCompact",
  "PreModelSwitch",
  "PostModelSwitch",
  "PermissionRequest",
  "PermissionDenied",
  "Setup",
  "TeammateIdle",
  "TaskCreated",
  "TaskCompleted",
  "Elicitation",
  "ElicitationResult",
  "ConfigChange",
  "WorktreeCreate",
  "WorktreeRemove",
  "InstructionsLoaded",
  "CwdChanged",
  "FileChanged",
  "DirectoryAdded",
  "MessageDisplay",
  "PreSkillShellCommand"
]

/**
 * Narrows a hook input to its event (a callback registered for several events, or one that reads `raw` frames).
 *
 * @category guards
 * @since 0.1.0
 */
export const isEvent = <E extends HookEvent>(
  input: { readonly hook_event_name?: unknown },
  event: E
): input is HookInputs[E] => input.hook_event_name === event
