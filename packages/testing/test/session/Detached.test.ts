// What a bad line leaves behind. A transport hands lines over as slices of a whole pipe read's decoded text, and a
// slice keeps that text alive: the Malformed item (kept in the event ring for as long as the event is), its `raw`
// and its ProtocolError's `linePrefix` and `detail` (which quotes the line on some V8 versions) must hold copies.
// Whether a string shares memory is not visible from JavaScript, so this runs a Node process with a garbage
// collector it can call: it feeds each provider bad lines sliced from a 16 MB text, keeps the items the provider
// returned, drops the text, collects, and reports how much heap is still used.
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

// A provider package's module, by its path under packages/.
const src = (file: string) => pathToFileURL(Path.resolve(import.meta.dirname, "../../..", file)).href

const script = `
const Claude = await import(${JSON.stringify(src("claude/src/internal/machine.ts"))})
const Codex = await import(${JSON.stringify(src("codex/src/internal/machine.ts"))})
const providers = {
  claude: Claude.make({ hooks: {}, initialize: undefined, maxLineLength: 10_000 }),
  codex: Codex.make({ clientInfo: { name: "t", title: null, version: "0" }, capabilities: null, thread: { _tag: "Start", params: { cwd: "/p" } }, turnParams: {} })
}
// Three bad lines: long, with the bad token at its start (a 6,800-character line); long, with the bad token in its
// middle (the parser quotes the characters around it; 8,804 characters); short enough for the parser to quote whole (17 characters).
const lines = [
  "this is not json ".repeat(400),
  "[" + "1,".repeat(2_200) + "x," + "2,".repeat(2_200) + "]",
  '{"a":1,"b":zzzzz}'
]
const mode = process.argv[1]
const collect = () => { for (let i = 0; i < 3; i++) globalThis.gc() }
// In a function of its own, so that no frame still holds the text or the line when the heap is measured.
const feed = (name, bad) => {
  const text = "x".repeat(16_000_000) + "\\n" + bad
  const line = text.slice(16_000_001)
  if (mode === "control") return [line.slice(0, 20)]
  const item = providers[name].receive(line)
  if (item?._tag !== "Malformed") throw new Error(name + ": not Malformed: " + JSON.stringify(item))
  return [item]
}
collect()
const before = process.memoryUsage().heapUsed
const kept = []
for (const name of ["claude", "codex"]) for (const bad of lines) kept.push(...feed(name, bad))
collect()
const sizes = kept.map((k) => typeof k === "string" ? k.length : [k.raw.length, k.error.linePrefix.length, k.error.detail.length > 0])
process.stdout.write(JSON.stringify({ retained: process.memoryUsage().heapUsed - before, sizes }))
`

interface Report {
  readonly retained: number
  readonly sizes: ReadonlyArray<unknown>
}

const run = (mode: string): Report => {
  const child = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script, mode], {
    encoding: "utf8",
    timeout: 60_000
  })
  assert.strictEqual(child.status, 0, child.stderr)
  return JSON.parse(child.stdout)
}

describe("a bad line", () => {
  it("leaves no part of the Malformed item holding the read's text", { timeout: 120_000 }, () => {
    // The control keeps plain slices: the process still holds six 16 MB texts, so the measure can see them.
    const control = run("control")
    assert.isAbove(control.retained, 80_000_000)
    const provider = run("providers")
    // raw and linePrefix of each line (4,096 and 200 characters, or the whole line), and a detail.
    const each = [[4096, 200, true], [4096, 200, true], [17, 17, true]]
    assert.deepStrictEqual(provider.sizes, [...each, ...each])
    assert.isBelow(provider.retained, 4_000_000)
  })
})
