/**
 * The simulated `codex app-server` on its own, sans-IO: stdin lines, signals and faults in at given times, stdout
 * lines, stderr and the exit out at the times the simulator hands them out. No Effect, no clock but the table's.
 *
 * The recorded transcripts of the real server (packages/codex/test/fixtures/codex/<version>/, `pnpm
 * fixtures:record:codex`) are the tables: fed what the host wrote in each (with the simulator's own thread and turn
 * ids in place of the recorded ones), the simulator answers with the same sequence of lines, each carrying only
 * fields the real line of that kind carries.
 */
import { assert, describe, it } from "@effect/vitest"
import * as CodexProtocol from "@tether/codex/CodexProtocol"
import { Result } from "effect"
import * as fc from "fast-check"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MockCodex from "../src/MockCodex.ts"
import type * as Simulator from "../src/Simulator.ts"
import * as Play from "./support/Play.ts"
import type { Out } from "./support/Play.ts"

type Input = Play.Input<MockCodex.Fault>

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>

const launch = (options: { readonly args?: ReadonlyArray<string>; readonly env?: Record<string, string> } = {}) => ({
  args: options.args ?? ["app-server"],
  env: options.env ?? { CODEX_HOME: "/home/user/.codex" },
  cwd: "/home/user/project",
  pid: 7
})

/** Plays `inputs` (at their times) against the simulator until `until`, collecting what it outputs and when. */
const play = (
  options: {
    readonly script?: MockCodex.Script
    readonly args?: ReadonlyArray<string>
    readonly inputs: ReadonlyArray<readonly [number, Input]>
    readonly until?: number
  }
): Array<Out> =>
  Play.play(MockCodex.simulator(options.script)(launch(options), 0), options.inputs, options.until ?? 10_000)

const lines = (out: ReadonlyArray<Out>): Array<Json> =>
  out.flatMap(({ output }) => output._tag === "Stdout" ? [JSON.parse(output.line) as Json] : [])

/** A compact name for a server line: its method or response, and what it says about items, turns and threads. */
const kind = (line: Json): string => {
  if (typeof line.method !== "string") {
    if (line.error !== undefined) return `error ${line.error.code}`
    const result = line.result
    return result?.thread !== undefined ? "response thread" : result?.turn !== undefined ? "response turn" : "response"
  }
  const params = line.params ?? {}
  switch (line.method) {
    case "item/started":
    case "item/completed":
      return `${line.method} ${params.item.type}${params.item.status === undefined ? "" : ` ${params.item.status}`}`
    case "turn/completed":
      return `turn/completed ${params.turn.status}`
    case "thread/status/changed":
      return `thread/status/changed ${params.status.type}${
        params.status.activeFlags?.length > 0 ? ` ${params.status.activeFlags.join(",")}` : ""
      }`
    case "error":
      return `error willRetry=${params.willRetry}`
    default:
      return "id" in line ? `request ${line.method}` : line.method
  }
}

/** A compact name for an output. */
const name = (output: Simulator.Output): string => {
  switch (output._tag) {
    case "Stdout":
      return kind(JSON.parse(output.line))
    case "TooLong":
      return `TooLong ${output.length}`
    case "Stderr":
      return `stderr ${output.text.trim()}`
    case "Exit":
      return output.status._tag === "Exited" ? `exit ${output.status.code}` : `killed ${output.status.signal}`
  }
}

const timeline = (out: ReadonlyArray<Out>): Array<string> =>
  out.filter(({ output }) => output._tag !== "Stderr").map(({ at, output }) => `${at} ${name(output)}`)

// The host's lines, as CodexSession writes them.
const request = (id: number, method: string, params?: unknown) => CodexProtocol.encodeRequest(id, method, params)
const initialize = request(0, "initialize", { clientInfo: { name: "tether", title: null, version: "0.2.0" } })
const initialized = CodexProtocol.encodeNotification("initialized")
const threadStart = (params: object = {}) => request(1, "thread/start", { cwd: "/home/user/project", ...params })
const turnStart = (id: number, threadId: string, text: string) =>
  request(id, "turn/start", { threadId, input: [{ type: "text", text, text_elements: [] }] })

/** The thread id of the first thread a simulator with pid 7 starts (ids are deterministic). */
const handshake = (): { readonly threadId: string } => {
  const out = play({ inputs: [[0, initialize], [0, initialized], [0, threadStart()]] })
  const response = lines(out).find((line) => line.id === 1)
  return { threadId: response?.result.thread.id }
}

// ---------------------------------------------------------------------------------------------------------------
// The transcripts as tables
// ---------------------------------------------------------------------------------------------------------------

const fixtures = Path.join(import.meta.dirname, "../../codex/test/fixtures/codex")
const latest = Fs.readdirSync(fixtures).sort().at(-1)!

interface Entry {
  readonly t: number
  readonly dir: ">" | "<" | "err" | "note"
  readonly msg?: Json
  readonly text?: string
}

const transcript = (scenario: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(fixtures, latest, `${scenario}.ndjson`), "utf8").split("\n").filter((line) =>
    line.length > 0
  ).map((line) => JSON.parse(line) as Entry)

/**
 * What the recording's mock model did for a prompt, as a script step list: the markers of the recorder
 * (scripts/fixtures/codex/record.ts) read the same way.
 */
const markerSteps = (prompt: string): ReadonlyArray<MockCodex.Step> => {
  const marker = /^\[(\w+)(?: ([^\]]*))?\] ?(.*)$/.exec(prompt)
  const hello = `Hello from the mock: ${prompt}`
  if (marker === null) return [MockCodex.text(hello)]
  const [, tag, arg = "", rest] = marker
  switch (tag) {
    case "chunks": {
      const n = Number(arg)
      const size = Math.ceil(hello.length / n)
      return [MockCodex.text(Array.from({ length: n }, (_, i) => hello.slice(i * size, (i + 1) * size)))]
    }
    case "exec": {
      const sleeping = /^sleep (\d+)/.exec(rest)
      const echo = / && echo (\w+)$/.exec(rest)
      return [
        MockCodex.command({
          command: rest,
          output: echo === null ? "" : `${echo[1]}\n`,
          duration: sleeping === null ? undefined : Number(sleeping[1]) * 1000
        })
      ]
    }
    case "escalate":
      return [MockCodex.command({ command: rest, escalate: "the mock asks to leave the sandbox" })]
    case "patch":
      return [MockCodex.fileChange({ path: arg, diff: `${rest}\n` })]
    case "slow": {
      const [n, interval] = arg.split(" ").map(Number)
      return [MockCodex.text(Array.from({ length: n }, (_, i) => `w${i} `), { delay: interval })]
    }
    case "error":
      // With retries left (`once`), the failure is invisible to the client.
      return arg.endsWith("once") ? [MockCodex.text(hello)] : [MockCodex.apiError({ status: Number(arg) })]
    case "drop":
      return [MockCodex.retry({ partial: "Hello from" }), MockCodex.text(hello)]
    default:
      return [MockCodex.text(hello)]
  }
}

/** A fresh script each time: a script is also where the threads its processes started are kept. */
const recorded = () => MockCodex.make([], { otherwise: markerSteps, timing: { command: 400 } })

/** The spawn's argv and environment, from a transcript's `spawn args=[…] env={…}` note. */
const spawnOf = (text: string) => {
  const [, args, env] = /^spawn args=(\[.*\]) env=(\{.*\})$/.exec(text)!
  return { args: JSON.parse(args) as Array<string>, env: JSON.parse(env) as Record<string, string> }
}

/** Keys of `fake` the `real` object does not have, recursively through objects (arrays: their first elements). */
const extraKeys = (fake: unknown, real: unknown, path = ""): Array<string> => {
  if (Array.isArray(fake) && Array.isArray(real)) {
    return fake.length > 0 && real.length > 0 ? extraKeys(fake[0], real[0], `${path}[0]`) : []
  }
  if (typeof fake !== "object" || fake === null || typeof real !== "object" || real === null) return []
  return Object.keys(fake).flatMap((key) =>
    key in real
      ? extraKeys((fake as Json)[key], (real as Json)[key], `${path}.${key}`)
      : [`${path}.${key}`]
  )
}

/**
 * Replays one process of a transcript against the simulator: each host line is written once the simulator has
 * printed as many lines as the server had before it, with the server's recorded ids replaced by the simulator's
 * (learnt into `ids`, which a transcript's processes share). Returns the simulator's lines and the server's.
 */
const replay = (
  entries: ReadonlyArray<Entry>,
  script: MockCodex.Script,
  ids: Map<string, string>
): { readonly simulated: Array<Json>; readonly real: Array<Json>; readonly exit: Simulator.ExitStatus | undefined } => {
  const spawn = spawnOf(entries.find((entry) => entry.text?.startsWith("spawn args="))!.text!)
  const simulator = MockCodex.simulator(script)({ ...launch({ args: spawn.args, env: spawn.env }) }, 0)
  const real = entries.filter((entry) => entry.dir === "<").map((entry) => entry.msg!)
  const simulated: Array<Json> = []
  let exit: Simulator.ExitStatus | undefined
  let now = 0
  /** Runs the simulator until it printed `count` lines (or exited, or has nothing more to do for a minute). */
  const until = (count: number) => {
    while (simulated.length < count && exit === undefined) {
      const output = simulator.poll(now)
      if (output === undefined) {
        const wake = simulator.nextWake()
        if (wake === Number.POSITIVE_INFINITY || wake > now + 60_000) return
        now = wake
        continue
      }
      if (output._tag === "Exit") exit = output.status
      if (output._tag !== "Stdout") continue
      const line = JSON.parse(output.line) as Json
      const recorded = real[simulated.length]
      // Learn the simulator's ids for the recorded ones: threads and turns, as their responses name them.
      for (const key of ["thread", "turn"]) {
        const mine = line.result?.[key]?.id
        const theirs = recorded?.result?.[key]?.id
        if (typeof mine === "string" && typeof theirs === "string") ids.set(theirs, mine)
      }
      simulated.push(line)
    }
  }
  let printed = 0
  for (const entry of entries) {
    if (entry.dir === "<") printed++
    else if (entry.dir === ">") {
      until(printed)
      let line = JSON.stringify(entry.msg)
      for (const [theirs, mine] of ids) line = line.replaceAll(theirs, mine)
      simulator.write(now, line)
    } else if (entry.dir === "note" && entry.text === "closing stdin (EOF)") {
      until(printed)
      simulator.endInput(now)
    }
  }
  until(Number.POSITIVE_INFINITY)
  return { simulated, real, exit }
}

const scenarios = Fs.readdirSync(Path.join(fixtures, latest)).filter((file) => file.endsWith(".ndjson")).map((
  file
) => file.slice(0, -".ndjson".length)).sort()

describe("MockCodex.simulator", () => {
  describe(`against the recorded transcripts of codex ${latest}`, () => {
    it("there are transcripts", () => {
      assert.isAtLeast(scenarios.length, 15)
    })

    it.each(scenarios)("%s: the same lines in the same order, with fields the real lines use", (scenario) => {
      // The same script for every process of a transcript: a resumed thread is the one the first process started.
      const script = recorded()
      const entries = transcript(scenario)
      const segments: Array<Array<Entry>> = []
      for (const entry of entries) {
        if (entry.text?.startsWith("spawn args=")) segments.push([])
        segments.at(-1)?.push(entry)
      }
      const ids = new Map<string, string>()
      for (const [i, segment] of segments.entries()) {
        const { exit, real, simulated } = replay(segment, script, ids)
        const what = `${scenario}, process ${i + 1}`
        assert.deepStrictEqual(simulated.map(kind), real.map(kind), what)
        simulated.forEach((line, n) => assert.deepStrictEqual(extraKeys(line, real[n]), [], `${what}: line ${n}`))
        const code = /^exit code=(\d+)/.exec(segment.find((entry) => entry.text?.startsWith("exit code="))!.text!)
        assert.deepStrictEqual(exit, { _tag: "Exited", code: Number(code![1]) }, what)
      }
    })
  })

  describe("the handshake", () => {
    it("nothing before startup; initialize, then the announcements once initialized, then the thread", () => {
      const out = play({ inputs: [[0, initialize], [0, initialized], [0, threadStart()]] })
      assert.deepStrictEqual(timeline(out), [
        "155 response",
        "155 configWarning",
        "155 remoteControl/status/changed",
        "185 response thread",
        "187 thread/started"
      ])
      const [init, , , thread] = lines(out)
      assert.strictEqual(init.result.userAgent, "tether/0.171.0 (Debian 12.0.0; x86_64) unknown (tether; 0.2.0)")
      assert.strictEqual(init.result.codexHome, "/home/user/.codex")
      assert.strictEqual(thread.result.thread.cliVersion, "0.171.0")
      assert.strictEqual(thread.result.approvalPolicy, "on-request")
      assert.deepStrictEqual(thread.result.sandbox, { type: "readOnly", networkAccess: false })
    })

    it("a request before initialize, a second initialize, an unknown method: JSON-RPC errors", () => {
      const out = lines(play({
        inputs: [
          [0, threadStart()],
          [10, initialize],
          [10, request(5, "initialize", {})],
          [10, request(6, "newConversation", {})],
          [10, request(7, "turn/start", { threadId: "x" })],
          [10, request(8, "turn/start", { threadId: "nope", input: [] })]
        ]
      }))
      assert.deepStrictEqual(out.map((line) => [line.id, line.error?.message.slice(0, 40)]), [
        [1, "Not initialized"],
        [0, undefined],
        [5, "Already initialized"],
        [6, "Invalid request: unknown variant `newCon"],
        [7, "Invalid request: missing field `input`"],
        [8, "thread not found: nope"]
      ])
      assert.isTrue(out.filter((line) => line.error !== undefined).every((line) => line.error.code === -32600))
    })

    it("thread/start takes the thread's settings from its params, then from -c overrides", () => {
      const out = lines(play({
        args: ["app-server", "-c", `model="gpt-5.5"`, "-c", `model_provider="mock"`, "-c", `approval_policy="never"`],
        inputs: [[0, initialize], [0, threadStart({ sandbox: "workspace-write", ephemeral: true })]]
      }))
      const result = out.find((line) => line.id === 1)!.result
      assert.deepStrictEqual(
        [result.model, result.modelProvider, result.approvalPolicy, result.sandbox.type, result.thread.path],
        ["gpt-5.5", "mock", "never", "workspaceWrite", null]
      )
    })

    it("a launch that is not `app-server` exits 2", () => {
      assert.deepStrictEqual(timeline(play({ args: ["exec", "hi"], inputs: [] })), ["150 exit 2"])
    })
  })

  describe("turns", () => {
    const { threadId } = handshake()
    const started = (script: MockCodex.Script, extra: ReadonlyArray<readonly [number, Input]> = []) =>
      play({
        script,
        inputs: [[0, initialize], [0, initialized], [0, threadStart()], [300, turnStart(2, threadId, "go")], ...extra]
      })

    it("a streamed turn at the default timing: response, started, the user message, deltas, usage, completed", () => {
      const out = started(MockCodex.make([MockCodex.turn(MockCodex.text(["Hel", "lo"]))]))
      assert.deepStrictEqual(timeline(out).slice(5), [
        "310 response turn",
        "310 thread/status/changed active",
        "310 turn/started",
        "315 item/started userMessage",
        "315 item/completed userMessage",
        "375 item/started agentMessage",
        "375 item/agentMessage/delta",
        "400 item/agentMessage/delta",
        "400 item/completed agentMessage",
        "400 thread/tokenUsage/updated",
        "400 account/rateLimits/updated",
        "410 thread/status/changed idle",
        "410 turn/completed completed"
      ])
      const completed = lines(out).at(-1)!
      assert.deepStrictEqual(completed.params.turn.items.map((item: Json) => item.text), ["Hello"])
      assert.strictEqual(completed.params.turn.durationMs, 110)
      const usage = lines(out).find((line) => line.method === "thread/tokenUsage/updated")!
      assert.strictEqual(usage.params.tokenUsage.last.outputTokens, 2)
    })

    it("every line it prints is what the codec prints, decodes by its shape, and notifications carry emittedAtMs", () => {
      const script = MockCodex.make([
        MockCodex.turn(
          MockCodex.text(["a\"b", "\\n", "é 😀", "\u0001"]),
          MockCodex.command({ command: "echo 'x'", output: "x\n", approval: true }),
          MockCodex.fileChange({ path: "f.txt", approval: false }),
          MockCodex.retry({ partial: "p" })
        )
      ])
      const out = started(script, [[800, JSON.stringify({ id: 0, result: { decision: "accept" } })]])
      const all = out.flatMap(({ at, output }) => output._tag === "Stdout" ? [[at, output.line] as const] : [])
      assert.isAbove(all.length, 25)
      for (const [at, line] of all) {
        const decoded = CodexProtocol.decodeLine(line)
        assert.isTrue(Result.isSuccess(decoded), line)
        const message = Result.getOrThrow(decoded)
        if (message._tag === "Notification") {
          assert.strictEqual(CodexProtocol.encodeServerNotification(message.method, message.params, at), line)
        }
      }
      assert.strictEqual(lines(out).at(-1)!.params.turn.status, "completed")
    })

    it("a text delta is byte for byte the codec's encoding, whatever the text", () =>
      fc.assert(
        fc.property(fc.array(fc.string({ unit: "binary" }), { minLength: 1, maxLength: 5 }), (chunks) => {
          const out = started(MockCodex.make([MockCodex.turn(MockCodex.text(chunks))]))
          const deltas = out.flatMap(({ at, output }) =>
            output._tag === "Stdout" && output.line.startsWith(`{"method":"item/agentMessage/delta"`)
              ? [[at, output.line] as const]
              : []
          )
          assert.strictEqual(deltas.length, chunks.length)
          deltas.forEach(([at, line], i) => {
            const parsed = JSON.parse(line) as Json
            assert.strictEqual(parsed.params.delta, chunks[i])
            assert.strictEqual(CodexProtocol.encodeServerNotification(parsed.method, parsed.params, at), line)
          })
        }),
        { numRuns: 50 }
      ))

    it("approvals: their own ids from 0, routed by method; an answer to an unknown id is ignored", () => {
      const script = MockCodex.make([
        MockCodex.turn(
          MockCodex.command({ command: "one", approval: true }),
          MockCodex.fileChange({ path: "two.txt", approval: true })
        )
      ])
      const out = lines(started(script, [
        [500, JSON.stringify({ id: 9, result: { decision: "accept" } })],
        [500, JSON.stringify({ id: 0, result: { decision: "accept" } })],
        [800, JSON.stringify({ id: 1, result: { decision: "decline" } })]
      ]))
      const requests = out.filter((line) => "id" in line && "method" in line)
      assert.deepStrictEqual(requests.map((line) => [line.id, line.method]), [
        [0, "item/commandExecution/requestApproval"],
        [1, "item/fileChange/requestApproval"]
      ])
      assert.deepStrictEqual(
        out.filter((line) => line.method === "serverRequest/resolved").map((line) => line.params.requestId),
        [0, 1]
      )
      const items = out.filter((line) => line.method === "item/completed" && line.params.item.type !== "userMessage")
      assert.deepStrictEqual(items.map((line) => [line.params.item.type, line.params.item.status]), [
        ["commandExecution", "completed"],
        ["fileChange", "declined"],
        ["agentMessage", undefined]
      ])
      assert.strictEqual(out.at(-1)!.params.turn.items.at(-1).text, "Tool said: patch rejected by user")
    })

    it("the thread's approval policy decides what asks: on-request asks only for an escalated command", () => {
      const script = MockCodex.make([
        MockCodex.turn(
          MockCodex.command({ command: "inside" }),
          MockCodex.command({ command: "outside", escalate: "needs the network" })
        )
      ])
      const out = lines(started(script, [[500, JSON.stringify({ id: 0, result: { decision: "accept" } })]]))
      const asked = out.filter((line) => line.method === "item/commandExecution/requestApproval")
      assert.deepStrictEqual(asked.map((line) => [line.params.command, line.params.reason]), [
        ["/bin/bash -lc 'outside'", "needs the network"]
      ])
    })

    it("turn/interrupt: {} and turn/completed interrupted; the message never completes; a late interrupt is an error", () => {
      const script = MockCodex.make([MockCodex.turn(MockCodex.text(["w0 ", "w1 ", "w2 "], { delay: 100 }))])
      const interrupt = (id: number) => (turnId: string) => request(id, "turn/interrupt", { threadId, turnId })
      const first = lines(started(script))
      const turnId = first.find((line) => line.id === 2)!.result.turn.id
      const out = started(script, [[500, interrupt(3)(turnId)], [600, interrupt(4)(turnId)]])
      assert.deepStrictEqual(timeline(out).slice(-7), [
        "375 item/started agentMessage",
        "475 item/agentMessage/delta",
        "515 account/rateLimits/updated",
        "515 response",
        "515 thread/status/changed idle",
        "515 turn/completed interrupted",
        "615 error -32600"
      ])
      assert.isFalse(
        lines(out).some((line) => line.method === "item/completed" && line.params.item.type === "agentMessage")
      )
    })
  })

  describe("the process", () => {
    const { threadId } = handshake()
    const open = [[0, initialize], [0, initialized], [0, threadStart()]] as const
    const go = (text = "go") => [300, turnStart(2, threadId, text)] as const

    it("stdin EOF and SIGTERM end it with exit code 0, mid-turn too; SIGKILL kills it; IgnoreSigterm outlives SIGTERM", () => {
      const slow = MockCodex.make([MockCodex.turn(MockCodex.text(["a", "b"], { delay: 1_000 }))])
      assert.deepStrictEqual(timeline(play({ inputs: [[0, { eof: true }]] })), ["170 exit 0"])
      const eof = timeline(play({ script: slow, inputs: [...open, go(), [400, { eof: true }]] }))
      assert.deepStrictEqual(eof.slice(-2), ["375 item/started agentMessage", "420 exit 0"])
      assert.deepStrictEqual(
        timeline(play({ script: slow, inputs: [...open, go(), [400, { signal: "SIGTERM" }]] })).at(-1),
        "400 exit 0"
      )
      assert.deepStrictEqual(timeline(play({ inputs: [[0, { signal: "SIGKILL" }]] })), ["0 killed SIGKILL"])
      const stubborn = MockCodex.make([], { faults: [MockCodex.ignoreSigterm] })
      assert.deepStrictEqual(
        timeline(play({ script: stubborn, inputs: [[0, { signal: "SIGTERM" }], [10, { signal: "SIGKILL" }]] })),
        ["10 killed SIGKILL"]
      )
    })

    it("a line that is not a JSON-RPC message is logged on stderr and ignored", () => {
      const out = play({ inputs: [[0, "nope"], [0, `{"jsonrpc":"2.0"}`], [0, initialize]] })
      const stderr = out.flatMap(({ output }) => output._tag === "Stderr" ? [output.text] : [])
      assert.strictEqual(stderr.filter((text) => text.includes("Failed to deserialize JSONRPCMessage")).length, 2)
      assert.deepStrictEqual(timeline(out), ["155 response"])
    })

    it("faults: a crash, a hang, requests never answered, a refused turn", () => {
      const crashed = play({ inputs: [[0, { fault: MockCodex.crash({ code: 3, stderr: "boom\n" }) }]] })
      assert.deepStrictEqual(crashed.map(({ output }) => name(output)), ["stderr boom", "exit 3"])
      const hung = MockCodex.make([], { faults: [MockCodex.hang] })
      assert.deepStrictEqual(
        timeline(play({ script: hung, inputs: [[0, initialize], [0, { eof: true }], [900, { signal: "SIGTERM" }]] })),
        ["900 killed SIGTERM"]
      )
      const mute = MockCodex.make([], { faults: [MockCodex.neverAnswer("model/list")] })
      assert.deepStrictEqual(
        lines(
          play({
            script: mute,
            inputs: [[0, initialize], [0, request(1, "model/list", {}), [0, request(2, "account/read", {})]]] as never
          })
        )
          .map((line) => line.id),
        [0]
      )
      const refusing = MockCodex.make([MockCodex.when("busy", MockCodex.rejectTurn())])
      const refused = lines(
        play({ script: refusing, inputs: [...open, go("busy now"), [400, turnStart(3, threadId, "ok")]] })
      )
      assert.deepStrictEqual(refused.find((line) => line.id === 2)?.error, {
        code: -32001,
        message: "Server overloaded; retry later."
      })
      assert.strictEqual(refused.at(-1)?.params.turn.status, "completed")
    })

    it("a stall holds the turn's lines back while requests are still answered; IgnoreInterrupts answers and goes on", () => {
      const script = MockCodex.make([MockCodex.turn(MockCodex.text(["a", "b"], { delay: 100 }))])
      const stalled = timeline(play({
        script,
        inputs: [...open, go(), [380, { fault: MockCodex.stall(1_000) }], [400, request(9, "account/read", {})]]
      }))
      assert.deepStrictEqual(stalled.filter((line) => Number(line.split(" ")[0]) > 380), [
        "405 response",
        "1380 item/agentMessage/delta",
        "1480 item/agentMessage/delta",
        "1480 item/completed agentMessage",
        "1480 thread/tokenUsage/updated",
        "1480 account/rateLimits/updated",
        "1490 thread/status/changed idle",
        "1490 turn/completed completed"
      ])
      const deaf = MockCodex.make(script.turns, { faults: [MockCodex.ignoreInterrupts] })
      const turnId =
        lines(play({ script: deaf, inputs: [...open, go()] })).find((line) => line.id === 2)!.result.turn.id
      const out = lines(play({
        script: deaf,
        inputs: [...open, go(), [450, request(3, "turn/interrupt", { threadId, turnId })]]
      }))
      assert.deepStrictEqual(out.find((line) => line.id === 3)?.result, {})
      assert.strictEqual(out.at(-1)?.params.turn.status, "completed")
    })

    it("a thread resumed by a later process of the same script; an unknown or ephemeral one has no rollout", () => {
      const script = MockCodex.make()
      const simulator = MockCodex.simulator(script)
      const first = lines(play({ script, inputs: [...open, go("remember")] }))
      const kept = first.find((line) => line.id === 1)!.result.thread.id
      const resume = (id: string) => request(1, "thread/resume", { threadId: id, excludeTurns: true })
      const again = play({ script, inputs: [[0, initialize], [0, resume(kept)], [300, turnStart(2, kept, "which?")]] })
      assert.deepStrictEqual(timeline(again).slice(0, 6), [
        "155 response",
        "185 thread/status/changed idle",
        "185 response thread",
        "310 thread/tokenUsage/updated",
        "310 thread/goal/cleared",
        "310 response turn"
      ])
      assert.strictEqual(lines(again)[2].result.thread.preview, "remember")
      const ephemeral = lines(play({ script, inputs: [[0, initialize], [0, threadStart({ ephemeral: true })]] }))
      const gone = ephemeral.find((line) => line.id === 1)!.result.thread.id
      for (const id of [gone, "00000000-0000-4000-8000-000000000000"]) {
        const out = lines(play({ script, inputs: [[0, initialize], [0, resume(id)]] }))
        assert.deepStrictEqual(out[1].error, { code: -32600, message: `no rollout found for thread id ${id}` })
      }
      // Another CODEX_HOME, other rollouts.
      const elsewhere = simulator({ ...launch({ env: { CODEX_HOME: "/elsewhere" } }) }, 0)
      elsewhere.write(0, initialize)
      elsewhere.write(0, resume(kept))
      const outputs: Array<string> = []
      for (let now = 0; now < 1_000; now = Math.min(1_000, elsewhere.nextWake())) {
        for (let out = elsewhere.poll(now); out !== undefined; out = elsewhere.poll(now)) outputs.push(name(out))
      }
      assert.deepStrictEqual(outputs.filter((line) => !line.startsWith("stderr")), ["response", "error -32600"])
    })
  })
})
