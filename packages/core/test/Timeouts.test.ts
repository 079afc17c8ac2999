import { assert, describe, it } from "@effect/vitest"
import { Timeouts } from "@tether/core"
import { ConfigProvider, Duration, Effect } from "effect"

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
