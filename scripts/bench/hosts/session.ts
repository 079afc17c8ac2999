/**
 * What the Tether hosts share, whatever the provider (tether.ts, tether-events.ts and tether-stream.ts for Claude,
 * codex-tether.ts for Codex): a session started in its own Scope over the host's runtime, its turn's events read one
 * of three ways.
 *
 * - `"subscriber"`: one session-wide subscriber (`session.subscribe("latest")`) forked for the session's life counts
 *   the turn's deltas and events; a turn is done for the host when `session.run` has its result and the subscriber
 *   has seen the turn's terminal event, so a subscriber that falls behind costs time, and one that lags (skipped
 *   events) shows up as missing deltas and as `Lag` deliveries.
 * - `"turn-events"`: the README's host pattern (`ask` in examples/src/host.ts, one `Effect.fnUntraced` function):
 *   `session.send(prompt)`, then the turn's events read to their end by `Turn.forEachEvent` counting deltas (and
 *   `Lag` deliveries), then `turn.result`, all in one Effect, so one `runPromise` per turn (the README runs `ask` as
 *   one program; a host that ran `send`, the events and the result as three separate `runPromise` calls would pay
 *   two more runtime entries per turn).
 * - `"turn-stream"`: the same, the events read as a stream, `Stream.runForEach(turn.events, …)`: what a turn costs
 *   a host that runs a stream per turn (tether-stream.ts, run by hand: it is not in `pnpm bench`'s table).
 *
 * Only the packages' public exports are used. Promises wrap the Effect calls so the measuring code in runner.ts is the
 * same for every host; the wrapping costs one `runPromise` per turn.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { EventLog, Session, SessionEvent, Transport } from "../../../packages/core/src/index.ts"
import * as Turn from "../../../packages/core/src/Turn.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
  missed: number
  lags: number
}

/**
 * How a Tether host reads a turn's events: one session-wide subscriber, or each turn's own events by
 * `Turn.forEachEvent` or as the stream `turn.events`.
 */
export type Read = "subscriber" | "turn-events" | "turn-stream"

/** What a consumer that only counts has counted of one turn's deliveries. */
interface Counts {
  deltas: number
  messages: number
  missed: number
  lags: number
}

/** Counts one delivery; `true` at the turn's terminal event. */
const tally = (counts: Counts, delivery: EventLog.Delivery<SessionEvent.SessionEvent>): boolean => {
  if (delivery._tag === "Lag") {
    counts.lags++
    counts.missed += delivery.missed
    return false
  }
  counts.messages++
  const event = delivery.event
  if (event._tag === "TextDelta") counts.deltas++
  return event._tag === "TurnCompleted" || event._tag === "TurnFailed"
}

/**
 * A host whose sessions `start` makes over `runtime`, reading events as `read` says; `failed` says why a turn's
 * result is a failure (undefined: it is not).
 */
export const sessionHost = <A extends Turn.TurnResult, E>(
  runtime: ManagedRuntime.ManagedRuntime<Transport.Transport, never>,
  start: Effect.Effect<Session.Session<A, E>, Session.StartError, Transport.Transport | Scope.Scope>,
  failed: (result: A) => string | undefined,
  read: Read = "subscriber"
): Host => {
  const openSubscriber = async (): Promise<HostSession> => {
    let waiter: Waiter | undefined
    const onDelivery = (delivery: EventLog.Delivery<SessionEvent.SessionEvent>) => {
      if (waiter === undefined) return
      if (!tally(waiter, delivery)) return
      const done = waiter
      waiter = undefined
      done.resolve({ deltas: done.deltas, messages: done.messages, missed: done.missed, lags: done.lags })
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
          waiter = { resolve, reject, deltas: 0, messages: 0, missed: 0, lags: 0 }
        })
        const result = await runtime.runPromise(session.run(prompt))
        const failure = failed(result)
        if (failure !== undefined) throw new Error(`turn failed: ${failure}`)
        return seen
      },
      close: () => runtime.runPromise(Scope.close(scope, Exit.void))
    }
  }

  const openTurnEvents = async (asStream: boolean): Promise<HostSession> => {
    const scope = await runtime.runPromise(Scope.make())
    const session = await runtime.runPromise(start.pipe(Scope.provide(scope)))
    // Built once, as the README's `ask` is (`Effect.fnUntraced`), not a generator function per turn.
    const ask = Effect.fnUntraced(function*(prompt: string) {
      const turn = yield* session.send(prompt)
      const counts: Counts = { deltas: 0, messages: 0, missed: 0, lags: 0 }
      // As the README's host reads it: every delivery, to the turn's terminal event.
      const count = (delivery: EventLog.Delivery<SessionEvent.SessionEvent>) =>
        Effect.sync(() => tally(counts, delivery))
      if (asStream) yield* turn.events.pipe(Stream.runForEach(count), Effect.ignore)
      else yield* Turn.forEachEvent(turn, count).pipe(Effect.ignore)
      const result = yield* turn.result
      return { counts, result }
    })
    return {
      turn: async (prompt) => {
        const { counts, result } = await runtime.runPromise(ask(prompt))
        const failure = failed(result)
        if (failure !== undefined) throw new Error(`turn failed: ${failure}`)
        return { ...counts }
      },
      close: () => runtime.runPromise(Scope.close(scope, Exit.void))
    }
  }

  return {
    // Builds the layer (and its host-death watchdog) once per process, like importing a library.
    init: () => runtime.runPromise(Effect.void),
    open: read === "subscriber" ? openSubscriber : () => openTurnEvents(read === "turn-stream")
  }
}
