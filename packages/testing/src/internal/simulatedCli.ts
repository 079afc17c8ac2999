/**
 * What every simulated CLI has in common, whatever its protocol: the {@link Simulator.Simulator} contract over a task
 * scheduler (`tasks.ts`), stdin as a mailbox, the process's end, a turn that can be stalled, and its timing in
 * milliseconds. `claudeSimulator.ts` and `codexSimulator.ts` extend it with their protocol.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import type * as Simulator from "../Simulator.ts"
import { Mailbox, never, Scheduler, type Task } from "./tasks.ts"

/** A duration as milliseconds. */
export const millis = (duration: Duration.Input): number => Duration.toMillis(Duration.fromInputUnsafe(duration))

/** A script's timing, every duration in milliseconds. */
export type Millis<Timing> = { readonly [K in keyof Timing]: number }

/** A script's timing in milliseconds. */
export const toMillis = <Timing extends { readonly [K in keyof Timing]: Duration.Input }>(
  timing: Timing
): Millis<Timing> =>
  Object.fromEntries(
    Object.entries(timing).map(([key, value]) => [key, millis(value as Duration.Input)])
  ) as unknown as Millis<Timing>

/** A simulated CLI process: the inputs of the simulator contract, and what its protocol needs of a process. */
export abstract class SimulatedCli<Fault> implements Simulator.Simulator<Fault> {
  protected readonly sched: Scheduler<Simulator.Output>
  /** The lines the host wrote, ended at stdin's EOF. */
  protected readonly stdin = new Mailbox<string>()
  /** Set once the process has exited (it ignores every input) or hangs (it ignores every input but a signal). */
  protected ended: "exited" | "hung" | undefined = undefined
  /** Until when the running turn is stalled: a time, forever, or not at all. */
  protected stall: number | "forever" | undefined = undefined

  constructor(now: number) {
    this.sched = new Scheduler(now)
  }

  write(now: number, line: string): void {
    if (this.ended !== undefined) return
    this.sched.advance(now)
    this.sched.offer(this.stdin, line)
  }

  endInput(now: number): void {
    if (this.ended !== undefined) return
    this.sched.advance(now)
    this.sched.end(this.stdin)
  }

  abstract signal(now: number, signal: Simulator.Signal): void

  trigger(now: number, fault: Fault): void {
    if (this.ended !== undefined) return
    this.sched.advance(now)
    this.applyFault(fault)
  }

  poll(now: number): Simulator.Output | undefined {
    return this.sched.poll(now)
  }

  nextWake(): number {
    return this.sched.nextWake()
  }

  /** A fault now (from the script's options, a step of a turn, or a test). */
  protected abstract applyFault(fault: Fault): void

  /** The process ends: its exit is its last output, and nothing runs after it. */
  protected exit(status: Simulator.ExitStatus): void {
    this.sched.emit({ _tag: "Exit", status })
    this.ended = "exited"
    this.sched.halt()
  }

  /** The running turn stops emitting for `duration` (forever when undefined); a longer stall already on stays. */
  protected stallFor(duration: Duration.Input | undefined): void {
    if (duration === undefined) {
      this.stall = "forever"
      return
    }
    const until = this.sched.now + millis(duration)
    const current = this.stall
    if (current !== "forever" && (current === undefined || current < until)) this.stall = until
  }

  /** A stalled turn waits here before each of its lines; answers to the host's requests and aborts do not. */
  protected *gate(): Task {
    while (true) {
      const stalled = this.stall
      if (stalled === undefined) return
      if (stalled === "forever") {
        yield never
        continue
      }
      if (this.sched.now >= stalled) {
        this.stall = undefined
        return
      }
      yield stalled - this.sched.now
    }
  }
}
