/**
 * Tether for Codex: `CodexSession.make` in its own Scope over `NodeTransport.layer` (pointed at the fast fake
 * `codex app-server`, fast-codex.mjs), with full decoding and the session's events, read by one subscriber
 * (`session.subscribe("latest")`), as the Claude host (tether.ts) does: a turn is done when `session.run` has its
 * result and the subscriber has seen the turn's terminal event.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { CodexSession } from "../../../packages/core/src/index.ts"
import type { EventLog, SessionEvent } from "../../../packages/core/src/index.ts"
import { NodeTransport } from "../../../packages/transport-node/src/index.ts"
import { fakeEnv, fastCodex } from "../fake.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
  missed: number
}

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { codex: fastCodex } }))

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
      const session = yield* CodexSession.make({ env: { set: { PATH: fakeEnv().PATH! } } })
      const deliveries = yield* session.subscribe("latest")
      yield* Effect.forkIn(Stream.runForEach(deliveries, (delivery) => Effect.sync(() => onDelivery(delivery))), scope)
      return session
    }).pipe(Scope.provide(scope))
  )

  return {
    turn: async (prompt) => {
      const seen = new Promise<TurnStats>((resolve, reject) => {
        waiter = { resolve, reject, deltas: 0, messages: 0, missed: 0 }
      })
      const result = await runtime.runPromise(session.run(prompt))
      if (result.status !== "completed") throw new Error(`turn ended ${result.status}`)
      return seen
    },
    close: () => runtime.runPromise(Scope.close(scope, Exit.void))
  }
}

/** The Tether host for Codex: `CodexSession` over `NodeTransport`, for runner.ts. */
export const host: Host = {
  // Builds the layer (and its host-death watchdog) once per process, like importing a library.
  init: () => runtime.runPromise(Effect.void),
  open
}
