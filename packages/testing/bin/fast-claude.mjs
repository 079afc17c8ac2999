#!/usr/bin/env node
// A fast stand-in for the `claude` CLI, for benchmarks (`pnpm bench`): plain Node, no dependencies, and cheap enough
// per frame that the host reading its stdout, not the fake, is the bottleneck.
//
// Speaks the stream-json duplex protocol in the shapes of CLI 2.1.332 (docs/protocol/claude-stream-json.md and
// fixtures/claude/v332-plain.stdout.jsonl), so the official SDK and Tether both accept its output:
//   - `initialize` (and the other known control requests) → control_response success; unknown ones → error
//   - per user message, one turn at a time, in order:
//       session_state_changed running (with CLAUDE_CODE_SDK_READS_SESSION_STATE=1), command_lifecycle queued
//       (command_uuid = the message's uuid) and started, system/init, system/status requesting (partials only), the
//       replay (with --replay-user-messages), stream_event message_start / content_block_start, N text deltas
//       (content_block_delta/text_delta, with --include-partial-messages), the assistant frame, content_block_stop /
//       message_delta / message_stop, result success carrying user_message_uuid, command_lifecycle completed,
//       session_state_changed idle
//   - without --include-partial-messages a turn streams N assistant frames (one text block each) instead
//   - `interrupt` stops the running turn: the partial assistant frame (aborted), the interrupt marker, a result
//     error_during_execution, command_lifecycle cancelled
//   - stays alive after a result; on stdin EOF finishes the running turn and exits 0; SIGTERM exits 143
//
// N: the prompt text `FRAMES:<n>` when present, else FAST_CLAUDE_FRAMES (default 3).
// Output is batched into large writes (FAST_CLAUDE_BATCH_BYTES, default 256 KiB) that wait for `drain`.
import { randomUUID } from "node:crypto"
import { answerControl, controlSuccess as controlResponse } from "./controls.mjs"
import { onStdinLines } from "./lines.mjs"

const argv = process.argv.slice(2)
const env = process.env
const replayUserMessages = argv.includes("--replay-user-messages")
const includePartialMessages = argv.includes("--include-partial-messages")
const readsSessionState = env.CLAUDE_CODE_SDK_READS_SESSION_STATE === "1"
const defaultFrames = Number(env.FAST_CLAUDE_FRAMES ?? "3")
const batchBytes = Number(env.FAST_CLAUDE_BATCH_BYTES ?? String(256 * 1024))
const model = "claude-opus-5-5"
const version = "2.1.332"
const sessionId = randomUUID()
const cwd = process.cwd()

process.on("SIGTERM", () => process.exit(143))
process.on("SIGINT", () => process.exit(130))
process.stdout.on("error", () => process.exit(141))

// --- ids ---------------------------------------------------------------------------------------------------------

// A fresh uuid for every frame without paying for crypto per frame: a random prefix and a counter.
const uuidPrefix = randomUUID().slice(0, 24)
let uuidCounter = 0
const nextUuid = () => uuidPrefix + (uuidCounter++).toString(16).padStart(12, "0")
const hex = (n) => {
  let s = ""
  for (let i = 0; i < n; i++) s += "0123456789abcdef"[(Math.random() * 16) | 0]
  return s
}

// --- output ------------------------------------------------------------------------------------------------------

let pending = ""
let draining = undefined

/** Appends one frame; the caller flushes. */
const push = (frame) => {
  pending += JSON.stringify(frame) + "\n"
}
const pushRaw = (line) => {
  pending += line
}

/** Writes what is pending; resolves at once unless the pipe asks us to wait. */
const flush = () => {
  if (pending.length === 0) return draining ?? Promise.resolve()
  const chunk = pending
  pending = ""
  if (process.stdout.write(chunk)) return Promise.resolve()
  draining ??= new Promise((resolve) =>
    process.stdout.once("drain", () => {
      draining = undefined
      resolve()
    })
  )
  return draining
}
const yieldToInput = () => new Promise((resolve) => setImmediate(resolve))

// --- frames ------------------------------------------------------------------------------------------------------

const tools = [
  "Task",
  "AskUserQuestion",
  "Bash",
  "Edit",
  "ExitPlanMode",
  "NotebookEdit",
  "Read",
  "Skill",
  "TaskStop",
  "ToolSearch",
  "WebFetch",
  "WebSearch",
  "Write"
]
const slashCommands = ["verify", "debug", "code-review", "simplify", "init", "compact", "context", "usage", "config"]

const initializeResponse = () => ({
  commands: slashCommands.map((name) => ({ name, description: `${name} (fake)`, argumentHint: "", builtin: true })),
  agents: [
    { name: "claude", description: "Catch-all for any task that doesn't fit a more specific agent." },
    { name: "Explore", description: "Fast read-only search agent for locating code.", model: "inherit" }
  ],
  output_style: "default",
  available_output_styles: ["default", "Proactive", "Concise", "Explanatory", "Learning"],
  models: [{
    value: "default",
    resolvedModel: model,
    displayName: "Default (recommended)",
    description: "Use the default model",
    supportsEffort: true,
    supportedEffortLevels: ["low", "medium", "high", "xhigh", "max"],
    supportsAdaptiveThinking: true,
    supportsFastMode: true,
    supportsAutoMode: true,
    supportsThinkingOff: false
  }],
  account: { tokenSource: "none", apiKeySource: "ANTHROPIC_API_KEY", apiProvider: "firstParty" },
  pid: process.pid,
  claude_code_version: version,
  current_permission_mode: "default",
  hooks_applied: true,
  hook_on_failure_supported: true,
  analytics_disabled: true,
  sandbox_enabled: false,
  fast_mode_state: "off",
  fast_mode_disabled_reason: "sdk_opt_in_required",
  session_state: "idle",
  capabilities: ["ui_surface_v1"]
})

const systemInit = (userUuid) => ({
  type: "system",
  subtype: "init",
  cwd,
  session_id: sessionId,
  tools,
  mcp_servers: [],
  model,
  permissionMode: "default",
  slash_commands: slashCommands,
  terminal_slash_commands: ["doctor", "color", "focus", "reload-plugins"],
  apiKeySource: "ANTHROPIC_API_KEY",
  claude_code_version: version,
  output_style: "default",
  agents: ["claude", "Explore", "general-purpose", "Plan", "statusline-setup"],
  skills: ["verify", "debug", "code-review", "simplify"],
  plugins: [],
  capabilities: ["interrupt_receipt_v1", "interrupt_cancel_queued_v1", "msg_lifecycle_v1"],
  analytics_disabled: true,
  product_feedback_disabled: true,
  served_by_anthropic: false,
  uuid: nextUuid(),
  sandbox_enabled: false,
  original_cwd: cwd,
  additional_directories: [],
  fast_mode_state: "off",
  fast_mode_disabled_reason: "sdk_opt_in_required",
  per_turn_effort_active: true,
  view_mode: "default",
  memory_paths: { auto: `${cwd}/.claude/memory/` },
  messaging_socket_path: `/tmp/cc-socks/${process.pid}.sock`,
  ultrathink_available: false,
  ultrathink_typed_raises: false,
  user_message_uuids: [userUuid]
})

const usage = (outputTokens) => ({
  input_tokens: 13392,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  output_tokens: outputTokens
})

const sessionState = (state) => {
  if (readsSessionState) {
    push({
      type: "system",
      subtype: "session_state_changed",
      state,
      sdk_host_only: true,
      uuid: nextUuid(),
      session_id: sessionId
    })
  }
}
const lifecycle = (commandUuid, state) =>
  push({ type: "command_lifecycle", command_uuid: commandUuid, state, uuid: nextUuid(), session_id: sessionId })

const promptText = (message) => {
  const content = message?.message?.content
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content.map((block) => (block && block.type === "text" ? String(block.text) : "")).join("")
  }
  return ""
}

// --- turns -------------------------------------------------------------------------------------------------------

const queue = []
let active = undefined // { uuid, interrupted }
let eof = false
let turnCounter = 0
let costUsd = 0

const runTurn = async (message) => {
  const userUuid = typeof message.uuid === "string" ? message.uuid : randomUUID()
  const text = promptText(message)
  const match = /FRAMES:(\d+)/.exec(text)
  const frames = match ? Number(match[1]) : defaultFrames
  const turn = { uuid: userUuid, interrupted: false }
  active = turn
  turnCounter++
  const started = Date.now()
  const messageId = `msg_fast${hex(20)}`
  const requestId = `req_fast${hex(20)}`
  const uuids = [userUuid]

  sessionState("running")
  lifecycle(userUuid, "queued")
  lifecycle(userUuid, "started")
  push(systemInit(userUuid))
  if (includePartialMessages) {
    push({ type: "system", subtype: "status", status: "requesting", session_id: sessionId, uuid: nextUuid(), user_message_uuids: uuids })
  }
  if (replayUserMessages) {
    push({
      type: "user",
      message: message.message,
      session_id: sessionId,
      parent_tool_use_id: null,
      uuid: userUuid,
      timestamp: new Date().toISOString(),
      isReplay: true
    })
  }
  const answer = `Hello from fast-claude #${turnCounter}: ${frames} frames`
  const assistant = (content, aborted) => {
    const frame = {
      type: "assistant",
      message: {
        id: messageId,
        type: "message",
        role: "assistant",
        model,
        content,
        stop_reason: null,
        stop_sequence: null,
        usage: usage(1),
        context_management: null
      },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: nextUuid(),
      timestamp: new Date().toISOString(),
      request_id: requestId,
      user_message_uuid: userUuid,
      user_message_uuids: uuids
    }
    if (aborted) frame.aborted = true
    push(frame)
  }

  // A stream_event of this message, in the CLI's envelope (`extra`: the fields only some events carry).
  const streamEvent = (event, extra) =>
    push({
      type: "stream_event",
      event,
      session_id: sessionId,
      parent_tool_use_id: null,
      uuid: nextUuid(),
      api_message_id: messageId,
      ...extra
    })

  let sent = 0
  if (includePartialMessages) {
    streamEvent(
      {
        type: "message_start",
        message: {
          id: messageId,
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usage(1)
        }
      },
      { ttft_ms: 1, thinking_display: "updates", user_message_uuid: userUuid, user_message_uuids: uuids, owed_rows: [] }
    )
    streamEvent({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
    // The hot loop: the frame is a template (the same bytes JSON.stringify would give) around a counter uuid.
    const head = `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok `
    const mid = ` "}},"session_id":"${sessionId}","parent_tool_use_id":null,"uuid":"`
    const tail = `","api_message_id":"${messageId}"}\n`
    while (sent < frames && !turn.interrupted) {
      while (sent < frames && pending.length < batchBytes) {
        pushRaw(head + sent + mid + nextUuid() + tail)
        sent++
      }
      await flush()
      // Lets an `interrupt` (or EOF) in between batches.
      if (sent < frames) await yieldToInput()
    }
  } else {
    while (sent < frames && !turn.interrupted) {
      while (sent < frames && pending.length < batchBytes) {
        assistant([{ type: "text", text: `tok ${sent} ` }], false)
        sent++
      }
      await flush()
      if (sent < frames) await yieldToInput()
    }
  }

  if (turn.interrupted) {
    assistant([{ type: "text", text: `tok ${sent}` }], true)
    push({
      type: "user",
      message: { role: "user", content: [{ type: "text", text: "[Request interrupted by user]" }] },
      parent_tool_use_id: null,
      session_id: sessionId,
      uuid: nextUuid(),
      timestamp: new Date().toISOString()
    })
    push({
      type: "result",
      subtype: "error_during_execution",
      duration_ms: Date.now() - started,
      duration_api_ms: Date.now() - started,
      is_error: true,
      num_turns: 1,
      stop_reason: null,
      session_id: sessionId,
      total_cost_usd: costUsd,
      usage: usage(sent),
      modelUsage: {},
      permission_denials: [],
      terminal_reason: "aborted_streaming",
      errors: ["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],
      uuid: nextUuid(),
      user_message_uuid: userUuid,
      user_message_uuids: uuids,
      queued_turn_count: queue.length,
      result_index: turnCounter - 1
    })
    lifecycle(userUuid, "cancelled")
  } else {
    if (includePartialMessages) {
      assistant([{ type: "text", text: answer }], false)
      streamEvent({ type: "content_block_stop", index: 0 })
      streamEvent({
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { output_tokens: frames }
      })
      streamEvent({ type: "message_stop" })
    }
    costUsd += 0.000001
    push({
      duration_api_ms: Date.now() - started,
      stop_reason: "end_turn",
      session_id: sessionId,
      total_cost_usd: costUsd,
      usage: usage(frames),
      modelUsage: {
        [model]: {
          inputTokens: 13392,
          outputTokens: frames,
          cacheReadInputTokens: 0,
          cacheCreationInputTokens: 0,
          webSearchRequests: 0,
          costUSD: costUsd,
          contextWindow: 1000000,
          maxOutputTokens: 128000
        }
      },
      permission_denials: [],
      terminal_reason: "completed",
      is_error: false,
      num_turns: 1,
      subtype: "success",
      api_error_status: null,
      result: answer,
      fast_mode_state: "off",
      fast_mode_disabled_reason: "sdk_opt_in_required",
      subagent_stats: {
        spawned: 0,
        requested: { background: 0, foreground: 0, unset: 0 },
        started_in_background: 0,
        max_depth: 0,
        completed: 0,
        failed: 0,
        by_type: {}
      },
      safety_stops: 0,
      ttft_ms: 1,
      ttft_stream_ms: 1,
      time_to_request_ms: 0,
      first_content_frame_ms: 1,
      request_sent_wall_ms: started,
      first_request_input_tokens: 13392,
      first_request_cache_read_input_tokens: 0,
      begun_message_ids: [messageId],
      type: "result",
      duration_ms: Date.now() - started,
      uuid: nextUuid(),
      user_message_uuid: userUuid,
      user_message_uuids: uuids,
      queued_turn_count: queue.length,
      result_index: turnCounter - 1,
      model_usage_since_last_result: {}
    })
    lifecycle(userUuid, "completed")
  }
  sessionState("idle")
  active = undefined
  await flush()
}

let pumping = false
const pump = async () => {
  if (pumping) return
  pumping = true
  while (queue.length > 0) await runTurn(queue.shift())
  pumping = false
  if (eof) exit()
}

const exit = () => {
  // Exit once stdout has taken everything: a write callback fires after the data reached the pipe.
  process.stdout.write("", () => process.exit(0))
}

// --- input -------------------------------------------------------------------------------------------------------

const controlSuccess = (requestId, response, initialize = false) =>
  push(controlResponse(requestId, response, initialize))

const onControlRequest = (frame) => {
  const request = frame.request ?? {}
  const id = frame.request_id
  switch (request.subtype) {
    case "initialize":
      return controlSuccess(id, initializeResponse(), true)
    case "interrupt": {
      const stillQueued = request.cancel_queued === true ? queue.splice(0).map((m) => m.uuid) : []
      if (active !== undefined) active.interrupted = true
      return controlSuccess(id, { still_queued: stillQueued })
    }
    default:
      return push(answerControl(request, id, model))
  }
}

const onLine = (line) => {
  if (line.length === 0) return
  let frame
  try {
    frame = JSON.parse(line)
  } catch {
    // The real CLI dies on a non-JSON stdin line.
    process.stderr.write(`Error parsing streaming input line (type=unknown, ${line.length} chars): SyntaxError\n`)
    process.exit(1)
  }
  switch (frame.type) {
    case "control_request":
      onControlRequest(frame)
      // Control answers go out at once, also while a turn streams.
      void flush()
      return
    case "user":
      queue.push(frame)
      void pump()
      return
    default:
      // control_response (answers to requests we never make), keep_alive, control_cancel_request: nothing to do.
      return
  }
}

const stdin = onStdinLines(onLine)
process.stdin.on("end", () => {
  const rest = stdin.readRest()
  if (rest.length > 0) onLine(rest)
  eof = true
  if (!pumping && queue.length === 0) exit()
})
