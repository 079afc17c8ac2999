/**
 * A host program that runs Claude Code or Codex: the provider is one Layer, picked here from TETHER_PROVIDER
 * (`claude`, the default, or `codex`); the rest of the program is the same for both.
 *
 *   pnpm --filter @tether/examples switch-provider "Say hello"
 *   TETHER_PROVIDER=codex pnpm --filter @tether/examples switch-provider "Say hello"
 *
 * It runs the real CLIs (`claude`, or the native `codex` binary) with their own logins; `pnpm test` runs it against
 * the fake ones of @tether/testing (TETHER_CLAUDE_PATH, TETHER_CODEX_PATH).
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { Permission, type Session, TetherError } from "@tether/core"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Console, Context, Effect, Layer, Stream } from "effect"

// What the host needs of a coding agent: a session, whichever CLI runs it.
class Agent extends Context.Service<Agent, Session.Session>()("examples/Agent") {}

// One policy for both: read-only tools, and shell commands that do not detach from the session. Claude asks for its
// tools by name (`Bash`); Codex asks for `command`s and `apply_patch` file changes (not allowed here).
const policy = ShellPolicy.denyDetached(Permission.allowTools(["Read", "Glob", "Grep", "Bash", "command"]), {
  shellTools: ["Bash", "command"]
})

const ClaudeAgent = Layer.effect(Agent, ClaudeSession.make({ policy }))

// Codex asks before every command under `untrusted`; its sandbox keeps commands to the working directory.
const CodexAgent = Layer.effect(
  Agent,
  CodexSession.make({ policy, approvalPolicy: "untrusted", sandbox: "workspace-write" })
)

const program = Effect.gen(function*() {
  const agent = yield* Agent
  const turn = yield* agent.send(process.argv[2] ?? "In one sentence, what is a scoped resource?")
  yield* turn.events.pipe(
    Stream.runForEach((delivery) => {
      const event = delivery._tag === "Event" ? delivery.event : undefined
      return event?._tag === "TextDelta" ? Effect.sync(() => process.stdout.write(event.text)) : Effect.void
    }),
    Effect.ignore
  )
  const result = yield* turn.result
  yield* Console.log(`\n\n${agent.protocol}: ${result.usage.inputTokens} tokens in, ${result.usage.outputTokens} out`)
})

// The one line that changes the provider.
const AgentLive = process.env.TETHER_PROVIDER === "codex" ? CodexAgent : ClaudeAgent

NodeRuntime.runMain(
  program.pipe(
    Effect.provide(AgentLive.pipe(Layer.provide(NodeTransport.layer()))),
    // Each provider's own errors by their tag, with their fields, though the host holds the neutral Session.
    Effect.catchTags({
      MaxTurnsExceeded: (error) => Console.error(`Claude stopped at its turn limit; resume ${error.sessionId}`),
      TurnRejected: (error) => Console.error(`Codex refused the turn (${error.code}); it is safe to requeue`)
    }),
    // The same errors, with the same dispositions, whichever provider failed.
    Effect.catch((error) =>
      Console.error(
        TetherError.hasDisposition(error) && error.safeToFallback
          ? `nothing reached the CLI, fall back: ${error.message}`
          : `failed (${error._tag}): ${error.message}`
      )
    )
  )
)
