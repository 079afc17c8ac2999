/**
 * Tether: `ClaudeSession.make` in its own Scope over `NodeTransport.layer` (pointed at the fake), with full decoding
 * and the session's events, read by one subscriber (`session.subscribe("latest")`). A turn is done for this host
 * when `session.run` has its result and the subscriber has seen the turn's terminal event, so a subscriber that
 * falls behind costs time, and one that lags (skipped events) shows up as missing deltas.
 *
 * Only the packages' public exports are used. Promises wrap the Effect calls so the measuring code in runner.ts is the
 * same for every host; the wrapping costs one `runPromise` per turn.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { ClaudeSession } from "../../../packages/core/src/index.ts"
import type { EventLog, SessionEvent } from "../../../packages/core/src/index.ts"
import { NodeTransport } from "../../../packages/transport-node/src/index.ts"
import { fakeClaude, fakeEnv } from "../fake.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
  missed: number
}

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude } }))

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
      const session = yield* ClaudeSession.make({
        includePartialMessages: true,
        env: { set: { PATH: fakeEnv().PATH! } }
      })
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
      if (result.isError) throw new Error(`turn failed: ${result.subtype}`)
      return seen
    },
    close: () => runtime.runPromise(Scope.close(scope, Exit.void))
  }
}

/** The Tether host: `ClaudeSession` over `NodeTransport`, for runner.ts. */
export const host: Host = {
  // Builds the layer (and its host-death watchdog) once per process, like importing a library.
  init: () => runtime.runPromise(Effect.void),
  open
}
