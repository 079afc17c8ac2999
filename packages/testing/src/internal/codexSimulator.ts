/**
 * Codex's `app-server` side of its JSON-RPC protocol as a simulator (see `Simulator.ts`): a {@link MockCodex.Script}
 * played against stdin lines, with every line built by the codec's own encoders (`CodexProtocol.encode*`) and every
 * stdin line read by its decoder (`CodexProtocol.decodeLine`, whose shapes are the same both ways), so the simulator
 * and the codec cannot drift.
 *
 * The process is a few cooperative tasks (`tasks.ts`), as the real server is a few concurrent loops: a reader that
 * takes stdin lines one at a time and answers each request in a task of its own (an answer that takes 35 ms does
 * not hold back the next line), and per turn a task that answers `turn/start` and runs the turn's body in a fiber
 * that an interrupt stops wherever it waits.
 *
 * @internal
 */
import * as CodexProtocol from "@tether/codex/CodexProtocol"
import * as Result from "effect/Result"
import type * as MockCodex from "../MockCodex.ts"
import type * as Simulator from "../Simulator.ts"
import { type Ids, makeIds } from "./ids.ts"
import * as Json from "./json.ts"
import { pickSteps } from "./script.ts"
import { type Millis, millis, SimulatedCli, toMillis } from "./simulatedCli.ts"
import { Cell, End, type Fiber, never, sleep, take, type Task, wait } from "./tasks.ts"

type JsonObject = Json.JsonObject

// ---------------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------------

/** How the host answered an approval request. */
type Decision = "accept" | "decline" | "cancel"

/** A thread's rollout: what a later process of the same script and `CODEX_HOME` resumes. */
interface Rollout {
  readonly id: string
  readonly model: string
  readonly approvalPolicy: unknown
  readonly sandbox: string
  readonly cwd: string
  readonly createdAt: number
  readonly path: string
  preview: string
  lastTurnId: string | undefined
  readonly total: Counts
}

interface Thread {
  readonly rollout: Rollout
  readonly ephemeral: boolean
  /** A resumed thread replays its last usage before its first turn's response. */
  resumed: boolean
}

interface Counts {
  inputTokens: number
  outputTokens: number
}

interface TurnRun {
  readonly id: string
  readonly thread: Thread
  readonly prompt: string
  readonly input: ReadonlyArray<unknown>
  readonly startedAt: number
  fiber: Fiber<Abort | undefined> | undefined
  /** A model request is open: the next message or tool call belongs to it. */
  sampling: boolean
  samplings: number
  /** Output tokens of the open model request (a chunk counts as one). */
  output: number
  /** The usage of the last model request, not reported yet. */
  unreported: Counts | undefined
  /** The approval request waiting for the host. */
  pending: number | undefined
  /** The agent messages so far, as `turn/completed` lists them. */
  readonly messages: Array<JsonObject>
  /** The last tool's output when no message came after it: the model then answers with it. */
  lastTool: string | undefined
  diff: string | undefined
  finished: boolean
  abort: Abort | undefined
}

interface Abort {
  readonly requestId: CodexProtocol.Id
}

interface Launch {
  readonly appServer: boolean
  readonly config: ReadonlyMap<string, unknown>
  readonly codexHome: string
}

/** The methods the simulated server answers (the rest are unknown variants). */
const methods = [
  "initialize",
  "thread/start",
  "thread/resume",
  "turn/start",
  "turn/interrupt",
  "model/list",
  "account/read"
] as const

/** Rollouts by script, then by `CODEX_HOME`: threads outlive their process, as the real server's files do. */
const rollouts = new WeakMap<MockCodex.Script, Map<string, Map<string, Rollout>>>()

const rolloutsOf = (script: MockCodex.Script, codexHome: string): Map<string, Rollout> => {
  let homes = rollouts.get(script)
  if (homes === undefined) {
    homes = new Map()
    rollouts.set(script, homes)
  }
  let threads = homes.get(codexHome)
  if (threads === undefined) {
    threads = new Map()
    homes.set(codexHome, threads)
  }
  return threads
}

// ---------------------------------------------------------------------------------------------------------------
// The simulated process
// ---------------------------------------------------------------------------------------------------------------

/** Starts the simulated server of `script`. */
export const make = (script: MockCodex.Script): Simulator.Factory<MockCodex.Fault> => (launch, now) =>
  new CodexServer(script, launch, now)

class CodexServer extends SimulatedCli<MockCodex.Fault> {
  private readonly script: MockCodex.Script
  private readonly timing: Millis<MockCodex.Timing>
  private readonly launch: Launch
  private readonly ids: Ids
  private readonly cwd: string
  private readonly rollouts: Map<string, Rollout>
  private readonly threads = new Map<string, Thread>()
  private readonly consumed = new Set<number>()
  /** Approval requests waiting for the host, by their id's string form. */
  private readonly pending = new Map<string, Cell<Decision>>()
  private readonly unanswered = new Set<string>()

  private initialized = false
  private clientName = "codex"
  private serverRequestIds = 0
  private pids = 20_000
  private run: TurnRun | undefined = undefined
  private ignoreInterrupts = false
  private ignoreSigterm = false
  private rejectNext: { readonly code: number; readonly message: string } | undefined = undefined
  /** stdin is closed: the process prints nothing more and exits. */
  private closing = false

  constructor(script: MockCodex.Script, launch: Simulator.Launch, now: number) {
    super(now)
    this.script = script
    this.timing = toMillis(script.options.timing)
    this.launch = parseLaunch(launch)
    this.ids = makeIds(launch.pid)
    this.cwd = launch.cwd
    this.rollouts = rolloutsOf(script, this.launch.codexHome)
    this.ignoreSigterm = script.options.faults.some((fault) => fault._tag === "IgnoreSigterm")
    this.sched.fork(this.started())
  }

  // --- inputs ----------------------------------------------------------------------------------------------

  signal(now: number, signal: Simulator.Signal): void {
    if (this.ended === "exited") return
    this.sched.advance(now)
    if (signal === "SIGKILL" || this.ended === "hung") {
      // Killed: what it had not printed yet is lost.
      this.sched.discard()
      return this.exit({ _tag: "Signaled", signal })
    }
    if (this.ignoreSigterm) return
    // The real server handles SIGTERM and SIGINT: it shuts down (its commands with it) and exits 0.
    this.exit({ _tag: "Exited", code: 0 })
  }

  // --- the process -----------------------------------------------------------------------------------------

  private *started(): Task {
    yield* sleep(this.timing.startup)
    if (!this.launch.appServer) {
      this.stderr("error: the simulated codex runs only as `codex app-server`\n\nUsage: codex app-server [OPTIONS]\n")
      return this.exit({ _tag: "Exited", code: 2 })
    }
    // What the real server says first on a machine without bubblewrap on PATH (it uses its own).
    this.log(
      "ERROR codex_app_server: Codex could not find bubblewrap on PATH. Codex will use the bundled bubblewrap in the " +
        "meantime."
    )
    for (const fault of this.script.options.faults) this.applyFault(fault)
    this.sched.fork(this.reader())
  }

  private *reader(): Task {
    while (true) {
      const line = yield* take(this.stdin)
      if (line === End) break
      if (line.trim().length > 0) this.handleLine(line)
    }
    // stdin's EOF: the server shuts down, whatever it was doing (a running turn never completes).
    this.closing = true
    yield* sleep(this.timing.exit)
    this.exit({ _tag: "Exited", code: 0 })
  }

  // --- printing --------------------------------------------------------------------------------------------

  private print(line: string): void {
    if (!this.closing) this.sched.emit({ _tag: "Stdout", line })
  }

  private stderr(text: string): void {
    if (!this.closing) this.sched.emit({ _tag: "Stderr", text })
  }

  /** A log line on stderr, as the server's tracing writes it (`RUST_LOG=warn`, `NO_COLOR=1`). */
  private log(message: string): void {
    this.stderr(`${new Date(this.sched.now).toISOString()} ${message}\n`)
  }

  private notify(method: string, params: JsonObject): void {
    this.print(CodexProtocol.encodeServerNotification(method, params, this.sched.now))
  }

  private respond(id: CodexProtocol.Id, result: unknown): void {
    this.print(CodexProtocol.encodeResponse(id, result))
  }

  private respondError(id: CodexProtocol.Id, message: string, code = -32600): void {
    this.print(CodexProtocol.encodeErrorResponse(id, code, message))
  }

  /** A notification of the running turn, held back while the turn is stalled. */
  private *turnNotify(method: string, params: JsonObject): Task {
    if (this.stall !== undefined) yield* this.gate()
    this.notify(method, params)
  }

  private threadStatus(run: TurnRun, status: JsonObject): Task {
    return this.turnNotify("thread/status/changed", { threadId: run.thread.rollout.id, status })
  }

  private seconds(): number {
    return Math.floor(this.sched.now / 1000)
  }

  // --- stdin -----------------------------------------------------------------------------------------------

  private handleLine(line: string): void {
    const decoded = CodexProtocol.decodeLine(line)
    if (Result.isFailure(decoded)) {
      // The real server logs what it cannot read and goes on.
      return this.log(`ERROR codex_app_server: Failed to deserialize JSONRPCMessage: ${decoded.failure.detail}`)
    }
    const message = decoded.success
    switch (message._tag) {
      case "Request":
        return this.request(message.id, message.method, message.params)
      case "Notification":
        if (message.method === "initialized" && this.initialized) this.sched.fork(this.announce())
        return
      case "Response":
        return this.answer(message.id, decisionOf(message.result))
      case "ErrorResponse":
        // An approval the client could not answer is declined.
        if (message.id !== null) this.answer(message.id, "decline")
        return
    }
  }

  /** What the server pushes once the client said it is initialized. */
  private *announce(): Task {
    yield* sleep(this.timing.control)
    this.notify("configWarning", {
      summary: "Codex could not find bubblewrap on PATH. Codex will use the bundled bubblewrap in the meantime.",
      details: null
    })
    this.notify("remoteControl/status/changed", {
      status: "disabled",
      serverName: "mock",
      installationId: this.ids.uuid(),
      environmentId: null
    })
  }

  private answer(id: CodexProtocol.Id, decision: Decision): void {
    const key = String(id)
    const cell = this.pending.get(key)
    if (cell === undefined) return
    this.pending.delete(key)
    this.sched.set(cell, decision)
  }

  private request(id: CodexProtocol.Id, method: string, params: unknown): void {
    if (this.unanswered.has(method)) return
    const p = Json.isRecord(params) ? params : {}
    if (method === "initialize") {
      if (this.initialized) return this.later(this.timing.control, () => this.respondError(id, "Already initialized"))
      this.initialized = true
      const info = Json.isRecord(p.clientInfo) ? p.clientInfo : {}
      const name = typeof info.name === "string" ? info.name : "client"
      const version = typeof info.version === "string" ? info.version : "0.0.0"
      this.clientName = name
      return this.later(this.timing.control, () =>
        this.respond(id, {
          userAgent: `${name}/${this.script.options.version} (Debian 12.0.0; x86_64) unknown (${name}; ${version})`,
          codexHome: this.launch.codexHome,
          platformFamily: "unix",
          platformOs: "linux"
        }))
    }
    if (!this.initialized) return this.later(this.timing.control, () => this.respondError(id, "Not initialized"))
    switch (method) {
      case "thread/start":
        return void this.sched.fork(this.threadStart(id, p))
      case "thread/resume":
        return void this.sched.fork(this.threadResume(id, p))
      case "turn/start":
        return this.turnStart(id, p)
      case "turn/interrupt":
        return this.interrupt(id, p)
      case "model/list":
        return this.later(this.timing.control, () =>
          this.respond(id, {
            data: this.script.options.knownModels.map((model, i) => ({
              id: model,
              model,
              displayName: model,
              description: `${model} (simulated)`,
              isDefault: i === 0
            })),
            nextCursor: null
          }))
      case "account/read":
        return this.later(this.timing.control, () => this.respond(id, { account: null, requiresOpenaiAuth: false }))
      default:
        return this.later(this.timing.control, () =>
          this.respondError(
            id,
            `Invalid request: unknown variant \`${method}\`, expected one of ${
              methods.map((m) => `\`${m}\``).join(", ")
            }`
          ))
    }
  }

  /** Does `f` after `delay`, in a task of its own. */
  private later(delay: number, f: () => void): void {
    this.sched.fork(after(delay, f))
  }

  // --- threads ---------------------------------------------------------------------------------------------

  private threadObject(thread: Thread): JsonObject {
    const r = thread.rollout
    return {
      id: r.id,
      environments: [{ environmentId: "local", cwd: r.cwd, runtimeWorkspaceRoots: [r.cwd] }],
      extra: null,
      sessionId: r.id,
      forkedFromId: null,
      attachedToThreadId: null,
      parentThreadId: null,
      preview: r.preview,
      ephemeral: thread.ephemeral,
      section: null,
      sectionEnteredAt: null,
      projectId: null,
      historyMode: "paginated",
      modelProvider: this.modelProvider(),
      model: r.model,
      reasoningEffort: null,
      createdAt: r.createdAt,
      updatedAt: this.seconds(),
      recencyAt: this.seconds(),
      status: { type: "idle" },
      path: thread.ephemeral ? null : r.path,
      cwd: r.cwd,
      cliVersion: this.script.options.version,
      originator: this.clientName,
      source: "vscode",
      canAcceptDirectInput: true,
      threadSource: null,
      agentNickname: null,
      agentRole: null,
      gitInfo: null,
      name: null,
      daybreakEnabled: null,
      turns: []
    }
  }

  private threadResult(thread: Thread): JsonObject {
    const r = thread.rollout
    return {
      thread: this.threadObject(thread),
      model: r.model,
      modelProvider: this.modelProvider(),
      serviceTier: null,
      disabledPluginIds: [],
      cwd: r.cwd,
      runtimeWorkspaceRoots: [r.cwd],
      instructionSources: [],
      approvalPolicy: r.approvalPolicy,
      approvalsReviewer: "user",
      sandbox: this.sandboxObject(r),
      activePermissionProfile: { id: `:${r.sandbox}`, extends: null },
      reasoningEffort: null,
      multiAgentMode: "explicitRequestOnly"
    }
  }

  private modelProvider(): string {
    const provider = this.launch.config.get("model_provider")
    return typeof provider === "string" ? provider : "openai"
  }

  private sandboxObject(r: Rollout): JsonObject {
    switch (r.sandbox) {
      case "workspace-write":
        return {
          type: "workspaceWrite",
          writableRoots: [],
          networkAccess: false,
          excludeTmpdirEnvVar: this.launch.config.get("sandbox_workspace_write.exclude_tmpdir_env_var") === true,
          excludeSlashTmp: this.launch.config.get("sandbox_workspace_write.exclude_slash_tmp") === true
        }
      case "danger-full-access":
        return { type: "dangerFullAccess" }
      default:
        return { type: "readOnly", networkAccess: false }
    }
  }

  private *threadStart(id: CodexProtocol.Id, p: JsonObject): Task {
    yield* sleep(this.timing.thread)
    const threadId = this.ids.uuid()
    const day = new Date(this.sched.now).toISOString().slice(0, 10)
    const rollout: Rollout = {
      id: threadId,
      model: Json.stringOr(p.model, Json.stringOr(this.launch.config.get("model"), this.script.options.model)),
      approvalPolicy: p.approvalPolicy ?? this.launch.config.get("approval_policy") ?? "on-request",
      sandbox: Json.stringOr(p.sandbox, Json.stringOr(this.launch.config.get("sandbox_mode"), "read-only")),
      cwd: Json.stringOr(p.cwd, this.cwd),
      createdAt: this.seconds(),
      path: `${this.launch.codexHome}/sessions/${day.replaceAll("-", "/")}/rollout-${day}-${threadId}.jsonl`,
      preview: "",
      lastTurnId: undefined,
      total: { inputTokens: 0, outputTokens: 0 }
    }
    const thread: Thread = { rollout, ephemeral: p.ephemeral === true, resumed: false }
    this.threads.set(threadId, thread)
    if (!thread.ephemeral) this.rollouts.set(threadId, rollout)
    this.respond(id, this.threadResult(thread))
    // `thread/started` follows the response (docs/protocol/codex-app-server.md §8.6), a moment later.
    yield* sleep(Math.min(2, this.timing.thread))
    this.notify("thread/started", { thread: this.threadObject(thread) })
  }

  private *threadResume(id: CodexProtocol.Id, p: JsonObject): Task {
    const threadId = p.threadId
    if (typeof threadId !== "string") {
      yield* sleep(this.timing.control)
      return this.respondError(id, "Invalid request: missing field `threadId`")
    }
    yield* sleep(this.timing.thread)
    const rollout = this.rollouts.get(threadId)
    if (rollout === undefined) return this.respondError(id, `no rollout found for thread id ${threadId}`)
    const thread: Thread = { rollout, ephemeral: false, resumed: true }
    this.threads.set(threadId, thread)
    this.notify("thread/status/changed", { threadId, status: { type: "idle" } })
    this.respond(id, this.threadResult(thread))
  }

  // --- turns -----------------------------------------------------------------------------------------------

  private turnStart(id: CodexProtocol.Id, p: JsonObject): void {
    if (!Array.isArray(p.input)) {
      return this.later(this.timing.control, () => this.respondError(id, "Invalid request: missing field `input`"))
    }
    const threadId = Json.stringOr(p.threadId, "")
    const thread = this.threads.get(threadId)
    if (thread === undefined) {
      return this.later(this.timing.turnStart, () => this.respondError(id, `thread not found: ${threadId}`))
    }
    if (this.run !== undefined && !this.run.finished) {
      return this.later(
        this.timing.turnStart,
        () => this.respondError(id, `Invalid request: a turn is already in progress on thread ${threadId}`)
      )
    }
    const prompt = promptOf(p.input)
    const steps = this.pickSteps(prompt)
    const rejected = this.rejectNext ?? rejectionOf(steps)
    this.rejectNext = undefined
    if (rejected !== undefined) {
      return this.later(this.timing.turnStart, () => this.respondError(id, rejected.message, rejected.code))
    }
    const run: TurnRun = {
      id: this.ids.uuid(),
      thread,
      prompt,
      input: p.input,
      startedAt: this.sched.now,
      fiber: undefined,
      sampling: false,
      samplings: 0,
      output: 0,
      unreported: undefined,
      pending: undefined,
      messages: [],
      lastTool: undefined,
      diff: undefined,
      finished: false,
      abort: undefined
    }
    this.run = run
    this.sched.fork(this.runTurn(run, id, steps))
  }

  private turnObject(run: TurnRun, status: string, extra: JsonObject = {}): JsonObject {
    return {
      id: run.id,
      rootTurnId: run.id,
      items: [],
      itemsView: "notLoaded",
      status,
      error: null,
      startedAt: null,
      completedAt: null,
      durationMs: null,
      ...extra
    }
  }

  private *runTurn(run: TurnRun, requestId: CodexProtocol.Id, steps: ReadonlyArray<MockCodex.Step>): Task {
    yield* sleep(this.timing.turnStart)
    const thread = run.thread
    const threadId = thread.rollout.id
    if (!this.script.options.knownModels.includes(thread.rollout.model)) {
      this.notify("warning", {
        threadId,
        message: `Model metadata for \`${thread.rollout.model}\` not found. Defaulting to fallback metadata; this ` +
          "can degrade performance and cause issues."
      })
    }
    if (thread.resumed) {
      thread.resumed = false
      const last = thread.rollout.lastTurnId
      if (last !== undefined) this.notify("thread/tokenUsage/updated", this.usageParams(thread, last, undefined))
      this.notify("thread/goal/cleared", { threadId })
    }
    this.respond(requestId, { turn: this.turnObject(run, "inProgress") })
    const fiber = this.sched.fork(this.turnBody(run, steps))
    run.fiber = fiber
    const aborted = yield* wait(fiber.exit)
    if (aborted !== undefined) yield* this.abortTurn(run, aborted)
    if (this.run === run) this.run = undefined
  }

  private *turnBody(run: TurnRun, steps: ReadonlyArray<MockCodex.Step>): Task<Abort | undefined> {
    const threadId = run.thread.rollout.id
    yield* this.threadStatus(run, { type: "active", activeFlags: [] })
    yield* this.turnNotify("turn/started", {
      threadId,
      turn: this.turnObject(run, "inProgress", { startedAt: this.seconds() })
    })
    yield* sleep(this.timing.start)
    const userItem: JsonObject = {
      type: "userMessage",
      id: this.ids.uuid(),
      clientId: null,
      content: run.input,
      startedAtMs: this.sched.now,
      completedAtMs: null
    }
    yield* this.turnNotify("item/started", {
      item: userItem,
      threadId,
      turnId: run.id,
      startedAtMs: this.sched.now
    })
    yield* this.turnNotify("item/completed", {
      item: { ...userItem, completedAtMs: this.sched.now },
      threadId,
      turnId: run.id,
      contentTokenCount: null,
      completedAtMs: this.sched.now
    })
    if (run.thread.rollout.preview === "") run.thread.rollout.preview = run.prompt
    for (const step of steps) {
      switch (step._tag) {
        case "Text": {
          yield* this.message(run, step.chunks)
          break
        }
        case "Command": {
          if ((yield* this.command(run, step)) === "cancel") return yield* this.cancelled(run)
          break
        }
        case "FileChange": {
          if ((yield* this.fileChange(run, step)) === "cancel") return yield* this.cancelled(run)
          break
        }
        case "ApiError":
          return yield* this.failApi(run, step)
        case "Retry": {
          yield* this.retry(run, step)
          break
        }
        default:
          yield* this.faultStep(step)
      }
    }
    // The model always answers after a tool's output.
    if (run.lastTool !== undefined) yield* this.message(run, [{ text: `Tool said: ${run.lastTool}` }])
    this.endSampling(run)
    yield* this.reportUsage(run)
    if (run.diff !== undefined) {
      yield* this.turnNotify("turn/diff/updated", { threadId, turnId: run.id, diff: run.diff })
    }
    yield* sleep(this.timing.result)
    yield* this.finish(run, "completed", { items: run.messages, itemsView: "summary" })
    return undefined
  }

  /** Ends the turn: the thread goes idle, then `turn/completed`. Past this point an interrupt no longer applies. */
  private *finish(run: TurnRun, status: string, extra: JsonObject, idle = true): Task {
    if (idle) yield* this.threadStatus(run, { type: "idle" })
    else if (this.stall !== undefined) yield* this.gate()
    run.finished = true
    run.thread.rollout.lastTurnId = run.id
    this.notify("turn/completed", {
      threadId: run.thread.rollout.id,
      turn: this.turnObject(run, status, {
        startedAt: Math.floor(run.startedAt / 1000),
        completedAt: this.seconds(),
        durationMs: this.sched.now - run.startedAt,
        ...extra
      })
    })
  }

  /** The turn ended by a `cancel` answer: the server reports the usage and interrupts the turn. */
  private *cancelled(run: TurnRun): Task<undefined> {
    yield* this.reportUsage(run)
    yield* sleep(this.timing.result)
    yield* this.finish(run, "interrupted", {})
    return undefined
  }

  /** What an interrupt writes once the turn's body is stopped (docs/protocol/codex-app-server.md §3.7). */
  private *abortTurn(run: TurnRun, abort: Abort): Task {
    yield* sleep(this.timing.interrupt)
    if (run.unreported !== undefined) this.notify("thread/tokenUsage/updated", this.takeUsage(run))
    this.notify("account/rateLimits/updated", rateLimits)
    this.respond(abort.requestId, {})
    this.notify("thread/status/changed", { threadId: run.thread.rollout.id, status: { type: "idle" } })
    run.finished = true
    run.thread.rollout.lastTurnId = run.id
    this.notify("turn/completed", {
      threadId: run.thread.rollout.id,
      turn: this.turnObject(run, "interrupted", {
        startedAt: Math.floor(run.startedAt / 1000),
        completedAt: this.seconds(),
        durationMs: this.sched.now - run.startedAt
      })
    })
    // The approval the turn waited on is withdrawn once the turn is over.
    if (run.pending !== undefined) {
      this.notify("serverRequest/resolved", { threadId: run.thread.rollout.id, requestId: run.pending })
      run.pending = undefined
    }
  }

  private interrupt(id: CodexProtocol.Id, p: JsonObject): void {
    const run = this.run
    const matches = run !== undefined && !run.finished && run.id === p.turnId && run.fiber !== undefined &&
      run.thread.rollout.id === p.threadId
    if (this.ignoreInterrupts && matches) return this.later(this.timing.interrupt, () => this.respond(id, {}))
    if (!matches || run.abort !== undefined) {
      return this.later(
        this.timing.interrupt,
        () => this.respondError(id, `no turn in progress with id ${Json.stringOr(p.turnId, "(none)")}`)
      )
    }
    run.abort = { requestId: id }
    // From now on an answer to the approval the turn waits on is stale: it is ignored.
    if (run.pending !== undefined) this.pending.delete(String(run.pending))
    this.sched.stop(run.fiber!, run.abort)
  }

  // --- the model -------------------------------------------------------------------------------------------

  private pickSteps(prompt: string): ReadonlyArray<MockCodex.Step> {
    return pickSteps(this.script.turns, this.script.otherwise, this.consumed, prompt)
  }

  /** A model request: its latency, then what it says belongs to it until a tool call ends it. */
  private *beginSampling(run: TurnRun, delay = this.timing.firstToken): Task {
    if (run.sampling) return
    yield* sleep(delay)
    run.sampling = true
    run.samplings++
  }

  /** The model request ends (its response completed, or a tool call was its last output): its usage is due. */
  private endSampling(run: TurnRun): void {
    if (!run.sampling) return
    run.sampling = false
    const input = 10_981 + 120 * (run.samplings - 1)
    const output = Math.max(1, run.output)
    run.output = 0
    const previous = run.unreported
    run.unreported = {
      inputTokens: (previous?.inputTokens ?? 0) + input,
      outputTokens: (previous?.outputTokens ?? 0) + output
    }
  }

  private usageParams(thread: Thread, turnId: string, last: Counts | undefined): JsonObject {
    const counts = (c: Counts) => ({
      totalTokens: c.inputTokens + c.outputTokens,
      inputTokens: c.inputTokens,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
      outputTokens: c.outputTokens,
      reasoningOutputTokens: 0
    })
    const total = thread.rollout.total
    return {
      threadId: thread.rollout.id,
      turnId,
      tokenUsage: { total: counts(total), last: counts(last ?? total), modelContextWindow: 258_400 }
    }
  }

  private takeUsage(run: TurnRun): JsonObject {
    const last = run.unreported!
    run.unreported = undefined
    const total = run.thread.rollout.total
    total.inputTokens += last.inputTokens
    total.outputTokens += last.outputTokens
    return this.usageParams(run.thread, run.id, last)
  }

  /** `thread/tokenUsage/updated` for the model requests not reported yet, then the rate limits. */
  private *reportUsage(run: TurnRun): Task {
    if (run.unreported === undefined) return
    if (this.stall !== undefined) yield* this.gate()
    this.notify("thread/tokenUsage/updated", this.takeUsage(run))
    this.notify("account/rateLimits/updated", rateLimits)
  }

  private agentMessage(id: string, text: string, startedAtMs: number, completedAtMs: number | null): JsonObject {
    return {
      type: "agentMessage",
      moderation: null,
      id,
      text,
      phase: null,
      memoryCitation: null,
      delivery: null,
      questions: null,
      startedAtMs,
      completedAtMs
    }
  }

  private *message(run: TurnRun, chunks: ReadonlyArray<MockCodex.Chunk>): Task {
    if (run.unreported !== undefined) yield* this.reportUsage(run)
    yield* this.beginSampling(run)
    run.lastTool = undefined
    const threadId = run.thread.rollout.id
    const itemId = `msg_${this.ids.hex(24)}`
    const startedAtMs = this.sched.now
    yield* this.turnNotify("item/started", {
      item: this.agentMessage(itemId, "", startedAtMs, null),
      threadId,
      turnId: run.id,
      startedAtMs
    })
    const delta = deltaLine(threadId, run.id, itemId)
    const parts = new Array<string>(chunks.length)
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i]
      // With no wait between chunks, still a yield point every 64 deltas: the shell hands out what came before and
      // input (an interrupt) gets in, without a trip through the scheduler for every line of a long stream.
      const pause = chunk.delay === undefined ? (i === 0 ? 0 : this.timing.chunk) : millis(chunk.delay)
      if (pause > 0 || (i & 63) === 0) yield pause
      if (this.stall !== undefined) yield* this.gate()
      parts[i] = chunk.text
      this.print(delta(chunk.text, this.sched.now))
    }
    const text = parts.join("")
    const item = this.agentMessage(itemId, text, startedAtMs, this.sched.now)
    yield* this.turnNotify("item/completed", {
      item,
      threadId,
      turnId: run.id,
      contentTokenCount: null,
      completedAtMs: this.sched.now
    })
    run.messages.push(item)
    run.output += chunks.length
  }

  /** Sends an approval request and waits for the host's decision. */
  private *ask(run: TurnRun, method: string, params: JsonObject): Task<Decision> {
    const id = this.serverRequestIds++
    const answer = new Cell<Decision>()
    this.pending.set(String(id), answer)
    run.pending = id
    if (this.stall !== undefined) yield* this.gate()
    this.print(CodexProtocol.encodeRequest(id, method, params))
    const decision = yield* wait(answer)
    run.pending = undefined
    yield* this.turnNotify("serverRequest/resolved", { threadId: run.thread.rollout.id, requestId: id })
    return decision
  }

  private asks(run: TurnRun, kind: "command" | "fileChange", escalated: boolean): boolean {
    const rollout = run.thread.rollout
    switch (rollout.approvalPolicy) {
      case "never":
        return false
      case "on-request":
        return kind === "command" ? escalated : rollout.sandbox === "read-only"
      default:
        // `untrusted`, and the granular policies.
        return true
    }
  }

  private *command(run: TurnRun, step: MockCodex.Command): Task<Decision> {
    yield* this.beginSampling(run)
    this.endSampling(run)
    const threadId = run.thread.rollout.id
    const startedAtMs = this.sched.now
    const item: JsonObject = {
      type: "commandExecution",
      id: step.id ?? `call_${this.ids.hex(24)}`,
      pluginId: null,
      scriptPath: null,
      command: `/bin/bash -lc ${shellQuote(step.command)}`,
      cwd: run.thread.rollout.cwd,
      processId: null,
      source: "agent",
      status: "inProgress",
      commandActions: [{ type: "unknown", command: step.command }],
      aggregatedOutput: null,
      exitCode: null,
      durationMs: null,
      startedAtMs,
      completedAtMs: null
    }
    const itemNotify = (method: string, value: JsonObject) =>
      this.turnNotify(method, {
        item: value,
        threadId,
        turnId: run.id,
        ...(method === "item/started"
          ? { startedAtMs: value.startedAtMs }
          : { contentTokenCount: null, completedAtMs: value.completedAtMs })
      })
    let processId: string | null = null
    if (step.approval ?? this.asks(run, "command", step.escalate !== undefined)) {
      yield* this.threadStatus(run, { type: "active", activeFlags: ["waitingOnApproval"] })
      yield* itemNotify("item/started", item)
      const words = step.command.split(/\s+/).filter((word) => word.length > 0).slice(0, 2)
      const decision = yield* this.ask(run, "item/commandExecution/requestApproval", {
        kind: "command",
        threadId,
        turnId: run.id,
        itemId: item.id,
        startedAtMs,
        environmentId: "local",
        ...(step.escalate === undefined ? {} : { reason: step.escalate }),
        command: item.command,
        cwd: item.cwd,
        commandActions: item.commandActions,
        proposedExecpolicyAmendment: words,
        availableDecisions: ["accept", { acceptWithExecpolicyAmendment: { execpolicy_amendment: words } }, "cancel"]
      })
      if (decision !== "accept") {
        if (decision === "decline") {
          this.log(
            "ERROR codex_core::tools::router: error=exec_command failed: CreateProcess { message: " +
              "\"Rejected(\\\"rejected by user\\\")\" }"
          )
        }
        yield* itemNotify("item/completed", { ...item, status: "declined", completedAtMs: this.sched.now })
        yield* this.threadStatus(run, { type: "active", activeFlags: [] })
        if (decision === "decline") {
          yield* this.reportUsage(run)
          run.lastTool = "rejected by user"
        }
        return decision
      }
      yield* this.threadStatus(run, { type: "active", activeFlags: [] })
    } else {
      processId = String(++this.pids)
      yield* itemNotify("item/started", { ...item, processId, source: "unifiedExecStartup" })
    }
    processId ??= String(++this.pids)
    yield* sleep(step.duration === undefined ? this.timing.command : millis(step.duration))
    if (step.output.length > 0) {
      yield* this.turnNotify("item/commandExecution/outputDelta", {
        threadId,
        turnId: run.id,
        itemId: item.id,
        delta: step.output
      })
    }
    yield* itemNotify("item/completed", {
      ...item,
      processId,
      source: "unifiedExecStartup",
      status: step.exitCode === 0 ? "completed" : "failed",
      aggregatedOutput: step.output.length > 0 ? step.output : null,
      exitCode: step.exitCode,
      durationMs: this.sched.now - startedAtMs,
      completedAtMs: this.sched.now
    })
    yield* this.reportUsage(run)
    run.lastTool = step.output
    return "accept"
  }

  private *fileChange(run: TurnRun, step: MockCodex.FileChange): Task<Decision> {
    yield* this.beginSampling(run)
    this.endSampling(run)
    const threadId = run.thread.rollout.id
    const startedAtMs = this.sched.now
    const path = step.path.startsWith("/") ? step.path : `${run.thread.rollout.cwd}/${step.path}`
    const item: JsonObject = {
      type: "fileChange",
      id: step.id ?? `call_${this.ids.hex(24)}`,
      changes: [{ path, kind: { type: step.kind }, diff: step.diff }],
      status: "inProgress",
      startedAtMs,
      completedAtMs: null
    }
    const completed = (status: string) =>
      this.turnNotify("item/completed", {
        item: { ...item, status, completedAtMs: this.sched.now },
        threadId,
        turnId: run.id,
        contentTokenCount: null,
        completedAtMs: this.sched.now
      })
    yield* this.turnNotify("item/started", { item, threadId, turnId: run.id, startedAtMs })
    if (step.approval ?? this.asks(run, "fileChange", false)) {
      yield* this.threadStatus(run, { type: "active", activeFlags: ["waitingOnApproval"] })
      const decision = yield* this.ask(run, "item/fileChange/requestApproval", {
        threadId,
        turnId: run.id,
        itemId: item.id,
        startedAtMs: this.sched.now,
        reason: null,
        grantRoot: null
      })
      yield* this.threadStatus(run, { type: "active", activeFlags: [] })
      if (decision !== "accept") {
        if (decision === "decline") this.log("ERROR codex_core::tools::router: error=patch rejected by user")
        yield* completed("declined")
        if (decision === "decline") {
          yield* this.reportUsage(run)
          run.lastTool = "patch rejected by user"
        }
        return decision
      }
    }
    yield* sleep(this.timing.patch)
    yield* completed("completed")
    const relative = path.startsWith(`${run.thread.rollout.cwd}/`)
      ? path.slice(run.thread.rollout.cwd.length + 1)
      : path
    run.diff = `diff --git a/${relative} b/${relative}\n${
      step.kind === "add" ? "new file mode 100644\n--- /dev/null\n" : `--- a/${relative}\n`
    }+++ b/${relative}\n${step.diff.replace(/^/gm, "+")}`
    yield* this.turnNotify("turn/diff/updated", { threadId, turnId: run.id, diff: run.diff })
    yield* this.reportUsage(run)
    run.lastTool = `Success. Updated the following files:\n${step.kind[0].toUpperCase()} ${relative}\n`
    return "accept"
  }

  private *failApi(run: TurnRun, step: MockCodex.ApiError): Task<undefined> {
    if (run.unreported !== undefined) yield* this.reportUsage(run)
    run.sampling = false
    yield* sleep(step.delay === undefined ? this.timing.firstToken : millis(step.delay))
    const server = step.status >= 500
    const error = {
      message: step.message ?? (server
        ? "We’re currently experiencing high demand, which may cause temporary errors."
        : `exceeded retry limit, last status: ${step.status} ${statusText(step.status)}, request id: req_${
          this.ids.hex(24)
        }`),
      codexErrorInfo: server
        ? "internalServerError"
        : { responseTooManyFailedAttempts: { httpStatusCode: step.status } },
      additionalDetails: null,
      misalignment: null
    }
    const threadId = run.thread.rollout.id
    yield* this.threadStatus(run, { type: "systemError" })
    yield* this.turnNotify("error", { error, willRetry: false, threadId, turnId: run.id })
    yield* sleep(this.timing.result)
    yield* this.finish(run, "failed", { error }, false)
    return undefined
  }

  private *retry(run: TurnRun, step: MockCodex.Retry): Task {
    if (run.unreported !== undefined) yield* this.reportUsage(run)
    yield* this.beginSampling(run)
    const threadId = run.thread.rollout.id
    if (step.partial.length > 0) {
      const itemId = `msg_${this.ids.hex(24)}`
      yield* this.turnNotify("item/started", {
        item: this.agentMessage(itemId, "", this.sched.now, null),
        threadId,
        turnId: run.id,
        startedAtMs: this.sched.now
      })
      if (this.stall !== undefined) yield* this.gate()
      this.print(deltaLine(threadId, run.id, itemId)(step.partial, this.sched.now))
    }
    // The dropped request counts for nothing; the next step is a new request.
    run.sampling = false
    this.log(`WARN codex_core::responses_retry: stream disconnected - retrying sampling request... turn_id=${run.id}`)
    yield* this.turnNotify("account/rateLimits/updated", rateLimits)
    yield* this.turnNotify("error", {
      error: {
        message: step.message,
        codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: null } },
        additionalDetails: "stream disconnected before completion: stream closed before response.completed",
        misalignment: null
      },
      willRetry: true,
      threadId,
      turnId: run.id
    })
  }

  // --- faults ----------------------------------------------------------------------------------------------

  protected applyFault(fault: MockCodex.Fault): void {
    switch (fault._tag) {
      case "Crash": {
        if (fault.stderr.length > 0) this.sched.emit({ _tag: "Stderr", text: fault.stderr })
        return this.exit({ _tag: "Exited", code: fault.code })
      }
      case "Hang": {
        this.ended = "hung"
        return this.sched.halt()
      }
      case "Stall":
        return this.stallFor(fault.duration)
      case "Malformed":
      case "Raw":
        return this.sched.emit({ _tag: "Stdout", line: fault.line })
      case "NeverAnswer": {
        this.unanswered.add(fault.method)
        return
      }
      case "IgnoreInterrupts": {
        this.ignoreInterrupts = true
        return
      }
      case "IgnoreSigterm": {
        this.ignoreSigterm = true
        return
      }
      case "RejectTurn": {
        this.rejectNext = { code: fault.code, message: fault.message }
        return
      }
      default:
        // A fault of another provider's simulator (`MockTransport.Fault` is the union of every provider's).
        return
    }
  }

  /** A fault as a step of a turn: a stall pauses the turn here; a crash or hang never returns. */
  private *faultStep(fault: MockCodex.Fault): Task {
    switch (fault._tag) {
      case "Stall": {
        yield fault.duration === undefined ? never : millis(fault.duration)
        return
      }
      case "Crash":
      case "Hang": {
        this.applyFault(fault)
        yield never
        return
      }
      case "Malformed":
      case "Raw": {
        if (this.stall !== undefined) yield* this.gate()
        return this.applyFault(fault)
      }
      case "RejectTurn":
        // Already applied to this turn's `turn/start`.
        return
      default:
        return this.applyFault(fault)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

function* after(delay: number, f: () => void): Task {
  yield* sleep(delay)
  f()
}

const rateLimits: JsonObject = {
  rateLimits: {
    limitId: "codex",
    limitName: null,
    normalModelSlug: null,
    primary: null,
    secondary: null,
    credits: null,
    individualLimit: null,
    spendControlReached: null,
    planType: null,
    rateLimitReachedType: null
  }
}

/** Where a delta's text goes in its line (a string that encodes as itself and occurs nowhere else). */
const textMark = "<<codex-delta>>"

/**
 * The `item/agentMessage/delta` lines of one message, the hot path of a long stream: the codec encodes the line once
 * with a mark where the text goes, and each delta fills it in (byte for byte what encoding each one would give, as
 * the tests hold it to).
 */
const deltaLine = (threadId: string, turnId: string, itemId: string): (text: string, now: number) => string => {
  const encode = (text: string, now: number) =>
    CodexProtocol.encodeServerNotification("item/agentMessage/delta", { threadId, turnId, itemId, delta: text }, now)
  const template = encode(textMark, 0)
  const at = template.indexOf(textMark)
  if (at < 0 || template.indexOf(textMark, at + 1) >= 0 || !template.endsWith(`,"emittedAtMs":0}`)) return encode
  const head = template.slice(0, at)
  const middle = template.slice(at + textMark.length, -2)
  return (text, now) => head + Json.stringBody(text) + middle + now + "}"
}

const decisionOf = (result: unknown): Decision => {
  const decision = Json.isRecord(result) ? result.decision : undefined
  if (decision === "accept" || decision === "acceptForSession") return "accept"
  if (decision === "cancel") return "cancel"
  // An amendment (`acceptWithExecpolicyAmendment`, …) approves the command.
  if (Json.isRecord(decision) && Object.keys(decision).some((key) => key.startsWith("accept"))) return "accept"
  return "decline"
}

const rejectionOf = (
  steps: ReadonlyArray<MockCodex.Step>
): { readonly code: number; readonly message: string } | undefined => {
  for (const step of steps) if (step._tag === "RejectTurn") return step
  return undefined
}

const promptOf = (input: ReadonlyArray<unknown>): string =>
  input.flatMap((item) =>
    Json.isRecord(item) && item.type === "text" && typeof item.text === "string" ? [item.text] : []
  )
    .join("\n")

const shellQuote = (command: string): string => `'${command.replaceAll("'", `'\\''`)}'`

const statusText = (status: number): string =>
  status === 429
    ? "Too Many Requests"
    : status === 401
    ? "Unauthorized"
    : status === 403
    ? "Forbidden"
    : status === 400
    ? "Bad Request"
    : "Error"

/** A `-c key=value` value, read as TOML reads the simple ones. */
const tomlValue = (text: string): unknown => {
  if (text === "true") return true
  if (text === "false") return false
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text)
  const parsed = Json.parseJson(text)
  return parsed._tag === "Some" && typeof parsed.value === "string" ? parsed.value : text
}

const parseLaunch = (launch: Simulator.Launch): Launch => {
  const args = launch.args
  const config = new Map<string, unknown>()
  for (let i = 1; i < args.length; i++) {
    const arg = args[i]
    const pair = arg === "-c" || arg === "--config" ? args[++i] : arg.startsWith("-c") ? arg.slice(2) : undefined
    if (pair === undefined) continue
    const eq = pair.indexOf("=")
    if (eq > 0) config.set(pair.slice(0, eq), tomlValue(pair.slice(eq + 1)))
  }
  const home = launch.env["HOME"] ?? "/home/user"
  return { appServer: args[0] === "app-server", config, codexHome: launch.env["CODEX_HOME"] ?? `${home}/.codex` }
}
