/**
 * The environment a CLI starts with, and `PATH` read alone (the box's checks find the CLI's interpreter with it,
 * before the environment is made).
 */
import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@tether/core"
import { Effect, Redacted } from "effect"
import * as fc from "fast-check"
import { buildEnvironment, pathOf } from "../src/internal/environment.ts"

describe("Environment", () => {
  it.effect("PATH read alone is the PATH the whole environment has, whatever the spec sets, unsets or inherits", () =>
    Effect.sync(() => {
      const hostPath = process.env.PATH
      const value = fc.oneof(fc.constantFrom("/usr/bin:/bin", "", "/opt/x"), fc.string())
      try {
        fc.assert(
          fc.property(
            fc.record({
              mode: fc.constantFrom<"inherit" | "clean">("inherit", "clean"),
              host: fc.option(value, { nil: undefined }),
              set: fc.option(fc.record({ value, redacted: fc.boolean() }), { nil: undefined }),
              unset: fc.boolean()
            }),
            ({ host, mode, set, unset }) => {
              if (host === undefined) delete process.env.PATH
              else process.env.PATH = host
              const environment: Transport.Environment = {
                mode,
                set: set === undefined ? { OTHER: "1" } : {
                  OTHER: "1",
                  PATH: set.redacted ? Redacted.make(set.value) : set.value
                },
                unset: unset ? ["PATH"] : ["NOTHING"]
              }
              assert.strictEqual(pathOf(environment), buildEnvironment(environment).PATH)
            }
          )
        )
      } finally {
        if (hostPath === undefined) delete process.env.PATH
        else process.env.PATH = hostPath
      }
    }))
})
