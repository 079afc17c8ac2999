/**
 * A bench for the pure session machine: it feeds inputs at chosen times, plays the writer the way the driver does
 * (woken by `Flush`, then taking lines until the outbox is empty), and renders what each input produced as one
 * ordered trace of short strings: events in PascalCase (`TurnStarted@t1`), outputs in lower case (`settle t1 ok`),
 * lines the writer wrote as `> line`. Tables compare traces; the property test reads the raw records.
 */
import { Cause, Exit } from "effect"
import * as Machine from "../../src/internal/session/machine.ts"
import type * as Permission from "../../src/Permission.ts"
import type * as Provider from "../../src/Provider.ts"
import type { SessionEvent } from "../../src/SessionEvent.ts"
import { ProtocolError } from "../../src/TetherError.ts"

export const deadlines: Machine.Deadlines = {
  startup: 1000,
  control: 100,
  delivery: 50,
  ack: 300,
  turn: 10_000,
  stall: 1000,
  interrupt: 200,
  permission: 500
}

export interface Overrides {
  readonly deadlines?: Partial<Machine.Deadlines>
  readonly queue?: boolean
  readonly queueCapacity?: number
  readonly logBurst?: number
  readonly logWindow?: number
}

export const settings = (overrides: Overrides = {}): Machine.Settings => {
  let id = 0
  return {
    deadlines: { ...deadlines, ...overrides.deadlines },
    queue: overrides.queue ?? false,
    queueCapacity: overrides.queueCapacity ?? 2,
    makeId: () => `t${++id}`,
    logBurst: overrides.logBurst ?? 2,
    logWindow: overrides.logWindow ?? 1000
  }
}

// --- a scripted protocol machine ---------------------------------------------------------------------------------

export const write = (line: string): Provider.Item => ({ _tag: "Write", line })

/**
 * A protocol machine whose wire is the test itself: `receive` returns whatever the test queued with `incoming`,
 * and every command becomes one readable line. Prompts `"invalid"`, control requests `"invalid"` and allow
 * verdicts whose input has `invalid` throw, as a real codec does for what it cannot encode.
 */
export class FakeProtocol implements Provider.ProtocolMachine {
  incoming: Provider.Items = undefined
  startItems: Provider.Items = write("initialize")
  /** Extra items a prompt produces after its line (a provider that also reports something when it sends). */
  promptExtra: ReadonlyArray<Provider.Item> = []
  /** When set, an interrupt produces these items instead of one line. */
  interruptItems: ((turnId: string, ref: number) => Provider.Items) | undefined = undefined
  readonly start = () => this.startItems
  readonly receive = (_line: string): Provider.Items => {
    const items = this.incoming
    this.incoming = undefined
    return items
  }
  readonly prompt = (turnId: string, prompt: unknown): Provider.Items => {
    if (prompt === "invalid") throw new Error("the prompt cannot be encoded")
    // Codecs may throw anything: the session still says why.
    if (prompt === "thrown") throw "not an Error"
    return this.promptExtra.length === 0 ? write(`prompt ${turnId}`) : [write(`prompt ${turnId}`), ...this.promptExtra]
  }
  readonly interrupt = (turnId: string, ref: number): Provider.Items =>
    this.interruptItems !== undefined ? this.interruptItems(turnId, ref) : write(`interrupt ${turnId} #${ref}`)
  readonly control = (ref: number, request: unknown): Provider.Items => {
    if (request === "invalid") throw new Error("the request cannot be encoded")
    return write(`control #${ref}`)
  }
  readonly answerPermission = (request: Permission.PermissionRequest, verdict: Permission.Verdict): Provider.Items => {
    if (verdict._tag === "Allow" && verdict.updatedInput !== undefined && "invalid" in verdict.updatedInput) {
      throw new Error("the input is not JSON")
    }
    return write(
      `answer ${request.requestId} ${
        verdict._tag === "Allow" ? "allow" : `deny${verdict.interrupt ? "+interrupt" : ""}: ${verdict.message}`
      }`
    )
  }
  readonly reply = (requestId: string, reply: Provider.Reply): Provider.Items =>
    write(
      `reply ${requestId} ${
        reply._tag === "Success" ? "success" : reply._tag === "Error" ? `error: ${reply.message}` : "(not a reply)"
      }`
    )
  readonly capabilities = (): Provider.Capabilities => ({
    provider: "fake",
    receipts: "first-output",
    interrupt: true,
    permissionKinds: ["tool"],
    resume: false,
    sandbox: undefined,
    notes: []
  })
}

// --- items the fake CLI sends ------------------------------------------------------------------------------------

/** The permission request of a Bash tool use (`touch x`), as a provider reports it. */
const bashUse = (requestId: string): Omit<Permission.PermissionRequest, "turnId"> => ({
  requestId,
  kind: "tool",
  toolName: "Bash",
  toolUseId: `tool-${requestId}`,
  input: { command: "touch x" },
  description: undefined,
  raw: { requestId }
})

export const I = {
  ready: { _tag: "Ready", info: { version: "fake" } } as Provider.Item,
  refused: (reason: string): Provider.Item => ({ _tag: "Refused", reason }),
  receipt: (turnId: string): Provider.Item => ({ _tag: "Receipt", turnId }),
  /** A frame of the running turn (no turn named), one naming `turnId`, or session traffic. */
  frame: (type: string, turnId?: string): Provider.Item => ({
    _tag: "Frame",
    type,
    subtype: undefined,
    raw: { type },
    turnId
  }),
  sessionFrame: (type: string): Provider.Item => ({
    _tag: "Frame",
    type,
    subtype: undefined,
    raw: { type },
    turnId: undefined,
    scope: "session"
  }),
  text: (text: string, turnId?: string): Provider.Item => ({ _tag: "TextDelta", turnId, raw: { text }, text }),
  end: (outcome: Provider.TurnOutcome = { _tag: "Success" }, turnId?: string): Provider.Item => ({
    _tag: "TurnEnd",
    turnId,
    outcome,
    result: {
      sessionId: "cli-session",
      text: "done",
      usage: { inputTokens: 1, outputTokens: 2, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      durationMs: 5,
      raw: { type: "result" }
    }
  }),
  controlOk: (ref: number, payload: unknown = {}): Provider.Item => ({
    _tag: "ControlAnswer",
    ref,
    answer: { _tag: "Success", payload }
  }),
  controlError: (ref: number, message = "unsupported", code: string | null = "unsupported_request"): Provider.Item => ({
    _tag: "ControlAnswer",
    ref,
    answer: { _tag: "Error", message, code }
  }),
  permission: (requestId: string): Provider.Item => ({ _tag: "PermissionRequest", request: bashUse(requestId) }),
  /** A tool use the CLI denied on its own, with no one to ask. */
  denied: (requestId: string, message = "needs approval"): Provider.Item => ({
    _tag: "PermissionDenied",
    request: bashUse(requestId),
    message
  }),
  hostRequest: (requestId: string): Provider.Item => ({
    _tag: "HostRequest",
    requestId,
    request: { hook: requestId }
  }),
  cancel: (requestId: string): Provider.Item => ({ _tag: "Cancel", requestId }),
  sessionId: (sessionId: string): Provider.Item => ({ _tag: "SessionId", sessionId }),
  malformed: (n = 0): Provider.Item => ({
    _tag: "Malformed",
    error: new ProtocolError({ reason: "not-json", detail: `bad ${n}`, linePrefix: "x" }),
    raw: `bad ${n}`
  })
}

// --- rendering -------------------------------------------------------------------------------------------------

const flag = (on: boolean, name: string) => on ? `,${name}` : ""

/** An error, short: its tag and the fields that carry its disposition. */
export const describeError = (error: unknown): string => {
  const e = error as { readonly _tag: string; readonly [key: string]: any }
  switch (e._tag) {
    case "TurnInterrupted":
      return `TurnInterrupted(${e.reason}${flag(e.acknowledged, "acknowledged")}${flag(e.written, "written")})`
    case "InterruptTimeout":
      return `InterruptTimeout(${e.reason}${flag(e.acknowledged, "acknowledged")})`
    case "CliExited":
      return `CliExited(${e.exit}${flag(e.acknowledged, "acknowledged")})`
    case "SessionRetired":
      return `SessionRetired(${e.acknowledged ? "acknowledged" : ""})`
    case "ApiError":
      return `ApiError(${e.status})`
    case "ControlFailed":
      return `ControlFailed(${e.subtype},${e.code})`
    case "ControlTimeout":
      return `ControlTimeout(${e.subtype})`
    case "SessionUnavailable":
      return `SessionUnavailable(${e.status})`
    case "TurnInFlight":
      return `TurnInFlight(${e.activeTurnId})`
    case "QueueFull":
      return `QueueFull(${e.capacity})`
    case "DeliveryTimeout":
      return `DeliveryTimeout(${e.timeoutMillis})`
    case "TransportWriteError":
      return `TransportWriteError(${e.reason})`
    case "InvalidPrompt":
      return `InvalidPrompt(${e.reason})`
    case "PermissionAlreadyResolved":
      return `PermissionAlreadyResolved(${e.how})`
    default:
      return e._tag
  }
}

const describeExit = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit)) return "ok"
  const error = Cause.findErrorOption(exit.cause)
  return error._tag === "Some" ? describeError(error.value) : Cause.pretty(exit.cause)
}

const resolutionOf = (r: Permission.Resolution): string =>
  r._tag === "Decided"
    ? `${r.by}:${r.decision._tag === "Allow" ? "allow" : `deny${r.decision.interrupt ? "+interrupt" : ""}`}`
    : r._tag === "Expired"
    ? `expired:${r.why}`
    : `${r._tag}: ${r.reason}`

export const describeEvent = (e: SessionEvent): string => {
  const at = e.turnId === undefined ? "" : `@${e.turnId}`
  switch (e._tag) {
    case "Status":
      return `Status:${e.status}${at}`
    case "Frame":
      return `Frame:${e.type}${e.subtype === undefined ? "" : `/${e.subtype}`}${at}`
    case "TurnFailed":
      return `TurnFailed${at} ${describeError(e.error)}`
    case "PermissionRequested":
      return `PermissionRequested${at} ${e.request.requestId}`
    case "PermissionResolved":
      return `PermissionResolved${at} ${e.requestId} ${resolutionOf(e.resolution)}`
    case "Exit":
      return `Exit ${e.status._tag === "Exited" ? e.status.code : e.status.signal}${
        e.stderrTail === "" ? "" : ` ${JSON.stringify(e.stderrTail)}`
      }`
    case "TextDelta":
      return `TextDelta${at} ${e.text}`
    default:
      return `${e._tag}${at}`
  }
}

export const describeOutput = (o: Machine.Output): string => {
  switch (o._tag) {
    case "Flush":
      return "flush"
    case "Settle":
      return `settle ${o.turn.id} ${describeExit(o.exit)}`
    case "Written":
      return `written ${o.turn.id}`
    case "ControlDone":
      return `control #${o.ref} ${Exit.isSuccess(o.exit) ? `ok ${JSON.stringify(o.exit.value)}` : describeExit(o.exit)}`
    case "InterruptDone":
      return `interrupt waiter ${o.waiter} ${o.outcome}`
    case "Decide":
      return `${o.decided === true ? "decided" : "decide"} ${o.request.requestId}@${o.request.turnId}`
    case "StopDeciding":
      return `stop deciding ${o.requestId}`
    case "Handle":
      return `handle ${o.requestId} ${JSON.stringify(o.request)}`
    case "StopHandling":
      return `stop handling ${o.requestId}`
    case "Ready":
      return `ready ${JSON.stringify(o.info)}`
    case "StartFailed":
      return `start failed (${o.cause}): ${o.reason}${o.stderrTail === undefined ? "" : ` [${o.stderrTail}]`}`
    case "Teardown":
      return "teardown"
    case "Log":
      return `log ${o.level}: ${o.message}`
    case "PermissionWait":
      return `permission wait ${o.millis}`
    case "Ended":
      return "ended"
  }
}

// --- the bench -------------------------------------------------------------------------------------------------

/** One thing the machine did, in its order: an event, an output, or a line the writer wrote. */
export type Record =
  | { readonly _tag: "Event"; readonly event: SessionEvent; readonly time: number }
  | { readonly _tag: "Output"; readonly output: Machine.Output; readonly time: number }
  | { readonly _tag: "Wrote"; readonly line: string; readonly time: number }

export const describeRecord = (r: Record): string =>
  r._tag === "Event" ? describeEvent(r.event) : r._tag === "Output" ? describeOutput(r.output) : `> ${r.line}`

export class Bench<P extends Provider.ProtocolMachine = Provider.ProtocolMachine> {
  now = 0
  /** The driver plays the writer: woken by `Flush`, it writes until the outbox is empty. Off: the test does. */
  autoWrite = true
  /** A line the writer took and has not finished writing. */
  inFlight: string | undefined = undefined
  private awake = false
  readonly records: Array<Record> = []
  private mark = 0
  readonly m: Machine.Machine
  readonly protocol: P

  constructor(protocol: P, overrides: Overrides = {}) {
    this.protocol = protocol
    this.m = new Machine.Machine(protocol, settings(overrides))
  }

  /** Moves the clock to `ms` (never backwards). */
  at(ms: number): this {
    if (ms < this.now) throw new Error(`the clock cannot go back from ${this.now} to ${ms}`)
    this.now = ms
    return this
  }

  /** Runs one input at the current time, lets the writer run, and returns what the input returned. */
  input<A>(f: (m: Machine.Machine, now: number) => A): A {
    const result = f(this.m, this.now)
    this.collect()
    if (this.autoWrite) this.writeAll()
    return result
  }

  /** What the machine did since the last call to `trace`. */
  trace(): Array<string> {
    const out = this.records.slice(this.mark).map(describeRecord)
    this.mark = this.records.length
    return out
  }

  /** Runs an input and returns its own trace (what `trace` returns next still includes it). */
  step(f: (m: Machine.Machine, now: number) => unknown): Array<string> {
    const start = this.records.length
    this.input(f)
    return this.records.slice(start).map(describeRecord)
  }

  private collect(): void {
    const { events, outputs } = this.m
    this.m.drained()
    let published = 0
    for (const output of outputs) {
      while (published < output.at) this.records.push({ _tag: "Event", event: events[published++], time: this.now })
      this.records.push({ _tag: "Output", output, time: this.now })
      if (output._tag === "Flush") this.awake = true
    }
    while (published < events.length) this.records.push({ _tag: "Event", event: events[published++], time: this.now })
  }

  /** The writer: takes and writes lines until there are none (only once a `Flush` woke it, as the driver's). */
  writeAll(): void {
    while (this.awake && this.inFlight === undefined) {
      const line = this.m.take(this.now)
      this.collect()
      if (line === undefined) {
        this.awake = false
        return
      }
      this.records.push({ _tag: "Wrote", line, time: this.now })
      this.m.written(this.now)
      this.collect()
    }
  }

  /** Manual writer: takes the next line (its write is then in flight). */
  take(): string | undefined {
    const line = this.m.take(this.now)
    this.collect()
    if (line !== undefined) this.inFlight = line
    else this.awake = false
    return line
  }

  /** Manual writer: the line in flight was written. */
  written(): void {
    const line = this.inFlight
    this.inFlight = undefined
    if (line !== undefined) this.records.push({ _tag: "Wrote", line, time: this.now })
    this.m.written(this.now)
    this.collect()
  }

  get writerAwake(): boolean {
    return this.awake
  }

  /** Every line the writer wrote so far. */
  wrote(): Array<string> {
    return this.records.flatMap((r) => r._tag === "Wrote" ? [r.line] : [])
  }

  events(): Array<SessionEvent> {
    return this.records.flatMap((r) => r._tag === "Event" ? [r.event] : [])
  }

  outputs(): Array<Machine.Output> {
    return this.records.flatMap((r) => r._tag === "Output" ? [r.output] : [])
  }

  /** Ticks when the clock reached the machine's deadline (as the driver's timer does). */
  tick(): Array<string> {
    return this.step((m, now) => m.tick(now))
  }

  /** Moves the clock to the next deadline and ticks there. */
  tickAtDeadline(): Array<string> {
    const next = this.m.nextDeadline()
    if (!Number.isFinite(next)) throw new Error("no deadline to tick at")
    this.at(Math.max(this.now, next))
    return this.tick()
  }
}

/** A bench over the scripted protocol, started and through its handshake at time 0 unless `started` is false. */
export const fake = (overrides: Overrides = {}, started = true): Bench<FakeProtocol> & { cli: Cli } => {
  const bench = new Bench(new FakeProtocol(), overrides) as Bench<FakeProtocol> & { cli: Cli }
  bench.cli = (...items) =>
    bench.step((m, now) => {
      bench.protocol.incoming = items
      m.receive(now, "line")
    })
  if (started) {
    bench.input((m, now) => m.start(now))
    bench.cli(I.ready)
    bench.trace()
  }
  return bench
}

/** Feeds items as if the CLI had printed one line that decodes to them; returns the trace. */
export type Cli = (...items: ReadonlyArray<Provider.Item>) => Array<string>
