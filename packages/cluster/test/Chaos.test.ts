/**
 * The short version of `pnpm chaos` (scripts/chaos.ts): the chaos driver (test/chaos/driver.ts) with a few sessions
 * and one fault of each kind, a few seconds each: a runner SIGKILLed and restarted, a runner SIGSTOPped for longer
 * than the lock TTL, the database cut off, the database slowed, the client SIGKILLed mid-turn and restarted, a
 * runner's event loop loaded. Real processes on 127.0.0.1 (runners, client, the fast fake CLI, PostgreSQL behind a
 * proxy). What it asserts does not depend on timing: no untyped outcome, no prompt run twice, no hung prompt, no
 * completed turn reported failed, no CLI left after the run; the table is printed for the log. One thing does: the
 * frozen runner's CLIs must be gone before it is resumed, 9 s after its freeze, its lease being 6 s.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Driver from "./chaos/driver.ts"

it.live("every outcome is typed and no prompt runs twice under one fault of each kind", () =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const report = yield* Driver.run({
      sessions: 4,
      runners: 3,
      faults: [
        { _tag: "kill", times: 1 },
        // Longer than the lease (the lock TTL, 6 s) with room for its keeper to act on a loaded machine.
        { _tag: "stop", millis: 9_000 },
        // Well within the outage tolerance of these locks (3 s; room left for a loaded machine's late refreshes): no
        // session may start again.
        { _tag: "database", millis: 1_000 },
        { _tag: "slow", millis: 3_000, latency: 50 },
        { _tag: "client", times: 1 },
        { _tag: "cpu", millis: 3_000 }
      ],
      turnMillis: 200,
      thinkMillis: 300,
      warmupMillis: 1_000,
      settleMillis: 10_000,
      hangMillis: 60_000,
      retryMillis: 30_000,
      log: (line) => lines.push(line)
    })
    console.log(Driver.render(report))
    assert.deepStrictEqual(Driver.verdict(report), [], [...report.untypedDetails, ...lines].join("\n"))
    // Every fault's phase ran prompts: the client went on through each.
    assert.isTrue(report.faults.every((row) => row.sent > 0))
    // The frozen runner's CLIs were ended by its keeper when its lease ran out, while it was still frozen.
    const frozen = report.faults.find((row) => row.fault.startsWith("SIGSTOP"))!
    assert.isAbove(frozen.frozenHad, 0, "the frozen runner had CLIs")
    assert.strictEqual(frozen.frozenLeft, 0, "the frozen runner's CLIs alive at its resume")
  }), { timeout: 240_000 })

it("the verdict fails a fault none of whose prompts succeeded, and a restart within the outage tolerance", () => {
  const row: Driver.FaultReport = {
    fault: "database cut off 1 s",
    sent: 12,
    succeeded: 12,
    typed: {},
    untyped: 0,
    hung: 0,
    executedTwice: 0,
    completedReportedFailed: 0,
    twoClis: 0,
    twoClisMillis: 0,
    leftBehind: 0,
    frozenHad: 0,
    frozenLeft: 0,
    affected: 0,
    recovered: 0,
    failoverFirstMillis: undefined,
    failoverLastMillis: undefined,
    restarted: 0,
    withinTolerance: true
  }
  const verdict = (over: Partial<Driver.FaultReport>) =>
    Driver.verdict({ faults: [{ ...row, ...over }], orphans: 0, untypedDetails: [], millis: 1 })
  assert.deepStrictEqual(verdict({}), [])
  // Every prompt failed typed (a CLI that cannot start): nothing was shown about the fault.
  assert.deepStrictEqual(verdict({ succeeded: 0, typed: { "CliExited (uncertain)": 12 } }), [
    "database cut off 1 s: none of its 12 prompts succeeded"
  ])
  assert.deepStrictEqual(verdict({ restarted: 2 }), [
    "database cut off 1 s: 2 session(s) started again within the outage tolerance"
  ])
  assert.deepStrictEqual(verdict({ restarted: 2, withinTolerance: false }), [])
})
