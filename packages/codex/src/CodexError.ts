/**
 * Codex's own turn errors. `CodexSession` re-exports them (`CodexSession.TurnRejected`); this module is where they are
 * declared, so that the declarations of other packages (`@tether/cluster`'s, which carry them) can name them.
 *
 * @since 0.1.0
 */
import { fixDisposition, TaggedError } from "@tether/core/TetherError"
import type * as TetherError from "@tether/core/TetherError"

// The disposition flags of TurnRejected, set once on its prototype.
export interface TurnRejected extends TetherError.Disposition {}

/**
 * The server refused to start the turn (`turn/start` answered with a JSON-RPC error, e.g. `-32001` "retry later"
 * under overload): the prompt never ran, so sending it again cannot duplicate work.
 *
 * @category errors
 * @since 0.1.0
 */
export class TurnRejected extends TaggedError("TurnRejected")<{
  readonly turnId: string
  readonly code: number
  readonly reason: string
}> {
  static {
    fixDisposition(this, false, true, false)
  }
  override get message() {
    return `the server refused to start turn ${this.turnId} (${this.code}): ${this.reason}`
  }
}
