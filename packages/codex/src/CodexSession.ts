/**
 * An OpenAI Codex session: `codex app-server` over its JSON-RPC stdio protocol, as a scoped resource with every
 * guarantee of a Tether session (whole-tree teardown, bounded waits, typed dispositions, deterministic tests).
 *
 * A host that runs Claude Code changes one Layer (or one constructor) to run Codex: the `Session` it gets has the
 * same operations, events, permission policies and errors. What differs is declared in `capabilities` and in this
 * module: approvals are for commands and file changes (`PermissionRequest.kind` `"command"` / `"file-change"`) and
 * cannot run a rewritten input; `Permission.deny(message, { interrupt: true })` answers `cancel` (the turn is
 * interrupted); interrupting a turn does not stop the commands it started (Codex leaves them running), so they
 * end at the latest when the session is released and its process tree torn down.
 *
 * @example
 * ```ts
 * import { Effect, Redacted } from "effect"
 * import { CodexSession } from "@tether/codex"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* CodexSession.make({
 *       model: "gpt-5.5",
 *       provider: { baseUrl: "http://127.0.0.1:4000/v1", apiKey: Redacted.make("sk-local") },
 *       sandbox: "workspace-write",
 *       approvalPolicy: "untrusted"
 *     })
 *     const result = yield* session.run("Say hello")
 *     console.log(result.text)
 *   })
 * ) // requires a Transport (NodeTransport.layer(), or MockTransport in tests)
 * ```
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import * as Provider from "@tether/core/Provider"
import * as Session from "@tether/core/Session"
import type * as SessionRegistry from "@tether/core/SessionRegistry"
import type { InvalidConfig } from "@tether/core/TetherError"
import type * as Transport from "@tether/core/Transport"
import type * as Turn_ from "@tether/core/Turn"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { TurnRejected } from "./CodexError.ts"
import * as CodexOptions from "./CodexOptions.ts"
import * as internal from "./internal/machine.ts"

/**
 * Options of a Codex session: the server's typed options plus the session's own.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options extends CodexOptions.Options, Session.HostOptions {
  /** Decides command and file-change approvals. Default: deny everything. */
  readonly policy?: Permission.Policy | undefined
  /**
   * Answers the server's other requests (by method), bounded by the control timeout. Default: an error answer.
   */
  readonly requests?: ((method: string, params: unknown) => Effect.Effect<unknown, Permission.PolicyError>) | undefined
  /** Extra `turn/start` params for every turn (e.g. `{ effort: "high" }`). */
  readonly turnParams?: { readonly [key: string]: unknown } | undefined
}

/**
 * The result of a Codex turn: the neutral result plus the server's turn id and status.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult extends internal.TurnResult {}

export {
  /**
   * The server refused to start the turn (a JSON-RPC error answering `turn/start`, e.g. `-32001` under overload):
   * the prompt never ran; safe to requeue.
   *
   * @category errors
   * @since 0.1.0
   */
  TurnRejected
} from "./CodexError.ts"

/**
 * Codex's own turn errors, besides the neutral `Turn.TurnError`s.
 *
 * @category errors
 * @since 0.1.0
 */
export type TurnError = TurnRejected

// Named apart: inside the augmentation, \`TurnError\` would be core's own.
type CodexTurnError = TurnError

declare module "@tether/core/Turn" {
  /** Codex's own turn errors, on every neutral `Session` of a program that imports `@tether/codex`. */
  interface ProviderTurnErrors {
    readonly codex: CodexTurnError
  }
}

/**
 * A turn of a Codex session.
 *
 * @category models
 * @since 0.1.0
 */
export type Turn = Turn_.Turn<TurnResult, TurnError>

/**
 * A live Codex session: the provider-neutral {@link Session.Session} plus the thread it runs.
 *
 * @category models
 * @since 0.1.0
 */
export interface CodexSession extends Session.Session<TurnResult, TurnError> {
  /** The thread's id (resume it with the `resume` option in a new session). */
  readonly threadId: string
}

const machineOptions = (options: Options): internal.MachineOptions => ({
  clientInfo: {
    name: options.clientInfo?.name ?? "tether",
    title: options.clientInfo?.title ?? null,
    version: options.clientInfo?.version ?? "0.2.0"
  },
  capabilities: options.optOutNotificationMethods === undefined
    ? null
    : { optOutNotificationMethods: options.optOutNotificationMethods },
  thread: options.resume === undefined
    ? { _tag: "Start", params: CodexOptions.toThreadParams(options) }
    : { _tag: "Resume", threadId: options.resume, params: CodexOptions.toThreadParams(options) },
  turnParams: options.turnParams ?? {}
})

const handler = (requests: Options["requests"]) => (request: unknown): Effect.Effect<Provider.Reply> => {
  const r = request as internal.HostRequest
  if (requests === undefined) {
    return Effect.succeed({ _tag: "Error", message: `this host does not answer ${r.method}` })
  }
  return Effect.suspend(() => requests(r.method, r.params)).pipe(
    Effect.map((payload): Provider.Reply => ({ _tag: "Success", payload })),
    Effect.catchCause((cause) =>
      Effect.logWarning(`the host's handler of ${r.method} failed`, cause).pipe(
        Effect.as<Provider.Reply>({ _tag: "Error", message: "the host's handler failed" })
      )
    )
  )
}

/**
 * Starts a Codex session in the current scope: builds the `codex app-server` command line from the typed options,
 * opens it through the `Transport` in context, and completes `initialize`, `initialized` and `thread/start` (or
 * `thread/resume`) within the startup timeout. Closing the scope releases it. A `Session.Conversation` placement in
 * context decides where the thread's rollout lives (`codexHome`) and which thread it resumes; that directory is
 * Codex's whole home, so its `auth.json`, `config.toml` and MCP servers are not the user's (see `Session.Placement`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fn("CodexSession.make")(function*(given: Options = {}) {
  const placement = yield* Session.Conversation
  const options: Options = placement === undefined
    ? given
    : { ...given, codexHome: placement.directory, resume: placement.resume }
  const launch = yield* CodexOptions.toLaunchSpec(options)
  const session = yield* (Session.make({
    provider: internal.make(machineOptions(options)),
    handle: handler(options.requests),
    launch,
    model: options.model,
    // The host's options every session takes (timeouts, policy, queue, rings, ids), as they are.
    ...Session.hostOptions(options)
  }) as Effect.Effect<Session.Session<TurnResult, TurnError>, Session.StartError, Transport.Transport | Scope.Scope>)
  const info = session.handshake as { readonly thread: { readonly thread: { readonly id: string } } }
  const codex: CodexSession = { ...session, threadId: info.thread.thread.id }
  return codex
})

/**
 * What starting a Codex session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = Session.StartError | InvalidConfig

/**
 * The Codex kind of session for a `SessionRegistry`.
 *
 * @category registry
 * @since 0.1.0
 */
export const kind: SessionRegistry.Kind<Options, StartError, Transport.Transport, TurnResult, TurnError> = {
  acquire: (_id, options) => make(options),
  // `SessionRegistry.fingerprint`, from `Provider`: `SessionRegistry` reads `Config`, which loads `effect/Schema`,
  // and a session does not need either.
  fingerprint: Provider.fingerprint
}
