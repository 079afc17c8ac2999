/**
 * The decoders of the params (and results) the Codex protocol machine reads, without `effect/Schema`: each checks its
 * value with a generated guard (guards.generated.ts, made from CodexProtocol's schemas by `pnpm codegen`), which gives
 * `Schema.is`'s answer, and answers as `CodexProtocol.decodeParams(schema)(method, params)` does, so that a Codex
 * session does not load the schemas.
 *
 * Where `effect/Schema` is loaded, and why: only when a guard refuses params. The `ProtocolError`'s detail is then the
 * method and the message of Effect's decoder for the schema, as before, which only Effect's decoder can word (and if
 * Effect's decoder accepted the params after all, its decoded value is the answer, as before).
 *
 * explain.ts (the schemas and Effect's decoder) is then loaded with a synchronous `require`, once: Node (≥ 22.12)
 * requires an ES module synchronously, and decoding is synchronous. Where `require` is not available (a runtime
 * without `process.getBuiltinModule`, a bundle without explain.js), the detail names the schema the params failed
 * instead of Effect's message; the answer (refused) is the same.
 *
 * @internal
 */
import * as Explainer from "@tether/core/codec/Explainer"
import type { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"
import type * as CodexProtocol from "../../CodexProtocol.ts"
import type * as Explain from "./explain.ts"
import * as Guards from "./guards.generated.ts"
import { paramsError } from "./wire.ts"

// ---------------------------------------------------------------------------------------------------------------
// The failure path: Effect's decoder, loaded when a guard refuses params
// ---------------------------------------------------------------------------------------------------------------

const explain: (schema: Explain.SchemaName, input: unknown) => Explainer.Decoded = Explainer.lazy(import.meta.url)

// ---------------------------------------------------------------------------------------------------------------
// The decoders
// ---------------------------------------------------------------------------------------------------------------

/**
 * A decoder of params, named by its method in an error: `CodexProtocol.decodeParams(schema)`'s signature.
 *
 * @category models
 * @since 0.1.0
 */
export type Decoder<A> = (method: string, params: unknown) => Result.Result<A, ProtocolError>

/** The type of a schema of the codec. */
type TypeOf<K extends Explain.SchemaName> = (typeof CodexProtocol)[K]["Type"]

/**
 * The decoder of a schema's params. The schemas are open objects without transformations (the generator refuses any
 * other), so params the guard accepts are their own decoded value: deep-equal to the copy Effect's decoder makes,
 * and with the keys in the order the server wrote them.
 */
const decoder =
  <K extends Explain.SchemaName>(schema: K, is: (u: unknown) => boolean): Decoder<TypeOf<K>> => (method, params) => {
    if (is(params)) return Result.succeed(params as TypeOf<K>)
    const decoded = explain(schema, params)
    return decoded._tag === "Success"
      ? Result.succeed(decoded.value as TypeOf<K>)
      : Result.fail(paramsError(method, decoded.message))
  }

/**
 * Decodes the result of `thread/start` and `thread/resume` (`CodexProtocol.ThreadResult`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeThreadResult: Decoder<CodexProtocol.ThreadResult> = decoder(
  "ThreadResult",
  Guards.isThreadResult
)

/**
 * Decodes the result of `turn/start` (`CodexProtocol.TurnStartResult`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeTurnStartResult: Decoder<typeof CodexProtocol.TurnStartResult.Type> = decoder(
  "TurnStartResult",
  Guards.isTurnStartResult
)

/**
 * Decodes the params of `turn/started` and `turn/completed` (`CodexProtocol.TurnNotification`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeTurnNotification: Decoder<CodexProtocol.TurnNotification> = decoder(
  "TurnNotification",
  Guards.isTurnNotification
)

/**
 * Decodes the params of `item/started` and `item/completed` (`CodexProtocol.ItemNotification`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeItemNotification: Decoder<typeof CodexProtocol.ItemNotification.Type> = decoder(
  "ItemNotification",
  Guards.isItemNotification
)

/**
 * Decodes the params of `item/agentMessage/delta` (`CodexProtocol.AgentMessageDelta`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeAgentMessageDelta: Decoder<typeof CodexProtocol.AgentMessageDelta.Type> = decoder(
  "AgentMessageDelta",
  Guards.isAgentMessageDelta
)

/**
 * Decodes the params of `thread/tokenUsage/updated` (`CodexProtocol.TokenUsageUpdated`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeTokenUsageUpdated: Decoder<typeof CodexProtocol.TokenUsageUpdated.Type> = decoder(
  "TokenUsageUpdated",
  Guards.isTokenUsageUpdated
)

/**
 * Decodes the params of the `error` notification (`CodexProtocol.ErrorNotification`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeErrorNotification: Decoder<typeof CodexProtocol.ErrorNotification.Type> = decoder(
  "ErrorNotification",
  Guards.isErrorNotification
)

/**
 * Decodes the params of `item/commandExecution/requestApproval` (`CodexProtocol.CommandApprovalParams`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeCommandApprovalParams: Decoder<CodexProtocol.CommandApprovalParams> = decoder(
  "CommandApprovalParams",
  Guards.isCommandApprovalParams
)

/**
 * Decodes the params of `item/fileChange/requestApproval` (`CodexProtocol.FileChangeApprovalParams`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeFileChangeApprovalParams: Decoder<CodexProtocol.FileChangeApprovalParams> = decoder(
  "FileChangeApprovalParams",
  Guards.isFileChangeApprovalParams
)

/**
 * Decodes the params of `serverRequest/resolved` (`CodexProtocol.ServerRequestResolved`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeServerRequestResolved: Decoder<typeof CodexProtocol.ServerRequestResolved.Type> = decoder(
  "ServerRequestResolved",
  Guards.isServerRequestResolved
)
