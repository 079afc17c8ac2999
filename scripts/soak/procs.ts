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

/** Live processes whose environment carries `SOAK_MARK=<runId>`. */
export const byMarker = (runId: string): Array<Proc> => marked(runId, "SOAK_MARK")

const cgroupOf = (pid: number): string => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cgroup`, "latin1")
  } catch {
    return ""
  }
}

/** Live processes in a cgroup of this host's transport layers. */
export const byCgroup = (hostPid: number = process.pid): Array<Proc> =>
  allProcs().filter((proc) => cgroupOf(proc.pid).includes(`/tether-${hostPid}-`))

/** Live processes in the session of one of `leaders` (pids of CLIs). */
export const bySession = (leaders: ReadonlySet<number>): Array<Proc> =>
  allProcs().filter((proc) => leaders.has(proc.sid))

/** The host's own live children (the watchdog of a layer is one while the layer lives). */
export const children = (hostPid: number = process.pid): Array<Proc> =>
  allProcs().filter((proc) => proc.ppid === hostPid)
