import { assert, describe, it } from "@effect/vitest"
import { ClaudeOptions, ClaudeProtocol } from "@tether/claude"
import { TetherError } from "@tether/core"
import { Effect, Option, Redacted, Result } from "effect"
import * as fc from "fast-check"

const protocol = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]

// The conversions are synchronous effects: run them to a Result.
const run = <A, E>(effect: Effect.Effect<A, E>): Result.Result<A, E> => Effect.runSync(Effect.result(effect))

const argsOf = (options: ClaudeOptions.Options): ReadonlyArray<string> => {
  const result = run(ClaudeOptions.toArgs(options))
  if (Result.isFailure(result)) assert.fail(result.failure.message)
  return result.success
}

const problemsOf = (options: ClaudeOptions.Options): ReadonlyArray<string> => {
  const result = run(ClaudeOptions.toLaunchSpec(options))
  if (Result.isSuccess(result)) assert.fail("expected InvalidConfig")
  assert.strictEqual(result.failure._tag, "InvalidConfig")
  return result.failure.problems
}

describe("ClaudeOptions", () => {
  describe("toArgs", () => {
    it("starts with the protocol flags and defaults to stdio permission prompts, partial messages and replay", () => {
      assert.deepStrictEqual(argsOf({}), [
        ...protocol,
        "--permission-prompt-tool=stdio",
        "--include-partial-messages",
        "--replay-user-messages"
      ])
      assert.notInclude(argsOf({ includePartialMessages: false }), "--include-partial-messages")
    })

    it("renders every option as one --flag=value element", () => {
      assert.deepStrictEqual(
        argsOf({
          model: "claude-opus-5-5",
          fallbackModel: "claude-sonnet-5",
          permissionMode: "acceptEdits",
          allowedTools: ["Read", "Bash(git log:*)"],
          disallowedTools: ["WebFetch"],
          systemPrompt: "You are terse.",
          appendSystemPrompt: "--not a flag",
          mcpConfig: { mcpServers: { files: { command: "mcp-files", args: ["--root", "/srv"] } } },
          strictMcpConfig: true,
          cwd: "/home/user/project",
          additionalDirectories: ["/data", "/more data"],
          resume: "1011ce0e-0000-4000-8000-000000000000",
          forkSession: true,
          sessionId: "e965fb50-5d14-4270-bf4c-e88d19c77449",
          maxTurns: 3,
          maxBudgetUsd: 0.5,
          includePartialMessages: true,
          noSessionPersistence: true,
          extraArgs: { "permission-prompts": "host", "forward-subagent-text": null }
        }),
        [
          ...protocol,
          "--model=claude-opus-5-5",
          "--fallback-model=claude-sonnet-5",
          "--permission-mode=acceptEdits",
          "--permission-prompt-tool=stdio",
          "--allowedTools=Read,Bash(git log:*)",
          "--disallowedTools=WebFetch",
          "--system-prompt=You are terse.",
          "--append-system-prompt=--not a flag",
          `--mcp-config={"mcpServers":{"files":{"command":"mcp-files","args":["--root","/srv"]}}}`,
          "--strict-mcp-config",
          "--add-dir=/data",
          "--add-dir=/more data",
          "--resume=1011ce0e-0000-4000-8000-000000000000",
          "--fork-session",
          "--session-id=e965fb50-5d14-4270-bf4c-e88d19c77449",
          "--max-turns=3",
          "--max-budget-usd=0.5",
          "--include-partial-messages",
          "--replay-user-messages",
          "--no-session-persistence",
          "--permission-prompts=host",
          "--forward-subagent-text"
        ]
      )
    })

    it("lets the host name another permission prompt tool, or none, and turn replay off", () => {
      assert.deepStrictEqual(argsOf({ permissionPromptTool: "mcp__host__approve", replayUserMessages: false }), [
        ...protocol,
        "--permission-prompt-tool=mcp__host__approve",
        "--include-partial-messages"
      ])
      assert.deepStrictEqual(argsOf({ permissionPromptTool: false, continue: true }), [
        ...protocol,
        "--continue",
        "--include-partial-messages",
        "--replay-user-messages"
      ])
    })

    it("passes an MCP config path as given and omits empty tool lists", () => {
      assert.deepStrictEqual(argsOf({ mcpConfig: "/etc/mcp.json", allowedTools: [], disallowedTools: [] }), [
        ...protocol,
        "--permission-prompt-tool=stdio",
        "--mcp-config=/etc/mcp.json",
        "--include-partial-messages",
        "--replay-user-messages"
      ])
    })
  })

  describe("validation", () => {
    it.effect("refuses a fallback model equal to the model", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          ClaudeOptions.toArgs({ model: "claude-opus-5-5", fallbackModel: "claude-opus-5-5" })
        )
        assert.strictEqual(error._tag, "InvalidConfig")
        assert.deepStrictEqual(error.problems, ["fallbackModel must differ from model"])
        assert.isFalse(error.safeToRequeue)
      }))

    it("reports every problem at once", () => {
      assert.deepStrictEqual(
        problemsOf({
          model: "",
          resume: "a",
          continue: true,
          sessionId: "not-a-uuid",
          maxTurns: 0,
          maxBudgetUsd: Number.POSITIVE_INFINITY,
          extraArgs: { "output-format": "json", "-x": null, "model": "m" },
          env: { set: { "A=B": "1", OK: "nul\0" } }
        }),
        [
          "model must not be empty",
          "resume and continue are mutually exclusive",
          "sessionId must be a UUID",
          "sessionId with resume or continue requires forkSession",
          "maxTurns must be a positive integer",
          "maxBudgetUsd must be a positive finite number",
          "extraArgs: --output-format is built by Tether; use the typed option",
          "extraArgs: \"-x\" is not a flag name (letters, digits, dashes; no leading dash)",
          "extraArgs: --model is built by Tether; use the typed option",
          "env.set: \"A=B\" is not a variable name",
          "env.set.OK must not contain a NUL character"
        ]
      )
      assert.deepStrictEqual(problemsOf({ forkSession: true }), ["forkSession requires resume or continue"])
      // A JavaScript host's typo: no pool primes with it.
      assert.deepStrictEqual(problemsOf({ warmPrime: "summary" as unknown as "local" }), [
        `warmPrime must be "tokens", "local" or false`
      ])
      assert.deepStrictEqual(problemsOf({ mcpConfig: { mcpServers: { x: { timeout: Number.NaN } } } }), [
        "mcpConfig must be JSON (plain objects, arrays, strings, finite numbers, booleans, null)"
      ])
      assert.isTrue(Result.isSuccess(run(ClaudeOptions.validate({ model: "a", fallbackModel: "b" }))))
    })
  })

  describe("toLaunchSpec", () => {
    it.effect("launches claude in cwd, which is never an argument", () =>
      Effect.gen(function*() {
        const spec = yield* ClaudeOptions.toLaunchSpec({ cwd: "/home/user/project" })
        assert.strictEqual(spec.program, "claude")
        assert.deepStrictEqual(spec.cwd, Option.some("/home/user/project"))
        assert.isFalse(spec.args.some((arg) => arg.includes("/home/user/project")))
        assert.deepStrictEqual(spec.env, {
          mode: "inherit",
          set: {
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
            CLAUDE_CODE_ENTRYPOINT: "sdk-ts",
            CLAUDE_CODE_SDK_READS_SESSION_STATE: "1",
            BUN_ENABLE_CRASH_REPORTING: "0"
          },
          unset: ["NODE_OPTIONS", "DEBUG"]
        })
        const noCwd = yield* ClaudeOptions.toLaunchSpec({})
        assert.isTrue(Option.isNone(noCwd.cwd))
      }))

    it.effect("applies the host's environment over Tether's defaults, secrets stay redacted", () =>
      Effect.gen(function*() {
        const key = Redacted.make("sk-secret")
        const env = yield* ClaudeOptions.toEnvironment({
          env: {
            mode: "clean",
            set: { ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: "http://127.0.0.1:4000", NODE_OPTIONS: "--no-warnings" },
            unset: ["LANG"]
          }
        })
        assert.strictEqual(env.mode, "clean")
        assert.strictEqual(env.set.ANTHROPIC_API_KEY, key)
        assert.isTrue(Redacted.isRedacted(env.set.ANTHROPIC_API_KEY))
        assert.notInclude(JSON.stringify(env), "sk-secret")
        assert.strictEqual(env.set.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, "1")
        // The host set NODE_OPTIONS explicitly: it is not removed.
        assert.strictEqual(env.set.NODE_OPTIONS, "--no-warnings")
        assert.deepStrictEqual(env.unset, ["DEBUG", "LANG"])
      }))

    it.effect("apiKey: through a secret pipe by default, in the environment only when asked", () =>
      Effect.gen(function*() {
        const key = Redacted.make("sk-secret")
        const piped = yield* ClaudeOptions.toLaunchSpec({ apiKey: key })
        assert.deepStrictEqual(piped.secretPipes, [{ variable: ClaudeOptions.apiKeyDescriptorVariable, value: key }])
        assert.isFalse(Object.hasOwn(piped.env.set, "ANTHROPIC_API_KEY"))
        assert.notInclude(JSON.stringify(piped), "sk-secret")
        const inEnv = yield* ClaudeOptions.toLaunchSpec({ apiKey: key, apiKeySource: "environment" })
        assert.deepStrictEqual(inEnv.secretPipes, [])
        assert.strictEqual(inEnv.env.set.ANTHROPIC_API_KEY, key)
        assert.deepStrictEqual(problemsOf({ apiKey: Redacted.make("") }), ["apiKey must not be empty"])
        assert.deepStrictEqual(problemsOf({ apiKey: Redacted.make("sk\nx") }), [
          "apiKey must not contain a NUL character or a line break"
        ])
        assert.deepStrictEqual(problemsOf({ apiKey: key, env: { set: { ANTHROPIC_API_KEY: key } } }), [
          "apiKey and env.set.ANTHROPIC_API_KEY are both set: give the key once"
        ])
      }))

    it.effect("a credential in env.set as a plain string is refused (never quoted); Redacted passes", () =>
      Effect.gen(function*() {
        const plain = "sk-ant-plain-0123456789"
        const error = yield* Effect.flip(ClaudeOptions.validate({
          env: {
            set: { ANTHROPIC_API_KEY: plain, GITHUB_TOKEN: "ghp_plain", ANTHROPIC_BASE_URL: "http://127.0.0.1:9" }
          }
        }))
        assert.strictEqual(error._tag, "InvalidConfig")
        assert.deepStrictEqual(error.problems, [
          "env.set.ANTHROPIC_API_KEY is a credential given as a plain string: give it as Redacted.make(…), so that " +
          "it is scrubbed from errors, events, spans and logs",
          "env.set.GITHUB_TOKEN is a credential given as a plain string: give it as Redacted.make(…), so that it " +
          "is scrubbed from errors, events, spans and logs"
        ])
        assert.notInclude(error.message, plain)
        // Nothing to retry: the configuration must change.
        assert.deepStrictEqual(TetherError.disposition(error), {
          safeToFallback: false,
          safeToRequeue: false,
          deliveryUncertain: false
        })
        yield* ClaudeOptions.validate({ env: { set: { ANTHROPIC_API_KEY: Redacted.make(plain) } } })
        assert.deepStrictEqual(problemsOf({ env: { inheritCredentials: ["A=B"] } }), [
          "env.inheritCredentials: \"A=B\" is not a variable name"
        ])
      }))

    it.effect("inheritCredentials reaches the launch spec; none by default", () =>
      Effect.gen(function*() {
        const named = yield* ClaudeOptions.toLaunchSpec({ env: { inheritCredentials: ["ANTHROPIC_API_KEY"] } })
        assert.deepStrictEqual(named.env.inheritCredentials, ["ANTHROPIC_API_KEY"])
        const unnamed = yield* ClaudeOptions.toLaunchSpec({})
        assert.isUndefined(unnamed.env.inheritCredentials)
      }))

    it.effect("lets the host override or remove a default explicitly", () =>
      Effect.gen(function*() {
        const overridden = yield* ClaudeOptions.toEnvironment({
          env: { set: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "0" } }
        })
        assert.strictEqual(overridden.set.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, "0")
        const removed = yield* ClaudeOptions.toEnvironment({
          env: { unset: ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] }
        })
        assert.isFalse(Object.hasOwn(removed.set, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"))
        assert.include(removed.unset, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")
      }))
  })

  describe("prompts never go on argv", () => {
    const text = fc.string({ minLength: 1 }).filter((s) => !s.includes("\0"))
    const options: fc.Arbitrary<ClaudeOptions.Options> = fc.record({
      model: text,
      systemPrompt: text,
      appendSystemPrompt: text,
      allowedTools: fc.array(text, { maxLength: 3 }),
      additionalDirectories: fc.array(text, { maxLength: 3 }),
      resume: text,
      maxTurns: fc.integer({ min: 1, max: 1000 }),
      includePartialMessages: fc.boolean(),
      extraArgs: fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/), fc.option(text, { nil: null }), {
        maxKeys: 3
      })
    }, { requiredKeys: [] })

    it("every argument is a flag, so no value can be taken for a prompt", () => {
      fc.assert(
        fc.property(options, (generated) => {
          const result = run(ClaudeOptions.toArgs(generated))
          if (Result.isFailure(result)) {
            // Only extraArgs naming a flag Tether builds are refused here.
            assert.isTrue(result.failure.problems.every((problem) => problem.startsWith("extraArgs: --")))
            return
          }
          const args = result.success
          assert.deepStrictEqual(args.slice(0, protocol.length), protocol)
          for (const arg of args.slice(protocol.length)) {
            assert.match(arg, /^--[A-Za-z][A-Za-z0-9-]*(=|$)/)
          }
        }),
        { numRuns: 500 }
      )
    })

    it("has no way to pass a prompt: the prompt is a stdin user message", () => {
      const prompt = "Delete nothing, just say hi"
      // @ts-expect-error: Options has no prompt field.
      const args = argsOf({ model: "m", prompt })
      // And one passed anyway (from untyped code) never reaches argv.
      assert.isFalse(args.some((arg) => arg.includes(prompt)))
      assert.include(
        ClaudeProtocol.encodeUserMessage({
          type: "user",
          message: { role: "user", content: prompt },
          parent_tool_use_id: null,
          session_id: ""
        }),
        prompt
      )
    })
  })
})
