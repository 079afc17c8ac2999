/**
 * The process-table reader behind teardown, on both backends (/proc and ps), against real process trees.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as ProcessTree from "../src/internal/processTree.ts"
import * as Secrets from "../src/internal/secrets.ts"
import { killAllMarked, marked, newMark, sleeping, waitUntil } from "./utils.ts"

/** A root (own session) with a child, a setsid grandchild with its own child, and an orphaned daemon. */
const spawnTree = (mark: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      ChildProcess.spawn(
        "/bin/sh",
        ["-c", "sleep 1000 & setsid sh -c 'sleep 1000; :' & sh -c 'setsid sleep 1000 & exit 0'; wait"],
        { detached: true, stdio: "ignore", env: { ...process.env, TEST_MARK: mark } }
      )
    ),
    (root) =>
      Effect.andThen(
        Effect.sync(() => root.kill("SIGKILL")),
        killAllMarked(mark)
      )
  )

/** Whether Node reaped the root (its exit was seen): from then on its pid may name another process. */
const rootReaped = (root: ChildProcess.ChildProcess) => () => root.exitCode !== null || root.signalCode !== null

const pids = (procs: ReadonlyArray<{ readonly pid: number }>) => procs.map((proc) => proc.pid).sort((a, b) => a - b)

/** A synthetic process: pid, parent, group, session (start time 100 + pid unless given). */
const proc = (pid: number, ppid: number, pgid: number, sid: number, extra?: { zombie?: boolean; start?: string }) => ({
  pid,
  ppid,
  pgid,
  sid,
  zombie: extra?.zombie ?? false,
  start: extra?.start ?? String(100 + pid)
})

const table = (...procs: ReadonlyArray<ProcessTree.ProcessInfo>) => new Map(procs.map((info) => [info.pid, info]))

/** Runs scans over tables in order (the state carried from one to the next); the last scan's live pids. */
const scans = (
  tables: ReadonlyArray<ReadonlyMap<number, ProcessTree.ProcessInfo>>,
  options?: { readonly marked?: ReadonlySet<number>; readonly rootAlive?: boolean }
) => {
  let state = ProcessTree.initial(root)
  let alive: ReadonlyArray<ProcessTree.ProcessInfo> = []
  for (const each of tables) {
    const next = ProcessTree.step(state, each, {
      rootPid: root,
      rootAlive: options?.rootAlive ?? true,
      isMarked: (info) => options?.marked?.has(info.pid) ?? false,
      excluded: new Set([1, host])
    })
    state = next.state
    alive = next.alive
  }
  return pids(alive)
}

// The host (Tether), the CLI it spawned in its own session, and unrelated processes around them.
const host = 50
const root = 100
const init = proc(1, 0, 1, 1)
const hostProc = proc(host, 1, host, host)
const cli = proc(root, host, root, root)
const stranger = proc(900, 1, 900, 900)

describe("ProcessTree.step (synthetic tables)", () => {
  it.effect("descendants by parent link, in and out of the CLI's group and session", () =>
    Effect.sync(() => {
      const child = proc(101, root, root, root)
      const setsid = proc(102, root, 102, 102)
      const grandchild = proc(103, 102, 102, 102)
      assert.deepStrictEqual(scans([table(init, hostProc, cli, child, setsid, grandchild, stranger)]), [
        100,
        101,
        102,
        103
      ])
    }))

  it.effect("the session rule alone: a child that cleared its environment, in the CLI's session, parent gone", () =>
    Effect.sync(() => {
      // `sh -c 'env -i sleep 300 &'` run by the CLI: sh exited, sleep was re-parented to PID 1, no marker.
      const orphan = proc(105, 1, 104, root)
      assert.deepStrictEqual(scans([table(init, hostProc, cli, orphan, stranger)]), [100, 105])
      // Without the CLI alive (it exited, Node reaped it): its session id still names the tree.
      assert.deepStrictEqual(scans([table(init, hostProc, orphan, stranger)], { rootAlive: false }), [105])
    }))

  it.effect("a session leader seen by an earlier scan keeps counting after it exited", () =>
    Effect.sync(() => {
      // The Bash tool's shell leads its own session; its `env -i setsid`-less background child outlives it.
      const shell = proc(110, root, 110, 110)
      const background = proc(111, 110, 110, 110)
      const during = table(init, hostProc, cli, shell, background, stranger)
      const after = table(init, hostProc, cli, proc(111, 1, 110, 110), stranger)
      assert.deepStrictEqual(scans([during, after]), [100, 111])
      // The limit of the process tree: had no scan seen the shell, nothing links the orphan to the CLI.
      assert.deepStrictEqual(scans([after]), [100])
    }))

  it.effect("the marker rule alone: an orphan in a session of its own", () =>
    Effect.sync(() => {
      const daemon = proc(120, 1, 120, 120)
      assert.deepStrictEqual(scans([table(init, hostProc, cli, daemon, stranger)], { marked: new Set([120]) }), [
        100,
        120
      ])
      assert.deepStrictEqual(scans([table(init, hostProc, cli, daemon, stranger)]), [100])
    }))

  it.effect("zombies are members but not alive", () =>
    Effect.sync(() => {
      const zombie = proc(130, root, root, root, { zombie: true })
      const child = proc(131, 130, root, root)
      assert.deepStrictEqual(scans([table(init, hostProc, cli, zombie, child)]), [100, 131])
    }))

  it.effect("a member's pid reused by another process is not a member, nor is that process's session", () =>
    Effect.sync(() => {
      const shell = proc(140, root, 140, 140)
      const first = table(init, hostProc, cli, shell)
      // The shell exited and its session emptied; pid 140 now names an unrelated session leader and its child.
      const reused = proc(140, 1, 140, 140, { start: "999" })
      const itsChild = proc(141, 140, 140, 140)
      assert.deepStrictEqual(scans([first, table(init, hostProc, cli, reused, itsChild)]), [100])
    }))

  it.effect("a dead leader whose session emptied is forgotten: a later reuse of its pid as a session id is not ours", () =>
    Effect.sync(() => {
      const shell = proc(150, root, 150, 150)
      const first = table(init, hostProc, cli, shell)
      const empty = table(init, hostProc, cli)
      // Between two scans, an unrelated process took pid 150, called setsid, forked 151 and exited.
      const later = table(init, hostProc, cli, proc(151, 1, 150, 150))
      assert.deepStrictEqual(scans([first, empty, later]), [100])
    }))

  it.effect("the host and PID 1 are never members, even in the CLI's session", () =>
    Effect.sync(() => {
      const odd = proc(host, root, root, root)
      assert.deepStrictEqual(scans([table(init, odd, cli)]), [100])
    }))
})

describe("ProcessTree", () => {
  it.live.runIf(process.platform === "linux")(
    "describes a process with its secrets scrubbed before the command line is cut, not after",
    () =>
      Effect.gen(function*() {
        const secret = "sk-test-0123456789abcdef0123456789"
        // The secret straddles the 200th character: cut first, its first half would be left in the description.
        const padding = "x".repeat(170)
        const child = ChildProcess.spawn("perl", ["-e", "sleep 300", padding, secret], { stdio: "ignore" })
        yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
        yield* waitUntil("perl to run", () => ProcessTree.describeProcess(child.pid!)?.startsWith("perl") === true)
        const scrub = Secrets.make([{ name: "KEY", value: secret }])
        const described = ProcessTree.describeProcess(child.pid!, scrub)!
        assert.notInclude(described, secret.slice(0, 8))
        assert.strictEqual(described, `perl -e sleep 300 ${padding} [redacted KEY]`.slice(0, 200) + "…")
        assert.strictEqual(ProcessTree.describeProcess(1 << 30), undefined)
      }).pipe(Effect.scoped)
  )

  it.effect("parses /proc/<pid>/stat, including a command name with spaces and parentheses", () =>
    Effect.sync(() => {
      const info = ProcessTree.parseStat(
        42,
        "42 (a (weird) name) S 7 42 40 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0"
      )
      assert.deepStrictEqual(info, { pid: 42, ppid: 7, pgid: 42, sid: 40, zombie: false, start: "123456" })
      assert.isTrue(ProcessTree.parseStat(1, "1 (x) Z 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 9 0")?.zombie)
    }))

  it.live("/proc: finds every process of the tree, setsid and orphans included, and nothing else", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const root = yield* spawnTree(mark)
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 3)
      const tree = ProcessTree.make({
        backend: "proc",
        rootPid: root.pid!,
        rootReaped: rootReaped(root),
        marker: `TEST_MARK=${mark}`
      })
      assert.deepStrictEqual(pids(tree.scan()), pids(marked(mark)))
    }).pipe(Effect.scoped))

  it.live("/proc with the marker alone (no root known, the watchdog's case before the spawn is reported)", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* spawnTree(mark)
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 3)
      const tree = ProcessTree.make({
        backend: "proc",
        rootPid: undefined,
        rootReaped: () => true,
        marker: `TEST_MARK=${mark}`
      })
      // A table read by the caller, as the watchdog reads one for all its trees.
      assert.deepStrictEqual(pids(tree.scan(ProcessTree.readTable("proc"))), pids(marked(mark)))
    }).pipe(Effect.scoped))

  it.live("/proc with the root's start time: a process older than the root is never a member, marker or not", () =>
    Effect.gen(function*() {
      const mark = newMark()
      // Same marker, own session, started before the root: it cannot descend from it.
      const older = ChildProcess.spawn("sleep", ["1000"], {
        detached: true,
        stdio: "ignore",
        env: { ...process.env, TEST_MARK: mark }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => older.kill("SIGKILL")))
      yield* waitUntil("the older process", () => marked(mark).length === 1)
      // Start times are in clock ticks (usually 10 ms): let one pass.
      yield* Effect.sleep("50 millis")
      const root = yield* spawnTree(mark)
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 4)
      const options = {
        backend: "proc" as const,
        rootPid: root.pid!,
        rootReaped: rootReaped(root),
        marker: `TEST_MARK=${mark}`
      }
      const rootStart = ProcessTree.readStat(root.pid!)?.start
      assert.isDefined(rootStart)
      const found = pids(ProcessTree.make({ ...options, rootStart }).scan())
      // The orphaned daemon is still found through the marker; the older process is not.
      assert.deepStrictEqual(found, pids(marked(mark).filter((proc) => proc.pid !== older.pid)))
      assert.include(pids(ProcessTree.make(options).scan()), older.pid!)
    }).pipe(Effect.scoped))

  it.live("/proc without the marker: found through parent links and sessions while the parents live", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const root = yield* spawnTree(mark)
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 3)
      const tree = ProcessTree.make({ backend: "proc", rootPid: root.pid!, rootReaped: () => false, marker: undefined })
      const found = pids(tree.scan())
      // Everything but the orphaned daemon (its parent exited, it left the session): that one needs the marker.
      const expected = marked(mark).filter((proc) =>
        !(proc.ppid === 1 && proc.sid !== root.pid && proc.sid === proc.pid)
      )
      assert.deepStrictEqual(found, pids(expected))
      assert.strictEqual(marked(mark).length - expected.length, 1)
    }).pipe(Effect.scoped))

  it.live("ps backend: finds the descendants of a live root, setsid ones included", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const root = yield* spawnTree(mark)
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 3)
      const tree = ProcessTree.make({ backend: "ps", rootPid: root.pid!, rootReaped: () => false, marker: undefined })
      const found = pids(tree.scan())
      const expected = marked(mark).filter((proc) => !(proc.ppid === 1 && proc.sid === proc.pid))
      assert.deepStrictEqual(found, pids(expected))
    }).pipe(Effect.scoped))

  it.live("a member that died is not alive, and its pid stops counting once reused", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const root = yield* spawnTree(mark)
      // Settled: the root, its sleep, the setsid shell and its sleep, the orphaned sleep (the shell that started it
      // exits on its own, and must be gone before the two reads below are compared).
      yield* waitUntil("the tree", () => sleeping(marked(mark)).length === 3 && marked(mark).length === 5)
      const tree = ProcessTree.make({
        backend: "proc",
        rootPid: root.pid!,
        rootReaped: rootReaped(root),
        marker: `TEST_MARK=${mark}`
      })
      assert.isTrue(tree.scan().some((proc) => proc.pid === root.pid))
      root.kill("SIGKILL")
      yield* Effect.callback<void>((resume) => {
        root.once("exit", () => resume(Effect.void))
      })
      const alive = tree.scan()
      assert.isFalse(alive.some((proc) => proc.pid === root.pid))
      assert.deepStrictEqual(pids(alive), pids(marked(mark)))
      assert.strictEqual(alive.length, 4)
    }).pipe(Effect.scoped))

  it.live.runIf(process.platform === "linux")(
    "a shared table: taken again by a look that accepts a read begun before it, read again for a later one, and kept no longer than its time",
    () =>
      Effect.gen(function*() {
        const shared = ProcessTree.sharedTable("proc", 60_000)
        const before = performance.now()
        const first = shared.read(before)
        assert.isTrue(first.has(process.pid), "the table is the machine's")
        assert.strictEqual(shared.read(before), first, "a read begun at or after the moment asked for is taken")
        assert.strictEqual(shared.read(Number.NEGATIVE_INFINITY), first)
        const later = shared.read(performance.now())
        assert.notStrictEqual(later, first, "a look that needs a table read from now on got an older one")
        assert.strictEqual(shared.read(before), later)

        const brief = ProcessTree.sharedTable("proc", 0)
        const kept = brief.read(Number.NEGATIVE_INFINITY)
        // Its 0 ms timer fires before this one.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
        assert.notStrictEqual(brief.read(Number.NEGATIVE_INFINITY), kept, "the table was kept past its time")
      })
  )
})
