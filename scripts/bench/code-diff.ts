/**
 * What JavaScript a tiny turn runs, function by function, for two hosts: runner.ts's `code` figure (V8's precise call
 * counts, not timed) kept per function, so that two ways of reading a turn can be told apart by what each runs.
 *
 *   node scripts/bench/code-diff.ts <host> [turns (200)] [warmupTurns (2000)]    # one host: prints JSON on stdout
 *   node scripts/bench/code-diff.ts diff <a.json> <b.json>                      # what b runs that a does not, and more often
 *
 * Each row is a function (name, file:line) with its calls per turn; "every" marks a function that ran in every
 * counted turn (what runner.ts's `code` figure counts as a function of the turn).
 */
import * as Fs from "node:fs"
import * as Inspector from "node:inspector/promises"
import { fileURLToPath } from "node:url"
import { prompt } from "./fake.ts"
import type { Host } from "./host.ts"

interface Row {
  readonly name: string
  calls: number
  turns: number
}

const lineOf = (() => {
  const sources = new Map<string, string | undefined>()
  return (url: string, offset: number): number => {
    let source = sources.get(url)
    if (!sources.has(url)) {
      try {
        source = url.startsWith("file:") ? Fs.readFileSync(fileURLToPath(url), "utf8") : undefined
      } catch {
        source = undefined
      }
      sources.set(url, source)
    }
    if (source === undefined) return 0
    let line = 1
    for (let i = 0; i < offset && i < source.length; i++) if (source.charCodeAt(i) === 10) line++
    return line
  }
})()

const short = (url: string) => url.replace(/^.*\/(packages|node_modules\/effect|scripts)\//, "$1/")

const measure = async (hostName: string, turns: number, warmupTurns: number) => {
  const coverage = new Inspector.Session()
  coverage.connect()
  await coverage.post("Profiler.enable")
  await coverage.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false })
  const { host } = (await import(`./hosts/${hostName}.ts`)) as { readonly host: Host }
  await host.init?.()
  const session = await host.open()
  for (let i = 0; i < warmupTurns; i++) await session.turn(prompt(1))
  const take = async () => (await coverage.post("Profiler.takePreciseCoverage")).result
  const ran = function*(scripts: Awaited<ReturnType<typeof take>>) {
    for (const script of scripts) {
      for (const fn of script.functions) {
        const range = fn.ranges[0]
        if (range !== undefined && range.count > 0) {
          yield { key: `${script.url}:${range.startOffset}`, url: script.url, fn, count: range.count }
        }
      }
    }
  }
  await take()
  let empty = new Map<string, number>()
  for (let round = 0; round < 5; round++) {
    const next = new Map<string, number>()
    for (const { count, key } of ran(await take())) {
      const fewest = round === 0 ? count : Math.min(count, empty.get(key) ?? 0)
      if (fewest > 0) next.set(key, fewest)
    }
    empty = next
  }
  const rows = new Map<string, Row>()
  for (let i = 0; i < turns; i++) {
    const stats = await session.turn(prompt(1))
    if (stats.deltas !== 1) throw new Error(`turn ${i}: saw ${stats.deltas} deltas`)
    for (const { count: all, fn, key, url } of ran(await take())) {
      const count = all - (empty.get(key) ?? 0)
      if (count <= 0 || url === import.meta.url) continue
      let row = rows.get(key)
      if (row === undefined) {
        row = {
          name: `${fn.functionName || "(anonymous)"} ${short(url)}:${lineOf(url, fn.ranges[0]!.startOffset)}`,
          calls: 0,
          turns: 0
        }
        rows.set(key, row)
      }
      row.calls += count
      row.turns++
    }
  }
  await session.close()
  const out: Record<string, { calls: number; every: boolean }> = {}
  for (const row of rows.values()) {
    const prev = out[row.name]
    const calls = row.calls / turns
    out[row.name] = { calls: (prev?.calls ?? 0) + calls, every: (prev?.every ?? false) || row.turns === turns }
  }
  return out
}

const [command, a, b] = process.argv.slice(2)
if (command === "diff") {
  type Counts = Record<string, { calls: number; every: boolean }>
  const left = JSON.parse(Fs.readFileSync(a!, "utf8")) as Counts
  const right = JSON.parse(Fs.readFileSync(b!, "utf8")) as Counts
  const names = new Set([...Object.keys(left), ...Object.keys(right)])
  const rows = [...names].map((name) => ({
    name,
    left: left[name]?.calls ?? 0,
    right: right[name]?.calls ?? 0,
    leftEvery: left[name]?.every ?? false,
    rightEvery: right[name]?.every ?? false
  })).filter((r) => Math.abs(r.right - r.left) >= 0.5)
  rows.sort((x, y) => (y.right - y.left) - (x.right - x.left))
  const sum = (c: Counts, pred: (name: string) => boolean) =>
    Object.entries(c).filter(([n, v]) => v.every && pred(n)).length
  const calls = (c: Counts, pred: (name: string) => boolean) =>
    Object.entries(c).filter(([n]) => pred(n)).reduce((s, [, v]) => s + v.calls, 0)
  for (
    const [label, pred] of [
      ["all", () => true],
      ["effect", (n: string) => n.includes("node_modules/effect/")],
      ["tether", (n: string) => n.includes(" packages/")]
    ] as const
  ) {
    console.log(
      `${label}: functions in every turn ${sum(left, pred)} -> ${sum(right, pred)}; calls per turn ${
        calls(left, pred).toFixed(0)
      } -> ${calls(right, pred).toFixed(0)}`
    )
  }
  for (const r of rows) {
    console.log(
      `${(r.right - r.left).toFixed(1).padStart(7)}  ${r.left.toFixed(1).padStart(6)}${r.leftEvery ? "*" : " "} ${
        r.right.toFixed(1).padStart(6)
      }${r.rightEvery ? "*" : " "}  ${r.name}`
    )
  }
} else {
  const result = await measure(command!, Number(a ?? 200), Number(b ?? 2_000))
  process.stdout.write(JSON.stringify(result))
  process.exit(0)
}
