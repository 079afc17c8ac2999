/**
 * `pnpm soak`: many sessions through a `ClaudeRegistry` over the fast fake CLI (real processes, `NodeTransport`),
 * with faults injected at random and a host that sends, interrupts, evicts and answers permission requests at
 * random, for a given duration. What it checks:
 *
 * - every turn that started (its `send` returned a turn) settles with a typed outcome (a result, or a tagged error
 *   in the error channel; never a defect, never an interruption, never a hang), by its deadlines at the latest
 *   (turn + interrupt timeouts, plus a slack for a busy machine);
 * - no process of the soak is left once the registry and the transport are released, read from /proc by marker, by
 *   containment (the transport layer's cgroups) and by session (every process in a CLI's session);
 * - the host's heap and RSS, sampled over the run, level off: the slope over the second half of the run against the
 *   first (judged from five minutes of soak: in a shorter run, warm-up and noise are most of the slope);
 * - a flood of lines that are not JSON through one real session, before the soak: how many warnings the host's log
 *   gets for it (the session logs the first few of a window verbatim and counts the rest).
 *
 * The schedule (which session, which fault, what the host does, when) is drawn from a seeded generator per worker
 * (`soak/plan.ts`): the same seed gives the same schedule, whose digest the report prints. `--plan 5` prints the
 * first five actions of each worker and exits.
 *
 * Knobs: `--name value` (or `--name=value`), or the environment variable `SOAK_<NAME>` (upper case, `_` for `-`):
 *
 * | knob | default | |
 * | --- | --- | --- |
 * | `seed` | 1 | the schedule |
 * | `duration` | 60 | seconds of soak (the flood check and the shutdown come on top) |
 * | `concurrency` | 8 | workers, each doing one action at a time |
 * | `ids` | 200 | session ids the workers pick from (a hot set of `capacity` of them gets 70% of the actions) |
 * | `capacity` | 12 | the registry's capacity: CLI processes alive at once |
 * | `idle-ttl` | 3 | seconds before the registry closes an idle session |
 * | `mix` | see `soak/plan.ts` | fault weights, e.g. `none=5,crash=1,tool=2` (the others get 0) |
 * | `interrupt-rate` | 0.1 | chance that the host interrupts a turn |
 * | `evict-rate` | 0.05 | chance that the host evicts a turn's session while it runs (half forced) |
 * | `idle-evict-rate` | 0.04 | chance that an action evicts an id instead of sending (half forced) |
 * | `pause` | 50 | most think time between two actions of a worker, ms |
 * | `turn`, `stall`, `interrupt`, `permission` | 5000, 800, 800, 1000 | the sessions' timeouts, ms: short, so that a |
 * | `startup`, `control`, `delivery`, `ack` | 15000, 1000, 1000, 1000 | faulted turn settles fast (startup: the fake |
 * | `close-grace`, `term-grace` | 300, 300 | is Node loading TypeScript, seconds on a busy machine) |
 * | `slack` | 1000 | ms past its deadlines after which a settled turn counts as late |
 * | `flood` | 100000 | lines of the garbage flood check (0: skip it) |
 * | `sample` | 1000 | ms between two memory samples |
 * | `heap-tolerance`, `rss-tolerance` | 1, 4 | MiB a minute the second half may still grow by and level off |
 * | `judge-after` | 300 | seconds of soak from which the memory slopes are judged (shorter: only shown) |
 *
 * Prints a table on stdout, writes `.bench/soak.json` and the host's log to `.bench/soak.log`. Exits 1 when a check
 * fails. Run it under `--expose-gc` (`pnpm soak` does), so the heap is sampled after a full GC.
 */
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer, Logger, Metric, Option, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { ClaudeRegistry, ClaudeSession } from "../packages/claude/src/index.ts"
import { Permission, Timeouts, Transport } from "../packages/core/src/index.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"
import { fakeClaude, fakeEnv } from "./bench/fake.ts"
import * as Memory from "./soak/memory.ts"
import * as Plan from "./soak/plan.ts"
import * as Procs from "./soak/procs.ts"

const root = Path.resolve(import.meta.dirname, "..")

// ---------------------------------------------------------------------------------------------------------------
// Knobs
// ---------------------------------------------------------------------------------------------------------------

const flags: Record<string, string> = {}
{
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}`)
    const eq = arg.indexOf("=")
    if (eq !== -1) flags[arg.slice(2, eq)] = arg.slice(eq + 1)
    else flags[arg.slice(2)] = argv[++i] ?? ""
  }
}
const raw = (name: string): string | undefined =>
  flags[name] ?? process.env[`SOAK_${name.toUpperCase().replaceAll("-", "_")}`]
const num = (name: string, fallback: number): number => {
  const value = raw(name)
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isFinite(n)) throw new Error(`--${name} must be a number (got ${value})`)
  return n
}

const knobs = {
  seed: num("seed", 1),
  durationSeconds: num("duration", 60),
  concurrency: num("concurrency", 8),
  ids: num("ids", 200),
  capacity: num("capacity", 12),
  idleTtlSeconds: num("idle-ttl", 3),
  mix: Plan.parseMix(raw("mix")),
  interruptRate: num("interrupt-rate", 0.1),
  evictRate: num("evict-rate", 0.05),
  idleEvictRate: num("idle-evict-rate", 0.04),
  pauseMs: num("pause", 50),
  timeouts: {
    startup: num("startup", 15_000),
    control: num("control", 1_000),
    delivery: num("delivery", 1_000),
    ack: num("ack", 1_000),
    turn: num("turn", 5_000),
    stall: num("stall", 800),
    interrupt: num("interrupt", 800),
    permission: num("permission", 1_000),
    closeGrace: num("close-grace", 300),
    termGrace: num("term-grace", 300)
  },
  slackMs: num("slack", 1_000),
  flood: num("flood", 100_000),
  sampleMs: num("sample", 1_000),
  heapToleranceMiB: num("heap-tolerance", 1),
  rssToleranceMiB: num("rss-tolerance", 4),
  judgeAfterSeconds: num("judge-after", 300)
}

const behaviour: Plan.Behaviour = {
  mix: knobs.mix,
  ids: knobs.ids,
  capacity: knobs.capacity,
  interruptRate: knobs.interruptRate,
  evictRate: knobs.evictRate,
  idleEvictRate: knobs.idleEvictRate,
  stallMs: knobs.timeouts.stall,
  pauseMs: knobs.pauseMs
}

/** The latest a started turn may settle: its turn deadline, then the interrupt's. */
const deadlineMs = knobs.timeouts.turn + knobs.timeouts.interrupt
/** How long the soak waits for a turn before it calls it unsettled. */
const hardLimitMs = deadlineMs + 10_000

const log = (line: string) => process.stderr.write(`${line}\n`)

if (raw("plan") !== undefined) {
  const count = num("plan", 5)
  for (let worker = 0; worker < knobs.concurrency; worker++) {
    const rng = Plan.makeRng(knobs.seed, worker)
    for (let index = 0; index < count; index++) {
      console.log(JSON.stringify(Plan.next(rng, worker, index, behaviour)))
    }
  }
  console.log(`digest ${Plan.digest(knobs.seed, knobs.concurrency, 256, behaviour)}`)
  process.exit(0)
}

// ---------------------------------------------------------------------------------------------------------------
// The host's log: written to .bench/soak.log, counted by kind
// ---------------------------------------------------------------------------------------------------------------

const outDir = Path.join(root, ".bench")
Fs.mkdirSync(outDir, { recursive: true })
const logFile = Fs.openSync(Path.join(outDir, "soak.log"), "w")

const logs = {
  lines: 0,
  bytes: 0,
  /** Protocol errors quoted one by one. */
  protocolQuoted: 0,
  /** Lines that count protocol errors not logged, and the errors they count. */
  protocolSummaries: 0,
  protocolSummarized: 0,
  retired: 0,
  other: {} as Record<string, number>
}

const countLine = (level: string, text: string) => {
  const line = `${new Date().toISOString()} ${level} ${text}\n`
  Fs.writeSync(logFile, line)
  logs.lines++
  logs.bytes += Buffer.byteLength(line)
  const summary = /^(\d+) more protocol errors in the last/.exec(text)
  if (text.startsWith("protocol error (")) logs.protocolQuoted++
  else if (summary !== null) {
    logs.protocolSummaries++
    logs.protocolSummarized += Number(summary[1])
  } else if (text.startsWith("session retired (")) logs.retired++
  else {
    const key = `${level} ${text.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, "<id>").replace(/\d+/g, "<n>").slice(0, 70)}`
    logs.other[key] = (logs.other[key] ?? 0) + 1
  }
}

const logger = Logger.make((options) => {
  const parts = Array.isArray(options.message) ? options.message : [options.message]
  const text = parts.map((part) => (typeof part === "string" ? part : String(part))).join(" ")
  countLine(options.logLevel, text.split("\n")[0]!)
})

// ---------------------------------------------------------------------------------------------------------------
// Tallies
// ---------------------------------------------------------------------------------------------------------------

const bump = (record: Record<string, number>, key: string, by = 1) => {
  record[key] = (record[key] ?? 0) + by
}

const stats = {
  actions: 0,
  turns: { started: 0, settled: 0, typed: 0, untyped: 0, unsettled: 0, late: 0, maxSettleMs: 0 },
  outcomes: {} as Record<string, number>,
  outcomesByFault: {} as Record<string, Record<string, number>>,
  /** The slowest settle of each fault's turns, ms from the send. */
  slowestByFault: {} as Record<string, number>,
  deliveryUncertain: 0,
  /** getOrCreate or send refused (no turn started), by error. */
  refused: {} as Record<string, number>,
  sessionsSeen: 0,
  hostInterrupts: {} as Record<string, number>,
  hostEvictions: {} as Record<string, number>,
  idleEvictions: {} as Record<string, number>,
  deferredAnswers: {} as Record<string, number>,
  policy: {} as Record<string, number>,
  examples: { untyped: [] as Array<string>, unsettled: [] as Array<string>, late: [] as Array<string> }
}

const tagOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : "untagged"

/** The kind of a settled turn's outcome; `typed` false for anything but a result or a tagged error. */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>): { readonly kind: string; readonly typed: boolean } => {
  if (Exit.isSuccess(exit)) return { kind: "Completed", typed: true }
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isSome(error)) {
    const e = error.value as {
      readonly _tag?: unknown
      readonly reason?: unknown
      readonly deliveryUncertain?: unknown
    }
    const tag = tagOf(e)
    if (tag === "untagged") return { kind: "untagged error", typed: false }
    const uncertain = e.deliveryUncertain === true
    if (uncertain) stats.deliveryUncertain++
    const kind = tag === "TurnInterrupted" ? `TurnInterrupted (${String(e.reason)})` : tag
    return { kind: uncertain ? `${kind}, delivery uncertain` : kind, typed: true }
  }
  return { kind: Cause.hasInterruptsOnly(exit.cause) ? "interruption" : "defect", typed: false }
}

const example = (list: Array<string>, text: string) => {
  if (list.length < 5) list.push(text)
}

// ---------------------------------------------------------------------------------------------------------------
// The host
// ---------------------------------------------------------------------------------------------------------------

const runId = randomUUID()
const leaders = new Set<number>()
const generations = new Map<string, number>()

/** Reads the permission word the fake put in the tool's input, and answers as the plan said. */
const policy = (permissionMs: number): Permission.Policy => (request) => {
  const word = String(request.input.soak ?? "")
  bump(stats.policy, word)
  switch (word) {
    case "allow":
      return Effect.succeed(Permission.allow())
    case "deny":
      return Effect.succeed(Permission.deny("the soak denies it"))
    case "deny-interrupt":
      return Effect.succeed(Permission.deny("the soak denies it and interrupts", { interrupt: true }))
    case "fail":
      return Effect.fail("the soak's policy failed")
    case "slow":
      return Effect.as(Effect.sleep(permissionMs * 2), Permission.allow())
    case "defer-answer":
    case "defer-expire":
      return Effect.succeed(Permission.defer)
    default:
      return Effect.succeed(Permission.deny(`unknown word ${word}`))
  }
}

const sessionOptions = (timeouts: Timeouts.Timeouts): ClaudeSession.Options => ({
  includePartialMessages: true,
  env: { set: { PATH: fakeEnv().PATH!, SOAK_MARK: runId } },
  timeouts,
  policy: policy(Duration.toMillis(timeouts.permission))
})

type Registry = ClaudeRegistry.ClaudeRegistry["Service"]

/** One turn of the plan, with the host's behaviour around it; never fails. */
const runTurn = (registry: Registry, options: ClaudeSession.Options, plan: Plan.Plan) =>
  Effect.gen(function*() {
    const sent = yield* Effect.exit(Effect.scoped(Effect.gen(function*() {
      const handle = yield* registry.getOrCreate(plan.id, options)
      if (generations.get(plan.id) !== handle.generation) {
        generations.set(plan.id, handle.generation)
        stats.sessionsSeen++
        const snapshot = yield* Effect.option(handle.snapshot)
        if (Option.isSome(snapshot) && snapshot.value.pid !== undefined) leaders.add(snapshot.value.pid)
      }
      const turn = yield* handle.send(plan.prompt)
      return { turn, generation: handle.generation }
    })))
    if (Exit.isFailure(sent)) {
      const error = Cause.findErrorOption(sent.cause)
      bump(stats.refused, Option.isSome(error) ? tagOf(error.value) : Cause.pretty(sent.cause).split("\n")[0]!)
      return
    }
    const { generation, turn } = sent.value
    stats.turns.started++
    const startedAt = performance.now()

    const around: Array<Effect.Effect<void>> = []
    if (plan.interruptAfterMs !== undefined) {
      around.push(Effect.gen(function*() {
        yield* Effect.sleep(plan.interruptAfterMs!)
        const phase = yield* Effect.orElseSucceed(turn.phase, () => "unknown")
        bump(stats.hostInterrupts, `interrupted while ${phase}`)
        yield* turn.interrupt
      }))
    }
    if (plan.evict !== undefined) {
      const { afterMs, force } = plan.evict
      around.push(Effect.gen(function*() {
        yield* Effect.sleep(afterMs)
        // Once asked for, the eviction runs to its end (bounded by its timeout) and is counted, even if the turn
        // settles first.
        yield* Effect.uninterruptible(Effect.gen(function*() {
          const exit = yield* Effect.exit(
            force
              ? registry.forceEvict(plan.id, { generation })
              : registry.evict(plan.id, { generation, timeout: knobs.timeouts.stall })
          )
          bump(
            stats.hostEvictions,
            `${force ? "forced" : "graceful"}: ${
              Exit.isSuccess(exit) ? "done" : tagOf(Option.getOrUndefined(Cause.findErrorOption(exit.cause)))
            }`
          )
        }))
      }))
    }
    if (plan.fault === "tool" && plan.answer === "defer-answer") {
      around.push(Effect.gen(function*() {
        // The request shows up among the session's pending ones; the host answers it a little later.
        let requestId: string | undefined
        while (requestId === undefined) {
          const pending = yield* Effect.exit(registry.pendingPermissions(plan.id, { generation }))
          if (Exit.isFailure(pending)) return bump(stats.deferredAnswers, "session gone before the request")
          requestId = pending.value.find((request) => request.turnId === turn.id)?.requestId
          if (requestId === undefined) yield* Effect.sleep(10)
        }
        yield* Effect.sleep(plan.answerAfterMs)
        const answered = yield* Effect.exit(
          registry.answerPermission(plan.id, requestId, Permission.allow(), { generation })
        )
        bump(
          stats.deferredAnswers,
          Exit.isSuccess(answered) ? "answered" : tagOf(Option.getOrUndefined(Cause.findErrorOption(answered.cause)))
        )
      }))
    }
    const behaviours = yield* Effect.forEach(around, (effect) => Effect.forkChild(effect))

    const settled = yield* Effect.timeoutOption(turn.settled, hardLimitMs)
    const elapsed = performance.now() - startedAt
    yield* Effect.forEach(behaviours, Fiber.interrupt)
    if (Option.isNone(settled)) {
      stats.turns.unsettled++
      bump(stats.outcomes, "unsettled")
      example(stats.examples.unsettled, plan.prompt)
      return
    }
    stats.turns.settled++
    stats.turns.maxSettleMs = Math.max(stats.turns.maxSettleMs, elapsed)
    if (elapsed > deadlineMs + knobs.slackMs) {
      stats.turns.late++
      example(stats.examples.late, `${plan.prompt}: ${Math.round(elapsed)} ms`)
    }
    const outcome = outcomeOf(settled.value)
    if (outcome.typed) stats.turns.typed++
    else {
      stats.turns.untyped++
      example(
        stats.examples.untyped,
        `${plan.prompt}: ${Cause.pretty((settled.value as Exit.Failure<unknown, unknown>).cause)}`
      )
    }
    bump(stats.outcomes, outcome.kind)
    bump(stats.outcomesByFault[plan.fault] ??= {}, outcome.kind)
    stats.slowestByFault[plan.fault] = Math.max(stats.slowestByFault[plan.fault] ?? 0, Math.round(elapsed))
  })

/** An eviction of an id, running or idle, that the plan asked for. */
const evictId = (registry: Registry, plan: Plan.Plan) =>
  Effect.gen(function*() {
    const force = plan.action === "force-evict"
    const exit = yield* Effect.exit(
      force ? registry.forceEvict(plan.id) : registry.evict(plan.id, { timeout: knobs.timeouts.stall })
    )
    bump(
      stats.idleEvictions,
      `${force ? "forced" : "graceful"}: ${
        Exit.isSuccess(exit) ? "done" : tagOf(Option.getOrUndefined(Cause.findErrorOption(exit.cause)))
      }`
    )
  })

const worker = (registry: Registry, options: ClaudeSession.Options, index: number, endAt: number) =>
  Effect.gen(function*() {
    const rng = Plan.makeRng(knobs.seed, index)
    for (let n = 0; performance.now() < endAt; n++) {
      const plan = Plan.next(rng, index, n, behaviour)
      stats.actions++
      if (plan.action === "turn") yield* runTurn(registry, options, plan)
      else yield* evictId(registry, plan)
      if (plan.pauseMs > 0) yield* Effect.sleep(plan.pauseMs)
    }
  })

/** The garbage flood through one real session: `lines` bad lines in one turn, then the session is evicted. */
const floodCheck = (registry: Registry, lines: number) =>
  Effect.gen(function*() {
    // Its own timeouts: bad lines are not progress, and reading this many takes longer than the soak's stall.
    const timeouts = yield* Timeouts.make({ turn: "2 minutes", stall: "1 minute", closeGrace: "300 millis" })
    const before = { ...logs }
    const memoryBefore = Memory.measure()
    // The host's peak during the flood (no GC forced: what the process holds while it reads).
    let peak = { heapUsed: 0, rss: 0 }
    const watch = setInterval(() => {
      const usage = process.memoryUsage()
      peak = { heapUsed: Math.max(peak.heapUsed, usage.heapUsed), rss: Math.max(peak.rss, usage.rss) }
    }, 50)
    let started = performance.now()
    const exit = yield* Effect.exit(Effect.scoped(Effect.gen(function*() {
      const handle = yield* registry.getOrCreate("flood", sessionOptions(timeouts))
      started = performance.now()
      const turn = yield* handle.send(`flood FRAMES:1 FAULT:garbage=${lines}`)
      return yield* turn.settled
    })))
    const turnMs = performance.now() - started
    clearInterval(watch)
    const afterTurn = { lines: logs.lines - before.lines, quoted: logs.protocolQuoted - before.protocolQuoted }
    yield* Effect.ignore(registry.evict("flood"))
    // Whatever the session still had to say about the flood was said when it closed.
    yield* Effect.sleep(100)
    return {
      lines,
      turn: Exit.isSuccess(exit) ? outcomeOf(exit.value).kind : Cause.pretty(exit.cause).split("\n")[0],
      turnMs: Math.round(turnMs),
      memory: { before: memoryBefore, peak, after: Memory.measure() },
      logLinesDuringTurn: afterTurn.lines,
      logLines: logs.lines - before.lines,
      logBytes: logs.bytes - before.bytes,
      quoted: logs.protocolQuoted - before.protocolQuoted,
      summaries: logs.protocolSummaries - before.protocolSummaries,
      summarized: logs.protocolSummarized - before.protocolSummarized
    }
  })

/** The registry's session starts so far: how many, and their mean and longest time (spawn to handshake), ms. */
const sessionStarts = Effect.map(Metric.snapshot, (snapshots) => {
  for (const snapshot of snapshots) {
    if (snapshot.id !== "tether_registry_session_start" || snapshot.type !== "Histogram") continue
    const state = snapshot.state
    return { count: state.count, meanMs: state.count > 0 ? state.sum / state.count : 0, maxMs: state.max }
  }
  return { count: 0, meanMs: 0, maxMs: 0 }
})

const metricCounts = Effect.map(Metric.snapshot, (snapshots) => {
  const out: Record<string, number> = {}
  for (const snapshot of snapshots) {
    if (snapshot.type !== "Counter") continue
    if (snapshot.id !== "tether_registry_evictions" && snapshot.id !== "tether_teardown_survivors") continue
    const attributes = snapshot.attributes === undefined ? "" : ` ${JSON.stringify(snapshot.attributes)}`
    out[`${snapshot.id}${attributes}`] = Number(snapshot.state.count)
  }
  return out
})

const program = Effect.gen(function*() {
  const timeouts = yield* Timeouts.make({
    startup: Duration.millis(knobs.timeouts.startup),
    control: Duration.millis(knobs.timeouts.control),
    delivery: Duration.millis(knobs.timeouts.delivery),
    ack: Duration.millis(knobs.timeouts.ack),
    turn: Duration.millis(knobs.timeouts.turn),
    stall: Duration.millis(knobs.timeouts.stall),
    interrupt: Duration.millis(knobs.timeouts.interrupt),
    permission: Duration.millis(knobs.timeouts.permission),
    closeGrace: Duration.millis(knobs.timeouts.closeGrace),
    termGrace: Duration.millis(knobs.timeouts.termGrace)
  })
  const options = sessionOptions(timeouts)

  const scope = yield* Scope.make()
  const layer = ClaudeRegistry.layer({
    capacity: knobs.capacity,
    idleTimeToLive: Duration.seconds(knobs.idleTtlSeconds)
  }).pipe(Layer.provideMerge(NodeTransport.layer({ executables: { claude: fakeClaude } })))
  const context = yield* Layer.buildWithScope(layer, scope)
  const registry = Context.get(context, ClaudeRegistry.ClaudeRegistry)
  const capabilities = Context.get(context, Transport.Transport).capabilities
  log(`containment: ${capabilities.containment}`)

  const flood = knobs.flood > 0 ? yield* floodCheck(registry, knobs.flood) : undefined
  if (flood !== undefined) log(`flood check: ${JSON.stringify(flood)}`)

  log(`soak: ${knobs.durationSeconds} s, ${knobs.concurrency} workers, seed ${knobs.seed}`)
  const startsBefore = yield* sessionStarts
  const samples: Array<Memory.Sample> = []
  const loop = monitorEventLoopDelay({ resolution: 20 })
  loop.enable()
  const t0 = performance.now()
  const endAt = t0 + knobs.durationSeconds * 1000
  const sample = Effect.gen(function*() {
    const memory = Memory.measure()
    samples.push({
      t: (performance.now() - t0) / 1000,
      ...memory,
      processes: Procs.count(Procs.find(runId, leaders)),
      sessions: yield* registry.size
    })
  })
  const sampler = yield* Effect.forkChild(Effect.forever(Effect.andThen(sample, Effect.sleep(knobs.sampleMs))))
  const progress = yield* Effect.forkChild(Effect.forever(Effect.andThen(
    Effect.sleep(10_000),
    Effect.sync(() =>
      log(
        `  ${Math.round((performance.now() - t0) / 1000)} s: ${stats.turns.started} turns started, ` +
          `${stats.turns.settled} settled, ${stats.sessionsSeen} sessions`
      )
    )
  )))
  yield* Effect.forEach(
    Array.from({ length: knobs.concurrency }, (_, i) => i),
    (i) => worker(registry, options, i, endAt),
    { concurrency: "unbounded", discard: true }
  )
  const soakSeconds = (performance.now() - t0) / 1000
  yield* sample
  yield* Fiber.interrupt(sampler)
  yield* Fiber.interrupt(progress)
  loop.disable()
  const atEnd = { sessions: yield* registry.size, processes: Procs.count(Procs.find(runId, leaders)).byMarker }
  const starts = yield* sessionStarts
  const sessionsStarted = {
    count: starts.count - startsBefore.count,
    meanMs: starts.count > startsBefore.count
      ? (starts.meanMs * starts.count - startsBefore.meanMs * startsBefore.count) / (starts.count - startsBefore.count)
      : 0,
    maxMs: starts.maxMs
  }

  log("releasing the registry and the transport")
  const closeStarted = performance.now()
  yield* Scope.close(scope, Exit.void)
  const shutdownMs = performance.now() - closeStarted
  const leftNow = Procs.find(runId, leaders)
  yield* Effect.sleep(1_000)
  const leftLater = Procs.count(Procs.find(runId, leaders))
  return {
    capabilities,
    flood,
    soakSeconds,
    sessionsStarted,
    samples,
    atEnd,
    shutdownMs,
    leftNow,
    leftLater,
    eventLoop: { p99Ms: loop.percentile(99) / 1e6, maxMs: loop.max / 1e6 },
    metrics: yield* metricCounts
  }
})

// ---------------------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------------------

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`
const perMin = (bytes: number) => `${bytes >= 0 ? "+" : ""}${(bytes / 2 ** 20).toFixed(2)} MiB/min`
const sorted = (record: Record<string, number>) => Object.entries(record).sort((a, b) => b[1] - a[1])
const list = (record: Record<string, number>) => sorted(record).map(([kind, n]) => `${kind} ${n}`).join(", ") || "none"
const row = (...cells: ReadonlyArray<string | number>) => `| ${cells.join(" | ")} |`

const report = (result: Effect.Success<typeof program>) => {
  const heap = Memory.trend(result.samples, (s) => s.heapUsed, knobs.heapToleranceMiB * 2 ** 20)
  const rss = Memory.trend(result.samples, (s) => s.rss, knobs.rssToleranceMiB * 2 ** 20)
  const left = result.leftNow
  // In a short run the warm-up (code loaded and compiled, pools filled) and the noise of a half of a minute or two
  // (RSS moves by megabytes as pages are committed) are most of the slope: it is shown, not judged.
  const judged = result.soakSeconds >= knobs.judgeAfterSeconds
  const verdict = (trend: Memory.Trend) =>
    !judged ? `not judged: under ${knobs.judgeAfterSeconds} s` : trend.levelsOff ? "levels off" : "FAIL: still growing"
  const checks = {
    everyTurnSettledTyped: stats.turns.started === stats.turns.typed,
    noTurnLate: stats.turns.late === 0,
    noProcessLeft: left.byMarker.length + left.byCgroup.length + left.bySession.length === 0,
    heapLevelsOff: heap.levelsOff || !judged,
    rssLevelsOff: rss.levelsOff || !judged,
    floodRateLimited: result.flood === undefined || result.flood.logLines <= 20
  }
  const json = {
    date: new Date().toISOString(),
    node: process.version,
    machine: `${Os.cpus()[0]?.model ?? "unknown cpu"} (${Os.cpus().length} cpus), ${Os.platform()} ${Os.arch()}`,
    loadAverage: Os.loadavg(),
    knobs,
    scheduleDigest: Plan.digest(knobs.seed, knobs.concurrency, 256, behaviour),
    containment: result.capabilities.containment,
    soakSeconds: result.soakSeconds,
    actions: stats.actions,
    sessionsStarted: result.sessionsStarted,
    turns: stats.turns,
    outcomes: stats.outcomes,
    outcomesByFault: stats.outcomesByFault,
    deliveryUncertain: stats.deliveryUncertain,
    refused: stats.refused,
    host: {
      interrupts: stats.hostInterrupts,
      evictionsDuringTurns: stats.hostEvictions,
      evictions: stats.idleEvictions,
      deferredAnswers: stats.deferredAnswers,
      policy: stats.policy
    },
    atEnd: result.atEnd,
    shutdownMs: result.shutdownMs,
    processesLeft: {
      atRelease: {
        byMarker: left.byMarker.map((p) => `${p.pid} ${p.args}`),
        byCgroup: left.byCgroup.map((p) => `${p.pid} ${p.args}`),
        bySession: left.bySession.map((p) => `${p.pid} ${p.args}`),
        hostChildren: left.children.map((p) => `${p.pid} ${p.args}`)
      },
      afterOneSecond: result.leftLater
    },
    memory: { gcBeforeSample: Memory.canCollect, heap, rss },
    eventLoop: result.eventLoop,
    log: logs,
    flood: result.flood,
    metrics: result.metrics,
    examples: stats.examples,
    checks,
    samples: result.samples
  }
  Fs.writeFileSync(Path.join(outDir, "soak.json"), JSON.stringify(json, null, 2) + "\n")

  const t = stats.turns
  const starts = result.sessionsStarted
  const most = (pick: (sample: Memory.Sample) => number) => Math.max(0, ...result.samples.map(pick))
  const flood = result.flood
  const ok = (check: boolean, failure = "FAIL") => (check ? "ok" : failure)
  const lines = [
    `### Soak: ${Math.round(result.soakSeconds)} s, ${knobs.concurrency} workers, capacity ${knobs.capacity}, ` +
    `seed ${knobs.seed} (schedule ${json.scheduleDigest}), containment ${result.capabilities.containment}`,
    "",
    row("check", "figure", "verdict"),
    row("---", "---", "---"),
    row(
      "sessions started (spawn to handshake: mean / max)",
      `${starts.count} (${Math.round(starts.meanMs)} / ${Math.round(starts.maxMs)} ms)`,
      `${stats.actions} actions`
    ),
    row(
      "turns started / settled with a typed outcome",
      `${t.started} / ${t.typed}`,
      ok(checks.everyTurnSettledTyped, `FAIL (${t.untyped} untyped, ${t.unsettled} unsettled)`)
    ),
    row(
      `turns settled after their deadlines (+${knobs.slackMs} ms)`,
      `${t.late} (slowest ${Math.round(t.maxSettleMs)} ms, deadline ${deadlineMs} ms)`,
      ok(checks.noTurnLate)
    ),
    row(
      "processes seen during the run, at most: by marker / by cgroup / by session",
      `${most((s) => s.processes.byMarker)} / ${most((s) => s.processes.byCgroup)} / ${
        most((s) => s.processes.bySession)
      }`,
      "the checks see live processes"
    ),
    row(
      "processes left after release: by marker / by cgroup / by session",
      `${left.byMarker.length} / ${left.byCgroup.length} / ${left.bySession.length}`,
      ok(checks.noProcessLeft)
    ),
    row("heap (after GC): start → end (max)", `${mib(heap.start)} → ${mib(heap.end)} (${mib(heap.max)})`, ""),
    row(
      "heap slope: first half → second half",
      `${perMin(heap.firstHalf)} → ${perMin(heap.secondHalf)}`,
      verdict(heap)
    ),
    row("RSS: start → end (max)", `${mib(rss.start)} → ${mib(rss.end)} (${mib(rss.max)})`, ""),
    row("RSS slope: first half → second half", `${perMin(rss.firstHalf)} → ${perMin(rss.secondHalf)}`, verdict(rss)),
    row(`registry shutdown (${result.atEnd.sessions} sessions)`, `${Math.round(result.shutdownMs)} ms`, ""),
    row(
      "event loop delay p99 / max",
      `${result.eventLoop.p99Ms.toFixed(0)} / ${result.eventLoop.maxMs.toFixed(0)} ms`,
      ""
    ),
    ...(flood === undefined ? [] : [
      row(
        `garbage flood: ${flood.lines.toLocaleString("en-US")} bad lines in one turn (${flood.turnMs} ms) → log lines`,
        `${flood.logLines} (${flood.quoted} quoted, ${flood.summaries} summaries counting ${flood.summarized})`,
        ok(checks.floodRateLimited)
      )
    ]),
    row(
      "host log over the soak",
      `${logs.lines} lines, ${(logs.bytes / 1024).toFixed(0)} KiB (${logs.protocolQuoted} protocol errors quoted, ` +
        `${logs.protocolSummarized} counted in ${logs.protocolSummaries} summaries, ${logs.retired} retirements)`,
      ""
    ),
    "",
    row("outcome", "turns"),
    row("---", "---"),
    ...sorted(stats.outcomes).map(([kind, n]) => row(kind, n)),
    row("(of which delivery uncertain)", stats.deliveryUncertain),
    "",
    row("fault", "outcomes", "slowest settle"),
    row("---", "---", "---"),
    ...Plan.faults.filter((fault) => stats.outcomesByFault[fault] !== undefined).map((fault) =>
      row(fault, list(stats.outcomesByFault[fault]!), `${stats.slowestByFault[fault]} ms`)
    ),
    "",
    `Refused before a turn started: ${list(stats.refused)}.`,
    `Host interrupts: ${list(stats.hostInterrupts)}; evictions during turns: ${list(stats.hostEvictions)}; ` +
    `other evictions: ${list(stats.idleEvictions)}; deferred permission answers: ${list(stats.deferredAnswers)}.`,
    ""
  ]
  console.log(lines.join("\n"))
  log(`wrote ${Path.join(outDir, "soak.json")} and ${Path.join(outDir, "soak.log")}`)
  return Object.values(checks).every(Boolean)
}

const fiber = Effect.runFork(program.pipe(Effect.provide(Logger.layer([logger]))))
// Ctrl-C interrupts the soak: its scopes close, so its sessions are torn down.
process.once("SIGINT", () => fiber.interruptUnsafe())
const watchdog = setTimeout(() => {
  log(`soak: still running ${knobs.durationSeconds * 1000 + hardLimitMs + 120_000} ms in: giving up`)
  log(JSON.stringify(stats))
  process.exit(2)
}, knobs.durationSeconds * 1000 + hardLimitMs + 120_000)
watchdog.unref()
fiber.addObserver((exit) => {
  Fs.closeSync(logFile)
  if (Exit.isFailure(exit)) {
    console.error(Cause.pretty(exit.cause))
    process.exit(1)
  }
  process.exit(report(exit.value) ? 0 : 1)
})
