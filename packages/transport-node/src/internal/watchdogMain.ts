/**
 * The host-death watchdog's program (started by `watchdog.ts`, which describes the protocol): reads registrations
 * from stdin and, when stdin ends (the host died, or closed it), does what teardown does, without the host.
 *
 * With /proc (Linux), each registered connection's tree is the one teardown finds: `ProcessTree` from the CLI's
 * pid and start time and the connection's marker variable (descendants that left the session or were
 * re-parented included). Without /proc (macOS, the BSDs), only each registered CLI's process group is signalled:
 * descendants that left the group (`setsid`) survive the host.
 *
 * It SIGTERMs every member, waits the longest registered grace, SIGKILLs what is left (again while anything is
 * left, for a bounded time), and exits.
 *
 * @internal
 */
import * as ProcessTree from "./processTree.ts"
import { title } from "./watchdog.ts"

process.title = title
for (const signal of ["SIGINT", "SIGHUP", "SIGTERM"] as const) process.on(signal, () => {})

interface Entry {
  readonly graceMillis: number
  /** The CLI's pid, once the host reported the spawn. */
  root: number | undefined
  /** The CLI's start time, as `ProcessTree` reads it (undefined: unknown). */
  rootStart: string | undefined
}

const entries = new Map<string, Entry>()
const proc = ProcessTree.defaultBackend() === "proc"
const pollMillis = 25
const killTries = 40

let buffered = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk: string) => {
  buffered += chunk
  let newline: number
  while ((newline = buffered.indexOf("\n")) !== -1) {
    const [op, marker, a, b] = buffered.slice(0, newline).split(" ")
    buffered = buffered.slice(newline + 1)
    if (op === "+") {
      entries.set(marker, { graceMillis: Number(a), root: undefined, rootStart: undefined })
    } else if (op === "=") {
      const entry = entries.get(marker)
      if (entry !== undefined) {
        entry.root = Number(a)
        entry.rootStart = b === "-" ? undefined : b
      }
    } else if (op === "-") {
      entries.delete(marker)
    }
  }
})

/** The trees of the registered connections (with /proc), made once: each keeps its members and marker cache. */
const makeTrees = (): ReadonlyArray<ProcessTree.Tree> =>
  [...entries].map(([marker, entry]) =>
    ProcessTree.make({
      backend: "proc",
      rootPid: entry.root,
      rootStart: entry.rootStart,
      // The host, which reaps the CLI, is gone: the root counts while its pid still names the process spawned.
      rootReaped: () => {
        const info = entry.root === undefined ? undefined : ProcessTree.readStat(entry.root)
        return info === undefined || entry.rootStart === undefined || info.start !== entry.rootStart
      },
      marker
    })
  )

/** Sends `signal` (0: probes) to every process left; true when there was one. */
const signalAll = (trees: ReadonlyArray<ProcessTree.Tree>, signal: NodeJS.Signals | 0): boolean => {
  if (proc) {
    const table = ProcessTree.readTable("proc")
    const members = new Map<number, ProcessTree.ProcessInfo>()
    for (const tree of trees) for (const info of tree.scan(table)) members.set(info.pid, info)
    if (signal !== 0) ProcessTree.signalAll([...members.values()], signal)
    return members.size > 0
  }
  let any = false
  for (const entry of entries.values()) {
    if (entry.root === undefined || entry.root <= 1) continue
    try {
      process.kill(-entry.root, signal)
      any = true
    } catch {
      // ESRCH: the group is gone; EPERM: not ours.
    }
  }
  return any
}

let reaping = false
const reap = () => {
  if (reaping) return
  reaping = true
  if (entries.size === 0) process.exit(0)
  const trees = proc ? makeTrees() : []
  const grace = Math.max(0, ...[...entries.values()].map((entry) => entry.graceMillis))
  const deadline = Date.now() + grace
  signalAll(trees, "SIGTERM")
  const poll = () => {
    if (!signalAll(trees, 0)) process.exit(0)
    if (Date.now() < deadline) {
      setTimeout(poll, pollMillis)
      return
    }
    let tries = 0
    const kill = () => {
      if (!signalAll(trees, "SIGKILL") || ++tries > killTries) process.exit(0)
      setTimeout(kill, pollMillis)
    }
    kill()
  }
  setTimeout(poll, pollMillis)
}
process.stdin.on("end", reap)
process.stdin.on("error", reap)
process.stdin.on("close", reap)
