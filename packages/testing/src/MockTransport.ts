/**
 * An in-memory `Transport` that runs a simulated CLI (see `Simulator`) instead of a process: Claude Code's
 * ({@link MockClaude}) or Codex's app-server ({@link MockCodex}), whichever the script given is for, and any
 * provider's with {@link openWith} and {@link layerWith}.
 *
 * `MockTransport.layer(script)` provides `Transport.Transport`: each `open` starts a simulated CLI in the
 * connection's scope. Lines written to the connection drive it exactly as they would drive `claude
 * --input-format stream-json` (a `MockClaude` script) or `codex app-server` (a `MockCodex` script); its lines come
 * out of `stdout` as raw JSON lines, with the real CLI's timing kept on Effect's `Clock`. A host that switches
 * provider switches the script its tests give, and nothing else. Under `it.effect` (`TestClock`) nothing arrives until the test adjusts the clock, so
 * session code can be tested deterministically: timeouts, stalls, interrupts, crashes and teardown included.
 *
 * The same layer provides the {@link MockTransport} service, which hands tests every opened
 * {@link MockConnection}: what the host wrote, whether stdin was closed, the exit status, a way to inject a raw
 * stdout line or trigger a fault.
 *
 * @example
 * ```ts
 * import { assert, it } from "@effect/vitest"
 * import { Effect, Layer, TestClock } from "effect"
 * import { MockClaude, MockTransport } from "@tether/testing"
 *
 * it.effect("a session survives an API error", () =>
 *   Effect.gen(function*() {
 *     // ... start the session under test, which opens the transport ...
 *     const mock = yield* MockTransport.MockTransport
 *     const cli = yield* mock.connection(0)
 *     yield* TestClock.adjust("1 second")
 *     assert.isTrue(yield* cli.isAlive)
 *   }).pipe(Effect.provide(MockTransport.layer(MockClaude.make([MockClaude.turn(MockClaude.apiError())])))))
 * ```
 *
 * @since 0.1.0
 */
import type * as TetherError from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as SimulatedProcess from "./internal/simulatedProcess.ts"
import * as MockAcp from "./MockAcp.ts"
import * as MockClaude from "./MockClaude.ts"
import * as MockCodex from "./MockCodex.ts"
import type * as Simulator from "./Simulator.ts"

/**
 * The faults a test can trigger on the connections of {@link layer}: the simulated CLIs' (Claude's, Codex's and the ACP agent's). The
 * faults both have (`crash`, `hang`, `stall`, `malformed`, `raw`, `ignoreInterrupts`, `ignoreSigterm`) have the same
 * tags and fields and work on either; a simulator ignores the other provider's own faults.
 *
 * @category models
 * @since 0.1.0
 */
export type Fault = MockClaude.Fault | MockCodex.Fault | MockAcp.Fault

/**
 * A script of any provider's simulated CLI: {@link layer} and {@link open} run each with its provider's simulator.
 *
 * @category models
 * @since 0.1.0
 */
export type Script = MockClaude.Script | MockCodex.Script | MockAcp.Script

/**
 * The simulator of a script, whichever provider it is for.
 *
 * @category simulation
 * @since 0.1.0
 */
export const simulatorOf = (script: Script): Simulator.Factory<Fault> =>
  MockCodex.isScript(script)
    ? MockCodex.simulator(script) as Simulator.Factory<Fault>
    : MockAcp.isScript(script)
    ? MockAcp.simulator(script) as Simulator.Factory<Fault>
    : MockClaude.simulator(script) as Simulator.Factory<Fault>

/**
 * A connection to a simulated CLI: a `Transport.Connection` plus what a test needs to look inside.
 *
 * Hosts receive it as a plain `Connection`; tests get it from {@link MockTransport} (or from {@link open}).
 *
 * @category models
 * @since 0.1.0
 */
export interface MockConnection<F = Fault> extends Transport.Connection {
  /** 0 for the first connection the transport opened, 1 for the next, … */
  readonly index: number
  /** What the host asked to launch. */
  readonly spec: Transport.LaunchSpec
  /** Every line the host wrote, decoded as JSON (a line that is not JSON is kept as its string). */
  readonly written: Effect.Effect<ReadonlyArray<unknown>>
  /** Every line the host wrote, as written. */
  readonly writtenLines: Effect.Effect<ReadonlyArray<string>>
  /** Every stdout line the process emitted so far, whether or not the host read it. */
  readonly emitted: Effect.Effect<ReadonlyArray<Transport.Line>>
  /** The emitted stdout lines that are JSON, decoded. */
  readonly frames: Effect.Effect<ReadonlyArray<unknown>>
  /** True once the host closed stdin (`endInput`) or tore the connection down. */
  readonly stdinEnded: Effect.Effect<boolean>
  /** True until the process exits or the connection is torn down. A hung process is alive. */
  readonly isAlive: Effect.Effect<boolean>
  /** Writes one raw line to stdout, as if the CLI had printed it (ignored once stdout is closed). */
  readonly inject: (line: string | Transport.Line) => Effect.Effect<void>
  /**
   * Triggers a fault now (crash, hang, stall, malformed line, …). A method, so that a connection of one provider's
   * simulator is a `MockConnection` of any fault type (a simulator ignores faults it does not know).
   */
  trigger(fault: F): Effect.Effect<void>
}

/**
 * Options of {@link open}.
 *
 * @category constructors
 * @since 0.1.0
 */
export interface OpenOptions {
  /** How long teardown waits for a process that ignores SIGTERM before SIGKILL. Default 5 seconds. */
  readonly termGrace?: Duration.Input | undefined
  /** Size of the stderr tail, in characters. Default 8192. */
  readonly stderrLimit?: number | undefined
  /** Reported as {@link MockConnection.index}; also seeds the ids and the pid in the handshake. */
  readonly index?: number | undefined
}

/**
 * The launch arguments the fixtures were recorded with: stream-json both ways, permission prompts over stdio,
 * replays and partial messages.
 *
 * @category launch
 * @since 0.1.0
 */
export const defaultArgs: ReadonlyArray<string> = [
  "--output-format",
  "stream-json",
  "--verbose",
  "--input-format",
  "stream-json",
  "--permission-prompt-tool",
  "stdio",
  "--replay-user-messages",
  "--include-partial-messages"
]

/**
 * A `LaunchSpec` for the mock: {@link defaultArgs} (or `args`), a clean environment with
 * `CLAUDE_CODE_SDK_READS_SESSION_STATE=1` (which turns on `session_state_changed` frames, as in the fixtures)
 * plus `env`.
 *
 * @category launch
 * @since 0.1.0
 */
export const launchSpec = (
  options: {
    readonly args?: ReadonlyArray<string> | undefined
    readonly env?: Readonly<Record<string, string>> | undefined
    readonly cwd?: string | undefined
  } = {}
): Transport.LaunchSpec => ({
  program: "claude",
  args: options.args ?? defaultArgs,
  cwd: Option.fromUndefinedOr(options.cwd),
  env: { mode: "clean", set: { CLAUDE_CODE_SDK_READS_SESSION_STATE: "1", ...options.env }, unset: [] }
})

/**
 * What the mock guarantees: everything, since there is no process to leak.
 *
 * @category models
 * @since 0.1.0
 */
export const capabilities: Transport.Capabilities = {
  name: "mock",
  containment: "in-memory",
  killsDetachedDescendants: true,
  killsOrphanedDescendants: true,
  killsEveryDescendant: true,
  diesWithHost: true,
  notes: ["in-memory simulated CLIs; no process is started"]
}

/**
 * Opens one simulated process of any provider in the current scope, without the `Transport` service: `simulator`
 * is the provider's {@link Simulator.Factory}, driven on `Clock`. Closing the scope is the teardown: a process that
 * is still running gets SIGTERM and, if it is still running `termGrace` later (it ignores SIGTERM), SIGKILL;
 * stdout ends.
 *
 * @example
 * ```ts
 * import { MockClaude, MockTransport } from "@tether/testing"
 *
 * // a Claude Code 2.1.197: no receipts, late replays
 * const oldCli = MockTransport.openWith(
 *   MockClaude.simulator(MockClaude.make([], { version: "2.1.197" })),
 *   MockTransport.launchSpec()
 * )
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const openWith = <F>(
  simulator: Simulator.Factory<F>,
  spec: Transport.LaunchSpec,
  options: OpenOptions = {}
): Effect.Effect<MockConnection<F>, never, Scope.Scope> =>
  SimulatedProcess.open(simulator, spec, {
    index: options.index ?? 0,
    termGrace: options.termGrace ?? "5 seconds",
    stderrLimit: options.stderrLimit ?? 8192
  })

/**
 * Opens one simulated CLI playing `script` in the current scope (see {@link openWith}): Claude Code's by default,
 * Codex's app-server for a `MockCodex` script (then give it a `MockCodex.launchSpec()`).
 *
 * @example
 * ```ts
 * import { Effect, TestClock } from "effect"
 * import { MockTransport } from "@tether/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const cli = yield* MockTransport.open()
 *   yield* cli.write(JSON.stringify({ type: "control_request", request_id: "1", request: { subtype: "initialize" } }))
 *   yield* TestClock.adjust("1 second")
 *   return yield* cli.frames // [{ type: "control_response", ... }]
 * }))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const open = (
  script: Script = MockClaude.defaultScript,
  spec: Transport.LaunchSpec = launchSpec(),
  options: OpenOptions = {}
): Effect.Effect<MockConnection, never, Scope.Scope> => openWith(simulatorOf(script), spec, options)

/**
 * The connections a {@link layer} opened, for tests.
 *
 * @category services
 * @since 0.1.0
 */
export class MockTransport extends Context.Service<MockTransport, {
  /** Every connection opened so far, in order (closed ones included). */
  readonly connections: Effect.Effect<ReadonlyArray<MockConnection>>
  /** The `index`-th connection (0-based), waiting until it is opened. */
  readonly connection: (index: number) => Effect.Effect<MockConnection>
  /** The most recently opened connection, waiting until there is one. */
  readonly latest: Effect.Effect<MockConnection>
}>()("@tether/testing/MockTransport") {}

/**
 * Options of {@link layer}.
 *
 * @category layers
 * @since 0.1.0
 */
export interface LayerOptions {
  /** Make `open` fail (for example with `ExecutableNotFound`) to test the host's fallback path. */
  readonly spawnError?: ((spec: Transport.LaunchSpec) => TetherError.SpawnError | undefined) | undefined
  /** Size of each connection's stderr tail, in characters. Default 8192. */
  readonly stderrLimit?: number | undefined
}

/**
 * Provides `Transport.Transport` backed by simulated processes of any provider, and {@link MockTransport} to inspect
 * them: every `open` starts the process `simulator(spec, index)` makes. The connections take {@link Fault}s; a
 * simulator of another provider ignores the faults it does not know.
 *
 * @example
 * ```ts
 * import { MockCodex, MockTransport } from "@tether/testing"
 *
 * // every process a Codex server whose first turn/start is refused
 * const TestTransport = MockTransport.layerWith(() =>
 *   MockCodex.simulator(MockCodex.make([], { faults: [MockCodex.rejectTurn()] }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerWith = <F extends Fault = Fault>(
  simulator: (spec: Transport.LaunchSpec, index: number) => Simulator.Factory<F>,
  options: LayerOptions = {}
): Layer.Layer<Transport.Transport | MockTransport> =>
  Layer.effectContext(Effect.sync(() => {
    const connections: Array<MockConnection> = []
    // Who waits for the connection of each index not opened yet.
    const waiters = new Map<number, Deferred.Deferred<MockConnection>>()

    const transport = Transport.Transport.of({
      capabilities,
      open: (spec, teardown) =>
        Effect.gen(function*() {
          const error = options.spawnError?.(spec)
          if (error !== undefined) return yield* error
          const index = connections.length
          // A simulator ignores the faults it does not know: it can take any provider's.
          const connection = yield* openWith(simulator(spec, index) as Simulator.Factory<Fault>, spec, {
            index,
            termGrace: teardown.termGrace,
            stderrLimit: options.stderrLimit
          })
          connections.push(connection)
          const waiting = waiters.get(index)
          if (waiting !== undefined) {
            waiters.delete(index)
            yield* Deferred.succeed(waiting, connection)
          }
          return connection as Transport.Connection
        })
    })

    const connection = (index: number): Effect.Effect<MockConnection> =>
      Effect.suspend(() => {
        const existing = connections[index]
        if (existing !== undefined) return Effect.succeed(existing)
        let deferred = waiters.get(index)
        if (deferred === undefined) {
          deferred = Deferred.makeUnsafe<MockConnection>()
          waiters.set(index, deferred)
        }
        return Deferred.await(deferred)
      })

    // Before any connection, the latest is the first one opened.
    const latest: Effect.Effect<MockConnection> = Effect.suspend(() =>
      connections.length > 0 ? Effect.succeed(connections[connections.length - 1]) : connection(0)
    )

    return Context.make(Transport.Transport, transport).pipe(
      Context.add(
        MockTransport,
        MockTransport.of({ connections: Effect.sync(() => connections.slice()), connection, latest })
      )
    )
  }))

/**
 * Provides `Transport.Transport` backed by simulated CLIs, and {@link MockTransport} to inspect them: simulated
 * Claude Code CLIs for a `MockClaude` script (the default), simulated `codex app-server`s for a `MockCodex` one.
 * Every `open` starts a fresh process running `script` (or the script the function returns for that launch); turn
 * rules marked `once` are used up per process.
 *
 * @example
 * ```ts
 * import { MockClaude, MockCodex, MockTransport } from "@tether/testing"
 *
 * const ClaudeTransport = MockTransport.layer(
 *   MockClaude.make([MockClaude.when("deploy", MockClaude.tool({ name: "Bash", input: { command: "make deploy" } }))])
 * )
 * const CodexTransport = MockTransport.layer(
 *   MockCodex.make([MockCodex.when("deploy", MockCodex.command({ command: "make deploy" }))])
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  script: Script | ((spec: Transport.LaunchSpec, index: number) => Script) = MockClaude.defaultScript,
  options: LayerOptions = {}
): Layer.Layer<Transport.Transport | MockTransport> =>
  layerWith((spec, index) => simulatorOf(typeof script === "function" ? script(spec, index) : script), options)
