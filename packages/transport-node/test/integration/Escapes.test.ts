/**
 * The escapes of issue 16 through the real `claude` (offline, against MockAnthropic, allow-all policy): one Bash
 * tool command starts every escape that a tool can start, and the session is then ended three ways — its scope
 * closed after the turn, the host fiber interrupted mid-tool, the host SIGKILLed (the watchdog's job) — under each
 * containment. Every escaped process is found by its pid and start time (it reports them itself), never by a
 * marker, and checked in /proc afterwards.
 *
 * In a PID namespace nothing survives; under a cgroup, only a root tool that moves itself out of it with its
 * environment cleared (`env -i setsid -f`, then the root cgroup: nothing links it to the session; a cgroup namespace
 * would keep it in). Under the process tree (scans at teardown only) the escapes
 * that cleared their environment survive where nothing alive links them to the CLI: all four once the tool's
 * shell exited (close, after the turn); mid-tool (interrupt, host SIGKILL), while the shell runs, only the one
 * that left its session and lost its parent at once (`env -i setsid -f`). The table of outcomes is printed at the
 * end. Without isolation between sessions (see `layerFor`), and in the default box (`boxedSuite`, where the tool
 * also tries to unmount its /proc and /tmp and to find the host's process).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { Permission, Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Data, Effect, Exit, Fiber, Option, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import {
  awaitEscaped,
  commandFor,
  escapes as allEscapes,
  makeReport,
  makeReportIn,
  survives,
  survivors
} from "../escapes.ts"
import * as Results from "../results.ts"
import { allProcs } from "../utils.ts"
import { claudePath, claudeVersion, makeWorld, sleeping, waitUntil } from "./harness.ts"

type Mechanism = "cgroup" | "pid-namespace" | "process-tree"
type Closing = "close" | "interrupt" | "host SIGKILL"

const mechanisms: ReadonlyArray<Mechanism> = ["cgroup", "pid-namespace", "process-tree"]
/** What a Bash tool can start (the CLI's own session is not a tool's to join). */
const escapes = allEscapes.filter((escape) => escape.where === "tool")
const hostScript = fileURLToPath(new URL("./fixtures/host.ts", import.meta.url))

/**
 * One Bash tool command: every escape, then (mid-tool closings) a sleep that keeps the tool's shell running. `unmount`:
 * then (in a box) it tries to unmount its /proc and /tmp and looks for the host's process in /proc, writing what it
 * found to that file.
 */
const prompt = (report: string, holdShell: boolean, unmount?: string) =>
  `[bash] ${commandFor(escapes, "tool", report)}${
    unmount === undefined
      ? ""
      : `\n(for c in "umount /proc" "umount -l /proc" "umount /tmp" "umount -l /tmp"; do $c 2>/dev/null && ` +
        `echo "unmounted: $c"; done; [ -e /proc/${process.pid} ] && echo host-seen || echo host-hidden) > ${unmount}`
  }${holdShell ? "\nsleep 20" : ""}`

const expected = (mechanism: Mechanism, closing: Closing): ReadonlyArray<string> =>
  escapes.filter((escape) => survives(escape, mechanism, { toolShellAlive: closing !== "close" }))
    .map((escape) => escape.name).sort()

const outcomes = new Map<string, ReadonlyArray<string>>()
/** The same as runs, for docs/teardown.md's escape table (results.ts: recorded with TETHER_RECORD_RESULTS=1). */
const runs: Array<Results.EscapeRun> = []
const record = (mechanism: Mechanism, isolated: boolean, closing: Closing, left: ReadonlyArray<string>) => {
  outcomes.set(`${mechanism}${isolated ? ", isolated" : ""}/${closing}`, left)
  runs.push({ containment: mechanism, isolation: isolated, closing, survivors: left })
}

// Without isolation between sessions: the escapes report to a file under the host's /tmp, which a session's box does
// not see (the fake CLI's escape suite runs them in boxes too, under every containment: none survives).
const layerFor = (mechanism: Mechanism) =>
  NodeTransport.layer({
    executables: { claude: claudePath },
    containment: mechanism,
    scanInterval: 0,
    isolation: false
  })

class HostFailed extends Data.TaggedError("HostFailed")<{ readonly reason: string }> {}

const startHost = (mechanism: Mechanism, text: string, onReady: (line: string) => void, box: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess, HostFailed>((resume) => {
      const host = ChildProcess.spawn(process.execPath, [hostScript, mechanism, text, ...box], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      host.stdout.setEncoding("utf8")
      // Its ready line, after whatever it logged before it (Effect's default logger prints to stdout).
      let out = ""
      let ready = false
      host.stdout.on("data", (data: string) => {
        out += data
        const line = out.split("\n").find((line) => line.startsWith("ready"))
        if (line !== undefined && !ready) {
          ready = true
          onReady(line)
          resume(Effect.succeed(host))
        }
      })
      host.once("error", (error) => resume(Effect.fail(new HostFailed({ reason: error.message }))))
      host.once("exit", (code) => resume(Effect.fail(new HostFailed({ reason: `the host exited (${code})` }))))
    }),
    (host) => Effect.sync(() => host.kill("SIGKILL"))
  )

/**
 * A host started by {@link startHost}, and, when the test ends, the offline home of its world removed: the host is
 * SIGKILLed, so its own finalizers never remove it.
 */
/** The host fixture, its world's home removed afterwards; `reportDir`: in the default box, that directory kept. */
const startHostAndClean = (mechanism: Mechanism, text: string, reportDir?: string) =>
  Effect.gen(function*() {
    let home: string | undefined
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (home !== undefined) Fs.rmSync(home, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
      })
    )
    const host = yield* startHost(mechanism, text, (line) => {
      home = line.trim().split(" ")[3]
    }, reportDir === undefined ? [] : ["box", reportDir])
    return host
  })

const suite = (mechanism: Mechanism) =>
  describe(`the real claude CLI's escapes under ${mechanism}`, { timeout: 90_000 }, () => {
    it.live("the session is closed after the turn", () =>
      Effect.gen(function*() {
        const world = yield* makeWorld()
        const report = yield* makeReport
        const scope = yield* Scope.make()
        const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll })).pipe(
          Scope.provide(scope)
        )
        yield* session.run(prompt(report, false))
        const escaped = yield* awaitEscaped(escapes, report)
        yield* Scope.close(scope, Exit.void)
        const left = survivors(escaped)
        record(mechanism, false, "close", left)
        assert.deepStrictEqual(left, expected(mechanism, "close"))
      }).pipe(Effect.scoped, Effect.provide(layerFor(mechanism))))

    it.live("the host fiber is interrupted mid-tool", () =>
      Effect.gen(function*() {
        const world = yield* makeWorld()
        const report = yield* makeReport
        const fiber = yield* Effect.forkChild(
          Effect.gen(function*() {
            const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll }))
            return yield* session.run(prompt(report, true))
          }).pipe(Effect.scoped)
        )
        const escaped = yield* awaitEscaped(escapes, report, 30_000)
        // The tool's shell is still running its `sleep 20`: the turn is mid-tool.
        yield* waitUntil("the tool's sleep 20", () => sleeping(allProcs()).some((proc) => proc.args === "sleep 20"))
        yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
        const left = survivors(escaped)
        record(mechanism, false, "interrupt", left)
        assert.deepStrictEqual(left, expected(mechanism, "interrupt"))
      }).pipe(Effect.scoped, Effect.provide(layerFor(mechanism))))

    it.live("the host is SIGKILLed mid-tool (the watchdog ends the session)", () =>
      Effect.gen(function*() {
        const report = yield* makeReport
        const host = yield* startHostAndClean(mechanism, prompt(report, true))
        const escaped = yield* awaitEscaped(escapes, report, 30_000)
        host.kill("SIGKILL")
        // The watchdog: termGrace (2 s in these tests' timeouts) after the host's pipe closes, then the kill.
        yield* waitUntil(
          "the watchdog to end the session",
          () => survivors(escaped).length === expected(mechanism, "host SIGKILL").length,
          10_000
        ).pipe(Effect.ignore)
        if (expected(mechanism, "host SIGKILL").length > 0) yield* Effect.sleep("5 seconds")
        const left = survivors(escaped)
        record(mechanism, false, "host SIGKILL", left)
        assert.deepStrictEqual(left, expected(mechanism, "host SIGKILL"))
      }).pipe(Effect.scoped))
  })

for (const mechanism of mechanisms) suite(mechanism)

/**
 * In a box (the default, `isolation: "auto"`, as root), under each containment: the report is in the session's
 * workspace, the one directory of the host's it may write. Nothing survives (its PID namespace ends with the CLI, its
 * tools cannot leave their cgroup), the host SIGKILLed included (the host fixture's session then names the report's
 * directory, under the host's /tmp, in its environment: its box keeps it at its path).
 */
const boxedSuite = (mechanism: Mechanism) =>
  describe.runIf(process.platform === "linux" && process.getuid?.() === 0)(
    `the real claude CLI's escapes in a box (the default), under ${mechanism}`,
    { timeout: 90_000 },
    () => {
      const boxed = NodeTransport.layer({
        executables: { claude: claudePath },
        containment: mechanism,
        scanInterval: 0
      })
      it.live("the session is closed after the turn", () =>
        Effect.gen(function*() {
          assert.isTrue(
            (yield* Transport.Transport).capabilities.notes.some((note) =>
              note.includes(`isolation: "auto" (the default)`)
            )
          )
          const world = yield* makeWorld()
          const report = yield* makeReportIn(world.cwd)
          const scope = yield* Scope.make()
          const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll })).pipe(
            Scope.provide(scope)
          )
          // Boxed: its CLI's user namespace is not the host's.
          const cli = Option.getOrThrow(session.pid)
          assert.isTrue(
            Fs.readlinkSync(`/proc/${cli}/ns/user`) !== Fs.readlinkSync("/proc/self/ns/user"),
            "the CLI is boxed"
          )
          // Its root cannot unmount its /proc (the host's is under it) nor its /tmp: the box's mounts are locked.
          const unmount = Path.join(Path.dirname(report), "unmount")
          yield* session.run(prompt(report, false, unmount))
          const escaped = yield* awaitEscaped(escapes, report)
          yield* Scope.close(scope, Exit.void)
          const left = survivors(escaped)
          record(mechanism, true, "close", left)
          assert.deepStrictEqual(left, [])
          assert.strictEqual(Fs.readFileSync(unmount, "utf8"), "host-hidden\n")
        }).pipe(Effect.scoped, Effect.provide(boxed)))

      it.live("the host fiber is interrupted mid-tool", () =>
        Effect.gen(function*() {
          const world = yield* makeWorld()
          const report = yield* makeReportIn(world.cwd)
          const fiber = yield* Effect.forkChild(
            Effect.gen(function*() {
              const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll }))
              return yield* session.run(prompt(report, true))
            }).pipe(Effect.scoped)
          )
          const escaped = yield* awaitEscaped(escapes, report, 30_000)
          yield* waitUntil("the tool's sleep 20", () => sleeping(allProcs()).some((proc) => proc.args === "sleep 20"))
          yield* Fiber.interrupt(fiber)
          assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
          const left = survivors(escaped)
          record(mechanism, true, "interrupt", left)
          assert.deepStrictEqual(left, [])
        }).pipe(Effect.scoped, Effect.provide(boxed)))

      it.live("the host is SIGKILLed mid-tool (the watchdog ends the session)", () =>
        Effect.gen(function*() {
          // Under the host's /tmp, named in the session's environment: its box keeps it at its path.
          const report = yield* makeReport
          const host = yield* startHostAndClean(mechanism, prompt(report, true), Path.dirname(report))
          const escaped = yield* awaitEscaped(escapes, report, 30_000)
          // Boxed: the escapes run in the session's user namespace, not the host's.
          assert.isTrue(
            escaped.every((each) =>
              Fs.readlinkSync(`/proc/${each.pid}/ns/user`) !== Fs.readlinkSync("/proc/self/ns/user")
            ),
            "the session is boxed"
          )
          host.kill("SIGKILL")
          yield* waitUntil("the watchdog to end the session", () => survivors(escaped).length === 0, 10_000).pipe(
            Effect.ignore
          )
          const left = survivors(escaped)
          record(mechanism, true, "host SIGKILL", left)
          assert.deepStrictEqual(left, [])
        }).pipe(Effect.scoped))
    }
  )

for (const mechanism of mechanisms) boxedSuite(mechanism)

afterAll(() => {
  const closings: ReadonlyArray<Closing> = ["close", "interrupt", "host SIGKILL"]
  const columns = [
    ...mechanisms.flatMap((m) => closings.map((c) => `${m}/${c}`)),
    ...mechanisms.flatMap((m) => closings.map((c) => `${m}, isolated/${c}`))
  ]
  const lines = [
    "| escape | " + columns.join(" | ") + " |",
    "| --- | " + columns.map(() => ":---:").join(" | ") + " |",
    ...escapes.map((escape) =>
      `| ${escape.shape} | ` + columns.map((column) => {
        const left = outcomes.get(column)
        return left === undefined ? "not run" : left.includes(escape.name) ? "**survived**" : "gone"
      }).join(" | ") + " |"
    )
  ]
  console.log(`escape table (claude ${claudeVersion}):\n${lines.join("\n")}`)
  Results.write("escapes-claude", {
    suite: "packages/transport-node/test/integration/Escapes.test.ts",
    cli: `the real claude ${claudeVersion.split(" ")[0]}`,
    escapes: escapes.map(({ name, shape }) => ({ name, shape })),
    runs
  })
})
