/**
 * What the three parts of the Claude codec share: the schema building blocks (open objects that keep unknown keys,
 * JSON-only objects for what the host writes, catch-all union members that refuse the known discriminants), the
 * per-frame checks (a guard first, Effect's decoder only to explain a failure) and the `ProtocolError`s of a line.
 *
 * @internal
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaJITCompiler from "effect/schema/SchemaJITCompiler"
import { detached } from "../../../internal/detached.ts"
import * as SchemaGuard from "../../../internal/schemaGuard.ts"
import { ProtocolError } from "../../../TetherError.ts"

// ---------------------------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------------------------

export const UnknownRest = [Schema.Record(Schema.String, Schema.Unknown)] as const

/** An object schema that keeps the keys it does not declare (CLI → host: values come from `JSON.parse`). */
export const open = <const Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.StructWithRest(Schema.Struct(fields), UnknownRest)

/**
 * The identities of the filters defined here (`representation.id`, the payload holding their parameters), by which
 * the guard generator (`scripts/codegen/guards.ts`) emits their code: a filter is a closure, which it cannot read.
 */
export const filterIds = {
  jsonValue: "@tether/core/claude/JsonValue",
  otherThan: "@tether/core/claude/otherThan",
  withoutKeys: "@tether/core/claude/withoutKeys"
} as const

const isJsonValue = Schema.is(Schema.Json)

/**
 * Any JSON value, typed as `unknown`: host → CLI payloads are checked to be plain JSON (no `undefined`, no
 * `NaN`, no class instances, no cycles), so what is written is what the host meant.
 */
export const JsonValue = Schema.Unknown.check(
  Schema.makeFilter((u: unknown) => isJsonValue(u) || "expected a JSON value (finite numbers, plain objects)", {
    representation: { id: filterIds.jsonValue, payload: null }
  })
)

export const JsonRecord = Schema.Record(Schema.String, JsonValue)

const JsonRest = [JsonRecord] as const

/** An object schema for host → CLI frames: extra keys are kept and must hold JSON values. */
export const openJson = <const Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.StructWithRest(Schema.Struct(fields), JsonRest)

declare const UnrecognizedTypeId: unique symbol

/**
 * The discriminant (`type` or `subtype`) of a catch-all union member, such as {@link OtherContentBlock} or
 * {@link OtherControlRequest}: at runtime a plain string that is never one of the union's known values.
 *
 * It is typed as a branded `String` so that comparing the discriminant with a known value narrows the union to
 * the known member (`switch (block.type) { case "text": block.text }`), which a plain `string` would prevent.
 * String methods and template literals work on it; use `String(value)` where a `string` is needed.
 *
 * @category models
 * @since 0.1.0
 */
export interface Unrecognized extends String {
  readonly [UnrecognizedTypeId]: typeof UnrecognizedTypeId
}

/**
 * A string discriminant for the catch-all member of a union: it refuses the known values, so a malformed known
 * member is a decode failure instead of silently matching the catch-all.
 */
export const otherThan = (known: ReadonlyArray<string>): Schema.Codec<Unrecognized, string> =>
  Schema.String.check(
    Schema.makeFilter(
      (s: string) =>
        known.includes(s) ? `expected a value other than ${known.map((k) => JSON.stringify(k)).join(", ")}` : undefined,
      { representation: { id: filterIds.otherThan, payload: known } }
    )
  ) as unknown as Schema.Codec<Unrecognized, string>

/**
 * A union of literal-discriminated members plus a catch-all. The known members are a union of their own so that
 * Effect's union parser picks the candidate with one map lookup on the discriminant; a catch-all with a `string`
 * discriminant in the same union makes it fall back to a slower per-value candidate search (measured: the guard of
 * a `text_delta` line went from ~1.1 µs to ~0.4 µs).
 */
export const withCatchAll = <const Known extends ReadonlyArray<Schema.Top>, Other extends Schema.Top>(
  known: Known,
  other: Other
) => Schema.Union([Schema.Union(known), other])

/** The same check for host input, where the value is written by the host and typed as a plain `string`. */
export const inputOtherThan = (known: ReadonlyArray<string>): Schema.Codec<string, string> =>
  otherThan(known) as unknown as Schema.Codec<string, string>

export const StringArray = Schema.Array(Schema.String)

/** A check of an object that it has none of `keys` (own or inherited), failing with `message`. */
export const withoutKeys = (keys: ReadonlyArray<string>, message: string) =>
  Schema.makeFilter((o: object) => keys.some((key) => key in o) ? message : undefined, {
    representation: { id: filterIds.withoutKeys, payload: keys }
  })

// ---------------------------------------------------------------------------------------------------------------
// Checks and line errors
// ---------------------------------------------------------------------------------------------------------------

const linePrefixLength = 200
const detailLength = 2000

// A copy: the line may be a slice of a whole pipe read, which the error (kept in the event ring) must not keep alive.
export const prefixOf = (line: string): string =>
  detached(line.length > linePrefixLength ? line.slice(0, linePrefixLength) : line)

export const truncate = (text: string): string => text.length > detailLength ? `${text.slice(0, detailLength)}…` : text

export const malformed = (line: string, detail: string): Result.Result<never, ProtocolError> =>
  Result.fail(new ProtocolError({ reason: "malformed", detail: truncate(detail), linePrefix: prefixOf(line) }))

/**
 * Validates one frame type. The fast path is a type guard (built from the schema as closures, else Effect's, compiled
 * by its schema JIT where `new Function` is allowed): it allocates nothing and the frame is the parsed object
 * itself, so every unknown field is kept by construction. Only a failing frame pays for the detailed decoder, to say
 * what is wrong.
 */
export type FrameCheck = (input: object) => string | undefined

export const checkFor = (schema: Schema.Codec<unknown, unknown>): FrameCheck => {
  SchemaJITCompiler.enable(schema.ast)
  const is = Schema.is(schema)
  const decode = Schema.decodeUnknownResult(schema)
  // Built at the first frame of its type: a guard of closures with Effect's answer (see internal/schemaGuard.ts),
  // or Effect's own where the schema uses more than those handle (the host frames, with their JSON-checked rest).
  let guard: SchemaGuard.Guard | undefined
  return (input) => {
    guard ??= SchemaGuard.make(schema.ast) ?? is
    if (guard(input)) return undefined
    const result = decode(input)
    return Result.isFailure(result) ? result.failure.message : undefined
  }
}

export const notJson = (line: string, error: unknown): ProtocolError =>
  new ProtocolError({
    reason: "not-json",
    detail: truncate(error instanceof Error ? error.message : String(error)),
    linePrefix: prefixOf(line)
  })

export const parseJson = (line: string): Result.Result<unknown, ProtocolError> => {
  try {
    return Result.succeed(JSON.parse(line))
  } catch (error) {
    return Result.fail(notJson(line, error))
  }
}

export const tooLong = (line: string, limit: number): Result.Result<never, ProtocolError> =>
  Result.fail(
    new ProtocolError({
      reason: "too-long",
      detail: `the line has ${line.length} characters, more than the limit of ${limit}`,
      linePrefix: prefixOf(line)
    })
  )
