/**
 * Whether a value is JSON, answered as `Schema.is(Schema.Json)` answers in effect 4 (`SchemaAST.isJson`) without
 * loading `effect/Schema`: the options a session checks must not cost a host that never uses Schema its modules.
 *
 * What `Schema.Json` accepts: `null`, strings, booleans and finite numbers (not `NaN`, `±Infinity`, `undefined`,
 * bigints, symbols or functions); arrays, every slot up to `length` included (a hole reads as `undefined`, which
 * is refused), other properties ignored; objects whose prototype is `null`, `Object.prototype`, or any object whose
 * own prototype is `null` (a plain object from another realm), read through their own enumerable string keys
 * (`Object.keys`; getters run, symbol keys are ignored). A value that contains itself is refused; one reached
 * twice through different paths (a DAG) is checked once. A getter or proxy trap that throws makes both throw (each
 * with its own error). Tests compare the two on arbitrary values.
 *
 * @since 0.1.0
 */

/** A container being walked: its keys (an array's length, snapshotted) and the next one to read. */
interface Frame {
  readonly value: object
  readonly keys: ReadonlyArray<string> | number
  index: number
}

const isLeaf = (u: unknown): boolean =>
  u === null || typeof u === "string" || typeof u === "boolean" || (typeof u === "number" && Number.isFinite(u))

const isPlainPrototype = (prototype: object | null): boolean =>
  prototype === null || prototype === Object.prototype || Object.getPrototypeOf(prototype) === null

/**
 * `Schema.is(Schema.Json)`. Walks with a stack of its own, not recursion, so that a deeply nested value gets the
 * same answer as Effect's rather than a stack overflow.
 *
 * @since 0.1.0
 */
export const isJson = (input: unknown): boolean => {
  // `false` marks a container on the current path (reaching it again is a cycle); `true`, one already accepted.
  const visited = new WeakMap<object, boolean>()
  const stack: Array<Frame> = []
  let u = input
  while (true) {
    if (typeof u !== "object" || u === null) {
      if (!isLeaf(u)) return false
    } else {
      const state = visited.get(u)
      if (state === false) return false
      if (state === undefined) {
        const isArray = Array.isArray(u)
        if (!isArray && !isPlainPrototype(Object.getPrototypeOf(u))) return false
        visited.set(u, false)
        stack.push({ value: u, keys: isArray ? (u as ReadonlyArray<unknown>).length : Object.keys(u), index: 0 })
      }
    }
    // On to the next slot of the innermost container that has one left; none left anywhere: all accepted.
    let hasNext = false
    while (!hasNext && stack.length > 0) {
      const frame = stack[stack.length - 1]
      const keys = frame.keys
      if (typeof keys === "number" ? frame.index < keys : frame.index < keys.length) {
        const key = typeof keys === "number" ? frame.index : keys[frame.index]
        frame.index++
        u = (frame.value as { readonly [key: string | number]: unknown })[key]
        hasNext = true
      } else {
        visited.set(frame.value, true)
        stack.pop()
      }
    }
    if (!hasNext) return true
  }
}
