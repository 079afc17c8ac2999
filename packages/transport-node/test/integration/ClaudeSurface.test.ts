/**
 * The Claude surface of issue 15 against the real `claude` offline (every pinned version, side by side as in
 * ClaudeCli.test.ts; MockAnthropic on 127.0.0.1, a loopback-only namespace where the machine allows it): the model calls a tool of an in-process MCP
 * server of the host and gets its result, and a turn's structured output is decoded by the session's Schema.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { ClaudeMcp, ClaudePermission, ClaudeSession } from "@tether/claude"
import { Permission, type Transport } from "@tether/core"
import { MockAnthropic } from "@tether/testing"
import { Deferred, Effect, Exit, Option, Schema, type Scope } from "effect"
import { type Cli, clis, eventsOf, leftBehind, makeWorld, type World } from "./harness.ts"

const inWorld = <A, E>(
  cli: Cli,
  mockScript: MockAnthropic.Script,
  body: (world: World) => Effect.Effect<A, E, Scope.Scope | Transport.Transport>
) =>
  Effect.gen(function*() {
    const world = yield* makeWorld(mockScript)
    return yield* body(world)
  }).pipe(Effect.scoped, Effect.provide(cli.transport))

afterAll(() => {
  const left = leftBehind()
  assert.deepStrictEqual(left, [], `processes left behind by the suite: ${JSON.stringify(left)}`)
})

/** The body of the `index`-th `/v1/messages` request the mock received. */
const messagesBody = (world: World, index: number) =>
  Effect.map(world.mock.requests, (log) => {
    const requests = log.flatMap((entry) => Option.toArray(entry.messages))
    return requests[index]?.body as {
      readonly tools?: ReadonlyArray<{ readonly name: string; readonly input_schema: unknown }>
      readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
    } | undefined
  })

const scenarios = (cli: Cli) => {
  it.live("the model calls a tool of the host's in-process MCP server and gets its result", () => {
    const calls: Array<{ readonly a: number; readonly b: number; readonly toolUseId: string | undefined }> = []
    const add = ClaudeMcp.tool("add", {
      description: "Add two numbers",
      input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
      handler: ({ a, b }, context) =>
        Effect.sync(() => {
          calls.push({ a, b, toolUseId: context.toolUseId })
          return String(a + b)
        })
    })
    const calc = ClaudeMcp.server("calc", { tools: [add], instructions: "Arithmetic for the model." })
    // The first model call asks for the tool; the second (with its tool_result) echoes "Tool said: <result>".
    const script: MockAnthropic.Script = (request) =>
      Option.isSome(request.toolResult) ? MockAnthropic.echo : MockAnthropic.mcpTool("calc", "add", { a: 2, b: 3 })
    return inWorld(cli, script, (world) =>
      Effect.gen(function*() {
        const session = yield* ClaudeSession.make(world.options({
          mcpServers: [calc],
          policy: Permission.allowTools([ClaudeMcp.toolName(calc, add)])
        }))
        const result = yield* session.run("What is 2 + 3? Use the add tool.")
        console.log(
          `in-process tool: the handler saw ${JSON.stringify(calls)}; the turn said ${JSON.stringify(result.text)}`
        )
        assert.deepStrictEqual(calls.map(({ a, b }) => ({ a, b })), [{ a: 2, b: 3 }])
        assert.match(calls[0].toolUseId ?? "", /^toolu_/)
        assert.strictEqual(result.text, "Tool said: 5")
        assert.isFalse(result.isError)
        // What the model was offered and what it got back, from the mock's request log.
        const first = yield* messagesBody(world, 0)
        const offered = first?.tools?.find((tool) => tool.name === "mcp__calc__add")
        assert.isDefined(offered, "the model was offered mcp__calc__add")
        assert.deepStrictEqual((offered!.input_schema as { readonly required?: unknown }).required, ["a", "b"])
        const log = yield* world.mock.requests
        const results = log.flatMap((entry) => Option.toArray(entry.messages)).flatMap((m) =>
          Option.toArray(m.toolResult)
        )
        console.log(`in-process tool: the model's tool_result: ${JSON.stringify(results)}`)
        assert.deepStrictEqual(results.map((r) => ({ content: r.content, isError: r.isError })), [
          { content: "5", isError: false }
        ])
        const status = yield* session.mcpStatus
        assert.deepStrictEqual(
          status.mcpServers.filter((server) => server.name === "calc").map((server) => server.status),
          ["connected"]
        )
      }))
  }, 120_000)

  it.live("a handler's typed failure reaches the model as an error tool result", () => {
    class Refused extends Schema.TaggedError<Refused>()("Refused", { message: Schema.String }) {}
    const divide = ClaudeMcp.tool("divide", {
      description: "Divide a by b",
      input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
      handler: ({ a, b }) =>
        b === 0 ? Effect.fail(new Refused({ message: "division by zero" })) : Effect.succeed(String(a / b))
    })
    const calc = ClaudeMcp.server("calc", { tools: [divide] })
    const script: MockAnthropic.Script = (request) =>
      Option.isSome(request.toolResult) ? MockAnthropic.echo : MockAnthropic.mcpTool("calc", "divide", { a: 1, b: 0 })
    return inWorld(cli, script, (world) =>
      Effect.gen(function*() {
        const session = yield* ClaudeSession.make(world.options({ mcpServers: [calc], policy: Permission.allowAll }))
        const result = yield* session.run("Divide 1 by 0 with the tool.")
        const log = yield* world.mock.requests
        const results = log.flatMap((entry) => Option.toArray(entry.messages)).flatMap((m) =>
          Option.toArray(m.toolResult)
        )
        console.log(`in-process tool, failing: the model's tool_result: ${JSON.stringify(results)}`)
        assert.deepStrictEqual(results.map((r) => ({ content: r.content, isError: r.isError })), [
          { content: "Refused: division by zero", isError: true }
        ])
        assert.strictEqual(result.text, "Tool said: Refused: division by zero")
      }))
  }, 120_000)

  it.live(
    "an interrupt during a tool call interrupts the handler's fiber; the session goes on",
    () =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const interrupted = yield* Deferred.make<void>()
        const wait = ClaudeMcp.tool("wait", {
          description: "Waits until it is cancelled",
          input: Schema.Struct({}),
          handler: () =>
            Deferred.succeed(started, undefined).pipe(
              Effect.andThen(Effect.never),
              Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
            )
        })
        const script: MockAnthropic.Script = (request) =>
          request.prompt.startsWith("[wait]") && Option.isNone(request.toolResult)
            ? MockAnthropic.mcpTool("host", "wait", {})
            : MockAnthropic.text(`Hello from the mock: ${request.prompt}`)
        return yield* inWorld(cli, script, (world) =>
          Effect.gen(function*() {
            const session = yield* ClaudeSession.make(world.options({
              mcpServers: [ClaudeMcp.server("host", { tools: [wait] })],
              policy: Permission.allowAll
            }))
            const turn = yield* session.send("[wait] please")
            yield* Deferred.await(started)
            const outcome = yield* session.interrupt
            yield* Deferred.await(interrupted)
            const exit = yield* turn.settled
            console.log(
              `in-process tool, interrupted: interrupt ${outcome}, turn ${
                Exit.isFailure(exit) ? "failed" : "succeeded"
              }`
            )
            assert.strictEqual(outcome, "interrupted")
            assert.isTrue(Exit.isFailure(exit))
            // The CLI cancelled the call with a JSON-RPC notification of its own, before the turn's result.
            const events = Array.from(yield* eventsOf(turn))
            const cancelled = events.findIndex((event) =>
              event._tag === "Frame" && event.subtype === "mcp_message" &&
              (event.raw as { readonly request: { readonly message: { readonly method?: unknown } } }).request.message
                  .method === "notifications/cancelled"
            )
            console.log(
              `in-process tool, interrupted: notifications/cancelled is event ${cancelled} of ${events.length}`
            )
            assert.isAbove(cancelled, -1)
            const next = yield* session.run("and now?")
            assert.include(next.text, "Hello from the mock")
          }))
      }),
    120_000
  )

  it.live(
    "always allow: an allow with the CLI's suggestions, and the next call of the tool runs without asking",
    () => {
      const asked: Array<string> = []
      let ran = 0
      const add = ClaudeMcp.tool("add", {
        description: "Add two numbers",
        input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
        handler: ({ a, b }) => Effect.sync(() => String(a + b + 0 * ++ran))
      })
      const script: MockAnthropic.Script = (request) =>
        request.index < 2 ? MockAnthropic.mcpTool("calc", "add", { a: request.index, b: 1 }) : MockAnthropic.echo
      return inWorld(cli, script, (world) =>
        Effect.gen(function*() {
          const session = yield* ClaudeSession.make(world.options({
            mcpServers: [ClaudeMcp.server("calc", { tools: [add] })],
            policy: (request) =>
              Effect.sync(() => {
                asked.push(request.toolName)
                return ClaudePermission.allowAlways(request)
              })
          }))
          const result = yield* session.run("Add twice.")
          console.log(
            `always allow: asked ${JSON.stringify(asked)}, the tool ran ${ran} times, the turn said ${
              JSON.stringify(result.text)
            }`
          )
          assert.deepStrictEqual(asked, ["mcp__calc__add"])
          assert.strictEqual(ran, 2)
        }))
    },
    120_000
  )

  it.live("structured output: the JSON Schema derived from the Schema, the result decoded into its type", () => {
    const Verdict = Schema.Struct({
      answer: Schema.String,
      n: Schema.Int,
      tags: Schema.Array(Schema.Literals(["math", "trivia"]))
    })
    const script: MockAnthropic.Script = () =>
      MockAnthropic.structuredOutput({ answer: "forty-two", n: 42, tags: ["trivia"] })
    return inWorld(cli, script, (world) =>
      Effect.gen(function*() {
        const session = yield* ClaudeSession.make(world.options({ outputSchema: Verdict }))
        const result = yield* session.run("What is the answer? Reply in the structured format.")
        console.log(`structured output: ${JSON.stringify(result.output)} (result text ${JSON.stringify(result.text)})`)
        const output: { readonly answer: string; readonly n: number; readonly tags: ReadonlyArray<"math" | "trivia"> } =
          result.output
        assert.deepStrictEqual(output, { answer: "forty-two", n: 42, tags: ["trivia"] })
        // The CLI offered the model a StructuredOutput tool whose input schema is the one derived from the Schema.
        const first = yield* messagesBody(world, 0)
        const tool = first?.tools?.find((t) => t.name === "StructuredOutput")
        assert.isDefined(tool, "the model was offered the StructuredOutput tool")
        const schema = tool!.input_schema as { readonly required: ReadonlyArray<string>; readonly properties: any }
        assert.deepStrictEqual([...schema.required].sort(), ["answer", "n", "tags"])
        assert.strictEqual(schema.properties.n.type, "integer")
        // The StructuredOutput tool ends the turn: one model call.
        const log = yield* world.mock.requests
        assert.strictEqual(log.filter((entry) => Option.isSome(entry.messages)).length, 1)
      }))
  }, 120_000)

  it.live("structured output that the CLI accepts but the Schema refuses is a typed error with the raw value", () => {
    // The JSON Schema of Int says "integer"; a refinement the JSON Schema cannot say (an even number) is the Schema's.
    const Even = Schema.Struct({ n: Schema.Int.check(Schema.makeFilter((n: number) => n % 2 === 0 || "odd")) })
    const script: MockAnthropic.Script = () => MockAnthropic.structuredOutput({ n: 3 })
    return inWorld(cli, script, (world) =>
      Effect.gen(function*() {
        const session = yield* ClaudeSession.make(world.options({ outputSchema: Even }))
        const error = yield* Effect.flip(session.run("Give me an even number."))
        console.log(`structured output refused by the Schema: ${error._tag}: ${error.message}`)
        assert.strictEqual(error._tag, "StructuredOutputInvalid")
        if (error._tag === "StructuredOutputInvalid") assert.deepStrictEqual(error.value, { n: 3 })
        assert.strictEqual(yield* session.status, "idle")
      }))
  }, 120_000)
}

// The versions run side by side (each in its own worlds and CLI processes); within a version, one scenario at a time.
for (const cli of clis) {
  describe(`claude ${cli.version}`, { concurrent: true }, () => {
    describe("the Claude surface on the real claude CLI, offline", { concurrent: false }, () => scenarios(cli))
  })
}
