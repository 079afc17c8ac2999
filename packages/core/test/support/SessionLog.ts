import { EventLog, type Session, type SessionEvent } from "@tether/core"
import { Effect, Stream } from "effect"

/**
 * The deliveries of a session's log from its start up to its latest seq at the time of the call.
 *
 * @category events
 * @since 0.2.0
 */
export const snapshot = (session: Pick<Session.Session, "subscribe" | "latestSeq">) =>
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

/**
 * The events of a session's log from its start up to its latest seq at the time of the call.
 *
 * @category events
 * @since 0.2.0
 */
export const events = (session: Pick<Session.Session, "subscribe" | "latestSeq">) =>
  Effect.map(snapshot(session), (all) => all.map((d) => d.event))

/**
 * The events of one kind.
 *
 * @category events
 * @since 0.2.0
 */
export const tagged = <T extends SessionEvent.SessionEvent["_tag"]>(
  events: ReadonlyArray<SessionEvent.SessionEvent>,
  tag: T
) => events.filter((e): e is Extract<SessionEvent.SessionEvent, { readonly _tag: T }> => e._tag === tag)
