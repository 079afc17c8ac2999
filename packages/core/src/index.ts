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
export * as SessionRegistry from "./SessionRegistry.ts"

/**
 * @since 0.1.0
 */
export * as Provider from "./Provider.ts"

/**
 * @since 0.1.0
 */
export * as DormantStore from "./DormantStore.ts"
