import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import * as Path from "node:path"
import { importsOf, isForbidden, src, walk } from "../../core/test/support/ImportWalk.ts"
import { mutateAt, pathsOf } from "../../core/test/support/Mutation.ts"
import * as ClaudeProtocol from "../src/ClaudeProtocol.ts"
import * as Generated from "../src/internal/protocol/guards.generated.ts"
import * as Runtime from "../src/internal/protocol/runtime.ts"
import { transcriptEntries } from "./support/Fixtures.ts"

// The codec a session runs (internal/protocol/runtime.ts): generated guards, no `effect/Schema` on its path, and
// Effect's decoder's words for what it refuses.

describe("ClaudeCodecRuntime", () => {
  describe("what it loads", () => {
    it("loads no effect/Schema, SchemaAST, SchemaParser, schema/* or Config from the runtime codec or the machine", () => {
      const entries = [
        "internal/protocol/runtime.ts",
        "internal/machine.ts",
        "ClaudePermission.ts"
      ].map((file) => Path.join(src("claude"), file))
      const { loaded, pathTo } = walk(entries)
      assert.isAbove(loaded.length, 20)
      assert.include(loaded, Path.join(src("claude"), "internal/protocol/guards.generated.ts"))
      assert.deepStrictEqual(loaded.filter(isForbidden).map(pathTo), [])
      // The failure path's module is required on demand, never imported.
      assert.notInclude(loaded, Path.join(src("claude"), "internal/protocol/explain.ts"))
    })

    it("is checked by a walk that sees Schema where it is loaded", () => {
      const { loaded, pathTo } = walk([Path.join(src("claude"), "ClaudeProtocol.ts")])
      assert.isTrue(loaded.some(isForbidden))
      assert.match(pathTo(loaded.find(isForbidden)!), /ClaudeProtocol\.ts → .*protocol\/\w+\.ts → .*effect\/dist/)
      // `import type` loads nothing; `import { type X }` loads its module, as Node and `verbatimModuleSyntax` do.
      assert.notInclude(
        importsOf(Path.join(src("claude"), "ClaudePermission.ts")),
        Path.join(src("claude"), "internal/protocol/controls.ts")
      )
    })
  })

  describe("what it says of what it refuses", () => {
    const frames: ReadonlyArray<unknown> = transcriptEntries.flatMap(({ entry }) =>
      entry.dir === "<" && entry.msg !== undefined ? [entry.msg] : []
    )
    const hostFrames: ReadonlyArray<unknown> = transcriptEntries.flatMap(({ entry }) =>
      entry.dir === ">" && entry.msg !== undefined ? [entry.msg] : []
    )

    const truncated = (text: string) => text.length > 2000 ? `${text.slice(0, 2000)}…` : text

    const schemaNamed = (name: string) => (ClaudeProtocol as unknown as { readonly [name: string]: Schema.Top })[name]

    /** What Effect's decoder says of a value, for the schema of that name. */
    const decoded = (name: string, value: unknown) =>
      Schema.decodeUnknownResult(schemaNamed(name) as Schema.Codec<unknown, unknown>)(value)

    /**
     * The check decodeLine runs on a frame and the name it gives the frame in a detail, or undefined where it refuses
     * the frame before any check (a control request without a string `request.subtype`).
     */
    const checkOf = (frame: { readonly [key: string]: any }): readonly [Generated.Check, string] | undefined => {
      if (frame.type === "system") {
        const check = Generated.systemFrames.get(frame.subtype)
        return check && [check, `system/${frame.subtype}`]
      }
      if (frame.type === "control_request") {
        const request: unknown = frame.request
        const subtype = typeof request === "object" && request !== null ? (request as any).subtype : undefined
        if (typeof subtype !== "string") return undefined
        return [Generated.controlRequests.get(subtype) ?? Generated.otherControlRequest, `control_request/${subtype}`]
      }
      const check = Generated.frames.get(frame.type)
      return check && [check, frame.type]
    }

    /** The recorded CLI frames, one field at a time replaced by a value of the wrong kind. */
    const mutated = fc.tuple(
      fc.constantFrom(...frames),
      fc.nat(),
      fc.constantFrom<unknown>(null, 1, -1.5, "x", true, [], {}, ["x"], [{}], { type: "text" }),
      fc.boolean()
    ).map(([frame, pick, value, remove]) => {
      const copy = structuredClone(frame) as { [key: string]: any }
      // The discriminants stay: the frame is still dispatched to the same schema.
      const candidates = pathsOf(copy).filter((path) =>
        !(path.length === 1 && (path[0] === "type" || path[0] === "subtype"))
      )
      if (candidates.length > 0) mutateAt(copy, candidates[pick % candidates.length]!, value, remove)
      return copy
    })

    it("refuses a CLI line as Schema.is does, with Effect's decoder's message", () => {
      let refused = 0
      fc.assert(
        fc.property(mutated, (frame) => {
          const line = JSON.stringify(frame)
          const result = Runtime.decodeLine(line)
          const dispatch = checkOf(frame)
          if (dispatch === undefined) return
          const [check, what] = dispatch
          const expected = decoded(check.schema, frame)
          assert.strictEqual(Result.isSuccess(result), Schema.is(schemaNamed(check.schema))(frame), line)
          assert.strictEqual(Result.isSuccess(result), Result.isSuccess(expected), line)
          if (Result.isFailure(result) && Result.isFailure(expected)) {
            refused++
            assert.strictEqual(result.failure.reason, "malformed")
            assert.strictEqual(result.failure.detail, truncated(`${what}: ${expected.failure.message}`))
          }
        }),
        { numRuns: 400 }
      )
      assert.isAbove(refused, 100)
    })

    it("refuses to write a host frame Schema.is refuses, with Effect's decoder's message", () => {
      const hostMutated = fc.tuple(
        fc.constantFrom(...hostFrames),
        fc.constantFrom<unknown>(1n, Number.NaN, undefined, null, 1, "x", [], new Date(0)),
        fc.constantFrom("extra", "uuid", "session_id", "parent_tool_use_id", "request_id")
      ).map(([frame, value, key]) => ({ ...(frame as object), [key]: value }))
      let refused = 0
      fc.assert(
        fc.property(hostMutated, (frame) => {
          const expected = decoded("HostFrame", frame)
          try {
            assert.strictEqual(Runtime.encodeHostFrame(frame as ClaudeProtocol.HostFrame), JSON.stringify(frame))
            assert.isTrue(Result.isSuccess(expected))
          } catch (error) {
            if (Result.isSuccess(expected)) throw error
            refused++
            assert.strictEqual(
              (error as Error).message,
              `ClaudeProtocol.encodeHostFrame: refusing to write an invalid frame: ${expected.failure.message}`
            )
          }
        }),
        { numRuns: 200 }
      )
      assert.isAbove(refused, 50)
    })

    it("decodes every control payload as Effect's decoder does, and says what it says of a bad one", () => {
      const decoders = Object.entries(Runtime).flatMap(([name, value]) =>
        /^decode\w+Response$/.test(name)
          ? [[name.slice("decode".length), value as (payload: unknown) => Result.Result<unknown, any>] as const]
          : []
      )
      assert.strictEqual(decoders.length, 16)
      const payloads: ReadonlyArray<unknown> = frames.flatMap((frame) => {
        const response = (frame as { readonly response?: { readonly response?: unknown } }).response
        return typeof response === "object" && response !== null && "response" in response ? [response.response] : []
      })
      const values = fc.oneof(
        fc.constantFrom(...payloads),
        fc.constantFrom<unknown>(undefined, null, 1, "x", [], {}),
        fc.dictionary(
          fc.constantFrom("mode", "model", "commands", "mcpServers", "contents", "canRewind", "errors", "pid", "x"),
          fc.constantFrom<unknown>(null, 1, "x", true, [], {}, ["x"], [{ name: "n" }], [{ uri: "u" }], { a: "b" })
        )
      )
      fc.assert(
        fc.property(fc.constantFrom(...decoders), values, ([schema, decode], payload) => {
          const actual = decode(payload)
          const expected = decoded(schema, payload === undefined ? {} : payload)
          assert.strictEqual(actual._tag, expected._tag, `${schema} ${JSON.stringify(payload)}`)
          if (Result.isSuccess(actual) && Result.isSuccess(expected)) {
            assert.deepStrictEqual(actual.success, expected.success)
          } else if (Result.isFailure(actual) && Result.isFailure(expected)) {
            assert.strictEqual(actual.failure.detail, truncated(expected.failure.message))
            assert.strictEqual(actual.failure.linePrefix, (JSON.stringify(payload) ?? "").slice(0, 200))
          }
        }),
        { numRuns: 1000 }
      )
    })

    it("reads a permission update as Schema.is does", () => {
      const is = Schema.is(ClaudeProtocol.PermissionUpdate)
      const suggestions = frames.flatMap((frame) =>
        (frame as { readonly request?: { readonly permission_suggestions?: ReadonlyArray<unknown> } }).request
          ?.permission_suggestions ?? []
      )
      assert.isAbove(suggestions.length, 0)
      for (const suggestion of suggestions) assert.strictEqual(Runtime.isPermissionUpdate(suggestion), is(suggestion))
    })
  })
})
