/**
 * Inclusive ("total") time per function of a V8 `.cpuprofile`, per unit of work: where `profile.ts` ranks self time,
 * this says how much of a turn a function and everything it called took (a frame counted once per sample, however
 * deep the recursion).
 *
 *   node scripts/bench/runner.ts tether rtt '{"turns":3000,"warmupTurns":2000,"profile":".bench/profiles/rtt.cpuprofile","profileIntervalUs":50}'
 *   node scripts/bench/inclusive.ts .bench/profiles/rtt.cpuprofile 3000 [top (60)]
 *
 * prints the profile's sampled time per turn and the top functions by inclusive microseconds per turn (idle left out).
 */
import * as Fs from "node:fs"

interface Node {
  readonly id: number
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber: number
  }
  readonly children?: ReadonlyArray<number>
}

const [file, unitsArg, topArg] = process.argv.slice(2)
if (file === undefined) throw new Error("usage: inclusive.ts <profile.cpuprofile> [units of work] [top]")
const units = Number(unitsArg ?? 1)
const profile = JSON.parse(Fs.readFileSync(file, "utf8")) as {
  readonly nodes: ReadonlyArray<Node>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}
const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
const parents = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
const label = (node: Node) =>
  `${node.callFrame.functionName || "(anonymous)"} ${
    node.callFrame.url.replace(/^.*\/(packages|node_modules|scripts)\//, "$1/")
  }:${node.callFrame.lineNumber + 1}`

const inclusive = new Map<string, number>()
let total = 0
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0
  if (nodes.get(id)?.callFrame.functionName === "(idle)") return
  total += delta
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
    const key = label(nodes.get(at)!)
    if (seen.has(key)) continue
    seen.add(key)
    inclusive.set(key, (inclusive.get(key) ?? 0) + delta)
  }
})
console.log(`${(total / units).toFixed(1)} µs of samples per unit (${units} units)`)
const rows = [...inclusive].filter(([key]) => !/^\((root|program)\)/.test(key)).sort((a, b) => b[1] - a[1])
for (const [key, micros] of rows.slice(0, Number(topArg ?? 60))) {
  console.log(`${(micros / units).toFixed(1).padStart(8)}  ${key}`)
}
