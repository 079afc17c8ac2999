/**
 * What is left of the soak's processes, read from /proc and not from the transport's own bookkeeping, three ways:
 *
 * - by marker: every CLI is started with `SOAK_MARK=<run id>` in its environment, which its children inherit;
 * - by containment: under the cgroup containment, every process in a cgroup of this host's transport layers
 *   (`…/tether-<host pid>-…` in `/proc/<pid>/cgroup`), whatever its environment;
 * - by session: every process whose session id is the pid of a CLI the soak started (the CLI leads its own
 *   session), started after the soak began (a recycled pid is not ours).
 *
 * Zombies are not counted: they are dead, waiting for their parent (PID 1 reaps orphans slowly here).
 */
import * as Fs from "node:fs"

export interface Proc {
  readonly pid: number
  readonly ppid: number
  readonly sid: number
  readonly state: string
  /** Start time, in clock ticks since boot. */
  readonly start: number
  readonly comm: string
}

const pids = (): Array<number> => {
  const out: Array<number> = []
  for (const name of Fs.readdirSync("/proc")) {
    const pid = Number(name)
    if (Number.isInteger(pid) && pid > 0) out.push(pid)
  }
  return out
}

export const stat = (pid: number): Proc | undefined => {
  let text: string
  try {
    text = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  } catch {
    return undefined
  }
  // `pid (comm) state ppid pgrp session …`: comm may hold spaces and parentheses, so split after the last ')'.
  const close = text.lastIndexOf(")")
  const fields = text.slice(close + 2).split(" ")
  return {
    pid,
    comm: text.slice(text.indexOf("(") + 1, close),
    state: fields[0]!,
    ppid: Number(fields[1]),
    sid: Number(fields[3]),
    start: Number(fields[19])
  }
}

const alive = (proc: Proc | undefined): proc is Proc => proc !== undefined && proc.state !== "Z" && proc.state !== "X"

/** Live processes whose environment carries `<variable>=<value>`. */
export const byMarker = (variable: string, value: string): Array<Proc> => {
  const needle = Buffer.from(`${variable}=${value}\0`)
  const found: Array<Proc> = []
  for (const pid of pids()) {
    let environ: Buffer
    try {
      environ = Fs.readFileSync(`/proc/${pid}/environ`)
    } catch {
      continue
    }
    const at = environ.indexOf(needle)
    if (at === -1 || (at > 0 && environ[at - 1] !== 0)) continue
    const proc = stat(pid)
    if (alive(proc)) found.push(proc)
  }
  return found
}

/** Live processes in a cgroup of this host's transport layers. */
export const byCgroup = (hostPid: number = process.pid): Array<Proc> => {
  const needle = `/tether-${hostPid}-`
  const found: Array<Proc> = []
  for (const pid of pids()) {
    let text: string
    try {
      text = Fs.readFileSync(`/proc/${pid}/cgroup`, "latin1")
    } catch {
      continue
    }
    if (!text.includes(needle)) continue
    const proc = stat(pid)
    if (alive(proc)) found.push(proc)
  }
  return found
}

/** Live processes in the session of one of `leaders` (pids of CLIs), started at or after `since` (clock ticks). */
export const bySession = (leaders: ReadonlySet<number>, since: number): Array<Proc> => {
  const found: Array<Proc> = []
  for (const pid of pids()) {
    const proc = stat(pid)
    if (alive(proc) && leaders.has(proc.sid) && proc.start >= since) found.push(proc)
  }
  return found
}

/** The host's own live children (the watchdog of a layer is one while the layer lives). */
export const children = (hostPid: number = process.pid): Array<Proc> => {
  const found: Array<Proc> = []
  for (const pid of pids()) {
    const proc = stat(pid)
    if (alive(proc) && proc.ppid === hostPid) found.push(proc)
  }
  return found
}

/** This process's start time, in clock ticks since boot: what a process started after it is compared with. */
export const selfStart = (): number => stat(process.pid)!.start
