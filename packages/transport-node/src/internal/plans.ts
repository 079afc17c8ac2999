/**
 * Launch plans: how each containment mechanism starts a CLI (the launcher, `unshare`, the plain spawn).
 *
 * @internal
 */
import type { Writable } from "node:stream"
import * as Cgroup from "./cgroup.ts"
import * as Containment from "./containment.ts"

export interface Plan {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Descriptors before the secret pipes: 3 (stdin, stdout, stderr), or 4 with the launcher's go pipe. */
  readonly firstSecretFd: number
}

export const planFor = (
  resolved: Containment.Resolved,
  file: string,
  args: ReadonlyArray<string>
): Plan => {
  switch (resolved._tag) {
    case "Cgroup":
      return { file: "/bin/sh", args: ["-c", Cgroup.launcher, Cgroup.launcherName, file, ...args], firstSecretFd: 4 }
    case "PidNamespace":
      return { file: resolved.unshare[0], args: [...resolved.unshare.slice(1), file, ...args], firstSecretFd: 3 }
    default:
      return { file, args, firstSecretFd: 3 }
  }
}

/** Writes a secret into its pipe and closes the host's end: the CLI reads it, then EOF; nothing is left after. */
export const handOver = (stream: unknown, value: string) => {
  const writable = stream as Writable & { destroy: () => void }
  writable.on("error", () => {})
  writable.end(value + "\n", () => writable.destroy())
}
