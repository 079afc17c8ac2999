/**
 * A schema for each of Codex's own error classes (`CodexSession.TurnRejected`), as `@tether/core/TetherErrorSchema`
 * has one for each neutral error: for hosts that send errors to another process or store them (`@tether/cluster`
 * does both).
 *
 * This module loads `effect/Schema`, so the package's index does not re-export it: import it by its path.
 *
 * @since 0.1.0
 */
import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
import * as Schema from "effect/Schema"
import * as CodexErrors from "./CodexError.ts"

/**
 * The schema of `CodexSession.TurnRejected`.
 *
 * @category CodexSession
 * @since 0.1.0
 */
export const TurnRejected = TetherErrorSchema.make(CodexErrors.TurnRejected, "TurnRejected", {
  turnId: Schema.String,
  code: Schema.Finite,
  reason: Schema.String
})
