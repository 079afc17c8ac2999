/**
 * Small JSON helpers shared by the fakes: they read frames and request bodies that arrive as untyped text.
 *
 * @internal
 */
import * as Option from "effect/Option"

/**
 * A decoded JSON object, keys to untyped values.
 *
 * @internal
 */
export type JsonObject = { readonly [key: string]: unknown }

/**
 * Parses one JSON text; `None` when it is not JSON (a fake reports such a line rather than failing on it).
 *
 * @internal
 */
export const parseJson: (text: string) => Option.Option<unknown> = Option.liftThrowable((text: string): unknown =>
  JSON.parse(text)
)

/**
 * Whether a decoded value is a JSON object. Arrays are not: a frame or a body that is an array is malformed.
 *
 * @internal
 */
export const isRecord = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The text of a message's `content`: the string itself, or its `text` blocks joined with `"\n"` (other blocks,
 * and text blocks whose `text` is not a string, contribute nothing).
 *
 * @internal
 */
export const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.flatMap((block) =>
    isRecord(block) && block.type === "text" && typeof block.text === "string" ? [block.text] : []
  ).join("\n")
}

/**
 * A string value, else `fallback`.
 *
 * @internal
 */
export const stringOr = (u: unknown, fallback: string): string => typeof u === "string" ? u : fallback

/** Text that `JSON.stringify` writes as it is: no quote, backslash, control character or lone surrogate half. */
const plainJsonText = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/**
 * `text` as it appears between the quotes of a JSON string: what `JSON.stringify(text).slice(1, -1)` gives, without
 * encoding text that needs no escape (the simulators fill pre-encoded lines with it on their hot path).
 *
 * @internal
 */
export const stringBody = (text: string): string => plainJsonText.test(text) ? text : JSON.stringify(text).slice(1, -1)
