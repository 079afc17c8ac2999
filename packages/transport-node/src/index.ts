/**
 * @since 0.1.0
 */
export * as Executable from "./Executable.ts"

/**
 * @since 0.1.0
 */
export * as Framing from "./Framing.ts"

/**
 * @since 0.1.0
 */
export * as NodeTransport from "./NodeTransport.ts"

/**
 * @since 0.1.0
 */
export * as ShellPolicy from "./ShellPolicy.ts"
