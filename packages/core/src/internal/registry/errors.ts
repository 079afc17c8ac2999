/**
 * The session registry's errors, in a leaf module: the registry's implementation builds them without importing the
 * public \`SessionRegistry\` module, which re-exports them (and delegates to the implementation).
 *
 * @internal
 */
import type * as TetherError from "../../TetherError.ts"
import { fixDisposition } from "../disposition.ts"
import { TaggedError } from "../taggedError.ts"

// The disposition flags of SessionConflict, set once on its prototype.
export interface SessionConflict extends TetherError.Disposition {}

/**
 * The id has a live session started with a different configuration. Nothing was started and nothing was sent:
 * the request can be requeued (for example once the live session is evicted), or sent with `onConflict:
 * "replace"`.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionConflict extends TaggedError("SessionConflict")<{
  readonly id: string
  readonly generation: number
  readonly liveFingerprint: string
  readonly requestedFingerprint: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `session ${this.id} (generation ${this.generation}) is live with a different configuration`
  }
}

// The disposition flags of CapacityExceeded, set once on its prototype.
export interface CapacityExceeded extends TetherError.Disposition {}

/**
 * The registry is at capacity and no session could be evicted (every one is pinned or running a turn), or a
 * slot did not free up within the admission timeout. Nothing was started: requeue later.
 *
 * @category errors
 * @since 0.1.0
 */
export class CapacityExceeded extends TaggedError("CapacityExceeded")<{
  readonly id: string
  readonly capacity: number
  readonly waitedMillis: number
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `no room for session ${this.id}: all ${this.capacity} sessions are pinned or busy` +
      (this.waitedMillis > 0 ? ` (waited ${this.waitedMillis} ms)` : "")
  }
}

// The disposition flags of GenerationChanged, set once on its prototype.
export interface GenerationChanged extends TetherError.Disposition {}

/**
 * A handle (or a call that named a generation) refers to an incarnation of the id that is gone. Nothing was sent
 * to the session that replaced it, if any (`current` is its generation, `null` when the id has none).
 *
 * @category errors
 * @since 0.1.0
 */
export class GenerationChanged extends TaggedError("GenerationChanged")<{
  readonly id: string
  readonly expected: number
  readonly current: number | null
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `session ${this.id} is no longer generation ${this.expected}` +
      (this.current === null ? " (it has no live session)" : ` (it is generation ${this.current})`)
  }
}

// The disposition flags of SessionNotFound, set once on its prototype.
export interface SessionNotFound extends TetherError.Disposition {}

/**
 * No session is registered under the id. Nothing was sent.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionNotFound extends TaggedError("SessionNotFound")<{
  readonly id: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `no session ${this.id}`
  }
}

// The disposition flags of RegistryClosed, set once on its prototype.
export interface RegistryClosed extends TetherError.Disposition {}

/**
 * The registry is shutting down (its layer is being released). Nothing was started or sent.
 *
 * @category errors
 * @since 0.1.0
 */
export class RegistryClosed extends TaggedError("RegistryClosed") {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return "the session registry is closed"
  }
}

// The disposition flags of DormantNotFound, set once on its prototype.
export interface DormantNotFound extends TetherError.Disposition {}

/**
 * The id has no dormant conversation (none was kept, it was deleted, or it is live). Nothing was started or sent;
 * asking again will not find one.
 *
 * @category errors
 * @since 0.1.0
 */
export class DormantNotFound extends TaggedError("DormantNotFound")<{
  readonly id: string
}> {
  static {
    fixDisposition(this, true, false, false)
  }
  override get message() {
    return `no dormant conversation ${this.id}`
  }
}

// The disposition flags of DormantStateCorrupt, set once on its prototype.
export interface DormantStateCorrupt extends TetherError.Disposition {}

/**
 * The dormant conversation's state cannot be read (a record that does not decode, a missing directory). Nothing was
 * started or sent; waking it again will fail the same way: delete it, or start a new conversation.
 *
 * @category errors
 * @since 0.1.0
 */
export class DormantStateCorrupt extends TaggedError("DormantStateCorrupt")<{
  readonly id: string
  readonly reason: string
}> {
  static {
    fixDisposition(this, true, false, false)
  }
  override get message() {
    return `the dormant state of conversation ${this.id} cannot be read: ${this.reason}`
  }
}

// The disposition flags of RestoreFailed, set once on its prototype.
export interface RestoreFailed extends TetherError.Disposition {}

/**
 * The CLI did not resume the dormant conversation (it failed to start, or refused the conversation). Nothing was
 * sent; the conversation stays dormant, and waking it again may work (`cause` is the start's error).
 *
 * @category errors
 * @since 0.1.0
 */
export class RestoreFailed extends TaggedError("RestoreFailed")<{
  readonly id: string
  readonly reason: string
  readonly cause: unknown
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `the dormant conversation ${this.id} could not be resumed: ${this.reason}`
  }
}

// The disposition flags of DormantStoreFailed, set once on its prototype.
export interface DormantStoreFailed extends TetherError.Disposition {}

/**
 * The dormant store could not be read or written (a full or read-only disk, a lost database). Nothing was started
 * or sent; the operation may work later.
 *
 * @category errors
 * @since 0.1.0
 */
export class DormantStoreFailed extends TaggedError("DormantStoreFailed")<{
  readonly operation: string
  readonly reason: string
}> {
  static {
    fixDisposition(this, true, true, false)
  }
  override get message() {
    return `the dormant store failed to ${this.operation}: ${this.reason}`
  }
}
