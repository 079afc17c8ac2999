/**
 * A Claude Code session: the `claude` CLI over its stream-json duplex protocol, as a scoped resource.
 *
 * Beyond the neutral {@link Session.Session}: in-process MCP tools (`mcpServers`, see `ClaudeMcp`), structured
 * output decoded by a `Schema` (`outputSchema`), hooks typed per event (`ClaudeHooks`), answers to the CLI's
 * questions to the user (`onElicitation`, `userDialogs`), a transcript mirror (`sessionStore`), and every control
 * the CLI offers a host as a typed method, each bounded by the control timeout. {@link query} runs one prompt in a
 * session of its own.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ClaudeSession } from "@tether/claude"
 * import { Permission } from "@tether/core"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* ClaudeSession.make({
 *       policy: Permission.allowTools(["Read"]),
 *       outputSchema: Schema.Struct({ summary: Schema.String, files: Schema.Array(Schema.String) })
 *     })
 *     const result = yield* session.run("Summarize this repository")
 *     console.log(result.output.summary, result.output.files.length)
 *   })
 * ) // requires a Transport (NodeTransport.layer, or MockTransport.layer in tests)
 * ```
 *
 * @since 0.1.0
 */
import * as LazySchema from "@tether/core/codec/LazySchema"
import type * as Permission from "@tether/core/Permission"
import * as Provider from "@tether/core/Provider"
import * as Session from "@tether/core/Session"
import type * as SessionRegistry from "@tether/core/SessionRegistry"
import { ControlFailed, InvalidConfig, type ProtocolError } from "@tether/core/TetherError"
import type * as Transport from "@tether/core/Transport"
import type * as Turn_ from "@tether/core/Turn"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type {
  BudgetExceeded,
  MaxTurnsExceeded,
  StructuredOutputInvalid,
  StructuredOutputMissing,
  StructuredOutputRetriesExhausted
} from "./ClaudeError.ts"
import type * as ClaudeHooks from "./ClaudeHooks.ts"
import type * as ClaudeMcp from "./ClaudeMcp.ts"
import * as ClaudeOptions from "./ClaudeOptions.ts"
import * as internal from "./internal/machine.ts"
import * as Mcp from "./internal/mcp.ts"
import * as ClaudeProtocol from "./internal/protocol/runtime.ts"
import * as Requests from "./internal/requests.ts"
import * as Store from "./internal/store.ts"

/**
 * An MCP server the CLI runs asks the user for input (an `elicitation`): a form (`requestedSchema`) or a URL.
 *
 * @category models
 * @since 0.1.0
 */
export type ElicitationRequest = Requests.ElicitationRequest

/**
 * The CLI asks the host to show a dialog of a kind it declared (`request_user_dialog`).
 *
 * @category models
 * @since 0.1.0
 */
export type UserDialogRequest = Requests.UserDialogRequest

/**
 * Where a session's transcript is mirrored (the SDK's `SessionStore`): after each local write the CLI reports the
 * entries it wrote (2.1.3xx, `--session-mirror`), and the session appends them, in order. An append is retried twice
 * and bounded by a minute; a batch that still fails is dropped and logged, and the session goes on.
 *
 * Gotcha: resuming from a store is the host's part (core has no file system): write the entries back to
 * `<CLAUDE_CONFIG_DIR>/projects/<projectKey>/<sessionId>.jsonl` and `resume` the session id.
 *
 * @category models
 * @since 0.1.0
 */
export type SessionStore = Store.SessionStore

/**
 * Options of a Claude session: the CLI's typed options plus the session's own. `Out` is the type of the turns'
 * structured output (`outputSchema`).
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<Out = unknown> extends ClaudeOptions.Options, Session.HostOptions {
  /**
   * Decides tool-use permissions. Default: deny everything. With one, the CLI asks the session
   * (`--permission-prompt-tool=stdio`); without one, it is not asked and denies on its own what needs approval, which
   * the session reports as the default policy's deny (see `permissionPromptTool`).
   */
  readonly policy?: Permission.Policy | undefined
  /** Hook callbacks by event (`PreToolUse`, `UserPromptSubmit`, `Stop`, …), typed per event: see `ClaudeHooks`. */
  readonly hooks?: ClaudeHooks.Hooks | undefined
  /**
   * MCP servers that run in the host (`ClaudeMcp.server`), declared in `initialize` and served over the CLI's
   * stdio. Servers the CLI runs itself go in `mcpConfig`.
   */
  readonly mcpServers?: ReadonlyArray<ClaudeMcp.Server> | undefined
  /**
   * Structured output: every turn ends with a value of this schema. Its JSON Schema (of its JSON form) is given to
   * the CLI (`--json-schema`), which makes the model answer through a `StructuredOutput` tool and checks the answer;
   * the session decodes it (`result.output`). A turn without one fails with `StructuredOutputMissing`, one that does
   * not decode with `StructuredOutputInvalid`, and one where the model kept failing the JSON Schema with
   * `StructuredOutputRetriesExhausted`. The schema must be an object schema that decodes synchronously.
   */
  readonly outputSchema?: Schema.Codec<Out, unknown, never, unknown> | undefined
  /**
   * Answers an MCP server's request for user input (an elicitation; only servers the CLI runs elicit). Default:
   * declined. A failure answers the CLI with an error.
   */
  readonly onElicitation?:
    | ((request: ElicitationRequest) => Effect.Effect<ClaudeProtocol.ElicitResult, Permission.PolicyError>)
    | undefined
  /**
   * Dialogs the host shows for the CLI: the kinds it supports (declared in `initialize`; the CLI sends no other),
   * and the callback that answers them (`completed` with a result, or `cancelled`, which applies the dialog's
   * default).
   */
  readonly userDialogs?: {
    readonly kinds: ReadonlyArray<string>
    readonly handle: (
      request: UserDialogRequest
    ) => Effect.Effect<ClaudeProtocol.UserDialogResult, Permission.PolicyError>
  } | undefined
  /**
   * Every prompt goes to the CLI as the user typed it (`client_composed: true`): a leading `/` is text, not a slash
   * command.
   */
  readonly verbatimPrompts?: boolean | undefined
  /** Mirrors the transcript to a store (see {@link SessionStore}). */
  readonly sessionStore?: SessionStore | undefined
  /** Extra fields for the `initialize` request, over the typed ones. */
  readonly initialize?: { readonly [key: string]: unknown } | undefined
}

/**
 * Errors of the Claude controls.
 *
 * @category errors
 * @since 0.1.0
 */
export type ControlError = Session.ControlError

/**
 * An in-process server or the configuration of one the CLI runs (`{ type: "stdio", command, args }`, `{ type:
 * "http", url }`, …), for {@link ClaudeSession.setMcpServers}.
 *
 * @category models
 * @since 0.1.0
 */
export type McpServerSpec = ClaudeMcp.Server | { readonly type: string; readonly [key: string]: unknown }

/**
 * A live Claude session: the provider-neutral {@link Session.Session} plus Claude's controls. Every control is
 * bounded by the control timeout; its answer is decoded, and one that does not match fails with `ControlFailed`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaudeSession<Out = unknown> extends Session.Session<TurnResult<Out>, TurnError> {
  readonly initializeResponse: ClaudeProtocol.InitializeResponse
  readonly setPermissionMode: (
    mode: ClaudeProtocol.PermissionMode
  ) => Effect.Effect<ClaudeProtocol.SetPermissionModeResponse, ControlError>
  readonly setModel: (model: string | null) => Effect.Effect<ClaudeProtocol.SetModelResponse, ControlError>
  readonly setMaxThinkingTokens: (tokens: number | null) => Effect.Effect<void, ControlError>
  readonly mcpStatus: Effect.Effect<ClaudeProtocol.McpStatusResponse, ControlError>
  readonly getContextUsage: Effect.Effect<ClaudeProtocol.ContextUsageResponse, ControlError>
  /** The slash commands and skills the CLI offered at start (`initialize.commands`). */
  readonly supportedCommands: Effect.Effect<ReadonlyArray<ClaudeProtocol.SlashCommand>>
  /** The models the CLI offered at start: `value` is what {@link setModel} takes. */
  readonly supportedModels: Effect.Effect<ReadonlyArray<ClaudeProtocol.ModelInfo>>
  /** The subagents the CLI offered at start. */
  readonly supportedAgents: Effect.Effect<ReadonlyArray<ClaudeProtocol.AgentInfo>>
  /** The account the CLI runs as. */
  readonly accountInfo: Effect.Effect<ClaudeProtocol.AccountInfo>
  /**
   * Restores the files the CLI changed since the user message `userMessageId` (a turn's id: the session sends each
   * prompt with its turn id as the message's uuid). Needs `enableFileCheckpointing`. `dryRun` only reports.
   */
  readonly rewindFiles: (
    userMessageId: string,
    options?: { readonly dryRun?: boolean | undefined }
  ) => Effect.Effect<ClaudeProtocol.RewindFilesResponse, ControlError>
  /**
   * Replaces the MCP servers added at run time, by name: in-process servers (`ClaudeMcp.server`, served by this
   * session from then on) and configurations of servers the CLI runs. Calls run one at a time. If the CLI refuses
   * the change (answers with an error: `ControlFailed`), the session serves what it served before; if its answer
   * does not decode or never comes, the change may have happened, and the new servers stay served.
   */
  readonly setMcpServers: (
    servers: { readonly [name: string]: McpServerSpec }
  ) => Effect.Effect<ClaudeProtocol.McpSetServersResponse, ControlError>
  readonly toggleMcpServer: (name: string, enabled: boolean) => Effect.Effect<void, ControlError>
  readonly reconnectMcpServer: (name: string) => Effect.Effect<void, ControlError>
  /** Reads a resource of a server the CLI runs (2.1.3xx). */
  readonly readMcpResource: (
    server: string,
    uri: string
  ) => Effect.Effect<ClaudeProtocol.McpReadResourceResponse, ControlError>
  /** `"auto"`: the server's tools run without asking; `null` clears the override. */
  readonly setMcpPermissionModeOverride: (
    server: string,
    mode: "default" | "auto" | null
  ) => Effect.Effect<ClaudeProtocol.McpPermissionModeOverrideResponse, ControlError>
  /** Stops a background task (a `system/task_notification` with `status: "stopped"` follows). */
  readonly stopTask: (taskId: string) => Effect.Effect<void, ControlError>
  /** Moves the running tool (or the one of `toolUseId`) to the background. */
  readonly backgroundTasks: (toolUseId?: string) => Effect.Effect<ClaudeProtocol.BackgroundTasksResponse, ControlError>
  readonly reloadPlugins: (options?: {
    readonly holdOnCacheImpact?: boolean | undefined
    readonly addPlugins?: ReadonlyArray<ClaudeOptions.Plugin> | undefined
    readonly refuseIfBusy?: boolean | undefined
  }) => Effect.Effect<ClaudeProtocol.ReloadPluginsResponse, ControlError>
  readonly reloadSkills: Effect.Effect<ClaudeProtocol.ReloadSkillsResponse, ControlError>
  readonly reloadOutputStyles: Effect.Effect<ClaudeProtocol.ReloadOutputStylesResponse, ControlError>
  /** Applies settings as if given with `--settings`. */
  readonly applyFlagSettings: (settings: { readonly [key: string]: unknown }) => Effect.Effect<void, ControlError>
  /** Writes the settings the CLI lets a host write (`localSettings` `outputStyle`, `userSettings` `effortLevel`). */
  readonly updateSettings: (
    source: "localSettings" | "userSettings",
    settings: { readonly [key: string]: unknown }
  ) => Effect.Effect<void, ControlError>
  /** The effective settings, and where each came from. */
  readonly getSettings: Effect.Effect<ClaudeProtocol.OpenResponse, ControlError>
  /** A file as the CLI reads it. */
  readonly readFile: (
    path: string,
    options?: { readonly maxBytes?: number | undefined; readonly encoding?: "utf-8" | "base64" | undefined }
  ) => Effect.Effect<ClaudeProtocol.ReadFileResponse, ControlError>
  /** Tells the CLI the host read `path` as of `mtime` (ms), so an edit needs no fresh read. */
  readonly seedReadState: (path: string, mtime: number) => Effect.Effect<void, ControlError>
  /** The session's usage and the account's rate limits. */
  readonly getUsage: Effect.Effect<ClaudeProtocol.OpenResponse, ControlError>
  /** Sends `initialize` again, with the same hooks and fields (the CLI redelivers pending requests). */
  readonly reinitialize: Effect.Effect<ClaudeProtocol.InitializeResponse, ControlError>
}

/**
 * The result of a Claude turn: the neutral result plus what Claude's `result` frame says (cost, subtype, stop and
 * terminal reasons, permission denials), and `output`, the structured output: decoded by the session's
 * `outputSchema`, else as the CLI sent it (`undefined` when there is none).
 *
 * @category models
 * @since 0.1.0
 */
export type TurnResult<Out = unknown> = Omit<internal.TurnResult, "output"> & { readonly output: Out }

/**
 * A tool use the CLI refused during the turn because permission was denied.
 *
 * @category models
 * @since 0.1.0
 */
export type PermissionDenial = internal.PermissionDenial

export {
  /**
   * The turn stopped because it reached its budget (`maxBudgetUsd`); resumable with `sessionId`.
   *
   * @category errors
   * @since 0.1.0
   */
  BudgetExceeded,
  /**
   * The turn stopped at its maximum number of model round trips (`maxTurns`); resumable with `sessionId`.
   *
   * @category errors
   * @since 0.1.0
   */
  MaxTurnsExceeded,
  /**
   * The turn's structured output does not decode with `outputSchema`; carries the value and the result frame.
   *
   * @category errors
   * @since 0.1.0
   */
  StructuredOutputInvalid,
  /**
   * The turn succeeded without structured output (the model answered in text); carries the result frame.
   *
   * @category errors
   * @since 0.1.0
   */
  StructuredOutputMissing,
  /**
   * The model kept failing the output's JSON Schema (`error_max_structured_output_retries`).
   *
   * @category errors
   * @since 0.1.0
   */
  StructuredOutputRetriesExhausted
} from "./ClaudeError.ts"

/**
 * Claude's own turn errors, besides the neutral `Turn.TurnError`s.
 *
 * @category errors
 * @since 0.1.0
 */
export type TurnError =
  | MaxTurnsExceeded
  | BudgetExceeded
  | StructuredOutputMissing
  | StructuredOutputInvalid
  | StructuredOutputRetriesExhausted

// Named apart: inside the augmentation, `TurnError` would be core's own.
type ClaudeTurnError = TurnError

declare module "@tether/core/Turn" {
  /** Claude's own turn errors, on every neutral `Session` of a program that imports `@tether/claude`. */
  interface ProviderTurnErrors {
    readonly claude: ClaudeTurnError
  }
}

/**
 * A turn of a Claude session.
 *
 * @category models
 * @since 0.1.0
 */
export type Turn<Out = unknown> = Turn_.Turn<TurnResult<Out>, TurnError>

/**
 * A session's `outputSchema`, with the `effect/Schema` module that reads it (loaded when a host gives one, which it
 * built with that module: see `LazySchema`) and its JSON Schema, which the CLI is given.
 */
interface StructuredOutput {
  readonly schema: Schema.Top
  readonly S: LazySchema.SchemaModule
  readonly jsonSchema: Mcp.JsonSchema
}

const structuredOutputOf = (schema: Schema.Top): Effect.Effect<StructuredOutput> =>
  Effect.map(LazySchema.load, (S) => ({ schema, S, jsonSchema: Mcp.jsonSchemaOf(S, schema) }))

/** Decodes structured output (the JSON form of the schema, as the CLI sends JSON). */
const outputDecoder = ({ S, schema }: StructuredOutput) => {
  const decode = S.decodeUnknownResult(S.toCodecJson(schema as Schema.Codec<unknown, unknown, never>))
  return (value: unknown): Result.Result<unknown, string> => {
    const decoded = decode(value)
    return Result.isSuccess(decoded) ? Result.succeed(decoded.success) : Result.fail(decoded.failure.message)
  }
}

/** What a session sends in `initialize`, beyond the hooks: the typed options' fields, then the host's own. */
const initializeFields = (options: Options<unknown>): { readonly [key: string]: unknown } => ({
  ...ClaudeOptions.toInitialize(options),
  ...Mcp.initializeFields(options.mcpServers ?? []),
  ...(options.userDialogs !== undefined ? { supportedDialogKinds: [...options.userDialogs.kinds] } : {}),
  ...options.initialize
})

/** What a session's options add to the command line: the output's JSON Schema, the transcript mirror. */
const extraArgs = (options: Options<unknown>, output: StructuredOutput | undefined): ReadonlyArray<string> => [
  ...(output !== undefined ? [`--json-schema=${JSON.stringify(output.jsonSchema.schema)}`] : []),
  ...(options.sessionStore !== undefined ? ["--session-mirror"] : [])
]

/**
 * A session's `--permission-prompt-tool`: the host's `permissionPromptTool` if given; else `stdio` when the host gave
 * a policy, for the CLI to ask it, and none without one. The default policy denies everything, and asking it costs
 * the CLI's first request the tools it offers only when it can ask (`AskUserQuestion`, `EnterPlanMode`,
 * `ExitPlanMode`: about 2,800 input tokens in every request): without the flag the CLI denies on its own what needs
 * approval, which the session reports as the default policy's denials (`reportDenials`).
 */
const permissionPromptToolOf = (options: Options<unknown>): string | false =>
  options.permissionPromptTool ?? (options.policy === undefined ? false : "stdio")

/** The options with a conversation placement applied (see `Session.Conversation`). */
const placed = (options: Options<unknown>, placement: Session.Placement | undefined): Options<unknown> => {
  if (placement === undefined) return options
  const { continue: _continue, forkSession: _fork, resume: _resume, sessionId, ...rest } = options
  return {
    ...rest,
    ...(placement.resume === undefined
      ? (sessionId === undefined ? {} : { sessionId })
      : { resume: placement.resume }),
    env: { ...options.env, set: { ...options.env?.set, CLAUDE_CONFIG_DIR: placement.directory } }
  }
}

const sessionProblems = (
  options: Options<unknown>,
  output: StructuredOutput | undefined
): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(Mcp.problemsOf(options.mcpServers ?? []), (problems) => [
    ...problems,
    ...(output?.jsonSchema._tag === "NotAnObject"
      ? ["outputSchema must be an object schema (a Schema.Struct): the CLI's StructuredOutput tool takes an object"]
      : [])
  ])

const isInProcess = (spec: McpServerSpec): spec is ClaudeMcp.Server =>
  Array.isArray((spec as { readonly tools?: unknown }).tools) && typeof spec.name === "string" &&
  typeof (spec as { readonly version?: unknown }).version === "string"

/**
 * `setMcpServers`: the in-process servers of `specs` are served from before the request goes out, and what they
 * replace is served again if the CLI refuses the change; one change at a time, so that each one's undo is what the
 * servers were just before it.
 */
const setMcpServers = (
  control: Control,
  specs: Parameters<ClaudeSession["setMcpServers"]>[0],
  servers: Map<string, ClaudeMcp.Server>,
  initialServers: ReadonlyArray<ClaudeMcp.Server>,
  mcpChanges: Semaphore.Semaphore
): Effect.Effect<ClaudeProtocol.McpSetServersResponse, ControlError> =>
  Effect.suspend(() => {
    const added = new Map<string, ClaudeMcp.Server>()
    const wire: Record<string, { readonly [key: string]: unknown }> = {}
    for (const [name, spec] of Object.entries(specs)) {
      if (isInProcess(spec)) {
        added.set(name, spec.name === name ? spec : { ...spec, name })
        wire[name] = { type: "sdk", name }
      } else {
        wire[name] = spec
      }
    }
    // One change at a time: each one's undo (below) is then what the servers were just before it.
    const change = mcpChanges.withPermits(1)(Effect.suspend(() => {
      // Served from before the request goes out: the CLI connects to a new server as soon as it is told. What
      // they replace is kept, to be served again if the CLI refuses the change.
      const replaced = new Map<string, ClaudeMcp.Server | undefined>()
      for (const [name, server] of added) {
        replaced.set(name, servers.get(name))
        servers.set(name, server)
      }
      return control({ subtype: "mcp_set_servers", servers: wire }, ClaudeProtocol.decodeMcpSetServersResponse)
        .pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              for (const name of [...servers.keys()]) {
                if (!added.has(name) && !initialServers.some((server) => server.name === name)) servers.delete(name)
              }
            })
          ),
          // Refused (the CLI answered with an error), the change did not happen: the CLI calls the servers it had.
          // An answer that did not decode, or none (a timeout), may follow a change that happened: the new servers
          // stay served, which is harmless if the CLI never connects to them.
          Effect.tapErrorTag("ControlFailed", (error) =>
            error.code === "malformed_response" ? Effect.void : Effect.sync(() => {
              for (const [name, previous] of replaced) {
                if (previous === undefined) {
                  servers.delete(name)
                } else servers.set(name, previous)
              }
            }))
        )
    }))
    return Effect.flatMap(Mcp.problemsOf([...added.values()]), (invalid) =>
      invalid.length > 0
        ? Effect.fail(
          new ControlFailed({ subtype: "mcp_set_servers", reason: invalid.join("; "), code: "invalid_request" })
        )
        : change)
  })

/** A control request answered by a payload that `decode` reads; one that does not match fails the control. */
type Control = <A>(
  request: ClaudeProtocol.ControlRequestInput,
  decode: (payload: unknown) => Result.Result<A, ProtocolError>
) => Effect.Effect<A, ControlError>

/** The Claude surface over a started session: its handshake's answers and a method per control request. */
const surface = (
  session: Session.Session<TurnResult, TurnError>,
  state: {
    readonly hooks: ClaudeProtocol.InitializeRequest["hooks"]
    readonly initialize: ReturnType<typeof initializeFields>
    readonly servers: Map<string, ClaudeMcp.Server>
    readonly initialServers: ReadonlyArray<ClaudeMcp.Server>
    readonly mcpChanges: Semaphore.Semaphore
  }
): ClaudeSession => {
  const { hooks, initialize, servers, initialServers, mcpChanges } = state
  const initializeResponse = session.handshake as ClaudeProtocol.InitializeResponse
  // Each answer is decoded by its schema; one that does not match fails the control, like an error answer.
  const control: Control = (request, decode) =>
    Effect.flatMap(session.control(request), (payload) => {
      const decoded = decode(payload)
      return Result.isSuccess(decoded)
        ? Effect.succeed(decoded.success)
        : Effect.fail(
          new ControlFailed({ subtype: request.subtype, reason: decoded.failure.message, code: "malformed_response" })
        )
    })
  const done = (request: ClaudeProtocol.ControlRequestInput) => Effect.asVoid(session.control(request))
  return {
    ...session,
    initializeResponse,
    setPermissionMode: (mode) =>
      control({ subtype: "set_permission_mode", mode }, ClaudeProtocol.decodeSetPermissionModeResponse),
    setModel: (model) => control({ subtype: "set_model", model }, ClaudeProtocol.decodeSetModelResponse),
    setMaxThinkingTokens: (tokens) => done({ subtype: "set_max_thinking_tokens", max_thinking_tokens: tokens }),
    mcpStatus: control({ subtype: "mcp_status" }, ClaudeProtocol.decodeMcpStatusResponse),
    getContextUsage: control({ subtype: "get_context_usage" }, ClaudeProtocol.decodeContextUsageResponse),
    supportedCommands: Effect.succeed(initializeResponse.commands ?? []),
    supportedModels: Effect.succeed(initializeResponse.models ?? []),
    supportedAgents: Effect.succeed(initializeResponse.agents ?? []),
    accountInfo: Effect.succeed(initializeResponse.account ?? {}),
    rewindFiles: (userMessageId, rewind) =>
      control(
        {
          subtype: "rewind_files",
          user_message_id: userMessageId,
          ...(rewind?.dryRun !== undefined ? { dry_run: rewind.dryRun } : {})
        },
        ClaudeProtocol.decodeRewindFilesResponse
      ),
    setMcpServers: (specs) => setMcpServers(control, specs, servers, initialServers, mcpChanges),
    toggleMcpServer: (name, enabled) => done({ subtype: "mcp_toggle", serverName: name, enabled }),
    reconnectMcpServer: (name) => done({ subtype: "mcp_reconnect", serverName: name }),
    readMcpResource: (server, uri) =>
      control({ subtype: "mcp_read_resource", serverName: server, uri }, ClaudeProtocol.decodeMcpReadResourceResponse),
    setMcpPermissionModeOverride: (server, mode) =>
      control(
        { subtype: "set_mcp_permission_mode_override", serverName: server, mode },
        ClaudeProtocol.decodeMcpPermissionModeOverrideResponse
      ),
    stopTask: (taskId) => done({ subtype: "stop_task", task_id: taskId }),
    backgroundTasks: (toolUseId) =>
      control(
        { subtype: "background_tasks", ...(toolUseId !== undefined ? { tool_use_id: toolUseId } : {}) },
        ClaudeProtocol.decodeBackgroundTasksResponse
      ),
    reloadPlugins: (reload) =>
      control(
        {
          subtype: "reload_plugins",
          ...(reload?.holdOnCacheImpact !== undefined ? { hold_on_cache_impact: reload.holdOnCacheImpact } : {}),
          ...(reload?.addPlugins !== undefined
            ? { add_plugins: reload.addPlugins.map((plugin) => ({ ...plugin })) }
            : {}),
          ...(reload?.refuseIfBusy !== undefined ? { refuse_if_busy: reload.refuseIfBusy } : {})
        },
        ClaudeProtocol.decodeReloadPluginsResponse
      ),
    reloadSkills: control({ subtype: "reload_skills" }, ClaudeProtocol.decodeReloadSkillsResponse),
    reloadOutputStyles: control({ subtype: "reload_output_styles" }, ClaudeProtocol.decodeReloadOutputStylesResponse),
    applyFlagSettings: (settings) => done({ subtype: "apply_flag_settings", settings }),
    updateSettings: (source, settings) => done({ subtype: "update_settings", source, settings }),
    getSettings: control({ subtype: "get_settings" }, ClaudeProtocol.decodeOpenResponse),
    readFile: (path, read) =>
      control(
        {
          subtype: "read_file",
          path,
          ...(read?.maxBytes !== undefined ? { max_bytes: read.maxBytes } : {}),
          ...(read?.encoding !== undefined ? { encoding: read.encoding } : {})
        },
        ClaudeProtocol.decodeReadFileResponse
      ),
    seedReadState: (path, mtime) => done({ subtype: "seed_read_state", path, mtime }),
    getUsage: control({ subtype: "get_usage" }, ClaudeProtocol.decodeOpenResponse),
    reinitialize: control(
      { subtype: "initialize", hooks, ...initialize } as ClaudeProtocol.ControlRequestInput,
      ClaudeProtocol.decodeInitializeResponse
    )
  }
}

const makeSession = Effect.fn("ClaudeSession.make")(function*(given: Options<unknown>) {
  const options = placed(given, yield* Session.Conversation)
  const output = options.outputSchema === undefined ? undefined : yield* structuredOutputOf(options.outputSchema)
  const problems = yield* sessionProblems(options, output)
  if (problems.length > 0) return yield* new InvalidConfig({ problems })
  const promptTool = permissionPromptToolOf(options)
  const spec = yield* ClaudeOptions.toLaunchSpec({ ...options, permissionPromptTool: promptTool })
  const launch: Transport.LaunchSpec = { ...spec, args: [...spec.args, ...extraArgs(options, output)] }
  const hooks = Requests.hookRegistry(options.hooks)
  const initialize = initializeFields(options)
  // The in-process servers the handler serves: those of the options, then those `setMcpServers` adds.
  const initialServers = options.mcpServers ?? []
  const servers = new Map<string, ClaudeMcp.Server>(initialServers.map((server) => [server.name, server]))
  // `setMcpServers` calls, one at a time.
  const mcpChanges = Semaphore.makeUnsafe(1)
  const session = yield* Session.make({
    provider: internal.make({
      hooks: hooks.config,
      initialize,
      maxLineLength: ClaudeProtocol.defaultMaxLineLength,
      structuredOutput: output === undefined ? undefined : outputDecoder(output),
      verbatimPrompts: options.verbatimPrompts,
      // No one is asked: what the CLI denies on its own is what the session's default policy would have denied.
      reportDenials: options.policy === undefined && promptTool === false
    }),
    handle: Requests.handler({
      hooks: hooks.callbacks,
      servers,
      questions: { onElicitation: options.onElicitation, userDialogs: options.userDialogs }
    }),
    launch,
    model: options.model,
    // The host's options every session takes (timeouts, policy, queue, rings, ids), as they are.
    ...Session.hostOptions(options)
  }) as Effect.Effect<
    Session.Session<TurnResult, TurnError>,
    Session.StartError,
    Transport.Transport | Scope.Scope
  >
  if (options.sessionStore !== undefined) yield* Store.mirror(session, options.sessionStore)
  return surface(session, { hooks: hooks.config, initialize, servers, initialServers, mcpChanges })
})

/**
 * Starts a Claude session in the current scope: builds the `claude` command line from the typed options,
 * opens it through the `Transport` in context, and completes the `initialize` handshake within the startup
 * timeout. Closing the scope releases it. With `outputSchema`, every turn's `output` is of its type. A
 * `Session.Conversation` placement in context decides where the transcript lives (`CLAUDE_CONFIG_DIR`) and which
 * conversation it resumes; that directory is Claude's whole configuration directory, so its login
 * (`.credentials.json`), settings and MCP configuration are not the user's (see `Session.Placement`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: <Out = unknown>(
  options?: Options<Out>
) => Effect.Effect<ClaudeSession<Out>, StartError, Transport.Transport | Scope.Scope> = (options = {}) =>
  makeSession(options as Options<unknown>) as Effect.Effect<
    ClaudeSession<never>,
    StartError,
    Transport.Transport | Scope.Scope
  >

/**
 * What {@link query} can fail with: starting the session, sending the prompt, or the turn.
 *
 * @category errors
 * @since 0.1.0
 */
export type QueryError = StartError | Session.SendError | Turn_.TurnError | TurnError

/**
 * One prompt in a session of its own, for scripts and batch jobs (the SDK's `query` with a string prompt): starts
 * a session with `options`, runs `prompt`, and closes the session (stdin EOF, then the close grace) whatever the
 * outcome. Same options, same errors as a session; the result carries the turn's structured output when
 * `outputSchema` is given.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ClaudeSession } from "@tether/claude"
 *
 * const verdict = ClaudeSession.query("Is src/index.ts valid TypeScript? Do not change anything.", {
 *   allowedTools: ["Read"],
 *   outputSchema: Schema.Struct({ valid: Schema.Boolean, reason: Schema.String })
 * }).pipe(Effect.map((result) => result.output.valid)) // requires a Transport
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const query = <Out = unknown>(
  prompt: Turn_.Prompt,
  options?: Options<Out>
): Effect.Effect<TurnResult<Out>, QueryError, Transport.Transport> =>
  Effect.scoped(Effect.flatMap(make(options), (session) => session.run(prompt)))

/**
 * What starting a Claude session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = Session.StartError | InvalidConfig

/** The oldest CLI known to answer `get_context_usage` `summary` without calling the API (`warmPrime: "local"`). */
const primedSince: ReadonlyArray<number> = [2, 1, 332]

/**
 * The Claude Code kind of session for a `SessionRegistry`: sessions started with `make(options)` through the
 * `Transport` in context, fingerprinted with `SessionRegistry.fingerprint` (a different permission policy or hook
 * callback is not a conflict; a different model, working directory or tool list is).
 *
 * @category registry
 * @since 0.1.0
 */
export const kind: SessionRegistry.Kind<Options, StartError, Transport.Transport, TurnResult, TurnError> = {
  acquire: (_id, options) => make(options),
  // `SessionRegistry.fingerprint`, from `Provider`: `SessionRegistry` reads `Config`, which loads `effect/Schema`,
  // and a session does not need either.
  fingerprint: Provider.fingerprint,
  warm: {
    // The model and the permission mode are set by control requests at hand-out: they do not split the pool.
    key: (options) => Provider.shape({ ...options, model: undefined, permissionMode: undefined }),
    adapt: (session, from, to) => {
      const claude = session as ClaudeSession
      const model = from.model === to.model ? Effect.void : claude.setModel(to.model ?? null)
      const mode = (from.permissionMode ?? "default") === (to.permissionMode ?? "default")
        ? Effect.void
        : claude.setPermissionMode(to.permissionMode ?? "default")
      return Effect.andThen(model, mode)
    },
    // `get_context_usage` builds the system prompt and the tools' definitions, which the CLI keeps for its first
    // request, and (`"tokens"`) sends the token-count requests through the model client, which the first request
    // then finds ready: work the CLI would do between the first prompt and its first token, done before hand-out
    // (docs/performance.md has what each saves). It writes nothing to the conversation; the git status and CLAUDE.md
    // it reads were read at the CLI's start. A `summary` is answered locally from 2.1.332 on; an older CLI (2.1.197
    // calls the API's count_tokens even for a summary) is not primed under `"local"`.
    prime: (session, options) =>
      options.warmPrime === false
        ? Effect.void
        : options.warmPrime === "local"
        ? internal.atLeast((session as ClaudeSession).initializeResponse.claude_code_version ?? "", primedSince)
          ? Effect.asVoid(session.control({ subtype: "get_context_usage", detail: "summary" }))
          : Effect.void
        : Effect.asVoid(session.control({ subtype: "get_context_usage" }))
  }
}
