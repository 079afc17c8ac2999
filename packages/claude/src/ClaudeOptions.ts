/**
 * The `claude` command line, built from typed options, and the typed fields of its `initialize` request.
 *
 * Hosts never assemble argv by hand: {@link toLaunchSpec} gives the transport the program, the arguments, the
 * working directory and the environment. The protocol flags (`--output-format stream-json --verbose
 * --input-format stream-json`) always come first; every option becomes one `--flag=value` argv element, as the
 * official SDK does, so no value can be mistaken for a flag. Prompts never travel on argv: they are written to
 * stdin as user messages. What the CLI takes only in `initialize` (subagents, a system prompt preset, tool aliases,
 * skills, …) is {@link toInitialize}; a session sends it.
 *
 * @since 0.1.0
 */
import { isJson } from "@tether/core/codec/Json"
import { InvalidConfig } from "@tether/core/TetherError"
import { credentialProblems } from "@tether/core/Transport"
import type * as Transport from "@tether/core/Transport"
import type { Environment, LaunchSpec, SecretPipe } from "@tether/core/Transport"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { AgentDefinition, PermissionMode } from "./ClaudeProtocol.ts"

/**
 * The MCP servers to load (`--mcp-config`): an object with an `mcpServers` map (JSON), or a string (a path to a
 * JSON file, or a JSON string) passed as given.
 *
 * @category models
 * @since 0.1.0
 */
export type McpConfig = string | { readonly mcpServers: { readonly [name: string]: unknown } }

/**
 * The system prompt: Claude Code's own unless given.
 *
 * - a string: replaces it (`--system-prompt`; gotcha: argv is visible to other local users);
 * - a list of strings, or `{ type: "custom", prompt, snapshot }`: replaces it, through `initialize`;
 * - `{ type: "preset", preset: "claude_code", append, excludeDynamicSections, snapshot }`: keeps Claude Code's
 *   prompt, with `append` after it; `excludeDynamicSections` leaves out its per-machine parts (cwd, git status) so
 *   that prompts cache across machines.
 *
 * `snapshot: true` records the system prompt once per conversation. Unlike the SDK, leaving it out keeps Claude
 * Code's prompt (the SDK then sends an almost empty one).
 *
 * @category models
 * @since 0.1.0
 */
export type SystemPrompt =
  | string
  | ReadonlyArray<string>
  | {
    readonly type: "custom"
    readonly prompt: string | ReadonlyArray<string>
    readonly snapshot?: boolean | undefined
  }
  | {
    readonly type: "preset"
    readonly preset: "claude_code"
    readonly append?: string | undefined
    readonly excludeDynamicSections?: boolean | undefined
    readonly snapshot?: boolean | undefined
  }

/**
 * How the model thinks: `adaptive` (it decides; `--thinking=adaptive`), `enabled` with a token budget
 * (`--max-thinking-tokens`; without one, adaptive), or `disabled`. `display` chooses what thinking the CLI shows.
 *
 * @category models
 * @since 0.1.0
 */
export type Thinking =
  | { readonly type: "adaptive"; readonly display?: "summarized" | "omitted" | undefined }
  | {
    readonly type: "enabled"
    readonly budgetTokens?: number | undefined
    readonly display?: "summarized" | "omitted" | undefined
  }
  | { readonly type: "disabled" }

/**
 * The CLI's sandbox for the commands it runs (the `sandbox` key of its settings; see the CLI's documentation for
 * every field). Unknown fields are passed on.
 *
 * @category models
 * @since 0.1.0
 */
export interface SandboxSettings {
  readonly enabled?: boolean | undefined
  /** With `enabled`: refuse to start when no sandbox is available (the CLI's default then is to refuse). */
  readonly failIfUnavailable?: boolean | undefined
  readonly autoAllowBashIfSandboxed?: boolean | undefined
  readonly allowUnsandboxedCommands?: boolean | undefined
  readonly network?: {
    readonly allowedDomains?: ReadonlyArray<string> | undefined
    readonly deniedDomains?: ReadonlyArray<string> | undefined
    readonly allowUnixSockets?: ReadonlyArray<string> | undefined
    readonly allowLocalBinding?: boolean | undefined
    readonly [key: string]: unknown
  } | undefined
  readonly filesystem?: {
    readonly allowWrite?: ReadonlyArray<string> | undefined
    readonly denyWrite?: ReadonlyArray<string> | undefined
    readonly allowRead?: ReadonlyArray<string> | undefined
    readonly denyRead?: ReadonlyArray<string> | undefined
    readonly [key: string]: unknown
  } | undefined
  readonly [key: string]: unknown
}

/**
 * A plugin loaded from a directory (or a `.zip`). `skipMcpDiscovery`: load its skills, hooks, agents and commands
 * but not its MCP servers (`--plugin-dir-no-mcp`).
 *
 * @category models
 * @since 0.1.0
 */
export interface Plugin {
  readonly type: "local"
  readonly path: string
  readonly skipMcpDiscovery?: boolean | undefined
}

/**
 * The environment of the CLI process: `Transport.EnvironmentOptions`, which every provider's options share.
 *
 * @category models
 * @since 0.1.0
 */
export type EnvironmentOptions = Transport.EnvironmentOptions

/**
 * Typed options for the `claude` process.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** `--model`. */
  readonly model?: string | undefined
  /** `--fallback-model`; must differ from `model`. */
  readonly fallbackModel?: string | undefined
  /**
   * `--permission-mode`. Gotcha: `bypassPermissions` makes the CLI exit at start when it runs as root, unless
   * `IS_SANDBOX=1` is in its environment.
   */
  readonly permissionMode?: PermissionMode | undefined
  /**
   * `--permission-prompt-tool`. `"stdio"`: permission prompts reach the host as `can_use_tool` control requests,
   * which the session answers with its permission policy. A string names an MCP tool instead. `false` omits the
   * flag: the CLI then denies on its own every tool that needs approval (`system/permission_denied`) and the host is
   * never asked.
   *
   * Unset, a session asks (`"stdio"`) when the host gave it a `policy`, and leaves the flag out when it did not, as
   * the SDK does without `canUseTool`: the default policy denies everything, the CLI's own denials reach the host as
   * that policy's (`PermissionRequested`, then `PermissionResolved`), and the tools the CLI offers only when it can
   * ask (`AskUserQuestion`, `EnterPlanMode`, `ExitPlanMode`) stay out of every model request. {@link toArgs}, which
   * knows no policy, gives `"stdio"`.
   */
  readonly permissionPromptTool?: string | false | undefined
  /** `--allowedTools` (rules that are allowed without asking). */
  readonly allowedTools?: ReadonlyArray<string> | undefined
  /** `--disallowedTools`. */
  readonly disallowedTools?: ReadonlyArray<string> | undefined
  /**
   * The system prompt (see {@link SystemPrompt}): a string is `--system-prompt` (gotcha: argv is visible to other
   * local users; a list or an object goes through `initialize`, off the command line).
   */
  readonly systemPrompt?: SystemPrompt | undefined
  /** `--append-system-prompt` (with a preset, prefer its `append`). */
  readonly appendSystemPrompt?: string | undefined
  /** `--agent`: the agent the session runs as (one of `agents`, or one the CLI knows). */
  readonly agent?: string | undefined
  /** Subagents by name (`initialize.agents`): the model delegates to them with the `Task` tool. */
  readonly agents?: { readonly [name: string]: AgentDefinition } | undefined
  /** `--betas`: beta headers for the API requests. */
  readonly betas?: ReadonlyArray<string> | undefined
  /** `--effort`: how hard the model works. */
  readonly effort?: "low" | "medium" | "high" | "xhigh" | "max" | undefined
  /** How the model thinks (see {@link Thinking}). */
  readonly thinking?: Thinking | undefined
  /** `--max-thinking-tokens` (0: no thinking). Exclusive with `thinking`. */
  readonly maxThinkingTokens?: number | undefined
  /** `--task-budget`: a token budget for the task. */
  readonly taskBudget?: number | undefined
  /** `--tools`: the built-in tools available (`[]`: none; `"default"`: all). */
  readonly tools?: ReadonlyArray<string> | "default" | undefined
  /** Tool names the model sees, mapped to the CLI's tools (`initialize.toolAliases`). */
  readonly toolAliases?: { readonly [alias: string]: string } | undefined
  /**
   * Built-in tool behaviour: `askUserQuestion.previewFormat` (`"markdown"`, the CLI's default, or `"html"` for web
   * hosts), through `CLAUDE_CODE_QUESTION_PREVIEW_FORMAT`.
   */
  readonly toolConfig?: {
    readonly askUserQuestion?: { readonly previewFormat?: "markdown" | "html" | undefined } | undefined
  } | undefined
  /**
   * Skills: `"all"` allows the `Skill` tool; a list allows `Skill(name)` for each and tells the CLI which to offer
   * (`initialize.skills`).
   */
  readonly skills?: "all" | ReadonlyArray<string> | undefined
  /**
   * `--setting-sources`: the setting files the CLI reads (`[]`: none). Unset, the CLI's default (all of them).
   */
  readonly settingSources?: ReadonlyArray<"user" | "project" | "local"> | undefined
  /** `--settings`: settings as JSON (an object), or a path to a settings file (a string). */
  readonly settings?: string | { readonly [key: string]: unknown } | undefined
  /** `--managed-settings`: settings as an administrator would enforce them (JSON). */
  readonly managedSettings?: { readonly [key: string]: unknown } | undefined
  /**
   * The CLI's command sandbox: merged into `settings` under `sandbox` (so `settings` must then be an object, not a
   * path). `enabled: true` without `failIfUnavailable` sets it to true, as the SDK does: no silent unsandboxed run.
   */
  readonly sandbox?: SandboxSettings | undefined
  /** Plugins, each its own `--plugin-dir` (or `--plugin-dir-no-mcp`). */
  readonly plugins?: ReadonlyArray<Plugin> | undefined
  /** `--include-hook-events`: the CLI reports its shell hooks as `system/hook_*` frames. */
  readonly includeHookEvents?: boolean | undefined
  /** `--allow-dangerously-skip-permissions`: lets `setPermissionMode("bypassPermissions")` work later. */
  readonly allowDangerouslySkipPermissions?: boolean | undefined
  /**
   * Checkpoints of the files the CLI edits (`CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`), so that `rewindFiles`
   * can restore them.
   */
  readonly enableFileCheckpointing?: boolean | undefined
  /** `--project-config-root` (2.1.3xx): where the CLI looks for the project's `.claude` configuration. */
  readonly projectConfigRoot?: string | undefined
  /** `--resume-session-at`: with `resume`, resume at this message uuid. */
  readonly resumeSessionAt?: string | undefined
  /** `--resume-drops-turn` (2.1.3xx): with `resume`, drop the turn of this message uuid. */
  readonly resumeDropsTurn?: string | undefined
  /** `--debug` (with a category filter, `"hooks,mcp"`), and `--debug-file`. */
  readonly debug?: boolean | string | undefined
  readonly debugFile?: string | undefined
  /** Arguments before all others (for a wrapper program that runs the CLI). */
  readonly executableArgs?: ReadonlyArray<string> | undefined
  /** The title of a new session (`initialize.title`). */
  readonly title?: string | undefined
  /** Plan mode's instructions (`initialize.planModeInstructions`). */
  readonly planModeInstructions?: string | undefined
  /** `prompt_suggestion` frames after each result (`initialize.promptSuggestions`). */
  readonly promptSuggestions?: boolean | undefined
  /** Progress summaries of running subagents (`initialize.agentProgressSummaries`). */
  readonly agentProgressSummaries?: boolean | undefined
  /** Subagents' text and thinking as messages (`initialize.forwardSubagentText`). */
  readonly forwardSubagentText?: boolean | undefined
  /** A stop control per background task (`initialize.perTaskStopAffordance`; pairs with `stopTask`). */
  readonly perTaskStopAffordance?: boolean | undefined
  /** `--mcp-config`. */
  readonly mcpConfig?: McpConfig | undefined
  /** `--strict-mcp-config`: only the servers of `mcpConfig`. */
  readonly strictMcpConfig?: boolean | undefined
  /** The working directory of the process (not an argument). */
  readonly cwd?: string | undefined
  /** `--add-dir`, once per directory. */
  readonly additionalDirectories?: ReadonlyArray<string> | undefined
  /** `--resume`: the session id to resume. */
  readonly resume?: string | undefined
  /** `--continue`: the most recent session in `cwd`. */
  readonly continue?: boolean | undefined
  /** `--fork-session`: resume into a new session id (with `resume` or `continue`). */
  readonly forkSession?: boolean | undefined
  /** `--session-id`: a UUID for the new session (with `resume` or `continue`, the CLI also needs `forkSession`). */
  readonly sessionId?: string | undefined
  /** `--max-turns`: a positive integer. */
  readonly maxTurns?: number | undefined
  /** `--max-budget-usd`: a positive amount. */
  readonly maxBudgetUsd?: number | undefined
  /**
   * `--include-partial-messages`, on by default: `stream_event` frames (text deltas). Without them the CLI emits
   * nothing until a content block is complete, so the stall watchdog sees no progress while the model streams.
   */
  readonly includePartialMessages?: boolean | undefined
  /**
   * `--replay-user-messages`, on by default: the CLI replays each prompt under its uuid (2.1.197: only with the
   * turn's first model response) and echoes the host's own answers to its requests, which the session ignores. The
   * session's delivery fence does not wait for the replay: what the CLI prints after a prompt's write is that
   * turn's, and its first frame acknowledges it (2.1.3xx also sends `command_lifecycle queued`).
   */
  readonly replayUserMessages?: boolean | undefined
  /** `--no-session-persistence`: no transcript on disk (the session cannot be resumed). */
  readonly noSessionPersistence?: boolean | undefined
  /**
   * How a warm CLI of this configuration (`Registry.warm`) does its first turn's work before it is handed out; the
   * CLI's start and its conversation are the same either way. `"tokens"` (the default): `get_context_usage`, which
   * builds the system prompt, the tools' definitions and the model client the first request needs and counts each
   * part of the context with the API's token-count endpoint (free, but counted against the account's token-count rate
   * limit: about 15 requests per warm CLI on 2.1.332), the first token then about 5% sooner than with `"local"`.
   * `"local"`: its `summary`, answered without calling the API (2.1.332 and later; an older CLI is not primed).
   * `false`: none. Configurations that differ in it are different pools.
   */
  readonly warmPrime?: "tokens" | "local" | false | undefined
  /**
   * Flags Tether does not model: `{ name: value }` gives `--name=value`, `{ name: null }` gives `--name`. Names
   * of flags Tether builds itself are refused (use the typed option).
   */
  readonly extraArgs?: { readonly [name: string]: string | null } | undefined
  /** The environment of the process. */
  readonly env?: EnvironmentOptions | undefined
  /**
   * The Anthropic API key, handed over as `apiKeySource` says. Kept out of argv, logs and error messages either
   * way (the transport scrubs it from the CLI's stderr and stdout).
   */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /**
   * How the CLI gets `apiKey` (default `"descriptor"`):
   *
   * - `"descriptor"`: through an inherited pipe, `CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR` (a transport
   *   {@link SecretPipe}). The CLI reads it at start and removes the variable; the pipe is empty after. Readable by:
   *   the host and the CLI (its memory). Not in any environment, argv or file, so tool processes do not inherit
   *   it; a process of the same user that may ptrace the CLI (root; any same-uid process where Yama's
   *   ptrace_scope is 0) can still read the CLI's memory. Needs a transport that hands pipes over (the Node
   *   transport does, except on Windows, where the spawn fails with `SpawnFailed`: use `"environment"` there), and
   *   a CLI that reads the pipe: 2.1.332 does, 2.1.197 does not (it starts without a key, and every turn fails
   *   with `ApiError` "Not logged in"): use `"environment"` with 2.1.197.
   * - `"environment"`: `ANTHROPIC_API_KEY` in the CLI's environment. Readable by: the CLI, every process it
   *   starts (tools, hooks, MCP servers: `printenv` in a Bash tool hands it to the model), and every process of
   *   the same user through `/proc/<pid>/environ`, for as long as any of them runs.
   */
  readonly apiKeySource?: "descriptor" | "environment" | undefined
}

/**
 * The environment variable the CLI reads the number of its API key's descriptor from (Claude Code 2.1.3xx).
 *
 * @category constants
 * @since 0.1.0
 */
export const apiKeyDescriptorVariable = "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR"

/**
 * The flags that select the stream-json duplex protocol. Always the first arguments.
 *
 * @category constants
 * @since 0.1.0
 */
export const protocolArgs: ReadonlyArray<string> = [
  "--output-format",
  "stream-json",
  "--verbose",
  "--input-format",
  "stream-json"
]

/**
 * What Tether sets in the CLI's environment unless the host overrides it (`env.set`) or removes it (`env.unset`):
 * no non-essential traffic (no DNS lookups of api.anthropic.com, no title-generation calls), the SDK entrypoint,
 * `system/session_state_changed` frames, and no crash reports.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultEnvironment: { readonly [name: string]: string } = {
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  CLAUDE_CODE_ENTRYPOINT: "sdk-ts",
  CLAUDE_CODE_SDK_READS_SESSION_STATE: "1",
  BUN_ENABLE_CRASH_REPORTING: "0"
}

/**
 * What Tether removes from an inherited environment unless the host sets it explicitly: `NODE_OPTIONS` (the
 * host's Node flags must not leak into the CLI) and `DEBUG`, as the SDK does.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultUnset: ReadonlyArray<string> = ["NODE_OPTIONS", "DEBUG"]

const managedFlags = new Set([
  "output-format",
  "input-format",
  "verbose",
  "print",
  "p",
  "model",
  "fallback-model",
  "permission-mode",
  "permission-prompt-tool",
  "allowedTools",
  "allowed-tools",
  "disallowedTools",
  "disallowed-tools",
  "system-prompt",
  "append-system-prompt",
  "mcp-config",
  "strict-mcp-config",
  "add-dir",
  "resume",
  "r",
  "continue",
  "c",
  "fork-session",
  "session-id",
  "max-turns",
  "max-budget-usd",
  "include-partial-messages",
  "replay-user-messages",
  "no-session-persistence",
  "agent",
  "agents",
  "betas",
  "effort",
  "thinking",
  "thinking-display",
  "max-thinking-tokens",
  "task-budget",
  "tools",
  "setting-sources",
  "settings",
  "managed-settings",
  "plugin-dir",
  "plugin-dir-no-mcp",
  "include-hook-events",
  "allow-dangerously-skip-permissions",
  "project-config-root",
  "resume-session-at",
  "resume-drops-turn",
  "debug",
  "d",
  "debug-file",
  "json-schema",
  "session-mirror"
])

const flagName = /^[A-Za-z][A-Za-z0-9-]*$/
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const envName = /^[^=\0]+$/

const problemsOf = (options: Options): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const text = (name: string, value: string | undefined) => {
    if (value === undefined) return
    if (value.length === 0) problems.push(`${name} must not be empty`)
    if (value.includes("\0")) problems.push(`${name} must not contain a NUL character`)
  }
  const texts = (name: string, values: ReadonlyArray<string> | undefined) => {
    values?.forEach((value, i) => text(`${name}[${i}]`, value))
  }
  text("model", options.model)
  text("fallbackModel", options.fallbackModel)
  if (options.fallbackModel !== undefined && options.fallbackModel === options.model) {
    problems.push("fallbackModel must differ from model")
  }
  if (typeof options.permissionPromptTool === "string") text("permissionPromptTool", options.permissionPromptTool)
  texts("allowedTools", options.allowedTools)
  texts("disallowedTools", options.disallowedTools)
  const systemPrompt = options.systemPrompt
  if (typeof systemPrompt === "string") text("systemPrompt", systemPrompt)
  else if (Array.isArray(systemPrompt)) texts("systemPrompt", systemPrompt as ReadonlyArray<string>)
  else if (systemPrompt !== undefined && !isJson(systemPrompt)) problems.push("systemPrompt must be JSON")
  text("appendSystemPrompt", options.appendSystemPrompt)
  text("agent", options.agent)
  texts("betas", options.betas)
  if (options.thinking !== undefined && options.maxThinkingTokens !== undefined) {
    problems.push("thinking and maxThinkingTokens are exclusive: give one")
  }
  const budget = options.thinking?.type === "enabled" ? options.thinking.budgetTokens : undefined
  for (const [name, value] of [["maxThinkingTokens", options.maxThinkingTokens], ["thinking.budgetTokens", budget]]) {
    if (value !== undefined && !(Number.isSafeInteger(value) && (value as number) >= 0)) {
      problems.push(`${name} must be a non-negative integer`)
    }
  }
  if (options.taskBudget !== undefined && !(Number.isSafeInteger(options.taskBudget) && options.taskBudget > 0)) {
    problems.push("taskBudget must be a positive integer")
  }
  if (Array.isArray(options.tools)) texts("tools", options.tools as ReadonlyArray<string>)
  if (Array.isArray(options.skills)) texts("skills", options.skills as ReadonlyArray<string>)
  if (typeof options.settings === "string") text("settings", options.settings)
  for (
    const [name, value] of [
      ["settings", options.settings],
      ["managedSettings", options.managedSettings],
      ["sandbox", options.sandbox],
      ["agents", options.agents],
      ["toolAliases", options.toolAliases]
    ] as const
  ) {
    if (value !== undefined && typeof value !== "string" && !isJson(value)) {
      problems.push(`${name} must be JSON (plain objects, arrays, strings, finite numbers, booleans, null)`)
    }
  }
  if (options.sandbox !== undefined && typeof options.settings === "string") {
    problems.push("sandbox is merged into settings, which must then be an object, not a path")
  }
  for (const [i, plugin] of (options.plugins ?? []).entries()) text(`plugins[${i}].path`, plugin.path)
  text("projectConfigRoot", options.projectConfigRoot)
  text("resumeSessionAt", options.resumeSessionAt)
  text("resumeDropsTurn", options.resumeDropsTurn)
  if (typeof options.debug === "string") text("debug", options.debug)
  text("debugFile", options.debugFile)
  texts("executableArgs", options.executableArgs)
  if (typeof options.mcpConfig === "string") text("mcpConfig", options.mcpConfig)
  else if (options.mcpConfig !== undefined && !isJson(options.mcpConfig)) {
    problems.push("mcpConfig must be JSON (plain objects, arrays, strings, finite numbers, booleans, null)")
  }
  text("cwd", options.cwd)
  texts("additionalDirectories", options.additionalDirectories)
  text("resume", options.resume)
  if (options.resume !== undefined && options.continue === true) {
    problems.push("resume and continue are mutually exclusive")
  }
  const resuming = options.resume !== undefined || options.continue === true
  if (options.forkSession === true && !resuming) problems.push("forkSession requires resume or continue")
  if (options.sessionId !== undefined) {
    if (!uuid.test(options.sessionId)) problems.push("sessionId must be a UUID")
    if (resuming && options.forkSession !== true) {
      problems.push("sessionId with resume or continue requires forkSession")
    }
  }
  if (options.maxTurns !== undefined && !(Number.isSafeInteger(options.maxTurns) && options.maxTurns > 0)) {
    problems.push("maxTurns must be a positive integer")
  }
  if (options.maxBudgetUsd !== undefined && !(Number.isFinite(options.maxBudgetUsd) && options.maxBudgetUsd > 0)) {
    problems.push("maxBudgetUsd must be a positive finite number")
  }
  if (![undefined, "tokens", "local", false].includes(options.warmPrime)) {
    problems.push(`warmPrime must be "tokens", "local" or false`)
  }
  for (const [name, value] of Object.entries(options.extraArgs ?? {})) {
    if (!flagName.test(name)) {
      problems.push(`extraArgs: ${JSON.stringify(name)} is not a flag name (letters, digits, dashes; no leading dash)`)
    } else if (managedFlags.has(name)) {
      problems.push(`extraArgs: --${name} is built by Tether; use the typed option`)
    }
    if (value !== null) text(`extraArgs.${name}`, value)
  }
  for (const [name, value] of Object.entries(options.env?.set ?? {})) {
    if (!envName.test(name)) problems.push(`env.set: ${JSON.stringify(name)} is not a variable name`)
    if (typeof value === "string" && value.includes("\0")) {
      problems.push(`env.set.${name} must not contain a NUL character`)
    }
  }
  if (options.apiKey !== undefined) {
    const key = Redacted.value(options.apiKey)
    // Never quote the key: only say what is wrong with it.
    if (key.length === 0) problems.push("apiKey must not be empty")
    if (/[\0\r\n]/.test(key)) problems.push("apiKey must not contain a NUL character or a line break")
    if (options.env?.set !== undefined && Object.hasOwn(options.env.set, "ANTHROPIC_API_KEY")) {
      problems.push("apiKey and env.set.ANTHROPIC_API_KEY are both set: give the key once")
    }
  }
  for (const name of options.env?.unset ?? []) {
    if (!envName.test(name)) problems.push(`env.unset: ${JSON.stringify(name)} is not a variable name`)
  }
  if (options.env !== undefined) problems.push(...credentialProblems(options.env))
  return problems
}

/**
 * Checks options without building anything: the same checks as {@link toArgs} (equal `model` and
 * `fallbackModel`, both `resume` and `continue`, a `sessionId` that is not a UUID, flags Tether builds itself in
 * `extraArgs`, a credential such as `ANTHROPIC_API_KEY` given in `env.set` as a plain string, …), all reported at
 * once.
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = (options: Options): Effect.Effect<Options, InvalidConfig> => {
  const problems = problemsOf(options)
  return problems.length === 0 ? Effect.succeed(options) : Effect.fail(new InvalidConfig({ problems }))
}

/** The settings JSON for `--settings`: `settings`, with `sandbox` merged in under `sandbox`. */
const settingsOf = (options: Options): string | undefined => {
  const settings = options.settings
  if (typeof settings === "string") return settings
  const sandbox = options.sandbox
  if (sandbox === undefined) return settings === undefined ? undefined : JSON.stringify(settings)
  const merged = {
    ...settings,
    sandbox: {
      ...(settings?.sandbox as object | undefined),
      ...sandbox,
      ...(sandbox.enabled === true && sandbox.failIfUnavailable === undefined ? { failIfUnavailable: true } : {})
    }
  }
  return JSON.stringify(merged)
}

/** `allowedTools` with the `Skill` rules of `skills`. */
const allowedToolsOf = (options: Options): ReadonlyArray<string> => {
  const allowed = [...(options.allowedTools ?? [])]
  const skills = options.skills
  if (skills === "all") {
    if (!allowed.includes("Skill")) allowed.push("Skill")
  } else if (skills !== undefined) {
    for (const skill of skills) {
      const rule = `Skill(${skill})`
      if (!allowed.includes(rule)) allowed.push(rule)
    }
  }
  return allowed
}

const buildArgs = (options: Options): ReadonlyArray<string> => {
  const args = [...(options.executableArgs ?? []), ...protocolArgs]
  const flag = (name: string, value?: string) => {
    args.push(value === undefined ? `--${name}` : `--${name}=${value}`)
  }
  if (options.model !== undefined) flag("model", options.model)
  if (options.fallbackModel !== undefined) flag("fallback-model", options.fallbackModel)
  if (options.permissionMode !== undefined) flag("permission-mode", options.permissionMode)
  const promptTool = options.permissionPromptTool ?? "stdio"
  if (promptTool !== false) flag("permission-prompt-tool", promptTool)
  const allowed = allowedToolsOf(options)
  if (allowed.length > 0) flag("allowedTools", allowed.join(","))
  if (options.disallowedTools !== undefined && options.disallowedTools.length > 0) {
    flag("disallowedTools", options.disallowedTools.join(","))
  }
  if (typeof options.systemPrompt === "string") flag("system-prompt", options.systemPrompt)
  if (options.appendSystemPrompt !== undefined) flag("append-system-prompt", options.appendSystemPrompt)
  if (options.mcpConfig !== undefined) {
    flag("mcp-config", typeof options.mcpConfig === "string" ? options.mcpConfig : JSON.stringify(options.mcpConfig))
  }
  if (options.strictMcpConfig === true) flag("strict-mcp-config")
  for (const directory of options.additionalDirectories ?? []) flag("add-dir", directory)
  if (options.continue === true) flag("continue")
  if (options.resume !== undefined) flag("resume", options.resume)
  if (options.forkSession === true) flag("fork-session")
  if (options.sessionId !== undefined) flag("session-id", options.sessionId)
  if (options.maxTurns !== undefined) flag("max-turns", String(options.maxTurns))
  if (options.maxBudgetUsd !== undefined) flag("max-budget-usd", String(options.maxBudgetUsd))
  if (options.includePartialMessages !== false) flag("include-partial-messages")
  if (options.replayUserMessages !== false) flag("replay-user-messages")
  if (options.noSessionPersistence === true) flag("no-session-persistence")
  if (options.agent !== undefined) flag("agent", options.agent)
  if (options.betas !== undefined && options.betas.length > 0) flag("betas", options.betas.join(","))
  if (options.effort !== undefined) flag("effort", options.effort)
  const thinking = options.thinking
  if (thinking !== undefined) {
    if (thinking.type === "enabled" && thinking.budgetTokens !== undefined) {
      flag("max-thinking-tokens", String(thinking.budgetTokens))
    } else {
      flag("thinking", thinking.type === "disabled" ? "disabled" : "adaptive")
    }
    if (thinking.type !== "disabled" && thinking.display !== undefined) flag("thinking-display", thinking.display)
  } else if (options.maxThinkingTokens !== undefined) {
    if (options.maxThinkingTokens === 0) flag("thinking", "disabled")
    else flag("max-thinking-tokens", String(options.maxThinkingTokens))
  }
  if (options.taskBudget !== undefined) flag("task-budget", String(options.taskBudget))
  if (options.tools !== undefined) flag("tools", options.tools === "default" ? "default" : options.tools.join(","))
  if (options.settingSources !== undefined) flag("setting-sources", options.settingSources.join(","))
  const settings = settingsOf(options)
  if (settings !== undefined) flag("settings", settings)
  if (options.managedSettings !== undefined) flag("managed-settings", JSON.stringify(options.managedSettings))
  for (const plugin of options.plugins ?? []) {
    flag(plugin.skipMcpDiscovery === true ? "plugin-dir-no-mcp" : "plugin-dir", plugin.path)
  }
  if (options.includeHookEvents === true) flag("include-hook-events")
  if (options.allowDangerouslySkipPermissions === true) flag("allow-dangerously-skip-permissions")
  if (options.projectConfigRoot !== undefined) flag("project-config-root", options.projectConfigRoot)
  if (options.resumeSessionAt !== undefined) flag("resume-session-at", options.resumeSessionAt)
  if (options.resumeDropsTurn !== undefined) flag("resume-drops-turn", options.resumeDropsTurn)
  if (options.debug === true) flag("debug")
  else if (typeof options.debug === "string") flag("debug", options.debug)
  if (options.debugFile !== undefined) flag("debug-file", options.debugFile)
  for (const [name, value] of Object.entries(options.extraArgs ?? {})) flag(name, value ?? undefined)
  return args
}

/**
 * The `claude` arguments for the options: the protocol flags, then one `--flag=value` element per option.
 * Fails with `InvalidConfig` listing every problem (see {@link validate}). A session gives its own
 * `permissionPromptTool` (none without a policy: see {@link Options.permissionPromptTool}).
 *
 * @example
 * ```ts
 * import { ClaudeOptions } from "@tether/claude"
 *
 * const args = ClaudeOptions.toArgs({ model: "claude-opus-5-5", includePartialMessages: true })
 * // Effect.succeed(["--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
 * //   "--model=claude-opus-5-5", "--permission-prompt-tool=stdio", "--include-partial-messages",
 * //   "--replay-user-messages"])
 * ```
 *
 * @category conversions
 * @since 0.1.0
 */
export const toArgs = (options: Options): Effect.Effect<ReadonlyArray<string>, InvalidConfig> =>
  Effect.map(validate(options), buildArgs)

/** The variables the typed options set (file checkpointing, tool configuration); the host's `env.set` wins. */
const optionEnvironment = (options: Options): { readonly [name: string]: string } => {
  const set: Record<string, string> = {}
  if (options.enableFileCheckpointing === true) set.CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING = "true"
  const previewFormat = options.toolConfig?.askUserQuestion?.previewFormat
  if (previewFormat !== undefined) set.CLAUDE_CODE_QUESTION_PREVIEW_FORMAT = previewFormat
  return set
}

const buildEnvironment = (
  options: EnvironmentOptions | undefined,
  apiKey?: Redacted.Redacted<string> | undefined,
  typed: { readonly [name: string]: string } = {}
): Environment => {
  const userSet = apiKey === undefined
    ? { ...typed, ...options?.set }
    : { ...typed, ...options?.set, ANTHROPIC_API_KEY: apiKey }
  const userUnset = options?.unset ?? []
  const set: Record<string, string | Redacted.Redacted<string>> = {}
  for (const [name, value] of Object.entries(defaultEnvironment)) {
    if (!userUnset.includes(name)) set[name] = value
  }
  Object.assign(set, userSet)
  const unset = defaultUnset.filter((name) => !Object.hasOwn(userSet, name) && !userUnset.includes(name))
  const environment: Environment = { mode: options?.mode ?? "inherit", set, unset: [...unset, ...userUnset] }
  return options?.inheritCredentials === undefined
    ? environment
    : { ...environment, inheritCredentials: options.inheritCredentials }
}

/**
 * The environment of the CLI process: Tether's {@link defaultEnvironment} under the host's `set`, minus
 * {@link defaultUnset} (unless the host sets those) and the host's `unset`.
 *
 * @category conversions
 * @since 0.1.0
 */
export const toEnvironment = (options: Options): Effect.Effect<Environment, InvalidConfig> =>
  Effect.map(
    validate(options),
    (valid) => buildEnvironment(valid.env, keyInEnvironment(valid), optionEnvironment(valid))
  )

const keyInEnvironment = (options: Options): Redacted.Redacted<string> | undefined =>
  options.apiKeySource === "environment" ? options.apiKey : undefined

const secretPipesOf = (options: Options): ReadonlyArray<SecretPipe> =>
  options.apiKey === undefined || options.apiKeySource === "environment"
    ? []
    : [{ variable: apiKeyDescriptorVariable, value: options.apiKey }]

/**
 * The launch spec of a `claude` process: program `"claude"`, {@link toArgs}, `cwd`, {@link toEnvironment}.
 *
 * @example
 * ```ts
 * import { Redacted } from "effect"
 * import { ClaudeOptions } from "@tether/claude"
 *
 * const spec = ClaudeOptions.toLaunchSpec({
 *   cwd: "/home/user/project",
 *   permissionMode: "acceptEdits",
 *   env: { set: { ANTHROPIC_API_KEY: Redacted.make("sk-…") } }
 * })
 * ```
 *
 * @category conversions
 * @since 0.1.0
 */
export const toLaunchSpec = (options: Options): Effect.Effect<LaunchSpec, InvalidConfig> =>
  Effect.map(validate(options), (valid) => ({
    program: "claude",
    args: buildArgs(valid),
    cwd: Option.fromUndefinedOr(valid.cwd),
    env: buildEnvironment(valid.env, keyInEnvironment(valid), optionEnvironment(valid)),
    secretPipes: secretPipesOf(valid)
  }))

/**
 * The fields of the `initialize` request the typed options give: a system prompt that is not a plain string
 * (`systemPrompt`, `appendSystemPrompt`, `excludeDynamicSections`, `systemPromptSnapshot`), `agents`,
 * `toolAliases`, `skills` (a list), `title`, `planModeInstructions`, `promptSuggestions`,
 * `agentProgressSummaries`, `forwardSubagentText` and `perTaskStopAffordance`. Empty when none is set.
 *
 * @example
 * ```ts
 * import { ClaudeOptions } from "@tether/claude"
 *
 * const fields = ClaudeOptions.toInitialize({
 *   systemPrompt: { type: "preset", preset: "claude_code", append: "Answer in French." }
 * })
 * // { appendSystemPrompt: "Answer in French." }
 * ```
 *
 * @category conversions
 * @since 0.1.0
 */
export const toInitialize = (options: Options): { readonly [key: string]: unknown } => {
  const fields: Record<string, unknown> = {}
  const prompt = options.systemPrompt
  if (prompt !== undefined && typeof prompt !== "string") {
    if (Array.isArray(prompt)) {
      fields.systemPrompt = [...prompt]
    } else {
      const structured = prompt as Exclude<SystemPrompt, string | ReadonlyArray<string>>
      if (structured.type === "custom") {
        fields.systemPrompt = typeof structured.prompt === "string" ? [structured.prompt] : [...structured.prompt]
      } else {
        if (structured.append !== undefined) fields.appendSystemPrompt = structured.append
        if (structured.excludeDynamicSections !== undefined) {
          fields.excludeDynamicSections = structured.excludeDynamicSections
        }
      }
      if (structured.snapshot !== undefined) fields.systemPromptSnapshot = structured.snapshot
    }
  }
  if (options.agents !== undefined) fields.agents = options.agents
  if (options.toolAliases !== undefined) fields.toolAliases = options.toolAliases
  if (options.skills !== undefined && options.skills !== "all") fields.skills = [...options.skills]
  if (options.title !== undefined) fields.title = options.title
  if (options.planModeInstructions !== undefined) fields.planModeInstructions = options.planModeInstructions
  if (options.promptSuggestions !== undefined) fields.promptSuggestions = options.promptSuggestions
  if (options.agentProgressSummaries !== undefined) fields.agentProgressSummaries = options.agentProgressSummaries
  if (options.forwardSubagentText !== undefined) fields.forwardSubagentText = options.forwardSubagentText
  if (options.perTaskStopAffordance !== undefined) fields.perTaskStopAffordance = options.perTaskStopAffordance
  return fields
}
