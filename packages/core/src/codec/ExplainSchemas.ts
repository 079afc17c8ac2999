/**
 * The schema side of a codec's failure path (see `Explainer.ts`): decodes a value with the decoder of a schema named
 * by its export, as the codec's `explain` module does. It loads `effect/Schema`; only the explain modules import it.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Decoded } from "./Explainer.ts"

/**
 * A `decode(schema, input)` over the schemas `schemas` exports, each decoder built once. A name that is not a schema
 * there is a defect: the generated guards name a schema the codec no longer exports (`pnpm codegen` was not run).
 *
 * @since 0.1.0
 */
export const decoder = (schemas: object, codec: string): (schema: string, input: unknown) => Decoded => {
  const decoders = new Map<string, (input: unknown) => Result.Result<unknown, Schema.SchemaError>>()
  const decoderOf = (schema: string) => {
    let decode = decoders.get(schema)
    if (decode === undefined) {
      const value: unknown = Object.hasOwn(schemas, schema) ? (schemas as Record<string, unknown>)[schema] : undefined
      if (!Schema.isSchema(value)) throw new Error(`${codec}: no schema is exported as ${schema}`)
      decode = Schema.decodeUnknownResult(value as Schema.Codec<unknown, unknown>)
      decoders.set(schema, decode)
    }
    return decode
  }
  return (schema, input) => {
    const result = decoderOf(schema)(input)
    return Result.isSuccess(result)
      ? { _tag: "Success", value: result.success }
      : { _tag: "Failure", message: result.failure.message }
  }
}
