/**
 * What happens to a session's processes when its host dies. Each test runs a real host program
 * (`fixtures/host.ts`, Node 24) as a child process and looks at /proc for the session's marker afterwards. The
 * hosts run without isolation between sessions (the trees counted here are the CLI's, with no box around it); an
 * isolated session's host death is in the escape suite (a SIGKILLed host under every containment).
 */
import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Data, Duration, Effect, Exit, Layer, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { title } from "../src/internal/watchdog.ts"
import {
  allProcs,
  fakeClaudePath,
  fakeSpec,
  killAllMarked,
  marked,
  newMark,
  removeHostCgroups,
  sleeping,
  waitUntil
} from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/host.ts", import.meta.url))

// fake-claude + 2 sleeping grandchildren + setsid shell and its sleep + the daemon's sleep.
const treeSize = 6

class HostFailed extends Data.TaggedError("HostFailed")<{ readonly reason: string }> {}

const startHost = (
  runner: "runMain" | "runPromise",
  watchdog: boolean,
  mark: string,
  options?: {
    readonly containment?: string
    readonly tool?: string
    readonly termGraceMillis?: number
    readonly modes?: string
  }
) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess, HostFailed>((resume) => {
      const host = ChildProcess.spawn(
        process.execPath,
        [
          hostScript,
          runner,
          watchdog ? "watchdog" : "no-watchdog",
          mark,
          fakeClaudePath,
          ...(options?.containment === undefined ? [] : [options.containment])
        ],
        {
          stdio: ["ignore", "pipe", "inherit"],
          env: {
            ...process.env,
            TETHER_TEST_ISOLATION: "off",
            ...(options?.tool === undefined ? {} : { TETHER_TEST_TOOL: options.tool }),
            ...(options?.modes === undefined ? {} : { TETHER_TEST_MODES: options.modes }),
            ...(options?.termGraceMillis === undefined
              ? {}
              : { TETHER_TEST_TERM_GRACE: String(options.termGraceMillis) })
          }
        }
      )
      host.stdout.setEncoding("utf8")
      host.stdout.once(
        "data",
        (data: string) =>
          data.startsWith("ready")
            ? resume(Effect.succeed(host))
            : resume(Effect.fail(new HostFailed({ reason: data })))
      )
      host.once("error", (error) => resume(Effect.fail(new HostFailed({ reason: error.message }))))
    }),
    (host) => Effect.sync(() => host.kill("SIGKILL"))
  )

const exited = (host: ChildProcess.ChildProcess) =>
  Effect.callback<number | null>((resume) => {
    if (host.exitCode !== null || host.signalCode !== null) return resume(Effect.succeed(host.exitCode))
    host.once("exit", (code) => resume(Effect.succeed(code)))
  })

/** Kills whatever a test deliberately left behind, so that nothing outlives the suite. */
const cleanup = (mark: string) => killAllMarked(mark)

// A host is a Node program that loads Effect from source: on a loaded 2-core machine it takes seconds to start.
describe("host death", { timeout: 20_000 }, () => {
  it.live("a host under NodeRuntime.runMain that receives SIGTERM tears its whole tree down", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      // No watchdog: the finalizers alone must do it.
      const host = yield* startHost("runMain", false, mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize)
      host.kill("SIGTERM")
      yield* exited(host).pipe(Effect.timeout("5 seconds"))
      // The host exits only after its finalizers ran: nothing is left at that moment.
      assert.deepStrictEqual(marked(mark), [])
    }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
  })

  it.live("a host killed with SIGKILL: the watchdog tears the tree down", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const host = yield* startHost("runPromise", true, mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize)
      host.kill("SIGKILL")
      yield* exited(host)
      // Node's start (the keeper starts it once the pipe closes), then termGrace (300 ms), then SIGKILL for what
      // ignored SIGTERM.
      yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, 5_000)
    }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
  })

  // No process the session's tools could kill stands between the host's death and the session's: the launcher's
  // parent-death signal (setpriv --pdeathsig KILL) and unshare's --kill-child are the kernel's.
  it.live.runIf(process.platform === "linux" && Fs.existsSync("/usr/bin/setpriv"))(
    "without the watchdog, a SIGKILLed host's pid-namespace session is ended by the kernel",
    () => {
      const mark = newMark()
      return Effect.gen(function*() {
        // The CLI ignores the EOF of its stdin (and SIGTERM): its own exit, as the namespace's first process, would
        // end the namespace too, and that is not what is tested.
        const host = yield* startHost("runPromise", false, mark, {
          containment: "pid-namespace",
          modes: "ignore-sigterm,setsid-child,grandchildren,double-fork-daemon"
        })
        yield* waitUntil("the session's tree", () => sleeping(marked(mark)).length === 4)
        host.kill("SIGKILL")
        yield* exited(host)
        // No Node to start, no grace: the kernel kills at once (a loaded machine's scheduling aside).
        yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, 2_000)
      }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
    }
  )

  it.live("a host under Effect.runPromise that receives SIGTERM: the watchdog tears the tree down", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const host = yield* startHost("runPromise", true, mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize)
      host.kill("SIGTERM")
      yield* exited(host)
      yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, 5_000)
    }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
  })

  it.live("without the watchdog, a host under Effect.runPromise that receives SIGTERM leaves its tree running", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const host = yield* startHost("runPromise", false, mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize)
      host.kill("SIGTERM")
      yield* exited(host)
      yield* Effect.sleep("500 millis")
      // This is the documented limit (capabilities: diesWithHost = false without the watchdog). The CLI itself
      // exits on the stdin EOF its host's death causes; its descendants do not.
      assert.strictEqual(sleeping(marked(mark)).length, 4)
      // Nobody is left to remove the session's (emptied) cgroup either.
      yield* cleanup(mark)
      yield* removeHostCgroups(host.pid!)
    }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
  })

  for (const containment of ["cgroup", "process-tree"]) {
    it.live(`the watchdog sends SIGTERM to what its later scans find too, not only its first (${containment})`, () => {
      const mark = newMark()
      return Effect.gen(function*() {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-watchdog-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const log = Path.join(dir, "log")
        const go = Path.join(dir, "go")
        // A spawner that outlives SIGTERM (it writes it down: a handler, not an ignore, which its child would
        // inherit), waits for the go file, then starts the late process (a `sleep`, with SIGTERM's default action) and
        // writes down how that process ended. It, not the late process, says so: a late shell that wrote "late" and
        // trapped SIGTERM itself could be killed by the watchdog's next scan (25 ms on) before it had done either,
        // which happened here in 1 run in 5 to 11.
        const spawner = Path.join(dir, "spawner.mjs")
        Fs.writeFileSync(
          spawner,
          [
            `import * as Fs from "node:fs"`,
            `import { spawn } from "node:child_process"`,
            `const say = (line) => Fs.appendFileSync(${JSON.stringify(log)}, line + "\\n")`,
            `process.on("SIGTERM", () => say("spawner-term"))`,
            `say("spawner-ready")`,
            `const timer = setInterval(() => {`,
            `  if (!Fs.existsSync(${JSON.stringify(go)})) return`,
            `  clearInterval(timer)`,
            `  const late = spawn("sleep", ["1000"], { stdio: "ignore" })`,
            `  say("late")`,
            `  late.on("exit", (code, signal) => {`,
            `    say(signal === "SIGTERM" ? "got-term" : "late-ended " + code + " " + signal)`,
            `    process.exit(0)`,
            `  })`,
            `}, 10)`
          ].join("\n")
        )
        const tool = `'${process.execPath}' '${spawner}' &`
        // A grace long enough for the late process to start on a loaded machine before the watchdog's SIGKILL (with
        // 300 ms, a CI run lost the race): what is checked is that SIGTERM reaches it, which a later scan does.
        const host = yield* startHost("runPromise", true, mark, { containment, tool, termGraceMillis: 5_000 })
        const lines = () => Fs.existsSync(log) ? Fs.readFileSync(log, "utf8").split("\n") : []
        // Its handler is in place once it says so.
        yield* waitUntil("the spawner", () => lines().includes("spawner-ready"), 5_000)
        host.kill("SIGKILL")
        yield* exited(host)
        // The watchdog (Node, started once the host is gone) saw the pipe close and scanned: the late process starts
        // after that first scan, and within the grace before SIGKILL.
        yield* waitUntil("the first scan's SIGTERM to reach the spawner", () => lines().includes("spawner-term"), 5_000)
        assert.isFalse(lines().includes("late"))
        Fs.writeFileSync(go, "")
        yield* waitUntil("the late process to start", () => lines().includes("late"), 3_000)
        yield* waitUntil("SIGTERM to reach the late process", () => lines().includes("got-term"), 3_000)
        yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, 3_000)
      }).pipe(Effect.scoped, Effect.ensuring(cleanup(mark)))
    })
  }

  it.live("the watchdog starts with the first session and stops when its layer is released", () =>
    Effect.gen(function*() {
      const watchdogs = () =>
        new Set(
          allProcs().filter((proc) => proc.args.startsWith(title) && proc.ppid === process.pid).map((proc) => proc.pid)
        )
      const before = watchdogs()
      const scope = yield* Scope.make()
      // Released by the test, or here when it fails first: the watchdog process must not outlive the test.
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const context = yield* Layer.buildWithScope(
        NodeTransport.layer({ executables: { claude: fakeClaudePath }, isolation: false }),
        scope
      )
      const transport = yield* Effect.provide(Transport.Transport, context)
      assert.deepStrictEqual(watchdogs(), before, "no watchdog before the first session")
      const mark = newMark()
      yield* Effect.addFinalizer(() => cleanup(mark))
      yield* Effect.scoped(
        transport.open(fakeSpec(mark, {}), { termGrace: Duration.millis(300) }).pipe(Effect.map((c) => c.pid))
      )
      const started = () => [...watchdogs()].filter((pid) => !before.has(pid))
      // The keeper is named by its argv[0] from the start.
      yield* waitUntil("the watchdog to start", () => started().length > 0, 3_000)
      const [watchdog] = started()
      assert.strictEqual(started().length, 1)
      yield* Scope.close(scope, Exit.void)
      yield* waitUntil("the watchdog to exit", () => !watchdogs().has(watchdog), 3_000)
    }).pipe(Effect.scoped))
})
