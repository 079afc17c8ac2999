/**
 * Every escape (./escapes.ts) against the fake CLI, under each containment, ended three ways: the scope closed,
 * the host fiber interrupted mid-turn, the host SIGKILLed (the watchdog's job). Each escaped process is found by
 * its pid and start time, never by a marker, and checked in /proc afterwards.
 *
 * In a PID namespace nothing survives; under a cgroup, only a root tool that moves itself out of it with its
 * environment cleared (nothing links it to the session; a cgroup namespace would keep it in). Under the process
 * tree, read at teardown only
 * (`scanInterval: 0`, so that the outcome does not depend on when a periodic scan happens to run), the escapes
 * that clear or overwrite their environment after their parent left the session survive: that is the documented
 * limit of the mechanism, asserted here so that a change in either direction is seen. The table of outcomes is
 * printed at the end.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Data, Duration, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { awaitEscaped, awaitToolShellGone, commandFor, escapes, makeReport, survives, survivors } from "./escapes.ts"
import * as Results from "./results.ts"
import { fakeClaudePath, fakeSpec, killMarked, newMark, stat, userMessage, waitUntil } from "./utils.ts"

type Mechanism = "cgroup" | "pid-namespace" | "process-tree"
type Closing = "close" | "interrupt" | "host SIGKILL"

const mechanisms: ReadonlyArray<Mechanism> = ["cgroup", "pid-namespace", "process-tree"]
const termGraceMillis = 300
const killGraceMillis = 1_000
// A loaded 2-core machine's scheduling slack. The `ignores-sigterm` escape makes every teardown wait out termGrace.
const boundMillis = termGraceMillis + killGraceMillis + 500

const hostScript = fileURLToPath(new URL("./fixtures/host.ts", import.meta.url))

/**
 * What each mechanism is expected to leave alive: the process tree's documented blind spot, and under a cgroup what
 * left it (root can) with nothing the tree could find it by. The fake's tool shell exits as soon as it started the
 * escapes: teardown never sees it alive.
 */
const expected = (mechanism: Mechanism, isolated: boolean): ReadonlyArray<string> =>
  escapes.filter((escape) => survives(escape, mechanism, { toolShellAlive: false, isolated }))
    .map((escape) => escape.name)
    .sort()

/** Isolation between sessions (the default, `"auto"`: a box where one can be made, as root) and without it. */
const isolations = [true, false] as const
const isolationAvailable = process.platform === "linux" && process.getuid?.() === 0

/**
 * The outcomes, for the table printed at the end: mechanism (and isolation) -> closing -> survivors; and as runs,
 * for docs/teardown.md's escape table (results.ts: recorded with TETHER_RECORD_RESULTS=1).
 */
const outcomes = new Map<string, Map<Closing, ReadonlyArray<string>>>()
const runs: Array<Results.EscapeRun> = []
const record = (mechanism: Mechanism, isolated: boolean, closing: Closing, left: ReadonlyArray<string>) => {
  const column = columnOf(mechanism, isolated)
  const row = outcomes.get(column) ?? new Map<Closing, ReadonlyArray<string>>()
  row.set(closing, left)
  outcomes.set(column, row)
  runs.push({ containment: mechanism, isolation: isolated, closing, survivors: left })
}
const columnOf = (mechanism: Mechanism, isolated: boolean) => isolated ? `${mechanism}, isolated` : mechanism

const layerFor = (mechanism: Mechanism, isolated: boolean) =>
  NodeTransport.layer({
    executables: { claude: fakeClaudePath },
    killGrace: Duration.millis(killGraceMillis),
    watchdog: false,
    containment: mechanism,
    scanInterval: 0,
    // Isolated: the default (no option), which boxes each session here.
    ...(isolated ? {} : { isolation: false })
  })

const knobsFor = (report: string) => ({
  tool: commandFor(escapes, "tool", report),
  cliTool: commandFor(escapes, "cli", report)
})

class HostFailed extends Data.TaggedError("HostFailed")<{ readonly reason: string }> {}

const startHost = (mechanism: Mechanism, isolated: boolean, mark: string, report: string) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess, HostFailed>((resume) => {
      const knobs = knobsFor(report)
      const host = ChildProcess.spawn(
        process.execPath,
        [hostScript, "runPromise", "watchdog", mark, fakeClaudePath, mechanism],
        {
          stdio: ["ignore", "pipe", "inherit"],
          env: {
            ...process.env,
            TETHER_TEST_TOOL: knobs.tool,
            TETHER_TEST_CLI_TOOL: knobs.cliTool,
            TETHER_TEST_CWD: Path.dirname(report),
            TETHER_TEST_ISOLATION: isolated ? "on" : "off"
          }
        }
      )
      host.stdout.setEncoding("utf8")
      // Its ready line, after whatever it logged before it (Effect's default logger prints to stdout).
      let out = ""
      host.stdout.on("data", (data: string) => {
        out += data
        if (out.split("\n").some((line) => line.startsWith("ready"))) resume(Effect.succeed(host))
      })
      host.once("error", (error) => resume(Effect.fail(new HostFailed({ reason: error.message }))))
      host.once("exit", (code) => resume(Effect.fail(new HostFailed({ reason: `exited ${code}: ${out}` }))))
    }),
    (host) => Effect.sync(() => host.kill("SIGKILL"))
  )

const suite = (mechanism: Mechanism, isolated: boolean) =>
  describe(`escapes under ${mechanism}${isolated ? ", isolated" : ""}`, { timeout: 20_000 }, () => {
    it.live("the scope closes", () =>
      Effect.gen(function*() {
        const mark = newMark()
        yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(mark)))
        const report = yield* makeReport
        const transport = yield* Transport.Transport
        assert.strictEqual(transport.capabilities.containment, mechanism)
        const scope = yield* Scope.make()
        // The report is in the session's workspace: what its tools can write to, isolated or not.
        const connection = yield* transport.open(fakeSpec(mark, knobsFor(report), { cwd: Path.dirname(report) }), {
          termGrace: Duration.millis(termGraceMillis)
        }).pipe(
          Scope.provide(scope)
        )
        // Boxed by default: its CLI's user namespace is not the host's.
        const cli = Option.getOrThrow(connection.pid)
        assert.strictEqual(
          Fs.readlinkSync(`/proc/${cli}/ns/user`) !== Fs.readlinkSync("/proc/self/ns/user"),
          isolated,
          "boxed"
        )
        const escaped = yield* awaitEscaped(escapes, report)
        // What the process tree finds depends on whether the tool's shell is still there: it is gone.
        yield* awaitToolShellGone(escaped)
        const started = Date.now()
        yield* Scope.close(scope, Exit.void)
        const millis = Date.now() - started
        const left = survivors(escaped)
        record(mechanism, isolated, "close", left)
        assert.deepStrictEqual(left, expected(mechanism, isolated))
        assert.isBelow(millis, boundMillis, `teardown took ${millis} ms`)
      }).pipe(Effect.scoped, Effect.provide(layerFor(mechanism, isolated))))

    it.live("the host fiber is interrupted mid-turn", () =>
      Effect.gen(function*() {
        const mark = newMark()
        yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(mark)))
        const report = yield* makeReport
        const transport = yield* Transport.Transport
        const session = yield* Effect.forkChild(
          Effect.gen(function*() {
            const connection = yield* transport.open(
              fakeSpec(mark, { ...knobsFor(report), spawnAt: "turn", frameDelayMillis: 60_000 }, {
                cwd: Path.dirname(report)
              }),
              { termGrace: Duration.millis(termGraceMillis) }
            )
            yield* connection.write(userMessage("a long turn"))
            yield* Stream.runDrain(connection.stdout)
          }).pipe(Effect.scoped)
        )
        const escaped = yield* awaitEscaped(escapes, report)
        // What the process tree finds depends on whether the tool's shell is still there: it is gone.
        yield* awaitToolShellGone(escaped)
        const started = Date.now()
        yield* Fiber.interrupt(session)
        const exit = yield* Fiber.await(session)
        const millis = Date.now() - started
        assert.isTrue(Exit.hasInterrupts(exit))
        const left = survivors(escaped)
        record(mechanism, isolated, "interrupt", left)
        assert.deepStrictEqual(left, expected(mechanism, isolated))
        assert.isBelow(millis, boundMillis, `teardown took ${millis} ms`)
      }).pipe(Effect.scoped, Effect.provide(layerFor(mechanism, isolated))))

    it.live("the host is SIGKILLed (the watchdog ends the session)", () =>
      Effect.gen(function*() {
        const mark = newMark()
        yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(mark)))
        const report = yield* makeReport
        const host = yield* startHost(mechanism, isolated, mark, report)
        const escaped = yield* awaitEscaped(escapes, report)
        // What the process tree finds depends on whether the tool's shell is still there: it is gone.
        yield* awaitToolShellGone(escaped)
        host.kill("SIGKILL")
        // The watchdog waits termGrace (300 ms) after the host's pipe closes, then kills; 3 s leaves it room.
        yield* waitUntil(
          "the watchdog to end the session",
          () => survivors(escaped).length === expected(mechanism, isolated).length,
          3_000
        ).pipe(Effect.ignore)
        // Whatever the mechanism cannot reach must still be alive: give the watchdog its full bound first.
        if (expected(mechanism, isolated).length > 0) yield* Effect.sleep("1500 millis")
        const left = survivors(escaped)
        record(mechanism, isolated, "host SIGKILL", left)
        assert.deepStrictEqual(left, expected(mechanism, isolated))
      }).pipe(Effect.scoped))
  })

for (const isolated of isolations) {
  if (isolated && !isolationAvailable) continue
  for (const mechanism of mechanisms) suite(mechanism, isolated)
}

describe("the process tree's periodic scan", { timeout: 20_000 }, () => {
  // `env -i … &` from a shell that leads its own session and lives half a second: with scans every 100 ms one
  // sees the shell, and its session keeps counting after it exits; with none, nothing links the orphan to the CLI.
  const escape = escapes.find((each) => each.name === "env-i-background")!
  for (const scanMillis of [100, 0]) {
    it.live(`a short-lived session leader ${scanMillis > 0 ? "seen by a scan" : "never scanned"} (${scanMillis} ms)`, () =>
      Effect.gen(function*() {
        const mark = newMark()
        yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(mark)))
        const report = yield* makeReport
        const transport = yield* Transport.Transport
        const scope = yield* Scope.make()
        yield* transport.open(
          fakeSpec(mark, { tool: `${escape.command(report)}\nsleep 0.5` }),
          { termGrace: Duration.millis(termGraceMillis) }
        ).pipe(Scope.provide(scope))
        const [escaped] = yield* awaitEscaped([escape], report)
        // The shell (the only process between the CLI and the orphan, and the leader of its session) exits after
        // its sleep (as `sleep`: bash execs its last command), and the CLI reaps it: even its zombie is gone.
        const leader = stat(escaped.pid)!.sid
        yield* waitUntil("the tool's shell to be reaped", () => stat(leader) === undefined)
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(survivors([escaped]), scanMillis > 0 ? [] : ["env-i-background"])
      }).pipe(
        Effect.scoped,
        Effect.provide(NodeTransport.layer({
          executables: { claude: fakeClaudePath },
          watchdog: false,
          containment: "process-tree",
          scanInterval: Duration.millis(scanMillis),
          // The process tree's own reach: in a box, the CLI's PID namespace would end the orphan with it.
          isolation: false
        }))
      ))
  }
})

afterAll(() => {
  const closings: ReadonlyArray<Closing> = ["close", "interrupt", "host SIGKILL"]
  const columns = [...outcomes.keys()]
  const lines = [
    "| escape | " + columns.flatMap((m) => closings.map((c) => `${m}: ${c}`)).join(" | ") + " |",
    "| --- | " + columns.flatMap(() => closings.map(() => ":---:")).join(" | ") + " |",
    ...escapes.map((escape) =>
      `| ${escape.shape} | ` +
      columns.flatMap((m) =>
        closings.map((c) => {
          const left = outcomes.get(m)?.get(c)
          return left === undefined ? "not run" : left.includes(escape.name) ? "**survived**" : "gone"
        })
      ).join(" | ") + " |"
    )
  ]
  console.log(`escape table (fake CLI):\n${lines.join("\n")}`)
  Results.write("escapes-fake", {
    suite: "packages/transport-node/test/Escapes.test.ts",
    cli: "the fake CLI",
    escapes: escapes.map(({ name, shape }) => ({ name, shape })),
    runs
  })
})
