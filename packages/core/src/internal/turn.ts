/**
 * What a turn handle may carry besides the `Turn` interface: a local session's handle reads its own events from the
 * session's log without a stream run (see `Turn.forEachEvent`).
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type * as EventLog from "../EventLog.ts"
import type { SessionEvent } from "../SessionEvent.ts"

/** The key of a handle's own `forEachEvent`, when it has one. */
export const ForEachEvent: unique symbol = Symbol.for("@tether/core/Turn/forEachEvent")

/** A handle's own `forEachEvent`. */
export interface HasForEachEvent {
  readonly [ForEachEvent]: <E, R>(
    f: (delivery: EventLog.Delivery<SessionEvent>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, EventLog.ReplayUnavailable | E, R>
}

/** Whether a handle has its own `forEachEvent`. */
export const hasForEachEvent = (turn: object): turn is HasForEachEvent => ForEachEvent in turn
