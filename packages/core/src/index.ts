/**
 * @since 0.1.0
 */
export * as TetherError from "./TetherError.ts"

/**
 * @since 0.1.0
 */
export * as Transport from "./Transport.ts"
