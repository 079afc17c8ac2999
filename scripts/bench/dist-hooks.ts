/**
 * Resolves `@tether/core`, `@tether/claude`, `@tether/codex`, `@tether/acp`, `@tether/transport-node` and
 * `@tether/testing` (and their subpaths) to the built packages' `dist/` (the files their published `exports` name),
 * where the workspace's own `exports` point at the TypeScript sources. Loaded with `node --import` by the cold-host
 * and module-import figures of bench.ts, from a type-stripped copy, so what is measured is what an installed package
 * loads. `pnpm build` makes `dist/`.
 */
import * as Fs from "node:fs"
import { registerHooks } from "node:module"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const packages = Path.resolve(import.meta.dirname, "../../packages")

registerHooks({
  resolve: (specifier, context, next) => {
    const match = /^@tether\/(core|claude|codex|acp|transport-node|testing)(?:\/(.+))?$/.exec(specifier)
    if (match === null) return next(specifier, context)
    const file = Path.join(packages, match[1]!, "dist", `${match[2] ?? "index"}.js`)
    if (!Fs.existsSync(file)) throw new Error(`${specifier}: ${file} is missing; run pnpm build`)
    return { url: pathToFileURL(file).href, format: "module", shortCircuit: true }
  }
})
