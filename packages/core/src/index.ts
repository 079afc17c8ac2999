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
export * as Timeouts from "./Timeouts.ts"

/**
 * @since 0.1.0
 */
export * as Permission from "./Permission.ts"

/**
 * @since 0.1.0
 */
export * as SessionEvent from "./SessionEvent.ts"

/**
 * @since 0.1.0
 */
export * as Turn from "./Turn.ts"

/**
 * @since 0.1.0
 */
export * as Session from "./Session.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeSession from "./claude/ClaudeSession.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeProtocol from "./claude/ClaudeProtocol.ts"

/**
 * @since 0.3.0
 */
export * as ClaudeWire from "./claude/ClaudeWire.ts"

/**
 * @since 0.3.0
 */
export * as ClaudeMcp from "./claude/ClaudeMcp.ts"

/**
 * @since 0.3.0
 */
export * as ClaudeHooks from "./claude/ClaudeHooks.ts"

/**
 * @since 0.3.0
 */
export * as ClaudePermission from "./claude/ClaudePermission.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeOptions from "./claude/ClaudeOptions.ts"

/**
 * @since 0.1.0
 */
export * as SessionRegistry from "./SessionRegistry.ts"

/**
 * @since 0.2.0
 */
export * as ClaudeRegistry from "./claude/ClaudeRegistry.ts"

/**
 * @since 0.2.0
 */
export * as Provider from "./Provider.ts"

/**
 * @since 0.2.0
 */
export * as CodexSession from "./codex/CodexSession.ts"

/**
 * @since 0.2.0
 */
export * as CodexProtocol from "./codex/CodexProtocol.ts"

/**
 * @since 0.2.0
 */
export * as CodexOptions from "./codex/CodexOptions.ts"
