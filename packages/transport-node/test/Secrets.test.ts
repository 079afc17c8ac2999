/**
 * The scrubber that keeps `Redacted` values out of what leaves the transport.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Secrets from "../src/internal/secrets.ts"

describe("Secrets", () => {
  const scrub = Secrets.make([
    { name: "API_KEY", value: "sk-ant-0123456789" },
    { name: "QUOTED", value: "pa\"ss\\word" },
    { name: "SHORT", value: "abc" }
  ])

  it.effect("replaces each secret wherever it appears, by name", () =>
    Effect.sync(() => {
      assert.strictEqual(
        scrub("ANTHROPIC_API_KEY=sk-ant-0123456789\nagain sk-ant-0123456789"),
        "ANTHROPIC_API_KEY=[redacted API_KEY]\nagain [redacted API_KEY]"
      )
      assert.strictEqual(scrub("nothing here"), "nothing here")
    }))

  it.effect("also in its JSON-escaped form, so a JSON line stays valid", () =>
    Effect.sync(() => {
      const line = JSON.stringify({ text: "the password is pa\"ss\\word" })
      const out = scrub(line)
      assert.notInclude(out, "ss\\\\word")
      assert.deepStrictEqual(JSON.parse(out), { text: "the password is [redacted QUOTED]" })
    }))

  it.effect("a piece of a secret at a cut: the start of a tail, the end of a prefix", () =>
    Effect.sync(() => {
      assert.strictEqual(scrub("456789 and more", { start: true }), "[redacted API_KEY] and more")
      assert.strictEqual(scrub("the key is sk-ant-01", { end: true }), "the key is [redacted API_KEY]")
      // Without a cut, a piece is just text.
      assert.strictEqual(scrub("456789 and more"), "456789 and more")
    }))

  it.effect("values shorter than the minimum are not scrubbed (they would match everywhere)", () =>
    Effect.sync(() => {
      assert.strictEqual(scrub("abc"), "abc")
      assert.strictEqual(Secrets.make([{ name: "X", value: "abc" }]), Secrets.none)
    }))

  it.effect("a connection is scrubbed of every open connection's secrets, and of its own after it closed", () =>
    Effect.sync(() => {
      const own = Secrets.make([{ name: "A_KEY", value: "sk-a-0123456789" }])
      const scrub = Secrets.forConnection(own)
      assert.isFalse(scrub.idle())
      const bystander = Secrets.forConnection(Secrets.none)
      assert.isTrue(bystander.idle())
      const unregisterA = Secrets.register([{ name: "A_KEY", value: "sk-a-0123456789" }])
      const unregisterB = Secrets.register([{ name: "B_KEY", value: "sk-b-0123456789" }])
      // Twice, by two connections: it stays until both are gone.
      const unregisterB2 = Secrets.register([{ name: "B_KEY", value: "sk-b-0123456789" }])
      assert.strictEqual(scrub("a sk-a-0123456789 b sk-b-0123456789"), "a [redacted A_KEY] b [redacted B_KEY]")
      assert.isFalse(bystander.idle())
      assert.strictEqual(bystander("sk-b-0123456789"), "[redacted B_KEY]")
      unregisterB()
      unregisterB()
      assert.strictEqual(bystander("sk-b-0123456789"), "[redacted B_KEY]")
      unregisterB2()
      assert.strictEqual(bystander("sk-b-0123456789"), "sk-b-0123456789")
      unregisterA()
      assert.isTrue(bystander.idle())
      assert.strictEqual(scrub("sk-a-0123456789"), "[redacted A_KEY]")
    }))
})
