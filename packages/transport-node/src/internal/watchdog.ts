/**
 * The host-death watchdog's client: one small process per transport layer that kills the connections' processes
 * when the host dies without running its finalizers (SIGKILL, a crash, `process.exit`, a signal under
 * `Effect.runPromise`).
 *
 * Node cannot ask the kernel for a parent-death signal (`prctl(PR_SET_PDEATHSIG)`), so the watchdog learns of the
 * host's death the way a pipe does: its stdin is a pipe from the host, and the kernel closes the write end when
 * the host dies, however it dies. The host registers each connection's marker before spawning it (so there is no
 * window where a CLI runs unregistered), tells it the CLI's pid and start time once spawned, and unregisters it
 * after teardown. The watchdog runs in its own session and ignores SIGINT/SIGHUP/SIGTERM, so a Ctrl-C or a
 * group-wide signal that kills the host does not kill it first.
 *
 * The watchdog is two programs. While the host lives, it is `/bin/sh` running {@link keeper}: it keeps the lines it
 * reads and nothing else, for a shell's cost (a Node process would take about 100 ms of CPU to start, beside the
 * host's own start and its first CLI's, and 40 MB to stay). When its input ends, the shell starts Node on
 * `watchdogMain.ts` and hands it every line it kept, and that program does the killing. On a clean release the
 * host sends `Q` first, and the shell exits without starting anything. What the shell keeps grows with each
 * connection, so after {@link rotateBytes} the host starts a fresh keeper with the connections still open and tells
 * the old one `Q`.
 *
 * What it takes: `/bin/sh` while the host lives; and at the host's death, the Node binary and the program still
 * where they were when the layer was built (an upgrade of Node or a redeploy of the app under a running host
 * moves them) and the memory to start Node (about 40 MB; a host killed for want of memory may leave too little).
 * Failing those, the keeper exits and the host's processes outlive it, as without a watchdog.
 *
 * A host may also hold a *lease* ({@link leaseBoard}: a cluster runner holds one while its shard locks are fresh). A
 * keeper of a leased host is the Node program itself from the start, reading the lines as they come: it must keep
 * time, which the shell cannot. The host renews the lease with `H <remaining millis>` at each renewal; when the lease
 * runs out before the next renewal (the host is frozen, or cut off from what grants the lease), the program kills
 * the whole trees of the host's connections at once (SIGKILL, no grace: past its lease the host's agents must
 * not run) and every connection whose CLI the host reports while the lease is out; a later renewal ends that. A
 * host without a lease keeps the shell keeper and the host-death watch only.
 *
 * The protocol, one line per message: `+ <marker> <graceMillis> <cgroup dir or ->`, `= <marker> <pid> <start or ->`,
 * `- <marker>`, and for a layer's cgroup, removed at the end: `L <dir>` (register), `l <dir>` (forget). Paths are
 * URI-encoded (no spaces). `H <millis>`: the lease runs out in that many milliseconds; `H -`: no lease any more. `Q`:
 * exit, there is nothing to kill.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import * as ProcessTree from "./processTree.ts"

/**
 * The watchdog's process title (what `ps` shows).
 *
 * @internal
 */
export const title = "tether-watchdog"

// The program sits next to this module: `.ts` in the workspace (run by Node's type stripping), `.js` once built.
const program = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./watchdogMain.ts" : "./watchdogMain.js", import.meta.url)
)

/**
 * The keeper: `sh -c keeper <title> <node> <program>`. It ignores the signals the watchdog must outlive, keeps each
 * line it reads until `Q` (exit) or the end of its input, and at the end runs Node on the program with the kept
 * lines as its input, in the watchdog's session. Node puts an inherited ignored signal back to its default when it
 * starts, so until the program's first statement has run, SIGINT, SIGHUP and SIGTERM would end it; being in a
 * session of its own, it gets only the signals sent to it by pid.
 *
 * Each line is kept in a variable of its own (`k0`, `k1`, …; `eval` only names the variable, the line is assigned
 * by expansion and never parsed): appending to one string would copy everything kept so far at every line, and a
 * keeper of thousands of registrations would spend seconds of CPU on that. The lines go out one `printf` each, a
 * builtin of dash, bash and busybox ash; a `/bin/sh` without it (mksh) starts a process per line at the host's death.
 *
 * @internal
 */
export const keeper = [
  "trap '' INT HUP TERM",
  "n=0",
  "while IFS= read -r line; do",
  "  [ \"$line\" = Q ] && exit 0",
  "  eval \"k$n=\\$line\"",
  "  n=$((n + 1))",
  "done",
  "i=0",
  "while [ \"$i\" -lt \"$n\" ]; do",
  "  eval \"printf '%s\\n' \\\"\\$k$i\\\"\"",
  "  i=$((i + 1))",
  "done | exec \"$1\" \"$2\""
].join("\n")

/**
 * How many bytes a keeper is sent, beyond the open connections it started with, before the next registration starts
 * a fresh one (the shell keeps every line, including those of connections long closed); see {@link rotates}.
 *
 * @internal
 */
export const rotateBytes = 64 * 1024

/**
 * Whether a keeper that started with `replayed` bytes (the open connections) and has been sent `sent` in all is
 * replaced at the next registration: past {@link rotateBytes} beyond what it started with, and past as much again
 * (with many connections open, a rotation at each registration would start a shell each time).
 *
 * @internal
 */
export const rotates = (sent: number, replayed: number): boolean => sent - replayed > Math.max(rotateBytes, replayed)

/**
 * Whether the watchdog can run here: its program is there (a bundler may have left it out), and so is `/bin/sh`
 * (a distroless image has none).
 *
 * @internal
 */
export const available: boolean = Fs.existsSync(program) && Fs.existsSync("/bin/sh")

/** @internal */
export interface Watchdog {
  /** A connection about to be spawned, and its cgroup when it is contained in one. */
  readonly register: (marker: string, graceMillis: number, cgroup: string | undefined) => void
  /** The CLI of `marker` was spawned: its pid and its start time (as `ProcessTree` reads it; unknown: undefined). */
  readonly setRoot: (marker: string, pid: number, start: string | undefined) => void
  readonly unregister: (marker: string) => void
  /** A layer's cgroup, to remove once its sessions' are gone (or to forget, when the layer removed it itself). */
  readonly layer: (dir: string, registered: boolean) => void
  /** The pids of its running keepers (a teardown must not kill them, whatever cgroup a tool moved them to). */
  readonly pids: () => ReadonlyArray<number>
  readonly close: () => void
}

/**
 * The variable that hands the watchdog the host's ancestry (`pid:start` pairs, space separated): once the host is
 * dead they are no longer the watchdog's ancestors, and a tool may still have written one of them into its
 * session's `cgroup.procs`; the watchdog must not kill them either.
 *
 * @internal
 */
export const guardedVariable = "TETHER_WATCHDOG_GUARDED"

/**
 * The process's host lease: the runners of this process that hold one (a cluster runner, while its shard locks are
 * fresh), each with the moment its lease ends (`performance.now()` milliseconds), and the watchdogs to tell of a
 * change. The process's lease ends at the earliest of them; with none, there is no lease (only host death).
 *
 * It is shared through a global symbol, `Symbol.for("@tether/host-lease")`, not through an import: the cluster
 * (which renews it) does not depend on this package, nor this package on the cluster, and two copies of either
 * module in one process must share one board. The shape is the contract: `holders` (`Map<object, number>`) and
 * `listeners` (`Set<() => void>`, each called after a change of `holders`).
 *
 * @internal
 */
export interface LeaseBoard {
  readonly holders: Map<object, number>
  readonly listeners: Set<() => void>
}

/** @internal */
export const leaseBoard: LeaseBoard = (() => {
  const key = Symbol.for("@tether/host-lease")
  const global = globalThis as { [key]?: LeaseBoard }
  return global[key] ??= { holders: new Map(), listeners: new Set() }
})()

/**
 * How long until the process's lease runs out, in milliseconds (0 once it has, never negative); undefined: no lease.
 *
 * @internal
 */
export const leaseRemaining = (board: LeaseBoard = leaseBoard, now?: number): number | undefined => {
  if (board.holders.size === 0) return undefined
  // Read only with a lease: the first read of `performance` loads Node's perf_hooks (about 90 KiB of heap, which a
  // host without a lease, i.e. every host but a cluster runner, would pay on its first session).
  return Math.max(0, Math.floor(Math.min(...board.holders.values()) - (now ?? performance.now())))
}

/** The host's ancestry (itself included), as `pid:start` pairs. */
const hostAncestry = (): string =>
  [...ProcessTree.ancestry(process.pid)].flatMap((pid) => {
    const info = ProcessTree.readStat(pid)
    return info === undefined ? [] : [`${pid}:${info.start}`]
  }).join(" ")

/**
 * Starts a keeper whose Node program, if it comes to that, is `main`: `/bin/sh -c keeper` (`leased`: `main` itself,
 * from the start), named {@link title}, in a session of its own (terminal and group-wide signals aimed at the host
 * do not reach it), with a near-empty environment (the host's NODE_OPTIONS, loaders and inspectors, have no business
 * in it), its stdin a pipe from the host. Throws what `spawn` throws.
 *
 * @internal
 */
export const spawnKeeper = (main: string, leased = false): ChildProcess.ChildProcess =>
  leased
    // A leased host's keeper keeps time: the Node program itself, reading the lines as they come.
    ? ChildProcess.spawn(process.execPath, [main], {
      argv0: title,
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      env: { PATH: process.env.PATH ?? "", [guardedVariable]: hostAncestry() },
      windowsHide: true
    })
    : ChildProcess.spawn("/bin/sh", ["-c", keeper, title, process.execPath, main], {
      argv0: title,
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      env: { PATH: process.env.PATH ?? "", [guardedVariable]: hostAncestry() },
      windowsHide: true
    })

/** A running keeper and what it was sent. */
interface Keeper {
  readonly process: ChildProcess.ChildProcess
  /** Started for a leased host: the Node program, told of each renewal. */
  readonly leased: boolean
  /** Bytes sent in all. */
  sent: number
  /** Bytes sent when it started: the open connections, replayed. */
  replayed: number
}

const writeTo = (keeper: Keeper | undefined, text: string, done?: (error?: Error | null) => void): boolean => {
  const stdin = keeper?.process.stdin
  if (stdin === null || stdin === undefined || stdin.destroyed) return false
  stdin.write(text, done)
  keeper!.sent += text.length
  return true
}

/** Whether a keeper runs and everything written to it is in its pipe (none of it still in Node's buffer). */
const holdsAll = (keeper: Keeper): boolean => {
  const stdin = keeper.process.stdin
  return keeper.process.exitCode === null && keeper.process.signalCode === null && stdin !== null &&
    !stdin.destroyed && stdin.writableLength === 0
}

/** How long after a keeper is lost the next is started: 100 ms, doubling up to 5 s while starts keep failing. */
const restartDelay = (failures: number): number => Math.min(5_000, 100 * 2 ** failures)

/** Tells a keeper there is nothing to kill, and lets it go. */
const retire = (keeper: Keeper | undefined) => {
  const stdin = keeper?.process.stdin
  if (stdin !== null && stdin !== undefined && !stdin.destroyed) stdin.end("Q\n")
}

/**
 * A watchdog client. The keeper is started at the first registration; one that is lost (it died, or could not be
 * started) is started again after {@link restartDelay}, with the connections still open. A rotation (see
 * {@link rotates}) starts a fresh keeper with the open connections and keeps telling the old one everything until
 * the fresh one has started and every line written to it is in its pipe (which outlives the host); only then is the
 * old one told `Q`. A fresh keeper that fails first leaves the old one in place. `main` is the program the keeper
 * hands its lines to, and `spawn` starts a keeper (tests record or simulate them instead).
 *
 * With a lease on `board` ({@link leaseBoard}), the keeper is started leased and told `H <remaining>` first and at
 * every change of the lease; a shell keeper running when a lease appears is rotated to a leased one at once. A
 * leased keeper is never rotated for its size (the program keeps only the open connections).
 *
 * @internal
 */
export const make = (
  main: string = program,
  spawn: (main: string, leased: boolean) => ChildProcess.ChildProcess = spawnKeeper,
  board: LeaseBoard = leaseBoard
): Watchdog => {
  const registered = new Map<string, { graceMillis: number; cgroup: string; root: string | undefined }>()
  const layers = new Set<string>()
  let current: Keeper | undefined
  /** The keeper a rotation replaces, until the fresh one holds every line. */
  let retiring: Keeper | undefined
  /** While a rotation is pending: retires the old keeper if the fresh one now holds every line. */
  let check: ((error?: Error | null) => void) | undefined
  let restart: ReturnType<typeof setTimeout> | undefined
  let failures = 0
  let closed = false

  const send = (line: string) => {
    writeTo(current, line + "\n", check)
    writeTo(retiring, line + "\n")
  }

  /** With connections to watch and no keeper: a new one, after {@link restartDelay}. */
  const scheduleRestart = () => {
    if (closed || current !== undefined || restart !== undefined) return
    if (registered.size === 0 && layers.size === 0) return
    restart = setTimeout(() => {
      restart = undefined
      if (current === undefined) start()
    }, restartDelay(failures++))
    restart.unref()
  }

  const lost = (keeper: Keeper) => {
    if (keeper === retiring) retiring = undefined
    if (keeper === current) {
      // A fresh keeper that failed before it held every line: the one it was replacing stays.
      current = retiring
      retiring = undefined
      check = undefined
    }
    scheduleRestart()
  }

  /** Starts a keeper with the open connections, and calls `written` once the write of their lines has ended. */
  const start = (written?: (error?: Error | null) => void): Keeper | undefined => {
    if (closed) return undefined
    const remaining = leaseRemaining(board)
    const leased = remaining !== undefined
    let spawned: ChildProcess.ChildProcess
    try {
      spawned = spawn(main, leased)
    } catch {
      // Not started (no /bin/sh, no memory): the registrations are kept for the next try.
      scheduleRestart()
      return undefined
    }
    const keeper: Keeper = { process: spawned, leased, sent: 0, replayed: 0 }
    spawned.on("error", () => lost(keeper))
    spawned.on("exit", () => lost(keeper))
    spawned.once("spawn", () => {
      failures = 0
    })
    spawned.stdin?.on("error", () => {})
    // The host must be free to exit while the watchdog runs.
    spawned.unref()
    const stdin = spawned.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null
    stdin?.unref?.()
    current = keeper
    // The lease first: one that ran out already ends the connections replayed after it.
    let lines = leased ? `H ${remaining}\n` : ""
    for (const dir of layers) lines += `L ${dir}\n`
    for (const [marker, entry] of registered) {
      lines += `+ ${marker} ${entry.graceMillis} ${entry.cgroup}\n`
      if (entry.root !== undefined) lines += `= ${marker} ${entry.root}\n`
    }
    writeTo(keeper, lines, written)
    keeper.replayed = keeper.sent
    return keeper
  }

  /**
   * Replaces the current keeper (see {@link make}): the old one is retired at the first moment the fresh one has
   * started and holds every line written to it, checked after its start and after each write to it ends.
   */
  const rotate = () => {
    const old = current!
    current = undefined
    retiring = old
    let spawned = false
    let fresh: Keeper | undefined = undefined
    const attempt = (error?: Error | null) => {
      if (error != null || !spawned || fresh === undefined || current !== fresh || retiring !== old) return
      if (!holdsAll(fresh)) return
      retiring = undefined
      check = undefined
      retire(old)
    }
    fresh = start(attempt)
    if (fresh === undefined) {
      current = old
      retiring = undefined
      return
    }
    check = attempt
    fresh.process.once("spawn", () => {
      spawned = true
      attempt()
    })
  }

  /** The lease changed: leased keepers are told; a shell keeper is replaced by a leased one when a lease appears. */
  const onLease = () => {
    if (closed || current === undefined) return
    const remaining = leaseRemaining(board)
    if (remaining !== undefined && !current.leased) {
      if (retiring === undefined) rotate()
      return
    }
    const line = `H ${remaining ?? "-"}\n`
    for (const keeper of [current, retiring]) {
      if (keeper?.leased === true) writeTo(keeper, line, keeper === current ? check : undefined)
    }
  }
  board.listeners.add(onLease)

  return {
    register: (marker, graceMillis, cgroup) => {
      const entry = { graceMillis, cgroup: cgroup === undefined ? "-" : encodeURIComponent(cgroup), root: undefined }
      registered.set(marker, entry)
      // A start sends every open connection, this one included; so does a rotation to the fresh keeper, while the
      // one it replaces is told of this one as of any other, in case it stays.
      if (current === undefined) return void start()
      const rotating = retiring === undefined && !current.leased && rotates(current.sent, current.replayed)
      send(`+ ${marker} ${graceMillis} ${entry.cgroup}`)
      if (rotating) rotate()
    },
    setRoot: (marker, pid, start) => {
      const entry = registered.get(marker)
      if (entry === undefined) return
      entry.root = `${pid} ${start ?? "-"}`
      send(`= ${marker} ${entry.root}`)
    },
    unregister: (marker) => {
      if (registered.delete(marker)) send(`- ${marker}`)
    },
    layer: (dir, register) => {
      const encoded = encodeURIComponent(dir)
      if (register) {
        layers.add(encoded)
        send(`L ${encoded}`)
      } else if (layers.delete(encoded)) {
        send(`l ${encoded}`)
      }
    },
    pids: () => {
      const pids: Array<number> = []
      for (const keeper of [current, retiring]) if (keeper?.process.pid !== undefined) pids.push(keeper.process.pid)
      return pids
    },
    close: () => {
      closed = true
      board.listeners.delete(onLease)
      if (restart !== undefined) clearTimeout(restart)
      restart = undefined
      check = undefined
      // Connections that outlive the layer are still torn down by their own scopes: the watchdog must not kill
      // them when its input ends.
      registered.clear()
      layers.clear()
      retire(current)
      retire(retiring)
      current = undefined
      retiring = undefined
    }
  }
}
