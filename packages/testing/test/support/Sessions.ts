import type { Session, Transport } from "@tether/core"
import { MockTransport } from "@tether/testing"
import { type Duration, Effect, Exit, Scope } from "effect"
import * as TestTime from "../../../core/test/support/TestTime.ts"

// The simulators' chunks are 25 ms apart: the clock moves in 5 ms steps, and an effect may take up to 20 s.

/**
 * Runs `effect` to its end on TestClock, moving it 5 ms at a time (at most 20 s).
 *
 * @category clock
 * @since 0.2.0
 */
export const settle = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  TestTime.settle(effect, { step: "5 millis", steps: 4_000 })

/**
 * Moves TestClock by `duration`, 5 ms at a time.
 *
 * @category clock
 * @since 0.2.0
 */
export const advance = (duration: Duration.Input) => TestTime.advance(duration, "5 millis")

/**
 * Starts a session (`start`, on the MockTransport in context) in a scope of its own, runs `body` with it and its
 * simulated CLI, then closes the session on TestClock.
 *
 * @category sessions
 * @since 0.2.0
 */
export const withSession = <S extends Pick<Session.Session, "status">, SE, A, E, R>(
  start: Effect.Effect<S, SE, Transport.Transport | Scope.Scope>,
  body: (session: S, cli: MockTransport.MockConnection) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const session = yield* settle(start.pipe(Scope.provide(scope)))
    const cli = yield* (yield* MockTransport.MockTransport).latest
    const exit = yield* Effect.exit(body(session, cli))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })
