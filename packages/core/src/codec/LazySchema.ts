/**
 * `effect/Schema`, loaded when a host's own schemas are read (a session's `outputSchema`, its MCP tools' inputs)
 * rather than when a session's modules load: a host that passes a schema has loaded the module already, and one
 * that passes none never pays for it (about 80 modules with `effect/SchemaAST` and the parsers).
 *
 * Core never imports Node, so the module is loaded with a dynamic `import()`, from an effect; once loaded, it is
 * kept, so that later sessions read their schemas without waiting for a promise.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"

/** @since 0.1.0 */
export type SchemaModule = typeof Schema

let loaded: SchemaModule | undefined

/** @since 0.1.0 */
export const load: Effect.Effect<SchemaModule> = Effect.suspend(() =>
  loaded !== undefined
    ? Effect.succeed(loaded)
    : Effect.map(Effect.promise(() => import("effect/Schema")), (module) => (loaded = module))
)
