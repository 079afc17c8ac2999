/**
 * Drives the real `claude` binary (the `@anthropic-ai/claude-code` devDependency of packages/testing) offline
 * against `MockAnthropic`, with plain `node:child_process`, and prints what happened:
 *
 *   scripts/netns.sh node scripts/real-claude-smoke.ts [--frames]
 *
 * Scenarios, in one CLI process: a plain turn; a Bash tool use (`touch x`) that makes the CLI ask `can_use_tool`,
 * answered allow with `updatedInput`; an interrupt mid-stream (the mock must see the client close); API errors
 * (529 and 400) with `CLAUDE_CODE_MAX_RETRIES=0`, counting HTTP attempts; a plain turn after the errors. Then
 * stdin EOF: the process must exit and no process carrying this run's marker variable may survive.
 *
 * Exit status 0 when every check passed.
 */
import { Effect } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import * as MockAnthropic from "../packages/testing/src/MockAnthropic.ts"

const showFrames = process.argv.includes("--frames")
const root = Path.resolve(import.meta.dirname, "..")

/** The native binary, resolved through the wrapper package (pnpm does not hoist the platform package). */
const resolveClaude = (): string => {
  const fromTesting = createRequire(Path.join(root, "packages/testing/package.json"))
  const wrapper = fromTesting.resolve("@anthropic-ai/claude-code/package.json")
  const musl = process.platform === "linux" && !(process.report?.getReport() as any)?.header?.glibcVersionRuntime
  const platform = `@anthropic-ai/claude-code-${process.platform}-${process.arch}${musl ? "-musl" : ""}`
  const pkg = createRequire(wrapper).resolve(`${platform}/package.json`)
  return Path.join(Path.dirname(pkg), process.platform === "win32" ? "claude.exe" : "claude")
}

type Frame = Record<string, any>
interface Seen {
  readonly t: number
  readonly frame: Frame
}

const failures: Array<string> = []
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`)
  if (!ok) failures.push(what)
}

const summary = (f: Frame): string => {
  switch (f.type) {
    case "system":
      return `system/${f.subtype}${f.state ? ` ${f.state}` : ""}${f.status !== undefined ? ` ${f.status}` : ""}`
    case "stream_event":
      return `stream_event ${f.event?.type}${f.event?.delta?.type ? `/${f.event.delta.type}` : ""}`
    case "control_request":
      return `control_request ${f.request?.subtype} ${f.request_id}`
    case "control_response":
      return `control_response ${f.response?.subtype} ${f.response?.request_id}`
    case "command_lifecycle":
      return `command_lifecycle ${f.state}`
    case "result":
      return `result ${f.subtype} is_error=${f.is_error} terminal_reason=${f.terminal_reason} num_turns=${f.num_turns} result=${
        JSON.stringify(f.result ?? f.errors)
      }`
    case "assistant":
      return `assistant ${
        JSON.stringify(f.message?.content?.map((c: Frame) => c.type === "text" ? c.text : `${c.type}:${c.name}`))
      }${f.message?.model === "<synthetic>" ? " (synthetic)" : ""}${f.aborted ? " aborted" : ""}`
    case "user":
      return `user${f.isReplay ? " (replay)" : ""} ${JSON.stringify(f.message?.content).slice(0, 100)}`
    default:
      return f.type
  }
}

const main = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make((request) => {
    if (request.toolResult._tag === "Some") return MockAnthropic.echo
    const p = request.prompt
    if (p.includes("SMOKE_TOOL")) return MockAnthropic.bash("touch x")
    if (p.includes("SMOKE_SLOW")) return MockAnthropic.slow({ deltas: 200, interval: "50 millis" })
    if (p.includes("SMOKE_ERR529")) return MockAnthropic.apiError(529)
    if (p.includes("SMOKE_ERR400")) return MockAnthropic.apiError(400)
    return MockAnthropic.text(`Hello from the mock: ${p}`, { chunks: 3 })
  })
  yield* Effect.promise(() => drive(mock))
}).pipe(Effect.scoped)

const drive = async (mock: MockAnthropic.MockAnthropic) => {
  const claude = resolveClaude()
  const version = execFileSync(claude, ["--version"], { encoding: "utf8" }).trim()
  console.log(`claude: ${claude}\nversion: ${version}\nmock: ${mock.url}`)

  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-claude-smoke-"))
  for (const dir of [".claude", "tmp", "run", "work"]) Fs.mkdirSync(Path.join(home, dir), { recursive: true })
  const cwd = Path.join(home, "work")
  const marker = `tether-smoke-${process.pid}-${Date.now()}`
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    ...MockAnthropic.offlineEnv({ baseUrl: mock.url, home }),
    CLAUDE_CODE_ENTRYPOINT: "sdk-ts",
    CLAUDE_CODE_SDK_READS_SESSION_STATE: "1",
    TETHER_SMOKE_MARKER: marker
  }
  const args = [
    "--output-format",
    "stream-json",
    "--verbose",
    "--input-format",
    "stream-json",
    "--permission-prompt-tool",
    "stdio",
    "--replay-user-messages",
    "--include-partial-messages"
  ]

  const t0 = performance.now()
  const now = () => Math.round(performance.now() - t0)
  const child = spawn(claude, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"] })
  // If this script dies abruptly (a closed stdout pipe, an uncaught error), take the CLI and its tools with it.
  process.once("exit", () => {
    for (const pid of processesWithMarker(marker)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  })
  let stderr = ""
  child.stderr.on("data", (d) => (stderr += String(d)))
  const exited = new Promise<{ code: number | null; signal: string | null; t: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, t: now() }))
  )
  const seen: Array<Seen> = []
  const waiters = new Set<() => void>()
  const children = new Set<number>()
  Readline.createInterface({ input: child.stdout }).on("line", (line) => {
    let frame: Frame
    try {
      frame = JSON.parse(line)
    } catch {
      console.log(`non-JSON stdout line: ${line.slice(0, 200)}`)
      return
    }
    seen.push({ t: now(), frame })
    if (showFrames) console.log(`  ${String(now()).padStart(6)} < ${summary(frame)}`)
    for (const w of waiters) w()
  })
  // Remember every descendant we ever see, to check none survives the CLI.
  const poll = setInterval(() => {
    for (const pid of processesWithMarker(marker)) children.add(pid)
  }, 50)

  const write = (frame: Frame) => {
    if (showFrames) console.log(`  ${String(now()).padStart(6)} > ${summary(frame)}`)
    child.stdin.write(JSON.stringify(frame) + "\n")
  }
  const waitFor = (from: number, pred: (f: Frame) => boolean, timeoutMs = 20_000) =>
    new Promise<Seen>((resolve, reject) => {
      const tryNow = () => {
        const hit = seen.slice(from).find((s) => pred(s.frame))
        if (hit !== undefined) {
          waiters.delete(tryNow)
          clearTimeout(timer)
          resolve(hit)
        }
      }
      const timer = setTimeout(() => {
        waiters.delete(tryNow)
        reject(new Error(`timed out waiting (${timeoutMs} ms); stderr: ${stderr.slice(-500)}`))
      }, timeoutMs)
      waiters.add(tryNow)
      tryNow()
    })
  const userMessage = (text: string) => ({
    type: "user",
    message: { role: "user", content: [{ type: "text", text }] },
    parent_tool_use_id: null,
    session_id: "",
    uuid: crypto.randomUUID()
  })
  const turn = async (text: string) => {
    const from = seen.length
    const sentAt = now()
    const msg = userMessage(text)
    write(msg)
    const queued = await waitFor(from, (f) => f.type === "command_lifecycle" && f.command_uuid === msg.uuid)
    const replay = await waitFor(from, (f) => f.type === "user" && f.isReplay === true && f.uuid === msg.uuid)
    const result = await waitFor(from, (f) => f.type === "result")
    return { from, sentAt, msg, queued, replay, result }
  }

  try {
    // --- initialize + plain turn -------------------------------------------------------------------------------
    write({ type: "control_request", request_id: "req_init_1", request: { subtype: "initialize", hooks: {} } })
    const init = await waitFor(0, (f) => f.type === "control_response" && f.response?.request_id === "req_init_1")
    console.log(`\nspawn -> initialize response: ${init.t} ms`)
    check(init.frame.response.subtype === "success", "initialize succeeded")
    console.log(
      `  initialize: version=${init.frame.response.response?.claude_code_version} pid=${init.frame.response.response?.pid}`
    )

    const plain = await turn("Say hello please")
    const plainResult = plain.result.frame
    console.log(
      `plain turn: write -> queued ${plain.queued.t - plain.sentAt} ms, -> replay ${
        plain.replay.t - plain.sentAt
      } ms, -> result ${plain.result.t - plain.sentAt} ms (spawn -> result ${plain.result.t} ms)`
    )
    console.log(`  ${summary(plainResult)}`)
    check(plainResult.subtype === "success" && !plainResult.is_error, "plain turn: success result")
    check(plainResult.result === "Hello from the mock: Say hello please", "plain turn: result text is the mock's")
    const deltas = seen.slice(plain.from).filter((s) =>
      s.frame.type === "stream_event" && s.frame.event?.delta?.type === "text_delta"
    )
    check(deltas.length === 3, `plain turn: 3 text_delta stream_events (got ${deltas.length})`)

    // --- Bash tool use with can_use_tool allow + updatedInput --------------------------------------------------
    const toolFrom = seen.length
    const toolSentAt = now()
    const toolMsg = userMessage("SMOKE_TOOL please create the file")
    write(toolMsg)
    const prompt = await waitFor(toolFrom, (f) => f.type === "control_request" && f.request?.subtype === "can_use_tool")
    const req = prompt.frame.request
    console.log(
      `tool turn: write -> can_use_tool ${prompt.t - toolSentAt} ms: ${req.tool_name} ${JSON.stringify(req.input)}`
    )
    check(req.tool_name === "Bash" && req.input?.command === "touch x", "can_use_tool asks for Bash `touch x`")
    write({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: prompt.frame.request_id,
        response: { behavior: "allow", updatedInput: req.input, toolUseID: req.tool_use_id }
      }
    })
    const toolResultFrame = await waitFor(toolFrom, (f) =>
      f.type === "user" && Array.isArray(f.message?.content) &&
      f.message.content.some((c: Frame) => c.type === "tool_result"))
    const toolRes = await waitFor(toolFrom, (f) => f.type === "result")
    console.log(`tool turn: write -> result ${toolRes.t - toolSentAt} ms; ${summary(toolRes.frame)}`)
    check(!toolResultFrame.frame.message.content[0].is_error, "tool_result is not an error")
    check(Fs.existsSync(Path.join(cwd, "x")), "the tool really ran: x exists in cwd")
    check(
      toolRes.frame.subtype === "success" && toolRes.frame.num_turns === 2 &&
        toolRes.frame.result.startsWith("Tool said"),
      "tool turn: success, num_turns 2, text after the tool_result"
    )
    const echoed = seen.slice(toolFrom).some((s) =>
      s.frame.type === "control_response" && s.frame.response?.request_id === prompt.frame.request_id
    )
    console.log(`  (our control_response echoed back on stdout: ${echoed})`)

    // --- interrupt mid-stream ----------------------------------------------------------------------------------
    const before = (await Effect.runPromise(mock.requests)).length
    const slowFrom = seen.length
    const slowMsg = userMessage("SMOKE_SLOW stream slowly")
    write(slowMsg)
    await waitFor(slowFrom, (f) => f.type === "stream_event" && f.event?.delta?.type === "text_delta")
    await new Promise((r) => setTimeout(r, 300))
    const intAt = now()
    write({ type: "control_request", request_id: "req_int_1", request: { subtype: "interrupt" } })
    const intResp = await waitFor(
      slowFrom,
      (f) => f.type === "control_response" && f.response?.request_id === "req_int_1"
    )
    const intResult = await waitFor(slowFrom, (f) => f.type === "result")
    console.log(
      `interrupt: -> response ${intResp.t - intAt} ms, -> result ${intResult.t - intAt} ms; ${summary(intResult.frame)}`
    )
    check(intResult.frame.terminal_reason === "aborted_streaming", "interrupt: result aborted_streaming")
    const slowLog = await Effect.runPromise(
      mock.awaitRequests((log) => log.length > before && log[before].outcome !== "pending").pipe(
        Effect.timeoutOption("5 seconds")
      )
    )
    const slowEntry = slowLog._tag === "Some" ? slowLog.value[before] : undefined
    console.log(`  mock saw: outcome=${slowEntry?.outcome} deltasSent=${slowEntry?.deltasSent}`)
    check(slowEntry?.outcome === "client-closed", "interrupt: the mock saw the client close the stream")

    // --- API errors (CLAUDE_CODE_MAX_RETRIES=0) ----------------------------------------------------------------
    for (const status of [529, 400]) {
      const n0 = (await Effect.runPromise(mock.requests)).length
      const r = await turn(`SMOKE_ERR${status} fail please`)
      const log = (await Effect.runPromise(mock.requests)).slice(n0)
      console.log(
        `api error ${status}: write -> result ${r.result.t - r.sentAt} ms, HTTP attempts ${log.length} (${
          log.map((e) => `${e.status}:${e.messages._tag === "Some" ? e.messages.value.toolNames.length : "-"}tools`)
            .join(", ")
        }); ${summary(r.result.frame)}`
      )
      check(
        r.result.frame.is_error === true && r.result.frame.api_error_status === status,
        `api error ${status}: result is_error with api_error_status ${status}`
      )
    }

    const after = await turn("Say hello again")
    check(after.result.frame.is_error === false, "a plain turn after the errors succeeds")
    console.log(`second plain turn: write -> result ${after.result.t - after.sentAt} ms`)

    // --- what the mock saw -------------------------------------------------------------------------------------
    const log = await Effect.runPromise(mock.requests)
    const paths = new Set(log.map((e) => `${e.method} ${e.path}${e.query}`))
    console.log(`\nmock saw ${log.length} requests: ${[...paths].join(", ")}`)
    check(log.every((e) => e.method === "POST" && e.path === "/v1/messages"), "only POST /v1/messages was called")
    const first = log[0].messages
    if (first._tag === "Some") {
      console.log(
        `  first request: model=${first.value.model} stream=${first.value.stream} tools=${first.value.toolNames.length} roles=${
          first.value.roles.join(",")
        } ua=${log[0].headers["user-agent"]}`
      )
      check(!first.value.toolNames.includes("ToolSearch"), "ENABLE_TOOL_SEARCH=false: no ToolSearch tool offered")
    }
    const withSystem = log.find((e) => e.messages._tag === "Some" && e.messages.value.roles.includes("system"))
    console.log(`  a request with role:"system" in messages: ${withSystem !== undefined}`)

    // --- stdin EOF: exit, no survivors -------------------------------------------------------------------------
    const eofAt = now()
    child.stdin.end()
    const exit = await Promise.race([
      exited,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000))
    ])
    console.log(
      `\nstdin EOF -> exit: ${
        exit ? `${exit.t - eofAt} ms, code ${exit.code} signal ${exit.signal}` : "NO EXIT in 10 s"
      }`
    )
    // The last turn succeeded, so EOF should give exit 0 (pitfall 7: after an error result it would be 1).
    check(exit !== undefined && exit.code === 0, "EOF while idle: exit code 0")
    clearInterval(poll)
    await new Promise((r) => setTimeout(r, 200))
    const survivors = processesWithMarker(marker)
    console.log(`processes with the marker seen (CLI + tools): ${children.size}; survivors: ${survivors.length}`)
    check(survivors.length === 0, "no process of this run survives the CLI")
  } finally {
    clearInterval(poll)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    for (const pid of processesWithMarker(marker)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    if (failures.length > 0 && stderr !== "") console.log(`stderr tail:\n${stderr.slice(-2000)}`)
    Fs.rmSync(home, { recursive: true, force: true })
  }
}

/** Processes (other than us) whose environment carries the marker: the CLI and everything it started. */
const processesWithMarker = (marker: string): Array<number> => {
  const pids: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      const env = Fs.readFileSync(`/proc/${entry}/environ`, "latin1")
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "latin1")
      if (env.includes(`TETHER_SMOKE_MARKER=${marker}`) && !/\) Z /.test(stat)) pids.push(Number(entry))
    } catch {
      // gone or not ours
    }
  }
  return pids
}

process.stdout.on("error", () => process.exit(1))

Effect.runPromise(main).then(
  () => {
    console.log(failures.length === 0 ? "\nALL CHECKS PASSED" : `\n${failures.length} CHECK(S) FAILED`)
    process.exit(failures.length === 0 ? 0 : 1)
  },
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
