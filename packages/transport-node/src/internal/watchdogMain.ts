/**
 * The host-death watchdog's program (started by the keeper of `watchdog.ts`, which describes the protocol, once the
 * host has died): reads the registrations the keeper kept from stdin and, when they end, does what teardown does,
 * without the host.
 *
 * A connection contained in a cgroup is ended through its cgroup: its members are the pids of its subtree (the
 * cgroups a tool nested in it too), the kill is `cgroup.kill` (recursive), and the emptied cgroups are removed,
 * deepest first (then the layer's, once empty). PID 1, the watchdog and its ancestors are never signalled: found in
 * a session's cgroup, they are moved out to the watchdog's own cgroup before the kill. The connection's tree (below)
 * is read too: what it finds outside the cgroup (a root tool can move itself out) is moved back in. Otherwise, with
 * /proc
 * (Linux), its tree is the one teardown finds: `ProcessTree` from the CLI's pid and start time and the
 * connection's marker variable. Without /proc (macOS, the BSDs), only each registered CLI's process group is
 * signalled: descendants that left the group (`setsid`) survive the host.
 *
 * Every poll sends SIGTERM to members not signalled yet (the ones found in later scans too: a process forked
 * after the first scan is asked to end like the others), until the longest registered grace has passed; then
 * SIGKILL to what is left, again while anything is left, for a bounded time; then it exits.
 *
 * A leased host's keeper is this program from the start (see `watchdog.ts`): it reads the lines as they come, and
 * `H <millis>` sets when the host's lease runs out (`H -`: no lease). When it runs out before the next `H`, the
 * trees of every connection registered then are SIGKILLed at once (their cgroups killed, not removed: the host
 * removes them when it tears the connections down, if it ever runs again), and so is each connection whose CLI is
 * reported (`=`) while the lease is out; the program goes on watching the host. `Q`: exit, nothing to kill.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as Cgroup from "./cgroup.ts"
import * as ProcessTree from "./processTree.ts"
import { guardedVariable, title } from "./watchdog.ts"

process.title = title
for (const signal of ["SIGINT", "SIGHUP", "SIGTERM"] as const) process.on(signal, () => {})

interface Entry {
  readonly graceMillis: number
  /** The session's cgroup directory, when it is contained in one. */
  readonly cgroup: string | undefined
  /** The CLI's pid, once the host reported the spawn. */
  root: number | undefined
  /** The CLI's start time, as `ProcessTree` reads it (undefined: unknown). */
  rootStart: string | undefined
}

const entries = new Map<string, Entry>()
const layers = new Set<string>()
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
      const cgroup = b === undefined || b === "-" ? undefined : decodeURIComponent(b)
      entries.set(marker, { graceMillis: Number(a), cgroup, root: undefined, rootStart: undefined })
    } else if (op === "=") {
      const entry = entries.get(marker)
      if (entry !== undefined) {
        entry.root = Number(a)
        entry.rootStart = b === "-" ? undefined : b
        // A CLI the host started while its lease is out: it must not run.
        if (leaseOut) killNow([[marker, entry]])
      }
    } else if (op === "H") {
      lease(marker === "-" ? undefined : Number(marker))
    } else if (op === "Q") {
      process.exit(0)
    } else if (op === "-") {
      entries.delete(marker)
    } else if (op === "L") {
      layers.add(decodeURIComponent(marker))
    } else if (op === "l") {
      layers.delete(decodeURIComponent(marker))
    }
  }
})

/** What is never signalled: PID 1, this process and its ancestors (the keeper, and whatever started it). */
const ancestors = ProcessTree.ancestry(process.pid)

/** The host's ancestry as the host saw it when it started the keeper: pid -> start time. */
const hostAncestry = new Map<number, string>()
for (const pair of (process.env[guardedVariable] ?? "").split(" ")) {
  const [pid, start] = pair.split(":")
  if (pid !== undefined && start !== undefined && pid.length > 0) hostAncestry.set(Number(pid), start)
}

/**
 * Never signalled: this process's ancestry, and the host's (those of its processes that are still the ones the host
 * saw: same start time, not a pid reused since).
 */
const isGuarded = (pid: number): boolean => {
  if (ancestors.has(pid)) return true
  const start = hostAncestry.get(pid)
  return start !== undefined && ProcessTree.readStat(pid)?.start === start
}

/** Where a guarded process found in a session's cgroup is moved to: this process's own cgroup, when it has one. */
const ownCgroup = ((): string | undefined => {
  try {
    const location = Cgroup.locate(
      Fs.readFileSync("/proc/self/mountinfo", "utf8"),
      Fs.readFileSync("/proc/self/cgroup", "utf8")
    )
    return location._tag === "Found" ? location.own : undefined
  } catch {
    return undefined
  }
})()

/** Moves the guarded processes out of a session's cgroup; true when none is left in it. */
const moveOutGuarded = (dir: string): boolean => {
  let clear = true
  for (const pid of Cgroup.members(dir)) {
    if (isGuarded(pid) && (ownCgroup === undefined || !Cgroup.move(pid, ownCgroup))) clear = false
  }
  return clear
}

const cgroupMembers = (dir: string): ReadonlyArray<ProcessTree.ProcessInfo> => {
  if (!Cgroup.populated(dir)) return []
  const members: Array<ProcessTree.ProcessInfo> = []
  for (const pid of Cgroup.members(dir)) {
    if (isGuarded(pid)) continue
    const info = ProcessTree.readStat(pid)
    if (info !== undefined && !info.zombie) members.push(info)
  }
  return members
}

/**
 * The trees of the registered connections (with /proc), made once, with the cgroup of each that has one: what the
 * tree of a cgroup's connection finds outside the cgroup left it (a root tool can), and is moved back in.
 */
const makeTrees = (
  chosen: ReadonlyArray<readonly [string, Entry]> = [...entries]
): ReadonlyArray<{ readonly tree: ProcessTree.Tree; readonly cgroup: string | undefined }> =>
  chosen.map(([marker, entry]) => ({
    cgroup: entry.cgroup,
    tree: ProcessTree.make({
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
  }))

/** Every live member of every registered connection now. */
const members = (
  trees: ReadonlyArray<{ readonly tree: ProcessTree.Tree; readonly cgroup: string | undefined }>,
  chosen: ReadonlyArray<readonly [string, Entry]> = [...entries]
): ReadonlyArray<ProcessTree.ProcessInfo> => {
  const found = new Map<number, ProcessTree.ProcessInfo>()
  for (const [, entry] of chosen) {
    if (entry.cgroup === undefined) continue
    for (const info of cgroupMembers(entry.cgroup)) found.set(info.pid, info)
    // A CLI that a root tool moved out of its cgroup (into another session's): back in, and ended with the rest.
    // Only while its pid still names the process spawned (same start time): the host that would reap it is gone.
    const root = entry.root === undefined ? undefined : ProcessTree.readStat(entry.root)
    if (root !== undefined && !root.zombie && entry.rootStart !== undefined && root.start === entry.rootStart) {
      if (!found.has(root.pid)) Cgroup.move(root.pid, entry.cgroup)
      found.set(root.pid, root)
    }
  }
  // Cgroups a tool made in a layer's beside the sessions' (root can): what is in them came from a session.
  for (const layer of layers) {
    for (const dir of Cgroup.foreign(layer)) for (const info of cgroupMembers(dir)) found.set(info.pid, info)
  }
  if (trees.length > 0) {
    const table = ProcessTree.readTable("proc")
    for (const { cgroup, tree } of trees) {
      for (const info of tree.scan(table)) {
        if (isGuarded(info.pid)) continue
        if (cgroup !== undefined && !found.has(info.pid)) Cgroup.move(info.pid, cgroup)
        found.set(info.pid, info)
      }
    }
  }
  return [...found.values()]
}

/** Without /proc: signals each CLI's process group (0 probes); true when one was there. */
const signalGroups = (
  signal: NodeJS.Signals | 0,
  chosen: ReadonlyArray<readonly [string, Entry]> = [...entries]
): boolean => {
  let any = false
  for (const [, entry] of chosen) {
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

const killCgroups = (chosen: ReadonlyArray<readonly [string, Entry]> = [...entries]) => {
  const dirs: Array<string> = []
  for (const [, entry] of chosen) if (entry.cgroup !== undefined) dirs.push(entry.cgroup)
  for (const layer of layers) dirs.push(...Cgroup.foreign(layer))
  // A guarded process that could not be moved out keeps the subtree from being killed whole: its other members are
  // SIGKILLed one by one (`members` leaves the guarded out).
  for (const dir of dirs) if (moveOutGuarded(dir)) Cgroup.kill(dir)
}

// A cgroup is removed once its last process has left it: a process SIGKILLed a moment ago may still be on its way
// out (a large CLI on a loaded machine). Keep killing and removing for a few more seconds before giving up.
let exitTries = 0
const exitTriesMax = 100
const exit = () => {
  let left = false
  for (const entry of entries.values()) if (entry.cgroup !== undefined && !Cgroup.removeTree(entry.cgroup)) left = true
  for (const layer of layers) {
    for (const dir of Cgroup.foreign(layer)) Cgroup.removeTree(dir)
    if (!Cgroup.removeDir(layer)) left = true
  }
  if (left && ++exitTries < exitTriesMax) {
    killCgroups()
    setTimeout(exit, 50)
    return
  }
  process.exit(0)
}

/**
 * SIGKILLs the trees of `chosen` now, and again while any of them is left, for a bounded time (as the end of a
 * reap): their cgroups are killed, not removed.
 */
const killNow = (chosen: ReadonlyArray<readonly [string, Entry]>) => {
  if (chosen.length === 0) return
  const trees = proc ? makeTrees(chosen) : []
  let tries = 0
  const kill = () => {
    if (reaping) return
    let left: boolean
    if (proc) {
      killCgroups(chosen)
      const alive = members(trees, chosen)
      ProcessTree.signalAll(alive, "SIGKILL")
      left = alive.length > 0
    } else {
      left = signalGroups("SIGKILL", chosen)
    }
    if (left && ++tries <= killTries) setTimeout(kill, pollMillis)
  }
  kill()
}

/** Whether the host's lease has run out (and no `H` has renewed it since). */
let leaseOut = false
let leaseTimer: ReturnType<typeof setTimeout> | undefined

/** `H`: the lease runs out in `millis` (undefined: no lease). At the end, every registered connection is killed. */
const lease = (millis: number | undefined) => {
  if (leaseTimer !== undefined) clearTimeout(leaseTimer)
  leaseTimer = undefined
  leaseOut = false
  if (millis === undefined || !Number.isFinite(millis)) return
  leaseTimer = setTimeout(() => {
    leaseTimer = undefined
    leaseOut = true
    killNow([...entries])
    // A timer's delay is at most 2^31 - 1 ms (about 24 days): a lease that long is renewed long before.
  }, Math.min(Math.max(0, millis), 2 ** 31 - 1))
}

let reaping = false
const reap = () => {
  if (reaping) return
  reaping = true
  if (leaseTimer !== undefined) clearTimeout(leaseTimer)
  if (entries.size === 0 && layers.size === 0) process.exit(0)
  const trees = proc ? makeTrees() : []
  const grace = Math.max(0, ...[...entries.values()].map((entry) => entry.graceMillis))
  const deadline = Date.now() + grace
  const terminated = new Set<string>()
  let tries = 0
  const kill = () => {
    let left: boolean
    if (proc) {
      killCgroups()
      const alive = members(trees)
      ProcessTree.signalAll(alive, "SIGKILL")
      left = alive.length > 0
    } else {
      left = signalGroups("SIGKILL")
    }
    if (!left || ++tries > killTries) return exit()
    setTimeout(kill, pollMillis)
  }
  const poll = () => {
    if (Date.now() >= deadline) return kill()
    if (proc) {
      const alive = members(trees)
      if (alive.length === 0) return exit()
      // SIGTERM once to each process, including those that appeared since the last poll.
      const fresh = alive.filter((info) => !terminated.has(`${info.pid}:${info.start}`))
      for (const info of fresh) terminated.add(`${info.pid}:${info.start}`)
      ProcessTree.signalAll(fresh, "SIGTERM")
    } else {
      // Without /proc a group is all that is known: SIGTERM once, then probe it until the grace ends.
      if (terminated.size === 0) {
        terminated.add("groups")
        if (!signalGroups("SIGTERM")) return exit()
      } else if (!signalGroups(0)) {
        return exit()
      }
    }
    setTimeout(poll, pollMillis)
  }
  poll()
}
process.stdin.on("end", reap)
process.stdin.on("error", reap)
process.stdin.on("close", reap)
