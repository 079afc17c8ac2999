/**
 * Per-session limits with real processes: a memory hog and a fork bomb started by a session's tool are stopped by
 * the session's limits and reported (a `LimitHit` event, the `tether_limit_hits` metric, `Connection.limitHits`); the
 * CLI itself OOM-killed fails the turn in flight with `CliExited`, `cause: "out-of-memory"`. The limits are read back
 * from the cgroups the CLI is in (v2 or v1, whichever enforces them here).
 *
 * Root on Linux where `capabilities.limits` says memory and processes are enforced (this machine: cgroup v1
 * hierarchies); skipped elsewhere. Each case allocates at most a few hundred MiB, for well under a second.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { EventLog, Timeouts, Transport } from "@tether/core"
import type { SessionEvent } from "@tether/core"
import { FakeClaude } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Duration, Effect, Fiber, Metric, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Cgroup from "../src/internal/cgroup.ts"
import * as Limits from "../src/internal/limits.ts"
import { fakeClaudePath, killOnExit, marked, newMark, waitUntil } from "./utils.ts"

const mib = 1024 * 1024
const memoryBytes = 192 * mib
const processes = 24

const layer = NodeTransport.layer({
  executables: { claude: fakeClaudePath },
  watchdog: false,
  killGrace: Duration.millis(1_000),
  limits: { memoryBytes, processes, cpus: 1.5 }
})

/** What this machine can enforce without a v2 layer (its v1 hierarchies), for root. */
const probe = process.platform === "linux" && process.getuid?.() === 0 ? Limits.probe(undefined) : undefined
const runs = probe?.memory === true && probe.processes === true

/** The cgroup directory of `controller` a process is in: its v1 hierarchy's, else its cgroup v2. */
const cgroupDir = (pid: number, controller: "memory" | "pids" | "cpu"): string => {
  const mountinfo = Fs.readFileSync("/proc/self/mountinfo", "utf8")
  const cgroup = Fs.readFileSync(`/proc/${pid}/cgroup`, "utf8")
  const v1 = Limits.locateV1(mountinfo, cgroup)[controller]
  if (v1 !== undefined) return v1.own
  const v2 = Cgroup.locate(mountinfo, cgroup)
  if (v2._tag === "Missing") throw new Error(v2.reason)
  return v2.own
}

/** The file of `dir` that holds its memory limit (v2 or v1). */
const memoryLimitFile = (dir: string) =>
  Fs.existsSync(`${dir}/memory.max`) ? `${dir}/memory.max` : `${dir}/memory.limit_in_bytes`

const read = (file: string) => Fs.readFileSync(file, "latin1").trim()

const timeouts = Timeouts.make({
  stall: "20 seconds",
  turn: "20 seconds",
  closeGrace: "300 millis",
  termGrace: "300 millis"
})

/** A Claude session over the fake CLI whose tool runs `tool` at the first turn (`cli`: in the CLI's own group). */
const session = (mark: string, tool: string, where: "tool" | "cli" = "tool") =>
  Effect.gen(function*() {
    const knobs: FakeClaude.Knobs = {
      spawnAt: "turn",
      frameDelayMillis: 150,
      deltas: 20,
      ...(where === "tool" ? { tool } : { cliTool: tool })
    }
    return yield* ClaudeSession.make({
      env: { set: { ...FakeClaude.env(knobs), TEST_MARK: mark } },
      timeouts: yield* timeouts
    })
  })

/** The first `LimitHit` event of a session, waited for (bounded). */
const firstHit = (events: Stream.Stream<EventLog.Delivery<SessionEvent.SessionEvent>>) =>
  events.pipe(
    Stream.map((delivery) => delivery._tag === "Event" ? delivery.event : undefined),
    Stream.filter((event) => event?._tag === "LimitHit"),
    Stream.runHead,
    Effect.timeout("5 seconds"),
    Effect.map((event) => event.pipe(Option.getOrUndefined))
  )

const hitsOf = (limit: "memory" | "processes") =>
  Metric.value(Metric.withAttributes(NodeTransport.limitHitsMetric, { limit }))

describe.runIf(runs)("per-session limits, with real processes", { timeout: 20_000 }, () => {
  it.live("capabilities say which limits this machine enforces", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      assert.deepStrictEqual(transport.capabilities.limits, { memory: true, processes: true, cpu: probe?.cpu })
      assert.isTrue(transport.capabilities.notes.some((note) => note.startsWith("the memory limit is enforced")))
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a tool's memory hog is OOM-killed at the session's limit: a LimitHit event and the metric; the CLI lives", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const before = yield* hitsOf("memory")
      // `tail` keeps a line without a newline whole: it grows until the kernel stops it.
      const tool = `head -c ${4 * memoryBytes} /dev/zero | tail`
      const claude = yield* session(mark, tool)
      const events = yield* claude.subscribe("start")
      const cli = Option.getOrThrow(claude.pid)
      assert.strictEqual(Number(read(memoryLimitFile(cgroupDir(cli, "memory")))), memoryBytes)
      const turn = yield* Effect.forkChild(claude.run("hog"))
      const hit = yield* firstHit(events)
      assert.deepInclude(hit, { limit: "memory", max: memoryBytes })
      assert.isAtLeast(hit!.count, 1)
      assert.isAtLeast((yield* hitsOf("memory")).count - before.count, 1)
      assert.isTrue(yield* claude.isAlive, "the CLI was not the victim")
      // Nothing of the hog is left: the kernel killed it.
      yield* waitUntil("the hog is gone", () => marked(mark).every((proc) => !/^tail/.test(proc.args)))
      yield* Fiber.interrupt(turn)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a tool's fork bomb stops at the session's process limit: limitHits and the metric; teardown ends it", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const before = yield* hitsOf("processes")
      const transport = yield* Transport.Transport
      const report: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* transport.open({
          program: "sh",
          // dash: a fork refused ends the subshell that asked for it; the bomb goes on at the limit.
          args: ["-c", "f() { f | f & }; f; sleep 30"],
          cwd: Option.none(),
          env: { mode: "clean", set: { TEST_MARK: mark }, unset: [] }
        }, { termGrace: Duration.millis(300) })
        const pid = Option.getOrThrow(connection.pid)
        const dir = cgroupDir(pid, "pids")
        assert.strictEqual(read(`${dir}/pids.max`), String(processes))
        const hit = yield* connection.limitHits!.pipe(Stream.runHead, Effect.timeout("5 seconds"))
        assert.deepInclude(Option.getOrUndefined(hit), { limit: "processes", max: processes })
        report.push(Number(read(`${dir}/pids.current`)))
      }))
      assert.isAtMost(report[0], processes, "never more processes than the limit")
      assert.isAtLeast((yield* hitsOf("processes")).count - before.count, 1)
      yield* waitUntil("the bomb is gone", () => marked(mark).length === 0, 2_000)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("the CLI itself OOM-killed: the turn fails with CliExited, cause out-of-memory, uncertain unless acknowledged", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      // Run in the CLI's own group: makes the CLI the OOM killer's choice, then grows past the limit.
      const tool = `echo 1000 > /proc/$PPID/oom_score_adj && head -c ${4 * memoryBytes} /dev/zero | tail`
      const claude = yield* session(mark, tool, "cli")
      const error = yield* Effect.flip(claude.run("hog"))
      assert.strictEqual(error._tag, "CliExited")
      if (error._tag !== "CliExited") return
      assert.strictEqual(error.cause, "out-of-memory", error.message)
      assert.strictEqual(error.signal, "SIGKILL")
      assert.include(error.message, "out of memory")
      // The fake acknowledges its prompts: delivery is certain once it did.
      assert.strictEqual(error.deliveryUncertain, !error.acknowledged)
      const status = yield* claude.awaitExit
      assert.deepInclude(status, { _tag: "Signaled", cause: "out-of-memory" })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a limit that cannot be a limit fails every open with SpawnFailed", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      assert.isFalse(transport.capabilities.limits?.memory === false)
      const error = yield* Effect.flip(Effect.scoped(transport.open({
        program: "true",
        args: [],
        cwd: Option.none(),
        env: { mode: "clean", set: {}, unset: [] }
      }, { termGrace: Duration.millis(100) })))
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.include(error.message, "limits.memoryBytes must be a positive integer")
    }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ watchdog: false, limits: { memoryBytes: -1 } }))))
})

describe("limits: what is written where", () => {
  it("v2 and v1 files for each controller", () => {
    const limits = { memoryBytes: 64 * mib, processes: 20, cpus: 0.5 }
    assert.deepStrictEqual(Limits.v2Writes(limits, "memory").map((write) => [write.file, write.value]), [
      ["memory.max", String(64 * mib)],
      ["memory.swap.max", "0"]
    ])
    assert.deepStrictEqual(Limits.v2Writes(limits, "pids"), [{ file: "pids.max", value: "20" }])
    assert.deepStrictEqual(Limits.v2Writes(limits, "cpu"), [{ file: "cpu.max", value: "50000 100000" }])
    assert.deepStrictEqual(Limits.v1Writes(limits, "memory").map((write) => write.file), [
      "memory.limit_in_bytes",
      "memory.memsw.limit_in_bytes"
    ])
    assert.deepStrictEqual(Limits.v1Writes(limits, "cpu"), [
      { file: "cpu.cfs_period_us", value: "100000" },
      { file: "cpu.cfs_quota_us", value: "50000" }
    ])
    assert.deepStrictEqual(Limits.v2Writes({}, "memory"), [])
  })

  it("the v1 hierarchies: co-mounted controllers, a host cgroup under the mount's root", () => {
    const mountinfo = [
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
      "35 31 0:32 /outer /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
    ].join("\n")
    const cgroup = ["4:memory:/outer/host", "1:cpu,cpuacct:/", "0::/"].join("\n")
    assert.deepStrictEqual(Limits.locateV1(mountinfo, cgroup), {
      memory: { mount: "/sys/fs/cgroup/memory", own: "/sys/fs/cgroup/memory/host" },
      cpu: { mount: "/sys/fs/cgroup/cpu,cpuacct", own: "/sys/fs/cgroup/cpu,cpuacct" }
    })
  })

  it("problems: limits that cannot be limits", () => {
    assert.deepStrictEqual(Limits.problems({ memoryBytes: 1, processes: 1, cpus: 0.1 }), [])
    assert.strictEqual(Limits.problems({ memoryBytes: 0, processes: 1.5, cpus: Number.NaN }).length, 3)
  })
})
