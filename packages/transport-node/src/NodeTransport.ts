/**
 * The real subprocess transport: spawns the CLI, frames its stdout as NDJSON {@link Transport.Line}s, keeps a
 * bounded tail of its stderr, and tears down everything the CLI started when the connection's scope closes.
 *
 * Containment (option `containment`, reported by `transport.capabilities`): on Linux each session gets a cgroup v2
 * of its own where the host can create one (root, or a delegated subtree): the CLI is placed in it before it can
 * fork, and teardown ends the cgroup, so nothing the CLI started can escape, however it detached. Where no cgroup
 * can be created, `auto` falls back to the process tree read from /proc (parent links, the sessions and groups of
 * every member seen during the session, a marker variable in the environment): best effort, see `Capabilities`.
 * A PID namespace per session is the third mechanism, on request (`containment: "pid-namespace"`).
 *
 * Teardown (the scope's finalizer) ends stdin, sends SIGTERM to every process of the container, waits `termGrace`,
 * kills whatever remains (`cgroup.kill`, SIGKILL), waits for the CLI to be reaped, bounded by `killGrace`, and
 * looks again: processes still alive are named in a warning and counted in the `tether_teardown_survivors`
 * metric. It also runs when the CLI already exited by itself and left descendants behind. It never waits for
 * zombies.
 *
 * Secrets: every `Redacted` value of the launch spec (environment values, secret pipes), and every such value of
 * the other connections open in the process (a tool can read another session's key), is scrubbed from the
 * stderr tail, from stdout lines and from the transport's own messages before they leave the transport.
 *
 * Host death: under `NodeRuntime.runMain`, SIGINT/SIGTERM interrupt the program and the finalizers run the
 * teardown. Under `Effect.runPromise` (or after SIGKILL, a crash, `process.exit`) no finalizer runs: the CLI is
 * spawned in its own session, so without help it keeps running. That help is the watchdog (on by default
 * everywhere but Windows): a process per layer, started with its first session, that notices the host's death by
 * the EOF of a pipe and tears down what the host registered, through each session's cgroup, or its tree as teardown
 * finds it (with /proc; elsewhere only each CLI's process group). While the host lives it is a `/bin/sh` that keeps
 * the registrations (a shell's start and memory); it starts Node to do the teardown only when the host has died.
 * `watchdog: false` turns it off, and then children outlive a host that dies without finalizers. The watchdog runs
 * as the host's user, as the session's tools do, so a tool can kill it: `capabilities.diesWithHost` is true only
 * where the kernel itself ends the session with its host (the `pid-namespace` containment's launcher under
 * `setpriv --pdeathsig`).
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
import type * as Config from "effect/Config"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Pull from "effect/Pull"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Readable, Writable } from "node:stream"
import * as Executable from "./Executable.ts"
import * as Framing from "./Framing.ts"
import * as Cgroup from "./internal/cgroup.ts"
import * as Containment from "./internal/containment.ts"
import { isWindows } from "./internal/platform.ts"
import * as ProcessTree from "./internal/processTree.ts"
import * as Runnable from "./internal/runnable.ts"
import * as Secrets from "./internal/secrets.ts"
import * as Teardown from "./internal/teardown.ts"
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
   * How long teardown waits after the kill for the tree to be gone and the CLI reaped (default 1 second). With `0`,
   * the kill is sent but not waited for: the kernel may still be delivering it when the scope's close returns (and
   * the processes it had not finished are reported as survivors).
   */
  readonly killGrace?: Duration.Input | undefined
  /**
   * Start the host-death watchdog (default: true everywhere but Windows, where it is unavailable). It ends each
   * connection's cgroup, or its tree as teardown finds it (Linux), or only each CLI's process group (elsewhere).
   * Gotcha: it runs as the host's user, as the sessions' tools do, and a tool can kill it; `capabilities.diesWithHost`
   * counts only what a tool cannot undo (see `containment: "pid-namespace"`).
   */
  readonly watchdog?: boolean | undefined
  /**
   * What contains each session's processes (see `Transport.Containment`); the choice is reported by
   * `transport.capabilities.containment`.
   *
   * - `auto` (default): a cgroup where the host can create one (Linux, root or a delegated cgroup v2 subtree),
   *   else the process tree.
   * - `cgroup`: a cgroup or nothing: where none can be created, every `open` fails with `SpawnFailed`.
   * - `pid-namespace`: each CLI runs as the first process of a PID namespace of its own (Linux, through
   *   `unshare`; without root, inside a user namespace mapped to the host's uid), started through
   *   `setpriv --pdeathsig KILL` where there is one, so that the kernel ends the namespace when the host dies
   *   (`capabilities.diesWithHost`, whatever the tools do). Gotchas: `connection.pid` is the
   *   launcher's (`unshare`), not the CLI's; inside a user namespace the CLI sees files of other users as owned by
   *   `nobody`, and cannot `sudo`. Where it cannot work, every `open` fails with `SpawnFailed`.
   * - `process-tree`: the tree read from the process table (what the other mechanisms do not need).
   */
  readonly containment?: Containment.Requested | undefined
  /**
   * Under the `process-tree` containment, how often the process table is read during a session (default 1
   * second; one read serves every session of the layer): the session leaders and groups it sees are remembered
   * until teardown, so a descendant whose parent exited between two scans is still found, as long as a scan saw
   * that parent. `0` reads the table only at teardown.
   */
  readonly scanInterval?: Duration.Input | undefined
}

/**
 * The name of the marker variable injected into the CLI's environment. Its value is unique per connection; every
 * descendant that keeps its environment inherits it, which is one of the ways the `process-tree` containment
 * finds orphans on Linux.
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
 * The default bound teardown waits after the kill (1 second).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultKillGrace: Duration.Duration = Duration.seconds(1)

/**
 * The default interval of the `process-tree` containment's scans during a session (1 second).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultScanInterval: Duration.Duration = Duration.seconds(1)

/**
 * The metric teardown adds its survivors to: processes still alive after the kill, with the attribute
 * `containment` (the mechanism they escaped or resisted). It stays at 0 while every teardown is complete.
 *
 * @category metrics
 * @since 0.1.0
 */
export const survivorsMetric: Metric.Counter<number> = Metric.counter("tether_teardown_survivors", {
  description: "Processes of a Tether session still alive after its teardown's kill",
  incremental: true
})

/**
 * Whether a transport with these options runs the watchdog: asked for (the default), not on Windows, `/bin/sh` there,
 * and its program shipped next to this module (a bundle that left `internal/watchdogMain.js` out has none: the
 * capability report then says the CLI does not die with its host).
 */
const watchdogEnabled = (options?: { readonly watchdog?: boolean | undefined }): boolean =>
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

// ---------------------------------------------------------------------------------------------------------------
// environment
// ---------------------------------------------------------------------------------------------------------------

const reveal = (value: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(value) ? Redacted.value(value) : value

/** The environment a process starts with, with `Redacted` values revealed: built only to spawn. */
const buildEnvironment = (environment: Transport.Environment): Record<string, string> => {
  const env: Record<string, string> = {}
  if (environment.mode === "inherit") {
    const passed = new Set(environment.inheritCredentials ?? [])
    for (const [key, value] of Object.entries(process.env)) {
      // A credential of the host's own reaches the CLI, and every tool it runs, only when the host named it.
      if (value !== undefined && (!Transport.isCredentialVariable(key) || passed.has(key))) env[key] = value
    }
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

/**
 * The secrets of a launch spec, by the name they are reported under: its `Redacted` values, and the values of its
 * credential variables however they came (a plain string in `set`, which the typed options refuse but a spec built
 * by hand may hold; the host's own, inherited by name).
 */
const secretsOf = (spec: Transport.LaunchSpec): ReadonlyArray<Secrets.Secret> => {
  const secrets: Array<Secrets.Secret> = []
  for (const [name, value] of Object.entries(spec.env.set)) {
    if (Redacted.isRedacted(value)) secrets.push({ name, value: Redacted.value(value) })
    else if (Transport.isCredentialVariable(name)) secrets.push({ name, value })
  }
  if (spec.env.mode === "inherit") {
    for (const name of spec.env.inheritCredentials ?? []) {
      const value = process.env[name]
      if (value !== undefined && !Object.hasOwn(spec.env.set, name)) secrets.push({ name, value })
    }
  }
  for (const pipe of spec.secretPipes ?? []) secrets.push({ name: pipe.variable, value: Redacted.value(pipe.value) })
  return secrets
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
 * its pipes itself (stdout: {@link readLines}). `placed` runs right after the spawn, before control returns to the
 * event loop (so before the child can have been reaped): it reads the start time, and puts the launcher in its
 * cgroup; when it throws, the child is killed and the spawn fails with its message.
 */
const spawnProcess = <A>(
  program: string,
  file: string,
  args: ReadonlyArray<string>,
  options: NodeChildProcess.SpawnOptions,
  placed: (child: NodeChildProcess.ChildProcess) => A,
  scrub: Secrets.Scrub
): Effect.Effect<{ readonly child: NodeChildProcess.ChildProcess; readonly placed: A }, SpawnFailed> =>
  Effect.callback((resume) => {
    let child: NodeChildProcess.ChildProcess
    let result: A | undefined
    try {
      child = NodeChildProcess.spawn(file, args, options)
    } catch (error) {
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
      return
    }
    try {
      if (child.pid !== undefined) result = placed(child)
    } catch (error) {
      child.kill("SIGKILL")
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
      return
    }
    const onError = (error: Error) => {
      child.off("spawn", onSpawn)
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
    }
    const onSpawn = () => {
      child.off("error", onError)
      resume(Effect.succeed({ child, placed: result as A }))
    }
    child.once("error", onError)
    child.once("spawn", onSpawn)
  })

/** A bounded tail of a byte stream. */
const makeTail = (limit: number) => {
  const chunks: Array<Buffer> = []
  let bytes = 0
  let cut = false
  return {
    push: (chunk: Buffer) => {
      // Copy the end of an oversized chunk so that the large buffer is not retained.
      if (chunk.length > limit) cut = true
      const kept = chunk.length > limit ? Buffer.from(chunk.subarray(chunk.length - limit)) : chunk
      chunks.push(kept)
      bytes += kept.length
      while (chunks.length > 1 && bytes - chunks[0].length >= limit) {
        bytes -= chunks.shift()!.length
        cut = true
      }
    },
    /** The tail, and whether it starts mid-stream (bytes before it were dropped). */
    read: (): { readonly text: string; readonly cut: boolean } => {
      const all = Buffer.concat(chunks, bytes)
      const last = all.length > limit ? all.subarray(all.length - limit) : all
      // The cut may fall inside a character: drop its undecodable remainder.
      return { text: last.toString("utf8").replace(/^\uFFFD+/, ""), cut: cut || all.length > limit }
    }
  }
}

/**
 * How many bytes of stdout are read ahead of the consumer before the pipe is paused. Past it the CLI blocks on its
 * writes (backpressure); it also bounds how many lines one pull hands over (about one 64 KiB pipe read).
 */
const stdoutHighWaterBytes = 64 * 1024

/**
 * How long the end of stdout waits for the CLI's exit and the end of its stderr. A CLI closes stdout when it exits,
 * but Node reports the exit and the last stderr bytes separately: a reader that sees stdout end and asks why must
 * find the exit status and the whole stderr (a descendant holding stderr open would hold it forever: bounded).
 */
const endSettleMillis = 250

/**
 * Stdout as a stream of lines, read in flowing mode straight into the splitter: each pipe read becomes the lines it
 * completes, and a pull hands over every line read since the last pull as one chunk, without a copy. When the
 * consumer falls `stdoutHighWaterBytes` behind, the pipe is paused until the next pull (so memory stays bounded by
 * that, Node's own buffer of the paused socket, and the splitter's `maxLineBytes`). A read error ends the stream like
 * EOF: the pipe is gone. The stream has one consumer at a time; a consumer that stops early leaves the pipe open,
 * and the next run continues with the lines not yet handed over. Lines are scrubbed of secrets as they are handed
 * over; the end is handed over once `settled` says the process's exit and stderr are in.
 */
const readLines = (
  readable: Readable,
  splitter: Framing.LineSplitter,
  scrub: Secrets.ConnectionScrub,
  settled: (then: () => void) => void
): Stream.Stream<Transport.Line> => {
  let lines: Array<Transport.Line> = []
  let unread = 0
  let paused = false
  let ended = false
  let eof = false
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
    if (eof) return
    eof = true
    splitter.end(lines)
    if (lines.length > 0) notify()
    settled(() => {
      ended = true
      notify()
    })
  }
  readable.on("end", finish)
  readable.on("close", finish)
  readable.on("error", finish)

  const clean = (line: Transport.Line): Transport.Line => {
    if (line._tag === "Text") {
      const text = scrub(line.text)
      return text === line.text ? line : Transport.Line.Text({ text })
    }
    const prefix = scrub(line.prefix, { end: true })
    return prefix === line.prefix ? line : Transport.Line.TooLong({ ...line, prefix })
  }
  const take = (): Arr.NonEmptyReadonlyArray<Transport.Line> => {
    const out = (scrub.idle() ? lines : lines.map(clean)) as unknown as Arr.NonEmptyReadonlyArray<
      Transport.Line
    >
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
  readonly container: Teardown.Container
  readonly exited: () => boolean
  readonly connection: Transport.Connection
  readonly scrub: Secrets.ConnectionScrub
  /** Takes the connection's secrets out of the set every connection is scrubbed of. */
  readonly unregisterSecrets: () => void
  /** Stops the periodic scans of this connection's tree (process-tree containment). */
  readonly unwatch: () => void
}

const makeConnection = (
  child: NodeChildProcess.ChildProcess,
  options: {
    readonly maxLineBytes: number
    readonly stderrTailBytes: number
    readonly scrub: Secrets.ConnectionScrub
  }
) => {
  const pid = child.pid!
  const exitDeferred = Deferred.makeUnsafe<Transport.ExitStatus>()
  let status: Transport.ExitStatus | undefined
  let stderrEnded = false
  const waiting: Array<() => void> = []
  const check = () => {
    if (status === undefined || !stderrEnded) return
    for (const then of waiting.splice(0)) then()
  }
  const settled = (then: () => void) => {
    if (status !== undefined && stderrEnded) return then()
    waiting.push(then)
    const timer = setTimeout(() => {
      const at = waiting.indexOf(then)
      if (at !== -1) {
        waiting.splice(at, 1)
        then()
      }
    }, endSettleMillis)
    timer.unref()
  }
  const settle = (code: number | null, signal: NodeJS.Signals | null) => {
    if (status !== undefined) return
    status = toExitStatus(code, signal)
    Deferred.doneUnsafe(exitDeferred, Exit.succeed(status))
    check()
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
  // A write fails because the CLI closed its stdin, which it almost always does by exiting: the failure is handed
  // over once the exit status and the stderr are in (bounded), so that whoever asks why finds them, and its reason
  // names the exit status: a CLI that died at start says how, whichever of the two reaches the session first.
  const failWrite = (done: (error: TransportWriteError) => void, reason: string) =>
    settled(() =>
      done(
        new TransportWriteError({
          reason: status === undefined ? reason : `${reason} (the CLI exited: ${Transport.formatExitStatus(status)})`
        })
      )
    )
  const write = Transport.writeFromCallback((line, done) => {
    if (inputEnded) return done(new TransportWriteError({ reason: "stdin is closed" }))
    if (stdin.destroyed || !stdin.writable) return failWrite(done, inputError ?? "stdin is closed")
    // Completes when the kernel took the bytes: a CLI that does not read keeps the write pending, which is what
    // gives a delivery timeout its meaning.
    let settled = false
    stdin.write(line + "\n", (error) => {
      if (settled) return
      settled = true
      if (error === null || error === undefined) done(undefined)
      else failWrite(done, inputError ?? describe(error))
    })
    // Usually the pipe takes the line at once: nothing is left in the stream's buffer and nothing failed. Then the
    // bytes are in the kernel already, and the write completes now rather than on the next tick.
    if (!settled && stdin.writableLength === 0 && stdin.errored === null) {
      settled = true
      done(undefined)
    }
  })
  const endInput = Effect.sync(() => {
    if (inputEnded) return
    inputEnded = true
    stdin.end()
  })

  const tail = makeTail(options.stderrTailBytes)
  const stderr = child.stderr!
  stderr.on("data", tail.push)
  stderr.on("error", () => {})
  const stderrDone = () => {
    stderrEnded = true
    check()
  }
  stderr.on("end", stderrDone)
  stderr.on("close", stderrDone)
  const stderrTail = Effect.sync(() => {
    const { cut, text } = tail.read()
    return options.scrub(text, { start: cut })
  })

  const stdout = readLines(
    child.stdout!,
    Framing.makeSplitter({ maxLineBytes: options.maxLineBytes }),
    options.scrub,
    settled
  )

  const connection: Transport.Connection = {
    pid: Option.some(pid),
    write,
    endInput,
    stdout,
    stderrTail,
    exit: Deferred.await(exitDeferred),
    exitStatus: Effect.sync(() => Option.fromUndefinedOr(status))
  }
  return { connection, exited: () => status !== undefined }
}

// ---------------------------------------------------------------------------------------------------------------
// launch plans: how each containment starts a CLI
// ---------------------------------------------------------------------------------------------------------------

interface Plan {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Descriptors before the secret pipes: 3 (stdin, stdout, stderr), or 4 with the launcher's go pipe. */
  readonly firstSecretFd: number
}

const planFor = (
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
const handOver = (stream: unknown, value: string) => {
  const writable = stream as Writable & { destroy: () => void }
  writable.on("error", () => {})
  writable.end(value + "\n", () => writable.destroy())
}

// ---------------------------------------------------------------------------------------------------------------
// service
// ---------------------------------------------------------------------------------------------------------------

/**
 * Builds the transport service. The containment is decided here (a cgroup layer is created, or the PID namespace
 * probed); the watchdog (when enabled) is started at the first `open`; both are released when the enclosing scope
 * closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const maxLineBytes = options?.maxLineBytes ?? defaultMaxLineBytes
  const stderrTailBytes = options?.stderrTailBytes ?? defaultStderrTailBytes
  const killGraceMillis = Duration.toMillis(options?.killGrace ?? defaultKillGrace)
  const scanMillis = Duration.toMillis(options?.scanInterval ?? defaultScanInterval)
  const useWatchdog = watchdogEnabled(options)
  const resolved = Containment.resolve(options?.containment ?? "auto")
  const backend = resolved._tag === "Cgroup" || resolved._tag === "PidNamespace"
    ? "proc" as const
    : resolved._tag === "ProcessTree"
    ? resolved.backend
    : undefined
  const watchdog = useWatchdog ? Watchdog.make() : undefined

  // The layer's cgroup is removed when the layer is released and its last session is gone, whichever is last.
  let open = 0
  let released = false
  const cgroupLayer = resolved._tag === "Cgroup" ? resolved.layer : undefined
  const removeLayer = () => {
    if (cgroupLayer !== undefined && released && open === 0 && Cgroup.removeDir(cgroupLayer.path)) {
      watchdog?.layer(cgroupLayer.path, false)
    }
  }
  if (cgroupLayer !== undefined) watchdog?.layer(cgroupLayer.path, true)
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      released = true
      removeLayer()
      watchdog?.close()
    })
  )

  // What teardown never signals, whatever a tool wrote into its session's cgroup.procs: the host, its ancestors,
  // PID 1, the watchdog's keepers. Read at each look: a parent may exit, a keeper may be replaced meanwhile.
  const guarded = (): ReadonlySet<number> => {
    const pids = new Set(ProcessTree.ancestry(process.pid))
    for (const pid of watchdog?.pids() ?? []) pids.add(pid)
    return pids
  }

  // Periodic scans of the process-tree containment: one table read for every open tree of the layer.
  const watched = new Set<ProcessTree.Tree>()
  let scanner: ReturnType<typeof setInterval> | undefined
  const watch = (tree: ProcessTree.Tree): () => void => {
    if (scanMillis <= 0 || backend !== "proc") return () => {}
    watched.add(tree)
    if (scanner === undefined) {
      scanner = setInterval(() => {
        try {
          const table = ProcessTree.readTable("proc")
          for (const each of watched) each.scan(table)
        } catch {
          // An unreadable table this time: teardown reads it again.
        }
      }, scanMillis)
      scanner.unref()
    }
    return () => {
      watched.delete(tree)
      if (watched.size === 0 && scanner !== undefined) {
        clearInterval(scanner)
        scanner = undefined
      }
    }
  }

  const acquire = (
    program: string,
    file: string,
    spec: Transport.LaunchSpec,
    cwd: string | undefined,
    termGraceMillis: number
  ): Effect.Effect<Handle, SpawnFailed> =>
    Effect.gen(function*() {
      if (resolved._tag === "Unavailable") {
        return yield* new SpawnFailed({
          program,
          reason: `${resolved.requested} containment was requested and is unavailable: ${resolved.reason}`
        })
      }
      const secrets = secretsOf(spec)
      // Scrubbed of every open connection's secrets too: a tool that reads another session's key hands it on to
      // this session's host otherwise.
      const scrub = Secrets.forConnection(Secrets.make(secrets))
      const token = randomUUID()
      const marker = `${markerVariable}=${token}`
      const env = buildEnvironment(spec.env)
      env[markerVariable] = token
      const plan = planFor(resolved, file, spec.args)
      const secretPipes = spec.secretPipes ?? []
      if (secretPipes.length > 0 && isWindows) {
        return yield* new SpawnFailed({ program, reason: "secret pipes are not supported on Windows" })
      }
      secretPipes.forEach((pipe, i) => {
        env[pipe.variable] = String(plan.firstSecretFd + i)
      })
      if (resolved._tag === "Cgroup") {
        const absent = Cgroup.shellVariables.filter((name) => env[name] === undefined)
        if (absent.length > 0) env.TETHER_LAUNCHER_UNSET = absent.join(" ")
      }
      const nul = findNul(file, spec.args, env)
      if (nul !== undefined) return yield* new SpawnFailed({ program, reason: nul })
      const unrunnable = Runnable.check(file, env.PATH)
      if (unrunnable !== undefined) return yield* new SpawnFailed({ program, reason: scrub(unrunnable) })

      const session = cgroupLayer?.session()
      const stdio: Array<"pipe" | "ignore"> = ["pipe", "pipe", "pipe"]
      if (plan.firstSecretFd === 4) stdio.push("pipe")
      for (let i = 0; i < secretPipes.length; i++) stdio.push("pipe")
      // Registered before the spawn: there is no moment where the CLI runs and the watchdog does not know it.
      watchdog?.register(marker, termGraceMillis, session?.path)
      const unregisterSecrets = Secrets.register(secrets)
      const unregister = Effect.sync(() => {
        watchdog?.unregister(marker)
        session?.remove()
        unregisterSecrets()
      })
      open++
      const { child, placed: start } = yield* spawnProcess(program, plan.file, plan.args, {
        cwd,
        env,
        stdio,
        // Its own session and process group (setsid): terminal signals aimed at the host do not reach it, and its
        // session id names the tree.
        detached: !isWindows,
        windowsHide: true
      }, (child) => {
        // Before control returns to the event loop, so the child cannot have been reaped and its pid reused.
        const start = backend === "proc" ? ProcessTree.readStat(child.pid!)?.start : undefined
        if (session !== undefined) {
          try {
            session.place(child.pid!)
          } catch (error) {
            throw new Error(`could not place the CLI in its cgroup ${session.path}: ${describe(error)}`)
          }
          // Placed: the launcher may exec the CLI now.
          handOver(child.stdio[3], "go")
        }
        return start
      }, scrub).pipe(
        Effect.tapError(() =>
          Effect.andThen(
            unregister,
            Effect.sync(() => {
              open--
              removeLayer()
            })
          )
        )
      )
      secretPipes.forEach((pipe, i) => handOver(child.stdio[plan.firstSecretFd + i], Redacted.value(pipe.value)))
      const pid = child.pid!
      watchdog?.setRoot(marker, pid, start)
      const { connection, exited } = makeConnection(child, { maxLineBytes, stderrTailBytes, scrub })
      const rootOnly = (): ReadonlyArray<ProcessTree.ProcessInfo> =>
        exited() ? [] : [{ pid, ppid: 0, pgid: pid, sid: -1, zombie: false, start: "" }]
      let container: Teardown.Container
      let unwatch = () => {}
      if (session !== undefined) {
        // The process tree too, read by teardown twice: what it finds outside the cgroup left it (a root tool can).
        const tree = ProcessTree.make({ backend: "proc", rootPid: pid, rootStart: start, rootReaped: exited, marker })
        container = Teardown.cgroupContainer(
          session,
          guarded,
          () => exited() ? undefined : pid,
          () => tree.scan()
        )
      } else if (backend === undefined) {
        container = Teardown.windowsContainer(pid, rootOnly)
      } else {
        const tree = ProcessTree.make({ backend, rootPid: pid, rootStart: start, rootReaped: exited, marker })
        if (resolved._tag === "PidNamespace") {
          // unshare is spared SIGTERM: its death would SIGKILL the namespace before the CLI could end cleanly.
          container = Teardown.treeContainer("pid-namespace", tree, rootOnly, pid)
        } else {
          container = Teardown.treeContainer("process-tree", tree, rootOnly)
          unwatch = watch(tree)
        }
      }
      return { child, pid, marker, container, exited, connection, scrub, unregisterSecrets, unwatch }
    })

  const release = (handle: Handle, termGraceMillis: number) =>
    Effect.callback<Teardown.Report>((resume) =>
      Effect.sync(
        Teardown.run({
          child: handle.child,
          exited: handle.exited,
          container: handle.container,
          termGraceMillis,
          killGraceMillis,
          describe: (pid) => ProcessTree.describeProcess(pid, handle.scrub),
          done: (report) => resume(Effect.succeed(report))
        })
      )
    ).pipe(
      Effect.tap((report) => Teardown.logReport(report, survivorsMetric)),
      Effect.ensuring(Effect.sync(() => {
        handle.unwatch()
        handle.unregisterSecrets()
        watchdog?.unregister(handle.marker)
        open--
        removeLayer()
      })),
      Effect.annotateLogs({ pid: handle.pid }),
      Effect.withSpan("NodeTransport.teardown", { attributes: { pid: handle.pid } })
    )

  const openConnection = Effect.fn("NodeTransport.open")(function*(
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

  const note = resolved._tag === "ProcessTree" && resolved.fallback !== undefined
    ? `auto chose the process tree: no cgroup could be created (${resolved.fallback})`
    : resolved._tag === "Unavailable"
    ? `${resolved.requested} containment is unavailable (${resolved.reason}): every open fails with SpawnFailed`
    : undefined
  return Transport.Transport.of({
    open: openConnection,
    capabilities: capabilitiesFor({
      containment: Containment.mechanismOf(resolved),
      watchdog: useWatchdog,
      note,
      parentDeathSignal: resolved._tag === "PidNamespace" && resolved.parentDeathSignal
    })
  })
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
  Layer.effect(
    Transport.Transport,
    // Loaded when the layer is built: a host that only uses `layer` does not load `effect/Config` (nor
    // `effect/Schema`, which it imports), and one that calls this has loaded it to build `options`.
    Effect.flatMap(
      Effect.promise(() => import("effect/Config")),
      (Config) => Effect.flatMap(Config.unwrap(options), make)
    )
  )
