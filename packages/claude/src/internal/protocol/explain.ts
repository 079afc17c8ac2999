/**
 * The schema side of the Claude codec's failure path: what Effect's decoder says of a value a generated guard
 * refused. The runtime codec (runtime.ts) loads this module, and with it `effect/Schema` and the frame schemas, with
 * a synchronous `require` the first time a guard refuses a frame or a payload; a session that only ever reads valid
 * frames never loads it.
 *
 * @internal
 */
import type * as Explainer from "@tether/core/codec/Explainer"
import * as ExplainSchemas from "@tether/core/codec/ExplainSchemas"
import type * as Schema from "effect/Schema"
import * as CliFrames from "./cliFrames.ts"
import * as Controls from "./controls.ts"
import * as HostFrames from "./hostFrames.ts"

const modules = { ...CliFrames, ...Controls, ...HostFrames }

/**
 * The name of a schema of the codec: its export from cliFrames.ts, controls.ts or hostFrames.ts.
 *
 * @category models
 * @since 0.1.0
 */
export type SchemaName = {
  readonly [K in keyof typeof modules]: (typeof modules)[K] extends Schema.Top ? K : never
}[keyof typeof modules]

/**
 * What Effect's decoder made of a value: its decoded value, or the message of its issue.
 *
 * @category models
 * @since 0.1.0
 */
export type Decoded = Explainer.Decoded

/**
 * Decodes a value with the named schema's decoder (built once per schema): the message is the `ProtocolError`
 * detail a session reports for a frame it refuses.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decode: (schema: string, input: unknown) => Decoded = ExplainSchemas.decoder(modules, "ClaudeProtocol")
