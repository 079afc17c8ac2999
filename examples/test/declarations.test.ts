/**
 * The declarations `pnpm check` emits for the examples and the READMEs' blocks (build/, made before the tests run):
 * what a consumer's own declaration files would say of Tether's types. They must name Tether's types through public
 * modules only. A type that is an alias of an internal one is emitted as the internal module's
 * (`import("@tether/codex/internal/machine").TurnResult`), which the packages' exports refuse: a consumer's
 * declarations would not resolve.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const build = Path.resolve(import.meta.dirname, "..", "build")

const declarations = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? declarations(path) : entry.name.endsWith(".d.ts") ? [path] : []
  })

describe("the examples' declarations", () => {
  it("name Tether's types through public modules only", () => {
    assert.isTrue(Fs.existsSync(build), `${build} is missing: pnpm check emits it`)
    const files = declarations(build)
    // chat-server.ts's inferred types name both providers' results: the witness that the scan sees such types.
    const witness = files.find((file) => file.endsWith(Path.join("src", "chat-server.d.ts")))
    assert.isDefined(witness)
    assert.include(Fs.readFileSync(witness!, "utf8"), "CodexSession.TurnResult")
    const internal: Array<string> = []
    for (const file of files) {
      const text = Fs.readFileSync(file, "utf8")
      // A package's internal modules, by package path or by a path into a package's files.
      for (const match of text.matchAll(/["']((?:@tether\/|[^"']*\/packages\/)[^"']*\/internal\/[^"']*)["']/g)) {
        internal.push(`${Path.relative(build, file)}: ${match[1]}`)
      }
    }
    assert.deepStrictEqual(internal, [])
  })
})
