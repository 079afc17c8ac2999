/**
 * What every real-`codex` test needs: the pinned native binary, an isolated world per test (its own `CODEX_HOME`,
 * `TMPDIR`, `HOME` and working directory; a MockOpenAI on 127.0.0.1; a marker variable in the environment of every
 * process of the world), and helpers that look at /proc and the file system, never at Tether's bookkeeping.
 */
import { type CodexSession } from "@tether/codex"
import { EventLog, type SessionEvent, Timeouts, type Turn } from "@tether/core"
import { MockOpenAI } from "@tether/testing"
import { Executable, NodeTransport } from "@tether/transport-node"
import { Duration, Effect, Option, Stream } from "effect"
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  isAlive,
  marked as markedWith,
  type Proc,
  sleeping,
  WaitTimeout,
  waitUntil as waitUntilWithin
} from "../../utils.ts"

export { isAlive, type Proc, sleeping, WaitTimeout }

// ---------------------------------------------------------------------------------------------------------------
// The CLI
// ---------------------------------------------------------------------------------------------------------------

/** `packages/transport-node`, whose devDependency `@openai/codex` pins the CLI these tests run. */
const pinningPackage = Path.resolve(import.meta.dirname, "../../..")

/** The version the package pins. */
export const pinnedVersion: string = JSON.parse(
  Fs.readFileSync(Path.join(pinningPackage, "package.json"), "utf8")
).devDependencies["@openai/codex"]

/**
 * The pinned CLI: `TETHER_CODEX_PATH` when set, else the native binary of the pinned package (never its Node
 * launcher). `PATH` is deliberately not searched, so that a `codex` installed on the machine cannot stand in.
 */
export const codexPath: string = Effect.runSync(
  Executable.resolve({
    program: "codex",
    env: { TETHER_CODEX_PATH: process.env.TETHER_CODEX_PATH },
    roots: [pinningPackage]
  }).pipe(Effect.orDie)
)

/**
 * `codex --version`, e.g. `codex-cli 0.171.0`. Even `--version` writes to `CODEX_HOME` (helper links under
 * `tmp/arg0-linux`), so it runs with a throwaway one, never the user's `~/.codex`.
 */
export const codexVersion: string = (() => {
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-codex-version-"))
  try {
    return execFileSync(codexPath, ["--version"], {
      encoding: "utf8",
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: home, CODEX_HOME: home, NO_COLOR: "1" },
      // It warns on stderr that it will not make helper links under a temporary directory: not the suite's output.
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 30_000
    }).trim()
  } finally {
    Fs.rmSync(home, { recursive: true, force: true })
  }
})()

/** The Node transport with its default options (watchdog included), pointed at the pinned CLI. */
export const TransportLive = NodeTransport.layer({ executables: { codex: codexPath } })

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
// A world per test
// ---------------------------------------------------------------------------------------------------------------

/** The name of the variable that marks every process of a test's sessions (the server and its commands). */
export const markVariable = "TETHER_IT_MARK"

/**
 * Deadlines for a real CLI on a loaded 2-core machine: generous where the CLI works (startup, turns), short where
 * the test waits on purpose (closeGrace).
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

export interface World extends MockOpenAI.OfflineFolders {
  readonly mock: MockOpenAI.MockOpenAI
  /** The value of {@link markVariable} in the environment of every process of this world. */
  readonly mark: string
  /**
   * Session options for this world: offline (MockOpenAI.offlineOptions: the provider on the mock, retries and
   * plugins off, CODEX_HOME / TMPDIR / HOME / cwd in the world, a clean environment), timeouts, plus `extra`.
   */
  readonly options: (extra?: CodexSession.Options) => CodexSession.Options
}

/** The marks of every world made in this process. */
const marks = new Set<string>()

/** A fresh world, removed (directories included) when the scope closes. */
export const makeWorld = Effect.fnUntraced(function*(settings?: { readonly retries?: number }) {
  const mock = yield* MockOpenAI.make(MockOpenAI.markers())
  const home = yield* MockOpenAI.offlineHome({ baseUrl: mock.url, retries: settings?.retries, prefix: "tether-cx-" })
  const mark = randomUUID()
  marks.add(mark)
  const world: World = {
    mock,
    home: home.home,
    codexHome: home.codexHome,
    tmpDir: home.tmpDir,
    cwd: home.cwd,
    mark,
    options: (extra) => ({
      ...home.options,
      timeouts,
      model: "gpt-5.5",
      ...extra,
      env: {
        mode: "clean",
        ...extra?.env,
        set: { ...home.options.env?.set, [markVariable]: mark, ...extra?.env?.set }
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

/** Live processes whose environment carries `TETHER_IT_MARK=<mark>`: the server of a world and everything it started. */
export const marked = (mark: string): Array<Proc> => markedWith(mark, markVariable)

/** Live processes of any world this test file made: what the file left running. */
export const leftBehind = (): Array<Proc> => [...marks].flatMap(marked)

/** Polls (real time) until `f` holds, failing after `timeoutMillis`. */
export const waitUntil = (what: string, f: () => boolean, timeoutMillis = 10_000) =>
  waitUntilWithin(what, f, timeoutMillis)

// ---------------------------------------------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------------------------------------------

/** The events of a turn's deliveries; a subscriber that fell behind (a Lag) fails: the tests must see every event. */
const eventsStream = <A extends Turn.TurnResult, E>(turn: Turn.Turn<A, E>) =>
  turn.events.pipe(EventLog.failOnLag, Stream.map((delivery) => delivery.event))

/** The turn's events from its start to its terminal event (the turn must end). */
export const eventsOf = <A extends Turn.TurnResult, E>(turn: Turn.Turn<A, E>) => Stream.runCollect(eventsStream(turn))

/** The first event of the turn that satisfies `predicate`, within 15 seconds. */
export const firstEvent = <Ev extends SessionEvent.SessionEvent, A extends Turn.TurnResult, E>(
  turn: Turn.Turn<A, E>,
  predicate: (event: SessionEvent.SessionEvent) => event is Ev,
  what: string
): Effect.Effect<Ev, WaitTimeout | EventLog.ReplayUnavailable | EventLog.Lagged> =>
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

// ---------------------------------------------------------------------------------------------------------------
// The file system
// ---------------------------------------------------------------------------------------------------------------

/** Every path under `dir` (relative, sorted), for what a session left in its folders. */
export const tree = (dir: string): ReadonlyArray<string> =>
  Fs.existsSync(dir) ? Fs.readdirSync(dir, { recursive: true }).map(String).sort() : []
