/**
 * The codec of the Agent Client Protocol (ACP v1): JSON-RPC 2.0 over the agent's stdio, one JSON object per line.
 *
 * The schemas are generated from the JSON Schema the protocol publishes (`@agentclientprotocol/sdk`'s
 * `schema/v1/schema.json`) by `pnpm codegen` (scripts/codegen/acp.ts says how), not written by hand: every message
 * Tether reads or writes, each an open object (unknown fields are kept). A session checks what the agent sends with
 * guards generated from these schemas and loads `effect/Schema` only to word why it refused a message; importing this
 * module loads the schemas themselves. The envelope decoder ({@link decodeLine}) and the encoders need no schema.
 *
 * @since 0.1.0
 */
import type { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Wire from "./internal/protocol/wire.ts"

export * from "./internal/protocol/schemas.generated.ts"

export {
  decodeLine,
  encodeErrorResponse,
  encodeNotification,
  encodeRequest,
  encodeResponse,
  errorCodes,
  type Id,
  type Message
} from "./internal/protocol/wire.ts"

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
