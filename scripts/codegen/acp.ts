/**
 * Generates the Effect schemas of the Agent Client Protocol from the JSON Schema the protocol publishes (the one
 * `@agentclientprotocol/sdk` ships as `schema/v1/schema.json`, pinned in `packages/acp/package.json`), into
 * `packages/acp/src/internal/protocol/schemas.generated.ts`. `scripts/codegen/guards.ts` then generates the guards a
 * session checks the agent's messages with from these schemas, as it does for Codex's.
 *
 *   pnpm codegen                          writes the generated file (then the guards)
 *   node scripts/codegen/acp.ts --check   exits 1 when the committed file is not what the generator makes now (a test
 *                                         runs it)
 *
 * Only the definitions Tether uses are generated ({@link roots}, and what they reference). The mapping:
 *
 * - every object is open (a `Record(String, Unknown)` rest keeps the fields a newer agent adds), as the guards'
 *   generator requires of the payloads a session returns as decoded; a property outside `required` is an optional key;
 * - `type: [T, "null"]` and `anyOf: [T, {type: null}]` are `NullOr(T)`; `allOf: [$ref]` is the reference;
 * - a `oneOf` / `anyOf` is a `Union` (Effect's default mode: the first member that accepts); a discriminated one
 *   (`discriminator.propertyName`) becomes a union of named variants, `<Union><Variant>` (`SessionUpdateToolCall`),
 *   each the variant's own fields with the discriminant as a literal, so that a session checks one variant by its
 *   discriminant instead of the whole union;
 * - an object with `properties` and a `oneOf` / `anyOf` (`SessionConfigOption`) is a union of the object's fields
 *   merged into each member's;
 * - `integer` is `Schema.Int`; `const` is a literal; `{}` is `Unknown`.
 *
 * What it leaves out, and says so here: numeric and length bounds (`minimum`, `maximum`, `minLength`, `format: uint16`…) are not checked;
 * `x-deserialize-default-on-error` (the reference implementation replaces an invalid value with the field's
 * default) is not emulated: a value of the wrong type fails its message's check, which a session reports as a
 * protocol error event (and, for a prompt's answer, as the turn's failure). `default` values are not applied.
 * It fails, naming the definition, on anything else it does not know (a recursive reference, a keyword it does not
 * map), rather than emit a schema that accepts what the protocol does not.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "../..")
const sdk = Path.join(root, "packages/acp/node_modules/@agentclientprotocol/sdk")
const schemaFile = Path.join(sdk, "schema/v1/schema.json")
const target = "packages/acp/src/internal/protocol/schemas.generated.ts"

/** The definitions Tether uses: what the agent sends a client, and what a client (or a simulated agent) reads. */
const roots: ReadonlyArray<string> = [
  // agent → client: answers
  "InitializeResponse",
  "NewSessionResponse",
  "LoadSessionResponse",
  "PromptResponse",
  "SetSessionModeResponse",
  "SetSessionConfigOptionResponse",
  "Error",
  // agent → client: notifications and requests
  "SessionNotification",
  "RequestPermissionRequest",
  "ReadTextFileRequest",
  "WriteTextFileRequest",
  "CreateTerminalRequest",
  "TerminalOutputRequest",
  "ReleaseTerminalRequest",
  "WaitForTerminalExitRequest",
  "KillTerminalRequest",
  // client → agent
  "InitializeRequest",
  "NewSessionRequest",
  "LoadSessionRequest",
  "PromptRequest",
  "CancelNotification",
  "SetSessionModeRequest",
  "SetSessionConfigOptionRequest",
  "RequestPermissionResponse",
  "ReadTextFileResponse",
  "WriteTextFileResponse",
  "CreateTerminalResponse",
  "TerminalOutputResponse",
  "ReleaseTerminalResponse",
  "WaitForTerminalExitResponse",
  "KillTerminalResponse"
]

interface JsonSchema {
  readonly $ref?: string
  readonly type?: string | ReadonlyArray<string>
  readonly const?: unknown
  readonly properties?: { readonly [key: string]: JsonSchema }
  readonly required?: ReadonlyArray<string>
  readonly additionalProperties?: boolean | JsonSchema
  readonly items?: JsonSchema
  readonly allOf?: ReadonlyArray<JsonSchema>
  readonly anyOf?: ReadonlyArray<JsonSchema>
  readonly oneOf?: ReadonlyArray<JsonSchema>
  readonly discriminator?: { readonly propertyName: string }
  readonly description?: string
  readonly title?: string
  readonly [key: string]: unknown
}

/** Keywords that say nothing a check could use, or that the generator leaves out on purpose (see the header). */
const ignored: ReadonlySet<string> = new Set([
  "description",
  "title",
  "default",
  "format",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "x-side",
  "x-method",
  "x-docs-ignore",
  "x-deserialize-default-on-error",
  "x-deserialize-default-on-null",
  "x-deserialize-skip-invalid-items",
  "discriminator"
])

const known: ReadonlySet<string> = new Set([
  "$ref",
  "type",
  "const",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "allOf",
  "anyOf",
  "oneOf",
  ...ignored
])

const document = JSON.parse(Fs.readFileSync(schemaFile, "utf8")) as { readonly $defs: { [name: string]: JsonSchema } }
const defs = document.$defs
const version = (JSON.parse(Fs.readFileSync(Path.join(sdk, "package.json"), "utf8")) as { version: string }).version

const refName = (ref: string, at: string): string => {
  const match = /^#\/\$defs\/(\w+)$/.exec(ref)
  if (match === null || defs[match[1]] === undefined) throw new Error(`${at}: a reference it cannot follow (${ref})`)
  return match[1]
}

const pascal = (value: string): string =>
  value.split(/[^A-Za-z0-9]+/).filter((part) => part.length > 0).map((part) => part[0].toUpperCase() + part.slice(1))
    .join("")

/** A definition's emitted declarations, in dependency order. */
const emitted = new Map<string, string>()
const visiting = new Set<string>()

const comment = (text: string | undefined, extra?: string): string => {
  const lines = [
    ...(text === undefined ? [] : text.split("\n").map((line) => line.replace(/\*\//g, "*\\/"))),
    ...(extra === undefined ? [] : [...(text === undefined ? [] : [""]), ...extra.split("\n")])
  ]
  return lines.length === 0 ? "" : `/**\n${lines.map((line) => line === "" ? " *" : ` * ${line}`).join("\n")}\n */\n`
}

const declare = (name: string, code: string, description: string | undefined): void => {
  emitted.set(
    name,
    `${comment(description, "@category generated\n@since 0.1.0")}export const ${name} = ${code}\n\n${
      comment(undefined, "@category generated\n@since 0.1.0")
    }export type ${name} = typeof ${name}.Type\n`
  )
}

/** Ensures a definition is declared (its references first) and returns its name. */
const reference = (name: string): string => {
  if (emitted.has(name)) return name
  if (visiting.has(name)) throw new Error(`${name}: a recursive reference, which the guards cannot check`)
  visiting.add(name)
  const def = defs[name]
  const variants = discriminated(def)
  if (variants !== undefined) {
    const members = variants.map(({ value, schema }) => {
      const variant = `${name}${pascal(value)}`
      declare(variant, objectCode(schema, `${name}.${value}`), undefined)
      return variant
    })
    declare(name, `Schema.Union([${members.join(", ")}])`, def.description)
  } else {
    declare(name, code(def, name), def.description)
  }
  visiting.delete(name)
  return name
}

const checkKeywords = (schema: JsonSchema, at: string): void => {
  for (const key of Object.keys(schema)) {
    if (!known.has(key)) throw new Error(`${at}: a keyword the generator does not map (${key})`)
  }
}

/** The members of a discriminated `oneOf` whose every member is an object with the discriminant as a `const`. */
const discriminated = (
  schema: JsonSchema
): ReadonlyArray<{ readonly value: string; readonly schema: JsonSchema }> | undefined => {
  const property = schema.discriminator?.propertyName
  if (property === undefined || schema.oneOf === undefined || schema.properties !== undefined) return undefined
  return schema.oneOf.map((member) => {
    const value = member.properties?.[property]?.const
    if (typeof value !== "string") throw new Error(`a member of a discriminated union without a ${property} const`)
    return { value, schema: member }
  })
}

/** The fields of an object schema with its `allOf` references merged in (the members' own fields last). */
const fieldsOf = (
  schema: JsonSchema,
  at: string
): { properties: Map<string, JsonSchema>; required: Set<string> } => {
  const properties = new Map<string, JsonSchema>()
  const required = new Set<string>()
  for (const part of schema.allOf ?? []) {
    const resolved = part.$ref === undefined ? part : defs[refName(part.$ref, at)]
    const inner = fieldsOf(resolved, at)
    for (const [key, value] of inner.properties) properties.set(key, value)
    for (const key of inner.required) required.add(key)
  }
  for (const [key, value] of Object.entries(schema.properties ?? {})) properties.set(key, value)
  for (const key of schema.required ?? []) required.add(key)
  return { properties, required }
}

const key = (name: string): string => /^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name)

/** An open struct of the object's fields. */
const objectCode = (schema: JsonSchema, at: string): string => {
  checkKeywords(schema, at)
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== true) {
    throw new Error(`${at}: additionalProperties other than true`)
  }
  const { properties, required } = fieldsOf(schema, at)
  const fields = [...properties].map(([name, property]) => {
    const value = code(property, `${at}.${name}`)
    return `${key(name)}: ${required.has(name) ? value : `Schema.optionalKey(${value})`}`
  })
  return `open({ ${fields.join(", ")} })`
}

const typeCode = (type: string, schema: JsonSchema, at: string): string => {
  switch (type) {
    case "string":
      return "Schema.String"
    case "integer":
      return "Schema.Int"
    case "number":
      return "Schema.Finite"
    case "boolean":
      return "Schema.Boolean"
    case "null":
      return "Schema.Null"
    case "array":
      if (schema.items === undefined) return "Schema.Array(Schema.Unknown)"
      return `Schema.Array(${code(schema.items, `${at}[]`)})`
    case "object":
      return schema.properties === undefined && schema.allOf === undefined
        ? "UnknownRecord"
        : objectCode(schema, at)
    default:
      throw new Error(`${at}: a type the generator does not map (${type})`)
  }
}

const union = (members: ReadonlyArray<string>): string => {
  const unique = [...new Set(members)]
  if (unique.length === 1) return unique[0]
  const nonNull = unique.filter((member) => member !== "Schema.Null")
  if (nonNull.length === 1 && unique.length === 2) return `Schema.NullOr(${nonNull[0]})`
  return `Schema.Union([${unique.join(", ")}])`
}

/** The code of a schema node. */
const code = (schema: JsonSchema, at: string): string => {
  checkKeywords(schema, at)
  if (schema.$ref !== undefined) return reference(refName(schema.$ref, at))
  if (schema.const !== undefined) {
    if (typeof schema.const !== "string" && typeof schema.const !== "number" && typeof schema.const !== "boolean") {
      throw new Error(`${at}: a const that is not a string, number or boolean`)
    }
    return `Schema.Literal(${JSON.stringify(schema.const)})`
  }
  const alternatives = schema.oneOf ?? schema.anyOf
  if (alternatives !== undefined) {
    if (schema.properties !== undefined) {
      // An object whose fields are shared by every alternative: each alternative with the object's own fields.
      const { oneOf: _oneOf, anyOf: _anyOf, discriminator: _discriminator, ...base } = schema
      return union(alternatives.map((alternative, i) =>
        objectCode({
          ...base,
          properties: { ...base.properties, ...alternative.properties },
          required: [...(base.required ?? []), ...(alternative.required ?? [])],
          allOf: [...(base.allOf ?? []), ...(alternative.allOf ?? [])]
        }, `${at}|${i}`)
      ))
    }
    const variants = discriminated(schema)
    if (variants !== undefined) {
      throw new Error(`${at}: an inline discriminated union (only definitions are split into variants)`)
    }
    return union(alternatives.map((alternative, i) => code(alternative, `${at}|${i}`)))
  }
  if (schema.allOf !== undefined && schema.properties === undefined && schema.type === undefined) {
    if (schema.allOf.length !== 1) throw new Error(`${at}: an allOf of more than one schema outside an object`)
    return code(schema.allOf[0], at)
  }
  if (schema.type === undefined) {
    if (schema.properties !== undefined) return objectCode(schema, at)
    return "Schema.Unknown"
  }
  const types = typeof schema.type === "string" ? [schema.type] : schema.type
  return union(types.map((type) => typeCode(type, schema, at)))
}

for (const name of roots) reference(name)

const source = `/**
 * The Agent Client Protocol's messages as Effect schemas. GENERATED by scripts/codegen/acp.ts (\`pnpm codegen\`) from
 * the JSON Schema of \`@agentclientprotocol/sdk\` ${version} (\`schema/v1/schema.json\`): do not edit it; a test fails
 * while this file is not what the generator makes. scripts/codegen/acp.ts says how the JSON Schema is mapped and
 * what it leaves out.
 *
 * @internal
 */
import * as Schema from "effect/Schema"

const UnknownRecord = Schema.Record(Schema.String, Schema.Unknown)

const open = <const Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.StructWithRest(Schema.Struct(fields), [UnknownRecord])

/**
 * The version of \`@agentclientprotocol/sdk\` whose JSON Schema this module was generated from.
 *
 * @category generated
 * @since 0.1.0
 */
export const sdkVersion = ${JSON.stringify(version)}

${[...emitted.values()].join("\n")}`

const formatted = execFileSync(Path.join(root, "node_modules/.bin/dprint"), ["fmt", "--stdin", target], {
  cwd: root,
  input: source,
  encoding: "utf8"
})

const path = Path.join(root, target)
const current = Fs.existsSync(path) ? Fs.readFileSync(path, "utf8") : ""
if (process.argv.includes("--check")) {
  if (current !== formatted) {
    console.error(
      `${target} is not what scripts/codegen/acp.ts generates from the ACP JSON Schema: run \`pnpm codegen\``
    )
    process.exit(1)
  }
  console.log(`checked ${target}`)
} else if (current !== formatted) {
  Fs.writeFileSync(path, formatted)
  console.log(`wrote ${target}`)
}
