/**
 * What a runner keeps of the saves that failed: written once the database answers, given up after its retention,
 * and never written twice. The store is a stand-in that fails while `down` (the database's side is Store.test.ts's
 * and Faults.test.ts's, on a real PostgreSQL); time is the TestClock's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Scope } from "effect"
import * as SqlError from "effect/sql/SqlError"
import { TestClock } from "effect/testing"
import type * as Store from "../src/internal/store.ts"
import * as Unsaved from "../src/internal/unsaved.ts"

const unreachable = new SqlError.SqlError({
  reason: new SqlError.ConnectionError({ cause: new Error("ECONNREFUSED"), message: "the database is down" })
})

/** A store whose saves and completions fail while `down`, and which records what it wrote. */
const stand = () => {
  const state = { down: true, saves: 0, completions: 0 }
  const store = {
    save: () =>
      Effect.suspend(() => {
        if (state.down) return Effect.fail(unreachable)
        state.saves++
        return Effect.void
      }),
    complete: () =>
      Effect.suspend(() => {
        if (state.down) return Effect.fail(unreachable)
        state.completions++
        return Effect.void
      })
  } as unknown as Store.Store
  return { state, store }
}

const entry: Unsaved.Entry = {
  id: "chat-1",
  generation: 3,
  save: {
    conversationId: undefined,
    changes: [],
    tracked: {},
    events: [],
    seq: 0,
    turns: [],
    final: true
  },
  completions: [{ promptId: "p-1", generation: 3, turnId: "t-1", state: "completed", outcome: { ok: true } }]
}

describe("Unsaved", () => {
  it.effect("what failed is written once the database answers, by the runner's own retries, and once only", () =>
    Effect.gen(function*() {
      const { state, store } = stand()
      const scope = yield* Scope.make()
      const unsaved = yield* Unsaved.make({
        store,
        retention: Duration.minutes(1),
        writeTimeout: Duration.seconds(5),
        scope
      }).pipe(Scope.provide(scope))
      yield* unsaved.keep(entry)
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(state.saves, 0, "nothing written while the database is down")
      state.down = false
      yield* TestClock.adjust(Unsaved.retryInterval)
      assert.strictEqual(state.saves, 1, "written at the next attempt")
      yield* TestClock.adjust("10 seconds")
      yield* unsaved.flush()
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(state.saves, 1, "and not again")
    }))

  it.effect("past its retention, what is kept is given up: the database that answers later gets nothing", () =>
    Effect.gen(function*() {
      const { state, store } = stand()
      const scope = yield* Scope.make()
      const unsaved = yield* Unsaved.make({
        store,
        retention: Duration.seconds(30),
        writeTimeout: Duration.seconds(5),
        scope
      }).pipe(Scope.provide(scope))
      yield* unsaved.keep(entry)
      yield* TestClock.adjust("31 seconds")
      state.down = false
      yield* TestClock.adjust("5 seconds")
      yield* unsaved.flush()
      assert.deepStrictEqual([state.saves, state.completions], [0, 0])
      yield* Scope.close(scope, Exit.void)
    }))
})
