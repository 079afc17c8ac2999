/**
 * The host lease (`internal/watchdog.ts`): a host that holds one (a cluster runner, while its shard locks are
 * fresh) and stops renewing it has its sessions' whole trees killed by its keeper, a process of its own that is not
 * frozen with it. A real host program (`fixtures/leaseHost.ts`) holds a lease it renews every 100 ms; the test
 * freezes it with SIGSTOP and looks at /proc for the session's marker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { fakeClaudePath, killAllMarked, marked, newMark, waitUntil } from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/leaseHost.ts", import.meta.url))

// fake-claude + 2 sleeping grandchildren + setsid shell and its sleep + the daemon's sleep.
const treeSize = 6

/** The lease's TTL in these tests. */
const ttlMillis = 1_500

class HostFailed extends Data.TaggedError("HostFailed")<{ readonly reason: string }> {}

const startHost = (mark: string) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess, HostFailed>((resume) => {
      const host = ChildProcess.spawn(process.execPath, [hostScript, mark, fakeClaudePath, String(ttlMillis)], {
        stdio: ["ignore", "pipe", "inherit"]
      })
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
    (host) =>
      Effect.sync(() => {
        host.kill("SIGKILL")
        host.kill("SIGCONT")
      })
  )

// A host loads Effect from source: on a loaded 2-core machine it takes seconds to start.
describe("host lease", { timeout: 30_000 }, () => {
  it.live("a host frozen past its lease has its session's whole tree killed by its keeper", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const host = yield* startHost(mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize, 10_000)
      host.kill("SIGSTOP")
      // The keeper kills at the lease's end (no grace): TTL, plus a loaded machine's scheduling.
      yield* waitUntil(
        "the tree to be gone while the host is frozen",
        () => marked(mark).length === 0,
        ttlMillis + 4_000
      )
    }).pipe(Effect.scoped, Effect.ensuring(killAllMarked(mark)))
  })

  it.live("a host whose lease ran out while it runs: its sessions are killed, and so is a CLI it starts then", () => {
    const mark = newMark()
    const late = `${mark}-late`
    return Effect.gen(function*() {
      const host = yield* startHost(mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize, 10_000)
      // Not frozen: it stops renewing (cut off from what grants the lease) and goes on running.
      host.kill("SIGUSR1")
      yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, ttlMillis + 4_000)
      let opened = ""
      host.stdout!.on("data", (data: string) => opened += data)
      host.kill("SIGUSR2")
      yield* waitUntil("the late session's start", () => opened.includes("opened"), 10_000)
      yield* waitUntil("the late session's tree to be gone", () => marked(late).length === 0, 4_000)
    }).pipe(Effect.scoped, Effect.ensuring(killAllMarked(mark)), Effect.ensuring(killAllMarked(late)))
  })

  it.live("a host that renews its lease keeps its session; killed, its keeper still tears the tree down", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const host = yield* startHost(mark)
      yield* waitUntil("the session's tree", () => marked(mark).length === treeSize, 10_000)
      // Twice the lease: the renewals every 100 ms keep it.
      yield* Effect.sleep(ttlMillis * 2)
      assert.strictEqual(marked(mark).length, treeSize)
      host.kill("SIGKILL")
      yield* waitUntil("the tree to be gone", () => marked(mark).length === 0, 5_000)
    }).pipe(Effect.scoped, Effect.ensuring(killAllMarked(mark)))
  })
})
