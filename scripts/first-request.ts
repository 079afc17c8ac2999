/**
 * What each difference between Tether's default configuration and the Agent SDK's costs the first request of a warm
 * CLI (docs/performance.md, "Warm sessions and dormant conversations"): the real `claude` (the pinned 2.1.332)
 * offline against MockAnthropic on 127.0.0.1 answering at once with 5 text deltas, started with each configuration's
 * arguments and `initialize`, initialized (and primed with `get_context_usage`, as a warm pool does: its summary,
 * `warmPrime: "local"`, or counted with the API, `"tokens"`, the default) before the clock; the clock runs from the
 * prompt's write to the first text delta on the CLI's stdout. Rounds are interleaved.
 * It prints, per configuration, the median and every sample, the first model request's size (bytes, tools, system
 * prompt) as the mock received it, and the CLI's own count of its context (`get_context_usage`).
 *
 *   scripts/netns.sh node scripts/first-request.ts --rounds 15
 *   scripts/netns.sh node scripts/first-request.ts --rounds 8 --idle 3000   # each CLI idle 3 s before its prompt
 *   scripts/netns.sh node scripts/first-request.ts --rounds 30 --idle 2000 \
 *     --only "tether (default)|the SDK's (startup())"                      # some configurations, '|' between
 *
 * Never part of the tests; the times mean something only on an idle machine.
 */
import { Effect, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Readline from "node:readline"
import { ClaudeOptions } from "../packages/claude/src/index.ts"
import * as MockAnthropic from "../packages/testing/src/MockAnthropic.ts"
import * as PinnedClaude from "../packages/testing/src/PinnedClaude.ts"
import { percentile } from "./bench/stats.ts"

const roundsAt = process.argv.indexOf("--rounds")
const rounds = roundsAt < 0 ? 10 : Number(process.argv[roundsAt + 1])
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds must be a positive integer")
const idleAt = process.argv.indexOf("--idle")
const idle = idleAt < 0 ? 0 : Number(process.argv[idleAt + 1])
if (!Number.isInteger(idle) || idle < 0) throw new Error("--idle must be a whole number of milliseconds")

const claude = PinnedClaude.resolveSync("2.1.332")

interface Configuration {
  readonly args: ReadonlyArray<string>
  readonly initialize: { readonly [key: string]: unknown }
  readonly primed: boolean
  /** Primed as `warmPrime: "tokens"` does (counted with the API), not as `"local"` (the summary). */
  readonly tokens?: boolean
}

const partial = "--include-partial-messages"
const replay = "--replay-user-messages"
const promptTool = "--permission-prompt-tool=stdio"
// What a session sends (`ClaudeSession`'s machine): the hooks, and no system prompt of its own.
const tether = { subtype: "initialize", hooks: {} }
// What the SDK's `query()` and `startup()` send without a `systemPrompt`: an empty one.
const sdk = { subtype: "initialize", systemPrompt: [""] }
const base = ClaudeOptions.protocolArgs

const configurations: { readonly [name: string]: Configuration } = {
  "tether, with a policy": { args: [...base, promptTool, partial, replay], initialize: tether, primed: true },
  "tether (default)": { args: [...base, partial, replay], initialize: tether, primed: true, tokens: true },
  "tether, warmPrime local": { args: [...base, partial, replay], initialize: tether, primed: true },
  "without the replay": { args: [...base, promptTool, partial], initialize: tether, primed: true },
  "the SDK's system prompt": { args: [...base, promptTool, partial, replay], initialize: sdk, primed: true },
  "the SDK's, primed": { args: [...base, partial], initialize: sdk, primed: true },
  "the SDK's (startup())": { args: [...base, partial], initialize: sdk, primed: false }
}

interface Sample {
  readonly ms: number
  readonly context: { readonly [category: string]: number } | undefined
}

/** One CLI: started, initialized (and primed), then one prompt; the time to its first text delta. */
const sample = (configuration: Configuration, cwd: string, env: Record<string, string>): Promise<Sample> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(claude, [...configuration.args], { cwd, env, stdio: ["pipe", "pipe", "ignore"] })
    const write = (frame: object) => child.stdin.write(`${JSON.stringify(frame)}\n`)
    let context: Sample["context"]
    let t0: number | undefined
    const prompt = () => {
      t0 = performance.now()
      const message = { role: "user", content: "hello" }
      write({ type: "user", message, parent_tool_use_id: null, session_id: "", uuid: randomUUID() })
    }
    Readline.createInterface({ input: child.stdout }).on("line", (line) => {
      const frame = JSON.parse(line)
      const id = frame.type === "control_response" ? frame.response?.request_id : undefined
      if (id === "init") {
        if (!configuration.primed) return void setTimeout(prompt, idle)
        return void write({
          type: "control_request",
          request_id: "prime",
          request: configuration.tokens === true
            ? { subtype: "get_context_usage" }
            : { subtype: "get_context_usage", detail: "summary" }
        })
      }
      if (id === "prime") {
        const usage = frame.response.response as {
          readonly totalTokens: number
          readonly categories: ReadonlyArray<{ readonly id: string; readonly tokens: number; readonly kind: string }>
        }
        const counted: Record<string, number> = { total: usage.totalTokens }
        for (const category of usage.categories) if (category.kind === "used") counted[category.id] = category.tokens
        context = counted
        return void setTimeout(prompt, idle)
      }
      const event = frame.type === "stream_event" ? frame.event : undefined
      if (t0 !== undefined && event?.type === "content_block_delta" && event.delta?.type === "text_delta") {
        const ms = performance.now() - t0
        t0 = undefined
        child.once("exit", () => resolve({ ms, context }))
        child.stdin.end()
        child.kill("SIGTERM")
      }
    })
    child.once("error", reject)
    write({ type: "control_request", request_id: "init", request: configuration.initialize })
  })

const program = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make(() => MockAnthropic.text("hi there", { chunks: 5 }))
  const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-first-request-" })
  // Tether's default environment, which the SDK sets too (the mock's offline variables are both hosts').
  const environment: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    CLAUDE_CODE_ENTRYPOINT: "sdk-ts",
    CLAUDE_CODE_SDK_READS_SESSION_STATE: "1"
  }
  for (const [name, value] of Object.entries(env)) {
    environment[name] = Redacted.isRedacted(value) ? Redacted.value(value) : value
  }
  const onlyAt = process.argv.indexOf("--only")
  const names = onlyAt < 0 ? Object.keys(configurations) : process.argv[onlyAt + 1].split("|")
  for (const name of names) if (!(name in configurations)) throw new Error(`--only: no configuration ${name}`)
  const times: { [name: string]: Array<number> } = Object.fromEntries(names.map((name) => [name, []]))
  const requests: { [name: string]: unknown } = {}
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length]
      const before = (yield* mock.requests).length
      const { context, ms } = yield* Effect.promise(() => sample(configurations[name], cwd, environment))
      times[name].push(ms)
      const request = (yield* mock.requests).slice(before).find((entry) => entry.messages._tag === "Some")
      if (request?.messages._tag === "Some") {
        const body = request.messages.value.body as { readonly system?: unknown; readonly tools?: unknown }
        requests[name] = {
          bytes: JSON.stringify(body).length,
          tools: request.messages.value.toolNames.length,
          systemBytes: JSON.stringify(body.system ?? "").length,
          ...(context === undefined ? {} : { context })
        }
      }
    }
  }
  for (const name of names) {
    const samples = times[name]
    console.log(
      `${name.padEnd(28)} median ${percentile(samples, 0.5).toFixed(0)} ms (${
        samples.map((ms) => ms.toFixed(0)).join(" ")
      }); first request ${JSON.stringify(requests[name])}`
    )
  }
})

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
