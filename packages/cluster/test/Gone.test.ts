/**
 * Whether a lost generation's runner is gone (`internal/turns.ts` `gone`): a retry of a prompt that generation had
 * dispatched waits for its outcome only while its runner may still finish it. Gone is a port that refuses two pings;
 * one that answers, or hangs (a frozen runner), is not gone; without the cluster's `Runners` nobody is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { RunnerAddress, Runners } from "effect/cluster"
import { RunnerUnavailable } from "effect/cluster/ClusterError"
import { TestClock } from "effect/testing"
import { gone } from "../src/internal/turns.ts"

const withPing = (ping: (address: RunnerAddress.RunnerAddress) => Effect.Effect<void, RunnerUnavailable>) =>
  Effect.provideService(Runners.Runners, { ping } as unknown as Runners.Runners["Service"])

describe("a lost generation's runner", () => {
  it.effect("is gone when its port refuses two pings, not when one answers or hangs", () =>
    Effect.gen(function*() {
      const pinged: Array<string> = []
      const refuses = (address: RunnerAddress.RunnerAddress) =>
        Effect.suspend(() => {
          pinged.push(`${address.host}:${address.port}`)
          return Effect.fail(new RunnerUnavailable({ address }))
        })
      const refused = yield* Effect.forkChild(gone("10.0.0.7:34431").pipe(withPing(refuses)))
      yield* TestClock.adjust("250 millis")
      assert.isTrue(yield* Fiber.join(refused))
      assert.deepStrictEqual(pinged, ["10.0.0.7:34431", "10.0.0.7:34431"])

      assert.isFalse(yield* gone("10.0.0.7:34431").pipe(withPing(() => Effect.void)))

      const hangs = yield* Effect.forkChild(gone("10.0.0.7:34431").pipe(withPing(() => Effect.never)))
      yield* TestClock.adjust("1 second")
      assert.isFalse(yield* Fiber.join(hangs))

      // Refused once, then answered (it came back at the same address): not gone.
      let tries = 0
      const flaky = (address: RunnerAddress.RunnerAddress) =>
        Effect.suspend(() => ++tries === 1 ? Effect.fail(new RunnerUnavailable({ address })) : Effect.void)
      const back = yield* Effect.forkChild(gone("10.0.0.7:34431").pipe(withPing(flaky)))
      yield* TestClock.adjust("250 millis")
      assert.isFalse(yield* Fiber.join(back))
    }))

  it.effect("is never known gone without the cluster's Runners", () =>
    Effect.gen(function*() {
      assert.isFalse(yield* gone("10.0.0.7:34431"))
    }))
})
