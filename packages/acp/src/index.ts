/**
 * @since 0.1.0
 */
export * as AcpSession from "./AcpSession.ts"

/**
 * @since 0.1.0
 */
export * as AcpAgent from "./AcpAgent.ts"

/**
 * @since 0.1.0
 */
export * as AcpClient from "./AcpClient.ts"

/**
 * @since 0.1.0
 */
export * as AcpProtocol from "./AcpProtocol.ts"
