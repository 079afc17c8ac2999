/**
 * Claude's own turn errors: the CLI's limits, which the neutral session has no word for. `ClaudeSession` re-exports
 * them (`ClaudeSession.MaxTurnsExceeded`); this module is where they are declared, so that the declarations of other
 * packages (`@tether/cluster`'s, which carry them) can name them.
 *
 * @since 0.1.0
 */
import { fixDisposition, TaggedError } from "@tether/core/TetherError"
import type * as TetherError from "@tether/core/TetherError"

// The disposition flags of MaxTurnsExceeded, set once on its prototype.
export interface MaxTurnsExceeded extends TetherError.Disposition {}

/**
 * The turn stopped because it reached the maximum number of model round trips (`maxTurns`). The conversation can
 * be resumed with `sessionId`.
 *
 * @category errors
 * @since 0.1.0
 */
export class MaxTurnsExceeded extends TaggedError("MaxTurnsExceeded")<{
  readonly turnId: string
  readonly sessionId: string | null
}> {
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
export class BudgetExceeded extends TaggedError("BudgetExceeded")<{
  readonly turnId: string
  readonly sessionId: string | null
  readonly totalCostUsd: number | null
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} reached its budget`
  }
}

// The disposition flags of StructuredOutputMissing, set once on its prototype.
export interface StructuredOutputMissing extends TetherError.Disposition {}

/**
 * The session asked for structured output (`outputSchema`) and the turn succeeded without one: the model answered
 * in text instead of calling the `StructuredOutput` tool. `raw` is the result frame (its `result` holds the text).
 *
 * @category errors
 * @since 0.1.0
 */
export class StructuredOutputMissing extends TaggedError("StructuredOutputMissing")<{
  readonly turnId: string
  readonly raw: unknown
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} ended without structured output`
  }
}

// The disposition flags of StructuredOutputInvalid, set once on its prototype.
export interface StructuredOutputInvalid extends TetherError.Disposition {}

/**
 * The turn's structured output does not decode with the session's `outputSchema` (the CLI checked it against the
 * JSON Schema derived from it, which is looser than the Schema's own checks). `value` is the output as the CLI sent
 * it, `raw` the result frame.
 *
 * @category errors
 * @since 0.1.0
 */
export class StructuredOutputInvalid extends TaggedError("StructuredOutputInvalid")<{
  readonly turnId: string
  readonly reason: string
  readonly value: unknown
  readonly raw: unknown
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `the structured output of turn ${this.turnId} does not decode: ${this.reason}`
  }
}

// The disposition flags of StructuredOutputRetriesExhausted, set once on its prototype.
export interface StructuredOutputRetriesExhausted extends TetherError.Disposition {}

/**
 * The model failed to produce output that matches the JSON Schema, as often as the CLI allows (5 attempts;
 * `error_max_structured_output_retries`). `errors` are the CLI's messages (the last validation error included).
 *
 * @category errors
 * @since 0.1.0
 */
export class StructuredOutputRetriesExhausted extends TaggedError("StructuredOutputRetriesExhausted")<{
  readonly turnId: string
  readonly errors: ReadonlyArray<string>
  readonly raw: unknown
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `turn ${this.turnId} gave up on structured output${
      this.errors.length > 0 ? `: ${this.errors.join("; ")}` : ""
    }`
  }
}
