/**
 * A schema for each of the ACP provider's own error classes (`AcpSession.TurnLimitReached`, `AcpSession.TurnRefused`),
 * as `@tether/core/TetherErrorSchema` has one for each neutral error: for hosts that send errors to another process or
 * store them.
 *
 * This module loads `effect/Schema`, so the package's index does not re-export it: import it by its path.
 *
 * @since 0.1.0
 */
import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
import * as Schema from "effect/Schema"
import * as AcpErrors from "./AcpError.ts"

/**
 * The schema of `AcpSession.TurnLimitReached`.
 *
 * @category AcpSession
 * @since 0.1.0
 */
export const TurnLimitReached = TetherErrorSchema.make(AcpErrors.TurnLimitReached, "TurnLimitReached", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  limit: Schema.Literals(["max_tokens", "max_turn_requests"]),
  text: Schema.String
})

/**
 * The schema of `AcpSession.TurnRefused`.
 *
 * @category AcpSession
 * @since 0.1.0
 */
export const TurnRefused = TetherErrorSchema.make(AcpErrors.TurnRefused, "TurnRefused", {
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  text: Schema.String
})
