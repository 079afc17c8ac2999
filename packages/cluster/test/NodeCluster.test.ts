/**
 * A node of the cluster as a process sees it: what a runner process's exit code says (a clean stop on SIGTERM or
 * SIGINT is 0, a drain that failed is not: a real Node process, test/fixtures/drain.ts, under `NodeRuntime.runMain`,
 * as a runner is run), and what a runner logs when a peer's socket breaks (a real runner on 127.0.0.1 over a real
 * PostgreSQL).
 */
import { assert, describe, it } from "@effect/vitest"
import { NodeCluster } from "@tether/cluster"
import { Postgres } from "@tether/testing"
import { Cause, Effect, Exit, Layer, Logger, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Lease from "../src/internal/lease.ts"

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

/** A port that was free a moment ago on 127.0.0.1. */
const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

describe("NodeCluster.layer", () => {
  it.live(
    "a peer whose socket breaks (a runner frozen, then back) is a warning of the runner, not an error",
    () =>
      Effect.gen(function*() {
        const server = yield* Postgres.make()
        const logs: Array<{ readonly level: string; readonly message: string }> = []
        const capture = Logger.make((entry) => {
          logs.push({ level: entry.logLevel, message: String(entry.message) })
        })
        const port = yield* freePort
        yield* Layer.build(
          NodeCluster.layer({ postgres: server.url, runner: { host: "127.0.0.1", port } }).pipe(
            Layer.provide(Logger.layer([capture]))
          )
        )
        // A peer connects, writes, and resets the connection (as its kernel does for a peer that vanished).
        yield* Effect.callback<void>((resume) => {
          const socket = Net.connect(port, "127.0.0.1", () => {
            socket.write("not the runner protocol")
            setTimeout(() => {
              socket.resetAndDestroy()
              resume(Effect.void)
            }, 100)
          })
          socket.on("error", () => undefined)
        })
        const reported = yield* Effect.sync(() => logs.filter((log) => log.message.includes("SocketServer"))).pipe(
          Effect.filterOrFail((found) => found.length > 0, () => "not reported yet"),
          Effect.retry(Schedule.spaced("50 millis")),
          Effect.timeout("10 seconds"),
          Effect.orDie
        )
        assert.deepStrictEqual([...new Set(reported.map((log) => log.level))], ["Warn"])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a runner holds a host lease while it runs, renewed by its lock refreshes; one not longer than them, or an outage tolerance that leaves no room before the locks expire, is InvalidConfig",
    () =>
      Effect.gen(function*() {
        const server = yield* Postgres.make()
        const sharding = {
          shardsPerGroup: 12,
          shardLockRefreshInterval: "500 millis",
          shardLockExpiration: "3 seconds"
        } as const
        const runner = { host: "127.0.0.1", port: yield* freePort }
        const invalid = yield* Effect.flip(
          Effect.scoped(Layer.build(NodeCluster.layer({ postgres: server.url, runner, sharding, lease: "500 millis" })))
        )
        assert.strictEqual(invalid._tag, "InvalidConfig")
        assert.strictEqual(Lease.board.holders.size, 0)
        // An outage tolerance must leave two lock intervals before the locks expire, and needs table locks.
        const build = (options: Partial<NodeCluster.Options>) =>
          Effect.flip(
            Effect.scoped(Layer.build(NodeCluster.layer({ postgres: server.url, runner, sharding, ...options })))
          )
        const tooLong = yield* build({ outageTolerance: "2100 millis" })
        assert.strictEqual(tooLong._tag, "InvalidConfig")
        assert.match(tooLong.message, /outageTolerance/)
        const advisory = yield* build({
          sharding: { ...sharding, shardLockDisableAdvisory: false },
          outageTolerance: "1 second"
        })
        assert.strictEqual(advisory._tag, "InvalidConfig")
        assert.match(advisory.message, /table locks/)
        assert.strictEqual(Lease.board.holders.size, 0)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Layer.build(NodeCluster.layer({ postgres: server.url, runner, sharding }))
          assert.strictEqual(Lease.board.holders.size, 1)
          const first = [...Lease.board.holders.values()][0]!
          // Held for the lock TTL from its start; a refresh (every 500 ms) moves its end on.
          assert.isAtMost(first - performance.now(), 3_000)
          yield* Effect.sync(() => [...Lease.board.holders.values()][0]!).pipe(
            Effect.filterOrFail((end) => end > first, () => "not renewed yet"),
            Effect.retry(Schedule.spaced("50 millis")),
            Effect.timeout("10 seconds"),
            Effect.orDie
          )
          assert.isFalse(Lease.expired())
        }))
        assert.strictEqual(Lease.board.holders.size, 0)
        // A client holds none.
        yield* Effect.scoped(Layer.build(NodeCluster.layer({ postgres: server.url, sharding })))
        assert.strictEqual(Lease.board.holders.size, 0)
      }).pipe(Effect.scoped),
    60_000
  )
})
