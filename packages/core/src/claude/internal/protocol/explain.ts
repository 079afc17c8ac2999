/**
 * The schema side of the Claude codec's failure path: what Effect's decoder says of a value a generated guard
 * refused. The runtime codec (runtime.ts) loads this module, and with it `effect/Schema` and the frame schemas, with
 * a synchronous `require` the first time a guard refuses a frame or a payload; a session that only ever reads valid
 * frames never loads it.
 *
 * @internal
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as CliFrames from "./cliFrames.ts"
import * as Controls from "./controls.ts"
import * as HostFrames from "./hostFrames.ts"

const modules = { ...CliFrames, ...Controls, ...HostFrames }

/**
 * The name of a schema of the codec: its export from cliFrames.ts, controls.ts or hostFrames.ts.
 *
 * @category models
 * @since 0.3.0
 */
export type SchemaName = {
  readonly [K in keyof typeof modules]: (typeof modules)[K] extends Schema.Top ? K : never
}[keyof typeof modules]

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
    const value: unknown = Object.hasOwn(modules, schema) ? modules[schema as SchemaName] : undefined
    // A defect: the generated guards name a schema the modules no longer export (`pnpm codegen` was not run).
    if (!Schema.isSchema(value)) throw new Error(`ClaudeProtocol: no schema is exported as ${schema}`)
    decoder = Schema.decodeUnknownResult(value as Schema.Codec<unknown, unknown>)
    decoders.set(schema, decoder)
  }
  return decoder
}

/**
 * Decodes a value with the named schema's decoder (built once per schema): the message is the `ProtocolError`
 * detail a session reports for a frame it refuses.
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
