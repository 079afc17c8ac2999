/**
 * What bench.ts's figures on the built packages need: the packages built (`pnpm build`'s `tsc -b`), and type-stripped
 * copies of the bench's own files under .bench/cold/, so that a cold process pays for neither stripping types nor
 * loading the stripper (about 18 MB of RSS and tens of milliseconds on Node 24), whichever host it runs.
 *
 * In the copies, `./x.ts` imports become `./x.js`, and imports of a package's sources
 * (`../../../packages/core/src/index.ts`) become its name (`@tether/core`), which dist-hooks.ts resolves to `dist/`.
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import { stripTypeScriptTypes } from "node:module"
import * as Path from "node:path"
import { root } from "./fake.ts"

/** The packages whose `dist/` the figures load. */
export const packages: ReadonlyArray<string> = ["core", "claude", "codex", "acp", "transport-node", "testing"]

/** Builds the packages as `pnpm build` does (incremental: quick when nothing changed); rejects if tsc fails. */
export const build = (): Promise<void> =>
  new Promise((resolve, reject) => {
    const tsc = Path.join(root, "node_modules/typescript/bin/tsc")
    const configs = packages.map((name) => `packages/${name}/tsconfig.build.json`)
    const child = spawn(process.execPath, [tsc, "-b", ...configs], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.on("error", reject)
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`building the packages failed (exit ${code}):\n${output.trim()}`)))
  })

/** The packages whose `dist/index.js` is missing. */
export const missingDist = (): ReadonlyArray<string> =>
  packages.filter((name) => !Fs.existsSync(Path.join(root, "packages", name, "dist/index.js")))

const rewrite = (js: string): string =>
  js
    .replace(
      /(["'])(?:\.\.\/)+packages\/([\w-]+)\/src\/([\w/-]+)\.ts\1/g,
      (_, quote: string, name: string, file: string) =>
        `${quote}@tether/${name}${file === "index" ? "" : `/${file}`}${quote}`
    )
    .replace(/(["'])(\.\.?\/[\w./-]+)\.ts\1/g, (_, quote: string, file: string) => `${quote}${file}.js${quote}`)

/** Where the copies are: `cold` (the cold-host entry) and `hooks` (dist-hooks, for `node --import`). */
export interface Copies {
  readonly cold: string
  readonly hooks: string
}

/** Writes the type-stripped copies of scripts/bench's fake, host, cold and dist-hooks modules and of hosts/ to `dir`. */
export const prepare = (dir: string): Copies => {
  const from = Path.join(root, "scripts/bench")
  Fs.rmSync(dir, { recursive: true, force: true })
  const files = [
    "fake.ts",
    "host.ts",
    "cold.ts",
    "dist-hooks.ts",
    ...Fs.readdirSync(Path.join(from, "hosts")).filter((f) => f.endsWith(".ts")).map((f) => `hosts/${f}`)
  ]
  for (const file of files) {
    const js = rewrite(stripTypeScriptTypes(Fs.readFileSync(Path.join(from, file), "utf8"), { mode: "strip" }))
    const to = Path.join(dir, file.replace(/\.ts$/, ".js"))
    Fs.mkdirSync(Path.dirname(to), { recursive: true })
    Fs.writeFileSync(to, js)
  }
  return { cold: Path.join(dir, "cold.js"), hooks: Path.join(dir, "dist-hooks.js") }
}
