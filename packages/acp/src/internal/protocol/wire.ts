/**
 * The part of the ACP codec that needs no schema: the JSON-RPC 2.0 envelope of a line (one JSON object per line on
 * the agent's stdout), the encoders of what a client (or a simulated agent) writes. `AcpProtocol` exports these with
 * the generated schemas; the protocol machine uses them from here, so that a session does not load `effect/Schema`
 * (the params it reads are checked by the generated guards, runtime.ts).
 *
 * @internal
 */
import type { Id } from "@tether/core/codec/JsonRpc"

// The envelope is JSON-RPC's, shared with the other JSON-RPC providers.
export { decodeLine, decodeLineOrError, type Id, type Message, paramsError } from "@tether/core/codec/JsonRpc"

/**
 * A request line.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeRequest = (id: Id, method: string, params: unknown): string =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params })

/**
 * A notification line (`session/cancel`, `session/update`).
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeNotification = (method: string, params: unknown): string =>
  JSON.stringify({ jsonrpc: "2.0", method, params })

/**
 * A response to a request of the other side.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeResponse = (id: Id, result: unknown): string => JSON.stringify({ jsonrpc: "2.0", id, result })

/**
 * An error response to a request of the other side.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeErrorResponse = (id: Id, code: number, message: string): string =>
  JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })

/**
 * JSON-RPC error codes Tether answers with: `-32601` for a method it does not serve, `-32602` for params that do
 * not fit, `-32603` for a request the host refused or whose handler failed, `-32002` for a file that is not there,
 * `-32800` for a request withdrawn because the prompt it belonged to ended (or that the agent cancelled).
 *
 * @category encoding
 * @since 0.1.0
 */
export const errorCodes = {
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  resourceNotFound: -32002,
  requestCancelled: -32800
} as const
