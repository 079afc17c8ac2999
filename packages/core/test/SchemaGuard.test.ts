import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import * as ClaudeProtocol from "../src/claude/ClaudeProtocol.ts"
import * as SchemaGuard from "../src/internal/schemaGuard.ts"
import { fixtureFiles, scenarioOf, TextBlockLike, transcriptEntries } from "./support/Fixtures.ts"

const isFrame = (entry: { readonly dir: string; readonly msg?: unknown }) =>
  (entry.dir === "<" || entry.dir === ">") && entry.msg !== undefined

/** Every frame of the recorded transcripts, both directions. */
const frames: ReadonlyArray<unknown> = transcriptEntries.flatMap(({ entry }) => isFrame(entry) ? [entry.msg] : [])

/** The frames of one transcript (`<version>/<scenario>.ndjson`). */
const framesOf = (file: string): ReadonlyArray<unknown> =>
  transcriptEntries.flatMap((entry) => entry.file === file && isFrame(entry.entry) ? [entry.entry.msg] : [])

const schemas = Object.entries(ClaudeProtocol).flatMap(([name, value]) =>
  Schema.isSchema(value) ? [{ name, is: Schema.is(value), guard: SchemaGuard.make(value.ast) }] : []
)

// Fresh values for each use: mutations must not reach into a shared one.
const odd: ReadonlyArray<() => unknown> = [
  () => null,
  () => undefined,
  () => true,
  () => 0,
  () => -0,
  () => 1.5,
  () => Number.NaN,
  () => Number.POSITIVE_INFINITY,
  () => 1n,
  () => "",
  () => "x",
  () => "text",
  () => "user",
  () => "assistant",
  () => "success",
  () => "init",
  () => "stream_event",
  () => "content_block_delta",
  () => "text_delta",
  () => "control_request",
  () => "can_use_tool",
  () => [],
  () => [1],
  () => ["a"],
  () => [null],
  () => ({}),
  () => ({ type: "text", text: "t" }),
  () => ({ type: "tool_use", id: "i", name: "n", input: {} }),
  () => new TextBlockLike(),
  () => Object.assign(Object.create(null), { type: "text", text: "t" })
]

type Path = ReadonlyArray<string | number>

const pathsOf = (value: unknown, prefix: Path = [], out: Array<Path> = []): Array<Path> => {
  if (typeof value !== "object" || value === null || prefix.length > 5) return out
  const keys: ReadonlyArray<string | number> = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value)
  for (const key of keys) {
    const path = [...prefix, key]
    out.push(path)
    pathsOf((value as Record<string | number, unknown>)[key], path, out)
  }
  return out
}

const mutate = (
  frame: unknown,
  mutations: ReadonlyArray<{ readonly pick: number; readonly action: number; readonly value: () => unknown }>
): unknown => {
  const root = structuredClone(frame) as Record<string, unknown>
  for (const { action, pick, value } of mutations) {
    const paths = pathsOf(root)
    if (paths.length === 0) break
    const path = paths[pick % paths.length]
    let target: any = root
    for (const key of path.slice(0, -1)) target = target[key]
    const last = path[path.length - 1]
    if (action === 0) {
      if (Array.isArray(target)) target.splice(Number(last), 1)
      else delete target[last]
    } else if (action === 1) target[last] = value()
    else if (Array.isArray(target[last])) target[last].push(value())
    else if (Array.isArray(target)) target.push(value())
    else target[`extra_${String(last)}`] = value()
  }
  return root
}

describe("SchemaGuard", () => {
  it("builds a guard for every schema of the protocol", () => {
    assert.deepStrictEqual(schemas.filter((s) => s.guard === undefined).map((s) => s.name), [])
  })

  it("has recorded frames to check", () => {
    assert.isAbove(frames.length, 100)
  })

  for (const file of fixtureFiles(".ndjson")) {
    it(`answers like Schema.is for every frame of ${scenarioOf(file)} against every schema`, () => {
      for (const frame of framesOf(file)) {
        for (const { guard, is, name } of schemas) {
          // The message only on a mismatch: stringifying every frame for every schema would cost more than the check.
          if (guard?.(frame) !== is(frame)) assert.fail(`${name}: ${JSON.stringify(frame).slice(0, 200)}`)
        }
      }
    })
  }

  it("answers like Schema.is for mutated frames against every schema", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...frames),
        fc.array(
          fc.record({ pick: fc.nat(), action: fc.nat({ max: 2 }), value: fc.constantFrom(...odd) }),
          { minLength: 1, maxLength: 3 }
        ),
        (frame, mutations) => {
          const value = mutate(frame, mutations)
          for (const { guard, is, name } of schemas) {
            if (guard?.(value) !== is(value)) {
              assert.fail(`${name} disagrees on ${String(JSON.stringify(value)).slice(0, 300)}`)
            }
          }
        }
      ),
      { numRuns: 1500 }
    )
  })

  it("answers like Schema.is for arbitrary JSON-like values", () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.anything({ maxDepth: 2 })), (value) => {
        for (const { guard, is, name } of schemas) {
          if (guard?.(value) !== is(value)) assert.fail(`${name} disagrees`)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("stands in for decoding only where decoding gives back the value: open objects, no transformations", () => {
    const open = Schema.StructWithRest(Schema.Struct({ a: Schema.String }), [
      Schema.Record(Schema.String, Schema.Unknown)
    ])
    assert.isDefined(SchemaGuard.makeForDecoding(open.ast))
    assert.isDefined(SchemaGuard.makeForDecoding(ClaudeProtocol.InitializeResponse.ast))
    // Decoding drops the undeclared keys of a closed struct, anywhere in the schema.
    assert.isUndefined(SchemaGuard.makeForDecoding(Schema.Struct({ a: Schema.String }).ast))
    assert.isUndefined(
      SchemaGuard.makeForDecoding(
        Schema.StructWithRest(Schema.Struct({ inner: Schema.Struct({ a: Schema.String }) }), [
          Schema.Record(Schema.String, Schema.Unknown)
        ]).ast
      )
    )
    // A transformation decodes to another value.
    assert.isUndefined(
      SchemaGuard.makeForDecoding(
        Schema.StructWithRest(Schema.Struct({ n: Schema.FiniteFromString }), [
          Schema.Record(Schema.String, Schema.Unknown)
        ]).ast
      )
    )
  })

  it("decodes control payloads as Effect's decoder does", () => {
    const decode = Schema.decodeUnknownResult(ClaudeProtocol.InitializeResponse)
    const jsonOdd = odd.filter((value) => typeof value() !== "bigint")
    const payloads = frames.flatMap((frame) => {
      const response = (frame as { readonly response?: { readonly response?: unknown } }).response
      return typeof response === "object" && response !== null && "response" in response ? [response.response] : []
    })
    assert.isAbove(payloads.length, 0)
    fc.assert(
      fc.property(
        fc.constantFrom(...payloads),
        fc.array(
          // No bigint: a payload comes from `JSON.parse` (and a refused one is quoted as JSON).
          fc.record({ pick: fc.nat(), action: fc.nat({ max: 2 }), value: fc.constantFrom(...jsonOdd) }),
          { maxLength: 3 }
        ),
        (payload, mutations) => {
          const value = mutate(payload, mutations)
          const expected = decode(value)
          const actual = ClaudeProtocol.decodeInitializeResponse(value)
          assert.strictEqual(actual._tag, expected._tag)
          if (actual._tag === "Success" && expected._tag === "Success") {
            assert.deepStrictEqual(actual.success, expected.success)
          }
        }
      ),
      { numRuns: 500 }
    )
    // A schema the guard cannot stand in for still decodes (here: drops the undeclared key).
    const closed = ClaudeProtocol.decodeControlPayload(Schema.Struct({ mode: Schema.String }))
    assert.deepStrictEqual(closed({ mode: "plan", extra: 1 }), Result.succeed({ mode: "plan" }))
  })

  it("requires a declared key whose type accepts undefined, as Effect does", () => {
    const open = <F extends Schema.Struct.Fields>(fields: F) =>
      Schema.StructWithRest(Schema.Struct(fields), [Schema.Record(Schema.String, Schema.Unknown)])
    const cases = [
      Schema.Struct({ result: Schema.Unknown }),
      Schema.Struct({ result: Schema.Any }),
      Schema.Struct({ result: Schema.Undefined }),
      Schema.Struct({ result: Schema.UndefinedOr(Schema.String) }),
      Schema.Struct({ inner: Schema.Struct({ result: Schema.Unknown }) }),
      open({ result: Schema.Unknown }),
      Schema.Struct({ result: Schema.optionalKey(Schema.Unknown) })
    ]
    const values: ReadonlyArray<unknown> = [{}, { result: undefined }, { result: 1 }, { inner: {} }, {
      inner: { result: 1 }
    }]
    for (const schema of cases) {
      const guard = SchemaGuard.make(schema.ast)!
      const forDecoding = SchemaGuard.makeForDecoding(schema.ast)
      const is = Schema.is(schema)
      for (const value of values) {
        assert.strictEqual(guard(value), is(value), `${String(schema.ast)} on ${JSON.stringify(value)}`)
        if (forDecoding !== undefined) assert.strictEqual(forDecoding(value), is(value))
      }
    }
    const decode = ClaudeProtocol.decodeControlPayload(open({ result: Schema.Unknown }))
    assert.isTrue(Result.isFailure(decode({})))
    assert.isTrue(Result.isSuccess(decode({ result: null })))
  })
})
