/**
 * A turn: one prompt and everything the CLI does with it, up to its terminal result.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import { dual } from "effect/Function"
import * as Stream from "effect/Stream"
import type * as EventLog from "./EventLog.ts"
import { fixDisposition } from "./internal/disposition.ts"
import { TaggedError } from "./internal/taggedError.ts"
import { ForEachEvent, hasForEachEvent } from "./internal/turn.ts"
import type { SessionEvent } from "./SessionEvent.ts"
import type {
  CliExited,
  DeliveryTimeout,
  InterruptTimeout,
  SessionRetired,
  SessionUnavailable,
  TransportWriteError,
  TurnInterrupted
} from "./TetherError.ts"
import type * as TetherError from "./TetherError.ts"

/**
 * A prompt: plain text, or provider content blocks (passed through the codec's schemas before writing).
 *
 * @category models
 * @since 0.1.0
 */
export type Prompt = string | ReadonlyArray<{ readonly type: string; readonly [key: string]: unknown }>

/**
 * Token usage of a turn.
 *
 * @category models
 * @since 0.1.0
 */
export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheCreationInputTokens: number
  readonly cacheReadInputTokens: number
}

/**
 * The normalized result of a turn, as every provider reports it. A provider's session returns a richer type
 * (`ClaudeSession.TurnResult` adds Claude's cost, subtype, stop and terminal reasons, permission denials).
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult {
  readonly turnId: string
  /** The CLI's conversation id (Claude's session id, Codex's thread id): use it to resume. */
  readonly sessionId: string | undefined
  /** The final text of the turn. */
  readonly text: string
  readonly usage: Usage
  readonly durationMs: number | undefined
  /** The raw terminal frame, unknown fields included. */
  readonly raw: unknown
}

// The disposition flags of ApiError, set once on its prototype.
export interface ApiError extends TetherError.Disposition {}

/**
 * The model API failed for this turn (after the CLI's own retries). The prompt was received and recorded: the
 * session is still usable.
 *
 * @category errors
 * @since 0.1.0
 */
export class ApiError extends TaggedError("ApiError")<{
  readonly turnId: string
  readonly status: number | null
  readonly detail: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `the model API failed for turn ${this.turnId}${
      this.status === null ? "" : ` (${this.status})`
    }: ${this.detail}`
  }
}

// The disposition flags of TurnFailed, set once on its prototype.
export interface TurnFailed extends TetherError.Disposition {}

/**
 * The CLI ended the turn with an error of another kind (the provider's `subtype`, its terminal reason, its
 * messages).
 *
 * @category errors
 * @since 0.1.0
 */
export class TurnFailed extends TaggedError("TurnFailed")<{
  readonly turnId: string
  readonly subtype: string
  readonly terminalReason: string | null
  readonly errors: ReadonlyArray<string>
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} failed (${this.subtype}${this.terminalReason ? `, ${this.terminalReason}` : ""})${
      this.errors.length > 0 ? `: ${this.errors.join("; ")}` : ""
    }`
  }
}

/**
 * Every way a turn can fail, whatever the provider. A provider's session adds its own errors to this union
 * (`ClaudeSession.TurnError` adds `MaxTurnsExceeded` and `BudgetExceeded`).
 *
 * @category errors
 * @since 0.1.0
 */
export type TurnError =
  | ApiError
  | TurnFailed
  | TurnInterrupted
  | InterruptTimeout
  | CliExited
  | DeliveryTimeout
  | TransportWriteError
  | SessionUnavailable
  | SessionRetired

/**
 * A turn error of any provider: the neutral {@link TurnError}s, or a provider's own tagged error with its
 * disposition. What `SessionEvent`'s `TurnFailed` carries.
 *
 * @category errors
 * @since 0.1.0
 */
export type AnyTurnError = TurnError | ProviderTurnError

/**
 * The shape of a provider's own turn errors: tagged, with a message and the three disposition flags.
 *
 * @category errors
 * @since 0.1.0
 */
export interface ProviderTurnError extends TetherError.Disposition {
  readonly _tag: string
  readonly message: string
  readonly turnId: string
}

/**
 * The turn errors of each provider package in the program, by provider: a provider package adds its own union of
 * tagged error classes here (`@tether/claude` adds `claude: ClaudeSession.TurnError`, `@tether/codex` adds
 * `codex: CodexSession.TurnError`), by module augmentation of `@tether/core/Turn`. A provider a host never imports
 * adds nothing.
 *
 * @example
 * ```ts
 * import type { TetherError } from "@tether/core"
 *
 * // A provider package's own errors, known to every neutral Session once the package is imported.
 * export interface QuotaExhausted extends TetherError.Disposition {
 *   readonly _tag: "QuotaExhausted"
 *   readonly message: string
 *   readonly turnId: string
 * }
 *
 * declare module "@tether/core/Turn" {
 *   interface ProviderTurnErrors {
 *     readonly quota: QuotaExhausted
 *   }
 * }
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export interface ProviderTurnErrors {}

/**
 * The turn errors a neutral `Session.Session`, `Turn` or registry handle fails with by default: the union of every
 * provider's own errors that {@link ProviderTurnErrors} lists (each a tagged class, so a host holding a neutral
 * session catches them with `Effect.catchTag` and reads their fields), or {@link ProviderTurnError} when the program
 * imports no provider package.
 *
 * @category errors
 * @since 0.1.0
 */
export type KnownProviderTurnError = [keyof ProviderTurnErrors] extends [never] ? ProviderTurnError
  : ProviderTurnErrors[keyof ProviderTurnErrors]

/**
 * Where a queued or running turn is in its life.
 *
 * @category models
 * @since 0.1.0
 */
export type Phase = "queued" | "started" | "acknowledged" | "completed" | "failed" | "cancelled"

/**
 * A handle on one turn.
 *
 * `A` is the provider's result type and `E` its own turn errors (see `ClaudeSession.Turn`).
 *
 * - `result` waits for the terminal outcome. Interrupting the fiber that waits interrupts the turn in the CLI
 *   (unless the turn was sent with `interruptOnCancel: false`).
 * - `events` is the turn's own stream of session events, from its start, ending with its terminal event. It fails
 *   with `ReplayUnavailable` only if the turn's first events have already left the session's replay ring. A host
 *   that handles each event as it comes reads them with {@link forEachEvent}, which costs less per turn.
 *
 * A handle is an object with accessors, not a plain record: its effects and stream are built when read (most hosts
 * read `result` alone), so spreading or copying it (`{ ...turn }`) keeps only `id`. Pass the handle itself around.
 *
 * @category models
 * @since 0.1.0
 */
export interface Turn<A extends TurnResult = TurnResult, E = KnownProviderTurnError> {
  /** The host's id for the turn (Claude writes it as the user message's uuid; Codex maps its own turn id to it). */
  readonly id: string
  readonly result: Effect.Effect<A, TurnError | E>
  /** Waits for the terminal outcome without ever interrupting the turn (for observers and supervisors). */
  readonly settled: Effect.Effect<Exit.Exit<A, TurnError | E>>
  readonly events: Stream.Stream<EventLog.Delivery<SessionEvent>, EventLog.ReplayUnavailable>
  /**
   * The turn's phase now. A turn of a local session never fails to tell; a turn through a registry across machines
   * (`@tether/cluster`) fails with `SessionUnavailable` when its runner cannot be reached (nothing was changed).
   */
  readonly phase: Effect.Effect<Phase, SessionUnavailable>
  /** Interrupts this turn (bounded by the interrupt timeout) and waits for it to settle. */
  readonly interrupt: Effect.Effect<void>
}

/**
 * Runs `f` on each of the turn's deliveries, in order, from the turn's start up to its terminal event, and waits for
 * each `f` before the next: what `Stream.runForEach(turn.events, f)` does, with the same deliveries, lag markers and
 * `ReplayUnavailable`, and the same end. A turn of a local session reads them from the session's log without running
 * a stream (a channel, a scope and a pull each time), which is most of what reading a tiny turn's events costs: a
 * host that handles every turn's events this way pays close to what one session-wide subscriber pays
 * (docs/performance.md). Interrupting it, or a failure of `f`, stops the reading; nothing is left subscribed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { type Session, Turn } from "@tether/core"
 *
 * const ask = Effect.fnUntraced(function*(session: Session.Session, prompt: string) {
 *   const turn = yield* session.send(prompt)
 *   yield* Turn.forEachEvent(turn, (delivery) => {
 *     const event = delivery._tag === "Event" ? delivery.event : undefined
 *     return event?._tag === "TextDelta" ? Effect.sync(() => process.stdout.write(event.text)) : Effect.void
 *   })
 *   return yield* turn.result
 * })
 * ```
 *
 * @category combinators
 * @since 0.1.0
 */
export const forEachEvent: {
  <E2, R>(
    f: (delivery: EventLog.Delivery<SessionEvent>) => Effect.Effect<void, E2, R>
  ): <A extends TurnResult, E>(self: Turn<A, E>) => Effect.Effect<void, EventLog.ReplayUnavailable | E2, R>
  <A extends TurnResult, E, E2, R>(
    self: Turn<A, E>,
    f: (delivery: EventLog.Delivery<SessionEvent>) => Effect.Effect<void, E2, R>
  ): Effect.Effect<void, EventLog.ReplayUnavailable | E2, R>
} = dual(2, <A extends TurnResult, E, E2, R>(
  self: Turn<A, E>,
  f: (delivery: EventLog.Delivery<SessionEvent>) => Effect.Effect<void, E2, R>
): Effect.Effect<void, EventLog.ReplayUnavailable | E2, R> =>
  hasForEachEvent(self) ? self[ForEachEvent](f) : Stream.runForEach(self.events, f))
