/**
 * The stream-json lines a host writes to the CLI, as raw JSON: the tests of the simulated CLI drive it with them.
 */

export const initialize = (requestId = "req_1", hooks: object = {}) =>
  JSON.stringify({ type: "control_request", request_id: requestId, request: { subtype: "initialize", hooks } })

export const user = (text: string, uuid?: string) =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "text", text }] },
    parent_tool_use_id: null,
    session_id: "",
    ...(uuid === undefined ? {} : { uuid })
  })

export const controlRequest = (requestId: string, request: object) =>
  JSON.stringify({ type: "control_request", request_id: requestId, request })

export const allow = (requestId: string, response: object) =>
  JSON.stringify({ type: "control_response", response: { subtype: "success", request_id: requestId, response } })

export const fail = (requestId: string, error: string) =>
  JSON.stringify({ type: "control_response", response: { subtype: "error", request_id: requestId, error } })
