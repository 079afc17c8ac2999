/**
 * The one Effect driver of a session: the I/O and the waiting around the pure machine (`machine.ts`).
 *
 * - one reader fiber feeds every stdout line to the machine, a chunk at a time;
 * - the writes take the machine's outbox a line at a time and tell the machine when each finished: the machine's
 *   `Flush` starts the next write on the spot, so a prompt reaches the pipe within its sender's step, and the end of
 *   one write starts the next (through the callback behind the connection's `write` when it has one: no fiber per
 *   write);
 * - one timer fiber sleeps until the machine's next deadline, on `Clock` (so `TestClock` drives it);
 * - the Deferreds callers wait on (turns, controls, interrupts, the handshake) are completed from the machine's
 *   outputs; policy and host-request fibers feed their answers back as inputs;
 * - the scope's release ends stdin, waits the close grace, tears the process tree down and reaps;
 * - the session's spans and metrics (`telemetry.ts`) are kept at the moments the outputs mark (a turn settled, a
 *   control answered, a permission resolved, the session ready or retired), synchronously: no Effect runs for them.
 *
 * Every machine call goes through `step`, which drains the machine's outputs in order. Effects run by the outputs
 * may resume fibers synchronously (a settled turn wakes its waiter on this stack), and those may call the machine
 * again: `drain` is re-entrant and keeps the machine's order.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as EventLog from "../../EventLog.ts"
import type * as Permission from "../../Permission.ts"
import type * as Provider from "../../Provider.ts"
import type { ControlError, InterruptOutcome, SendError, Session } from "../../Session.ts"
import { isTerminal, type SessionEvent } from "../../SessionEvent.ts"
import {
  HandshakeFailed,
  type InterruptReason,
  InvalidConfig,
  type SpawnError,
  StartupTimeout,
  TransportWriteError
} from "../../TetherError.ts"
import type { Timeouts } from "../../Timeouts.ts"
import * as Transport from "../../Transport.ts"
import type { AnyTurnError, Phase, Prompt, ProviderTurnError, Turn, TurnResult } from "../../Turn.ts"
import { validate as validateTimeouts } from "../timeouts.ts"
import { ForEachEvent, type HasForEachEvent } from "../turn.ts"
import * as Machine from "./machine.ts"
import * as Telemetry from "./telemetry.ts"

/** What the driver needs to run a session. */
export interface Options {
  readonly provider: Provider.ProtocolMachine
  readonly launch: Transport.LaunchSpec
  readonly timeouts: Timeouts
  readonly policy: Permission.Policy
  /** Answers the CLI's other requests (hook callbacks, MCP messages); bounded by the control timeout or the turn. */
  readonly handle: (request: unknown) => Effect.Effect<Provider.Reply>
  readonly queue: boolean
  readonly queueCapacity: number
  readonly eventRing: number
  readonly subscriberBuffer: number
  readonly makeId: () => string
  /** The model the host asked for, for the session's spans. */
  readonly model: string | undefined
  /** `Session.conversationFile`. */
  readonly conversationFile: (path: string, conversationId: string) => boolean
}

/** The driver's state for one turn (its handle reads it); its telemetry is the trace it extends. */
interface TurnState extends Telemetry.TurnTrace {
  readonly turn: Machine.Turn<TurnState>
  readonly done: Deferred.Deferred<TurnResult, AnyTurnError>
  written: Deferred.Deferred<void> | undefined
  isWritten: boolean
  /** The turn's outcome once settled: its handle's `result` is then this exit, with nothing to wait for. */
  exit: Exit.Exit<TurnResult, AnyTurnError> | undefined
  /** What the turn's own event stream reads of the session's log. */
  readonly view: TurnView
}

/**
 * What a turn's own event stream reads of the session's log: the events after the turn was sent that are the turn's,
 * up to its terminal one. Made once per turn, its methods on the prototype: reading `turn.events` allocates no
 * closure, and the stream holds this and not the turn (whatever a stream reaches can survive minor GCs until the
 * next full one: see docs/performance.md).
 */
class TurnView implements EventLog.View<SessionEvent> {
  readonly turnId: string
  /** Where the stream starts: after the log's position when the turn was sent. */
  readonly from: { readonly after: number }
  /** The seq of the turn's terminal event, once published. */
  seq: number | undefined = undefined
  constructor(turnId: string, after: number) {
    this.turnId = turnId
    this.from = { after }
  }
  keep(event: SessionEvent): boolean {
    return event.turnId === this.turnId
  }
  last(event: SessionEvent): boolean {
    return isTerminal(event)
  }
  lastSeq(): number | undefined {
    return this.seq
  }
}

/** A control request waiting for its answer. */
interface PendingControl {
  readonly deferred: Deferred.Deferred<unknown, ControlError>
  readonly trace: Telemetry.ControlTrace
}

/** The session as the public `Session` module exposes it, its provider's turn errors as the neutral shape. */
export type Driven = Session<TurnResult, ProviderTurnError>

const millis = (duration: Duration.Duration): number => Duration.toMillis(duration)

/** A write that threw is a write that failed: the session is retired, not left waiting on it. */
const writeThrew = (defect: unknown): TransportWriteError =>
  new TransportWriteError({ reason: `the write threw: ${String(defect)}` })

/**
 * A turn's handle: an object with accessors, its effects and stream built when read (most hosts read `result`
 * alone).
 */
class TurnHandle implements Turn<TurnResult, ProviderTurnError>, HasForEachEvent {
  readonly id: string
  readonly #state: TurnState
  readonly #driver: Driver
  constructor(state: TurnState, driver: Driver) {
    this.id = state.turn.id
    this.#state = state
    this.#driver = driver
  }
  get result(): Effect.Effect<TurnResult, AnyTurnError> {
    // A settled turn's result is its exit: nothing to wait for, nothing to interrupt.
    return this.#state.exit ?? this.#driver.awaitTurn(this.#state)
  }
  get settled(): Effect.Effect<Exit.Exit<TurnResult, AnyTurnError>> {
    const exit = this.#state.exit
    return exit !== undefined ? Effect.succeed(exit) : Effect.exit(Deferred.await(this.#state.done))
  }
  get phase(): Effect.Effect<Phase> {
    const turn = this.#state.turn
    return Effect.sync(() => turn.phase)
  }
  get interrupt(): Effect.Effect<void> {
    return Effect.asVoid(this.#driver.interruptTurn(this.#state.turn, "host"))
  }
  get events(): Stream.Stream<EventLog.Delivery<SessionEvent>, EventLog.ReplayUnavailable> {
    const view = this.#state.view
    return this.#driver.log.stream(view.from, view)
  }
  /** `Turn.forEachEvent` on this handle: the same view of the log as `events`, read without a stream run. */
  [ForEachEvent]<E, R>(
    f: (delivery: EventLog.Delivery<SessionEvent>) => Effect.Effect<void, E, R>
  ): Effect.Effect<void, EventLog.ReplayUnavailable | E, R> {
    const view = this.#state.view
    return this.#driver.log.forEach(view.from, view, f)
  }
}

class Driver {
  readonly machine: Machine.Machine<TurnState>
  private draining = false
  /** A line is being written (the machine holds it in flight until its write ends). */
  private writing = false
  /** `pump` is taking lines (a write that ends before its call returns goes on in its loop). */
  private pumping = false
  /** A `Flush` that may drop its line waits for the next tick before the line is taken. */
  private flushLater = false
  /** Writes still report their end: false once release has abandoned the one in flight. */
  private writesOpen = true
  /** Events published by the reader since it last let other fibers run. */
  private sinceYield = 0
  private readonly yieldBudget: number
  private timer: Fiber.Fiber<void> | undefined = undefined
  private armedAt = Number.POSITIVE_INFINITY
  private readonly controls = new Map<number, PendingControl>()
  private readonly interrupts = new Map<number, Deferred.Deferred<InterruptOutcome>>()
  private readonly running = new Map<string, Fiber.Fiber<unknown, unknown>>()
  readonly ready = Deferred.makeUnsafe<unknown, HandshakeFailed | StartupTimeout>()
  private ended = false

  readonly options: Options
  readonly clock: Clock.Clock
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.Fiber<A, E>
  readonly connection: Transport.Connection
  readonly log: EventLog.EventLog<SessionEvent>
  readonly teardown: Effect.Effect<void>
  readonly telemetry: Telemetry.Telemetry

  constructor(
    options: Options,
    clock: Clock.Clock,
    run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.Fiber<A, E>,
    connection: Transport.Connection,
    log: EventLog.EventLog<SessionEvent>,
    teardown: Effect.Effect<void>,
    telemetry: Telemetry.Telemetry
  ) {
    this.options = options
    this.clock = clock
    this.run = run
    this.connection = connection
    this.log = log
    this.teardown = teardown
    this.telemetry = telemetry
    this.yieldBudget = Math.max(1, Math.floor(options.subscriberBuffer / 4))
    // A connection whose `write` is not made of a callback: each write in a fiber of the session's (interrupted by
    // release).
    this.writeLine = Transport.writeCallbackOf(connection) ??
      ((line, done) =>
        void run(
          Effect.suspend(() => connection.write(line)).pipe(
            Effect.catchDefect((defect) => Effect.fail(writeThrew(defect))),
            Effect.matchEffect({
              onFailure: (error) => Effect.sync(() => done(error)),
              onSuccess: () => Effect.sync(() => done(undefined))
            })
          )
        ))
    const t = options.timeouts
    this.machine = new Machine.Machine<TurnState>(options.provider, {
      deadlines: {
        startup: millis(t.startup),
        control: millis(t.control),
        delivery: millis(t.delivery),
        ack: millis(t.ack),
        turn: millis(t.turn),
        stall: millis(t.stall),
        interrupt: millis(t.interrupt),
        permission: millis(t.permission)
      },
      queue: options.queue,
      queueCapacity: options.queueCapacity,
      makeId: options.makeId,
      ...Machine.logLimits
    })
  }

  now(): number {
    return this.clock.currentTimeMillisUnsafe()
  }

  // --- draining the machine ----------------------------------------------------------------------------------

  drain(): void {
    if (this.draining) return
    this.draining = true
    const machine = this.machine
    try {
      while (machine.outputs.length > 0 || machine.events.length > 0) {
        const events = machine.events
        const outputs = machine.outputs
        machine.drained()
        let published = 0
        for (let i = 0; i < outputs.length; i++) {
          const output = outputs[i]
          if (output.at > published) {
            this.publish(published === 0 && output.at === events.length ? events : events.slice(published, output.at))
            published = output.at
          }
          this.perform(output)
        }
        if (published < events.length) this.publish(published === 0 ? events : events.slice(published))
      }
    } finally {
      this.draining = false
    }
    this.arm()
  }

  private publish(events: ReadonlyArray<SessionEvent>): void {
    if (!this.ended) this.log.publishAllUnsafe(events)
  }

  private perform(output: Machine.Output<TurnState>): void {
    switch (output._tag) {
      case "Flush": {
        // A write is in flight, or lines are being taken: the next is taken when it ends.
        if (this.writing || this.pumping || this.flushLater) return
        if (output.deferred) {
          // A line that may be dropped is taken a tick later: an interrupt racing a result the reader already holds.
          this.flushLater = true
          this.run(this.pumpLater)
          return
        }
        this.pump()
        return
      }
      case "Settle": {
        const state = output.turn.handle!
        state.view.seq = this.latest()
        state.exit = output.exit
        const turn = output.turn
        if (turn.firstOutputAt !== undefined) this.telemetry.firstOutput(state, turn.firstOutputAt - turn.startedAt)
        Deferred.doneUnsafe(state.done, output.exit)
        this.telemetry.turnSettled(state, output.exit, this.now(), this.machine.sessionId)
        return
      }
      case "Written": {
        const state = output.turn.handle!
        state.isWritten = true
        if (state.written !== undefined) Deferred.doneUnsafe(state.written, Exit.void)
        return
      }
      case "ControlDone": {
        const pending = this.controls.get(output.ref)
        if (pending !== undefined) {
          this.controls.delete(output.ref)
          Deferred.doneUnsafe(pending.deferred, output.exit)
          this.telemetry.controlDone(pending.trace, output.exit, this.now())
        }
        return
      }
      case "InterruptDone": {
        const deferred = this.interrupts.get(output.waiter)
        if (deferred !== undefined) {
          this.interrupts.delete(output.waiter)
          Deferred.doneUnsafe(deferred, Exit.succeed(output.outcome))
        }
        return
      }
      case "Decide": {
        const active = this.machine.active
        this.telemetry.permissionRequested(
          output.request,
          active !== undefined && active.id === output.request.turnId ? active.handle!.span : undefined
        )
        return output.decided === true ? undefined : this.decide(output.request)
      }
      case "Handle":
        return this.handleRequest(output.requestId, output.request)
      case "StopDeciding":
      case "StopHandling": {
        const fiber = this.running.get(output.requestId)
        if (fiber !== undefined) {
          this.running.delete(output.requestId)
          fiber.interruptUnsafe()
        }
        return
      }
      case "Ready":
        this.telemetry.ready(this.now(), this.connection.pid)
        Deferred.doneUnsafe(this.ready, Exit.succeed(output.info))
        return
      case "StartFailed": {
        this.telemetry.startFailed(this.now())
        const ready = this.ready
        const cause = output.cause
        const reason = output.reason
        const stderrTail = output.stderrTail
        if (stderrTail !== undefined) {
          Deferred.doneUnsafe(ready, Exit.fail(new HandshakeFailed({ reason, stderrTail })))
        } else {
          const timeoutMillis = millis(this.options.timeouts.startup)
          this.run(Effect.flatMap(this.connection.stderrTail, (tail) =>
            Deferred.fail(
              ready,
              cause === "timeout"
                ? new StartupTimeout({ timeoutMillis, stderrTail: tail })
                : new HandshakeFailed({ reason, stderrTail: tail })
            )))
        }
        return
      }
      case "Teardown":
        this.telemetry.retired(output.reason, output.kind)
        this.run(this.teardown)
        return
      case "Log":
        this.run(output.level === "Error" ? Effect.logError(output.message) : Effect.logWarning(output.message))
        return
      case "PermissionWait":
        this.telemetry.permissionResolved(output.requestId, output.resolution, output.millis)
        return
      case "Ended":
        this.ended = true
        this.run(this.log.end)
        return
    }
  }

  private latest(): number {
    return this.log.latestSeqUnsafe()
  }

  // --- the timer ---------------------------------------------------------------------------------------------

  /** Sleeps until the machine's next deadline. A timer armed for later is replaced; one armed earlier stays. */
  private arm(): void {
    const next = this.machine.nextDeadline()
    if (next >= this.armedAt) return
    this.timer?.interruptUnsafe()
    if (next === Number.POSITIVE_INFINITY) {
      this.timer = undefined
      this.armedAt = next
      return
    }
    this.armedAt = next
    this.timer = this.run(Effect.andThen(Effect.sleep(Math.max(0, next - this.now())), this.tick))
  }

  private readonly tick: Effect.Effect<void> = Effect.sync(() => {
    this.timer = undefined
    this.armedAt = Number.POSITIVE_INFINITY
    this.machine.tick(this.now())
    this.drain()
  })

  // --- the writes ------------------------------------------------------------------------------------------

  /**
   * Takes the machine's outbox one line at a time while no write is in flight: each write's end tells the machine
   * (`written` or `writeFailed`) and takes the next. A write that ends before its call returns (a pipe that took the
   * line at once) goes on in this loop rather than recursing.
   */
  private pump(): void {
    if (this.pumping) return
    this.pumping = true
    try {
      while (!this.writing && this.writesOpen) {
        const line = this.machine.take(this.now())
        if (line === undefined) return
        // The write's delivery deadline now runs.
        this.arm()
        this.writing = true
        let returned = false
        let ended = false
        const done = (error: TransportWriteError | undefined) => {
          // A transport that reports a write twice must not end the next one.
          if (ended || !this.writesOpen) return
          ended = true
          this.writing = false
          if (error === undefined) this.step((now) => this.machine.written(now))
          else this.step((now) => this.machine.writeFailed(now, error.reason))
          if (returned) this.pump()
        }
        try {
          this.writeLine(line, done)
        } catch (defect) {
          done(writeThrew(defect))
        }
        returned = true
      }
    } finally {
      this.pumping = false
    }
  }

  private readonly pumpLater: Effect.Effect<void> = Effect.andThen(
    Effect.yieldNow,
    Effect.sync(() => {
      this.flushLater = false
      this.pump()
    })
  )

  /** Starts one write; `done` is called once when it ends, possibly before this returns. */
  private readonly writeLine: Transport.WriteCallback

  /**
   * Release ends the writes: one still in flight is abandoned half-way (the CLI may or may not have the line), and
   * whatever it reports later is ignored.
   */
  endWrites(): void {
    if (!this.writesOpen) return
    this.writesOpen = false
    if (this.writing) this.step((now) => this.machine.abandoned(now))
  }

  // --- policies and host requests ----------------------------------------------------------------------------

  private decide(request: Permission.PermissionRequest): void {
    const requestId = request.requestId
    const fiber = this.run(
      Effect.suspend(() => this.options.policy(request)).pipe(
        Effect.matchCauseEffect({
          // Interrupted: by the machine, which no longer waits for it (then `policyFailed` is a no-op), or by
          // itself (a policy that ends with `Effect.interrupt`), which is a policy that did not decide: denied.
          onFailure: (cause) =>
            (Cause.hasInterruptsOnly(cause)
              ? Effect.void
              : Effect.logWarning("permission policy failed; denying", cause)).pipe(
                Effect.andThen(Effect.sync(() => this.step((now) => this.machine.policyFailed(now, requestId))))
              ),
          onSuccess: (decision) => Effect.sync(() => this.step((now) => this.machine.decided(now, requestId, decision)))
        }),
        Effect.ensuring(Effect.sync(() => this.running.delete(requestId)))
      )
    )
    if (fiber.pollUnsafe() === undefined) this.running.set(requestId, fiber)
  }

  private handleRequest(requestId: string, request: unknown): void {
    const fiber = this.run(
      Effect.suspend(() => this.options.handle(request)).pipe(
        Effect.matchCauseEffect({
          // Interrupted: by the machine, which no longer waits for it (then `handled` is a no-op), or by itself (a
          // handler that ends with `Effect.interrupt`), which must still answer the CLI, or the request (and a turn
          // bound to it, whose stall clock it suspends) would wait for the turn's deadline.
          onFailure: (cause) =>
            (Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logWarning("the host's handler failed", cause)).pipe(
              Effect.andThen(
                Effect.sync(() =>
                  this.step((now) =>
                    this.machine.handled(now, requestId, {
                      _tag: "Error",
                      message: Cause.hasInterruptsOnly(cause)
                        ? "the host's handler was interrupted"
                        : "the host's handler failed"
                    })
                  )
                )
              )
            ),
          onSuccess: (reply) => Effect.sync(() => this.step((now) => this.machine.handled(now, requestId, reply)))
        }),
        Effect.ensuring(Effect.sync(() => this.running.delete(requestId)))
      )
    )
    if (fiber.pollUnsafe() === undefined) this.running.set(requestId, fiber)
  }

  /** Runs one machine input and drains its outputs. */
  step(input: (now: number) => void): void {
    input(this.now())
    this.drain()
  }

  // --- the reader --------------------------------------------------------------------------------------------

  /**
   * Feeds a chunk of stdout lines to the machine. After every `yieldBudget` events published it lets other fibers
   * run (the subscribers' wake-ups are queued before its continuation), so that a burst of lines cannot push a
   * subscriber that keeps up out of its window: lag is for one that stays behind, not one that was not scheduled.
   */
  readonly onLines = (lines: ReadonlyArray<Transport.Line>): Effect.Effect<void> => this.readFrom(lines, 0)

  private readFrom(lines: ReadonlyArray<Transport.Line>, start: number): Effect.Effect<void> {
    const machine = this.machine
    const now = this.now()
    let i = start
    while (i < lines.length) {
      const line = lines[i++]
      if (line._tag === "Text") machine.receive(now, line.text)
      else machine.tooLong(now, line.length, line.limit, line.prefix)
      if (this.sinceYield + machine.events.length >= this.yieldBudget) {
        this.drain()
        this.sinceYield = 0
        return i < lines.length
          ? Effect.andThen(Effect.yieldNow, Effect.suspend(() => this.readFrom(lines, i)))
          : Effect.yieldNow
      }
    }
    this.sinceYield += machine.events.length
    this.drain()
    return Effect.void
  }

  /**
   * Stdout ended. A CLI closes it when it exits, and the exit is then known or about to be: it gets the close grace
   * to show up (a busy event loop may run the transport's bound on the end of stdout before the exit event). A
   * process still running after that closed its stdout and goes on: the machine retires the session.
   */
  readonly onStdoutEnd: Effect.Effect<void> = Effect.suspend(() =>
    Effect.flatMap(
      Effect.timeoutOption(this.connection.exit, this.options.timeouts.closeGrace),
      (status) =>
        Option.isSome(status) ? Effect.void : Effect.sync(() => this.step((now) => this.machine.stdoutEnded(now)))
    )
  )

  readonly onExit: Effect.Effect<void> = Effect.suspend(() =>
    Effect.flatMap(
      this.connection.exit,
      (status) =>
        Effect.flatMap(this.connection.stderrTail, (stderrTail) =>
          Effect.sync(() => this.step((now) => this.machine.exited(now, status, stderrTail))))
    )
  )

  // --- host commands -----------------------------------------------------------------------------------------

  /** Starts a turn for the fiber `sender` (whose span, if any, parents the turn's), or says why it cannot. */
  private start(
    prompt: Prompt,
    queue: boolean | undefined,
    interruptOnCancel: boolean,
    sender: Fiber.Fiber<unknown, unknown>
  ): TurnState | SendError {
    const machine = this.machine
    const startSeq = this.latest()
    const now = this.now()
    const turn = machine.send(now, prompt, queue, interruptOnCancel)
    if (!(turn instanceof Machine.Turn)) {
      this.drain()
      return turn
    }
    const trace = this.telemetry.turnSent(turn.id, now, sender.cache.span)
    const state: TurnState = {
      turn,
      done: Deferred.makeUnsafe(),
      written: undefined,
      isWritten: turn.phase === "queued",
      exit: undefined,
      view: new TurnView(turn.id, startSeq),
      sentAt: trace.sentAt,
      span: trace.span,
      firstOutputMillis: undefined
    }
    turn.handle = state
    this.drain()
    return state
  }

  /**
   * Sends a prompt for the fiber `sender`: the turn's handle once the prompt is written (or queued). The handler that
   * interrupts the turn when the sender stops waiting is in place before the turn starts, so an interrupt at any
   * point finds either no turn or the handler.
   */
  send(
    prompt: Prompt,
    queue: boolean | undefined,
    interruptOnCancel: boolean,
    sender: Fiber.Fiber<unknown, unknown>
  ): Effect.Effect<Turn<TurnResult, ProviderTurnError>, SendError> {
    let started: Machine.Turn<TurnState> | undefined
    // The sender stopped waiting before the CLI took the prompt: nobody holds the turn. It is interrupted (which
    // retires the session when the CLI has not acknowledged it: delivery is uncertain).
    return this.interruptingOnCancel(
      () => started,
      Effect.suspend((): Effect.Effect<Turn<TurnResult, ProviderTurnError>, SendError> => {
        const state = this.start(prompt, queue, interruptOnCancel, sender)
        if ("_tag" in state) return Effect.fail(state)
        const handle = new TurnHandle(state, this)
        if (state.isWritten) return Effect.succeed(handle)
        started = state.turn
        state.written = Deferred.makeUnsafe()
        return Effect.as(Deferred.await(state.written), handle)
      })
    )
  }

  /**
   * Sends a prompt for the fiber `sender` and waits for the turn's result: `send` then `result` in one wait (the
   * result comes after the write, and a caller that stops waiting interrupts the turn either way). The handler is in
   * place before the turn starts, as in `send`.
   */
  sendAndWait(
    prompt: Prompt,
    queue: boolean | undefined,
    interruptOnCancel: boolean,
    sender: Fiber.Fiber<unknown, unknown>
  ): Effect.Effect<TurnResult, SendError | AnyTurnError> {
    let started: Machine.Turn<TurnState> | undefined
    return this.interruptingOnCancel(
      () => started,
      Effect.suspend((): Effect.Effect<TurnResult, SendError | AnyTurnError> => {
        const state = this.start(prompt, queue, interruptOnCancel, sender)
        if ("_tag" in state) return Effect.fail(state)
        started = state.turn
        return Deferred.await(state.done)
      })
    )
  }

  awaitTurn(state: TurnState): Effect.Effect<TurnResult, AnyTurnError> {
    const turn = state.turn
    return this.interruptingOnCancel(() => turn, Deferred.await(state.done))
  }

  /**
   * `wait`, and the turn `turnOf` names (if any yet) interrupted if its caller stops waiting, unless the turn was
   * sent to outlive it.
   */
  private interruptingOnCancel<A, E>(
    turnOf: () => Machine.Turn<TurnState> | undefined,
    wait: Effect.Effect<A, E>
  ): Effect.Effect<A, E> {
    return Effect.onInterrupt(wait, () =>
      Effect.sync(() => {
        const turn = turnOf()
        if (turn !== undefined && turn.interruptOnCancel && !turn.finished) this.interruptTurnUnsafe(turn, "host")
      }))
  }

  private interruptTurnUnsafe(turn: Machine.Turn<TurnState>, reason: InterruptReason): void {
    this.machine.interrupt(this.now(), turn, reason)
    this.drain()
  }

  interruptTurn(turn: Machine.Turn<TurnState>, reason: InterruptReason): Effect.Effect<InterruptOutcome> {
    return Effect.suspend(() => {
      const outcome = this.machine.interrupt(this.now(), turn, reason)
      return this.awaitInterrupt(outcome)
    })
  }

  readonly interruptActive: Effect.Effect<InterruptOutcome> = Effect.suspend(() =>
    this.awaitInterrupt(this.machine.interruptActive(this.now(), "host"))
  )

  private awaitInterrupt(
    outcome: InterruptOutcome | { readonly waiter: number }
  ): Effect.Effect<InterruptOutcome> {
    if (typeof outcome === "string") {
      this.drain()
      return Effect.succeed(outcome)
    }
    const deferred = Deferred.makeUnsafe<InterruptOutcome>()
    this.interrupts.set(outcome.waiter, deferred)
    this.drain()
    // The settlement is the machine's: it completes even if this caller stops waiting.
    return Deferred.await(deferred)
  }

  /** Sends a control request for the fiber `sender` (whose span, if any, parents the control's). */
  control(request: unknown, sender: Fiber.Fiber<unknown, unknown>): Effect.Effect<unknown, ControlError> {
    const now = this.now()
    const trace = this.telemetry.controlSent(request, now, sender.cache.span)
    const ref = this.machine.control(now, request)
    if (typeof ref !== "number") {
      this.telemetry.controlDone(trace, Exit.fail(ref), now)
      this.drain()
      return Effect.fail(ref)
    }
    const deferred = Deferred.makeUnsafe<unknown, ControlError>()
    this.controls.set(ref, { deferred, trace })
    this.drain()
    return Deferred.await(deferred)
  }

  answerPermission(
    requestId: string,
    verdict: Permission.Verdict
  ): Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved> {
    return Effect.suspend(() => {
      // One synchronous step: the answer is queued for the writer before this returns, so a caller interrupted
      // afterwards cannot leave the request resolved but unanswered.
      const error = this.machine.answerPermission(this.now(), requestId, verdict)
      this.drain()
      return error === undefined ? Effect.void : Effect.fail(error)
    })
  }
}

/**
 * Runs a session in `sessionScope`: opens the transport, starts the reader and the handshake, and waits for it
 * (bounded by the machine's startup deadline). Closing the scope releases it.
 */
export const make = Effect.fnUntraced(function*(options: Options, sessionScope: Scope.Closeable) {
  const problems = validateTimeouts(options.timeouts)
  if (problems.length > 0) return yield* new InvalidConfig({ problems })
  const transport = yield* Transport.Transport
  const clock = yield* Clock.Clock
  const telemetry = yield* Telemetry.make(clock, options.provider.capabilities().provider, options.model)
  let started: Machine.Machine<TurnState> | undefined = undefined
  // The first finalizer, so the last to run: the session's span ends once its process is gone (or never started).
  yield* Scope.addFinalizerExit(sessionScope, (exit) => Effect.sync(() => telemetry.ended(exit, started)))
  // Background fibers and the connection live in child scopes so that release can order them: graceful close
  // first, then the transport's teardown, then the fibers.
  const fibers = yield* Scope.fork(sessionScope, "parallel")
  const connectionScope = yield* Scope.fork(sessionScope, "sequential")
  const run = yield* FiberSet.makeRuntime<never>().pipe(Scope.provide(fibers))
  const log = yield* EventLog.make<SessionEvent>({
    ringSize: options.eventRing,
    subscriberBuffer: options.subscriberBuffer
  }).pipe(Scope.provide(fibers))
  const connection: Transport.Connection = yield* transport.open(options.launch, {
    termGrace: options.timeouts.termGrace
  }).pipe(Scope.provide(connectionScope)) as Effect.Effect<Transport.Connection, SpawnError>
  const teardown = Scope.close(connectionScope, Exit.void)
  const driver = new Driver(
    options,
    clock,
    run,
    connection,
    log,
    Effect.forkIn(teardown, sessionScope).pipe(Effect.asVoid),
    telemetry
  )
  const machine = driver.machine
  started = machine

  // The handshake's first lines are queued before the reader starts: the CLI prints nothing before its first stdin
  // line, and whatever it prints is read in the handshake's light.
  driver.step((now) => machine.start(now))
  run(
    Stream.runForEachArray(connection.stdout, driver.onLines).pipe(
      // A defect in the reader (a decoder that throws) must not leave a session that looks alive but reads
      // nothing: it is retired like any other failure.
      Effect.catchDefect((defect) =>
        Effect.logError("the session's reader failed", defect).pipe(
          Effect.andThen(
            Effect.sync(() =>
              driver.step((now) => machine.retire(now, "the session's reader failed", undefined, "reader-failed"))
            )
          )
        )
      ),
      Effect.andThen(driver.onStdoutEnd),
      Effect.andThen(driver.onExit)
    )
  )

  // The session's limits hit by its tools, as the transport sees them: events of the session, which goes on.
  const limitHits = connection.limitHits
  if (limitHits !== undefined) {
    run(Stream.runForEach(limitHits, (hit) => Effect.sync(() => driver.step(() => machine.limitHit(hit)))))
  }

  let releaseReason: InterruptReason = "closed"
  yield* Scope.addFinalizer(
    sessionScope,
    Effect.gen(function*() {
      driver.step((now) => machine.close(now, releaseReason))
      yield* connection.endInput
      yield* Effect.timeoutOption(connection.exit, options.timeouts.closeGrace)
      yield* Scope.close(connectionScope, Exit.void)
      // Teardown reaped the process: record its exit if the reader has not yet.
      const status = yield* connection.exitStatus
      if (Option.isSome(status)) {
        const stderrTail = yield* connection.stderrTail
        driver.step((now) => machine.exited(now, status.value, stderrTail))
      }
      machine.closed()
      yield* log.end
      yield* Scope.close(fibers, Exit.void)
      driver.endWrites()
    }).pipe(Effect.uninterruptible)
  )

  const handshake = yield* Deferred.await(driver.ready)

  const driven: Driven = {
    protocol: options.provider.capabilities().provider,
    pid: connection.pid,
    handshake,
    capabilities: Effect.sync(() => options.provider.capabilities()),
    status: Effect.sync(() => machine.status),
    sessionId: Effect.sync(() => Option.fromNullishOr(machine.sessionId)),
    conversationFile: options.conversationFile,
    send: (prompt, sendOptions) =>
      Effect.withFiber((fiber) =>
        driver.send(prompt, sendOptions?.queue, sendOptions?.interruptOnCancel ?? true, fiber)
      ),
    run: (prompt, sendOptions) =>
      Effect.withFiber((fiber) =>
        driver.sendAndWait(prompt, sendOptions?.queue, sendOptions?.interruptOnCancel ?? true, fiber)
      ),
    interrupt: driver.interruptActive,
    answerPermission: (requestId, verdict) => driver.answerPermission(requestId, verdict),
    pendingPermissions: Effect.sync(() => machine.pendingPermissions()),
    control: (request) => Effect.withFiber((fiber) => driver.control(request, fiber)),
    subscribe: (from = "latest") => log.subscribe(from),
    latestSeq: log.latestSeq,
    process: Effect.sync(() => machine.process),
    isAlive: Effect.map(connection.exitStatus, Option.isNone),
    awaitExit: connection.exit,
    stderrTail: connection.stderrTail,
    retire: (reason) => Effect.sync(() => driver.step((now) => machine.retire(now, reason, undefined, "host"))),
    close: (reason = "closed") =>
      Effect.suspend(() => {
        if (!machine.closing) releaseReason = reason
        return Scope.close(sessionScope, Exit.void)
      })
  }
  return driven
})
