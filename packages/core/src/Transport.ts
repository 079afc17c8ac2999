/**
 * The `Transport` contract: how a session reaches a CLI process.
 *
 * A transport opens a process-like duplex of lines inside a `Scope`. Closing the scope is the teardown: when the
 * scope's finalizer returns, every process the connection started that its containment holds is gone, and what
 * it could not end has been reported. How far that reaches is the transport's {@link Capabilities}: everything
 * under a cgroup or a PID namespace, a best-effort tree otherwise. Sessions never see a process handle, only
 * this interface, so the same session machinery runs over the
 * real subprocess transport (`@tether/transport-node`) and the in-memory `MockTransport` (`@tether/testing`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { SpawnError, TransportWriteError } from "./TetherError.ts"

/**
 * How a CLI process ended.
 *
 * @category models
 * @since 0.1.0
 */
export type ExitStatus = Data.TaggedEnum<{
  /** The process exited by itself (or after stdin EOF) with this code. */
  Exited: { readonly code: number }
  /**
   * The process was ended by a signal (for example during teardown). `cause` is `out-of-memory` when the kernel's
   * OOM killer ended it because its session hit its memory limit (a transport that enforces limits says so).
   */
  Signaled: { readonly signal: string; readonly cause?: ExitCause | undefined }
}>

/**
 * Why the kernel ended a process: `out-of-memory`, its session's memory limit was reached and the OOM killer chose
 * it.
 *
 * @category models
 * @since 0.1.0
 */
export type ExitCause = "out-of-memory"

/**
 * Constructors and matchers for {@link ExitStatus}.
 *
 * @example
 * ```ts
 * import { Transport } from "@tether/core"
 *
 * const clean = Transport.ExitStatus.Exited({ code: 0 })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export const ExitStatus = Data.taggedEnum<ExitStatus>()

/**
 * Renders an exit status as a short human text (`"exit code 1"`, `"signal SIGKILL"`).
 *
 * @category models
 * @since 0.1.0
 */
export const formatExitStatus = (status: ExitStatus): string =>
  status._tag === "Exited"
    ? `exit code ${status.code}`
    : status.cause === "out-of-memory"
    ? `signal ${status.signal}, out of memory: the session's memory limit`
    : `signal ${status.signal}`

/**
 * The environment a process starts with. `inherit` starts from the host's environment, minus the
 * {@link credentialVariables} it does not name in `inheritCredentials`; `clean` starts from nothing but the `PATH`
 * (and `HOME` when set) of the host. `set` is applied on top in both cases; `Redacted` values are revealed only
 * when the process is spawned and are never logged.
 *
 * @category models
 * @since 0.1.0
 */
export interface Environment {
  readonly mode: "inherit" | "clean"
  readonly set: Readonly<Record<string, string | Redacted.Redacted<string>>>
  /** Variables removed after `set` is applied (e.g. `NODE_OPTIONS`). */
  readonly unset: ReadonlyArray<string>
  /**
   * The {@link credentialVariables} the process inherits from the host's environment under `inherit` (none by
   * default): a credential reaches the CLI, and every tool it runs, only when the host hands it over on purpose.
   * Their values are scrubbed like `Redacted` ones.
   *
   * @since 0.1.0
   */
  readonly inheritCredentials?: ReadonlyArray<string> | undefined
}

/**
 * The environment a provider's options ask for, each field optional: `mode` defaults to `inherit`; `set` is applied
 * over the provider's defaults; `unset` removes variables after `set` (including the provider's defaults: that is how
 * a host opts out of one). A provider's options turn it into an {@link Environment} (`ClaudeOptions.Options.env`,
 * `CodexOptions.Options.env`).
 *
 * @category models
 * @since 0.1.0
 */
export interface EnvironmentOptions {
  readonly mode?: "inherit" | "clean" | undefined
  readonly set?: { readonly [name: string]: string | Redacted.Redacted<string> } | undefined
  readonly unset?: ReadonlyArray<string> | undefined
  /**
   * Credential variables ({@link credentialVariables}: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, …) to inherit from the
   * host's environment under `inherit`; none by default, so a host's own key does not reach the CLI and its tools
   * unless it is named here (or given in `set`, as a `Redacted`).
   */
  readonly inheritCredentials?: ReadonlyArray<string> | undefined
}

/**
 * The environment variables that hold credentials of the model providers and of the clouds and forges a coding
 * agent's tools reach. Under `inherit` they are not passed on from the host's environment unless named in
 * {@link Environment.inheritCredentials}, and the typed options refuse a plain-string value for one in `env.set`
 * (a `Redacted` one is scrubbed from everything the transport hands over; a plain string would not be).
 *
 * The list is the credentials the providers' own documentation names: Claude Code's environment reference
 * (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`, `ANTHROPIC_FOUNDRY_API_KEY`,
 * `AWS_BEARER_TOKEN_BEDROCK`), Codex's (`OPENAI_API_KEY`, `CODEX_API_KEY`), Gemini's (`GEMINI_API_KEY`,
 * `GOOGLE_API_KEY`), Azure OpenAI's (`AZURE_OPENAI_API_KEY`), the AWS SDK's static credentials that Bedrock reads
 * (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), and the GitHub CLI's tokens (`GH_TOKEN`,
 * `GITHUB_TOKEN`), which a tool's `gh` or `git` would use. Not in it: variables that name a file holding a
 * credential (`GOOGLE_APPLICATION_CREDENTIALS`, `AWS_SHARED_CREDENTIALS_FILE`): the file is what to keep out of
 * reach, and its path is not a secret.
 *
 * @category models
 * @since 0.1.0
 */
export const credentialVariables: ReadonlyArray<string> = [
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "CLAUDE_CODE_OAUTH_TOKEN",
  "ANTHROPIC_FOUNDRY_API_KEY",
  "AWS_BEARER_TOKEN_BEDROCK",
  "OPENAI_API_KEY",
  "CODEX_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "AZURE_OPENAI_API_KEY",
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "GH_TOKEN",
  "GITHUB_TOKEN"
]

const credentialSet: ReadonlySet<string> = new Set(credentialVariables)

/**
 * Whether a variable is one of the {@link credentialVariables}.
 *
 * @example
 * ```ts
 * import { Transport } from "@tether/core"
 *
 * Transport.isCredentialVariable("ANTHROPIC_API_KEY") // true
 * Transport.isCredentialVariable("ANTHROPIC_BASE_URL") // false
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export const isCredentialVariable = (name: string): boolean => credentialSet.has(name)

/**
 * The problems of an environment's credentials, for the typed options' validation: a plain-string value for one of
 * the {@link credentialVariables} in `set` (it would reach errors, spans, events and teardown warnings unscrubbed),
 * and names in `inheritCredentials` that are not variable names. Never quotes a value.
 *
 * @category models
 * @since 0.1.0
 */
export const credentialProblems = (environment: {
  readonly set?: { readonly [name: string]: string | Redacted.Redacted<string> } | undefined
  readonly inheritCredentials?: ReadonlyArray<string> | undefined
}): ReadonlyArray<string> => {
  const problems: Array<string> = []
  for (const [name, value] of Object.entries(environment.set ?? {})) {
    if (typeof value === "string" && credentialSet.has(name)) {
      problems.push(
        `env.set.${name} is a credential given as a plain string: give it as Redacted.make(…), so that it is ` +
          `scrubbed from errors, events, spans and logs`
      )
    }
  }
  for (const name of environment.inheritCredentials ?? []) {
    if (!/^[^=\0]+$/.test(name)) problems.push(`env.inheritCredentials: ${JSON.stringify(name)} is not a variable name`)
  }
  return problems
}

/**
 * What to launch. Protocol codecs build it from their typed options (the `claude` argv is built by
 * `ClaudeOptions`), so hosts never assemble command lines by hand. Prompts never travel on argv.
 *
 * @category models
 * @since 0.1.0
 */
export interface LaunchSpec {
  /**
   * The logical program (`"claude"`, `"codex"`): transports resolve it to an executable (an explicit path, an
   * environment variable, `PATH`, an installed npm package).
   */
  readonly program: string
  readonly args: ReadonlyArray<string>
  readonly cwd: Option.Option<string>
  readonly env: Environment
  /**
   * Secrets handed to the process through inherited pipes rather than its environment (see {@link SecretPipe}).
   * A transport that has no pipes to hand (the mock) ignores them.
   */
  readonly secretPipes?: ReadonlyArray<SecretPipe> | undefined
}

/**
 * A secret handed to the process through an inherited pipe instead of its environment: the transport writes
 * `value` and a newline into a pipe, closes its own end, and sets the environment variable `variable` to the
 * number of the pipe's descriptor in the process. The process reads it once; the pipe is then empty, so the
 * processes the CLI starts (tools) find neither the value in their environment nor anything left to read.
 * Claude Code reads its API key this way from `CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR` (and removes the variable
 * from its own environment once read).
 *
 * @category models
 * @since 0.1.0
 */
export interface SecretPipe {
  readonly variable: string
  readonly value: Redacted.Redacted<string>
}

/**
 * One open connection to a CLI process: a duplex of lines.
 *
 * - `write` sends one line (the transport appends the newline). Writes are not serialized by the transport:
 *   the session serializes them. A `write` made by {@link writeFromCallback} lets the session write from plain code,
 *   with no fiber per write.
 * - `stdout` is the stream of complete lines (without the newline). It has a single consumer; it ends when the
 *   process closes stdout. A line longer than the transport's limit is dropped, never buffered without bound, and
 *   arrives as a `Line.TooLong` marker; the stream goes on with the next line.
 * - `exit` waits for the process to end.
 *
 * @category models
 * @since 0.1.0
 */
export interface Connection {
  /** The operating-system process id, where there is one (the mock has none). */
  readonly pid: Option.Option<number>
  readonly write: (line: string) => Effect.Effect<void, TransportWriteError>
  /** Closes the process's stdin (EOF). Idempotent. */
  readonly endInput: Effect.Effect<void>
  /** Lines from stdout. Oversized lines arrive as {@link Line.TooLong} markers, never as unbounded buffers. */
  readonly stdout: Stream.Stream<Line>
  /** A bounded tail of what the process wrote to stderr (always drained). */
  readonly stderrTail: Effect.Effect<string>
  /** Waits until the process has exited. */
  readonly exit: Effect.Effect<ExitStatus>
  /** The exit status if the process has already exited. */
  readonly exitStatus: Effect.Effect<Option.Option<ExitStatus>>
  /**
   * The session's limits hit by the processes it started (a tool OOM-killed, the process limit reached), as they
   * are seen; ends when the connection's teardown is done. Absent where the transport enforces no limits.
   *
   * @since 0.1.0
   */
  readonly limitHits?: Stream.Stream<LimitHit> | undefined
}

/**
 * A session limit that one of its processes ran into:
 *
 * - `memory`: the kernel's OOM killer ended `count` processes of the session (its memory limit was reached);
 * - `processes`: `count` forks (or clones) failed because the session's process limit was reached.
 *
 * An OOM kill of the CLI itself is its exit status (`ExitStatus.Signaled` with `cause: "out-of-memory"`), not a hit.
 *
 * @category models
 * @since 0.1.0
 */
export interface LimitHit {
  readonly limit: "memory" | "processes"
  readonly count: number
  /** The limit in force (bytes, or processes). */
  readonly max: number
}

/**
 * Per-session resource limits a transport enforces on this machine (each `false` where it cannot, `notes` in
 * {@link Capabilities} say why).
 *
 * @category models
 * @since 0.1.0
 */
export interface LimitSupport {
  /** The memory of the session's whole tree (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`). */
  readonly memory: boolean
  /** The number of processes (and threads) of the session (`pids.max`). */
  readonly processes: boolean
  /** The CPU time of the session's whole tree (v2 `cpu.max`, v1 `cpu.cfs_quota_us`). */
  readonly cpu: boolean
}

/**
 * A write made of a callback: it starts writing `line` and calls `done` once, with `undefined` when the write
 * completed (possibly before it returns) or with the write's error. A session calls it from plain code on its
 * caller's stack, and from inside `done` for the next line: it must not throw (a failed write is reported through
 * `done`; a session treats a throw as a failed write) and its return value is ignored.
 *
 * @category models
 * @since 0.1.0
 */
export type WriteCallback = (line: string, done: (error: TransportWriteError | undefined) => void) => void

const WriteCallbackKey: unique symbol = Symbol.for("@tether/core/Transport/WriteCallback")

/**
 * A {@link Connection}'s `write` made from a {@link WriteCallback}. The effect completes when the callback reports;
 * a session's driver, which writes from plain code, calls the callback directly (no fiber per write). The callback
 * belongs to this function: a connection whose `write` was replaced (a wrapper that delays or records writes) is
 * written through its own `write`, never around it.
 *
 * @example
 * ```ts
 * import { Transport } from "@tether/core"
 *
 * const lines: Array<string> = []
 * const write = Transport.writeFromCallback((line, done) => {
 *   lines.push(line)
 *   done(undefined)
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const writeFromCallback = (
  callback: WriteCallback
): (line: string) => Effect.Effect<void, TransportWriteError> => {
  const write = (line: string): Effect.Effect<void, TransportWriteError> =>
    Effect.callback<void, TransportWriteError>((resume) => {
      // Nothing returned: what `callback` returns must not be taken for the wait's finalizer.
      callback(line, (error) => resume(error === undefined ? Effect.void : Effect.fail(error)))
    })
  return Object.defineProperty(write, WriteCallbackKey, { value: callback })
}

/**
 * The {@link WriteCallback} behind a connection's `write`, if {@link writeFromCallback} made it.
 *
 * @category utils
 * @since 0.1.0
 */
export const writeCallbackOf = (connection: Connection): WriteCallback | undefined =>
  (connection.write as { readonly [WriteCallbackKey]?: WriteCallback })[WriteCallbackKey]

/**
 * A unit read from stdout: a complete line, or the marker for a line that exceeded the transport's maximum.
 *
 * @category models
 * @since 0.1.0
 */
export type Line = Data.TaggedEnum<{
  Text: { readonly text: string }
  TooLong: { readonly length: number; readonly limit: number; readonly prefix: string }
}>

/**
 * Constructors for {@link Line}.
 *
 * @category models
 * @since 0.1.0
 */
export const Line = Data.taggedEnum<Line>()

/**
 * What holds a session's processes together, and what teardown ends:
 *
 * - `cgroup`: a cgroup v2 per session (Linux). The kernel keeps every descendant in it, whatever it does (`setsid`,
 *   a double fork, a cleared environment, a rewritten process title); teardown signals its members, then
 *   `cgroup.kill`s it.
 * - `pid-namespace`: a PID namespace per session (Linux). Every descendant stays in it, and orphans are re-parented
 *   to the CLI inside it; when the namespace's first process dies, the kernel kills the rest.
 * - `process-tree`: the tree as the process table shows it (parent links, sessions and process groups of members
 *   seen alive during the session, an environment marker). Best effort: a process that left the session, cleared
 *   its environment and whose parent exited before anyone looked is not found.
 * - `in-memory`: no process at all (a mock).
 *
 * @category models
 * @since 0.1.0
 */
export type Containment = "cgroup" | "pid-namespace" | "process-tree" | "in-memory"

/**
 * What a transport can guarantee on this platform, so a host can check at runtime instead of reading the
 * README. The mock reports every guarantee; the Node transport reports the mechanism in force (see
 * {@link Containment}) and what it delivers.
 *
 * @category models
 * @since 0.1.0
 */
export interface Capabilities {
  readonly name: string
  /** The mechanism in force. */
  readonly containment: Containment
  /** Processes that left the session's process group (`setsid`) are found and killed at teardown. */
  readonly killsDetachedDescendants: boolean
  /** Descendants whose parent already exited (re-parented) are found and killed at teardown. */
  readonly killsOrphanedDescendants: boolean
  /**
   * Every descendant is killed at teardown, however it detached: its own session, a parent that exited, a cleared
   * environment, a rewritten process title. True only where the kernel holds the tree (`cgroup`,
   * `pid-namespace`).
   */
  readonly killsEveryDescendant: boolean
  /**
   * The CLI and everything it started die with their host if the host is killed without running finalizers,
   * whatever the session's own tools do: a watchdog process they could kill (they run as the host's user) does not
   * make this true; `notes` says what there is instead.
   */
  readonly diesWithHost: boolean
  /**
   * The per-session limits this transport can enforce here (absent: none, as for a transport without limits).
   *
   * @since 0.1.0
   */
  readonly limits?: LimitSupport | undefined
  /**
   * Each session's processes are isolated from every other session's: they cannot read another's environment,
   * memory or files, signal it, or move it between cgroups (the Node transport: namespaces and a uid range per
   * session). Absent or false: not isolated, `notes` say why.
   *
   * @since 0.1.0
   */
  readonly isolatesSessions?: boolean | undefined
  readonly notes: ReadonlyArray<string>
}

/**
 * Teardown bounds used by transports: after stdin EOF the session waits `closeGrace` for a clean exit; the
 * transport then sends SIGTERM to the whole tree, waits `termGrace`, and SIGKILLs whatever is left.
 *
 * @category models
 * @since 0.1.0
 */
export interface TeardownOptions {
  readonly termGrace: Duration.Duration
}

/**
 * The transport service.
 *
 * `open` acquires a {@link Connection} in the caller's scope. The scope's finalizer is the teardown: within a
 * bound, whatever the children do, it ends every process of the connection that its containment holds (see
 * {@link Capabilities}) and reports those it could not end.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Transport } from "@tether/core"
 *
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const transport = yield* Transport.Transport
 *     const connection = yield* transport.open(spec)
 *     yield* connection.write(`{"type":"keep_alive"}`)
 *   })
 * )
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class Transport extends Context.Service<Transport, {
  readonly open: (spec: LaunchSpec, options: TeardownOptions) => Effect.Effect<Connection, SpawnError, Scope.Scope>
  readonly capabilities: Capabilities
}>()("@tether/core/Transport") {}
