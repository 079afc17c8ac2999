/**
 * Finding the cgroup2 hierarchy and the host's cgroup in it (pure), and a session cgroup's life on this machine.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Cgroup from "../src/internal/cgroup.ts"
import { waitUntil } from "./utils.ts"

const hybrid = [
  "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
  "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
  "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
].join("\n")

/**
 * A layer with one session and a `sleep` (not placed yet); however the test ends, the process is killed, then (once
 * it has left) the cgroups are removed.
 */
const sleepInSession = Effect.gen(function*() {
  const layer = Cgroup.makeLayer()
  if (typeof layer === "string") return yield* Effect.die(new Error(layer))
  const session = layer.session()
  const child = ChildProcess.spawn("sleep", ["300"], { stdio: "ignore" })
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      child.kill("SIGKILL")
      yield* waitUntil("the session's cgroups to be removed", () => session.remove(), 2_000).pipe(Effect.ignore)
      layer.remove()
    })
  )
  return { child, layer, session }
})

describe("Cgroup.locate", () => {
  it.effect("the cgroup2 mount beside v1 controllers, and the host's cgroup under it", () =>
    Effect.sync(() => {
      assert.deepStrictEqual(Cgroup.locate(hybrid, "4:memory:/x\n0::/\n"), {
        _tag: "Found",
        mount: "/sys/fs/cgroup/unified",
        own: "/sys/fs/cgroup/unified"
      })
      assert.deepStrictEqual(Cgroup.locate(hybrid, "0::/system.slice/host.service\n"), {
        _tag: "Found",
        mount: "/sys/fs/cgroup/unified",
        own: "/sys/fs/cgroup/unified/system.slice/host.service"
      })
    }))

  it.effect("a mount of a subtree (a container's), and escaped mount points", () =>
    Effect.sync(() => {
      const container = "50 40 0:37 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw"
      assert.deepStrictEqual(Cgroup.locate(container, "0::/docker/abc/app\n"), {
        _tag: "Found",
        mount: "/sys/fs/cgroup",
        own: "/sys/fs/cgroup/app"
      })
      assert.strictEqual(Cgroup.locate(container, "0::/elsewhere\n")._tag, "Missing")
      const spaced = "40 30 0:37 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw"
      assert.deepStrictEqual(Cgroup.locate(spaced, "0::/\n"), {
        _tag: "Found",
        mount: "/mnt/my cgroups",
        own: "/mnt/my cgroups"
      })
    }))

  it.effect("no cgroup2 mount, or a host in no cgroup2 cgroup", () =>
    Effect.sync(() => {
      assert.deepStrictEqual(
        Cgroup.locate("34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory", "0::/\n"),
        {
          _tag: "Missing",
          reason: "no cgroup2 hierarchy is mounted"
        }
      )
      assert.strictEqual(Cgroup.locate(hybrid, "4:memory:/x\n")._tag, "Missing")
    }))
})

describe("Cgroup (this machine)", () => {
  it.live.runIf(process.platform === "linux" && process.getuid?.() === 0)(
    "a new layer removes the empty cgroups a dead host left behind, and nothing of a live one",
    () =>
      Effect.gen(function*() {
        const first = Cgroup.makeLayer()
        if (typeof first === "string") return assert.fail(first)
        const own = Path.dirname(first.path)
        first.remove()
        // A host that is gone: the pid of a process that exited and was reaped.
        const gone = ChildProcess.spawnSync("true").pid
        const stale = Path.join(own, `tether-${gone}-0badc0de`)
        Fs.mkdirSync(stale)
        Fs.mkdirSync(Path.join(stale, "s1"))
        // A live host's (this one's, under another name) is left alone.
        const live = Path.join(own, `tether-${process.pid}-0000live`)
        Fs.mkdirSync(live)
        const layer = Cgroup.makeLayer()
        if (typeof layer === "string") return assert.fail(layer)
        assert.isFalse(Fs.existsSync(stale))
        assert.isTrue(Fs.existsSync(live))
        Cgroup.removeDir(live)
        layer.remove()
      })
  )

  it.live.runIf(process.platform === "linux" && process.getuid?.() === 0)(
    "a session cgroup holds a process, kills it with cgroup.kill, and is removed; the layer too",
    () =>
      Effect.gen(function*() {
        const { child, layer, session } = yield* sleepInSession
        session.place(child.pid!)
        assert.deepStrictEqual(session.pids(), [child.pid!])
        assert.isFalse(session.remove(), "a populated cgroup cannot be removed")
        session.kill()
        const signal = yield* Effect.callback<NodeJS.Signals | null>((resume) => {
          child.once("exit", (_, signal) => resume(Effect.succeed(signal)))
        })
        assert.strictEqual(signal, "SIGKILL")
        assert.deepStrictEqual(session.pids(), [])
        assert.isTrue(session.remove())
        layer.remove()
        assert.isTrue(Cgroup.removeDir(layer.path), "already gone")
      }).pipe(Effect.scoped)
  )

  it.live.runIf(process.platform === "linux" && process.getuid?.() === 0)(
    "a session's subtree: nested members are its members, populated and cgroup.kill reach them, removal is deepest first",
    () =>
      Effect.gen(function*() {
        const { child, layer, session } = yield* sleepInSession
        const deeper = Path.join(session.path, "nest", "deeper")
        Fs.mkdirSync(deeper, { recursive: true })
        // A sibling a tool made beside the session's, in the layer's.
        const sibling = Path.join(layer.path, "made-by-a-tool")
        Fs.mkdirSync(sibling)
        assert.deepStrictEqual(session.foreign(), [sibling])
        assert.deepStrictEqual(Cgroup.subtree(session.path), [deeper, Path.dirname(deeper), session.path])
        assert.isFalse(session.populated())

        const exited = Effect.callback<NodeJS.Signals | null>((resume) => {
          if (child.signalCode !== null) return resume(Effect.succeed(child.signalCode))
          child.once("exit", (_, signal) => resume(Effect.succeed(signal)))
        })
        assert.isTrue(Cgroup.move(child.pid!, deeper))
        // Its own cgroup.procs is empty, the subtree is not.
        assert.strictEqual(Fs.readFileSync(Path.join(session.path, "cgroup.procs"), "latin1"), "")
        assert.deepStrictEqual(session.pids(), [child.pid!])
        assert.isTrue(session.populated())
        assert.isFalse(session.remove(), "a populated subtree cannot be removed")

        assert.isTrue(session.kill())
        assert.strictEqual(yield* exited, "SIGKILL")
        yield* waitUntil("the subtree to be empty", () => !session.populated(), 2_000)
        assert.isTrue(session.remove())
        assert.isFalse(Fs.existsSync(session.path))
        assert.isFalse(Fs.existsSync(sibling), "the empty cgroup a tool made beside it went with it")
      }).pipe(Effect.scoped)
  )
})
