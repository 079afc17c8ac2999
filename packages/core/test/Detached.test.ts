// What a bad line leaves behind. A transport hands lines over as slices of a whole pipe read's decoded text, and a
// slice keeps that text alive: the Malformed item's `raw` (kept in the event ring for as long as the event is) and
// a ProtocolError's `linePrefix` must be copies. Whether a string shares memory is not visible from JavaScript, so
// this runs a Node process with a garbage collector it can call: it feeds each provider a bad line sliced from a
// 16 MB text, keeps what the provider returned, drops the text, collects, and reports how much heap is still used.
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const src = (file: string) => pathToFileURL(Path.resolve(import.meta.dirname, "../src", file)).href

const script = `
const Claude = await import(${JSON.stringify(src("claude/internal/machine.ts"))})
const Codex = await import(${JSON.stringify(src("codex/internal/machine.ts"))})
const providers = {
  claude: Claude.make({ hooks: {}, initialize: undefined, maxLineLength: 10_000 }),
  codex: Codex.make({ clientInfo: { name: "t", title: null, version: "0" }, capabilities: null, thread: { _tag: "Start", params: { cwd: "/p" } }, turnParams: {} })
}
const mode = process.argv[1]
const collect = () => { for (let i = 0; i < 3; i++) globalThis.gc() }
// In a function of its own, so that no frame still holds the text or the line when the heap is measured.
const feed = (name) => {
  const text = "x".repeat(16_000_000) + "\\n" + "this is not json ".repeat(400)
  const line = text.slice(16_000_001)
  if (mode === "control") return [line.slice(0, 200)]
  const item = providers[name].receive(line)
  if (item?._tag !== "Malformed") throw new Error(name + ": not Malformed: " + JSON.stringify(item))
  return [item.raw, item.error.linePrefix]
}
collect()
const before = process.memoryUsage().heapUsed
const kept = [...feed("claude"), ...feed("codex")]
collect()
process.stdout.write(JSON.stringify({ retained: process.memoryUsage().heapUsed - before, kept: kept.map((s) => s.length) }))
`

const run = (mode: string): { readonly retained: number; readonly kept: ReadonlyArray<number> } => {
  const child = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script, mode], {
    encoding: "utf8",
    timeout: 60_000
  })
  assert.strictEqual(child.status, 0, child.stderr)
  return JSON.parse(child.stdout)
}

describe("a bad line", () => {
  it("leaves neither the Malformed item's raw nor the error's prefix holding the read's text", () => {
    // The control keeps plain slices: the process still holds a 16 MB text, so the measure can see one.
    const control = run("control")
    assert.isAbove(control.retained, 12_000_000)
    const provider = run("providers")
    // raw and linePrefix of each provider: 4,096 and 200 characters of a 6,800-character line.
    assert.deepStrictEqual(provider.kept, [4096, 200, 4096, 200])
    assert.isBelow(provider.retained, 4_000_000)
  })
})
