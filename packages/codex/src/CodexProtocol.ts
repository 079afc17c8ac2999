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
 * A session checks the params it decodes with guards generated from these schemas (`pnpm codegen`), which give
 * `Schema.is`'s answer, and loads `effect/Schema` only to word why it refused params, with the message
 * {@link decodeParams} gives; importing this module loads the schemas themselves. The envelope decoder
 * ({@link decodeLine}) and the encoders need no schema. What a session reads from accepted params (the thread of its
 * `Ready` info, a file change's `changes`) is the server's own JSON value, deep-equal to what {@link decodeParams}
 * returns, with its keys in the server's order (the decoder's copy puts the declared fields first) and shared with
 * the event's `raw` frame: treat both as read-only.
 *
 * @since 0.1.0
 */
import type { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Wire from "./internal/protocol/wire.ts"

const UnknownRest = Schema.Record(Schema.String, Schema.Unknown)

const open = <const Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.StructWithRest(Schema.Struct(fields), [UnknownRest])

/**
 * A JSON-RPC id: the client's are integers it counts; the server's are integers of its own.
 *
 * @category envelopes
 * @since 0.1.0
 */
export const Id = Schema.Union([Schema.Finite, Schema.String])

/**
 * @category envelopes
 * @since 0.1.0
 */
export type Id = typeof Id.Type

export {
  type ApprovalDecision,
  decodeLine,
  encodeErrorResponse,
  encodeNotification,
  encodeRequest,
  encodeResponse,
  encodeServerNotification,
  type Message
} from "./internal/protocol/wire.ts"

// ---------------------------------------------------------------------------------------------------------------
// What Tether reads
// ---------------------------------------------------------------------------------------------------------------

/**
 * A thread as `thread/start`, `thread/resume` and `thread/started` describe it.
 *
 * @category threads
 * @since 0.1.0
 */
export const Thread = open({ id: Schema.String })

/**
 * @category threads
 * @since 0.1.0
 */
export type Thread = typeof Thread.Type

/**
 * The result of `thread/start` and `thread/resume`.
 *
 * @category threads
 * @since 0.1.0
 */
export const ThreadResult = open({
  thread: Thread,
  model: Schema.optionalKey(Schema.String),
  sandbox: Schema.optionalKey(open({ type: Schema.String }))
})

/**
 * @category threads
 * @since 0.1.0
 */
export type ThreadResult = typeof ThreadResult.Type

/**
 * A turn as `turn/start`'s result and `turn/started` / `turn/completed` describe it.
 *
 * @category turns
 * @since 0.1.0
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
 * @since 0.1.0
 */
export type Turn = typeof Turn.Type

/**
 * The result of `turn/start`: the turn the server created (its id is the server's).
 *
 * @category turns
 * @since 0.1.0
 */
export const TurnStartResult = open({ turn: Turn })

/**
 * The params of `turn/started` and `turn/completed`.
 *
 * @category turns
 * @since 0.1.0
 */
export const TurnNotification = open({ threadId: Schema.optionalKey(Schema.String), turn: Turn })

/**
 * @category turns
 * @since 0.1.0
 */
export type TurnNotification = typeof TurnNotification.Type

/**
 * An item of a turn (`item/started`, `item/completed`): an agent message, a command execution, a file change, a
 * user message, reasoning, … Only `type` and `id` are required; the other fields are read where present.
 *
 * @category items
 * @since 0.1.0
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
 * @since 0.1.0
 */
export type Item = typeof Item.Type

/**
 * The params of `item/started` and `item/completed`.
 *
 * @category items
 * @since 0.1.0
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
 * @since 0.1.0
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
 * @since 0.1.0
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
 * @since 0.1.0
 */
export type TokenCounts = typeof TokenCounts.Type

/**
 * The params of `thread/tokenUsage/updated`: `last` is the latest model request, `total` the thread's sum.
 *
 * @category usage
 * @since 0.1.0
 */
export const TokenUsageUpdated = open({
  turnId: Schema.optionalKey(Schema.String),
  tokenUsage: open({ last: Schema.optionalKey(TokenCounts), total: Schema.optionalKey(TokenCounts) })
})

/**
 * The params of the `error` notification. `willRetry: true` is not terminal: the server retries the model request.
 *
 * @category errors
 * @since 0.1.0
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
 * @since 0.1.0
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
 * @since 0.1.0
 */
export type CommandApprovalParams = typeof CommandApprovalParams.Type

/**
 * The params of `item/fileChange/requestApproval`.
 *
 * @category approvals
 * @since 0.1.0
 */
export const FileChangeApprovalParams = open({
  turnId: Schema.optionalKey(Schema.String),
  itemId: Schema.optionalKey(Schema.String),
  reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
  grantRoot: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/**
 * @category approvals
 * @since 0.1.0
 */
export type FileChangeApprovalParams = typeof FileChangeApprovalParams.Type

/**
 * The params of `serverRequest/resolved`: the server considers its request answered (by the client, or withdrawn
 * when the turn ended).
 *
 * @category approvals
 * @since 0.1.0
 */
export const ServerRequestResolved = open({ requestId: Id })

/**
 * Decodes params with a schema: the value, or a `ProtocolError` that names the method.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeParams = <S extends Schema.Codec<unknown, unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (method: string, params: unknown): Result.Result<S["Type"], ProtocolError> => {
    const decoded = decode(params)
    return Result.isSuccess(decoded)
      ? Result.succeed(decoded.success)
      : Result.fail(Wire.paramsError(method, decoded.failure.message))
  }
}
