import { assert, describe, it } from "@effect/vitest"
import { Timeouts } from "@tether/core"
import { ConfigProvider, Duration, Effect, Result } from "effect"

// Nested budgets are validated when a set of timeouts is built, whichever way it is built: a budget that cannot fit
// in its parent (a permission wait longer than the whole turn) would otherwise surface as a confusing failure in the
// middle of a turn.

const valid: Timeouts.Timeouts = {
  ...Timeouts.defaults,
  turn: Duration.seconds(100),
  startup: Duration.seconds(20),
  stall: Duration.seconds(50),
  permission: Duration.seconds(60),
  control: Duration.seconds(5),
  delivery: Duration.seconds(5)
}

describe("Timeouts.validate", () => {
  it("the defaults are valid", () => {
    assert.deepStrictEqual(Timeouts.validate(Timeouts.defaults), [])
    assert.deepStrictEqual(Timeouts.validate(valid), [])
  })

  const nestedInTurn = ["stall", "ack", "interrupt", "permission", "control", "delivery"] as const
  for (const name of nestedInTurn) {
    it(`${name} may equal the turn but not exceed it`, () => {
      const budget = name === "control" || name === "delivery" ? valid.startup : valid.turn
      assert.deepStrictEqual(Timeouts.validate({ ...valid, [name]: budget }), [])
      const over = { ...valid, [name]: Duration.seconds(101), startup: Duration.seconds(200) }
      assert.deepStrictEqual(Timeouts.validate(over), [
        `${name} (1m 41s) must not exceed turn (1m 40s)`
      ])
    })
  }

  for (const name of ["control", "delivery"] as const) {
    it(`${name} may equal startup but not exceed it`, () => {
      assert.deepStrictEqual(Timeouts.validate({ ...valid, [name]: Duration.seconds(20) }), [])
      assert.deepStrictEqual(Timeouts.validate({ ...valid, [name]: Duration.seconds(21) }), [
        `${name} (21s) must not exceed startup (20s)`
      ])
    })
  }

  it("every timeout must be positive and finite", () => {
    for (const name of Object.keys(Timeouts.defaults) as ReadonlyArray<keyof Timeouts.Timeouts>) {
      assert.deepStrictEqual(Timeouts.validate({ ...valid, [name]: Duration.zero }), [
        `${name} must be positive and finite (got 0)`
      ])
      assert.deepStrictEqual(Timeouts.validate({ ...valid, [name]: Duration.infinity }), [
        `${name} must be positive and finite (got Infinity)`
      ])
    }
  })

  it("every problem is reported, not only the first", () => {
    assert.deepStrictEqual(
      Timeouts.validate({ ...valid, stall: Duration.seconds(200), permission: Duration.seconds(300) }),
      ["stall (3m 20s) must not exceed turn (1m 40s)", "permission (5m) must not exceed turn (1m 40s)"]
    )
  })
})

describe("Timeouts.make", () => {
  it.effect("overrides the defaults", () =>
    Effect.gen(function*() {
      const timeouts = yield* Timeouts.make({ stall: "90 seconds" })
      assert.deepStrictEqual(timeouts, { ...Timeouts.defaults, stall: Duration.seconds(90) })
    }))

  it.effect("refuses a permission budget longer than the turn", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Timeouts.make({ permission: "2 hours", turn: "1 hour" }))
      assert.deepStrictEqual(error.problems, ["permission (2h) must not exceed turn (1h)"])
    }))

  it.effect("refuses what is not a duration", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Timeouts.make({ stall: "soon" as never }))
      assert.deepStrictEqual(error.problems, ["stall is not a duration"])
    }))
})

describe("Timeouts.config", () => {
  const parse = (values: { readonly [key: string]: unknown }) =>
    Effect.result(Timeouts.config.parse(ConfigProvider.fromUnknown(values)))

  it.effect("reads each timeout, the defaults for the rest", () =>
    Effect.gen(function*() {
      const result = yield* parse({ stall: "90 seconds" })
      assert.deepStrictEqual(result, Result.succeed({ ...Timeouts.defaults, stall: Duration.seconds(90) }))
    }))

  it.effect("validates nested budgets like make does", () =>
    Effect.gen(function*() {
      const result = yield* parse({ permission: "2 hours", turn: "1 hour" })
      assert.isTrue(Result.isFailure(result))
      if (Result.isFailure(result)) {
        assert.include(String(result.failure), "permission (2h) must not exceed turn (1h)")
      }
    }))

  it.effect("refuses a timeout that is not positive", () =>
    Effect.gen(function*() {
      const result = yield* parse({ control: "0 millis" })
      assert.isTrue(Result.isFailure(result))
      if (Result.isFailure(result)) assert.include(String(result.failure), "control must be positive and finite")
    }))
})
