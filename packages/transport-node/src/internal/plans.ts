/**
 * Launch plans: how each containment mechanism starts a CLI (the launcher, `unshare`, the plain spawn).
 *
 * @internal
 */
import type { Writable } from "node:stream"
import * as Cgroup from "./cgroup.ts"
import * as Containment from "./containment.ts"
import * as Isolation from "./isolation.ts"

export interface Plan {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Descriptors before the secret pipes: 3 (stdin, stdout, stderr), or 4 with the launcher's go pipe. */
  readonly firstSecretFd: number
}

/**
 * How to start `file` under `resolved`. `placed`: the host places the process in cgroups before it may run (a v1
 * cgroup of the limits), so it is started through the cgroup launcher whatever the containment: the launcher waits
 * on descriptor 3, then execs the rest (`unshare …` under a PID namespace), with the same pid. `box`: the session
 * is isolated (see `isolation.ts`): the launcher keeps descriptor 3 for the box's `mapped`, and execs the box's
 * `unshare` (which also makes the PID namespace of that containment), then its stages.
 */
export const planFor = (
  resolved: Containment.Resolved,
  file: string,
  args: ReadonlyArray<string>,
  placed = false,
  box?: Isolation.BoxPlan
): Plan => {
  if (box !== undefined) {
    // The box's unshare makes the PID namespace; under that containment, still with the parent-death signal.
    const prefix = resolved._tag === "PidNamespace" && resolved.parentDeathSignal
      ? [Isolation.tools().setpriv, "--pdeathsig", "KILL", "--"]
      : []
    return {
      file: "/bin/sh",
      args: [
        "-c",
        Isolation.launcher,
        Cgroup.launcherName,
        ...Isolation.command(box, file, args, prefix)
      ],
      firstSecretFd: 4
    }
  }
  const command = resolved._tag === "PidNamespace" ? [...resolved.unshare, file, ...args] : [file, ...args]
  return resolved._tag === "Cgroup" || placed
    ? { file: "/bin/sh", args: ["-c", Cgroup.launcher, Cgroup.launcherName, ...command], firstSecretFd: 4 }
    : { file: command[0], args: command.slice(1), firstSecretFd: 3 }
}

/** Writes a secret into its pipe and closes the host's end: the CLI reads it, then EOF; nothing is left after. */
export const handOver = (stream: unknown, value: string) => {
  const writable = stream as Writable & { destroy: () => void }
  writable.on("error", () => {})
  writable.end(value + "\n", () => writable.destroy())
}
