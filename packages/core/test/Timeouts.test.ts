import { assert, describe, it } from "@effect/vitest"
import { Timeouts } from "@tether/core"
import { ConfigProvider, Duration, Effect, Result } from "effect"

const millisOf = (timeouts: Timeouts.Timeouts) =>
  Object.fromEntries(Object.entries(timeouts).map(([name, value]) => [name, Duration.toMillis(value)]))

const fromConfig = (values: Record<string, string>) => Timeouts.config.parse(ConfigProvider.fromUnknown(values))

describe("Timeouts", () => {
  describe("make", () => {
    it.effect("with no overrides, is the defaults", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(millisOf(yield* Timeouts.make()), millisOf(Timeouts.defaults))
      }))

    it.effect("a shorter turn shrinks the defaults nested in it, and leaves the others", () =>
      Effect.gen(function*() {
        const timeouts = yield* Timeouts.make({ turn: "5 minutes" })
        assert.strictEqual(Duration.toMillis(timeouts.turn), 300_000)
        // permission (10 min by default) no longer fits: it becomes the turn; stall (5 min) fits exactly.
        assert.strictEqual(Duration.toMillis(timeouts.permission), 300_000)
        assert.strictEqual(Duration.toMillis(timeouts.stall), 300_000)
        assert.strictEqual(Duration.toMillis(timeouts.interrupt), 10_000)
        assert.deepStrictEqual(Timeouts.validate(timeouts), [])
      }))

    it.effect("a turn shorter than every nested default shrinks them all, control and delivery included", () =>
      Effect.gen(function*() {
        const timeouts = yield* Timeouts.make({ turn: "3 seconds" })
        for (const name of ["stall", "ack", "interrupt", "permission", "control", "delivery"] as const) {
          assert.strictEqual(Duration.toMillis(timeouts[name]), 3_000, name)
        }
        // Not nested in a turn: untouched.
        assert.strictEqual(Duration.toMillis(timeouts.startup), 60_000)
        assert.strictEqual(Duration.toMillis(timeouts.closeGrace), 2_000)
        assert.strictEqual(Duration.toMillis(timeouts.termGrace), 5_000)
      }))

    it.effect("a shorter startup shrinks the default control and delivery", () =>
      Effect.gen(function*() {
        const timeouts = yield* Timeouts.make({ startup: "5 seconds" })
        assert.strictEqual(Duration.toMillis(timeouts.control), 5_000)
        assert.strictEqual(Duration.toMillis(timeouts.delivery), 5_000)
        assert.strictEqual(Duration.toMillis(timeouts.permission), 600_000)
      }))

    it.effect("a value the host set is kept, and the defaults around it shrink", () =>
      Effect.gen(function*() {
        const timeouts = yield* Timeouts.make({ turn: "1 minute", permission: "30 seconds" })
        assert.strictEqual(Duration.toMillis(timeouts.permission), 30_000)
        assert.strictEqual(Duration.toMillis(timeouts.stall), 60_000)
      }))

    it.effect("fails for a nested value the host set longer than the turn it set", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Timeouts.make({ turn: "5 minutes", permission: "10 minutes" }))
        assert.strictEqual(error._tag, "InvalidConfig")
        assert.deepStrictEqual(error.problems, ["permission (10m) must not exceed turn (5m)"])
      }))

    it.effect("fails for a nested value the host set longer than the default turn", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Timeouts.make({ stall: "2 hours" }))
        assert.deepStrictEqual(error.problems, ["stall (2h) must not exceed turn (30m)"])
      }))

    it.effect("fails for a control timeout the host set longer than the startup", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Timeouts.make({ startup: "5 seconds", control: "10 seconds" }))
        assert.deepStrictEqual(error.problems, ["control (10s) must not exceed startup (5s)"])
      }))

    it.effect("fails for values that are not positive and finite, or not durations, each named once", () =>
      Effect.gen(function*() {
        const zero = yield* Effect.flip(Timeouts.make({ turn: 0 }))
        assert.deepStrictEqual(zero.problems, ["turn must be positive and finite (got 0)"])
        const infinite = yield* Effect.flip(Timeouts.make({ control: Duration.infinity }))
        assert.deepStrictEqual(infinite.problems, ["control must be positive and finite (got Infinity)"])
        const garbage = yield* Effect.flip(Timeouts.make({ stall: "soon" as Duration.Input }))
        assert.deepStrictEqual(garbage.problems, ["stall is not a duration"])
      }))
  })

  describe("validate", () => {
    it("checks a complete record as a whole: a spread of the defaults with a short turn is invalid", () => {
      const problems = Timeouts.validate({ ...Timeouts.defaults, turn: Duration.minutes(5) })
      assert.deepStrictEqual(problems, ["permission (10m) must not exceed turn (5m)"])
      assert.deepStrictEqual(Timeouts.validate(Timeouts.defaults), [])
    })
  })

  describe("config", () => {
    it.effect("with nothing configured, is the defaults", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(millisOf(yield* fromConfig({})), millisOf(Timeouts.defaults))
      }))

    it.effect("a configured turn shrinks the nested defaults, as make does", () =>
      Effect.gen(function*() {
        const timeouts = yield* fromConfig({ turn: "5 minutes" })
        assert.strictEqual(Duration.toMillis(timeouts.permission), 300_000)
        assert.strictEqual(Duration.toMillis(timeouts.stall), 300_000)
        const startup = yield* fromConfig({ startup: "5 seconds" })
        assert.strictEqual(Duration.toMillis(startup.control), 5_000)
      }))

    it.effect("fails for configured values that do not fit, naming them", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(fromConfig({ turn: "5 minutes", permission: "10 minutes" }))
        assert.include(error.message, "permission (10m) must not exceed turn (5m)")
        const stall = yield* Effect.flip(fromConfig({ stall: "2 hours" }))
        assert.include(stall.message, "stall (2h) must not exceed turn (30m)")
      }))
  })
})

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
