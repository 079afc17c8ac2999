/**
 * What a module loads when it is loaded, read from the sources (ClaudeCodecRuntime.test.ts, CodexCodecRuntime.test.ts):
 * its static imports but `import type`, as Node runs TypeScript, followed through the workspace's packages and into `effect`'s build.
 */
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Path from "node:path"
import * as Url from "node:url"

/** The workspace root. */
export const root = Url.fileURLToPath(new URL("../../../../", import.meta.url))

/** A workspace package's sources (`"core"`, `"claude"`, `"codex"`). */
export const src = (name: string): string => Path.join(root, "packages", name, "src")

/** The modules a session must not load: the schema machinery (and Config, which is built on it). */
export const isForbidden = (file: string): boolean =>
  /\/effect\/dist\/(Schema|SchemaAST|SchemaParser|Config)\.js$/.test(file) || /\/effect\/dist\/schema\//.test(file)

// An import or re-export at the start of a line, its clause made only of names, braces, commas and `*`: it cannot
// run into the code or the comments that follow (a JSDoc example's import starts with ` * `).
const staticImport =
  /^(?:import\s+(?:[\w$*{},\s]+?\s+from\s+)?|export\s+(?:\*(?:\s+as\s+[\w$]+)?|\{[\w$,\s]*\})\s+from\s+)["']([^"']+)["']/gm

/** The modules a module loads when it is loaded: its imports but `import type`, as Node runs TypeScript. */
export const importsOf = (file: string): ReadonlyArray<string> => {
  const text = Fs.readFileSync(file, "utf8")
  const code = file.endsWith(".ts") ? Module.stripTypeScriptTypes(text) : text
  return [...code.matchAll(staticImport)].flatMap(([, specifier]) => {
    if (specifier.startsWith("node:")) return []
    if (specifier.startsWith(".")) return [Path.resolve(Path.dirname(file), specifier)]
    // Resolved as Node resolves it from the importing module: a workspace package by its exports, effect's build.
    return [Module.createRequire(file).resolve(specifier)]
  })
}

/** Every module a set of entries loads, each with the module that first imported it (to show a path). */
export const walk = (entries: ReadonlyArray<string>) => {
  const parents = new Map<string, string | undefined>(entries.map((entry) => [entry, undefined]))
  const queue = [...entries]
  while (queue.length > 0) {
    const file = queue.shift()!
    if (isForbidden(file)) continue
    for (const imported of importsOf(file)) {
      if (!parents.has(imported)) {
        parents.set(imported, file)
        queue.push(imported)
      }
    }
  }
  const pathTo = (file: string): string => {
    const path: Array<string> = []
    for (let at: string | undefined = file; at !== undefined; at = parents.get(at)) {
      path.unshift(Path.relative(root, at))
    }
    return path.join(" → ")
  }
  return { loaded: [...parents.keys()], pathTo }
}
