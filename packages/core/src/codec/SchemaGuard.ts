/**
 * Type guards built from a schema's AST as plain closures, for the wire frames a session checks on every line.
 *
 * Effect's own guard (`Schema.is`, compiled by the schema JIT) is exact but costs, per frame type, a code
 * generation the first time (a few hundred KiB of heap for the frames of one turn) and, per value, a generic
 * candidate search for every union (`NullOr(Finite)` included) and a generic check runner for every filter. The
 * frames use a small vocabulary (objects with optional keys and an `unknown` rest, literals, strings, finite
 * numbers, booleans, null, arrays, unions, filters), so this builds, once per schema, a guard with the same answer:
 *
 * - the same checks in the same order: a known type with a wrong field is refused just like `Schema.is` refuses it
 *   (tests compare the two on mutated frames);
 * - optional keys are tested with `in` and required ones read as `value[key]`, as Effect's guard does;
 * - filters run as Effect runs them for a guard, each until one reports an issue (the finite-number one inlined);
 * - an index signature (`Record(String, X)`, the "keep unknown keys" rest) checks every own enumerable key's value,
 *   declared keys included, as Effect's does; it is skipped when X accepts anything.
 *
 * {@link make} returns `undefined` for a schema using anything else (a transformation, a tuple, a `oneOf` union, a
 * non-string index key, a suspended schema …); callers then use `Schema.is`.
 *
 * @since 0.1.0
 */
import * as SchemaAST from "effect/SchemaAST"

/** @since 0.1.0 */
export type Guard = (input: unknown) => boolean

const parseOptions: SchemaAST.ParseOptions = {}

const isFiniteCheck = (check: SchemaAST.Check<unknown>): boolean =>
  check._tag === "Filter" && check.annotations?.representation?.id === "effect/schema/isFinite"

const withChecks = (ast: SchemaAST.AST, base: Guard | undefined): Guard | undefined => {
  const checks = ast.checks
  if (base === undefined || checks === undefined) return base
  if (ast._tag === "Number" && checks.length === 1 && isFiniteCheck(checks[0])) {
    return (u) => typeof u === "number" && Number.isFinite(u)
  }
  return (u) => base(u) && passes(checks, u, ast)
}

// What Effect's check runner decides for a guard: the value passes when no filter reports an issue.
const passes = (checks: ReadonlyArray<SchemaAST.Check<unknown>>, u: unknown, ast: SchemaAST.AST): boolean => {
  for (const check of checks) {
    if (check._tag === "FilterGroup" ? !passes(check.checks, u, ast) : check.run(u, ast, parseOptions) !== undefined) {
      return false
    }
  }
  return true
}

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const acceptsAnything = (ast: SchemaAST.AST): boolean =>
  (ast._tag === "Unknown" || ast._tag === "Any") && ast.checks === undefined && ast.encoding === undefined

/**
 * How a declared key is checked: an optional key may be absent; a required key is read, and its guard refuses the
 * `undefined` an absent key reads as, unless that guard accepts `undefined` (`Unknown`, `UndefinedOr(X)`): then the
 * key must be present, as Effect requires.
 */
type Presence = "optional" | "required" | "must-be-present"

const acceptsUndefined = (guard: Guard): boolean => {
  try {
    return guard(undefined)
  } catch {
    return true
  }
}

const objects = (ast: SchemaAST.Objects): Guard | undefined => {
  // A `Record(String, X)` rest: every own enumerable key's value is an X (the declared keys' too), unless any value
  // will do.
  const rest: Array<Guard> = []
  for (const index of ast.indexSignatures) {
    if (index.parameter._tag !== "String" || index.parameter.checks !== undefined) return undefined
    if (acceptsAnything(index.type)) continue
    const guard = build(index.type)
    if (guard === undefined) return undefined
    rest.push(guard)
  }
  const names: Array<string> = []
  const guards: Array<Guard> = []
  const presence: Array<Presence> = []
  for (const property of ast.propertySignatures) {
    const guard = build(property.type)
    if (typeof property.name !== "string" || guard === undefined) return undefined
    names.push(property.name)
    guards.push(guard)
    presence.push(
      SchemaAST.isOptional(property.type) ? "optional" : acceptsUndefined(guard) ? "must-be-present" : "required"
    )
  }
  const count = names.length
  return (u) => {
    if (!isRecord(u)) return false
    for (let i = 0; i < count; i++) {
      const name = names[i]
      const p = presence[i]
      if (p !== "required" && !(name in u)) {
        if (p === "optional") continue
        return false
      }
      if (!guards[i](u[name])) return false
    }
    if (rest.length > 0) {
      const keys = Object.keys(u)
      for (let r = 0; r < rest.length; r++) {
        for (let k = 0; k < keys.length; k++) if (!rest[r](u[keys[k]])) return false
      }
    }
    return true
  }
}

const arrays = (ast: SchemaAST.Arrays): Guard | undefined => {
  if (ast.elements.length > 0 || ast.rest.length > 1) return undefined
  if (ast.rest.length === 0) return (u) => Array.isArray(u) && u.length === 0
  const item = build(ast.rest[0])
  if (item === undefined) return undefined
  return (u) => {
    if (!Array.isArray(u)) return false
    for (let i = 0; i < u.length; i++) if (!item(u[i])) return false
    return true
  }
}

const union = (ast: SchemaAST.Union): Guard | undefined => {
  if (ast.options?.mode === "oneOf") return undefined
  const members = ast.types
  if (members.every((member) => member._tag === "Literal" && member.checks === undefined)) {
    const values = new Set(members.map((member) => (member as SchemaAST.Literal).literal))
    return (u) => values.has(u as SchemaAST.LiteralValue)
  }
  const guards: Array<Guard> = []
  for (const member of members) {
    const guard = build(member)
    if (guard === undefined) return undefined
    guards.push(guard)
  }
  return (u) => {
    for (let i = 0; i < guards.length; i++) if (guards[i](u)) return true
    return false
  }
}

// The leaf guards are shared by every guard (a frame schema has hundreds of leaves), and so are those of the
// literals, by value.
const isNull: Guard = (u) => u === null
const isUndefined: Guard = (u) => u === undefined
const isAnything: Guard = () => true
const isString: Guard = (u) => typeof u === "string"
const isNumber: Guard = (u) => typeof u === "number"
const isBoolean: Guard = (u) => typeof u === "boolean"
const literals = new Map<SchemaAST.LiteralValue, Guard>()
const isLiteral = (literal: SchemaAST.LiteralValue): Guard => {
  let guard = literals.get(literal)
  if (guard === undefined) {
    guard = (u) => u === literal
    literals.set(literal, guard)
  }
  return guard
}

const build = (ast: SchemaAST.AST): Guard | undefined => {
  if (ast.encoding !== undefined) return undefined
  switch (ast._tag) {
    case "Null":
      return withChecks(ast, isNull)
    case "Undefined":
      return withChecks(ast, isUndefined)
    case "Unknown":
    case "Any":
      return withChecks(ast, isAnything)
    case "String":
      return withChecks(ast, isString)
    case "Number":
      return withChecks(ast, isNumber)
    case "Boolean":
      return withChecks(ast, isBoolean)
    case "Literal":
      return withChecks(ast, isLiteral(ast.literal))
    case "Objects":
      return withChecks(ast, objects(ast))
    case "Arrays":
      return withChecks(ast, arrays(ast))
    case "Union":
      return withChecks(ast, union(ast))
    default:
      return undefined
  }
}

/**
 * The guard of a schema's type side, or `undefined` when it uses something this module does not handle.
 *
 * @since 0.1.0
 */
export const make = (ast: SchemaAST.AST): Guard | undefined => build(SchemaAST.toType(ast))

// Whether decoding a value this schema accepts gives back an equal value: every object keeps the keys it does not
// declare (a string index signature; without one, decoding drops them).
const keepsInput = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Objects":
      return ast.indexSignatures.some((index) => index.parameter._tag === "String") &&
        ast.propertySignatures.every((property) => keepsInput(property.type)) &&
        ast.indexSignatures.every((index) => keepsInput(index.type))
    case "Arrays":
      return ast.rest.every(keepsInput)
    case "Union":
      return ast.types.every(keepsInput)
    default:
      return true
  }
}

/**
 * A guard that can stand in for decoding: where it accepts a value, decoding the value succeeds and gives back an
 * equal one (the schema has no transformation, on the encoded side either, and keeps unknown keys everywhere), so
 * the value itself is the decoded one. `undefined` for any other schema, or one this module does not handle.
 *
 * @since 0.1.0
 */
export const makeForDecoding = (ast: SchemaAST.AST): Guard | undefined => keepsInput(ast) ? build(ast) : undefined
