/**
 * The scripted Claude Code CLI: what `MockTransport` runs in memory and the fake `claude` executables run as a
 * process.
 *
 * A {@link Script} is plain data: for each turn, what the "model" does (stream text, call tools, fail like the
 * Messages API, hit the turn or budget limit) and which faults the simulated process shows (crash, hang, stall,
 * garbage on stdout). {@link simulator} turns a script into the CLI's side of the stream-json protocol, sans-IO (see
 * `Simulator`): the protocol of Claude Code 2.1.332 as recorded in `docs/protocol/claude-stream-json.md` (§3–§7)
 * and the recorded transcripts, or of 2.1.197 with `version: "2.1.197"`, with the frame shapes, the frame order and
 * the quirks a host must survive:
 *
 * - nothing is printed before the first stdin line; `system/init` starts every turn, not the process;
 * - `command_lifecycle queued` is the receipt of a uuid-stamped user message, the `isReplay` user frame comes only
 *   when the turn starts (and only with `--replay-user-messages`); 2.1.197 has no receipt, and replays the prompt
 *   only when the turn writes its first assistant message;
 * - with `--replay-user-messages` the host's own success `control_response`s are echoed back on stdout;
 * - API errors are `result` frames with `subtype: "success"` and `is_error: true`;
 * - after stdin EOF the exit code is 1 when the last result was an error; one non-JSON stdin line kills it.
 *
 * Every frame is typed by the codec (`ClaudeProtocol.Frame`) and written by its schema-free writer, and every stdin
 * line read by its schema-free reader (`ClaudeWire`), so the simulated CLI and the codec cannot drift and a fake CLI
 * starts without loading the schemas (the host's encoders and decoder check both directions against them). Waits are the simulator's own timers, which its shell
 * runs on `Clock` (`MockTransport`, so `TestClock` drives it) or on real timers (the fake executables); ids come
 * from a seeded generator and timestamps from that clock, so a run is deterministic.
 *
 * @example
 * ```ts
 * import { MockClaude } from "@tether/testing"
 *
 * const script = MockClaude.make([
 *   // first turn: two chunks 50 ms apart
 *   MockClaude.turn(MockClaude.text(["Hel", "lo"], { delay: "50 millis" })),
 *   // second turn: a tool that needs the host's permission, then an answer
 *   MockClaude.turn(
 *     MockClaude.tool({ name: "Bash", input: { command: "touch x" }, output: "" }),
 *     MockClaude.text("Created x")
 *   ),
 *   // any turn whose prompt mentions "overloaded"
 *   MockClaude.when("overloaded", MockClaude.apiError({ status: 529 }))
 * ])
 * ```
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as ClaudeSimulator from "./internal/claudeSimulator.ts"
import type * as Json from "./internal/json.ts"
import * as Rules from "./internal/script.ts"
import type * as Simulator from "./Simulator.ts"

// ---------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------

/**
 * How long the simulated CLI takes for each thing it does. Under `MockTransport` every wait is on `Clock`, so tests
 * drive it with `TestClock.adjust`. The defaults are the order of magnitude measured on the real CLI (§8.4).
 *
 * @category timing
 * @since 0.1.0
 */
export interface Timing {
  /** Spawn → the process starts reading stdin; nothing is answered earlier. Real CLI: 300–650 ms. */
  readonly startup: Duration.Input
  /** Control request → its response. */
  readonly control: Duration.Input
  /** User message → `command_lifecycle queued` (the receipt). Raise it to simulate a slow receipt. */
  readonly receipt: Duration.Input
  /** Receipt (or the end of the previous turn) → `command_lifecycle started`. */
  readonly start: Duration.Input
  /** `started` → `system/init`. */
  readonly init: Duration.Input
  /** API request → first streamed event (and the replay of the prompt). Also the default API error latency. */
  readonly firstToken: Duration.Input
  /** Default wait between two chunks of a {@link text} step. */
  readonly chunk: Duration.Input
  /** Default running time of a {@link tool} step. */
  readonly tool: Duration.Input
  /** Last model output → `result`. */
  readonly result: Duration.Input
  /** Interrupt → its response and the aborted turn's frames. */
  readonly interrupt: Duration.Input
  /** stdin EOF (once the queued turns are done) → exit. */
  readonly exit: Duration.Input
  /** A stdin line that is not JSON → exit code 1. */
  readonly badInputExit: Duration.Input
}

/**
 * The default {@link Timing}.
 *
 * @category timing
 * @since 0.1.0
 */
export const defaultTiming: Timing = {
  startup: "300 millis",
  control: "5 millis",
  receipt: "10 millis",
  start: "3 millis",
  init: "35 millis",
  firstToken: "60 millis",
  chunk: "25 millis",
  tool: "40 millis",
  result: "10 millis",
  interrupt: "25 millis",
  exit: "25 millis",
  badInputExit: "40 millis"
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
  /** Wait before this chunk. Default: none for the first chunk of a block, {@link Timing.chunk} for the others. */
  readonly delay?: Duration.Input | undefined
}

/**
 * One text content block, streamed in chunks. It becomes `content_block_*` stream events (with
 * `--include-partial-messages`) and one `assistant` frame carrying the whole text.
 *
 * @category steps
 * @since 0.1.0
 */
export interface Text {
  readonly _tag: "Text"
  readonly chunks: ReadonlyArray<Chunk>
}

/**
 * A JSON object, as tool inputs are.
 *
 * @category models
 * @since 0.1.0
 */
export type JsonObject = Json.JsonObject

/**
 * A tool call. The model emits an `assistant` `tool_use` block; the CLI then asks the host (`can_use_tool`) when
 * `permission` is true, runs the tool for `duration` and reports `output` in a `tool_result`. The model's next
 * steps form a new API message; if there are none, the model answers `Tool said: <output>`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface ToolUse {
  readonly _tag: "ToolUse"
  readonly name: string
  readonly input: JsonObject
  /** Whether the CLI asks the host before running it (real CLI: `touch x` asks, `echo hi` does not). */
  readonly permission: boolean
  /** The tool's output; a function sees the input that actually ran (the host may rewrite it). */
  readonly output: string | ((input: JsonObject) => string)
  /** Report the output as a failed tool run (`is_error: true`). */
  readonly isError: boolean
  readonly duration: Duration.Input | undefined
  /** The `tool_use` id; a fresh `toolu_…` id when undefined. */
  readonly id: string | undefined
  /**
   * A tool of one of the host's in-process MCP servers (see {@link mcpTool}): the CLI calls it with `tools/call`
   * over `mcp_message`, and the host's answer is the output.
   */
  readonly mcp?: { readonly server: string; readonly tool: string } | undefined
}

/**
 * The Messages API fails. The CLI emits a synthetic `assistant` error message (`model: "<synthetic>"`) and a
 * `result` with `subtype: "success"`, `is_error: true`, `terminal_reason: "api_error"` and `api_error_status`. The
 * turn ends here.
 *
 * @category steps
 * @since 0.1.0
 */
export interface ApiError {
  readonly _tag: "ApiError"
  readonly status: number
  readonly message: string
  /** Time spent failing (retries included). Default {@link Timing.firstToken}. */
  readonly delay: Duration.Input | undefined
}

/**
 * The turn stops at the `--max-turns` limit: `result` subtype `error_max_turns`, `terminal_reason: "max_turns"`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface MaxTurns {
  readonly _tag: "MaxTurns"
  /** The limit named in the error; default the `--max-turns` argument, else 1. */
  readonly limit: number | undefined
}

/**
 * The turn stops at the `--max-budget-usd` limit: `result` subtype `error_max_budget_usd`,
 * `terminal_reason: "budget_exhausted"`.
 *
 * @category steps
 * @since 0.1.0
 */
export interface MaxBudget {
  readonly _tag: "MaxBudget"
  /** The limit named in the error; default the `--max-budget-usd` argument, else the cost so far. */
  readonly limitUsd: number | undefined
}

/**
 * The model keeps failing the structured output's JSON Schema: the turn ends with
 * `error_max_structured_output_retries` (`terminal_reason: "structured_output_retry_exhausted"`).
 *
 * @category steps
 * @since 0.1.0
 */
export interface StructuredOutputRetries {
  readonly _tag: "StructuredOutputRetries"
  /** The last validation error, as the CLI reports it. */
  readonly error: string
}

/**
 * One thing the model (or the process) does during a turn. Faults are steps too: a `crash` step crashes the
 * process at that point of the turn.
 *
 * @category steps
 * @since 0.1.0
 */
export type Step = Text | ToolUse | ApiError | MaxTurns | MaxBudget | StructuredOutputRetries | Fault

// ---------------------------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------------------------

/**
 * Faults of the simulated process. They are applied when it has started (`options.faults` of {@link make}), as a
 * step of a turn, or at any time from a test (`MockTransport` connections have `trigger`).
 *
 * - `Crash`: stderr gets `stderr`, stdout closes, the process exits with `code`.
 * - `Hang`: the process stops doing anything (no frame, no answer, stdin EOF ignored) until teardown.
 * - `Stall`: the running turn stops emitting for `duration` (forever when undefined); controls are still answered
 *   and an interrupt still aborts the turn. As a step it pauses the turn at that point.
 * - `Malformed`: one stdout line that is not JSON.
 * - `Oversized`: one stdout line longer than the transport's limit, delivered as `Line.TooLong` of `length` bytes
 *   (default: twice the script's `lineLimit`).
 * - `Raw`: one arbitrary stdout line.
 * - `SlowReceipt`: later user messages take `delay` before `command_lifecycle queued` (and before anything read
 *   after them).
 * - `NeverAnswer`: control requests of this subtype are never answered.
 * - `Refuse`: control requests of this subtype are answered with an error (`error`), as a CLI refuses one.
 * - `IgnoreInterrupts`: interrupts are answered but the turn goes on.
 * - `DropLifecycle`: no `command_lifecycle` frames (as CLI 2.1.197; `version: "2.1.197"` has the rest of it).
 * - `IgnoreSigterm`: SIGTERM is ignored (from the start when given in `options.faults`): the process keeps running
 *   until it exits by itself or is SIGKILLed, which `MockTransport` does after the transport's `termGrace`.
 * - `Flood`: stream events without end (or `count` of them), outside any turn, as fast as stdout takes them. Under
 *   `MockTransport`, whose stdout is unbounded, give a `count`.
 *
 * @category faults
 * @since 0.1.0
 */
export type Fault = Data.TaggedEnum<{
  Crash: { readonly code: number; readonly stderr: string }
  Hang: {}
  Stall: { readonly duration: Duration.Input | undefined }
  Malformed: { readonly line: string }
  Oversized: { readonly length?: number | undefined }
  Raw: { readonly line: string }
  SlowReceipt: { readonly delay: Duration.Input }
  NeverAnswer: { readonly subtype: string }
  Refuse: { readonly subtype: string; readonly error: string }
  IgnoreInterrupts: {}
  DropLifecycle: {}
  IgnoreSigterm: {}
  Flood: { readonly count?: number | undefined }
}>

/**
 * Constructors and matchers for {@link Fault}. The lower-case constructors below are shorter.
 *
 * @category faults
 * @since 0.1.0
 */
export const Fault = Data.taggedEnum<Fault>()

/**
 * The process crashes: `stderr` is written, stdout closes, exit code `code` (default 1).
 *
 * @category faults
 * @since 0.1.0
 */
export const crash = (
  options: { readonly code?: number | undefined; readonly stderr?: string | undefined } = {}
): Fault => Fault.Crash({ code: options.code ?? 1, stderr: options.stderr ?? "Error: the mock CLI crashed\n" })

/**
 * The process hangs: it never writes or answers anything again and ignores stdin EOF; only teardown ends it.
 *
 * @category faults
 * @since 0.1.0
 */
export const hang: Fault = Fault.Hang()

/**
 * The turn stops emitting frames for `duration`, or forever when omitted. Interrupts still work.
 *
 * @category faults
 * @since 0.1.0
 */
export const stall = (duration?: Duration.Input): Fault => Fault.Stall({ duration })

/**
 * One stdout line that is not JSON (default: a truncated `assistant` frame).
 *
 * @category faults
 * @since 0.1.0
 */
export const malformed = (line = `{"type":"assistant","message":{"id":"msg_mock`): Fault => Fault.Malformed({ line })

/**
 * One stdout line over the transport's limit, delivered as a `Line.TooLong` marker of `length` bytes
 * (default: twice the script's `lineLimit`, resolved when the fault is applied).
 *
 * @category faults
 * @since 0.1.0
 */
export const oversized = (length?: number): Fault => Fault.Oversized({ length })

/**
 * One arbitrary stdout line (for example an unknown frame type).
 *
 * @category faults
 * @since 0.1.0
 */
export const raw = (line: string): Fault => Fault.Raw({ line })

/**
 * Later user messages take `delay` before their receipt (`command_lifecycle queued`).
 *
 * @category faults
 * @since 0.1.0
 */
export const slowReceipt = (delay: Duration.Input): Fault => Fault.SlowReceipt({ delay })

/**
 * Control requests of `subtype` (e.g. `"set_model"`, `"interrupt"`, `"initialize"`) are never answered.
 *
 * @category faults
 * @since 0.1.0
 */
export const neverAnswer = (subtype: string): Fault => Fault.NeverAnswer({ subtype })

/**
 * Control requests of `subtype` (e.g. `"mcp_set_servers"`) are refused: answered with an error saying `error`, so the
 * host's control fails with `ControlFailed`.
 *
 * @category faults
 * @since 0.1.0
 */
export const refuse = (subtype: string, error = `the mock CLI refuses ${subtype}`): Fault =>
  Fault.Refuse({ subtype, error })

/**
 * Interrupts are answered but do not stop the running turn.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreInterrupts: Fault = Fault.IgnoreInterrupts()

/**
 * No `command_lifecycle` frames, like CLI 2.1.197: the only receipt is the replay when the turn starts.
 *
 * @category faults
 * @since 0.1.0
 */
export const dropLifecycle: Fault = Fault.DropLifecycle()

/**
 * SIGTERM is ignored; the transport SIGKILLs the process after its `termGrace`.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreSigterm: Fault = Fault.IgnoreSigterm()

/**
 * Stream events (`content_block_delta`) without end, or `count` of them, outside any turn: for a host's
 * backpressure and lag. Under `MockTransport` (an unbounded stdout) give a count.
 *
 * @category faults
 * @since 0.1.0
 */
export const flood = (count?: number): Fault => Fault.Flood({ count })

// ---------------------------------------------------------------------------------------------------------------
// Step constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * A text block. A string is one chunk; an array streams several chunks.
 *
 * @example
 * ```ts
 * import { MockClaude } from "@tether/testing"
 *
 * MockClaude.text("hi")
 * MockClaude.text(["w0 ", "w1 ", "w2 "], { delay: "250 millis" }) // 250 ms before each chunk
 * MockClaude.text([{ text: "slow", delay: "10 seconds" }])
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
 * A tool call. By default it needs permission, runs for {@link Timing.tool} and outputs `"ok"`.
 *
 * @example
 * ```ts
 * import { MockClaude } from "@tether/testing"
 *
 * MockClaude.tool({
 *   name: "Bash",
 *   input: { command: "echo original", description: "print" },
 *   // what the host's rewritten input (updatedInput) produces
 *   output: (input) => String(input.command).replace(/^echo /, "")
 * })
 * ```
 *
 * @category steps
 * @since 0.1.0
 */
export const tool = (options: {
  readonly name: string
  readonly input?: JsonObject | undefined
  readonly permission?: boolean | undefined
  readonly output?: string | ((input: JsonObject) => string) | undefined
  readonly isError?: boolean | undefined
  readonly duration?: Duration.Input | undefined
  readonly id?: string | undefined
}): ToolUse => ({
  _tag: "ToolUse",
  name: options.name,
  input: options.input ?? {},
  permission: options.permission ?? true,
  output: options.output ?? "ok",
  isError: options.isError ?? false,
  duration: options.duration,
  id: options.id
})

/**
 * A call to a tool of the host's in-process MCP server `server` (`ClaudeSession`'s `mcpServers`): the model calls
 * `mcp__<server>__<tool>`, the CLI asks the host's permission (unless `permission: false`), then sends `tools/call`
 * over `mcp_message` and reports the host's result; an interrupt meanwhile sends `notifications/cancelled`.
 *
 * @example
 * ```ts
 * import { MockClaude } from "@tether/testing"
 *
 * MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: 2, b: 3 } }))
 * ```
 *
 * @category steps
 * @since 0.1.0
 */
export const mcpTool = (options: {
  readonly server: string
  readonly tool: string
  readonly input?: JsonObject | undefined
  readonly permission?: boolean | undefined
  readonly id?: string | undefined
}): ToolUse => ({
  ...tool({
    name: `mcp__${options.server}__${options.tool}`,
    input: options.input,
    permission: options.permission,
    id: options.id
  }),
  mcp: { server: options.server, tool: options.tool }
})

/**
 * The model answers through the `StructuredOutput` tool (what the CLI adds with `--json-schema`): the turn ends
 * with `structured_output: value` in its result (and its JSON as `result`).
 *
 * @category steps
 * @since 0.1.0
 */
export const structuredOutput = (value: JsonObject): ToolUse =>
  tool({ name: "StructuredOutput", input: value, permission: false })

/**
 * The model keeps failing the structured output's JSON Schema (see {@link StructuredOutputRetries}).
 *
 * @category steps
 * @since 0.1.0
 */
export const structuredOutputRetries = (
  error = "Output does not match required schema: root: must have required property 'answer'"
): StructuredOutputRetries => ({ _tag: "StructuredOutputRetries", error })

/**
 * The Messages API fails with `status` (default 500). The text is `API Error: <status> <message>`.
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
): ApiError => {
  const status = options.status ?? 500
  return { _tag: "ApiError", status, message: options.message ?? apiErrorMessage(status), delay: options.delay }
}

/**
 * The turn ends with `error_max_turns`.
 *
 * @category steps
 * @since 0.1.0
 */
export const maxTurns = (limit?: number): MaxTurns => ({ _tag: "MaxTurns", limit })

/**
 * The turn ends with `error_max_budget_usd`.
 *
 * @category steps
 * @since 0.1.0
 */
export const maxBudget = (limitUsd?: number): MaxBudget => ({ _tag: "MaxBudget", limitUsd })

// ---------------------------------------------------------------------------------------------------------------
// Turns and scripts
// ---------------------------------------------------------------------------------------------------------------

/**
 * A rule that says what happens in a turn. For each user message that starts a turn, the first rule (in script
 * order) that is still available and whose `match` accepts the prompt is used; `once` rules are used up.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Turn {
  /** Accepts the prompt text (the user message's text blocks joined by newlines); undefined accepts all. */
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
 * A script: the turn rules, what happens when none applies, and the process's options.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Script {
  readonly turns: ReadonlyArray<Turn>
  /** The steps of a turn no rule applies to. Default: echo the prompt as one text block. */
  readonly otherwise: (prompt: string) => ReadonlyArray<Step>
  readonly options: Options
}

/**
 * Process-wide behaviour of the simulated CLI.
 *
 * @category scripts
 * @since 0.1.0
 */
export interface Options {
  readonly timing: Timing
  /**
   * The CLI version: `claude_code_version` in the handshake and `system/init`, and the behaviour. `"2.1.332"` (the
   * default) and newer speak the current protocol; `"2.1.197"` and older that of 2.1.197: no `command_lifecycle`
   * receipts, no `session_state_changed`, no `user_message_uuid(s)`, the replay only when the turn writes its first
   * assistant message, `interrupt` and `set_model` answered without a payload, a shorter `initialize` answer.
   */
  readonly version: string
  /** The model until `--model` or `set_model` says otherwise. */
  readonly model: string
  /** Faults applied when the process has started (after {@link Timing.startup}; `ignoreSigterm` from the start). */
  readonly faults: ReadonlyArray<Fault>
  /** Cost of one API message, accumulated into `total_cost_usd`. */
  readonly costPerMessage: number
  /** The transport line limit reported in `Line.TooLong` markers. */
  readonly lineLimit: number
}

const defaultLineLimit = 10 * 1024 * 1024

/**
 * Builds a {@link Script}. Timing is merged with {@link defaultTiming}.
 *
 * @example
 * ```ts
 * import { MockClaude } from "@tether/testing"
 *
 * const script = MockClaude.make([MockClaude.turn(MockClaude.text("first"))], {
 *   timing: { receipt: "2 seconds" },
 *   faults: [MockClaude.neverAnswer("set_model")]
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
    readonly faults?: ReadonlyArray<Fault> | undefined
    readonly costPerMessage?: number | undefined
    readonly lineLimit?: number | undefined
  } = {}
): Script => ({
  turns,
  otherwise: options.otherwise ?? echo,
  options: {
    timing: { ...defaultTiming, ...options.timing },
    version: options.version ?? "2.1.332",
    model: options.model ?? "claude-opus-5-5",
    faults: options.faults ?? [],
    costPerMessage: options.costPerMessage ?? 0.0536,
    lineLimit: options.lineLimit ?? defaultLineLimit
  }
})

/**
 * The default behaviour: every turn answers with the prompt's text.
 *
 * @category scripts
 * @since 0.1.0
 */
export const echo = (prompt: string): ReadonlyArray<Step> => [text(prompt)]

/**
 * The script used when none is given: echo every prompt, default timing, no faults.
 *
 * @category scripts
 * @since 0.1.0
 */
export const defaultScript: Script = make()

const apiErrorMessage = (status: number): string => {
  switch (status) {
    case 400:
      return "Invalid request"
    case 401:
      return "Invalid API key"
    case 429:
      return "Rate limited"
    case 500:
      return "Internal server error"
    case 529:
      return "Overloaded"
    default:
      return `HTTP ${status}`
  }
}

/**
 * The simulated CLI of `script`, sans-IO: a {@link Simulator.Factory} that `MockTransport` runs on `Clock` and the
 * fake executables run over real stdio.
 *
 * The launch arguments matter as they do for the real CLI: `--replay-user-messages` (replays and echoed
 * control_responses), `--include-partial-messages` (`stream_event` frames and `system/status`),
 * `--permission-prompt-tool stdio` (without it, tools that need permission are denied with
 * `system/permission_denied`), `--model`, `--session-id`, `--permission-mode`, `--max-turns`,
 * `--max-budget-usd`; and the environment variable `CLAUDE_CODE_SDK_READS_SESSION_STATE=1` turns on
 * `system/session_state_changed` frames. The process exits by itself on stdin EOF (once its queued turns are done),
 * on a bad stdin line and on a crash; it dies of SIGTERM unless it ignores it, and of SIGKILL.
 *
 * @example
 * ```ts
 * import { MockClaude, MockTransport } from "@tether/testing"
 *
 * // a Claude Code 2.1.197 in memory, on Clock
 * const cli = MockTransport.openWith(
 *   MockClaude.simulator(MockClaude.make([], { version: "2.1.197" })),
 *   MockTransport.launchSpec()
 * )
 * ```
 *
 * @category simulation
 * @since 0.1.0
 */
export const simulator = (script: Script = defaultScript): Simulator.Factory<Fault> => ClaudeSimulator.make(script)
