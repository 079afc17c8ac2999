/**
 * One measurement in its own process (so memory figures belong to one host):
 *
 *   node [--expose-gc] scripts/bench/runner.ts <host> <throughput|rtt|warmup|segments|code|lifecycle|memory|probe> '<params json>'
 *
 * where <host> is a module of hosts/ (bare, validated, transport, sdk, tether, tether-events, tether-stream, codex-bare,
 * codex-tether, acp-bare, acp-tether).
 *
 * Prints one line `BENCH_RESULT <json>` on stdout and exits; anything else on stdout is ignored by bench.ts.
 */
import * as Fs from "node:fs"
import * as Inspector from "node:inspector/promises"
import * as Path from "node:path"
import { prompt } from "./fake.ts"
import type { Host, HostSession } from "./host.ts"
import * as Segments from "./segments.ts"
import { mean, percentile } from "./stats.ts"

const [hostName, figure, rawParams] = process.argv.slice(2)
const params = JSON.parse(rawParams ?? "{}") as Record<string, unknown>
const num = (key: string, fallback: number): number => (typeof params[key] === "number" ? params[key] : fallback)

const report = (result: unknown) =>
  process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`, () => process.exit(0))

const watchdog = setTimeout(() => {
  process.stderr.write(`runner: ${hostName} ${figure} timed out\n`)
  process.exit(2)
}, num("timeoutMs", 180_000))
watchdog.unref()

const now = () => performance.now()

/**
 * With `profile` (a file path) in the params, V8's CPU profiler (the one behind `node --cpu-prof`) records only the
 * measured stretch, so start-up and module loading stay out of the profile.
 */
const profiled = async <A>(measure: () => Promise<A>): Promise<A> => {
  const file = params.profile
  if (typeof file !== "string") return measure()
  const inspector = new Inspector.Session()
  inspector.connect()
  await inspector.post("Profiler.enable")
  await inspector.post("Profiler.setSamplingInterval", { interval: num("profileIntervalUs", 200) })
  await inspector.post("Profiler.start")
  const result = await measure()
  const { profile } = await inspector.post("Profiler.stop")
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, JSON.stringify(profile))
  inspector.disconnect()
  return result
}

const collect = async () => {
  for (let i = 0; i < 4; i++) {
    globalThis.gc?.()
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const throughput = async (host: Host) => {
  const frames = num("frames", 100_000)
  const session = await host.open()
  await session.turn(prompt(num("warmupFrames", 2_000)))
  const { stats, ms, cpu } = await profiled(async () => {
    const cpu0 = process.cpuUsage()
    const start = now()
    const stats = await session.turn(prompt(frames))
    return { stats, ms: now() - start, cpu: process.cpuUsage(cpu0) }
  })
  await session.close()
  // A delta skipped by lag is reported (as `lags` and `missed`), not a failure: lag is a figure of its own.
  if (stats.deltas !== frames && (stats.missed ?? 0) === 0) {
    throw new Error(`saw ${stats.deltas} of ${frames} deltas and no lag marker`)
  }
  // The host's own CPU time per frame: less sensitive than the rate to other load on the machine.
  return { framesPerSecond: (frames / ms) * 1000, ms, cpuUsPerFrame: (cpu.user + cpu.system) / frames, ...stats }
}

const rtt = async (host: Host) => {
  const turns = num("turns", 1_000)
  const session = await host.open()
  for (let i = 0; i < num("warmupTurns", 50); i++) await session.turn(prompt(1))
  const samples: Array<number> = []
  const { totalMs, cpu } = await profiled(async () => {
    const cpu0 = process.cpuUsage()
    const start = now()
    for (let i = 0; i < turns; i++) {
      const t0 = now()
      const stats = await session.turn(prompt(1))
      samples.push((now() - t0) * 1000)
      if (stats.deltas !== 1) throw new Error(`turn ${i}: saw ${stats.deltas} deltas`)
    }
    return { totalMs: now() - start, cpu: process.cpuUsage(cpu0) }
  })
  await session.close()
  return {
    meanUs: mean(samples),
    p50Us: percentile(samples, 0.5),
    p99Us: percentile(samples, 0.99),
    totalMs,
    // The host's own CPU time per turn: less sensitive than the round trip to other load on the machine.
    cpuUsPerTurn: (cpu.user + cpu.system) / turns
  }
}

/**
 * How a host warms up: one session runs `blocks` blocks of `block` tiny turns and reports each block's mean round
 * trip and host CPU per turn. Both the host's and the fake's code keep getting faster for thousands of turns (V8
 * compiles the hot functions, tier after tier), so this says after how many turns a round trip is steady.
 */
const warmup = async (host: Host) => {
  const blocks = num("blocks", 30)
  const block = num("block", 1_000)
  const session = await host.open()
  const meanUs: Array<number> = []
  const cpuUsPerTurn: Array<number> = []
  for (let b = 0; b < blocks; b++) {
    const cpu0 = process.cpuUsage()
    const start = now()
    for (let i = 0; i < block; i++) {
      const stats = await session.turn(prompt(1))
      if (stats.deltas !== 1) throw new Error(`turn ${b * block + i}: saw ${stats.deltas} deltas`)
    }
    const cpu = process.cpuUsage(cpu0)
    meanUs.push(((now() - start) * 1000) / block)
    cpuUsPerTurn.push((cpu.user + cpu.system) / block)
  }
  await session.close()
  return { block, meanUs, cpuUsPerTurn }
}

/** The probe of the CLI's pipes: installed by `main`, before the host loads, for the `segments` figure only. */
let cliProbe: Segments.Probe | undefined

/**
 * Where a steady tiny turn's round trip goes (see segments.ts): after `warmupTurns` turns, each of `turns` turns is
 * split at its prompt's write and at the last read of the CLI's stdout. Medians, in µs: `sendUs` (the host's call to
 * the write), `writeUs` (the write call itself), `cliUs` (the write's return to the read: the fake, the pipes, and
 * the host's way back to the read), `receiveUs` (the read to the turn in the caller's hands), and the round trip's
 * own median and mean.
 */
const segments = async (host: Host) => {
  const probe = cliProbe
  if (probe === undefined) throw new Error("segments: the probe was not installed before the host loaded")
  const turns = num("turns", 2_000)
  const session = await host.open()
  for (let i = 0; i < num("warmupTurns", 20_000); i++) await session.turn(prompt(1))
  const send: Array<number> = []
  const write: Array<number> = []
  const cli: Array<number> = []
  const receive: Array<number> = []
  const total: Array<number> = []
  const reads0 = probe.reads
  for (let i = 0; i < turns; i++) {
    const t0 = now()
    const stats = await session.turn(prompt(1))
    const t1 = now()
    if (stats.deltas !== 1) throw new Error(`turn ${i}: saw ${stats.deltas} deltas`)
    const { lastReadAt, lastWriteAt, lastWrittenAt } = probe
    if (lastWriteAt < t0 || lastWrittenAt < lastWriteAt || lastReadAt < lastWrittenAt) {
      throw new Error(`turn ${i}: the probe did not see the prompt's write and then a read of the CLI's stdout`)
    }
    send.push((lastWriteAt - t0) * 1000)
    write.push((lastWrittenAt - lastWriteAt) * 1000)
    cli.push((lastReadAt - lastWrittenAt) * 1000)
    receive.push((t1 - lastReadAt) * 1000)
    total.push((t1 - t0) * 1000)
  }
  const readsPerTurn = (probe.reads - reads0) / turns
  await session.close()
  return {
    sendUs: percentile(send, 0.5),
    writeUs: percentile(write, 0.5),
    cliUs: percentile(cli, 0.5),
    receiveUs: percentile(receive, 0.5),
    roundTripUs: percentile(total, 0.5),
    meanRoundTripUs: mean(total),
    readsPerTurn
  }
}

/** The coverage session of the `code` figure: opened by `main`, before the host loads, for that figure only. */
let coverage: Inspector.Session | undefined

/** The repository's packages, whose scripts are Tether's. */
const packagesUrl = new URL("../../packages/", import.meta.url).href

/** Where a function's code comes from, by its script's URL. */
const originOf = (url: string): string =>
  url.startsWith("node:") ?
    "node" :
    url.startsWith(packagesUrl) ?
    "tether" :
    url.includes("/node_modules/effect/") ?
    "effect" :
    url.includes("/node_modules/") ?
    "library" :
    "host"

/**
 * What JavaScript a tiny turn runs, counted by V8 (the precise call counts behind `c8`), not timed: after
 * `warmupTurns` turns (past the first turns' one-time work), over `turns` turns, the functions that ran in every one
 * of them and the calls per turn, in all and by where the code comes from (`node`'s own modules, `effect`, Tether's
 * `packages/`, another `library` such as the SDK, the `host`'s own code; the runner's own file is left out, while
 * the helpers the hosts share, fake.ts and host.ts, count as the host's, `prompt` included). The counts are taken
 * after each turn. Every function a turn runs is one V8 compiles and optimizes while a process warms up, so this is
 * the size of the path the early turns pay for. V8 does not optimize while it counts
 * precisely (nothing is inlined, so every call is counted), so this figure times nothing; its counts move only with
 * what a turn does, which can depend on the machine (a turn's frames read in one pipe read or two).
 */
const code = async (host: Host) => {
  const session0 = coverage
  if (session0 === undefined) throw new Error("code: coverage was not started before the host loaded")
  const turns = num("turns", 200)
  const session = await host.open()
  for (let i = 0; i < num("warmupTurns", 2_000); i++) await session.turn(prompt(1))
  // Taking the counts resets them: each take after the first holds what ran since the one before. Taking them runs
  // some of Node's own code too (the inspector's messages, their promises): an empty round of takes, with no turn
  // between two, says how much, and a turn's counts are what it ran beyond that.
  const take = async () => (await session0.post("Profiler.takePreciseCoverage")).result
  // Each function that ran since the last take: its key, its script's URL, and its calls.
  const ran = function*(scripts: Awaited<ReturnType<typeof take>>) {
    for (const script of scripts) {
      for (const fn of script.functions) {
        const range = fn.ranges[0]
        if (range !== undefined && range.count > 0) {
          yield { key: `${script.scriptId}:${range.startOffset}`, url: script.url, count: range.count }
        }
      }
    }
  }
  // The empty round: per function, the fewest calls in five rounds of takes with no turn between them (what any one
  // round has more of is other work: a host may still be reading the last turn's trailing frames, a timer fires).
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
  // Per function that ran beyond the empty round: where its code comes from, and in how many turns it ran.
  const seen = new Map<string, { readonly origin: string; turns: number }>()
  const calls: Record<string, number> = {}
  for (let i = 0; i < turns; i++) {
    const stats = await session.turn(prompt(1))
    if (stats.deltas !== 1) throw new Error(`turn ${i}: saw ${stats.deltas} deltas`)
    for (const { key, url, count: all } of ran(await take())) {
      const count = all - (empty.get(key) ?? 0)
      if (count <= 0 || url === import.meta.url) continue
      const origin = originOf(url)
      calls[origin] = (calls[origin] ?? 0) + count / turns
      const entry = seen.get(key)
      if (entry === undefined) seen.set(key, { origin, turns: 1 })
      else entry.turns++
    }
  }
  await session.close()
  const functions: Record<string, number> = {}
  for (const { origin, turns: ranIn } of seen.values()) {
    if (ranIn === turns) functions[origin] = (functions[origin] ?? 0) + 1
  }
  const sum = (record: Record<string, number>) => Object.values(record).reduce((a, b) => a + b, 0)
  return { functions, calls, functionsPerTurn: sum(functions), callsPerTurn: sum(calls) }
}

const lifecycle = async (host: Host) => {
  const cycles = num("cycles", 5)
  const firstResultMs: Array<number> = []
  const teardownMs: Array<number> = []
  // The first cycle is cold (code not yet loaded or compiled): kept apart, not in the samples.
  let coldFirstResultMs = 0
  let coldTeardownMs = 0
  for (let i = 0; i <= cycles; i++) {
    const t0 = now()
    const session = await host.open()
    await session.turn(prompt(1))
    const t1 = now()
    await session.close()
    const t2 = now()
    if (i === 0) {
      coldFirstResultMs = t1 - t0
      coldTeardownMs = t2 - t1
    } else {
      firstResultMs.push(t1 - t0)
      teardownMs.push(t2 - t1)
    }
  }
  return { firstResultMs, teardownMs, coldFirstResultMs, coldTeardownMs }
}

const memory = async (host: Host) => {
  if (globalThis.gc === undefined) throw new Error("memory needs --expose-gc")
  const levels = (params.levels as Array<number> | undefined) ?? [1, 10, 100]
  const concurrency = num("concurrency", 10)
  const sessions: Array<HostSession> = []
  await collect()
  const base = process.memoryUsage()
  const perLevel: Array<Record<string, number>> = []
  for (const level of levels) {
    while (sessions.length < level) {
      const batch = Math.min(concurrency, level - sessions.length)
      const opened = await Promise.all(
        Array.from({ length: batch }, async () => {
          const session = await host.open()
          await session.turn(prompt(3))
          return session
        })
      )
      sessions.push(...opened)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
    await collect()
    const usage = process.memoryUsage()
    perLevel.push({
      sessions: level,
      rss: usage.rss,
      heapUsed: usage.heapUsed,
      rssPerSession: (usage.rss - base.rss) / level,
      heapPerSession: (usage.heapUsed - base.heapUsed) / level
    })
  }
  // What a session keeps after real work: one larger turn on `busySessions` of them, measured against just before.
  const busyFrames = num("busyFrames", 5_000)
  const busy = sessions.slice(0, num("busySessions", 10))
  const before = process.memoryUsage()
  for (const session of busy) await session.turn(prompt(busyFrames))
  await new Promise((resolve) => setTimeout(resolve, 100))
  await collect()
  const after = process.memoryUsage()
  const busyTurn = {
    sessions: busy.length,
    frames: busyFrames,
    rssPerSession: (after.rss - before.rss) / busy.length,
    heapPerSession: (after.heapUsed - before.heapUsed) / busy.length
  }
  const t0 = now()
  await Promise.all(sessions.map((session) => session.close()))
  const teardownAllMs = now() - t0
  return {
    base: { rss: base.rss, heapUsed: base.heapUsed },
    levels: perLevel,
    busyTurn,
    teardownAllMs,
    sessions: sessions.length
  }
}

/** Loads the host only: bench.ts checks each host once before measuring it. */
const probe = async (_host: Host) => ({ ok: true })

const figures: Record<string, (host: Host) => Promise<unknown>> = {
  probe,
  throughput,
  rtt,
  warmup,
  segments,
  code,
  lifecycle,
  memory
}

const main = async () => {
  const run = figures[figure ?? ""]
  if (run === undefined) throw new Error(`unknown figure ${figure}`)
  if (run === segments) cliProbe = Segments.install()
  if (run === code) {
    coverage = new Inspector.Session()
    coverage.connect()
    await coverage.post("Profiler.enable")
    await coverage.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false })
  }
  const { host } = (await import(`./hosts/${hostName}.ts`)) as { readonly host: Host }
  await host.init?.()
  report(await run(host))
}

main().catch((error: unknown) => {
  process.stderr.write(
    `runner: ${hostName} ${figure} failed: ${error instanceof Error ? error.stack : String(error)}\n`
  )
  process.exit(1)
})
