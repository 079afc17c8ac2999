/**
 * The script of the fake ACP agent, read from its environment, and its entry point: the ACP simulator run as the
 * process itself (`processShell.ts`).
 *
 * @internal
 */
import * as MockAcp from "../MockAcp.ts"
import * as ProcessShell from "./processShell.ts"
import { framesTurns } from "./script.ts"

type Env = { readonly [name: string]: string | undefined }

/**
 * Every turn answers `Hello from fake-acp #<n>: <prompt>` in `FAKE_ACP_CHUNKS` (3) pieces `FAKE_ACP_CHUNK_DELAY_MS`
 * (0) apart; a prompt that mentions `sleep` (and is none of these) runs a tool that asks permission first; `run: <shell
 * command>` runs it
 * in a client terminal and answers its output, `background: <shell command>` starts it there and leaves it running. `FAKE_ACP_FAULTS` (comma
 * separated) applies faults from the start: `ignore-stdin-eof`, `ignore-sigterm`, `ignore-cancel`, `fail-load`.
 */
const fakeScript = (env: Env): MockAcp.Script => {
  const delay = Number(env.FAKE_ACP_CHUNK_DELAY_MS ?? "0")
  const chunks = Math.max(1, Number(env.FAKE_ACP_CHUNKS ?? "3"))
  const faults = (env.FAKE_ACP_FAULTS ?? "").split(",").flatMap((name): ReadonlyArray<MockAcp.Fault> => {
    switch (name.trim()) {
      case "ignore-stdin-eof":
        return [MockAcp.ignoreStdinEof]
      case "ignore-sigterm":
        return [MockAcp.ignoreSigterm]
      case "ignore-cancel":
        return [MockAcp.ignoreInterrupts]
      case "fail-load":
        return [MockAcp.failLoad()]
      default:
        return []
    }
  })
  let turns = 0
  // Terminals the agent asks the client for carry the fake's own TEST_MARK, so that tests find them in /proc. The
  // command is the whole shell line, as real agents send it (the client runs it through a shell, as Zed does).
  const mark: { [name: string]: string } = env.TEST_MARK === undefined ? {} : { TEST_MARK: env.TEST_MARK }
  const shell = (prefix: string, wait: boolean) => (prompt: string) => [
    MockAcp.terminal(prompt.slice(prompt.indexOf(prefix) + prefix.length), { env: mark, wait })
  ]
  return MockAcp.make([
    { match: (prompt) => prompt.startsWith("run: "), once: false, steps: shell("run: ", true) },
    { match: (prompt) => prompt.startsWith("background: "), once: false, steps: shell("background: ", false) },
    MockAcp.when("sleep", MockAcp.tool({ command: "sleep 1", output: "slept" }))
  ], {
    otherwise: (prompt) => {
      const text = `Hello from fake-acp #${++turns}: ${prompt}`
      const size = Math.ceil(text.length / chunks)
      return [MockAcp.text(Array.from({ length: chunks }, (_, i) => text.slice(i * size, (i + 1) * size)), { delay })]
    },
    timing: { ...MockAcp.noWait, firstUpdate: delay },
    faults
  })
}

/** `bin/fast-acp.mjs` (the benchmarks' agent): a prompt `FRAMES:<n>` streams n text chunks, at once. */
const fastScript = (env: Env): MockAcp.Script =>
  MockAcp.make([], {
    otherwise: framesTurns(Number(env.FAST_ACP_FRAMES ?? "3"), (chunks) => MockAcp.text(chunks)),
    timing: MockAcp.noWait
  })

/** Runs this process as a fake ACP agent (with `fast`, the benchmarks' agent). */
export const main = (options: { readonly fast: boolean }): void => {
  const env = process.env
  ProcessShell.run<MockAcp.Fault>({
    simulator: MockAcp.simulator(options.fast ? fastScript(env) : fakeScript(env)),
    batchBytes: Number(env.FAST_ACP_BATCH_BYTES ?? String(256 * 1024)),
    endInputOnEof: true
  })
}
