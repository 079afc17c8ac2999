/**
 * A simulated ACP agent (the Agent Client Protocol: JSON-RPC 2.0 over stdio), scripted per turn: what `MockTransport`
 * runs in memory on `TestClock` for an `AcpSession`, and what the fake executable (`FakeAcp`) runs over real stdio.
 *
 * What it does follows the protocol's v1 specification (agentclientprotocol.com) and what was checked of Gemini CLI
 * 0.61 in ACP mode (docs/protocol/acp.md): `initialize` answers version 1 with `loadSession: true`; `session/new`
 * answers a session id with modes (`default`, `yolo`) and its models (`models`, chosen by `session/set_model`, as
 * Gemini's; a configuration option of category `model` too with `modelOption`, as claude-agent-acp's), and
 * announces its commands later (from a
 * timer, after the client's first prompt); a prompt
 * streams `session/update` notifications and is answered with its `stopReason` when the turn ends; `session/cancel`
 * ends the prompt with `cancelled`; a tool asks `session/request_permission` with `allow_once`, `allow_always` and
 * `reject_once` options; `session/load` answers, then replays the conversation as updates (Gemini does not await
 * the replay before answering); methods it does not
 * know are answered "method not found".
 *
 * The seam for recorded transcripts: {@link Options.agentInfo}, the option ids and the updates' shapes are this
 * module's; when transcripts of the real agents are recorded, a test holds the simulator's lines to them (as
 * `MockCodex`'s are held to Codex's).
 *
 * It imports `@tether/acp` only (never the Claude or Codex providers).
 *
 * @since 0.1.0
 */
import type * as Transport from "@tether/core/Transport"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as AcpSimulator from "./internal/acpSimulator.ts"
import * as Rules from "./internal/script.ts"
import type * as Simulator from "./Simulator.ts"

// ---------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------

/**
 * How long the simulated agent takes.
 *
 * @category timing
 * @since 0.1.0
 */
export interface Timing {
  /** Process start to reading stdin. */
  readonly startup: Duration.Input
  /** `initialize`, `session/new`, `session/load` and controls, each. */
  readonly request: Duration.Input
  /** A prompt to its first update (the model's latency). */
  readonly firstUpdate: Duration.Input
  /** Between two text chunks (a chunk's own delay wins). */
  readonly chunk: Duration.Input
  /** A tool's run. */
  readonly tool: Duration.Input
  /** The turn's last update to the prompt's answer. */
  readonly result: Duration.Input
  /** `session/cancel` to the prompt's `cancelled` answer. */
  readonly cancel: Duration.Input
  /**
   * The answer of `session/new` or `session/load` to `available_commands_update` (sent from a timer, as Gemini CLI
   * and claude-agent-acp do: after the answer, in practice after the client's first prompt).
   */
  readonly commands: Duration.Input
  /** stdin's EOF to the exit. */
  readonly exit: Duration.Input
}

/**
 * The default timing: a fast local agent.
 *
 * @category timing
 * @since 0.1.0
 */
export const defaultTiming: Timing = {
  startup: "100 millis",
  request: "20 millis",
  firstUpdate: "50 millis",
  chunk: "25 millis",
  tool: "40 millis",
  result: "10 millis",
  cancel: "50 millis",
  commands: "60 millis",
  exit: "20 millis"
}

/**
 * No waits at all (benchmarks).
 *
 * @category timing
 * @since 0.1.0
 */
export const noWait: Timing = {
  startup: 0,
  request: 0,
  firstUpdate: 0,
  chunk: 0,
  tool: 0,
  result: 0,
  cancel: 0,
  commands: 0,
  exit: 0
}

// ---------------------------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------------------------

/**
 * A piece of streamed text.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Chunk extends Rules.Chunk {}

/**
 * Streamed text: one `agent_message_chunk` per chunk (or `agent_thought_chunk`s for a thought).
 *
 * @category steps
 * @since 0.1.0
 */
export interface Text {
  readonly _tag: "Text"
  readonly chunks: ReadonlyArray<Chunk>
  readonly thought: boolean
}

/**
 * A tool call: `tool_call` (pending), the permission request if `permission`, then `tool_call_update`s (in
 * progress, then completed with `output`, or failed when refused). After the turn's tools the agent says
 * `Tool said: <output>`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Tool {
  readonly _tag: "Tool"
  readonly title: string
  readonly kind: string
  readonly rawInput: { readonly [key: string]: unknown }
  readonly output: string
  readonly permission: boolean
  readonly fails: boolean
}

/**
 * A file request to the client (`fs/read_text_file` or `fs/write_text_file`), inside a tool call of kind `read` /
 * `edit`: the tool's output is the answer (the content read, `wrote <path>`), or the error's message. As Gemini CLI's
 * write tool does, a write reads the file first, and gives up unless the read succeeds or fails with an error Gemini
 * takes for a missing file ("Resource not found", "ENOENT", "does not exist", "No such file").
 *
 * @category steps
 * @since 0.1.0
 */
export interface File {
  readonly _tag: "File"
  readonly method: "fs/read_text_file" | "fs/write_text_file"
  readonly path: string
  readonly content: string | undefined
}

/**
 * A command the agent runs in a terminal of the client (`terminal/create`), inside a tool call of kind `execute`.
 * With `wait`, the agent waits for its exit (`terminal/wait_for_exit`), reads its output (`terminal/output`), which is
 * the tool's output, and releases it; without, it leaves it running and the tool's output is `started <id>`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Terminal {
  readonly _tag: "Terminal"
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: { readonly [name: string]: string }
  readonly wait: boolean
  readonly outputByteLimit: number | undefined
}

/**
 * The prompt ends with this `stopReason` (`max_tokens`, `max_turn_requests`, `refusal`) after the steps before it.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Stop {
  readonly _tag: "Stop"
  readonly stopReason: "end_turn" | "max_tokens" | "max_turn_requests" | "refusal"
}

/**
 * The prompt is answered with a JSON-RPC error (a model API failure after the agent's retries), carrying the HTTP
 * status the way `as` says: `"data"` in `data.status` (code -32603); `"code"` as the error's code, as Gemini CLI
 * answers; `"message"` in the message (`Internal error: API Error: <status> {…}`, code -32603), as claude-agent-acp
 * answers (docs/protocol/acp-agents.md §4.9).
 *
 * @category steps
 * @since 0.1.0
 */
export interface ApiError {
  readonly _tag: "ApiError"
  readonly status: number
  readonly message: string
  readonly as: "data" | "code" | "message"
}

/**
 * An update of any other kind (`plan`, `current_mode_update`, …), as given.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Update {
  readonly _tag: "Update"
  readonly update: { readonly sessionUpdate: string; readonly [key: string]: unknown }
}

/**
 * What a turn does, in order.
 *
 * @category steps
 * @since 0.1.0
 */
export type Step = Text | Tool | File | Terminal | Stop | ApiError | Update | Fault

/**
 * Streamed text (a string is one chunk).
 *
 * @category steps
 * @since 0.1.0
 */
export const text = (
  content: string | ReadonlyArray<string | Chunk>,
  options: { readonly delay?: Duration.Input | undefined } = {}
): Text => ({ _tag: "Text", chunks: Rules.chunksOf(content, options.delay), thought: false })

/**
 * Streamed thoughts (`agent_thought_chunk`).
 *
 * @category steps
 * @since 0.1.0
 */
export const thought = (content: string | ReadonlyArray<string | Chunk>): Text => ({
  _tag: "Text",
  chunks: Rules.chunksOf(content, undefined),
  thought: true
})

/**
 * A tool call; by default a shell command (`kind: "execute"`) that asks the client's permission.
 *
 * @category steps
 * @since 0.1.0
 */
export const tool = (options: {
  readonly command?: string | undefined
  readonly title?: string | undefined
  readonly kind?: string | undefined
  readonly rawInput?: { readonly [key: string]: unknown } | undefined
  readonly output?: string | undefined
  readonly permission?: boolean | undefined
  readonly fails?: boolean | undefined
}): Tool => ({
  _tag: "Tool",
  title: options.title ?? (options.command === undefined ? "tool" : `Running ${options.command}`),
  kind: options.kind ?? "execute",
  rawInput: options.rawInput ?? (options.command === undefined ? {} : { command: options.command }),
  output: options.output ?? "",
  permission: options.permission ?? true,
  fails: options.fails ?? false
})

/**
 * The agent reads a file through the client.
 *
 * @category steps
 * @since 0.1.0
 */
export const readFile = (path: string): File => ({
  _tag: "File",
  method: "fs/read_text_file",
  path,
  content: undefined
})

/**
 * The agent writes a file through the client.
 *
 * @category steps
 * @since 0.1.0
 */
export const writeFile = (path: string, content: string): File => ({
  _tag: "File",
  method: "fs/write_text_file",
  path,
  content
})

/**
 * The agent runs a command in a client terminal.
 *
 * @category steps
 * @since 0.1.0
 */
export const terminal = (
  command: string,
  options: {
    readonly args?: ReadonlyArray<string> | undefined
    readonly env?: { readonly [name: string]: string } | undefined
    readonly wait?: boolean | undefined
    readonly outputByteLimit?: number | undefined
  } = {}
): Terminal => ({
  _tag: "Terminal",
  command,
  args: options.args ?? [],
  env: options.env ?? {},
  wait: options.wait ?? true,
  outputByteLimit: options.outputByteLimit
})

/**
 * The prompt ends with a stop reason.
 *
 * @category steps
 * @since 0.1.0
 */
export const stop = (stopReason: Stop["stopReason"]): Stop => ({ _tag: "Stop", stopReason })

/**
 * The prompt fails with a model API error (HTTP `status`, default 500), the status carried as `as` says (default
 * `"data"`; see {@link ApiError}).
 *
 * @category steps
 * @since 0.1.0
 */
export const apiError = (
  options: { readonly status?: number; readonly message?: string; readonly as?: ApiError["as"] | undefined } = {}
): ApiError => ({
  _tag: "ApiError",
  status: options.status ?? 500,
  message: options.message ?? `[API Error: ${options.status ?? 500}]`,
  as: options.as ?? "data"
})

/**
 * Any other update.
 *
 * @category steps
 * @since 0.1.0
 */
export const update = (value: Update["update"]): Update => ({ _tag: "Update", update: value })

// ---------------------------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------------------------

/**
 * Faults of the simulated agent: applied at start (`options.faults`), as a step of a turn, or from a test
 * (`MockTransport` connections' `trigger`). The faults the other simulators have too have the same tags and fields.
 *
 * - `Crash`: stderr gets `stderr`, stdout closes, the process exits with `code`.
 * - `Hang`: the process stops doing anything until it is killed.
 * - `Stall`: the running turn stops emitting for `duration` (forever when undefined); a cancel still ends it.
 * - `Malformed`: one stdout line that is not JSON. `Raw`: one arbitrary line.
 * - `NeverAnswer`: requests of this method are never answered.
 * - `IgnoreInterrupts`: `session/cancel` is ignored: the turn goes on, and the prompt is never answered `cancelled`.
 * - `IgnoreSigterm`: SIGTERM is ignored; only SIGKILL ends it.
 * - `IgnoreStdinEof`: the process does not exit when its stdin closes.
 * - `FailLoad`: `session/load` is answered with this JSON-RPC error.
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
  IgnoreStdinEof: {}
  FailLoad: { readonly code: number; readonly message: string }
}>

/**
 * Constructors and matchers for {@link Fault}.
 *
 * @category faults
 * @since 0.1.0
 */
export const Fault = Data.taggedEnum<Fault>()

/**
 * The agent crashes with `code` (default 1) after writing `stderr`.
 *
 * @category faults
 * @since 0.1.0
 */
export const crash = (options: { readonly code?: number | undefined; readonly stderr?: string | undefined } = {}) =>
  Fault.Crash({ code: options.code ?? 1, stderr: options.stderr ?? "Error: the mock agent crashed\n" })

/**
 * The agent hangs until killed.
 *
 * @category faults
 * @since 0.1.0
 */
export const hang: Fault = Fault.Hang()

/**
 * The turn stops emitting for `duration`, or forever.
 *
 * @category faults
 * @since 0.1.0
 */
export const stall = (duration?: Duration.Input): Fault => Fault.Stall({ duration })

/**
 * One stdout line that is not JSON.
 *
 * @category faults
 * @since 0.1.0
 */
export const malformed = (line = `{"jsonrpc":"2.0","method":"session/update","params":{`): Fault =>
  Fault.Malformed({ line })

/**
 * One arbitrary stdout line.
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
 * `session/cancel` is ignored: the prompt is never answered `cancelled`.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreInterrupts: Fault = Fault.IgnoreInterrupts()

/**
 * SIGTERM is ignored.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreSigterm: Fault = Fault.IgnoreSigterm()

/**
 * The agent keeps running when its stdin closes.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreStdinEof: Fault = Fault.IgnoreStdinEof()

/**
 * `session/load` fails (default: `-32002` "Resource not found").
 *
 * @category faults
 * @since 0.1.0
 */
export const failLoad = (options: { readonly code?: number; readonly message?: string } = {}): Fault =>
  Fault.FailLoad({ code: options.code ?? -32002, message: options.message ?? "Resource not found" })

// ---------------------------------------------------------------------------------------------------------------
// Scripts
// ---------------------------------------------------------------------------------------------------------------

/**
 * A rule that says what happens in a turn (the first available rule whose `match` accepts the prompt).
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Turn {
  readonly match: ((prompt: string) => boolean) | undefined
  readonly once: boolean
  readonly steps: ReadonlyArray<Step> | ((prompt: string) => ReadonlyArray<Step>)
}

/**
 * The next turn, whatever its prompt; used once.
 *
 * @category scripts
 * @since 0.1.0
 */
export const turn = (...steps: ReadonlyArray<Step>): Turn => ({ match: undefined, once: true, steps })

/**
 * Every turn whose prompt matches; not used up.
 *
 * @category scripts
 * @since 0.1.0
 */
export const when = (match: string | RegExp | ((prompt: string) => boolean), ...steps: ReadonlyArray<Step>): Turn => ({
  match: Rules.predicateOf(match),
  once: false,
  steps
})

/**
 * Process-wide behaviour of the simulated agent.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Options {
  readonly timing: Timing
  /** `agentInfo` of `initialize`. */
  readonly agentInfo: { readonly name: string; readonly version: string }
  /** `agentCapabilities.loadSession`. */
  readonly loadSession: boolean
  /**
   * The model as a configuration option of category `model` (`session/set_config_option`), as claude-agent-acp
   * advertises it, beside `models`. Without it, as Gemini CLI: `models` only, chosen by `session/set_model`.
   */
  readonly modelOption: boolean
  /** Faults applied once the process has started. */
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
  readonly protocol: "acp"
  readonly turns: ReadonlyArray<Turn>
  /** The steps of a turn no rule applies to. Default: echo the prompt. */
  readonly otherwise: (prompt: string) => ReadonlyArray<Step>
  readonly options: Options
}

/**
 * Every turn answers with the prompt's text.
 *
 * @category scripts
 * @since 0.1.0
 */
export const echo = (prompt: string): ReadonlyArray<Step> => [text(prompt)]

/**
 * Builds a {@link Script}. Timing is merged with {@link defaultTiming}.
 *
 * @category scripts
 * @since 0.1.0
 */
export const make = (
  turns: ReadonlyArray<Turn> = [],
  options: {
    readonly otherwise?: ((prompt: string) => ReadonlyArray<Step>) | undefined
    readonly timing?: Partial<Timing> | undefined
    readonly agentInfo?: { readonly name: string; readonly version: string } | undefined
    readonly loadSession?: boolean | undefined
    readonly modelOption?: boolean | undefined
    readonly faults?: ReadonlyArray<Fault> | undefined
  } = {}
): Script => ({
  protocol: "acp",
  turns,
  otherwise: options.otherwise ?? echo,
  options: {
    timing: { ...defaultTiming, ...options.timing },
    agentInfo: options.agentInfo ?? { name: "mock-acp", version: "0.1.0" },
    loadSession: options.loadSession ?? true,
    modelOption: options.modelOption ?? false,
    faults: options.faults ?? []
  }
})

/**
 * The script used when none is given: echo every prompt.
 *
 * @category scripts
 * @since 0.1.0
 */
export const defaultScript: Script = make()

/**
 * Whether a script is an ACP script.
 *
 * @category guards
 * @since 0.1.0
 */
export const isScript = (u: unknown): u is Script =>
  typeof u === "object" && u !== null && (u as { readonly protocol?: unknown }).protocol === "acp"

/**
 * A `LaunchSpec` for the mock agent: `mock-acp` in a clean environment plus `env`.
 *
 * @category launch
 * @since 0.1.0
 */
export const launchSpec = (
  options: { readonly env?: Readonly<Record<string, string>> | undefined; readonly cwd?: string | undefined } = {}
): Transport.LaunchSpec => ({
  program: "mock-acp",
  args: [],
  cwd: Option.fromUndefinedOr(options.cwd),
  env: { mode: "clean", set: { ...options.env }, unset: [] }
})

/**
 * The simulated agent of `script`, sans-IO: a {@link Simulator.Factory} that `MockTransport` runs on `Clock` and
 * the fake executable runs over real stdio. Sessions are kept per script: a session made by one process of the
 * script can be loaded (`session/load`) by a later process of the same script.
 *
 * @category simulation
 * @since 0.1.0
 */
export const simulator = (script: Script = defaultScript): Simulator.Factory<Fault> => AcpSimulator.make(script)
