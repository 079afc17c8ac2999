/**
 * Claude CLI frames for the machine tests, as the CLI prints them (field names and shapes from
 * docs/protocol/claude-stream-json.md), turned into stdout lines by the codec's own encoder: a frame the decoder
 * would refuse cannot be built here by accident.
 */
import * as ClaudeProtocol from "../../src/ClaudeProtocol.ts"

export const S = "session-1"
let uuids = 0
const uuid = () => `uuid-${++uuids}`
const turnOf = (turnId: string | undefined) => turnId === undefined ? {} : { user_message_uuid: turnId }

/** A known CLI frame as one stdout line, checked by the codec (it refuses unknown types: stringify those). */
export const line = (frame: object): string => ClaudeProtocol.encodeFrame(frame as ClaudeProtocol.Frame)

export const F = {
  initOk: (payload: object = { claude_code_version: "2.1.332", commands: [] }) => ({
    type: "control_response",
    response: { subtype: "success", request_id: "tether_init", response: payload }
  }),
  initError: (error: string) => ({
    type: "control_response",
    response: { subtype: "error", request_id: "tether_init", error }
  }),
  controlOk: (requestId: string, response?: object) => ({
    type: "control_response",
    response: { subtype: "success", request_id: requestId, ...(response === undefined ? {} : { response }) }
  }),
  controlError: (requestId: string, error: string, code?: string) => ({
    type: "control_response",
    response: { subtype: "error", request_id: requestId, error, ...(code === undefined ? {} : { error_code: code }) }
  }),
  lifecycle: (state: "queued" | "started" | "completed" | "cancelled", turnId: string) => ({
    type: "command_lifecycle",
    command_uuid: turnId,
    state,
    uuid: uuid(),
    session_id: S
  }),
  init: (extra: object = {}) => ({
    type: "system",
    subtype: "init",
    uuid: uuid(),
    session_id: S,
    cwd: "/work",
    tools: ["Bash"],
    mcp_servers: [],
    model: "claude-opus-5-5",
    permissionMode: "default",
    ...extra
  }),
  system: (subtype: string, extra: object = {}) => ({ type: "system", subtype, uuid: uuid(), session_id: S, ...extra }),
  delta: (text: string, turnId?: string) => ({
    type: "stream_event",
    event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } },
    parent_tool_use_id: null,
    session_id: S,
    uuid: uuid(),
    ...turnOf(turnId)
  }),
  jsonDelta: (json: string) => ({
    type: "stream_event",
    event: { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: json } },
    parent_tool_use_id: null,
    session_id: S,
    uuid: uuid()
  }),
  blockStop: (turnId?: string) => ({
    type: "stream_event",
    event: { type: "content_block_stop", index: 0 },
    parent_tool_use_id: null,
    session_id: S,
    uuid: uuid(),
    ...turnOf(turnId)
  }),
  assistant: (content: ReadonlyArray<object>, turnId?: string) => ({
    type: "assistant",
    message: { id: "msg_1", role: "assistant", model: "claude-opus-5-5", content },
    parent_tool_use_id: null,
    session_id: S,
    uuid: uuid(),
    ...turnOf(turnId)
  }),
  user: (content: string | ReadonlyArray<object>, extra: object = {}) => ({
    type: "user",
    message: { role: "user", content },
    parent_tool_use_id: null,
    session_id: S,
    uuid: uuid(),
    ...extra
  }),
  replay: (turnId: string) => F.user([{ type: "text", text: "hi" }], { uuid: turnId, isReplay: true }),
  result: (extra: object = {}) =>
    Object.fromEntries(
      Object.entries({
        type: "result",
        subtype: "success",
        is_error: false,
        session_id: S,
        uuid: uuid(),
        duration_ms: 10,
        duration_api_ms: 5,
        num_turns: 1,
        total_cost_usd: 0.25,
        usage: { input_tokens: 3, output_tokens: 4, cache_creation_input_tokens: 5, cache_read_input_tokens: 6 },
        permission_denials: [],
        result: "done",
        ...extra
      }).filter(([, value]) => value !== undefined)
    ),
  canUseTool: (requestId: string, extra: object = {}) => ({
    type: "control_request",
    request_id: requestId,
    request: {
      subtype: "can_use_tool",
      tool_name: "Bash",
      input: { command: "touch x" },
      tool_use_id: "toolu_1",
      description: "mock command",
      ...extra
    }
  }),
  hook: (requestId: string, toolUseId: string | null = null) => ({
    type: "control_request",
    request_id: requestId,
    request: { subtype: "hook_callback", callback_id: "hook_prompt", input: { prompt: "hi" }, tool_use_id: toolUseId }
  }),
  mcp: (requestId: string) => ({
    type: "control_request",
    request_id: requestId,
    request: { subtype: "mcp_message", server_name: "host", message: { jsonrpc: "2.0", id: 1, method: "tools/list" } }
  }),
  otherRequest: (requestId: string) => ({
    type: "control_request",
    request_id: requestId,
    request: { subtype: "oauth_token_refresh", message: "pick one" }
  }),
  cancel: (requestId: string) => ({ type: "control_cancel_request", request_id: requestId })
}
