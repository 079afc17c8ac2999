/**
 * A host that holds the neutral `Session.Session` (as docs/hosts.md's "Switching provider" does) catches every
 * error any provider can raise by its tag, with its fields: each provider package adds its own turn errors to
 * `Turn.ProviderTurnErrors`, so the neutral session's error channel is a union of tagged classes rather than a
 * `string` tag. The types are the point (this file does not compile if a tag or a field is lost); the runs show the
 * errors caught are the ones the providers raised, through the same neutral service.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpAgent, AcpSession } from "@tether/acp"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import type { Session, TetherError, Transport, Turn } from "@tether/core"
import { MockAcp, MockClaude, MockCodex, MockTransport } from "@tether/testing"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { expectTypeOf } from "vitest"
import { settle } from "../support/Sessions.ts"

// What the host needs of a coding agent: a session, whichever CLI runs it.
class Agent extends Context.Service<Agent, Session.Session>()("test/Agent") {}

const ClaudeAgent = Layer.effect(Agent, ClaudeSession.make({}))
const CodexAgent = Layer.effect(Agent, CodexSession.make({}))
const AcpAgentLayer = Layer.effect(
  Agent,
  AcpSession.make({ agent: AcpAgent.command(["mock-acp"]), cwd: "/home/user/project" })
)

// The host's program, written once against the neutral session: each provider's own errors by tag, with their
// fields, beside the neutral ones.
const ask = (prompt: string) =>
  Effect.gen(function*() {
    const agent = yield* Agent
    const result = yield* agent.run(prompt)
    return `ok: ${result.text}`
  }).pipe(
    Effect.catchTags({
      MaxTurnsExceeded: (error) => Effect.succeed(`max turns; resume ${error.sessionId}`),
      BudgetExceeded: (error) => Effect.succeed(`budget at ${error.totalCostUsd}`),
      TurnRejected: (error) => Effect.succeed(`rejected ${error.code}: requeue ${error.safeToRequeue}`),
      TurnLimitReached: (error) => Effect.succeed(`limit ${error.limit} after "${error.text}"`),
      TurnRefused: (error) => Effect.succeed(`refused (requeue ${error.safeToRequeue})`),
      ApiError: (error) => Effect.succeed(`api ${error.status}`)
    }),
    Effect.catchTag("TurnInFlight", (error) => Effect.succeed(`busy (requeue ${error.safeToRequeue})`))
  )

/** Builds the agent's Layer on TestClock, runs `body` with it, then releases it on TestClock. */
const withAgent = <E, A, BE>(
  agent: Layer.Layer<Agent, E, Transport.Transport>,
  body: Effect.Effect<A, BE, Agent>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* settle(Layer.buildWithScope(agent, scope))
    const exit = yield* Effect.exit(settle(body.pipe(Effect.provide(context))))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

describe("a neutral Session.Session", () => {
  it("has each provider's own turn errors in its error channel, as tagged classes", () => {
    type RunError = Effect.Error<ReturnType<Session.Session["run"]>>
    expectTypeOf<ClaudeSession.MaxTurnsExceeded>().toExtend<RunError>()
    expectTypeOf<ClaudeSession.StructuredOutputInvalid>().toExtend<RunError>()
    expectTypeOf<CodexSession.TurnRejected>().toExtend<RunError>()
    expectTypeOf<AcpSession.TurnLimitReached>().toExtend<RunError>()
    expectTypeOf<AcpSession.TurnRefused>().toExtend<RunError>()
    expectTypeOf<TetherError.TurnInterrupted>().toExtend<RunError>()
    // No member with a `string` tag: every member is one a host can name.
    expectTypeOf<Extract<RunError, { readonly _tag: string }>["_tag"]>().not.toEqualTypeOf<string>()
    expectTypeOf<Turn.KnownProviderTurnError>().toEqualTypeOf<
      ClaudeSession.TurnError | CodexSession.TurnError | AcpSession.TurnError
    >()
    // What the program above leaves: the neutral errors it did not catch, and neither provider's own.
    type Left = Effect.Error<ReturnType<typeof ask>>
    expectTypeOf<
      Extract<Left, { readonly _tag: "MaxTurnsExceeded" | "TurnRejected" | "TurnLimitReached" | "TurnRefused" }>
    >().toEqualTypeOf<never>()
  })

  it.effect("catches Claude's MaxTurnsExceeded and BudgetExceeded by their tags, with their fields", () =>
    withAgent(
      ClaudeAgent,
      Effect.gen(function*() {
        assert.match(yield* ask("loop forever"), /^max turns; resume [0-9a-f-]{36}$/)
        assert.match(yield* ask("spend it all"), /^budget at [0-9.]+$/)
      })
    ).pipe(Effect.provide(MockTransport.layer(MockClaude.make([
      MockClaude.when("loop", MockClaude.maxTurns(3)),
      MockClaude.when("spend", MockClaude.maxBudget(0.5))
    ])))))

  it.effect("catches Codex's TurnRejected by its tag, with its fields, through the same program", () =>
    withAgent(
      CodexAgent,
      Effect.gen(function*() {
        assert.strictEqual(yield* ask("busy?"), "rejected -32001: requeue true")
        assert.strictEqual(yield* ask("again"), "ok: again")
      })
    ).pipe(Effect.provide(MockTransport.layer(MockCodex.make([MockCodex.turn(MockCodex.rejectTurn())])))))

  it.effect("catches ACP's TurnLimitReached and TurnRefused by their tags, with their fields, through the same program", () =>
    withAgent(
      AcpAgentLayer,
      Effect.gen(function*() {
        assert.strictEqual(yield* ask("long story"), `limit max_tokens after "Once upon"`)
        assert.strictEqual(yield* ask("do harm"), "refused (requeue false)")
        assert.strictEqual(yield* ask("again"), "ok: again")
      })
    ).pipe(Effect.provide(MockTransport.layer(MockAcp.make([
      MockAcp.when("long", MockAcp.text("Once upon"), MockAcp.stop("max_tokens")),
      MockAcp.when("harm", MockAcp.stop("refusal"))
    ])))))
})
