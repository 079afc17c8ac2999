import { assert, describe, it } from "@effect/vitest"
import { CliExited, InterruptTimeout, SessionRetired } from "../src/TetherError.ts"

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
})
