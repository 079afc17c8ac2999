/**
 * What a runner process's exit code says: a clean stop on SIGTERM or SIGINT is 0, a drain that failed is not. A
 * real Node process (test/fixtures/drain.ts) under `NodeRuntime.runMain`, as a runner is run.
 */
import { assert, describe, it } from "@effect/vitest"
import { NodeCluster } from "@tether/cluster"
import { Cause, Effect, Exit } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

/** Runs the fixture, sends it `signal` once it is ready, and gives its exit code (bounded). */
const stopped = (signal: NodeJS.Signals, env: { readonly [name: string]: string } = {}) =>
  Effect.callback<number | string>((resume) => {
    const child = ChildProcess.spawn(process.execPath, [Path.join(import.meta.dirname, "fixtures", "drain.ts")], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    child.stdout.setEncoding("utf8").on("data", (data: string) => {
      if (data.includes("ready")) child.kill(signal)
    })
    child.once("exit", (code, killed) => resume(Effect.succeed(code ?? killed ?? "unknown")))
    return Effect.sync(() => child.kill("SIGKILL"))
  }).pipe(Effect.timeout("30 seconds"))

describe("NodeCluster.teardown", () => {
  it("exit codes: 0 for a success or an interruption (a signal), the default's for a failure", () => {
    const codes: Array<number> = []
    NodeCluster.teardown(Exit.succeed(1), (code) => codes.push(code))
    NodeCluster.teardown(Exit.interrupt(7), (code) => codes.push(code))
    NodeCluster.teardown(Exit.fail("no"), (code) => codes.push(code))
    NodeCluster.teardown(
      Exit.failCause(Cause.combine(Cause.interrupt(7), Cause.die("drain"))),
      (code) => codes.push(code)
    )
    assert.deepStrictEqual(codes, [0, 0, 1, 1])
  })

  it.live("a runner stopped by SIGTERM or SIGINT that drains cleanly exits 0", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* stopped("SIGTERM"), 0)
      assert.strictEqual(yield* stopped("SIGINT"), 0)
    }), 60_000)

  it.live("a runner whose drain dies exits non-zero", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* stopped("SIGTERM", { DRAIN_DEFECT: "1" }), 1)
    }), 60_000)
})
