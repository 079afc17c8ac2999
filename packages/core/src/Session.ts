/**
 * A long-lived CLI session as a scoped Effect resource.
 *
 * `Session.make` (used through a protocol module such as `ClaudeSession`) opens the transport, completes the
 * protocol's handshake within the startup timeout, and returns a {@link Session} whose release leaves nothing
 * behind: stdin EOF, the close grace, then the transport's teardown of the whole process tree.
 *
 * One reader fiber decodes every stdout line once and routes it: to the active turn, to the control request
 * waiting on its id, to the permission policy, and to the session's event log. Writes go through one
 * serialized path so frames never interleave. One turn runs at a time; a second `send` is refused with a typed,
 * safe-to-requeue error unless the host asked for a queue.
 *
 * The protocol-specific part (framing of prompts and controls, decoding frames into the actions below) is a
 * {@link Protocol}; the Claude stream-json one is `ClaudeSession.protocol`.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Latch from "effect/Latch"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as EventLog from "./EventLog.ts"
import { detached } from "./internal/detached.ts"
import * as Permission from "./Permission.ts"
import { isTerminal, SessionEvent, type Status } from "./SessionEvent.ts"
import {
  CliExited,
  ControlFailed,
  ControlTimeout,
  DeliveryTimeout,
  HandshakeFailed,
  type InterruptReason,
  InterruptTimeout,
  InvalidConfig,
  InvalidPrompt,
  ProtocolError,
  QueueFull,
  SessionRetired,
  SessionUnavailable,
  type SpawnError,
  StartupTimeout,
  type TransportWriteError,
  TurnInFlight,
  TurnInterrupted
} from "./TetherError.ts"
import { type Timeouts, validate as validateTimeouts } from "./Timeouts.ts"
import * as Transport from "./Transport.ts"
import {
  ApiError,
  BudgetExceeded,
  MaxTurnsExceeded,
  type Phase,
  type Prompt,
  type Turn,
  type TurnError,
  TurnFailed,
  type TurnResult
} from "./Turn.ts"

// ---------------------------------------------------------------------------------------------------------------
// The protocol contract
// ---------------------------------------------------------------------------------------------------------------

/**
 * How a protocol ended a turn, before the session attaches turn ids and acknowledgement.
 *
 * @category protocol
 * @since 0.1.0
 */
export type TurnOutcome =
  | { readonly _tag: "Success" }
  | { readonly _tag: "Interrupted" }
  | { readonly _tag: "MaxTurns" }
  | { readonly _tag: "Budget" }
  | { readonly _tag: "Api"; readonly status: number | null; readonly detail: string }
  | {
    readonly _tag: "Failed"
    readonly subtype: string
    readonly terminalReason: string | null
    readonly errors: ReadonlyArray<string>
  }

/**
 * A reply to a request the CLI made.
 *
 * @category protocol
 * @since 0.1.0
 */
export type Reply =
  | { readonly _tag: "Success"; readonly payload: unknown }
  | { readonly _tag: "Error"; readonly message: string }

/**
 * Event payloads a protocol produces from a frame; the session adds `turnId` where the protocol does not know it.
 *
 * @category protocol
 * @since 0.1.0
 */
export type FrameEvent = SessionEvent extends infer E ? E extends { readonly turnId: string | undefined } ?
      & Omit<E, "turnId">
      & { readonly turnId?: string | undefined }
  : never
  : never

/**
 * What the session does with a decoded line. A protocol turns each stdout line into a list of these.
 *
 * @category protocol
 * @since 0.1.0
 */
export type Inbound =
  /**
   * An event to publish (attributed to the active, acknowledged turn when `turnId` is absent). The protocol builds
   * a fresh object per line: the session completes its `turnId` in place.
   */
  | FrameEvent
  /** The CLI acknowledged receipt of the prompt with this id. */
  | { readonly _tag: "Ack"; readonly turnId: string }
  /** The CLI ended a turn. `turnId` absent means "the active turn". */
  | {
    readonly _tag: "TurnEnd"
    readonly turnId: string | undefined
    readonly outcome: TurnOutcome
    readonly result: Omit<TurnResult, "turnId">
  }
  /** An answer to a control request this host sent. Answers to unknown ids are ignored. */
  | {
    readonly _tag: "ControlResponse"
    readonly requestId: string
    readonly response: { readonly _tag: "Success"; readonly payload: unknown } | {
      readonly _tag: "Error"
      readonly message: string
      readonly code: string | null
    }
  }
  /** The CLI asks for a tool-use permission. */
  | { readonly _tag: "PermissionRequest"; readonly request: Omit<Permission.PermissionRequest, "turnId"> }
  /** Any other request from the CLI; the session runs `handle` (bounded by the control timeout) and replies. */
  | { readonly _tag: "Request"; readonly requestId: string; readonly handle: Effect.Effect<Reply> }
  /** The CLI withdrew one of its requests. */
  | { readonly _tag: "Cancel"; readonly requestId: string }
  /** The CLI told us its conversation id. */
  | { readonly _tag: "SessionId"; readonly sessionId: string }

/**
 * A protocol codec as the session sees it. Everything provider-specific lives behind this interface.
 *
 * @category protocol
 * @since 0.1.0
 */
export interface Protocol {
  readonly name: string
  /**
   * Decodes one stdout line into what the session does with it: one item, or several in order (one item needs no
   * array: this runs for every line). A line that cannot be decoded yields a `ProtocolError`.
   */
  readonly decode: (line: string) => Inbound | ReadonlyArray<Inbound> | ProtocolError
  readonly encodePrompt: (turnId: string, prompt: Prompt) => string
  readonly encodeControl: (requestId: string, request: unknown) => string
  readonly encodeReply: (requestId: string, reply: Reply) => string
  /** The answer to a permission request. */
  readonly permissionReply: (
    request: Permission.PermissionRequest,
    decision: Permission.Verdict
  ) => Reply
  /** The control request that interrupts the running turn. */
  readonly interruptRequest: (turnId: string) => unknown
  /**
   * The handshake, run once after spawn. It may send control requests; what it returns is kept as the session's
   * handshake info.
   */
  readonly handshake: (
    control: (request: unknown) => Effect.Effect<unknown, ControlError>
  ) => Effect.Effect<unknown, HandshakeFailed | ControlError>
}

// ---------------------------------------------------------------------------------------------------------------
// Public interface
// ---------------------------------------------------------------------------------------------------------------

/**
 * How the process ended, or that it is still running.
 *
 * @category models
 * @since 0.1.0
 */
export type ProcessState =
  | { readonly _tag: "Running" }
  | { readonly _tag: "Completed"; readonly status: Transport.ExitStatus; readonly stderrTail: string }
  | { readonly _tag: "Failed"; readonly status: Transport.ExitStatus; readonly stderrTail: string }

/**
 * Per-send options.
 *
 * @category models
 * @since 0.1.0
 */
export interface SendOptions {
  /** Queue behind the running turn instead of failing with `TurnInFlight` (overrides the session's default). */
  readonly queue?: boolean | undefined
  /**
   * Interrupt the turn in the CLI when the fiber waiting on `Turn.result` is interrupted (default true). Opt out
   * for fire-and-forget hosts that stop waiting but want the turn to finish.
   */
  readonly interruptOnCancel?: boolean | undefined
}

/**
 * What an interrupt did.
 *
 * @category models
 * @since 0.1.0
 */
export type InterruptOutcome = "no-active-turn" | "interrupted" | "completed-first" | "retired"

/**
 * Errors of a control request: the CLI refused it, did not answer in time (the session is retired), exited, or the
 * session was retired while it waited.
 *
 * @category errors
 * @since 0.1.0
 */
export type ControlError = ControlFailed | ControlTimeout | CliExited | SessionRetired

/**
 * Errors of `send`.
 *
 * @category errors
 * @since 0.1.0
 */
export type SendError = TurnInFlight | QueueFull | SessionUnavailable | InvalidPrompt

/**
 * A live session.
 *
 * @category models
 * @since 0.1.0
 */
export interface Session {
  readonly protocol: string
  readonly pid: Option.Option<number>
  /** What the handshake returned (for Claude, the decoded `initialize` response). */
  readonly handshake: unknown
  readonly status: Effect.Effect<Status>
  /** The CLI's conversation id, once known. */
  readonly sessionId: Effect.Effect<Option.Option<string>>
  /** Sends a prompt and returns the turn handle as soon as the prompt is written (or queued). */
  readonly send: (prompt: Prompt, options?: SendOptions) => Effect.Effect<Turn, SendError>
  /** Sends a prompt and waits for its result. */
  readonly run: (prompt: Prompt, options?: SendOptions) => Effect.Effect<TurnResult, SendError | TurnError>
  /** Interrupts the active turn and waits for it to settle, bounded by the interrupt timeout. */
  readonly interrupt: Effect.Effect<InterruptOutcome>
  /** Answers a deferred permission request, exactly once. */
  readonly answerPermission: (
    requestId: string,
    decision: Permission.Verdict
  ) => Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved>
  /** Permission requests waiting for a deferred answer. */
  readonly pendingPermissions: Effect.Effect<ReadonlyArray<Permission.PermissionRequest>>
  /** Sends a raw control request through the protocol and waits for its answer (bounded by the control timeout). */
  readonly control: (request: unknown) => Effect.Effect<unknown, ControlError>
  /** Subscribes to the session's events from a starting point. */
  readonly subscribe: (
    from?: EventLog.From
  ) => Effect.Effect<Stream.Stream<EventLog.Delivery<SessionEvent>>, EventLog.ReplayUnavailable, Scope.Scope>
  readonly latestSeq: Effect.Effect<number>
  readonly process: Effect.Effect<ProcessState>
  readonly isAlive: Effect.Effect<boolean>
  /** Waits until the CLI process has exited. */
  readonly awaitExit: Effect.Effect<Transport.ExitStatus>
  readonly stderrTail: Effect.Effect<string>
  /** Retires the session now: fails the active turn, tears down the process tree. */
  readonly retire: (reason: string) => Effect.Effect<void>
  /**
   * Releases the session now, as closing its scope would (stdin EOF, close grace, teardown), without waiting for
   * the scope. A running turn fails with `TurnInterrupted` carrying `reason` (default `"closed"`; a registry says
   * `"evicted"`).
   */
  readonly close: (reason?: InterruptReason) => Effect.Effect<void>
}

/**
 * Options of {@link make}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  readonly protocol: Protocol
  readonly launch: Transport.LaunchSpec
  readonly timeouts: Timeouts
  readonly policy?: Permission.Policy | undefined
  /** Queue sends behind a running turn by default (else `TurnInFlight`). */
  readonly queue?: boolean | undefined
  readonly queueCapacity?: number | undefined
  readonly eventRing?: number | undefined
  readonly subscriberBuffer?: number | undefined
  /** Generates turn ids (uuids by default). */
  readonly makeId?: (() => string) | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------------------------

/**
 * The metrics every session records (shared by every session in the process, in a registry or not).
 *
 * | metric | kind |
 * | --- | --- |
 * | `tether_session_permission_wait` | timer: a permission request, from its arrival to its resolution (decided by the policy, answered by the host, or expired) |
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics = {
  permissionWait: Metric.timer("tether_session_permission_wait", {
    description: "Permission requests, requested to resolved"
  })
} as const

// ---------------------------------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------------------------------

interface TurnState {
  readonly id: string
  /** The encoded prompt frame. */
  readonly line: string
  readonly interruptOnCancel: boolean
  readonly done: Deferred.Deferred<TurnResult, TurnError>
  phase: Phase
  acknowledged: boolean
  finished: boolean
  /**
   * The seq of the turn's terminal event, once published. A box of its own: the turn's event stream reads it and
   * must not hold the turn (see `turnEvents`).
   */
  readonly terminal: { seq: number | undefined }
  /** The log's position when the turn was sent: its handle's events start after it. */
  readonly startSeq: number
  lastProgress: number
  interruptReason: InterruptReason | undefined
  interrupting: Effect.Effect<InterruptOutcome> | undefined
  startedAt: number
  ackWarned: boolean
}

interface PendingPermission {
  readonly request: Permission.PermissionRequest
  /** Clock millis when the request arrived: its wait is timed from here. */
  readonly requestedAt: number
  state: "deciding" | "deferred" | "resolved"
  how: string
  timer: Fiber.Fiber<unknown, unknown> | undefined
}

const randomId = (): string => globalThis.crypto.randomUUID()

const millis = (duration: Duration.Duration): number => Duration.toMillis(duration)

/**
 * Acquires a session in the current scope: opens the transport, runs the protocol's handshake within the
 * startup timeout, and starts the reader. Closing the scope releases it (stdin EOF, close grace, teardown).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fn("Session.make")(function*(options: Options) {
  // The session owns a child of the caller's scope, so that a session that fails to start is torn down at once
  // instead of living until the caller's scope closes.
  const sessionScope = yield* Scope.fork(yield* Effect.scope, "sequential")
  return yield* makeIn(options, sessionScope).pipe(
    Effect.onError((cause) => Scope.close(sessionScope, Exit.failCause(cause)))
  )
})

interface TurnOps {
  readonly awaitTurn: (turn: TurnState) => Effect.Effect<TurnResult, TurnError>
  readonly interruptTurn: (turn: TurnState, reason: InterruptReason) => Effect.Effect<InterruptOutcome>
  readonly turnEvents: (
    turnId: string,
    after: number,
    terminal: TurnState["terminal"]
  ) => Stream.Stream<EventLog.Delivery<SessionEvent>, EventLog.ReplayUnavailable>
}

/** A turn's handle: its effects and stream are built when a host reads them (most hosts use `result` alone). */
class TurnHandle implements Turn {
  readonly id: string
  readonly #turn: TurnState
  readonly #ops: TurnOps
  /** The events stream starts after the log position the turn had when its handle was made. */
  readonly #after: number
  constructor(turn: TurnState, ops: TurnOps) {
    this.id = turn.id
    this.#turn = turn
    this.#ops = ops
    this.#after = turn.startSeq
  }
  get result(): Effect.Effect<TurnResult, TurnError> {
    return this.#ops.awaitTurn(this.#turn)
  }
  get settled(): Effect.Effect<Exit.Exit<TurnResult, TurnError>> {
    return Effect.exit(Deferred.await(this.#turn.done))
  }
  get phase(): Effect.Effect<Phase> {
    const turn = this.#turn
    return Effect.sync(() => turn.phase)
  }
  get interrupt(): Effect.Effect<void> {
    return Effect.asVoid(this.#ops.interruptTurn(this.#turn, "host"))
  }
  get events(): Stream.Stream<EventLog.Delivery<SessionEvent>, EventLog.ReplayUnavailable> {
    return this.#ops.turnEvents(this.id, this.#after, this.#turn.terminal)
  }
}

const makeIn = Effect.fnUntraced(function*(options: Options, sessionScope: Scope.Closeable) {
  const { protocol, timeouts } = options
  const problems = validateTimeouts(timeouts)
  if (problems.length > 0) return yield* new InvalidConfig({ problems })
  const policy = options.policy ?? Permission.denyAll
  const makeId = options.makeId ?? randomId
  const queueCapacity = options.queueCapacity ?? 64
  const transport = yield* Transport.Transport
  // Background fibers and the connection live in child scopes so that release can order them: graceful close
  // first, then the transport's teardown, then the fibers.
  const fibers = yield* Scope.fork(sessionScope, "parallel")
  const connectionScope = yield* Scope.fork(sessionScope, "sequential")
  const log = yield* EventLog.make<SessionEvent>({
    ringSize: options.eventRing ?? 512,
    subscriberBuffer: options.subscriberBuffer ?? 512
  }).pipe(Scope.provide(fibers))

  const connection = yield* transport.open(options.launch, { termGrace: timeouts.termGrace }).pipe(
    Scope.provide(connectionScope)
  )

  // --- state -----------------------------------------------------------------------------------------------
  let status: Status = "starting"
  let closing = false
  let releaseReason: InterruptReason = "closed"
  let sessionId: string | undefined
  let active: TurnState | undefined
  const queue: Array<TurnState> = []
  const controls = new Map<string, Deferred.Deferred<unknown, ControlFailed | CliExited | SessionRetired>>()
  const permissions = new Map<string, PendingPermission>()
  let processState: ProcessState = { _tag: "Running" }
  let controlCounter = 0
  const writeLock = yield* Semaphore.make(1)

  const fork = <A, E>(effect: Effect.Effect<A, E>) => Effect.forkIn(effect, fibers)

  // Effects built per call (per turn, per chunk of lines) come from `Effect.fnUntraced` functions created once per
  // session, never from `(...) => Effect.gen(function*() {...})`: V8 gives each new generator function its own map,
  // allocated in the old generation, and that map keeps the closure (with whatever it captures: a turn's result,
  // its raw frames) alive through every minor GC until the next full one.

  // Events are published synchronously from inside the session's fibers (the log wakes subscribers itself). Once
  // the log has ended (the CLI is gone) it drops what late fibers (a policy deciding after exit) publish.
  const emit = (event: SessionEvent): void => {
    log.publishUnsafe(event)
  }

  const setStatus = (next: Status): void => {
    if (status === next || status === "closed" || status === "failed") return
    status = next
    emit({ _tag: "Status", turnId: active?.id, raw: undefined, status: next })
  }

  const currentError = Effect.fnUntraced(function*(acknowledged: boolean) {
    const stderrTail = yield* connection.stderrTail
    const exit = yield* connection.exitStatus
    return Option.match(exit, {
      onNone: () => new CliExited({ exit: "still running", code: null, signal: null, stderrTail, acknowledged }),
      onSome: (status) =>
        new CliExited({
          exit: Transport.formatExitStatus(status),
          code: status._tag === "Exited" ? status.code : null,
          signal: status._tag === "Signaled" ? status.signal : null,
          stderrTail,
          acknowledged
        })
    })
  })

  // --- turn endings ------------------------------------------------------------------------------------------

  const expirePermissions = (turnId: string | undefined, why: "turn-ended" | "session-ended") =>
    permissions.size === 0 ? Effect.void : Effect.forEach(
      [...permissions.values()].filter((p) =>
        p.state !== "resolved" && (turnId === undefined || p.request.turnId === turnId)
      ),
      (pending) => resolvePermission(pending, { _tag: "Expired", why }, undefined),
      { discard: true }
    )

  // State transitions run uninterruptibly: they are often run by a fiber they end (the turn's watchdog), and a
  // transition cut in half would leave turns that never settle.
  const finishTurn: (turn: TurnState, exit: Exit.Exit<TurnResult, TurnError>) => Effect.Effect<void> = Effect
    .fnUntraced(function*(turn: TurnState, exit: Exit.Exit<TurnResult, TurnError>) {
      if (turn.finished) return
      turn.finished = true
      turn.phase = Exit.isSuccess(exit) ? "completed" : turn.phase === "queued" ? "cancelled" : "failed"
      yield* expirePermissions(turn.id, "turn-ended")
      if (Exit.isSuccess(exit)) {
        emit({ _tag: "TurnCompleted", turnId: turn.id, raw: exit.value.raw, result: exit.value })
      } else {
        const error = Cause.findErrorOption(exit.cause)
        if (Option.isSome(error)) {
          emit({ _tag: "TurnFailed", turnId: turn.id, raw: undefined, error: error.value })
        }
      }
      turn.terminal.seq = yield* log.latestSeq
      if (active === turn) {
        active = undefined
        if (!closing) setStatus("idle")
      }
      // Complete the turn only once the session reflects its end, so that a host that sends again as soon as
      // the result arrives finds the session idle.
      yield* Deferred.done(turn.done, exit)
      yield* startNext
    }, Effect.uninterruptible)

  const failQueued = Effect.fnUntraced(function*(reason: string) {
    const pending = queue.splice(0)
    for (const turn of pending) {
      yield* finishTurn(turn, Exit.fail(new SessionUnavailable({ status, reason })))
    }
  })

  // --- retire / teardown -------------------------------------------------------------------------------------

  /** Why the session was retired; undefined while it is not. */
  let retiredBecause: string | undefined
  /** The CLI exited before anything retired the session (its exit is the reason). */
  let exitedFirst = false
  /** The turn error for a session that is retired under it: the CLI's exit if it exited, else the retirement. */
  const retirementError = (reason: string, acknowledged: boolean): Effect.Effect<CliExited | SessionRetired> =>
    Effect.flatMap(
      connection.exitStatus,
      (exit): Effect.Effect<CliExited | SessionRetired> =>
        Option.isSome(exit) ? currentError(acknowledged) : Effect.succeed(new SessionRetired({ reason, acknowledged }))
    )

  const retireWith: (reason: string, turnError: TurnError | undefined) => Effect.Effect<void> = Effect
    .fnUntraced(function*(reason: string, turnError: TurnError | undefined) {
      if (retiredBecause !== undefined) return
      retiredBecause = reason
      setStatus("failed")
      yield* Effect.logWarning(`session retired: ${reason}`)
      const turn = active
      if (turn !== undefined) {
        yield* finishTurn(turn, Exit.fail(turnError ?? (yield* retirementError(reason, turn.acknowledged))))
      }
      yield* failQueued(`the session was retired: ${reason}`)
      for (const [, deferred] of controls) yield* Deferred.fail(deferred, yield* retirementError(reason, true))
      controls.clear()
      yield* expirePermissions(undefined, "session-ended")
      // Tear the process tree down in the background (the caller may be the reader fiber itself); release waits
      // for it because the connection scope is closed again, idempotently, at release.
      yield* Effect.forkIn(Scope.close(connectionScope, Exit.void), sessionScope)
    }, Effect.uninterruptible)

  // --- writes ------------------------------------------------------------------------------------------------

  /** Writes one frame, bounded by the delivery timeout. A timeout or a broken pipe retires the session. */
  const write = (line: string): Effect.Effect<void, DeliveryTimeout | TransportWriteError> =>
    writeLock.withPermit(connection.write(line)).pipe(
      Effect.timeoutOrElse({
        duration: timeouts.delivery,
        orElse: () => Effect.fail(new DeliveryTimeout({ timeoutMillis: millis(timeouts.delivery) }))
      }),
      Effect.tapError((error) => retireWith(error.message, error))
    )

  /**
   * Sends a control request and waits for its answer. With a deadline (the control timeout, except during the
   * handshake, which the startup timeout bounds as a whole), an unanswered request retires the session.
   */
  const controlWithin: (
    request: unknown,
    deadline: Duration.Duration | undefined
  ) => Effect.Effect<unknown, ControlError> = Effect.fnUntraced(
    function*(request: unknown, deadline: Duration.Duration | undefined) {
      // A session retired by the host or by a deadline says so, even once its CLI is torn down; one whose CLI
      // exited says how. (currentError builds the error; it still has to be failed with.)
      if (retiredBecause !== undefined && !exitedFirst) {
        return yield* new SessionRetired({ reason: retiredBecause, acknowledged: true })
      }
      if (retiredBecause !== undefined || processState._tag !== "Running") {
        return yield* Effect.flatMap(currentError(true), Effect.fail)
      }
      const subtype = subtypeOf(request)
      const requestId = `tether_${++controlCounter}_${makeId().slice(0, 8)}`
      const line = yield* Effect.try({
        try: () => protocol.encodeControl(requestId, request),
        catch: (cause) =>
          new ControlFailed({
            subtype,
            reason: `not sent, the request is not a valid frame: ${cause instanceof Error ? cause.message : cause}`,
            code: "invalid_request"
          })
      })
      const deferred = Deferred.makeUnsafe<unknown, ControlFailed | CliExited | SessionRetired>()
      controls.set(requestId, deferred)
      const answer = write(line).pipe(
        Effect.catch(() => currentError(false).pipe(Effect.flatMap(Effect.fail))),
        Effect.andThen(Deferred.await(deferred)),
        Effect.mapError((error) => error._tag === "ControlFailed" ? new ControlFailed({ ...error, subtype }) : error),
        Effect.ensuring(Effect.sync(() => controls.delete(requestId)))
      )
      if (deadline === undefined) return yield* answer
      const timeout = new ControlTimeout({ subtype, timeoutMillis: millis(deadline) })
      return yield* answer.pipe(
        Effect.timeoutOrElse({
          duration: deadline,
          orElse: () => retireWith(timeout.message, undefined).pipe(Effect.andThen(Effect.fail(timeout)))
        })
      )
    }
  )

  const control = (request: unknown) => controlWithin(request, timeouts.control)

  const reply = (requestId: string, answer: Reply) =>
    Effect.try({
      try: () => protocol.encodeReply(requestId, answer),
      // A host answer the protocol refuses to encode (e.g. a rewritten input that is not JSON) must not reach the
      // CLI: one unparsable stdin line kills it. The CLI gets an error answer instead.
      catch: (cause) => cause instanceof Error ? cause.message : String(cause)
    }).pipe(
      Effect.catch((reason) =>
        Effect.logWarning(`refusing to send an invalid answer to CLI request ${requestId}: ${reason}`).pipe(
          Effect.as(protocol.encodeReply(requestId, { _tag: "Error", message: "the host's answer was invalid" }))
        )
      ),
      Effect.flatMap(write),
      Effect.catch((error) => Effect.logWarning(`could not answer CLI request ${requestId}: ${error.message}`))
    )

  // --- permissions -------------------------------------------------------------------------------------------

  const resolvePermission: (
    pending: PendingPermission,
    resolution: Permission.Resolution,
    answer: Permission.Verdict | undefined
  ) => Effect.Effect<void> = Effect.fnUntraced(
    function*(pending: PendingPermission, resolution: Permission.Resolution, answer: Permission.Verdict | undefined) {
      if (pending.state === "resolved") return
      pending.state = "resolved"
      pending.how = resolution._tag === "Expired" ? `expired: ${resolution.why}` : resolution._tag
      const timer = pending.timer
      pending.timer = undefined
      if (answer !== undefined) {
        if (answer._tag === "Deny" && answer.interrupt === true && active?.id === pending.request.turnId) {
          active.interruptReason = "permission"
        }
        yield* reply(pending.request.requestId, protocol.permissionReply(pending.request, answer))
      }
      emit({
        _tag: "PermissionResolved",
        turnId: pending.request.turnId,
        raw: undefined,
        requestId: pending.request.requestId,
        resolution
      })
      const now = yield* Clock.currentTimeMillis
      const stillWaiting = [...permissions.values()].some((p) => p.state !== "resolved")
      if (!stillWaiting && active !== undefined && status === "awaiting-permission") {
        active.lastProgress = now
        setStatus("running")
      }
      pruneResolved()
      yield* Metric.update(metrics.permissionWait, Duration.millis(now - pending.requestedAt))
      if (timer !== undefined) yield* fork(Fiber.interrupt(timer))
    },
    // One step: a caller interrupted once the request is marked resolved (a host whose client went away while its
    // answer was being written) must not leave it resolved but unanswered, the turn waiting on it. The answer's
    // write is bounded by the delivery timeout.
    Effect.uninterruptible
  )

  const pruneResolved = () => {
    if (permissions.size <= 1024) return
    for (const [id, p] of permissions) {
      if (permissions.size <= 512) break
      if (p.state === "resolved") permissions.delete(id)
    }
  }

  const onPermissionRequest = Effect.fnUntraced(function*(raw: Omit<Permission.PermissionRequest, "turnId">) {
    const turnId = active?.id ?? ""
    const request: Permission.PermissionRequest = { ...raw, turnId }
    const requestedAt = yield* Clock.currentTimeMillis
    const pending: PendingPermission = { request, requestedAt, state: "deciding", how: "", timer: undefined }
    permissions.set(request.requestId, pending)
    if (active !== undefined) setStatus("awaiting-permission")
    emit({ _tag: "PermissionRequested", turnId: request.turnId, raw: request.raw, request })
    const decide = policy(request).pipe(
      Effect.timeoutOrElse({
        duration: timeouts.permission,
        orElse: () => Effect.succeed(Permission.deny("the host's permission policy did not decide in time"))
      }),
      Effect.matchCauseEffect({
        onFailure: (cause) =>
          Effect.logWarning("permission policy failed; denying", cause).pipe(
            Effect.andThen(resolvePermission(
              pending,
              { _tag: "PolicyFailed", reason: "the host's permission policy failed" },
              Permission.deny("the host's permission policy failed")
            ))
          ),
        onSuccess: (decision) => {
          if (decision._tag === "Defer") {
            if (pending.state === "resolved") return Effect.void
            pending.state = "deferred"
            return Effect.sleep(timeouts.permission).pipe(
              Effect.andThen(
                resolvePermission(
                  pending,
                  { _tag: "Expired", why: "timeout" },
                  Permission.deny("the permission request timed out")
                )
              ),
              fork,
              Effect.map((fiber) => {
                pending.timer = fiber
              })
            )
          }
          return resolvePermission(pending, { _tag: "Decided", by: "policy", decision }, decision)
        }
      })
    )
    yield* fork(decide)
  })

  const answerPermission = (
    requestId: string,
    decision: Permission.Verdict
  ): Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved> =>
    Effect.suspend((): Effect.Effect<void, Permission.PermissionNotFound | Permission.PermissionAlreadyResolved> => {
      const pending = permissions.get(requestId)
      if (pending === undefined) return Effect.fail(new Permission.PermissionNotFound({ requestId }))
      if (pending.state === "resolved") {
        return Effect.fail(new Permission.PermissionAlreadyResolved({ requestId, how: pending.how }))
      }
      return resolvePermission(pending, { _tag: "Decided", by: "host", decision }, decision)
    })

  // --- turns -------------------------------------------------------------------------------------------------

  const turnOutcomeToExit = (
    turn: TurnState,
    outcome: TurnOutcome,
    result: TurnResult
  ): Exit.Exit<TurnResult, TurnError> => {
    const sid = result.sessionId ?? null
    switch (outcome._tag) {
      case "Success":
        return Exit.succeed(result)
      case "Interrupted":
        return Exit.fail(
          new TurnInterrupted({
            turnId: turn.id,
            reason: turn.interruptReason ?? "host",
            acknowledged: turn.acknowledged,
            written: true
          })
        )
      case "MaxTurns":
        return Exit.fail(new MaxTurnsExceeded({ turnId: turn.id, sessionId: sid }))
      case "Budget":
        return Exit.fail(
          new BudgetExceeded({ turnId: turn.id, sessionId: sid, totalCostUsd: result.totalCostUsd ?? null })
        )
      case "Api":
        return Exit.fail(new ApiError({ turnId: turn.id, status: outcome.status, detail: outcome.detail }))
      case "Failed":
        return Exit.fail(
          new TurnFailed({
            turnId: turn.id,
            subtype: outcome.subtype,
            terminalReason: outcome.terminalReason,
            errors: outcome.errors
          })
        )
    }
  }

  /** Marks the turn acknowledged, once; `publish` is the reader's batch or `emit`, whichever keeps the order. */
  const acknowledge = (turn: TurnState, publish: (event: SessionEvent) => void): void => {
    if (turn.acknowledged) return
    turn.acknowledged = true
    turn.phase = "acknowledged"
    publish({ _tag: "TurnAcknowledged", turnId: turn.id, raw: undefined })
  }

  /**
   * One watchdog fiber per session enforces the running turn's deadline, its stall timeout (suspended while a
   * permission decision is awaited) and the diagnostic acknowledgement timeout. It sleeps while no turn runs and
   * is woken when one starts. A later turn's deadlines are never earlier than an earlier turn's, so a wake-up
   * computed for a turn that has since ended is only early, never late.
   */
  const turnStarted = Latch.makeUnsafe(false)
  const watchdog = Effect.gen(function*() {
    const turnMillis = millis(timeouts.turn)
    const ackMillis = millis(timeouts.ack)
    const stallMillis = millis(timeouts.stall)
    while (true) {
      const turn = active
      if (turn === undefined || turn.finished) {
        turnStarted.closeUnsafe()
        // A turn that is finished but still active is in the middle of its ending (another fiber is running it):
        // give way instead of spinning.
        if (active === undefined) yield* turnStarted.await
        else yield* Effect.yieldNow
        continue
      }
      const now = yield* Clock.currentTimeMillis
      if (now >= turn.startedAt + turnMillis) {
        yield* interruptTurn(turn, "turn-timeout")
        if (!turn.finished) yield* Effect.sleep(Duration.millis(1))
        continue
      }
      // Waiting on a permission decision is not a stall: the clock restarts when the decision is made.
      if (status === "awaiting-permission") turn.lastProgress = now
      else if (now - turn.lastProgress >= stallMillis) {
        yield* interruptTurn(turn, "stall")
        if (!turn.finished) yield* Effect.sleep(Duration.millis(1))
        continue
      }
      const ackAt = turn.startedAt + ackMillis
      if (!turn.ackWarned && !turn.acknowledged && now >= ackAt) {
        turn.ackWarned = true
        yield* Effect.logWarning(
          `turn ${turn.id} was not acknowledged by the CLI within ${Duration.format(timeouts.ack)}`
        )
      }
      let next = Math.min(turn.startedAt + turnMillis, turn.lastProgress + stallMillis)
      if (!turn.ackWarned && !turn.acknowledged) next = Math.min(next, ackAt)
      yield* Effect.sleep(Duration.millis(Math.max(1, next - now)))
    }
  })

  const beginTurn = Effect.fnUntraced(function*(turn: TurnState) {
    active = turn
    turn.phase = "started"
    turn.lastProgress = yield* Clock.currentTimeMillis
    turn.startedAt = turn.lastProgress
    emit({ _tag: "TurnStarted", turnId: turn.id, raw: undefined })
    setStatus("running")
    turnStarted.openUnsafe()
  })

  const startTurn = (turn: TurnState): Effect.Effect<void> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.andThen(
        beginTurn(turn),
        // The write is the one interruptible step. A caller interrupted mid-write cannot know whether the CLI read
        // the prompt: delivery is uncertain and the session is retired. A failed write already retired it.
        restore(write(turn.line)).pipe(
          Effect.onInterrupt(() =>
            retireWith(
              `the prompt of turn ${turn.id} was being written when its sender was interrupted`,
              new TurnInterrupted({ turnId: turn.id, reason: "host", acknowledged: false, written: true })
            )
          ),
          Effect.ignore
        )
      )
    )

  const startNext: Effect.Effect<void> = Effect.suspend(() => {
    if (active !== undefined || closing || retiredBecause !== undefined) return Effect.void
    const next = queue.shift()
    return next === undefined ? Effect.void : startTurn(next)
  })

  const awaitTurn = (turn: TurnState): Effect.Effect<TurnResult, TurnError> =>
    Deferred.await(turn.done).pipe(
      Effect.onInterrupt(() =>
        turn.interruptOnCancel && !turn.finished
          ? fork(interruptTurn(turn, "host"))
          : Effect.void
      )
    )

  /** Asks the CLI to interrupt an acknowledged turn and waits for it to settle, retiring the session if it does not. */
  const settleInterrupt = Effect.fnUntraced(function*(turn: TurnState, reason: InterruptReason) {
    // The turn may have ended between the request and this fiber's start: nothing to interrupt then (an
    // interrupt now could abort the next turn).
    if (turn.finished || active !== turn) return "completed-first" as const
    setStatus("cancelling")
    yield* fork(control(protocol.interruptRequest(turn.id)))
    const settled = yield* Deferred.await(turn.done).pipe(
      Effect.exit,
      Effect.timeoutOption(timeouts.interrupt)
    )
    if (Option.isSome(settled)) {
      return Exit.isSuccess(settled.value) ? "completed-first" as const : "interrupted" as const
    }
    const error = new InterruptTimeout({
      turnId: turn.id,
      reason,
      timeoutMillis: millis(timeouts.interrupt),
      acknowledged: turn.acknowledged
    })
    yield* retireWith(error.message, error)
    return "retired" as const
  })

  const interruptTurn = (turn: TurnState, reason: InterruptReason): Effect.Effect<InterruptOutcome> =>
    Effect.suspend(() => {
      if (turn.finished) return Effect.succeed<InterruptOutcome>("completed-first")
      if (turn.interrupting !== undefined) return turn.interrupting
      if (turn.phase === "queued") {
        const index = queue.indexOf(turn)
        if (index >= 0) queue.splice(index, 1)
        return finishTurn(
          turn,
          Exit.fail(new TurnInterrupted({ turnId: turn.id, reason, acknowledged: false, written: false }))
        )
          .pipe(Effect.as<InterruptOutcome>("interrupted"))
      }
      turn.interruptReason = reason
      if (!turn.acknowledged) {
        // The CLI may or may not have the prompt: delivery is uncertain, and the session is not reused.
        const error = new TurnInterrupted({ turnId: turn.id, reason, acknowledged: false, written: true })
        return retireWith(`turn ${turn.id} was interrupted before the CLI acknowledged it`, error).pipe(
          Effect.as<InterruptOutcome>("retired")
        )
      }
      // The settlement runs in the session's fibers so that it completes even if the caller stops waiting.
      const outcome = Deferred.makeUnsafe<InterruptOutcome>()
      turn.interrupting = Deferred.await(outcome)
      return fork(Effect.flatMap(settleInterrupt(turn, reason), (o) => Deferred.succeed(outcome, o))).pipe(
        Effect.andThen(Deferred.await(outcome))
      )
    })

  /**
   * A turn's own event stream. It closes over the turn's id and terminal box only, never the turn: building a
   * Stream allocates a closure straight in V8's old generation (Effect's `Channel.fromTransform` assigns one to a
   * property, and V8 pretenures such closures), and whatever that closure reaches survives every minor GC until
   * the next full one. Holding the turn would keep each turn's result and raw frames alive that long.
   */
  const turnEvents = (
    turnId: string,
    after: number,
    terminal: TurnState["terminal"]
  ): Stream.Stream<EventLog.Delivery<SessionEvent>, EventLog.ReplayUnavailable> =>
    Stream.unwrap(
      Effect.map(
        log.subscribe({ after }),
        (deliveries) =>
          deliveries.pipe(
            Stream.filter((d) => d._tag === "Lag" || d.event.turnId === turnId),
            Stream.takeUntil((d) =>
              d._tag === "Event"
                ? isTerminal(d.event)
                // A lag that skipped the terminal event still ends the turn's stream.
                : terminal.seq !== undefined && d.resumeSeq > terminal.seq
            )
          )
      )
    )

  const turnOps: TurnOps = {
    awaitTurn,
    interruptTurn,
    turnEvents
  }
  const makeTurnHandle = (turn: TurnState): Turn => new TurnHandle(turn, turnOps)

  const send: (prompt: Prompt, sendOptions?: SendOptions) => Effect.Effect<Turn, SendError> = Effect.fnUntraced(
    function*(prompt: Prompt, sendOptions?: SendOptions) {
      if (status === "closed" || status === "failed" || closing || retiredBecause !== undefined) {
        return yield* new SessionUnavailable({ status, reason: "the session no longer accepts prompts" })
      }
      const id = makeId()
      const line = yield* Effect.try({
        try: () => protocol.encodePrompt(id, prompt),
        catch: (cause) => new InvalidPrompt({ reason: cause instanceof Error ? cause.message : String(cause) })
      })
      const turn: TurnState = {
        id,
        line,
        interruptOnCancel: sendOptions?.interruptOnCancel ?? true,
        done: Deferred.makeUnsafe(),
        phase: "queued",
        acknowledged: false,
        finished: false,
        terminal: { seq: undefined },
        startSeq: yield* log.latestSeq,
        lastProgress: 0,
        interruptReason: undefined,
        interrupting: undefined,
        startedAt: 0,
        ackWarned: false
      }
      if (active !== undefined || queue.length > 0) {
        if (!(sendOptions?.queue ?? options.queue ?? false)) {
          return yield* new TurnInFlight({ activeTurnId: active?.id ?? queue[0].id })
        }
        if (queue.length >= queueCapacity) return yield* new QueueFull({ capacity: queueCapacity })
        queue.push(turn)
        emit({ _tag: "TurnQueued", turnId: turn.id, raw: undefined })
        return makeTurnHandle(turn)
      }
      yield* startTurn(turn)
      return makeTurnHandle(turn)
    }
  )

  // --- the reader ----------------------------------------------------------------------------------------------

  const attribute = (turnId: string | undefined): string | undefined =>
    turnId ?? (active !== undefined && active.acknowledged ? active.id : undefined)

  // The reader handles a chunk of lines at a time. Most frames only become events: those are handled
  // synchronously and published in one batch; a frame that needs effects (a turn's end, a permission request, a
  // CLI request) first flushes the batch, so events keep their order.
  let batch: Array<SessionEvent> = []
  let progressed = false

  const pushToBatch = (event: SessionEvent): void => {
    batch.push(event)
  }

  const flush = (): void => {
    if (batch.length === 0) return
    const events = batch
    batch = []
    log.publishAllUnsafe(events)
  }

  const endTurn = Effect.fnUntraced(
    function*(turn: TurnState, outcome: TurnOutcome, ending: Omit<TurnResult, "turnId">) {
      // A CLI that never acknowledged (no lifecycle frames, no replay) acknowledges with its result.
      acknowledge(turn, emit)
      const result: TurnResult = { ...ending, turnId: turn.id }
      emit({
        _tag: "Usage",
        turnId: turn.id,
        raw: undefined,
        usage: result.usage,
        totalCostUsd: result.totalCostUsd
      })
      yield* finishTurn(turn, turnOutcomeToExit(turn, outcome, result))
    }
  )

  /** Handles an inbound item synchronously where it can; returns the effect to run otherwise. */
  const handle = (item: Inbound): Effect.Effect<void> | undefined => {
    switch (item._tag) {
      case "Ack": {
        const turn = active
        if (turn === undefined || turn.id !== item.turnId || turn.acknowledged) return undefined
        progressed = true
        acknowledge(turn, pushToBatch)
        return undefined
      }
      case "SessionId":
        sessionId = item.sessionId
        return undefined
      case "ControlResponse": {
        const deferred = controls.get(item.requestId)
        if (deferred === undefined) return undefined
        controls.delete(item.requestId)
        const response = item.response
        Deferred.doneUnsafe(
          deferred,
          response._tag === "Success"
            ? Exit.succeed(response.payload)
            : Exit.fail(new ControlFailed({ subtype: "control", reason: response.message, code: response.code }))
        )
        return undefined
      }
      case "TurnEnd": {
        const turn = active
        if (turn === undefined || (item.turnId !== undefined && item.turnId !== turn.id)) {
          // A result for no turn of ours (a stale turn already failed, or a prompt the CLI ran on its own).
          batch.push(
            { _tag: "Frame", turnId: item.turnId, raw: item.result.raw, type: "result", subtype: undefined }
          )
          return undefined
        }
        return endTurn(turn, item.outcome, item.result)
      }
      case "PermissionRequest":
        return onPermissionRequest(item.request)
      case "Request":
        return fork(
          item.handle.pipe(
            Effect.timeoutOrElse({
              duration: timeouts.control,
              orElse: () => Effect.succeed<Reply>({ _tag: "Error", message: "the host did not answer in time" })
            }),
            Effect.flatMap((answer) => reply(item.requestId, answer))
          )
        ).pipe(Effect.asVoid)
      case "Cancel": {
        const pending = permissions.get(item.requestId)
        if (pending === undefined) return undefined
        return resolvePermission(pending, { _tag: "Expired", why: "cancelled-by-cli" }, undefined)
      }
      default: {
        const turnId = attribute(item.turnId)
        if (turnId !== undefined && active !== undefined && turnId === active.id) progressed = true // The protocol built this event for this line alone: the session completes it in place.
        ;(item as { turnId: string | undefined }).turnId = turnId
        batch.push(item as SessionEvent)
        return undefined
      }
    }
  }

  const protocolError = (error: ProtocolError, raw: unknown) => {
    batch.push({ _tag: "ProtocolError", turnId: undefined, raw, error })
    return Effect.logWarning(error.message)
  }

  const decodeLine = (line: Transport.Line): Inbound | ReadonlyArray<Inbound> | Effect.Effect<void> => {
    if (line._tag === "TooLong") {
      return protocolError(
        new ProtocolError({
          reason: "too-long",
          detail: `line of ${line.length} characters exceeds the limit of ${line.limit}`,
          linePrefix: line.prefix
        }),
        undefined
      )
    }
    const decoded = protocol.decode(line.text)
    return decoded instanceof ProtocolError ? protocolError(decoded, detached(line.text)) : decoded
  }

  const onLines: (lines: ReadonlyArray<Transport.Line>) => Effect.Effect<void> = Effect.fnUntraced(
    function*(lines: ReadonlyArray<Transport.Line>) {
      for (const line of lines) {
        const items = decodeLine(line)
        if (Array.isArray(items)) {
          for (const item of items as ReadonlyArray<Inbound>) {
            const effect = handle(item)
            if (effect !== undefined) {
              flush()
              yield* effect
            }
          }
        } else if (Effect.isEffect(items)) {
          yield* items
        } else {
          const effect = handle(items as Inbound)
          if (effect !== undefined) {
            flush()
            yield* effect
          }
        }
      }
      flush()
      // Let subscribers read before the next chunk: a burst of chunks must not push a reader that keeps up out of
      // its window (it would see a Lag although it is not slow).
      yield* Effect.yieldNow
      if (progressed) {
        progressed = false
        const turn = active
        if (turn !== undefined) turn.lastProgress = yield* Clock.currentTimeMillis
      }
    }
  )

  const onExit = Effect.gen(function*() {
    const exitStatus = yield* connection.exit
    const stderrTail = yield* connection.stderrTail
    const clean = closing || (exitStatus._tag === "Exited" && exitStatus.code === 0 && active === undefined)
    processState = clean
      ? { _tag: "Completed", status: exitStatus, stderrTail }
      : { _tag: "Failed", status: exitStatus, stderrTail }
    if (!closing && retiredBecause === undefined) {
      exitedFirst = true
      yield* retireWith(`the CLI exited (${Transport.formatExitStatus(exitStatus)})`, undefined)
    } else {
      const turn = active
      if (turn !== undefined) yield* finishTurn(turn, Exit.fail(yield* currentError(turn.acknowledged)))
      for (const [, deferred] of controls) yield* Deferred.fail(deferred, yield* currentError(true))
      controls.clear()
    }
    emit({ _tag: "Exit", turnId: undefined, raw: undefined, status: exitStatus, stderrTail })
    yield* log.end
  })

  yield* fork(watchdog)
  yield* fork(
    Stream.runForEachArray(connection.stdout, onLines).pipe(
      // A defect in the reader (a protocol's decoder that throws) must not leave a session that looks alive but
      // reads nothing: it is retired like any other failure.
      Effect.catchDefect((defect) =>
        Effect.logError("the session's reader failed", defect).pipe(
          Effect.andThen(retireWith("the session's reader failed", undefined))
        )
      ),
      Effect.andThen(onExit)
    )
  )

  // --- release -------------------------------------------------------------------------------------------------

  yield* Scope.addFinalizer(
    sessionScope,
    Effect.gen(function*() {
      closing = true
      const turn = active
      if (turn !== undefined) {
        yield* finishTurn(
          turn,
          Exit.fail(
            new TurnInterrupted({
              turnId: turn.id,
              reason: releaseReason,
              acknowledged: turn.acknowledged,
              // Only a started turn is active, and starting writes its prompt.
              written: true
            })
          )
        )
      }
      yield* failQueued("the session was closed")
      yield* expirePermissions(undefined, "session-ended")
      yield* connection.endInput
      yield* Effect.timeoutOption(connection.exit, timeouts.closeGrace)
      yield* Scope.close(connectionScope, Exit.void)
      if (status !== "failed") status = "closed"
      yield* Scope.close(fibers, Exit.void)
    }).pipe(Effect.uninterruptible)
  )

  // --- handshake -----------------------------------------------------------------------------------------------

  const handshake = yield* protocol.handshake((request) => controlWithin(request, undefined)).pipe(
    Effect.timeoutOrElse({
      duration: timeouts.startup,
      orElse: () =>
        connection.stderrTail.pipe(
          Effect.flatMap((stderrTail) =>
            Effect.fail(new StartupTimeout({ timeoutMillis: millis(timeouts.startup), stderrTail }))
          )
        )
    }),
    Effect.catchTags({
      CliExited: (error) => Effect.fail(new HandshakeFailed({ reason: error.message, stderrTail: error.stderrTail })),
      ControlFailed: (error) => Effect.fail(new HandshakeFailed({ reason: error.reason, stderrTail: "" })),
      ControlTimeout: (error) => Effect.fail(new HandshakeFailed({ reason: error.message, stderrTail: "" })),
      SessionRetired: (error) => Effect.fail(new HandshakeFailed({ reason: error.message, stderrTail: "" }))
    })
  )
  // Unless the session was retired while the handshake finished (the CLI answered, then exited).
  setStatus("idle")

  const session: Session = {
    protocol: protocol.name,
    pid: connection.pid,
    handshake,
    status: Effect.sync(() => status),
    sessionId: Effect.sync(() => Option.fromNullishOr(sessionId)),
    send,
    run: (prompt, sendOptions) => Effect.flatMap(send(prompt, sendOptions), (turn) => turn.result),
    interrupt: Effect.suspend(() =>
      active !== undefined ? interruptTurn(active, "host") : Effect.succeed<InterruptOutcome>("no-active-turn")
    ),
    answerPermission,
    pendingPermissions: Effect.sync(() =>
      [...permissions.values()].filter((p) => p.state !== "resolved").map((p) => p.request)
    ),
    control,
    subscribe: (from = "latest") => log.subscribe(from),
    latestSeq: log.latestSeq,
    process: Effect.sync(() => processState),
    isAlive: Effect.map(connection.exitStatus, Option.isNone),
    awaitExit: connection.exit,
    stderrTail: connection.stderrTail,
    retire: (reason) => retireWith(reason, undefined),
    close: (reason = "closed") =>
      Effect.suspend(() => {
        if (!closing) releaseReason = reason
        return Scope.close(sessionScope, Exit.void)
      })
  }
  return session
})

const subtypeOf = (request: unknown): string =>
  typeof request === "object" && request !== null && "subtype" in request && typeof request.subtype === "string"
    ? request.subtype
    : typeof request === "object" && request !== null && "method" in request && typeof request.method === "string"
    ? request.method
    : "control"

/**
 * What acquiring a session can fail with.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = SpawnError | StartupTimeout | HandshakeFailed | InvalidConfig
