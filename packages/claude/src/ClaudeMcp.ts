/**
 * MCP tools that run inside the host, served to the Claude CLI over its own stdio (the SDK's `createSdkMcpServer`
 * and `tool()`, with Effect in place of zod and promises).
 *
 * A tool's input is an Effect `Schema`: the JSON Schema the model sees (`tools/list`) is derived from it, and the
 * arguments are decoded with it before the handler runs. The handler is an Effect; what it fails with reaches the
 * model as an error tool result (`isError`) carrying the error's message, so the model can correct itself. Give the
 * servers to `ClaudeSession.make({ mcpServers })`: the session declares them in `initialize` and answers the CLI's
 * `mcp_message` requests (the MCP handshake, `tools/list`, `tools/call`).
 *
 * Bounds: a call runs as long as the turn that made it (not the control timeout), at most its tool's (or server's)
 * `timeout`; the handler's fiber is interrupted when the CLI cancels the call (an interrupt of the turn sends
 * `notifications/cancelled`) or when the turn ends. A running call does not count as the turn stalling.
 *
 * The model sees a tool as `mcp__<server>__<tool>`: that is the name permission rules and policies use
 * (`Permission.allowTools(["mcp__calc__add"])`). Gotcha: with tool search on (the CLI's default) in-process tools
 * are not in the model's tool list unless `alwaysLoad` is set; the model can still call them by name.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ClaudeMcp, ClaudeSession } from "@tether/claude"
 * import { Permission } from "@tether/core"
 *
 * class Overflow extends Schema.TaggedError<Overflow>()("Overflow", { message: Schema.String }) {}
 *
 * const add = ClaudeMcp.tool("add", {
 *   description: "Add two numbers",
 *   input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
 *   handler: ({ a, b }) =>
 *     a + b > Number.MAX_SAFE_INTEGER
 *       ? Effect.fail(new Overflow({ message: "the sum is too large" })) // the model reads "Overflow: the sum …"
 *       : Effect.succeed(String(a + b))
 * })
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const session = yield* ClaudeSession.make({
 *     mcpServers: [ClaudeMcp.server("calc", { tools: [add] })],
 *     policy: Permission.allowTools(["mcp__calc__add"])
 *   })
 *   return yield* session.run("What is 2 + 3? Use the add tool.")
 * })) // requires a Transport
 * ```
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import type * as internal from "./internal/mcp.ts"

/**
 * A content block of a tool's result, as MCP defines it: `{ type: "text", text }`, `{ type: "image", data,
 * mimeType }`, ….
 *
 * @category models
 * @since 0.1.0
 */
export type Content = internal.Content

/**
 * What a tool's handler succeeds with: text (one text block) or MCP content blocks.
 *
 * @category models
 * @since 0.1.0
 */
export type ToolOutput = internal.ToolOutput

/**
 * What a handler learns about its call besides the input: the server, the tool, and the model's `tool_use` id.
 *
 * @category models
 * @since 0.1.0
 */
export type ToolContext = internal.ToolContext

/**
 * MCP tool annotations (hints for the client: `readOnlyHint`, `destructiveHint`, `idempotentHint`,
 * `openWorldHint`, `title`).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolAnnotations {
  readonly title?: string | undefined
  readonly readOnlyHint?: boolean | undefined
  readonly destructiveHint?: boolean | undefined
  readonly idempotentHint?: boolean | undefined
  readonly openWorldHint?: boolean | undefined
}

/**
 * A tool, built by {@link tool}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Tool extends internal.Tool {}

/**
 * An in-process MCP server, built by {@link server}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Server extends internal.Server {}

/** A `Duration.Input` as a host wrote it, for an error message. */
const describeInput = (input: Duration.Input): string =>
  Duration.isDuration(input)
    ? Duration.format(input)
    : typeof input === "object"
    ? JSON.stringify(input)
    : String(input)

/**
 * A tool's or server's `timeout` option: `undefined` for none, else a positive duration (a timeout of zero or less
 * would fail every call), or what is wrong with it, which a session reports when it is given the server.
 */
const timeoutOption = (
  input: Duration.Input | undefined
): { readonly timeout: Duration.Duration | undefined; readonly problems: ReadonlyArray<string> } => {
  if (input === undefined) return { timeout: undefined, problems: [] }
  const decoded = Duration.fromInput(input)
  if (Option.isNone(decoded) || (typeof input === "number" && Number.isNaN(input))) {
    return { timeout: undefined, problems: [`timeout ${describeInput(input)} is not a duration`] }
  }
  if (Duration.isNegative(decoded.value) || Duration.isZero(decoded.value)) {
    return { timeout: undefined, problems: [`timeout ${describeInput(input)} is not positive`] }
  }
  return { timeout: decoded.value, problems: [] }
}

/**
 * Defines a tool. `input` must be an object schema (a `Schema.Struct`): the Messages API takes only object input
 * schemas, and `ClaudeSession.make` refuses others with `InvalidConfig`. Prefer `Schema.Finite` to `Schema.Number`:
 * the JSON form of `Number` admits the strings `"NaN"` and `"Infinity"`.
 *
 * - `handler` gets the decoded input; its failure becomes the model's error result (a string as it is, an `Error`
 *   or a tagged error by its message); a defect is logged and the model reads only that the tool failed.
 * - `timeout` bounds one call (default: the server's, else only the turn). One that is not a positive duration is
 *   refused by `ClaudeSession.make` (`InvalidConfig`) and by `setMcpServers` (`ControlFailed`).
 * - `alwaysLoad` keeps the tool in the model's tool list when the CLI defers tools behind its tool search;
 *   `searchHint` helps that search find it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const tool = <A, I, E>(name: string, options: {
  readonly description: string
  readonly input: Schema.Codec<A, I, never, unknown>
  readonly handler: (input: A, context: ToolContext) => Effect.Effect<ToolOutput, E>
  readonly timeout?: Duration.Input | undefined
  readonly annotations?: ToolAnnotations | undefined
  readonly alwaysLoad?: boolean | undefined
  readonly searchHint?: string | undefined
}): Tool => ({
  name,
  description: options.description,
  input: options.input as unknown as Schema.Codec<unknown, unknown, never, unknown>,
  handler: options.handler as internal.Tool["handler"],
  ...timeoutOption(options.timeout),
  annotations: options.annotations as internal.Tool["annotations"],
  alwaysLoad: options.alwaysLoad ?? false,
  searchHint: options.searchHint
})

/**
 * Defines an in-process server. Its name must be letters, digits, `_` and `-` (the model sees
 * `mcp__<name>__<tool>`). `timeout` bounds every call of its tools (unless a tool has its own) and is also given
 * to the CLI, which stops waiting after it (an infinite one is not sent: the CLI's default applies there); one that
 * is not a positive duration is refused by `ClaudeSession.make` (`InvalidConfig`) and by `setMcpServers`
 * (`ControlFailed`). `alwaysLoad` applies to every tool.
 *
 * @category constructors
 * @since 0.1.0
 */
export const server = (name: string, options: {
  readonly tools: ReadonlyArray<Tool>
  readonly version?: string | undefined
  readonly instructions?: string | undefined
  readonly alwaysLoad?: boolean | undefined
  readonly timeout?: Duration.Input | undefined
}): Server => ({
  name,
  version: options.version ?? "1.0.0",
  instructions: options.instructions,
  tools: options.tools,
  alwaysLoad: options.alwaysLoad ?? false,
  ...timeoutOption(options.timeout)
})

/**
 * The name the model (and permission rules) use for a tool of a server: `mcp__<server>__<tool>`.
 *
 * @category utils
 * @since 0.1.0
 */
export const toolName = (server: string | Server, tool: string | Tool): string =>
  `mcp__${typeof server === "string" ? server : server.name}__${typeof tool === "string" ? tool : tool.name}`
