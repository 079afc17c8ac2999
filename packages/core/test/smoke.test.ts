import { assert, it } from "@effect/vitest"
import { Effect } from "effect"

it.effect("smoke", () => Effect.gen(function*() {
  assert.strictEqual(1, 1)
}))
