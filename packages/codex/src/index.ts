/**
 * @since 0.1.0
 */
export * as CodexSession from "./CodexSession.ts"

/**
 * @since 0.1.0
 */
export * as CodexProtocol from "./CodexProtocol.ts"

/**
 * @since 0.1.0
 */
export * as CodexOptions from "./CodexOptions.ts"
