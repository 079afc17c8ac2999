/**
 * Teardown of a session's cgroup that its tools rearranged, with the fake CLI and real processes: a tool nests
 * cgroups inside its own and moves a detached process there; a tool writes the host's pid, and an ancestor's, into
 * its session's `cgroup.procs`. After the close nothing of the session is alive, its cgroups are gone, the host and
 * its ancestors are, and the teardown's report says what was there (never 0 when something was).
 *
 * Root on Linux with a cgroup2 hierarchy only (as the machine these tests run on); skipped elsewhere. Without
 * isolation between sessions (`isolation: false`): in a session's box (the default as root) a tool can write neither
 * its cgroup's files nor another's, so these rearrangements cannot happen (Isolation.test.ts and the escape suite
 * show them refused); here they are made to happen, for what teardown does about them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Data, Duration, Effect, Exit, Logger, Option, References, Scope, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import * as Cgroup from "../src/internal/cgroup.ts"
import type * as Teardown from "../src/internal/teardown.ts"
import { awaitEscaped, type Escape, escapes, isAlive, makeReport, survivors } from "./escapes.ts"
import { fakeClaudePath, fakeSpec, initialize, killOnExit, newMark, userMessage, waitUntil } from "./utils.ts"

const termGraceMillis = 300
const killGraceMillis = 1_000
// termGrace + killGrace, plus a loaded 2-core machine's scheduling slack.
const boundMillis = termGraceMillis + killGraceMillis + 500

const location = process.platform === "linux"
  ? Cgroup.locate(Fs.readFileSync("/proc/self/mountinfo", "utf8"), Fs.readFileSync("/proc/self/cgroup", "utf8"))
  : undefined
const mount = location?._tag === "Found" ? location.mount : undefined
/** This process's own cgroup (where the tests make cgroups of their own). */
const own = location?._tag === "Found" ? location.own : undefined
const runs = mount !== undefined && process.getuid?.() === 0

/** The cgroup directory a process is in now (cgroup2), undefined when it is gone. */
const cgroupOf = (pid: number): string | undefined => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n").find((each) => each.startsWith("0::"))
    return line === undefined ? undefined : `${mount}${line.slice(3).trim()}`.replace(/\/$/, "")
  } catch {
    return undefined
  }
}

/**
 * The tool: nests `nest/deeper` in its own session cgroup, and starts there a detached process (`env -i setsid -f`,
 * out of the CLI's session, its environment cleared) that ignores SIGTERM: only the kill of the whole subtree ends
 * it. The shell moves itself (`echo 0`) before it execs `sleep`, so the sleep is born in the nested cgroup.
 */
const nestedEscape: Escape = {
  name: "nested-cgroup",
  shape: "a `setsid -f` process moved into a cgroup nested in the session's",
  where: "tool",
  command: (report) =>
    `cg="${mount}$(sed -n 's/^0:://p' /proc/self/cgroup)"; mkdir -p "$cg/nest/deeper"; ` +
    `env -i setsid -f sh -c 'echo 0 > "$1/cgroup.procs" && trap "" TERM && read -r p x < /proc/self/stat && ` +
    `echo nested-cgroup $p >> ${report} && exec sleep 300' sh "$cg/nest/deeper"`,
  clearsEnvironment: true,
  leavesSession: true,
  orphaned: true
}

const isReport = (value: unknown): value is Teardown.Report =>
  typeof value === "object" && value !== null && "containment" in value && "survivors" in value

/** Every teardown report logged (debug line or warnings), through a logger of the test's own. */
const captureReports = () => {
  const reports: Array<Teardown.Report> = []
  const logger = Logger.make(({ message }) => {
    const parts: ReadonlyArray<unknown> = Array.isArray(message) ? message : [message]
    const report = parts.find(isReport)
    if (report !== undefined && !reports.includes(report)) reports.push(report)
  })
  const provide = <A, E, R>(self: Effect.Effect<A, E, R>) =>
    self.pipe(Effect.provide(Logger.layer([logger])), Effect.provideService(References.MinimumLogLevel, "Debug"))
  return { reports, provide }
}

const layer = NodeTransport.layer({
  executables: { claude: fakeClaudePath },
  killGrace: Duration.millis(killGraceMillis),
  watchdog: false,
  containment: "cgroup",
  isolation: false
})

describe.runIf(runs)("teardown of a session cgroup a tool nested cgroups in", { timeout: 20_000 }, () => {
  for (const cliExitedFirst of [false, true]) {
    it.live(
      cliExitedFirst
        ? "the CLI exited by itself: the session's own cgroup.procs is empty, the nested one is not"
        : "the CLI still runs",
      () => {
        const capture = captureReports()
        return Effect.gen(function*() {
          const mark = newMark()
          yield* killOnExit(mark)
          const report = yield* makeReport
          const transport = yield* Transport.Transport
          const scope = yield* Scope.make()
          yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
          const connection = yield* transport.open(
            fakeSpec(mark, {
              tool: nestedEscape.command(report),
              modes: cliExitedFirst ? ["exit-after-result"] : []
            }),
            { termGrace: Duration.millis(termGraceMillis) }
          ).pipe(Scope.provide(scope))
          const cliPid = Option.getOrThrow(connection.pid)
          const session = cgroupOf(cliPid)!
          const [escaped] = yield* awaitEscaped([nestedEscape], report)
          assert.strictEqual(cgroupOf(escaped.pid), `${session}/nest/deeper`)
          if (cliExitedFirst) {
            yield* connection.write(userMessage("one turn"))
            yield* Stream.runDrain(connection.stdout)
            yield* connection.exit
            assert.deepStrictEqual(
              Fs.readFileSync(`${session}/cgroup.procs`, "latin1"),
              "",
              "only the nested cgroup holds a process"
            )
          }

          const started = Date.now()
          yield* Scope.close(scope, Exit.void)
          const millis = Date.now() - started

          assert.isFalse(isAlive(escaped), "the process in the nested cgroup survived")
          assert.isFalse(Fs.existsSync(`${session}/nest`), "the nested cgroups are left")
          assert.isFalse(Fs.existsSync(session), "the session's cgroup is left")
          assert.isBelow(millis, boundMillis, `teardown took ${millis} ms`)
          assert.strictEqual(capture.reports.length, 1)
          const [teardown] = capture.reports
          assert.deepStrictEqual(teardown.survivors, [])
          assert.deepStrictEqual(teardown.spared, [])
          // The escape ignores SIGTERM: asked to end, then killed. The CLI, when it still ran, was asked too.
          assert.strictEqual(teardown.terminated, cliExitedFirst ? 1 : 2)
          assert.strictEqual(teardown.killed, 1)
        }).pipe(Effect.scoped, Effect.provide(layer), capture.provide)
      }
    )
  }

  it.live("the host is SIGKILLed: the watchdog kills the nested cgroups too, and removes them", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const report = yield* makeReport
      const host = yield* watchedHost(mark, { TETHER_TEST_TOOL: nestedEscape.command(report) })
      const cliPid = yield* readLine(host, "ready")
      const session = cgroupOf(Number(cliPid.split(" ")[1]))!
      const [escaped] = yield* awaitEscaped([nestedEscape], report)
      assert.strictEqual(cgroupOf(escaped.pid), `${session}/nest/deeper`)
      host.kill("SIGKILL")
      // The watchdog starts Node once the host's pipe closes (seconds on a loaded machine), waits termGrace (300 ms),
      // then kills.
      yield* waitUntil("the watchdog to kill the nested cgroup", () => !isAlive(escaped), 5_000)
      yield* waitUntil("the watchdog to remove the session's cgroups", () => !Fs.existsSync(session), 5_000)
    }).pipe(Effect.scoped))
})

/** The escapes that move themselves to the root cgroup, their environment kept or cleared. */
const escapeNamed = (name: string): Escape => escapes.find((escape) => escape.name === name)!
const rootLeaver = escapeNamed("root-cgroup")

describe.runIf(runs)("the watchdog never kills the host's ancestors either", { timeout: 20_000 }, () => {
  it.live("a tool wrote the host's parent into its cgroup, then the host was SIGKILLed: the parent is spared", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      // The host's parent outlives it (it execs a sleep when the host is gone, same pid and start time): once the
      // host is dead it is no ancestor of the watchdog's, which must still not kill it.
      const ancestor = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(
            "/bin/sh",
            ["-c", `"$0" "$@"; exec sleep 300`, process.execPath, guardedHostScript, mark, "watchdog"],
            {
              stdio: ["pipe", "pipe", "inherit"],
              env: { ...process.env, TETHER_TEST_CGROUP_MOUNT: mount, TETHER_TEST_FAKE: fakeClaudePath }
            }
          )
        ),
        (sh) => Effect.sync(() => sh.kill("SIGKILL"))
      )
      const ready = yield* readLine(ancestor, "ready")
      const [, hostPid, cliPid] = ready.split(" ").map(Number)
      const hostCgroup = cgroupOf(hostPid)!
      const session = cgroupOf(cliPid)!
      yield* waitUntil(
        "the tool to move the host and its parent into the session's cgroup",
        () => cgroupOf(hostPid) === session && cgroupOf(ancestor.pid!) === session
      )
      process.kill(hostPid, "SIGKILL")
      yield* waitUntil("the watchdog to end the session", () => !Fs.existsSync(session), 5_000)
      assert.isTrue(isAlive({ name: "parent", pid: ancestor.pid!, start: startOf(ancestor.pid!) }))
      assert.strictEqual(ancestor.exitCode, null, "the host's parent was killed")
      assert.strictEqual(ancestor.signalCode, null, "the host's parent was killed")
      assert.strictEqual(cgroupOf(ancestor.pid!), hostCgroup, "moved out to the watchdog's cgroup (the host's)")
    }).pipe(Effect.scoped))
})

describe.runIf(runs)("a tool that moves itself out of its session's cgroup (root can)", { timeout: 20_000 }, () => {
  const kept = rootLeaver
  const cleared = escapeNamed("root-cgroup-env-i")

  it.live("found by the process tree (its marker): brought back, ended and named; one that cleared it is not", () => {
    const capture = captureReports()
    return Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const report = yield* makeReport
      const transport = yield* Transport.Transport
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      yield* transport.open(
        fakeSpec(mark, { tool: `${kept.command(report)}\n${cleared.command(report)}` }),
        { termGrace: Duration.millis(termGraceMillis) }
      ).pipe(Scope.provide(scope))
      const escaped = yield* awaitEscaped([kept, cleared], report)
      for (const each of escaped) assert.strictEqual(cgroupOf(each.pid), mount, `${each.name} left its cgroup`)

      yield* Scope.close(scope, Exit.void)

      const [keptOne] = escaped.filter((each) => each.name === kept.name)
      assert.isFalse(isAlive(keptOne), "the process that kept its environment survived")
      // The documented limit: no marker, no parent, its own session, outside the cgroup (a cgroup namespace and a
      // user namespace would keep it in; see issue 30).
      assert.deepStrictEqual(survivors(escaped), [cleared.name])
      const [teardown] = capture.reports
      assert.deepStrictEqual(teardown.escaped.map((each) => each.pid), [keptOne.pid])
      assert.strictEqual(teardown.killed, 1)
      assert.deepStrictEqual(teardown.survivors, [])
    }).pipe(Effect.scoped, Effect.provide(layer), capture.provide)
  })
})

describe.runIf(runs)("a tool that moved itself out of its session's cgroup, then the host SIGKILLed", {
  timeout: 20_000
}, () => {
  it.live("the watchdog finds it by the process tree, brings it back and ends it", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const report = yield* makeReport
      const host = yield* watchedHost(mark, { TETHER_TEST_TOOL: rootLeaver.command(report) })
      yield* readLine(host, "ready")
      const [escaped] = yield* awaitEscaped([rootLeaver], report)
      assert.strictEqual(cgroupOf(escaped.pid), mount)
      host.kill("SIGKILL")
      yield* waitUntil("the watchdog to end the process that left its cgroup", () => !isAlive(escaped), 5_000)
    }).pipe(Effect.scoped))
})

describe.runIf(runs)("a CLI moved out of its session's cgroup", { timeout: 20_000 }, () => {
  it.live("into another session's (a root tool can): its own teardown brings it back and ends it, at once", () => {
    const capture = captureReports()
    return Effect.gen(function*() {
      // The answer to initialize proves the CLI is up, its SIGTERM handler installed.
      const open = (mark: string, scope: Scope.Closeable) => openAnswering(mark, scope, { modes: ["ignore-sigterm"] })
      const [markA, markB] = [newMark(), newMark()]
      yield* killOnExit(markA)
      yield* killOnExit(markB)
      const [scopeA, scopeB] = [yield* Scope.make(), yield* Scope.make()]
      yield* Effect.addFinalizer(() => Effect.andThen(Scope.close(scopeB, Exit.void), Scope.close(scopeA, Exit.void)))
      const a = Option.getOrThrow((yield* open(markA, scopeA)).pid)
      const b = Option.getOrThrow((yield* open(markB, scopeB)).pid)
      const [cgroupA, cgroupB] = [cgroupOf(a)!, cgroupOf(b)!]
      const cliB = { name: "B", pid: b, start: startOf(b) }
      // What a root tool of A can do: B's CLI into A's cgroup.
      Fs.writeFileSync(`${cgroupA}/cgroup.procs`, `${b}\n`)
      assert.strictEqual(cgroupOf(b), cgroupA)

      const started = Date.now()
      yield* Scope.close(scopeB, Exit.void)
      const millis = Date.now() - started
      assert.isFalse(isAlive(cliB), "B's CLI outlived B's teardown")
      assert.isFalse(Fs.existsSync(cgroupB), "B's cgroup is left")
      // It ignores SIGTERM: killed once termGrace was over, not waited for until the kill grace ran out too (what a
      // teardown that lost its CLI did, with nothing to show for it).
      assert.isBelow(millis, termGraceMillis + killGraceMillis, `B's teardown took ${millis} ms`)
      const [report] = capture.reports
      assert.strictEqual(report.terminated, 1)
      assert.strictEqual(report.killed, 1)
      assert.deepStrictEqual(report.survivors, [])
      // A is untouched.
      assert.strictEqual(cgroupOf(a), cgroupA)
    }).pipe(Effect.scoped, Effect.provide(layer), capture.provide)
  })
})

describe.runIf(runs)("a process in a cgroup a tool made beside the sessions'", { timeout: 20_000 }, () => {
  it.live("is not taken by another live session's teardown; the last session's takes it", () =>
    Effect.gen(function*() {
      const open = (mark: string, scope: Scope.Closeable) => openAnswering(mark, scope, {})
      const [markA, markB] = [newMark(), newMark()]
      yield* killOnExit(markA)
      yield* killOnExit(markB)
      const [scopeA, scopeB] = [yield* Scope.make(), yield* Scope.make()]
      yield* Effect.addFinalizer(() => Effect.andThen(Scope.close(scopeB, Exit.void), Scope.close(scopeA, Exit.void)))
      const a = Option.getOrThrow((yield* open(markA, scopeA)).pid)
      yield* open(markB, scopeB)
      // What one of A's tools leaves as root: a process with no marker and no parent, in a cgroup it made in the
      // layer's beside the sessions'. Nothing tells whose it is.
      const sibling = `${cgroupOf(a)!.replace(/\/[^/]+$/, "")}/tool-made-${markA.slice(-8)}`
      const stray = yield* Effect.acquireRelease(
        Effect.sync(() => {
          Fs.mkdirSync(sibling)
          const child = ChildProcess.spawn("sleep", ["300"], { detached: true, stdio: "ignore", env: {} })
          child.unref()
          Fs.writeFileSync(`${sibling}/cgroup.procs`, `${child.pid}\n`)
          return { pid: child.pid!, start: startOf(child.pid!), name: "stray" }
        }),
        (stray) =>
          Effect.sync(() => {
            if (isAlive(stray)) process.kill(stray.pid, "SIGKILL")
            Cgroup.removeTree(sibling)
          })
      )
      assert.strictEqual(cgroupOf(stray.pid), sibling)
      yield* Scope.close(scopeB, Exit.void)
      assert.isTrue(isAlive(stray), "B's teardown took a process that could be A's")
      yield* Scope.close(scopeA, Exit.void)
      yield* waitUntil("A's teardown, the layer's last, to end it", () => !isAlive(stray), boundMillis)
    }).pipe(Effect.scoped, Effect.provide(layer)))
})

describe.runIf(runs)("a CLI moved out of its session's cgroup, then the host SIGKILLed", { timeout: 20_000 }, () => {
  it.live("the watchdog brings it back and ends it", () =>
    Effect.gen(function*() {
      const mark = newMark()
      // A cgroup outside the session's (as a root tool could make), removed once the test is done: after the
      // processes are killed (finalizers run last to first).
      const elsewhere = `${own}/tether-test-elsewhere-${mark}`
      Fs.mkdirSync(elsewhere)
      yield* Effect.addFinalizer(() =>
        waitUntil("the test's cgroup to be removed", () => Cgroup.removeDir(elsewhere), 2_000).pipe(Effect.ignore)
      )
      yield* killOnExit(mark)
      // It ignores SIGTERM and the EOF its host's death makes: only a kill ends it.
      const host = yield* watchedHost(mark, { TETHER_TEST_MODES: "ignore-sigterm" })
      const cliPid = Number((yield* readLine(host, "ready")).split(" ")[1])
      const session = cgroupOf(cliPid)!
      const cli = { name: "cli", pid: cliPid, start: startOf(cliPid) }
      Fs.writeFileSync(`${elsewhere}/cgroup.procs`, `${cliPid}\n`)
      assert.strictEqual(cgroupOf(cliPid), elsewhere)
      host.kill("SIGKILL")
      // The watchdog starts Node once the host's pipe closes (seconds on a loaded machine), waits termGrace (300 ms),
      // then kills.
      yield* waitUntil("the watchdog to end the moved CLI", () => !isAlive(cli), 5_000)
      yield* waitUntil("the watchdog to remove the session's cgroup", () => !Fs.existsSync(session), 5_000)
    }).pipe(Effect.scoped))
})

/** A process's start time (clock ticks since boot), "" when it is gone. */
const startOf = (pid: number): string => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return ""
  }
}

const hostScript = fileURLToPath(new URL("./fixtures/host.ts", import.meta.url))
const guardedHostScript = fileURLToPath(new URL("./fixtures/guardedHost.ts", import.meta.url))

/** A session of the fake CLI opened in `scope`, once it answered initialize (so its signal handlers are installed). */
const openAnswering = (mark: string, scope: Scope.Closeable, knobs: Parameters<typeof fakeSpec>[1]) =>
  Effect.gen(function*() {
    const transport = yield* Transport.Transport
    const connection = yield* transport.open(fakeSpec(mark, knobs), { termGrace: Duration.millis(termGraceMillis) })
      .pipe(Scope.provide(scope))
    yield* connection.write(initialize)
    yield* Stream.runHead(connection.stdout)
    return connection
  })

/** A host process (fixtures/host.ts) running the fake CLI under cgroup with the watchdog, killed with the scope. */
const watchedHost = (mark: string, env: { readonly [name: string]: string }) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      ChildProcess.spawn(process.execPath, [hostScript, "runPromise", "watchdog", mark, fakeClaudePath, "cgroup"], {
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, TETHER_TEST_ISOLATION: "off", ...env }
      })
    ),
    (host) => Effect.sync(() => host.kill("SIGKILL"))
  )

class HostLine extends Data.TaggedError("HostLine")<{ readonly expected: string; readonly got: string }> {}

/** The next line the host prints that starts with `prefix` (within 10 s): fails on its exit or another line. */
const readLine = (host: ChildProcess.ChildProcess, prefix: string) =>
  Effect.callback<string, HostLine>((resume) => {
    let buffered = ""
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      const newline = buffered.indexOf("\n")
      if (newline === -1) return
      cleanup()
      const line = buffered.slice(0, newline)
      resume(
        line.startsWith(prefix) ? Effect.succeed(line) : Effect.fail(new HostLine({ expected: prefix, got: line }))
      )
    }
    const onExit = (code: number | null, signal: string | null) => {
      cleanup()
      resume(Effect.fail(new HostLine({ expected: prefix, got: `exit ${code ?? signal}` })))
    }
    const timer = setTimeout(() => {
      cleanup()
      resume(Effect.fail(new HostLine({ expected: prefix, got: "nothing within 10 s" })))
    }, 10_000)
    const cleanup = () => {
      clearTimeout(timer)
      host.stdout!.off("data", onData)
      host.off("exit", onExit)
    }
    host.stdout!.on("data", onData)
    host.once("exit", onExit)
    return Effect.sync(cleanup)
  })

describe.runIf(runs)("teardown never signals the host nor its ancestors", { timeout: 20_000 }, () => {
  it.live("a tool writes them into its session's cgroup.procs: moved out, reported, alive; the session is gone", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      // The "host" is a process of this test's own (the fixture), and its "ancestor" the shell that started it: a
      // regression kills those two, never this test's process.
      const ancestor = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn("/bin/sh", ["-c", `"$0" "$@"; exit $?`, process.execPath, guardedHostScript, mark], {
            stdio: ["pipe", "pipe", "inherit"],
            env: { ...process.env, TETHER_TEST_CGROUP_MOUNT: mount, TETHER_TEST_FAKE: fakeClaudePath }
          })
        ),
        (sh) =>
          Effect.sync(() => {
            sh.kill("SIGKILL")
          })
      )
      const ready = yield* readLine(ancestor, "ready")
      const [, hostPid, cliPid] = ready.split(" ").map(Number)
      const hostCgroup = cgroupOf(hostPid)!
      const session = cgroupOf(cliPid)!
      assert.notStrictEqual(hostCgroup, session)
      // The tool has moved both in.
      yield* waitUntil(
        "the tool to move the host and its parent into the session's cgroup",
        () => cgroupOf(hostPid) === session && cgroupOf(ancestor.pid!) === session
      )

      ancestor.stdin!.write("close\n")
      const line = yield* readLine(ancestor, "closed")
      const report = JSON.parse(line.slice("closed ".length)) as Teardown.Report
      assert.deepStrictEqual(
        report.spared.map((each) => ({ pid: each.pid, movedOut: each.movedOut })).sort((a, b) => a.pid - b.pid),
        [{ pid: ancestor.pid!, movedOut: true }, { pid: hostPid, movedOut: true }].sort((a, b) => a.pid - b.pid)
      )
      assert.deepStrictEqual(report.survivors, [])
      // The CLI was asked to end, and only it: the spared are not counted.
      assert.strictEqual(report.terminated, 1)
      assert.strictEqual(cgroupOf(hostPid), hostCgroup, "the host is back in its own cgroup")
      assert.strictEqual(cgroupOf(ancestor.pid!), hostCgroup, "so is its parent")
      assert.isFalse(Fs.existsSync(session), "the session's cgroup is left")

      // Both are alive and well: the host ends by itself when its input ends, and its parent with it.
      const exit = Effect.callback<number | string | null>((resume) => {
        ancestor.once("exit", (code, signal) => resume(Effect.succeed(code ?? signal)))
      })
      ancestor.stdin!.end()
      assert.strictEqual(yield* exit.pipe(Effect.timeout(Duration.seconds(10))), 0)
    }).pipe(Effect.scoped))
})
