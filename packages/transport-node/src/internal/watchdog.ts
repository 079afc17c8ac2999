/**
 * The host-death watchdog's client: one small process per transport layer that kills the connections' processes
 * when the host dies without running its finalizers (SIGKILL, a crash, `process.exit`, a signal under
 * `Effect.runPromise`).
 *
 * Node cannot ask the kernel for a parent-death signal (`prctl(PR_SET_PDEATHSIG)`), so the watchdog learns of the
 * host's death the way a pipe does: its stdin is a pipe from the host, and the kernel closes the write end when
 * the host dies, however it dies. The host registers each connection's marker before spawning it (so there is no
 * window where a CLI runs unregistered), tells it the CLI's pid and start time once spawned, and unregisters it
 * after teardown. The watchdog runs in its own session and ignores SIGINT/SIGHUP/SIGTERM, so a Ctrl-C or a
 * group-wide signal that kills the host does not kill it first.
 *
 * The watchdog is two programs. While the host lives, it is `/bin/sh` running {@link keeper}: it keeps the lines it
 * reads and nothing else, for a shell's cost (a Node process would take about 100 ms of CPU to start, beside the
 * host's own start and its first CLI's, and 40 MB to stay). When its input ends, the shell starts Node on
 * `watchdogMain.ts` and hands it every line it kept, and that program does the killing. On a clean release the
 * host sends `Q` first, and the shell exits without starting anything. What the shell keeps grows with each
 * connection, so after {@link rotateBytes} the host starts a fresh keeper with the connections still open and tells
 * the old one `Q`.
 *
 * The protocol, one line per message: `+ <marker> <graceMillis> <cgroup dir or ->`, `= <marker> <pid> <start or ->`,
 * `- <marker>`, and for a layer's cgroup, removed at the end: `L <dir>` (register), `l <dir>` (forget). Paths are
 * URI-encoded (no spaces). `Q`, to the keeper only: exit, there is nothing to kill.
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
 * The keeper: `sh -c keeper <title> <node> <program>`. It ignores the signals the watchdog must outlive, keeps each
 * line it reads until `Q` (exit) or the end of its input, and at the end runs Node on the program with the kept
 * lines as its input (in the watchdog's session, with the signals still ignored: an ignored signal stays ignored
 * across `exec`).
 *
 * @internal
 */
export const keeper = [
  "trap '' INT HUP TERM",
  "kept=",
  "while IFS= read -r line; do",
  "  [ \"$line\" = Q ] && exit 0",
  "  kept=\"$kept$line",
  "\"",
  "done",
  "printf '%s' \"$kept\" | exec \"$1\" \"$2\""
].join("\n")

/**
 * How many bytes a keeper is sent, beyond the open connections it started with, before the next registration starts
 * a fresh one (the shell keeps every line, including those of connections long closed); see {@link rotates}.
 *
 * @internal
 */
export const rotateBytes = 64 * 1024

/**
 * Whether a keeper that started with `replayed` bytes (the open connections) and has been sent `sent` in all is
 * replaced at the next registration: past {@link rotateBytes} beyond what it started with, and past as much again
 * (with many connections open, a rotation at each registration would start a shell each time).
 *
 * @internal
 */
export const rotates = (sent: number, replayed: number): boolean => sent - replayed > Math.max(rotateBytes, replayed)

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
 * restart, the connections still open are registered again. `main` is the program the keeper hands its lines to
 * (tests record them instead).
 *
 * @internal
 */
export const make = (main: string = program): Watchdog => {
  const registered = new Map<string, { graceMillis: number; cgroup: string; root: string | undefined }>()
  const layers = new Set<string>()
  let child: ChildProcess.ChildProcess | undefined
  let sent = 0
  /** What the keeper was sent when it started: the open connections, replayed. */
  let replayed = 0
  let closed = false

  const send = (line: string) => {
    const stdin = child?.stdin
    if (stdin === null || stdin === undefined || stdin.destroyed) return
    sent += line.length + 1
    stdin.write(line + "\n")
  }

  /** Tells a keeper there is nothing to kill, and lets it go. */
  const retire = (old: ChildProcess.ChildProcess | undefined) => {
    const stdin = old?.stdin
    if (stdin === null || stdin === undefined || stdin.destroyed) return
    stdin.end("Q\n")
  }

  const start = () => {
    if (closed || (child !== undefined && child.exitCode === null && child.signalCode === null)) return
    const spawned = ChildProcess.spawn("/bin/sh", ["-c", keeper, title, process.execPath, main], {
      // What `ps` shows first: the watchdog's title, as the Node program names itself.
      argv0: title,
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
    sent = 0
    for (const dir of layers) send(`L ${dir}`)
    for (const [marker, entry] of registered) {
      send(`+ ${marker} ${entry.graceMillis} ${entry.cgroup}`)
      if (entry.root !== undefined) send(`= ${marker} ${entry.root}`)
    }
    replayed = sent
  }

  return {
    register: (marker, graceMillis, cgroup) => {
      const entry = { graceMillis, cgroup: cgroup === undefined ? "-" : encodeURIComponent(cgroup), root: undefined }
      registered.set(marker, entry)
      if (child !== undefined && rotates(sent, replayed)) {
        // The old keeper goes only once the new one holds every open connection: no moment without one.
        const old = child
        child = undefined
        start()
        retire(old)
        return
      }
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
      registered.clear()
      layers.clear()
      retire(child)
      child = undefined
    }
  }
}
