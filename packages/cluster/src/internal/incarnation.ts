/**
 * A session's generation live on a runner (an incarnation) and the turns it tracks: the records the runner's
 * modules share, and what is pure about them (remembering a turn, its outcome, the ledger's answer for one).
 *
 * @internal
 */
import type { Session, SessionEvent, Turn } from "@tether/core"
import { TetherError } from "@tether/core"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Semaphore from "effect/Semaphore"
import type * as Files from "./files.ts"
import type * as Store from "./store.ts"
import * as Wire from "./wire.ts"

/** A turn sent through this runner: its prompt id, its handle, and when its outcome was saved. */
export interface TrackedTurn<A, TE> {
  readonly promptId: string
  readonly turn: Turn.Turn<A & Turn.TurnResult, TE>
  readonly saved: Deferred.Deferred<void>
}

/** One generation of a session, live on this runner. */
export interface Incarnation<A, TE> {
  readonly id: string
  readonly generation: number
  readonly base: number
  readonly directory: string
  readonly durable: boolean
  readonly previous: Store.Begun["previous"]
  /** The runner a `lost` previous generation was live on (`host:port`). */
  readonly previousRunner: string | undefined
  session: Session.Session<A & Turn.TurnResult, TE> | undefined
  localGeneration: number | undefined
  conversationId: string | undefined
  tracked: { readonly [path: string]: Files.Tracked }
  ceiling: number
  /** The cluster seq of the last event the recorder read. */
  lastSeq: number
  /** Durable events not saved yet. */
  pending: Array<Store.StoredEvent>
  /** Turns that ended and are not in the ledger yet. */
  ended: Array<{ readonly turnId: string; readonly state: "completed" | "failed"; readonly outcome: unknown }>
  readonly turns: Map<string, TrackedTurn<A, TE>>
  readonly prompts: Map<string, string>
  /**
   * The delivery of each prompt that is claiming and sending it now: a second delivery of the same prompt waits
   * until it is done, so that it finds the turn (or the claim undone) instead of a claim with no turn yet, which it
   * would report as a lost turn.
   */
  readonly sending: Map<string, Deferred.Deferred<void>>
  readonly saving: Semaphore.Semaphore
  /** The last save has begun: no save after it may mark the generation live again. */
  ending: boolean
  /** A save failed: a fiber saves again until one succeeds, or the generation ends. */
  retrying: boolean
  recorder: Fiber.Fiber<void> | undefined
  readonly closed: Deferred.Deferred<void>
}

/** How many finished turns an incarnation remembers in memory (older ones are answered from the ledger). */
export const rememberedTurns = 256

export const unavailable = (reason: string) => new TetherError.SessionUnavailable({ status: "unknown", reason })

export const lostTurn = (
  id: string,
  turn: { readonly generation: number; readonly promptId: string; readonly turnId: string | null }
) =>
  new TetherError.SessionRetired({
    reason: `runner lost: generation ${turn.generation} of session ${id} stopped before turn ${
      turn.turnId ?? turn.promptId
    } ended, and whether its CLI ran the prompt is unknown`,
    acknowledged: false
  })

export const isTerminal = (event: SessionEvent.SessionEvent) =>
  event._tag === "TurnCompleted" || event._tag === "TurnFailed"

export const remember = <A, TE>(
  inc: Incarnation<A, TE>,
  promptId: string,
  turn: Turn.Turn<A & Turn.TurnResult, TE>
) => {
  const tracked: TrackedTurn<A, TE> = { promptId, turn, saved: Deferred.makeUnsafe() }
  inc.turns.set(turn.id, tracked)
  inc.prompts.set(promptId, turn.id)
  if (inc.turns.size > rememberedTurns) {
    for (const [turnId, old] of inc.turns) {
      if (inc.turns.size <= rememberedTurns) break
      if (!Deferred.isDoneUnsafe(old.saved)) continue
      inc.turns.delete(turnId)
      inc.prompts.delete(old.promptId)
    }
  }
  return tracked
}

/** A turn's outcome once its save is done (bounded: a database outage delays the reply, never loses it). */
export const outcome = <A, TE>(tracked: TrackedTurn<A, TE>, settled: boolean) =>
  Effect.gen(function*() {
    const exit = settled ? yield* tracked.turn.settled : yield* Effect.exit(tracked.turn.result)
    yield* Effect.timeoutOption(Deferred.await(tracked.saved), Duration.seconds(15))
    return yield* exit
  })

/** A turn the ledger has: its saved outcome, or the loss of the runner that had it. */
export const fromLedger = (id: string, turn: Store.LedgerTurn) => {
  if (turn.state === "dispatched") return Effect.fail(lostTurn(id, turn))
  const saved = turn.outcome as { readonly ok: boolean; readonly result?: unknown; readonly error?: unknown }
  return saved.ok ? Effect.succeed(saved.result) : Effect.fail(Wire.errorFromJson<Wire.Known>(saved.error))
}
