/**
 * The schema side of the Codex params decoder's failure path: what Effect's decoder says of params a generated guard
 * refused. The runtime decoder (runtime.ts) loads this module, and with it `effect/Schema` and CodexProtocol's
 * schemas, with a synchronous `require` the first time a guard refuses params; a session that only ever reads valid
 * params never loads it.
 *
 * @internal
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as CodexProtocol from "../../CodexProtocol.ts"

/**
 * The name of a schema of the codec: its export from CodexProtocol.ts.
 *
 * @category models
 * @since 0.3.0
 */
export type SchemaName = {
  readonly [K in keyof typeof CodexProtocol]: (typeof CodexProtocol)[K] extends Schema.Top ? K : never
}[keyof typeof CodexProtocol]

/**
 * What Effect's decoder made of a value: its decoded value, or the message of its issue.
 *
 * Plain data, not a `Result`: under a test runner that loads modules itself, this module (required by Node) and its
 * caller may hold two copies of `effect`, and only plain data means the same to both.
 *
 * @category models
 * @since 0.3.0
 */
export type Decoded =
  | { readonly _tag: "Success"; readonly value: unknown }
  | { readonly _tag: "Failure"; readonly message: string }

const decoders = new Map<string, (input: unknown) => Result.Result<unknown, Schema.SchemaError>>()

const decoderOf = (schema: string): (input: unknown) => Result.Result<unknown, Schema.SchemaError> => {
  let decoder = decoders.get(schema)
  if (decoder === undefined) {
    const value: unknown = Object.hasOwn(CodexProtocol, schema) ? CodexProtocol[schema as SchemaName] : undefined
    // A defect: the generated guards name a schema CodexProtocol no longer exports (`pnpm codegen` was not run).
    if (!Schema.isSchema(value)) throw new Error(`CodexProtocol: no schema is exported as ${schema}`)
    decoder = Schema.decodeUnknownResult(value as Schema.Codec<unknown, unknown>)
    decoders.set(schema, decoder)
  }
  return decoder
}

/**
 * Decodes a value with the named schema's decoder (built once per schema), as `CodexProtocol.decodeParams` does: the
 * message is what a `ProtocolError`'s detail says after the method.
 *
 * @category decoding
 * @since 0.3.0
 */
export const decode = (schema: string, input: unknown): Decoded => {
  const result = decoderOf(schema)(input)
  return Result.isSuccess(result)
    ? { _tag: "Success", value: result.success }
    : { _tag: "Failure", message: result.failure.message }
}
