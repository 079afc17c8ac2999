/**
 * The scripted Codex app-server: what `MockTransport` runs in memory for `CodexSession`, and the fake `codex`
 * executables run as a process. The Codex counterpart of `MockClaude`, with the same shape.
 *
 * A {@link Script} is plain data: for each turn, what the "model" does (stream text, run a command, change a file —
 * each asking the host's approval when the thread's approval policy says so —, fail like the Responses API, drop a
 * stream the server retries) and which faults the simulated server shows (crash, hang, stall, garbage on stdout,
 * requests it never answers, interrupts it ignores, turns it refuses). {@link simulator} turns a script into the
 * server's side of `codex app-server`'s JSON-RPC over JSONL, sans-IO (see `Simulator`), as the recorded 0.171.0
 * transcripts show it (`packages/codex/test/fixtures/codex/0.171.0/`, docs/protocol/codex-app-server.md §3):
 *
 * - `initialize` first (every other request before it is `-32600 Not initialized`, a second one `Already
 *   initialized`); after the `initialized` notification, `configWarning` and `remoteControl/status/changed`;
 * - `thread/start` answered, then `thread/started`; `thread/resume` of a thread an earlier process of the same script
 *   started (its rollout) answered after `thread/status/changed`; an ephemeral thread has no rollout to resume;
 * - `turn/start` answered with the server's turn id (the receipt), then `thread/status/changed`, `turn/started`,
 *   the user message as an item; agent messages as `item/started`, `item/agentMessage/delta`s and `item/completed`;
 *   `thread/tokenUsage/updated` and `account/rateLimits/updated` after each model request; `turn/completed` last,
 *   `completed`, `interrupted` or `failed`;
 * - approvals as server requests with ids of their own (0, 1, 2, …, colliding with the client's), confirmed by
 *   `serverRequest/resolved`; `cancel` interrupts the turn;
 * - `turn/interrupt` answered `{}`, then `turn/completed` `interrupted`; items in flight never complete (a command
 *   interrupted mid-run is still running as far as the protocol goes), and a pending approval is withdrawn with
 *   `serverRequest/resolved` after the turn ends;
 * - an API error is an `error` notification (`willRetry: false`) and a failed turn; a dropped stream the server
 *   retries is an `error` with `willRetry: true`, and the turn goes on;
 * - JSON-RPC errors (`-32600`) for unknown methods, missing fields and unknown threads; a stdin line that is not a
 *   JSON-RPC message is logged on stderr and ignored; stdin EOF and SIGTERM end the process with exit code 0.
 *
 * Every line it prints is built by the codec's own encoders and every stdin line read by its decoder
 * (`CodexProtocol`), so the simulated server and the codec cannot drift. Waits are the simulator's own timers, which
 * its shell runs on `Clock` (`MockTransport`, so `TestClock` drives it) or on real timers (the fake executables);
 * ids come from a seeded generator and timestamps from that clock, so a run is deterministic.
 *
 * @example
 * ```ts
 * import { CodexSession } from "@tether/codex"
 * import { MockCodex, MockTransport } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const script = MockCodex.make([
 *   // first turn: two chunks 50 ms apart
 *   MockCodex.turn(MockCodex.text(["Hel", "lo"], { delay: "50 millis" })),
 *   // any turn that mentions "deploy": a command (asked about under `untrusted`), then an answer
 *   MockCodex.when("deploy", MockCodex.command({ command: "make deploy", output: "deployed\n" })),
 *   // any turn that mentions "overloaded": the server refuses to start it
 *   MockCodex.when("overloaded", MockCodex.rejectTurn())
 * ])
 *
 * const program = Effect.scoped(
 *   Effect.flatMap(CodexSession.make({ approvalPolicy: "untrusted" }), (session) => session.run("Say hello"))
 * ).pipe(Effect.provide(MockTransport.layer(script)))
 * ```
 *
 * @since 0.1.0
 */
import type * as Transport from "@tether/core/Transport"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as CodexSimulator from "./internal/codexSimulator.ts"
import * as Rules from "./internal/script.ts"
import type * as Simulator from "./Simulator.ts"

// ---------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------

/**
 * How long the simulated server takes for each thing it does. Under `MockTransport` every wait is on `Clock`, so
 * tests drive it with `TestClock.adjust`. The defaults are the order of magnitude measured on the real server
 * (docs/protocol/codex-app-server.md §6).
 *
 * @category timing
 * @since 0.1.0
 */
export interface Timing {
  /** Spawn → the server reads stdin; nothing is answered earlier. Real server: 110–180 ms. */
  readonly startup: Duration.Input
  /** A request (`initialize`, `model/list`, …) → its response. */
  readonly control: Duration.Input
  /** `thread/start` / `thread/resume` → the response. Real server: 30–40 ms. */
  readonly thread: Duration.Input
  /** `turn/start` → its response (the receipt). Raise it to simulate a slow receipt. */
  readonly turnStart: Duration.Input
  /** The response → `turn/started` and the user message item. */
  readonly start: Duration.Input
  /** A model request → its first item (or its error). */
  readonly firstToken: Duration.Input
  /** Default wait between two chunks of a {@link text} step. */
  readonly chunk: Duration.Input
  /** Default running time of a {@link command} step. */
  readonly command: Duration.Input
  /** Applying a {@link fileChange} step. */
  readonly patch: Duration.Input
  /** Last model output → `turn/completed`. */
  readonly result: Duration.Input
  /** `turn/interrupt` → its response and `turn/completed` (`interrupted`). Real server: 11–19 ms. */
  readonly interrupt: Duration.Input
  /** stdin EOF → exit. Real server: 12–26 ms. */
  readonly exit: Duration.Input
}

/**
 * The default {@link Timing}.
 *
 * @category timing
 * @since 0.1.0
 */
export const defaultTiming: Timing = {
  startup: "150 millis",
  control: "5 millis",
  thread: "35 millis",
  turnStart: "10 millis",
  start: "5 millis",
  firstToken: "60 millis",
  chunk: "25 millis",
  command: "40 millis",
  patch: "20 millis",
  result: "10 millis",
  interrupt: "15 millis",
  exit: "20 millis"
}

/**
 * {@link Timing} with no waits at all: the fast fake's, and what a test that only cares about order uses.
 *
 * @category timing
 * @since 0.1.0
 */
export const noWait: Timing = {
  startup: 0,
  control: 0,
  thread: 0,
  turnStart: 0,
  start: 0,
  firstToken: 0,
  chunk: 0,
  command: 0,
  patch: 0,
  result: 0,
  interrupt: 0,
  exit: 0
}

// ---------------------------------------------------------------------------------------------------------------
// Steps: what the model does in a turn
// ---------------------------------------------------------------------------------------------------------------

/**
 * A piece of streamed text, emitted after `delay`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Chunk {
  readonly text: string
  /** Wait before this chunk. Default: none for the first chunk of a message, {@link Timing.chunk} for the others. */
  readonly delay?: Duration.Input | undefined
}

/**
 * One agent message, streamed in chunks: `item/started`, one `item/agentMessage/delta` per chunk, `item/completed`
 * with the whole text. The text of a turn's last message is its result.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Text {
  readonly _tag: "Text"
  readonly chunks: ReadonlyArray<Chunk>
}

/**
 * The model runs a shell command (an `exec_command` call): a `commandExecution` item, the approval request when the
 * thread's policy (or `approval`) asks for one, then the command runs for `duration` and prints `output`. The
 * model's next steps form a new model request; if there are none, it answers `Tool said: <output>`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Command {
  readonly _tag: "Command"
  /** The command as the model wrote it; the item shows it wrapped (`/bin/bash -lc '<command>'`). */
  readonly command: string
  readonly output: string
  readonly exitCode: number
  /**
   * Whether the server asks the host first. Undefined: as the thread's approval policy says (`untrusted` asks,
   * `on-request` asks only for an {@link Command.escalate escalated} command, `never` never does).
   */
  readonly approval: boolean | undefined
  /** The model asks to run it outside the sandbox (`require_escalated`), with this reason. */
  readonly escalate: string | undefined
  readonly duration: Duration.Input | undefined
  /** The item id; a fresh `call_…` id when undefined. */
  readonly id: string | undefined
}

/**
 * The model changes a file (an `apply_patch` call): a `fileChange` item, the approval request when the thread's
 * policy (or `approval`) asks for one, then the patch is applied and `turn/diff/updated` reports it.
 *
 * @category steps
 * @since 0.1.0
 */
export interface FileChange {
  readonly _tag: "FileChange"
  /** Relative to the thread's cwd, or absolute. */
  readonly path: string
  readonly kind: "add" | "update" | "delete"
  readonly diff: string
  /**
   * Whether the server asks the host first. Undefined: as the thread's approval policy says (`untrusted` asks,
   * `on-request` asks when the sandbox is read-only, `never` never does).
   */
  readonly approval: boolean | undefined
  readonly id: string | undefined
}

/**
 * The Responses API fails (after the provider's retries): an `error` notification with `willRetry: false`, then
 * `turn/completed` with status `failed` and the error. The turn ends here; the thread goes on.
 *
 * @category steps
 * @since 0.1.0
 */
export interface ApiError {
  readonly _tag: "ApiError"
  /** The upstream HTTP status. 5xx is reported as `internalServerError`; others carry the status. */
  readonly status: number
  readonly message: string | undefined
  /** Time spent failing (retries included). Default {@link Timing.firstToken}. */
  readonly delay: Duration.Input | undefined
}

/**
 * A model stream dropped before its end, which the server retries: an agent message started with `partial` text
 * (never completed), then an `error` notification with `willRetry: true`. The turn goes on with the next step, in a
 * new model request.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Retry {
  readonly _tag: "Retry"
  readonly partial: string
  readonly message: string
}

/**
 * One thing the model (or the server) does during a turn. Faults are steps too: a `crash` step crashes the process
 * at that point of the turn, a `rejectTurn` step makes the server refuse the turn's `turn/start`.
 *
 * @category steps
 * @since 0.1.0
 */
export type Step = Text | Command | FileChange | ApiError | Retry | Fault

// ---------------------------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------------------------

/**
 * Faults of the simulated server. They are applied when it has started (`options.faults` of {@link make}), as a
 * step of a turn, or at any time from a test (`MockTransport` connections have `trigger`). The faults Claude's
 * simulator has too (`Crash`, `Hang`, `Stall`, `Malformed`, `Raw`, `IgnoreInterrupts`, `IgnoreSigterm`) have the same
 * tags and fields, so `MockClaude.crash()` crashes a simulated Codex as well.
 *
 * - `Crash`: stderr gets `stderr`, stdout closes, the process exits with `code`.
 * - `Hang`: the process stops doing anything (no line, no answer, stdin EOF ignored) until it is killed.
 * - `Stall`: the running turn stops emitting for `duration` (forever when undefined); requests are still answered
 *   and an interrupt still ends the turn. As a step it pauses the turn at that point.
 * - `Malformed`: one stdout line that is not JSON. `Raw`: one arbitrary stdout line.
 * - `NeverAnswer`: requests of this method (`initialize`, `turn/start`, `turn/interrupt`, `model/list`, …) are never
 *   answered.
 * - `IgnoreInterrupts`: `turn/interrupt` is answered, but the turn goes on.
 * - `IgnoreSigterm`: SIGTERM is ignored (from the start when given in `options.faults`): only SIGKILL ends it.
 * - `RejectTurn`: the next `turn/start` is answered with a JSON-RPC error (`-32001`, "retry later", by default: the
 *   server's overload answer); as a step, that turn's `turn/start` is.
 *
 * @category faults
 * @since 0.1.0
 */
export type Fault = Data.TaggedEnum<{
  Crash: { readonly code: number; readonly stderr: string }
  Hang: {}
  Stall: { readonly duration: Duration.Input | undefined }
  Malformed: { readonly line: string }
  Raw: { readonly line: string }
  NeverAnswer: { readonly method: string }
  IgnoreInterrupts: {}
  IgnoreSigterm: {}
  RejectTurn: { readonly code: number; readonly message: string }
}>

/**
 * Constructors and matchers for {@link Fault}. The lower-case constructors below are shorter.
 *
 * @category faults
 * @since 0.1.0
 */
export const Fault = Data.taggedEnum<Fault>()

/**
 * The server crashes: `stderr` is written, stdout closes, exit code `code` (default 1).
 *
 * @category faults
 * @since 0.1.0
 */
export const crash = (
  options: { readonly code?: number | undefined; readonly stderr?: string | undefined } = {}
): Fault =>
  Fault.Crash({
    code: options.code ?? 1,
    stderr: options.stderr ?? "thread 'main' panicked at app-server/src/main.rs: the mock server crashed\n"
  })

/**
 * The server hangs: it never writes or answers anything again and ignores stdin EOF; only a signal ends it.
 *
 * @category faults
 * @since 0.1.0
 */
export const hang: Fault = Fault.Hang()

/**
 * The turn stops emitting for `duration`, or forever when omitted. Requests and interrupts are still answered.
 *
 * @category faults
 * @since 0.1.0
 */
export const stall = (duration?: Duration.Input): Fault => Fault.Stall({ duration })

/**
 * One stdout line that is not JSON (default: a truncated notification).
 *
 * @category faults
 * @since 0.1.0
 */
export const malformed = (line = `{"method":"item/agentMessage/delta","params":{"threadId":`): Fault =>
  Fault.Malformed({ line })

/**
 * One arbitrary stdout line (for example a notification of a method Tether does not know).
 *
 * @category faults
 * @since 0.1.0
 */
export const raw = (line: string): Fault => Fault.Raw({ line })

/**
 * Requests of `method` are never answered.
 *
 * @category faults
 * @since 0.1.0
 */
export const neverAnswer = (method: string): Fault => Fault.NeverAnswer({ method })

/**
 * `turn/interrupt` is answered but does not end the running turn.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreInterrupts: Fault = Fault.IgnoreInterrupts()

/**
 * SIGTERM is ignored; the transport SIGKILLs the process after its `termGrace`.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreSigterm: Fault = Fault.IgnoreSigterm()

/**
 * The next `turn/start` (as a step: this turn's) is refused with a JSON-RPC error: by default `-32001`, the code
 * the server uses when it is overloaded. The prompt never runs.
 *
 * @category faults
 * @since 0.1.0
 */
export const rejectTurn = (
  options: { readonly code?: number | undefined; readonly message?: string | undefined } = {}
): Fault =>
  Fault.RejectTurn({
    code: options.code ?? -32001,
    message: options.message ?? "Server overloaded; retry later."
  })

// ---------------------------------------------------------------------------------------------------------------
// Step constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * An agent message. A string is one chunk; an array streams several chunks.
 *
 * @example
 * ```ts
 * import { MockCodex } from "@tether/testing"
 *
 * MockCodex.text("hi")
 * MockCodex.text(["w0 ", "w1 ", "w2 "], { delay: "250 millis" }) // 250 ms before each chunk
 * ```
 *
 * @category steps
 * @since 0.1.0
 */
export const text = (
  content: string | ReadonlyArray<string | Chunk>,
  options: { readonly delay?: Duration.Input | undefined } = {}
): Text => ({ _tag: "Text", chunks: Rules.chunksOf(content, options.delay) })

/**
 * A shell command. By default it asks as the thread's approval policy says, runs for {@link Timing.command}, prints
 * nothing and exits 0.
 *
 * @example
 * ```ts
 * import { MockCodex } from "@tether/testing"
 *
 * MockCodex.command({ command: "touch x && echo done", output: "done\n" })
 * // on-request asks only for this one
 * MockCodex.command({ command: "curl example.com", escalate: "needs the network" })
 * ```
 *
 * @category steps
 * @since 0.1.0
 */
export const command = (options: {
  readonly command: string
  readonly output?: string | undefined
  readonly exitCode?: number | undefined
  readonly approval?: boolean | undefined
  readonly escalate?: string | undefined
  readonly duration?: Duration.Input | undefined
  readonly id?: string | undefined
}): Command => ({
  _tag: "Command",
  command: options.command,
  output: options.output ?? "",
  exitCode: options.exitCode ?? 0,
  approval: options.approval,
  escalate: options.escalate,
  duration: options.duration,
  id: options.id
})

/**
 * A file change. By default it adds `path` with the content `diff`, asking as the thread's approval policy says.
 *
 * @category steps
 * @since 0.1.0
 */
export const fileChange = (options: {
  readonly path: string
  readonly kind?: "add" | "update" | "delete" | undefined
  readonly diff?: string | undefined
  readonly approval?: boolean | undefined
  readonly id?: string | undefined
}): FileChange => ({
  _tag: "FileChange",
  path: options.path,
  kind: options.kind ?? "add",
  diff: options.diff ?? "hello from the mock\n",
  approval: options.approval,
  id: options.id
})

/**
 * The Responses API fails with `status` (default 500), after the provider's retries.
 *
 * @category steps
 * @since 0.1.0
 */
export const apiError = (
  options: {
    readonly status?: number | undefined
    readonly message?: string | undefined
    readonly delay?: Duration.Input | undefined
  } = {}
): ApiError => ({ _tag: "ApiError", status: options.status ?? 500, message: options.message, delay: options.delay })

/**
 * A dropped stream the server retries (`error` with `willRetry: true`); the turn goes on.
 *
 * @category steps
 * @since 0.1.0
 */
export const retry = (
  options: { readonly partial?: string | undefined; readonly message?: string | undefined } = {}
): Retry => ({ _tag: "Retry", partial: options.partial ?? "", message: options.message ?? "Reconnecting... 1/5" })

// ---------------------------------------------------------------------------------------------------------------
// Turns and scripts
// ---------------------------------------------------------------------------------------------------------------

/**
 * A rule that says what happens in a turn. For each `turn/start`, the first rule (in script order) that is still
 * available and whose `match` accepts the prompt is used; `once` rules are used up.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Turn {
  /** Accepts the prompt text (the text input items joined by newlines); undefined accepts all. */
  readonly match: ((prompt: string) => boolean) | undefined
  readonly once: boolean
  readonly steps: ReadonlyArray<Step> | ((prompt: string) => ReadonlyArray<Step>)
}

/**
 * The next turn, in order: used once, whatever the prompt.
 *
 * @category scripts
 * @since 0.1.0
 */
export const turn = (...steps: ReadonlyArray<Step>): Turn => ({ match: undefined, once: true, steps })

/**
 * Every turn whose prompt matches: a substring, a regular expression or a predicate. Not used up.
 *
 * @category scripts
 * @since 0.1.0
 */
export const when = (
  match: string | RegExp | ((prompt: string) => boolean),
  ...steps: ReadonlyArray<Step>
): Turn => ({ match: Rules.predicateOf(match), once: false, steps })

/**
 * Process-wide behaviour of the simulated server.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Options {
  readonly timing: Timing
  /** The server version (`cliVersion` of threads, the user agent). */
  readonly version: string
  /** The model until `-c model=…` or `thread/start`'s `model` says otherwise. */
  readonly model: string
  /**
   * Models the server has metadata for; a turn on any other model starts with a `warning` notification (the real
   * server's "Model metadata for `…` not found").
   */
  readonly knownModels: ReadonlyArray<string>
  /** Faults applied when the process has started (after {@link Timing.startup}; `ignoreSigterm` from the start). */
  readonly faults: ReadonlyArray<Fault>
}

/**
 * A script: the turn rules, what happens when none applies, and the process's options. `protocol` tells
 * `MockTransport.layer` which simulator runs it.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Script {
  readonly protocol: "codex"
  readonly turns: ReadonlyArray<Turn>
  /** The steps of a turn no rule applies to. Default: echo the prompt as one message. */
  readonly otherwise: (prompt: string) => ReadonlyArray<Step>
  readonly options: Options
}

/**
 * The default behaviour: every turn answers with the prompt's text.
 *
 * @category scripts
 * @since 0.1.0
 */
export const echo = (prompt: string): ReadonlyArray<Step> => [text(prompt)]

/**
 * Builds a {@link Script}. Timing is merged with {@link defaultTiming}.
 *
 * @example
 * ```ts
 * import { MockCodex } from "@tether/testing"
 *
 * const script = MockCodex.make([MockCodex.turn(MockCodex.text("first"))], {
 *   timing: { turnStart: "2 seconds" },
 *   faults: [MockCodex.neverAnswer("model/list")]
 * })
 * ```
 *
 * @category scripts
 * @since 0.1.0
 */
export const make = (
  turns: ReadonlyArray<Turn> = [],
  options: {
    readonly otherwise?: ((prompt: string) => ReadonlyArray<Step>) | undefined
    readonly timing?: Partial<Timing> | undefined
    readonly version?: string | undefined
    readonly model?: string | undefined
    readonly knownModels?: ReadonlyArray<string> | undefined
    readonly faults?: ReadonlyArray<Fault> | undefined
  } = {}
): Script => ({
  protocol: "codex",
  turns,
  otherwise: options.otherwise ?? echo,
  options: {
    timing: { ...defaultTiming, ...options.timing },
    version: options.version ?? "0.171.0",
    model: options.model ?? "gpt-6.2-sol",
    knownModels: options.knownModels ?? ["gpt-6.2-sol", "gpt-5.5", "gpt-5.4", "gpt-5"],
    faults: options.faults ?? []
  }
})

/**
 * The script used when none is given: echo every prompt, default timing, no faults.
 *
 * @category scripts
 * @since 0.1.0
 */
export const defaultScript: Script = make()

/**
 * Whether a script is a Codex script (as opposed to a `MockClaude` one).
 *
 * @category guards
 * @since 0.1.0
 */
export const isScript = (u: unknown): u is Script =>
  typeof u === "object" && u !== null && (u as { readonly protocol?: unknown }).protocol === "codex"

// ---------------------------------------------------------------------------------------------------------------
// Simulation
// ---------------------------------------------------------------------------------------------------------------

/**
 * A `LaunchSpec` for the mock, as `CodexSession` builds one: `codex app-server`, plus the `-c key=value` overrides
 * given (values written as TOML), in a clean environment plus `env`.
 *
 * @category launch
 * @since 0.1.0
 */
export const launchSpec = (
  options: {
    readonly config?: Readonly<Record<string, string>> | undefined
    readonly env?: Readonly<Record<string, string>> | undefined
    readonly cwd?: string | undefined
  } = {}
): Transport.LaunchSpec => ({
  program: "codex",
  args: ["app-server", ...Object.entries(options.config ?? {}).flatMap(([key, value]) => ["-c", `${key}=${value}`])],
  cwd: Option.fromUndefinedOr(options.cwd),
  env: { mode: "clean", set: { RUST_LOG: "warn", NO_COLOR: "1", ...options.env }, unset: [] }
})

/**
 * The simulated server of `script`, sans-IO: a {@link Simulator.Factory} that `MockTransport` runs on `Clock` and
 * the fake executables run over real stdio.
 *
 * The launch matters as it does for the real server: the first argument must be `app-server` (anything else exits
 * 2, as the real binary's argument parser does), `-c model=…`, `-c model_provider=…`, `-c approval_policy=…` and
 * `-c sandbox_mode=…` set the defaults of new threads, and `CODEX_HOME` (else `$HOME/.codex`) is where threads'
 * rollouts live: a thread started by one process of the script can be resumed by a later process of the same script
 * with the same `CODEX_HOME`, unless it was ephemeral.
 *
 * @example
 * ```ts
 * import { MockCodex, MockTransport } from "@tether/testing"
 *
 * const server = MockTransport.openWith(MockCodex.simulator(), MockCodex.launchSpec())
 * ```
 *
 * @category simulation
 * @since 0.1.0
 */
export const simulator = (script: Script = defaultScript): Simulator.Factory<Fault> => CodexSimulator.make(script)
