/**
 * The part of Codex's app-server codec that needs no schema: the id and message types, the envelope decoder of a
 * server line ({@link decodeLine}), the encoders of what the client (or a simulated server) writes, and the approval
 * decisions. `CodexProtocol` exports these with the schemas; the protocol machine uses them from here, so that a
 * Codex session does not load `effect/Schema` (its params are checked by runtime.ts).
 *
 * @internal
 */
import { detached, detachedPrefix } from "@tether/core/codec/Detached"
import { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"

/**
 * A JSON-RPC id: the client's are integers it counts; the server's are integers of its own.
 *
 * @category envelopes
 * @since 0.1.0
 */
export type Id = number | string

/**
 * A message from the server, classified by its shape.
 *
 * @category envelopes
 * @since 0.1.0
 */
export type Message =
  | {
    readonly _tag: "Request"
    readonly id: Id
    readonly method: string
    readonly params: unknown
    readonly raw: object
  }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown; readonly raw: object }
  | { readonly _tag: "Response"; readonly id: Id; readonly result: unknown; readonly raw: object }
  | {
    readonly _tag: "ErrorResponse"
    readonly id: Id | null
    readonly error: { readonly code: number; readonly message: string; readonly data?: unknown }
    readonly raw: object
  }

const isId = (u: unknown): u is Id => typeof u === "string" || (typeof u === "number" && Number.isFinite(u))

/**
 * The error of params (or a result) that do not fit their schema: `detail` is the method, then what is wrong. The
 * same for `CodexProtocol.decodeParams` and the session's decoders.
 *
 * @internal
 */
export const paramsError = (method: string, message: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail: `${method}: ${message}`, linePrefix: "" })

const malformed = (line: string, detail: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail, linePrefix: detachedPrefix(line, 200) })

/**
 * Decodes one stdout line into a {@link Message}. A line that is not JSON, not an object, or fits no message shape
 * is a `ProtocolError`.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeLine = (line: string): Result.Result<Message, ProtocolError> => {
  const decoded = decodeLineOrError(line)
  return decoded._tag === "ProtocolError" ? Result.fail(decoded) : Result.succeed(decoded)
}

/**
 * {@link decodeLine} without the `Result`: the message, or its `ProtocolError` (told apart by `_tag`). What a
 * session's protocol machine runs on every stdout line.
 */
export const decodeLineOrError = (line: string): Message | ProtocolError => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return new ProtocolError({
      reason: "not-json",
      // The parser's message quotes the line, as a slice of it on some V8 versions (Node 20's): a copy.
      detail: detached(error instanceof Error ? error.message : String(error)),
      linePrefix: detachedPrefix(line, 200)
    })
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return malformed(line, "not a JSON object")
  const message = json as { readonly [key: string]: unknown }
  const method = message["method"]
  if (typeof method === "string") {
    if ("id" in message) {
      return isId(message["id"])
        ? ({ _tag: "Request", id: message["id"], method, params: message["params"], raw: message })
        : malformed(line, "a request whose id is not a number or a string")
    }
    return { _tag: "Notification", method, params: message["params"], raw: message }
  }
  if ("result" in message) {
    return isId(message["id"])
      ? ({ _tag: "Response", id: message["id"], result: message["result"], raw: message })
      : malformed(line, "a response whose id is not a number or a string")
  }
  const error = message["error"]
  if (typeof error === "object" && error !== null) {
    const { code, message: text } = error as { readonly code?: unknown; readonly message?: unknown }
    if (typeof code !== "number" || typeof text !== "string") return malformed(line, "an error without code or message")
    const id = message["id"]
    return {
      _tag: "ErrorResponse",
      id: isId(id) ? id : null,
      error: error as { readonly code: number; readonly message: string },
      raw: message
    }
  }
  return malformed(line, "neither a request, a notification nor a response")
}

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
