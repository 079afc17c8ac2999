/**
 * What is left of the soak's processes, read from /proc (with the transport tests' helpers) and not from the
 * transport's own bookkeeping, three ways:
 *
 * - by marker: every CLI is started with `SOAK_MARK=<run id>` in its environment, which its children inherit;
 * - by containment: under the cgroup containment, every process in a cgroup of this host's transport layers
 *   (`…/tether-<host pid>-…` in `/proc/<pid>/cgroup`), whatever its environment;
 * - by session: every process whose session id is the pid of a CLI the soak started (the CLI leads its own
 *   session).
 *
 * Zombies are not counted: they are dead, waiting for their parent (PID 1 reaps orphans slowly here).
 */
import * as Fs from "node:fs"
import { allProcs, marked, type Proc } from "../../packages/transport-node/test/utils.ts"

export type { Proc }

const cgroupOf = (pid: number): string => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cgroup`, "latin1")
  } catch {
    return ""
  }
}

/** The soak's live processes, each way, and the host's own live children (a layer's watchdog while it lives). */
export interface Found {
  readonly byMarker: ReadonlyArray<Proc>
  readonly byCgroup: ReadonlyArray<Proc>
  readonly bySession: ReadonlyArray<Proc>
  readonly children: ReadonlyArray<Proc>
}

/**
 * Reads /proc for the processes of the run `runId` (its marker), of this host's transport layers' cgroups, and of
 * the sessions led by `leaders` (pids of CLIs): two passes over the process table.
 */
export const find = (runId: string, leaders: ReadonlySet<number>, hostPid: number = process.pid): Found => {
  const procs = allProcs()
  return {
    byMarker: marked(runId, "SOAK_MARK"),
    byCgroup: procs.filter((proc) => cgroupOf(proc.pid).includes(`/tether-${hostPid}-`)),
    bySession: procs.filter((proc) => leaders.has(proc.sid)),
    children: procs.filter((proc) => proc.ppid === hostPid)
  }
}

/** How many of each. */
export const count = (found: Found) => ({
  byMarker: found.byMarker.length,
  byCgroup: found.byCgroup.length,
  bySession: found.bySession.length,
  children: found.children.length
})
