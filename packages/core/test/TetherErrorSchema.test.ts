import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as TetherError from "../src/TetherError.ts"
import * as TetherErrorSchema from "../src/TetherErrorSchema.ts"

interface Matching extends TetherError.Disposition {}
class Matching extends TetherError.TaggedError("Matching")<{ readonly turnId: string }> {}

interface Wider extends TetherError.Disposition {}
class Wider extends TetherError.TaggedError("Wider")<{ readonly turnId: string; readonly extra: number }> {}

describe("TetherErrorSchema.make", () => {
  it("pairs a class with exactly its fields", () => {
    const schema = TetherErrorSchema.make(Matching, "Matching", { turnId: Schema.String })
    assert.isTrue(Schema.isSchema(schema))
    // @ts-expect-error a field of the class that the schema does not have
    TetherErrorSchema.make(Wider, "Wider", { turnId: Schema.String })
    // @ts-expect-error a field of the schema that the class does not have
    TetherErrorSchema.make(Matching, "Matching", { turnId: Schema.String, extra: Schema.Finite })
  })
})
