/**
 * No runtime import cycle in any package's sources: a module that loads another is never loaded back by it, however
 * far round, so no module depends on the order its cycle happens to load in. Back-edges that carry only types
 * (`import type`) are erased when Node runs the sources and do not count; `import { type X } from` does count (it
 * still loads the module). Errors and metrics that an implementation shares with its public module live in leaf
 * modules for this reason, as Effect keeps them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { importsOf, root } from "./support/ImportWalk.ts"

const packages = Path.join(root, "packages")

/** Every TypeScript module of every package's `src/`. */
const sources = (): ReadonlyArray<string> =>
  Fs.readdirSync(packages).flatMap((name) => {
    const src = Path.join(packages, name, "src")
    if (!Fs.existsSync(src)) return []
    return Fs.readdirSync(src, { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
      .map((file) => Path.join(src, file))
  })

/** The strongly connected components of more than one module (or a module importing itself), by Tarjan. */
const cycles = (graph: ReadonlyMap<string, ReadonlyArray<string>>): ReadonlyArray<ReadonlyArray<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<ReadonlyArray<string>> = []
  const visit = (node: string) => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!))
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component)
    }
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

describe("the packages' sources", () => {
  it("import one another without a cycle at run time", () => {
    const files = sources()
    assert.isAbove(files.length, 100)
    const known = new Set(files)
    const graph = new Map(files.map((file) => [file, importsOf(file).filter((target) => known.has(target))]))
    const found = cycles(graph).map((component) => component.map((file) => Path.relative(root, file)).sort())
    assert.deepStrictEqual(found, [])
  })

  it("finds a cycle where there is one", () => {
    const graph = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]], ["e", ["e"]]])
    assert.deepStrictEqual(cycles(graph).map((c) => [...c].sort()), [["a", "b", "c"], ["e"]])
  })
})
