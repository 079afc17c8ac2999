/**
 * The schema side of the Codex params decoder's failure path: what Effect's decoder says of params a generated guard
 * refused. The runtime decoder (runtime.ts) loads this module, and with it `effect/Schema` and CodexProtocol's
 * schemas, with a synchronous `require` the first time a guard refuses params; a session that only ever reads valid
 * params never loads it.
 *
 * @internal
 */
import type * as Explainer from "@tether/core/codec/Explainer"
import * as ExplainSchemas from "@tether/core/codec/ExplainSchemas"
import type * as Schema from "effect/Schema"
import * as CodexProtocol from "../../CodexProtocol.ts"

/**
 * The name of a schema of the codec: its export from CodexProtocol.ts.
 *
 * @category models
 * @since 0.1.0
 */
export type SchemaName = {
  readonly [K in keyof typeof CodexProtocol]: (typeof CodexProtocol)[K] extends Schema.Top ? K : never
}[keyof typeof CodexProtocol]

/**
 * What Effect's decoder made of a value: its decoded value, or the message of its issue.
 *
 * @category models
 * @since 0.1.0
 */
export type Decoded = Explainer.Decoded

/**
 * Decodes a value with the named schema's decoder (built once per schema), as `CodexProtocol.decodeParams` does: the
 * message is what a `ProtocolError`'s detail says after the method.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decode: (schema: string, input: unknown) => Decoded = ExplainSchemas.decoder(
  CodexProtocol,
  "CodexProtocol"
)
