/**
 * The README's host program: a Claude session provided as a Layer, one turn streamed to the console, and every
 * failure handled by what its type says the host may do.
 *
 * Run it against the real API with `ANTHROPIC_API_KEY=… pnpm --filter @tether/examples host "your prompt"`
 * (`./run demo` runs the offline version, against an embedded mock model server).
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClaudeSession } from "@tether/claude"
import { Permission, TetherError, Turn } from "@tether/core"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Console, Context, Effect, Layer } from "effect"

// The session is a service of the host: acquired when the layer is built, released (stdin EOF, grace, SIGTERM
// to the whole process tree, SIGKILL) when the program ends — including on Ctrl-C under NodeRuntime.runMain.
class Assistant extends Context.Service<Assistant, ClaudeSession.ClaudeSession>()("examples/Assistant") {
  // Without its transport, so that a test can run it against MockTransport (see "Testing your host").
  static readonly layerNoDeps = Layer.effect(
    Assistant,
    ClaudeSession.make({
      // Read-only tools are fine; shell commands that would escape the session's teardown are not.
      policy: ShellPolicy.denyDetached(Permission.allowTools(["Read", "Glob", "Grep", "Bash"])),
      permissionMode: "default",
      // A credential reaches the CLI (and its tools) only when named: here the host's own ANTHROPIC_API_KEY.
      env: { inheritCredentials: ["ANTHROPIC_API_KEY"] }
    })
  )
  static readonly layer = this.layerNoDeps.pipe(Layer.provide(NodeTransport.layer()))
}

// One function for every prompt: a generator function made per call (`(p) => Effect.gen(...)`) costs V8 more.
const ask = Effect.fnUntraced(function*(prompt: string) {
  const session = yield* Assistant
  const turn = yield* session.send(prompt)
  // The turn's text as it arrives: each of its events in turn, up to its terminal one (the deliveries of
  // `turn.events`, without running a stream per turn).
  yield* Turn.forEachEvent(turn, (delivery) => {
    const event = delivery._tag === "Event" ? delivery.event : undefined
    return event?._tag === "TextDelta" ? Effect.sync(() => process.stdout.write(event.text)) : Effect.void
  }).pipe(Effect.ignore)
  const result = yield* turn.result
  yield* Console.log(
    `\n\n${result.usage.inputTokens} tokens in, ${result.usage.outputTokens} out, $${result.totalCostUsd ?? 0}`
  )
})

const program = ask(process.argv[2] ?? "In one sentence, what is a scoped resource?").pipe(
  // Provided before the failures are handled: starting the session can fail too (no `claude` found, no handshake
  // within the startup timeout), and those failures are handled below like the turn's.
  Effect.provide(Assistant.layer),
  // Expected failures are values with a disposition, not exceptions.
  Effect.catchTags({
    TurnInFlight: (e) => Console.error(`busy, try again later: ${e.message}`),
    ApiError: (e) => Console.error(`the model API failed (${e.status}); the session is still usable`),
    TurnInterrupted: (e) =>
      Console.error(e.deliveryUncertain ? "interrupted before the CLI confirmed the prompt" : "interrupted")
  }),
  Effect.catch((error) =>
    Console.error(
      TetherError.hasDisposition(error) && error.safeToFallback
        ? `nothing reached the CLI, fall back: ${error.message}`
        : TetherError.hasDisposition(error) && error.deliveryUncertain
        ? `the CLI may have run it; do not resend blindly: ${error.message}`
        : `failed: ${error.message}`
    )
  )
)

NodeRuntime.runMain(program)
