#!/usr/bin/env node
// A stand-in for the `claude` CLI speaking enough of its stream-json duplex protocol for process-level tests
// (see docs/protocol/claude-stream-json.md). Plain Node, no dependencies, so it starts fast.
//
// Well-behaved by default: answers `initialize`, `interrupt` and a few other control requests; runs one turn per
// user message (command_lifecycle queued/started, system/init, the replay with --replay-user-messages, stream_event
// deltas with --include-partial-messages, assistant, result, command_lifecycle completed); stays alive after a
// result; exits 0 on stdin EOF (1 when the last result was an error) and 143 on SIGTERM.
//
// FAKE_CLAUDE_MODE (comma separated) selects misbehaviour:
//   ignore-sigterm      ignores SIGTERM and stdin EOF: only SIGKILL ends it
//   grandchildren       spawns FAKE_CLAUDE_CHILDREN (2) `sleep` children in its own process group
//   setsid-child        spawns `sh -c 'sleep N; :'` as the leader of a new session, the way the Bash tool runs commands
//   double-fork-daemon  spawns a daemon whose parent exits at once: the `sleep` is re-parented, in its own session
//   crash-mid-turn      exits with FAKE_CLAUDE_EXIT_CODE (3) after the first frames of a turn
//   hang                reads stdin but never answers and ignores EOF (dies on SIGTERM)
//   flood               writes stream_event frames without end (FAKE_CLAUDE_FLOOD_COUNT bounds it) from the start
//   giant-line          the first turn starts with one assistant frame of FAKE_CLAUDE_GIANT_BYTES (3 MiB)
//   stderr-flood        writes to stderr without end
//   exit-after-result   exits 0 right after the first result
// FAKE_CLAUDE_TOOL runs a shell command the way the Bash tool does (`/bin/bash -c`, the leader of a new session,
// not waited for), with the descendants; FAKE_CLAUDE_CLI_TOOL runs one in the CLI's own session and process group.
// Other knobs: FAKE_CLAUDE_FRAME_DELAY_MS (0) between the frames of a turn, FAKE_CLAUDE_SPAWN_AT (`start` | `turn`)
// for when descendants are started, FAKE_CLAUDE_SLEEP_SECONDS (1000) for their lifetime, FAKE_CLAUDE_CHILD_STDIO
// (`ignore` | `inherit`: descendants that hold the CLI's stdout open), FAKE_CLAUDE_DELTAS (3).
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { answerControl, controlSuccess as controlResponse } from "./controls.mjs"
import { onStdinLines } from "./lines.mjs"

const env = process.env
const argv = process.argv.slice(2)
const modes = new Set((env.FAKE_CLAUDE_MODE ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0))
const replayUserMessages = argv.includes("--replay-user-messages")
const includePartialMessages = argv.includes("--include-partial-messages")
const readsSessionState = env.CLAUDE_CODE_SDK_READS_SESSION_STATE === "1"
const frameDelayMs = Number(env.FAKE_CLAUDE_FRAME_DELAY_MS ?? "0")
const spawnAt = env.FAKE_CLAUDE_SPAWN_AT ?? "start"
const sleepSeconds = env.FAKE_CLAUDE_SLEEP_SECONDS ?? "1000"
const childStdio = env.FAKE_CLAUDE_CHILD_STDIO === "inherit" ? "inherit" : "ignore"
const deltaCount = Number(env.FAKE_CLAUDE_DELTAS ?? "3")
const model = "claude-opus-5-5"
const version = "2.1.332"
const sessionId = randomUUID()
const cwd = process.cwd()

const ignoresTermination = modes.has("ignore-sigterm")
const ignoresEof = ignoresTermination || modes.has("hang")

// --- output ------------------------------------------------------------------------------------------------------

process.stdout.on("error", () => process.exit(141))
const emit = (frame) => {
  process.stdout.write(JSON.stringify(frame) + "\n")
}
const log = (text) => {
  process.stderr.write(`fake-claude[${process.pid}]: ${text}\n`)
}
const sleep = (ms) => ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve()

// --- signals -----------------------------------------------------------------------------------------------------

process.on("SIGTERM", () => {
  if (ignoresTermination) {
    log("ignoring SIGTERM")
    return
  }
  process.exit(143)
})
process.on("SIGINT", () => {
  if (!ignoresTermination) process.exit(130)
})
// Keeps the process alive in the modes that outlive stdin EOF.
if (ignoresEof) setInterval(() => {}, 1 << 30)

// --- descendants -------------------------------------------------------------------------------------------------

let descendantsStarted = false
const startDescendants = () => {
  if (descendantsStarted) return
  descendantsStarted = true
  if (modes.has("grandchildren")) {
    const count = Number(env.FAKE_CLAUDE_CHILDREN ?? "2")
    for (let i = 0; i < count; i++) {
      const child = spawn("sleep", [sleepSeconds], { stdio: childStdio })
      log(`spawned grandchild ${child.pid}`)
    }
  }
  if (modes.has("setsid-child")) {
    // `detached` makes the child call setsid(): a session and group leader, out of reach of a group kill. The
    // trailing `:` keeps sh from exec'ing sleep, so there is a leader and a member, like the Bash tool's shell.
    const child = spawn("/bin/sh", ["-c", `sleep ${sleepSeconds}; :`], { stdio: childStdio, detached: true })
    child.unref()
    log(`spawned setsid child ${child.pid}`)
  }
  for (const [command, detached] of [[env.FAKE_CLAUDE_TOOL, true], [env.FAKE_CLAUDE_CLI_TOOL, false]]) {
    if (command === undefined) continue
    const child = spawn("/bin/bash", ["-c", command], { stdio: childStdio, detached })
    child.on("error", () => {})
    child.unref()
    log(`ran tool ${child.pid}`)
  }
  if (modes.has("double-fork-daemon")) {
    // sh starts a new session, backgrounds sleep and exits: sleep is re-parented (PID 1 or a subreaper).
    const child = spawn("/bin/sh", ["-c", `sleep ${sleepSeconds} </dev/null >/dev/null 2>&1 & exit 0`], {
      stdio: childStdio,
      detached: true
    })
    child.unref()
    log(`spawned daemon launcher ${child.pid}`)
  }
}
if (spawnAt === "start") startDescendants()

if (modes.has("stderr-flood")) {
  const noise = "x".repeat(1023) + "\n"
  const pump = () => {
    // An async write loop that respects stderr's backpressure, so a host that does not drain stderr blocks us.
    while (process.stderr.write(noise)) {
      if (Math.random() < 0.01) break
    }
    if (process.stderr.writableNeedDrain) process.stderr.once("drain", pump)
    else setImmediate(pump)
  }
  pump()
}

if (modes.has("flood")) {
  const limit = env.FAKE_CLAUDE_FLOOD_COUNT === undefined ? Infinity : Number(env.FAKE_CLAUDE_FLOOD_COUNT)
  let sent = 0
  const pump = () => {
    let batch = ""
    const end = Math.min(limit, sent + 256)
    for (; sent < end; sent++) {
      batch += JSON.stringify({
        type: "stream_event",
        event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `flood ${sent}` } },
        session_id: sessionId,
        parent_tool_use_id: null,
        uuid: randomUUID()
      }) + "\n"
    }
    if (batch.length > 0) process.stdout.write(batch)
    if (sent < limit) setImmediate(pump)
  }
  setImmediate(pump)
}

// --- protocol ----------------------------------------------------------------------------------------------------

const hang = modes.has("hang")
let turnCounter = 0
let lastResultWasError = false
let eof = false
let active = undefined // { uuid, interrupted }
const queue = []

const controlSuccess = (requestId, response, initialize = false) =>
  emit(controlResponse(requestId, response, initialize))

const initializeResponse = () => ({
  commands: [],
  agents: [{ name: "claude", description: "Catch-all agent (fake)." }],
  output_style: "default",
  available_output_styles: ["default"],
  models: [{ value: "default", resolvedModel: model, displayName: "Default (recommended)", description: "fake" }],
  account: { tokenSource: "none", apiKeySource: "ANTHROPIC_API_KEY", apiProvider: "firstParty" },
  pid: process.pid,
  claude_code_version: version,
  current_permission_mode: "default",
  hooks_applied: true,
  analytics_disabled: true,
  sandbox_enabled: false,
  fast_mode_state: "off",
  session_state: "idle",
  capabilities: []
})

const onControlRequest = (frame) => {
  const request = frame.request ?? {}
  const id = frame.request_id
  switch (request.subtype) {
    case "initialize":
      return controlSuccess(id, initializeResponse(), true)
    case "interrupt": {
      const stillQueued = []
      if (request.cancel_queued === true) {
        for (const message of queue.splice(0)) stillQueued.push(message.uuid)
      }
      if (active !== undefined) active.interrupted = true
      return controlSuccess(id, { still_queued: stillQueued })
    }
    default:
      return emit(answerControl(request, id, model))
  }
}

const promptText = (message) => {
  const content = message?.content
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content.filter((block) => block?.type === "text").map((block) => block.text).join("")
  }
  return ""
}

const sessionState = (state) => {
  if (readsSessionState) {
    emit({ type: "system", subtype: "session_state_changed", state, sdk_host_only: true, uuid: randomUUID(), session_id: sessionId })
  }
}

const lifecycle = (commandUuid, state) => {
  if (commandUuid !== undefined) {
    emit({ type: "command_lifecycle", command_uuid: commandUuid, state, uuid: randomUUID(), session_id: sessionId })
  }
}

const usage = (output) => ({ input_tokens: 10, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 })

const uuids = (uuid) => uuid === undefined ? {} : { user_message_uuid: uuid, user_message_uuids: [uuid] }

const streamEvent = (event, messageId, extra) => {
  emit({
    type: "stream_event",
    event,
    session_id: sessionId,
    parent_tool_use_id: null,
    uuid: randomUUID(),
    ...extra,
    api_message_id: messageId
  })
}

const assistant = (messageId, text, uuid, extra) => {
  emit({
    type: "assistant",
    message: {
      id: messageId,
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text }],
      stop_reason: null,
      stop_sequence: null,
      usage: usage(1),
      context_management: null
    },
    parent_tool_use_id: null,
    session_id: sessionId,
    uuid: randomUUID(),
    timestamp: new Date().toISOString(),
    request_id: `req_fake${randomUUID().replaceAll("-", "").slice(0, 24)}`,
    ...extra,
    ...uuids(uuid)
  })
}

const result = (uuid, fields, startedAt) => {
  emit({
    type: "result",
    subtype: "success",
    is_error: false,
    num_turns: 1,
    duration_ms: Date.now() - startedAt,
    duration_api_ms: 0,
    stop_reason: "end_turn",
    terminal_reason: "completed",
    total_cost_usd: 0,
    usage: usage(1),
    modelUsage: {},
    permission_denials: [],
    session_id: sessionId,
    uuid: randomUUID(),
    ...uuids(uuid),
    queued_turn_count: queue.length,
    result_index: 0,
    api_error_status: null,
    ...fields
  })
}

const runTurn = async (frame) => {
  const uuid = typeof frame.uuid === "string" ? frame.uuid : undefined
  const turn = { uuid, interrupted: false }
  active = turn
  const startedAt = Date.now()
  const n = ++turnCounter
  const text = `Hello from fake-claude #${n}: ${promptText(frame.message)}`
  const messageId = `msg_fake${randomUUID().replaceAll("-", "").slice(0, 24)}`
  const step = async () => {
    await sleep(frameDelayMs)
    return turn.interrupted
  }
  const interrupted = () => {
    assistant(messageId, "", uuid, { aborted: true })
    emit({
      type: "user",
      message: { role: "user", content: [{ type: "text", text: "[Request interrupted by user]" }] },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: randomUUID(),
      timestamp: new Date().toISOString()
    })
    result(uuid, {
      subtype: "error_during_execution",
      is_error: true,
      stop_reason: null,
      terminal_reason: "aborted_streaming",
      errors: ["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],
      result: undefined
    }, startedAt)
    lastResultWasError = true
    lifecycle(uuid, "cancelled")
  }

  lifecycle(uuid, "started")
  if (spawnAt === "turn") startDescendants()
  emit({
    type: "system",
    subtype: "init",
    cwd,
    session_id: sessionId,
    tools: ["Bash", "Read", "Write"],
    mcp_servers: [],
    model,
    permissionMode: "default",
    slash_commands: [],
    apiKeySource: "ANTHROPIC_API_KEY",
    claude_code_version: version,
    output_style: "default",
    agents: ["claude"],
    skills: [],
    plugins: [],
    capabilities: ["interrupt_receipt_v1", "msg_lifecycle_v1"],
    uuid: randomUUID(),
    ...(uuid === undefined ? {} : { user_message_uuids: [uuid] })
  })
  if (modes.has("crash-mid-turn")) {
    await sleep(frameDelayMs)
    log("crashing mid-turn")
    process.exit(Number(env.FAKE_CLAUDE_EXIT_CODE ?? "3"))
  }
  if (modes.has("giant-line") && n === 1) {
    const bytes = Number(env.FAKE_CLAUDE_GIANT_BYTES ?? String(3 * 1024 * 1024))
    assistant(messageId, "g".repeat(bytes), uuid)
  }
  if (includePartialMessages) {
    emit({ type: "system", subtype: "status", status: "requesting", session_id: sessionId, uuid: randomUUID(), ...(uuid === undefined ? {} : { user_message_uuids: [uuid] }) })
  }
  if (await step()) return interrupted()
  if (replayUserMessages) {
    emit({
      type: "user",
      message: frame.message,
      session_id: sessionId,
      parent_tool_use_id: null,
      uuid: uuid ?? randomUUID(),
      timestamp: new Date().toISOString(),
      isReplay: true
    })
  }
  if (includePartialMessages) {
    streamEvent({
      type: "message_start",
      message: { id: messageId, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: usage(1) }
    }, messageId, { ttft_ms: 1, ...uuids(uuid) })
    streamEvent({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }, messageId)
    const pieces = Math.max(1, deltaCount)
    const size = Math.ceil(text.length / pieces)
    for (let i = 0; i < pieces; i++) {
      if (await step()) return interrupted()
      streamEvent({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: text.slice(i * size, (i + 1) * size) } }, messageId)
    }
  }
  if (await step()) return interrupted()
  assistant(messageId, text, uuid)
  if (includePartialMessages) {
    streamEvent({ type: "content_block_stop", index: 0 }, messageId)
    streamEvent({ type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } }, messageId)
    streamEvent({ type: "message_stop" }, messageId)
  }
  result(uuid, { result: text }, startedAt)
  lastResultWasError = false
  lifecycle(uuid, "completed")
  if (modes.has("exit-after-result")) {
    log("exiting after result")
    process.exit(0)
  }
}

let draining = false
const drain = async () => {
  if (draining) return
  draining = true
  while (queue.length > 0) {
    await runTurn(queue.shift())
    active = undefined
  }
  sessionState("idle")
  draining = false
  if (eof && !ignoresEof) process.exit(lastResultWasError ? 1 : 0)
}

const onFrame = (frame) => {
  switch (frame.type) {
    case "control_request":
      return onControlRequest(frame)
    case "control_response":
      // With --replay-user-messages the real CLI echoes the host's successful answers verbatim.
      if (replayUserMessages && frame.response?.subtype === "success") emit(frame)
      return
    case "user": {
      const uuid = typeof frame.uuid === "string" ? frame.uuid : undefined
      if (!draining) sessionState("running")
      lifecycle(uuid, "queued")
      queue.push(frame)
      void drain()
      return
    }
    default:
      return
  }
}

onStdinLines((line) => {
  if (line.trim().length === 0 || hang) return
  let frame
  try {
    frame = JSON.parse(line)
  } catch (error) {
    log(`Error parsing streaming input line (type=unknown, ${line.length} chars): ${error?.name ?? "SyntaxError"}`)
    process.exit(1)
  }
  onFrame(frame)
})
process.stdin.on("end", () => {
  eof = true
  if (ignoresEof) return
  if (!draining) process.exit(lastResultWasError ? 1 : 0)
})
