/**
 * Cooperative tasks for the simulators: plain synchronous generators stepped by a scheduler that owns the clock.
 *
 * A simulated CLI does several things at once (it reads stdin while a turn streams) and waits a lot (a reply takes
 * 60 ms, a permission waits for the host). Written as generators that yield what they wait for — a number of
 * milliseconds, a {@link Cell} to be filled, a {@link Mailbox} to take from — each stays a readable sequence of
 * steps, and the simulator stays sans-IO: nothing runs until the shell calls {@link Scheduler.poll} with the
 * current time, and {@link Scheduler.nextWake} says when that is next worth doing.
 *
 * Tasks run one at a time, earliest wake first and in the order they became ready on a tie; a running task keeps
 * the clock at its own wake time, so what it stamps (timestamps, durations) is when it woke, as under `TestClock`.
 * A task runs until it waits again; the outputs it produced meanwhile are handed out one by one before the next
 * task steps, which is how a shell's backpressure reaches a long stream.
 *
 * @internal
 */

/** What a task waits for. */
export type Wait = number | Cell<unknown> | Mailbox<unknown>

/** A task: a generator that yields what it waits for and is resumed with what that gave. */
export type Task<A = void> = Generator<Wait, A, unknown>

/** A value that is set once; tasks waiting on it resume with it. */
export class Cell<A> {
  done = false
  value: A | undefined = undefined
  waiters: Array<Fiber> | undefined = undefined
}

/** What {@link take} gives once a mailbox has ended and is empty. */
export const End: unique symbol = Symbol.for("@tether/testing/Simulator/End")

/** A queue of values; a task taking from an empty one waits. */
export class Mailbox<A> {
  readonly items: Array<A> = []
  ended = false
  waiter: Fiber | undefined = undefined
}

const blocked: unique symbol = Symbol.for("@tether/testing/Simulator/blocked")

/**
 * Waits `millis` milliseconds; no time at all is no wait (as `Effect.sleep(0)`). A task yields `0` itself to let
 * the other tasks ready now run first.
 */
export function* sleep(millis: number): Task {
  if (millis > 0) yield millis
}

/** Waits until `cell` is set, and gives its value. */
export function* wait<A>(cell: Cell<A>): Task<A> {
  return (yield cell) as A
}

/** Takes the next value of `mailbox`, waiting for one; {@link End} once it has ended and is empty. */
export function* take<A>(mailbox: Mailbox<A>): Task<A | typeof End> {
  return (yield mailbox) as A | typeof End
}

/** A cell that is never set: waiting on it is waiting forever (until the task is stopped). */
export const never: Cell<never> = new Cell()

/** A running task and where it waits. */
export class Fiber<A = unknown> {
  wake = 0
  seq = 0
  resume: unknown = undefined
  /** Woken by a value offered to this mailbox: the task takes it when it runs (unless it was cleared meanwhile). */
  retake: Mailbox<unknown> | undefined = undefined
  done = false
  /** Set when the task returns, or with the value it was stopped with. */
  readonly exit = new Cell<A | undefined>()
  readonly task: Task<A>
  constructor(task: Task<A>) {
    this.task = task
  }
}

/**
 * Runs the tasks of one simulated process and collects what they output.
 */
export class Scheduler<Out> {
  /** The current time: while a task runs, the time it woke at. */
  now: number
  private seq = 0
  private fibers: Array<Fiber> = []
  private halted = false
  private readonly outbox: Array<Out> = []
  private head = 0

  constructor(now: number) {
    this.now = now
  }

  /** Starts a task; it first runs at the current time, after the tasks already ready. */
  fork<A>(task: Task<A>): Fiber<A> {
    const fiber = new Fiber(task)
    if (this.halted) {
      fiber.done = true
      return fiber
    }
    this.ready(fiber, undefined)
    this.fibers.push(fiber)
    return fiber
  }

  /** Stops a task where it waits; whoever waits for it resumes with `value`. */
  stop<A>(fiber: Fiber<A>, value: A | undefined): void {
    if (fiber.done) return
    this.finish(fiber, value)
  }

  /** Sets a cell (once) and wakes whoever waits on it. */
  set<A>(cell: Cell<A>, value: A): void {
    if (cell.done) return
    cell.done = true
    cell.value = value
    const waiters = cell.waiters
    if (waiters === undefined) return
    cell.waiters = undefined
    for (const fiber of waiters) if (!fiber.done) this.ready(fiber, value)
  }

  /**
   * Adds a value to a mailbox and wakes its taker, which takes it when it runs: until then the value is in the
   * mailbox (a {@link clear} still removes it), as in an Effect queue.
   */
  offer<A>(mailbox: Mailbox<A>, value: A): void {
    if (mailbox.ended) return
    mailbox.items.push(value)
    this.wakeTaker(mailbox)
  }

  /** Ends a mailbox: its taker gets {@link End} once the values left are taken. */
  end<A>(mailbox: Mailbox<A>): void {
    if (mailbox.ended) return
    mailbox.ended = true
    this.wakeTaker(mailbox)
  }

  /** Removes every value waiting in a mailbox and returns them. */
  clear<A>(mailbox: Mailbox<A>): Array<A> {
    return mailbox.items.splice(0)
  }

  /** Hands an output to the shell (after the ones before it). */
  emit(out: Out): void {
    this.outbox.push(out)
  }

  /** Drops the outputs not handed out yet (a process killed by a signal never prints them). */
  discard(): void {
    this.outbox.length = 0
    this.head = 0
  }

  /** Stops every task for good; outputs already emitted (and emitted later, like an exit) are still handed out. */
  halt(): void {
    this.halted = true
    for (const fiber of this.fibers) fiber.done = true
    this.fibers = []
  }

  /** The next output due at `now`, running tasks until one is produced or every task waits. */
  poll(now: number): Out | undefined {
    while (this.head === this.outbox.length) {
      if (this.head > 0) {
        this.outbox.length = 0
        this.head = 0
      }
      const fiber = this.next(now)
      if (fiber === undefined) {
        if (now > this.now) this.now = now
        return undefined
      }
      this.step(fiber)
    }
    const out = this.outbox[this.head]
    this.outbox[this.head++] = undefined as Out
    return out
  }

  /** When a task next wakes by itself: now when outputs or ready tasks are waiting, `Infinity` when none will. */
  nextWake(): number {
    if (this.head < this.outbox.length) return this.now
    let wake = Number.POSITIVE_INFINITY
    for (const fiber of this.fibers) if (fiber.wake < wake) wake = fiber.wake
    return wake
  }

  /** Brings the clock to `now` before an input, so that what the input causes is stamped with it. */
  advance(now: number): void {
    if (now > this.now) this.now = now
  }

  // --- internals ---------------------------------------------------------------------------------------------

  private wakeTaker(mailbox: Mailbox<unknown>): void {
    const waiter = mailbox.waiter
    if (waiter === undefined) return
    mailbox.waiter = undefined
    if (waiter.done) return
    waiter.retake = mailbox
    this.ready(waiter, undefined)
  }

  private ready(fiber: Fiber, value: unknown): void {
    fiber.wake = this.now
    fiber.seq = ++this.seq
    fiber.resume = value
  }

  private next(now: number): Fiber | undefined {
    let best: Fiber | undefined
    for (const fiber of this.fibers) {
      if (fiber.wake > now) continue
      if (best === undefined || fiber.wake < best.wake || (fiber.wake === best.wake && fiber.seq < best.seq)) {
        best = fiber
      }
    }
    return best
  }

  private step(fiber: Fiber): void {
    if (fiber.wake > this.now) this.now = fiber.wake
    let value = fiber.resume
    fiber.resume = undefined
    const retake = fiber.retake
    if (retake !== undefined) {
      fiber.retake = undefined
      value = this.available(retake)
      if (value === blocked) {
        fiber.wake = Number.POSITIVE_INFINITY
        retake.waiter = fiber
        return
      }
    }
    while (true) {
      const result = fiber.task.next(value)
      if (fiber.done) return
      if (result.done === true) return this.finish(fiber, result.value)
      const wait = result.value
      if (typeof wait === "number") {
        // A sleep, or with no time a yield point: the task goes after the others ready now.
        fiber.wake = this.now + (wait > 0 ? wait : 0)
        fiber.seq = ++this.seq
        return
      }
      const available = this.available(wait)
      if (available === blocked) {
        fiber.wake = Number.POSITIVE_INFINITY
        if (wait instanceof Cell) (wait.waiters ??= []).push(fiber)
        else wait.waiter = fiber
        return
      }
      // What is already there is taken without waiting, as an Effect fiber takes from a full queue: the task goes
      // on, after handing out what it printed so far if anything.
      if (this.head < this.outbox.length) {
        fiber.wake = this.now
        fiber.seq = 0
        fiber.resume = available
        return
      }
      value = available
    }
  }

  private available(wait: Cell<unknown> | Mailbox<unknown>): unknown {
    if (wait instanceof Cell) return wait.done ? wait.value : blocked
    if (wait.items.length > 0) return wait.items.shift()
    return wait.ended ? End : blocked
  }

  private finish(fiber: Fiber, value: unknown): void {
    fiber.done = true
    fiber.wake = Number.POSITIVE_INFINITY
    const index = this.fibers.indexOf(fiber)
    if (index >= 0) this.fibers.splice(index, 1)
    this.set(fiber.exit, value)
  }
}
