/**
 * Values of every kind fast-check makes, JSON or not, for the tests that hold a JSON check or a guard to
 * `Schema.is` on values that are not JSON.
 */
import * as fc from "fast-check"

/** Anything, to `maxDepth`: bigints, boxed values, dates, maps, sets, null-prototype objects, sparse and typed arrays. */
export const anything = (maxDepth: number): fc.Arbitrary<unknown> =>
  fc.anything({
    maxDepth,
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withNullPrototype: true,
    withObjectString: true,
    withSet: true,
    withSparseArray: true,
    withTypedArray: true,
    withUnicodeString: true
  })
