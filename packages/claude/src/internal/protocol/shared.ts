/**
 * What the three schema modules of the Claude codec share: the schema building blocks (open objects that keep
 * unknown keys, JSON-only objects for what the host writes, catch-all union members that refuse the known
 * discriminants) and the identities of their filters, by which the guard generator emits their code.
 *
 * @internal
 */
import * as Schema from "effect/Schema"

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
  jsonValue: "@tether/claude/JsonValue",
  otherThan: "@tether/claude/otherThan",
  withoutKeys: "@tether/claude/withoutKeys"
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
