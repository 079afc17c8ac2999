export * as MockAnthropic from "./MockAnthropic.ts"

/**
 * @since 0.1.0
 */
export * as FakeClaude from "./FakeClaude.ts"
