/**
 * The part of Codex's app-server codec that needs no schema: the id and message types, the envelope decoder of a
 * server line ({@link decodeLine}), the encoders of what the client (or a simulated server) writes, and the approval
 * decisions. `CodexProtocol` exports these with the schemas; the protocol machine uses them from here, so that a
 * Codex session does not load `effect/Schema` (its params are checked by runtime.ts).
 *
 * @internal
 */
import type { Id } from "@tether/core/codec/JsonRpc"

// The envelope is JSON-RPC's, shared with the other JSON-RPC providers.
export { decodeLine, decodeLineOrError, type Id, type Message, paramsError } from "@tether/core/codec/JsonRpc"

// ---------------------------------------------------------------------------------------------------------------
// Encoding: what the client writes
// ---------------------------------------------------------------------------------------------------------------

/**
 * A client request line.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeRequest = (id: Id, method: string, params: unknown): string =>
  JSON.stringify(params === undefined ? { method, id } : { method, id, params })

/**
 * A client notification line (`initialized`).
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeNotification = (method: string, params?: unknown): string =>
  JSON.stringify(params === undefined ? { method } : { method, params })

/**
 * A response to a server request.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeResponse = (id: Id, result: unknown): string => JSON.stringify({ id, result })

/**
 * An error response to a server request.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeErrorResponse = (id: Id, code: number, message: string): string =>
  JSON.stringify({ id, error: { code, message } })

/**
 * A server notification line, as `codex app-server` writes it: with `emittedAtMs`, the server's clock when it was
 * sent. Hosts never write one; simulators of the server (`@tether/testing`'s `MockCodex`) and tests do, so that what
 * they print and what the codec reads cannot drift. Server requests and responses have the client's shapes:
 * {@link encodeRequest}, {@link encodeResponse}, {@link encodeErrorResponse}.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeServerNotification = (method: string, params: unknown, emittedAtMs: number): string =>
  JSON.stringify({ method, params, emittedAtMs })

// ---------------------------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------------------------

/**
 * An approval decision: `accept`, `acceptForSession`, `decline` (the model is told and goes on), `cancel` (the turn
 * is interrupted), or an amendment object.
 *
 * @category approvals
 * @since 0.1.0
 */
export type ApprovalDecision = "accept" | "acceptForSession" | "decline" | "cancel" | {
  readonly [key: string]: unknown
}
