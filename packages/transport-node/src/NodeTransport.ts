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
import * as Transport from "@tether/core/Transport"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as capabilities from "./internal/capabilities.ts"
import * as Containment from "./internal/containment.ts"
import * as defaults from "./internal/defaults.ts"
import * as transport from "./internal/transport.ts"

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
  /**
   * Limits of each session's whole tree (the CLI and everything it starts): memory, processes, CPU; none by
   * default. Enforced by the kernel's cgroup controllers, on cgroup v2 where the host's cgroup offers them to its
   * children, else on the cgroup v1 hierarchies a machine has (each session gets a cgroup of its own in each, torn
   * down with it). `transport.capabilities.limits` says which this machine can enforce; a limit asked for that
   * cannot be makes every `open` fail with `SpawnFailed`. A process OOM-killed or a fork refused is a
   * `Connection.limitHits` item (a `LimitHit` session event), a warning and the `tether_limit_hits` metric; the CLI
   * itself OOM-killed exits `Signaled` with `cause: "out-of-memory"` (a turn in flight fails with `CliExited`,
   * `cause: "out-of-memory"`).
   */
  readonly limits?: Limits | undefined
  /** How often each session's limit counters are read for hits (default 250 ms). */
  readonly limitsInterval?: Duration.Input | undefined
  /**
   * Give each session a private temporary directory (default true; not on Windows): made under the host's
   * `os.tmpdir()` (mode 0700), passed to the CLI as `TMPDIR`, `TMP` and `TEMP`, and removed with whatever its tools
   * left in it when the session is released (a host that died without finalizers leaves its own to the next layer
   * made on the machine). A `TMPDIR` in the launch spec's `env.set` wins, and then no directory is made. Programs
   * that write to `/tmp` by name still share it.
   */
  readonly privateTmp?: boolean | undefined
  /**
   * Isolate the sessions from each other: `"auto"` by default (a box for each session where one can be made), `true`
   * (every session, or every `open` fails), `false` (off). It needs Linux as root (x86-64 or arm64), and `perl` (the
   * host's helper that makes each box). Each session's CLI runs in namespaces of its own: a user namespace
   * whose root is a uid range of its own outside (65,536 uids, distinct from every other live session's on the
   * machine, other hosts' included), a PID namespace (its tools see only its processes), a mount namespace (a
   * private `/tmp`, `/dev/shm` and `/var/tmp`; the directories the launch spec names under `/tmp` stay visible) and
   * a cgroup namespace. Its mounts are made by the host's root before its user namespace is, so its namespace has
   * them locked: its root cannot unmount its `/proc` (the host's is under it) or its `/tmp`, nor make a read-only one
   * writable. So no session's tools can read another's environment, memory or files, signal it, or move it between
   * cgroups. Its workspace (`cwd`), config directory (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`) and a `HOME` the launch spec
   * sets (not the host's own) and a `TMPDIR` it sets are lent to it while it runs, through idmapped mounts in its own
   * mount namespace: the host's root is the box's root there, nothing is chowned, sessions that share a workspace
   * each write it at once, and what they leave is the host's user's. While lent, a directory is 0700 (its mode given
   * back by the last session holding it). A CLI installed under a directory other users may not search (`/root`) is
   * shown to the box read-only: the topmost directory holding it below the innermost closed one (and the same for its
   * `#!` interpreter), under a tmpfs over the closed directory that holds nothing else.
   *
   * Gotchas: `connection.pid` is the CLI's pid outside its namespace (its parent is the box's first process); the
   * executable (and its interpreter) must be executable by other users (a script readable by them), or be in a lent
   * directory; the lent directories' filesystems must take idmapped mounts (probed once per filesystem: ext4 here);
   * other users' files are `nobody`'s inside, and the rest of the host's files (the host's own `HOME` included) are
   * not writable; `/` and sticky directories (`/tmp`) are never lent; a CLI's exit ends every process of its
   * namespace; an exit code above 128 reads as a signal. `"auto"` (the default): a session whose box cannot be made
   * (not root, not Linux, its executable or interpreter not executable by other users, a filesystem without idmapped
   * mounts, a directory every user shares) runs unboxed, with a warning saying why (logged with Effect's logger),
   * and `transport.capabilities.isolatesSessions` is false (its notes say whether boxes can be made here at all, and
   * why not). `true`: where a box cannot be made, `open` fails with `SpawnFailed`. `false`: the opt-out, every session
   * runs as the host's user (the sessions' tools can read each other's environment, memory and files).
   */
  readonly isolation?: boolean | "auto" | undefined
  /** How long an isolated session's start may take to make its namespaces (default 5 seconds). */
  readonly isolationTimeout?: Duration.Input | undefined
}

/**
 * Per-session resource limits (see {@link Options.limits}); each one absent is no limit.
 *
 * @category models
 * @since 0.1.0
 */
export interface Limits {
  /** The memory of the session's tree, in bytes (page cache included; swap not allowed past it). */
  readonly memoryBytes?: number | undefined
  /** The processes (and threads) of the session's tree at once: a fork bomb stops there. */
  readonly processes?: number | undefined
  /** The CPU time of the session's tree, in CPUs (`0.5`: half of one CPU, `2`: two CPUs' worth). */
  readonly cpus?: number | undefined
}

/**
 * The name of the marker variable injected into the CLI's environment. Its value is unique per connection; every
 * descendant that keeps its environment inherits it, which is one of the ways the `process-tree` containment
 * finds orphans on Linux.
 *
 * @category constants
 * @since 0.1.0
 */
export const markerVariable: typeof defaults.markerVariable = defaults.markerVariable

/**
 * The default maximum stdout line length (16 MiB).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxLineBytes: typeof defaults.defaultMaxLineBytes = defaults.defaultMaxLineBytes

/**
 * The default size of the stderr tail (8 KiB).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultStderrTailBytes: typeof defaults.defaultStderrTailBytes = defaults.defaultStderrTailBytes

/**
 * The default bound teardown waits after the kill (1 second).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultKillGrace: Duration.Duration = defaults.defaultKillGrace

/**
 * The default interval of the `process-tree` containment's scans during a session (1 second).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultScanInterval: Duration.Duration = defaults.defaultScanInterval

/**
 * The metric teardown adds its survivors to: processes still alive after the kill, with the attribute
 * `containment` (the mechanism they escaped or resisted). It stays at 0 while every teardown is complete.
 *
 * @category metrics
 * @since 0.1.0
 */
export const survivorsMetric: Metric.Counter<number> = defaults.survivorsMetric

/**
 * The metric of the limits hit by the sessions' processes: OOM kills (attribute `limit=memory`) and refused forks
 * (`limit=processes`), counted as they are seen.
 *
 * @category metrics
 * @since 0.1.0
 */
export const limitHitsMetric: Metric.Counter<number> = defaults.limitHitsMetric

/**
 * The default bound of an isolated session's namespaces' making (5 seconds).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultIsolationTimeout: Duration.Duration = defaults.defaultIsolationTimeout

/**
 * The default interval the limits' counters are read at (250 ms).
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultLimitsInterval: Duration.Duration = defaults.defaultLimitsInterval

/**
 * What the transport guarantees on this platform under a containment mechanism, with or without the watchdog.
 * `transport.capabilities` is this for the mechanism the layer chose; a host can read it to refuse to run without
 * the guarantee it needs.
 *
 * @category capabilities
 * @since 0.1.0
 */
export const capabilitiesFor: typeof capabilities.capabilitiesFor = capabilities.capabilitiesFor

/**
 * Builds the transport service. The containment is decided here (a cgroup layer is created, or the PID namespace
 * probed); the watchdog (when enabled) is started at the first `open`; both are released when the enclosing scope
 * closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: typeof transport.make = transport.make

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
