/**
 * Claude's own turn errors: the CLI's limits, which the neutral session has no word for.
 *
 * @internal
 */
import * as Schema from "effect/Schema"
import { fixDisposition } from "../../internal/disposition.ts"
import type * as TetherError from "../../TetherError.ts"

// The disposition flags of MaxTurnsExceeded, set once on its prototype.
export interface MaxTurnsExceeded extends TetherError.Disposition {}

/**
 * The turn stopped because it reached the maximum number of model round trips (`maxTurns`). The conversation can
 * be resumed with `sessionId`.
 *
 * @category errors
 * @since 0.1.0
 */
export class MaxTurnsExceeded extends Schema.TaggedError<MaxTurnsExceeded>()("MaxTurnsExceeded", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
}) {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} reached its maximum number of model turns`
  }
}

// The disposition flags of BudgetExceeded, set once on its prototype.
export interface BudgetExceeded extends TetherError.Disposition {}

/**
 * The turn stopped because it reached the spending budget (`maxBudgetUsd`). The conversation can be resumed with
 * `sessionId`.
 *
 * @category errors
 * @since 0.1.0
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  totalCostUsd: Schema.NullOr(Schema.Finite)
}) {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} reached its budget`
  }
}
