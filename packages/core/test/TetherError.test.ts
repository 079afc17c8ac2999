import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Exit from "effect/Exit"
import { RegistryClosed, SessionConflict } from "../src/SessionRegistry.ts"
import { CliExited, InterruptTimeout, QueueFull, SessionRetired } from "../src/TetherError.ts"

describe("TetherError", () => {
  it("errors after the prompt was written: never fallback or requeue, uncertain exactly when not acknowledged", () => {
    for (const acknowledged of [true, false]) {
      const errors = [
        new CliExited({ exit: "exit code 1", code: 1, signal: null, stderrTail: "", acknowledged }),
        new SessionRetired({ reason: "retired", acknowledged }),
        new InterruptTimeout({ turnId: "t", reason: "host", timeoutMillis: 10, acknowledged })
      ]
      for (const error of errors) {
        assert.isFalse(error.safeToFallback, error._tag)
        assert.isFalse(error.safeToRequeue, error._tag)
        assert.strictEqual(error.deliveryUncertain, !acknowledged, `${error._tag} acknowledged=${acknowledged}`)
        // The flags live on the prototype: they are not fields of the error's data.
        assert.notInclude(Object.keys(error), "deliveryUncertain")
      }
    }
  })

  describe("the shape of an error (what hosts serialize and compare)", () => {
    it("has its tag first, then its fields, in its JSON and its keys", () => {
      const error = new QueueFull({ capacity: 8 })
      assert.strictEqual(JSON.stringify(error), `{"_tag":"QueueFull","capacity":8}`)
      assert.deepStrictEqual(Object.keys(error), ["_tag", "capacity"])
      assert.strictEqual(error.name, "QueueFull")
      assert.instanceOf(error, Error)
    })

    it("is equal to the same error however it was built", () => {
      assert.isTrue(Equal.equals(new RegistryClosed(), new RegistryClosed()))
      const conflict = new SessionConflict({
        id: "s",
        generation: 1,
        liveFingerprint: "a",
        requestedFingerprint: "b"
      })
      // Rebuilt from its own keys (its tag among them), as the cluster's runner does.
      const rebuilt = new SessionConflict({ ...conflict })
      assert.isTrue(Equal.equals(conflict, rebuilt))
      assert.strictEqual(JSON.stringify(rebuilt), JSON.stringify(conflict))
      assert.isFalse(Equal.equals(conflict, new SessionConflict({ ...conflict, generation: 2 })))
    })

    it("keeps its own tag when built from another error's keys", () => {
      const spread = { ...new QueueFull({ capacity: 8 }) } as unknown as { readonly reason: string }
      const error = new SessionRetired({ ...spread, reason: "gone", acknowledged: false })
      assert.strictEqual(error._tag, "SessionRetired")
    })

    it.effect("fails an effect when yielded, caught by its tag", () =>
      Effect.gen(function*() {
        // Yielded in a generator, as a host's `yield* new QueueFull(...)` does.
        const exit = yield* Effect.exit(Effect.gen(function*() {
          const capacity = yield* Effect.succeed(1)
          return yield* new QueueFull({ capacity })
        }))
        assert.isTrue(Exit.isFailure(exit))
        const caught = yield* new QueueFull({ capacity: 1 }).pipe(
          Effect.catchTag("QueueFull", (e) => Effect.succeed(e.capacity))
        )
        assert.strictEqual(caught, 1)
      }))
  })
})
