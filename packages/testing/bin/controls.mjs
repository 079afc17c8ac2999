/**
 * The control responses of the real CLI (2.1.332), shared by the fake CLIs in this folder (`fake-claude.mjs`,
 * `fast-claude.mjs`) so that they answer controls the same way. Plain Node, no dependencies.
 */

/** A success `control_response`; the answer to `initialize` also carries the CLI's pending-request lists. */
export const controlSuccess = (requestId, response, initialize = false) => {
  const inner = { subtype: "success", request_id: requestId }
  if (response !== undefined) inner.response = response
  if (initialize) {
    inner.pending_permission_requests = []
    inner.pending_user_dialog_requests = []
  }
  return { type: "control_response", response: inner }
}

/**
 * The answer to a control request that needs no state of the fake (not `initialize`, not `interrupt`): what the
 * real CLI answers, or its `unsupported_request` error.
 */
export const answerControl = (request, requestId, model) => {
  switch (request.subtype) {
    case "set_permission_mode":
      return controlSuccess(requestId, { mode: request.mode })
    case "set_model":
      return controlSuccess(requestId, { model: request.model ?? model })
    case "set_max_thinking_tokens":
      return controlSuccess(requestId, undefined)
    case "mcp_status":
      return controlSuccess(requestId, { mcpServers: [] })
    default:
      return {
        type: "control_response",
        response: {
          subtype: "error",
          request_id: requestId,
          error: `Unsupported control request subtype: ${request.subtype}`,
          error_code: "unsupported_request"
        }
      }
  }
}
