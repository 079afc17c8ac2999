/**
 * Which containment a transport layer uses (see `Transport.Containment`), how it starts a CLI under it, and how
 * teardown sees the processes it contains.
 *
 * `auto` takes the strongest one that works here without changing how the CLI runs: a cgroup where the host can
 * create one, else the process tree. The PID namespace is never chosen by `auto`: without root it needs a user
 * namespace, inside which the CLI sees other users' files as `nobody`, and its pid is the launcher's.
 */
import type * as Transport from "@tether/core/Transport"
import * as NodeChildProcess from "node:child_process"
import * as Cgroup from "./cgroup.ts"
import * as ProcessTree from "./processTree.ts"

/** What a host may ask for. @internal */
export type Requested = "auto" | "cgroup" | "pid-namespace" | "process-tree"

/** The containment a layer runs under, decided once when the layer is built. @internal */
export type Resolved =
  | { readonly _tag: "Cgroup"; readonly layer: Cgroup.Layer }
  | {
    readonly _tag: "PidNamespace"
    /** The launcher's argv before the CLI's: `[setpriv --pdeathsig KILL --] unshare … --`. */
    readonly unshare: ReadonlyArray<string>
    /**
     * The launcher gets SIGKILL from the kernel when the host dies (`setpriv --pdeathsig`), and its death kills the
     * namespace (`--kill-child`): nothing a tool can kill stands between the host's death and the namespace's.
     */
    readonly parentDeathSignal: boolean
  }
  | { readonly _tag: "ProcessTree"; readonly backend: ProcessTree.Backend | undefined; readonly fallback?: string }
  | { readonly _tag: "Unavailable"; readonly requested: "cgroup" | "pid-namespace"; readonly reason: string }

/** The mechanism a resolved containment reports. @internal */
export const mechanismOf = (resolved: Resolved): Transport.Containment => {
  switch (resolved._tag) {
    case "Cgroup":
      return "cgroup"
    case "PidNamespace":
      return "pid-namespace"
    case "ProcessTree":
      return "process-tree"
    case "Unavailable":
      return resolved.requested
  }
}

const onLinux = (): boolean => process.platform === "linux" && ProcessTree.defaultBackend() === "proc"

/**
 * The arguments that start a program in a new PID namespace (a user namespace too when not root), or why that
 * cannot work here (probed by running `true` in one). Where `setpriv` can set a parent-death signal, the launcher
 * is started through it: the kernel SIGKILLs `unshare` when the host dies, and `--kill-child` makes that kill the
 * namespace. A watchdog could be killed by the session's own tools; this cannot be undone from outside `unshare`.
 */
const probeUnshare = (): { readonly argv: ReadonlyArray<string>; readonly parentDeathSignal: boolean } | string => {
  const root = process.getuid?.() === 0
  const args = [...(root ? [] : ["--user", "--map-current-user"]), "--pid", "--fork", "--kill-child=SIGKILL", "--"]
  const probe = NodeChildProcess.spawnSync("unshare", [...args, "true"], { stdio: "ignore", timeout: 5_000 })
  if (probe.error !== undefined) return `unshare could not be run (${(probe.error as NodeJS.ErrnoException).code})`
  if (probe.status !== 0) {
    return root
      ? "unshare --pid failed"
      : "unshare --user --pid failed: unprivileged user namespaces are disabled here"
  }
  const setpriv = ["setpriv", "--pdeathsig", "KILL", "--"]
  const withSignal = NodeChildProcess.spawnSync(setpriv[0], [...setpriv.slice(1), "unshare", ...args, "true"], {
    stdio: "ignore",
    timeout: 5_000
  })
  return withSignal.error === undefined && withSignal.status === 0
    ? { argv: [...setpriv, "unshare", ...args], parentDeathSignal: true }
    : { argv: ["unshare", ...args], parentDeathSignal: false }
}

/** Decides the containment of a layer (creates its cgroup when that is the one). @internal */
export const resolve = (requested: Requested): Resolved => {
  const backend = ProcessTree.defaultBackend()
  if (requested === "process-tree") return { _tag: "ProcessTree", backend }
  if (!onLinux()) {
    if (requested === "auto") return { _tag: "ProcessTree", backend }
    return { _tag: "Unavailable", requested, reason: `${requested} containment needs Linux with /proc` }
  }
  if (requested === "pid-namespace") {
    const unshare = probeUnshare()
    return typeof unshare === "string"
      ? { _tag: "Unavailable", requested, reason: unshare }
      : { _tag: "PidNamespace", unshare: unshare.argv, parentDeathSignal: unshare.parentDeathSignal }
  }
  const layer = Cgroup.makeLayer()
  if (typeof layer !== "string") return { _tag: "Cgroup", layer }
  return requested === "cgroup"
    ? { _tag: "Unavailable", requested, reason: layer }
    : { _tag: "ProcessTree", backend, fallback: layer }
}
