/**
 * The schema side of the ACP params decoder's failure path: what Effect's decoder says of params a generated guard
 * refused. The runtime decoder (runtime.ts) loads this module, and with it `effect/Schema` and the generated schemas,
 * with a synchronous `require` the first time a guard refuses params; a session that only ever reads valid params
 * never loads it.
 *
 * @internal
 */
import type * as Explainer from "@tether/core/codec/Explainer"
import * as ExplainSchemas from "@tether/core/codec/ExplainSchemas"
import type * as Schema from "effect/Schema"
import * as Schemas from "./schemas.generated.ts"

/**
 * The name of a generated schema.
 *
 * @category models
 * @since 0.1.0
 */
export type SchemaName = {
  readonly [K in keyof typeof Schemas]: (typeof Schemas)[K] extends Schema.Top ? K : never
}[keyof typeof Schemas]

/**
 * Decodes a value with the named schema's decoder (built once per schema).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decode: (schema: string, input: unknown) => Explainer.Decoded = ExplainSchemas.decoder(
  Schemas,
  "AcpProtocol"
)
