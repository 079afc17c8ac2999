/**
 * The real subprocess transport: spawns the CLI, frames its stdout as NDJSON {@link Transport.Line}s, keeps a
 * bounded tail of its stderr, and tears down its whole process tree when the connection's scope closes.
 *
 * Teardown (the scope's finalizer) ends stdin, sends SIGTERM to every process of the tree, waits `termGrace`, sends
 * SIGKILL to whatever remains, and waits for the CLI to be reaped, bounded by `killGrace`. The tree is read from the
 * process table at teardown (see `Capabilities`): on Linux it includes descendants that left the CLI's process
 * group or session (`setsid`, as Claude Code's Bash tool does) and descendants whose parent already exited, found
 * through a marker variable (`TETHER_SESSION_TOKEN`) injected into the CLI's environment. It also runs when the CLI
 * already exited by itself and left descendants behind. It never waits for zombies.
 *
 * Host death: under `NodeRuntime.runMain`, SIGINT/SIGTERM interrupt the program and the finalizers run the
 * teardown. Under `Effect.runPromise` (or after SIGKILL, a crash, `process.exit`) no finalizer runs: the CLI is
 * spawned in its own session, so without help it keeps running. That help is the watchdog (on by default
 * everywhere but Windows): a small Node process per layer that notices the host's death by the EOF of a pipe and
 * tears down what the host registered. On Linux (with /proc) it kills each connection's whole tree, found as
 * teardown finds it; elsewhere it only signals each CLI's process group, so descendants that left the group
 * (`setsid`) survive. `watchdog: false` turns it off, and then children outlive a host that dies without
 * finalizers.
 *
 * @example
 * ```ts
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Transport } from "@tether/core"
 * import { NodeTransport } from "@tether/transport-node"
 * import { Duration, Effect, Option, Stream } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const transport = yield* Transport.Transport
 *   const connection = yield* transport.open({
 *     program: "claude",
 *     args: ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
 *     cwd: Option.none(),
 *     env: { mode: "inherit", set: {}, unset: ["NODE_OPTIONS"] }
 *   }, { termGrace: Duration.seconds(5) })
 *   yield* connection.write(`{"type":"control_request","request_id":"1","request":{"subtype":"initialize"}}`)
 *   const first = yield* Stream.runHead(connection.stdout)
 * })
 *
 * NodeRuntime.runMain(program.pipe(Effect.scoped, Effect.provide(NodeTransport.layer())))
 * ```
 *
 * @since 0.1.0
 */
import { SpawnFailed, TransportWriteError } from "@tether/core/TetherError"
import type { SpawnError } from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Pull from "effect/Pull"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Readable } from "node:stream"
import * as Executable from "./Executable.ts"
import * as Framing from "./Framing.ts"
import { isWindows } from "./internal/platform.ts"
import * as ProcessTree from "./internal/processTree.ts"
import * as Watchdog from "./internal/watchdog.ts"

/**
 * Options of the Node transport. Every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Explicit executable paths by program (`{ claude: "/opt/claude/bin/claude" }`): authoritative when set. */
  readonly executables?: Readonly<Record<string, string>> | undefined
  /** Lines longer than this are dropped and reported as `Line.TooLong` (default 16 MiB). */
  readonly maxLineBytes?: number | undefined
  /** How much of stderr `stderrTail` keeps (default 8 KiB). */
  readonly stderrTailBytes?: number | undefined
  /**
   * How long teardown waits after SIGKILL for the tree to be gone and the CLI reaped (default 1 second). With `0`,
   * SIGKILL is sent but not waited for: the kernel may still be delivering it when the scope's close returns.
   */
  readonly killGrace?: Duration.Input | undefined
  /**
   * Start the host-death watchdog (default: true everywhere but Windows, where it is unavailable). On Linux it
   * kills each connection's whole tree when the host dies; elsewhere only each CLI's process group.
   */
  readonly watchdog?: boolean | undefined
}

/**
 * The name of the marker variable injected into the CLI's environment. Its value is unique per connection; every
 * descendant inherits it, which is how teardown finds orphans on Linux.
 *
 * @category constants
 * @since 0.1.0
 */
export const markerVariable = "TETHER_SESSION_TOKEN"

/**
 * The default maximum stdout line length (16 MiB).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxLineBytes = Framing.defaultMaxLineBytes

/**
 * The default size of the stderr tail (8 KiB).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultStderrTailBytes = 8 * 1024

/**
 * The default bound teardown waits after SIGKILL (1 second).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultKillGrace: Duration.Duration = Duration.seconds(1)

/**
 * Whether a transport with these options runs the watchdog: asked for (the default), not on Windows, and its
 * program shipped next to this module (a bundle that left `internal/watchdogMain.js` out has none: the capability
 * report then says the CLI does not die with its host).
 */
const watchdogEnabled = (options?: { readonly watchdog?: boolean | undefined }): boolean =>
  !isWindows && (options?.watchdog ?? true) && Watchdog.available

/**
 * What the transport guarantees on this platform, with or without the watchdog.
 *
 * @category capabilities
 * @since 0.1.0
 */
export const capabilitiesFor = (options?: { readonly watchdog?: boolean | undefined }): Transport.Capabilities => {
  const watchdog = watchdogEnabled(options)
  const noWatchdog = "no watchdog: a host killed without running finalizers (SIGKILL, crash, a signal under " +
    "Effect.runPromise) leaves the CLI running; Node has no prctl(PR_SET_PDEATHSIG)"
  const watchdogProcess = "a watchdog process (one per layer, in its own session) sees the host's pipe close"
  const cgroupKill = "a watchdog killed together with the host (e.g. a cgroup kill) cannot act, but then the " +
    "cgroup kill reached the CLI too"
  if (process.platform === "linux") {
    return {
      name: "node/linux",
      killsDetachedDescendants: true,
      killsOrphanedDescendants: true,
      diesWithHost: watchdog,
      notes: [
        "the tree is read from /proc at teardown: descendants by parent link, members of the sessions and process " +
        "groups of every member (alive or dead), and every process whose environment carries the connection's " +
        `${markerVariable} (inherited across setsid and re-parenting)`,
        "not found: a descendant that clears its environment, leaves the session, and whose parent exited before " +
        "teardown (only a cgroup or a PID namespace contains that one)",
        "zombies do not count as alive; teardown is bounded by termGrace + killGrace whatever the children do",
        watchdog
          ? `dies with host: ${watchdogProcess} and kills each connection's tree, found as teardown finds it ` +
            `(with /proc; without it, only each CLI's process group); ${cgroupKill}`
          : noWatchdog
      ]
    }
  }
  if (isWindows) {
    return {
      name: "node/windows",
      killsDetachedDescendants: false,
      killsOrphanedDescendants: false,
      diesWithHost: false,
      notes: [
        "teardown runs taskkill /T on the CLI: it reaches the descendants of a running CLI only, and descendants " +
        "that outlive the CLI are left running (a Job Object would contain them)",
        "no watchdog on Windows"
      ]
    }
  }
  return {
    name: `node/${process.platform}`,
    killsDetachedDescendants: true,
    killsOrphanedDescendants: false,
    diesWithHost: watchdog,
    notes: [
      "the tree is read with ps at teardown: descendants by parent link (found while their parents live) and the " +
      "members of every member's process group; there is no /proc to find orphans by their environment",
      "zombies do not count as alive; teardown is bounded by termGrace + killGrace whatever the children do",
      watchdog
        ? `dies with host, partly: ${watchdogProcess} and signals each CLI's process group only (SIGTERM, then ` +
          "SIGKILL after termGrace): descendants that left the group (setsid, as the Bash tool does) keep running; " +
          cgroupKill
        : noWatchdog
    ]
  }
}

/**
 * What the transport guarantees on this platform with the default options.
 *
 * @category capabilities
 * @since 0.1.0
 */
export const capabilities: Transport.Capabilities = capabilitiesFor()

// ---------------------------------------------------------------------------------------------------------------
// environment
// ---------------------------------------------------------------------------------------------------------------

const reveal = (value: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(value) ? Redacted.value(value) : value

/** The environment a process starts with, with `Redacted` values revealed: built only to spawn. */
const buildEnvironment = (environment: Transport.Environment): Record<string, string> => {
  const env: Record<string, string> = {}
  if (environment.mode === "inherit") {
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  } else {
    for (const key of ["PATH", "HOME"]) {
      const value = process.env[key]
      if (value !== undefined) env[key] = value
    }
  }
  for (const [key, value] of Object.entries(environment.set)) env[key] = reveal(value)
  for (const key of environment.unset) delete env[key]
  return env
}

// Node's own NUL check throws an error that quotes the value: check first, so a Redacted value never reaches an
// error message.
const findNul = (file: string, args: ReadonlyArray<string>, env: Record<string, string>): string | undefined => {
  if (file.includes("\0")) return "the executable path contains a NUL character"
  const index = args.findIndex((arg) => arg.includes("\0"))
  if (index !== -1) return `argument ${index + 1} contains a NUL character`
  for (const [key, value] of Object.entries(env)) {
    if (key.includes("\0") || value.includes("\0")) return `the environment variable ${key} contains a NUL character`
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// process
// ---------------------------------------------------------------------------------------------------------------

const describe = (error: unknown): string => {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === undefined ? error.message : `${code}: ${error.message}`
  }
  return String(error)
}

/**
 * Starts the process. `node:child_process` directly rather than `effect/process`, because the Effect spawner
 * cannot give three guarantees this transport owes: its release kills the process group only (a `setsid`
 * descendant survives) and polls it with `kill(-pgid, 0)`, which counts zombies as alive, so a group of zombies
 * re-parented to a slow PID 1 makes it wait out `forceKillAfter` and then one more second; its exit code reports a
 * signal only inside an error message (no `Signaled` status); and its stdin is a `Sink`, with no per-write
 * completion to carry backpressure and EPIPE back to `write`. So the transport owns the `ChildProcess` and reads
 * its pipes itself (stdout: {@link readLines}).
 */
const spawnProcess = (
  program: string,
  file: string,
  args: ReadonlyArray<string>,
  options: NodeChildProcess.SpawnOptions,
  backend: ProcessTree.Backend | undefined
): Effect.Effect<{ readonly child: NodeChildProcess.ChildProcess; readonly start: string | undefined }, SpawnFailed> =>
  Effect.callback((resume) => {
    let child: NodeChildProcess.ChildProcess
    let start: string | undefined
    try {
      child = NodeChildProcess.spawn(file, args, options)
      // Read before control returns to the event loop, so the child cannot have been reaped and its pid reused.
      if (backend === "proc" && child.pid !== undefined) start = ProcessTree.readStat(child.pid)?.start
    } catch (error) {
      resume(Effect.fail(new SpawnFailed({ program, reason: describe(error) })))
      return
    }
    const onError = (error: Error) => {
      child.off("spawn", onSpawn)
      resume(Effect.fail(new SpawnFailed({ program, reason: describe(error) })))
    }
    const onSpawn = () => {
      child.off("error", onError)
      resume(Effect.succeed({ child, start }))
    }
    child.once("error", onError)
    child.once("spawn", onSpawn)
  })

/** A bounded tail of a byte stream. */
const makeTail = (limit: number) => {
  const chunks: Array<Buffer> = []
  let bytes = 0
  return {
    push: (chunk: Buffer) => {
      // Copy the end of an oversized chunk so that the large buffer is not retained.
      const kept = chunk.length > limit ? Buffer.from(chunk.subarray(chunk.length - limit)) : chunk
      chunks.push(kept)
      bytes += kept.length
      while (chunks.length > 1 && bytes - chunks[0].length >= limit) bytes -= chunks.shift()!.length
    },
    read: (): string => {
      const all = Buffer.concat(chunks, bytes)
      const last = all.length > limit ? all.subarray(all.length - limit) : all
      // The cut may fall inside a character: drop its undecodable remainder.
      return last.toString("utf8").replace(/^\uFFFD+/, "")
    }
  }
}

/**
 * How many bytes of stdout are read ahead of the consumer before the pipe is paused. Past it the CLI blocks on its
 * writes (backpressure); it also bounds how many lines one pull hands over (about one 64 KiB pipe read).
 */
const stdoutHighWaterBytes = 64 * 1024

/**
 * Stdout as a stream of lines, read in flowing mode straight into the splitter: each pipe read becomes the lines it
 * completes, and a pull hands over every line read since the last pull as one chunk, without a copy. When the
 * consumer falls `stdoutHighWaterBytes` behind, the pipe is paused until the next pull (so memory stays bounded by
 * that, Node's own buffer of the paused socket, and the splitter's `maxLineBytes`). A read error ends the stream like
 * EOF: the pipe is gone. The stream has one consumer at a time; a consumer that stops early leaves the pipe open,
 * and the next run continues with the lines not yet handed over.
 */
const readLines = (readable: Readable, splitter: Framing.LineSplitter): Stream.Stream<Transport.Line> => {
  let lines: Array<Transport.Line> = []
  let unread = 0
  let paused = false
  let ended = false
  let wake: ((effect: Effect.Effect<void>) => void) | undefined

  const notify = () => {
    const resume = wake
    if (resume !== undefined) {
      wake = undefined
      resume(Effect.void)
    }
  }
  readable.on("data", (chunk: Buffer) => {
    splitter.push(chunk, lines)
    unread += chunk.length
    if (lines.length > 0) {
      // Only complete lines wait for the consumer: the bytes of a partial line are bounded by the splitter.
      if (unread >= stdoutHighWaterBytes && !paused) {
        paused = true
        readable.pause()
      }
      notify()
    }
  })
  const finish = () => {
    if (ended) return
    ended = true
    splitter.end(lines)
    notify()
  }
  readable.on("end", finish)
  readable.on("close", finish)
  readable.on("error", finish)

  const take = (): Arr.NonEmptyReadonlyArray<Transport.Line> => {
    const out = lines as unknown as Arr.NonEmptyReadonlyArray<Transport.Line>
    lines = []
    unread = 0
    if (paused) {
      paused = false
      readable.resume()
    }
    return out
  }
  const wait = Effect.callback<void>((resume) => {
    if (lines.length > 0 || ended) return resume(Effect.void)
    if (wake !== undefined) {
      return resume(Effect.die(new Error("NodeTransport: stdout was read from two fibers at once")))
    }
    wake = resume
    return Effect.sync(() => {
      if (wake === resume) wake = undefined
    })
  })
  const pull: Pull.Pull<Arr.NonEmptyReadonlyArray<Transport.Line>> = Effect.suspend(() =>
    lines.length > 0 ? Effect.succeed(take()) : ended ? Cause.done() : waitThenPull
  )
  const waitThenPull = Effect.flatMap(wait, () => pull)
  return Stream.fromPull(Effect.succeed(pull))
}

const toExitStatus = (code: number | null, signal: NodeJS.Signals | null): Transport.ExitStatus =>
  code !== null
    ? Transport.ExitStatus.Exited({ code })
    : Transport.ExitStatus.Signaled({ signal: signal ?? "unknown" })

interface Handle {
  readonly child: NodeChildProcess.ChildProcess
  readonly pid: number
  readonly marker: string
  readonly tree: ProcessTree.Tree | undefined
  readonly exited: () => boolean
  readonly connection: Transport.Connection
}

const makeConnection = (
  child: NodeChildProcess.ChildProcess,
  options: { readonly maxLineBytes: number; readonly stderrTailBytes: number }
) => {
  const pid = child.pid!
  const exitDeferred = Deferred.makeUnsafe<Transport.ExitStatus>()
  let status: Transport.ExitStatus | undefined
  const settle = (code: number | null, signal: NodeJS.Signals | null) => {
    if (status !== undefined) return
    status = toExitStatus(code, signal)
    Deferred.doneUnsafe(exitDeferred, Exit.succeed(status))
  }
  child.on("exit", settle)
  // A CLI that exited before this listener was attached (the fiber may yield between the spawn and here) has
  // already emitted `exit`: read its status from the handle.
  if (child.exitCode !== null || child.signalCode !== null) settle(child.exitCode, child.signalCode)
  // Errors after the spawn (a failed kill, for instance) must not crash the host.
  child.on("error", () => {})

  const stdin = child.stdin!
  let inputEnded = false
  let inputError: string | undefined
  stdin.on("error", (error) => {
    inputError ??= describe(error)
  })
  const write = (line: string): Effect.Effect<void, TransportWriteError> =>
    Effect.callback<void, TransportWriteError>((resume) => {
      if (inputEnded || stdin.destroyed || !stdin.writable) {
        resume(Effect.fail(new TransportWriteError({ reason: inputError ?? "stdin is closed" })))
        return
      }
      // Completes when the kernel took the bytes: a CLI that does not read keeps the write pending, which is what
      // gives a delivery timeout its meaning.
      let settled = false
      stdin.write(line + "\n", (error) => {
        if (settled) return
        settled = true
        resume(
          error === null || error === undefined
            ? Effect.void
            : Effect.fail(new TransportWriteError({ reason: inputError ?? describe(error) }))
        )
      })
      // Usually the pipe takes the line at once: nothing is left in the stream's buffer and nothing failed. Then the
      // bytes are in the kernel already, and the write completes now rather than on the next tick.
      if (!settled && stdin.writableLength === 0 && stdin.errored === null) {
        settled = true
        resume(Effect.void)
      }
    })
  const endInput = Effect.sync(() => {
    if (inputEnded) return
    inputEnded = true
    stdin.end()
  })

  const tail = makeTail(options.stderrTailBytes)
  child.stderr!.on("data", tail.push)
  child.stderr!.on("error", () => {})

  const stdout = readLines(child.stdout!, Framing.makeSplitter({ maxLineBytes: options.maxLineBytes }))

  const connection: Transport.Connection = {
    pid: Option.some(pid),
    write,
    endInput,
    stdout,
    stderrTail: Effect.sync(tail.read),
    exit: Deferred.await(exitDeferred),
    exitStatus: Effect.sync(() => Option.fromUndefinedOr(status))
  }
  return { connection, exited: () => status !== undefined }
}

// ---------------------------------------------------------------------------------------------------------------
// teardown
// ---------------------------------------------------------------------------------------------------------------

/** What a teardown did, for the logs. */
interface TeardownReport {
  readonly millis: number
  /** Processes that received SIGTERM (the CLI included). */
  readonly terminated: number
  /** Processes that were still alive at the end of `termGrace` and received SIGKILL. */
  readonly killed: number
  /** Processes still alive when the bound ran out (unkillable, e.g. stuck in the kernel). */
  readonly survivors: ReadonlyArray<number>
}

const firstPolls = 10
const fastPollMillis = 5
const slowPollMillis = 20

/**
 * Runs on native timers, not the `Clock`: teardown is real time even when a host runs on a `TestClock`.
 */
const teardown = (handle: Handle, termGraceMillis: number, killGraceMillis: number) =>
  Effect.callback<TeardownReport>((resume) => {
    const started = Date.now()
    const termDeadline = started + termGraceMillis
    const hardDeadline = termDeadline + killGraceMillis
    const { child, tree } = handle
    const terminated = new Set<string>()
    const killed = new Set<string>()
    let polls = 0
    let timer: ReturnType<typeof setTimeout> | undefined

    const finish = (survivors: ReadonlyArray<number>) => {
      clearTimeout(timer)
      child.off("exit", wake)
      // Always release the pipes: a reader that stopped while stdout was paused would otherwise never see its
      // end (leaking the descriptor and its buffered lines), and a descendant that could not be found would keep
      // stderr, and with it the host's event loop, alive.
      child.stdin?.destroy()
      child.stdout?.destroy()
      child.stderr?.destroy()
      resume(
        Effect.succeed({ millis: Date.now() - started, terminated: terminated.size, killed: killed.size, survivors })
      )
    }

    const rootOnly = (): ReadonlyArray<ProcessTree.ProcessInfo> =>
      handle.exited() ? [] : [{ pid: handle.pid, ppid: 0, pgid: handle.pid, sid: -1, zombie: false, start: "" }]

    const alive = (): ReadonlyArray<ProcessTree.ProcessInfo> => {
      if (tree === undefined) return rootOnly()
      try {
        return tree.scan()
      } catch {
        // The process table could not be read (no /proc, no ps): the CLI itself is all that is known.
        return rootOnly()
      }
    }

    const signal = (processes: ReadonlyArray<ProcessTree.ProcessInfo>, sig: NodeJS.Signals, sent: Set<string>) => {
      // SIGTERM once per process; SIGKILL again at every poll (a process may have forked in between).
      const fresh = sig === "SIGKILL" && tree !== undefined
        ? processes
        : processes.filter((info) => !sent.has(`${info.pid}:${info.start}`))
      for (const info of fresh) sent.add(`${info.pid}:${info.start}`)
      if (tree !== undefined) ProcessTree.signalAll(fresh, sig)
      else if (fresh.length > 0) windowsKill(handle.pid, sig === "SIGKILL")
    }

    const step = () => {
      clearTimeout(timer)
      const now = Date.now()
      const processes = alive()
      if (processes.length === 0) {
        // Everything is gone; wait for Node to reap the CLI so that `exit` is settled when the scope closes.
        if (handle.exited() || now >= hardDeadline) return finish([])
      } else if (now < termDeadline) {
        signal(processes, "SIGTERM", terminated)
      } else if (now < hardDeadline) {
        signal(processes, "SIGKILL", killed)
      } else {
        // Past the hard deadline (a stalled event loop may have skipped the SIGKILL window entirely): one last
        // SIGKILL, then give up waiting.
        signal(processes, "SIGKILL", killed)
        return finish(processes.map((info) => info.pid))
      }
      polls++
      const delay = polls < firstPolls ? fastPollMillis : slowPollMillis
      // Never sleep past the moment SIGKILL is due.
      const untilKill = termDeadline - now
      timer = setTimeout(step, untilKill > 0 ? Math.min(delay, untilKill) : delay)
    }
    const wake = () => step()

    if (child.stdin !== null && !child.stdin.writableEnded && !child.stdin.destroyed) child.stdin.end()
    child.on("exit", wake)
    step()
    return Effect.sync(() => {
      clearTimeout(timer)
      child.off("exit", wake)
    })
  })

const windowsKill = (pid: number, force: boolean) => {
  const args = ["/pid", String(pid), "/T"]
  if (force) args.push("/F")
  NodeChildProcess.execFile("taskkill", args, { windowsHide: true }, () => {})
}

// ---------------------------------------------------------------------------------------------------------------
// service
// ---------------------------------------------------------------------------------------------------------------

/**
 * Builds the transport service. The watchdog (when enabled) is started at the first `open` and stopped when the
 * enclosing scope closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const maxLineBytes = options?.maxLineBytes ?? defaultMaxLineBytes
  const stderrTailBytes = options?.stderrTailBytes ?? defaultStderrTailBytes
  const killGraceMillis = Duration.toMillis(options?.killGrace ?? defaultKillGrace)
  const useWatchdog = watchdogEnabled(options)
  const backend = ProcessTree.defaultBackend()
  const watchdog = useWatchdog ? Watchdog.make() : undefined
  if (watchdog !== undefined) yield* Effect.addFinalizer(() => Effect.sync(watchdog.close))

  const acquire = (
    program: string,
    file: string,
    spec: Transport.LaunchSpec,
    cwd: string | undefined,
    termGraceMillis: number
  ): Effect.Effect<Handle, SpawnFailed> =>
    Effect.gen(function*() {
      const token = randomUUID()
      const marker = `${markerVariable}=${token}`
      const env = buildEnvironment(spec.env)
      env[markerVariable] = token
      const nul = findNul(file, spec.args, env)
      if (nul !== undefined) return yield* new SpawnFailed({ program, reason: nul })
      // Registered before the spawn: there is no moment where the CLI runs and the watchdog does not know it.
      watchdog?.register(marker, termGraceMillis)
      const { child, start } = yield* spawnProcess(program, file, spec.args, {
        cwd,
        env,
        stdio: ["pipe", "pipe", "pipe"],
        // Its own session and process group (setsid): terminal signals aimed at the host do not reach it, and its
        // session id names the tree.
        detached: !isWindows,
        windowsHide: true
      }, backend).pipe(Effect.tapError(() => Effect.sync(() => watchdog?.unregister(marker))))
      const pid = child.pid!
      watchdog?.setRoot(marker, pid, start)
      const { connection, exited } = makeConnection(child, { maxLineBytes, stderrTailBytes })
      const tree = backend === undefined
        ? undefined
        : ProcessTree.make({ backend, rootPid: pid, rootStart: start, rootReaped: exited, marker })
      return { child, pid, marker, tree, exited, connection }
    })

  const release = (handle: Handle, termGraceMillis: number) =>
    teardown(handle, termGraceMillis, killGraceMillis).pipe(
      Effect.tap((report) =>
        report.survivors.length > 0
          ? Effect.logWarning("teardown left processes alive past its bound", report)
          : Effect.logDebug("teardown", report)
      ),
      Effect.ensuring(Effect.sync(() => watchdog?.unregister(handle.marker))),
      Effect.annotateLogs({ pid: handle.pid }),
      Effect.withSpan("NodeTransport.teardown", { attributes: { pid: handle.pid } })
    )

  const open = Effect.fn("NodeTransport.open")(function*(
    spec: Transport.LaunchSpec,
    teardownOptions: Transport.TeardownOptions
  ): Effect.fn.Return<Transport.Connection, SpawnError, Scope.Scope> {
    const file = yield* Executable.resolve({ program: spec.program, path: options?.executables?.[spec.program] })
    const cwd = Option.getOrUndefined(spec.cwd)
    if (cwd !== undefined && !isDirectory(cwd)) {
      return yield* new SpawnFailed({ program: spec.program, reason: `cwd ${cwd} is not a directory` })
    }
    const termGraceMillis = Duration.toMillis(teardownOptions.termGrace)
    const handle = yield* Effect.acquireRelease(
      acquire(spec.program, file, spec, cwd === undefined ? undefined : Path.resolve(cwd), termGraceMillis),
      (handle) => release(handle, termGraceMillis)
    )
    return handle.connection
  })

  return Transport.Transport.of({ open, capabilities: capabilitiesFor({ watchdog: useWatchdog }) })
})

const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

/**
 * The Node transport as a layer.
 *
 * @example
 * ```ts
 * import { NodeTransport } from "@tether/transport-node"
 *
 * const TransportLive = NodeTransport.layer({ executables: { claude: "/usr/local/bin/claude" } })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Transport.Transport> =>
  Layer.effect(Transport.Transport, make(options))

/**
 * The Node transport as a layer whose options are read from `Config`.
 *
 * @example
 * ```ts
 * import { NodeTransport } from "@tether/transport-node"
 * import { Config } from "effect"
 *
 * const TransportLive = NodeTransport.layerConfig({
 *   executables: { claude: Config.String("CLAUDE_BIN") },
 *   killGrace: Config.Duration("TETHER_KILL_GRACE").pipe(Config.withDefault("1 second"))
 * })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (options: Config.Wrap<Options>): Layer.Layer<Transport.Transport, Config.ConfigError> =>
  Layer.effect(Transport.Transport, Effect.flatMap(Config.unwrap(options), make))
