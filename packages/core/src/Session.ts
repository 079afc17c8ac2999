/**
 * A long-lived CLI session as a scoped Effect resource, whatever the provider.
 *
 * `Session.make` (used through a provider's module: `ClaudeSession.make`, `CodexSession.make`) opens the
 * transport, completes the provider's handshake within the startup timeout, and returns a {@link Session} whose
 * release leaves nothing behind: stdin EOF, the close grace, then the transport's teardown of the whole process
 * tree.
 *
 * Inside, every rule of the session (turns, the delivery fence, the queue, permissions, controls, every deadline)
 * is one pure state machine, driven by one Effect driver that does the reading, the serialized writing, the
 * timer and the waiting; the provider's protocol machine (`Provider`) turns lines into what the session machine
 * understands. One turn runs at a time; a second `send` is refused with a typed, safe-to-requeue error unless the
 * host asked for a queue. Everything the CLI prints after a turn's prompt was written belongs to that turn (the
 * session never writes a second prompt while one runs): it is attributed to it and counts as its progress, and
 * its first frame acknowledges the prompt if the CLI's receipt has not come yet (on a CLI without receipts, it is
 * the only acknowledgement): a frame of the turn's work shows the CLI took the prompt as surely as a receipt does.
 *
 * ## Spans and metrics
 *
 * Every session records the {@link metrics} and, when the context it is made in has a tracer (an exporter such as
 * `Otlp.layerJson` from `effect/observability`; Effect's default tracer exports nothing and Tether makes no span
 * for it), these spans. Each carries `tether.provider` (`"claude"`, `"codex"`) and the span annotations of the
 * context the session was made in (a `SessionRegistry` adds its `tether.session.id` and
 * `tether.session.generation`). Times are the session's `Clock`.
 *
 * | span | from → to | parent | attributes |
 * | --- | --- | --- | --- |
 * | `tether.session` | the start of `make` → the end of release (the process tree is gone) | the span that made the session | `tether.model` (the model the host asked for, if any); `process.pid`; at the end `tether.session.status` (`closed` or `failed`), `tether.session.turns` (turns sent), `tether.conversation.id` (the CLI's conversation id, once known), `process.exit.code` or `process.exit.signal`, and `tether.session.retired` (the retirement's reason, as the metric's) if it was retired. Events: `ready` (the handshake's end), `retired` (with the reason's sentence). Status: the start's error if it failed to start, `SessionRetired` if retired, else OK |
 * | `tether.turn` | `send` → the turn settles | the sender's span, or the session's (with a link to the session's span otherwise) | `tether.turn.id`, `tether.model`; at the end `tether.turn.outcome` (`completed`, `interrupted`, `api_error`, `failed`), `tether.conversation.id`, `tether.turn.first_output_ms` (prompt handed to the CLI → its first text, message or tool use), and for a completed turn `tether.tokens.input`, `tether.tokens.output`, `tether.tokens.cache_read`, `tether.tokens.cache_creation`, `tether.cost_usd` (this turn's cost: Claude reports a total over the process, the span reports its increase), `tether.turn.cli_duration_ms` (the CLI's own figure); for a failed one `tether.turn.error` (the error's tag, which is also the span's error) |
 * | `tether.control` | `control` (and every typed control built on it) → its answer, refusal or timeout | the caller's span, or the session's (linked) | `tether.control.subtype`, `tether.control.outcome` (`ok` or the error's tag) |
 * | `tether.permission` | a permission request arrives → it is decided, answered or expires | the turn's span, or the session's | `tether.permission.request_id`, `tether.permission.kind`, `tether.permission.tool`, `tether.turn.id`, `tether.permission.resolved_by` (`policy`, `host`, `expired`, `policy-failed`), `tether.permission.behavior` (`allow`, `deny`), `tether.permission.expired` (why, when it expired) |
 *
 * The tracer is read once, when the session is made: a session made without one makes no span, even for turns
 * sent from a fiber that has one. Spans and metrics cost no Effect operation: they are recorded synchronously at
 * the moments the session's machine reports (a turn settling, a control answered), and nothing is done per frame.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Metric from "effect/Metric"
import type * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as EventLog from "./EventLog.ts"
import * as driver from "./internal/session/driver.ts"
import * as telemetry from "./internal/session/telemetry.ts"
import { defaults as defaultTimeouts } from "./internal/timeouts.ts"
import * as Permission from "./Permission.ts"
import type * as Provider from "./Provider.ts"
import type { SessionEvent, Status } from "./SessionEvent.ts"
import type {
  CliExited,
  ControlFailed,
  ControlTimeout,
  HandshakeFailed,
  InterruptReason,
  InvalidConfig,
  InvalidPrompt,
  QueueFull,
  SessionRetired,
  SessionUnavailable,
  SpawnError,
  StartupTimeout,
  TurnInFlight
} from "./TetherError.ts"
import type { Timeouts } from "./Timeouts.ts"
import type * as Transport from "./Transport.ts"
import type { KnownProviderTurnError, Prompt, ProviderTurnError, Turn, TurnError, TurnResult } from "./Turn.ts"

// ---------------------------------------------------------------------------------------------------------------
// Public interface
// ---------------------------------------------------------------------------------------------------------------

/**
 * How the process ended, or that it is still running.
 *
 * @category models
 * @since 0.1.0
 */
export type ProcessState =
  | { readonly _tag: "Running" }
  | { readonly _tag: "Completed"; readonly status: Transport.ExitStatus; readonly stderrTail: string }
  | { readonly _tag: "Failed"; readonly status: Transport.ExitStatus; readonly stderrTail: string }

/**
 * Per-send options.
 *
 * @category models
 * @since 0.1.0
 */
export interface SendOptions {
  /** Queue behind the running turn instead of failing with `TurnInFlight` (overrides the session's default). */
  readonly queue?: boolean | undefined
  /**
   * Interrupt the turn in the CLI when the fiber waiting on `Turn.result` is interrupted (default true). Opt out
   * for fire-and-forget hosts that stop waiting but want the turn to finish.
   */
  readonly interruptOnCancel?: boolean | undefined
}

/**
 * What an interrupt did.
 *
 * @category models
 * @since 0.1.0
 */
export type InterruptOutcome = "no-active-turn" | "interrupted" | "completed-first" | "retired"

/**
 * Errors of a control request: the CLI refused it, did not answer in time (the session is retired), exited, or the
 * session was retired while it waited.
 *
 * @category errors
 * @since 0.1.0
 */
export type ControlError = ControlFailed | ControlTimeout | CliExited | SessionRetired

/**
 * Errors of `send`.
 *
 * @category errors
 * @since 0.1.0
 */
export type SendError = TurnInFlight | QueueFull | SessionUnavailable | InvalidPrompt

/**
 * A live session. `A` is the provider's turn result and `E` its own turn errors (`ClaudeSession.ClaudeSession` is
 * a `Session<ClaudeSession.TurnResult, ClaudeSession.TurnError>`).
 *
 * @category models
 * @since 0.1.0
 */
export interface Session<A extends TurnResult = TurnResult, E = KnownProviderTurnError> {
  /** The provider's name (`"claude"`, `"codex"`). */
  readonly protocol: string
  readonly pid: Option.Option<number>
  /** What the handshake returned (for Claude, the decoded `initialize` response). */
  readonly handshake: unknown
  /** What the provider can do, as the running CLI showed it (receipts, interrupt, permission kinds, resume). */
  readonly capabilities: Effect.Effect<Provider.Capabilities>
  readonly status: Effect.Effect<Status>
  /** The CLI's conversation id, once known. */
  readonly sessionId: Effect.Effect<Option.Option<string>>
  /**
   * Whether a file of the CLI's conversation directory (a {@link Placement}'s `directory`; `path` relative to it)
   * holds part of the conversation `conversationId`: what a host that moves conversations between machines saves
   * and restores (`@tether/cluster` does). Claude's and Codex's files name the id ({@link namesConversation}); an
   * ACP agent's preset knows its agent's layout (Gemini CLI names its file by the id's first eight characters).
   * Every session `make` builds has it; a session a host builds by hand may leave it out (then
   * {@link namesConversation}).
   */
  readonly conversationFile?: ((path: string, conversationId: string) => boolean) | undefined
  /** Sends a prompt and returns the turn handle as soon as the prompt is written (or queued). */
  readonly send: (prompt: Prompt, options?: SendOptions) => Effect.Effect<Turn<A, E>, SendError>
  /** Sends a prompt and waits for its result. */
  readonly run: (prompt: Prompt, options?: SendOptions) => Effect.Effect<A, SendError | TurnError | E>
  /** Interrupts the active turn and waits for it to settle, bounded by the interrupt timeout. */
  readonly interrupt: Effect.Effect<InterruptOutcome>
  /** Answers a deferred permission request, exactly once. */
  readonly answerPermission: (
    requestId: string,
    decision: Permission.Verdict
  ) => Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved>
  /** Permission requests waiting for a deferred answer. */
  readonly pendingPermissions: Effect.Effect<ReadonlyArray<Permission.PermissionRequest>>
  /** Sends a raw control request through the protocol and waits for its answer (bounded by the control timeout). */
  readonly control: (request: unknown) => Effect.Effect<unknown, ControlError>
  /** Subscribes to the session's events from a starting point. */
  readonly subscribe: (
    from?: EventLog.From
  ) => Effect.Effect<Stream.Stream<EventLog.Delivery<SessionEvent>>, EventLog.ReplayUnavailable, Scope.Scope>
  readonly latestSeq: Effect.Effect<number>
  readonly process: Effect.Effect<ProcessState>
  readonly isAlive: Effect.Effect<boolean>
  /** Waits until the CLI process has exited. */
  readonly awaitExit: Effect.Effect<Transport.ExitStatus>
  readonly stderrTail: Effect.Effect<string>
  /** Retires the session now: fails the active turn, tears down the process tree. */
  readonly retire: (reason: string) => Effect.Effect<void>
  /**
   * Releases the session now, as closing its scope would (stdin EOF, close grace, teardown), without waiting for
   * the scope. A running turn fails with `TurnInterrupted` carrying `reason` (default `"closed"`; a registry says
   * `"evicted"`).
   */
  readonly close: (reason?: InterruptReason) => Effect.Effect<void>
}

/**
 * Options of {@link make}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options extends HostOptions {
  /** The provider's protocol machine for this session. */
  readonly provider: Provider.ProtocolMachine
  readonly launch: Transport.LaunchSpec
  /**
   * Answers the CLI's requests other than permissions (the provider's `HostRequest` items: hook callbacks, MCP
   * messages). Bounded by the control timeout, or by the running turn for the requests the provider binds to it
   * (a tool call the turn waits on: see `Provider.Item`). Default: an error answer.
   */
  readonly handle?: ((request: unknown) => Effect.Effect<Provider.Reply>) | undefined
  /** The model the host asked for, as the session's spans report it (`tether.model`). */
  readonly model?: string | undefined
  /** Which files of the conversation directory hold a conversation (see `Session.conversationFile`). Default: {@link namesConversation}. */
  readonly conversationFile?: ((path: string, conversationId: string) => boolean) | undefined
}

/**
 * The default of `Session.conversationFile`: a file holds part of a conversation when its path names the
 * conversation's id (Claude: `projects/<cwd>/<session id>.jsonl` and the session's folder; Codex:
 * `sessions/<date>/rollout-…-<thread id>.jsonl`).
 *
 * @category models
 * @since 0.1.0
 */
export const namesConversation = (path: string, conversationId: string): boolean => path.includes(conversationId)

/**
 * The options every provider's session takes from the host, whatever its CLI: a provider's options extend these
 * (`ClaudeSession.Options`, `CodexSession.Options`) and hand them to {@link make} as they are.
 *
 * @category models
 * @since 0.1.0
 */
export interface HostOptions {
  /** The session's deadlines. Default: `Timeouts.defaults`. */
  readonly timeouts?: Timeouts | undefined
  /** Decides the CLI's permission requests. Default: deny everything. */
  readonly policy?: Permission.Policy | undefined
  /** Queue sends behind a running turn by default (else `TurnInFlight`). Default: false. */
  readonly queue?: boolean | undefined
  /** How many sends may wait behind the running turn (`QueueFull` past it). Default: 64. */
  readonly queueCapacity?: number | undefined
  /** How many events the session keeps for subscribers that start behind the latest. Default: 512. */
  readonly eventRing?: number | undefined
  /** How many events a subscriber may fall behind before it sees a lag marker. Default: 512. */
  readonly subscriberBuffer?: number | undefined
  /** Generates turn ids (by default UUIDs, unique across sessions, that count up within one). */
  readonly makeId?: (() => string) | undefined
}

/**
 * The {@link HostOptions} of a provider's options, and nothing else: what a provider hands {@link make} besides its
 * own protocol machine, launch and handler.
 *
 * @category constructors
 * @since 0.1.0
 */
export const hostOptions = (options: HostOptions): HostOptions => ({
  timeouts: options.timeouts,
  policy: options.policy,
  queue: options.queue,
  queueCapacity: options.queueCapacity,
  eventRing: options.eventRing,
  subscriberBuffer: options.subscriberBuffer,
  makeId: options.makeId
})

/**
 * Where a session's CLI keeps its own conversation state, and which conversation it resumes. See
 * {@link Conversation}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Placement {
  /**
   * The directory the CLI keeps its conversation state in (Claude: `CLAUDE_CONFIG_DIR`, where the transcript is
   * `projects/<cwd>/<session id>.jsonl`; Codex: `CODEX_HOME`, where the thread's rollout is
   * `sessions/<date>/rollout-…-<thread id>.jsonl`). It must exist.
   *
   * It is the CLI's whole configuration directory, not only where its transcripts go: the login the CLI keeps
   * there (Claude's `.credentials.json`, Codex's `auth.json`), its settings (`settings.json`, `config.toml`) and
   * its MCP servers are whatever this directory holds, not the user's `~/.claude` or `~/.codex`.
   */
  readonly directory: string
  /** The conversation to resume in it (Claude's session id, Codex's thread id); `undefined` starts a new one. */
  readonly resume: string | undefined
}

/**
 * The conversation placement a provider's `make` (`ClaudeSession.make`, `CodexSession.make`) applies on top of
 * the options it is given: the directory replaces the host's (`CLAUDE_CONFIG_DIR` in Claude's environment, Codex's
 * `codexHome`) and `resume` replaces the host's own resume choice (`resume`, `continue`; Claude's `sessionId` and
 * `forkSession` are dropped when resuming, the CLI refuses them together). Unset (the default), nothing changes.
 *
 * It is how a host that moves conversations between machines (the cluster registry of `@tether/cluster`) starts a
 * session whose transcript it restored, without knowing how the session's options were built.
 *
 * The gotcha: the directory replaces the CLI's whole configuration directory, so a session placed in one does not
 * see the login, settings, `config.toml` or MCP configuration of the user's `~/.claude` / `~/.codex`. A host that
 * places sessions passes what the CLI needs in the session's options (an API key in the environment, such as
 * `ANTHROPIC_API_KEY` or `OPENAI_API_KEY`; Codex `-c key=value` overrides; MCP servers in the options), or copies
 * the files it needs into the directory before the session starts. Tether copies nothing.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClaudeSession } from "@tether/claude"
 * import { Session } from "@tether/core"
 *
 * // The transcript of session 1c0… was restored under /var/lib/app/conversations/chat-42.
 * const resumed = ClaudeSession.make({ model: "sonnet" }).pipe(
 *   Effect.provideService(Session.Conversation, {
 *     directory: "/var/lib/app/conversations/chat-42",
 *     resume: "1c0c5a4e-7d2f-4d8e-9d57-0b8f5f2f2f11"
 *   })
 * )
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export const Conversation: Context.Reference<Placement | undefined> = Context.Reference<Placement | undefined>(
  "@tether/core/Session/Conversation",
  { defaultValue: () => undefined }
)

/**
 * The metrics every session records (shared by every session in the process, in a registry or not). Timers are
 * histograms in milliseconds; counters are monotonic (`incremental`), so OTLP exports them as monotonic sums.
 *
 * | metric | kind, unit | attributes | what |
 * | --- | --- | --- | --- |
 * | `tether_sessions_live` | gauge, sessions | `provider` | sessions whose handshake finished and that are not yet released |
 * | `tether_session_start_duration` | timer, ms | `provider`, `outcome` (`ready`, `failed`) | spawn → the handshake's end, or → the start's failure; its count is the starts by outcome |
 * | `tether_session_turns` | counter, turns | `provider`, `outcome` (`completed`, `interrupted`, `api_error`, `failed`) | turns that ended |
 * | `tether_session_turn_duration` | timer, ms | `provider`, `outcome` | `send` → the turn settles (queue time included) |
 * | `tether_session_turn_first_output` | timer, ms | `provider` | the prompt handed to the CLI → the turn's first text delta, message or tool use (turns with none are not recorded) |
 * | `tether_session_tokens` | counter, tokens | `provider`, `kind` (`input`, `output`, `cache_read`, `cache_creation`), `unit` | tokens of completed turns, as the CLI reported them |
 * | `tether_session_cost_usd` | counter, USD | `provider`, `unit` | cost of completed turns (Claude reports a total over the process: each turn adds its increase; the cost of a turn that failed is added with the next completed one) |
 * | `tether_session_control_duration` | timer, ms | `provider`, `subtype`, `outcome` (`ok` or the error's tag) | control requests, sent → answered, refused or timed out |
 * | `tether_session_retirements` | counter, sessions | `provider`, `reason` | sessions retired; `reason` is one of `cli-exited`, `stdout-closed`, `startup-timeout`, `handshake-refused`, `delivery-timeout`, `control-timeout`, `interrupt-timeout`, `unacknowledged-interrupt`, `write-failed`, `write-abandoned`, `reader-failed`, `host` (`Session.retire`) |
 * | `tether_session_permission_wait` | timer, ms | none | a permission request, from its arrival to its resolution (decided by the policy, answered by the host, or expired) |
 *
 * Series are recorded with their attributes: read one with `Metric.withAttributes`, e.g.
 * `Metric.value(Metric.withAttributes(Session.metrics.turns, { provider: "claude", outcome: "completed" }))`, or
 * read them all with `Metric.snapshot`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics: {
  readonly permissionWait: Metric.Histogram<Duration.Duration>
  readonly sessionsLive: Metric.Gauge<number>
  readonly startDuration: Metric.Histogram<Duration.Duration>
  readonly turns: Metric.Counter<number>
  readonly turnDuration: Metric.Histogram<Duration.Duration>
  readonly firstOutput: Metric.Histogram<Duration.Duration>
  readonly tokens: Metric.Counter<number>
  readonly cost: Metric.Counter<number>
  readonly controlDuration: Metric.Histogram<Duration.Duration>
  readonly retirements: Metric.Counter<number>
} = telemetry.metrics

/**
 * The default turn ids of one session: UUIDs (version 4) that share a random one drawn when the session starts, its
 * last 48 bits counting on from their random start. Unique within the session, and across sessions by the random
 * bits they do not share, without a draw per turn.
 */
const turnIds = (): () => string => {
  const first = globalThis.crypto.randomUUID()
  const head = first.slice(0, 24)
  let next = Number.parseInt(first.slice(24), 16)
  return () => {
    const id = head + next.toString(16).padStart(12, "0")
    next = next === 0xffffffffffff ? 0 : next + 1
    return id
  }
}

const unsupported = (): Effect.Effect<Provider.Reply> =>
  Effect.succeed({ _tag: "Error", message: "this host does not answer such requests" })

/**
 * Acquires a session in the current scope: opens the transport, runs the provider's handshake within the startup
 * timeout, and starts the reader. Closing the scope releases it (stdin EOF, close grace, teardown). Hosts use a
 * provider's constructor (`ClaudeSession.make`), which builds these options from typed ones.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (options: Options) => Effect.Effect<
  Session<TurnResult, ProviderTurnError>,
  StartError,
  Transport.Transport | Scope.Scope
> = Effect.fn("Session.make")(function*(options: Options) {
  // The session owns a child of the caller's scope, so that a session that fails to start is torn down at once
  // instead of living until the caller's scope closes.
  const sessionScope = yield* Scope.fork(yield* Effect.scope, "sequential")
  const driven = yield* driver.make({
    provider: options.provider,
    launch: options.launch,
    timeouts: options.timeouts ?? defaultTimeouts,
    policy: options.policy ?? Permission.denyAll,
    handle: options.handle ?? unsupported,
    queue: options.queue ?? false,
    queueCapacity: options.queueCapacity ?? 64,
    eventRing: options.eventRing ?? 512,
    subscriberBuffer: options.subscriberBuffer ?? 512,
    makeId: options.makeId ?? turnIds(),
    model: options.model,
    conversationFile: options.conversationFile ?? namesConversation
  }, sessionScope).pipe(
    Effect.onError((cause) => Scope.close(sessionScope, Exit.failCause(cause)))
  )
  return driven
})

/**
 * What acquiring a session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = SpawnError | StartupTimeout | HandshakeFailed | InvalidConfig
