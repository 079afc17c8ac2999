import { assert, describe, it } from "@effect/vitest"
import { CodexOptions } from "@tether/codex"
import { Effect, Option, Redacted, Result } from "effect"

// The conversions are synchronous effects: run them to a Result.
const run = <A, E>(effect: Effect.Effect<A, E>): Result.Result<A, E> => Effect.runSync(Effect.result(effect))

const launchOf = (options: CodexOptions.Options) => {
  const result = run(CodexOptions.toLaunchSpec(options))
  if (Result.isFailure(result)) assert.fail(result.failure.message)
  return result.success
}

const overridesOf = (options: CodexOptions.Options) => Object.fromEntries(CodexOptions.toOverrides(options))

describe("CodexOptions", () => {
  it("launches `codex app-server` with plugins off, in the cwd, with plain warnings on stderr", () => {
    const spec = launchOf({ cwd: "/work" })
    assert.strictEqual(spec.program, "codex")
    assert.deepStrictEqual(spec.args, ["app-server", "-c", "features.plugins=false"])
    assert.deepStrictEqual(spec.cwd, Option.some("/work"))
    assert.deepStrictEqual(spec.env.set, { RUST_LOG: "warn", NO_COLOR: "1" })
    assert.strictEqual(spec.env.mode, "inherit")
  })

  it("a provider becomes a custom Responses-API provider whose key travels in the environment, never on argv", () => {
    const spec = launchOf({
      provider: { baseUrl: "http://127.0.0.1:9/v1", apiKey: Redacted.make("sk-secret"), requestMaxRetries: 0 }
    })
    assert.deepStrictEqual(spec.args.slice(1), [
      "-c",
      "model_provider=\"tether\"",
      "-c",
      "model_providers.tether={name=\"tether\",base_url=\"http://127.0.0.1:9/v1\",wire_api=\"responses\"," +
      "env_key=\"TETHER_CODEX_API_KEY\",request_max_retries=0}",
      "-c",
      "features.plugins=false"
    ])
    assert.notInclude(spec.args.join(" "), "sk-secret")
    assert.strictEqual(Redacted.value(spec.env.set["TETHER_CODEX_API_KEY"] as Redacted.Redacted<string>), "sk-secret")
  })

  it("the session's own folders: CODEX_HOME and TMPDIR, and with a TMPDIR /tmp is no writable root", () => {
    const spec = launchOf({ codexHome: "/s/codex", tmpDir: "/s/tmp" })
    assert.strictEqual(spec.env.set["CODEX_HOME"], "/s/codex")
    assert.strictEqual(spec.env.set["TMPDIR"], "/s/tmp")
    assert.strictEqual(overridesOf({ tmpDir: "/s/tmp" })["sandbox_workspace_write.exclude_slash_tmp"], true)
    assert.include(spec.args, "sandbox_workspace_write.exclude_slash_tmp=true")
    assert.isUndefined(overridesOf({})["sandbox_workspace_write.exclude_slash_tmp"], "without a TMPDIR of its own")
    const mine = CodexOptions.toOverrides({
      tmpDir: "/s/tmp",
      config: { "sandbox_workspace_write.exclude_slash_tmp": false }
    }).filter(([key]) => key === "sandbox_workspace_write.exclude_slash_tmp")
    assert.deepStrictEqual(mine, [["sandbox_workspace_write.exclude_slash_tmp", false]], "the host's config wins")
  })

  it("thread params: cwd, model, approval policy, sandbox, ephemeral, writable roots as a dotted config key", () => {
    assert.deepStrictEqual(
      CodexOptions.toThreadParams({
        cwd: "/w",
        model: "gpt-5.5",
        approvalPolicy: "untrusted",
        sandbox: "workspace-write",
        ephemeral: true,
        writableRoots: ["/extra"]
      }),
      {
        cwd: "/w",
        model: "gpt-5.5",
        approvalPolicy: "untrusted",
        sandbox: "workspace-write",
        ephemeral: true,
        config: { "sandbox_workspace_write.writable_roots": ["/extra"] }
      }
    )
  })

  it("refuses what it cannot launch", () => {
    const result = run(CodexOptions.toLaunchSpec({
      provider: { baseUrl: "ftp://x", envKey: "1BAD" },
      resume: "t",
      ephemeral: true,
      config: { "bad key": 1 }
    }))
    if (Result.isSuccess(result)) assert.fail("expected InvalidConfig")
    assert.strictEqual(result.failure._tag, "InvalidConfig")
    assert.strictEqual(result.failure.problems.length, 4)
  })

  it("refuses a credential given in env.set as a plain string, and passes inheritCredentials on", () => {
    const result = run(CodexOptions.toLaunchSpec({ env: { set: { OPENAI_API_KEY: "sk-plain-0123456789" } } }))
    if (Result.isSuccess(result)) assert.fail("expected InvalidConfig")
    assert.deepStrictEqual(result.failure.problems, [
      "env.set.OPENAI_API_KEY is a credential given as a plain string: give it as Redacted.make(…), so that it is " +
      "scrubbed from errors, events, spans and logs"
    ])
    assert.notInclude(result.failure.message, "sk-plain-0123456789")
    const spec = launchOf({
      env: { set: { OPENAI_API_KEY: Redacted.make("sk-0123456789") }, inheritCredentials: ["CODEX_API_KEY"] }
    })
    assert.deepStrictEqual(spec.env.inheritCredentials, ["CODEX_API_KEY"])
  })
})
