/**
 * A cold host, in a fresh Node process: load the host (and with it its library), open one session, run one tiny turn,
 * close it. Reports the time from process start (`performance.timeOrigin`, which `performance.now()` counts from) to
 * the turn's result, and the process's peak RSS (VmHWM, or `process.resourceUsage().maxRSS` where /proc is absent).
 *
 * bench.ts runs a type-stripped copy of this file and of the hosts (under .bench/cold/, `.ts` imports rewritten to
 * `.js` and the packages' sources to `@tether/*`), with dist-hooks.ts resolving `@tether/*` to the built packages, so
 * no host pays for stripping types and Tether's figure is that of its built `dist/`:
 *
 *   node --import .bench/cold/dist-hooks.js .bench/cold/cold.js <host>
 *
 * Prints one line `BENCH_RESULT <json>` on stdout and exits.
 */
import * as Fs from "node:fs"
import { prompt } from "./fake.ts"
import type { Host } from "./host.ts"

/** The process's peak resident set so far, in bytes. */
const peakRss = (): number => {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(Fs.readFileSync("/proc/self/status", "utf8"))
    if (match !== null) return Number(match[1]) * 1024
  } catch {
    // No /proc: the kernel's own figure below.
  }
  return process.resourceUsage().maxRSS * 1024
}

const hostName = process.argv[2] ?? ""
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js"
const { host } = (await import(`./hosts/${hostName}${extension}`)) as { readonly host: Host }
await host.init?.()
const session = await host.open()
const stats = await session.turn(prompt(1))
const firstResultMs = performance.now()
await session.close()
if (stats.deltas !== 1) throw new Error(`saw ${stats.deltas} deltas`)
process.stdout.write(
  `BENCH_RESULT ${JSON.stringify({ firstResultMs, peakRss: peakRss() })}\n`,
  () => process.exit(0)
)
