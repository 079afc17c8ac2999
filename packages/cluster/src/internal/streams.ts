/**
 * A runner's event streams in the cluster's seqs: a session's subscription (its saved events, then a lag marker for
 * what is neither saved nor in the live ring, then the live events) and a turn's events (live, saved, or a gap).
 *
 * @internal
 */
import type { EventLog, SessionEvent } from "@tether/core"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type Incarnation, isTerminal, type TrackedTurn, unavailable } from "./incarnation.ts"
import type * as Protocol from "./protocol.ts"
import type * as Store from "./store.ts"
import * as Wire from "./wire.ts"

/** What the streams need of their runner. */
export interface Options<A, TE, EE> {
  readonly store: Store.Store
  readonly incarnations: ReadonlyMap<string, Incarnation<A, TE>>
  /** The live incarnation of an id, restored if need be (a subscription never pins it). */
  readonly ensure: (
    id: string,
    request: { readonly generation?: number | undefined }
  ) => Effect.Effect<{ readonly inc: Incarnation<A, TE> }, EE, Scope.Scope>
  /** The turn a client's handle names, live on this runner, or `undefined`. */
  readonly trackedTurn: (
    id: string,
    ref: { readonly turnId: string; readonly generation: number }
  ) => TrackedTurn<A, TE> | undefined
}

/** The streams of a runner's sessions. */
export const make = <A, TE, EE>(options: Options<A, TE, EE>) => {
  const { ensure, incarnations, store, trackedTurn } = options

  const toDelivery =
    (inc: Incarnation<A, TE>) => (delivery: EventLog.Delivery<SessionEvent.SessionEvent>): Wire.Delivery =>
      delivery._tag === "Event"
        ? { _tag: "Event", seq: inc.base + delivery.seq, event: Wire.eventToJson(inc.generation, delivery.event) }
        : { _tag: "Lag", missed: delivery.missed, resumeSeq: inc.base + delivery.resumeSeq, reason: "behind" }

  /** Saved events after `after`, page by page, as deliveries; and the seq the pages reached. */
  const savedEvents = (id: string, after: number) =>
    Stream.paginate(after, (cursor) =>
      Effect.map(
        // A database that cannot be read is not events lost: the subscriber gets a typed, retryable failure.
        store.eventsAfter(id, cursor, 500).pipe(
          Effect.mapError((error) => unavailable(`the saved events of ${id} cannot be read: ${error.message}`))
        ),
        (
          rows
        ): readonly [ReadonlyArray<Store.StoredEvent>, Option.Option<number>] => [
          rows,
          rows.length < 500 ? Option.none() : Option.some(rows[rows.length - 1].gapTo ?? rows[rows.length - 1].seq)
        ]
      ))

  /**
   * A subscription in the cluster's seqs: a `Position` first, then the saved events after `after` (durable
   * sessions), a lag marker for what is neither saved nor in the live session's ring, then the live events.
   */
  const subscribe = (id: string, from: typeof Protocol.From.Type, generation: number | undefined) =>
    Stream.unwrap(Effect.gen(function*() {
      // Restored if need be, but not pinned: a subscription never keeps a session from its idle TTL (as in one
      // process); its stream ends when the session closes.
      const { inc } = yield* Effect.scoped(ensure(id, { generation }))
      const session = inc.session!
      let cursor = from === "latest"
        ? inc.base + (yield* session.latestSeq)
        : from === "start"
        ? 0
        : from.after
      const position: Wire.Delivery = { _tag: "Position", seq: cursor, generation: inc.generation }
      const before: Array<Wire.Delivery> = []
      if (cursor < inc.base && inc.durable) {
        // The saved events of earlier generations (and of this one, if already saved), and the gaps between them.
        const rows = yield* Stream.runCollect(savedEvents(id, cursor))
        for (const row of rows) {
          if (row.gapTo !== undefined) {
            if (row.gapTo > cursor) {
              before.push({ _tag: "Lag", missed: row.gapTo - cursor, resumeSeq: row.gapTo + 1, reason: "lost" })
              cursor = row.gapTo
            }
          } else if (row.seq > cursor) {
            if (row.seq > cursor + 1) {
              before.push({ _tag: "Lag", missed: row.seq - cursor - 1, resumeSeq: row.seq, reason: "lost" })
            }
            before.push({ _tag: "Event", seq: row.seq, event: row.event })
            cursor = row.seq
          }
        }
      }
      if (cursor < inc.base) {
        before.push({
          _tag: "Lag",
          missed: inc.base - cursor,
          resumeSeq: inc.base + 1,
          reason: inc.durable ? "lost" : "not-durable"
        })
        cursor = inc.base
      }
      const live = yield* session.subscribe({ after: cursor - inc.base })
      return Stream.make(position, ...before).pipe(
        Stream.concat(Stream.map(live, toDelivery(inc))),
        Stream.concat(Stream.succeed<Wire.Delivery>({ _tag: "End" }))
      )
    }))

  /**
   * A turn's events: live, from the turn itself; a turn of an earlier generation, from the saved events of a
   * durable session; else (its runner died before saving them) a gap.
   */
  const turnEvents = (
    id: string,
    ref: { readonly promptId: string; readonly turnId: string; readonly generation: number }
  ) =>
    Stream.unwrap(Effect.gen(function*() {
      const inc = incarnations.get(id)
      const tracked = trackedTurn(id, ref)
      if (inc !== undefined && tracked !== undefined) {
        return tracked.turn.events.pipe(
          Stream.map(toDelivery(inc)),
          Stream.concat(Stream.succeed<Wire.Delivery>({ _tag: "End" }))
        )
      }
      const saved = yield* store.turnEvents(id, ref.turnId).pipe(
        Effect.mapError((error) =>
          unavailable(`the saved events of turn ${ref.turnId} cannot be read: ${error.message}`)
        )
      )
      const deliveries: Array<Wire.Delivery> = saved.map((row) => ({ _tag: "Event", seq: row.seq, event: row.event }))
      const ended = saved.some((row) => isTerminal(row.event as SessionEvent.SessionEvent))
      if (!ended) {
        const last = saved.length === 0 ? 0 : saved[saved.length - 1].seq
        deliveries.push({ _tag: "Lag", missed: 1, resumeSeq: last + 2, reason: "lost" })
      }
      deliveries.push({ _tag: "End" })
      return Stream.fromIterable(deliveries)
    }))

  return { subscribe, turnEvents }
}
