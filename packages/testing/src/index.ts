/**
 * @since 0.1.0
 */
export * as MockAnthropic from "./MockAnthropic.ts"

/**
 * @since 0.1.0
 */
export * as FakeClaude from "./FakeClaude.ts"

/**
 * @since 0.1.0
 */
export * as FakeCodex from "./FakeCodex.ts"

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
export * as MockCodex from "./MockCodex.ts"

/**
 * @since 0.1.0
 */
export * as MockOpenAI from "./MockOpenAI.ts"

/**
 * @since 0.1.0
 */
export * as MockGemini from "./MockGemini.ts"

/**
 * @since 0.1.0
 */
export * as MockAcp from "./MockAcp.ts"

/**
 * @since 0.1.0
 */
export * as FakeAcp from "./FakeAcp.ts"

/**
 * @since 0.1.0
 */
export * as Simulator from "./Simulator.ts"

/**
 * @since 0.1.0
 */
export * as HostTest from "./HostTest.ts"

/**
 * @since 0.1.0
 */
export * as PinnedClaude from "./PinnedClaude.ts"

/**
 * @since 0.1.0
 */
export * as PinnedAcp from "./PinnedAcp.ts"

/**
 * @since 0.1.0
 */
export * as Postgres from "./Postgres.ts"
