/**
 * What a host's own tests need to run its sessions against the mock CLI ({@link MockTransport}) on `TestClock`.
 *
 * Under `it.effect` time stands still until the test moves `TestClock`, and everything a session does waits on it:
 * the mock CLI's startup (300 ms) and answers, the session's deadlines, and at release the close grace and the
 * mock's exit. A test that runs `session.run(...)` and never moves the clock hangs, and so does one whose session is
 * released by the test's scope. The helpers here move the clock for you, a small step at a time, until what you
 * asked for is done:
 *
 * - {@link settle} runs an effect (a turn, a control, a whole host program with its scope) to its end;
 * - {@link layer} wraps a layer (a host's service that owns a session) so that building and releasing it settles;
 * - {@link advance} and {@link advanceUntil} move the clock by a duration, or until a condition holds.
 *
 * Each has a budget of `TestClock` time (`within`, 1 minute by default): when it is spent, the test dies with
 * {@link Unsettled} instead of hanging until the runner's timeout. No real time passes: a step costs a fraction of
 * a millisecond, so a whole minute of 10 ms steps takes a second or two, and a longer wait wants a larger step.
 *
 * To test a host's service, build its layer without a transport (`layerNoDeps`, as Effect's own services do) and
 * provide `MockTransport.layer(script)` in tests, `NodeTransport.layer()` in the program:
 *
 * @example
 * ```ts
 * import { assert, it } from "@effect/vitest"
 * import { ClaudeSession } from "@tether/claude"
 * import { HostTest, MockClaude, MockTransport } from "@tether/testing"
 * import { Context, Effect, Layer } from "effect"
 *
 * class Assistant extends Context.Service<Assistant, ClaudeSession.ClaudeSession>()("my-app/Assistant") {
 *   static readonly layerNoDeps = Layer.effect(Assistant, ClaudeSession.make())
 * }
 *
 * it.effect("answers", () =>
 *   Effect.gen(function*() {
 *     const assistant = yield* Assistant
 *     const result = yield* HostTest.settle(assistant.run("hello"))
 *     assert.strictEqual(result.text, "hello")
 *   }).pipe(
 *     Effect.provide(HostTest.layer(Assistant.layerNoDeps)),
 *     Effect.provide(MockTransport.layer(MockClaude.make()))
 *   ))
 * ```
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { dual } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"

/**
 * How the clock moves: `step` at a time (default 10 milliseconds, finer than the mock CLI's own delays, so that time
 * never jumps far past the moment the effect is done), for at most `within` of `TestClock` time (default 1 minute).
 *
 * A test that waits out a long deadline on purpose (a 10-minute permission timeout) raises both:
 * `{ step: "1 second", within: "11 minutes" }`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  readonly step?: Duration.Input | undefined
  readonly within?: Duration.Input | undefined
}

/**
 * The default step: 10 milliseconds.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultStep: Duration.Duration = Duration.millis(10)

/**
 * The default budget: 1 minute of `TestClock` time.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultWithin: Duration.Duration = Duration.minutes(1)

/**
 * The defect a helper dies with when its budget of `TestClock` time is spent: what it waited for waits on something
 * that never comes (a turn the script never ends, a permission nobody answers), or needs a larger `within`.
 *
 * @category errors
 * @since 0.1.0
 */
export class Unsettled extends Data.TaggedError("Unsettled")<{
  /** What did not settle. */
  readonly what: string
  readonly within: Duration.Duration
  readonly step: Duration.Duration
}> {
  override get message(): string {
    return `${this.what} did not settle within ${Duration.format(this.within)} of TestClock time (steps of ${
      Duration.format(this.step)
    }): it waits for something that never comes, or needs a larger \`within\``
  }
}

interface Budget {
  readonly step: Duration.Duration
  readonly within: Duration.Duration
  readonly steps: number
}

const budgetOf = (options: Options): Budget => {
  const step = Duration.fromInputUnsafe(options.step ?? defaultStep)
  const within = Duration.fromInputUnsafe(options.within ?? defaultWithin)
  if (!Duration.isPositive(step) || !Duration.isFinite(within)) {
    throw new RangeError(`HostTest: step must be positive and within finite (got ${options.step}, ${options.within})`)
  }
  return { step, within, steps: Math.ceil(Duration.toMillis(within) / Duration.toMillis(step)) }
}

/**
 * Runs `effect` in a fiber of its own and moves `clock` a step at a time until that fiber is done. When the budget is
 * spent, the fiber is interrupted without waiting for it (it may wait on the clock, uninterruptibly) and the caller
 * dies with `Unsettled`; the same happens to the fiber when the caller is interrupted.
 */
const drive = <A, E, R>(clock: TestClock.TestClock, effect: Effect.Effect<A, E, R>, options: Options, what: string) =>
  Effect.suspend(() => {
    const budget = budgetOf(options)
    return Effect.flatMap(Effect.forkDetach(effect), (fiber) =>
      Effect.gen(function*() {
        // Let the fiber start: an effect that needs no time is done before the clock moves at all.
        yield* Effect.yieldNow
        for (let i = 0; fiber.pollUnsafe() === undefined; i++) {
          if (i === budget.steps) {
            return yield* Effect.die(new Unsettled({ what, within: budget.within, step: budget.step }))
          }
          yield* clock.adjust(budget.step)
        }
        return yield* Fiber.join(fiber)
      }).pipe(
        Effect.onExit((exit) =>
          Exit.isSuccess(exit) || fiber.pollUnsafe() !== undefined
            ? Effect.void
            : Effect.sync(() => fiber.interruptUnsafe())
        )
      ))
  })

/**
 * Runs an effect to its end while moving `TestClock`: a turn (`session.run(prompt)`), a control, an interrupt, or a
 * whole host program with its scope (`Effect.scoped(program)`, whose release then settles too). Returns what the
 * effect returns and fails as it fails; dies with {@link Unsettled} when it is not done within the budget.
 *
 * The effect runs in a fiber of its own with the caller's services, so what it waits for must come from it or from
 * fibers already running (a script's timing, a deadline, the host's policy). To answer a deferred permission while
 * a turn runs, fork the turn, then `advanceUntil` the request is pending, answer it, and settle the turn's result.
 *
 * @example
 * ```ts
 * import { ClaudeSession } from "@tether/claude"
 * import { HostTest } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * // Start a session, run a turn and close the session: 300 ms of mock startup, the turn, the close grace.
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* ClaudeSession.make()
 *     return yield* session.run("hello")
 *   })
 * ).pipe(HostTest.settle({ within: "10 seconds" }))
 * ```
 *
 * @category clock
 * @since 0.1.0
 */
export const settle: {
  (options?: Options): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, options?: Options): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, options: Options = {}): Effect.Effect<A, E, R> =>
    TestClock.testClockWith((clock) => drive(clock, self, options, "the effect"))
)

/**
 * A layer whose building and release settle on `TestClock`: wrap a host's layer that owns sessions (its
 * `layerNoDeps`, with `MockTransport.layer(script)` provided under it) so that providing it to a test starts the
 * sessions, and the end of the test releases them (close grace, the mock CLI's exit), without the test moving the
 * clock. Works per test (`Effect.provide`) and shared by a suite (`layer(...)` of `@effect/vitest`).
 *
 * @example
 * ```ts
 * import { layer } from "@effect/vitest"
 * import { ClaudeSession } from "@tether/claude"
 * import { HostTest, MockClaude, MockTransport } from "@tether/testing"
 * import { Context, Effect, Layer } from "effect"
 *
 * class Assistant extends Context.Service<Assistant, ClaudeSession.ClaudeSession>()("my-app/Assistant") {
 *   static readonly layerNoDeps = Layer.effect(Assistant, ClaudeSession.make())
 * }
 *
 * // One session for the whole suite, started before its first test and released after its last.
 * layer(HostTest.layer(Assistant.layerNoDeps).pipe(Layer.provide(MockTransport.layer(MockClaude.make()))))(
 *   "the assistant",
 *   (it) => {
 *     it.effect("answers", () => Effect.flatMap(Assistant, (assistant) => HostTest.settle(assistant.run("hi"))))
 *   }
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = <ROut, E, RIn>(
  self: Layer.Layer<ROut, E, RIn>,
  options: Options = {}
): Layer.Layer<ROut, E, RIn> =>
  Layer.effectContext(
    TestClock.testClockWith((clock) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        // The clock is the one the layer's sessions sleep on, whichever fiber closes the scope later.
        yield* Effect.addFinalizer((exit) => drive(clock, Scope.close(scope, exit), options, "the layer's release"))
        return yield* drive(clock, Layer.buildWithScope(self, scope), options, "the layer")
      })
    )
  )

/**
 * Moves `TestClock` by `duration`, a step at a time (default 10 milliseconds), so that chains of sleeps inside it
 * all run, in order.
 *
 * @category clock
 * @since 0.1.0
 */
export const advance = (
  duration: Duration.Input,
  options: { readonly step?: Duration.Input | undefined } = {}
): Effect.Effect<void> =>
  TestClock.testClockWith((clock) =>
    Effect.gen(function*() {
      const total = Duration.toMillis(Duration.fromInputUnsafe(duration))
      const step = Duration.fromInputUnsafe(options.step ?? defaultStep)
      const stepMillis = Duration.toMillis(step)
      let moved = 0
      for (; moved + stepMillis <= total; moved += stepMillis) yield* clock.adjust(step)
      if (moved < total) yield* clock.adjust(Duration.millis(total - moved))
    })
  )

/**
 * Moves `TestClock` a step at a time until `condition` holds (checked before each step), for at most the budget, and
 * dies with {@link Unsettled} when it never does. The condition may do work at each step (for example, answer a
 * permission once it is pending).
 *
 * @example
 * ```ts
 * import { ClaudeSession } from "@tether/claude"
 * import { Permission } from "@tether/core"
 * import { HostTest } from "@tether/testing"
 * import { Effect, Fiber } from "effect"
 *
 * // A host that answers permissions later: the turn waits until it does.
 * const answerLater = Effect.scoped(
 *   Effect.gen(function*() {
 *     const session = yield* HostTest.settle(ClaudeSession.make({ policy: () => Effect.succeed(Permission.defer) }))
 *     const turn = yield* Effect.forkChild(session.run("deploy"))
 *     yield* HostTest.advanceUntil(Effect.map(session.pendingPermissions, (pending) => pending.length > 0))
 *     const [request] = yield* session.pendingPermissions
 *     yield* session.answerPermission(request.requestId, Permission.deny("not today"))
 *     return yield* HostTest.settle(Fiber.join(turn))
 *   })
 * )
 * ```
 *
 * @category clock
 * @since 0.1.0
 */
export const advanceUntil = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  options: Options = {}
): Effect.Effect<void, E, R> =>
  TestClock.testClockWith((clock) =>
    Effect.gen(function*() {
      const budget = budgetOf(options)
      for (let i = 0; !(yield* condition); i++) {
        if (i === budget.steps) {
          return yield* Effect.die(new Unsettled({ what: "the condition", within: budget.within, step: budget.step }))
        }
        yield* clock.adjust(budget.step)
      }
    })
  )
