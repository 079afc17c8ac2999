/**
 * @since 0.1.0
 */
export * as TetherError from "./TetherError.ts"

/**
 * @since 0.1.0
 */
export * as Transport from "./Transport.ts"

/**
 * @since 0.1.0
 */
export * as EventLog from "./EventLog.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeProtocol from "./claude/ClaudeProtocol.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeOptions from "./claude/ClaudeOptions.ts"
