/**
 * The scripted Claude Code CLI that `MockTransport` runs in memory.
 *
 * A {@link Script} is plain data: for each turn, what the "model" does (stream text, call tools, fail like the
 * Messages API, hit the turn or budget limit) and which faults the simulated process shows (crash, hang, stall,
 * garbage on stdout). {@link run} plays a script against a pair of pipes and reproduces the stream-json protocol
 * of Claude Code 2.1.332 as recorded in `docs/protocol/claude-stream-json.md` (§3–§7) and the `v332-*` fixtures:
 * the frame shapes, the frame order, and the quirks a host must survive:
 *
 * - nothing is printed before the first stdin line; `system/init` starts every turn, not the process;
 * - `command_lifecycle queued` is the receipt of a uuid-stamped user message, the `isReplay` user frame comes only
 *   when the turn starts (and only with `--replay-user-messages`);
 * - with `--replay-user-messages` the host's own success `control_response`s are echoed back on stdout;
 * - API errors are `result` frames with `subtype: "success"` and `is_error: true`;
 * - after stdin EOF the exit code is 1 when the last result was an error; one non-JSON stdin line kills it.
 *
 * Every wait is an `Effect.sleep`, so under `TestClock` nothing happens until the test adjusts the clock, and a
 * run is deterministic (ids come from a seeded generator, timestamps from the clock).
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
import * as Transport from "@tether/core/Transport"
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import { apiErrorType } from "./internal/apiError.ts"
import * as Json from "./internal/json.ts"

// ---------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------

/**
 * How long the simulated CLI takes for each thing it does. Every value is waited with `Effect.sleep`, so tests
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
 * One thing the model (or the process) does during a turn. Faults are steps too: a `crash` step crashes the
 * process at that point of the turn.
 *
 * @category steps
 * @since 0.1.0
 */
export type Step = Text | ToolUse | ApiError | MaxTurns | MaxBudget | Fault

// ---------------------------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------------------------

/**
 * Faults of the simulated process. They are applied at spawn (`options.faults` of {@link make}), as a step of a
 * turn, or at any time from a test (`MockTransport` connections have `trigger`).
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
 * - `IgnoreInterrupts`: interrupts are answered but the turn goes on.
 * - `DropLifecycle`: no `command_lifecycle` frames (like CLI 2.1.197).
 * - `IgnoreSigterm`: teardown's SIGTERM is ignored: the process keeps running for the transport's `termGrace`,
 *   then is SIGKILLed. Handled by the transport, not by {@link run}.
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
  IgnoreInterrupts: {}
  DropLifecycle: {}
  IgnoreSigterm: {}
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
 * Teardown's SIGTERM is ignored; the transport SIGKILLs the process after its `termGrace`.
 *
 * @category faults
 * @since 0.1.0
 */
export const ignoreSigterm: Fault = Fault.IgnoreSigterm()

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
): Text => {
  const parts = typeof content === "string" ? [content] : content
  return {
    _tag: "Text",
    chunks: parts.map((part) =>
      typeof part === "string"
        ? { text: part, delay: options.delay }
        : { text: part.text, delay: part.delay ?? options.delay }
    )
  }
}

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
): Turn => ({ match: toPredicate(match), once: false, steps })

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
  /** `claude_code_version` in the handshake and `system/init`. */
  readonly version: string
  /** The model until `--model` or `set_model` says otherwise. */
  readonly model: string
  /** Faults applied when the process has started (after {@link Timing.startup}). */
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

// ---------------------------------------------------------------------------------------------------------------
// The simulated process
// ---------------------------------------------------------------------------------------------------------------

/**
 * The pipes the simulated process runs on. `MockTransport` provides in-memory ones; anything else that can feed
 * stdin lines and take stdout lines (a fake CLI executable, for instance) can run a script too.
 *
 * @category simulation
 * @since 0.1.0
 */
export interface Io {
  /** stdin lines as the host wrote them; ends (with `Done`) at EOF. */
  readonly stdin: Queue.Dequeue<string, Cause.Done>
  readonly stdout: (line: Transport.Line) => Effect.Effect<void>
  readonly stderr: (text: string) => Effect.Effect<void>
  /** Faults triggered from outside while the process runs. */
  readonly faults: Queue.Dequeue<Fault>
}

/**
 * Options of {@link run}.
 *
 * @category simulation
 * @since 0.1.0
 */
export interface RunOptions {
  /** The pid reported in the handshake. */
  readonly pid?: number | undefined
  /** Seed of the id generator (default: the pid). */
  readonly seed?: number | undefined
}

/**
 * Runs the simulated CLI described by `script`, launched as `spec`, on `io`.
 *
 * The launch arguments matter as they do for the real CLI: `--replay-user-messages` (replays and echoed
 * control_responses), `--include-partial-messages` (`stream_event` frames and `system/status`),
 * `--permission-prompt-tool stdio` (without it, tools that need permission are denied with
 * `system/permission_denied`), `--model`, `--session-id`, `--permission-mode`, `--max-turns`,
 * `--max-budget-usd`; and the environment variable `CLAUDE_CODE_SDK_READS_SESSION_STATE=1` turns on
 * `system/session_state_changed` frames.
 *
 * Completes with the exit code when the process exits by itself (stdin EOF, a bad stdin line, a crash); never
 * completes while it runs or hangs. Interrupting it is the process being killed.
 *
 * @category simulation
 * @since 0.1.0
 */
export const run = Effect.fnUntraced(function*(
  script: Script,
  spec: Transport.LaunchSpec,
  io: Io,
  options: RunOptions = {}
) {
  const opts = script.options
  const timing = opts.timing
  const launch = parseLaunch(spec)
  const pid = options.pid ?? 4242
  const ids = makeIds(options.seed ?? pid)
  const sessionId = launch.sessionId ?? ids.uuid()
  const cwd = Option.getOrElse(spec.cwd, () => "/home/user/project")
  const defaultModel = launch.model ?? opts.model

  const state: State = {
    model: defaultModel,
    permissionMode: launch.permissionMode ?? "default",
    hooks: {},
    lifecycle: true,
    receipt: timing.receipt,
    unanswered: new Set(),
    ignoreInterrupts: false,
    stall: undefined,
    idle: true,
    totalCost: 0,
    usageByModel: {},
    lastResultIsError: false,
    results: 0,
    consumed: new Set(),
    pending: new Map(),
    run: undefined,
    queued: []
  }
  const terminate = yield* Deferred.make<Termination>()
  const turns = yield* Queue.unbounded<UserInput, Cause.Done>()

  // --- emitting ------------------------------------------------------------------------------------------------

  const emitLine = (line: string) => io.stdout(Transport.Line.Text({ text: line }))
  const emit = (frame: JsonObject) => emitLine(JSON.stringify(frame))
  const timestamp = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis).toISOString())

  // A stalled turn waits here before each of its frames; controls and aborts do not.
  const gate: Effect.Effect<void> = Effect.suspend(() => {
    const stalled = state.stall
    if (stalled === undefined) return Effect.void
    if (stalled === "forever") return Effect.never
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now >= stalled) {
        state.stall = undefined
        return Effect.void
      }
      return Effect.andThen(Effect.sleep(stalled - now), gate)
    })
  })
  const turnEmit = (frame: JsonObject) => Effect.andThen(gate, emit(frame))

  const sessionState = (value: "running" | "requires_action" | "idle") =>
    launch.sessionState
      ? emit({
        type: "system",
        subtype: "session_state_changed",
        state: value,
        sdk_host_only: true,
        uuid: ids.uuid(),
        session_id: sessionId
      })
      : Effect.void

  const lifecycle = (commandUuid: string | undefined, value: "queued" | "started" | "completed" | "cancelled") =>
    commandUuid !== undefined && state.lifecycle
      ? emit({
        type: "command_lifecycle",
        command_uuid: commandUuid,
        state: value,
        uuid: ids.uuid(),
        session_id: sessionId
      })
      : Effect.void

  // The answer to `initialize` also carries the CLI's pending-request lists (as bin/controls.mjs does).
  const controlSuccess = (requestId: string, response?: JsonObject, initialize = false) =>
    emit({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: requestId,
        ...(response === undefined ? {} : { response }),
        ...(initialize ? { pending_permission_requests: [], pending_user_dialog_requests: [] } : {})
      }
    })

  const controlError = (requestId: string, error: string, code?: string) =>
    emit({
      type: "control_response",
      response: code === undefined
        ? { subtype: "error", request_id: requestId, error }
        : { subtype: "error", request_id: requestId, error, error_code: code }
    })

  const uuidFields = (run: TurnRun): JsonObject =>
    run.input.uuid === undefined ? {} : { user_message_uuid: run.input.uuid, user_message_uuids: [run.input.uuid] }

  const userText = (content: string) =>
    Effect.flatMap(timestamp, (at) =>
      emit({
        type: "user",
        message: { role: "user", content: [{ type: "text", text: content }] },
        parent_tool_use_id: null,
        session_id: sessionId,
        uuid: ids.uuid(),
        timestamp: at
      }))

  // `gated = false` for the closing events an abort writes: they go out even while the turn is stalled.
  const streamEvent = (message: OpenMessage, event: JsonObject, extra: JsonObject = {}, gated = true) =>
    launch.partials
      ? (gated ? turnEmit : emit)({
        type: "stream_event",
        event,
        session_id: sessionId,
        parent_tool_use_id: null,
        uuid: ids.uuid(),
        ...extra,
        api_message_id: message.id
      })
      : Effect.void

  const assistantFrame = Effect.fnUntraced(function*(
    run: TurnRun,
    message: OpenMessage,
    content: ReadonlyArray<JsonObject>,
    extra: JsonObject = {}
  ) {
    return {
      type: "assistant",
      message: {
        id: message.id,
        type: "message",
        role: "assistant",
        model: state.model,
        content,
        stop_reason: null,
        stop_sequence: null,
        usage: usageOf(inputTokensPerMessage, 1),
        context_management: null
      },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: ids.uuid(),
      timestamp: yield* timestamp,
      request_id: message.requestId,
      ...extra,
      ...(message.first ? uuidFields(run) : {})
    }
  })

  const replay = Effect.fnUntraced(function*(run: TurnRun, gated = true) {
    if (run.replayed || !launch.replay) return
    run.replayed = true
    yield* (gated ? turnEmit : emit)({
      type: "user",
      message: run.input.message,
      session_id: sessionId,
      parent_tool_use_id: null,
      uuid: run.input.uuid ?? ids.uuid(),
      timestamp: yield* timestamp,
      isReplay: true
    })
  })

  const resultFrame = Effect.fnUntraced(function*(run: TurnRun, result: ResultSpec) {
    const now = yield* Clock.currentTimeMillis
    const index = state.results++
    return {
      type: "result",
      subtype: result.subtype,
      is_error: result.isError,
      duration_ms: now - run.startedAt,
      duration_api_ms: run.messages === 0 ? 0 : now - run.startedAt,
      num_turns: result.numTurns,
      ...(result.subtype === "success" ? { result: result.result ?? "" } : { errors: result.errors ?? [] }),
      stop_reason: result.stopReason,
      session_id: sessionId,
      total_cost_usd: state.totalCost,
      usage: { ...usageOf(run.inputTokens, run.outputTokens), service_tier: "standard" },
      modelUsage: state.usageByModel,
      permission_denials: run.denials,
      ...(result.terminalReason === undefined ? {} : { terminal_reason: result.terminalReason }),
      api_error_status: result.apiErrorStatus ?? null,
      uuid: ids.uuid(),
      ...uuidFields(run),
      queued_turn_count: state.queued.length,
      result_index: index
    }
  })

  // Ends the turn: the result, then the lifecycle state. Past this point an interrupt no longer aborts the turn.
  const finish = Effect.fnUntraced(function*(
    run: TurnRun,
    result: ResultSpec,
    outcome: "completed" | "cancelled"
  ) {
    yield* gate
    if (run.abortRequest !== undefined) return yield* Effect.never
    run.finished = true
    yield* emit(yield* resultFrame(run, result))
    state.lastResultIsError = result.isError
    yield* lifecycle(run.input.uuid, outcome)
  })

  // --- requests to the host ----------------------------------------------------------------------------------

  const ask = Effect.fnUntraced(function*(run: TurnRun, request: JsonObject, afterSend: Effect.Effect<void>) {
    const requestId = ids.uuid()
    const answer = yield* Deferred.make<HostAnswer>()
    state.pending.set(requestId, answer)
    run.pending = { requestId, subtype: String(request.subtype) }
    yield* turnEmit({ type: "control_request", request_id: requestId, request })
    yield* afterSend
    const result = yield* Deferred.await(answer)
    run.pending = undefined
    return result
  })

  const hooks = Effect.fnUntraced(function*(
    run: TurnRun,
    event: string,
    fields: JsonObject,
    toolName: string | undefined,
    toolUseId: string
  ) {
    const answers: Array<HostAnswer> = []
    for (const matcher of state.hooks[event] ?? []) {
      if (toolName !== undefined && !matchesTool(matcher.matcher, toolName)) continue
      for (const callbackId of matcher.callbackIds) {
        answers.push(
          yield* ask(run, {
            subtype: "hook_callback",
            callback_id: callbackId,
            input: {
              session_id: sessionId,
              transcript_path: `/home/user/.claude/projects/mock/${sessionId}.jsonl`,
              cwd,
              permission_mode: state.permissionMode,
              hook_event_name: event,
              ...fields
            },
            tool_use_id: toolUseId
          }, Effect.void)
        )
      }
    }
    return answers
  })

  // --- the model -------------------------------------------------------------------------------------------

  const pickSteps = (prompt: string): ReadonlyArray<Step> => {
    for (let i = 0; i < script.turns.length; i++) {
      const rule = script.turns[i]
      if (state.consumed.has(i)) continue
      if (rule.match !== undefined && !rule.match(prompt)) continue
      if (rule.once) state.consumed.add(i)
      return typeof rule.steps === "function" ? rule.steps(prompt) : rule.steps
    }
    return script.otherwise(prompt)
  }

  const addUsage = (run: TurnRun, input: number, output: number, cost: number) => {
    run.inputTokens += input
    run.outputTokens += output
    state.totalCost += cost
    const previous = state.usageByModel[state.model]
    state.usageByModel[state.model] = {
      inputTokens: (previous?.inputTokens ?? 0) + input,
      outputTokens: (previous?.outputTokens ?? 0) + output,
      costUSD: (previous?.costUSD ?? 0) + cost,
      contextWindow: 1_000_000,
      maxOutputTokens: 128_000
    }
  }

  // Opens every API request, including one that fails (the recorded v332-apiError turn carries the uuids too).
  const requesting = (run: TurnRun) =>
    launch.partials
      ? turnEmit({
        type: "system",
        subtype: "status",
        status: "requesting",
        session_id: sessionId,
        uuid: ids.uuid(),
        user_message_uuids: run.input.uuid === undefined ? [] : [run.input.uuid]
      })
      : Effect.void

  // One API round trip: the request, then the first streamed event.
  const beginRequest = Effect.fnUntraced(function*(run: TurnRun) {
    yield* requesting(run)
    yield* Effect.sleep(timing.firstToken)
    yield* replay(run)
    const message: OpenMessage = {
      id: `msg_mock${ids.hex(20)}`,
      requestId: `req_mock${ids.hex(20)}`,
      index: 0,
      partial: undefined,
      blockOpen: false,
      stopped: false,
      first: run.messages === 0
    }
    run.message = message
    run.messages++
    addUsage(run, inputTokensPerMessage, 0, opts.costPerMessage)
    yield* streamEvent(message, {
      type: "message_start",
      message: {
        id: message.id,
        type: "message",
        role: "assistant",
        model: state.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usageOf(inputTokensPerMessage, 1)
      }
    }, { ttft_ms: Duration.toMillis(timing.firstToken), ...(message.first ? uuidFields(run) : {}) })
    return message
  })

  const endMessage = Effect.fnUntraced(function*(message: OpenMessage, stopReason: string | null) {
    if (message.stopped) return
    message.stopped = true
    yield* streamEvent(message, {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: 1 }
    })
    yield* streamEvent(message, { type: "message_stop" })
  })

  const streamText = Effect.fnUntraced(function*(run: TurnRun, message: OpenMessage, chunks: ReadonlyArray<Chunk>) {
    const index = message.index++
    message.blockOpen = true
    message.partial = ""
    yield* streamEvent(message, { type: "content_block_start", index, content_block: { type: "text", text: "" } })
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i]
      yield* Effect.sleep(chunk.delay ?? (i === 0 ? 0 : timing.chunk))
      yield* gate
      message.partial += chunk.text
      yield* streamEvent(message, {
        type: "content_block_delta",
        index,
        delta: { type: "text_delta", text: chunk.text }
      })
    }
    const full = message.partial
    message.partial = undefined
    yield* turnEmit(yield* assistantFrame(run, message, [{ type: "text", text: full }]))
    yield* streamEvent(message, { type: "content_block_stop", index })
    message.blockOpen = false
    run.lastText = full
    addUsage(run, 0, Math.max(1, chunks.length), 0)
  })

  const toolResultFrame = Effect.fnUntraced(function*(
    call: ToolCall,
    content: string,
    isError: boolean,
    toolUseResult: unknown,
    meta: JsonObject
  ) {
    return {
      type: "user",
      message: { role: "user", content: [{ tool_use_id: call.id, type: "tool_result", content, is_error: isError }] },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: ids.uuid(),
      timestamp: yield* timestamp,
      tool_use_result: toolUseResult,
      tool_result_meta: [{ id: call.id, ...meta }]
    }
  })

  const denial = (call: ToolCall): JsonObject => ({
    tool_name: call.name,
    tool_use_id: call.id,
    tool_input: call.input
  })

  const preToolUse = Effect.fnUntraced(function*(run: TurnRun, call: ToolCall) {
    const answers = yield* hooks(
      run,
      "PreToolUse",
      { tool_name: call.name, tool_input: call.input, tool_use_id: call.id },
      call.name,
      call.id
    )
    let decision: HookDecision = { _tag: "Ask" }
    for (const answer of answers) {
      if (answer._tag !== "Success") continue
      const output = answer.response.hookSpecificOutput
      if (Json.isRecord(output) && output.permissionDecision === "deny") {
        return { _tag: "Deny", reason: stringOr(output.permissionDecisionReason, "Blocked by hook") } as const
      }
      if (answer.response.decision === "block") {
        return { _tag: "Deny", reason: stringOr(answer.response.reason, "Blocked by hook") } as const
      }
      if (Json.isRecord(output) && output.permissionDecision === "allow") decision = { _tag: "Allow" }
    }
    return decision
  })

  // A tool call; undefined when it ended the turn (deny with interrupt).
  const useTool = Effect.fnUntraced(function*(run: TurnRun, message: OpenMessage, step: ToolUse) {
    const call: ToolCall = {
      id: step.id ?? `toolu_mock${ids.hex(20)}`,
      name: step.name,
      input: step.input,
      running: false
    }
    run.tool = call
    const index = message.index++
    yield* streamEvent(message, {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: call.id, name: call.name, input: {} }
    })
    const json = JSON.stringify(call.input)
    const half = Math.ceil(json.length / 2)
    for (const piece of [json.slice(0, half), json.slice(half)]) {
      yield* streamEvent(message, {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: piece }
      })
    }
    yield* turnEmit(
      yield* assistantFrame(run, message, [{ type: "tool_use", id: call.id, name: call.name, input: call.input }])
    )
    yield* streamEvent(message, { type: "content_block_stop", index })
    message.stopped = true
    yield* streamEvent(message, {
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 1 }
    })
    const messageStop = streamEvent(message, { type: "message_stop" })
    addUsage(run, 0, 1, 0)

    const hook = yield* preToolUse(run, call)
    let decision: PermissionDecision
    if (hook._tag === "Allow") {
      yield* messageStop
      decision = { _tag: "Allow", input: call.input, source: "hook" }
    } else if (hook._tag === "Deny") {
      yield* messageStop
      decision = { _tag: "Deny", message: hook.reason, meta: rejectMeta("hook") }
    } else if (!step.permission || state.permissionMode === "bypassPermissions") {
      yield* messageStop
      decision = { _tag: "Allow", input: call.input, source: "config" }
    } else if (!launch.permissionPrompt) {
      // Nobody can be asked: the CLI denies on its own (pitfall 14).
      yield* messageStop
      const reason = `Claude requested permissions to use ${call.name}, but you haven't granted it yet.`
      yield* turnEmit({
        type: "system",
        subtype: "permission_denied",
        tool_name: call.name,
        tool_use_id: call.id,
        message: reason,
        session_id: sessionId,
        uuid: ids.uuid()
      })
      decision = { _tag: "Deny", message: reason, meta: rejectMeta("config") }
    } else {
      yield* sessionState("requires_action")
      const answer = yield* ask(run, {
        subtype: "can_use_tool",
        tool_name: call.name,
        display_name: call.name,
        input: call.input,
        description: stringOr(call.input.description, call.name),
        permission_suggestions: [{
          type: "addRules",
          rules: [{ toolName: call.name, ruleContent: stringOr(call.input.command, call.name) }],
          behavior: "allow",
          destination: "localSettings"
        }],
        tool_use_id: call.id
      }, messageStop)
      yield* sessionState("running")
      decision = permissionDecision(answer, call)
    }

    switch (decision._tag) {
      case "Allow": {
        call.input = decision.input
        call.running = true
        yield* Effect.sleep(step.duration ?? timing.tool)
        const output = typeof step.output === "function" ? step.output(decision.input) : step.output
        const toolResponse = { stdout: output, stderr: "", interrupted: false, isImage: false, noOutputExpected: false }
        yield* hooks(
          run,
          "PostToolUse",
          { tool_name: call.name, tool_input: call.input, tool_response: toolResponse, tool_use_id: call.id },
          call.name,
          call.id
        )
        run.tool = undefined
        yield* turnEmit(
          yield* toolResultFrame(call, output, step.isError, toolResponse, {
            permission_decision: { decision: "accept", source: decision.source }
          })
        )
        return { output, isError: step.isError }
      }
      case "Deny": {
        run.denials.push(denial(call))
        run.tool = undefined
        yield* turnEmit(
          yield* toolResultFrame(call, decision.message, true, `Error: ${decision.message}`, decision.meta)
        )
        return { output: decision.message, isError: true }
      }
      case "DenyInterrupt": {
        run.denials.push(denial(call))
        yield* turnEmit(
          yield* toolResultFrame(call, rejectedText, true, "User rejected tool use", {
            non_execution_kind: "user-rejected"
          })
        )
        yield* Effect.andThen(gate, userText("[Request interrupted by user for tool use]"))
        yield* finish(run, abortedTools(run), "cancelled")
        return undefined
      }
    }
  })

  const failApi = Effect.fnUntraced(function*(run: TurnRun, step: ApiError) {
    yield* requesting(run)
    yield* Effect.sleep(step.delay ?? timing.firstToken)
    yield* replay(run)
    const text = `API Error: ${step.status} ${step.message}`
    yield* turnEmit({
      type: "assistant",
      message: {
        id: ids.uuid(),
        model: "<synthetic>",
        role: "assistant",
        stop_reason: "stop_sequence",
        stop_sequence: "",
        type: "message",
        usage: usageOf(0, 0),
        content: [{ type: "text", text }],
        context_management: null
      },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: ids.uuid(),
      timestamp: yield* timestamp,
      error: apiErrorKind(step.status),
      request_id: `req_mock${ids.hex(20)}`,
      is_api_error_message: true,
      api_error_status: step.status,
      api_error_type: apiErrorType(step.status),
      ...uuidFields(run)
    })
    yield* Effect.sleep(timing.result)
    yield* finish(run, {
      subtype: "success",
      isError: true,
      result: text,
      terminalReason: "api_error",
      stopReason: "stop_sequence",
      apiErrorStatus: step.status,
      numTurns: run.messages + 1
    }, "cancelled")
  })

  const applyFault = Effect.fnUntraced(function*(fault: Fault) {
    switch (fault._tag) {
      case "Crash": {
        yield* Deferred.succeed(terminate, { _tag: "Exit", code: fault.code, stderr: fault.stderr })
        return
      }
      case "Hang": {
        yield* Deferred.succeed(terminate, { _tag: "Hang" })
        return
      }
      case "Stall": {
        if (fault.duration === undefined) {
          state.stall = "forever"
        } else {
          const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(fault.duration)
          const current = state.stall
          if (current !== "forever" && (current === undefined || current < until)) state.stall = until
        }
        return
      }
      case "Malformed":
      case "Raw": {
        yield* emitLine(fault.line)
        return
      }
      case "Oversized": {
        const prefix = `{"type":"assistant","message":{"id":"msg_mock${ids.hex(20)}","type":"message","content":[`
        yield* io.stdout(
          Transport.Line.TooLong({ length: fault.length ?? 2 * opts.lineLimit, limit: opts.lineLimit, prefix })
        )
        return
      }
      case "SlowReceipt": {
        state.receipt = fault.delay
        return
      }
      case "NeverAnswer": {
        state.unanswered.add(fault.subtype)
        return
      }
      case "IgnoreInterrupts": {
        state.ignoreInterrupts = true
        return
      }
      case "DropLifecycle": {
        state.lifecycle = false
        return
      }
      case "IgnoreSigterm":
        return
    }
  })

  // A fault as a step of a turn: a stall pauses the turn here; a crash or hang never returns.
  const faultStep = Effect.fnUntraced(function*(fault: Fault) {
    switch (fault._tag) {
      case "Stall": {
        yield* fault.duration === undefined ? Effect.never : Effect.sleep(fault.duration)
        return
      }
      case "Crash":
      case "Hang": {
        yield* applyFault(fault)
        return yield* Effect.never
      }
      case "Malformed":
      case "Raw":
      case "Oversized": {
        yield* gate
        yield* applyFault(fault)
        return
      }
      default:
        return yield* applyFault(fault)
    }
  })

  const turnBody = Effect.fnUntraced(function*(run: TurnRun) {
    const input = run.input
    yield* Effect.sleep(timing.start)
    yield* lifecycle(input.uuid, "started")
    yield* hooks(run, "UserPromptSubmit", { prompt: input.prompt }, undefined, ids.uuid())
    yield* Effect.sleep(timing.init)
    yield* turnEmit({
      type: "system",
      subtype: "init",
      cwd,
      session_id: sessionId,
      tools: builtinTools,
      mcp_servers: [],
      model: state.model,
      permissionMode: state.permissionMode,
      slash_commands: ["compact", "context", "cost", "init", "review"],
      apiKeySource: "ANTHROPIC_API_KEY",
      claude_code_version: opts.version,
      output_style: "default",
      agents: ["general-purpose", "Explore", "Plan"],
      skills: [],
      plugins: [],
      capabilities: state.lifecycle ? ["interrupt_receipt_v1", "msg_lifecycle_v1"] : ["interrupt_receipt_v1"],
      uuid: ids.uuid(),
      original_cwd: cwd,
      additional_directories: [],
      user_message_uuids: input.uuid === undefined ? [] : [input.uuid]
    })
    if (!input.shouldQuery) {
      yield* replay(run)
      return yield* finish(
        run,
        { subtype: "success", isError: false, result: "", stopReason: null, numTurns: 0 },
        "completed"
      )
    }

    let lastTool: { readonly output: string; readonly isError: boolean } | undefined
    // The API message the next block goes into: the current one, or a new request after a tool result.
    const open = Effect.suspend(() =>
      run.message === undefined || run.message.stopped ? beginRequest(run) : Effect.succeed(run.message)
    )
    for (const step of pickSteps(input.prompt)) {
      switch (step._tag) {
        case "Text": {
          yield* streamText(run, yield* open, step.chunks)
          lastTool = undefined
          break
        }
        case "ToolUse": {
          const outcome = yield* useTool(run, yield* open, step)
          if (outcome === undefined) return
          lastTool = outcome
          break
        }
        case "ApiError": {
          if (run.message !== undefined) yield* endMessage(run.message, "end_turn")
          return yield* failApi(run, step)
        }
        case "MaxTurns":
        case "MaxBudget": {
          const stopReason = lastTool === undefined ? "end_turn" : "tool_use"
          if (run.message !== undefined) yield* endMessage(run.message, stopReason)
          yield* Effect.sleep(timing.result)
          return yield* finish(
            run,
            step._tag === "MaxTurns"
              ? {
                subtype: "error_max_turns",
                isError: true,
                errors: [`Reached maximum number of turns (${step.limit ?? launch.maxTurns ?? 1})`],
                terminalReason: "max_turns",
                stopReason,
                numTurns: run.messages + 1
              }
              : {
                subtype: "error_max_budget_usd",
                isError: true,
                errors: [`Reached maximum budget ($${step.limitUsd ?? launch.maxBudgetUsd ?? state.totalCost})`],
                terminalReason: "budget_exhausted",
                stopReason,
                numTurns: run.messages
              },
            "cancelled"
          )
        }
        default: {
          yield* faultStep(step)
        }
      }
    }
    // The model always answers after a tool result; a turn with no steps still makes one (empty) request.
    if (run.message === undefined || run.message.stopped) {
      const next = yield* open
      if (lastTool !== undefined) {
        yield* streamText(run, next, [{ text: `Tool said${lastTool.isError ? " (error)" : ""}: ${lastTool.output}` }])
      }
    }
    if (run.message !== undefined) yield* endMessage(run.message, "end_turn")
    yield* Effect.sleep(timing.result)
    yield* hooks(run, "Stop", { stop_hook_active: false }, undefined, ids.uuid())
    yield* finish(run, {
      subtype: "success",
      isError: false,
      result: run.lastText,
      terminalReason: "completed",
      stopReason: "end_turn",
      numTurns: run.messages
    }, "completed")
  })

  // The frames of a turn cut short by an interrupt, in the order the real CLI writes them (§6).
  const abortTurn = Effect.fnUntraced(function*(run: TurnRun, request: AbortRequest) {
    const pending = run.pending
    if (pending !== undefined) {
      yield* emit({ type: "control_cancel_request", request_id: pending.requestId })
    }
    yield* Effect.sleep(timing.interrupt)
    if (request.cancelQueued) yield* dropQueued
    yield* controlSuccess(request.requestId, { still_queued: stillQueued() })
    const call = run.tool
    if (call !== undefined) {
      if (pending?.subtype === "can_use_tool") {
        run.denials.push(denial(call))
        yield* sessionState("running")
      }
      yield* emit(
        yield* toolResultFrame(
          call,
          call.running ? `${rejectedText} ${stoppedWhileRunningText}` : rejectedText,
          true,
          "User rejected tool use",
          { non_execution_kind: "user-rejected" }
        )
      )
      yield* userText("[Request interrupted by user for tool use]")
      yield* emit(yield* resultFrame(run, abortedTools(run)))
    } else {
      yield* replay(run, false)
      const message = run.message
      if (message !== undefined && message.partial !== undefined) {
        yield* emit(yield* assistantFrame(run, message, [{ type: "text", text: message.partial }], { aborted: true }))
      }
      yield* userText("[Request interrupted by user]")
      if (message !== undefined && !message.stopped) {
        if (message.blockOpen) {
          yield* streamEvent(message, { type: "content_block_stop", index: message.index - 1 }, {}, false)
        }
        yield* streamEvent(
          message,
          {
            type: "message_delta",
            delta: { stop_reason: null, stop_sequence: null },
            usage: { output_tokens: 0 }
          },
          {},
          false
        )
        yield* streamEvent(message, { type: "message_stop" }, {}, false)
      }
      if (message !== undefined) message.stopped = true
      yield* emit(
        yield* resultFrame(run, {
          subtype: "error_during_execution",
          isError: true,
          errors: [diagnostic("null")],
          terminalReason: "aborted_streaming",
          stopReason: null,
          numTurns: run.messages + 1
        })
      )
    }
    state.lastResultIsError = true
    yield* lifecycle(run.input.uuid, "cancelled")
  })

  const runTurn = Effect.fnUntraced(function*(input: UserInput) {
    const run: TurnRun = {
      input,
      abort: yield* Deferred.make<AbortRequest>(),
      startedAt: yield* Clock.currentTimeMillis,
      replayed: false,
      message: undefined,
      messages: 0,
      tool: undefined,
      pending: undefined,
      denials: [],
      inputTokens: 0,
      outputTokens: 0,
      lastText: "",
      finished: false,
      abortRequest: undefined
    }
    state.run = run
    const aborted = yield* Effect.raceFirst(
      Effect.as(turnBody(run), undefined),
      Deferred.await(run.abort)
    )
    if (aborted !== undefined) yield* abortTurn(run, aborted)
    state.run = undefined
    if (state.queued.length === 0) {
      state.idle = true
      yield* sessionState("idle")
    }
  })

  // --- stdin -----------------------------------------------------------------------------------------------

  const stillQueued = () => state.queued.flatMap((input) => input.uuid === undefined ? [] : [input.uuid])

  const dropQueued = Effect.gen(function*() {
    const dropped = yield* Queue.clear(turns)
    state.queued = state.queued.filter((input) => !dropped.includes(input))
    for (const input of dropped) yield* lifecycle(input.uuid, "cancelled")
  })

  const receive = Effect.fnUntraced(function*(frame: JsonObject) {
    const message = Json.isRecord(frame.message) ? frame.message : { role: "user", content: "" }
    const input: UserInput = {
      uuid: typeof frame.uuid === "string" ? frame.uuid : undefined,
      message,
      prompt: Json.textOf(message.content),
      shouldQuery: frame.shouldQuery !== false
    }
    yield* Effect.sleep(state.receipt)
    if (state.idle) {
      state.idle = false
      yield* sessionState("running")
    }
    yield* lifecycle(input.uuid, "queued")
    state.queued.push(input)
    yield* Queue.offer(turns, input)
  })

  const interrupt = Effect.fnUntraced(function*(requestId: string, cancelQueued: boolean) {
    const current = state.run
    if (
      !state.ignoreInterrupts && current !== undefined && !current.finished && current.abortRequest === undefined
    ) {
      current.abortRequest = { requestId, cancelQueued }
      // From now on an answer to the pending request is stale: it is ignored and not echoed.
      if (current.pending !== undefined) state.pending.delete(current.pending.requestId)
      yield* Deferred.succeed(current.abort, current.abortRequest)
      return
    }
    yield* Effect.sleep(timing.control)
    if (cancelQueued) yield* dropQueued
    yield* controlSuccess(requestId, { still_queued: stillQueued() })
  })

  const control = Effect.fnUntraced(function*(frame: JsonObject) {
    const requestId = String(frame.request_id)
    const request = Json.isRecord(frame.request) ? frame.request : {}
    const subtype = typeof request.subtype === "string" ? request.subtype : "undefined"
    if (state.unanswered.has(subtype)) return
    if (subtype === "interrupt") return yield* interrupt(requestId, request.cancel_queued === true)
    yield* Effect.sleep(timing.control)
    switch (subtype) {
      case "initialize": {
        state.hooks = parseHooks(request.hooks)
        return yield* controlSuccess(requestId, {
          commands: [
            { name: "compact", description: "Clear conversation history but keep a summary", argumentHint: "" },
            { name: "review", description: "Review a pull request", argumentHint: "", builtin: true }
          ],
          agents: [
            { name: "general-purpose", description: "General-purpose agent for multi-step tasks" },
            { name: "Explore", description: "Fast read-only search agent", model: "inherit" }
          ],
          output_style: "default",
          available_output_styles: ["default", "Explanatory", "Learning"],
          models: [{
            value: "default",
            resolvedModel: defaultModel,
            displayName: "Default (recommended)",
            description: "The default model",
            supportsEffort: true,
            supportedEffortLevels: ["low", "medium", "high"]
          }],
          account: { tokenSource: "none", apiKeySource: "ANTHROPIC_API_KEY", apiProvider: "firstParty" },
          pid,
          claude_code_version: opts.version,
          current_permission_mode: state.permissionMode,
          hooks_applied: true,
          analytics_disabled: true,
          sandbox_enabled: false,
          fast_mode_state: "off",
          session_state: state.run === undefined ? "idle" : "running",
          capabilities: ["ui_surface_v1", "get_usage_detached_v1"]
        }, true)
      }
      case "set_permission_mode": {
        state.permissionMode = stringOr(request.mode, state.permissionMode)
        yield* controlSuccess(requestId, { mode: state.permissionMode })
        return yield* emit({ type: "system", subtype: "status", status: null, session_id: sessionId, uuid: ids.uuid() })
      }
      case "set_model": {
        const model = request.model
        state.model = typeof model === "string" && model !== "default" ? model : defaultModel
        return yield* controlSuccess(requestId, { model: state.model })
      }
      case "set_max_thinking_tokens":
        return yield* controlSuccess(requestId)
      case "mcp_status":
        return yield* controlSuccess(requestId, { mcpServers: [] })
      case "get_context_usage":
        return yield* controlSuccess(requestId, {
          categories: [
            { id: "system_prompt", name: "System prompt", tokens: 2338, color: "promptBorder", kind: "used" },
            { id: "system_tools", name: "System tools", tokens: 10012, color: "inactive", kind: "used" },
            { id: "messages", name: "Messages", tokens: 0, color: "purple", kind: "used" },
            { id: "free", name: "Free space", tokens: 987650, color: "promptBorder", kind: "free" }
          ],
          totalTokens: 12350,
          maxTokens: 1_000_000,
          model: state.model
        })
      case "get_settings":
        return yield* controlSuccess(requestId, {
          effective: {},
          sources: [],
          applied: { model: state.model, effort: "medium" }
        })
      default:
        return yield* controlError(
          requestId,
          `Unsupported control request subtype: ${subtype}`,
          "unsupported_request"
        )
    }
  })

  // The host answers a request of ours. Unknown and stale ids are ignored; success answers are echoed back
  // verbatim with --replay-user-messages (§5.1).
  const answer = Effect.fnUntraced(function*(frame: JsonObject, line: string) {
    const response = Json.isRecord(frame.response) ? frame.response : {}
    const requestId = response.request_id
    if (typeof requestId !== "string") return
    const pending = state.pending.get(requestId)
    if (pending === undefined) return
    state.pending.delete(requestId)
    if (response.subtype === "success") {
      if (launch.replay) yield* emitLine(line)
      yield* Deferred.succeed(pending, {
        _tag: "Success",
        response: Json.isRecord(response.response) ? response.response : {}
      })
    } else {
      yield* Deferred.succeed(pending, { _tag: "Failure", error: stringOr(response.error, "unknown error") })
    }
  })

  const handleLine = Effect.fnUntraced(function*(line: string) {
    const parsed = Json.parseJson(line)
    if (Option.isNone(parsed)) {
      yield* io.stderr(`Error parsing streaming input line (type=unknown, ${line.length} chars): SyntaxError\n`)
      yield* Effect.sleep(timing.badInputExit)
      yield* Deferred.succeed(terminate, { _tag: "Exit", code: 1, stderr: "" })
      return yield* Effect.never
    }
    const frame = parsed.value
    if (!Json.isRecord(frame)) return
    switch (frame.type) {
      case "user":
        return yield* receive(frame)
      case "control_request":
        return yield* control(frame)
      case "control_response":
        return yield* answer(frame, line)
      default:
        // keep_alive, control_cancel_request for our answers, unknown types: nothing to do
        return
    }
  })

  const reader = Effect.gen(function*() {
    while (true) {
      const next = yield* Effect.option(Queue.take(io.stdin))
      if (Option.isNone(next)) {
        yield* Queue.end(turns)
        return
      }
      for (const line of next.value.split("\n")) {
        if (line.trim().length > 0) yield* handleLine(line)
      }
    }
  })

  const runner = Effect.gen(function*() {
    while (true) {
      const next = yield* Effect.option(Queue.take(turns))
      if (Option.isNone(next)) break
      state.queued = state.queued.filter((input) => input !== next.value)
      yield* runTurn(next.value)
    }
    // stdin is closed and every queued turn has run
    yield* Effect.sleep(timing.exit)
    yield* Deferred.succeed(terminate, { _tag: "Exit", code: state.lastResultIsError ? 1 : 0, stderr: "" })
  })

  const faultListener = Effect.forever(Effect.flatMap(Queue.take(io.faults), applyFault))

  const started = Effect.gen(function*() {
    yield* Effect.sleep(timing.startup)
    for (const fault of opts.faults) yield* applyFault(fault)
    yield* Effect.all([reader, runner], { concurrency: "unbounded", discard: true })
  })

  const termination = yield* Effect.raceFirst(
    Effect.andThen(Effect.all([faultListener, started], { concurrency: "unbounded", discard: true }), Effect.never),
    Deferred.await(terminate)
  )
  if (termination._tag === "Hang") return yield* Effect.never
  if (termination.stderr.length > 0) yield* io.stderr(termination.stderr)
  return termination.code
})

// ---------------------------------------------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------------------------------------------

type Termination =
  | { readonly _tag: "Exit"; readonly code: number; readonly stderr: string }
  | { readonly _tag: "Hang" }

type HostAnswer =
  | { readonly _tag: "Success"; readonly response: JsonObject }
  | { readonly _tag: "Failure"; readonly error: string }

type HookDecision = { readonly _tag: "Allow" } | { readonly _tag: "Ask" } | {
  readonly _tag: "Deny"
  readonly reason: string
}

type PermissionDecision =
  | { readonly _tag: "Allow"; readonly input: JsonObject; readonly source: string }
  | { readonly _tag: "Deny"; readonly message: string; readonly meta: JsonObject }
  | { readonly _tag: "DenyInterrupt"; readonly message: string }

interface HookMatcher {
  readonly matcher: string | undefined
  readonly callbackIds: ReadonlyArray<string>
}

interface UserInput {
  readonly uuid: string | undefined
  readonly message: JsonObject
  readonly prompt: string
  readonly shouldQuery: boolean
}

interface AbortRequest {
  readonly requestId: string
  readonly cancelQueued: boolean
}

interface OpenMessage {
  readonly id: string
  readonly requestId: string
  readonly first: boolean
  index: number
  /** The text of the block being streamed, while it streams. */
  partial: string | undefined
  blockOpen: boolean
  stopped: boolean
}

interface ToolCall {
  readonly id: string
  readonly name: string
  input: JsonObject
  running: boolean
}

interface TurnRun {
  readonly input: UserInput
  readonly abort: Deferred.Deferred<AbortRequest>
  readonly startedAt: number
  readonly denials: Array<JsonObject>
  replayed: boolean
  message: OpenMessage | undefined
  messages: number
  tool: ToolCall | undefined
  pending: { readonly requestId: string; readonly subtype: string } | undefined
  inputTokens: number
  outputTokens: number
  lastText: string
  finished: boolean
  abortRequest: AbortRequest | undefined
}

interface ModelUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUSD: number
  readonly contextWindow: number
  readonly maxOutputTokens: number
}

interface State {
  model: string
  permissionMode: string
  hooks: Readonly<Record<string, ReadonlyArray<HookMatcher>>>
  lifecycle: boolean
  receipt: Duration.Input
  readonly unanswered: Set<string>
  ignoreInterrupts: boolean
  stall: number | "forever" | undefined
  idle: boolean
  totalCost: number
  readonly usageByModel: Record<string, ModelUsage>
  lastResultIsError: boolean
  results: number
  readonly consumed: Set<number>
  readonly pending: Map<string, Deferred.Deferred<HostAnswer>>
  run: TurnRun | undefined
  queued: Array<UserInput>
}

interface ResultSpec {
  readonly subtype: "success" | "error_during_execution" | "error_max_turns" | "error_max_budget_usd"
  readonly isError: boolean
  readonly result?: string | undefined
  readonly errors?: ReadonlyArray<string> | undefined
  readonly terminalReason?: string | undefined
  readonly stopReason: string | null
  readonly apiErrorStatus?: number | undefined
  readonly numTurns: number
}

/** The result of a turn whose tool use was interrupted (a deny-and-interrupt, or an interrupt while the tool ran). */
const abortedTools = (run: { readonly messages: number }): ResultSpec => ({
  subtype: "error_during_execution",
  isError: true,
  errors: [diagnostic("tool_use")],
  terminalReason: "aborted_tools",
  stopReason: "tool_use",
  numTurns: run.messages + 2
})

interface Launch {
  readonly replay: boolean
  readonly partials: boolean
  readonly permissionPrompt: boolean
  readonly sessionState: boolean
  readonly sessionId: string | undefined
  readonly model: string | undefined
  readonly permissionMode: string | undefined
  readonly maxTurns: number | undefined
  readonly maxBudgetUsd: number | undefined
}

const inputTokensPerMessage = 13_392

const rejectedText =
  "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a " +
  "file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell " +
  "you how to proceed."

const stoppedWhileRunningText = "Correction to the text above: this call was stopped while running, not refused " +
  "before it ran. It may have run in part or in full, and its changes may have been written."

const builtinTools = [
  "Task",
  "AskUserQuestion",
  "Bash",
  "Edit",
  "Glob",
  "Grep",
  "NotebookEdit",
  "Read",
  "TaskStop",
  "ToolSearch",
  "WebFetch",
  "WebSearch",
  "Write"
]

const diagnostic = (stopReason: string) =>
  `[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=${stopReason}`

const usageOf = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0
})

const rejectMeta = (source: string): JsonObject => ({
  non_execution_kind: "permission-rule",
  permission_decision: { decision: "reject", source }
})

const permissionDecision = (answer: HostAnswer, call: ToolCall): PermissionDecision => {
  if (answer._tag === "Failure") {
    return {
      _tag: "Deny",
      message: `Tool permission request failed: Error: ${answer.error}`,
      meta: rejectMeta("config")
    }
  }
  const response = answer.response
  if (response.behavior === "allow") {
    return {
      _tag: "Allow",
      input: Json.isRecord(response.updatedInput) ? response.updatedInput : call.input,
      source: stringOr(response.decisionClassification, "user_temporary")
    }
  }
  if (response.behavior === "deny") {
    const message = stringOr(response.message, "Permission denied")
    return response.interrupt === true
      ? { _tag: "DenyInterrupt", message }
      : { _tag: "Deny", message, meta: rejectMeta("user_reject") }
  }
  return {
    _tag: "Deny",
    message: "Tool permission request failed: Error: invalid permission result",
    meta: rejectMeta("config")
  }
}

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

const apiErrorKind = (status: number): string =>
  status === 401 ? "authentication_failed" : status === 429 ? "rate_limit" : status >= 500 ? "server_error" : "unknown"

const stringOr = (u: unknown, fallback: string): string => typeof u === "string" ? u : fallback

const toPredicate = (match: string | RegExp | ((prompt: string) => boolean)): (prompt: string) => boolean =>
  typeof match === "string"
    ? (prompt) => prompt.includes(match)
    : match instanceof RegExp
    ? (prompt) => match.test(prompt)
    : match

const parseHooks = (u: unknown): Record<string, ReadonlyArray<HookMatcher>> => {
  const hooks: Record<string, ReadonlyArray<HookMatcher>> = {}
  if (!Json.isRecord(u)) return hooks
  for (const [event, matchers] of Object.entries(u)) {
    if (!Array.isArray(matchers)) continue
    hooks[event] = matchers.flatMap((m) =>
      Json.isRecord(m) && Array.isArray(m.hookCallbackIds)
        ? [{
          matcher: typeof m.matcher === "string" ? m.matcher : undefined,
          callbackIds: m.hookCallbackIds.filter((id): id is string => typeof id === "string")
        }]
        : []
    )
  }
  return hooks
}

// Claude Code matchers are a tool name, a regular expression over tool names, or empty / "*" for every tool.
const matchesTool = (matcher: string | undefined, toolName: string): boolean => {
  if (matcher === undefined || matcher === "" || matcher === "*") return true
  if (matcher === toolName) return true
  try {
    return new RegExp(`^(?:${matcher})$`).test(toolName)
  } catch {
    return false
  }
}

const flagValue = (args: ReadonlyArray<string>, flag: string): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === flag) return args[i + 1]
    if (arg.startsWith(`${flag}=`)) return arg.slice(flag.length + 1)
  }
  return undefined
}

const parseLaunch = (spec: Transport.LaunchSpec): Launch => {
  const args = spec.args
  const has = (flag: string) => args.some((arg) => arg === flag || arg.startsWith(`${flag}=`))
  const number = (flag: string) => {
    const value = flagValue(args, flag)
    const parsed = value === undefined ? NaN : Number(value)
    return Number.isFinite(parsed) ? parsed : undefined
  }
  const sessionStateVar = spec.env.set["CLAUDE_CODE_SDK_READS_SESSION_STATE"]
  const sessionState = sessionStateVar === undefined
    ? false
    : (Redacted.isRedacted(sessionStateVar) ? Redacted.value(sessionStateVar) : sessionStateVar) === "1"
  return {
    replay: has("--replay-user-messages"),
    partials: has("--include-partial-messages"),
    permissionPrompt: flagValue(args, "--permission-prompt-tool") === "stdio",
    sessionState,
    sessionId: flagValue(args, "--session-id"),
    model: flagValue(args, "--model"),
    permissionMode: flagValue(args, "--permission-mode"),
    maxTurns: number("--max-turns"),
    maxBudgetUsd: number("--max-budget-usd")
  }
}

// Deterministic ids (mulberry32): the same script and seed give the same frames.
const makeIds = (seed: number) => {
  let s = seed >>> 0
  const next = () => {
    s = (s + 0x6D2B79F5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const hex = (length: number) => {
    let out = ""
    for (let i = 0; i < length; i++) out += Math.floor(next() * 16).toString(16)
    return out
  }
  const uuid = () => {
    const h = hex(32)
    const variant = (8 + Math.floor(next() * 4)).toString(16)
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`
  }
  return { hex, uuid }
}
