/**
 * A runner's turns: a prompt claimed in the session's ledger and sent (or found claimed already, and answered from
 * the turn this runner tracks or from the ledger), and a client's wait for a turn it sent.
 *
 * @internal
 */
import { SessionRegistry, type TetherError, type Turn } from "@tether/core"
import * as Cause from "effect/Cause"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as Runners from "effect/cluster/Runners"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { fromLedger, type Incarnation, outcome, remember, unavailable } from "./incarnation.ts"
import * as Lease from "./lease.ts"
import * as Locks from "./locks.ts"
import { metrics, type Place } from "./place.ts"
import type * as Store from "./store.ts"
import type * as Wire from "./wire.ts"

/** How often a redelivered prompt's row is read again while an earlier generation's runner may still finish it. */
const ledgerPollInterval = Duration.millis(250)

/** What a draining runner's last write of a turn's outcome may take beyond its drain. */
const ledgerSaveAllowance = Duration.seconds(2)

/** How long one ping of a lost generation's runner may take before it counts as an answer that did not come. */
const pingBound = Duration.seconds(1)

/**
 * Whether the runner at `address` (`host:port`) is gone: its cluster port refused two pings 250 ms apart (a frozen
 * runner's accepts and does not answer; a live one answers). Without the cluster's `Runners` (a test's in-memory
 * sharding), nobody is known gone.
 */
export const gone = (address: string): Effect.Effect<boolean> =>
  Effect.flatMap(Effect.serviceOption(Runners.Runners), (runners) => {
    const at = address.lastIndexOf(":")
    if (Option.isNone(runners) || at < 0) return Effect.succeed(false)
    const target = RunnerAddress.make(address.slice(0, at), Number(address.slice(at + 1)))
    return Locks.refuses(runners.value.ping, target, { attempts: 2, spacing: Duration.millis(250), timeout: pingBound })
  })

/** A client's send as the runner gets it: the prompt, its id in the ledger, and whether to wait for the result. */
export interface SendPayload {
  readonly promptId: string
  readonly prompt: Turn.Prompt
  readonly queue?: boolean | undefined
  readonly interruptOnCancel?: boolean | undefined
  readonly generation?: number | undefined
  readonly wait: boolean
}

/** What the turns need of their runner. */
export interface Options<C, E, A extends Turn.TurnResult, TE, EE> {
  readonly store: Store.Store
  readonly incarnations: ReadonlyMap<string, Incarnation<A, TE>>
  readonly place: Place
  readonly drainTimeout: Duration.Duration
  /** The runner's own registry. */
  readonly registry: SessionRegistry.Registry<C, E, A, TE>
  /** The live incarnation of an id, restored if need be, pinned in the caller's scope. */
  readonly ensure: (
    id: string,
    request: { readonly generation?: number | undefined }
  ) => Effect.Effect<{ readonly inc: Incarnation<A, TE> }, EE, Scope.Scope>
  /** A local registry's error with the cluster's generations. */
  readonly translate: (inc: Incarnation<A, TE> | undefined, expected: number | undefined) => <X>(error: X) => X
  /** The error of a call fenced by a generation that is gone. */
  readonly moved: (id: string, expected: number) => SessionRegistry.GenerationChanged
}

/** The turns of a runner's sessions. */
export const make = <C, E, A extends Turn.TurnResult, TE, EE>(options: Options<C, E, A, TE, EE>) => {
  const { drainTimeout, ensure, incarnations, moved, place, registry, store, translate } = options

  const readTurn = (id: string, promptId: string) =>
    store.turn(id, promptId).pipe(
      Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
    )

  /**
   * A prompt's row that an earlier generation still has as dispatched, read again until it settles when that
   * generation was still live as this one began: its runner may be alive and finishing the turn (the session moved
   * while the turn ran: a shard handed over, or a lock deemed lost while the runner was slow), and its outcome then
   * reaches the ledger within that runner's drain. Answering "lost" before then would report a turn that completes
   * as failed. Bounded by the drain and a save's allowance: a row still dispatched then was lost with its runner.
   * Not waited for when that runner is gone (its port refuses pings: {@link gone}): nothing can finish the turn.
   */
  const settledTurn = (id: string, inc: Incarnation<A, TE>, turn: Store.LedgerTurn) => {
    if (turn.state !== "dispatched" || turn.generation >= inc.generation || inc.previous !== "lost") {
      return Effect.succeed(turn)
    }
    const poll: Effect.Effect<Store.LedgerTurn, TetherError.SessionUnavailable> = Effect.flatMap(
      readTurn(id, turn.promptId),
      (now) =>
        now === undefined || now.state !== "dispatched"
          ? Effect.succeed(now ?? turn)
          : Effect.andThen(Effect.sleep(ledgerPollInterval), poll)
    )
    const wait = Effect.timeoutOrElse(poll, {
      duration: Duration.sum(drainTimeout, ledgerSaveAllowance),
      orElse: () => Effect.succeed(turn)
    })
    return inc.previousRunner === undefined
      ? wait
      : Effect.flatMap(gone(inc.previousRunner), (isGone) =>
        isGone ?
          readTurn(id, turn.promptId).pipe(
            Effect.map((now) => now ?? turn)
          ) :
          wait)
  }

  /**
   * Claims a prompt in the session's ledger and sends it, or finds it claimed already: the turn this runner tracks
   * for it (sent now, or joined), or the ledger's answer (the turn of an earlier generation, completed or lost).
   */
  const claimAndSend = (id: string, inc: Incarnation<A, TE>, payload: SendPayload) =>
    Effect.gen(function*() {
      const claim = yield* store.claim(id, payload.promptId, inc.generation).pipe(
        Effect.mapError((error) => unavailable(`the cluster's database failed: ${error.message}`))
      )
      // The database's live generation, not this runner's (which is the one fenced off).
      if (claim._tag === "Fenced") {
        return yield* new SessionRegistry.GenerationChanged({ id, expected: inc.generation, current: claim.current })
      }
      if (claim._tag === "Existing") {
        const turnId = inc.prompts.get(payload.promptId)
        const tracked = turnId === undefined ? undefined : inc.turns.get(turnId)
        const turn = tracked !== undefined ? claim.turn : yield* settledTurn(id, inc, claim.turn)
        const outcome = tracked !== undefined ? "joined" : turn.state === "dispatched" ? "lost" : "completed"
        yield* Metric.update(Metric.withAttributes(metrics.redeliveries, { ...place.attributes, outcome }), 1)
        if (tracked !== undefined) return { _tag: "Tracked", tracked } as const
        const answered = { turnId: turn.turnId ?? payload.promptId, generation: turn.generation }
        if (!payload.wait) return { _tag: "Answered", answer: answered } as const
        const result = yield* fromLedger(id, turn)
        return { _tag: "Answered", answer: { ...answered, result } } as const
      }
      // Past its lease (a runner that was frozen or cut off, its locks perhaps another's), it writes no prompt: the
      // keeper has ended or is ending its CLIs, and the session may be live elsewhere. Nothing was delivered.
      if (Lease.expired()) {
        yield* Effect.ignore(store.unclaim(id, payload.promptId, inc.generation))
        return yield* unavailable("this runner's lease ran out: it may no longer hold the session's shard")
      }
      const sent = yield* Effect.exit(
        registry.send(id, payload.prompt, {
          queue: payload.queue,
          interruptOnCancel: payload.interruptOnCancel,
          generation: inc.localGeneration
        })
      )
      if (Exit.isFailure(sent)) {
        // Refused before anything was written: the prompt may be sent again under the same id.
        yield* Effect.ignore(store.unclaim(id, payload.promptId, inc.generation))
        return yield* Effect.failCause(Cause.map(sent.cause, translate(inc, payload.generation)))
      }
      return { _tag: "Tracked", tracked: remember(inc, payload.promptId, sent.value) } as const
    })

  const send = (id: string, payload: SendPayload) =>
    Effect.scoped(Effect.gen(function*() {
      const { inc } = yield* ensure(id, { generation: payload.generation })
      const promptId = payload.promptId
      // Deliveries of one prompt on this runner take turns through the claim and the send: a second one claims only
      // once the first has sent (its turn is then known) or given up (its claim undone), in whichever order the
      // database answers their claims; otherwise it could find the claim with no turn yet and report it lost.
      for (let first = inc.sending.get(promptId); first !== undefined; first = inc.sending.get(promptId)) {
        yield* Deferred.await(first)
      }
      const slot = Deferred.makeUnsafe<void>()
      inc.sending.set(promptId, slot)
      const delivered = yield* claimAndSend(id, inc, payload).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (inc.sending.get(promptId) === slot) inc.sending.delete(promptId)
          Deferred.doneUnsafe(slot, Exit.void)
        }))
      )
      if (delivered._tag === "Answered") return delivered.answer
      const tracked = delivered.tracked
      if (!payload.wait) return { turnId: tracked.turn.id, generation: inc.generation }
      const result = yield* outcome(tracked, false)
      return { turnId: tracked.turn.id, generation: inc.generation, result }
    })).pipe(
      Effect.withSpan("ClusterRegistry.send", {
        attributes: { "tether.session.id": id, "tether.runner": place.address, "tether.prompt.id": payload.promptId }
      })
    )

  /** The turn a client's handle names, live here, or `undefined` (then the ledger answers). */
  const trackedTurn = (id: string, ref: { readonly turnId: string; readonly generation: number }) => {
    const inc = incarnations.get(id)
    return inc !== undefined && inc.generation === ref.generation ? inc.turns.get(ref.turnId) : undefined
  }

  const awaitTurn = (id: string, ref: {
    readonly promptId: string
    readonly turnId: string
    readonly generation: number
    readonly settled: boolean
  }) =>
    Effect.suspend((): Effect.Effect<unknown, TE | Turn.TurnError | Wire.Known> => {
      const tracked = trackedTurn(id, ref)
      if (tracked !== undefined) return outcome(tracked, ref.settled)
      return Effect.flatMap(readTurn(id, ref.promptId), (turn) =>
        turn === undefined
          ? Effect.fail(moved(id, ref.generation))
          : fromLedger(id, turn))
    })

  /** A turn's phase: the one this runner tracks, else the ledger's (completed, or failed). */
  const phase = (
    id: string,
    ref: { readonly promptId: string; readonly turnId: string; readonly generation: number }
  ) =>
    Effect.suspend(() => {
      const tracked = trackedTurn(id, ref)
      if (tracked !== undefined) return tracked.turn.phase
      return Effect.map(
        readTurn(id, ref.promptId),
        (turn): Turn.Phase => turn?.state === "completed" ? "completed" : "failed"
      )
    })

  return { send, trackedTurn, awaitTurn, phase } as const
}
