/**
 * The base of Tether's error classes: `Data.TaggedError` as Effect builds it, with its arguments kept as the tag
 * followed by the fields, the shape `Schema.TaggedError` gave the same classes before they left `effect/Schema`.
 *
 * `Data.TaggedError` keeps the arguments it was given as they are and sets `_tag` after them, so an error's JSON
 * (`toJSON`: the arguments, then the instance's own keys) and its key order would put `_tag` last, and `Equal` (which
 * compares the kept arguments too) would tell `new RegistryClosed()` from `new RegistryClosed({})`, or an error from
 * the same error rebuilt with `{ ...error }`. Here the kept arguments are always `{ _tag, ...fields }`: the JSON of
 * an error, its keys and its equality are what they were.
 *
 * @internal
 */
import type * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import type * as Types from "effect/Types"

/** @internal */
export const TaggedError = <Tag extends string>(
  tag: Tag
): new<A extends Record<string, any> = {}>(
  args: Types.VoidIfEmpty<{ readonly [P in keyof A as P extends "_tag" ? never : P]: A[P] }>
) => Cause.YieldableError & { readonly _tag: Tag } & Readonly<A> => {
  const Base = Data.Error as unknown as new(args: object) => object
  class Tagged extends Base {
    constructor(args?: object) {
      // The tag first, and always this class's: a spread error of another class cannot retag it.
      const fields: Record<string, unknown> = { _tag: tag, ...args }
      fields._tag = tag
      super(fields)
    }
  }
  ;(Tagged.prototype as { name?: string }).name = tag
  return Tagged as any
}
