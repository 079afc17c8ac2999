/**
 * What the Tether hosts share, whatever the provider (tether.ts for Claude, codex-tether.ts for Codex): a session
 * started in its own Scope over the host's runtime, with one subscriber (`session.subscribe("latest")`) counting the
 * turn's deltas and events. A turn is done for the host when `session.run` has its result and the subscriber has
 * seen the turn's terminal event, so a subscriber that falls behind costs time, and one that lags (skipped events)
 * shows up as missing deltas.
 *
 * Only the packages' public exports are used. Promises wrap the Effect calls so the measuring code in runner.ts is the
 * same for every host; the wrapping costs one `runPromise` per turn.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { EventLog, Session, SessionEvent, Transport, Turn } from "../../../packages/core/src/index.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
  missed: number
}

/**
 * A host whose sessions `start` makes over `runtime`; `failed` says why a turn's result is a failure (undefined: it
 * is not).
 */
export const sessionHost = <A extends Turn.TurnResult, E>(
  runtime: ManagedRuntime.ManagedRuntime<Transport.Transport, never>,
  start: Effect.Effect<Session.Session<A, E>, Session.StartError, Transport.Transport | Scope.Scope>,
  failed: (result: A) => string | undefined
): Host => {
  const open = async (): Promise<HostSession> => {
    let waiter: Waiter | undefined
    const onDelivery = (delivery: EventLog.Delivery<SessionEvent.SessionEvent>) => {
      if (waiter === undefined) return
      if (delivery._tag === "Lag") {
        waiter.missed += delivery.missed
        return
      }
      waiter.messages++
      const event = delivery.event
      if (event._tag === "TextDelta") waiter.deltas++
      else if (event._tag === "TurnCompleted" || event._tag === "TurnFailed") {
        const done = waiter
        waiter = undefined
        done.resolve({ deltas: done.deltas, messages: done.messages, missed: done.missed })
      }
    }

    const scope = await runtime.runPromise(Scope.make())
    const session = await runtime.runPromise(
      Effect.gen(function*() {
        const session = yield* start
        const deliveries = yield* session.subscribe("latest")
        yield* Effect.forkIn(
          Stream.runForEach(deliveries, (delivery) => Effect.sync(() => onDelivery(delivery))),
          scope
        )
        return session
      }).pipe(Scope.provide(scope))
    )

    return {
      turn: async (prompt) => {
        const seen = new Promise<TurnStats>((resolve, reject) => {
          waiter = { resolve, reject, deltas: 0, messages: 0, missed: 0 }
        })
        const result = await runtime.runPromise(session.run(prompt))
        const failure = failed(result)
        if (failure !== undefined) throw new Error(`turn failed: ${failure}`)
        return seen
      },
      close: () => runtime.runPromise(Scope.close(scope, Exit.void))
    }
  }

  return {
    // Builds the layer (and its host-death watchdog) once per process, like importing a library.
    init: () => runtime.runPromise(Effect.void),
    open
  }
}
