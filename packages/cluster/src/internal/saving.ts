/**
 * Saving a runner's sessions: after every turn (fenced by the generation), again every second after a failure, and
 * a last time when a generation ends; and the recorder that reads a session's events, keeps the durable ones and
 * saves after each turn. What a last save could not write goes to the runner's unsaved work (\`unsaved.ts\`).
 *
 * @internal
 */
import { Session } from "@tether/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Files from "./files.ts"
import { type Incarnation, isTerminal } from "./incarnation.ts"
import { metrics, type Place } from "./place.ts"
import * as Store from "./store.ts"
import * as Unsaved from "./unsaved.ts"
import * as Wire from "./wire.ts"

/** What saving needs of its runner. */
export interface Options<A, TE> {
  readonly store: Store.Store
  readonly unsaved: Unsaved.Unsaved
  readonly place: Place
  /** Where the retry and recorder fibers run: they live as long as the runner. */
  readonly runnerScope: Scope.Scope
  readonly finalSaveTimeout: Duration.Duration
  /** The runner's live incarnations, by session id: a generation that ends leaves it. */
  readonly incarnations: Map<string, Incarnation<A, TE>>
}

/** The saves of a runner's sessions, over its store, its unsaved work and its incarnations. */
export const make = <A, TE>(options: Options<A, TE>) => {
  const { finalSaveTimeout, incarnations, place, runnerScope, store, unsaved } = options

  /**
   * Saves what the incarnation did since its last save (fenced by its generation), with a few retries: `saved`,
   * `fenced` (another runner owns the session now: this generation must not go on; its turns' outcomes still go to
   * the ledger) or `failed` (the database is unreachable: saved again later, see {@link retryLater}). What the last
   * save of a generation could not write, even when it is cut short by `finalSaveTimeout`, is kept (`unsaved.ts`)
   * and written when the database returns.
   */
  const save = (inc: Incarnation<A, TE>, final: boolean) =>
    inc.saving.withPermits(1)(
      Effect.gen(function*() {
        // A save that waited behind the last one must not mark the generation live again.
        if (inc.ending && !final) return "saved" as const
        const t0 = yield* Clock.currentTimeMillis
        if (inc.session !== undefined && inc.conversationId === undefined) {
          inc.conversationId = Option.getOrUndefined(yield* inc.session.sessionId)
        }
        const collected = inc.conversationId === undefined
          ? { changes: [], tracked: inc.tracked }
          : yield* Files.collect(
            inc.directory,
            inc.conversationId,
            inc.tracked,
            inc.session?.conversationFile ?? Session.namesConversation
          )
        const events = inc.pending
        const ended = inc.ended
        const turns = ended.flatMap((turn) => {
          const promptId = inc.turns.get(turn.turnId)?.promptId
          return promptId === undefined ? [] : [{ promptId, ...turn }]
        })
        const payload: Store.Save = {
          conversationId: inc.conversationId,
          changes: collected.changes,
          tracked: collected.tracked,
          events,
          seq: final ? inc.lastSeq : Math.max(inc.base, events.length > 0 ? events[events.length - 1].seq : inc.base),
          turns,
          final
        }
        const completions = turns.map((turn) => ({ ...turn, generation: inc.generation }))
        let written = false
        const exit = yield* store.save(inc.id, inc.generation, payload).pipe(
          Effect.retry({
            while: (error) => error._tag !== "Fenced",
            times: 4,
            schedule: Schedule.exponential("100 millis")
          }),
          Effect.tap(() =>
            Effect.sync(() => {
              written = true
            })
          ),
          Effect.exit,
          // The last save, cut short (by `finalSaveTimeout`) or failed: kept, to be written when the database returns.
          Effect.onExit(() =>
            final && !written
              ? unsaved.keep({ id: inc.id, generation: inc.generation, save: payload, completions })
              : Effect.void
          )
        )
        if (Exit.isFailure(exit)) {
          yield* Metric.update(Metric.withAttributes(metrics.saveFailures, place.attributes), 1)
          yield* Effect.logWarning(`could not save session ${inc.id} (generation ${inc.generation})`, exit.cause)
          const error = Cause.findErrorOption(exit.cause)
          if (Option.isNone(error) || error.value._tag !== "Fenced") return "failed" as const
          // Another runner owns the session now: this generation must not go on. What its turns did is still true.
          if (!final && completions.length > 0) {
            const completed = yield* Effect.exit(store.complete(inc.id, completions))
            if (Exit.isFailure(completed)) {
              yield* unsaved.keep({ id: inc.id, generation: inc.generation, save: undefined, completions })
            }
            inc.ended = inc.ended.slice(ended.length)
          }
          if (inc.session !== undefined && !final) {
            yield* inc.session.retire("another runner owns this session now")
          }
          return "fenced" as const
        }
        inc.tracked = collected.tracked
        inc.pending = inc.pending.slice(events.length)
        inc.ended = inc.ended.slice(ended.length)
        const t1 = yield* Clock.currentTimeMillis
        yield* Metric.update(Metric.withAttributes(metrics.saveDuration, place.attributes), Duration.millis(t1 - t0))
        const bytes = collected.changes.reduce((total, change) => total + change.data.length, 0)
        if (bytes > 0) {
          yield* Metric.update(Metric.withAttributes(metrics.savedBytes, place.attributes), bytes)
        }
        return "saved" as const
      })
    ).pipe(
      Effect.withSpan("ClusterRegistry.save", {
        attributes: {
          "tether.session.id": inc.id,
          "tether.session.generation": inc.generation,
          "tether.runner": place.address,
          "tether.save.final": final
        }
      })
    )

  /**
   * Saves the incarnation again, every second, after a save failed (the database was unreachable), until one
   * succeeds or its generation ends (whose last save takes over what is unsaved): a turn that completed reaches the
   * ledger when the database returns, not only with the session's next turn.
   */
  const retryLater = (inc: Incarnation<A, TE>) =>
    Effect.suspend(() => {
      if (inc.retrying) return Effect.void
      inc.retrying = true
      const attempt: Effect.Effect<void> = Effect.gen(function*() {
        yield* Effect.sleep(Unsaved.retryInterval)
        if (inc.ending) return
        if ((yield* save(inc, false)) === "failed") return yield* attempt
      })
      return Effect.asVoid(Effect.forkIn(
        Effect.ensuring(
          attempt,
          Effect.sync(() => {
            inc.retrying = false
          })
        ),
        runnerScope
      ))
    })

  /** Settles the saves of the turns that ended, whatever the save did: their waiters must not wait forever. */
  const settleSaved = (inc: Incarnation<A, TE>, turnIds: ReadonlyArray<string>) =>
    Effect.sync(() => {
      for (const turnId of turnIds) {
        const tracked = inc.turns.get(turnId)
        if (tracked !== undefined) Deferred.doneUnsafe(tracked.saved, Exit.void)
      }
    })

  /** Reads the incarnation's events for as long as its session lives: keeps the durable ones, saves after turns. */
  const record = (inc: Incarnation<A, TE>) =>
    Effect.scoped(Effect.gen(function*() {
      const deliveries = yield* inc.session!.subscribe("start")
      yield* Stream.runForEachArray(deliveries, (chunk) =>
        Effect.gen(function*() {
          const endedTurns: Array<string> = []
          for (const delivery of chunk) {
            if (delivery._tag === "Lag") {
              const from = inc.base + delivery.resumeSeq - delivery.missed
              if (inc.durable) {
                inc.pending.push({
                  seq: from,
                  generation: inc.generation,
                  turnId: undefined,
                  event: undefined,
                  gapTo: inc.base + delivery.resumeSeq - 1
                })
              }
              inc.lastSeq = inc.base + delivery.resumeSeq - 1
              continue
            }
            const seq = inc.base + delivery.seq
            inc.lastSeq = seq
            const event = delivery.event
            if (inc.durable) {
              inc.pending.push({
                seq,
                generation: inc.generation,
                turnId: event.turnId,
                event: Wire.eventToJson(inc.generation, event)
              })
            }
            if (isTerminal(event) && event.turnId !== undefined) {
              inc.ended.push(
                event._tag === "TurnCompleted"
                  ? { turnId: event.turnId, state: "completed", outcome: { ok: true, result: event.result } }
                  : {
                    turnId: event.turnId,
                    state: "failed",
                    outcome: { ok: false, error: Wire.errorToJson((event as { readonly error: unknown }).error) }
                  }
              )
              endedTurns.push(event.turnId)
            }
          }
          if (inc.lastSeq > inc.ceiling - Store.seqBlock / 2) {
            inc.ceiling = inc.ceiling + Store.seqBlock
            yield* Effect.ignore(store.extend(inc.id, inc.generation, inc.ceiling))
          }
          if (endedTurns.length > 0) {
            if ((yield* save(inc, false)) === "failed") yield* retryLater(inc)
            yield* settleSaved(inc, endedTurns)
          }
        }))
    }))

  /**
   * Ends an incarnation (its session has closed): the last save (bounded by `finalSaveTimeout`: a database that
   * hangs must not hang a release, an eviction or a drain; what it did not save is recovered as a lost generation),
   * then the directory goes. Whatever the save and the removal do, the incarnation is forgotten and `closed` is
   * signalled: the entity's keep-alive and an `Evict` wait on it.
   */
  const finalize = (inc: Incarnation<A, TE>) =>
    Effect.gen(function*() {
      inc.ending = true
      if (inc.recorder !== undefined) {
        // The session's log ended with it; the recorder is reading its last events.
        const done = yield* Effect.timeoutOption(Fiber.await(inc.recorder), Duration.seconds(5))
        if (Option.isNone(done)) yield* Fiber.interrupt(inc.recorder)
      }
      const saved = yield* Effect.timeoutOption(save(inc, true), finalSaveTimeout)
      if (Option.isNone(saved)) {
        yield* Metric.update(Metric.withAttributes(metrics.saveFailures, place.attributes), 1)
        yield* Effect.logWarning(
          `the last save of session ${inc.id} (generation ${inc.generation}) took longer than ${
            Duration.format(finalSaveTimeout)
          }: given up`
        )
      }
    }).pipe(
      Effect.ensuring(Effect.suspend(() => settleSaved(inc, [...inc.turns.keys()]))),
      Effect.ensuring(Effect.ignore(Files.remove(inc.directory), { log: "Warn" })),
      Effect.ensuring(Effect.suspend(() => {
        if (incarnations.get(inc.id) === inc) incarnations.delete(inc.id)
        Deferred.doneUnsafe(inc.closed, Exit.void)
        return Metric.update(place.sessionsGauge, incarnations.size)
      })),
      Effect.uninterruptible
    )

  return { save, retryLater, settleSaved, record, finalize }
}
