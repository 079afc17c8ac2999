/**
 * Codex's app-server protocol as a protocol machine: JSON-RPC lines in, neutral items out; host commands in,
 * JSON-RPC lines out. Pure and synchronous (see `Provider.ts`).
 *
 * What it knows of the server (docs/protocol/codex-app-server.md): the handshake is `initialize`, the `initialized`
 * notification, then `thread/start` (or `thread/resume`), whose thread id every later request names; a prompt is a
 * `turn/start` request whose response carries the server's turn id (the receipt: the session's host turn id is
 * mapped to it here); notifications name their turn by the server's id; `turn/completed` is the only terminator
 * (items in flight at an interrupt never complete); approvals are server requests with ids of their own, answered
 * by a response, and `serverRequest/resolved` says the server considers one settled.
 *
 * @internal
 */
import { detachedPrefix } from "@tether/core/codec/Detached"
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import type { ProtocolError } from "@tether/core/TetherError"
import type { Usage } from "@tether/core/Turn"
import * as Result from "effect/Result"
import { TurnRejected } from "../CodexError.ts"
import * as Params from "./protocol/runtime.ts"
import * as Wire from "./protocol/wire.ts"

/**
 * The result of a Codex turn: the neutral result plus the turn's status as the server reported it.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnResult {
  readonly turnId: string
  /** The thread id: resume the conversation with it. */
  readonly sessionId: string | undefined
  /** The text of the turn's last agent message. */
  readonly text: string
  readonly usage: Usage
  readonly durationMs: number | undefined
  readonly raw: unknown
  /** The server's id of the turn. */
  readonly serverTurnId: string
  /** `completed`, `interrupted` or `failed`. */
  readonly status: string
  /** Reasoning tokens, which the neutral usage does not count separately. */
  readonly reasoningOutputTokens: number
}

export interface MachineOptions {
  readonly clientInfo: { readonly name: string; readonly title: string | null; readonly version: string }
  readonly capabilities: { readonly [key: string]: unknown } | null
  /** `thread/start` params, or the thread to resume with `thread/resume` params. */
  readonly thread:
    | { readonly _tag: "Start"; readonly params: { readonly [key: string]: unknown } }
    | { readonly _tag: "Resume"; readonly threadId: string; readonly params: { readonly [key: string]: unknown } }
  /** Extra `turn/start` params for every turn (per-turn overrides of model, sandbox policy, …). */
  readonly turnParams: { readonly [key: string]: unknown }
}

/** A server request the host answers that is not an approval. */
export interface HostRequest {
  readonly _tag: "ServerRequest"
  readonly method: string
  readonly params: unknown
}

type Pending =
  | { readonly _tag: "Initialize" }
  | { readonly _tag: "Thread" }
  | { readonly _tag: "TurnStart"; readonly turnId: string }
  | { readonly _tag: "Control"; readonly ref: number }

interface TurnTrack {
  readonly hostId: string
  text: string
  readonly usage: { input: number; cached: number; cacheWrite: number; output: number; reasoning: number }
}

/** Notifications about the server or the account, never about the running turn. */
const sessionMethods: ReadonlySet<string> = new Set([
  "account/rateLimits/updated",
  "account/updated",
  "configWarning",
  "remoteControl/status/changed",
  "thread/started",
  "warning",
  "mcpServer/startupStatus/updated"
])

const frame = (
  method: string,
  raw: unknown,
  turnId: string | undefined,
  scope?: "session"
): Provider.Item => ({ _tag: "Frame", type: method, subtype: undefined, raw, turnId, scope })

/** A prompt as `turn/start` input items. */
const toInput = (prompt: string | ReadonlyArray<{ readonly type: string }>): ReadonlyArray<unknown> =>
  typeof prompt === "string" ? [{ type: "text", text: prompt, text_elements: [] }] : prompt

/** A `codexErrorInfo` as text: the server sends a variant name (`"internalServerError"`) or a variant object. */
const errorInfo = (info: unknown): string => typeof info === "string" ? info : JSON.stringify(info)

/**
 * The upstream HTTP status a `codexErrorInfo` carries, if any: the server forwards it in the variants that have one
 * (`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`); plain variants (`"internalServerError"`) have none.
 */
const httpStatusOf = (info: unknown): number | null => {
  if (typeof info !== "object" || info === null) return null
  for (const value of Object.values(info)) {
    const status = typeof value === "object" && value !== null
      ? (value as { readonly httpStatusCode?: unknown }).httpStatusCode
      : undefined
    if (typeof status === "number" && Number.isFinite(status)) return status
  }
  return null
}

/** The machine's state: what one Codex session's protocol has seen and is waiting for. */
interface State {
  readonly options: MachineOptions
  nextId: number
  readonly pending: Map<Wire.Id, Pending>
  threadId: string | undefined
  initializeResult: unknown
  sandbox: string | undefined
  /** Server turn id → the host's turn. */
  readonly turns: Map<string, TurnTrack>
  /** The host's turn id → the server's, once `turn/start` answered. */
  readonly serverIds: Map<string, string>
  /**
   * Interrupts asked for before the server named the turn (its `turn/start` response): `turn/interrupt` needs that
   * id, so the request goes out with the receipt. A rejected turn ends without it.
   */
  readonly heldInterrupts: Map<string, number>
  /** Host turns whose `turn/start` has no response yet. */
  readonly starting: Set<string>
  /** Approvals waiting for the host, by the string form of the server's request id. */
  readonly approvals: Map<string, Wire.Id>
  /** Other server requests waiting for the host. */
  readonly requests: Map<string, Wire.Id>
  /** File changes by item id: an approval request names the item, not its changes. */
  readonly fileChanges: Map<string, ReadonlyArray<unknown>>
}

// --- decoding: each frame of the server, by kind, over the state ---------------------------------------------

const request = (s: State, method: string, params: unknown, what: Pending): Provider.Item => {
  const id = s.nextId++
  s.pending.set(id, what)
  return { _tag: "Write", line: Wire.encodeRequest(id, method, params) }
}

const interruptRequest = (s: State, serverTurnId: string, ref: number): Provider.Item =>
  request(s, "turn/interrupt", { threadId: s.threadId, turnId: serverTurnId }, { _tag: "Control", ref })

const hostTurn = (s: State, serverTurnId: string | undefined): TurnTrack | undefined =>
  serverTurnId === undefined ? undefined : s.turns.get(serverTurnId)

const malformed = (error: Wire.Message, failure: ProtocolError) =>
  ({ _tag: "Malformed", error: failure, raw: error.raw }) as Provider.Item

const response = (
  s: State,
  message: Extract<Wire.Message, { readonly _tag: "Response" | "ErrorResponse" }>
): Provider.Items => {
  const id = message.id
  const what = id === null ? undefined : s.pending.get(id)
  const event = frame(message._tag === "Response" ? "response" : "error", message.raw, undefined, "session")
  if (what === undefined || id === null) return event
  s.pending.delete(id)
  switch (what._tag) {
    case "Initialize": {
      if (message._tag === "ErrorResponse") return [event, { _tag: "Refused", reason: message.error.message }]
      s.initializeResult = message.result
      const thread = s.options.thread
      return [
        event,
        { _tag: "Write", line: Wire.encodeNotification("initialized") },
        thread._tag === "Start"
          ? request(s, "thread/start", thread.params, { _tag: "Thread" })
          : request(
            s,
            "thread/resume",
            // Tether reads none of the thread's past turns: without `excludeTurns` the server sends the whole
            // history in the response (one line that grows with the thread, toward the transport's line limit),
            // and 0.171 answers with a deprecationNotice saying full-history hydration is deprecated.
            { ...thread.params, threadId: thread.threadId, excludeTurns: true },
            { _tag: "Thread" }
          )
      ]
    }
    case "Thread": {
      if (message._tag === "ErrorResponse") return [event, { _tag: "Refused", reason: message.error.message }]
      const decoded = Params.decodeThreadResult(
        s.options.thread._tag === "Start" ? "thread/start" : "thread/resume",
        message.result
      )
      if (Result.isFailure(decoded)) return [event, { _tag: "Refused", reason: decoded.failure.message }]
      s.threadId = decoded.success.thread.id
      s.sandbox = decoded.success.sandbox?.type
      return [
        event,
        { _tag: "SessionId", sessionId: s.threadId },
        { _tag: "Ready", info: { initialize: s.initializeResult, thread: decoded.success } }
      ]
    }
    case "TurnStart": {
      s.starting.delete(what.turnId)
      if (message._tag === "ErrorResponse") {
        s.heldInterrupts.delete(what.turnId)
        const { code, message: reason } = message.error
        return [event, {
          _tag: "TurnEnd",
          turnId: what.turnId,
          outcome: { _tag: "Failed", error: (turnId) => new TurnRejected({ turnId, code, reason }) },
          result: emptyResult(s, undefined, message.raw, "rejected")
        }]
      }
      const decoded = Params.decodeTurnStartResult("turn/start", message.result)
      if (Result.isFailure(decoded)) return [event, malformed(message, decoded.failure)]
      const serverTurnId = decoded.success.turn.id
      s.turns.set(serverTurnId, {
        hostId: what.turnId,
        text: "",
        usage: { input: 0, cached: 0, cacheWrite: 0, output: 0, reasoning: 0 }
      })
      s.serverIds.set(what.turnId, serverTurnId)
      const receipt: Array<Provider.Item> = [
        { _tag: "Receipt", turnId: what.turnId },
        frame("turn/start", message.raw, what.turnId)
      ]
      const held = s.heldInterrupts.get(what.turnId)
      if (held === undefined) return receipt
      s.heldInterrupts.delete(what.turnId)
      return [...receipt, interruptRequest(s, serverTurnId, held)]
    }
    case "Control":
      return [event, {
        _tag: "ControlAnswer",
        ref: what.ref,
        answer: message._tag === "Response"
          ? { _tag: "Success", payload: message.result }
          : { _tag: "Error", message: message.error.message, code: String(message.error.code) }
      }]
  }
}

const emptyResult = (
  s: State,
  track: TurnTrack | undefined,
  raw: unknown,
  status: string,
  serverTurnId = "",
  durationMs?: number | null
): Omit<TurnResult, "turnId"> => ({
  sessionId: s.threadId,
  text: track?.text ?? "",
  usage: {
    inputTokens: track?.usage.input ?? 0,
    outputTokens: track?.usage.output ?? 0,
    cacheCreationInputTokens: track?.usage.cacheWrite ?? 0,
    cacheReadInputTokens: track?.usage.cached ?? 0
  },
  durationMs: durationMs ?? undefined,
  raw,
  serverTurnId,
  status,
  reasoningOutputTokens: track?.usage.reasoning ?? 0
})

const turnCompleted = (s: State, message: Wire.Message, params: unknown): Provider.Items => {
  const decoded = Params.decodeTurnNotification("turn/completed", params)
  if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
  const turn = decoded.success.turn
  const track = s.turns.get(turn.id)
  if (track === undefined) return frame("turn/completed", message.raw, undefined)
  s.turns.delete(turn.id)
  s.serverIds.delete(track.hostId)
  const status = turn.status ?? "completed"
  const outcome: Provider.TurnOutcome = status === "completed"
    ? { _tag: "Success" }
    : status === "interrupted"
    ? { _tag: "Interrupted" }
    : {
      _tag: "Api",
      status: httpStatusOf(turn.error?.codexErrorInfo),
      // 0.171's TurnError has `codexErrorInfo: CodexErrorInfo | null`: null says no more than an absent one.
      detail: `${turn.error?.message ?? `the turn ended ${status}`}${
        turn.error?.codexErrorInfo === undefined || turn.error.codexErrorInfo === null
          ? ""
          : ` (${errorInfo(turn.error.codexErrorInfo)})`
      }`
    }
  return {
    _tag: "TurnEnd",
    turnId: track.hostId,
    outcome,
    result: emptyResult(s, track, message.raw, status, turn.id, turn.durationMs)
  }
}

const item = (s: State, message: Wire.Message, params: unknown, completed: boolean): Provider.Items => {
  const method = completed ? "item/completed" : "item/started"
  const decoded = Params.decodeItemNotification(method, params)
  if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
  const { item } = decoded.success
  const track = hostTurn(s, decoded.success.turnId)
  const turnId = track?.hostId
  const scope = track === undefined ? "session" : undefined
  const raw = message.raw
  switch (item.type) {
    case "agentMessage":
      if (!completed) return frame(method, raw, turnId, scope)
      if (track !== undefined) track.text = item.text ?? ""
      return { _tag: "AssistantMessage", turnId, raw, text: item.text ?? "", scope }
    case "commandExecution":
      return completed
        ? {
          _tag: "ToolResult",
          turnId,
          raw,
          toolUseId: item.id,
          isError: item.status !== "completed" || (item.exitCode ?? 0) !== 0,
          content: item.aggregatedOutput ?? "",
          scope
        }
        : {
          _tag: "ToolUse",
          turnId,
          raw,
          toolUseId: item.id,
          name: "command",
          input: { command: item.command, cwd: item.cwd },
          scope
        }
    case "fileChange":
      if (!completed) {
        s.fileChanges.set(item.id, item.changes ?? [])
        return {
          _tag: "ToolUse",
          turnId,
          raw,
          toolUseId: item.id,
          name: "apply_patch",
          input: { changes: item.changes ?? [] },
          scope
        }
      }
      s.fileChanges.delete(item.id)
      return {
        _tag: "ToolResult",
        turnId,
        raw,
        toolUseId: item.id,
        isError: item.status !== "completed",
        content: item.changes ?? [],
        scope
      }
    default:
      return frame(method, raw, turnId, scope)
  }
}

const notification = (s: State, message: Extract<Wire.Message, { readonly _tag: "Notification" }>): Provider.Items => {
  const { method, params, raw } = message
  switch (method) {
    case "item/agentMessage/delta": {
      const decoded = Params.decodeAgentMessageDelta(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      const track = hostTurn(s, decoded.success.turnId)
      return {
        _tag: "TextDelta",
        turnId: track?.hostId,
        raw,
        text: decoded.success.delta,
        scope: track === undefined ? "session" : undefined
      }
    }
    case "item/started":
      return item(s, message, params, false)
    case "item/completed":
      return item(s, message, params, true)
    case "turn/completed":
      return turnCompleted(s, message, params)
    case "turn/started": {
      const decoded = Params.decodeTurnNotification(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      const track = hostTurn(s, decoded.success.turn.id)
      return frame(method, raw, track?.hostId, track === undefined ? "session" : undefined)
    }
    case "thread/tokenUsage/updated": {
      const decoded = Params.decodeTokenUsageUpdated(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      const track = hostTurn(s, decoded.success.turnId)
      const last = decoded.success.tokenUsage.last
      if (track !== undefined && last !== undefined) {
        track.usage.input += last.inputTokens ?? 0
        track.usage.cached += last.cachedInputTokens ?? 0
        track.usage.cacheWrite += last.cacheWriteInputTokens ?? 0
        track.usage.output += last.outputTokens ?? 0
        track.usage.reasoning += last.reasoningOutputTokens ?? 0
      }
      return frame(method, raw, track?.hostId, track === undefined ? "session" : undefined)
    }
    case "error": {
      const decoded = Params.decodeErrorNotification(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      const track = hostTurn(s, decoded.success.turnId)
      const scope = track === undefined ? "session" : undefined
      if (decoded.success.willRetry !== true) return frame(method, raw, track?.hostId, scope)
      return {
        _tag: "Retry",
        turnId: track?.hostId,
        raw,
        attempt: undefined,
        maxRetries: undefined,
        delayMs: undefined,
        errorStatus: undefined,
        message: decoded.success.error.message,
        scope
      }
    }
    case "serverRequest/resolved": {
      const decoded = Params.decodeServerRequestResolved(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      const key = String(decoded.success.requestId)
      const event = frame(method, raw, undefined, "session")
      // Answered by this host, or withdrawn by the server (the turn ended): either way it is no longer pending.
      if (s.approvals.delete(key) || s.requests.delete(key)) return [{ _tag: "Cancel", requestId: key }, event]
      return event
    }
    default: {
      const turnId = typeof params === "object" && params !== null && "turnId" in params
        ? hostTurn(s, String((params as { readonly turnId: unknown }).turnId))?.hostId
        : undefined
      return frame(method, raw, turnId, turnId === undefined || sessionMethods.has(method) ? "session" : undefined)
    }
  }
}

const serverRequest = (s: State, message: Extract<Wire.Message, { readonly _tag: "Request" }>): Provider.Items => {
  const { id, method, params, raw } = message
  const key = String(id)
  // Only v2's approvals are approvals here. The legacy v1 requests (`execCommandApproval`, `applyPatchApproval`,
  // still in the schema) take other params (`command` as an argv array) and other decisions (`approved`,
  // `denied`); v2 threads never send them, so they are "other requests": an error answer unless the host's
  // `requests` handler answers them.
  switch (method) {
    case "item/commandExecution/requestApproval": {
      const decoded = Params.decodeCommandApprovalParams(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      s.approvals.set(key, id)
      const p = decoded.success
      return {
        _tag: "PermissionRequest",
        request: {
          requestId: key,
          kind: "command",
          toolName: "command",
          toolUseId: p.itemId,
          input: { command: p.command ?? undefined, cwd: p.cwd ?? undefined, reason: p.reason ?? undefined },
          description: p.reason ?? undefined,
          raw
        }
      }
    }
    case "item/fileChange/requestApproval": {
      const decoded = Params.decodeFileChangeApprovalParams(method, params)
      if (Result.isFailure(decoded)) return malformed(message, decoded.failure)
      s.approvals.set(key, id)
      const p = decoded.success
      return {
        _tag: "PermissionRequest",
        request: {
          requestId: key,
          kind: "file-change",
          toolName: "apply_patch",
          toolUseId: p.itemId,
          input: {
            changes: p.itemId === undefined ? [] : s.fileChanges.get(p.itemId) ?? [],
            reason: p.reason ?? undefined,
            grantRoot: p.grantRoot ?? undefined
          },
          description: p.reason ?? undefined,
          raw
        }
      }
    }
    default:
      s.requests.set(key, id)
      return [frame(method, raw, undefined), {
        _tag: "HostRequest",
        requestId: key,
        request: { _tag: "ServerRequest", method, params } satisfies HostRequest
      }]
  }
}

const answer = (s: State, requestId: string, result: unknown): Provider.Items => {
  const id = s.approvals.get(requestId) ?? s.requests.get(requestId)
  if (id === undefined) return undefined
  s.approvals.delete(requestId)
  s.requests.delete(requestId)
  return { _tag: "Write", line: Wire.encodeResponse(id, result) }
}

/**
 * The protocol machine of one Codex session: its state, and the provider's operations over it (decoding the
 * server's lines above, encoding the host's commands here).
 */
export const make = (options: MachineOptions): Provider.ProtocolMachine => {
  const s: State = {
    options,
    nextId: 0,
    pending: new Map(),
    threadId: undefined,
    initializeResult: undefined,
    sandbox: undefined,
    turns: new Map(),
    serverIds: new Map(),
    heldInterrupts: new Map(),
    starting: new Set(),
    approvals: new Map(),
    requests: new Map(),
    fileChanges: new Map()
  }
  return {
    start: () =>
      request(s, "initialize", { clientInfo: options.clientInfo, capabilities: options.capabilities }, {
        _tag: "Initialize"
      }),
    receive: (line) => {
      const message = Wire.decodeLineOrError(line)
      switch (message._tag) {
        case "ProtocolError":
          return { _tag: "Malformed", error: message, raw: detachedPrefix(line, 4096) }
        case "Response":
        case "ErrorResponse":
          return response(s, message)
        case "Notification":
          return notification(s, message)
        case "Request":
          return serverRequest(s, message)
      }
    },
    prompt: (turnId, prompt) => {
      const line = request(s, "turn/start", { ...options.turnParams, threadId: s.threadId, input: toInput(prompt) }, {
        _tag: "TurnStart",
        turnId
      })
      s.starting.add(turnId)
      return line
    },
    interrupt: (turnId, ref) => {
      const serverTurnId = s.serverIds.get(turnId)
      if (serverTurnId !== undefined) return interruptRequest(s, serverTurnId, ref)
      if (!s.starting.has(turnId)) throw new Error(`turn ${turnId} is not a running turn of the server`)
      // Not named by the server yet (output of the turn may come before its `turn/start` response).
      s.heldInterrupts.set(turnId, ref)
      return undefined
    },
    control: (ref, input) => {
      const { method, params } = input as { readonly method?: unknown; readonly params?: unknown }
      if (typeof method !== "string") throw new Error("a Codex control is { method, params }")
      return request(s, method, params ?? {}, { _tag: "Control", ref })
    },
    answerPermission: (request: Permission.PermissionRequest, verdict: Permission.Verdict) => {
      if (verdict._tag === "Allow" && verdict.updatedInput !== undefined) {
        // Codex runs what it asked about or nothing: a rewritten input cannot be honoured, so it is not approved.
        throw new Error("Codex cannot run a rewritten input; approve the original or deny")
      }
      const decision: Wire.ApprovalDecision = verdict._tag === "Allow"
        ? "accept"
        : verdict.interrupt === true
        ? "cancel"
        : "decline"
      return answer(s, request.requestId, { decision })
    },
    reply: (requestId, reply) => {
      if (s.approvals.has(requestId)) {
        // An approval the host could not answer (its answer was invalid, it timed out): declined.
        return answer(s, requestId, { decision: "decline" })
      }
      const id = s.requests.get(requestId)
      if (id === undefined) return undefined
      s.requests.delete(requestId)
      return reply._tag === "Success"
        ? { _tag: "Write", line: Wire.encodeResponse(id, reply.payload) }
        : { _tag: "Write", line: Wire.encodeErrorResponse(id, -32000, reply.message) }
    },
    capabilities: () => ({
      provider: "codex",
      receipts: "explicit",
      interrupt: true,
      permissionKinds: ["command", "file-change"],
      resume: true,
      sandbox: s.sandbox,
      notes: ["interrupting a turn does not stop commands it started; teardown reaps them"]
    })
  }
}
