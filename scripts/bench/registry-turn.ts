/**
 * One long turn through a `SessionRegistry` or straight through its `ClaudeSession`, over `NodeTransport` and the
 * fast fake CLI, with no subscriber: what the registry adds per frame (its own watching of the turn).
 *
 *   node scripts/bench/registry-turn.ts <session|registry> [frames, default 100000]
 *
 * Prints the frames per second and the host's CPU time per frame of the measured turn (after a 2,000-frame warm-up
 * turn). Run both modes several times, interleaved: the machine is noisy.
 */
import { Duration, Effect, Exit, ManagedRuntime, Scope } from "effect"
import { ClaudeSession } from "../../packages/claude/src/index.ts"
import { type Session, SessionRegistry, type Turn } from "../../packages/core/src/index.ts"
import { NodeTransport } from "../../packages/transport-node/src/index.ts"
import { fakeClaude, fakeEnv, prompt } from "./fake.ts"

const mode = process.argv[2]
const frames = Number(process.argv[3] ?? 100_000)
if (mode !== "session" && mode !== "registry") throw new Error("usage: registry-turn.ts <session|registry> [frames]")

type RunError =
  | Session.SendError
  | Turn.TurnError
  | ClaudeSession.TurnError
  | SessionRegistry.LookupError
  | SessionRegistry.WakeError

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude } }))
const options: ClaudeSession.Options = { includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }

const scope = await runtime.runPromise(Scope.make())
const run = await runtime.runPromise(
  Effect.gen(function*() {
    if (mode === "session") {
      const session = yield* ClaudeSession.make(options)
      return (text: string): Effect.Effect<ClaudeSession.TurnResult, RunError> => session.run(text)
    }
    const registry = yield* SessionRegistry.make({
      ...ClaudeSession.kind,
      capacity: 1,
      idleTimeToLive: Duration.infinity
    })
    yield* Effect.scoped(registry.getOrCreate("bench", options))
    return (text: string): Effect.Effect<ClaudeSession.TurnResult, RunError> => registry.run("bench", text)
  }).pipe(Scope.provide(scope))
)
await runtime.runPromise(run(prompt(2_000)))
const cpu0 = process.cpuUsage()
const t0 = performance.now()
await runtime.runPromise(run(prompt(frames)))
const ms = performance.now() - t0
const cpu = process.cpuUsage(cpu0)
console.log(
  `${mode}: ${Math.round((frames / ms) * 1000)} frames/s, host CPU ${
    ((cpu.user + cpu.system) / frames).toFixed(2)
  } µs/frame`
)
await runtime.runPromise(Scope.close(scope, Exit.void))
await runtime.dispose()
