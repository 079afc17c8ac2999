/**
 * What the transport guarantees on this platform under each containment mechanism (the capability report).
 *
 * @internal
 */
import * as Transport from "@tether/core/Transport"
import { markerVariable } from "./defaults.ts"
import { isWindows } from "./platform.ts"
import * as Watchdog from "./watchdog.ts"

/**
 * Whether a transport with these options runs the watchdog: asked for (the default), not on Windows, `/bin/sh` there,
 * and its program shipped next to this module (a bundle that left `internal/watchdogMain.js` out has none: the
 * capability report then says the CLI does not die with its host).
 */
export const watchdogEnabled = (options?: { readonly watchdog?: boolean | undefined }): boolean =>
  !isWindows && (options?.watchdog ?? true) && Watchdog.available

/**
 * What the transport guarantees on this platform under a containment mechanism, with or without the watchdog.
 * `transport.capabilities` is this for the mechanism the layer chose; a host can read it to refuse to run without
 * the guarantee it needs.
 *
 * @category capabilities
 * @since 0.1.0
 */
export const capabilitiesFor = (options: {
  readonly containment: Transport.Containment
  readonly watchdog?: boolean | undefined
  /** Why `auto` fell back to the process tree, or why the requested mechanism is unavailable. */
  readonly note?: string | undefined
  /**
   * Under `pid-namespace`: the launcher is started with a parent-death signal (`setpriv --pdeathsig`), so the
   * kernel ends the namespace when the host dies (default false).
   */
  readonly parentDeathSignal?: boolean | undefined
  /** The per-session limits this transport can enforce here. */
  readonly limits?: Transport.LimitSupport | undefined
  /** How they are enforced, or why not (and the session's temporary directory). */
  readonly limitNotes?: ReadonlyArray<string> | undefined
  /** `true`: each session is isolated from the others (see `NodeTransport.Options.isolation`); else why not. */
  readonly isolation?: true | string | undefined
}): Transport.Capabilities => {
  const capabilities = capabilitiesOf(options)
  const withLimits = options.limits === undefined && options.limitNotes === undefined ? capabilities : {
    ...capabilities,
    limits: options.limits ?? { memory: false, processes: false, cpu: false },
    notes: [...capabilities.notes, ...(options.limitNotes ?? [])]
  }
  return options.isolation === undefined ? withLimits : {
    ...withLimits,
    isolatesSessions: options.isolation === true,
    notes: [...withLimits.notes, options.isolation === true ? isolatedNote : options.isolation]
  }
}

const isolatedNote = "each session is isolated from the others: its CLI runs in a user namespace whose root is a " +
  "uid range of its own outside (distinct from every live session's on the machine; a lock file per range under " +
  "/run/tether/uid-ranges), a PID namespace, a mount namespace (a private /tmp, /dev/shm and /var/tmp) and a " +
  "cgroup namespace: its tools cannot read another session's environment, memory or files, signal it or move it " +
  "between cgroups; its workspace and config directory are lent to it while it runs (idmapped mounts in its own " +
  "mount namespace: sessions sharing a workspace each write it; what they leave is the host user's; 0700 while " +
  "lent, its mode given back by the last session holding it). A tool as the namespace's root can unmount its /proc and /tmp and see the host's " +
  "process list and /tmp again: it still reads and signals nothing there (another uid, no capability outside)"

const capabilitiesOf = (options: {
  readonly containment: Transport.Containment
  readonly watchdog?: boolean | undefined
  readonly note?: string | undefined
  readonly parentDeathSignal?: boolean | undefined
}): Transport.Capabilities => {
  const watchdog = watchdogEnabled(options)
  // The session's tools run as the host's user (root, when the host is): they can kill the watchdog, and after that
  // a host killed without finalizers leaves the session running. `diesWithHost` is only what they cannot undo.
  const killable = "the session's tools run as the host's user (or as root) and can kill the watchdog: a host " +
    "killed without finalizers after that leaves the session running, so diesWithHost is false"
  const extra = options.note === undefined ? [] : [options.note]
  const noWatchdog = "no watchdog: a host killed without running finalizers (SIGKILL, crash, a signal under " +
    "Effect.runPromise) leaves the CLI running (and its session's cgroup, if any); Node has no " +
    "prctl(PR_SET_PDEATHSIG)"
  const watchdogProcess = "a watchdog process (one per layer, in its own session) sees the host's pipe close"
  const bounded = "zombies do not count as alive; teardown is bounded by termGrace + killGrace whatever the " +
    "children do, and names what is still alive after the kill (a warning and the tether_teardown_survivors metric)"
  if (isWindows) {
    return {
      name: "node/windows",
      containment: "process-tree",
      killsDetachedDescendants: false,
      killsOrphanedDescendants: false,
      killsEveryDescendant: false,
      diesWithHost: false,
      notes: [
        "teardown runs taskkill /T on the CLI: it reaches the descendants of a running CLI only, and descendants " +
        "that outlive the CLI are left running (a Job Object would contain them)",
        "no watchdog on Windows",
        ...extra
      ]
    }
  }
  const name = `node/${process.platform}`
  switch (options.containment) {
    case "cgroup":
      return {
        name,
        containment: "cgroup",
        killsDetachedDescendants: true,
        killsOrphanedDescendants: true,
        killsEveryDescendant: true,
        diesWithHost: false,
        notes: [
          "each session has a cgroup v2 of its own; the CLI is placed in it before it can fork, and the kernel keeps " +
          "every descendant in it (setsid, double forks, a cleared environment, a rewritten process title included)",
          "teardown: SIGTERM to every member of the session's cgroup and of the cgroups a tool nested in it, " +
          "termGrace, cgroup.kill (recursive), a wait for cgroup.events to say populated 0, rmdir deepest first",
          "never signalled: the host, its ancestors, PID 1 and the watchdog; a tool that writes one of them into its " +
          "cgroup.procs (root can) has it moved back out to the host's cgroup before the kill, named in a warning",
          bounded,
          watchdog
            ? `dies with host, unless a tool kills the watchdog: ${watchdogProcess} and ends each session's cgroup ` +
              `the same way; ${killable}`
            : noWatchdog,
          "a process moved out of the cgroup (root can) is looked for at teardown by the process tree's rules too " +
          `(parent links, sessions, ${markerVariable} in its environment): found, it is moved back and ended, and ` +
          "named in a warning",
          "not contained: a process moved out of the cgroup that also cleared its environment and lost its parent " +
          "(a cgroup namespace would keep it in), and what the CLI asks other services to start (systemd-run, a " +
          "container runtime, ssh to another machine)",
          ...extra
        ]
      }
    case "pid-namespace": {
      // Without root, a tool is in a user namespace of its own: it can neither see the watchdog's pid nor enter
      // the host's PID namespace to kill it. As root it can (nsenter -t 1 -p).
      const unreachable = process.getuid?.() !== 0
      const parentDeathSignal = options.parentDeathSignal === true
      return {
        name,
        containment: "pid-namespace",
        killsDetachedDescendants: true,
        killsOrphanedDescendants: true,
        killsEveryDescendant: true,
        diesWithHost: parentDeathSignal || (watchdog && unreachable),
        notes: [
          "each CLI runs as the first process of a PID namespace of its own (unshare; a user namespace too when not " +
          "root): every descendant stays in it and orphans are re-parented to the CLI; when the CLI dies, the " +
          "kernel kills the rest",
          "connection.pid is the launcher's (unshare); inside a user namespace the CLI sees files of other users " +
          "as nobody's",
          bounded,
          parentDeathSignal
            ? "dies with host: the launcher runs under setpriv --pdeathsig KILL, so the kernel kills it when the " +
              "host dies, however it dies, and its --kill-child kills the namespace; no process a tool could kill " +
              "stands in between" + (watchdog ? ` (the watchdog is a second line: ${watchdogProcess})` : "")
            : watchdog
            ? `dies with host: ${watchdogProcess} and kills each namespace's tree` +
              (unreachable ? "; the session's tools cannot reach it from their namespaces" : `; ${killable}`)
            : noWatchdog,
          ...extra
        ]
      }
    }
    default:
      break
  }
  if (process.platform === "linux") {
    return {
      name,
      containment: "process-tree",
      killsDetachedDescendants: true,
      killsOrphanedDescendants: true,
      killsEveryDescendant: false,
      diesWithHost: false,
      notes: [
        "the tree is read from /proc during the session (every scanInterval) and at teardown: descendants by " +
        "parent link, members of the sessions and process groups of every member seen alive during the session " +
        `(alive or dead since), and every process whose environment carries the connection's ${markerVariable}`,
        "not found: a descendant that left the session and whose parent exited before any scan saw that parent, " +
        "if it also cleared its environment (env -i) or overwrote it with a long process title (setproctitle); " +
        "the Bash tool's shell running `env -i sleep 300 &` is such a parent. Only a cgroup or a PID namespace " +
        "contains that one",
        bounded,
        watchdog
          ? `dies with host, unless a tool kills the watchdog: ${watchdogProcess} and kills each connection's ` +
            `tree, found as teardown finds it; ${killable}`
          : noWatchdog,
        ...extra
      ]
    }
  }
  return {
    name,
    containment: "process-tree",
    killsDetachedDescendants: true,
    killsOrphanedDescendants: false,
    killsEveryDescendant: false,
    diesWithHost: false,
    notes: [
      "the tree is read with ps at teardown: descendants by parent link (found while their parents live) and the " +
      "members of every member's process group; there is no /proc to find orphans by their environment",
      bounded,
      watchdog
        ? `dies with host, partly: ${watchdogProcess} and signals each CLI's process group only (SIGTERM, then ` +
          "SIGKILL after termGrace): descendants that left the group (setsid, as the Bash tool does) keep running; " +
          killable
        : noWatchdog,
      ...extra
    ]
  }
}
