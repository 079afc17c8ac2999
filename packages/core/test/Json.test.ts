import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fc from "fast-check"
import * as Vm from "node:vm"
import { isJson } from "../src/codec/Json.ts"
import { anything } from "./support/Anything.ts"

const isSchemaJson = Schema.is(Schema.Json)

/** Both answers, or that the check threw (a getter that throws: both throw, with their own messages). */
const answer = (check: (u: unknown) => boolean, u: unknown): boolean | "threw" => {
  try {
    return check(u)
  } catch {
    return "threw"
  }
}

const agrees = (u: unknown) => assert.strictEqual(answer(isJson, u), answer(isSchemaJson, u))

class Point {
  readonly x = 1
}

class Bare extends (null as unknown as ObjectConstructor) {}

// Values at each edge of Schema.Json's definition, built fresh for each use.
const edges: ReadonlyArray<readonly [string, () => unknown]> = [
  ["null", () => null],
  ["undefined", () => undefined],
  ["NaN", () => Number.NaN],
  ["Infinity", () => Number.POSITIVE_INFINITY],
  ["-Infinity", () => Number.NEGATIVE_INFINITY],
  ["-0", () => -0],
  ["a bigint", () => 1n],
  ["a symbol", () => Symbol("s")],
  ["a function", () => () => 1],
  ["an object holding undefined", () => ({ a: undefined })],
  ["an array holding undefined", () => [undefined]],
  ["a sparse array", () => [1, , 2]],
  ["an array with an extra property", () => Object.assign([1], { extra: undefined })],
  ["an object with a symbol key", () => ({ [Symbol("s")]: undefined, a: 1 })],
  ["a non-enumerable key holding undefined", () => Object.defineProperty({}, "hidden", { value: undefined })],
  ["a getter", () => ({
    get a() {
      return 1
    }
  })],
  ["a getter that throws", () => ({
    get a(): number {
      throw new Error("boom")
    }
  })],
  ["a null-prototype object", () => Object.assign(Object.create(null), { a: 1 })],
  ["an object over a null-prototype object", () => Object.create(Object.create(null))],
  ["an object over a plain object", () => Object.create({})],
  ["an instance of a class", () => new Point()],
  ["an instance of a class extending null", () => Object.create(Bare.prototype)],
  ["a Date", () => new Date(0)],
  ["a Map", () => new Map()],
  ["a boxed number", () => new Number(1)],
  ["a typed array", () => new Uint8Array(2)],
  ["an array subclass", () => new (class extends Array {})()],
  ["a plain object from another realm", () => Vm.runInNewContext("({ a: [1, { b: null }] })")],
  ["an array from another realm", () => Vm.runInNewContext("[1, 'a', true]")],
  ["a Date from another realm", () => Vm.runInNewContext("new Date(0)")],
  ["a cycle", () => {
    const cyclic: { self?: unknown } = {}
    cyclic.self = cyclic
    return cyclic
  }],
  ["an array in a cycle", () => {
    const cyclic: Array<unknown> = []
    cyclic.push({ back: cyclic })
    return cyclic
  }],
  ["a value reached twice (a DAG)", () => {
    const shared = { a: [1, 2] }
    return [shared, { again: shared }, shared]
  }],
  ["deep nesting", () => {
    const root: Array<unknown> = []
    let current = root
    for (let i = 0; i < 100_000; i++) {
      const next: Array<unknown> = []
      current.push(next)
      current = next
    }
    return root
  }]
]

/** Mostly JSON values, with a non-JSON leaf now and then, so that both answers are common. */
const nearlyJson = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    { arbitrary: fc.oneof(fc.constant(null), fc.boolean(), fc.string(), fc.double()), weight: 5 },
    { arbitrary: fc.constantFrom(undefined, 1n, Number.NaN, new Date(0), new Point()), weight: 1 },
    { arbitrary: fc.array(tie("value"), { maxLength: 4 }), weight: 2 },
    // Null-prototype objects among them (fast-check's default).
    { arbitrary: fc.dictionary(fc.string(), tie("value"), { maxKeys: 4 }), weight: 2 }
  )
})).value

describe("isJson", () => {
  for (const [name, make] of edges) {
    it(`answers as Schema.Json does for ${name}`, () => agrees(make()))
  }

  it("answers as Schema.Json does on arbitrary values", () => {
    fc.assert(fc.property(anything(4), agrees), { numRuns: 2_000 })
  })

  it("answers as Schema.Json does on values that are JSON but for a leaf or a container", () => {
    let accepted = 0
    fc.assert(
      fc.property(nearlyJson, (value) => {
        agrees(value)
        if (isJson(value)) accepted++
      }),
      { numRuns: 2_000 }
    )
    // Both answers were exercised.
    assert.isAbove(accepted, 100)
    assert.isBelow(accepted, 1_900)
  })
})
