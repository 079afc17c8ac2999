/**
 * Helpers for the tests that run a `ClaudeSession` on TestClock through `MockTransport`: the simulated CLI's own
 * timing (startup 300 ms, first token 60 ms, chunks 25 ms, …) and every session deadline move only when the test
 * moves the clock.
 */
import { ClaudeSession } from "@tether/claude"
import { EventLog, Timeouts } from "@tether/core"
import { MockClaude, MockTransport } from "@tether/testing"
import { type Duration, Effect, Exit, Scope, Stream } from "effect"
import * as TestTime from "../../../core/test/support/TestTime.ts"

/** A line the host wrote, parsed. */
export type Frame = { readonly [key: string]: any }

// The mock CLI's chunks are 25 ms apart: the clock moves in 5 ms steps, and an effect may take up to 20 s to settle.
export const settle = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  TestTime.settle(effect, { step: "5 millis", steps: 4_000 })

/** Moves the clock by `duration` in 5 ms steps (so that chains of sleeps all run). */
export const advance = (duration: Duration.Input) => TestTime.advance(duration, "5 millis")

export const now = Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe()))

export const timeouts = (overrides: Partial<{ readonly [K in keyof Timeouts.Timeouts]: Duration.Input }>) =>
  Effect.runSync(Timeouts.make(overrides))

/** Starts a session in its own scope, runs `body`, then closes the session on TestClock. */
export const withSession = <A, E, R>(
  options: ClaudeSession.Options,
  body: (session: ClaudeSession.ClaudeSession, cli: MockTransport.MockConnection) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const session = yield* settle(ClaudeSession.make(options).pipe(Scope.provide(scope)))
    const cli = yield* (yield* MockTransport.MockTransport).latest
    const exit = yield* Effect.exit(body(session, cli))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

/** Provides `MockTransport` running `script`. */
export const mock = (script: MockClaude.Script = MockClaude.defaultScript, options?: MockTransport.LayerOptions) =>
  Effect.provide(MockTransport.layer(script, options))

/** What the host wrote to the simulated CLI, parsed. */
export const writtenFrames = (cli: MockTransport.MockConnection) =>
  Effect.map(cli.written, (all) => all as ReadonlyArray<Frame>)

/** The events delivered from the start of the log up to its latest seq at the time of the call, with their seqs. */
export const snapshotDeliveries = (session: ClaudeSession.ClaudeSession) =>
  Effect.scoped(
    Effect.gen(function*() {
      const stream = yield* session.subscribe("start")
      const latest = yield* session.latestSeq
      const deliveries = yield* Stream.runCollect(
        Stream.takeUntil(stream, (d) => d._tag === "Event" && d.seq >= latest)
      )
      return Array.from(deliveries).filter(EventLog.isEvent)
    })
  )

/** The events of the log from its start up to its latest seq at the time of the call. */
export const snapshotEvents = (session: ClaudeSession.ClaudeSession) =>
  Effect.map(snapshotDeliveries(session), (deliveries) => deliveries.map((d) => d.event))
