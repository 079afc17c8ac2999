/**
 * The Effect shell that runs a simulator (see `Simulator.ts`) as an in-memory process for `MockTransport`: lines the
 * host writes go to the simulator, what it outputs goes to the connection's stdout and stderr tail, and one timer
 * fiber sleeps on `Clock` until the simulator's next wake, so `TestClock` drives the whole process.
 *
 * Every input and every wake drains the simulator at once: what the simulated CLI does at a given time is on stdout
 * by the time the fiber that caused it yields.
 *
 * @internal
 */
import * as TetherError from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { MockConnection } from "../MockTransport.ts"
import type * as Simulator from "../Simulator.ts"
import * as Json from "./json.ts"

export interface Options {
  readonly index: number
  readonly termGrace: Duration.Input
  readonly stderrLimit: number
}

/** Outputs drained in one go before the fiber hands the scheduler back (a flooding CLI must not starve the host). */
const drainBudget = 4096

/** What the simulated process sees of a launch: the environment the spec sets (revealed), its cwd, a pid. */
const launchOf = (spec: Transport.LaunchSpec, pid: number): Simulator.Launch => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(spec.env.set)) {
    env[name] = Redacted.isRedacted(value) ? Redacted.value(value) : value
  }
  for (const name of spec.env.unset) delete env[name]
  return { args: spec.args, env, cwd: Option.getOrElse(spec.cwd, () => "/home/user/project"), pid }
}

class SimulatedProcess<Fault> {
  status: Transport.ExitStatus | undefined = undefined
  stderr = ""
  inputEnded = false
  tornDown = false
  readonly writtenLines: Array<string> = []
  readonly emitted: Array<Transport.Line> = []
  readonly exited = Deferred.makeUnsafe<Transport.ExitStatus>()
  private draining = false
  private again = false
  private timer: Fiber.Fiber<void> | undefined = undefined
  private armedAt = Number.POSITIVE_INFINITY

  readonly simulator: Simulator.Simulator<Fault>
  readonly stdout: Queue.Queue<Transport.Line, Cause.Done>
  readonly clock: Clock.Clock
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.Fiber<A, E>
  readonly stderrLimit: number
  constructor(
    simulator: Simulator.Simulator<Fault>,
    stdout: Queue.Queue<Transport.Line, Cause.Done>,
    clock: Clock.Clock,
    run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.Fiber<A, E>,
    stderrLimit: number
  ) {
    this.simulator = simulator
    this.stdout = stdout
    this.clock = clock
    this.run = run
    this.stderrLimit = stderrLimit
  }

  now(): number {
    return this.clock.currentTimeMillisUnsafe()
  }

  /** Feeds one input to the simulator, then hands out what it did. */
  input(f: (now: number) => void): void {
    if (this.status !== undefined) return
    f(this.now())
    this.drain()
  }

  /**
   * Hands out everything the simulator does now, then sleeps until its next wake. Re-entrant: an output may wake a
   * fiber on this stack that writes again, and the outer loop picks up what that caused.
   */
  drain(): void {
    if (this.draining) {
      this.again = true
      return
    }
    this.draining = true
    try {
      let budget = drainBudget
      do {
        this.again = false
        const now = this.now()
        let out = this.simulator.poll(now)
        while (out !== undefined) {
          this.deliver(out)
          if (this.status !== undefined) return
          if (--budget === 0) return this.resume(Effect.yieldNow)
          out = this.simulator.poll(now)
        }
      } while (this.again)
    } finally {
      this.draining = false
    }
    this.arm()
  }

  emit(line: Transport.Line): void {
    if (this.status !== undefined) return
    this.emitted.push(line)
    Queue.offerUnsafe(this.stdout, line)
  }

  finish(status: Transport.ExitStatus): void {
    if (this.status !== undefined) return
    this.status = status
    this.timer?.interruptUnsafe()
    this.timer = undefined
    Queue.endUnsafe(this.stdout)
    Deferred.doneUnsafe(this.exited, Effect.succeed(status))
  }

  private deliver(out: Simulator.Output): void {
    switch (out._tag) {
      case "Stdout":
        return this.emit(Transport.Line.Text({ text: out.line }))
      case "TooLong":
        return this.emit(Transport.Line.TooLong({ length: out.length, limit: out.limit, prefix: out.prefix }))
      case "Stderr": {
        this.stderr = (this.stderr + out.text).slice(-this.stderrLimit)
        return
      }
      case "Exit":
        return this.finish(
          out.status._tag === "Exited"
            ? Transport.ExitStatus.Exited({ code: out.status.code })
            : Transport.ExitStatus.Signaled({ signal: out.status.signal })
        )
    }
  }

  /** Sleeps until the simulator's next wake. A timer armed for later is replaced; one armed earlier stays. */
  private arm(): void {
    const next = this.simulator.nextWake()
    if (next >= this.armedAt) return
    if (next === Number.POSITIVE_INFINITY) return
    this.resume(Effect.sleep(Math.max(0, next - this.now())), next)
  }

  private resume(wait: Effect.Effect<void>, at = this.now()): void {
    this.timer?.interruptUnsafe()
    this.armedAt = at
    this.timer = this.run(Effect.andThen(wait, this.tick))
  }

  private readonly tick: Effect.Effect<void> = Effect.sync(() => {
    this.timer = undefined
    this.armedAt = Number.POSITIVE_INFINITY
    this.drain()
  })
}

/** Starts a simulated process in the current scope; closing the scope is its teardown (SIGTERM, then SIGKILL). */
export const open = Effect.fnUntraced(function*<Fault>(
  factory: Simulator.Factory<Fault>,
  spec: Transport.LaunchSpec,
  options: Options
) {
  const clock = yield* Clock.Clock
  const run = yield* FiberSet.makeRuntime<never>()
  const proc = new SimulatedProcess(
    factory(launchOf(spec, 40_000 + options.index), clock.currentTimeMillisUnsafe()),
    yield* Queue.unbounded<Transport.Line, Cause.Done>(),
    clock,
    run,
    options.stderrLimit
  )
  proc.drain()

  // Added after the fibers' runtime, so it runs first: the simulator keeps running during the grace.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      proc.tornDown = true
      proc.inputEnded = true
      proc.input((now) => proc.simulator.signal(now, "SIGTERM"))
      if (proc.status === undefined) {
        // A process that ignores SIGTERM keeps running (and may still exit by itself) until the grace is over.
        yield* Deferred.await(proc.exited).pipe(
          Effect.timeoutOrElse({ duration: options.termGrace, orElse: () => Effect.void })
        )
        proc.input((now) => proc.simulator.signal(now, "SIGKILL"))
      }
      proc.finish(Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
    })
  )

  const connection: MockConnection<Fault> = {
    index: options.index,
    spec,
    pid: Option.none(),
    write: Transport.writeFromCallback((line, done) => {
      if (proc.status !== undefined || proc.tornDown) {
        return done(new TetherError.TransportWriteError({ reason: "EPIPE: the process has exited" }))
      }
      if (proc.inputEnded) return done(new TetherError.TransportWriteError({ reason: "stdin is closed" }))
      proc.writtenLines.push(line)
      proc.input((now) => {
        for (const part of line.split("\n")) proc.simulator.write(now, part)
      })
      done(undefined)
    }),
    endInput: Effect.sync(() => {
      if (proc.inputEnded) return
      proc.inputEnded = true
      proc.input((now) => proc.simulator.endInput(now))
    }),
    stdout: Stream.fromQueue(proc.stdout),
    stderrTail: Effect.sync(() => proc.stderr),
    exit: Deferred.await(proc.exited),
    exitStatus: Effect.sync(() => Option.fromUndefinedOr(proc.status)),
    written: Effect.sync(() => proc.writtenLines.map((line) => Option.getOrElse(Json.parseJson(line), () => line))),
    writtenLines: Effect.sync(() => proc.writtenLines.slice()),
    emitted: Effect.sync(() => proc.emitted.slice()),
    frames: Effect.sync(() =>
      proc.emitted.flatMap((line) => line._tag === "Text" ? Option.toArray(Json.parseJson(line.text)) : [])
    ),
    stdinEnded: Effect.sync(() => proc.inputEnded),
    isAlive: Effect.sync(() => proc.status === undefined && !proc.tornDown),
    inject: (line) =>
      Effect.sync(() => proc.emit(typeof line === "string" ? Transport.Line.Text({ text: line }) : line)),
    trigger: (fault) => Effect.sync(() => proc.input((now) => proc.simulator.trigger(now, fault)))
  }
  return connection
})
