import { assert, describe, it } from "@effect/vitest"
import { ClaudeRegistry, ClaudeSession } from "@tether/claude"
import { Permission, Session, TetherError, Timeouts } from "@tether/core"
import { MockClaude, MockTransport } from "@tether/testing"
import { Effect, Exit, Layer, Metric, Option, References, Scope, Tracer } from "effect"
import * as TestTime from "../../../core/test/support/TestTime.ts"

// The spans and metrics of a session (`Session`'s module docs and `Session.metrics`), on TestClock through
// MockTransport, with a tracer that keeps every span it makes and a metric registry of each test's own.

const settle = <A, E, R>(effect: Effect.Effect<A, E, R>) => TestTime.settle(effect, { step: "5 millis", steps: 4_000 })

/** A tracer that keeps its spans (Effect's own `NativeSpan`s), and the spans of a name it made. */
const recorder = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  const named = (name: string) => spans.filter((span) => span.name === name)
  return { spans, tracer, named }
}

/** Runs `body` with a tracer and a fresh metric registry. */
const traced = <A, E, R>(body: (spans: ReturnType<typeof recorder>) => Effect.Effect<A, E, R>) => {
  const spans = recorder()
  return body(spans).pipe(
    Effect.provideService(Tracer.Tracer, spans.tracer),
    Effect.provideService(Metric.MetricRegistry, new Map())
  )
}

/** Starts a Claude session in its own scope, runs `body`, then closes the session on TestClock. */
const withSession = <A, E, R>(
  options: ClaudeSession.Options,
  body: (session: ClaudeSession.ClaudeSession) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const session = yield* settle(ClaudeSession.make(options).pipe(Scope.provide(scope)))
    const exit = yield* Effect.exit(body(session))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

const mock = (script: MockClaude.Script = MockClaude.defaultScript) => Effect.provide(MockTransport.layer(script))

const attribute = (span: Tracer.NativeSpan | undefined, key: string) => span?.attributes.get(key)

const count = (metric: Metric.Metric<any, { readonly count: number }>, attributes: Record<string, string>) =>
  Effect.map(Metric.value(Metric.withAttributes(metric, attributes)), (state) => state.count)

const gauge = (metric: Metric.Metric<any, { readonly value: number }>, attributes: Record<string, string>) =>
  Effect.map(Metric.value(Metric.withAttributes(metric, attributes)), (state) => state.value)

const claude = { provider: "claude" }

const bash = (command: string) =>
  MockClaude.tool({ name: "Bash", input: { command }, output: (input) => `ran: ${input.command}` })

describe("Session telemetry", () => {
  it.effect("a session's span lasts until release; each turn's span is the sender's child, linked to it", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        const results = yield* withSession({ model: "sonnet" }, (session) =>
          Effect.gen(function*() {
            const first = yield* settle(session.run("hello").pipe(Effect.withSpan("host.request")))
            const second = yield* settle(session.run("again"))
            const [sessionSpan] = recorded.named("tether.session")
            assert.strictEqual(sessionSpan.status._tag, "Started", "the session's span is open while it lives")
            return [first, second] as const
          }))
        const [sessionSpan] = recorded.named("tether.session")
        assert.strictEqual(sessionSpan.status._tag, "Ended")
        assert.isTrue(sessionSpan.status._tag === "Ended" && Exit.isSuccess(sessionSpan.status.exit))
        assert.strictEqual(attribute(sessionSpan, "tether.provider"), "claude")
        assert.strictEqual(attribute(sessionSpan, "tether.model"), "sonnet")
        assert.strictEqual(attribute(sessionSpan, "tether.session.status"), "closed")
        assert.strictEqual(attribute(sessionSpan, "tether.session.turns"), 2)
        assert.strictEqual(attribute(sessionSpan, "tether.conversation.id"), results[0].sessionId)
        assert.strictEqual(attribute(sessionSpan, "process.exit.code"), 0)
        assert.deepStrictEqual(sessionSpan.events.map(([name]) => name), ["ready"])
        // Its parent is the span that made it (ClaudeSession.make's, inside Session.make's).
        assert.strictEqual(Option.getOrUndefined(sessionSpan.parent)?.spanId, recorded.named("Session.make")[0].spanId)

        const turns = recorded.named("tether.turn")
        assert.strictEqual(turns.length, 2)
        const [request] = recorded.named("host.request")
        // Sent from a span: its child, linked to the session's span. Sent from none: the session's child.
        assert.strictEqual(Option.getOrUndefined(turns[0].parent)?.spanId, request.spanId)
        assert.deepStrictEqual(turns[0].links.map((link) => link.span.spanId), [sessionSpan.spanId])
        assert.strictEqual(Option.getOrUndefined(turns[1].parent)?.spanId, sessionSpan.spanId)
        assert.deepStrictEqual(turns[1].links, [])
        for (const [i, turn] of turns.entries()) {
          const result = results[i]
          assert.strictEqual(turn.status._tag, "Ended")
          assert.strictEqual(attribute(turn, "tether.turn.id"), result.turnId)
          assert.strictEqual(attribute(turn, "tether.provider"), "claude")
          assert.strictEqual(attribute(turn, "tether.model"), "sonnet")
          assert.strictEqual(attribute(turn, "tether.turn.outcome"), "completed")
          assert.strictEqual(attribute(turn, "tether.conversation.id"), result.sessionId)
          assert.strictEqual(attribute(turn, "tether.tokens.input"), result.usage.inputTokens)
          assert.strictEqual(attribute(turn, "tether.tokens.output"), result.usage.outputTokens)
          assert.strictEqual(attribute(turn, "tether.tokens.cache_read"), result.usage.cacheReadInputTokens)
          assert.strictEqual(attribute(turn, "tether.tokens.cache_creation"), result.usage.cacheCreationInputTokens)
          assert.strictEqual(attribute(turn, "tether.turn.cli_duration_ms"), result.durationMs)
          assert.isAbove(attribute(turn, "tether.turn.first_output_ms") as number, 0)
        }
        // Claude's cost is a total over the process: each turn's span carries its own increase.
        assert.isAbove(results[0].totalCostUsd!, 0)
        assert.closeTo(attribute(turns[0], "tether.cost_usd") as number, results[0].totalCostUsd!, 1e-12)
        assert.closeTo(
          attribute(turns[1], "tether.cost_usd") as number,
          results[1].totalCostUsd! - results[0].totalCostUsd!,
          1e-12
        )
      })
    ).pipe(mock()))

  it.effect("every session records its turns, durations, first outputs, tokens, cost, starts and liveness", () =>
    traced(() =>
      Effect.gen(function*() {
        const results = yield* withSession({}, (session) =>
          Effect.gen(function*() {
            assert.strictEqual(yield* gauge(Session.metrics.sessionsLive, claude), 1)
            const first = yield* settle(session.run("hello"))
            const second = yield* settle(session.run("again"))
            return [first, second]
          }))
        assert.strictEqual(yield* gauge(Session.metrics.sessionsLive, claude), 0)
        assert.strictEqual(yield* count(Session.metrics.startDuration, { ...claude, outcome: "ready" }), 1)
        assert.strictEqual(yield* count(Session.metrics.turns, { ...claude, outcome: "completed" }), 2)
        assert.strictEqual(yield* count(Session.metrics.turnDuration, { ...claude, outcome: "completed" }), 2)
        assert.strictEqual(yield* count(Session.metrics.firstOutput, claude), 2)
        const tokens = (kind: string) => count(Session.metrics.tokens, { ...claude, kind })
        assert.strictEqual(yield* tokens("input"), results[0].usage.inputTokens + results[1].usage.inputTokens)
        assert.strictEqual(yield* tokens("output"), results[0].usage.outputTokens + results[1].usage.outputTokens)
        const cost = yield* count(Session.metrics.cost, claude)
        assert.closeTo(cost, results[1].totalCostUsd!, 1e-12)
      })
    ).pipe(mock()))

  it.effect("a queued turn's first output is timed from its own start, once", () =>
    traced((recorded) =>
      withSession({ queue: true }, (session) =>
        Effect.gen(function*() {
          const first = yield* session.send("one")
          const second = yield* session.send("two")
          yield* settle(first.result)
          yield* settle(second.result)
          const turns = recorded.named("tether.turn")
          assert.deepStrictEqual(turns.map((turn) => attribute(turn, "tether.turn.id")), [first.id, second.id])
          for (const turn of turns) assert.isAbove(attribute(turn, "tether.turn.first_output_ms") as number, 0)
          assert.strictEqual(yield* count(Session.metrics.firstOutput, claude), 2)
          assert.strictEqual(yield* count(Session.metrics.turns, { ...claude, outcome: "completed" }), 2)
        }))
    ).pipe(mock()))

  it.effect("an interrupted turn ends its span with the error, and counts as interrupted", () =>
    traced((recorded) =>
      withSession({}, (session) =>
        Effect.gen(function*() {
          const turn = yield* session.send("slow")
          yield* TestTime.advanceUntil(Effect.map(session.status, (status) => status === "running"))
          yield* settle(turn.interrupt)
          const [span] = recorded.named("tether.turn")
          assert.strictEqual(attribute(span, "tether.turn.outcome"), "interrupted")
          assert.strictEqual(attribute(span, "tether.turn.error"), "TurnInterrupted")
          assert.isTrue(span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
          assert.strictEqual(yield* count(Session.metrics.turns, { ...claude, outcome: "interrupted" }), 1)
        }))
    ).pipe(mock(MockClaude.make([
      MockClaude.when("slow", MockClaude.text(Array.from({ length: 50 }, (_, i) => `${i} `), { delay: "100 millis" }))
    ]))))

  it.effect("a permission wait is a span under its turn's, with who resolved it and how", () =>
    traced((recorded) =>
      withSession({ policy: Permission.allowAll }, (session) =>
        Effect.gen(function*() {
          const result = yield* settle(session.run("touch it"))
          assert.include(result.text, "ran: touch perm.txt")
          const [permission] = recorded.named("tether.permission")
          const [turn] = recorded.named("tether.turn")
          assert.strictEqual(Option.getOrUndefined(permission.parent)?.spanId, turn.spanId)
          assert.strictEqual(permission.status._tag, "Ended")
          assert.strictEqual(attribute(permission, "tether.permission.tool"), "Bash")
          assert.strictEqual(attribute(permission, "tether.permission.kind"), "tool")
          assert.strictEqual(attribute(permission, "tether.permission.resolved_by"), "policy")
          assert.strictEqual(attribute(permission, "tether.permission.behavior"), "allow")
          assert.strictEqual(attribute(permission, "tether.turn.id"), result.turnId)
          assert.isString(attribute(permission, "tether.permission.request_id"))
          assert.strictEqual((yield* Metric.value(Session.metrics.permissionWait)).count, 1)
        }))
    ).pipe(mock(MockClaude.make([MockClaude.when("touch", bash("touch perm.txt"))]))))

  it.effect("a deferred permission that expires says so", () =>
    traced((recorded) =>
      withSession({
        policy: () => Effect.succeed(Permission.defer),
        timeouts: Effect.runSync(Timeouts.make({ permission: "2 seconds" }))
      }, (session) =>
        Effect.gen(function*() {
          yield* settle(session.run("touch it"))
          const [permission] = recorded.named("tether.permission")
          assert.strictEqual(attribute(permission, "tether.permission.resolved_by"), "expired")
          assert.strictEqual(attribute(permission, "tether.permission.expired"), "timeout")
          assert.strictEqual(attribute(permission, "tether.permission.behavior"), "deny")
          assert.strictEqual((yield* Metric.value(Session.metrics.permissionWait)).sum, 2000)
        }))
    ).pipe(mock(MockClaude.make([MockClaude.when("touch", bash("touch perm.txt"))]))))

  it.effect("a control request is a span of its caller's, with its subtype and outcome", () =>
    traced((recorded) =>
      withSession({}, (session) =>
        Effect.gen(function*() {
          yield* settle(session.setModel("opus").pipe(Effect.withSpan("host.switch")))
          const [control] = recorded.named("tether.control")
          const [caller] = recorded.named("host.switch")
          assert.strictEqual(Option.getOrUndefined(control.parent)?.spanId, caller.spanId)
          assert.strictEqual(attribute(control, "tether.control.subtype"), "set_model")
          assert.strictEqual(attribute(control, "tether.control.outcome"), "ok")
          assert.strictEqual(
            yield* count(Session.metrics.controlDuration, { ...claude, subtype: "set_model", outcome: "ok" }),
            1
          )
        }))
    ).pipe(mock()))

  it.effect("a control that times out retires the session: its reason is counted, and the session's span fails", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        yield* withSession({}, (session) =>
          Effect.gen(function*() {
            const error = yield* settle(Effect.flip(session.setModel("opus")))
            assert.strictEqual(error._tag, "ControlTimeout")
          }))
        const [control] = recorded.named("tether.control")
        assert.strictEqual(attribute(control, "tether.control.outcome"), "ControlTimeout")
        assert.strictEqual(
          yield* count(Session.metrics.controlDuration, { ...claude, subtype: "set_model", outcome: "ControlTimeout" }),
          1
        )
        assert.strictEqual(yield* count(Session.metrics.retirements, { ...claude, reason: "control-timeout" }), 1)
        const [span] = recorded.named("tether.session")
        assert.strictEqual(attribute(span, "tether.session.retired"), "control-timeout")
        assert.strictEqual(attribute(span, "tether.session.status"), "failed")
        assert.deepStrictEqual(span.events.map(([name]) => name), ["ready", "retired"])
        assert.isTrue(span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
      })
    ).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("set_model")] }))))

  it.effect("a session the host retires is counted as such", () =>
    traced(() =>
      Effect.gen(function*() {
        yield* withSession({}, (session) => session.retire("the host had enough"))
        assert.strictEqual(yield* count(Session.metrics.retirements, { ...claude, reason: "host" }), 1)
      })
    ).pipe(mock()))

  it.effect("a session that fails to start ends its span with the start's error", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        const timeouts = yield* Timeouts.make({ startup: "5 seconds" })
        const error = yield* settle(Effect.flip(Effect.scoped(ClaudeSession.make({ timeouts }))))
        assert.strictEqual(error._tag, "StartupTimeout")
        const [span] = recorded.named("tether.session")
        assert.isTrue(span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
        assert.strictEqual(attribute(span, "tether.session.retired"), "startup-timeout")
        assert.strictEqual(yield* count(Session.metrics.startDuration, { ...claude, outcome: "failed" }), 1)
        assert.strictEqual(yield* count(Session.metrics.startDuration, { ...claude, outcome: "ready" }), 0)
        assert.strictEqual(yield* gauge(Session.metrics.sessionsLive, claude), 0)
      })
    ).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("initialize")] }))))

  it.effect("a spawn error ends the session's span too", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Effect.scoped(ClaudeSession.make()))
        assert.strictEqual(error._tag, "ExecutableNotFound")
        const [span] = recorded.named("tether.session")
        assert.isTrue(span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
      })
    ).pipe(
      Effect.provide(MockTransport.layer(MockClaude.defaultScript, {
        spawnError: () => new TetherError.ExecutableNotFound({ program: "claude", searched: [] })
      }))
    ))

  it.effect("a tracer that throws whenever a span records loses those spans, not the turns or the session", () =>
    Effect.gen(function*() {
      let thrown = 0
      const broken = () => {
        throw new Error("a broken exporter")
      }
      const tracer = Tracer.make({
        span: (options) => {
          const span = new Tracer.NativeSpan(options)
          // Every recording on every span of the session's throws; ends of turns and controls are counted.
          if (options.name.startsWith("tether.")) {
            span.attribute = broken
            span.event = broken
            span.end = options.name === "tether.turn" || options.name === "tether.control"
              ? () => {
                thrown++
                broken()
              }
              : broken
          }
          return span
        }
      })
      yield* withSession({}, (session) =>
        Effect.gen(function*() {
          const result = yield* settle(session.run("hello"))
          assert.isFalse(result.isError)
          yield* settle(session.control({ subtype: "mcp_status" }))
          // The session goes on: the next turn runs too.
          assert.isFalse((yield* settle(session.run("again"))).isError)
          // Two turns' spans and the control's: each ended, and each end threw.
          assert.strictEqual(thrown, 3)
        })).pipe(Effect.provideService(Tracer.Tracer, tracer))
    }).pipe(mock()))

  it.effect("with tracing disabled, no span is made (the metrics are still recorded)", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        yield* withSession({}, (session) => settle(session.run("hello")))
        assert.deepStrictEqual(recorded.spans.filter((span) => span.name.startsWith("tether.")), [])
        assert.strictEqual(yield* count(Session.metrics.turns, { ...claude, outcome: "completed" }), 1)
      }).pipe(Effect.provideService(References.TracerEnabled, false))
    ).pipe(mock()))

  it.effect("a registry's sessions carry its id and generation on every span", () =>
    traced((recorded) =>
      Effect.gen(function*() {
        yield* settle(
          Effect.gen(function*() {
            const registry = yield* ClaudeRegistry.ClaudeRegistry
            const chat = yield* registry.getOrCreate("chat-7", {})
            yield* chat.run("hello")
          }).pipe(
            Effect.scoped,
            Effect.provide(ClaudeRegistry.layer({}).pipe(Layer.provide(MockTransport.layer(MockClaude.defaultScript))))
          )
        )
        for (const name of ["tether.session", "tether.turn"]) {
          const [span] = recorded.named(name)
          assert.strictEqual(attribute(span, "tether.session.id"), "chat-7", name)
          assert.strictEqual(attribute(span, "tether.session.generation"), 1, name)
        }
      })
    ))
})
