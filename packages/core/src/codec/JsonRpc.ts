/**
 * The JSON-RPC envelope of a line, for the providers whose CLI speaks JSON-RPC one object per line (Codex's
 * `app-server`, ACP agents): the id and message types and the decoder of a line into a request, a notification, a
 * response or an error response. Each provider keeps its own encoders (the members its CLI expects) and checks the
 * params with its own schemas or generated guards; this module loads no `effect/Schema`.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import { ProtocolError } from "../TetherError.ts"
import { detached, detachedPrefix } from "./Detached.ts"

/**
 * A JSON-RPC id: a client's are integers it counts; the other side's requests carry ids of their own.
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
 * @category errors
 * @since 0.1.0
 */
export const paramsError = (method: string, message: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail: `${method}: ${message}`, linePrefix: "" })

const malformed = (line: string, detail: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail, linePrefix: detachedPrefix(line, 200) })

/**
 * Decodes one line into a {@link Message}. A line that is not JSON, not an object, or fits no message shape is a
 * `ProtocolError`. The `"jsonrpc": "2.0"` member is not required (ACP agents write it, `codex app-server` does not).
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
