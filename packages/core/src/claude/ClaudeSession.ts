/**
 * A Claude Code session: the `claude` CLI over its stream-json duplex protocol, as a scoped resource.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { ClaudeSession, Permission } from "@tether/core"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* ClaudeSession.make({ policy: Permission.allowTools(["Read"]) })
 *     const result = yield* session.run("Say hello")
 *     console.log(result.text)
 *   })
 * ) // requires a Transport (NodeTransport.layer, or MockTransport.layer in tests)
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type * as Permission from "../Permission.ts"
import type * as Provider from "../Provider.ts"
import * as Session from "../Session.ts"
import * as SessionRegistry from "../SessionRegistry.ts"
import { ControlFailed, type InvalidConfig, type ProtocolError } from "../TetherError.ts"
import * as Timeouts from "../Timeouts.ts"
import type * as Transport from "../Transport.ts"
import type * as Turn_ from "../Turn.ts"
import * as ClaudeOptions from "./ClaudeOptions.ts"
import * as ClaudeProtocol from "./ClaudeProtocol.ts"
import type { BudgetExceeded, MaxTurnsExceeded } from "./internal/errors.ts"
import * as internal from "./internal/machine.ts"

/**
 * A hook callback, registered at initialize and run when the CLI calls it. Its result is the CLI's hook output
 * shape (e.g. `{ continue: true }`, or `{ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision:
 * "allow" } }`). A failing callback answers the CLI with an error.
 *
 * @category models
 * @since 0.1.0
 */
export interface HookCallback {
  readonly matcher?: string | undefined
  /** Seconds the CLI waits for this hook. */
  readonly timeout?: number | undefined
  readonly callback: (
    input: { readonly [key: string]: unknown },
    toolUseId: string | undefined
  ) => Effect.Effect<{ readonly [key: string]: unknown }, Permission.PolicyError>
}

/**
 * Options of a Claude session: the CLI's typed options plus the session's own.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options extends ClaudeOptions.Options {
  readonly timeouts?: Timeouts.Timeouts | undefined
  /** Decides tool-use permissions. Default: deny everything. */
  readonly policy?: Permission.Policy | undefined
  /** Hook callbacks by hook event name (`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, …). */
  readonly hooks?: { readonly [event: string]: ReadonlyArray<HookCallback> } | undefined
  /** Extra fields for the `initialize` request (e.g. `appendSystemPrompt`). */
  readonly initialize?: { readonly [key: string]: unknown } | undefined
  readonly queue?: boolean | undefined
  readonly queueCapacity?: number | undefined
  readonly eventRing?: number | undefined
  readonly subscriberBuffer?: number | undefined
  readonly makeId?: (() => string) | undefined
}

/**
 * Errors of the Claude controls.
 *
 * @category errors
 * @since 0.1.0
 */
export type ControlError = Session.ControlError

/**
 * A live Claude session: the provider-neutral {@link Session.Session} plus Claude's controls.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaudeSession extends Session.Session<TurnResult, TurnError> {
  readonly initializeResponse: ClaudeProtocol.InitializeResponse
  /** Answers and errors are decoded: an answer that does not match its schema fails with `ControlFailed`. */
  readonly setPermissionMode: (
    mode: ClaudeProtocol.PermissionMode
  ) => Effect.Effect<ClaudeProtocol.SetPermissionModeResponse, ControlError>
  readonly setModel: (model: string | null) => Effect.Effect<ClaudeProtocol.SetModelResponse, ControlError>
  readonly setMaxThinkingTokens: (tokens: number | null) => Effect.Effect<void, ControlError>
  readonly mcpStatus: Effect.Effect<ClaudeProtocol.McpStatusResponse, ControlError>
  readonly getContextUsage: Effect.Effect<ClaudeProtocol.ContextUsageResponse, ControlError>
}

const asRecord = (u: unknown): { readonly [key: string]: unknown } =>
  Predicate.isObject(u) && !Array.isArray(u) ? u as { readonly [key: string]: unknown } : {}

/**
 * The result of a Claude turn: the neutral result plus what Claude's `result` frame says (cost, subtype, stop and
 * terminal reasons, permission denials).
 *
 * @category models
 * @since 0.2.0
 */
export type TurnResult = internal.TurnResult

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
  MaxTurnsExceeded
} from "./internal/errors.ts"

/**
 * Claude's own turn errors, besides the neutral `Turn.TurnError`s.
 *
 * @category errors
 * @since 0.2.0
 */
export type TurnError = MaxTurnsExceeded | BudgetExceeded

/**
 * A turn of a Claude session.
 *
 * @category models
 * @since 0.2.0
 */
export type Turn = Turn_.Turn<TurnResult, TurnError>

/** Hook configuration and callbacks by id, from the host's hooks. */
const hookRegistry = (hooks: Options["hooks"]) => {
  const callbacks = new Map<string, HookCallback>()
  const config: Record<string, Array<{ matcher?: string; hookCallbackIds: Array<string>; timeout?: number }>> = {}
  let counter = 0
  for (const [event, list] of Object.entries(hooks ?? {})) {
    config[event] = list.map((hook) => {
      const id = `hook_${event}_${++counter}`
      callbacks.set(id, hook)
      return {
        ...(hook.matcher !== undefined ? { matcher: hook.matcher } : {}),
        hookCallbackIds: [id],
        ...(hook.timeout !== undefined ? { timeout: hook.timeout } : {})
      }
    })
  }
  return { callbacks, config }
}

/**
 * The Claude stream-json provider: the protocol machine factory for the given hooks and initialize fields.
 *
 * @category protocol
 * @since 0.2.0
 */
export const provider = (options: {
  readonly hooks?: Options["hooks"]
  readonly initialize?: Options["initialize"]
  readonly maxLineLength?: number | undefined
} = {}): Provider.Provider => {
  const { config } = hookRegistry(options.hooks)
  return {
    name: "claude",
    machine: () =>
      internal.make({
        hooks: config,
        initialize: options.initialize,
        maxLineLength: options.maxLineLength ?? ClaudeProtocol.defaultMaxLineLength
      })
  }
}

/** Answers the CLI's requests other than permissions: hook callbacks, and a decline or an error for the rest. */
const handler = (callbacks: ReadonlyMap<string, HookCallback>) => (request: unknown): Effect.Effect<Provider.Reply> => {
  const r = request as internal.HostRequest
  switch (r._tag) {
    case "HookCallback": {
      const hook = callbacks.get(r.callbackId)
      if (hook === undefined) return Effect.succeed({ _tag: "Error", message: `unknown hook callback ${r.callbackId}` })
      return hook.callback(asRecord(r.input), r.toolUseId).pipe(
        Effect.map((payload): Provider.Reply => ({ _tag: "Success", payload })),
        Effect.catchCause((cause) =>
          Effect.logWarning("hook callback failed", cause).pipe(
            Effect.as<Provider.Reply>({ _tag: "Error", message: "the host's hook callback failed" })
          )
        )
      )
    }
    case "McpMessage":
      return Effect.succeed({ _tag: "Error", message: `no SDK MCP server named ${r.serverName}` })
    case "Other":
      // Elicitations (an MCP server asking the user) are declined, as the official SDK does without a handler.
      return Effect.succeed(
        r.subtype === "elicitation"
          ? { _tag: "Success", payload: { action: "decline" } }
          : { _tag: "Error", message: `Unsupported control request subtype: ${r.subtype}` }
      )
  }
}

/** The options with a conversation placement applied (see `Session.Conversation`). */
const placed = (options: Options, placement: Session.Placement | undefined): Options => {
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

/**
 * Starts a Claude session in the current scope: builds the `claude` command line from the typed options,
 * opens it through the `Transport` in context, and completes the `initialize` handshake within the startup
 * timeout. Closing the scope releases it. A `Session.Conversation` placement in context decides where the transcript
 * lives (`CLAUDE_CONFIG_DIR`) and which conversation it resumes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fn("ClaudeSession.make")(function*(given: Options = {}) {
  const options = placed(given, yield* Session.Conversation)
  const timeouts = options.timeouts ?? Timeouts.defaults
  const launch = yield* ClaudeOptions.toLaunchSpec(options)
  const hooks = hookRegistry(options.hooks)
  const session = yield* Session.make({
    provider: internal.make({
      hooks: hooks.config,
      initialize: options.initialize,
      maxLineLength: ClaudeProtocol.defaultMaxLineLength
    }),
    handle: handler(hooks.callbacks),
    launch,
    timeouts,
    policy: options.policy,
    queue: options.queue,
    queueCapacity: options.queueCapacity,
    eventRing: options.eventRing,
    subscriberBuffer: options.subscriberBuffer,
    makeId: options.makeId
  }) as Effect.Effect<Session.Session<TurnResult, TurnError>, Session.StartError, Transport.Transport | Scope.Scope>
  const initializeResponse = session.handshake as ClaudeProtocol.InitializeResponse
  // Each answer is decoded by its schema; one that does not match fails the control, like an error answer.
  const control = <A>(
    request: ClaudeProtocol.ControlRequestInput,
    decode: (payload: unknown) => Result.Result<A, ProtocolError>
  ): Effect.Effect<A, ControlError> =>
    Effect.flatMap(session.control(request), (payload) => {
      const decoded = decode(payload)
      return Result.isSuccess(decoded)
        ? Effect.succeed(decoded.success)
        : Effect.fail(
          new ControlFailed({ subtype: request.subtype, reason: decoded.failure.message, code: "malformed_response" })
        )
    })
  const claude: ClaudeSession = {
    ...session,
    initializeResponse,
    setPermissionMode: (mode) =>
      control({ subtype: "set_permission_mode", mode }, ClaudeProtocol.decodeSetPermissionModeResponse),
    setModel: (model) => control({ subtype: "set_model", model }, ClaudeProtocol.decodeSetModelResponse),
    setMaxThinkingTokens: (tokens) =>
      Effect.asVoid(session.control({ subtype: "set_max_thinking_tokens", max_thinking_tokens: tokens })),
    mcpStatus: control({ subtype: "mcp_status" }, ClaudeProtocol.decodeMcpStatusResponse),
    getContextUsage: control({ subtype: "get_context_usage" }, ClaudeProtocol.decodeContextUsageResponse)
  }
  return claude
})

/**
 * What starting a Claude session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = Session.StartError | InvalidConfig

/**
 * The Claude Code kind of session for a `SessionRegistry`: sessions started with `make(options)` through the
 * `Transport` in context, fingerprinted with `SessionRegistry.fingerprint` (a different permission policy or hook
 * callback is not a conflict; a different model, working directory or tool list is).
 *
 * @category registry
 * @since 0.2.0
 */
export const kind: SessionRegistry.Kind<Options, StartError, Transport.Transport, TurnResult, TurnError> = {
  acquire: (_id, options) => make(options),
  fingerprint: SessionRegistry.fingerprint
}
