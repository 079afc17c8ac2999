import { assert, describe, it } from "@effect/vitest"
import * as ClaudeProtocol from "@tether/claude/ClaudeProtocol"
import * as CodexProtocol from "@tether/codex/CodexProtocol"
import { Arbitrary, Effect, Result, Schema } from "effect"
import * as fc from "fast-check"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Vm from "node:vm"
import * as Generated from "../../../claude/src/internal/protocol/guards.generated.ts"
import { fixtureFiles, scenarioOf, TextBlockLike, transcriptEntries } from "../../../claude/test/support/Fixtures.ts"
import * as CodexGenerated from "../../../codex/src/internal/protocol/guards.generated.ts"
import { codexPayloads } from "../../../codex/test/support/CodexFixtures.ts"
import * as SchemaGuard from "../../../core/src/codec/SchemaGuard.ts"
import { anything } from "../../../core/test/support/Anything.ts"
import * as FixtureGuards from "./fixtures/codegen/guards.generated.ts"
import * as FixtureSchemas from "./fixtures/codegen/schemas.ts"

const isFrame = (entry: { readonly dir: string; readonly msg?: unknown }) =>
  (entry.dir === "<" || entry.dir === ">") && entry.msg !== undefined

/** Every frame of the recorded transcripts, both directions. */
const frames: ReadonlyArray<unknown> = transcriptEntries.flatMap(({ entry }) => isFrame(entry) ? [entry.msg] : [])

/** The frames of one transcript (`<version>/<scenario>.ndjson`). */
const framesOf = (file: string): ReadonlyArray<unknown> =>
  transcriptEntries.flatMap((entry) => entry.file === file && isFrame(entry.entry) ? [entry.entry.msg] : [])

type Guard = (u: unknown) => boolean

const root = Url.fileURLToPath(new URL("../../../../", import.meta.url))

/** Runs the guard generator (scripts/codegen/guards.ts, `pnpm codegen`) with `args`, returning what it prints. */
const generator = (...args: ReadonlyArray<string>) =>
  execFileSync(process.execPath, [Path.join(root, "scripts/codegen/guards.ts"), ...args], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })

/** The generated guard of a schema (guards.generated.ts), `is<Name>`, where the codec has one. */
const generatedOf = (guards: object, name: string): Guard | undefined => {
  const guard: unknown = (guards as { readonly [name: string]: unknown })[`is${name}`]
  return typeof guard === "function" ? guard as Guard : undefined
}

const schemas = Object.entries(ClaudeProtocol).flatMap(([name, value]) =>
  Schema.isSchema(value)
    ? [{ name, is: Schema.is(value), guard: SchemaGuard.make(value.ast), generated: generatedOf(Generated, name) }]
    : []
)

/** Whether both guards of a schema (the closures of schemaGuard.ts, the generated one) give Schema.is's answer. */
const agree = (entry: (typeof schemas)[number], value: unknown): boolean => {
  const expected = entry.is(value)
  return entry.guard?.(value) === expected && (entry.generated === undefined || entry.generated(value) === expected)
}

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

/**
 * Runs `check` on `numRuns` values, each one of `values` after one to three mutations ({@link mutate}), each putting
 * an {@link odd} value somewhere or removing something.
 */
const forEachMutated = (values: ReadonlyArray<unknown>, numRuns: number, check: (value: unknown) => void) =>
  fc.assert(
    fc.property(
      fc.constantFrom(...values),
      fc.array(
        fc.record({ pick: fc.nat(), action: fc.nat({ max: 2 }), value: fc.constantFrom(...odd) }),
        { minLength: 1, maxLength: 3 }
      ),
      (value, mutations) => check(mutate(value, mutations))
    ),
    { numRuns }
  )

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
        for (const entry of schemas) {
          // The message only on a mismatch: stringifying every frame for every schema would cost more than the check.
          if (!agree(entry, frame)) assert.fail(`${entry.name}: ${JSON.stringify(frame).slice(0, 200)}`)
        }
      }
    })
  }

  it("answers like Schema.is for mutated frames against every schema", () => {
    forEachMutated(frames, 1500, (value) => {
      for (const entry of schemas) {
        if (!agree(entry, value)) {
          assert.fail(`${entry.name} disagrees on ${String(JSON.stringify(value)).slice(0, 300)}`)
        }
      }
    })
  })

  it("answers like Schema.is for arbitrary JSON-like values", () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.anything({ maxDepth: 2 })), (value) => {
        for (const entry of schemas) {
          if (!agree(entry, value)) assert.fail(`${entry.name} disagrees`)
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

describe("generated guards (guards.generated.ts)", () => {
  const generatedNames = schemas.flatMap((entry) => entry.generated === undefined ? [] : [entry.name])

  it("has a guard for every frame decodeLine checks, every host frame, every payload and PermissionUpdate", () => {
    const frames = ClaudeProtocol.Frame.members.map((member) =>
      Object.entries(ClaudeProtocol).find(([, value]) => value === member)![0]
    )
    const others = ["HostFrame", "HostUserMessage", "HostControlRequest", "HostControlResponse"]
    const payloads = Object.keys(ClaudeProtocol).flatMap((name) =>
      /^decode\w+Response$/.test(name) ? [name.slice("decode".length)] : []
    )
    assert.isAbove(payloads.length, 15)
    for (const name of [...frames, ...others, "HostControlCancelRequest", ...payloads, "PermissionUpdate"]) {
      assert.include(generatedNames, name)
    }
    // Each is named after a schema of the codec, and the tables of decodeLine hold each frame's own guard.
    const exported = Object.keys(Generated).filter((name) => name.startsWith("is"))
    assert.strictEqual(exported.length, generatedNames.length)
    const tables = [Generated.frames, Generated.systemFrames, Generated.controlRequests]
    const checks = [...tables.flatMap((table) => [...table.values()]), Generated.otherControlRequest]
    assert.strictEqual(checks.length, frames.length)
    for (const check of checks) assert.strictEqual(check.is, generatedOf(Generated, check.schema), check.schema)
  })

  it(
    "are what scripts/codegen/guards.ts generates from the schemas now (run `pnpm codegen`), every one of them",
    () => {
      const checked = generator("--check").split("\n").filter((line) => line.startsWith("checked ")).map((line) =>
        line.slice("checked ".length)
      )
      // Every generated file in the packages is one the generator checks: none is left to go stale.
      const generated = (Fs.readdirSync(Path.join(root, "packages"), { recursive: true }) as Array<string>)
        .filter((file) => file.endsWith("guards.generated.ts") && !file.includes("node_modules"))
        .map((file) => Path.join("packages", file))
      assert.isAtLeast(generated.length, 3)
      assert.sameMembers(checked, generated)
    },
    120_000
  )

  it(
    "are not generated where the generator cannot give Schema.is's answer: it refuses, naming the node and why",
    () => {
      const tried = (file: string) =>
        new Map(
          generator("--try", Path.join(root, file)).trim().split("\n").map((line) => {
            const { frame, name, payload } = JSON.parse(line) as {
              readonly name: string
              readonly frame: string | null
              readonly payload: string | null
            }
            return [name, { frame, payload }] as const
          })
        )
      const refused = tried("packages/testing/test/session/fixtures/codegen/unsupported.ts")
      const reasons: ReadonlyArray<readonly [string, RegExp]> = [
        ["Tuple", /Tuple\.pair: a tuple/],
        [
          "UnknownFilter",
          /UnknownFilter\.name: a filter the generator does not know \(effect\/schema\/isMinLength\)/
        ],
        [
          "AnonymousFilter",
          /AnonymousFilter\.name: a filter the generator does not know \(it has no representation id\)/
        ],
        ["Transformation", /Transformation\.n: a transformation/],
        ["Declaration", /Declaration\.at: Declaration is not supported/],
        ["OneOf", /OneOf: a oneOf union/],
        ["Suspended", /Suspended\.next: Suspend is not supported/],
        ["SymbolKey", /SymbolKey: a symbol key/],
        ["SymbolIndex", /SymbolIndex: an index signature whose key is not a plain string/],
        ["UnionWithChecks", /UnionWithChecks: a union with checks/]
      ]
      for (const [name, reason] of reasons) assert.match(refused.get(name)?.frame ?? "", reason, name)
      assert.deepStrictEqual(refused.get("ClosedPayload")?.frame, null)
      assert.match(refused.get("ClosedPayload")?.payload ?? "", /ClosedPayload has no `Record\(String, …\)` rest/)
      assert.match(
        refused.get("ClosedInsideOpenPayload")?.payload ?? "",
        /ClosedInsideOpenPayload\.inner has no `Record\(String, …\)` rest/
      )
      assert.strictEqual(refused.size, reasons.length + 2)
      // And the fixture schemas, which it does emit, as frames.
      for (const [name, { frame }] of tried("packages/testing/test/session/fixtures/codegen/schemas.ts")) {
        assert.strictEqual(frame, null, name)
      }
    },
    120_000
  )

  it("answers like Schema.is on values derived from each schema (Effect's Arbitrary) and on their mutations", () => {
    // Shapes no recording has (a thinking block, an elicitation, a hook matcher, …), valid to start with.
    const derived = schemas.flatMap(({ generated, name }) =>
      generated === undefined ? [] : Effect.runSync(
        Arbitrary.sampleEffect(
          Arbitrary.schema((ClaudeProtocol as unknown as { readonly [name: string]: Schema.Top })[name]),
          { count: 8, seed: name }
        )
      )
    )
    assert.isAbove(derived.length, 400)
    for (const value of derived) {
      for (const entry of schemas) {
        if (!agree(entry, value)) {
          assert.fail(`${entry.name} disagrees on ${String(JSON.stringify(value)).slice(0, 300)}`)
        }
      }
    }
    forEachMutated(derived, 1500, (value) => {
      for (const entry of schemas) {
        if (entry.generated !== undefined && !agree(entry, value)) {
          assert.fail(`${entry.name} disagrees on ${String(JSON.stringify(value)).slice(0, 300)}`)
        }
      }
    })
  })

  it("checks JSON values as Schema.Json does, on values that are not JSON", () => {
    const is = Schema.is(ClaudeProtocol.HostControlCancelRequest)
    const check = (extra: unknown) => {
      const frame = { type: "control_cancel_request", request_id: "r", extra }
      if (Generated.isHostControlCancelRequest(frame) !== is(frame)) assert.fail(`disagrees on ${String(extra)}`)
    }
    const cyclic: { a: Array<unknown> } = { a: [] }
    cyclic.a.push(cyclic)
    const shared = { x: 1 }
    const values: ReadonlyArray<unknown> = [
      cyclic,
      { a: shared, b: shared },
      [shared, [shared]],
      Object.create(null),
      Object.create(Object.create(null)),
      Vm.runInNewContext("({ a: [1, { b: null }] })"),
      new Date(0),
      new Map(),
      new Uint8Array(2),
      new TextBlockLike(),
      // eslint-disable-next-line no-sparse-arrays
      [1, , 2],
      [undefined],
      { a: undefined },
      -0,
      Number.NaN,
      Number.NEGATIVE_INFINITY,
      1n,
      undefined,
      Symbol.for("s"),
      () => 1,
      { toJSON: () => 1 },
      { nested: { deeper: [1, "a", true, null, { x: 1.5 }] } }
    ]
    for (const value of values) check(value)
    fc.assert(
      fc.property(
        anything(3),
        check
      ),
      { numRuns: 1000 }
    )
  })

  describe("of the fixture schemas (the shapes the codec does not use yet)", () => {
    const fixtures = Object.entries(FixtureSchemas).flatMap(([name, value]) =>
      Schema.isSchema(value) ? [{ name, is: Schema.is(value), generated: generatedOf(FixtureGuards, name) }] : []
    )

    const check = (value: unknown) => {
      for (const { generated, is, name } of fixtures) {
        if (generated?.(value) !== is(value)) assert.fail(`${name} disagrees on ${String(JSON.stringify(value))}`)
      }
    }

    it("has a guard for every fixture schema", () => {
      assert.deepStrictEqual(fixtures.filter((entry) => entry.generated === undefined).map((entry) => entry.name), [])
    })

    it("answers like Schema.is on the edge values", () => {
      const values: ReadonlyArray<unknown> = [
        null,
        undefined,
        0,
        "",
        [],
        {},
        { result: undefined },
        { result: 1 },
        { result: "r" },
        { inner: {} },
        { inner: { result: undefined } },
        Object.assign(Object.create({ result: 1 }), {}),
        Object.assign(Object.create(null), { result: 1 }),
        JSON.parse(`{"__proto__": "x"}`),
        JSON.parse(`{"__proto__": 1}`),
        Object.create({ ["__proto__"]: 1 }),
        { "a-b": "x", default: 1, u: null, keys: true },
        { "a-b": "x", default: 1, u: "u", keys: false, value: null, "": 1 },
        { "a-b": "x", default: Number.NaN, u: "u", keys: false },
        { "a-b": "x", default: 1, u: "u", keys: false, "": 2 },
        { "a-b": "x", default: 1, keys: false },
        { "a-b": "x", default: 1, u: "u", keys: false, Number: 1, isRecord: null },
        { "a-b": "x", default: 1, u: "u", keys: false, Number: "1", isRecord: 1 },
        { "a-b": "x", default: 1, u: "u", keys: false, Number: null, isRecord: Number.NaN },
        { int: 1, finiteInt: 2, number: Number.NaN, nullOrInt: null },
        { int: -0, finiteInt: 2 ** 53, number: 1, nullOrInt: 1.5 },
        { int: 2 ** 53 - 1, finiteInt: -(2 ** 53 - 1), number: Number.POSITIVE_INFINITY, nullOrInt: 3 },
        1,
        true,
        "1",
        "a\"b",
        1n,
        2n,
        -0,
        { empty: [], ints: [1, 2], nested: [["a"], []], anything: [undefined, 1] },
        // eslint-disable-next-line no-sparse-arrays
        { empty: [], ints: [1, , 2], nested: [], anything: [, ,] },
        { empty: [1], ints: [], nested: [], anything: [] },
        ["a", "b"],
        [1],
        { a: "x" },
        { kind: "a", a: "x" },
        { kind: "a", b: true },
        { kind: "a" },
        { kind: "b", b: 1 },
        { kind: "c", b: "1" },
        { kind: "z" },
        { kind: "z", other: 1 },
        { kind: 1 },
        { kind: "b" },
        { x: 1 },
        { a: 1, b: 2 }
      ]
      for (const value of values) check(value)
    })

    it("answers like Schema.is on arbitrary values of the fixture schemas' keys", () => {
      const keys = [
        "result",
        "inner",
        "a-b",
        "default",
        "u",
        "keys",
        "value",
        "",
        "int",
        "finiteInt",
        "number",
        "nullOrInt",
        "empty",
        "ints",
        "nested",
        "anything",
        "kind",
        "a",
        "b",
        "other",
        "Number",
        "isRecord"
      ]
      const leaf = fc.constantFrom<unknown>(
        null,
        undefined,
        true,
        0,
        -0,
        1,
        1.5,
        2 ** 53,
        Number.NaN,
        Number.POSITIVE_INFINITY,
        1n,
        "",
        "a",
        "b",
        "c",
        "z",
        "1",
        "a\"b",
        "x"
      )
      const { value } = fc.letrec<{ value: unknown }>((tie) => ({
        value: fc.oneof(
          { depthSize: "small" },
          leaf,
          fc.array(tie("value"), { maxLength: 3 }),
          fc.sparseArray(tie("value"), { maxLength: 3 }),
          fc.dictionary(fc.constantFrom(...keys), tie("value"), { maxKeys: 5 })
        )
      }))
      fc.assert(fc.property(value, check), { numRuns: 3000 })
    })
  })
})

describe("generated Codex guards (codex/internal/protocol/guards.generated.ts)", () => {
  /** The schemas with a generated guard: the params the Codex protocol machine decodes. */
  const codex = Object.keys(CodexGenerated).map((guard) => {
    const name = guard.slice("is".length)
    const schema = (CodexProtocol as unknown as { readonly [name: string]: unknown })[name]
    if (!Schema.isSchema(schema)) throw new Error(`${guard} names no schema of CodexProtocol`)
    return { name, schema, is: Schema.is(schema), generated: generatedOf(CodexGenerated, name)! }
  })

  /** Whether every generated guard gives Schema.is's answer on a value, or the name of one that does not. */
  const disagreeing = (value: unknown): string | undefined =>
    codex.find(({ generated, is }) => generated(value) !== is(value))?.name

  const check = (value: unknown) => {
    const name = disagreeing(value)
    if (name !== undefined) assert.fail(`${name} disagrees on ${String(JSON.stringify(value)).slice(0, 300)}`)
  }

  const recorded = codexPayloads.map(({ value }) => value)

  it("has a guard for each params schema the protocol machine decodes, and nothing else", () => {
    assert.deepStrictEqual(codex.map(({ name }) => name).sort(), [
      "AgentMessageDelta",
      "CommandApprovalParams",
      "ErrorNotification",
      "FileChangeApprovalParams",
      "ItemNotification",
      "ServerRequestResolved",
      "ThreadResult",
      "TokenUsageUpdated",
      "TurnNotification",
      "TurnStartResult"
    ])
  })

  it("answers like Schema.is on every recorded params and result, each guard accepting some", () => {
    assert.isAbove(recorded.length, 300)
    for (const value of recorded) check(value)
    for (const { is, name } of codex) assert.isTrue(recorded.some(is), `no recorded value is a ${name}`)
  })

  it("answers like Schema.is on mutated recorded params", () => {
    forEachMutated(recorded, 2000, check)
  })

  it("answers like Schema.is on values derived from each schema (Effect's Arbitrary) and on their mutations", () => {
    const derived = codex.flatMap(({ name, schema }) =>
      Effect.runSync(Arbitrary.sampleEffect(Arbitrary.schema(schema), { count: 20, seed: name }))
    )
    assert.isAbove(derived.length, 150)
    for (const value of derived) check(value)
    forEachMutated(derived, 1500, check)
  })

  it("answers like Schema.is on values that are not JSON, whole and in place of a field", () => {
    const accepted = codex.map(({ is }) => recorded.find(is)!)
    const values: ReadonlyArray<unknown> = [
      Object.create({ thread: { id: "t" } }),
      Object.assign(Object.create(null), { delta: "d" }),
      Object.assign(Object.create(null), { requestId: 1 }),
      new TextBlockLike(),
      new Date(0),
      new Map([["delta", "d"]]),
      new String("x"),
      Object(1),
      new Uint8Array(2),
      // eslint-disable-next-line no-sparse-arrays
      [1, , 2],
      [undefined],
      { a: undefined },
      -0,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      1n,
      undefined,
      Symbol.for("s"),
      () => 1
    ]
    const placed = (value: unknown): ReadonlyArray<unknown> => [
      value,
      ...accepted.flatMap((params) =>
        Object.keys(params as object).flatMap((key) => [
          { ...(params as object), [key]: value },
          { ...(params as object), extra: value }
        ])
      )
    ]
    for (const value of values) for (const candidate of placed(value)) check(candidate)
    fc.assert(
      fc.property(
        anything(2),
        (value) => {
          for (const candidate of placed(value)) check(candidate)
        }
      ),
      { numRuns: 300 }
    )
  })
})
