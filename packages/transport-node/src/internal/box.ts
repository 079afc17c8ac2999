/**
 * What a session has besides its processes: the watch on its limits' counters (the limits hit, the CLI's own OOM
 * kill), and its private temporary directory.
 *
 * @internal
 */
import type * as Transport from "@tether/core/Transport"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DeadHosts from "./deadHosts.ts"
import type * as Limits from "./limits.ts"
import * as ProcessTree from "./processTree.ts"

/** The prefix of the sessions' temporary directories, followed by the host's pid. @internal */
export const tmpPrefix = "tether-tmp-"

/**
 * Makes a session's private temporary directory under the host's (`os.tmpdir()`), mode 0700: the CLI gets it as
 * `TMPDIR`, `TMP` and `TEMP`, and it is removed, with whatever the tools left in it, when the session is released.
 * Sweeps the directories of hosts that are gone first (a host killed without its finalizers leaves its own).
 *
 * @internal
 */
export const makeTmp = (base: string = Os.tmpdir()): string => {
  sweepTmp(base)
  return Fs.mkdtempSync(Path.join(base, `${tmpPrefix}${process.pid}-`))
}

/**
 * Removes a session's temporary directory and everything in it, also what a tool made unreadable (its directories'
 * modes are restored first when the removal is refused). True when it is gone.
 *
 * @internal
 */
export const removeTmp = (dir: string): boolean => {
  try {
    Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 2 })
    return true
  } catch {
    restoreModes(dir)
    try {
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 2 })
      return true
    } catch {
      return false
    }
  }
}

const restoreModes = (dir: string): void => {
  try {
    Fs.chmodSync(dir, 0o700)
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) restoreModes(Path.join(dir, entry.name))
    }
  } catch {
    // Gone, or not ours to change: the removal says what is left.
  }
}

const sweepTmp = (base: string): void =>
  DeadHosts.sweep(base, new RegExp(`^${tmpPrefix}([0-9]+)-[A-Za-z0-9]{6}$`), removeTmp)

/** The watch on one session's limits. @internal */
export interface Watch {
  /**
   * Asked when the CLI died by SIGKILL: true when the session's OOM-kill counter rose past what was reported, and
   * then one of those kills is the CLI's (not reported as a tool's).
   */
  readonly outOfMemory: () => boolean
  /** Reads the counters once more, reports what rose, and stops. */
  readonly lastLook: () => void
}

/**
 * Watches a session's limits' counters every `intervalMillis` (native timers: limits are real time, whatever clock
 * the host runs on) and reports what rose: OOM kills (`memory`) and refused forks (`processes`). An OOM kill seen
 * while the CLI is dead and its exit not yet handled is left for {@link Watch.outOfMemory}: it is likely the CLI's.
 *
 * @internal
 */
export const watchLimits = (options: {
  readonly session: Limits.Session
  readonly requested: Limits.Requested
  /** The CLI's pid (in a box, known once its namespaces are made: the launcher's until then). */
  readonly pid: () => number
  readonly exited: () => boolean
  readonly intervalMillis: number
  readonly report: (hit: Transport.LimitHit) => void
}): Watch => {
  const { session, requested } = options
  let ooms = session.oomKills()
  let forks = session.forkFailures()
  const cliDeadUnhandled = () => {
    if (options.exited()) return false
    const info = ProcessTree.readStat(options.pid())
    return info === undefined || info.zombie
  }
  // An OOM kill is counted when the victim is chosen, before it is gone: one seen while the CLI still runs is
  // reported at the next look, if the CLI still runs then (a CLI that was the victim has died meanwhile, and its
  // exit is what reports it).
  let seen = ooms
  const look = (last = false) => {
    const nowOoms = session.oomKills()
    if (nowOoms > ooms && requested.memoryBytes !== undefined && !cliDeadUnhandled()) {
      if (nowOoms > seen && !last) {
        seen = nowOoms
      } else {
        options.report({ limit: "memory", count: nowOoms - ooms, max: requested.memoryBytes })
        ooms = nowOoms
      }
    }
    const nowForks = session.forkFailures()
    if (nowForks > forks && requested.processes !== undefined) {
      options.report({ limit: "processes", count: nowForks - forks, max: requested.processes })
      forks = nowForks
    }
  }
  const timer = options.intervalMillis > 0 ? setInterval(look, options.intervalMillis) : undefined
  timer?.unref()
  return {
    outOfMemory: () => {
      if (session.oomKills() <= ooms) return false
      ooms++
      return true
    },
    lastLook: () => {
      clearInterval(timer)
      look(true)
    }
  }
}
