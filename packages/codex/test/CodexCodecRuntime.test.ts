import { assert, describe, it } from "@effect/vitest"
import type { ProtocolError } from "@tether/core/TetherError"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import * as Path from "node:path"
import { isForbidden, src, walk } from "../../core/test/support/ImportWalk.ts"
import { mutateAt, pathsOf } from "../../core/test/support/Mutation.ts"
import { itemsOf } from "../../core/test/support/ProviderItems.ts"
import * as CodexProtocol from "../src/CodexProtocol.ts"
import * as CodexMachine from "../src/internal/machine.ts"
import * as Generated from "../src/internal/protocol/guards.generated.ts"
import * as Runtime from "../src/internal/protocol/runtime.ts"
import { codexPayloads } from "./support/CodexFixtures.ts"

// The params decoders a Codex session runs (codex/internal/protocol/runtime.ts): generated guards, no `effect/Schema`
// on the session's path, and `CodexProtocol.decodeParams`'s answers, Effect's decoder's words included.

/** Each decoder of the runtime, with `CodexProtocol.decodeParams` of the schema it is named after. */
const decoders = Object.entries(Runtime).flatMap(([name, value]) => {
  if (!name.startsWith("decode")) return []
  const schemaName = name.slice("decode".length)
  const schema = (CodexProtocol as unknown as { readonly [name: string]: unknown })[schemaName]
  if (!Schema.isSchema(schema)) throw new Error(`${name} names no schema of CodexProtocol`)
  return [{
    schemaName,
    schema,
    actual: value as Runtime.Decoder<unknown>,
    expected: CodexProtocol.decodeParams(schema as Schema.Codec<unknown, unknown>)
  }]
})

type Answer = Result.Result<unknown, ProtocolError>

/** Whether two answers are the same: equal values, or failures with equal fields. */
const assertSameAnswer = (actual: Answer, expected: Answer, what: string) => {
  assert.strictEqual(actual._tag, expected._tag, what)
  if (Result.isSuccess(actual) && Result.isSuccess(expected)) {
    assert.deepStrictEqual(actual.success, expected.success, what)
  } else if (Result.isFailure(actual) && Result.isFailure(expected)) {
    const fields = (error: ProtocolError) => ({
      _tag: error._tag,
      reason: error.reason,
      detail: error.detail,
      linePrefix: error.linePrefix,
      message: error.message
    })
    assert.deepStrictEqual(fields(actual.failure), fields(expected.failure), what)
  }
}

/** The recorded params with one field (at any depth) removed or replaced by a value of another kind. */
const mutated = fc.tuple(
  fc.constantFrom(...codexPayloads),
  fc.nat(),
  fc.constantFrom<unknown>(null, 1, -1.5, "x", true, [], {}, ["x"], [{}], { id: 1 }),
  fc.boolean()
).map(([payload, pick, value, remove]) => {
  const copy = structuredClone(payload.value)
  const paths = pathsOf(copy)
  if (paths.length > 0) mutateAt(copy, paths[pick % paths.length]!, value, remove)
  return { method: payload.method, value: copy }
})

describe("CodexCodecRuntime", () => {
  describe("what it loads", () => {
    it("loads no effect/Schema, SchemaAST, SchemaParser, schema/* or Config from CodexSession", () => {
      const { loaded, pathTo } = walk([Path.join(src("codex"), "CodexSession.ts")])
      assert.isAbove(loaded.length, 20)
      for (const file of ["machine.ts", "protocol/runtime.ts", "protocol/wire.ts", "protocol/guards.generated.ts"]) {
        assert.include(loaded, Path.join(src("codex"), "internal", file))
      }
      assert.deepStrictEqual(loaded.filter(isForbidden).map(pathTo), [])
      // The schemas are loaded only by the failure path's module, which is required on demand, never imported.
      assert.notInclude(loaded, Path.join(src("codex"), "CodexProtocol.ts"))
      assert.notInclude(loaded, Path.join(src("codex"), "internal/protocol/explain.ts"))
    })

    it("is checked by a walk that sees Schema where it is loaded", () => {
      for (const module of ["CodexProtocol.ts", "internal/protocol/explain.ts"]) {
        const { loaded, pathTo } = walk([Path.join(src("codex"), module)])
        assert.match(pathTo(loaded.find(isForbidden) ?? ""), /\.ts → .*effect\/dist\/Schema/, module)
      }
    })
  })

  describe("what it answers", () => {
    it("has a decoder for each generated guard, named after the same schema", () => {
      assert.deepStrictEqual(
        decoders.map(({ schemaName }) => schemaName).sort(),
        Object.keys(Generated).map((guard) => guard.slice("is".length)).sort()
      )
    })

    it("answers as CodexProtocol.decodeParams on every recorded params and result, with every decoder", () => {
      let accepted = 0
      let refused = 0
      for (const { method, transcript, value } of codexPayloads) {
        for (const { actual, expected, schemaName } of decoders) {
          const answer = actual(method, value)
          assertSameAnswer(answer, expected(method, value), `${transcript} ${method} as ${schemaName}`)
          if (Result.isSuccess(answer)) accepted++
          else refused++
        }
      }
      assert.isAbove(accepted, 300)
      assert.isAbove(refused, 1000)
    })

    it("refuses mutated params as CodexProtocol.decodeParams does, with Effect's decoder's message", () => {
      let refused = 0
      fc.assert(
        fc.property(mutated, fc.constantFrom(...decoders), ({ method, value }, { actual, expected, schemaName }) => {
          const answer = actual(method, value)
          assertSameAnswer(answer, expected(method, value), `${method} as ${schemaName}: ${JSON.stringify(value)}`)
          if (Result.isFailure(answer)) {
            refused++
            assert.strictEqual(answer.failure.reason, "malformed")
            assert.isTrue(answer.failure.detail.startsWith(`${method}: `))
          }
        }),
        { numRuns: 2000 }
      )
      assert.isAbove(refused, 500)
    })

    it("gives back the params themselves, deep-equal to the copy Effect's decoder makes", () => {
      // Effect's decoder builds a new object for an open struct (its declared keys first, then the others); the
      // runtime gives the params it accepts as they are, which is the same value.
      let checked = 0
      for (const { method, value } of codexPayloads) {
        for (const { actual, expected } of decoders) {
          const answer = actual(method, value)
          const decoded = expected(method, value)
          if (Result.isFailure(answer) || Result.isFailure(decoded)) continue
          checked++
          assert.strictEqual(answer.success, value)
          assert.notStrictEqual(decoded.success, value)
          assert.deepStrictEqual(answer.success, decoded.success)
        }
      }
      assert.isAbove(checked, 300)
    })

    it("hands the protocol machine the thread Effect's decoder gave it", () => {
      const results = codexPayloads.filter(({ dir, kind, method }) =>
        dir === "<" && kind === "result" && (method === "thread/start" || method === "thread/resume")
      )
      assert.isAbove(results.length, 0)
      for (const { method, value } of results) {
        const machine = CodexMachine.make({
          clientInfo: { name: "test", title: null, version: "0" },
          capabilities: null,
          thread: method === "thread/start"
            ? { _tag: "Start", params: {} }
            : { _tag: "Resume", threadId: "th-0", params: {} },
          turnParams: {}
        })
        machine.start()
        machine.receive(CodexProtocol.encodeResponse(0, { userAgent: "codex" }))
        const ready = itemsOf(machine.receive(CodexProtocol.encodeResponse(1, value))).find((item) =>
          item._tag === "Ready"
        )
        const decoded = Schema.decodeUnknownSync(CodexProtocol.ThreadResult)(value)
        assert.deepStrictEqual((ready as { readonly info: { readonly thread: unknown } }).info.thread, decoded)
      }
    })
  })
})
