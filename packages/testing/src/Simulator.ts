/**
 * The contract of a simulated coding-agent CLI: one per provider, sans-IO.
 *
 * A simulator is the CLI side of a provider's protocol as a plain, synchronous state machine (the shape of h11 and
 * quinn-proto, and the mirror image of the session machine): it holds no Effect, starts no timer and does no I/O.
 * Whoever runs it feeds it what happens to the process — a line on stdin, stdin's EOF, a signal, a fault a test
 * triggers — each stamped with the current time in milliseconds, and pulls what the process does in return with
 * {@link Simulator.poll}: stdout lines, stderr text, its exit. {@link Simulator.nextWake} says when it next has
 * something to do with no input at all (a reply that takes 60 ms, a chunk streamed every 25 ms).
 *
 * Two shells run every simulator: `MockTransport` (in memory, on Effect's `Clock`, so `TestClock` drives it) and
 * `FakeCli` (a real process over real stdio, with real timers), which the fake executables in `bin/` use. The
 * simulators are `MockClaude.simulator` (Claude Code's stream-json) and `MockCodex.simulator` (Codex's app-server).
 *
 * Outputs are pulled one at a time, so a shell applies its own backpressure: a simulator streaming a
 * 100,000-frame turn produces its frames as they are asked for (a small batch ahead at most), and an interrupt
 * written in between stops the stream a batch or two later.
 *
 * @example
 * ```ts
 * import { MockClaude, Simulator } from "@tether/testing"
 *
 * const cli = MockClaude.simulator()({ args: ["--input-format", "stream-json"], env: {}, cwd: "/tmp", pid: 1 }, 0)
 * cli.write(0, JSON.stringify({ type: "control_request", request_id: "r1", request: { subtype: "initialize" } }))
 * const lines: Array<Simulator.Output> = []
 * for (let now = 0; now < 1_000; now = Math.min(1_000, cli.nextWake())) {
 *   for (let out = cli.poll(now); out !== undefined; out = cli.poll(now)) lines.push(out)
 * }
 * // lines: [{ _tag: "Stdout", line: `{"type":"control_response",...}` }] (printed at 305 ms)
 * ```
 *
 * @since 0.1.0
 */

/**
 * How a process is launched, as the simulated CLI sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Launch {
  /** The arguments after the program name. */
  readonly args: ReadonlyArray<string>
  /** The environment the process sees (revealed values: a simulator reads what the real CLI would read). */
  readonly env: { readonly [name: string]: string | undefined }
  readonly cwd: string
  /** The process id the simulated CLI reports (and, by default, the seed of its ids). */
  readonly pid: number
}

/**
 * A signal a shell delivers to the simulated process. `SIGKILL` cannot be caught: the process always dies of it.
 *
 * @category models
 * @since 0.1.0
 */
export type Signal = "SIGTERM" | "SIGINT" | "SIGKILL"

/**
 * How the simulated process ended: it exited with a code, or died of a signal.
 *
 * @category models
 * @since 0.1.0
 */
export type ExitStatus =
  | { readonly _tag: "Exited"; readonly code: number }
  | { readonly _tag: "Signaled"; readonly signal: Signal }

/**
 * What the simulated process does, in order.
 *
 * - `Stdout`: one stdout line, without its newline.
 * - `TooLong`: one stdout line of `length` characters beginning with `prefix`, too long to build: `MockTransport`
 *   delivers it as the transport's `Line.TooLong` marker (with `limit`), a process shell writes it out.
 * - `Stderr`: text on stderr.
 * - `Exit`: the process ended; it is the last output, and the simulator ignores every input after it.
 *
 * @category models
 * @since 0.1.0
 */
export type Output =
  | { readonly _tag: "Stdout"; readonly line: string }
  | { readonly _tag: "TooLong"; readonly length: number; readonly limit: number; readonly prefix: string }
  | { readonly _tag: "Stderr"; readonly text: string }
  | { readonly _tag: "Exit"; readonly status: ExitStatus }

/**
 * A simulated CLI process. Every method is synchronous; `now` is the current time in milliseconds (any epoch,
 * never decreasing).
 *
 * @category models
 * @since 0.1.0
 */
export interface Simulator<in Fault> {
  /** One line the host wrote on stdin, without its newline. */
  readonly write: (now: number, line: string) => void
  /** The host closed stdin. */
  readonly endInput: (now: number) => void
  /** A signal reached the process. */
  readonly signal: (now: number, signal: Signal) => void
  /** A test makes the process misbehave now (crash, hang, stall, …: the provider's faults). */
  readonly trigger: (now: number, fault: Fault) => void
  /**
   * The next thing the process does at `now`, or undefined once it waits for input or for {@link nextWake}. Call
   * it until it returns undefined, after every input and whenever the clock reaches {@link nextWake}.
   */
  readonly poll: (now: number) => Output | undefined
  /** When {@link poll} next has something to do without any input; `Infinity` when only input can wake it. */
  readonly nextWake: () => number
}

/**
 * Starts a simulated process: the provider's simulator, bound to its script. `now` is the time of the spawn.
 *
 * @category models
 * @since 0.1.0
 */
export type Factory<in Fault> = (launch: Launch, now: number) => Simulator<Fault>
