/**
 * The part of the ACP codec that needs no schema: the JSON-RPC 2.0 envelope of a line (one JSON object per line on
 * the agent's stdout), the encoders of what a client (or a simulated agent) writes. `AcpProtocol` exports these with
 * the generated schemas; the protocol machine uses them from here, so that a session does not load `effect/Schema`
 * (the params it reads are checked by the generated guards, runtime.ts).
 *
 * @internal
 */
import { detached, detachedPrefix } from "@tether/core/codec/Detached"
import { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"

/**
 * A JSON-RPC id: a client's are integers it counts; an agent's requests carry ids of their own.
 *
 * @category envelopes
 * @since 0.1.0
 */
export type Id = number | string

/**
 * A message, classified by its shape: a request (`method` and `id`), a notification (`method`), a response (`id` and
 * `result`) or an error response (`error`).
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
 * The error of params (or a result) that do not fit their schema: `detail` is the method, then what is wrong.
 *
 * @internal
 */
export const paramsError = (method: string, message: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail: `${method}: ${message}`, linePrefix: "" })

const malformed = (line: string, detail: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail, linePrefix: detachedPrefix(line, 200) })

/**
 * Decodes one line into a {@link Message}. A line that is not JSON, not an object, or fits no message shape is a
 * `ProtocolError`. The `"jsonrpc": "2.0"` member is not required (agents write it; a missing one costs nothing to
 * accept).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeLine = (line: string): Result.Result<Message, ProtocolError> => {
  const decoded = decodeLineOrError(line)
  return decoded._tag === "ProtocolError" ? Result.fail(decoded) : Result.succeed(decoded)
}

/** {@link decodeLine} without the `Result`: what a session's protocol machine runs on every stdout line. */
export const decodeLineOrError = (line: string): Message | ProtocolError => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return new ProtocolError({
      reason: "not-json",
      detail: detached(error instanceof Error ? error.message : String(error)),
      linePrefix: detachedPrefix(line, 200)
    })
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return malformed(line, "not a JSON object")
  const message = json as { readonly [key: string]: unknown }
  const method = message["method"]
  if (typeof method === "string") {
    if ("id" in message && message["id"] !== undefined) {
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
