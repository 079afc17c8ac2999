/**
 * In-process MCP servers: the JSON-RPC side of an MCP server (`initialize`, `ping`, `tools/list`, `tools/call`,
 * notifications), built from tools whose input is an Effect `Schema` and whose handler is an Effect, and served to
 * the CLI over `mcp_message` control requests.
 *
 * What the CLI does with the answers was seen on 2.1.332 (research/sdk-surface.md §3.4): a `tools/call` result with
 * `isError: true` reaches the model as an error tool result carrying the text; so does a JSON-RPC error, whose
 * message is used as it is. As the SDK's McpServer does, every failure of a call (unknown tool, input that does not
 * decode, a failing handler) is an `isError` result, and only the protocol layer answers JSON-RPC errors (an unknown
 * method). A cancelled call (`notifications/cancelled`, or the end of its turn) is interrupted and not answered.
 *
 * @internal
 */
import * as LazySchema from "@tether/core/codec/LazySchema"
import type * as Provider from "@tether/core/Provider"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Predicate from "effect/Predicate"
import type * as Schema from "effect/Schema"

type JsonObject = { readonly [key: string]: unknown }

/** A content block of a tool result (MCP `CallToolResult.content`). */
export interface Content {
  readonly type: string
  readonly [key: string]: unknown
}

/** What a tool's handler gives: text, or MCP content blocks. */
export type ToolOutput = string | ReadonlyArray<Content>

/** What a handler learns about the call besides its input. */
export interface ToolContext {
  readonly server: string
  readonly tool: string
  /** The model's `tool_use` id (`_meta["claudecode/toolUseId"]`), when the CLI sends it. */
  readonly toolUseId: string | undefined
}

/** What a handler may fail with, type-erased: anything (its message reaches the model). */
export type Failure = object | string | number | bigint | boolean | symbol | null | undefined

/** A tool, type-erased: what a server holds. */
export interface Tool {
  readonly name: string
  readonly description: string
  readonly input: Schema.Codec<unknown, unknown, never, unknown>
  /** Method syntax, so that a tool of any input type is a `Tool` (parameters are checked bivariantly). */
  handler(input: unknown, context: ToolContext): Effect.Effect<ToolOutput, Failure>
  readonly timeout: Duration.Duration | undefined
  readonly annotations: JsonObject | undefined
  readonly alwaysLoad: boolean
  readonly searchHint: string | undefined
  /**
   * What `ClaudeMcp.tool` found wrong with the definition (a timeout that is not a positive duration), reported when
   * a session starts. Optional, so that a tool built otherwise (by hand, or by another copy of this package) is one.
   */
  readonly problems?: ReadonlyArray<string> | undefined
}

export interface Server {
  readonly name: string
  readonly version: string
  readonly instructions: string | undefined
  readonly tools: ReadonlyArray<Tool>
  readonly alwaysLoad: boolean
  readonly timeout: Duration.Duration | undefined
  /** What `ClaudeMcp.server` found wrong with the definition, as for a tool's. */
  readonly problems?: ReadonlyArray<string> | undefined
}

// --- JSON Schema ------------------------------------------------------------------------------------------------

/** A schema's JSON Schema, and whether the Messages API takes it (an object schema). */
export type JsonSchema = { readonly _tag: "Ok"; readonly schema: JsonObject } | {
  readonly _tag: "NotAnObject"
  readonly schema: JsonObject
}

/**
 * The JSON Schema of a tool's input (or of a structured output): the draft 2020-12 document of the schema's JSON
 * form, with its definitions inlined under `$defs` (where its `$ref`s point). An empty struct gives an object with no
 * properties. Fails with a reason when the root is not an object: the Messages API takes object schemas only. `S` is
 * `effect/Schema`, loaded by the caller (see `LazySchema`).
 */
export const jsonSchemaOf = (S: LazySchema.SchemaModule, schema: Schema.Top): JsonSchema => {
  const document = S.toJsonSchemaDocument(schema)
  const root = document.schema as JsonObject
  const definitions = document.definitions as JsonObject
  const inlined = Object.keys(definitions).length > 0 ? { ...root, $defs: definitions } : root
  if (root.type === "object") return { _tag: "Ok", schema: inlined }
  // `Schema.Struct({})` is "anything but null" in JSON Schema: for a tool without parameters, no properties.
  const ast = schema.ast as {
    readonly _tag: string
    readonly propertySignatures?: ReadonlyArray<unknown>
    readonly indexSignatures?: ReadonlyArray<unknown>
  }
  const isEmptyStruct = ast._tag === "Objects" && ast.propertySignatures?.length === 0 &&
    (ast.indexSignatures?.length ?? 0) === 0
  return isEmptyStruct
    ? { _tag: "Ok", schema: { type: "object", properties: {} } }
    : { _tag: "NotAnObject", schema: inlined }
}

// --- JSON-RPC -----------------------------------------------------------------------------------------------------

/** The MCP protocol versions a server can speak; the CLI asks for the first (2.1.332). */
const protocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"]

const rpc = (id: unknown, body: { readonly result: unknown } | { readonly error: JsonObject }): Provider.Reply => ({
  _tag: "Success",
  payload: { mcp_response: { jsonrpc: "2.0", id, ...body } }
})

/** What the SDK answers for a JSON-RPC notification or response: a dummy result with id 0. */
const acknowledged: Provider.Reply = {
  _tag: "Success",
  payload: { mcp_response: { jsonrpc: "2.0", result: {}, id: 0 } }
}

const textResult = (text: string, isError: boolean) => ({
  content: [{ type: "text", text }],
  ...(isError ? { isError: true } : {})
})

/** The text of a handler's failure, as the model reads it. */
export const messageOf = (error: Failure): string => {
  if (typeof error === "string") return error
  if (Predicate.isObject(error)) {
    const message = (error as { readonly message?: unknown }).message
    const tag = (error as { readonly _tag?: unknown })._tag
    if (typeof message === "string" && message.length > 0) {
      return typeof tag === "string" && !message.includes(tag) ? `${tag}: ${message}` : message
    }
    if (typeof tag === "string") return tag
  }
  try {
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}

/** A schema error's own message (without its tag). */
const reasonOf = (error: Failure): string => {
  const message = Predicate.isObject(error) ? (error as { readonly message?: unknown }).message : undefined
  return typeof message === "string" ? message : messageOf(error)
}

const toolEntry = (server: Server, tool: Tool, schema: JsonObject): JsonObject => {
  const meta: Record<string, unknown> = {}
  if (tool.alwaysLoad || server.alwaysLoad) meta["anthropic/alwaysLoad"] = true
  if (tool.searchHint !== undefined) meta["anthropic/searchHint"] = tool.searchHint
  return {
    name: tool.name,
    description: tool.description,
    inputSchema: schema,
    ...(tool.annotations !== undefined ? { annotations: tool.annotations } : {}),
    ...(Object.keys(meta).length > 0 ? { _meta: meta } : {})
  }
}

const formatDuration = (duration: Duration.Duration): string => Duration.format(duration)

/** The arguments did not decode (a class of its own, so that no handler error can be taken for it). */
class InvalidInput {
  readonly error: Failure
  constructor(error: Failure) {
    this.error = error
  }
}

/** The call outlived its tool's timeout. */
class ToolTimeout {}

/** Runs one tool call: decode, handle, bound, and turn every failure into an `isError` result for the model. */
const call = (server: Server, tools: ReadonlyMap<string, Tool>, params: JsonObject): Effect.Effect<unknown> => {
  const name = params.name
  const tool = typeof name === "string" ? tools.get(name) : undefined
  if (tool === undefined) return Effect.succeed(textResult(`Tool ${String(name)} not found`, true))
  const meta = Predicate.isObject(params._meta) ? params._meta as JsonObject : {}
  const toolUseId = typeof meta["claudecode/toolUseId"] === "string" ? meta["claudecode/toolUseId"] : undefined
  const decoded = Effect.flatMap(
    LazySchema.load,
    (S) => S.decodeUnknownEffect(S.toCodecJson(tool.input))(params.arguments ?? {})
  )
  const timeout = tool.timeout ?? server.timeout
  const run = Effect.flatMap(
    Effect.mapError(decoded, (error): Failure => new InvalidInput(error)),
    (input) => Effect.suspend(() => tool.handler(input, { server: server.name, tool: tool.name, toolUseId }))
  )
  const bounded = timeout === undefined ? run : run.pipe(
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () => Effect.fail(new ToolTimeout())
    })
  )
  return Effect.exit(bounded).pipe(Effect.flatMap((exit) => {
    if (Exit.isSuccess(exit)) {
      const output = exit.value
      return Effect.succeed(typeof output === "string" ? textResult(output, false) : { content: output })
    }
    const cause = exit.cause
    // Interrupted (the call was cancelled, or its turn ended): nothing is answered.
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause) as Effect.Effect<never>
    const failure = Cause.findErrorOption(cause)
    if (failure._tag === "Some") {
      const error = failure.value
      if (error instanceof InvalidInput) {
        return Effect.succeed(
          textResult(`Input validation error: invalid arguments for tool ${tool.name}: ${reasonOf(error.error)}`, true)
        )
      }
      if (error instanceof ToolTimeout && timeout !== undefined) {
        return Effect.succeed(
          textResult(`Tool ${tool.name} did not finish within ${formatDuration(timeout)}`, true)
        )
      }
      return Effect.succeed(textResult(messageOf(failure.value), true))
    }
    // A defect is the host's bug: logged in full, and the model only learns that the tool failed.
    return Effect.logWarning(`in-process tool ${server.name}/${tool.name} died`, cause).pipe(
      Effect.as(textResult(`Tool ${tool.name} failed`, true))
    )
  }))
}

/** One in-process server's answers to the CLI's JSON-RPC messages. */
export const serve = (server: Server): (message: JsonObject) => Effect.Effect<Provider.Reply> => {
  const tools = new Map(server.tools.map((tool) => [tool.name, tool]))
  // The tools/list answer does not change: built once, at the first request.
  let listed: ReadonlyArray<JsonObject> | undefined
  const list = Effect.suspend(() =>
    listed !== undefined
      ? Effect.succeed(listed)
      : server.tools.length === 0
      ? Effect.succeed(listed = [])
      : Effect.map(
        LazySchema.load,
        (S) => listed = server.tools.map((tool) => toolEntry(server, tool, jsonSchemaOf(S, tool.input).schema))
      )
  )
  return (message) => {
    const method = message.method
    const id = message.id
    // A notification (no id) or a response: delivered, then acknowledged as the SDK does.
    if (typeof method !== "string" || id === undefined || id === null) return Effect.succeed(acknowledged)
    const params = Predicate.isObject(message.params) ? message.params as JsonObject : {}
    switch (method) {
      case "initialize": {
        const asked = params.protocolVersion
        return Effect.succeed(rpc(id, {
          result: {
            protocolVersion: typeof asked === "string" && protocolVersions.includes(asked)
              ? asked
              : protocolVersions[0],
            capabilities: { tools: { listChanged: false } },
            serverInfo: { name: server.name, version: server.version },
            ...(server.instructions !== undefined ? { instructions: server.instructions } : {})
          }
        }))
      }
      case "ping":
        return Effect.succeed(rpc(id, { result: {} }))
      case "tools/list":
        return Effect.map(list, (tools) => rpc(id, { result: { tools } }))
      case "tools/call":
        return Effect.map(call(server, tools, params), (result) => rpc(id, { result }))
      default:
        return Effect.succeed(rpc(id, { error: { code: -32601, message: "Method not found" } }))
    }
  }
}

/** Server names the CLI takes as they are (it rewrites others, and the model sees `mcp__<server>__<tool>`). */
const namePattern = /^[A-Za-z0-9_-]+$/

/**
 * What is wrong with a set of in-process servers (names, duplicates, input schemas that are not objects). Reading the
 * tools' input schemas loads `effect/Schema`; servers without tools do not.
 */
export const problemsOf = (servers: ReadonlyArray<Server>): Effect.Effect<ReadonlyArray<string>> =>
  servers.some((server) => server.tools.length > 0)
    ? Effect.map(
      LazySchema.load,
      (S) => problemsWith(servers, (tool) => jsonSchemaOf(S, tool.input)._tag === "Ok")
    )
    // No tool, so no input schema to read.
    : Effect.sync(() => problemsWith(servers, () => true))

const problemsWith = (
  servers: ReadonlyArray<Server>,
  isObjectInput: (tool: Tool) => boolean
): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const names = new Set<string>()
  for (const server of servers) {
    if (!namePattern.test(server.name)) {
      problems.push(`mcpServers: ${JSON.stringify(server.name)} is not a server name (letters, digits, _ and -)`)
    }
    if (names.has(server.name)) problems.push(`mcpServers: two servers are named ${JSON.stringify(server.name)}`)
    names.add(server.name)
    for (const problem of server.problems ?? []) problems.push(`mcpServers.${server.name}: ${problem}`)
    const tools = new Set<string>()
    for (const tool of server.tools) {
      if (!namePattern.test(tool.name)) {
        problems.push(`mcpServers.${server.name}: ${JSON.stringify(tool.name)} is not a tool name`)
      }
      if (tools.has(tool.name)) problems.push(`mcpServers.${server.name}: two tools are named ${tool.name}`)
      tools.add(tool.name)
      for (const problem of tool.problems ?? []) problems.push(`mcpServers.${server.name}.${tool.name}: ${problem}`)
      if (!isObjectInput(tool)) {
        problems.push(`mcpServers.${server.name}.${tool.name}: the input schema must be an object (a Schema.Struct)`)
      }
    }
  }
  return problems
}

/** The in-process servers' part of `initialize`: their names, and their configurations where they have one. */
export const initializeFields = (servers: ReadonlyArray<Server>): JsonObject => {
  if (servers.length === 0) return {}
  const configs: Record<string, JsonObject> = {}
  for (const server of servers) {
    // An infinite timeout is none: the CLI's own default then applies (JSON has no Infinity to send).
    if (server.timeout !== undefined && Duration.isFinite(server.timeout)) {
      configs[server.name] = { timeout: Duration.toMillis(server.timeout) }
    }
  }
  return {
    sdkMcpServers: servers.map((server) => server.name),
    ...(Object.keys(configs).length > 0 ? { sdkMcpServerConfigs: configs } : {})
  }
}
