import { assert } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"

// Helpers that move the TestClock until something happens. They fail the test with a message when their budget is
// spent: joining a fiber that still sleeps on the TestClock would hang until the test runner's timeout, silently.

/**
 * How far a helper may move the clock: `steps` adjustments of `step` each. Defaults to 2000 steps of 10 ms (20 s).
 *
 * @category models
 * @since 0.1.0
 */
export interface Budget {
  readonly step?: Duration.Input | undefined
  readonly steps?: number | undefined
  /** What the test expected, for the failure message. */
  readonly message?: string | undefined
}

const stepOf = (budget: Budget): Duration.Input => budget.step ?? "10 millis"
const stepsOf = (budget: Budget): number => budget.steps ?? 2_000

const spent = (budget: Budget, what: string) =>
  `${budget.message ?? what}: not done after ${stepsOf(budget)} steps of ${
    Duration.format(Duration.fromInputUnsafe(stepOf(budget)))
  }`

/**
 * Moves the clock one step at a time until `condition` holds (checked before every step and after the last), and
 * fails the test when the budget is spent. `condition` may do per-step work (answer a request, fire an interrupt).
 *
 * @category clock
 * @since 0.1.0
 */
export const advanceUntil = <E, R>(condition: Effect.Effect<boolean, E, R>, budget: Budget = {}) =>
  Effect.gen(function*() {
    const steps = stepsOf(budget)
    for (let i = 0; i < steps; i++) {
      if (yield* condition) return
      yield* TestClock.adjust(stepOf(budget))
    }
    if (yield* condition) return
    assert.fail(spent(budget, "condition never held"))
  })

/**
 * Runs `effect` in its own fiber while moving the clock one step at a time until it completes, and returns its
 * outcome. When the budget is spent the test fails with a message; the fiber is interrupted without waiting for it
 * (it may be stuck on the clock, uninterruptibly).
 *
 * @category clock
 * @since 0.1.0
 */
export const settle = <A, E, R>(effect: Effect.Effect<A, E, R>, budget: Budget = {}) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkDetach(effect)
    const done = Effect.sync(() => fiber.pollUnsafe() !== undefined)
    yield* advanceUntil(done, { ...budget, message: budget.message ?? "the effect never completed" }).pipe(
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => fiber.interruptUnsafe()))
    )
    return yield* Fiber.join(fiber)
  })

/**
 * Moves the clock by `duration` in steps of `step`, so that chains of sleeps all run.
 *
 * @category clock
 * @since 0.1.0
 */
export const advance = (duration: Duration.Input, step: Duration.Input = "10 millis") =>
  Effect.gen(function*() {
    const limit = Duration.toMillis(duration)
    const stepMillis = Duration.toMillis(step)
    for (let elapsed = 0; elapsed < limit; elapsed += stepMillis) yield* TestClock.adjust(step)
  })
