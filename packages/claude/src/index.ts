/**
 * @since 0.1.0
 */
export * as ClaudeSession from "./ClaudeSession.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeProtocol from "./ClaudeProtocol.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeWire from "./ClaudeWire.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeMcp from "./ClaudeMcp.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeHooks from "./ClaudeHooks.ts"

/**
 * @since 0.1.0
 */
export * as ClaudePermission from "./ClaudePermission.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeOptions from "./ClaudeOptions.ts"

/**
 * @since 0.1.0
 */
export * as ClaudeRegistry from "./ClaudeRegistry.ts"
