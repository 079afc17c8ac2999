/**
 * The codec of OpenAI Codex's `codex app-server` protocol: JSON-RPC 2.0 over JSONL stdio, as the real binary speaks
 * it (0.171; see docs/protocol/codex-app-server.md).
 *
 * One JSON object per line, without the `"jsonrpc":"2.0"` field. Four kinds of message: a request (`method`, `id`,
 * `params`), a notification (`method`, `params`), a response (`id`, `result`) and an error response (`id`,
 * `error`). Both sides send requests, and **the server's request ids are their own integer space**: a line with
 * `method` and `id` is a request to the client, a line with `id` and `result`/`error` is a response to it.
 *
 * The schemas check the fields Tether reads and keep every other field (the protocol is experimental and grows
 * per release): `params` schemas are open structs, decoded only for the methods Tether acts on.
 *
 * @since 0.2.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { detached } from "../internal/detached.ts"
import { ProtocolError } from "../TetherError.ts"

const UnknownRest = Schema.Record(Schema.String, Schema.Unknown)

const open = <const Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.StructWithRest(Schema.Struct(fields), [UnknownRest])

/**
 * A JSON-RPC id: the client's are integers it counts; the server's are integers of its own.
 *
 * @category envelopes
 * @since 0.2.0
 */
export const Id = Schema.Union([Schema.Finite, Schema.String])

/**
 * @category envelopes
 * @since 0.2.0
 */
export type Id = typeof Id.Type

/**
 * A message from the server, classified by its shape.
 *
 * @category envelopes
 * @since 0.2.0
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

const malformed = (line: string, detail: string): Result.Result<never, ProtocolError> =>
  Result.fail(new ProtocolError({ reason: "malformed", detail, linePrefix: detached(line.slice(0, 200)) }))

/**
 * Decodes one stdout line into a {@link Message}. A line that is not JSON, not an object, or fits no message shape
 * is a `ProtocolError`.
 *
 * @category decoding
 * @since 0.2.0
 */
export const decodeLine = (line: string): Result.Result<Message, ProtocolError> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(
      new ProtocolError({
        reason: "not-json",
        detail: error instanceof Error ? error.message : String(error),
        linePrefix: detached(line.slice(0, 200))
      })
    )
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return malformed(line, "not a JSON object")
  const message = json as { readonly [key: string]: unknown }
  const method = message["method"]
  if (typeof method === "string") {
    if ("id" in message) {
      return isId(message["id"])
        ? Result.succeed({ _tag: "Request", id: message["id"], method, params: message["params"], raw: message })
        : malformed(line, "a request whose id is not a number or a string")
    }
    return Result.succeed({ _tag: "Notification", method, params: message["params"], raw: message })
  }
  if ("result" in message) {
    return isId(message["id"])
      ? Result.succeed({ _tag: "Response", id: message["id"], result: message["result"], raw: message })
      : malformed(line, "a response whose id is not a number or a string")
  }
  const error = message["error"]
  if (typeof error === "object" && error !== null) {
    const { code, message: text } = error as { readonly code?: unknown; readonly message?: unknown }
    if (typeof code !== "number" || typeof text !== "string") return malformed(line, "an error without code or message")
    const id = message["id"]
    return Result.succeed({
      _tag: "ErrorResponse",
      id: isId(id) ? id : null,
      error: error as { readonly code: number; readonly message: string },
      raw: message
    })
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
 * @since 0.2.0
 */
export const encodeRequest = (id: Id, method: string, params: unknown): string =>
  JSON.stringify(params === undefined ? { method, id } : { method, id, params })

/**
 * A client notification line (`initialized`).
 *
 * @category encoding
 * @since 0.2.0
 */
export const encodeNotification = (method: string, params?: unknown): string =>
  JSON.stringify(params === undefined ? { method } : { method, params })

/**
 * A response to a server request.
 *
 * @category encoding
 * @since 0.2.0
 */
export const encodeResponse = (id: Id, result: unknown): string => JSON.stringify({ id, result })

/**
 * An error response to a server request.
 *
 * @category encoding
 * @since 0.2.0
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
 * @since 0.3.0
 */
export const encodeServerNotification = (method: string, params: unknown, emittedAtMs: number): string =>
  JSON.stringify({ method, params, emittedAtMs })

// ---------------------------------------------------------------------------------------------------------------
// What Tether reads
// ---------------------------------------------------------------------------------------------------------------

/**
 * A thread as `thread/start`, `thread/resume` and `thread/started` describe it.
 *
 * @category threads
 * @since 0.2.0
 */
export const Thread = open({ id: Schema.String })

/**
 * @category threads
 * @since 0.2.0
 */
export type Thread = typeof Thread.Type

/**
 * The result of `thread/start` and `thread/resume`.
 *
 * @category threads
 * @since 0.2.0
 */
export const ThreadResult = open({
  thread: Thread,
  model: Schema.optionalKey(Schema.String),
  sandbox: Schema.optionalKey(open({ type: Schema.String }))
})

/**
 * @category threads
 * @since 0.2.0
 */
export type ThreadResult = typeof ThreadResult.Type

/**
 * A turn as `turn/start`'s result and `turn/started` / `turn/completed` describe it.
 *
 * @category turns
 * @since 0.2.0
 */
export const Turn = open({
  id: Schema.String,
  status: Schema.optionalKey(Schema.String),
  error: Schema.optionalKey(Schema.NullOr(open({
    message: Schema.String,
    codexErrorInfo: Schema.optionalKey(Schema.Unknown)
  }))),
  durationMs: Schema.optionalKey(Schema.NullOr(Schema.Finite))
})

/**
 * @category turns
 * @since 0.2.0
 */
export type Turn = typeof Turn.Type

/**
 * The result of `turn/start`: the turn the server created (its id is the server's).
 *
 * @category turns
 * @since 0.2.0
 */
export const TurnStartResult = open({ turn: Turn })

/**
 * The params of `turn/started` and `turn/completed`.
 *
 * @category turns
 * @since 0.2.0
 */
export const TurnNotification = open({ threadId: Schema.optionalKey(Schema.String), turn: Turn })

/**
 * @category turns
 * @since 0.2.0
 */
export type TurnNotification = typeof TurnNotification.Type

/**
 * An item of a turn (`item/started`, `item/completed`): an agent message, a command execution, a file change, a
 * user message, reasoning, … Only `type` and `id` are required; the other fields are read where present.
 *
 * @category items
 * @since 0.2.0
 */
export const Item = open({
  type: Schema.String,
  id: Schema.String,
  text: Schema.optionalKey(Schema.String),
  command: Schema.optionalKey(Schema.String),
  cwd: Schema.optionalKey(Schema.NullOr(Schema.String)),
  status: Schema.optionalKey(Schema.String),
  aggregatedOutput: Schema.optionalKey(Schema.NullOr(Schema.String)),
  exitCode: Schema.optionalKey(Schema.NullOr(Schema.Finite)),
  changes: Schema.optionalKey(Schema.Array(Schema.Unknown))
})

/**
 * @category items
 * @since 0.2.0
 */
export type Item = typeof Item.Type

/**
 * The params of `item/started` and `item/completed`.
 *
 * @category items
 * @since 0.2.0
 */
export const ItemNotification = open({
  item: Item,
  threadId: Schema.optionalKey(Schema.String),
  turnId: Schema.optionalKey(Schema.String)
})

/**
 * The params of `item/agentMessage/delta`.
 *
 * @category items
 * @since 0.2.0
 */
export const AgentMessageDelta = open({
  delta: Schema.String,
  itemId: Schema.optionalKey(Schema.String),
  turnId: Schema.optionalKey(Schema.String)
})

/**
 * Token counts as `thread/tokenUsage/updated` reports them.
 *
 * @category usage
 * @since 0.2.0
 */
export const TokenCounts = open({
  inputTokens: Schema.optionalKey(Schema.Finite),
  cachedInputTokens: Schema.optionalKey(Schema.Finite),
  cacheWriteInputTokens: Schema.optionalKey(Schema.Finite),
  outputTokens: Schema.optionalKey(Schema.Finite),
  reasoningOutputTokens: Schema.optionalKey(Schema.Finite),
  totalTokens: Schema.optionalKey(Schema.Finite)
})

/**
 * @category usage
 * @since 0.2.0
 */
export type TokenCounts = typeof TokenCounts.Type

/**
 * The params of `thread/tokenUsage/updated`: `last` is the latest model request, `total` the thread's sum.
 *
 * @category usage
 * @since 0.2.0
 */
export const TokenUsageUpdated = open({
  turnId: Schema.optionalKey(Schema.String),
  tokenUsage: open({ last: Schema.optionalKey(TokenCounts), total: Schema.optionalKey(TokenCounts) })
})

/**
 * The params of the `error` notification. `willRetry: true` is not terminal: the server retries the model request.
 *
 * @category errors
 * @since 0.2.0
 */
export const ErrorNotification = open({
  error: open({ message: Schema.String, codexErrorInfo: Schema.optionalKey(Schema.Unknown) }),
  willRetry: Schema.optionalKey(Schema.Boolean),
  turnId: Schema.optionalKey(Schema.String)
})

/**
 * The params of `item/commandExecution/requestApproval`.
 *
 * @category approvals
 * @since 0.2.0
 */
export const CommandApprovalParams = open({
  turnId: Schema.optionalKey(Schema.String),
  itemId: Schema.optionalKey(Schema.String),
  command: Schema.optionalKey(Schema.NullOr(Schema.String)),
  cwd: Schema.optionalKey(Schema.NullOr(Schema.String)),
  reason: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category approvals
 * @since 0.2.0
 */
export type CommandApprovalParams = typeof CommandApprovalParams.Type

/**
 * The params of `item/fileChange/requestApproval`.
 *
 * @category approvals
 * @since 0.2.0
 */
export const FileChangeApprovalParams = open({
  turnId: Schema.optionalKey(Schema.String),
  itemId: Schema.optionalKey(Schema.String),
  reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
  grantRoot: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category approvals
 * @since 0.2.0
 */
export type FileChangeApprovalParams = typeof FileChangeApprovalParams.Type

/**
 * The params of `serverRequest/resolved`: the server considers its request answered (by the client, or withdrawn
 * when the turn ended).
 *
 * @category approvals
 * @since 0.2.0
 */
export const ServerRequestResolved = open({ requestId: Id })

/**
 * An approval decision: `accept`, `acceptForSession`, `decline` (the model is told and goes on), `cancel` (the turn
 * is interrupted), or an amendment object.
 *
 * @category approvals
 * @since 0.2.0
 */
export type ApprovalDecision = "accept" | "acceptForSession" | "decline" | "cancel" | {
  readonly [key: string]: unknown
}

/**
 * Decodes params with a schema: the value, or a `ProtocolError` that names the method.
 *
 * @category decoding
 * @since 0.2.0
 */
export const decodeParams = <S extends Schema.Codec<unknown, unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (method: string, params: unknown): Result.Result<S["Type"], ProtocolError> => {
    const decoded = decode(params)
    return Result.isSuccess(decoded)
      ? Result.succeed(decoded.success)
      : Result.fail(
        new ProtocolError({
          reason: "malformed",
          detail: `${method}: ${decoded.failure.message}`,
          linePrefix: ""
        })
      )
  }
}
