/**
 * The recorded transcripts of the real `codex app-server` (test/fixtures/codex/<version>/, recorded by
 * `pnpm fixtures:record:codex`) through Tether's Codex codec, and replayed through the pure Codex protocol machine
 * under the session machine: the host's side (prompts, interrupts, approval answers, closing) is issued where the
 * transcript's client lines show it, the server's lines are fed as they came, and every turn must settle the way the
 * transcript shows it did.
 */
import { assert, describe, it } from "@effect/vitest"
import { CodexProtocol } from "@tether/codex"
import { Permission, type SessionEvent } from "@tether/core"
import type { AnyTurnError, TurnResult } from "@tether/core/Turn"
import { Cause, Exit, Option, Result } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SessionMachine from "../../core/src/internal/session/machine.ts"
import { deadlines, describeExit, type Entry, eventsTagged, processesOf } from "../../core/test/support/Transcripts.ts"
import * as CodexMachine from "../src/internal/machine.ts"

const root = Path.join(import.meta.dirname, "fixtures", "codex")

interface Transcript {
  readonly version: string
  readonly name: string
  readonly entries: ReadonlyArray<Entry>
  readonly stdout: ReadonlyArray<string>
}

const lines = (file: string): ReadonlyArray<string> =>
  Fs.readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0)

const transcripts: ReadonlyArray<Transcript> = Fs.readdirSync(root).sort().flatMap((version) =>
  Fs.readdirSync(Path.join(root, version)).filter((file) => file.endsWith(".ndjson")).sort().map((file) => {
    const name = file.slice(0, -".ndjson".length)
    return {
      version,
      name,
      entries: lines(Path.join(root, version, file)).map((line) => JSON.parse(line) as Entry),
      stdout: lines(Path.join(root, version, `${name}.stdout.jsonl`))
    }
  })
)

/** The Codex methods Tether has seen the server send: a new one in a new version shows up here first. */
const knownServerMethods = new Set([
  "account/rateLimits/updated",
  "configWarning",
  "deprecationNotice",
  "error",
  "item/agentMessage/delta",
  "item/commandExecution/outputDelta",
  "item/commandExecution/requestApproval",
  "item/completed",
  "item/fileChange/requestApproval",
  "item/started",
  "remoteControl/status/changed",
  "serverRequest/resolved",
  "thread/goal/cleared",
  "thread/started",
  "thread/status/changed",
  "thread/tokenUsage/updated",
  "turn/completed",
  "turn/diff/updated",
  "turn/started",
  "warning"
])

const decodeOk = (line: string): CodexProtocol.Message => {
  const decoded = CodexProtocol.decodeLine(line)
  if (Result.isFailure(decoded)) assert.fail(`${line.slice(0, 160)}: ${decoded.failure.message}`)
  return decoded.success
}

// ---------------------------------------------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------------------------------------------

/** What the host expects of a turn, read from the transcript alone. */
type Expected =
  | { readonly _tag: "Completed"; readonly text: string }
  | { readonly _tag: "Interrupted"; readonly reason: string }
  | { readonly _tag: "Failed"; readonly detail: string; readonly status: number | null }
  | { readonly _tag: "Rejected"; readonly code: number }

interface HostTurn {
  /** The client id of its `turn/start`. */
  readonly requestId: number
  readonly turn: SessionMachine.Turn
  serverTurnId: string | undefined
  exit: Exit.Exit<TurnResult, AnyTurnError> | undefined
  interruptedByHost: boolean
  cancelled: boolean
}

interface Process {
  readonly machine: SessionMachine.Machine
  readonly turns: Array<HostTurn>
  readonly events: Array<SessionEvent.SessionEvent>
  /** Lines the machine wrote, not yet matched with the transcript's client lines. */
  readonly written: Array<any>
  ready: boolean
  startFailed: string | undefined
}

/** The verdict behind a recorded approval decision. */
const verdictOf = (decision: unknown): Permission.Verdict => {
  switch (decision) {
    case "accept":
      return Permission.allow()
    case "decline":
      return Permission.deny("declined in the transcript")
    case "cancel":
      return Permission.deny("cancelled in the transcript", { interrupt: true })
    default:
      throw new Error(`no verdict for the decision ${JSON.stringify(decision)}`)
  }
}

const textOf = (prompt: any): string => prompt.input.map((item: any) => item.text).join("")

/**
 * Replays one process of a transcript: `entries` from its spawn note to the next one. `thread` is the recorded
 * `thread/start` or `thread/resume` request: the machine is configured with its params, so the replay checks the
 * protocol, not the options.
 */
const replayProcess = (transcript: Transcript, entries: ReadonlyArray<Entry>): Process => {
  const threadRequest = entries.find((entry) =>
    entry.dir === ">" && (entry.msg?.method === "thread/start" || entry.msg?.method === "thread/resume")
  )?.msg
  const initialize = entries.find((entry) => entry.dir === ">" && entry.msg?.method === "initialize")?.msg
  assert.isDefined(initialize, `${transcript.name}: the transcript has an initialize request`)
  const { excludeTurns: _exclude, threadId: resumed, ...threadParams } = threadRequest?.params ?? {}
  let turnIds = 0
  const machine = new SessionMachine.Machine(
    CodexMachine.make({
      clientInfo: initialize.params.clientInfo,
      capabilities: initialize.params.capabilities,
      thread: threadRequest?.method === "thread/resume"
        ? { _tag: "Resume", threadId: resumed, params: threadParams }
        : { _tag: "Start", params: threadParams },
      turnParams: {}
    }),
    {
      deadlines,
      queue: false,
      queueCapacity: 1,
      makeId: () => `host-${++turnIds}`,
      logBurst: 100,
      logWindow: 1000
    }
  )
  const process: Process = { machine, turns: [], events: [], written: [], ready: false, startFailed: undefined }
  const pump = (now: number) => {
    for (let line = machine.take(now); line !== undefined; line = machine.take(now)) {
      process.written.push(JSON.parse(line))
      machine.written(now)
    }
    process.events.push(...machine.events)
    for (const output of machine.outputs) {
      if (output._tag === "Ready") process.ready = true
      if (output._tag === "StartFailed") process.startFailed = output.reason
      if (output._tag === "Settle") {
        const turn = process.turns.find((turn) => turn.turn === output.turn)
        if (turn !== undefined) turn.exit = output.exit
      }
    }
    machine.drained()
  }
  /** The machine must have written `msg` (a client line of the transcript), in order. */
  const expectWritten = (msg: any, compare: "whole" | "method-and-id") => {
    const wrote = process.written.shift()
    assert.isDefined(
      wrote,
      `${transcript.name}: the machine wrote nothing where the transcript has ${JSON.stringify(msg)}`
    )
    if (compare === "whole") {
      assert.deepStrictEqual(wrote, msg, `${transcript.name}: the machine's line`)
    } else {
      assert.deepStrictEqual([wrote.method, wrote.id], [msg.method, msg.id], `${transcript.name}: the machine's line`)
    }
  }

  machine.start(entries[0]?.t ?? 0)
  pump(entries[0]?.t ?? 0)
  for (const entry of entries) {
    const now = entry.t
    if (entry.dir === "<") {
      machine.receive(now, JSON.stringify(entry.msg))
      pump(now)
      const response = entry.msg
      const turn = process.turns.find((turn) => turn.requestId === response.id && !("method" in response))
      if (turn !== undefined && response.result?.turn?.id !== undefined) turn.serverTurnId = response.result.turn.id
    } else if (entry.dir === ">") {
      const msg = entry.msg
      if (msg.method === "turn/start") {
        const sent = machine.send(now, textOf(msg.params), false, false)
        assert.instanceOf(sent, SessionMachine.Turn, `${transcript.name}: the host's prompt is taken`)
        process.turns.push({
          requestId: msg.id,
          turn: sent as SessionMachine.Turn,
          serverTurnId: undefined,
          exit: undefined,
          interruptedByHost: false,
          cancelled: false
        })
        pump(now)
        if (msg.params.threadId === machine.sessionId) expectWritten(msg, "whole")
        else expectWritten(msg, "method-and-id") // a turn/start naming another thread (turnRejected)
      } else if (msg.method === "turn/interrupt") {
        const outcome = machine.interruptActive(now, "host")
        assert.isObject(outcome, `${transcript.name}: the interrupt is sent, not ${JSON.stringify(outcome)}`)
        process.turns.at(-1)!.interruptedByHost = true
        pump(now)
        expectWritten(msg, "whole")
      } else if ("method" in msg) {
        // The handshake: the machine wrote these on its own.
        expectWritten(msg, "whole")
      } else {
        // An answer to one of the server's requests: what the host's policy decided.
        machine.decided(now, String(msg.id), verdictOf(msg.result?.decision))
        if (msg.result?.decision === "cancel") process.turns.at(-1)!.cancelled = true
        pump(now)
        expectWritten(msg, "whole")
      }
    } else if (entry.dir === "note" && entry.text === "closing stdin (EOF)") {
      // The host's stdin EOF is what closing a session does first.
      machine.close(now, "closed")
      pump(now)
    } else if (entry.dir === "note" && entry.text?.startsWith("exit code=")) {
      const [, code, signal] = /^exit code=(\S+) signal=(\S+)$/.exec(entry.text)!
      machine.exited(
        now,
        code !== "null"
          ? { _tag: "Exited", code: Number(code) }
          : { _tag: "Signaled", signal: signal as NodeJS.Signals },
        ""
      )
      pump(now)
    }
  }
  assert.deepStrictEqual(
    process.written,
    [],
    `${transcript.name}: the machine wrote lines the transcript does not have`
  )
  return process
}

/** Splits a transcript at its spawn notes and replays each process; a resumed thread continues the previous one. */
const replay = (transcript: Transcript): ReadonlyArray<Process> => {
  return processesOf(transcript.entries).map((segment) => replayProcess(transcript, segment))
}

/** How each `turn/start` of a process ended, by its client id, from the transcript's server lines alone. */
const expectedTurns = (entries: ReadonlyArray<Entry>): Map<number, Expected> => {
  const expected = new Map<number, Expected>()
  const byServerId = new Map<string, number>()
  const interrupted = new Set<number>()
  const cancelled = new Set<number>()
  let last: number | undefined
  for (const entry of entries) {
    const msg = entry.msg
    if (entry.dir === ">" && msg?.method === "turn/start") last = msg.id
    if (entry.dir === ">" && msg?.method === "turn/interrupt" && last !== undefined) interrupted.add(last)
    if (entry.dir === ">" && msg !== undefined && !("method" in msg) && msg.result?.decision === "cancel") {
      if (last !== undefined) cancelled.add(last)
    }
    if (entry.dir === "note" && entry.text === "closing stdin (EOF)" && last !== undefined && !expected.has(last)) {
      expected.set(last, { _tag: "Interrupted", reason: "closed" })
    }
    if (entry.dir !== "<") continue
    if (msg.id !== undefined && !("method" in msg)) {
      if (msg.result?.turn?.id !== undefined) byServerId.set(msg.result.turn.id, msg.id)
      if (msg.error !== undefined && last !== undefined && msg.id === last) {
        expected.set(last, { _tag: "Rejected", code: msg.error.code })
      }
    }
    if (msg.method === "turn/completed") {
      const id = byServerId.get(msg.params.turn.id)
      if (id === undefined) continue
      const turn = msg.params.turn
      const info = turn.error?.codexErrorInfo
      const status = info !== null && typeof info === "object"
        ? (Object.values(info)[0] as { httpStatusCode?: number | null } | undefined)?.httpStatusCode ?? null
        : null
      expected.set(
        id,
        turn.status === "completed"
          ? {
            _tag: "Completed",
            text: turn.items.filter((item: any) => item.type === "agentMessage").at(-1)?.text ?? ""
          }
          : turn.status === "interrupted"
          ? { _tag: "Interrupted", reason: cancelled.has(id) ? "permission" : interrupted.has(id) ? "host" : "?" }
          : { _tag: "Failed", detail: turn.error?.message ?? "", status }
      )
    }
  }
  return expected
}

const assertSettled = (name: string, turn: HostTurn, expected: Expected | undefined) => {
  const what = `${name}: turn/start #${turn.requestId} (${describeExit(turn.exit)})`
  assert.isDefined(expected, `${what}: the transcript shows no end of this turn`)
  assert.isDefined(turn.exit, `${what}: the turn did not settle`)
  const exit = turn.exit!
  if (expected!._tag === "Completed") {
    assert.isTrue(Exit.isSuccess(exit), what)
    if (Exit.isSuccess(exit)) assert.strictEqual(exit.value.text, expected!.text, what)
    return
  }
  assert.isTrue(Exit.isFailure(exit), what)
  const error = Exit.isFailure(exit) ? Option.getOrThrow(Cause.findErrorOption(exit.cause)) as any : undefined
  switch (expected!._tag) {
    case "Interrupted":
      assert.strictEqual(error._tag, "TurnInterrupted", what)
      assert.strictEqual(error.reason, expected!.reason, what)
      assert.isTrue(error.acknowledged, `${what}: the server had taken the prompt`)
      return
    case "Failed":
      assert.strictEqual(error._tag, "ApiError", what)
      assert.include(error.detail, expected!.detail, what)
      assert.strictEqual(error.status, expected!.status, what)
      assert.isFalse(error.deliveryUncertain, what)
      return
    case "Rejected":
      assert.strictEqual(error._tag, "TurnRejected", what)
      assert.strictEqual(error.code, expected!.code, what)
      assert.isTrue(error.safeToRequeue, what)
      return
  }
}

/** The events of the `n`-th host turn (1-based) of a transcript's first process, and that turn's exit. */
const turnOf = (name: string, n: number, process = 0) => {
  const transcript = transcripts.find((transcript) => transcript.name === name && transcript.version === latest)
  assert.isDefined(transcript, `no transcript ${name}`)
  const replayed = replay(transcript!)[process]
  const turn = replayed.turns[n - 1]
  return {
    events: replayed.events.filter((event) => event.turnId === turn.turn.id),
    exit: turn.exit!,
    processes: replay(transcript!)
  }
}

const latest = [...new Set(transcripts.map((transcript) => transcript.version))].sort().at(-1)

// ---------------------------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------------------------

describe("Codex transcripts", () => {
  it("there are transcripts for the pinned codex", () => {
    const pinned = JSON.parse(
      Fs.readFileSync(Path.join(import.meta.dirname, "../../transport-node/package.json"), "utf8")
    ).devDependencies["@openai/codex"]
    assert.isAtLeast(transcripts.filter((transcript) => transcript.version === pinned).length, 15)
  })

  describe.each(transcripts.map((transcript) => [`${transcript.version}/${transcript.name}`, transcript] as const))(
    "%s",
    (_, transcript) => {
      it("every line the server wrote decodes, by its shape; every method is a known one", () => {
        assert.isAbove(transcript.stdout.length, 0)
        for (const line of transcript.stdout) {
          const message = decodeOk(line)
          if (message._tag === "Request" || message._tag === "Notification") {
            assert.isTrue(
              knownServerMethods.has(message.method),
              `${transcript.name}: unknown method ${message.method}`
            )
          }
          // A line with both `method` and `id` is the server's request; responses carry no method.
          const raw = JSON.parse(line)
          assert.strictEqual(
            message._tag,
            typeof raw.method === "string"
              ? "id" in raw ? "Request" : "Notification"
              : "error" in raw
              ? "ErrorResponse"
              : "Response"
          )
        }
      })

      it("every line the host wrote decodes too, and the .ndjson's server lines are the stdout file's", () => {
        const server = transcript.entries.filter((entry) => entry.dir === "<")
        assert.deepStrictEqual(server.map((entry) => entry.msg), transcript.stdout.map((line) => JSON.parse(line)))
        for (const entry of transcript.entries.filter((entry) => entry.dir === ">")) {
          assert.isDefined(entry.msg, `${transcript.name}: a client line that is not JSON`)
          const message = decodeOk(JSON.stringify(entry.msg))
          assert.include(["Request", "Notification", "Response"], message._tag)
        }
      })

      it("replayed through the protocol machine and the session machine, every turn settles as it did", () => {
        const processes = replay(transcript)
        const segments = processesOf(transcript.entries)
        processes.forEach((process, i) => {
          const name = `${transcript.name} (process ${i + 1})`
          assert.isTrue(process.ready, `${name}: the handshake finished (${process.startFailed ?? ""})`)
          const protocolErrors = process.events.filter((event) => event._tag === "ProtocolError")
          assert.deepStrictEqual(protocolErrors, [], `${name}: every line is understood`)
          const expected = expectedTurns(segments[i])
          for (const turn of process.turns) assertSettled(name, turn, expected.get(turn.requestId))
          assert.deepStrictEqual(process.machine.pendingPermissions(), [], `${name}: no approval is left pending`)
        })
      })
    }
  )

  describe("what a host sees, replayed from the latest version's transcripts", () => {
    it("a streamed turn: its deltas in order, then the message, the usage and the result", () => {
      const { events, exit } = turnOf("streamed", 1)
      const result = Exit.isSuccess(exit) ? exit.value : assert.fail("the turn failed")
      const deltas = eventsTagged(events, "TextDelta").map((event) => event.text)
      assert.strictEqual(deltas.length, 3)
      assert.strictEqual(deltas.join(""), result.text)
      assert.deepStrictEqual(eventsTagged(events, "AssistantMessage").map((event) => event.text), [result.text])
      assert.isAbove(result.usage.inputTokens, 0)
      assert.isAbove(result.usage.outputTokens, 0)
      assert.deepStrictEqual(eventsTagged(events, "Usage")[0].usage, result.usage)
      assert.deepStrictEqual(
        [events[0]._tag, events.at(-1)?._tag],
        ["TurnStarted", "TurnCompleted"],
        "the turn's events run from its start to its completion"
      )
      assert.strictEqual((result as any).status, "completed")
    })

    it("an accepted command: the request, the command as a tool use, its output as the tool result", () => {
      const { events } = turnOf("commandAccept", 1)
      const [requested] = eventsTagged(events, "PermissionRequested")
      assert.strictEqual(requested.request.kind, "command")
      assert.strictEqual(requested.request.input["command"], "/bin/bash -lc 'touch accepted.txt && echo accepted'")
      assert.deepStrictEqual(eventsTagged(events, "PermissionResolved").map((event) => event.resolution._tag), [
        "Decided"
      ])
      const [use] = eventsTagged(events, "ToolUse")
      const results = eventsTagged(events, "ToolResult")
      assert.strictEqual(use.name, "command")
      assert.deepStrictEqual(results.map((result) => [result.toolUseId, result.isError, result.content]), [
        [use.toolUseId, false, "accepted\n"]
      ])
      assert.strictEqual(requested.request.toolUseId, use.toolUseId)
    })

    it("a declined command: a failed tool result, and the turn goes on", () => {
      const { events, exit } = turnOf("commandDecline", 1)
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(eventsTagged(events, "ToolResult").map((result) => result.isError), [true])
    })

    it("a file change: the approval carries the changes from the item that announced them", () => {
      const { events } = turnOf("fileChangeAccept", 1)
      const [requested] = eventsTagged(events, "PermissionRequested")
      assert.strictEqual(requested.request.kind, "file-change")
      const changes = requested.request.input["changes"] as ReadonlyArray<any>
      assert.deepStrictEqual(changes.map((change) => [change.path, change.kind.type]), [
        ["/home/user/project/patched.txt", "add"]
      ])
      assert.deepStrictEqual(eventsTagged(events, "ToolResult").map((result) => result.isError), [false])
    })

    it("a dropped stream the server retries: a Retry event, then the retry's text", () => {
      const { events, exit } = turnOf("streamRetry", 1)
      const retries = eventsTagged(events, "Retry")
      assert.strictEqual(retries.length, 1)
      assert.include(retries[0].message, "Reconnecting")
      assert.isTrue(Exit.isSuccess(exit))
      if (Exit.isSuccess(exit)) assert.strictEqual(exit.value.text, "Hello from the mock: [drop once] Try again")
    })

    it("an interrupt mid-stream: the deltas so far were the turn's, its message never completes", () => {
      const { events } = turnOf("interruptMidStream", 1)
      assert.isAbove(eventsTagged(events, "TextDelta").length, 0)
      assert.deepStrictEqual(eventsTagged(events, "AssistantMessage"), [])
      assert.strictEqual(eventsTagged(events, "TurnFailed").length, 1)
    })

    it("an interrupt while an approval waits: the request expires with the turn, unanswered", () => {
      const { events } = turnOf("interruptDuringApproval", 1)
      assert.deepStrictEqual(eventsTagged(events, "PermissionResolved").map((event) => event.resolution), [
        { _tag: "Expired", why: "turn-ended" }
      ])
    })

    it("a resumed thread: the second process continues the first one's thread", () => {
      const { processes } = turnOf("resume", 1)
      assert.strictEqual(processes.length, 2)
      assert.isDefined(processes[0].machine.sessionId)
      assert.strictEqual(processes[1].machine.sessionId, processes[0].machine.sessionId)
    })
  })
})
