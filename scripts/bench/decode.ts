/**
 * What decoding a tiny turn costs, apart from everything else: the lines the fast fake prints for one tiny turn
 * (`FRAMES:1`, the turn every round-trip figure runs), decoded in a loop by `JSON.parse` alone and by
 * `ClaudeProtocol.decodeLine` (parse, dispatch, the frame's guard), per turn and per line.
 *
 *   node scripts/bench/decode.ts [iterations per round (20000)]
 *
 * Not part of `pnpm bench`: it says how much of a turn's host CPU is the decode's floor (JSON.parse, which every
 * host pays) and how much is Tether's validation on top.
 */
import { spawn } from "node:child_process"
import { ClaudeProtocol } from "../../packages/claude/src/index.ts"
import { claudeArgs, fakeClaude, fakeEnv, initializeLine, prompt, userMessageLine } from "./fake.ts"

const iterations = Number(process.argv[2] ?? 20_000)

/** The lines of one tiny turn, as the fake prints them after the initialize response. */
const tinyTurn = (): Promise<ReadonlyArray<string>> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fakeClaude, ...claudeArgs], {
      stdio: ["pipe", "pipe", "ignore"],
      env: fakeEnv()
    })
    const turn: Array<string> = []
    let pending = ""
    let initialized = false
    child.stdout.setEncoding("utf8").on("data", (data: string) => {
      const lines = (pending + data).split("\n")
      pending = lines.pop()!
      for (const line of lines) {
        if (!initialized) {
          initialized = line.includes(`"type":"control_response"`)
          if (initialized) child.stdin.write(userMessageLine(prompt(1)) + "\n")
          continue
        }
        turn.push(line)
        if (line.includes(`"state":"completed"`)) {
          child.kill()
          resolve(turn)
        }
      }
    })
    child.once("error", reject)
    child.stdin.write(initializeLine("bench-init") + "\n")
  })

const perTurn = (lines: ReadonlyArray<string>, decode: (line: string) => unknown): number => {
  for (let i = 0; i < 2_000; i++) for (const line of lines) decode(line)
  const start = performance.now()
  for (let i = 0; i < iterations; i++) for (const line of lines) decode(line)
  return ((performance.now() - start) * 1_000) / iterations
}

const lines = await tinyTurn()
const bytes = lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0)
// Interleaved rounds, the fastest of each kept: what the machine's other load adds is not the decoder's.
let parse = Number.POSITIVE_INFINITY
let decode = Number.POSITIVE_INFINITY
for (let round = 0; round < 5; round++) {
  parse = Math.min(parse, perTurn(lines, (line) => JSON.parse(line)))
  decode = Math.min(decode, perTurn(lines, (line) => ClaudeProtocol.decodeLine(line)))
}
console.log(`one tiny turn: ${lines.length} lines, ${bytes} bytes; ${iterations} iterations`)
console.log(`JSON.parse: ${parse.toFixed(2)} µs per turn`)
console.log(
  `ClaudeProtocol.decodeLine: ${decode.toFixed(2)} µs per turn (${(decode - parse).toFixed(2)} µs over the parse)`
)
console.log("\n| µs decodeLine | µs JSON.parse | bytes | frame |\n| ---: | ---: | ---: | --- |")
for (const line of lines) {
  const json = JSON.parse(line) as {
    readonly type: string
    readonly subtype?: string
    readonly event?: { readonly type: string }
  }
  const kind = [json.type, json.subtype ?? json.event?.type].filter((part) => part !== undefined).join("/")
  const one = (f: (line: string) => unknown) => perTurn([line], f)
  console.log(
    `| ${one((l) => ClaudeProtocol.decodeLine(l)).toFixed(2)} | ${one((l) => JSON.parse(l)).toFixed(2)} | ${
      Buffer.byteLength(line)
    } | ${kind} |`
  )
}
