/**
 * `Session.Conversation`: a placement in context decides where a provider's CLI keeps its conversation and which one
 * it resumes, whatever options the session was made with. Checked on what the transport is asked to launch.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { Session, TetherError, Transport } from "@tether/core"
import { Effect, Layer, Option } from "effect"

/** A transport that records what it was asked to launch and refuses to start it. */
const recording = () => {
  const specs: Array<Transport.LaunchSpec> = []
  const layer = Layer.succeed(Transport.Transport)({
    open: (spec) =>
      Effect.suspend(() => {
        specs.push(spec)
        return Effect.fail(new TetherError.SpawnFailed({ program: spec.program, reason: "recorded" }))
      }),
    capabilities: {
      name: "recording",
      containment: "in-memory",
      killsDetachedDescendants: true,
      killsOrphanedDescendants: true,
      killsEveryDescendant: true,
      diesWithHost: true,
      notes: []
    }
  })
  return { specs, layer }
}

const launched = <A, E>(start: Effect.Effect<A, E, Transport.Transport>) =>
  Effect.gen(function*() {
    const transport = recording()
    yield* Effect.ignore(start.pipe(Effect.provide(transport.layer)))
    assert.strictEqual(transport.specs.length, 1)
    return transport.specs[0]
  })

const placement: Session.Placement = { directory: "/srv/conversations/chat-42", resume: "conversation-7" }

describe("Session.Conversation", () => {
  it.effect("Claude: the placement's directory is CLAUDE_CONFIG_DIR and its conversation is resumed", () =>
    Effect.gen(function*() {
      const spec = yield* launched(
        Effect.scoped(
          ClaudeSession.make({
            model: "sonnet",
            sessionId: "0f6b1c1e-0000-4000-8000-000000000000",
            continue: true,
            env: { mode: "clean", set: { CLAUDE_CONFIG_DIR: "/home/host/.claude", HOME: "/home/host" } }
          })
        ).pipe(Effect.provideService(Session.Conversation, placement))
      )
      assert.strictEqual(spec.env.set["CLAUDE_CONFIG_DIR"], placement.directory)
      assert.strictEqual(spec.env.set["HOME"], "/home/host", "the rest of the environment is the host's")
      assert.include(spec.args, "--resume=conversation-7")
      assert.notInclude(spec.args.join(" "), "--continue", "the host's own resume choice is replaced")
      assert.notInclude(spec.args.join(" "), "--session-id", "the CLI refuses a session id with --resume")
      assert.include(spec.args, "--model=sonnet")
    }))

  it.effect("Claude: a placement without a conversation starts a new one there, keeping the host's session id", () =>
    Effect.gen(function*() {
      const spec = yield* launched(
        Effect.scoped(ClaudeSession.make({ resume: "elsewhere", sessionId: undefined })).pipe(
          Effect.provideService(Session.Conversation, { directory: "/srv/c/new", resume: undefined })
        )
      )
      assert.strictEqual(spec.env.set["CLAUDE_CONFIG_DIR"], "/srv/c/new")
      assert.notInclude(spec.args.join(" "), "--resume")
    }))

  it.effect("Claude: without a placement the options are used as given", () =>
    Effect.gen(function*() {
      const spec = yield* launched(Effect.scoped(ClaudeSession.make({ resume: "mine" })))
      assert.include(spec.args, "--resume=mine")
      assert.isUndefined(spec.env.set["CLAUDE_CONFIG_DIR"])
    }))

  it.effect("Codex: the placement's directory is CODEX_HOME", () =>
    Effect.gen(function*() {
      const spec = yield* launched(
        Effect.scoped(CodexSession.make({ model: "gpt-5", codexHome: "/home/host/.codex" })).pipe(
          Effect.provideService(Session.Conversation, placement)
        )
      )
      assert.strictEqual(spec.program, "codex")
      assert.strictEqual(spec.env.set["CODEX_HOME"], placement.directory)
      assert.isTrue(Option.isNone(spec.cwd) || spec.cwd.value !== placement.directory)
    }))
})
