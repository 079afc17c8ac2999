/**
 * The scripts of the fake `codex` executables, read from their environment, and their entry point: the Codex
 * simulator run as the process itself (`processShell.ts`).
 *
 * @internal
 */
import * as MockCodex from "../MockCodex.ts"
import * as ProcessShell from "./processShell.ts"
import { framesTurns } from "./script.ts"

type Env = { readonly [name: string]: string | undefined }

/**
 * `bin/fake-codex.mjs`: every turn answers `Hello from fake-codex #<n>: <prompt>` in `FAKE_CODEX_DELTAS` pieces
 * `FAKE_CODEX_FRAME_DELAY_MS` apart; a prompt that mentions `FAKE_CODEX_COMMAND` runs that command first (asking the
 * host when the thread's approval policy says so).
 */
const fakeScript = (env: Env): MockCodex.Script => {
  const frameDelay = Number(env.FAKE_CODEX_FRAME_DELAY_MS ?? "0")
  const deltas = Math.max(1, Number(env.FAKE_CODEX_DELTAS ?? "3"))
  let turns = 0
  return MockCodex.make([], {
    otherwise: (prompt) => {
      const text = `Hello from fake-codex #${++turns}: ${prompt}`
      const size = Math.ceil(text.length / deltas)
      return [
        MockCodex.text(Array.from({ length: deltas }, (_, i) => text.slice(i * size, (i + 1) * size)), {
          delay: frameDelay
        })
      ]
    },
    timing: { ...MockCodex.noWait, firstToken: frameDelay }
  })
}

/** `bin/fast-codex.mjs` (the benchmarks' server): a prompt `FRAMES:<n>` streams n text deltas, at once. */
const fastScript = (env: Env): MockCodex.Script =>
  MockCodex.make([], {
    otherwise: framesTurns(Number(env.FAST_CODEX_FRAMES ?? "3"), (chunks) => MockCodex.text(chunks)),
    timing: MockCodex.noWait
  })

/** Runs this process as a fake `codex app-server`. */
export const main = (options: { readonly fast: boolean }): void => {
  const env = process.env
  ProcessShell.run<MockCodex.Fault>({
    simulator: MockCodex.simulator(options.fast ? fastScript(env) : fakeScript(env)),
    batchBytes: Number(env.FAST_CODEX_BATCH_BYTES ?? String(256 * 1024)),
    endInputOnEof: true
  })
}
