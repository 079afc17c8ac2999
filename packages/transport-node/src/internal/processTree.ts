/**
 * Finds the processes of a connection's tree from the operating system's process table, not from bookkeeping: the
 * `process-tree` containment, and the tree walk that the other containments use to find their members' parents.
 *
 * A process belongs to the tree when any of these holds, evaluated again on every scan:
 *
 * - it is the root (the CLI) and Node has not reaped it;
 * - its parent is a live member (descendants, found while their parents live);
 * - its session id or process group id is the pid of a member, alive or dead (the CLI's own session, and the
 *   sessions of `setsid` descendants such as the Bash tool's shell). A pid that is still in use as a session or
 *   group id is never reused by the kernel, so a dead member's pid keeps identifying its session's survivors;
 * - (Linux) its environment carries the connection's marker variable. The environment block is read from
 *   `/proc/<pid>/environ`, which is inherited across `fork`, `setsid` and re-parenting, so it finds orphans whose
 *   parent already exited (re-parented to PID 1 or a subreaper) — unless they cleared their environment, or
 *   rewrote their process title over it (setproctitle).
 *
 * Members are remembered from scan to scan: a scan during the session (the transport's periodic one) makes the
 * session leaders it saw count at teardown, even if they exited in between. Members are identified by pid and
 * start time, so a pid reused by an unrelated process is not mistaken for a member. Zombies are members but not
 * alive: they are never signalled and never waited for.
 *
 * Not found: a descendant that cleared its environment (or its title overwrote it), left the session, and whose
 * parent exited before any scan saw that parent. Only a cgroup or a PID namespace contains that one.
 *
 * The rules are {@link step}, a pure function of the state and a process table (tested on synthetic tables); the
 * reading of /proc, ps and environments is around it.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as KernelFiles from "./kernelFiles.ts"
import { isWindows } from "./platform.ts"

/** @internal */
export interface ProcessInfo {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  /** -1 where the platform does not report it. */
  readonly sid: number
  readonly zombie: boolean
  /** Start time, as the platform reports it: with the pid, the identity of a process. */
  readonly start: string
}

/** @internal */
export type Backend = "proc" | "ps"

/** How this platform's process table is read: /proc where it is mounted, else ps (none on Windows). @internal */
export const defaultBackend = (): Backend | undefined => {
  if (isWindows) return undefined
  if (process.platform === "linux" && Fs.existsSync("/proc/self/stat")) return "proc"
  return "ps"
}

/** @internal */
export const parseStat = (pid: number, stat: string): ProcessInfo | undefined => {
  // `comm` is in parentheses and may contain spaces and parentheses: the fields start after the last ")".
  const close = stat.lastIndexOf(")")
  if (close === -1) return undefined
  const fields = stat.slice(close + 2).split(" ")
  const state = fields[0]
  return {
    pid,
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
    sid: Number(fields[3]),
    zombie: state === "Z" || state === "X" || state === "x",
    start: fields[19] ?? ""
  }
}

// A stat line is a few hundred bytes: one buffer serves every read (open, read, close: no fstat, no allocation).
const statBuffer = Buffer.alloc(4096)

/** @internal */
export const readStat = (pid: number): ProcessInfo | undefined => {
  let fd: number | undefined
  try {
    fd = Fs.openSync(`/proc/${pid}/stat`, "r")
    const length = Fs.readSync(fd, statBuffer, 0, statBuffer.length, 0)
    const stat = length < statBuffer.length
      ? statBuffer.toString("latin1", 0, length)
      : Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    return parseStat(pid, stat)
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) Fs.closeSync(fd)
  }
}

const readProc = (): Map<number, ProcessInfo> => {
  const table = new Map<number, ProcessInfo>()
  for (const name of Fs.readdirSync("/proc")) {
    const code = name.charCodeAt(0)
    if (code < 48 || code > 57) continue
    const pid = Number(name)
    const info = readStat(pid)
    if (info !== undefined) table.set(pid, info)
  }
  return table
}

const readPs = (): Map<number, ProcessInfo> => {
  const table = new Map<number, ProcessInfo>()
  let output: string
  try {
    output = execFileSync("ps", ["-A", "-o", "pid=,ppid=,pgid=,stat=,lstart="], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 2_000
    })
  } catch {
    return table
  }
  for (const line of output.split("\n")) {
    const parts = line.trim().split(/\s+/)
    if (parts.length < 5) continue
    const pid = Number(parts[0])
    table.set(pid, {
      pid,
      ppid: Number(parts[1]),
      pgid: Number(parts[2]),
      sid: -1,
      zombie: parts[3].startsWith("Z"),
      start: parts.slice(4).join(" ")
    })
  }
  return table
}

/**
 * `pid` and its ancestors, parent after parent, up to PID 1 (always included): the processes a teardown must never
 * signal when `pid` is the host. Bounded by the table's depth; stops where a parent cannot be read (no /proc: the
 * host and PID 1 only).
 *
 * @internal
 */
export const ancestry = (pid: number): ReadonlySet<number> => {
  const out = new Set<number>([1])
  let at: number | undefined = pid
  // A loop guard: a table read while processes are re-parented cannot form a cycle, but a bound costs nothing.
  for (let depth = 0; at !== undefined && at > 0 && !out.has(at) && depth < 4096; depth++) {
    out.add(at)
    at = readStat(at)?.ppid
  }
  return out
}

/** The whole process table, by pid. @internal */
export const readTable = (backend: Backend): Map<number, ProcessInfo> => backend === "proc" ? readProc() : readPs()

/** One layer's reads of the process table, shared by the looks that can take the same one. @internal */
export interface SharedTable {
  /**
   * The process table, read again unless the last read began at or after `notBefore` (a `performance.now()`
   * time): a look that can take a table read from a moment on takes the one another look read since.
   */
  readonly read: (notBefore: number) => ReadonlyMap<number, ProcessInfo>
}

/**
 * A {@link SharedTable}: the last table is kept `keepMillis` after its read, no longer (a table holds an entry per
 * process of the machine). One hundred sessions torn down at once read it a few times, not once each.
 *
 * @internal
 */
export const sharedTable = (backend: Backend, keepMillis: number): SharedTable => {
  let last: { readonly at: number; readonly table: ReadonlyMap<number, ProcessInfo> } | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  return {
    read: (notBefore) => {
      if (last !== undefined && last.at >= notBefore) return last.table
      // When the read began: whatever happened before it is in the table.
      const at = performance.now()
      const table = readTable(backend)
      last = { at, table }
      clearTimeout(timer)
      timer = setTimeout(() => last = undefined, keepMillis)
      timer.unref()
      return table
    }
  }
}

/**
 * A process's command line for a message (`comm` when it has none, as for kernel threads), or undefined; cut to 200
 * characters after `scrub` has replaced the secrets in the whole of it (cut first, a secret across the cut would be
 * left in part).
 *
 * @internal
 */
export const describeProcess = (pid: number, scrub: (text: string) => string = (text) => text): string | undefined => {
  try {
    const cmdline = scrub(Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ").trim())
    if (cmdline.length > 0) return cmdline.length > 200 ? cmdline.slice(0, 200) + "…" : cmdline
    return `[${Fs.readFileSync(`/proc/${pid}/comm`, "latin1").trim()}]`
  } catch {
    return undefined
  }
}

const environHas = (pid: number, entry: Buffer): boolean => {
  let environ: Buffer
  try {
    environ = KernelFiles.readBytes(`/proc/${pid}/environ`)
  } catch {
    return false
  }
  // `entry` is "\0NAME=value\0"; the first variable has no leading NUL.
  return environ.indexOf(entry) !== -1 || environ.subarray(0, entry.length - 1).equals(entry.subarray(1))
}

// ---------------------------------------------------------------------------------------------------------------
// the rules, as a pure step
// ---------------------------------------------------------------------------------------------------------------

/** What the tree remembers between scans. @internal */
export interface State {
  /** pid -> start time of every live member seen so far. */
  readonly members: ReadonlyMap<number, string>
  /** pids of members, alive or dead: processes in their session or group belong to the tree. */
  readonly leaders: ReadonlySet<number>
}

/** The state before the first scan: the root (when known) is a leader. @internal */
export const initial = (rootPid: number | undefined): State => ({
  members: new Map(),
  leaders: new Set(rootPid === undefined ? [] : [rootPid])
})

/** What a scan needs besides the table. @internal */
export interface Facts {
  readonly rootPid: number | undefined
  /** False once Node has reaped the root: from then on its pid may name another process. */
  readonly rootAlive: boolean
  /** Whether a process carries the connection's marker (in its environment); never asked for members. */
  readonly isMarked: (info: ProcessInfo) => boolean
  /** pids that are never members (the host, its parent, PID 0 and 1). */
  readonly excluded: ReadonlySet<number>
}

/**
 * One scan: the members of the tree in `table`, given what earlier scans saw. Returns the next state and the live
 * (non-zombie) members, the root included while it lives.
 *
 * @internal
 */
export const step = (
  state: State,
  table: ReadonlyMap<number, ProcessInfo>,
  facts: Facts
): { readonly state: State; readonly alive: ReadonlyArray<ProcessInfo> } => {
  const members = new Map(state.members)
  const leaders = new Set(state.leaders)
  // Members that died, or whose pid now names another process, are no longer members.
  for (const [pid, start] of members) {
    const info = table.get(pid)
    if (info === undefined || info.start !== start) members.delete(pid)
  }
  if (facts.rootPid !== undefined && facts.rootAlive) {
    const root = table.get(facts.rootPid)
    if (root !== undefined) members.set(facts.rootPid, root.start)
  }
  const byParent = new Map<number, Array<ProcessInfo>>()
  const byGroup = new Map<number, Array<ProcessInfo>>()
  const index = (map: Map<number, Array<ProcessInfo>>, key: number, info: ProcessInfo) => {
    const list = map.get(key)
    if (list === undefined) map.set(key, [info])
    else list.push(info)
  }
  for (const info of table.values()) {
    index(byParent, info.ppid, info)
    index(byGroup, info.pgid, info)
    if (info.sid !== info.pgid && info.sid !== -1) index(byGroup, info.sid, info)
  }
  for (const pid of leaders) {
    const info = table.get(pid)
    // A leader pid that names a process which is not that member was reused: nothing of ours uses it any more.
    if (info !== undefined && members.get(pid) !== info.start) leaders.delete(pid)
    // A dead leader whose session and group are empty can gain no member again (one joins a session or group only
    // by descending from a process in it), and its pid is free for the kernel to reuse: forget it.
    else if (info === undefined && !byGroup.has(pid)) leaders.delete(pid)
  }
  const work: Array<number> = []
  const admit = (info: ProcessInfo) => {
    if (facts.excluded.has(info.pid) || members.has(info.pid)) return
    members.set(info.pid, info.start)
    leaders.add(info.pid)
    work.push(info.pid)
  }
  for (const info of table.values()) {
    if (!info.zombie && !members.has(info.pid) && facts.isMarked(info)) admit(info)
  }
  work.push(...members.keys(), ...leaders)
  while (work.length > 0) {
    const pid = work.pop()!
    const children = byParent.get(pid)
    // ppid links count only from a live member: a dead member's pid may already name another process.
    if (children !== undefined && members.has(pid)) { for (const child of children) admit(child) }
    const group = byGroup.get(pid)
    if (group !== undefined && leaders.has(pid)) { for (const info of group) admit(info) }
  }

  const alive: Array<ProcessInfo> = []
  for (const pid of members.keys()) {
    const info = table.get(pid)
    if (info !== undefined && !info.zombie) alive.push(info)
  }
  return { state: { members, leaders }, alive }
}

// ---------------------------------------------------------------------------------------------------------------
// the shell around it
// ---------------------------------------------------------------------------------------------------------------

/** @internal */
export interface Tree {
  /**
   * Reads the process table (or takes `table`, read by the caller for several trees at once) and returns the live
   * (non-zombie) members, the root included while it lives. Every scan adds to what the tree remembers.
   */
  readonly scan: (table?: ReadonlyMap<number, ProcessInfo>) => ReadonlyArray<ProcessInfo>
}

/** @internal */
export const make = (options: {
  readonly backend: Backend
  /** The CLI's pid; unknown (a CLI not yet spawned, as far as the caller knows): found by the marker alone. */
  readonly rootPid: number | undefined
  /**
   * The root's start time, read while it could not have been reaped (right after the spawn): a descendant starts
   * no earlier, so the environment of older processes is not read. Unknown: every environment is read.
   */
  readonly rootStart?: string | undefined
  /** True once Node has reaped the root: from then on its pid may be reused. */
  readonly rootReaped: () => boolean
  /** `NAME=value` of the marker variable injected into the root's environment (Linux). */
  readonly marker: string | undefined
}): Tree => {
  const { backend, rootPid } = options
  // A buffer of its own: a small `Buffer.from` is a slice of Node's shared pool (64 KiB on Node 24), which a session
  // as long-lived as this one would keep whole.
  const entry = options.marker === undefined ? undefined : unpooled(Buffer.from(`\0${options.marker}\0`))
  const excluded = new Set([process.pid, process.ppid, 0, 1])
  let state = initial(rootPid)
  // `${pid}:${start}` -> whether the marker is in the environment; the environment of a process is read once.
  const marked = new Map<string, boolean>()
  const rootStart = backend === "proc" && options.rootStart !== undefined ? Number(options.rootStart) : Number.NaN

  const isMarked = (info: ProcessInfo): boolean => {
    if (entry === undefined || backend !== "proc") return false
    // Started before the root (in clock ticks since boot): not a descendant, whatever its environment says.
    if (Number(info.start) < rootStart) return false
    const key = `${info.pid}:${info.start}`
    let found = marked.get(key)
    if (found === undefined) {
      found = environHas(info.pid, entry)
      marked.set(key, found)
    }
    return found
  }

  const scan = (given?: ReadonlyMap<number, ProcessInfo>): ReadonlyArray<ProcessInfo> => {
    const table = given ?? readTable(backend)
    // Forget the marker of processes that are gone, so the cache does not grow with the session's lifetime.
    if (marked.size > 4 * table.size) {
      for (const key of marked.keys()) {
        const pid = Number(key.slice(0, key.indexOf(":")))
        if (!table.has(pid)) marked.delete(key)
      }
    }
    const next = step(state, table, { rootPid, rootAlive: !options.rootReaped(), isMarked, excluded })
    state = next.state
    return next.alive
  }

  return { scan }
}

/**
 * A copy of `bytes` in a buffer of their size, not a slice of Node's shared pool or of a stream's read buffer (both
 * 64 KiB on Node 24): what is kept for a session's lifetime would keep the whole of either alive.
 *
 * @internal
 */
export const unpooled = (bytes: Uint8Array): Buffer => {
  const copy = Buffer.allocUnsafeSlow(bytes.length)
  copy.set(bytes)
  return copy
}

/** Sends a signal to each process, ignoring the ones that are already gone. @internal */
export const signalAll = (processes: ReadonlyArray<ProcessInfo>, signal: NodeJS.Signals): void => {
  for (const info of processes) {
    // Never PID 1 (nor 0 and below: a process group, or every process), never this process, whatever a table said.
    if (info.pid <= 1 || info.pid === process.pid) continue
    try {
      process.kill(info.pid, signal)
    } catch {
      // ESRCH: it exited in between; EPERM: not ours to signal.
    }
  }
}
