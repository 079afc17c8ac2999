import { assert, describe, it } from "@effect/vitest"
import { ClaudeMcp, ClaudeOptions, ClaudePermission, ClaudeSession } from "@tether/claude"
import { Permission, type TetherError, Timeouts } from "@tether/core"
import { MockClaude, MockTransport } from "@tether/testing"
import { Deferred, type Duration, Effect, Exit, Schema, Scope } from "effect"
import { expectTypeOf } from "vitest"
import * as TestTime from "../../../core/test/support/TestTime.ts"

// The Claude surface beyond the neutral session (issue 15), on TestClock through MockTransport: in-process MCP
// tools, structured output, typed controls and options, permission updates, the one-shot query.

type Frame = { readonly [key: string]: any }

const settle = <A, E, R>(effect: Effect.Effect<A, E, R>) => TestTime.settle(effect, { step: "5 millis", steps: 4_000 })

const advance = (duration: Duration.Input) => TestTime.advance(duration, "5 millis")

const withSession = <Out, A, E, R>(
  options: ClaudeSession.Options<Out>,
  body: (session: ClaudeSession.ClaudeSession<Out>, cli: MockTransport.MockConnection) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const session = yield* settle(ClaudeSession.make(options).pipe(Scope.provide(scope)))
    const cli = yield* (yield* MockTransport.MockTransport).latest
    const exit = yield* Effect.exit(body(session, cli))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

const mock = (...turns: ReadonlyArray<MockClaude.Turn>) => Effect.provide(MockTransport.layer(MockClaude.make(turns)))

const timeouts = (overrides: Timeouts.Overrides) => Effect.runSync(Timeouts.make(overrides))

const written = (cli: MockTransport.MockConnection) => Effect.map(cli.written, (all) => all as ReadonlyArray<Frame>)

/** What the CLI printed, as frames. */
const printed = (cli: MockTransport.MockConnection) => Effect.map(cli.frames, (all) => all as ReadonlyArray<Frame>)

class Overflow extends Schema.TaggedError<Overflow>()("Overflow", { limit: Schema.Finite }) {
  override get message() {
    return `the sum is above ${this.limit}`
  }
}

const calls: Array<unknown> = []

const add = ClaudeMcp.tool("add", {
  description: "Add two numbers",
  input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
  handler: ({ a, b }, context) =>
    Effect.sync(() => calls.push({ a, b, toolUseId: context.toolUseId })).pipe(
      Effect.andThen(a + b > 100 ? Effect.fail(new Overflow({ limit: 100 })) : Effect.succeed(String(a + b)))
    )
})

const wait = ClaudeMcp.tool("wait", {
  description: "Waits for a long time",
  input: Schema.Struct({}),
  handler: () => Effect.as(Effect.sleep("10 minutes"), "waited")
})

const quick = ClaudeMcp.tool("quick", {
  description: "Bounded by a timeout of its own",
  input: Schema.Struct({}),
  timeout: "2 seconds",
  handler: () => Effect.as(Effect.sleep("1 minute"), "never")
})

const calc = ClaudeMcp.server("calc", { tools: [add, wait, quick], instructions: "Arithmetic." })

const toolResults = (frames: ReadonlyArray<Frame>) =>
  frames.flatMap((frame) =>
    frame.type === "user" && Array.isArray(frame.message?.content)
      ? frame.message.content.filter((block: Frame) => block.type === "tool_result")
      : []
  )

describe("in-process MCP tools", () => {
  it.effect("the CLI's MCP handshake, then a call: decoded input, the handler's result as the tool result", () =>
    withSession(
      { mcpServers: [calc], policy: Permission.allowTools([ClaudeMcp.toolName(calc, add)]) },
      (session, cli) =>
        Effect.gen(function*() {
          calls.length = 0
          const init = (yield* written(cli))[0]
          assert.deepStrictEqual(init.request.sdkMcpServers, ["calc"])
          // The answers to the handshake: initialize, the notification, tools/list with the derived JSON Schema.
          const answers = (yield* written(cli)).filter((f) => f.type === "control_response")
          const [initialized, notified, listed] = answers.map((f) => f.response.response.mcp_response)
          assert.strictEqual(initialized.result.serverInfo.name, "calc")
          assert.strictEqual(initialized.result.instructions, "Arithmetic.")
          assert.strictEqual(initialized.result.protocolVersion, "2025-11-25")
          assert.deepStrictEqual(notified, { jsonrpc: "2.0", result: {}, id: 0 })
          const addEntry = listed.result.tools.find((t: Frame) => t.name === "add")
          assert.deepStrictEqual(addEntry.inputSchema.required, ["a", "b"])
          assert.strictEqual(addEntry.inputSchema.type, "object")
          assert.deepStrictEqual(listed.result.tools.find((t: Frame) => t.name === "wait").inputSchema, {
            type: "object",
            properties: {}
          })

          const result = yield* settle(session.run("add please"))
          assert.include(result.text, "Tool said: 5")
          assert.deepStrictEqual(calls, [{ a: 2, b: 3, toolUseId: "toolu_add" }])
          const tool = toolResults(yield* printed(cli))[0]
          assert.deepStrictEqual(tool.content, [{ type: "text", text: "5" }])
          // The permission request named the server, and carried the CLI's suggestion.
          const request = (yield* printed(cli)).find((f) => f.request?.subtype === "can_use_tool")!
          assert.deepStrictEqual(request.request.mcp_server, { name: "calc", source: "sdk" })
        })
    ).pipe(
      mock(MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: 2, b: 3 }, id: "toolu_add" })))
    ))

  it.effect("a typed failure, an input that does not decode, an unknown tool: error results the model reads", () =>
    withSession({ mcpServers: [calc], policy: Permission.allowAll }, (session, cli) =>
      Effect.gen(function*() {
        yield* settle(session.run("overflow"))
        yield* settle(session.run("bad input"))
        yield* settle(session.run("unknown"))
        const results = toolResults(yield* printed(cli))
        assert.deepStrictEqual(results.map((r) => [r.is_error, r.content]), [
          [true, "Overflow: the sum is above 100"],
          [
            true,
            "Input validation error: invalid arguments for tool add: Expected number\n  at [\"a\"]"
          ],
          [true, "Tool nope not found"]
        ])
      })).pipe(mock(
        MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: 99, b: 9 } })),
        MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: "two", b: 3 } })),
        MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "nope", input: {} }))
      )))

  it.effect("a call outlives the control timeout and the stall deadline; its own timeout bounds it", () =>
    withSession({
      mcpServers: [calc],
      policy: Permission.allowAll,
      timeouts: timeouts({ control: "1 second", stall: "5 seconds", turn: "10 minutes" })
    }, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* settle(session.send("quick"))
        // The tool sleeps a minute; its timeout (2 s) answers first, well past the control timeout (1 s).
        const result = yield* settle(turn.result)
        assert.include(result.text, "Tool said (error): Tool quick did not finish within 2s")
        assert.strictEqual(yield* session.status, "idle")
        assert.isTrue(yield* session.isAlive)
        assert.strictEqual(toolResults(yield* printed(cli))[0].is_error, true)
      })).pipe(mock(MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "quick", input: {} })))))

  it.effect("an interrupt cancels the running call: notifications/cancelled interrupts the handler's fiber", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const slow = ClaudeMcp.tool("slow", {
        description: "Slow",
        input: Schema.Struct({}),
        handler: () =>
          Deferred.succeed(started, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          )
      })
      yield* withSession({
        mcpServers: [ClaudeMcp.server("host", { tools: [slow] })],
        policy: Permission.allowAll,
        timeouts: timeouts({ stall: "5 seconds" })
      }, (session, cli) =>
        Effect.gen(function*() {
          const turn = yield* settle(session.send("slow"))
          yield* settle(Deferred.await(started))
          yield* advance("30 seconds") // longer than the stall deadline: the call is the turn's work
          assert.strictEqual(yield* session.status, "running")
          yield* settle(turn.interrupt)
          yield* settle(Deferred.await(interrupted))
          const exit = yield* turn.settled
          assert.isTrue(Exit.isFailure(exit))
          const cancelled = (yield* printed(cli)).find((f) => f.request?.message?.method === "notifications/cancelled")
          assert.isDefined(cancelled)
          // The cancelled call is never answered: the CLI no longer waits for it.
          const call = (yield* printed(cli)).find((f) => f.request?.message?.method === "tools/call")!
          const answers = (yield* written(cli)).filter((f) => f.response?.request_id === call.request_id)
          assert.deepStrictEqual(answers, [])
          assert.isTrue(yield* session.isAlive)
        }))
    }).pipe(mock(MockClaude.turn(MockClaude.mcpTool({ server: "host", tool: "slow", input: {} })))))

  it.effect("the turn's deadline bounds a call that never ends: the handler's fiber is interrupted", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const stuck = ClaudeMcp.tool("stuck", {
        description: "Never answers",
        input: Schema.Struct({}),
        handler: () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
      })
      yield* withSession({
        mcpServers: [ClaudeMcp.server("host", { tools: [stuck] })],
        policy: Permission.allowAll,
        timeouts: timeouts({ turn: "10 seconds", interrupt: "5 seconds" })
      }, (session) =>
        Effect.gen(function*() {
          const exit = yield* settle(Effect.exit(session.run("stuck")))
          assert.isTrue(Exit.isFailure(exit))
          assert.strictEqual(
            Exit.isFailure(exit) ? (exit.cause as any).reasons?.[0]?.error?.reason : undefined,
            "turn-timeout"
          )
          yield* settle(Deferred.await(interrupted))
        }))
    }).pipe(mock(MockClaude.turn(MockClaude.mcpTool({ server: "host", tool: "stuck", input: {} })))))

  it.effect("a handler that interrupts itself is answered at once (an error), not left to the turn's deadline", () =>
    Effect.gen(function*() {
      const quitter = ClaudeMcp.tool("quitter", {
        description: "Interrupts itself",
        input: Schema.Struct({}),
        handler: () => Effect.interrupt
      })
      yield* withSession({
        mcpServers: [ClaudeMcp.server("host", { tools: [quitter] })],
        policy: Permission.allowAll,
        // The call suspends the stall clock: only the turn's deadline (3 minutes) would end a request left pending.
        timeouts: timeouts({ stall: "5 seconds", turn: "3 minutes" })
      }, (session, cli) =>
        Effect.gen(function*() {
          const started = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const result = yield* settle(session.run("quit"))
          const ended = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          assert.isBelow(ended - started, 5_000, "answered when the handler ended, not at a deadline")
          assert.isFalse(result.isError)
          const answers = (yield* written(cli)).filter((frame) =>
            frame.type === "control_response" && frame.response?.subtype === "error"
          )
          assert.lengthOf(answers, 1)
          assert.include(answers[0].response.error, "interrupted")
        }))
    }).pipe(mock(MockClaude.turn(MockClaude.mcpTool({ server: "host", tool: "quitter", input: {} })))))

  it.effect("refuses servers and tools the CLI cannot take, before anything starts", () =>
    Effect.gen(function*() {
      const bad = ClaudeMcp.tool("bad name", {
        description: "",
        input: Schema.String,
        handler: () => Effect.succeed("")
      })
      const error = yield* Effect.flip(
        Effect.scoped(ClaudeSession.make({ mcpServers: [ClaudeMcp.server("a b", { tools: [bad, bad] })] }))
      )
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.deepStrictEqual((error as TetherError.InvalidConfig).problems, [
        "mcpServers: \"a b\" is not a server name (letters, digits, _ and -)",
        "mcpServers.a b: \"bad name\" is not a tool name",
        "mcpServers.a b.bad name: the input schema must be an object (a Schema.Struct)",
        "mcpServers.a b: \"bad name\" is not a tool name",
        "mcpServers.a b: two tools are named bad name",
        "mcpServers.a b.bad name: the input schema must be an object (a Schema.Struct)"
      ])
    }).pipe(mock()))

  it.effect("refuses a timeout that is not a positive duration, before anything starts (not a defect)", () =>
    Effect.gen(function*() {
      const timed = (timeout: Duration.Input) =>
        ClaudeMcp.tool("timed", {
          description: "",
          input: Schema.Struct({}),
          timeout,
          handler: () => Effect.succeed("")
        })
      const servers = [
        ClaudeMcp.server("parsecs", { tools: [timed("5 parsecs" as Duration.Input)] }),
        ClaudeMcp.server("negative", { tools: [timed(-1)], timeout: "0 millis" }),
        ClaudeMcp.server("nan", { tools: [timed(Number.NaN)], timeout: "2 seconds" })
      ]
      const error = yield* Effect.flip(Effect.scoped(ClaudeSession.make({ mcpServers: servers })))
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.deepStrictEqual((error as TetherError.InvalidConfig).problems, [
        "mcpServers.parsecs.timed: timeout 5 parsecs is not a duration",
        "mcpServers.negative: timeout 0 millis is not positive",
        "mcpServers.negative.timed: timeout -1 is not positive",
        "mcpServers.nan.timed: timeout NaN is not a duration"
      ])
    }).pipe(mock()))

  it.effect("a server's finite timeout goes to the CLI at initialize; an infinite one is not sent (JSON has none)", () =>
    withSession({
      mcpServers: [
        ClaudeMcp.server("bounded", { tools: [], timeout: "30 seconds" }),
        ClaudeMcp.server("unbounded", { tools: [], timeout: "Infinity" })
      ]
    }, (_session, cli) =>
      Effect.gen(function*() {
        const init = (yield* written(cli))[0]
        assert.deepStrictEqual(init.request.sdkMcpServers, ["bounded", "unbounded"])
        assert.deepStrictEqual(init.request.sdkMcpServerConfigs, { bounded: { timeout: 30_000 } })
      })).pipe(mock()))
})

describe("structured output", () => {
  const Answer = Schema.Struct({ answer: Schema.String, n: Schema.Int })

  it.effect("the JSON Schema goes to the CLI, and the turn's output is decoded into the schema's type", () =>
    withSession({ outputSchema: Answer }, (session, cli) =>
      Effect.gen(function*() {
        const result = yield* settle(session.run("answer"))
        expectTypeOf(result.output).toEqualTypeOf<{ readonly answer: string; readonly n: number }>()
        assert.deepStrictEqual(result.output, { answer: "forty-two", n: 42 })
        const args = cli.spec.args
        const schema = JSON.parse(args.find((a) => a.startsWith("--json-schema="))!.slice("--json-schema=".length))
        assert.deepStrictEqual(schema.required, ["answer", "n"])
        assert.strictEqual(schema.properties.n.type, "integer")
      })).pipe(mock(MockClaude.turn(MockClaude.structuredOutput({ answer: "forty-two", n: 42 })))))

  it.effect("output that does not decode, no output, and retries exhausted are typed errors with the raw value", () =>
    withSession({ outputSchema: Answer }, (session) =>
      Effect.gen(function*() {
        const invalid = yield* Effect.flip(settle(session.run("invalid")))
        assert.strictEqual(invalid._tag, "StructuredOutputInvalid")
        if (invalid._tag === "StructuredOutputInvalid") assert.deepStrictEqual(invalid.value, { answer: "x", n: 1.5 })
        const missing = yield* Effect.flip(settle(session.run("text only")))
        assert.strictEqual(missing._tag, "StructuredOutputMissing")
        if (missing._tag === "StructuredOutputMissing") assert.strictEqual((missing.raw as Frame).result, "text only")
        const exhausted = yield* Effect.flip(settle(session.run("give up")))
        assert.strictEqual(exhausted._tag, "StructuredOutputRetriesExhausted")
        if (exhausted._tag === "StructuredOutputRetriesExhausted") {
          assert.include(exhausted.errors[0], "Failed to provide valid structured output after 5 attempts")
        }
        // The session goes on.
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock(
        MockClaude.turn(MockClaude.structuredOutput({ answer: "x", n: 1.5 })),
        MockClaude.turn(MockClaude.text("text only")),
        MockClaude.turn(MockClaude.structuredOutputRetries())
      )))

  it.effect("an output schema that is not an object is refused", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(ClaudeSession.make({ outputSchema: Schema.String })))
      assert.strictEqual(error._tag, "InvalidConfig")
    }).pipe(mock()))
})

describe("query", () => {
  it.effect("one prompt in a session of its own, closed afterwards; the same options and errors", () =>
    Effect.gen(function*() {
      const result = yield* settle(
        ClaudeSession.query("answer", { outputSchema: Schema.Struct({ answer: Schema.String }) })
      )
      assert.deepStrictEqual(result.output, { answer: "yes" })
      const transport = yield* MockTransport.MockTransport
      const cli = yield* transport.latest
      assert.isFalse(yield* cli.isAlive)
      const failed = yield* Effect.flip(settle(ClaudeSession.query("fail")))
      assert.strictEqual(failed._tag, "ApiError")
    }).pipe(mock(
      MockClaude.when("fail", MockClaude.apiError({ status: 400 })),
      MockClaude.turn(MockClaude.structuredOutput({ answer: "yes" }))
    )))
})

describe("permission updates", () => {
  it.effect("the CLI's suggestions reach the policy, and allowAlways hands them back for the session", () =>
    Effect.gen(function*() {
      const seen: Array<ReadonlyArray<ClaudePermission.PermissionUpdate>> = []
      yield* withSession({
        policy: (request) =>
          Effect.sync(() => {
            seen.push(ClaudePermission.suggestions(request))
            return ClaudePermission.allowAlways(request)
          })
      }, (session, cli) =>
        Effect.gen(function*() {
          yield* settle(session.run("touch it"))
          assert.deepStrictEqual(seen, [[{
            type: "addRules",
            rules: [{ toolName: "Bash", ruleContent: "touch x" }],
            behavior: "allow",
            destination: "localSettings"
          }]])
          const answer = (yield* written(cli)).find((f) => f.response?.response?.behavior === "allow")!
          assert.deepStrictEqual(answer.response.response.updatedPermissions, [{
            type: "addRules",
            rules: [{ toolName: "Bash", ruleContent: "touch x" }],
            behavior: "allow",
            destination: "session"
          }])
          assert.strictEqual(answer.response.response.decisionClassification, "user_permanent")
        }))
    }).pipe(mock(MockClaude.turn(MockClaude.tool({ name: "Bash", input: { command: "touch x" } })))))
})

describe("a policy that interrupts itself", () => {
  it.effect("is a policy that did not decide: the CLI gets a deny at once, not at the permission deadline", () =>
    withSession({
      policy: () => Effect.interrupt,
      timeouts: timeouts({ stall: "5 seconds", permission: "10 minutes", turn: "30 minutes" })
    }, (session, cli) =>
      Effect.gen(function*() {
        const started = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        yield* settle(session.run("touch"))
        const ended = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        assert.isBelow(ended - started, 5_000, "denied when the policy ended, not at a deadline")
        const answer = (yield* written(cli)).find((f) => f.response?.response?.behavior !== undefined)
        assert.strictEqual(answer?.response?.response?.behavior, "deny")
      })).pipe(mock(MockClaude.turn(MockClaude.tool({ name: "Bash", input: { command: "touch x" } })))))
})

describe("controls", () => {
  it.effect("typed methods send typed requests; accessors read the handshake", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        assert.deepStrictEqual((yield* session.supportedModels).map((m) => m.value), ["default"])
        assert.deepStrictEqual((yield* session.supportedAgents).map((a) => a.name), ["general-purpose", "Explore"])
        assert.include((yield* session.supportedCommands).map((c) => c.name), "compact")
        assert.strictEqual((yield* session.accountInfo).apiProvider, "firstParty")
        // The simulated CLI refuses the controls it does not know, as the real one answers what it does not support.
        const refused = yield* Effect.flip(settle(session.rewindFiles("u-1", { dryRun: true })))
        assert.strictEqual(refused._tag, "ControlFailed")
        yield* Effect.flip(settle(session.stopTask("b1")))
        yield* Effect.flip(settle(session.toggleMcpServer("files", false)))
        yield* Effect.flip(settle(session.updateSettings("userSettings", { effortLevel: "high" })))
        const requests = (yield* written(cli)).filter((f) => f.type === "control_request").slice(1)
        assert.deepStrictEqual(requests.map((f) => f.request), [
          { subtype: "rewind_files", user_message_id: "u-1", dry_run: true },
          { subtype: "stop_task", task_id: "b1" },
          { subtype: "mcp_toggle", serverName: "files", enabled: false },
          { subtype: "update_settings", source: "userSettings", settings: { effortLevel: "high" } }
        ])
        const settings = yield* settle(session.getSettings)
        assert.deepStrictEqual(settings.applied, { model: "claude-opus-5-5", effort: "medium" })
      })).pipe(mock()))

  it.effect("setMcpServers serves an in-process server from then on, and sends it as an sdk server", () =>
    withSession({ policy: Permission.allowAll }, (session, cli) =>
      Effect.gen(function*() {
        calls.length = 0
        const answer = yield* settle(session.setMcpServers({ calc, files: { type: "stdio", command: "mcp-files" } }))
        assert.deepStrictEqual(answer.added, ["calc", "files"])
        const request = (yield* written(cli)).filter((f) => f.type === "control_request").at(-1)!
        assert.deepStrictEqual(request.request, {
          subtype: "mcp_set_servers",
          servers: { calc: { type: "sdk", name: "calc" }, files: { type: "stdio", command: "mcp-files" } }
        })
        // The CLI connected to it (the MCP handshake over mcp_message) and calls its tool.
        const result = yield* settle(session.run("add please"))
        assert.include(result.text, "Tool said: 5")
        assert.deepStrictEqual(calls, [{ a: 2, b: 3, toolUseId: "toolu_add" }])
      })).pipe(
        mock(
          MockClaude.turn(MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: 2, b: 3 }, id: "toolu_add" }))
        )
      ))

  it.effect("a refused setMcpServers changes nothing: the CLI's next call still reaches the server it kept", () =>
    withSession({ mcpServers: [calc], policy: Permission.allowAll }, (session) =>
      Effect.gen(function*() {
        calls.length = 0
        const replacement = ClaudeMcp.server("calc", {
          tools: [ClaudeMcp.tool("add", {
            description: "Adds, the new way",
            input: Schema.Struct({ a: Schema.Finite, b: Schema.Finite }),
            handler: () => Effect.sync(() => calls.push("replacement")).pipe(Effect.as("0"))
          })]
        })
        // The CLI refuses mcp_set_servers: it keeps the server it has, so the session must too.
        const refused = yield* Effect.flip(settle(session.setMcpServers({ calc: replacement })))
        assert.strictEqual(refused._tag, "ControlFailed")
        const result = yield* settle(session.run("add please"))
        assert.include(result.text, "Tool said: 5")
        assert.deepStrictEqual(calls, [{ a: 2, b: 3, toolUseId: "toolu_add" }], "the kept server's handler ran")
      })).pipe(
        Effect.provide(MockTransport.layer(MockClaude.make(
          [MockClaude.turn(
            MockClaude.mcpTool({ server: "calc", tool: "add", input: { a: 2, b: 3 }, id: "toolu_add" })
          )],
          { faults: [MockClaude.refuse("mcp_set_servers")] }
        )))
      ))
})

describe("typed options", () => {
  it.effect("become flags, environment and initialize fields", () =>
    Effect.gen(function*() {
      const options: ClaudeOptions.Options = {
        agent: "reviewer",
        agents: { reviewer: { description: "Reviews diffs", prompt: "You review.", tools: ["Read"] } },
        betas: ["context-1m"],
        effort: "high",
        thinking: { type: "enabled", budgetTokens: 2048, display: "summarized" },
        tools: ["Read", "Grep"],
        settingSources: ["project"],
        settings: { model: "sonnet" },
        sandbox: { enabled: true, network: { allowedDomains: ["example.com"] } },
        plugins: [{ type: "local", path: "/p/a" }, { type: "local", path: "/p/b", skipMcpDiscovery: true }],
        skills: ["pdf"],
        allowedTools: ["Read"],
        systemPrompt: { type: "preset", preset: "claude_code", append: "Be brief.", excludeDynamicSections: true },
        toolAliases: { Shell: "Bash" },
        toolConfig: { askUserQuestion: { previewFormat: "html" } },
        enableFileCheckpointing: true,
        title: "Review"
      }
      const spec = yield* ClaudeOptions.toLaunchSpec(options)
      assert.deepStrictEqual(spec.args.slice(5), [
        "--permission-prompt-tool=stdio",
        "--allowedTools=Read,Skill(pdf)",
        "--include-partial-messages",
        "--replay-user-messages",
        "--agent=reviewer",
        "--betas=context-1m",
        "--effort=high",
        "--max-thinking-tokens=2048",
        "--thinking-display=summarized",
        "--tools=Read,Grep",
        "--setting-sources=project",
        `--settings={"model":"sonnet","sandbox":{"enabled":true,"network":{"allowedDomains":["example.com"]},"failIfUnavailable":true}}`,
        "--plugin-dir=/p/a",
        "--plugin-dir-no-mcp=/p/b"
      ])
      assert.strictEqual(spec.env.set.CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING, "true")
      assert.strictEqual(spec.env.set.CLAUDE_CODE_QUESTION_PREVIEW_FORMAT, "html")
      assert.deepStrictEqual(ClaudeOptions.toInitialize(options), {
        appendSystemPrompt: "Be brief.",
        excludeDynamicSections: true,
        agents: { reviewer: { description: "Reviews diffs", prompt: "You review.", tools: ["Read"] } },
        toolAliases: { Shell: "Bash" },
        skills: ["pdf"],
        title: "Review"
      })
      const problems = yield* Effect.flip(
        ClaudeOptions.validate({
          thinking: { type: "disabled" },
          maxThinkingTokens: 3,
          settings: "/s.json",
          sandbox: {}
        })
      )
      assert.deepStrictEqual(problems.problems, [
        "thinking and maxThinkingTokens are exclusive: give one",
        "sandbox is merged into settings, which must then be an object, not a path"
      ])
    }))

  it.effect("a session sends them in initialize, with the dialog kinds it answers; verbatim prompts", () =>
    withSession({
      agents: { a: { description: "d", prompt: "p" } },
      systemPrompt: ["one", "two"],
      userDialogs: { kinds: ["refusal_fallback_prompt"], handle: () => Effect.succeed({ behavior: "cancelled" }) },
      verbatimPrompts: true
    }, (session, cli) =>
      Effect.gen(function*() {
        const init = (yield* written(cli))[0].request
        assert.deepStrictEqual(init.systemPrompt, ["one", "two"])
        assert.deepStrictEqual(init.agents, { a: { description: "d", prompt: "p" } })
        assert.deepStrictEqual(init.supportedDialogKinds, ["refusal_fallback_prompt"])
        yield* settle(session.run("/not-a-command"))
        const prompt = (yield* written(cli)).find((f) => f.type === "user")!
        assert.strictEqual(prompt.client_composed, true)
      })).pipe(mock()))
})

describe("hooks", () => {
  it.effect("typed per event; a hook outlives the control timeout, bounded by its own timeout", () =>
    Effect.gen(function*() {
      const prompts: Array<string> = []
      yield* withSession({
        policy: Permission.allowAll,
        timeouts: timeouts({ control: "1 second" }),
        hooks: {
          UserPromptSubmit: [{
            callback: (input) =>
              Effect.sync(() => prompts.push(input.prompt)).pipe(Effect.delay("3 seconds"), Effect.as({}))
          }],
          PreToolUse: [{ matcher: "Bash", timeout: 2, callback: () => Effect.as(Effect.sleep("1 minute"), {}) }]
        }
      }, (session, cli) =>
        Effect.gen(function*() {
          const result = yield* settle(session.run("touch it"))
          assert.isFalse(result.isError)
          assert.deepStrictEqual(prompts, ["touch it"])
          const errors = (yield* written(cli)).filter((f) => f.response?.subtype === "error")
          assert.deepStrictEqual(errors.map((f) => f.response.error), ["the host's hook callback failed"])
        }))
    }).pipe(mock(MockClaude.turn(MockClaude.tool({ name: "Bash", input: { command: "touch x" } })))))
})

describe("questions to the user", () => {
  const answerTo = (cli: MockTransport.MockConnection, requestId: string) =>
    Effect.map(written(cli), (frames) => frames.find((f) => f.response?.request_id === requestId)?.response)

  it.effect("an elicitation goes to onElicitation, a dialog of a declared kind to userDialogs", () =>
    withSession({
      onElicitation: (request) =>
        Effect.succeed({ action: "accept" as const, content: { name: `${request.serverName}:${request.message}` } }),
      userDialogs: {
        kinds: ["refusal_fallback_prompt"],
        handle: (request) => Effect.succeed({ behavior: "completed" as const, result: { kind: request.kind } })
      }
    }, (_session, cli) =>
      Effect.gen(function*() {
        yield* cli.inject(JSON.stringify({
          type: "control_request",
          request_id: "e1",
          request: { subtype: "elicitation", mcp_server_name: "ext", message: "Your name?", mode: "form" }
        }))
        yield* cli.inject(JSON.stringify({
          type: "control_request",
          request_id: "d1",
          request: { subtype: "request_user_dialog", dialog_kind: "refusal_fallback_prompt", payload: {} }
        }))
        yield* cli.inject(JSON.stringify({
          type: "control_request",
          request_id: "d2",
          request: { subtype: "request_user_dialog", dialog_kind: "other", payload: {} }
        }))
        yield* advance("100 millis")
        assert.deepStrictEqual((yield* answerTo(cli, "e1")).response, {
          action: "accept",
          content: { name: "ext:Your name?" }
        })
        assert.deepStrictEqual((yield* answerTo(cli, "d1")).response, {
          behavior: "completed",
          result: { kind: "refusal_fallback_prompt" }
        })
        // A kind the host did not declare is cancelled (the CLI applies its default), not left pending.
        assert.deepStrictEqual((yield* answerTo(cli, "d2")).response, { behavior: "cancelled" })
      })).pipe(mock()))

  it.effect("without a callback an elicitation is declined, as the SDK does", () =>
    withSession({}, (_session, cli) =>
      Effect.gen(function*() {
        yield* cli.inject(JSON.stringify({
          type: "control_request",
          request_id: "e1",
          request: { subtype: "elicitation", mcp_server_name: "ext", message: "?" }
        }))
        yield* advance("100 millis")
        assert.deepStrictEqual((yield* answerTo(cli, "e1")).response, { action: "decline" })
      })).pipe(mock()))
})

describe("a session store", () => {
  it.effect("gets the transcript entries the CLI mirrors, in order, by project and session", () =>
    Effect.gen(function*() {
      const appended: Array<unknown> = []
      yield* withSession({
        sessionStore: { append: (key, entries) => Effect.sync(() => appended.push({ key, entries })) }
      }, (session, cli) =>
        Effect.gen(function*() {
          assert.include(cli.spec.args, "--session-mirror")
          yield* cli.inject(JSON.stringify({
            type: "transcript_mirror",
            filePath: "/h/.claude/projects/-work-p/11111111-1111-4111-8111-111111111111.jsonl",
            entries: [{ type: "user", uuid: "e1" }]
          }))
          yield* advance("1 second")
          assert.deepStrictEqual(appended, [{
            key: { projectKey: "-work-p", sessionId: "11111111-1111-4111-8111-111111111111" },
            entries: [{ type: "user", uuid: "e1" }]
          }])
          assert.isTrue(yield* session.isAlive)
        }))
    }).pipe(mock()))
})
