/**
 * `node scripts/bench-registry.ts`: what a SessionRegistry costs with 10,000 idle sessions in it.
 *
 * Every session is a real `ClaudeSession` (handshake, reader fiber, event log) over `MockTransport` with the mock
 * CLI's timing set to zero, so the figures are the host's own cost: no processes, no timers. Measured, in one
 * process (it re-runs itself with `--expose-gc` when started without it):
 *
 * - memory per idle session: heap and RSS after a full GC, minus the baseline, over N, for the same N sessions
 *   held without a registry (plain scoped `ClaudeSession`s) and held by a registry: the difference is what the
 *   registry adds. The mock CLI's own state (its queues and fiber, per session) is included in both.
 * - time per operation: `getOrCreate` of a new id (start, handshake included), `getOrCreate` of a live id (a hit),
 *   `send` (until the turn handle is back: the prompt is written), `evict` (graceful: drain, stdin EOF, the mock
 *   exits, teardown). Each is timed one operation at a time over all N ids (mean, p50, p99).
 * - what is left after evicting every session (heap and RSS over the baseline): a leak shows here.
 *
 * Each half runs in its own child process (`--expose-gc`), so that RSS starts from a fresh process. Prints a
 * markdown table on stdout and writes .bench/registry.json.
 *
 * Knobs (environment): BENCH_REGISTRY_SESSIONS (10000).
 */
import { Duration, Effect, Exit, Layer, Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { ClaudeSession } from "../packages/claude/src/index.ts"
import { SessionRegistry, Transport } from "../packages/core/src/index.ts"
import * as MockClaude from "../packages/testing/src/MockClaude.ts"
import * as MockTransport from "../packages/testing/src/MockTransport.ts"
import { mean, percentile } from "./bench/stats.ts"

const root = Path.resolve(import.meta.dirname, "..")

const gc = (globalThis as { gc?: () => void }).gc
const phase = process.argv[2]

const sessions = Number(process.env.BENCH_REGISTRY_SESSIONS ?? 10_000)
const log = (line: string) => process.stderr.write(`${line}\n`)

const zero: Partial<MockClaude.Timing> = Object.fromEntries(
  Object.keys(MockClaude.defaultTiming).map((key) => [key, "0 millis"])
)
const script = MockClaude.make([], { timing: zero })
// MockTransport.layer keeps every connection for inspection; this one keeps nothing, so what stays in memory after
// the sessions are closed is what the host leaked.
const transport = Layer.succeed(Transport.Transport)(Transport.Transport.of({
  capabilities: MockTransport.capabilities,
  open: (spec, teardown) => MockTransport.open(script, spec, { termGrace: teardown.termGrace })
}))

interface Memory {
  readonly heap: number
  readonly rss: number
}

const settleMemory = Effect.promise(async (): Promise<Memory> => {
  for (let i = 0; i < 4; i++) {
    gc!()
    await new Promise((resolve) => setImmediate(resolve))
  }
  const usage = process.memoryUsage()
  return { heap: usage.heapUsed, rss: usage.rss }
})

const per = (after: Memory, before: Memory, n: number) => ({
  heap: (after.heap - before.heap) / n,
  rss: (after.rss - before.rss) / n
})

interface Timing {
  readonly n: number
  readonly meanUs: number
  readonly p50Us: number
  readonly p99Us: number
  readonly totalMs: number
}

/** Runs `op(i)` for every i, one at a time, timing each (and then `after` its result, untimed). */
const timeEach = <A, E, R>(
  label: string,
  n: number,
  op: (i: number) => Effect.Effect<A, E, R>,
  after: (a: A) => Effect.Effect<unknown> = () => Effect.void
) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      const a = yield* op(i)
      samples.push((performance.now() - t0) * 1000)
      yield* after(a)
    }
    const meanUs = mean(samples)
    const timing: Timing = {
      n,
      meanUs,
      p50Us: percentile(samples, 0.5),
      p99Us: percentile(samples, 0.99),
      totalMs: (meanUs * n) / 1000
    }
    log(`${label}: ${timing.meanUs.toFixed(1)} us/op (p50 ${timing.p50Us.toFixed(1)}, p99 ${timing.p99Us.toFixed(1)})`)
    return timing
  })

const id = (i: number) => `conversation-${i}`

/** Holds N plain scoped sessions, then closes them. */
const bare = Effect.gen(function*() {
  const baseline = yield* settleMemory
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(transport, scope)
  const create = yield* timeEach(
    "ClaudeSession.make",
    sessions,
    () => ClaudeSession.make({}).pipe(Scope.provide(scope), Effect.provideContext(context))
  )
  const held = yield* settleMemory
  yield* Scope.close(scope, Exit.void)
  const after = yield* settleMemory
  return { create, held: per(held, baseline, sessions), retained: per(after, baseline, 1) }
})

/** Holds N sessions in a registry, uses them, evicts them all. */
const registered = Effect.gen(function*() {
  const baseline = yield* settleMemory
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(transport, scope)
  const registry = yield* SessionRegistry.make({
    ...ClaudeSession.kind,
    capacity: sessions,
    idleTimeToLive: Duration.infinity,
    shutdownConcurrency: 64
  }).pipe(Scope.provide(scope), Effect.provideContext(context))
  const create = yield* timeEach(
    "getOrCreate (new id)",
    sessions,
    (i) => Effect.scoped(registry.getOrCreate(id(i), {}))
  )
  const held = yield* settleMemory
  const hit = yield* timeEach("getOrCreate (live id)", sessions, (i) => Effect.scoped(registry.getOrCreate(id(i), {})))
  // `send` is timed until the prompt is written; the turn is then awaited, untimed.
  const send = yield* timeEach(
    "send",
    sessions,
    (i) => registry.send(id(i), "hi"),
    (turn) => Effect.ignore(turn.result)
  )
  const afterTurns = yield* settleMemory
  const evict = yield* timeEach("evict", sessions, (i) => registry.evict(id(i)))
  const size = yield* registry.size
  if (size !== 0) return yield* Effect.die(new Error(`${size} sessions left after evicting all`))
  yield* Scope.close(scope, Exit.void)
  const after = yield* settleMemory
  return {
    create,
    hit,
    send,
    evict,
    held: per(held, baseline, sessions),
    afterOneTurn: per(afterTurns, baseline, sessions),
    retained: per(after, baseline, 1)
  }
})

type Bare = Effect.Success<typeof bare>
type Registered = Effect.Success<typeof registered>

const runPhase = (name: string): unknown => {
  const child = spawnSync(process.execPath, ["--expose-gc", import.meta.filename, name], {
    stdio: ["ignore", "pipe", "inherit"],
    env: process.env,
    encoding: "utf8",
    maxBuffer: 16 * 2 ** 20
  })
  if (child.status !== 0) throw new Error(`phase ${name} exited with ${child.status}`)
  return JSON.parse(child.stdout)
}

const report = () => {
  const b = runPhase("bare") as Bare
  const r = runPhase("registry") as Registered
  const result = {
    date: new Date().toISOString(),
    node: process.version,
    machine: `${Os.cpus()[0]?.model ?? "unknown cpu"} (${Os.cpus().length} cpus), ${Os.platform()} ${Os.arch()}`,
    sessions,
    memoryPerIdleSession: {
      withoutRegistry: b.held,
      inRegistry: r.held,
      registryOverhead: { heap: r.held.heap - b.held.heap, rss: r.held.rss - b.held.rss },
      inRegistryAfterOneTurn: r.afterOneTurn
    },
    retainedAfterClose: { withoutRegistry: b.retained, registry: r.retained },
    timePerOperation: { bareStart: b.create, create: r.create, hit: r.hit, send: r.send, evict: r.evict }
  }

  const kib = (bytes: number) => `${(bytes / 1024).toFixed(2)} KiB`
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`
  const us = (t: Timing) => `${t.meanUs.toFixed(1)} µs (p50 ${t.p50Us.toFixed(1)}, p99 ${t.p99Us.toFixed(1)})`
  const lines = [
    `### SessionRegistry: ${
      sessions.toLocaleString("en-US")
    } idle sessions over MockTransport (Node ${process.version})`,
    "",
    "| memory | heap | RSS |",
    "| --- | --- | --- |",
    `| per idle session, no registry (ClaudeSession + mock CLI) | ${kib(b.held.heap)} | ${kib(b.held.rss)} |`,
    `| per idle session, in a registry | ${kib(r.held.heap)} | ${kib(r.held.rss)} |`,
    `| what the registry adds per session | ${kib(r.held.heap - b.held.heap)} | ${kib(r.held.rss - b.held.rss)} |`,
    `| per session in a registry, after one turn each | ${kib(r.afterOneTurn.heap)} | ${kib(r.afterOneTurn.rss)} |`,
    `| left after closing all (no registry) | ${mib(b.retained.heap)} | ${mib(b.retained.rss)} |`,
    `| left after evicting all and closing the registry | ${mib(r.retained.heap)} | ${mib(r.retained.rss)} |`,
    "",
    "| operation (one at a time, every id) | time per operation |",
    "| --- | --- |",
    `| ClaudeSession.make, no registry (start + handshake) | ${us(b.create)} |`,
    `| getOrCreate, new id (start + handshake) | ${us(r.create)} |`,
    `| getOrCreate, live id | ${us(r.hit)} |`,
    `| send (until the turn handle) | ${us(r.send)} |`,
    `| evict (graceful, through teardown) | ${us(r.evict)} |`,
    "",
    "Memory is measured after a full GC. RSS freed by the heap is not returned to the OS, so the RSS left after",
    "closing is the peak, not a leak: the heap column is the leak check. The mock CLI's per-session state (its",
    "queues and fiber) is in every figure.",
    ""
  ]
  console.log(lines.join("\n"))
  const outDir = Path.join(root, ".bench")
  Fs.mkdirSync(outDir, { recursive: true })
  Fs.writeFileSync(Path.join(outDir, "registry.json"), JSON.stringify(result, null, 2) + "\n")
  log(`wrote ${Path.join(outDir, "registry.json")}`)
}

if (phase === undefined) {
  report()
} else {
  if (gc === undefined) throw new Error("run the phases with --expose-gc")
  Effect.runPromise(phase === "bare" ? bare : registered).then(
    (value) => process.stdout.write(JSON.stringify(value)),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}
