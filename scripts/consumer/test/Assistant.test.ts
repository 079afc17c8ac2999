/**
 * The consumer application's test of its own service, on TestClock, against the scripted CLI of @tether/testing.
 */
import { assert, describe, it } from "@effect/vitest"
import { TetherError } from "@tether/core"
import { HostTest, MockClaude, MockTransport } from "@tether/testing"
import { Effect, Layer } from "effect"
import { Assistant } from "../src/Assistant.ts"

const script = MockClaude.make([
  MockClaude.when("deploy", MockClaude.tool({ name: "Bash", input: { command: "nohup ./deploy.sh &" } }))
])

const TestAssistant = HostTest.layer(Assistant.layerNoDeps).pipe(Layer.provide(MockTransport.layer(script)))

describe("Assistant", () => {
  it.effect("answers", () =>
    Effect.gen(function*() {
      const assistant = yield* Assistant
      const result = yield* HostTest.settle(assistant.run("hello"))
      assert.strictEqual(result.text, "hello")
    }).pipe(Effect.provide(TestAssistant)))

  it.effect("refuses shell commands that would outlive the session", () =>
    Effect.gen(function*() {
      const assistant = yield* Assistant
      const result = yield* HostTest.settle(assistant.run("deploy"))
      assert.deepStrictEqual(result.permissionDenials.map((denial) => denial.toolName), ["Bash"])
    }).pipe(Effect.provide(TestAssistant)))

  it.effect("a missing claude is a failure safe to fall back from", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(Assistant, HostTest.layer(Assistant.layerNoDeps)))
      assert.isTrue(TetherError.hasDisposition(error) && error.safeToFallback)
    }).pipe(Effect.provide(MockTransport.layer(MockClaude.defaultScript, {
      spawnError: () => new TetherError.ExecutableNotFound({ program: "claude", searched: ["PATH"] })
    }))))
})
