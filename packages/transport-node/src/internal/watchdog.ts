/**
 * The host-death watchdog's client: one small Node process per transport layer (the program is
 * `watchdogMain.ts`) that kills the connections' processes when the host dies without running its finalizers
 * (SIGKILL, a crash, `process.exit`, a signal under `Effect.runPromise`).
 *
 * Node cannot ask the kernel for a parent-death signal (`prctl(PR_SET_PDEATHSIG)`), so the watchdog learns of the
 * host's death the way a pipe does: its stdin is a pipe from the host, and the kernel closes the write end when
 * the host dies, however it dies. The host registers each connection's marker before spawning it (so there is no
 * window where a CLI runs unregistered), tells it the CLI's pid and start time once spawned, and unregisters it
 * after teardown. The watchdog runs in its own session and ignores SIGINT/SIGHUP/SIGTERM, so a Ctrl-C or a
 * group-wide signal that kills the host does not kill it first.
 *
 * The protocol, one line per message: `+ <marker> <graceMillis> <cgroup dir or ->`, `= <marker> <pid> <start or ->`,
 * `- <marker>`, and for a layer's cgroup, removed at the end: `L <dir>` (register), `l <dir>` (forget). Paths are
 * URI-encoded (no spaces).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * The watchdog's process title (what `ps` shows).
 *
 * @internal
 */
export const title = "tether-watchdog"

// The program sits next to this module: `.ts` in the workspace (run by Node's type stripping), `.js` once built.
const program = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./watchdogMain.ts" : "./watchdogMain.js", import.meta.url)
)

/**
 * Whether the watchdog's program is there to start (a bundler may have left it out).
 *
 * @internal
 */
export const available: boolean = Fs.existsSync(program)

/** @internal */
export interface Watchdog {
  /** A connection about to be spawned, and its cgroup when it is contained in one. */
  readonly register: (marker: string, graceMillis: number, cgroup: string | undefined) => void
  /** The CLI of `marker` was spawned: its pid and its start time (as `ProcessTree` reads it; unknown: undefined). */
  readonly setRoot: (marker: string, pid: number, start: string | undefined) => void
  readonly unregister: (marker: string) => void
  /** A layer's cgroup, to remove once its sessions' are gone (or to forget, when the layer removed it itself). */
  readonly layer: (dir: string, registered: boolean) => void
  readonly close: () => void
}

/**
 * A watchdog client. The process is started at the first registration, and started again if it died; on a
 * restart, the connections still open are registered again.
 *
 * @internal
 */
export const make = (): Watchdog => {
  const registered = new Map<string, { graceMillis: number; cgroup: string; root: string | undefined }>()
  const layers = new Set<string>()
  let child: ChildProcess.ChildProcess | undefined
  let closed = false

  const send = (line: string) => {
    const stdin = child?.stdin
    if (stdin === null || stdin === undefined || stdin.destroyed) return
    stdin.write(line + "\n")
  }

  const start = () => {
    if (closed || (child !== undefined && child.exitCode === null && child.signalCode === null)) return
    const spawned = ChildProcess.spawn(process.execPath, [program], {
      // Its own session: terminal and group-wide signals aimed at the host do not reach it. A near-empty
      // environment: the host's NODE_OPTIONS (loaders, inspectors) have no business in it.
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      env: { PATH: process.env.PATH ?? "" },
      windowsHide: true
    })
    spawned.on("error", () => {
      if (child === spawned) child = undefined
    })
    spawned.on("exit", () => {
      if (child === spawned) child = undefined
    })
    spawned.stdin?.on("error", () => {})
    // The host must be free to exit while the watchdog runs.
    spawned.unref()
    const stdin = spawned.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null
    stdin?.unref?.()
    child = spawned
    for (const dir of layers) send(`L ${dir}`)
    for (const [marker, entry] of registered) {
      send(`+ ${marker} ${entry.graceMillis} ${entry.cgroup}`)
      if (entry.root !== undefined) send(`= ${marker} ${entry.root}`)
    }
  }

  return {
    register: (marker, graceMillis, cgroup) => {
      const entry = { graceMillis, cgroup: cgroup === undefined ? "-" : encodeURIComponent(cgroup), root: undefined }
      registered.set(marker, entry)
      if (child === undefined) start()
      else send(`+ ${marker} ${graceMillis} ${entry.cgroup}`)
    },
    setRoot: (marker, pid, start) => {
      const entry = registered.get(marker)
      if (entry === undefined) return
      entry.root = `${pid} ${start ?? "-"}`
      send(`= ${marker} ${entry.root}`)
    },
    unregister: (marker) => {
      if (registered.delete(marker)) send(`- ${marker}`)
    },
    layer: (dir, register) => {
      const encoded = encodeURIComponent(dir)
      if (register) {
        layers.add(encoded)
        send(`L ${encoded}`)
      } else if (layers.delete(encoded)) {
        send(`l ${encoded}`)
      }
    },
    close: () => {
      closed = true
      // Connections that outlive the layer are still torn down by their own scopes: the watchdog must not kill
      // them when its input ends.
      for (const marker of registered.keys()) send(`- ${marker}`)
      for (const dir of layers) send(`l ${dir}`)
      registered.clear()
      layers.clear()
      child?.stdin?.end()
      child = undefined
    }
  }
}
