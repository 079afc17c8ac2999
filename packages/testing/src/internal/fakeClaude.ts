/**
 * The scripts of the fake `claude` executables, read from their environment, and their entry point: the Claude
 * simulator run as the process itself (`processShell.ts`). What is about the process rather than the protocol
 * (descendants, a flood on stderr) stays in the executables.
 *
 * @internal
 */
import * as Fs from "node:fs"
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

type Factory = Simulator.Factory<MockClaude.Fault>

/** A fault a prompt of the fast fake asks for: `FAULT:<name>` or `FAULT:<name>=<value>`. */
interface Directive {
  readonly name: string
  readonly value: string | undefined
}

const directivesOf = (text: string): ReadonlyArray<Directive> =>
  Array.from(text.matchAll(/FAULT:([a-z-]+)(?:=([A-Za-z0-9-]+))?/g), (match) => ({ name: match[1], value: match[2] }))

const numberOr = (value: string | undefined, fallback: number | undefined): number | undefined =>
  value === undefined ? fallback : Number(value)

/**
 * The steps of a turn whose prompt asks for faults (`pnpm soak`): before the answer, `hang` (the process stops
 * doing anything), `stall[=<ms>]` (the turn pauses, forever without a value), `garbage[=<n>]` (n lines that are not
 * JSON), `tool=<word>` (a Bash call that asks the host's permission, with `soak: <word>` in its input); after the
 * answer's text, before its result, `crash` (exit code 3).
 */
const faultSteps = (
  directives: ReadonlyArray<Directive>,
  answer: MockClaude.Step
): ReadonlyArray<MockClaude.Step> => {
  const before: Array<MockClaude.Step> = []
  const after: Array<MockClaude.Step> = []
  for (const { name, value } of directives) {
    if (name === "hang") before.push(MockClaude.hang)
    else if (name === "stall") before.push(MockClaude.stall(numberOr(value, undefined)))
    else if (name === "garbage") {
      for (let i = numberOr(value, 1)!; i > 0; i--) before.push(MockClaude.malformed())
    } else if (name === "tool") {
      before.push(MockClaude.tool({ name: "Bash", input: { command: "touch soak", soak: value ?? "" }, duration: 0 }))
    } else if (name === "crash") after.push(MockClaude.crash({ code: 3, stderr: "fast-claude: crashing mid-turn\n" }))
  }
  return [...before, answer, ...after]
}

/**
 * The faults of the fast fake that are about the process, acted on when a prompt that asks for them reaches the
 * process (lines that came before it in the same read may not be answered yet): `crash-on-read` (exit code 3 before
 * the receipt), `slow-receipt=<ms>` (this prompt's receipt, and whatever is read after it, comes that late),
 * `ignore-interrupts` and `ignore-sigterm` (from now on), `stdout-closed` (stdout is closed; the process goes on, its
 * output lost, until stdin's EOF or a signal ends it).
 */
const withProcessFaults = (factory: Factory): Factory => (launch, start) => {
  const simulator = factory(launch, start)
  let slowed = false
  let closed = false
  const write = (now: number, line: string): void => {
    const directives = line.includes("FAULT:") ? directivesOf(line) : []
    // A slow receipt is this prompt's: the next prompt that does not ask for one is received at once again.
    if (slowed && line.includes(`"type":"user"`) && !directives.some(({ name }) => name === "slow-receipt")) {
      slowed = false
      simulator.trigger(now, MockClaude.slowReceipt(0))
    }
    for (const { name, value } of directives) {
      if (name === "crash-on-read") {
        return simulator.trigger(now, MockClaude.crash({ code: 3, stderr: "fast-claude: crashing on a prompt\n" }))
      }
      if (name === "slow-receipt") {
        slowed = true
        simulator.trigger(now, MockClaude.slowReceipt(numberOr(value, 1_000)!))
      } else if (name === "ignore-interrupts") simulator.trigger(now, MockClaude.ignoreInterrupts)
      else if (name === "ignore-sigterm") simulator.trigger(now, MockClaude.ignoreSigterm)
      else if (name === "stdout-closed" && !closed) {
        closed = true
        Fs.closeSync(1)
        // Descriptor 1 is taken again at once, so that nothing this process opens later lands on it.
        Fs.openSync("/dev/null", "w")
      }
    }
    simulator.write(now, line)
  }
  const poll = (now: number): Simulator.Output | undefined => {
    for (let out = simulator.poll(now); out !== undefined; out = simulator.poll(now)) {
      if (!closed || (out._tag !== "Stdout" && out._tag !== "TooLong")) return out
    }
    return undefined
  }
  return {
    write,
    poll,
    endInput: (now) => simulator.endInput(now),
    signal: (now, signal) => simulator.signal(now, signal),
    trigger: (now, fault) => simulator.trigger(now, fault),
    nextWake: () => simulator.nextWake()
  }
}

/**
 * The prompt log of the fast fake (`pnpm chaos` counts executions with it): with `FAST_CLAUDE_PROMPT_LOG` set to a
 * file, every prompt whose turn starts appends one JSON line to it, `{ pid, tag, at, prompt }` (`tag`: the value of
 * `FAST_CLAUDE_PROMPT_LOG_TAG`, e.g. the session's id; `at`: epoch milliseconds). One `appendFileSync` per line: lines
 * of several processes do not interleave.
 */
const promptLog = (env: Env): (prompt: string) => void => {
  const file = env.FAST_CLAUDE_PROMPT_LOG
  if (file === undefined || file.length === 0) return () => {}
  const tag = env.FAST_CLAUDE_PROMPT_LOG_TAG ?? ""
  return (prompt) => Fs.appendFileSync(file, `${JSON.stringify({ pid: process.pid, tag, at: Date.now(), prompt })}\n`)
}

/**
 * `bin/fast-claude.mjs` (the benchmarks' CLI): a prompt `FRAMES:<n>` streams n text deltas, at once. A prompt with
 * `FAULT:` words gets the faults they ask for (see {@link faultSteps} and {@link withProcessFaults}).
 */
const fastScript = (env: Env): MockClaude.Script => {
  const turns = framesTurns(Number(env.FAST_CLAUDE_FRAMES ?? "3"), (chunks) => MockClaude.text(chunks))
  const log = promptLog(env)
  return MockClaude.make([], {
    otherwise: (prompt) => {
      log(prompt)
      if (!prompt.includes("FAULT:")) return turns(prompt)
      const match = /FRAMES:(\d+)/.exec(prompt)
      const n = match === null ? Number(env.FAST_CLAUDE_FRAMES ?? "3") : Number(match[1])
      return faultSteps(directivesOf(prompt), MockClaude.text(Array.from({ length: n }, (_, i) => `tok ${i} `)))
    },
    timing: noWait
  })
}

/** Runs this process as a fake `claude`. */
export const main = (options: { readonly fast: boolean; readonly onTurn: () => void }): void => {
  const env = process.env
  const modes = modesOf(env)
  let resulted = false
  ProcessShell.run<MockClaude.Fault>({
    simulator: options.fast
      ? withProcessFaults(MockClaude.simulator(fastScript(env)))
      : MockClaude.simulator(fakeScript(env, process.pid, options.onTurn)),
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
