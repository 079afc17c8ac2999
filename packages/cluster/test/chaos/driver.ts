/**
 * The chaos suite's driver (`pnpm chaos`, and its short version in `Chaos.test.ts`): a cluster of real processes on
 * 127.0.0.1 (runner processes, a client process, the fast fake CLI in processes of their own, PostgreSQL behind a
 * proxy), driven from outside through faults, one after the other, then mixed: SIGKILL and restart of a runner,
 * SIGSTOP of a runner for longer than the lock TTL, the database cut off (and for longer), the database slowed, the
 * client killed mid-turn and restarted, a runner's event loop loaded.
 *
 * What it counts comes from outside the cluster: the client's journal (what it sent and what became of each prompt),
 * the fake CLIs' prompt log (every execution, with its session and runner), the turn ledger in the database, and
 * /proc (which CLIs live, for which session, every 200 ms). Per fault: prompts sent, succeeded, failed typed (by tag
 * and disposition), untyped, hung, executed twice, executed but reported failed (the ledger has it completed, the
 * caller's last word was a failure), sessions with two live CLIs (and for how long), CLIs of dead runners still alive
 * at the fault's end, failover (for the sessions of a runner killed or frozen: from the hit to the first answer to a
 * prompt executed after it, elsewhere for a killed runner, the first and the last such session).
 * After the run: CLIs left. {@link verdict} lists what must never happen.
 */
import { PgClient } from "@effect/sql-pg"
import { Postgres } from "@tether/testing"
import { Data, Duration, Effect, Exit, Layer, Redacted, Schedule, Scope } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Entry } from "./client.ts"
import * as Proxy from "./proxy.ts"
import { type Locks, promptIdIn, toleranceOf, variables } from "./world.ts"

// ---------------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------------

/** A fault, alone, or several of them at once (`mixed`). */
export type Fault =
  | { readonly _tag: "kill"; readonly times: number }
  | { readonly _tag: "stop"; readonly millis: number }
  | { readonly _tag: "database"; readonly millis: number }
  | { readonly _tag: "slow"; readonly millis: number; readonly latency: number }
  | { readonly _tag: "client"; readonly times: number }
  | { readonly _tag: "cpu"; readonly millis: number }
  | { readonly _tag: "mixed"; readonly millis: number }

export interface Options {
  readonly sessions: number
  readonly runners: number
  readonly faults: ReadonlyArray<Fault>
  /** How long a turn of the fake takes, and the client's pause between two prompts of a session. */
  readonly turnMillis: number
  readonly thinkMillis: number
  /** Quiet time before the first fault. */
  readonly warmupMillis: number
  /** After a fault: how long the sessions have to answer again before the next one. */
  readonly settleMillis: number
  /** An attempt unanswered this long is hung. */
  readonly hangMillis: number
  /** How long the client retries a prompt whose failure is retryable. */
  readonly retryMillis: number
  readonly log?: ((line: string) => void) | undefined
  /** Where to copy the run's journal, prompt log and ledger when it ends (kept for reading a failure). */
  readonly keep?: string | undefined
  /** `false`: the runners hold no host lease (NodeCluster's `lease: false`), to compare with. Default: they do. */
  readonly lease?: boolean | undefined
  /** The nodes' shard lock settings (world.ts `shardingOf`). Default: `fast`. */
  readonly locks?: Locks | undefined
}

/** The name of a fault in the table. */
export const faultName = (fault: Fault): string => {
  switch (fault._tag) {
    case "kill":
      return `SIGKILL + restart a runner ×${fault.times}`
    case "stop":
      return `SIGSTOP a runner ${fault.millis / 1000} s`
    case "database":
      return `database cut off ${fault.millis / 1000} s`
    case "slow":
      return `database +${fault.latency} ms each way, ${fault.millis / 1000} s`
    case "client":
      return `client SIGKILLed mid-turn + restarted ×${fault.times}`
    case "cpu":
      return `a runner's event loop loaded ${fault.millis / 1000} s`
    case "mixed":
      return `mixed (kill, stop, database cut, slow, cpu, client) ${fault.millis / 1000} s`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------------------------

export interface FaultReport {
  readonly fault: string
  readonly sent: number
  readonly succeeded: number
  /** `<tag> (<disposition>)` → count, of prompts whose last outcome was a typed failure. */
  readonly typed: Readonly<Record<string, number>>
  readonly untyped: number
  readonly hung: number
  readonly executedTwice: number
  readonly completedReportedFailed: number
  /** Sessions that had two live CLIs at once during the fault, and the longest such time (ms). */
  readonly twoClis: number
  readonly twoClisMillis: number
  /** CLIs of runners that are gone, still alive when the fault's phase ended. */
  readonly leftBehind: number
  /** CLIs of a runner when it was frozen, and still alive just before it was resumed (past its lease, none). */
  readonly frozenHad: number
  readonly frozenLeft: number
  /** Sessions whose runner was hit; of those, how many answered again from elsewhere, first and last (ms). */
  readonly affected: number
  readonly recovered: number
  readonly failoverFirstMillis: number | undefined
  readonly failoverLastMillis: number | undefined
  /** Sessions whose prompts ran in a CLI during the fault's phase that was not theirs before it (started again). */
  readonly restarted: number
  /** A database cut shorter than the nodes' outage tolerance: it must restart no session. */
  readonly withinTolerance: boolean
}

export interface Report {
  readonly faults: ReadonlyArray<FaultReport>
  /** CLIs of the run alive after every runner stopped. */
  readonly orphans: number
  /** Untyped outcomes in full (the first few), for the log. */
  readonly untypedDetails: ReadonlyArray<string>
  readonly millis: number
}

/** What must never happen, one line each; empty when the run passed. */
export const verdict = (report: Report): ReadonlyArray<string> => {
  const problems: Array<string> = []
  for (const row of report.faults) {
    if (row.untyped > 0) problems.push(`${row.fault}: ${row.untyped} untyped outcome(s)`)
    if (row.hung > 0) problems.push(`${row.fault}: ${row.hung} hung prompt(s)`)
    if (row.executedTwice > 0) problems.push(`${row.fault}: ${row.executedTwice} prompt(s) executed twice`)
    if (row.completedReportedFailed > 0) {
      problems.push(`${row.fault}: ${row.completedReportedFailed} completed turn(s) reported failed`)
    }
    if (row.sent > 0 && row.succeeded === 0) problems.push(`${row.fault}: none of its ${row.sent} prompts succeeded`)
    if (row.withinTolerance && row.restarted > 0) {
      problems.push(`${row.fault}: ${row.restarted} session(s) started again within the outage tolerance`)
    }
  }
  if (report.orphans > 0) problems.push(`${report.orphans} CLI(s) left after the run`)
  return problems
}

const seconds = (millis: number | undefined) => millis === undefined ? "—" : `${(millis / 1000).toFixed(1)} s`

/** The report as a markdown table. */
export const render = (report: Report): string => {
  const header = [
    "fault",
    "sent",
    "ok",
    "failed typed (tag, disposition)",
    "untyped",
    "hung",
    "run twice",
    "completed, reported failed",
    "sessions started again",
    "two live CLIs (sessions, longest)",
    "dead runners' CLIs left",
    "frozen runner's CLIs: at its freeze / at its resume",
    "hit runner's sessions: first / last answer after the hit (answered/affected)"
  ]
  const rows = report.faults.map((row) => [
    row.fault,
    String(row.sent),
    String(row.succeeded),
    Object.entries(row.typed).map(([key, n]) => `${key}: ${n}`).join("; ") || "—",
    String(row.untyped),
    String(row.hung),
    String(row.executedTwice),
    String(row.completedReportedFailed),
    String(row.restarted),
    row.twoClis === 0 ? "0" : `${row.twoClis}, ${seconds(row.twoClisMillis)}`,
    String(row.leftBehind),
    row.frozenHad === 0 ? "—" : `${row.frozenHad} / ${row.frozenLeft}`,
    row.affected === 0
      ? "—"
      : `${seconds(row.failoverFirstMillis)} / ${seconds(row.failoverLastMillis)} (${row.recovered}/${row.affected})`
  ])
  return [
    `| ${header.join(" | ")} |`,
    `| ${header.map((_, i) => i === 0 || i === 3 || i === 12 ? "---" : "---:").join(" | ")} |`,
    ...rows.map((cells) => `| ${cells.join(" | ")} |`),
    "",
    `CLIs left after the run: ${report.orphans}. Took ${seconds(report.millis)}.`
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------------------------

const here = import.meta.dirname

const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

class StartFailed extends Data.TaggedError("StartFailed")<{ readonly message: string }> {}

interface Child {
  readonly name: string
  readonly process: ChildProcess.ChildProcess
  readonly output: () => string
  readonly alive: () => boolean
}

const alive = (child: ChildProcess.ChildProcess) => child.exitCode === null && child.signalCode === null

/** Waits (polling) for `condition`, at most `millis`; true when it held. */
const waitFor = (condition: () => boolean, millis: number) =>
  Effect.gen(function*() {
    const until = Date.now() + millis
    while (!condition()) {
      if (Date.now() > until) return false
      yield* Effect.sleep("100 millis")
    }
    return true
  })

/** A Node process of the suite, stopped with the scope (SIGCONT, SIGTERM, then SIGKILL after `grace`). */
const spawn = (name: string, script: string, env: Record<string, string>, ready: string, grace: number) =>
  Effect.gen(function*() {
    let output = ""
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [Path.join(here, script)], {
          cwd: here,
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) =>
        Effect.callback<void>((resume) => {
          if (!alive(child)) return resume(Effect.void)
          const kill = setTimeout(() => child.kill("SIGKILL"), grace)
          child.once("exit", () => {
            clearTimeout(kill)
            resume(Effect.void)
          })
          child.kill("SIGCONT")
          child.kill("SIGTERM")
        })
    )
    const keep = (data: string) => {
      output = (output + data).slice(-20_000)
    }
    child.stdout!.setEncoding("utf8").on("data", keep)
    child.stderr!.setEncoding("utf8").on("data", keep)
    const started = yield* waitFor(() => output.includes(ready) || !alive(child), 60_000)
    if (!started || !alive(child)) return yield* new StartFailed({ message: `${name} did not start:\n${output}` })
    return { name, process: child, output: () => output, alive: () => alive(child) } satisfies Child
  })

/**
 * A process started again until it starts, as an orchestrator restarts one (a runner or client started while the
 * database is cut off fails at start: its layers cannot reach it), for at most a minute.
 */
const retried = <A>(start: Effect.Effect<A, StartFailed>) =>
  start.pipe(Effect.retry({ schedule: Schedule.spaced("1 second"), times: 60 }), Effect.orDie)

// ---------------------------------------------------------------------------------------------------------------
// /proc: the run's CLIs
// ---------------------------------------------------------------------------------------------------------------

interface Cli {
  readonly pid: number
  readonly session: string
  readonly runner: string
}

/** The live fake CLIs of this run (their environment carries the run's marker), with their session and runner. */
const clisOf = (run: string): ReadonlyArray<Cli> => {
  const found: Array<Cli> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8")
      if (!cmdline.includes("fast-claude")) continue
      const environ = Fs.readFileSync(`/proc/${entry}/environ`, "utf8").split("\0")
      if (!environ.includes(`${variables.run}=${run}`)) continue
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      const tag = environ.find((line) => line.startsWith("FAST_CLAUDE_PROMPT_LOG_TAG="))?.slice(27) ?? "@"
      const at = tag.lastIndexOf("@")
      found.push({ pid: Number(entry), session: tag.slice(0, at), runner: tag.slice(at + 1) })
    } catch {
      // gone meanwhile
    }
  }
  return found
}

// ---------------------------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------------------------

interface Execution {
  readonly pid: number
  readonly session: string
  readonly runner: string
  readonly at: number
  readonly promptId: string
}

interface Phase {
  readonly fault: Fault
  readonly start: number
  end: number
  /** Per hit runner: when it was hit and its mark. */
  readonly hits: Array<{ readonly at: number; readonly runner: string }>
  readonly overlaps: Map<string, number>
  leftBehind: number
  frozenHad: number
  frozenLeft: number
}

const readLines = <A>(file: string): ReadonlyArray<A> =>
  Fs.existsSync(file)
    ? Fs.readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line) as A)
    : []

/** Runs the suite; the report's {@link verdict} says whether it passed. */
export const run = (options: Options) =>
  Effect.gen(function*() {
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
    const began = Date.now()
    const runId = `chaos-${process.pid}-${began}`
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-chaos-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const promptLog = Path.join(dir, "prompts.jsonl")
    const journal = Path.join(dir, "journal.jsonl")
    const stopFile = Path.join(dir, "stop")
    const sessions = Array.from({ length: options.sessions }, (_, i) => `s${i}`)

    const server = yield* Postgres.make()
    const proxy = yield* Proxy.make(server.port)
    const url = Redacted.value(server.url).replace(`:${server.port}/`, `:${proxy.port}/`)
    log(
      `chaos: PostgreSQL on ${server.port} behind ${proxy.port}; ${options.runners} runners, ${sessions.length} sessions`
    )

    // Every CLI of the run is killed when the run ends, whatever happened (an orphan is counted before that).
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const cli of clisOf(runId)) {
          try {
            process.kill(cli.pid, "SIGKILL")
          } catch {
            // gone
          }
        }
      })
    )

    // Runners: each in a scope of its own, so that one can be killed and another started in its place.
    const runners: Array<{ mark: string; child: Child; scope: Scope.Closeable }> = []
    let incarnations = 0
    const startRunner = (slot: number) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const port = yield* freePort
        const mark = `r${slot}.${incarnations++}`
        const child = yield* retried(
          spawn(
            `runner ${mark}`,
            "runner.ts",
            {
              [variables.database]: url,
              [variables.port]: String(port),
              [variables.run]: runId,
              [variables.runnerMark]: mark,
              [variables.promptLog]: promptLog,
              [variables.state]: Path.join(dir, "state"),
              [variables.lease]: options.lease === false ? "off" : "on",
              [variables.locks]: options.locks ?? "fast"
            },
            "runner ready",
            30_000
          ).pipe(Scope.provide(scope))
        )
        runners[slot] = { mark, child, scope }
        log(`chaos: runner ${mark} on ${port} (pid ${child.process.pid})`)
      })
    yield* Effect.addFinalizer(() =>
      Effect.forEach(runners, (runner) => Scope.close(runner.scope, Exit.void), {
        concurrency: "unbounded",
        discard: true
      })
    )
    Fs.mkdirSync(Path.join(dir, "state"), { recursive: true })
    yield* Effect.forEach(Array.from({ length: options.runners }, (_, i) => i), startRunner, {
      concurrency: "unbounded",
      discard: true
    })

    let client: { child: Child; scope: Scope.Closeable } | undefined
    const startClient = Effect.gen(function*() {
      const scope = yield* Scope.make()
      const child = yield* retried(
        spawn(
          "client",
          "client.ts",
          {
            [variables.database]: url,
            [variables.locks]: options.locks ?? "fast",
            [variables.journal]: journal,
            [variables.stop]: stopFile,
            [variables.sessions]: sessions.join(","),
            [variables.turnMillis]: String(options.turnMillis),
            [variables.thinkMillis]: String(options.thinkMillis),
            [variables.hangMillis]: String(options.hangMillis),
            [variables.retryMillis]: String(options.retryMillis)
          },
          " ready: ",
          5_000
        ).pipe(Scope.provide(scope))
      )
      client = { child, scope }
    })
    yield* Effect.addFinalizer(() => client === undefined ? Effect.void : Scope.close(client.scope, Exit.void))
    yield* startClient

    // /proc, every 200 ms: which sessions have two live CLIs, credited to the phase running then.
    const phases: Array<Phase> = []
    let sampling = true
    yield* Effect.forkScoped(Effect.gen(function*() {
      let last = Date.now()
      while (sampling) {
        yield* Effect.sleep("200 millis")
        const now = Date.now()
        const bySession = new Map<string, number>()
        for (const cli of clisOf(runId)) bySession.set(cli.session, (bySession.get(cli.session) ?? 0) + 1)
        const phase = phases.at(-1)
        if (phase !== undefined) {
          for (const [session, count] of bySession) {
            if (count > 1) phase.overlaps.set(session, (phase.overlaps.get(session) ?? 0) + (now - last))
          }
        }
        last = now
      }
    }))

    /** Whether every session answered a prompt sent after `since`. */
    const answeredSince = (since: number) => {
      const sentAt = new Map<string, number>()
      const answered = new Set<string>()
      for (const entry of readLines<Entry>(journal)) {
        if (entry.k === "sent") sentAt.set(entry.promptId, entry.at)
        else if (entry.k === "final" && entry.outcome === "ok" && (sentAt.get(entry.promptId) ?? 0) >= since) {
          answered.add(entry.session)
        }
      }
      return sessions.every((session) => answered.has(session))
    }
    const settle = (since: number) => waitFor(() => answeredSince(since), options.settleMillis)

    const signal = (slot: number, name: NodeJS.Signals) => {
      const runner = runners[slot]
      if (runner.child.alive()) runner.child.process.kill(name)
    }
    const kill = (phase: Phase, slot: number) =>
      Effect.gen(function*() {
        const runner = runners[slot]
        phase.hits.push({ at: Date.now(), runner: runner.mark })
        log(`chaos: SIGKILL ${runner.mark}`)
        signal(slot, "SIGKILL")
        yield* waitFor(() => !runner.child.alive(), 5_000)
        yield* Scope.close(runner.scope, Exit.void)
        yield* Effect.sleep("1 second")
        yield* startRunner(slot)
      })
    const stop = (phase: Phase, slot: number, millis: number) =>
      Effect.gen(function*() {
        phase.hits.push({ at: Date.now(), runner: runners[slot].mark })
        log(`chaos: SIGSTOP ${runners[slot].mark} for ${millis} ms`)
        const had = clisOf(runId).filter((cli) => cli.runner === runners[slot].mark).length
        signal(slot, "SIGSTOP")
        yield* Effect.sleep(Duration.millis(millis))
        const frozen = runners[slot].mark
        phase.frozenHad += had
        phase.frozenLeft += clisOf(runId).filter((cli) => cli.runner === frozen).length
        signal(slot, "SIGCONT")
      })
    const cut = (millis: number) =>
      Effect.gen(function*() {
        log(`chaos: database cut off for ${millis} ms`)
        proxy.cut()
        yield* Effect.sleep(Duration.millis(millis))
        proxy.restore()
      })
    const slow = (millis: number, latency: number) =>
      Effect.gen(function*() {
        log(`chaos: database +${latency} ms for ${millis} ms`)
        proxy.delay(latency)
        yield* Effect.sleep(Duration.millis(millis))
        proxy.delay(0)
      })
    const killClient = Effect.gen(function*() {
      // Mid-turn: a moment after a prompt was sent.
      const before = readLines<Entry>(journal).length
      yield* waitFor(() => readLines<Entry>(journal).length > before, 5_000)
      yield* Effect.sleep(Duration.millis(Math.min(50, options.turnMillis / 2)))
      log(`chaos: SIGKILL the client`)
      if (client !== undefined) {
        client.child.process.kill("SIGKILL")
        yield* waitFor(() => !client!.child.alive(), 5_000)
        yield* Scope.close(client.scope, Exit.void)
      }
      yield* Effect.sleep("1 second")
      yield* startClient
    })
    const load = (slot: number, millis: number) =>
      Effect.gen(function*() {
        log(`chaos: loading ${runners[slot].mark} for ${millis} ms`)
        signal(slot, "SIGUSR2")
        yield* Effect.sleep(Duration.millis(millis))
        signal(slot, "SIGUSR2")
      })

    // The driver's own client, past the proxy (a cut does not stop it): the shard locks during the run, the ledger
    // at its end.
    const database = yield* Layer.build(PgClient.layer({ url: server.url })).pipe(Effect.orDie)
    /** Which runner holds each shard's lock. */
    const shardLocks = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ shard_id: string; address: string }>`SELECT shard_id, address FROM cluster_locks`
      return rows.map((row) => `${row.shard_id}@${row.address}`).sort().join(",")
    }).pipe(Effect.provideContext(database), Effect.orDie)
    /**
     * Until no shard's lock has changed hands for `quietMillis` (at most `settleMillis`): a runner back from the
     * phase before (resumed, or restarted) takes its shards back some time after its sessions answered again, and a
     * session moved then is that phase's, not the next one's. Before a database cut, whose verdict counts the
     * sessions started again during it.
     */
    const placementSettled = (quietMillis: number) =>
      Effect.gen(function*() {
        const began = Date.now()
        const until = began + options.settleMillis
        let last = yield* shardLocks
        let since = began
        let moves = 0
        while (Date.now() < until) {
          yield* Effect.sleep("250 millis")
          const now = yield* shardLocks
          if (now !== last) {
            last = now
            since = Date.now()
            moves++
          } else if (Date.now() - since >= quietMillis) {
            log(`chaos: the shards' locks settled (${moves} change(s) in ${since - began} ms)`)
            return true
          }
        }
        log(`chaos: the shards' locks still moved ${options.settleMillis} ms after the phase before`)
        return false
      })

    yield* Effect.sleep(Duration.millis(options.warmupMillis))
    let victim = 0
    const nextVictim = () => {
      const slot = victim
      victim = (victim + 1) % runners.length
      return slot
    }
    for (const fault of options.faults) {
      // Three lock refreshes (1 s with the fast locks) or two (5 s with the defaults) without a shard changing hands.
      if (fault._tag === "database") yield* placementSettled((options.locks ?? "fast") === "fast" ? 3_000 : 10_000)
      const phase: Phase = {
        fault,
        start: Date.now(),
        end: 0,
        hits: [],
        overlaps: new Map(),
        leftBehind: 0,
        frozenHad: 0,
        frozenLeft: 0
      }
      phases.push(phase)
      log(`chaos: ${faultName(fault)}`)
      switch (fault._tag) {
        case "kill": {
          for (let i = 0; i < fault.times; i++) {
            yield* kill(phase, nextVictim())
            yield* settle(Date.now())
          }
          break
        }
        case "stop": {
          // The runner with the most live CLIs: a frozen runner's agents are what is watched.
          const slot = nextVictim()
          const count = (mark: string) => clisOf(runId).filter((cli) => cli.runner === mark).length
          const busiest = runners.reduce(
            (best, runner, i) => count(runner.mark) > count(runners[best].mark) ? i : best,
            slot
          )
          yield* stop(phase, busiest, fault.millis)
          break
        }
        case "database": {
          yield* cut(fault.millis)
          break
        }
        case "slow": {
          yield* slow(fault.millis, fault.latency)
          break
        }
        case "client": {
          for (let i = 0; i < fault.times; i++) {
            yield* killClient
            yield* settle(Date.now())
          }
          break
        }
        case "cpu": {
          yield* load(nextVictim(), fault.millis)
          break
        }
        case "mixed": {
          // Overlapping: a kill at once, a slow database and a loaded runner, a client killed, a freeze, a cut.
          const third = Math.max(1_000, Math.floor(fault.millis / 3))
          const [a, b, c] = [nextVictim(), nextVictim(), nextVictim()]
          yield* Effect.all([
            kill(phase, a),
            Effect.andThen(Effect.sleep("500 millis"), slow(2 * third, 50)),
            Effect.andThen(Effect.sleep("500 millis"), load(b, 2 * third)),
            Effect.andThen(Effect.sleep(Duration.millis(third)), killClient),
            Effect.andThen(Effect.sleep(Duration.millis(third)), stop(phase, c, 7_000)),
            Effect.andThen(Effect.sleep(Duration.millis(2 * third)), cut(Math.min(5_000, third)))
          ], { concurrency: "unbounded", discard: true })
          break
        }
      }
      yield* settle(Date.now())
      // The CLIs of runners that are gone, still alive now.
      const live = new Set(runners.filter((runner) => runner.child.alive()).map((runner) => runner.mark))
      phase.leftBehind = clisOf(runId).filter((cli) => !live.has(cli.runner)).length
      phase.end = Date.now()
    }

    // The end: the client stops sending and waits for what it has in flight; the runners drain.
    Fs.writeFileSync(stopFile, "")
    const current = client as { child: Child; scope: Scope.Closeable } | undefined
    if (current !== undefined) {
      yield* waitFor(() => !current.child.alive(), options.hangMillis + 30_000)
      yield* Scope.close(current.scope, Exit.void)
    }
    sampling = false
    yield* Effect.forEach(runners, (runner) => Scope.close(runner.scope, Exit.void), {
      concurrency: "unbounded",
      discard: true
    })
    // The keepers of the runners' CLIs end them as the runners go: give them a moment.
    yield* waitFor(() => clisOf(runId).length === 0, 5_000)
    const orphans = clisOf(runId).length

    // The ledger: which prompts the database has completed.
    const completed = yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<
        { prompt_id: string; state: string; generation: unknown; created_at: unknown }
      >`SELECT prompt_id, state, generation, created_at FROM tether_turns`
      if (options.keep !== undefined) {
        Fs.mkdirSync(options.keep, { recursive: true })
        Fs.copyFileSync(journal, Path.join(options.keep, "journal.jsonl"))
        if (Fs.existsSync(promptLog)) Fs.copyFileSync(promptLog, Path.join(options.keep, "prompts.jsonl"))
        Fs.writeFileSync(
          Path.join(options.keep, "ledger.jsonl"),
          rows.map((row) => JSON.stringify(row, (_, v) => typeof v === "bigint" ? String(v) : v)).join("\n") + "\n"
        )
      }
      return new Set(rows.filter((row) => row.state === "completed").map((row) => row.prompt_id))
    }).pipe(Effect.provideContext(database), Effect.orDie)

    return analyse({ options, phases, journal, promptLog, completed, orphans, millis: Date.now() - began })
  }).pipe(Effect.scoped)

// ---------------------------------------------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------------------------------------------

const analyse = (input: {
  readonly options: Options
  readonly phases: ReadonlyArray<Phase>
  readonly journal: string
  readonly promptLog: string
  readonly completed: ReadonlySet<string>
  readonly orphans: number
  readonly millis: number
}): Report => {
  const entries = readLines<Entry>(input.journal)
  const executions: Array<Execution> = readLines<{ pid: number; tag: string; at: number; prompt: string }>(
    input.promptLog
  ).flatMap((line) => {
    const promptId = promptIdIn(line.prompt)
    if (promptId === undefined) return []
    const at = line.tag.lastIndexOf("@")
    return [{ pid: line.pid, session: line.tag.slice(0, at), runner: line.tag.slice(at + 1), at: line.at, promptId }]
  })
  const runs = new Map<string, Array<Execution>>()
  for (const execution of executions) runs.set(execution.promptId, [...(runs.get(execution.promptId) ?? []), execution])

  interface Prompt {
    readonly session: string
    readonly sentAt: number
    final: Exclude<Entry, { readonly k: "sent" | "open" }> | undefined
    untyped: boolean
  }
  const prompts = new Map<string, Prompt>()
  const untypedDetails: Array<string> = []
  for (const entry of entries) {
    if (entry.k === "sent") {
      prompts.set(entry.promptId, { session: entry.session, sentAt: entry.at, final: undefined, untyped: false })
    } else if (entry.k === "open") {
      if (entry.outcome.length > 0 && !/^[A-Z]/.test(entry.outcome)) {
        untypedDetails.push(`open ${entry.session}: ${entry.outcome}`)
      }
    } else {
      const prompt = prompts.get(entry.promptId)
      if (prompt === undefined) continue
      if (entry.outcome === "untyped") {
        prompt.untyped = true
        if (untypedDetails.length < 10) untypedDetails.push(`${entry.promptId}: ${entry.detail ?? ""}`)
      }
      if (entry.k === "final") prompt.final = entry
    }
  }

  const faults = input.phases.map((phase, index): FaultReport => {
    const next = input.phases[index + 1]
    const from = index === 0 ? 0 : phase.start
    const until = next === undefined ? Number.POSITIVE_INFINITY : next.start
    const mine = [...prompts].filter(([, prompt]) => prompt.sentAt >= from && prompt.sentAt < until)
    const typed: Record<string, number> = {}
    let succeeded = 0
    let untyped = 0
    let hung = 0
    let executedTwice = 0
    let completedReportedFailed = 0
    for (const [promptId, prompt] of mine) {
      const final = prompt.final
      if ((runs.get(promptId)?.length ?? 0) > 1) executedTwice++
      if (prompt.untyped || final?.outcome === "untyped") untyped++
      if (final === undefined || final.outcome === "hung") hung++
      else if (final.outcome === "ok") succeeded++
      else if (final.outcome === "typed") {
        const key = `${final.tag} (${final.disposition})`
        typed[key] = (typed[key] ?? 0) + 1
      }
      if (final !== undefined && final.outcome !== "ok" && input.completed.has(promptId)) completedReportedFailed++
    }
    // Failover: per session whose runner was hit, the first prompt it executed after the hit that succeeded, as the
    // time from the hit to its answer.
    let affected = 0
    const recoveries: Array<number> = []
    const answeredAt = new Map<string, number>()
    for (const entry of entries) {
      if (entry.k === "final" && entry.outcome === "ok") answeredAt.set(entry.promptId, entry.at)
    }
    for (const hit of phase.hits) {
      const onVictim = new Set<string>()
      const lastRunner = new Map<string, string>()
      for (const execution of executions) if (execution.at < hit.at) lastRunner.set(execution.session, execution.runner)
      for (const [session, runner] of lastRunner) if (runner === hit.runner) onVictim.add(session)
      for (const session of onVictim) {
        affected++
        // Elsewhere for a runner killed; for one frozen, wherever the session answered first (on the same runner
        // when it was resumed before its locks expired).
        const first = executions.find((execution) =>
          execution.session === session && execution.at > hit.at && answeredAt.has(execution.promptId)
        )
        if (first !== undefined) recoveries.push(answeredAt.get(first.promptId)! - hit.at)
      }
    }
    // Sessions started again: a prompt of the phase ran in a CLI the session had not run one in before the phase.
    const before = new Map<string, Set<number>>()
    for (const execution of executions) {
      if (execution.at >= phase.start) continue
      const pids = before.get(execution.session) ?? new Set<number>()
      pids.add(execution.pid)
      before.set(execution.session, pids)
    }
    const restarted = new Set<string>()
    for (const execution of executions) {
      if (execution.at < phase.start || execution.at >= until) continue
      const pids = before.get(execution.session)
      if (pids !== undefined && !pids.has(execution.pid)) restarted.add(execution.session)
    }
    const overlaps = [...phase.overlaps.values()]
    return {
      fault: faultName(phase.fault),
      sent: mine.length,
      succeeded,
      typed,
      untyped,
      hung,
      executedTwice,
      completedReportedFailed,
      twoClis: overlaps.length,
      twoClisMillis: overlaps.length === 0 ? 0 : Math.max(...overlaps),
      leftBehind: phase.leftBehind,
      frozenHad: phase.frozenHad,
      frozenLeft: phase.frozenLeft,
      affected,
      recovered: recoveries.length,
      failoverFirstMillis: recoveries.length === 0 ? undefined : Math.min(...recoveries),
      failoverLastMillis: recoveries.length === 0 ? undefined : Math.max(...recoveries),
      restarted: restarted.size,
      withinTolerance: phase.fault._tag === "database" &&
        phase.fault.millis <= toleranceOf(input.options.locks ?? "fast")
    }
  })
  return { faults, orphans: input.orphans, untypedDetails, millis: input.millis }
}
