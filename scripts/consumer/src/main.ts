/**
 * The consumer application's program: one turn, its text streamed, every failure handled by its disposition.
 *
 *   node src/main.ts "a prompt"
 */
import { NodeRuntime } from "@effect/platform-node"
import { TetherError } from "@tether/core"
import { Console, Effect, Stream } from "effect"
import { Assistant } from "./Assistant.ts"

const ask = Effect.fnUntraced(function*(prompt: string) {
  const assistant = yield* Assistant
  const turn = yield* assistant.send(prompt)
  yield* turn.events.pipe(
    Stream.runForEach((delivery) => {
      const event = delivery._tag === "Event" ? delivery.event : undefined
      return event?._tag === "TextDelta" ? Effect.sync(() => process.stdout.write(event.text)) : Effect.void
    }),
    Effect.ignore
  )
  const result = yield* turn.result
  yield* Console.log(`\n${result.usage.inputTokens} tokens in, ${result.usage.outputTokens} out`)
})

const program = ask(process.argv[2] ?? "Say hello").pipe(
  Effect.provide(Assistant.layer),
  Effect.catch((error) =>
    Console.error(
      TetherError.hasDisposition(error) && error.safeToFallback
        ? `nothing reached the CLI, fall back: ${error.message}`
        : `failed: ${error.message}`
    ).pipe(Effect.andThen(Effect.sync(() => process.exitCode = 1)))
  )
)

NodeRuntime.runMain(program)
