/**
 * One measurement in its own process (so memory figures belong to one host):
 *
 *   node [--expose-gc] scripts/bench/runner.ts <bare|sdk|tether> <throughput|rtt|lifecycle|memory> '<params json>'
 *
 * Prints one line `BENCH_RESULT <json>` on stdout and exits; anything else on stdout is ignored by bench.ts.
 */
import { prompt } from "./fake.ts"
import type { Host, HostSession } from "./host.ts"
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
  const start = now()
  const stats = await session.turn(prompt(frames))
  const ms = now() - start
  await session.close()
  if (stats.deltas !== frames) throw new Error(`saw ${stats.deltas} of ${frames} deltas`)
  return { framesPerSecond: (frames / ms) * 1000, ms, deltas: stats.deltas, messages: stats.messages }
}

const rtt = async (host: Host) => {
  const turns = num("turns", 1_000)
  const session = await host.open()
  for (let i = 0; i < num("warmupTurns", 50); i++) await session.turn(prompt(1))
  const samples: Array<number> = []
  const start = now()
  for (let i = 0; i < turns; i++) {
    const t0 = now()
    const stats = await session.turn(prompt(1))
    samples.push((now() - t0) * 1000)
    if (stats.deltas !== 1) throw new Error(`turn ${i}: saw ${stats.deltas} deltas`)
  }
  const totalMs = now() - start
  await session.close()
  return {
    meanUs: mean(samples),
    p50Us: percentile(samples, 0.5),
    p99Us: percentile(samples, 0.99),
    totalMs
  }
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
  const t0 = now()
  await Promise.all(sessions.map((session) => session.close()))
  const teardownAllMs = now() - t0
  return {
    base: { rss: base.rss, heapUsed: base.heapUsed },
    levels: perLevel,
    teardownAllMs,
    sessions: sessions.length
  }
}

const figures: Record<string, (host: Host) => Promise<unknown>> = { throughput, rtt, lifecycle, memory }

const main = async () => {
  const run = figures[figure ?? ""]
  if (run === undefined) throw new Error(`unknown figure ${figure}`)
  const { host } = (await import(`./hosts/${hostName}.ts`)) as { readonly host: Host }
  report(await run(host))
}

main().catch((error: unknown) => {
  process.stderr.write(
    `runner: ${hostName} ${figure} failed: ${error instanceof Error ? error.stack : String(error)}\n`
  )
  process.exit(1)
})
