/**
 * The scripts of the fake `claude` executables, read from their environment, and their entry point: the Claude
 * simulator run as the process itself (`processShell.ts`). What is about the process rather than the protocol
 * (descendants, a flood on stderr) stays in the executables.
 *
 * @internal
 */
import * as MockClaude from "../MockClaude.ts"
import type * as Simulator from "../Simulator.ts"
import * as ProcessShell from "./processShell.ts"
import { framesTurns } from "./script.ts"

type Env = { readonly [name: string]: string | undefined }

const noWait: MockClaude.Timing = {
  startup: 0,
  control: 0,
  receipt: 0,
  start: 0,
  init: 0,
  firstToken: 0,
  chunk: 0,
  tool: 0,
  result: 0,
  interrupt: 0,
  exit: 0,
  badInputExit: 0
}

const modesOf = (env: Env): ReadonlySet<string> =>
  new Set((env.FAKE_CLAUDE_MODE ?? "").split(",").map((mode) => mode.trim()).filter((mode) => mode.length > 0))

/**
 * `bin/fake-claude.mjs`: every turn answers `Hello from fake-claude #<n>: <prompt>` in `FAKE_CLAUDE_DELTAS` pieces
 * `FAKE_CLAUDE_FRAME_DELAY_MS` apart; the modes of `FAKE_CLAUDE_MODE` that are about the protocol are faults or
 * steps of the script.
 */
const fakeScript = (env: Env, pid: number, onTurn: () => void): MockClaude.Script => {
  const modes = modesOf(env)
  const frameDelay = Number(env.FAKE_CLAUDE_FRAME_DELAY_MS ?? "0")
  const deltas = Math.max(1, Number(env.FAKE_CLAUDE_DELTAS ?? "3"))
  const faults: Array<MockClaude.Fault> = []
  if (modes.has("hang")) faults.push(MockClaude.hang)
  if (modes.has("ignore-sigterm")) faults.push(MockClaude.ignoreSigterm)
  if (modes.has("flood")) {
    faults.push(
      MockClaude.flood(env.FAKE_CLAUDE_FLOOD_COUNT === undefined ? undefined : Number(env.FAKE_CLAUDE_FLOOD_COUNT))
    )
  }
  let turns = 0
  const steps = (prompt: string): ReadonlyArray<MockClaude.Step> => {
    const turn = ++turns
    onTurn()
    if (modes.has("crash-mid-turn")) {
      return [
        MockClaude.stall(frameDelay),
        MockClaude.crash({
          code: Number(env.FAKE_CLAUDE_EXIT_CODE ?? "3"),
          stderr: `fake-claude[${pid}]: crashing mid-turn\n`
        })
      ]
    }
    const text = `Hello from fake-claude #${turn}: ${prompt}`
    const size = Math.ceil(text.length / deltas)
    const answer = MockClaude.text(
      Array.from({ length: deltas }, (_, i) => text.slice(i * size, (i + 1) * size)),
      { delay: frameDelay }
    )
    if (!modes.has("giant-line") || turn > 1) return [answer]
    return [MockClaude.text("g".repeat(Number(env.FAKE_CLAUDE_GIANT_BYTES ?? String(3 * 1024 * 1024)))), answer]
  }
  return MockClaude.make([], { otherwise: steps, timing: { ...noWait, firstToken: frameDelay }, faults })
}

/** `bin/fast-claude.mjs` (the benchmarks' CLI): a prompt `FRAMES:<n>` streams n text deltas, at once. */
const fastScript = (env: Env): MockClaude.Script =>
  MockClaude.make([], {
    otherwise: framesTurns(Number(env.FAST_CLAUDE_FRAMES ?? "3"), (chunks) => MockClaude.text(chunks)),
    timing: noWait
  })

/** Runs this process as a fake `claude`. */
export const main = (options: { readonly fast: boolean; readonly onTurn: () => void }): void => {
  const env = process.env
  const modes = modesOf(env)
  let resulted = false
  ProcessShell.run<MockClaude.Fault>({
    simulator: MockClaude.simulator(
      options.fast ? fastScript(env) : fakeScript(env, process.pid, options.onTurn)
    ),
    batchBytes: Number(env.FAST_CLAUDE_BATCH_BYTES ?? String(256 * 1024)),
    endInputOnEof: !modes.has("ignore-sigterm") && !modes.has("hang"),
    onStdout: modes.has("exit-after-result")
      ? (line: string, simulator: Simulator.Simulator<MockClaude.Fault>) => {
        // The process stops reading once the first turn is done: the CLI exits as after stdin's EOF.
        if (resulted || !line.startsWith(`{"type":"result"`)) return
        resulted = true
        simulator.endInput(Date.now())
      }
      : undefined
  })
}
