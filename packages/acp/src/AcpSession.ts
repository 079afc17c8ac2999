/**
 * A session of any agent that speaks the Agent Client Protocol (ACP: JSON-RPC 2.0 over the agent's stdio) — Gemini
 * CLI, Claude Code through `claude-agent-acp`, or any other — as a scoped resource with every guarantee of a Tether
 * session (whole-tree teardown, bounded waits, typed dispositions, deterministic tests).
 *
 * The `Session` it gives has the operations, events, permission policies and errors of every provider. What differs
 * is in `capabilities` and here (docs/protocol/acp.md has the whole mapping):
 *
 * - No receipt: the agent answers `session/prompt` only when the turn ends, so the turn's first `session/update`
 *   acknowledges its prompt (`receipts: "first-output"`). Interrupting a turn before that retires the session
 *   (delivery is uncertain), as for any provider without a receipt.
 * - The turn ends with the prompt's answer: `end_turn` completes it, `cancelled` is an interrupt, `max_tokens` and
 *   `max_turn_requests` fail it with {@link TurnLimitReached}, `refusal` with {@link TurnRefused}; an error answer is
 *   an `ApiError`.
 * - `interrupt` sends `session/cancel` (a notification) and answers open permission requests `cancelled`; an agent
 *   that never ends the prompt after it fails the turn with `InterruptTimeout` at the interrupt deadline, and the
 *   session is retired.
 * - Permissions: the agent's options are selected (`allow_once`, or an `allow_always` handed back from the request's
 *   `suggestions`; `reject_once`); a rewritten input cannot be honoured; a deny's reason travels only in the
 *   answer's `_meta` (ACP has no field for it).
 * - Updates replayed by `session/load` (the `resume` option) are published as session events (`Frame`), never as a
 *   turn's; an agent that replays after answering the load (Gemini CLI) is given {@link Options.replayQuiet} to
 *   finish before the session is ready.
 * - The agent's requests Tether does not serve are answered with JSON-RPC's "method not found". File reads and
 *   writes, and terminals, are served only when the host turns them on (`client`, see `AcpClient`).
 *
 * @example
 * ```ts
 * import { Effect, Redacted } from "effect"
 * import { AcpAgent, AcpSession } from "@tether/acp"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* AcpSession.make({
 *       agent: AcpAgent.gemini({ baseUrl: "http://127.0.0.1:4000", apiKey: Redacted.make("local") }),
 *       cwd: "/srv/project"
 *     })
 *     const result = yield* session.run("Say hello")
 *     console.log(result.text)
 *   })
 * ) // requires a Transport (NodeTransport.layer()) and a FileSystem (NodeServices.layer) for the gemini preset
 * ```
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import * as Provider from "@tether/core/Provider"
import * as Session from "@tether/core/Session"
import type * as SessionRegistry from "@tether/core/SessionRegistry"
import { ControlFailed, InvalidConfig } from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import type * as Turn_ from "@tether/core/Turn"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as AcpAgent from "./AcpAgent.ts"
import * as AcpClient from "./AcpClient.ts"
import type { TurnLimitReached, TurnRefused } from "./AcpError.ts"
import * as Client from "./internal/client.ts"
import * as internal from "./internal/machine.ts"
import * as Terminals from "./internal/terminals.ts"

/**
 * Options of an ACP session.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<R = never> extends Session.HostOptions {
  /** The agent: a preset (`AcpAgent.gemini()`, `AcpAgent.claudeAgentAcp()`) or `AcpAgent.command(argv)`. */
  readonly agent: AcpAgent.Agent<R>
  /** The session's working directory (absolute): the agent's process runs there and `session/new` names it. */
  readonly cwd?: string | undefined
  /** Load this session of the agent (`session/load`) instead of creating one; the agent must advertise it. */
  readonly resume?: string | undefined
  /** MCP servers for the session, in ACP's shape (`{ name, command, args, env }`, or `http` / `sse`). */
  readonly mcpServers?: ReadonlyArray<unknown> | undefined
  /**
   * More directories of the session's workspace (absolute), named in `session/new` / `session/load` and served by
   * `client` like the cwd. The agent must advertise `sessionCapabilities.additionalDirectories`, else the handshake
   * fails (`HandshakeFailed`).
   */
  readonly additionalDirectories?: ReadonlyArray<string> | undefined
  /** An `authenticate` method id (one of the agent's `authMethods`) to call before the session is opened. */
  readonly authMethod?: string | undefined
  /** `clientInfo` of `initialize`. */
  readonly clientInfo?: { readonly name: string; readonly title?: string | undefined; readonly version: string }
  /** File and terminal requests the host serves (all off by default): see `AcpClient`. */
  readonly client?: AcpClient.Options | undefined
  /**
   * Answers to other agent requests, by method (extension methods, `_`-prefixed), bounded by the running turn (or
   * the control timeout). Methods not listed (and not served by `client`) are answered "method not found".
   */
  readonly requests?:
    | { readonly [method: string]: (params: unknown) => Effect.Effect<unknown, Permission.PolicyError> }
    | undefined
  /** The model, as the session's spans report it (a preset's own `model` option chooses it). */
  readonly model?: string | undefined
  /**
   * With `resume`: how long the agent must stay quiet after answering `session/load` before the session is ready.
   * Gemini CLI replays the conversation after its answer, without awaiting it: a prompt written during the replay
   * would take the replay for its own output. Bounded by the startup timeout. Default 200 milliseconds.
   */
  readonly replayQuiet?: Duration.Input | undefined
}

/**
 * The result of an ACP turn: the neutral result plus the agent's `stopReason`.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult extends internal.TurnResult {}

/**
 * What the handshake returned (`session.handshake`, and `info`): the agent's capabilities and identity, the session
 * id, its modes and configuration options.
 *
 * @category models
 * @since 0.1.0
 */
export interface HandshakeInfo extends internal.HandshakeInfo {}

export {
  /**
   * The agent stopped the turn at a limit (`max_tokens`, `max_turn_requests`).
   *
   * @category errors
   * @since 0.1.0
   */
  TurnLimitReached,
  /**
   * The agent refused to continue the turn (`refusal`).
   *
   * @category errors
   * @since 0.1.0
   */
  TurnRefused
} from "./AcpError.ts"

/**
 * The ACP provider's own turn errors, besides the neutral `Turn.TurnError`s.
 *
 * @category errors
 * @since 0.1.0
 */
export type TurnError = TurnLimitReached | TurnRefused

// Named apart: inside the augmentation, `TurnError` would be core's own.
type AcpTurnError = TurnError

declare module "@tether/core/Turn" {
  /** The ACP provider's own turn errors, on every neutral `Session` of a program that imports `@tether/acp`. */
  interface ProviderTurnErrors {
    readonly acp: AcpTurnError
  }
}

/**
 * A turn of an ACP session.
 *
 * @category models
 * @since 0.1.0
 */
export type Turn = Turn_.Turn<TurnResult, TurnError>

/**
 * A live ACP session: the provider-neutral {@link Session.Session} plus the agent's session and its controls.
 *
 * @category models
 * @since 0.1.0
 */
export interface AcpSession extends Session.Session<TurnResult, TurnError> {
  /** The agent's session id (load it again with the `resume` option). */
  readonly agentSessionId: string
  readonly info: HandshakeInfo
  /** `session/set_mode`, for a mode the agent advertised (else `ControlFailed` with code `not_advertised`). */
  readonly setMode: (modeId: string) => Effect.Effect<void, Session.ControlError>
  /**
   * Chooses the session's model: `session/set_config_option` on the agent's configuration option of category
   * `model` if it advertised one (claude-agent-acp), else the unstable `session/set_model` for one of the `models`
   * it advertised (Gemini CLI, which has no configuration options); else `ControlFailed` with code
   * `not_advertised`.
   */
  readonly setModel: (modelId: string) => Effect.Effect<void, Session.ControlError>
  /** `session/set_config_option` on an option the agent advertised. */
  readonly setConfigOption: (configId: string, value: string | boolean) => Effect.Effect<void, Session.ControlError>
}

const notAdvertised = (subtype: string, reason: string) =>
  Effect.fail(new ControlFailed({ subtype, reason, code: "not_advertised" }))

const handler = (
  options: Options<unknown>,
  cwd: string,
  fileSystem: FileSystem.FileSystem | undefined,
  terminals: Terminals.Terminals | undefined
) => {
  const client = Client.serve(options.client, [cwd, ...(options.additionalDirectories ?? [])], fileSystem, terminals)
  return (request: unknown): Effect.Effect<Provider.Reply> => {
    const r = request as internal.AgentRequest
    const answer = AcpClient.handles(r.method)
      ? client(r.method, r.params)
      : options.requests?.[r.method] !== undefined
      ? Effect.suspend(() => options.requests![r.method](r.params)).pipe(
        Effect.map((payload): Provider.Reply => ({ _tag: "Success", payload })),
        Effect.catchCause((cause) =>
          Effect.logWarning(`the host's handler of ${r.method} failed`, cause).pipe(
            Effect.as<Provider.Reply>({ _tag: "Error", message: "the host's handler failed" })
          )
        )
      )
      : Effect.succeed<Provider.Reply>({ _tag: "Error", message: `this host does not answer ${r.method}` })
    return answer
  }
}

const absolute = (path: string): boolean => path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path)

const cwdOf = (options: Options<unknown>): Effect.Effect<string, InvalidConfig> => {
  const cwd = options.cwd ?? globalThis.process?.cwd?.()
  const problems = [
    ...(cwd !== undefined && absolute(cwd) ? [] : ["cwd must be an absolute path (ACP names the session's directory)"]),
    ...(options.additionalDirectories ?? []).flatMap((dir) =>
      absolute(dir) ? [] : [`additionalDirectories: ${dir} is not an absolute path`]
    )
  ]
  return problems.length === 0 && cwd !== undefined ? Effect.succeed(cwd) : Effect.fail(new InvalidConfig({ problems }))
}

/**
 * Starts an ACP session in the current scope: prepares the agent (its directory, its settings), opens it through the
 * `Transport` in context, and completes `initialize` and `session/new` (or `session/load`) within the startup
 * timeout. Closing the scope releases it. A `Session.Conversation` placement in context gives the agent's state
 * directory (`GEMINI_CLI_HOME`, `CLAUDE_CONFIG_DIR`) and the session it loads.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: <R = never>(
  options: Options<R>
) => Effect.Effect<AcpSession, StartError, Transport.Transport | Scope.Scope | R> = Effect.fn("AcpSession.make")(
  function*<R>(given: Options<R>) {
    const placement = yield* Session.Conversation
    const options: Options<R> = placement === undefined ? given : { ...given, resume: placement.resume }
    const cwd = yield* cwdOf(options as Options<unknown>)
    const launched = yield* options.agent.prepare({ cwd, home: placement?.directory })
    const clientCapabilities = AcpClient.capabilities(options.client)
    // Terminals are opened by the session's own transport, in scopes forked from the session's: torn down with it.
    const terminals = clientCapabilities.terminal
      ? Terminals.make({
        transport: yield* Transport.Transport,
        scope: yield* Effect.scope,
        termGrace: Duration.fromInputUnsafe(options.client?.terminalTermGrace ?? "2 seconds")
      })
      : undefined
    // Served files (and terminals' directories) need a file system: the host's own (`client.fileSystem`), or the
    // one in context.
    const fileSystem =
      clientCapabilities.readTextFile || clientCapabilities.writeTextFile || clientCapabilities.terminal
        ? Option.getOrUndefined(yield* Effect.serviceOption(FileSystem.FileSystem))
        : undefined
    // Every line the agent prints, counted: after a `session/load` the session waits for the replay to go quiet.
    let heard = 0
    const machine = internal.make({
      clientInfo: {
        name: options.clientInfo?.name ?? "tether",
        title: options.clientInfo?.title ?? null,
        version: options.clientInfo?.version ?? "0.1.0"
      },
      clientCapabilities,
      opening: options.resume === undefined
        ? {
          _tag: "New",
          cwd,
          mcpServers: options.mcpServers ?? [],
          additionalDirectories: options.additionalDirectories
        }
        : {
          _tag: "Load",
          sessionId: options.resume,
          cwd,
          mcpServers: options.mcpServers ?? [],
          additionalDirectories: options.additionalDirectories
        },
      authMethod: options.authMethod,
      hostMethods: new Set(Object.keys(options.requests ?? {}))
    })
    const session = yield* (Session.make({
      provider: {
        ...machine,
        receive: (line) => {
          heard++
          return machine.receive(line)
        }
      },
      handle: handler(options as Options<unknown>, cwd, fileSystem, terminals),
      launch: { program: launched.program, args: launched.args, cwd: Option.some(cwd), env: launched.env },
      model: options.model,
      conversationFile: options.agent.conversationFile,
      ...Session.hostOptions(options)
    }) as Effect.Effect<Session.Session<TurnResult, TurnError>, Session.StartError, Transport.Transport | Scope.Scope>)
    if (options.resume !== undefined) {
      const quiet = Duration.fromInputUnsafe(options.replayQuiet ?? "200 millis")
      const replayed = Effect.gen(function*() {
        while (true) {
          const before = heard
          yield* Effect.sleep(quiet)
          if (heard === before) return
        }
      })
      yield* replayed.pipe(
        // The startup timeout (core's default, 60 s, unless the host set one).
        Effect.timeoutOrElse({ duration: options.timeouts?.startup ?? "60 seconds", orElse: () => Effect.void })
      )
    }
    const info = session.handshake as HandshakeInfo
    const setConfigOption = (configId: string, value: string | boolean) =>
      info.configOptions.some((option) => option.id === configId)
        ? Effect.asVoid(session.control({
          method: "session/set_config_option",
          params: typeof value === "boolean" ? { configId, type: "boolean", value } : { configId, value }
        }))
        : notAdvertised("session/set_config_option", `the agent has no configuration option ${configId}`)
    const acp: AcpSession = {
      ...session,
      agentSessionId: info.sessionId,
      info,
      setMode: (modeId) =>
        info.modes?.availableModes.some((mode) => mode.id === modeId) === true
          ? Effect.asVoid(session.control({ method: "session/set_mode", params: { modeId } }))
          : notAdvertised("session/set_mode", `the agent advertised no mode ${modeId}`),
      setModel: (modelId) => {
        const option = info.configOptions.find((candidate) => candidate.category === "model")
        if (option !== undefined) return setConfigOption(option.id, modelId)
        if (info.models === null) return notAdvertised("session/set_model", "the agent advertised no models")
        return info.models.availableModels.some((model) => model.modelId === modelId)
          ? Effect.asVoid(session.control({ method: "session/set_model", params: { modelId } }))
          : notAdvertised("session/set_model", `the agent advertised no model ${modelId}`)
      },
      setConfigOption
    }
    return acp
  }
)

/**
 * What starting an ACP session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = Session.StartError | InvalidConfig

/**
 * The ACP kind of session for a `SessionRegistry`. Its options' agent may need a `FileSystem` (the presets do).
 *
 * @category registry
 * @since 0.1.0
 */
export const kind: SessionRegistry.Kind<
  Options<FileSystem.FileSystem>,
  StartError,
  Transport.Transport | FileSystem.FileSystem,
  TurnResult,
  TurnError
> = {
  acquire: (_id, options) => make(options),
  fingerprint: Provider.fingerprint
}
