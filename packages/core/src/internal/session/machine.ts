/**
 * The session machine: every rule of a session as a plain, synchronous state machine.
 *
 * Inputs are decoded lines (through the provider's protocol machine), host commands (send, interrupt, answer,
 * control, close), the results of what the driver did for it (a write finished, a policy decided, the process
 * exited) and clock ticks; every input carries the current time in milliseconds. Outputs are collected in two
 * arrays the driver drains after each input: the events to publish, in order, and everything else (lines to write,
 * turns and controls to settle, policies to run, the process to tear down), each stamped with how many events
 * precede it so the driver keeps their order. `nextDeadline` says when the machine wants its next tick.
 *
 * No Effect runs here: the machine is what the tests table-drive and property-test, and what every provider
 * shares. Its one Effect driver lives in `driver.ts`.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Permission from "../../Permission.ts"
import type * as Provider from "../../Provider.ts"
import type { ControlError, InterruptOutcome, ProcessState } from "../../Session.ts"
import type { SessionEvent, Status } from "../../SessionEvent.ts"
import {
  CliExited,
  ControlFailed,
  ControlTimeout,
  DeliveryTimeout,
  type InterruptReason,
  InterruptTimeout,
  InvalidPrompt,
  ProtocolError,
  QueueFull,
  SessionRetired,
  SessionUnavailable,
  TransportWriteError,
  TurnInFlight,
  TurnInterrupted
} from "../../TetherError.ts"
import * as Transport from "../../Transport.ts"
import { type AnyTurnError, ApiError, type Phase, type Prompt, type TurnResult } from "../../Turn.ts"

/**
 * Why a session was retired, as a bounded kind (the retirement metric's `reason` and the session span's attribute):
 * the machine's reasons are sentences that name turns and exit codes.
 */
export type RetireKind =
  | "cli-exited"
  | "stdout-closed"
  | "handshake-refused"
  | "startup-timeout"
  | "delivery-timeout"
  | "control-timeout"
  | "interrupt-timeout"
  | "unacknowledged-interrupt"
  | "write-abandoned"
  | "write-failed"
  | "reader-failed"
  | "host"

/** The deadlines of a live session, in milliseconds. */
export interface Deadlines {
  readonly startup: number
  readonly control: number
  readonly delivery: number
  readonly ack: number
  readonly turn: number
  readonly stall: number
  readonly interrupt: number
  readonly permission: number
}

export interface Settings {
  readonly deadlines: Deadlines
  /** Queue sends behind a running turn by default (else `TurnInFlight`). */
  readonly queue: boolean
  readonly queueCapacity: number
  readonly makeId: () => string
  /**
   * Protocol errors logged verbatim per `logWindow` milliseconds; the rest are counted in one summary line. A
   * session uses {@link logLimits}; tests set their own.
   */
  readonly logBurst: number
  readonly logWindow: number
}

/** How many protocol errors a session logs verbatim (5 per 10 s), before it counts the rest in one summary line. */
export const logLimits = { logBurst: 5, logWindow: 10_000 } as const

/** A queued or running turn. `handle` is the driver's (its type `H`): the machine never reads it. */
export class Turn<H = unknown> {
  phase: Phase = "queued"
  acknowledged = false
  finished = false
  startedAt = 0
  lastProgress = 0
  ackWarned = false
  /** The writer took the turn's prompt: what the CLI prints from then on is this turn's. */
  taken = false
  interruptReason: InterruptReason | undefined = undefined
  /** Set once an interrupt was sent to the CLI: the interrupt deadline runs. */
  interruptAt: number | undefined = undefined
  waiters: Array<number> | undefined = undefined
  /** When the turn's first text, message or tool use came (what the session's first-output metric measures). */
  firstOutputAt: number | undefined = undefined
  /** Set by the driver as soon as `send` returns the turn, before any output about it. */
  handle: H | undefined = undefined
  readonly id: string
  /** The provider's lines for the prompt, encoded when it was sent. */
  readonly prompt: Provider.Items
  readonly interruptOnCancel: boolean
  constructor(id: string, prompt: Provider.Items, interruptOnCancel: boolean) {
    this.id = id
    this.prompt = prompt
    this.interruptOnCancel = interruptOnCancel
  }
}

/** What the machine asks the driver to do, in order with the events (`at`: events emitted before it). */
export type Output<H = unknown> =
  /**
   * Lines wait in the outbox: the writer should take them (see `take`). `deferred`: the line may be dropped if
   * what it is about ends meanwhile (an interrupt racing a result), so the writer may take it a tick later.
   */
  | { readonly _tag: "Flush"; readonly at: number; readonly deferred: boolean }
  | {
    readonly _tag: "Settle"
    readonly at: number
    readonly turn: Turn<H>
    readonly exit: Exit.Exit<TurnResult, AnyTurnError>
  }
  /** The sender of `turn` may return: its prompt was written, or never will be. */
  | { readonly _tag: "Written"; readonly at: number; readonly turn: Turn<H> }
  | {
    readonly _tag: "ControlDone"
    readonly at: number
    readonly ref: number
    readonly exit: Exit.Exit<unknown, ControlError>
  }
  | { readonly _tag: "InterruptDone"; readonly at: number; readonly waiter: number; readonly outcome: InterruptOutcome }
  /**
   * Ask the policy about `request` (and open its span). `decided`: the provider reports a decision made already (the
   * CLI denied it with no one to ask): nothing to ask, only its span to open.
   */
  | {
    readonly _tag: "Decide"
    readonly at: number
    readonly request: Permission.PermissionRequest
    readonly decided?: boolean | undefined
  }
  | { readonly _tag: "StopDeciding"; readonly at: number; readonly requestId: string }
  | { readonly _tag: "Handle"; readonly at: number; readonly requestId: string; readonly request: unknown }
  | { readonly _tag: "StopHandling"; readonly at: number; readonly requestId: string }
  | { readonly _tag: "Ready"; readonly at: number; readonly info: unknown }
  | {
    readonly _tag: "StartFailed"
    readonly at: number
    readonly cause: "timeout" | "refused" | "exited" | "failed"
    readonly reason: string
    readonly stderrTail: string | undefined
  }
  /** Tear the process tree down now (the session was retired, for `reason`, of that `kind`). */
  | { readonly _tag: "Teardown"; readonly at: number; readonly reason: string; readonly kind: RetireKind }
  | { readonly _tag: "Log"; readonly at: number; readonly level: "Warning" | "Error"; readonly message: string }
  /** A permission request was resolved, `millis` after it arrived. */
  | {
    readonly _tag: "PermissionWait"
    readonly at: number
    readonly millis: number
    readonly requestId: string
    readonly resolution: Permission.Resolution
  }
  /** The CLI exited: nothing more will be published. */
  | { readonly _tag: "Ended"; readonly at: number }

interface PendingPermission {
  readonly request: Permission.PermissionRequest
  readonly requestedAt: number
  state: "deciding" | "deferred" | "resolved"
  how: string
  deadline: number
}

/** A permission request not resolved by then is denied (deciding) or expires (deferred). */
const permissionDue = (pending: PendingPermission): number => pending.state === "resolved" ? never : pending.deadline

interface Outgoing<H> {
  readonly line: string
  /** The turn whose prompt this is: its sender waits until it is written. */
  readonly owner: Turn<H> | undefined
  /** Dropped, unwritten, if this turn has ended by the time the writer takes it (an interrupt racing a result). */
  readonly unless: Turn<H> | undefined
  /** The control this line sends (an interrupt): forgotten with the line if it is dropped. */
  readonly ref?: number | undefined
}

/** A request of the CLI the host's handler is answering. */
interface PendingHostRequest<H> {
  readonly deadline: number
  /** The turn it is bound to (`bound: "turn"`): it lives as long as that turn, which does not stall meanwhile. */
  readonly turn: Turn<H> | undefined
}

interface PendingControl {
  readonly subtype: string
  readonly deadline: number
  /** The session's own (an interrupt): nobody waits for its answer. */
  readonly internal: boolean
}

const never = Number.POSITIVE_INFINITY

const formatExit = Transport.formatExitStatus

/** The subtype of a control request, as errors (and the driver's telemetry) name it. */
export const subtypeOf = (request: unknown): string =>
  typeof request === "object" && request !== null && "subtype" in request && typeof request.subtype === "string"
    ? request.subtype
    : typeof request === "object" && request !== null && "method" in request && typeof request.method === "string"
    ? request.method
    : "control"

const forEach = (items: Provider.Items, f: (item: Provider.Item) => void): void => {
  if (items === undefined) return
  if (Array.isArray(items)) {
    for (let i = 0; i < items.length; i++) f((items as ReadonlyArray<Provider.Item>)[i])
  } else {
    f(items as Provider.Item)
  }
}

const reasonOf = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

/** How the CLI exited, and the last of its stderr. */
interface ExitRecord {
  readonly status: Transport.ExitStatus
  readonly stderrTail: string
}

/** The error for work the CLI's exit cut short. */
const cliExited = (exit: ExitRecord, acknowledged: boolean): CliExited =>
  new CliExited({
    exit: formatExit(exit.status),
    code: exit.status._tag === "Exited" ? exit.status.code : null,
    signal: exit.status._tag === "Signaled" ? exit.status.signal : null,
    stderrTail: exit.stderrTail,
    acknowledged,
    ...(exit.status._tag === "Signaled" && exit.status.cause !== undefined ? { cause: exit.status.cause } : {})
  })

export class Machine<H = unknown> {
  // --- outputs (drained by the driver) ---------------------------------------------------------------------
  events: Array<SessionEvent> = []
  outputs: Array<Output<H>> = []

  // --- state -----------------------------------------------------------------------------------------------
  status: Status = "starting"
  sessionId: string | undefined = undefined
  active: Turn<H> | undefined = undefined
  readonly queue: Array<Turn<H>> = []
  process: ProcessState = { _tag: "Running" }
  /** Why the session was retired; undefined while it is not. */
  retiredBecause: string | undefined = undefined
  closing = false
  closeReason: InterruptReason = "closed"
  private exit: ExitRecord | undefined = undefined
  private exitedFirst = false
  /** `Ended` was output: nothing more is published. */
  private ended = false
  private startupAt = never
  private refs = 0
  private waiterIds = 0
  private readonly controls = new Map<number, PendingControl>()
  private readonly permissions = new Map<string, PendingPermission>()
  private readonly hostRequests = new Map<string, PendingHostRequest<H>>()
  /** Lines waiting for the writer, oldest first. */
  private readonly outbox: Array<Outgoing<H>> = []
  /** The line being written: its owner (a turn for a prompt's line), or null for another line. */
  private inFlight: Turn<H> | null | undefined = undefined
  private writeAt = never
  private logWindowEnd = 0
  private logCount = 0
  private logSuppressed = 0

  readonly provider: Provider.ProtocolMachine
  readonly settings: Settings
  constructor(provider: Provider.ProtocolMachine, settings: Settings) {
    this.provider = provider
    this.settings = settings
  }

  // --- inputs: the CLI ---------------------------------------------------------------------------------------

  /** Begins the handshake. */
  start(now: number): void {
    this.startupAt = now + this.settings.deadlines.startup
    this.apply(now, this.provider.start())
  }

  /** One stdout line. */
  receive(now: number, line: string): void {
    this.apply(now, this.provider.receive(line))
  }

  /** A line longer than the transport's limit, dropped by the transport. */
  tooLong(now: number, length: number, limit: number, prefix: string): void {
    this.malformed(
      now,
      new ProtocolError({
        reason: "too-long",
        detail: `line of ${length} characters exceeds the limit of ${limit}`,
        linePrefix: prefix
      }),
      undefined
    )
  }

  /**
   * Stdout ended and the process has not exited: nothing the CLI prints can reach the session any more, so it is
   * retired now rather than left looking alive until a deadline (or, idle, for ever).
   */
  stdoutEnded(now: number): void {
    // After the exit there is nothing to retire (`retire` says so); during a close the release goes on.
    if (this.closing) return
    this.retire(now, "the CLI closed its stdout but did not exit", undefined, "stdout-closed")
  }

  /** One of the session's limits was hit by a process of its tree (a tool OOM-killed, a fork refused). */
  limitHit(hit: Transport.LimitHit): void {
    this.emit({ _tag: "LimitHit", turnId: this.active?.id, raw: undefined, ...hit })
  }

  /** The process exited (stdout is closed and its exit status known). */
  exited(now: number, status: Transport.ExitStatus, stderrTail: string): void {
    if (this.exit !== undefined) return
    const exit = { status, stderrTail }
    this.exit = exit
    if (this.status === "starting") {
      this.startupAt = never
      this.output({ _tag: "StartFailed", at: 0, cause: "exited", reason: cliExited(exit, false).message, stderrTail })
    }
    const clean = this.closing || (status._tag === "Exited" && status.code === 0 && this.active === undefined)
    this.process = clean ? { _tag: "Completed", status, stderrTail } : { _tag: "Failed", status, stderrTail }
    if (!this.closing && this.retiredBecause === undefined) {
      this.exitedFirst = true
      this.retire(now, `the CLI exited (${formatExit(status)})`, undefined, "cli-exited")
    } else {
      // The running turn was settled by the close or the retirement, which start no other.
      this.failControls(cliExited(exit, true))
      // What the CLI asked after the session was retired or began to close can no longer be answered.
      this.expirePermissions(now, undefined, "session-ended")
      this.stopHostRequests()
      // Nor written: a line still in flight (a control sent during the close) keeps no delivery deadline, which no
      // retirement could clear once the process has ended.
      this.releaseWriters()
    }
    // The summary of protocol errors not logged yet: no tick comes for it once the session has ended.
    if (this.logSuppressed > 0) this.flushLogSummary(now)
    this.emit({ _tag: "Exit", turnId: undefined, raw: undefined, status, stderrTail })
    this.ended = true
    this.output({ _tag: "Ended", at: 0 })
  }

  // --- inputs: the host --------------------------------------------------------------------------------------

  /** Sends a prompt: starts its turn, or queues it. */
  send(
    now: number,
    prompt: Prompt,
    queue: boolean | undefined,
    interruptOnCancel: boolean
  ): Turn<H> | TurnInFlight | QueueFull | SessionUnavailable | InvalidPrompt {
    if (this.status === "closed" || this.closing || this.retiredBecause !== undefined) {
      return new SessionUnavailable({ status: this.status, reason: "the session no longer accepts prompts" })
    }
    // Turns are queued only behind a running one (the next starts as soon as it ends).
    const active = this.active
    const busy = active !== undefined
    if (busy && !(queue ?? this.settings.queue)) {
      return new TurnInFlight({ activeTurnId: active.id })
    }
    if (busy && this.queue.length >= this.settings.queueCapacity) {
      return new QueueFull({ capacity: this.settings.queueCapacity })
    }
    const id = this.settings.makeId()
    let lines: Provider.Items
    try {
      lines = this.provider.prompt(id, prompt)
    } catch (cause) {
      return new InvalidPrompt({ reason: reasonOf(cause) })
    }
    const turn = new Turn<H>(id, lines, interruptOnCancel)
    if (busy) {
      this.queue.push(turn)
      this.emit({ _tag: "TurnQueued", turnId: id, raw: undefined })
    } else {
      this.startTurn(now, turn)
    }
    return turn
  }

  /**
   * Interrupts a turn. A queued turn is dropped; a turn the CLI has not acknowledged retires the session (delivery
   * is uncertain); an acknowledged one is interrupted in the CLI, and the outcome arrives later as `InterruptDone`
   * for the returned waiter.
   */
  interrupt(
    now: number,
    turn: Turn<H>,
    reason: InterruptReason
  ): InterruptOutcome | { readonly waiter: number } {
    if (turn.phase === "queued") {
      const index = this.queue.indexOf(turn)
      if (index >= 0) this.queue.splice(index, 1)
      this.finish(
        now,
        turn,
        Exit.fail(new TurnInterrupted({ turnId: turn.id, reason, acknowledged: false, written: false }))
      )
      return "interrupted"
    }
    // A turn that ended (however it did) is no longer running.
    if (turn !== this.active) return "completed-first"
    const waiter = ++this.waiterIds
    if (turn.interruptAt !== undefined) {
      ;(turn.waiters ??= []).push(waiter)
      return { waiter }
    }
    turn.interruptReason = reason
    if (!turn.taken) {
      // The prompt still waits in the outbox behind another write: nothing of it reached the CLI. It is dropped, and
      // the turn is safe to send again; the session goes on.
      this.dropPrompt(turn)
      this.finish(
        now,
        turn,
        Exit.fail(new TurnInterrupted({ turnId: turn.id, reason, acknowledged: false, written: false }))
      )
      return "interrupted"
    }
    if (!turn.acknowledged) {
      // The CLI may or may not have the prompt: delivery is uncertain, and the session is not reused.
      this.retire(
        now,
        `turn ${turn.id} was interrupted before the CLI acknowledged it`,
        new TurnInterrupted({ turnId: turn.id, reason, acknowledged: false, written: true }),
        "unacknowledged-interrupt"
      )
      return "retired"
    }
    turn.interruptAt = now + this.settings.deadlines.interrupt
    ;(turn.waiters ??= []).push(waiter)
    this.setStatus("cancelling")
    const ref = ++this.refs
    this.controls.set(ref, { subtype: "interrupt", deadline: now + this.settings.deadlines.control, internal: true })
    forEach(this.provider.interrupt(turn.id, ref), (item) => {
      if (item._tag === "Write") this.write(item.line, undefined, turn, ref)
      else this.item(now, item)
    })
    return { waiter }
  }

  /** Interrupts the running turn, if any. */
  interruptActive(now: number, reason: InterruptReason): InterruptOutcome | { readonly waiter: number } {
    return this.active === undefined ? "no-active-turn" : this.interrupt(now, this.active, reason)
  }

  /** Sends a raw control request. Its answer arrives as `ControlDone` for the returned ref. */
  control(now: number, request: unknown): number | ControlError {
    if (this.retiredBecause !== undefined && !this.exitedFirst) {
      return new SessionRetired({ reason: this.retiredBecause, acknowledged: true })
    }
    // (A session retired by the CLI's exit knows it.)
    if (this.exit !== undefined) return cliExited(this.exit, true)
    const subtype = subtypeOf(request)
    const ref = ++this.refs
    let lines: Provider.Items
    try {
      lines = this.provider.control(ref, request)
    } catch (cause) {
      return new ControlFailed({
        subtype,
        reason: `not sent, the request is not a valid frame: ${reasonOf(cause)}`,
        code: "invalid_request"
      })
    }
    this.controls.set(ref, { subtype, deadline: now + this.settings.deadlines.control, internal: false })
    this.apply(now, lines)
    return ref
  }

  /** Answers a deferred (or still undecided) permission request, exactly once. */
  answerPermission(
    now: number,
    requestId: string,
    verdict: Permission.Verdict
  ): Permission.PermissionNotFound | Permission.PermissionAlreadyResolved | undefined {
    const pending = this.permissions.get(requestId)
    if (pending === undefined) return new Permission.PermissionNotFound({ requestId })
    if (pending.state === "resolved") {
      return new Permission.PermissionAlreadyResolved({ requestId, how: pending.how })
    }
    this.resolve(now, pending, { _tag: "Decided", by: "host", decision: verdict }, verdict)
    return undefined
  }

  /** The permission requests waiting for a decision. */
  pendingPermissions(): ReadonlyArray<Permission.PermissionRequest> {
    const out: Array<Permission.PermissionRequest> = []
    for (const pending of this.permissions.values()) {
      if (pending.state !== "resolved") out.push(pending.request)
    }
    return out
  }

  /** Begins release: the running turn fails with `TurnInterrupted(reason)`, queued turns are dropped. */
  close(now: number, reason: InterruptReason): void {
    if (this.closing) return
    this.closing = true
    this.closeReason = reason
    const turn = this.active
    if (turn !== undefined) {
      this.finish(
        now,
        turn,
        // A prompt the writer never took (it waited behind another write) never reached the CLI.
        Exit.fail(
          new TurnInterrupted({ turnId: turn.id, reason, acknowledged: turn.acknowledged, written: turn.taken })
        )
      )
    }
    this.failQueued(now, "the session was closed")
    this.expirePermissions(now, undefined, "session-ended")
    this.stopHostRequests()
    this.releaseWriters()
  }

  /** Release is done: the process tree is gone. */
  closed(): void {
    if (this.status !== "failed") {
      this.status = "closed"
    }
  }

  /** Retires the session now: fails the running turn, tears the process tree down. */
  retire(now: number, reason: string, turnError: AnyTurnError | undefined, kind: RetireKind): void {
    // Once the process has ended (a close that saw it exit), there is nothing left to retire or tear down.
    if (this.retiredBecause !== undefined || this.ended) return
    this.retiredBecause = reason
    if (this.status === "starting" && this.startupAt !== never) {
      // The handshake was cut short by something else than its own outcome (a write that failed or timed out, a
      // reader that failed): whoever waits for it must hear so, or startup waits for a deadline that is gone.
      this.output({ _tag: "StartFailed", at: 0, cause: "failed", reason, stderrTail: undefined })
    }
    this.startupAt = never
    this.setStatus("failed")
    this.log("Warning", `session retired (${kind}): ${reason}`)
    const turn = this.active
    if (turn !== undefined) {
      this.finish(now, turn, Exit.fail(turnError ?? this.retirementError(reason, turn.acknowledged)))
    }
    this.failQueued(now, `the session was retired: ${reason}`)
    this.failControls(this.retirementError(reason, true))
    this.expirePermissions(now, undefined, "session-ended")
    this.stopHostRequests()
    this.releaseWriters()
    this.output({ _tag: "Teardown", at: 0, reason, kind })
  }

  // --- inputs: what the driver did ---------------------------------------------------------------------------

  /**
   * The writer takes the next line to write, or undefined when there is none. Its write is then in flight, bounded
   * by the delivery deadline, until `written` (or `writeFailed`). An interrupt whose turn ended meanwhile is
   * dropped: writing it now could only reach a later turn.
   */
  take(now: number): string | undefined {
    if (this.inFlight !== undefined) return undefined
    while (this.outbox.length > 0) {
      const next = this.outbox.shift()!
      if (next.unless !== undefined && next.unless.finished) {
        // Nobody will answer a request that is never sent: its control deadline must not retire the session.
        if (next.ref !== undefined) this.controls.delete(next.ref)
        continue
      }
      if (next.owner !== undefined) next.owner.taken = true
      this.inFlight = next.owner ?? null
      this.writeAt = now + this.settings.deadlines.delivery
      return next.line
    }
    return undefined
  }

  /** The line in flight was written. */
  written(_now: number): void {
    const owner = this.inFlight
    this.inFlight = undefined
    this.writeAt = never
    if (owner !== undefined && owner !== null) this.output({ _tag: "Written", at: 0, turn: owner })
  }

  /**
   * The write in flight was abandoned half-way (its writer was interrupted, the session is torn down): the CLI may
   * or may not have the line, so the session cannot go on.
   */
  abandoned(now: number): void {
    const owner = this.inFlight
    if (owner === undefined) return
    // The line stays in flight for `retire`, which releases its sender (a prompt's sender waits for its write).
    this.retire(
      now,
      owner === null
        ? "a write to the CLI was abandoned half-way"
        : `the prompt of turn ${owner.id} was being written when its writer was interrupted`,
      owner === null
        ? undefined
        : new TurnInterrupted({ turnId: owner.id, reason: "host", acknowledged: false, written: true }),
      "write-abandoned"
    )
  }

  /** A write failed: the stdin pipe is broken. */
  writeFailed(now: number, reason: string): void {
    this.retire(now, reason, new TransportWriteError({ reason }), "write-failed")
  }

  /** The policy decided a permission request (late decisions are ignored). */
  decided(now: number, requestId: string, decision: Permission.Decision): void {
    const pending = this.permissions.get(requestId)
    if (pending === undefined || pending.state !== "deciding") return
    if (decision._tag === "Defer") {
      // Stryker disable next-line StringLiteral: equivalent, state is only compared with "deciding" and "resolved".
      pending.state = "deferred"
      pending.deadline = now + this.settings.deadlines.permission
      return
    }
    this.resolve(now, pending, { _tag: "Decided", by: "policy", decision }, decision)
  }

  /** The policy failed or died: the CLI gets a deny. */
  policyFailed(now: number, requestId: string): void {
    const pending = this.permissions.get(requestId)
    if (pending === undefined || pending.state !== "deciding") return
    this.resolve(
      now,
      pending,
      { _tag: "PolicyFailed", reason: "the host's permission policy failed" },
      Permission.deny("the host's permission policy failed")
    )
  }

  /** The host's handler answered a request of the CLI (late answers are ignored). */
  handled(now: number, requestId: string, reply: Provider.Reply): void {
    const pending = this.hostRequests.get(requestId)
    if (pending === undefined) return
    this.hostRequests.delete(requestId)
    // Waiting on the host is not a stall: the stall clock restarts when its answer goes out.
    // (A request bound to a turn is stopped when the turn ends: its turn is the running one.)
    if (pending.turn !== undefined) pending.turn.lastProgress = now
    this.reply(now, requestId, reply)
  }

  /** The clock reached (or passed) `nextDeadline`. */
  tick(now: number): void {
    const d = this.settings.deadlines
    if (now >= this.startupAt) {
      this.startupAt = never
      this.output({
        _tag: "StartFailed",
        at: 0,
        cause: "timeout",
        reason: `the handshake did not finish within ${d.startup} ms`,
        stderrTail: undefined
      })
      this.retire(now, "the handshake did not finish in time", undefined, "startup-timeout")
      return
    }
    if (now >= this.writeAt) {
      const error = new DeliveryTimeout({ timeoutMillis: d.delivery })
      this.retire(now, error.message, error, "delivery-timeout")
      return
    }
    const turn = this.active
    // A tick that comes late (a busy event loop) can find both an interrupt's deadline and its request's passed: the
    // earlier decides, as it would have on time.
    const interruptAt = turn === undefined ? never : this.interruptDue(turn)
    const interruptDue = now >= interruptAt ? interruptAt : never
    for (const [ref, control] of this.controls) {
      if (now < control.deadline || interruptDue <= control.deadline) break
      this.controls.delete(ref)
      const timeout = new ControlTimeout({ subtype: control.subtype, timeoutMillis: d.control })
      if (!control.internal) this.output({ _tag: "ControlDone", at: 0, ref, exit: Exit.fail(timeout) })
      this.retire(now, timeout.message, undefined, "control-timeout")
      return
    }
    if (turn !== undefined) {
      if (now >= this.interruptDue(turn)) {
        const error = new InterruptTimeout({
          turnId: turn.id,
          reason: turn.interruptReason ?? "host",
          timeoutMillis: d.interrupt,
          acknowledged: turn.acknowledged
        })
        this.retire(now, error.message, error, "interrupt-timeout")
        return
      }
      if (now >= this.turnDue(turn)) {
        this.interrupt(now, turn, "turn-timeout")
      } else if (now >= this.stallDue(turn)) {
        this.interrupt(now, turn, "stall")
      }
      if (this.active === turn && now >= this.ackDue(turn)) {
        turn.ackWarned = true
        this.log("Warning", `turn ${turn.id} was not acknowledged by the CLI within ${d.ack} ms`)
      }
    }
    for (const pending of this.permissions.values()) {
      if (now < permissionDue(pending)) continue
      if (pending.state === "deciding") {
        const decision = Permission.deny("the host's permission policy did not decide in time")
        this.resolve(now, pending, { _tag: "Decided", by: "policy", decision }, decision)
      } else {
        this.resolve(
          now,
          pending,
          { _tag: "Expired", why: "timeout" },
          Permission.deny("the permission request timed out")
        )
      }
    }
    for (const [requestId, pending] of this.hostRequests) {
      if (now < pending.deadline) continue
      this.hostRequests.delete(requestId)
      this.output({ _tag: "StopHandling", at: 0, requestId })
      this.reply(now, requestId, { _tag: "Error", message: "the host did not answer in time" })
    }
    if (now >= this.logDue()) this.flushLogSummary(now)
  }

  /** When the machine next wants `tick`, in clock milliseconds (`Infinity`: no deadline). */
  nextDeadline(): number {
    let next = this.startupAt < this.writeAt ? this.startupAt : this.writeAt
    const control = this.controlDue()
    if (control < next) next = control
    const turn = this.active
    if (turn !== undefined) {
      next = Math.min(next, this.interruptDue(turn), this.turnDue(turn), this.stallDue(turn), this.ackDue(turn))
    }
    for (const pending of this.permissions.values()) {
      const due = permissionDue(pending)
      if (due < next) next = due
    }
    for (const pending of this.hostRequests.values()) {
      if (pending.deadline < next) next = pending.deadline
    }
    const log = this.logDue()
    return log < next ? log : next
  }

  // --- the deadline table: each kind of deadline is written once, here, and read both by `tick` (is it due?) and
  // by `nextDeadline` (when is the next?), as quinn-proto keeps one timer table and takes its minimum. `never`: not
  // running. The startup and write deadlines are fields of their own (`startupAt`, `writeAt`), as are the host
  // requests' (one each).

  /** The first control request's (the map keeps them in the order they were sent, so in deadline order). */
  private controlDue(): number {
    for (const control of this.controls.values()) return control.deadline
    return never
  }

  /** An interrupt sent to the CLI must have settled the turn by then. */
  private interruptDue(turn: Turn<H>): number {
    return turn.interruptAt ?? never
  }

  /** The whole turn's deadline, while no interrupt runs. */
  private turnDue(turn: Turn<H>): number {
    return turn.interruptAt === undefined ? turn.startedAt + this.settings.deadlines.turn : never
  }

  /**
   * No progress since then is a stall, while no interrupt runs and the turn waits on nobody: not on a permission,
   * not on the host's answer to one of the CLI's requests bound to it (its stall clock is paused meanwhile).
   */
  private stallDue(turn: Turn<H>): number {
    return turn.interruptAt === undefined && this.status !== "awaiting-permission" && !this.hostWorking(turn)
      ? turn.lastProgress + this.settings.deadlines.stall
      : never
  }

  /** A turn not acknowledged by then is logged once (a diagnostic: nothing fails). */
  private ackDue(turn: Turn<H>): number {
    return !turn.ackWarned && !turn.acknowledged ? turn.startedAt + this.settings.deadlines.ack : never
  }

  /** The summary of the protocol errors counted and not logged in this window. */
  private logDue(): number {
    return this.logSuppressed > 0 ? this.logWindowEnd : never
  }

  /** Drops the outputs collected so far (the driver has taken them). */
  drained(): void {
    this.events = []
    this.outputs = []
  }

  // --- items from the provider ---------------------------------------------------------------------------------

  private apply(now: number, items: Provider.Items): void {
    if (items === undefined) return
    if (Array.isArray(items)) {
      for (let i = 0; i < items.length; i++) this.item(now, (items as ReadonlyArray<Provider.Item>)[i])
    } else {
      this.item(now, items as Provider.Item)
    }
  }

  private item(now: number, item: Provider.Item): void {
    switch (item._tag) {
      case "Write":
        return this.write(item.line, undefined, undefined)
      case "Ready": {
        if (this.status !== "starting") return
        this.startupAt = never
        this.setStatus("idle")
        this.output({ _tag: "Ready", at: 0, info: item.info })
        return
      }
      case "Refused": {
        if (this.status !== "starting") return
        this.startupAt = never
        this.output({ _tag: "StartFailed", at: 0, cause: "refused", reason: item.reason, stderrTail: "" })
        this.retire(now, `the CLI refused the handshake: ${item.reason}`, undefined, "handshake-refused")
        return
      }
      case "Receipt": {
        const turn = this.active
        if (turn !== undefined && turn.id === item.turnId) this.acknowledge(now, turn)
        return
      }
      case "SessionId":
        this.sessionId = item.sessionId
        return
      case "TurnEnd":
        return this.turnEnd(now, item)
      case "ControlAnswer":
        return this.controlAnswer(item)
      case "PermissionRequest":
        return this.permissionRequest(now, item.request, undefined)
      case "PermissionDenied":
        return this.permissionRequest(now, item.request, item.message)
      case "HostRequest": {
        const turn = this.active
        const bound = item.bound === "turn" && turn !== undefined && turn.taken && !turn.finished ? turn : undefined
        // What the running turn waits on is the turn's work: it lives as long as the turn does, and the turn's stall
        // clock is paused meanwhile (it restarts when the answer goes out). It does not acknowledge the prompt: a hook
        // of the session's (a notification) may cross a prompt just written.
        this.hostRequests.set(item.requestId, {
          deadline: bound === undefined ? now + this.settings.deadlines.control : never,
          turn: bound
        })
        this.output({ _tag: "Handle", at: 0, requestId: item.requestId, request: item.request })
        return
      }
      case "Cancel": {
        const pending = this.permissions.get(item.requestId)
        if (pending !== undefined) {
          this.resolve(now, pending, { _tag: "Expired", why: "cancelled-by-cli" }, undefined)
        } else {
          const host = this.hostRequests.get(item.requestId)
          if (host === undefined) return
          this.hostRequests.delete(item.requestId)
          if (host.turn !== undefined) host.turn.lastProgress = now
          this.output({ _tag: "StopHandling", at: 0, requestId: item.requestId })
        }
        return
      }
      case "Malformed":
        return this.malformed(now, item.error, item.raw)
      default:
        return this.event(now, item)
    }
  }

  /** An event item: attributed to its turn, or to the running one. */
  private event(now: number, item: Provider.EventItem): void {
    const turn = this.active
    if (item.turnId !== undefined) {
      if (turn !== undefined && turn.id === item.turnId) this.turnEvent(now, turn, item)
    } else if (turn !== undefined && item.scope !== "session" && turn.taken) {
      // The session never writes a second prompt while a turn runs: what the CLI prints now is this turn's. Before
      // its prompt's write it cannot be (the previous turn's trailing frames).
      ;(item as { turnId: string | undefined }).turnId = turn.id
      this.turnEvent(now, turn, item)
    }
    this.events.push(item as SessionEvent)
  }

  /** An event of the running turn: progress, and the turn's first output when it is text, a message or a tool use. */
  private turnEvent(now: number, turn: Turn<H>, item: Provider.EventItem): void {
    this.progress(now, turn)
    if (
      turn.firstOutputAt === undefined &&
      (item._tag === "TextDelta" || item._tag === "AssistantMessage" || item._tag === "ToolUse")
    ) turn.firstOutputAt = now
  }

  private progress(now: number, turn: Turn<H>): void {
    turn.lastProgress = now
    this.acknowledge(now, turn)
  }

  private acknowledge(now: number, turn: Turn<H>): void {
    if (turn.acknowledged) return
    turn.acknowledged = true
    turn.lastProgress = now
    // Only the running turn is acknowledged, once: it is "started" until then.
    turn.phase = "acknowledged"
    this.emit({ _tag: "TurnAcknowledged", turnId: turn.id, raw: undefined })
  }

  private turnEnd(now: number, item: Extract<Provider.Item, { readonly _tag: "TurnEnd" }>): void {
    const turn = this.active
    if (turn === undefined || (item.turnId !== undefined ? item.turnId !== turn.id : !turn.taken)) {
      // A result for no turn of ours (a stale turn already failed, or a prompt the CLI ran on its own).
      this.emit({ _tag: "Frame", turnId: item.turnId, raw: item.result.raw, type: "result", subtype: undefined })
      return
    }
    // A CLI that never acknowledged (no receipt, no earlier frame) acknowledges with its result.
    this.acknowledge(now, turn)
    const result = { ...item.result, turnId: turn.id } as TurnResult
    const cost = (result as { readonly totalCostUsd?: number | undefined }).totalCostUsd
    this.emit({ _tag: "Usage", turnId: turn.id, raw: undefined, usage: result.usage, totalCostUsd: cost })
    const outcome = item.outcome
    switch (outcome._tag) {
      case "Success":
        return this.finish(now, turn, Exit.succeed(result))
      case "Interrupted":
        return this.finish(
          now,
          turn,
          Exit.fail(
            new TurnInterrupted({
              turnId: turn.id,
              reason: turn.interruptReason ?? "host",
              acknowledged: true,
              written: true
            })
          )
        )
      case "Api":
        return this.finish(
          now,
          turn,
          Exit.fail(new ApiError({ turnId: turn.id, status: outcome.status, detail: outcome.detail }))
        )
      case "Failed":
        return this.finish(now, turn, Exit.fail(outcome.error(turn.id)))
    }
  }

  private controlAnswer(item: Extract<Provider.Item, { readonly _tag: "ControlAnswer" }>): void {
    const control = this.controls.get(item.ref)
    if (control === undefined) return
    this.controls.delete(item.ref)
    if (control.internal) return
    const answer = item.answer
    this.output({
      _tag: "ControlDone",
      at: 0,
      ref: item.ref,
      exit: answer._tag === "Success"
        ? Exit.succeed(answer.payload)
        : Exit.fail(new ControlFailed({ subtype: control.subtype, reason: answer.message, code: answer.code }))
    })
  }

  // --- permissions -------------------------------------------------------------------------------------------

  /**
   * A permission request for the policy to decide; or, with `denied`, one the CLI denied already with no one to ask
   * (the session's policy is the default, which denies everything): reported the same way, decided by the policy,
   * with nothing to ask and nothing to answer.
   */
  private permissionRequest(
    now: number,
    raw: Omit<Permission.PermissionRequest, "turnId">,
    denied: string | undefined
  ): void {
    const turn = this.active
    if (turn !== undefined) this.progress(now, turn)
    const request: Permission.PermissionRequest = { ...raw, turnId: turn?.id ?? "" }
    const pending: PendingPermission = {
      request,
      requestedAt: now,
      state: "deciding",
      // Stryker disable next-line StringLiteral: equivalent, `how` is only read once resolved, and resolve sets it.
      how: "",
      deadline: now + this.settings.deadlines.permission
    }
    this.permissions.set(request.requestId, pending)
    if (denied !== undefined) {
      this.emit({ _tag: "PermissionRequested", turnId: request.turnId, raw: request.raw, request })
      this.output({ _tag: "Decide", at: 0, request, decided: true })
      this.resolve(now, pending, { _tag: "Decided", by: "policy", decision: Permission.deny(denied) }, undefined)
      return
    }
    if (turn !== undefined) this.setStatus("awaiting-permission")
    this.emit({ _tag: "PermissionRequested", turnId: request.turnId, raw: request.raw, request })
    this.output({ _tag: "Decide", at: 0, request })
  }

  private resolve(
    now: number,
    pending: PendingPermission,
    resolution: Permission.Resolution,
    answer: Permission.Verdict | undefined
  ): void {
    if (pending.state === "resolved") return
    const wasDeciding = pending.state === "deciding"
    pending.state = "resolved"
    pending.how = resolution._tag === "Expired" ? `expired: ${resolution.why}` : resolution._tag
    const request = pending.request
    if (wasDeciding) this.output({ _tag: "StopDeciding", at: 0, requestId: request.requestId })
    if (answer !== undefined) {
      const turn = this.active
      if (answer._tag === "Deny" && answer.interrupt === true && turn !== undefined && turn.id === request.turnId) {
        turn.interruptReason = "permission"
      }
      let lines: Provider.Items
      try {
        lines = this.provider.answerPermission(request, answer)
      } catch (cause) {
        // A host answer the protocol refuses to encode (a rewritten input that is not JSON) must not reach the CLI:
        // one unparsable stdin line kills it. The CLI gets an error answer instead.
        this.log(
          "Warning",
          `refusing to send an invalid answer to CLI request ${request.requestId}: ${reasonOf(cause)}`
        )
        lines = this.provider.reply(request.requestId, { _tag: "Error", message: "the host's answer was invalid" })
      }
      this.apply(now, lines)
    }
    this.emit({
      _tag: "PermissionResolved",
      turnId: request.turnId,
      raw: undefined,
      requestId: request.requestId,
      resolution
    })
    this.output({
      _tag: "PermissionWait",
      at: 0,
      millis: now - pending.requestedAt,
      requestId: request.requestId,
      resolution
    })
    const turn = this.active
    if (turn !== undefined && this.status === "awaiting-permission" && !this.awaitingPermission()) {
      // Waiting on a decision is not a stall: the stall clock restarts when the last one is made.
      turn.lastProgress = now
      this.setStatus("running")
    }
    this.pruneResolved()
  }

  private awaitingPermission(): boolean {
    for (const pending of this.permissions.values()) {
      if (pending.state !== "resolved") return true
    }
    return false
  }

  private expirePermissions(now: number, turnId: string | undefined, why: "turn-ended" | "session-ended"): void {
    if (this.permissions.size === 0) return
    for (const pending of [...this.permissions.values()]) {
      // `resolve` leaves a resolved request as it is.
      if (turnId === undefined || pending.request.turnId === turnId) {
        this.resolve(now, pending, { _tag: "Expired", why }, undefined)
      }
    }
  }

  // Resolved requests are kept so that a second answer says `PermissionAlreadyResolved`, up to a bound.
  private pruneResolved(): void {
    if (this.permissions.size <= 1024) return
    for (const [id, pending] of this.permissions) {
      if (this.permissions.size <= 512) break
      if (pending.state === "resolved") this.permissions.delete(id)
    }
  }

  // --- turns -------------------------------------------------------------------------------------------------

  private startTurn(now: number, turn: Turn<H>): void {
    this.active = turn
    turn.phase = "started"
    turn.startedAt = now
    turn.lastProgress = now
    this.emit({ _tag: "TurnStarted", turnId: turn.id, raw: undefined })
    this.setStatus("running")
    forEach(turn.prompt, (item) => this.promptItem(now, turn, item))
  }

  private promptItem(now: number, turn: Turn<H>, item: Provider.Item): void {
    if (item._tag === "Write") this.write(item.line, turn, undefined)
    else this.item(now, item)
  }

  private finish(now: number, turn: Turn<H>, exit: Exit.Exit<TurnResult, AnyTurnError>): void {
    if (turn.finished) return
    turn.finished = true
    turn.phase = Exit.isSuccess(exit) ? "completed" : turn.phase === "queued" ? "cancelled" : "failed"
    this.expirePermissions(now, turn.id, "turn-ended")
    this.stopHostRequests(turn)
    const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
    if (Exit.isSuccess(exit)) {
      this.emit({ _tag: "TurnCompleted", turnId: turn.id, raw: exit.value.raw, result: exit.value })
    } else if (Option.isSome(error)) {
      this.emit({ _tag: "TurnFailed", turnId: turn.id, raw: undefined, error: error.value })
    }
    if (this.active === turn) {
      this.active = undefined
      if (!this.closing) this.setStatus("idle")
    }
    this.output({ _tag: "Settle", at: 0, turn, exit })
    const waiters = turn.waiters
    if (waiters !== undefined) {
      turn.waiters = undefined
      // A turn has waiters only once its interrupt was sent.
      const outcome: InterruptOutcome = this.retiredBecause !== undefined && !Exit.isSuccess(exit)
        ? "retired"
        : Exit.isSuccess(exit)
        ? "completed-first"
        : "interrupted"
      for (const waiter of waiters) this.output({ _tag: "InterruptDone", at: 0, waiter, outcome })
    }
    if (this.active === undefined && !this.closing && this.retiredBecause === undefined) {
      const next = this.queue.shift()
      if (next !== undefined) this.startTurn(now, next)
    }
  }

  private failQueued(now: number, reason: string): void {
    const queued = this.queue.splice(0)
    for (const turn of queued) {
      this.finish(now, turn, Exit.fail(new SessionUnavailable({ status: this.status, reason })))
    }
  }

  // --- controls, host requests, writes ----------------------------------------------------------------------

  private failControls(error: ControlError): void {
    for (const [ref, control] of this.controls) {
      if (!control.internal) this.output({ _tag: "ControlDone", at: 0, ref, exit: Exit.fail(error) })
    }
    this.controls.clear()
  }

  /** Stops the handlers of the CLI's requests (those bound to `turn` only, when given): nothing is answered. */
  private stopHostRequests(turn?: Turn<H>): void {
    if (this.hostRequests.size === 0) return
    for (const [requestId, pending] of this.hostRequests) {
      if (turn !== undefined && pending.turn !== turn) continue
      this.hostRequests.delete(requestId)
      this.output({ _tag: "StopHandling", at: 0, requestId })
    }
  }

  /** The running turn waits on the host's answer to one of the CLI's requests (its stall clock is paused). */
  awaitingHost(): boolean {
    return this.active !== undefined && this.hostWorking(this.active)
  }

  /** The turn waits on the host's handler of one of the CLI's requests. */
  private hostWorking(turn: Turn<H>): boolean {
    if (this.hostRequests.size === 0) return false
    for (const pending of this.hostRequests.values()) if (pending.turn === turn) return true
    return false
  }

  private reply(now: number, requestId: string, reply: Provider.Reply): void {
    let lines: Provider.Items
    try {
      lines = this.provider.reply(requestId, reply)
    } catch (cause) {
      this.log("Warning", `refusing to send an invalid answer to CLI request ${requestId}: ${reasonOf(cause)}`)
      lines = this.provider.reply(requestId, { _tag: "Error", message: "the host's answer was invalid" })
    }
    this.apply(now, lines)
  }

  private write(line: string, owner: Turn<H> | undefined, unless: Turn<H> | undefined, ref?: number): void {
    // Nothing more is written once the session is retired or the CLI exited. (Never a prompt: a turn only starts
    // while the session takes prompts.)
    if (this.retiredBecause !== undefined || this.exit !== undefined) return
    this.outbox.push({ line, owner, unless, ref })
    if (this.outbox.length === 1 && this.inFlight === undefined) {
      this.output({ _tag: "Flush", at: 0, deferred: unless !== undefined })
    }
  }

  /** Takes a turn's prompt out of the outbox, unwritten, and releases its sender. */
  private dropPrompt(turn: Turn<H>): void {
    for (let i = this.outbox.length - 1; i >= 0; i--) {
      if (this.outbox[i].owner === turn) this.outbox.splice(i, 1)
    }
    this.output({ _tag: "Written", at: 0, turn })
  }

  /** Senders waiting for writes that will never happen may return (their turns have failed). */
  private releaseWriters(): void {
    const inFlight = this.inFlight
    if (inFlight !== undefined && inFlight !== null) this.output({ _tag: "Written", at: 0, turn: inFlight })
    for (const pending of this.outbox) {
      if (pending.owner !== undefined) this.output({ _tag: "Written", at: 0, turn: pending.owner })
    }
    this.outbox.length = 0
    this.inFlight = undefined
    this.writeAt = never
  }

  // --- errors and status -------------------------------------------------------------------------------------

  /** The error for work cut short by retirement: the CLI's exit if it exited, else the retirement. */
  private retirementError(reason: string, acknowledged: boolean): CliExited | SessionRetired {
    const exit = this.exit
    return exit !== undefined ? cliExited(exit, acknowledged) : new SessionRetired({ reason, acknowledged })
  }

  private setStatus(next: Status): void {
    if (this.status === next || this.status === "closed" || this.status === "failed") return
    this.status = next
    this.emit({ _tag: "Status", turnId: this.active?.id, raw: undefined, status: next })
  }

  private malformed(now: number, error: ProtocolError, raw: unknown): void {
    this.events.push({ _tag: "ProtocolError", turnId: undefined, raw, error })
    if (now >= this.logWindowEnd) {
      if (this.logSuppressed > 0) this.flushLogSummary(now)
      this.logWindowEnd = now + this.settings.logWindow
      this.logCount = 0
    }
    if (++this.logCount <= this.settings.logBurst) this.log("Warning", error.message)
    else this.logSuppressed++
  }

  private flushLogSummary(now: number): void {
    this.log(
      "Warning",
      `${this.logSuppressed} more protocol errors in the last ${this.settings.logWindow} ms were not logged`
    )
    this.logSuppressed = 0
    this.logCount = 0
    this.logWindowEnd = now + this.settings.logWindow
  }

  private log(level: "Warning" | "Error", message: string): void {
    this.output({ _tag: "Log", at: 0, level, message })
  }

  private emit(event: SessionEvent): void {
    this.events.push(event)
  }

  private output(output: Output<H>): void {
    ;(output as { at: number }).at = this.events.length
    this.outputs.push(output)
  }
}
