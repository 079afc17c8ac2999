/**
 * Generates type guards from schemas: plain TypeScript functions that import nothing but core's JSON check
 * (`@tether/core/codec/Json`), so that a session checks what it reads without loading `effect/Schema`:
 *
 * - the frames of the Claude wire codec: `packages/claude/src/internal/protocol/guards.generated.ts`;
 * - the params the Codex protocol machine decodes: `packages/codex/src/internal/protocol/guards.generated.ts`;
 * - the messages the ACP protocol machine decodes: `packages/acp/src/internal/protocol/guards.generated.ts`, from the
 *   schemas scripts/codegen/acp.ts generates from the protocol's JSON Schema (`pnpm codegen` runs that first).
 *
 *   pnpm codegen                     writes the generated files
 *   pnpm codegen --check             exits 1 when a generated file is not what the generator makes now, and names
 *                                    each file it found current (a test runs it)
 *   pnpm codegen --try <module.ts>   tries each schema the module exports as a frame and as a payload, and prints a
 *                                    JSON line per schema with what the generator says (a test of its refusals)
 *
 * It walks the schemas' ASTs as `packages/core/src/codec/SchemaGuard.ts` does (the same shapes, the same checks,
 * the same answer as `Schema.is`) and emits code where that module builds closures. Effect's own rules are followed
 * where they are subtle: a required key whose type accepts `undefined` (`Unknown`, `Any`, `Undefined`, `Void`, or a
 * union with one) must be present, as Effect's decoder requires; an object with neither keys nor an index signature
 * accepts any value but `null` and `undefined`; an index signature checks every own enumerable key's value, the
 * declared keys' too; a hole of a sparse array is read as `undefined`.
 *
 * It fails, naming the node, on anything it cannot emit exactly: a transformation (the guards stand for frames that
 * are returned as parsed), a declaration, a tuple, a suspended schema, a `oneOf` union, a union with checks, a
 * non-string index key, a symbol key, and any filter whose identity (`representation.id`) it does not know.
 * The filters it knows are in {@link filters}: Effect's `isFinite` and `isInt`, and the codec's own (shared.ts).
 *
 * The control response payloads (Claude) and the params (Codex) are returned as the decoded value when their guard
 * accepts them, so their schemas must decode a value they accept to an equal one: open objects (a `Record(String, …)`
 * rest, which keeps unknown keys) all the way down, no transformation. The generator refuses a payload schema that is
 * not (a closed struct would drop unknown keys): make it open, or decode it with Effect
 * (`ClaudeProtocol.decodeControlPayload`, `CodexProtocol.decodeParams`).
 *
 * It also generates the guards of `packages/testing/test/session/fixtures/codegen/schemas.ts`, schemas with the shapes the codec
 * does not use yet, so that the tests compare every kind of code it emits with `Schema.is`. The output is formatted
 * with the workspace's dprint, so that `pnpm lint` accepts it as written.
 */
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import * as AcpSchemas from "../../packages/acp/src/internal/protocol/schemas.generated.ts"
import * as CliFrames from "../../packages/claude/src/internal/protocol/cliFrames.ts"
import * as Controls from "../../packages/claude/src/internal/protocol/controls.ts"
import * as HostFrames from "../../packages/claude/src/internal/protocol/hostFrames.ts"
import * as Shared from "../../packages/claude/src/internal/protocol/shared.ts"
import * as CodexProtocol from "../../packages/codex/src/CodexProtocol.ts"

const root = Path.resolve(import.meta.dirname, "../..")

// ---------------------------------------------------------------------------------------------------------------
// Filters, by identity
// ---------------------------------------------------------------------------------------------------------------

interface Filter {
  /** Whether a value passing the filter is a number (the `typeof` test before it is then left out). */
  readonly impliesNumber?: boolean
  /** The condition under which `value` fails the filter. */
  readonly fails: (value: string, payload: unknown, at: string) => string
}

const stringsOf = (payload: unknown, at: string): ReadonlyArray<string> => {
  if (!Array.isArray(payload) || payload.some((item) => typeof item !== "string")) {
    throw new Error(`${at}: the filter's payload must be an array of strings`)
  }
  return payload
}

/**
 * The filters the generator emits, by `representation.id`. Each must fail exactly where the filter reports an issue
 * (the tests compare the guards with `Schema.is`).
 */
const filters: { readonly [id: string]: Filter } = {
  "effect/schema/isFinite": { impliesNumber: true, fails: (v) => `!Number.isFinite(${v})` },
  "effect/schema/isInt": { impliesNumber: true, fails: (v) => `!Number.isSafeInteger(${v})` },
  [Shared.filterIds.jsonValue]: { fails: (v) => `!isJson(${v})` },
  [Shared.filterIds.otherThan]: {
    fails: (v, payload, at) => or(stringsOf(payload, at).map((known) => `${v} === ${JSON.stringify(known)}`))
  },
  [Shared.filterIds.withoutKeys]: {
    fails: (v, payload, at) => or(stringsOf(payload, at).map((key) => `${JSON.stringify(key)} in ${v}`))
  }
}

const flatChecks = (checks: ReadonlyArray<SchemaAST.Check<unknown>>): ReadonlyArray<SchemaAST.Filter<unknown>> =>
  checks.flatMap((check) => check._tag === "FilterGroup" ? flatChecks(check.checks) : [check])

const filterOf = (
  check: SchemaAST.Filter<unknown>,
  at: string
): { readonly filter: Filter; readonly payload: unknown } => {
  const representation = check.annotations?.representation
  const filter = representation === undefined ? undefined : filters[representation.id]
  if (representation === undefined || filter === undefined) {
    throw new Error(
      `${at}: a filter the generator does not know (${
        representation === undefined ? "it has no representation id" : representation.id
      }): give it a \`representation\` id and add its code to \`filters\` in scripts/codegen/guards.ts`
    )
  }
  return { filter, payload: representation.payload }
}

// ---------------------------------------------------------------------------------------------------------------
// Conditions: the code under which a value fails a node
// ---------------------------------------------------------------------------------------------------------------

const or = (parts: ReadonlyArray<string>): string => parts.length === 0 ? "false" : parts.join(" || ")

const and = (parts: ReadonlyArray<string>): string =>
  parts.length === 0 ? "true" : parts.map((part) => hasTopLevelOr(part) ? `(${part})` : part).join(" && ")

/** The parts of a condition joined by `operator` at its top level (outside parentheses and string literals). */
const split = (condition: string, operator: " || " | " && "): ReadonlyArray<string> => {
  const parts: Array<string> = []
  let depth = 0
  let start = 0
  for (let i = 0; i < condition.length; i++) {
    const c = condition[i]
    if (c === "\"") {
      for (i++; i < condition.length && condition[i] !== "\""; i++) if (condition[i] === "\\") i++
    } else if (c === "(") depth++
    else if (c === ")") depth--
    else if (depth === 0 && condition.startsWith(operator, i)) {
      parts.push(condition.slice(start, i))
      start = i + operator.length
    }
  }
  return [...parts, condition.slice(start)]
}

const hasTopLevelOr = (condition: string): boolean => split(condition, " || ").length > 1

/** The opposite of one comparison or one call, written plainly, or undefined for anything else. */
const negateSimple = (condition: string): string | undefined => {
  if (condition === "false") return "true"
  if (condition === "true") return "false"
  if (/^![\w.]+\([^()]*\)$/.test(condition)) return condition.slice(1)
  const comparison = /^([^|&()!=]+) !== ([^|&()!=]+)$/.exec(condition)
  return comparison !== null ? `${comparison[1]} === ${comparison[2]}` : undefined
}

/** The condition's opposite: plainly where it is a comparison, a call, or a conjunction of those. */
const negate = (condition: string): string => {
  const simple = negateSimple(condition)
  if (simple !== undefined) return simple
  const parts = split(condition, " && ").map(negateSimple)
  return parts.length > 1 && parts.every((part) => part !== undefined) ? parts.join(" || ") : `!(${condition})`
}

const literal = (value: SchemaAST.LiteralValue): string =>
  typeof value === "bigint" ? `${value}n` : JSON.stringify(value)

/** A node checked in line (where its value is read once, into a local if the check reads it twice). */
const isLeaf = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Null":
    case "Undefined":
    case "Void":
    case "Unknown":
    case "Any":
    case "String":
    case "Number":
    case "Boolean":
    case "Literal":
      return true
    case "Union":
      return ast.checks === undefined && ast.options?.mode !== "oneOf" && members(ast).every(isLeaf)
    default:
      return false
  }
}

/** The members of a union, the members of a nested union without checks in its place (the same answer). */
const members = (ast: SchemaAST.Union): ReadonlyArray<SchemaAST.AST> =>
  ast.types.flatMap((member) =>
    member._tag === "Union" && member.checks === undefined && member.encoding === undefined &&
      member.options?.mode !== "oneOf"
      ? members(member)
      : [member]
  )

/** `Record(String, Unknown)`: any object but an array. */
const isAnyRecord = (ast: SchemaAST.AST): boolean =>
  ast._tag === "Objects" && ast.checks === undefined && ast.propertySignatures.length === 0 &&
  ast.indexSignatures.length > 0 &&
  ast.indexSignatures.every((index) =>
    index.parameter._tag === "String" && index.parameter.checks === undefined &&
    index.parameter.encoding === undefined && acceptsAnything(index.type)
  )

/** `Array(Unknown)`: any array (its items, holes included, are not checked). */
const isAnyArray = (ast: SchemaAST.AST): boolean =>
  ast._tag === "Arrays" && ast.checks === undefined && ast.elements.length === 0 && ast.rest.length === 1 &&
  acceptsAnything(ast.rest[0])

/** Whether a node accepts any value: its check is left out. */
const acceptsAnything = (ast: SchemaAST.AST): boolean =>
  (ast._tag === "Unknown" || ast._tag === "Any" || ast._tag === "Void") && ast.checks === undefined &&
  ast.encoding === undefined

// Conditions are built over a placeholder for the value, so that a check reading it twice reads a local instead.
const hole = "\u0000"
const reads = (condition: string): number => condition.split(hole).length - 1
const fill = (condition: string, v: string): string => condition.split(hole).join(v)

const identifier = /^[A-Za-z_$][\w$]*$/
const reserved = new Set(
  "break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof new null return super switch this throw true try typeof var void while with yield let static enum await implements package protected interface private public arguments eval undefined"
    .split(" ")
)

const property = (object: string, key: string): string =>
  identifier.test(key) && key !== "__proto__" ? `${object}.${key}` : `${object}[${JSON.stringify(key)}]`

const parenthesized = (condition: string): string => hasTopLevelOr(condition) ? `(${condition})` : condition

const pascal = (text: string): string =>
  text.split(/[^A-Za-z0-9]+/).filter((part) => part.length > 0).map((part) => part[0].toUpperCase() + part.slice(1))
    .join("")

/** The names the generated code reads in a guard's body, which a local must not shadow. */
const used = new Set(["u", "keys", "i", "value", "item", "Number", "Array", "Object", "isRecord", "isJson"])

const localName = (key: string, taken: Set<string>): string => {
  const free = identifier.test(key) && !reserved.has(key) && !used.has(key) && !/^is[A-Z0-9_$]/.test(key)
  let local = free ? key : "value"
  for (let n = 2; taken.has(local); n++) local = `${local.replace(/\d+$/, "")}${n}`
  taken.add(local)
  return local
}

/** A statement refusing the value when `condition` (over the placeholder) holds for `read`. */
const refuse = (condition: string, read: string, local: () => string, indent: string): Array<string> => {
  if (condition === "false") return []
  if (reads(condition) <= 1) return [`${indent}if (${fill(condition, read)}) return false`]
  const name = local()
  return [`${indent}const ${name} = ${read}`, `${indent}if (${fill(condition, name)}) return false`]
}

/**
 * Whether a required key must be present: its type accepts `undefined`, which an absent key reads as (Effect's
 * decoder and guard require the key then, by this structural rule).
 */
const needsPresence = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Undefined":
    case "Void":
    case "Any":
    case "Unknown":
      return true
    case "Union":
      return ast.types.some(needsPresence)
    default:
      return false
  }
}

/** The literals a member object requires at `key`, or undefined when it does not require a literal there. */
const literalsAt = (member: SchemaAST.AST, key: string): ReadonlyArray<SchemaAST.LiteralValue> | undefined => {
  if (member._tag !== "Objects" || member.encoding !== undefined) return undefined
  const signature = member.propertySignatures.find((p) => p.name === key)
  if (signature === undefined || SchemaAST.isOptional(signature.type)) return undefined
  const type = signature.type
  if (type.checks !== undefined || type.encoding !== undefined) return undefined
  if (type._tag === "Literal") return [type.literal]
  if (type._tag === "Union" && type.options?.mode !== "oneOf") {
    const all = members(type)
    return all.every((m) => m._tag === "Literal" && m.checks === undefined)
      ? all.map((m) => (m as SchemaAST.Literal).literal)
      : undefined
  }
  return undefined
}

/**
 * The key that tells most members apart: a key each of them requires to hold literals. A union of objects is then
 * a `switch` on it, each case trying, in order, the members that may hold that value and the members that do not
 * discriminate on it (a catch-all such as `OtherContentBlock`): the same answer as trying every member.
 */
const discriminant = (all: ReadonlyArray<SchemaAST.AST>): string | undefined => {
  const nonEmptyObjects = all.every((member) =>
    member._tag === "Objects" && (member.propertySignatures.length > 0 || member.indexSignatures.length > 0)
  )
  if (!nonEmptyObjects) return undefined
  let best: { readonly key: string; readonly count: number } | undefined
  for (const member of all) {
    for (const signature of (member as SchemaAST.Objects).propertySignatures) {
      if (typeof signature.name !== "string") continue
      const key = signature.name
      const count = all.filter((m) => literalsAt(m, key) !== undefined).length
      if (count >= 2 && (best === undefined || count > best.count)) best = { key, count }
    }
  }
  return best?.key
}

/** Why decoding a value `ast` accepts might not give it back, or undefined when it gives it back. */
const dropsInput = (ast: SchemaAST.AST, at: string): string | undefined => {
  switch (ast._tag) {
    case "Objects": {
      if (!ast.indexSignatures.some((index) => index.parameter._tag === "String")) {
        return `${at} has no \`Record(String, …)\` rest, so decoding drops the keys it does not declare`
      }
      for (const p of ast.propertySignatures) {
        const why = dropsInput(p.type, `${at}.${String(p.name)}`)
        if (why !== undefined) return why
      }
      for (const index of ast.indexSignatures) {
        const why = dropsInput(index.type, `${at}[string]`)
        if (why !== undefined) return why
      }
      return undefined
    }
    case "Arrays":
      return ast.rest.map((item) => dropsInput(item, `${at}[number]`)).find((why) => why !== undefined)
    case "Union":
      return ast.types.map((member, i) => dropsInput(member, `${at}|${i}`)).find((why) => why !== undefined)
    default:
      return undefined
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Guard functions: one per object, array and union node (shared by identity, and by text where anonymous)
// ---------------------------------------------------------------------------------------------------------------

/**
 * How a root's guard is used: a frame checked as parsed, or a payload that its guard decodes (a Claude control
 * payload, Codex params).
 */
type Use = "frame" | "payload"

interface Emitted {
  readonly name: string
  readonly body: string
}

/** The guards of one generated module: the schemas it names guards after, and the guards emitted so far. */
const makeEmitter = (modules: { readonly [name: string]: unknown }) => {
  const schemas = new Map<string, Schema.Top>()
  const exportNames = new Map<SchemaAST.AST, string>()
  for (const [name, value] of Object.entries(modules)) {
    if (!Schema.isSchema(value)) continue
    schemas.set(name, value)
    if (!exportNames.has(value.ast)) exportNames.set(value.ast, name)
  }
  const emitted: Array<Emitted> = []
  const exported = new Set<string>()
  const byAst = new Map<SchemaAST.AST, string>()
  const byName = new Map<string, Emitted>()
  // The name each anonymous node is given, from where it was first reached.
  const suggested = new Map<SchemaAST.AST, string>()

  // The node a copy was made from. `optionalKey(X)` (and any other change of a node's context) copies X's node,
  // sharing its parts: the copy is X for a guard, and is given X's guard and name.
  const canonicalNodes: Array<SchemaAST.AST> = [...exportNames.keys()]
  const partsOf = (ast: SchemaAST.AST): ReadonlyArray<unknown> | undefined => {
    switch (ast._tag) {
      case "Objects":
        return [ast.propertySignatures, ast.indexSignatures]
      case "Arrays":
        return [ast.elements, ast.rest]
      case "Union":
        return [ast.types, ast.options?.mode]
      default:
        return undefined
    }
  }
  const canonical = (ast: SchemaAST.AST): SchemaAST.AST => {
    const parts = partsOf(ast)
    if (parts === undefined || ast.encoding !== undefined) return ast
    const same = canonicalNodes.find((node) => {
      if (node === ast) return true
      const other = partsOf(node)
      return node._tag === ast._tag && node.checks === ast.checks && node.encoding === undefined &&
        other !== undefined && other.every((part, i) => part === parts[i])
    })
    if (same !== undefined) return same
    canonicalNodes.push(ast)
    return ast
  }

  const schemaOf = (name: string): Schema.Top => {
    const schema = schemas.get(name)
    if (schema === undefined) throw new Error(`no schema is exported as ${name}`)
    return schema
  }

  /** The condition under which `v` fails a leaf's own type, before its filters. */
  const leafFails = (ast: SchemaAST.AST, v: string, at: string): string => {
    switch (ast._tag) {
      case "Null":
        return `${v} !== null`
      case "Undefined":
        return `${v} !== undefined`
      // Effect's `Void` accepts any value, as TypeScript's `void` does.
      case "Void":
      case "Unknown":
      case "Any":
        return "false"
      case "String":
        return `typeof ${v} !== "string"`
      case "Number":
        return `typeof ${v} !== "number"`
      case "Boolean":
        return `typeof ${v} !== "boolean"`
      case "Literal":
        return `${v} !== ${literal(ast.literal)}`
      case "Union":
        return and(members(ast).map((member) => fails(member, v, at)))
      default:
        throw new Error(`${at}: not a leaf (${ast._tag})`)
    }
  }

  /** The condition under which `v` fails `ast`: in line for a leaf, a call of the node's guard function otherwise. */
  const fails = (ast: SchemaAST.AST, v: string, at: string): string => {
    if (ast.encoding !== undefined) {
      throw new Error(`${at}: a transformation (the guards check frames that are returned as they were parsed)`)
    }
    if (isAnyRecord(ast)) return `!isRecord(${v})`
    if (isAnyArray(ast)) return `!Array.isArray(${v})`
    if (!isLeaf(ast)) return `!${guardOf(ast, at)}(${v})`
    const checks = ast.checks === undefined ? [] : flatChecks(ast.checks).map((check) => filterOf(check, at))
    const base = checks.length > 0 && checks[0].filter.impliesNumber === true && ast._tag === "Number"
      ? []
      : [leafFails(ast, v, at)]
    const all = [...base, ...checks.map(({ filter, payload }) => filter.fails(v, payload, at))].filter((c) =>
      c !== "false"
    )
    return or(all)
  }

  const leafName = (ast: SchemaAST.AST): string | undefined => {
    if (ast.encoding !== undefined) return undefined
    if (isAnyRecord(ast)) return "UnknownRecord"
    if (isAnyArray(ast)) return "UnknownArray"
    const ids = ast.checks === undefined
      ? []
      : flatChecks(ast.checks).map((check) => check.annotations?.representation?.id)
    switch (ast._tag) {
      case "String":
      case "Boolean":
      case "Unknown":
      case "Null":
        return ids.length === 0 ? ast._tag : undefined
      case "Number":
        return ids.length === 0
          ? "Number"
          : ids.length === 1 && ids[0] === "effect/schema/isFinite"
          ? "Finite"
          : ids.length === 1 && ids[0] === "effect/schema/isInt"
          ? "Int"
          : undefined
      default:
        return undefined
    }
  }

  /** A name for a node: its export's, structural for arrays and records of named items, else its place's. */
  const nameFor = (node: SchemaAST.AST): string => {
    const ast = canonical(node)
    const exportName = exportNames.get(ast)
    if (exportName !== undefined) return exportName
    if (ast._tag === "Arrays" && ast.elements.length === 0 && ast.rest.length === 1) {
      const item = ast.rest[0]
      const itemName = exportNames.get(canonical(item)) ?? leafName(item)
      if (itemName !== undefined) return `${itemName}Array`
    }
    if (ast._tag === "Objects" && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 1) {
      const value = ast.indexSignatures[0].type
      const valueName = exportNames.get(canonical(value)) ?? leafName(value)
      if (valueName !== undefined) return `${valueName}Record`
    }
    const place = suggested.get(ast)
    if (place === undefined) throw new Error(`a node reached without a name: ${String(ast)}`)
    return place
  }

  const suggest = (ast: SchemaAST.AST, name: string): void => {
    const node = canonical(ast)
    if (!suggested.has(node)) suggested.set(node, name)
  }

  /** Names the members of a union after it, those of a nested union after the nested union. */
  const suggestMembers = (ast: SchemaAST.Union, name: string): void =>
    ast.types.forEach((member, i) => {
      suggest(member, `${name}_${i}`)
      if (member._tag === "Union") suggestMembers(member, nameFor(member))
    })

  const emit = (base: string, body: string): string => {
    let name = base
    for (let n = 2; byName.has(name) && byName.get(name)!.body !== body; n++) name = `${base}${n}`
    if (!byName.has(name)) {
      const entry = { name, body }
      byName.set(name, entry)
      emitted.push(entry)
    }
    return name
  }

  /** The name of the guard function of a non-leaf node, emitting it (its children first) on first use. */
  const guardOf = (node: SchemaAST.AST, at: string): string => {
    const ast = canonical(node)
    const known = byAst.get(ast)
    if (known !== undefined) return known
    const base = `is${pascal(nameFor(ast))}`
    const name = emit(base, bodyOf(ast, base, at))
    byAst.set(ast, name)
    return name
  }

  const bodyOf = (ast: SchemaAST.AST, name: string, at: string): string => {
    switch (ast._tag) {
      case "Objects":
        return objectBody(ast, name, at)
      case "Arrays":
        return arrayBody(ast, name, at)
      case "Union":
        return unionBody(ast, name, at)
      default:
        throw new Error(`${at}: ${ast._tag} is not supported (${String(ast)})`)
    }
  }

  /** The checks of an object, array or union node, as the guard's last condition: `true` when there are none. */
  const passes = (ast: SchemaAST.AST, at: string): string => {
    if (ast.checks === undefined) return "true"
    const checks = flatChecks(ast.checks).map((check) => filterOf(check, at))
    return and(checks.map(({ filter, payload }) => negate(filter.fails("u", payload, at))))
  }

  const objectBody = (ast: SchemaAST.Objects, name: string, at: string): string => {
    const lines: Array<string> = []
    if (ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) {
      // What Effect's guard does for `Struct({})`: any value but null and undefined.
      lines.push(`  if (u === null || u === undefined) return false`)
    } else {
      lines.push(`  if (!isRecord(u)) return false`)
    }
    const taken = new Set<string>()
    for (const signature of ast.propertySignatures) {
      const key = signature.name
      if (typeof key !== "string") throw new Error(`${at}: a ${typeof key} key (only string keys are supported)`)
      const where = `${at}.${key}`
      suggest(signature.type, `${name.slice(2)}_${key}`)
      const condition = fails(signature.type, hole, where)
      const read = property("u", key)
      const presence = key === "__proto__" ? `Object.hasOwn(u, "__proto__")` : `${JSON.stringify(key)} in u`
      if (SchemaAST.isOptional(signature.type)) {
        if (condition === "false") continue
        if (reads(condition) <= 1) {
          lines.push(`  if (${presence} && ${parenthesized(fill(condition, read))}) return false`)
        } else {
          lines.push(`  if (${presence}) {`, ...refuse(condition, read, () => localName(key, taken), "    "), `  }`)
        }
      } else {
        if (needsPresence(signature.type) || key === "__proto__") lines.push(`  if (!(${presence})) return false`)
        lines.push(...refuse(condition, read, () => localName(key, taken), "  "))
      }
    }
    const rest: Array<string> = []
    for (const index of ast.indexSignatures) {
      const parameter = index.parameter
      if (parameter._tag !== "String" || parameter.checks !== undefined || parameter.encoding !== undefined) {
        throw new Error(`${at}: an index signature whose key is not a plain string`)
      }
      if (acceptsAnything(index.type)) continue
      suggest(index.type, `${name.slice(2)}_value`)
      rest.push(fails(index.type, hole, `${at}[string]`))
    }
    if (rest.length > 0) {
      lines.push(`  const keys = Object.keys(u)`)
      for (const condition of rest) {
        lines.push(
          `  for (let i = 0; i < keys.length; i++) {`,
          ...refuse(condition, "u[keys[i]]", () => "value", "    "),
          `  }`
        )
      }
    }
    lines.push(`  return ${passes(ast, at)}`)
    return lines.join("\n")
  }

  const arrayBody = (ast: SchemaAST.Arrays, name: string, at: string): string => {
    if (ast.elements.length > 0 || ast.rest.length > 1) throw new Error(`${at}: a tuple (only arrays are supported)`)
    if (ast.rest.length === 0) {
      return `  return ${and(["Array.isArray(u) && u.length === 0", passes(ast, at)].filter((c) => c !== "true"))}`
    }
    const item = ast.rest[0]
    suggest(item, `${name.slice(2)}_item`)
    const condition = fails(item, hole, `${at}[number]`)
    const lines = [`  if (!Array.isArray(u)) return false`]
    if (condition !== "false") {
      lines.push(`  for (let i = 0; i < u.length; i++) {`, ...refuse(condition, "u[i]", () => "item", "    "), `  }`)
    }
    lines.push(`  return ${passes(ast, at)}`)
    return lines.join("\n")
  }

  const unionBody = (ast: SchemaAST.Union, name: string, at: string): string => {
    if (ast.options?.mode === "oneOf") throw new Error(`${at}: a oneOf union`)
    if (ast.checks !== undefined) throw new Error(`${at}: a union with checks`)
    suggestMembers(ast, name.slice(2))
    const all = members(ast)
    const accepts = (member: SchemaAST.AST, i: number): string => negate(fails(member, "u", `${at}|${i}`))
    const key = discriminant(all)
    if (key === undefined) return `  return ${all.map(accepts).join(" || ")}`
    const cases = new Map<string, Array<number>>()
    const others: Array<number> = []
    all.forEach((member, i) => {
      const values = literalsAt(member, key)
      if (values === undefined) others.push(i)
      else for (const value of values) cases.set(literal(value), [...(cases.get(literal(value)) ?? []), i])
    })
    const tried = (indexes: ReadonlyArray<number>): string =>
      [...new Set([...indexes, ...others])].sort((a, b) => a - b).map((i) => accepts(all[i], i)).join(" || ") ||
      "false"
    // Values whose members are the same share a case.
    const groups = new Map<string, Array<string>>()
    for (const [value, indexes] of cases) {
      const code = tried(indexes)
      groups.set(code, [...(groups.get(code) ?? []), value])
    }
    const lines = [`  if (!isRecord(u)) return false`, `  switch (${property("u", key)}) {`]
    for (const [code, values] of groups) {
      for (const value of values) lines.push(`    case ${value}:`)
      lines.push(`      return ${code}`)
    }
    lines.push(`    default:`, `      return ${tried([])}`, `  }`)
    return lines.join("\n")
  }

  /** Emits the exported guard of a root schema, `is<Name>`. */
  const rootGuard = (name: string, use: Use): string => {
    const ast = schemaOf(name).ast
    if (use === "payload") {
      const why = dropsInput(ast, name)
      if (why !== undefined) {
        throw new Error(
          `${name} cannot be decoded by its guard: ${why}. Make it an open object (\`open\` in shared.ts or ` +
            "CodexProtocol.ts), or decode it with Effect's decoder (ClaudeProtocol.decodeControlPayload, " +
            "CodexProtocol.decodeParams) instead of a generated guard"
        )
      }
    }
    const guard = isLeaf(ast) || isAnyRecord(ast) || isAnyArray(ast)
      ? emit(`is${pascal(name)}`, `  return ${negate(fails(ast, "u", name))}`)
      : guardOf(ast, name)
    if (guard !== `is${pascal(name)}`) throw new Error(`${name}: its guard is named ${guard}`)
    exported.add(guard)
    return guard
  }

  return { emitted, exported, exportNames, rootGuard } as const
}

type Emitter = ReturnType<typeof makeEmitter>

// ---------------------------------------------------------------------------------------------------------------
// The CLI frames, by discriminant, from the `Frame` union
// ---------------------------------------------------------------------------------------------------------------

const literalField = (ast: SchemaAST.AST, key: string): string | undefined => {
  const values = literalsAt(ast, key)
  return values !== undefined && values.length === 1 && typeof values[0] === "string" ? values[0] : undefined
}

const fieldType = (ast: SchemaAST.AST, key: string): SchemaAST.AST | undefined =>
  ast._tag === "Objects" ? ast.propertySignatures.find((p) => p.name === key)?.type : undefined

interface Table {
  readonly name: string
  readonly doc: string
  readonly entries: Array<readonly [string, string]>
}

/**
 * Reads how `decodeLine` dispatches from the members of `Frame`: each has a literal `type`; the `system` frames are
 * told apart by a literal `subtype`, the `control_request` frames by a literal `request.subtype`, but for one
 * catch-all; every other type has one frame. Anything else is refused, as the runtime could not dispatch to it.
 */
const frameTables = (
  emitter: Emitter
): { readonly tables: ReadonlyArray<Table>; readonly otherControlRequest: string } => {
  const byType: Table = {
    name: "frames",
    doc: "The CLI frames but `system` and `control_request`, by `type`.",
    entries: []
  }
  const system: Table = { name: "systemFrames", doc: "The `system` frames, by `subtype`.", entries: [] }
  const requests: Table = {
    name: "controlRequests",
    doc: "The `control_request` frames, by `request.subtype` (any other subtype is {@link otherControlRequest}).",
    entries: []
  }
  let other: string | undefined
  const add = (table: Table, key: string, schemaName: string) => {
    if (table.entries.some(([k]) => k === key)) throw new Error(`Frame: two members for ${table.name} ${key}`)
    table.entries.push([key, schemaName])
  }
  for (const member of CliFrames.Frame.members) {
    const schemaName = emitter.exportNames.get(member.ast)
    if (schemaName === undefined) throw new Error(`Frame: a member that is not exported: ${String(member.ast)}`)
    const type = literalField(member.ast, "type")
    if (type === undefined) throw new Error(`Frame: ${schemaName} has no literal \`type\``)
    if (type === "system") {
      const subtype = literalField(member.ast, "subtype")
      if (subtype === undefined) throw new Error(`Frame: ${schemaName} has no literal \`subtype\``)
      add(system, subtype, schemaName)
    } else if (type === "control_request") {
      const request = fieldType(member.ast, "request")
      const subtype = request === undefined ? undefined : literalField(request, "subtype")
      if (subtype !== undefined) add(requests, subtype, schemaName)
      else if (other === undefined) other = schemaName
      else throw new Error(`Frame: two control requests without a literal \`request.subtype\`: ${other}, ${schemaName}`)
    } else {
      add(byType, type, schemaName)
    }
  }
  if (other === undefined) throw new Error("Frame: no catch-all control request")
  for (const table of [byType, system, requests]) {
    for (const [, schemaName] of table.entries) emitter.rootGuard(schemaName, "frame")
  }
  emitter.rootGuard(other, "frame")
  return { tables: [byType, system, requests], otherControlRequest: other }
}

// ---------------------------------------------------------------------------------------------------------------
// The modules
// ---------------------------------------------------------------------------------------------------------------

/**
 * The guards the runtime names (runtime.ts), besides those of the CLI frames `decodeLine` checks: those come from
 * the `Frame` union itself (see {@link frameTables}), so that a frame added to the union is checked, never decoded
 * as unknown.
 */
const codecRoots: ReadonlyArray<readonly [string, Use]> = [
  // Host → CLI: every frame a session writes is checked first.
  ["HostFrame", "frame"],
  ["HostUserMessage", "frame"],
  ["HostControlRequest", "frame"],
  ["HostControlResponse", "frame"],
  ["HostControlCancelRequest", "frame"],
  // The payloads of the CLI's answers to the session's control requests.
  ["InitializeResponse", "payload"],
  ["InterruptResponse", "payload"],
  ["SetPermissionModeResponse", "payload"],
  ["SetModelResponse", "payload"],
  ["McpStatusResponse", "payload"],
  ["ContextUsageResponse", "payload"],
  ["RewindFilesResponse", "payload"],
  ["McpSetServersResponse", "payload"],
  ["McpReadResourceResponse", "payload"],
  ["McpPermissionModeOverrideResponse", "payload"],
  ["BackgroundTasksResponse", "payload"],
  ["ReloadPluginsResponse", "payload"],
  ["ReloadSkillsResponse", "payload"],
  ["ReloadOutputStylesResponse", "payload"],
  ["ReadFileResponse", "payload"],
  ["OpenResponse", "payload"],
  // ClaudePermission.suggestions
  ["PermissionUpdate", "frame"]
]

const isRecordHelper = `const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)`

/** Core's `Schema.is(Schema.Json)` without Schema (its tests hold it to Effect's), which the guards import. */
const jsonModule = Path.join(root, "packages/core/src/codec/Json.ts")

/**
 * The import of `isJson` from a generated file at `file` (a path from the workspace root): by its path inside core,
 * by core's public module from any other package.
 */
const isJsonImport = (file: string): string => {
  if (!file.startsWith("packages/core/")) return `import { isJson } from "@tether/core/codec/Json"`
  const relative = Path.relative(Path.dirname(Path.join(root, file)), jsonModule).split(Path.sep).join("/")
  return `import { isJson } from "${relative.startsWith(".") ? relative : `./${relative}`}"`
}

/** The `Check` model: a frame guard with the name of its schema. */
const checkModel = `/**
 * A frame's guard and the name of its schema (the export of cliFrames.ts, controls.ts or hostFrames.ts), by which
 * the failure path explains a frame the guard refuses.
 *
 * @category models
 * @since 0.1.0
 */
export interface Check {
  readonly schema: string
  readonly is: (u: unknown) => boolean
}`

/** Whether a guard of the module calls the helper `name` (`isJson`, `isRecord`). */
const uses = (emitter: Emitter, name: string): boolean => emitter.emitted.some(({ body }) => body.includes(`${name}(`))

/** Whether the guards of a module read core's JSON check. */
const importsJson = (emitter: Emitter): boolean => uses(emitter, "isJson")

/** The module text: the header, what the guards use, the guards (the exported ones documented), then `extra`. */
const moduleText = (
  emitter: Emitter,
  file: string,
  header: string,
  source: string,
  extra: ReadonlyArray<string>
): string => {
  const parts: Array<string> = [header, ""]
  if (importsJson(emitter)) parts.push(isJsonImport(file), "")
  if (extra.length > 0) parts.push(checkModel, "")
  if (uses(emitter, "isRecord")) parts.push(isRecordHelper, "")
  for (const { body, name } of emitter.emitted) {
    if (emitter.exported.has(name)) {
      const schemaName = name.slice(2)
      parts.push(
        `/**
 * Whether a value is a \`${schemaName}\` (${source}), as \`Schema.is(${schemaName})\` says.
 *
 * @category guards
 * @since 0.1.0
 */
export const ${name} = (u: unknown): boolean => {
${body}
}`,
        ""
      )
    } else {
      parts.push(`const ${name} = (u: unknown): boolean => {\n${body}\n}`, "")
    }
  }
  return [...parts, ...extra].join("\n")
}

const format = (source: string, file: string): string =>
  execFileSync(Path.join(root, "node_modules/.bin/dprint"), ["fmt", "--stdin", file], {
    cwd: root,
    input: source,
    encoding: "utf8"
  })

const generated = (by: string) =>
  `GENERATED by scripts/codegen/guards.ts (\`pnpm codegen\`) from ${by}: do not edit it; change the schemas and run \`pnpm codegen\` (a test fails while this file is not what the generator makes).`

/** The codec's guards: those of the frames `decodeLine` checks, by discriminant, and those the runtime names. */
const codec = (file: string): string => {
  const emitter = makeEmitter({ ...Shared, ...CliFrames, ...Controls, ...HostFrames })
  const { otherControlRequest, tables } = frameTables(emitter)
  for (const [name, use] of codecRoots) emitter.rootGuard(name, use)
  const header = `/**
 * The type guards of the Claude wire codec. ${generated("the schemas of cliFrames.ts, controls.ts and hostFrames.ts")}
 *
 * Each guard gives the answer of \`Schema.is\` for its schema (tests compare them on recorded and mutated frames),
 * importing nothing but core's JSON check (codec/Json.ts): a session checks every frame with these and loads
 * \`effect/Schema\` only to explain a frame they refuse (runtime.ts).
 *
 * @internal
 */`
  const check = (schemaName: string) => `{ schema: ${JSON.stringify(schemaName)}, is: is${schemaName} }`
  const extra = tables.map((table) =>
    `/**
 * ${table.doc}
 *
 * @category frames
 * @since 0.1.0
 */
export const ${table.name}: ReadonlyMap<string, Check> = new Map([
${table.entries.map(([key, schemaName]) => `  [${JSON.stringify(key)}, ${check(schemaName)}]`).join(",\n")}
])
`
  )
  extra.push(`/**
 * A \`control_request\` of any other \`request.subtype\`.
 *
 * @category frames
 * @since 0.1.0
 */
export const otherControlRequest: Check = ${check(otherControlRequest)}
`)
  return moduleText(emitter, file, header, "the codec's schema", extra)
}

/** The guards of the fixture schemas: every schema the module exports. */
const fixture = (file: string, modules: { readonly [name: string]: unknown }): string => {
  const emitter = makeEmitter(modules)
  for (const [name, value] of Object.entries(modules)) if (Schema.isSchema(value)) emitter.rootGuard(name, "frame")
  const header = `/**
 * The guards of schemas.ts, which has the shapes the Claude codec does not use yet. ${generated("schemas.ts")}
 */`
  return moduleText(emitter, file, header, "schemas.ts", [])
}

/**
 * The params (and results) the Codex protocol machine decodes, each with the runtime's decoder of it
 * (codex/internal/protocol/runtime.ts). A payload: the runtime returns the params its guard accepts as their decoded
 * value, so each schema must be open all the way down.
 */
const codexRoots: ReadonlyArray<string> = [
  "ThreadResult",
  "TurnStartResult",
  "TurnNotification",
  "ItemNotification",
  "AgentMessageDelta",
  "TokenUsageUpdated",
  "ErrorNotification",
  "CommandApprovalParams",
  "FileChangeApprovalParams",
  "ServerRequestResolved"
]

/** The Codex codec's guards: those of the params the protocol machine decodes. */
const codexCodec = (file: string): string => {
  const emitter = makeEmitter(CodexProtocol)
  for (const name of codexRoots) emitter.rootGuard(name, "payload")
  const header = `/**
 * The type guards of the params the Codex protocol machine decodes. ${generated("the schemas of CodexProtocol.ts")}
 *
 * Each guard gives the answer of \`Schema.is\` for its schema (tests compare them on recorded and mutated params): a
 * session checks params with these and loads \`effect/Schema\` only to explain params they refuse (runtime.ts).
 * They import ${importsJson(emitter) ? "nothing but core's JSON check (codec/Json.ts)" : "nothing"}.
 *
 * @internal
 */`
  return moduleText(emitter, file, header, "CodexProtocol's schema", [])
}

/**
 * The messages the ACP protocol machine decodes (acp/internal/protocol/runtime.ts): results, the variants of
 * `session/update` (checked one by one, by their `sessionUpdate`), and the agent's requests. Payloads: the generated
 * schemas are open all the way down.
 */
const acpRoots: ReadonlyArray<string> = [
  "InitializeResponse",
  "NewSessionResponse",
  "LoadSessionResponse",
  "PromptResponse",
  "SessionUpdateUserMessageChunk",
  "SessionUpdateAgentMessageChunk",
  "SessionUpdateAgentThoughtChunk",
  "SessionUpdateToolCall",
  "SessionUpdateToolCallUpdate",
  "SessionUpdatePlan",
  "SessionUpdateAvailableCommandsUpdate",
  "SessionUpdateCurrentModeUpdate",
  "SessionUpdateConfigOptionUpdate",
  "SessionUpdateUsageUpdate",
  "RequestPermissionRequest",
  "ReadTextFileRequest",
  "WriteTextFileRequest",
  "CreateTerminalRequest",
  "TerminalOutputRequest",
  "ReleaseTerminalRequest",
  "WaitForTerminalExitRequest",
  "KillTerminalRequest"
]

/** The ACP codec's guards. */
const acpCodec = (file: string): string => {
  const emitter = makeEmitter(AcpSchemas)
  for (const name of acpRoots) emitter.rootGuard(name, "payload")
  const header = `/**
 * The type guards of the messages the ACP protocol machine decodes. ${
    generated("the schemas of schemas.generated.ts (themselves generated from the ACP JSON Schema)")
  }
 *
 * Each guard gives the answer of \`Schema.is\` for its schema: a session checks what the agent sends with these and
 * loads \`effect/Schema\` only to explain a message they refuse (runtime.ts).
 * They import ${importsJson(emitter) ? "nothing but core's JSON check (codec/Json.ts)" : "nothing"}.
 *
 * @internal
 */`
  return moduleText(emitter, file, header, "the generated ACP schema", [])
}

const fixtureSchemas = "packages/testing/test/session/fixtures/codegen/schemas.ts"

/** The generated files, by path from the workspace root, and how each is made. */
const targets: ReadonlyArray<{ readonly file: string; readonly make: (file: string) => Promise<string> }> = [
  { file: "packages/claude/src/internal/protocol/guards.generated.ts", make: async (file) => codec(file) },
  { file: "packages/codex/src/internal/protocol/guards.generated.ts", make: async (file) => codexCodec(file) },
  { file: "packages/acp/src/internal/protocol/guards.generated.ts", make: async (file) => acpCodec(file) },
  {
    file: "packages/testing/test/session/fixtures/codegen/guards.generated.ts",
    make: async (file) => fixture(file, await import(Url.pathToFileURL(Path.join(root, fixtureSchemas)).href))
  }
]

/** What the generator says of each schema a module exports, as a frame's guard and as a payload's. */
const tryModule = async (file: string): Promise<void> => {
  const modules = await import(Url.pathToFileURL(Path.resolve(file)).href) as { readonly [name: string]: unknown }
  const attempt = (name: string, use: Use): string | null => {
    try {
      makeEmitter(modules).rootGuard(name, use)
      return null
    } catch (error) {
      return error instanceof Error ? error.message : String(error)
    }
  }
  for (const [name, value] of Object.entries(modules)) {
    if (Schema.isSchema(value)) {
      console.log(JSON.stringify({ name, frame: attempt(name, "frame"), payload: attempt(name, "payload") }))
    }
  }
}

// Nothing imports this module: it runs as a script, on any Node the workspace supports (`import.meta.main` needs 24.2).
const tried = process.argv.indexOf("--try")
if (tried >= 0) {
  await tryModule(process.argv[tried + 1])
} else {
  const check = process.argv.includes("--check")
  let stale = 0
  for (const { file, make } of targets) {
    const path = Path.join(root, file)
    const source = format(await make(file), file)
    if (check) {
      const current = Fs.existsSync(path) ? Fs.readFileSync(path, "utf8") : ""
      if (current !== source) {
        console.error(
          `${file} is not what scripts/codegen/guards.ts generates from the schemas: run \`pnpm codegen\``
        )
        stale++
      } else {
        console.log(`checked ${file}`)
      }
    } else if (!Fs.existsSync(path) || Fs.readFileSync(path, "utf8") !== source) {
      Fs.writeFileSync(path, source)
      console.log(`wrote ${file}`)
    }
  }
  if (stale > 0) process.exit(1)
}
