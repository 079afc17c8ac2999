/**
 * Teardown of one connection: what its container holds, and the bounded loop that empties it.
 *
 * Ends stdin, sends SIGTERM to every process of the container (again to those that appear later), waits
 * `termGrace`, kills what is left (`cgroup.kill`, SIGKILL), waits for the CLI to be reaped within `killGrace`,
 * then looks again: whatever is still alive is a survivor, named in the report. Runs on native timers, not the
 * `Clock`: teardown is real time even when a host runs on a `TestClock`. Zombies never count as alive.
 *
 * Never signalled, whatever the container holds: the host, its ancestors and PID 1 (and the watchdog). A cgroup
 * moves them out before anything is signalled; the report names them ({@link Report.spared}). A cgroup also brings
 * back the session's processes it finds outside it, and the report names those ({@link Report.escaped}).
 */
import type * as Transport from "@tether/core/Transport"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as NodeChildProcess from "node:child_process"
import * as NodeChildProcessRuntime from "node:child_process"
import * as Cgroup from "./cgroup.ts"
import * as ProcessTree from "./processTree.ts"

/** What teardown sees of a connection's processes, and how it ends them. @internal */
export interface Container {
  readonly mechanism: Transport.Containment
  /** The live (non-zombie) processes it holds now. */
  readonly alive: () => ReadonlyArray<ProcessTree.ProcessInfo>
  /** Asks them to end (SIGTERM). */
  readonly terminate: (processes: ReadonlyArray<ProcessTree.ProcessInfo>) => void
  /** Ends them (SIGKILL; for a cgroup, `cgroup.kill` first). */
  readonly kill: (processes: ReadonlyArray<ProcessTree.ProcessInfo>) => void
  /** Frees what the container holds (a cgroup's directory): false when it could not. */
  readonly release: () => boolean
  /** The processes it must never signal that it found among its members so far. */
  readonly spared: () => ReadonlyArray<Spared>
  /** The session's processes it found outside it (and brought back) so far. */
  readonly escaped: () => ReadonlyArray<number>
}

/**
 * A process teardown must never signal (the host, one of its ancestors, PID 1, the watchdog) found in a
 * container: a tool as root can write any pid into its cgroup's `cgroup.procs`. @internal
 */
export interface Spared {
  readonly pid: number
  /** Moved out of the container (to the host's own cgroup) before anything was signalled. */
  readonly movedOut: boolean
}

/** A process left alive by teardown. @internal */
export interface Survivor {
  readonly pid: number
  /** Its command line, scrubbed of secrets (undefined when it exited before it could be read). */
  readonly command: string | undefined
}

/** What a teardown did, for the logs and the metrics. @internal */
export interface Report {
  readonly millis: number
  readonly containment: Transport.Containment
  /** Processes that received SIGTERM (the CLI included). */
  readonly terminated: number
  /** Processes that were still alive at the end of `termGrace` and were killed. */
  readonly killed: number
  /** Processes still alive when teardown looked again after the kill (unkillable, or out of its reach). */
  readonly survivors: ReadonlyArray<Survivor>
  /**
   * Processes found in the container that teardown never signals (the host, its ancestors, PID 1, the watchdog):
   * moved out first where the container is a cgroup. Not counted in `terminated` and `killed`. Their command lines
   * are scrubbed like the survivors'.
   */
  readonly spared: ReadonlyArray<Survivor & { readonly movedOut: boolean }>
  /**
   * Processes of the session found outside its cgroup (a root tool can move itself out), by the process tree's
   * rules (parent links, sessions, the marker in the environment), or in a cgroup a tool made beside the sessions'
   * in the layer's: moved back in and ended with the rest (counted in `terminated` and `killed`). One that moved
   * elsewhere and also cleared its environment and lost its parent is not found.
   */
  readonly escaped: ReadonlyArray<Survivor>
}

const firstPolls = 10
const fastPollMillis = 5
const slowPollMillis = 20
/**
 * How old a process table a cgroup's first look takes (read for another session's teardown since that moment): the
 * sessions torn down together read it a few times, not once each. A process born after that read began is neither
 * found nor remembered by the first look: one already out of its cgroup is missed as one escaping just after the
 * look is; the look at the first kill, when there is one, reads a table of its own. What the older table lists that
 * has exited since is checked against the process itself before it counts as escaped. No table is kept longer.
 *
 * @internal
 */
export const firstLookShareMillis = 25

/**
 * A cgroup subtree's processes: those of the session's cgroup and of every cgroup a tool nested in it. `guarded`
 * are the pids never to signal: any of them found in the subtree is moved out first, at every look and again just
 * before `cgroup.kill` (which would kill it too). Empty as soon as `cgroup.events` says `populated 0`. The kill is
 * the kernel's `cgroup.kill` alone; only when it cannot be written, or a guarded process could not be moved out
 * (so the whole subtree must not be killed), are the members SIGKILLed one by one.
 *
 * `cli` is the CLI's pid while the host has not reaped it (so that the pid still names it): a CLI that was moved out
 * of its cgroup (a root tool of another session can move it into its own) is moved back in, or, where the kernel
 * refuses, signalled by pid with the members. Its teardown does not wait on a process it no longer contains.
 *
 * `tree` finds the session's processes by the process tree's rules (parent links, sessions, the marker) in a process
 * table whose read began at or after the time it is given: read at the first look (a table up to
 * `firstLookShareMillis` older than the look, which sessions torn down together share) and at the first kill (one
 * read then), what it finds outside the subtree escaped the cgroup (a root tool can move itself to the root cgroup,
 * or a sibling): moved back in, signalled with the members, and named in the report. So are the processes of
 * cgroups a tool made in the layer's beside the sessions'.
 *
 * @internal
 */
export const cgroupContainer = (
  session: Cgroup.Session,
  guarded: () => ReadonlySet<number>,
  cli: () => number | undefined = () => undefined,
  tree: (notBefore: number) => ReadonlyArray<ProcessTree.ProcessInfo> = () => []
): Container => {
  const spared = new Map<number, boolean>()
  /** By pid, the start time it had when found: a pid that names another process since is not signalled. */
  const escaped = new Map<number, string>()
  /**
   * The session's processes outside the subtree, by the tree, and those in cgroups a tool made beside the sessions'
   * (in the layer's): moved back in.
   */
  const recall = (members: ReadonlyArray<number>, guard: ReadonlySet<number>, notBefore: number) => {
    const inside = new Set(members)
    const outside = [...tree(notBefore)]
    // What the tree does not claim in a cgroup a tool made beside the sessions' is this session's only when no
    // other session is live in the layer: one session's teardown never takes another's processes.
    if (session.alone()) {
      for (const dir of session.foreign()) {
        for (const pid of Cgroup.members(dir)) {
          const info = ProcessTree.readStat(pid)
          if (info !== undefined) outside.push(info)
        }
      }
    }
    for (const info of outside) {
      if (info.zombie || inside.has(info.pid) || guard.has(info.pid) || escaped.has(info.pid)) continue
      // Alive now, and the same process: a table read before `members` (a shared one) still lists a member that has
      // exited since, which left the cgroup's list by ending, not by escaping.
      const now = ProcessTree.readStat(info.pid)
      if (now === undefined || now.zombie || now.start !== info.start) continue
      escaped.set(info.pid, info.start)
      session.moveIn(info.pid)
    }
  }
  /** The escaped processes still alive and still the ones found (same start time), outside the subtree. */
  const stillOut = (pids: ReadonlyArray<number>, root: number | undefined): ReadonlyArray<number> => {
    const out: Array<number> = []
    for (const [pid, start] of escaped) {
      if (pid === root || pids.includes(pid)) continue
      const info = ProcessTree.readStat(pid)
      if (info !== undefined && !info.zombie && info.start === start) out.push(pid)
    }
    return out
  }
  let looked = false
  let killed = false
  /** The members but the guarded, moved out; `stuck` when one of those is still in. */
  const sort = (): { readonly others: ReadonlyArray<number>; readonly stuck: boolean } => {
    const pids = session.pids()
    const root = cli()
    const others: Array<number> = []
    // Moved back in, it is a member again (and cgroup.kill reaches it); where the kernel refuses, it is still
    // signalled by pid with the members.
    if (root !== undefined && !pids.includes(root)) {
      session.moveIn(root)
      others.push(root)
    }
    // Escaped processes are signalled by pid this time (whether or not the move back worked), with the members
    // from the next look on.
    others.push(...stillOut(pids, root))
    if (pids.length === 0) return { others, stuck: false }
    const guard = guarded()
    let stuck = false
    for (const pid of pids) {
      if (!guard.has(pid)) {
        others.push(pid)
        continue
      }
      const moved = session.moveOut(pid)
      // Refused for a process that has exited meanwhile: nothing is in the way of the kill.
      if (!moved && ProcessTree.readStat(pid) === undefined) continue
      spared.set(pid, moved || spared.get(pid) === true)
      if (!moved) stuck = true
    }
    return { others, stuck }
  }
  return {
    mechanism: "cgroup",
    alive: () => {
      if (!looked) {
        looked = true
        recall(session.pids(), guarded(), performance.now() - firstLookShareMillis)
      }
      if (!session.populated() && cli() === undefined && stillOut([], undefined).length === 0) return []
      const alive: Array<ProcessTree.ProcessInfo> = []
      for (const pid of sort().others) {
        const info = ProcessTree.readStat(pid)
        if (info !== undefined && !info.zombie) alive.push(info)
      }
      return alive
    },
    terminate: (processes) => ProcessTree.signalAll(processes, "SIGTERM"),
    kill: (processes) => {
      if (!killed) {
        // Looked for again: one that escaped during termGrace.
        killed = true
        recall(session.pids(), guarded(), performance.now())
      }
      if (sort().stuck || !session.kill()) return ProcessTree.signalAll(processes, "SIGKILL")
      // cgroup.kill does not reach one the kernel did not let back in (the CLI, an escaped process): by pid.
      const inside = new Set(session.pids())
      ProcessTree.signalAll(processes.filter((info) => !inside.has(info.pid)), "SIGKILL")
    },
    release: session.remove,
    spared: () => [...spared].map(([pid, movedOut]) => ({ pid, movedOut })),
    escaped: () => [...escaped.keys()]
  }
}

/**
 * `container` without the process `pid` in what it holds: it is neither signalled by pid nor counted (an isolated
 * session's stage 1, which waits for the CLI and ends with it). A cgroup's kill still reaches it.
 *
 * @internal
 */
export const sparing = (container: Container, pid: number): Container => ({
  ...container,
  alive: () => container.alive().filter((info) => info.pid !== pid)
})

/**
 * A tree read from the process table. `spare` is not sent SIGTERM (a launcher whose death would kill the rest
 * before they could end cleanly); SIGKILL reaches it with the others.
 *
 * @internal
 */
export const treeContainer = (
  mechanism: Transport.Containment,
  tree: ProcessTree.Tree,
  rootOnly: () => ReadonlyArray<ProcessTree.ProcessInfo>,
  spare?: number
): Container => ({
  mechanism,
  alive: () => {
    try {
      return tree.scan()
    } catch {
      // The process table could not be read (no /proc, no ps): the CLI itself is all that is known.
      return rootOnly()
    }
  },
  terminate: (processes) =>
    ProcessTree.signalAll(spare === undefined ? processes : processes.filter((info) => info.pid !== spare), "SIGTERM"),
  kill: (processes) => ProcessTree.signalAll(processes, "SIGKILL"),
  release: () => true,
  spared: () => [],
  escaped: () => []
})

/** Windows: the CLI and what `taskkill /T` reaches from it while it runs. @internal */
export const windowsContainer = (pid: number, rootOnly: () => ReadonlyArray<ProcessTree.ProcessInfo>): Container => {
  const taskkill = (force: boolean) => {
    const args = ["/pid", String(pid), "/T"]
    if (force) args.push("/F")
    NodeChildProcessRuntime.execFile("taskkill", args, { windowsHide: true }, () => {})
  }
  return {
    mechanism: "process-tree",
    alive: rootOnly,
    terminate: (processes) => {
      if (processes.length > 0) taskkill(false)
    },
    kill: (processes) => {
      if (processes.length > 0) taskkill(true)
    },
    release: () => true,
    spared: () => [],
    escaped: () => []
  }
}

/**
 * Runs teardown; calls `done` once with the report. Returns a canceller for the timers (the teardown itself is not
 * undone). SIGTERM goes once to each process (by pid and start time), to those found later too; SIGKILL again at
 * every poll past `termGrace` (a process may have forked in between).
 *
 * @internal
 */
export const run = (options: {
  readonly child: NodeChildProcess.ChildProcess
  readonly exited: () => boolean
  readonly container: Container
  readonly termGraceMillis: number
  readonly killGraceMillis: number
  readonly describe: (pid: number) => string | undefined
  readonly done: (report: Report) => void
}): () => void => {
  const { child, container } = options
  const started = Date.now()
  const termDeadline = started + options.termGraceMillis
  const hardDeadline = termDeadline + options.killGraceMillis
  const terminated = new Set<string>()
  const killed = new Set<string>()
  let polls = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  let finished = false

  const finish = (last: ReadonlyArray<ProcessTree.ProcessInfo>) => {
    finished = true
    clearTimeout(timer)
    child.off("exit", wake)
    // Always release the pipes: a reader that stopped while stdout was paused would otherwise never see its end
    // (leaking the descriptor and its buffered lines), and a descendant out of reach would keep stderr, and with it
    // the host's event loop, alive.
    child.stdin?.destroy()
    child.stdout?.destroy()
    child.stderr?.destroy()
    // Look again, after the kill: what is alive now survived it.
    const survivors = last.length > 0 ? container.alive() : []
    const removed = container.release()
    const left = !removed && survivors.length === 0 ? container.alive() : survivors
    options.done({
      millis: Date.now() - started,
      containment: container.mechanism,
      terminated: terminated.size,
      killed: killed.size,
      survivors: left.map((info) => ({ pid: info.pid, command: options.describe(info.pid) })),
      spared: container.spared().map((spared) => ({ ...spared, command: options.describe(spared.pid) })),
      escaped: container.escaped().map((pid) => ({ pid, command: options.describe(pid) }))
    })
  }

  const fresh = (processes: ReadonlyArray<ProcessTree.ProcessInfo>, sent: Set<string>) => {
    const out = processes.filter((info) => !sent.has(`${info.pid}:${info.start}`))
    for (const info of out) sent.add(`${info.pid}:${info.start}`)
    return out
  }

  const step = () => {
    if (finished) return
    clearTimeout(timer)
    const now = Date.now()
    const processes = container.alive()
    if (processes.length === 0) {
      // Everything is gone; wait for Node to reap the CLI so that `exit` is settled when the scope closes.
      if (options.exited() || now >= hardDeadline) return finish([])
    } else if (now < termDeadline) {
      container.terminate(fresh(processes, terminated))
    } else if (now < hardDeadline) {
      fresh(processes, killed)
      container.kill(processes)
    } else {
      // Past the hard deadline (a stalled event loop may have skipped the kill window entirely): one last kill,
      // then stop waiting and see what survived it.
      fresh(processes, killed)
      container.kill(processes)
      return finish(processes)
    }
    polls++
    const delay = polls < firstPolls ? fastPollMillis : slowPollMillis
    // Never sleep past the moment the kill is due.
    const untilKill = termDeadline - now
    timer = setTimeout(step, untilKill > 0 ? Math.min(delay, untilKill) : delay)
  }
  const wake = () => step()

  if (child.stdin !== null && !child.stdin.writableEnded && !child.stdin.destroyed) child.stdin.end()
  child.on("exit", wake)
  step()
  return () => {
    clearTimeout(timer)
    child.off("exit", wake)
  }
}

/**
 * Logs a teardown: a warning naming every survivor (pid and command line) and their count added to `metric`
 * (attribute `containment`) when there are any; a warning naming every spared process (the host, an ancestor, PID 1
 * found in the session's container), and one naming every process found outside it, when there are any; a debug
 * line otherwise.
 *
 * @internal
 */
export const logReport = (report: Report, metric: Metric.Counter<number>): Effect.Effect<void> => {
  const spared = report.spared.length === 0 ? Effect.void : Effect.logWarning(
    `teardown found ${report.spared.length} process(es) it never signals (the host, an ancestor of it, PID 1) ` +
      `in the session's ${report.containment}, and spared them: ` +
      report.spared.map((each) =>
        `${each.pid} (${each.command ?? "gone"}${each.movedOut ? ", moved out" : ", could not be moved out"})`
      ).join(", "),
    report
  )
  const survivors = report.survivors.length === 0
    ? report.spared.length === 0 && report.escaped.length === 0 ? Effect.logDebug("teardown", report) : Effect.void
    : Effect.andThen(
      Effect.logWarning(
        `teardown left ${report.survivors.length} process(es) alive after the kill: ` +
          report.survivors.map((survivor) => `${survivor.pid} (${survivor.command ?? "gone"})`).join(", "),
        report
      ),
      Metric.update(Metric.withAttributes(metric, { containment: report.containment }), report.survivors.length)
    )
  const escaped = report.escaped.length === 0 ? Effect.void : Effect.logWarning(
    `teardown found ${report.escaped.length} process(es) of the session outside its ${report.containment}, and ` +
      `brought them back to end them: ` +
      report.escaped.map((each) => `${each.pid} (${each.command ?? "gone"})`).join(", "),
    report
  )
  return Effect.andThen(Effect.andThen(spared, escaped), survivors)
}
