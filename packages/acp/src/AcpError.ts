/**
 * The ACP provider's own turn errors. `AcpSession` re-exports them (`AcpSession.TurnRefused`); this module is where
 * they are declared, so that the declarations of other packages can name them.
 *
 * @since 0.1.0
 */
import { fixDisposition, TaggedError } from "@tether/core/TetherError"
import type * as TetherError from "@tether/core/TetherError"

// The disposition flags of TurnLimitReached, set once on its prototype.
export interface TurnLimitReached extends TetherError.Disposition {}

/**
 * The agent stopped the turn at a limit (`stopReason` `max_tokens`: the model's output limit; `max_turn_requests`:
 * the agent's limit of model requests in one turn). The turn ran (its work may have side effects), so it is neither
 * safe to requeue nor uncertain; the session goes on, and `text` is what the agent said before it stopped.
 *
 * @category errors
 * @since 0.1.0
 */
export class TurnLimitReached extends TaggedError("TurnLimitReached")<{
  readonly turnId: string
  readonly sessionId: string | null
  readonly limit: "max_tokens" | "max_turn_requests"
  readonly text: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `the agent stopped turn ${this.turnId} at its limit (${this.limit})`
  }
}

// The disposition flags of TurnRefused, set once on its prototype.
export interface TurnRefused extends TetherError.Disposition {}

/**
 * The agent refused to go on with the turn (`stopReason` `refusal`). Sending the same prompt again would be refused
 * again: not safe to requeue; the session goes on.
 *
 * @category errors
 * @since 0.1.0
 */
export class TurnRefused extends TaggedError("TurnRefused")<{
  readonly turnId: string
  readonly sessionId: string | null
  readonly text: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `the agent refused to continue turn ${this.turnId}`
  }
}
