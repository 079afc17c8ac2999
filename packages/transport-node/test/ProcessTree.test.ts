/**
 * The process-table reader behind teardown, on both backends (/proc and ps), against real process trees.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as ProcessTree from "../src/internal/processTree.ts"
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

describe("ProcessTree", () => {
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
      yield* waitUntil("the tree", () => marked(mark).length >= 5)
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
    }).pipe(Effect.scoped))
})
