/**
 * The host-death watchdog: one small Node process per transport layer that kills the trees of the open
 * connections when the host dies without running its finalizers (SIGKILL, a crash, `process.exit`, a signal under
 * `Effect.runPromise`).
 *
 * Node cannot ask the kernel for a parent-death signal (`prctl(PR_SET_PDEATHSIG)`), so the watchdog learns of the
 * host's death the way a pipe does: its stdin is a pipe from the host, and the kernel closes the write end when
 * the host dies, however it dies. The host registers each connection's marker before spawning it (so there is no
 * window where a CLI runs unregistered) and unregisters it after teardown. The watchdog runs in its own session and
 * ignores SIGINT/SIGHUP/SIGTERM, so a Ctrl-C or a group-wide signal that kills the host does not kill it first.
 *
 * On EOF it does what teardown does, without the host: SIGTERM every process that carries a registered marker
 * (Linux: `/proc/<pid>/environ`) or belongs to a registered process group (elsewhere), waits the longest
 * registered grace, SIGKILLs what is left, and exits.
 */
import * as ChildProcess from "node:child_process"

const source = String.raw`
"use strict"
process.title = "tether-watchdog"
const fs = require("node:fs")
const entries = new Map()
const proc = process.platform === "linux"
for (const signal of ["SIGINT", "SIGHUP", "SIGTERM"]) process.on(signal, () => {})
let buffered = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  buffered += chunk
  let newline
  while ((newline = buffered.indexOf("\n")) !== -1) {
    const line = buffered.slice(0, newline)
    buffered = buffered.slice(newline + 1)
    const [op, marker, pgid, grace] = line.split(" ")
    if (op === "+") entries.set(marker, { pgid: Number(pgid), grace: Number(grace) })
    else if (op === "=") { const e = entries.get(marker); if (e) e.pgid = Number(pgid) }
    else if (op === "-") entries.delete(marker)
  }
})
const stat = (pid) => {
  try {
    const text = fs.readFileSync("/proc/" + pid + "/stat", "latin1")
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ")
    return { pid, ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]), zombie: f[0] === "Z" || f[0] === "X" }
  } catch { return undefined }
}
const members = () => {
  const found = new Map()
  if (proc) {
    const needles = [...entries.keys()].map((m) => Buffer.from("\0" + m + "\0"))
    const all = []
    for (const name of fs.readdirSync("/proc")) {
      if (!/^[0-9]+$/.test(name) || Number(name) === process.pid || name === "1") continue
      const info = stat(Number(name))
      if (info === undefined || info.zombie) continue
      all.push(info)
      let environ
      try { environ = fs.readFileSync("/proc/" + name + "/environ") } catch { continue }
      for (const needle of needles) {
        if (environ.indexOf(needle) !== -1 || environ.subarray(0, needle.length - 1).equals(needle.subarray(1))) {
          found.set(info.pid, info)
        }
      }
    }
    const leaders = new Set(found.keys())
    const pids = new Set(all.map((info) => info.pid))
    // A registered group id counts while its leader is ours or gone (an id in use as a group is never reused).
    for (const e of entries.values()) if (e.pgid > 1 && (found.has(e.pgid) || !pids.has(e.pgid))) leaders.add(e.pgid)
    let grew = true
    while (grew) {
      grew = false
      for (const info of all) {
        if (found.has(info.pid)) continue
        if (found.has(info.ppid) || leaders.has(info.pgid) || leaders.has(info.sid)) {
          found.set(info.pid, info); leaders.add(info.pid); grew = true
        }
      }
    }
  }
  return [...found.values()]
}
const signal = (sig) => {
  let any = false
  for (const info of members()) { try { process.kill(info.pid, sig); any = true } catch {} }
  if (!proc) {
    for (const e of entries.values()) { if (e.pgid > 0) { try { process.kill(-e.pgid, sig); any = true } catch {} } }
  }
  return any
}
let reaping = false
const reap = () => {
  if (reaping) return
  reaping = true
  if (entries.size === 0) process.exit(0)
  const grace = Math.max(0, ...[...entries.values()].map((e) => e.grace))
  const deadline = Date.now() + grace
  signal("SIGTERM")
  const poll = () => {
    if (!signal(0)) process.exit(0)
    if (Date.now() < deadline) return setTimeout(poll, 25)
    signal("SIGKILL")
    let tries = 0
    const again = () => {
      if (!signal("SIGKILL") || ++tries > 40) process.exit(0)
      setTimeout(again, 25)
    }
    setTimeout(again, 25)
  }
  setTimeout(poll, 25)
}
process.stdin.on("end", reap)
process.stdin.on("error", reap)
process.stdin.on("close", reap)
`

/**
 * The watchdog's process title (what `ps` shows).
 *
 * @internal
 */
export const title = "tether-watchdog"

/** @internal */
export interface Watchdog {
  readonly register: (marker: string, graceMillis: number) => void
  readonly setGroup: (marker: string, pgid: number) => void
  readonly unregister: (marker: string) => void
  readonly close: () => void
}

/**
 * A watchdog client. The process is started at the first registration, and started again if it died; on a
 * restart, the connections still open are registered again.
 *
 * @internal
 */
export const make = (): Watchdog => {
  const registered = new Map<string, { graceMillis: number; pgid: number }>()
  let child: ChildProcess.ChildProcess | undefined
  let closed = false

  const send = (line: string) => {
    const stdin = child?.stdin
    if (stdin === null || stdin === undefined || stdin.destroyed) return
    stdin.write(line + "\n")
  }

  const start = () => {
    if (closed || (child !== undefined && child.exitCode === null && child.signalCode === null)) return
    const spawned = ChildProcess.spawn(process.execPath, ["-e", source], {
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
    for (const [marker, entry] of registered) send(`+ ${marker} ${entry.pgid} ${entry.graceMillis}`)
  }

  return {
    register: (marker, graceMillis) => {
      registered.set(marker, { graceMillis, pgid: 0 })
      if (child === undefined) start()
      else send(`+ ${marker} 0 ${graceMillis}`)
    },
    setGroup: (marker, pgid) => {
      const entry = registered.get(marker)
      if (entry === undefined) return
      entry.pgid = pgid
      send(`= ${marker} ${pgid}`)
    },
    unregister: (marker) => {
      if (registered.delete(marker)) send(`- ${marker}`)
    },
    close: () => {
      closed = true
      // Connections that outlive the layer are still torn down by their own scopes: the watchdog must not kill
      // them when its input ends.
      for (const marker of registered.keys()) send(`- ${marker}`)
      registered.clear()
      child?.stdin?.end()
      child = undefined
    }
  }
}
