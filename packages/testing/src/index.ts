export * as MockAnthropic from "./MockAnthropic.ts"

/**
 * @since 0.1.0
 */
export * as FakeClaude from "./FakeClaude.ts"

/**
 * @since 0.1.0
 */
export * as MockClaude from "./MockClaude.ts"

/**
 * @since 0.1.0
 */
export * as MockTransport from "./MockTransport.ts"

/**
 * @since 0.1.0
 */
export * as PinnedClaude from "./PinnedClaude.ts"
