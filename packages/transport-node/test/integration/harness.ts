/**
 * What every real-CLI test needs: the pinned `claude` binaries (the newest and the oldest supported), an isolated
 * world per test (a temporary home that
 * holds the CLI's config, tmp and runtime dirs, and a working directory; a MockAnthropic on 127.0.0.1; a marker
 * variable in the CLI's environment), and helpers that look at /proc, never at Tether's bookkeeping.
 */
import { type ClaudeSession } from "@tether/claude"
import { EventLog, type SessionEvent, Timeouts, type Transport, type Turn } from "@tether/core"
import { MockAnthropic, PinnedClaude } from "@tether/testing"
import { Executable, NodeTransport } from "@tether/transport-node"
import { Duration, Effect, type Layer, Option, Stream } from "effect"
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  isAlive,
  killAllMarked,
  marked as markedWith,
  type Proc,
  sleeping,
  WaitTimeout,
  waitUntil as waitUntilWithin
} from "../utils.ts"

export { isAlive, type Proc, sleeping, WaitTimeout }

// ---------------------------------------------------------------------------------------------------------------
// The CLI
// ---------------------------------------------------------------------------------------------------------------

/** `packages/testing`, whose devDependency `@anthropic-ai/claude-code` pins the CLI these tests run. */
const testingPackage = Path.resolve(Path.dirname(new URL(import.meta.resolve("@tether/testing")).pathname), "..")

/** One `claude` binary the suite runs its scenarios on. */
export interface Cli {
  /** The version the binary says it is (`claude --version`, without ` (Claude Code)`). */
  readonly version: string
  readonly path: string
  /** The Node transport with its default options (watchdog included), pointed at this binary. */
  readonly transport: Layer.Layer<Transport.Transport>
}

/** `claude --version` of a binary, e.g. `2.1.332 (Claude Code)`. */
export const versionOf = (path: string): string =>
  execFileSync(path, ["--version"], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" },
    timeout: 30_000
  }).trim()

const cliAt = (path: string, version: string): Cli => ({
  version,
  path,
  transport: NodeTransport.layer({ executables: { claude: path } })
})

/**
 * The CLIs the suite runs, newest first: every pinned version (`PinnedClaude.versions`: the newest and the oldest
 * supported) by default, each resolved by `PinnedClaude` (which checks the installed packages' versions); only the
 * one `TETHER_CLAUDE_VERSION` names when it is set; only the binary at `TETHER_CLAUDE_PATH`, whatever its version,
 * when that is set. `PATH` is deliberately not searched, so that a `claude` installed on the machine cannot stand
 * in for a pinned one.
 */
export const clis: ReadonlyArray<Cli> = process.env.TETHER_CLAUDE_PATH !== undefined &&
    process.env.TETHER_CLAUDE_PATH !== ""
  ? [
    ((path) => cliAt(path, versionOf(path).replace(/ \(Claude Code\)$/, "")))(
      Effect.runSync(
        Executable.resolve({
          program: "claude",
          env: { TETHER_CLAUDE_PATH: process.env.TETHER_CLAUDE_PATH },
          roots: [testingPackage]
        }).pipe(Effect.orDie)
      )
    )
  ]
  : (process.env[PinnedClaude.envVar] ? [PinnedClaude.fromEnv(process.env)] : PinnedClaude.versions).map((version) =>
    cliAt(PinnedClaude.resolveSync(version), version)
  )

/** The newest of {@link clis}: what the suites that do not depend on the CLI's version run. */
export const claudePath: string = clis[0].path

/** `claude --version` of {@link claudePath}, e.g. `2.1.332 (Claude Code)`. */
export const claudeVersion: string = `${clis[0].version} (Claude Code)`

/** The Node transport with its default options (watchdog included), pointed at {@link claudePath}. */
export const TransportLive = clis[0].transport

/** Which CLIs the suite runs, one line each, for the suite's header. */
export const describeClis = (): string => clis.map((cli) => `claude CLI: ${cli.version} (${cli.path})`).join("\n")

// ---------------------------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------------------------

/**
 * The interfaces of this process's network namespace (`/proc/self/net/dev` follows the namespace; `/sys/class/net`
 * does not). In the namespace scripts/netns.sh makes, there is only `lo`.
 */
export const networkInterfaces = (): ReadonlyArray<string> =>
  Fs.readFileSync("/proc/self/net/dev", "utf8")
    .split("\n")
    .slice(2)
    .map((line) => line.split(":")[0].trim())
    .filter((name) => name.length > 0)

// ---------------------------------------------------------------------------------------------------------------
// The mock model
// ---------------------------------------------------------------------------------------------------------------

/**
 * What the mock model does, chosen by a tag at the start of the prompt:
 * `[bash] <command>` asks for a Bash tool use, `[slow]` streams 400 deltas 50 ms apart, `[stream <n> <ms>]` streams
 * `n` deltas `ms` apart, `[error <status>]` fails with that HTTP status; anything else is
 * `Hello from the mock: <prompt>` in three deltas. After a tool_result the model says `Tool said: <result>`.
 */
export const script: MockAnthropic.Script = (request) => {
  if (Option.isSome(request.toolResult)) return MockAnthropic.echo
  const prompt = request.prompt
  const bash = /^\[bash\] (.+)$/s.exec(prompt)
  if (bash !== null) return MockAnthropic.bash(bash[1], { description: "integration test command" })
  if (prompt.startsWith("[slow]")) return MockAnthropic.slow({ deltas: 400, interval: "50 millis" })
  const stream = /^\[stream (\d+) (\d+)\]/.exec(prompt)
  if (stream !== null) {
    return MockAnthropic.slow({ deltas: Number(stream[1]), interval: Duration.millis(Number(stream[2])) })
  }
  const error = /^\[error (\d{3})\]/.exec(prompt)
  if (error !== null) return MockAnthropic.apiError(Number(error[1]))
  return MockAnthropic.text(`Hello from the mock: ${prompt}`, { chunks: 3 })
}

// ---------------------------------------------------------------------------------------------------------------
// A world per test
// ---------------------------------------------------------------------------------------------------------------

/** The name of the variable that marks every process of a test's sessions (the CLI and its tools). */
export const markVariable = "TETHER_IT_MARK"

/**
 * Deadlines for a real CLI on a loaded 2-core machine: generous where the CLI works (startup, turns), short where
 * the test waits on purpose (closeGrace: a CLI busy with a tool ignores stdin EOF until the tool ends).
 */
export const timeouts: Timeouts.Timeouts = {
  ...Timeouts.defaults,
  startup: Duration.seconds(30),
  control: Duration.seconds(10),
  delivery: Duration.seconds(5),
  ack: Duration.seconds(10),
  turn: Duration.seconds(60),
  stall: Duration.seconds(30),
  interrupt: Duration.seconds(10),
  permission: Duration.seconds(30),
  closeGrace: Duration.seconds(1),
  termGrace: Duration.seconds(2)
}

/** How long teardown may take at most: closeGrace + termGrace + the transport's killGrace, plus slack. */
export const releaseBoundMillis = Duration.toMillis(timeouts.closeGrace) + Duration.toMillis(timeouts.termGrace) +
  Duration.toMillis(NodeTransport.defaultKillGrace) + 1_000

export interface World {
  readonly mock: MockAnthropic.MockAnthropic
  /** HOME, with `.claude` (CLAUDE_CONFIG_DIR), `tmp` (TMPDIR, CLAUDE_CODE_TMPDIR) and `run` (XDG_RUNTIME_DIR). */
  readonly home: string
  /** The CLI's working directory: where Bash commands create their files. */
  readonly cwd: string
  /** The value of {@link markVariable} in the environment of every process of this world. */
  readonly mark: string
  /** Session options for this world: offline environment, cwd, timeouts, plus `extra`. */
  readonly options: <Out = unknown>(extra?: ClaudeSession.Options<Out>) => ClaudeSession.Options<Out>
}

/** Processes of a world that were still alive when it was released (and were killed then): what a test left. */
const survivors: Array<Proc> = []

/**
 * A fresh world, removed (directories included) when the scope closes; its mock model plays `mockScript` (default
 * {@link script}). Its release comes after that of the sessions made in it (it is acquired first): whatever of the
 * world still runs then is recorded for {@link leftBehind} and killed, so that a failing test leaves nothing on the
 * machine — and killed before its home is removed, so that a survivor still writing there (an escaped tool, a CLI
 * under `process-tree`) cannot make the removal fail and leave the directory behind.
 */
export const makeWorld = Effect.fnUntraced(function*(mockScript: MockAnthropic.Script = script) {
  const mark = randomUUID()
  const mock = yield* MockAnthropic.make(mockScript)
  const { cwd, env, home } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-it-" })
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      survivors.push(...marked(mark))
      return killAllMarked(mark, markVariable)
    })
  )
  const world: World = {
    mock,
    home,
    cwd,
    mark,
    options: (extra) => ({
      cwd,
      timeouts,
      ...extra,
      env: {
        // Nothing from the host but PATH and HOME (and HOME is replaced): the CLI sees only the offline world.
        mode: "clean",
        ...extra?.env,
        set: {
          ...env,
          [markVariable]: mark,
          ...extra?.env?.set
        }
      }
    })
  }
  return world
})

// ---------------------------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------------------------

/** The environment of a process, from /proc (empty when it is gone). */
export const environOf = (pid: number): Record<string, string> => {
  try {
    const env: Record<string, string> = {}
    for (const entry of Fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
      const at = entry.indexOf("=")
      if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1)
    }
    return env
  } catch {
    return {}
  }
}

/** Live processes whose environment carries `TETHER_IT_MARK=<mark>`: the CLI of a world and everything it started. */
export const marked = (mark: string): Array<Proc> => markedWith(mark, markVariable)

/**
 * The processes of this file's worlds that outlived their sessions: found alive when their world was released (and
 * killed then). Other runs of the suite, which may share the machine, have marks of their own.
 */
export const leftBehind = (): ReadonlyArray<Proc> => survivors.slice()

/** Polls (real time) until `f` holds, failing after `timeoutMillis` (longer than the unit tests': a real CLI). */
export const waitUntil = (what: string, f: () => boolean, timeoutMillis = 10_000) =>
  waitUntilWithin(what, f, timeoutMillis)

// ---------------------------------------------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------------------------------------------

/** The events of a turn's deliveries; a subscriber that fell behind (a Lag) fails: the tests must see every event. */
const eventsStream = (turn: Turn.Turn) => turn.events.pipe(EventLog.failOnLag, Stream.map((delivery) => delivery.event))

/** The turn's events from its start to its terminal event (the turn must end). */
export const eventsOf = (turn: Turn.Turn) => Stream.runCollect(eventsStream(turn))

/** The first event of the turn that satisfies `predicate`, within 15 seconds. */
export const firstEvent = <E extends SessionEvent.SessionEvent>(
  turn: Turn.Turn,
  predicate: (event: SessionEvent.SessionEvent) => event is E,
  what: string
): Effect.Effect<E, WaitTimeout | EventLog.ReplayUnavailable | EventLog.Lagged> =>
  eventsStream(turn).pipe(
    Stream.filter(predicate),
    Stream.runHead,
    Effect.timeoutOption(Duration.seconds(15)),
    Effect.flatMap((found) =>
      Option.isSome(found) && Option.isSome(found.value)
        ? Effect.succeed(found.value.value)
        : Effect.fail(new WaitTimeout({ what }))
    )
  )

/** A guard on the event's tag. */
export const isTag =
  <T extends SessionEvent.SessionEvent["_tag"]>(tag: T) =>
  (event: SessionEvent.SessionEvent): event is Extract<SessionEvent.SessionEvent, { readonly _tag: T }> =>
    event._tag === tag
