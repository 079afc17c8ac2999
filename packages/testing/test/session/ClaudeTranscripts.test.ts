/**
 * The recorded transcripts of the real `claude` (test/fixtures/claude/<version>/, both pinned versions, recorded by
 * `pnpm fixtures:record`) replayed through Claude's pure protocol machine under the session machine, the way
 * CodexTranscripts.test.ts replays Codex's: the host's side (prompts, interrupts, controls, permission and hook
 * answers, closing) is issued where the transcript's host lines show it, the CLI's lines are fed as they came, and
 *
 * - every turn settles the way the transcript shows it did (its `result`, or the close or exit that came first);
 * - every event the CLI printed for the running turn (deltas, messages, tools, permissions) is that turn's;
 * - each turn is acknowledged on the line where the CLI first shows it took the prompt: 2.1.332's
 *   `session_state_changed running` or `command_lifecycle queued`, 2.1.197's `system/init` (it sends no receipt,
 *   and replays the prompt only with the first model response);
 * - what the machine writes is what the transcript's host wrote, where the session can write it.
 *
 * `noinit` is not replayed: a session always starts with `initialize`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ClaudeProtocol from "@tether/claude/ClaudeProtocol"
import { Permission, type SessionEvent } from "@tether/core"
import type { Capabilities } from "@tether/core/Provider"
import type { AnyTurnError, TurnResult } from "@tether/core/Turn"
import { PinnedClaude } from "@tether/testing"
import { Cause, Exit, Option } from "effect"
import * as ClaudeMachine from "../../../claude/src/internal/machine.ts"
import {
  fixtureFiles,
  fixtureVersions,
  readLines,
  scenarioOf,
  versionOf
} from "../../../claude/test/support/Fixtures.ts"
import * as SessionMachine from "../../../core/src/internal/session/machine.ts"
import {
  deadlines,
  describeExit,
  type Entry,
  eventsTagged,
  processesOf
} from "../../../core/test/support/Transcripts.ts"

interface Transcript {
  readonly version: string
  readonly name: string
  readonly entries: ReadonlyArray<Entry>
}

const transcripts: ReadonlyArray<Transcript> = fixtureFiles(".ndjson").map((file) => ({
  version: versionOf(file),
  name: scenarioOf(file).slice(versionOf(file).length + 1),
  entries: readLines(file).map((line) => JSON.parse(line) as Entry)
}))

/** Transcripts a session cannot replay, and why. */
const notReplayed: Readonly<Record<string, string>> = {
  noinit: "the host never sent initialize; a session always does"
}

// ---------------------------------------------------------------------------------------------------------------
// What the transcript alone says
// ---------------------------------------------------------------------------------------------------------------

/** How a prompt's turn ended, read from the transcript's lines alone. */
type Expected =
  | { readonly _tag: "Completed"; readonly text: string }
  | { readonly _tag: "Interrupted"; readonly reason: string }
  | { readonly _tag: "Api"; readonly status: number | null }
  | { readonly _tag: "Failed"; readonly subtype: string }
  | { readonly _tag: "Exited" }

/** The prompt uuids a frame names (`user_message_uuid(s)`, a lifecycle frame's command, a replay's uuid). */
const namedPrompts = (msg: any): ReadonlyArray<string> => {
  const named: Array<string> = []
  if (typeof msg.user_message_uuid === "string") named.push(msg.user_message_uuid)
  if (Array.isArray(msg.user_message_uuids)) named.push(...msg.user_message_uuids)
  if (msg.type === "command_lifecycle") named.push(msg.command_uuid)
  if (msg.type === "user" && msg.isReplay === true) named.push(msg.uuid)
  return named
}

/**
 * Does this CLI line show that the CLI took the prompt `uuid`, written before it? Anything the CLI prints for the
 * running turn does; what answers the host (control responses and their echoes), a permission-mode change's
 * status, a session going idle or its background tasks changing, and what names another prompt, do not.
 */
const showsTaken = (msg: any, uuid: string): boolean => {
  if (msg.type === "control_response" || msg.type === "keep_alive") return false
  if (msg.type === "system") {
    if (msg.subtype === "status" && msg.status === null) return false
    if (msg.subtype === "session_state_changed" && msg.state === "idle") return false
    if (msg.subtype === "background_tasks_changed" || msg.subtype === "commands_changed") return false
  }
  const named = namedPrompts(msg)
  if (msg.type === "user" && msg.isReplay === true) return named.includes(uuid)
  return named.length === 0 || named.includes(uuid)
}

// ---------------------------------------------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------------------------------------------

interface HostTurn {
  /** The uuid the transcript's host stamped on the prompt (the session's turn id). */
  readonly uuid: string
  readonly content: unknown
  readonly turn: SessionMachine.Turn
  /** How many CLI lines of the process had been fed when the machine wrote the prompt. */
  writtenAfter: number | undefined
  /** The index (among the process's CLI lines) of the line whose processing acknowledged the turn. */
  acknowledgedAt: number | undefined
  exit: Exit.Exit<TurnResult, AnyTurnError> | undefined
}

interface Process {
  readonly entries: ReadonlyArray<Entry>
  /** The CLI's lines, as fed. */
  readonly cli: ReadonlyArray<any>
  readonly machine: SessionMachine.Machine
  readonly turns: ReadonlyArray<HostTurn>
  readonly events: ReadonlyArray<SessionEvent.SessionEvent>
  /** The capabilities after the handshake. */
  readonly atHandshake: Capabilities | undefined
  /** Events of the running turn's kinds that were not published as its own: `<event> while <turn>`. */
  readonly misattributed: ReadonlyArray<string>
  /** Host lines the machine did not write as the transcript has them. */
  readonly mismatches: ReadonlyArray<string>
}

/** The verdict behind a recorded answer to `can_use_tool`. */
const verdictOf = (response: any, request: Permission.PermissionRequest): Permission.Verdict =>
  response.behavior === "allow"
    ? response.updatedInput !== undefined &&
        JSON.stringify(response.updatedInput) !== JSON.stringify(request.input)
      ? Permission.allow(response.updatedInput)
      : Permission.allow()
    : Permission.deny(response.message, response.interrupt === true ? { interrupt: true } : undefined)

/** Event kinds that are always about the running turn when one runs. */
const turnKinds: ReadonlySet<string> = new Set([
  "TextDelta",
  "AssistantMessage",
  "ToolUse",
  "ToolResult",
  "PermissionRequested",
  "Retry"
])

const replayProcess = (name: string, entries: ReadonlyArray<Entry>): Process => {
  const initialize =
    entries.find((entry) =>
      entry.dir === ">" && entry.msg?.type === "control_request" && entry.msg.request.subtype === "initialize"
    )!.msg
  const { subtype: _, hooks, ...extra } = initialize.request
  const pendingIds: Array<string> = []
  let synthetic = 0
  const machine = new SessionMachine.Machine(
    ClaudeMachine.make({
      hooks: hooks ?? {},
      initialize: Object.keys(extra).length === 0 ? undefined : extra,
      maxLineLength: ClaudeProtocol.defaultMaxLineLength
    }),
    {
      deadlines,
      queue: true,
      queueCapacity: 8,
      makeId: () => pendingIds.shift() ?? `host-${++synthetic}`,
      logBurst: 100,
      logWindow: 1000
    }
  )
  const turns: Array<HostTurn> = []
  const events: Array<SessionEvent.SessionEvent> = []
  const cli: Array<any> = []
  const misattributed: Array<string> = []
  const mismatches: Array<string> = []
  /** Lines the machine wrote and the replay has not matched yet. */
  const written: Array<any> = []
  /** The CLI's id of each control request the host sent → the id the machine wrote. */
  const requestIds = new Map<string, string>()
  /** The CLI's requests the host answers (hook callbacks), by id. */
  const hostRequests = new Set<string>()
  let atHandshake: Capabilities | undefined

  const pump = (now: number) => {
    for (let line = machine.take(now); line !== undefined; line = machine.take(now)) {
      const frame = JSON.parse(line)
      if (frame.type === "user") {
        // A prompt: its turn's, written now (maybe long after it was sent, when it waited in the queue).
        const turn = turns.find((turn) => turn.uuid === frame.uuid)
        if (turn === undefined) mismatches.push(`a prompt for no turn: ${line}`)
        else {
          turn.writtenAfter = cli.length
          if (JSON.stringify(frame.message.content) !== JSON.stringify(turn.content)) {
            mismatches.push(`prompt ${turn.uuid}: wrote ${JSON.stringify(frame.message.content)}`)
          }
        }
      } else {
        written.push(frame)
      }
      machine.written(now)
    }
    for (const event of machine.events) {
      events.push(event)
      if (event._tag === "TurnAcknowledged") {
        const turn = turns.find((turn) => turn.uuid === event.turnId)
        if (turn !== undefined) turn.acknowledgedAt = cli.length - 1
      }
    }
    for (const output of machine.outputs) {
      if (output._tag === "Settle") {
        const turn = turns.find((turn) => turn.turn === output.turn)
        if (turn !== undefined) turn.exit = output.exit
      }
      if (output._tag === "Ready") atHandshake = machine.provider.capabilities()
      if (output._tag === "Handle") hostRequests.add(output.requestId)
    }
    machine.drained()
  }
  const takeWritten = (what: string): any => {
    const line = written.shift()
    if (line === undefined) mismatches.push(`${what}: the machine wrote nothing`)
    return line
  }

  machine.start(entries[0].t)
  pump(entries[0].t)
  for (const entry of entries) {
    const now = entry.t
    const msg = entry.msg
    if (entry.dir === "<") {
      let line = msg
      if (msg.type === "control_response" && requestIds.has(msg.response.request_id)) {
        line = { ...msg, response: { ...msg.response, request_id: requestIds.get(msg.response.request_id) } }
      }
      const running = machine.active !== undefined && machine.active.taken ? machine.active.id : undefined
      cli.push(msg)
      const before = events.length
      machine.receive(now, JSON.stringify(line))
      pump(now)
      if (running !== undefined) {
        for (const event of events.slice(before)) {
          if (turnKinds.has(event._tag) && event.turnId !== running) {
            misattributed.push(`${event._tag}@${event.turnId} while ${running}: ${JSON.stringify(msg).slice(0, 120)}`)
          }
        }
      }
    } else if (entry.dir === ">" && msg === undefined) {
      // A line that is not JSON (badInput): a session never writes one.
    } else if (entry.dir === ">" && msg.type === "control_request") {
      const request = msg.request
      if (request.subtype === "initialize" && msg === initialize) {
        const wrote = takeWritten("initialize")
        if (JSON.stringify(wrote?.request) !== JSON.stringify(request)) {
          mismatches.push(`initialize: wrote ${JSON.stringify(wrote?.request)}`)
        } else {
          requestIds.set(msg.request_id, wrote.request_id)
        }
      } else if (request.subtype === "interrupt") {
        const outcome = machine.interruptActive(now, "host")
        pump(now)
        if (typeof outcome === "object") {
          const wrote = takeWritten("interrupt")
          if (wrote?.request?.subtype !== "interrupt") mismatches.push(`interrupt: wrote ${JSON.stringify(wrote)}`)
          else requestIds.set(msg.request_id, wrote.request_id)
        } else if (outcome !== "no-active-turn") {
          mismatches.push(`interrupt: ${outcome}`)
        }
      } else {
        const ref = machine.control(now, request)
        pump(now)
        const wrote = takeWritten(request.subtype)
        if (typeof ref !== "number" || JSON.stringify(wrote?.request) !== JSON.stringify(request)) {
          mismatches.push(`${request.subtype}: wrote ${JSON.stringify(wrote)}`)
        } else {
          requestIds.set(msg.request_id, wrote.request_id)
        }
      }
    } else if (entry.dir === ">" && msg.type === "user") {
      const uuid: string = msg.uuid ?? `host-${synthetic + 1}`
      pendingIds.push(uuid)
      const sent = machine.send(now, msg.message.content, true, false)
      if (!(sent instanceof SessionMachine.Turn)) {
        mismatches.push(`prompt ${uuid} refused: ${sent._tag}`)
      } else {
        turns.push({
          uuid,
          content: msg.message.content,
          turn: sent,
          writtenAfter: undefined,
          acknowledgedAt: undefined,
          exit: undefined
        })
      }
      pump(now)
    } else if (entry.dir === ">" && msg.type === "control_response") {
      // The host answers one of the CLI's requests.
      const response = msg.response
      const id: string = response.request_id
      const permission = machine.pendingPermissions().find((request) => request.requestId === id)
      if (permission !== undefined) {
        if (response.subtype === "success") machine.decided(now, id, verdictOf(response.response, permission))
        else machine.policyFailed(now, id) // a session answers a failed policy with a deny
        pump(now)
        const wrote = takeWritten(`the answer to ${id}`)
        if (wrote?.response?.request_id !== id) {
          mismatches.push(`answer ${id}: wrote ${JSON.stringify(wrote)}`)
        } else if (response.subtype === "success") {
          const sent = wrote.response.response
          const recorded = response.response
          if (
            sent.behavior !== recorded.behavior ||
            (recorded.updatedInput !== undefined &&
              JSON.stringify(sent.updatedInput) !== JSON.stringify(recorded.updatedInput)) ||
            (recorded.behavior === "deny" &&
              (sent.message !== recorded.message || (sent.interrupt ?? false) !== (recorded.interrupt ?? false)))
          ) {
            mismatches.push(`answer ${id}: wrote ${JSON.stringify(sent)}, recorded ${JSON.stringify(recorded)}`)
          }
        }
      } else if (hostRequests.delete(id)) {
        machine.handled(
          now,
          id,
          response.subtype === "success"
            ? { _tag: "Success", payload: response.response }
            : { _tag: "Error", message: response.error }
        )
        pump(now)
        const wrote = takeWritten(`the answer to ${id}`)
        if (JSON.stringify(wrote) !== JSON.stringify(msg)) {
          mismatches.push(`answer ${id}: wrote ${JSON.stringify(wrote)}`)
        }
      } else {
        // The CLI withdrew the request before the host answered: a session writes nothing.
        machine.decided(now, id, Permission.allow())
        pump(now)
      }
    } else if (entry.dir === "note" && entry.text === "closing stdin (EOF)") {
      machine.close(now, "closed")
      pump(now)
    } else if (entry.dir === "note" && entry.text?.startsWith("exit code=")) {
      const [, code, signal] = /^exit code=(\S+) signal=(\S+)$/.exec(entry.text)!
      machine.exited(
        now,
        code !== "null" ? { _tag: "Exited", code: Number(code) } : { _tag: "Signaled", signal: signal as any },
        ""
      )
      pump(now)
    }
  }
  for (const line of written) mismatches.push(`${name}: a line the transcript does not have: ${JSON.stringify(line)}`)
  return { entries, cli, machine, turns, events, atHandshake, misattributed, mismatches }
}

/** Splits a transcript at its spawn notes and replays each process. */
const replay = (transcript: Transcript): ReadonlyArray<Process> =>
  processesOf(transcript.entries).map((segment) => replayProcess(transcript.name, segment))

/** How each prompt of a process ended, by its uuid, from the transcript's lines alone. */
const expectedTurns = (entries: ReadonlyArray<Entry>): Map<string, Expected> => {
  const prompts: Array<string> = []
  const expected = new Map<string, Expected>()
  const interrupted = new Set<string>()
  const deniedWithInterrupt = new Set<string>()
  let synthetic = 0
  let results = 0
  // The CLI runs prompts one at a time, in the order written: its n-th result is the n-th prompt's.
  const current = () => prompts[results]
  for (const entry of entries) {
    const msg = entry.msg
    if (entry.dir === ">" && msg?.type === "user") prompts.push(msg.uuid ?? `host-${++synthetic}`)
    if (entry.dir === ">" && msg?.type === "control_request" && msg.request.subtype === "interrupt") {
      if (current() !== undefined) interrupted.add(current())
    }
    if (entry.dir === ">" && msg?.type === "control_response" && msg.response.response?.interrupt === true) {
      if (current() !== undefined) deniedWithInterrupt.add(current())
    }
    if (entry.dir === "note" && entry.text === "closing stdin (EOF)") {
      // Closing fails the running turn (and drops the queued ones) at once.
      for (const uuid of prompts.slice(results)) {
        if (!expected.has(uuid)) expected.set(uuid, { _tag: "Interrupted", reason: "closed" })
      }
    }
    if (entry.dir === "note" && entry.text?.startsWith("exit code=")) {
      for (const uuid of prompts.slice(results)) if (!expected.has(uuid)) expected.set(uuid, { _tag: "Exited" })
    }
    if (entry.dir !== "<" || msg.type !== "result") continue
    const uuid = current()
    results++
    if (uuid === undefined || expected.has(uuid)) continue
    if (typeof msg.user_message_uuid === "string") assert.strictEqual(msg.user_message_uuid, uuid)
    const terminal = msg.terminal_reason
    expected.set(
      uuid,
      terminal === "aborted_streaming" || terminal === "aborted_tools"
        ? {
          _tag: "Interrupted",
          reason: deniedWithInterrupt.has(uuid) ? "permission" : interrupted.has(uuid) ? "host" : "?"
        }
        : msg.subtype === "success"
        ? msg.is_error ? { _tag: "Api", status: msg.api_error_status ?? null } : { _tag: "Completed", text: msg.result }
        : { _tag: "Failed", subtype: msg.subtype }
    )
  }
  return expected
}

const assertSettled = (name: string, turn: HostTurn, expected: Expected | undefined) => {
  const what = `${name}: turn ${turn.uuid} (${describeExit(turn.exit)})`
  assert.isDefined(expected, `${what}: the transcript shows no end of this turn`)
  assert.isDefined(turn.exit, `${what}: the turn did not settle`)
  const exit = turn.exit!
  if (expected!._tag === "Completed") {
    assert.isTrue(Exit.isSuccess(exit), what)
    if (Exit.isSuccess(exit)) assert.strictEqual(exit.value.text, expected!.text, what)
    return
  }
  assert.isTrue(Exit.isFailure(exit), what)
  const error = Option.getOrThrow(Cause.findErrorOption((exit as Exit.Failure<never, AnyTurnError>).cause)) as any
  switch (expected!._tag) {
    case "Interrupted":
      assert.strictEqual(error._tag, "TurnInterrupted", what)
      assert.strictEqual(error.reason, expected!.reason, what)
      if (expected!.reason !== "closed") assert.isTrue(error.acknowledged, `${what}: the CLI had taken the prompt`)
      return
    case "Api":
      assert.strictEqual(error._tag, "ApiError", what)
      assert.strictEqual(error.status, expected!.status, what)
      assert.isFalse(error.deliveryUncertain, what)
      return
    case "Failed":
      assert.include(JSON.stringify(error), expected!.subtype, what)
      return
    case "Exited":
      assert.strictEqual(error._tag, "CliExited", what)
      assert.isTrue(error.acknowledged, what)
      return
  }
}

const transcript = (version: string, name: string): Transcript => {
  const found = transcripts.find((transcript) => transcript.version === version && transcript.name === name)
  assert.isDefined(found, `no transcript ${version}/${name}`)
  return found!
}

// ---------------------------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------------------------

describe("Claude transcripts through the protocol machine and the session machine", () => {
  it("both pinned versions recorded transcripts", () => {
    assert.deepStrictEqual(fixtureVersions, [...PinnedClaude.versions])
    for (const version of fixtureVersions) {
      assert.isAtLeast(transcripts.filter((transcript) => transcript.version === version).length, 20, version)
    }
  })

  describe.each(
    transcripts.filter((transcript) => notReplayed[transcript.name] === undefined).map((transcript) =>
      [`${transcript.version}/${transcript.name}`, transcript] as const
    )
  )("%s", (_, transcript) => {
    const processes = replay(transcript)

    it("every turn settles as the transcript shows; the session writes what the host wrote", () => {
      const segments = processesOf(transcript.entries)
      processes.forEach((process, i) => {
        const name = `${transcript.version}/${transcript.name} (process ${i + 1})`
        assert.isDefined(process.atHandshake, `${name}: the handshake finished`)
        assert.deepStrictEqual(eventsTagged(process.events, "ProtocolError"), [], `${name}: every line is understood`)
        assert.deepStrictEqual(process.mismatches, [], name)
        const expected = expectedTurns(segments[i])
        for (const turn of process.turns) assertSettled(name, turn, expected.get(turn.uuid))
        assert.deepStrictEqual(process.machine.pendingPermissions(), [], `${name}: no permission is left pending`)
      })
    })

    it("what the CLI printed for the running turn is that turn's", () => {
      for (const process of processes) assert.deepStrictEqual(process.misattributed, [])
    })

    it("each turn is acknowledged where the CLI first shows it took the prompt", () => {
      for (const process of processes) {
        for (const turn of process.turns) {
          if (turn.writtenAfter === undefined) continue // dropped from the queue by a close
          const first = process.cli.findIndex((msg, i) => i >= turn.writtenAfter! && showsTaken(msg, turn.uuid))
          const what = `turn ${turn.uuid}`
          if (first === -1) {
            // The CLI printed nothing for it (it exited first): never acknowledged, delivery uncertain.
            assert.isUndefined(turn.acknowledgedAt, what)
            continue
          }
          assert.strictEqual(
            turn.acknowledgedAt,
            first,
            `${what}: acknowledged by ${JSON.stringify(process.cli[first])}`
          )
          const line = process.cli[first]
          const replayed = process.cli.findIndex((msg, i) =>
            i >= turn.writtenAfter! && msg.type === "user" && msg.isReplay === true && msg.uuid === turn.uuid
          )
          if (transcript.version === PinnedClaude.oldest) {
            // No receipt: the turn's first frame (system/init, or the UserPromptSubmit hook's request), long before
            // the replay, which comes only with the first model response.
            assert.include(["system", "control_request"], line.type, what)
            if (replayed !== -1) assert.isBelow(first, replayed, what)
          } else {
            // The receipt (`command_lifecycle queued`), or the session going to running just before it.
            const queued = process.cli.findIndex((msg, i) =>
              i >= turn.writtenAfter! && msg.type === "command_lifecycle" && msg.state === "queued" &&
              msg.command_uuid === turn.uuid
            )
            if (queued !== -1) assert.isAtMost(first, queued, what)
            assert.include(["system", "command_lifecycle"], line.type, what)
          }
        }
      }
    })
  })

  for (const version of fixtureVersions) {
    const oldest = version === PinnedClaude.oldest
    describe(`what a host sees, replayed from ${version}`, () => {
      it("capabilities: receipts and the CLI's version, from the handshake or the first system/init", () => {
        const [process] = replay(transcript(version, "plain"))
        assert.deepStrictEqual(
          [process.atHandshake?.receipts, process.atHandshake?.notes],
          oldest ? ["first-output", []] : ["explicit", [`claude ${version}`]]
        )
        const now = process.machine.provider.capabilities()
        assert.deepStrictEqual([now.receipts, now.notes], [oldest ? "first-output" : "explicit", [`claude ${version}`]])
      })

      it("a streamed turn: all its deltas are its own, in order, then the message, the usage and the result", () => {
        const [process] = replay(transcript(version, "streamed"))
        const [turn] = process.turns
        // What turn.events delivers: the turn's events up to its terminal one (2.1.332's `command_lifecycle
        // completed` names the turn after its result).
        const own = process.events.filter((event) => event.turnId === turn.turn.id)
        const events = own.slice(0, own.findIndex((event) => event._tag === "TurnCompleted") + 1)
        const result = Exit.isSuccess(turn.exit!) ? turn.exit.value : assert.fail("the turn failed")
        const deltas = eventsTagged(events, "TextDelta")
        assert.strictEqual(deltas.length, 3)
        assert.strictEqual(deltas.map((delta) => delta.text).join(""), result.text)
        assert.deepStrictEqual(eventsTagged(process.events, "TextDelta").length, 3, "no delta outside the turn")
        assert.deepStrictEqual(eventsTagged(events, "AssistantMessage").map((event) => event.text), [result.text])
        assert.deepStrictEqual(eventsTagged(events, "Usage")[0].usage, result.usage)
        assert.deepStrictEqual(
          [events[0]._tag, events.at(-1)?._tag],
          ["TurnStarted", "TurnCompleted"],
          "the turn's events run from its start to its completion"
        )
        const acknowledged = events.findIndex((event) => event._tag === "TurnAcknowledged")
        assert.isBelow(acknowledged, events.findIndex((event) => event._tag === "TextDelta"))
        // 2.1.197's replay comes after the block's deltas, right before the assistant message; it is the turn's.
        const replayed = events.findIndex((event) => event._tag === "Frame" && event.subtype === "replay")
        assert.isAbove(replayed, 0)
        if (oldest) {
          assert.isAbove(replayed, events.findLastIndex((event) => event._tag === "TextDelta"))
          assert.strictEqual(events[replayed + 1]._tag, "AssistantMessage")
        }
      })

      it("an interrupt mid-stream: the deltas so far were the turn's; interrupted, not retired; the next turn runs", () => {
        const [process] = replay(transcript(version, "interrupt"))
        const [interrupted, next] = process.turns
        const error = Option.getOrThrow(Cause.findErrorOption((interrupted.exit as Exit.Failure<never, any>).cause))
        assert.strictEqual(error._tag, "TurnInterrupted")
        assert.strictEqual(error.reason, "host")
        assert.isTrue(error.acknowledged)
        assert.isAbove(
          eventsTagged(process.events.filter((event) => event.turnId === interrupted.turn.id), "TextDelta").length,
          0
        )
        assert.isTrue(Exit.isSuccess(next.exit!))
        assert.isUndefined(process.machine.retiredBecause)
        assert.strictEqual(process.machine.process._tag, "Completed")
      })

      it("controls answered without a payload succeed; set_model's replay (a uuid the CLI minted) is no turn's", () => {
        const [process] = replay(transcript(version, "controls"))
        const local = process.events.filter((event) =>
          event._tag === "Frame" && event.type === "user" && JSON.stringify(event.raw).includes("local-command-stdout")
        )
        assert.isAbove(local.length, 0, "set_model's output was replayed")
        assert.isTrue(local.every((event) => event.turnId === undefined))
        assert.deepStrictEqual(eventsTagged(process.events, "TurnAcknowledged").length, 1)
        const [turn] = process.turns
        assert.isTrue(Exit.isSuccess(turn.exit!))
      })
    })
  }
})
