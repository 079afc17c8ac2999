/**
 * Every failure a host can see, as tagged errors that say what the host may do next.
 *
 * Each error carries three flags (its disposition):
 *
 * | flag | meaning |
 * | --- | --- |
 * | `safeToFallback` | nothing reached the CLI; the host may take another path (another transport, a one-shot run) |
 * | `safeToRequeue` | the request was definitely not accepted; sending it again cannot duplicate work |
 * | `deliveryUncertain` | the CLI may or may not have received it; resending may duplicate side effects; the session that produced it is retired |
 *
 * The errors are tagged `Data` errors, not schema classes. To send one to another process or store it, use its schema in
 * `TetherErrorSchema`.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as disposition_ from "./internal/disposition.ts"
import * as tagged from "./internal/taggedError.ts"

/**
 * The base class of a Tether error: `Data.TaggedError` with its fields kept as `{ _tag, ...fields }`, so that an
 * error's JSON, its key order and its equality are those of its tag and fields. Every neutral error is made with it,
 * and so is each provider package's own (`ClaudeSession.MaxTurnsExceeded`, `CodexSession.TurnRejected`): give the
 * class its disposition with {@link fixDisposition} (or {@link uncertainUnlessAcknowledged}) and its schema with
 * `TetherErrorSchema.make`.
 *
 * @example
 * ```ts
 * import { TetherError } from "@tether/core"
 *
 * export interface QuotaExhausted extends TetherError.Disposition {}
 * export class QuotaExhausted extends TetherError.TaggedError("QuotaExhausted")<{ readonly turnId: string }> {
 *   static {
 *     TetherError.fixDisposition(this, false, false, false)
 *   }
 * }
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const TaggedError = tagged.TaggedError

/**
 * Sets an error class's disposition once, on its prototype: `safeToFallback`, `safeToRequeue`, `deliveryUncertain`,
 * for errors that always mean the same thing to the host. Call it from the class's `static` block.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fixDisposition: (
  target: { readonly prototype: object },
  safeToFallback: boolean,
  safeToRequeue: boolean,
  deliveryUncertain: boolean
) => void = disposition_.fixDisposition

/**
 * Sets the disposition of an error that ends a turn after its prompt was written: never safe to fall back or
 * requeue, and delivery uncertain exactly when the instance's `acknowledged` is `false`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const uncertainUnlessAcknowledged: (target: { readonly prototype: object }) => void =
  disposition_.uncertainUnlessAcknowledged

/**
 * The three flags every Tether error carries.
 *
 * @category models
 * @since 0.1.0
 */
export interface Disposition {
  readonly safeToFallback: boolean
  readonly safeToRequeue: boolean
  readonly deliveryUncertain: boolean
}

// ---------------------------------------------------------------------------------------------------------------
// Startup: nothing reached the CLI, so the host may fall back and requeue.
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of ExecutableNotFound, set once on its prototype.
export interface ExecutableNotFound extends Disposition {}

/**
 * The CLI executable was not found. Names every place that was searched.
 *
 * @category startup
 * @since 0.1.0
 */
export class ExecutableNotFound extends TaggedError("ExecutableNotFound")<{
  readonly program: string
  readonly searched: ReadonlyArray<string>
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `${this.program} executable not found (searched: ${this.searched.join(", ")})`
  }
}

// The disposition flags of SpawnFailed, set once on its prototype.
export interface SpawnFailed extends Disposition {}

/**
 * The operating system refused to start the process.
 *
 * @category startup
 * @since 0.1.0
 */
export class SpawnFailed extends TaggedError("SpawnFailed")<{
  readonly program: string
  readonly reason: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `failed to start ${this.program}: ${this.reason}`
  }
}

/**
 * What `Transport.open` can fail with.
 *
 * @category startup
 * @since 0.1.0
 */
export type SpawnError = ExecutableNotFound | SpawnFailed

// The disposition flags of StartupTimeout, set once on its prototype.
export interface StartupTimeout extends Disposition {}

/**
 * The CLI did not complete its handshake within the startup timeout. The process is torn down.
 *
 * @category startup
 * @since 0.1.0
 */
export class StartupTimeout extends TaggedError("StartupTimeout")<{
  readonly timeoutMillis: number
  readonly stderrTail: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `the CLI did not complete its handshake within ${this.timeoutMillis} ms`
  }
}

// The disposition flags of HandshakeFailed, set once on its prototype.
export interface HandshakeFailed extends Disposition {}

/**
 * The CLI refused the handshake, or exited before completing it.
 *
 * @category startup
 * @since 0.1.0
 */
export class HandshakeFailed extends TaggedError("HandshakeFailed")<{
  readonly reason: string
  readonly stderrTail: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `handshake failed: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Admission: the request was refused before anything was written.
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of TurnInFlight, set once on its prototype.
export interface TurnInFlight extends Disposition {}

/**
 * A turn is already running and the session was not asked to queue: the prompt was not written. Send it again
 * after the active turn ends.
 *
 * @category admission
 * @since 0.1.0
 */
export class TurnInFlight extends TaggedError("TurnInFlight")<{
  readonly activeTurnId: string
}> {
  static {
    fixDisposition(this, false, true, false)
  }
  override get message() {
    return `turn ${this.activeTurnId} is still running`
  }
}

// The disposition flags of QueueFull, set once on its prototype.
export interface QueueFull extends Disposition {}

/**
 * The session's queue of pending prompts is full: the prompt was not accepted.
 *
 * @category admission
 * @since 0.1.0
 */
export class QueueFull extends TaggedError("QueueFull")<{
  readonly capacity: number
}> {
  static {
    fixDisposition(this, false, true, false)
  }
  override get message() {
    return `the session's queue is full (${this.capacity} prompts)`
  }
}

// The disposition flags of SessionUnavailable, set once on its prototype.
export interface SessionUnavailable extends Disposition {}

/**
 * The session can no longer take requests (closed, failed or retired). Nothing was written: the host may use
 * another session or another path.
 *
 * @category admission
 * @since 0.1.0
 */
export class SessionUnavailable extends TaggedError("SessionUnavailable")<{
  readonly status: string
  readonly reason: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `the session is ${this.status}: ${this.reason}`
  }
}

// The disposition flags of InvalidPrompt, set once on its prototype.
export interface InvalidPrompt extends Disposition {}

/**
 * The prompt could not be encoded as a valid frame (for example a content block that is not JSON). Nothing was
 * written: Tether never writes a line the CLI cannot parse.
 *
 * @category admission
 * @since 0.1.0
 */
export class InvalidPrompt extends TaggedError("InvalidPrompt")<{
  readonly reason: string
}> {
  static {
    fixDisposition(this, true, false, false)
  }
  override get message() {
    return `the prompt is not a valid frame: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Delivery and turn outcome. `acknowledged` says whether the CLI confirmed receipt of the prompt: before the
// acknowledgement, delivery is uncertain and the session is retired.
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of TransportWriteError, set once on its prototype.
export interface TransportWriteError extends Disposition {}

/**
 * Writing to the CLI's stdin failed (the pipe closed).
 *
 * @category delivery
 * @since 0.1.0
 */
export class TransportWriteError extends TaggedError("TransportWriteError")<{
  readonly reason: string
}> {
  static {
    fixDisposition(this, false, false, true)
  }
  override get message() {
    return `write to the CLI failed: ${this.reason}`
  }
}

// The disposition flags of DeliveryTimeout, set once on its prototype.
export interface DeliveryTimeout extends Disposition {}

/**
 * Writing a frame to the CLI's stdin did not finish within the delivery timeout. The CLI may have read part or
 * all of it: delivery is uncertain and the session is retired.
 *
 * @category delivery
 * @since 0.1.0
 */
export class DeliveryTimeout extends TaggedError("DeliveryTimeout")<{
  readonly timeoutMillis: number
}> {
  static {
    fixDisposition(this, false, false, true)
  }
  override get message() {
    return `writing to the CLI did not finish within ${this.timeoutMillis} ms`
  }
}

// The disposition flags of CliExited, set once on its prototype (delivery is uncertain unless acknowledged).
export interface CliExited extends Disposition {}

/**
 * The CLI process exited while a turn (or request) was in flight. Before the acknowledgement, delivery is
 * uncertain. The session is failed, never reused. `cause` is `out-of-memory` when the kernel's OOM killer ended the
 * CLI because its session reached its memory limit (the transport's `limits`): a retry in the same session box gets
 * the same limit.
 *
 * @category delivery
 * @since 0.1.0
 */
export class CliExited extends TaggedError("CliExited")<{
  readonly exit: string
  readonly code: number | null
  readonly signal: string | null
  readonly stderrTail: string
  readonly acknowledged: boolean
  readonly cause?: "out-of-memory" | undefined
}> {
  static {
    uncertainUnlessAcknowledged(this)
  }
  override get message() {
    const tail = this.stderrTail.length > 0 ? `: ${this.stderrTail}` : ""
    return `the CLI exited (${this.exit})${tail}`
  }
}

/**
 * Why a turn was interrupted. Its schema is `TetherErrorSchema.InterruptReason`.
 *
 * @category delivery
 * @since 0.1.0
 */
export type InterruptReason = "host" | "stall" | "turn-timeout" | "permission" | "evicted" | "closed"

/**
 * The turn ended because it was interrupted (by the host, by the stall watchdog, by the turn deadline, by a
 * deny-and-interrupt permission decision, by eviction, or because the session was closed under it).
 *
 * - `written: false`: the prompt was still queued in the session and never reached the CLI (safe to requeue).
 * - `written: true, acknowledged: false`: the CLI may or may not have the prompt: delivery is uncertain and the
 *   session was retired.
 * - `acknowledged: true`: the CLI had the prompt and stopped working on it.
 *
 * @category delivery
 * @since 0.1.0
 */
export class TurnInterrupted extends TaggedError("TurnInterrupted")<{
  readonly turnId: string
  readonly reason: InterruptReason
  readonly acknowledged: boolean
  readonly written: boolean
}> {
  get safeToFallback() {
    return !this.written
  }
  get safeToRequeue() {
    return !this.written
  }
  get deliveryUncertain() {
    return this.written && !this.acknowledged
  }
  override get message() {
    return `turn ${this.turnId} was interrupted (${this.reason})`
  }
}

// The disposition flags of SessionRetired, set once on its prototype (delivery is uncertain unless acknowledged).
export interface SessionRetired extends Disposition {}

/**
 * The session was retired while the turn ran (a control request went unanswered, the host retired it, a reader
 * failure, the CLI closed its stdout but did not exit): the process tree is torn down. Before the acknowledgement,
 * delivery is uncertain.
 *
 * @category delivery
 * @since 0.1.0
 */
export class SessionRetired extends TaggedError("SessionRetired")<{
  readonly reason: string
  readonly acknowledged: boolean
}> {
  static {
    uncertainUnlessAcknowledged(this)
  }
  override get message() {
    return `the session was retired: ${this.reason}`
  }
}

// The disposition flags of InterruptTimeout, set once on its prototype (delivery is uncertain unless acknowledged).
export interface InterruptTimeout extends Disposition {}

/**
 * The CLI did not end the turn within the interrupt timeout after an interrupt. The session was retired and
 * its process tree torn down.
 *
 * @category delivery
 * @since 0.1.0
 */
export class InterruptTimeout extends TaggedError("InterruptTimeout")<{
  readonly turnId: string
  readonly reason: InterruptReason
  readonly timeoutMillis: number
  readonly acknowledged: boolean
}> {
  static {
    uncertainUnlessAcknowledged(this)
  }
  override get message() {
    return `turn ${this.turnId} did not settle within ${this.timeoutMillis} ms of its interrupt (${this.reason}); the session was retired`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Controls
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of ControlTimeout, set once on its prototype.
export interface ControlTimeout extends Disposition {}

/**
 * A control request was not answered within the control timeout. The CLI may or may not have applied it, so the
 * session is retired.
 *
 * @category controls
 * @since 0.1.0
 */
export class ControlTimeout extends TaggedError("ControlTimeout")<{
  readonly subtype: string
  readonly timeoutMillis: number
}> {
  static {
    fixDisposition(this, false, false, true)
  }
  override get message() {
    return `control request ${this.subtype} was not answered within ${this.timeoutMillis} ms; the session was retired`
  }
}

// The disposition flags of ControlFailed, set once on its prototype.
export interface ControlFailed extends Disposition {}

/**
 * The CLI answered a control request with an error: nothing was applied.
 *
 * @category controls
 * @since 0.1.0
 */
export class ControlFailed extends TaggedError("ControlFailed")<{
  readonly subtype: string
  readonly reason: string
  readonly code: string | null
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `control request ${this.subtype} failed: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Protocol
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of ProtocolError, set once on its prototype.
export interface ProtocolError extends Disposition {}

/**
 * A line from the CLI could not be decoded: not JSON, too long, or a known frame type with a malformed body.
 * During a session this is reported as a `ProtocolError` event and the session goes on; it fails an operation
 * only when the operation's own answer is malformed.
 *
 * @category protocol
 * @since 0.1.0
 */
export class ProtocolError extends TaggedError("ProtocolError")<{
  readonly reason: "not-json" | "too-long" | "malformed"
  readonly detail: string
  /** The first characters of the offending line. */
  readonly linePrefix: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `protocol error (${this.reason}): ${this.detail}`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------------------

// The disposition flags of InvalidConfig, set once on its prototype.
export interface InvalidConfig extends Disposition {}

/**
 * A configuration was rejected when it was built (for example a nested timeout longer than its parent).
 *
 * @category configuration
 * @since 0.1.0
 */
export class InvalidConfig extends TaggedError("InvalidConfig")<{
  readonly problems: ReadonlyArray<string>
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `invalid configuration: ${this.problems.join("; ")}`
  }
}

/**
 * Reads the disposition of any Tether error.
 *
 * @category models
 * @since 0.1.0
 */
export const disposition = (error: Disposition): Disposition => ({
  safeToFallback: error.safeToFallback,
  safeToRequeue: error.safeToRequeue,
  deliveryUncertain: error.deliveryUncertain
})

/**
 * True for any value carrying a Tether disposition.
 *
 * @category guards
 * @since 0.1.0
 */
export const hasDisposition = (u: unknown): u is Disposition =>
  Predicate.hasProperty(u, "safeToFallback") && Predicate.hasProperty(u, "safeToRequeue") &&
  Predicate.hasProperty(u, "deliveryUncertain")
