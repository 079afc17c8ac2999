/**
 * A schema for each of Claude's own error classes (`ClaudeSession.MaxTurnsExceeded` and the rest), as
 * `@tether/core/TetherErrorSchema` has one for each neutral error: for hosts that send errors to another process or
 * store them (`@tether/cluster` does both).
 *
 * This module loads `effect/Schema`, so the package's index does not re-export it: import it by its path.
 *
 * @example
 * ```ts
 * import { ClaudeSession } from "@tether/claude"
 * import * as ClaudeErrorSchema from "@tether/claude/ClaudeErrorSchema"
 * import { Schema } from "effect"
 *
 * const error = new ClaudeSession.MaxTurnsExceeded({ turnId: "t1", sessionId: null })
 * const encoded = Schema.encodeSync(ClaudeErrorSchema.MaxTurnsExceeded)(error)
 * // { _tag: "MaxTurnsExceeded", turnId: "t1", sessionId: null }
 * ```
 *
 * @since 0.1.0
 */
import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
import * as Schema from "effect/Schema"
import * as ClaudeErrors from "./ClaudeError.ts"

/**
 * The schema of `ClaudeSession.MaxTurnsExceeded`.
 *
 * @category ClaudeSession
 * @since 0.1.0
 */
export const MaxTurnsExceeded = TetherErrorSchema.make(ClaudeErrors.MaxTurnsExceeded, "MaxTurnsExceeded", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
})

/**
 * The schema of `ClaudeSession.BudgetExceeded`.
 *
 * @category ClaudeSession
 * @since 0.1.0
 */
export const BudgetExceeded = TetherErrorSchema.make(ClaudeErrors.BudgetExceeded, "BudgetExceeded", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  totalCostUsd: Schema.NullOr(Schema.Finite)
})

/**
 * The schema of `ClaudeSession.StructuredOutputMissing`. `raw` is carried as it is: it must be JSON data to be sent
 * as JSON.
 *
 * @category ClaudeSession
 * @since 0.1.0
 */
export const StructuredOutputMissing = TetherErrorSchema.make(
  ClaudeErrors.StructuredOutputMissing,
  "StructuredOutputMissing",
  {
    turnId: Schema.String,
    raw: Schema.Unknown
  }
)

/**
 * The schema of `ClaudeSession.StructuredOutputInvalid`. `value` and `raw` are carried as they are: they must be
 * JSON data to be sent as JSON.
 *
 * @category ClaudeSession
 * @since 0.1.0
 */
export const StructuredOutputInvalid = TetherErrorSchema.make(
  ClaudeErrors.StructuredOutputInvalid,
  "StructuredOutputInvalid",
  {
    turnId: Schema.String,
    reason: Schema.String,
    value: Schema.Unknown,
    raw: Schema.Unknown
  }
)

/**
 * The schema of `ClaudeSession.StructuredOutputRetriesExhausted`. `raw` is carried as it is: it must be JSON data
 * to be sent as JSON.
 *
 * @category ClaudeSession
 * @since 0.1.0
 */
export const StructuredOutputRetriesExhausted = TetherErrorSchema.make(
  ClaudeErrors.StructuredOutputRetriesExhausted,
  "StructuredOutputRetriesExhausted",
  { turnId: Schema.String, errors: Schema.Array(Schema.String), raw: Schema.Unknown }
)
