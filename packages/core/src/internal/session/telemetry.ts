/**
 * A session's spans and metrics, kept by the driver (`driver.ts`) at the moments the machine's outputs mark: a
 * turn's span opens when it is sent and closes with its `Settle`, a control's with its `ControlDone`, a permission
 * wait's between its `Decide` and its `PermissionWait`; `Ready`, `StartFailed` and `Teardown` mark the session's
 * start and its retirement, and the session's scope its end. The machine knows nothing of them.
 *
 * Nothing here runs an Effect. Spans are made and ended directly on the tracer of the context the session was made
 * in (`tracer.span(...)`, `span.end(...)`); with no tracer installed (Effect's native tracer, which exports nothing)
 * or tracing disabled, no span is made at all. Metrics are updated with `Metric.updateUnsafe` against that same
 * context, through series bound to their attributes once per provider (`Metric.withAttributes` would add to the
 * context on every update). A tiny turn costs a handful of map lookups and updates, and no Effect operation; the
 * per-frame path costs one field check per batch of events, until the running turn's first output.
 *
 * The names, attributes and units are documented on `Session.metrics` and in `Session`'s module docs.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as LogLevel from "effect/LogLevel"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"
import type * as Permission from "../../Permission.ts"
import { SessionRetired } from "../../TetherError.ts"
import type { AnyTurnError, TurnResult } from "../../Turn.ts"
import * as Machine from "./machine.ts"

// ---------------------------------------------------------------------------------------------------------------
// The metrics
// ---------------------------------------------------------------------------------------------------------------

// Each metric is made by one function, so that the series bound to attributes here and a host's
// `Metric.withAttributes(Session.metrics.x, {...})` have the same key (type, name, description, attributes).

const sessionsLive = (attributes?: Metric.Metric.Attributes) =>
  Metric.gauge("tether_sessions_live", { description: "Sessions started and not yet released", attributes })

const startDuration = (attributes?: Metric.Metric.Attributes) =>
  Metric.timer("tether_session_start_duration", {
    description: "Session starts, spawn to the handshake's end (or to the start's failure)",
    attributes
  })

const turns = (attributes?: Metric.Metric.Attributes) =>
  Metric.counter("tether_session_turns", { description: "Turns ended, by outcome", incremental: true, attributes })

const turnDuration = (attributes?: Metric.Metric.Attributes) =>
  Metric.timer("tether_session_turn_duration", { description: "Turns, sent to settled", attributes })

const firstOutput = (attributes?: Metric.Metric.Attributes) =>
  Metric.timer("tether_session_turn_first_output", {
    description: "Turns, prompt handed to the CLI to the first text, message or tool use",
    attributes
  })

const tokens = (attributes?: Metric.Metric.Attributes) =>
  Metric.counter("tether_session_tokens", {
    description: "Tokens the CLI reported for completed turns, by kind",
    incremental: true,
    attributes: { unit: "{token}", ...attributes }
  })

const cost = (attributes?: Metric.Metric.Attributes) =>
  Metric.counter("tether_session_cost_usd", {
    description: "Cost the CLI reported for completed turns, in US dollars",
    incremental: true,
    attributes: { unit: "USD", ...attributes }
  })

const controlDuration = (attributes?: Metric.Metric.Attributes) =>
  Metric.timer("tether_session_control_duration", {
    description: "Control requests, sent to answered, by subtype and outcome",
    attributes
  })

const retirements = (attributes?: Metric.Metric.Attributes) =>
  Metric.counter("tether_session_retirements", {
    description: "Sessions retired (torn down because they could not go on), by reason",
    incremental: true,
    attributes
  })

/** The metrics every session records (`Session.metrics`), without attributes. */
export const metrics = {
  permissionWait: Metric.timer("tether_session_permission_wait", {
    description: "Permission requests, requested to resolved"
  }),
  sessionsLive: sessionsLive(),
  startDuration: startDuration(),
  turns: turns(),
  turnDuration: turnDuration(),
  firstOutput: firstOutput(),
  tokens: tokens(),
  cost: cost(),
  controlDuration: controlDuration(),
  retirements: retirements()
} as const

/** How a turn ended, as the `outcome` attribute says it. */
export type Outcome = "completed" | "interrupted" | "api_error" | "failed"

type ByOutcome<M> = { readonly [K in Outcome]: M }

const byOutcome = <M>(make: (outcome: Outcome) => M): ByOutcome<M> => ({
  completed: make("completed"),
  interrupted: make("interrupted"),
  api_error: make("api_error"),
  failed: make("failed")
})

/** The series of one provider, bound to their attributes once. */
class Series {
  readonly live: Metric.Gauge<number>
  readonly started: Metric.Histogram<Duration.Duration>
  readonly startFailed: Metric.Histogram<Duration.Duration>
  readonly turns: ByOutcome<Metric.Counter<number>>
  readonly turnDuration: ByOutcome<Metric.Histogram<Duration.Duration>>
  readonly firstOutput: Metric.Histogram<Duration.Duration>
  readonly inputTokens: Metric.Counter<number>
  readonly outputTokens: Metric.Counter<number>
  readonly cacheReadTokens: Metric.Counter<number>
  readonly cacheCreationTokens: Metric.Counter<number>
  readonly cost: Metric.Counter<number>
  private readonly controls = new Map<string, Metric.Histogram<Duration.Duration>>()
  private readonly retirements = new Map<string, Metric.Counter<number>>()
  readonly provider: string
  constructor(provider: string) {
    this.provider = provider
    this.live = sessionsLive({ provider })
    this.started = startDuration({ provider, outcome: "ready" })
    this.startFailed = startDuration({ provider, outcome: "failed" })
    this.turns = byOutcome((outcome) => turns({ provider, outcome }))
    this.turnDuration = byOutcome((outcome) => turnDuration({ provider, outcome }))
    this.firstOutput = firstOutput({ provider })
    this.inputTokens = tokens({ provider, kind: "input" })
    this.outputTokens = tokens({ provider, kind: "output" })
    this.cacheReadTokens = tokens({ provider, kind: "cache_read" })
    this.cacheCreationTokens = tokens({ provider, kind: "cache_creation" })
    this.cost = cost({ provider })
  }
  control(subtype: string, outcome: string): Metric.Histogram<Duration.Duration> {
    const key = `${subtype}\u0000${outcome}`
    let series = this.controls.get(key)
    if (series === undefined) {
      series = controlDuration({ provider: this.provider, subtype, outcome })
      this.controls.set(key, series)
    }
    return series
  }
  retirement(reason: string): Metric.Counter<number> {
    let series = this.retirements.get(reason)
    if (series === undefined) {
      series = retirements({ provider: this.provider, reason })
      this.retirements.set(reason, series)
    }
    return series
  }
}

const seriesByProvider = new Map<string, Series>()

const seriesOf = (provider: string): Series => {
  let series = seriesByProvider.get(provider)
  if (series === undefined) {
    series = new Series(provider)
    seriesByProvider.set(provider, series)
  }
  return series
}

// ---------------------------------------------------------------------------------------------------------------
// Classifications
// ---------------------------------------------------------------------------------------------------------------

/** The `outcome` of a turn's exit. */
export const outcomeOf = (exit: Exit.Exit<unknown, AnyTurnError>): Outcome => {
  if (Exit.isSuccess(exit)) return "completed"
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) return "failed"
  switch (error.value._tag) {
    case "TurnInterrupted":
      return "interrupted"
    case "ApiError":
      return "api_error"
    default:
      return "failed"
  }
}

const errorTagOf = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const error = Cause.findErrorOption(exit.cause)
  return Option.isSome(error) ? (error.value as { readonly _tag?: string })._tag ?? "Error" : "Defect"
}

const resolutionOf = (resolution: Permission.Resolution): { readonly by: string; readonly behavior?: string } => {
  switch (resolution._tag) {
    case "Decided":
      return { by: resolution.by, behavior: resolution.decision._tag === "Allow" ? "allow" : "deny" }
    case "Expired":
      return { by: "expired", behavior: "deny" }
    case "PolicyFailed":
      return { by: "policy-failed", behavior: "deny" }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One session's telemetry
// ---------------------------------------------------------------------------------------------------------------

/**
 * `span`, its recording methods made unable to throw. Patched on the span itself (not a wrapper): the span stays
 * the host tracer's own object, with its own identity, as a parent or a link of the next one.
 */
const guarded = (span: Tracer.Span): Tracer.Span => {
  const { addLinks, attribute, end, event } = span
  const target = span as { -readonly [K in keyof Tracer.Span]: Tracer.Span[K] }
  target.attribute = (key, value) => {
    try {
      attribute.call(span, key, value)
    } catch {
      // The host's tracer failed: this attribute is lost.
    }
  }
  target.event = (name, startTime, attributes) => {
    try {
      event.call(span, name, startTime, attributes)
    } catch {
      // The host's tracer failed: this event is lost.
    }
  }
  target.addLinks = (links) => {
    try {
      addLinks.call(span, links)
    } catch {
      // The host's tracer failed: these links are lost.
    }
  }
  target.end = (endTime, exit) => {
    try {
      end.call(span, endTime, exit)
    } catch {
      // The host's tracer failed: the span is not exported.
    }
  }
  return span
}

/** A control request on its way: what its answer needs to close its span and record its duration. */
export interface ControlTrace {
  readonly subtype: string
  readonly sentAt: number
  readonly span: Tracer.Span | undefined
}

/** The span of a turn and what its end reports (the driver keeps one per turn). */
export interface TurnTrace {
  readonly sentAt: number
  readonly span: Tracer.Span | undefined
  firstOutputMillis: number | undefined
}

const bigint0 = BigInt(0)

export class Telemetry {
  readonly series: Series
  readonly model: string | undefined
  /** The context the session was made in: its metric registry and metric attributes. */
  readonly context: Context.Context<never>
  readonly clock: Clock.Clock
  /** The tracer, or undefined when no span is made. */
  readonly tracer: Tracer.Tracer | undefined
  readonly sampled: boolean
  readonly timing: boolean
  /** The span annotations of the context the session was made in (a registry's id and generation). */
  readonly annotations: { readonly [key: string]: unknown }
  readonly span: Tracer.Span | undefined
  readonly startedAt: number
  private startRecorded = false
  private wasReady = false
  private live = false
  private turnCount = 0
  private retiredBecause: string | undefined = undefined
  /** The CLI's cumulative cost at the last completed turn (Claude reports cost over the process). */
  private costSoFar = 0
  private readonly permissions: Map<string, Tracer.Span> | undefined

  constructor(
    fiber: Fiber.Fiber<unknown, unknown>,
    clock: Clock.Clock,
    provider: string,
    model: string | undefined
  ) {
    this.series = seriesOf(provider)
    this.model = model
    this.context = fiber.context
    this.clock = clock
    const cache = fiber.cache
    const tracer = cache.tracer
    this.tracer = cache.tracerEnabled && tracer !== undefined && tracer !== Tracer.nativeTracer ? tracer : undefined
    this.sampled = !LogLevel.isGreaterThan(fiber.getRef(Tracer.MinimumTraceLevel), "Info")
    this.timing = fiber.getRef(References.TracerTimingEnabled)
    this.annotations = fiber.getRef(References.TracerSpanAnnotations)
    this.startedAt = clock.currentTimeMillisUnsafe()
    this.permissions = this.tracer === undefined ? undefined : new Map()
    this.span = this.tracer === undefined ? undefined : this.open("tether.session", cache.span, false)
    if (this.span !== undefined && model !== undefined) this.span.attribute("tether.model", model)
  }

  private nanos(): bigint {
    return this.timing ? this.clock.currentTimeNanosUnsafe() : bigint0
  }

  /**
   * A span of this session under `parent`, linked to the session's span when that is not its parent. The host's
   * tracer is guarded here, once for every span: what it throws (making the span, or recording on it) loses that
   * span's data, never the session's work that records it.
   */
  private open(name: string, parent: Tracer.AnySpan | undefined, link: boolean): Tracer.Span {
    const session = this.span
    const options = {
      name,
      parent: parent === undefined ? Option.none<Tracer.AnySpan>() : Option.some(parent),
      annotations: Context.empty(),
      links: link && session !== undefined && parent !== session ? [{ span: session, attributes: {} }] : [],
      startTime: this.nanos(),
      kind: "internal" as const,
      root: false,
      sampled: parent?.sampled === false ? false : this.sampled
    }
    let made: Tracer.Span
    try {
      made = this.tracer!.span(options)
    } catch {
      made = new Tracer.NativeSpan(options)
    }
    const span = guarded(made)
    for (const key in this.annotations) span.attribute(key, this.annotations[key])
    span.attribute("tether.provider", this.series.provider)
    return span
  }

  // --- the session ---------------------------------------------------------------------------------------------

  ready(now: number, pid: Option.Option<number>): void {
    this.startRecorded = true
    this.wasReady = true
    this.live = true
    this.series.started.updateUnsafe(Duration.millis(now - this.startedAt), this.context)
    this.series.live.modifyUnsafe(1, this.context)
    const span = this.span
    if (span !== undefined) {
      span.event("ready", this.nanos(), {})
      if (Option.isSome(pid)) span.attribute("process.pid", pid.value)
    }
  }

  startFailed(now: number): void {
    if (this.startRecorded) return
    this.startRecorded = true
    this.series.startFailed.updateUnsafe(Duration.millis(now - this.startedAt), this.context)
  }

  retired(reason: string, kind: Machine.RetireKind): void {
    this.retiredBecause = reason
    this.series.retirement(kind).updateUnsafe(1, this.context)
    const span = this.span
    if (span !== undefined) {
      span.attribute("tether.session.retired", kind)
      span.event("retired", this.nanos(), { "tether.session.retired": kind, reason })
    }
  }

  /** The session's scope closed: the process is gone (or never started). */
  ended(exit: Exit.Exit<unknown, unknown>, machine: Machine.Machine | undefined): void {
    if (!this.startRecorded) this.startFailed(this.clock.currentTimeMillisUnsafe())
    if (this.live) {
      this.live = false
      this.series.live.modifyUnsafe(-1, this.context)
    }
    const span = this.span
    if (span === undefined) return
    span.attribute("tether.session.turns", this.turnCount)
    if (machine !== undefined) {
      span.attribute("tether.session.status", machine.status)
      if (machine.sessionId !== undefined) span.attribute("tether.conversation.id", machine.sessionId)
      const process = machine.process
      if (process._tag !== "Running") {
        if (process.status._tag === "Exited") span.attribute("process.exit.code", process.status.code)
        else span.attribute("process.exit.signal", process.status.signal)
      }
    }
    // A session that did not start ends with the start's failure; one that did is a success unless it was retired.
    // (The scope's own exit says nothing of the session once it started: it is the host's.)
    span.end(
      this.nanos(),
      !this.wasReady && Exit.isFailure(exit)
        ? exit
        : this.retiredBecause !== undefined
        ? Exit.fail(new SessionRetired({ reason: this.retiredBecause, acknowledged: true }))
        : Exit.void
    )
  }

  // --- turns ---------------------------------------------------------------------------------------------------

  /** A turn was sent by a fiber whose span is `parent` (if any). */
  turnSent(turnId: string, now: number, parent: Tracer.AnySpan | undefined): TurnTrace {
    this.turnCount++
    if (this.tracer === undefined) return { sentAt: now, span: undefined, firstOutputMillis: undefined }
    const span = this.open("tether.turn", parent ?? this.span, true)
    span.attribute("tether.turn.id", turnId)
    if (this.model !== undefined) span.attribute("tether.model", this.model)
    return { sentAt: now, span, firstOutputMillis: undefined }
  }

  /** The running turn's first output (text, message or tool use), `now - startedAt` after its prompt was taken. */
  firstOutput(trace: TurnTrace, millis: number): void {
    trace.firstOutputMillis = millis
    this.series.firstOutput.updateUnsafe(Duration.millis(millis), this.context)
  }

  turnSettled(
    trace: TurnTrace,
    exit: Exit.Exit<TurnResult, AnyTurnError>,
    now: number,
    conversationId: string | undefined
  ): void {
    const series = this.series
    const context = this.context
    const outcome = outcomeOf(exit)
    series.turns[outcome].updateUnsafe(1, context)
    series.turnDuration[outcome].updateUnsafe(Duration.millis(now - trace.sentAt), context)
    let delta: number | undefined = undefined
    if (Exit.isSuccess(exit)) {
      const usage = exit.value.usage
      if (usage.inputTokens > 0) series.inputTokens.updateUnsafe(usage.inputTokens, context)
      if (usage.outputTokens > 0) series.outputTokens.updateUnsafe(usage.outputTokens, context)
      if (usage.cacheReadInputTokens > 0) series.cacheReadTokens.updateUnsafe(usage.cacheReadInputTokens, context)
      if (usage.cacheCreationInputTokens > 0) {
        series.cacheCreationTokens.updateUnsafe(usage.cacheCreationInputTokens, context)
      }
      const total = (exit.value as { readonly totalCostUsd?: number | undefined }).totalCostUsd
      if (typeof total === "number" && total >= this.costSoFar) {
        delta = total - this.costSoFar
        this.costSoFar = total
        if (delta > 0) series.cost.updateUnsafe(delta, context)
      }
    }
    const span = trace.span
    if (span === undefined) return
    span.attribute("tether.turn.outcome", outcome)
    const conversation = Exit.isSuccess(exit) ? exit.value.sessionId ?? conversationId : conversationId
    if (conversation !== undefined) span.attribute("tether.conversation.id", conversation)
    if (trace.firstOutputMillis !== undefined) span.attribute("tether.turn.first_output_ms", trace.firstOutputMillis)
    if (Exit.isSuccess(exit)) {
      const result = exit.value
      const usage = result.usage
      span.attribute("tether.tokens.input", usage.inputTokens)
      span.attribute("tether.tokens.output", usage.outputTokens)
      span.attribute("tether.tokens.cache_read", usage.cacheReadInputTokens)
      span.attribute("tether.tokens.cache_creation", usage.cacheCreationInputTokens)
      if (delta !== undefined) span.attribute("tether.cost_usd", delta)
      if (result.durationMs !== undefined) span.attribute("tether.turn.cli_duration_ms", result.durationMs)
    } else {
      span.attribute("tether.turn.error", errorTagOf(exit)!)
    }
    span.end(this.nanos(), exit)
  }

  // --- controls and permissions --------------------------------------------------------------------------------

  controlSent(request: unknown, now: number, parent: Tracer.AnySpan | undefined): ControlTrace {
    const subtype = Machine.subtypeOf(request)
    if (this.tracer === undefined) return { subtype, sentAt: now, span: undefined }
    const span = this.open("tether.control", parent ?? this.span, true)
    span.attribute("tether.control.subtype", subtype)
    return { subtype, sentAt: now, span }
  }

  controlDone(trace: ControlTrace, exit: Exit.Exit<unknown, unknown>, now: number): void {
    const outcome = errorTagOf(exit) ?? "ok"
    this.series.control(trace.subtype, outcome).updateUnsafe(Duration.millis(now - trace.sentAt), this.context)
    const span = trace.span
    if (span === undefined) return
    span.attribute("tether.control.outcome", outcome)
    span.end(this.nanos(), exit)
  }

  permissionRequested(request: Permission.PermissionRequest, turn: Tracer.Span | undefined): void {
    const permissions = this.permissions
    if (permissions === undefined) return
    const span = this.open("tether.permission", turn ?? this.span, false)
    span.attribute("tether.permission.request_id", request.requestId)
    span.attribute("tether.permission.kind", request.kind)
    span.attribute("tether.permission.tool", request.toolName)
    if (request.turnId !== "") span.attribute("tether.turn.id", request.turnId)
    permissions.set(request.requestId, span)
  }

  permissionResolved(requestId: string, resolution: Permission.Resolution, millis: number): void {
    metrics.permissionWait.updateUnsafe(Duration.millis(millis), this.context)
    const span = this.permissions?.get(requestId)
    if (span === undefined) return
    this.permissions!.delete(requestId)
    const { behavior, by } = resolutionOf(resolution)
    span.attribute("tether.permission.resolved_by", by)
    if (behavior !== undefined) span.attribute("tether.permission.behavior", behavior)
    if (resolution._tag === "Expired") span.attribute("tether.permission.expired", resolution.why)
    span.end(this.nanos(), Exit.void)
  }
}

/** The telemetry of a session made by the current fiber (its tracer, span, annotations and metric context). */
export const make = (clock: Clock.Clock, provider: string, model: string | undefined): Effect.Effect<Telemetry> =>
  Effect.withFiber((fiber) => Effect.succeed(new Telemetry(fiber, clock, provider, model)))
