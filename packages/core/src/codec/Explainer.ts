/**
 * The failure path of a codec that checks its values with generated guards (Claude's frames, Codex's params): when a
 * guard refuses a value, what Effect's decoder says of it, from the codec's `explain` module, which loads
 * `effect/Schema` and the codec's schemas. That module is loaded with a synchronous `require`, once, the first time a
 * guard refuses a value: Node (≥ 22.12) requires an ES module synchronously, and decoding is synchronous. Where
 * `require` is not available (a runtime without `process.getBuiltinModule`, a bundle without the module), the message
 * names the schema instead; the answer (refused) is the same.
 *
 * @since 0.1.0
 */

/**
 * What Effect's decoder made of a value: its decoded value, or the message of its issue.
 *
 * Plain data, not a `Result`: under a test runner that loads modules itself, the explain module (required by Node)
 * and its caller may hold two copies of `effect`, and only plain data means the same to both.
 *
 * @since 0.1.0
 */
export type Decoded =
  | { readonly _tag: "Success"; readonly value: unknown }
  | { readonly _tag: "Failure"; readonly message: string }

/**
 * What Effect's decoder says of `input` by the schema named `schema`, from the module `explain.ts` (from the sources)
 * or `explain.js` (from the build) beside the module whose URL is `moduleUrl`, required on the first call.
 *
 * @since 0.1.0
 */
export const lazy = (moduleUrl: string): (schema: string, input: unknown) => Decoded => {
  let explainer: { readonly decode: (schema: string, input: unknown) => Decoded } | null | undefined
  const load = () => {
    if (explainer !== undefined) return explainer
    explainer = null
    try {
      const require = globalThis.process?.getBuiltinModule?.("node:module")?.createRequire(moduleUrl)
      // The sibling of the module as it is run: explain.ts from the sources, explain.js from the build.
      const extension = /\.[cm]?[jt]s$/.exec(new URL(moduleUrl).pathname)?.[0] ?? ".js"
      if (require !== undefined) explainer = require(`./explain${extension}`) as typeof explainer
    } catch {
      // Left as null: the message names the schema instead.
    }
    return explainer
  }
  return (schema, input) =>
    load()?.decode(schema, input) ??
      { _tag: "Failure", message: `Expected a value of the schema ${schema} (effect/Schema could not be loaded)` }
}
