/**
 * Teardown of one connection: what its container holds, and the bounded loop that empties it.
 *
 * Ends stdin, sends SIGTERM to every process of the container (again to those that appear later), waits
 * `termGrace`, kills what is left (`cgroup.kill`, SIGKILL), waits for the CLI to be reaped within `killGrace`,
 * then looks again: whatever is still alive is a survivor, named in the report. Runs on native timers, not the
 * `Clock`: teardown is real time even when a host runs on a `TestClock`. Zombies never count as alive.
 */
import type * as Transport from "@tether/core/Transport"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as NodeChildProcess from "node:child_process"
import * as NodeChildProcessRuntime from "node:child_process"
import type * as Cgroup from "./cgroup.ts"
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
}

const firstPolls = 10
const fastPollMillis = 5
const slowPollMillis = 20

/** A cgroup's processes, read from its `cgroup.procs`. @internal */
export const cgroupContainer = (session: Cgroup.Session): Container => ({
  mechanism: "cgroup",
  alive: () => {
    const alive: Array<ProcessTree.ProcessInfo> = []
    for (const pid of session.pids()) {
      const info = ProcessTree.readStat(pid)
      if (info !== undefined && !info.zombie) alive.push(info)
    }
    return alive
  },
  terminate: (processes) => ProcessTree.signalAll(processes, "SIGTERM"),
  kill: (processes) => {
    session.kill()
    ProcessTree.signalAll(processes, "SIGKILL")
  },
  release: session.remove
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
  release: () => true
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
    release: () => true
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
      survivors: left.map((info) => ({ pid: info.pid, command: options.describe(info.pid) }))
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
 * (attribute `containment`) when there are any, a debug line otherwise.
 *
 * @internal
 */
export const logReport = (report: Report, metric: Metric.Counter<number>): Effect.Effect<void> =>
  report.survivors.length === 0 ? Effect.logDebug("teardown", report) : Effect.andThen(
    Effect.logWarning(
      `teardown left ${report.survivors.length} process(es) alive after the kill: ` +
        report.survivors.map((survivor) => `${survivor.pid} (${survivor.command ?? "gone"})`).join(", "),
      report
    ),
    Metric.update(Metric.withAttributes(metric, { containment: report.containment }), report.survivors.length)
  )
