/**
 * The host's answers to the CLI's requests other than permissions: hook callbacks (typed per event, bounded by
 * their own timeout), the in-process MCP servers' JSON-RPC, elicitations and user dialogs. What the session
 * machine hands to `Session.Options.handle`.
 *
 * @internal
 */
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as ClaudeHooks from "../ClaudeHooks.ts"
import type { HostRequest } from "./machine.ts"
import type * as Mcp from "./mcp.ts"
import { serve } from "./mcp.ts"
import type { ElicitationParams, RequestUserDialogParams } from "./protocol/cliFrames.ts"
import type { ElicitResult, UserDialogResult } from "./protocol/controls.ts"

type JsonObject = { readonly [key: string]: unknown }

/** An MCP server the CLI runs asks the user for input (`elicitation`). */
export interface ElicitationRequest {
  readonly serverName: string
  readonly message: string
  /** `form`: fill `requestedSchema`; `url`: open `url`. */
  readonly mode: "form" | "url" | undefined
  readonly url: string | undefined
  readonly elicitationId: string | undefined
  /** The JSON Schema of the form. */
  readonly requestedSchema: JsonObject | undefined
  readonly title: string | undefined
  readonly displayName: string | undefined
  readonly description: string | undefined
  readonly raw: unknown
}

/** The CLI asks the host to show a dialog of a kind it declared (`request_user_dialog`). */
export interface UserDialogRequest {
  readonly kind: string
  readonly payload: JsonObject
  readonly toolUseId: string | undefined
  readonly raw: unknown
}

/** The callbacks of a session that answer the CLI's questions to the user. */
export interface Questions {
  readonly onElicitation:
    | ((request: ElicitationRequest) => Effect.Effect<ElicitResult, Permission.PolicyError>)
    | undefined
  readonly userDialogs:
    | {
      readonly kinds: ReadonlyArray<string>
      readonly handle: (request: UserDialogRequest) => Effect.Effect<UserDialogResult, Permission.PolicyError>
    }
    | undefined
}

type AnyMatcher = ClaudeHooks.HookMatcher<ClaudeHooks.HookEvent>

/** The hooks' `initialize` configuration (one callback id per matcher) and their callbacks by id. */
export const hookRegistry = (hooks: ClaudeHooks.Hooks | undefined) => {
  const callbacks = new Map<string, AnyMatcher>()
  const config: Record<
    string,
    Array<{ matcher?: string; hookCallbackIds: Array<string>; timeout?: number; onFailure?: "continue" | "block" }>
  > = {}
  let counter = 0
  for (const [event, list] of Object.entries(hooks ?? {})) {
    if (list === undefined) continue
    config[event] = (list as ReadonlyArray<AnyMatcher>).map((hook) => {
      const id = `hook_${event}_${++counter}`
      callbacks.set(id, hook)
      return {
        ...(hook.matcher !== undefined ? { matcher: hook.matcher } : {}),
        hookCallbackIds: [id],
        ...(hook.timeout !== undefined ? { timeout: hook.timeout } : {}),
        ...(hook.onFailure !== undefined ? { onFailure: hook.onFailure } : {})
      }
    })
  }
  return { callbacks, config }
}

const error = (message: string): Provider.Reply => ({ _tag: "Error", message })

const success = (payload: unknown): Provider.Reply => ({ _tag: "Success", payload })

/** Runs a host callback: its success is the answer, its failure (or death) an error answer, logged. */
const answer = <A>(what: string, effect: Effect.Effect<A, Permission.PolicyError>, bound: number | undefined) => {
  const bounded = bound === undefined ? effect : effect.pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(bound),
      orElse: () => Effect.fail(`the host's ${what} did not answer within ${bound} s`)
    })
  )
  return bounded.pipe(
    Effect.map(success),
    Effect.catchCause((cause) =>
      Effect.logWarning(`${what} failed`, cause).pipe(Effect.as(error(`the host's ${what} failed`)))
    )
  )
}

const elicitationOf = (request: ElicitationParams): ElicitationRequest => ({
  serverName: request.mcp_server_name,
  message: request.message,
  mode: request.mode,
  url: request.url,
  elicitationId: request.elicitation_id,
  requestedSchema: request.requested_schema,
  title: request.title,
  displayName: request.display_name,
  description: request.description,
  raw: request
})

/**
 * The session's handler of the CLI's requests. `servers` is the live set of in-process MCP servers by name (a map
 * the session updates when the host changes its servers).
 */
export const handler = (options: {
  readonly hooks: ReadonlyMap<string, AnyMatcher>
  readonly servers: ReadonlyMap<string, Mcp.Server>
  readonly questions: Questions
}) => {
  const served = new WeakMap<Mcp.Server, ReturnType<typeof serve>>()
  return (request: unknown): Effect.Effect<Provider.Reply> => {
    const r = request as HostRequest
    switch (r._tag) {
      case "HookCallback": {
        const hook = options.hooks.get(r.callbackId)
        if (hook === undefined) return Effect.succeed(error(`unknown hook callback ${r.callbackId}`))
        const input = r.input as ClaudeHooks.HookInputs[ClaudeHooks.HookEvent]
        return answer(
          "hook callback",
          Effect.suspend(() => hook.callback(input, { toolUseId: r.toolUseId })),
          hook.timeout
        )
      }
      case "McpMessage": {
        const server = options.servers.get(r.serverName)
        if (server === undefined) return Effect.succeed(error(`SDK MCP server not found: ${r.serverName}`))
        let serveIt = served.get(server)
        if (serveIt === undefined) {
          serveIt = serve(server)
          served.set(server, serveIt)
        }
        return serveIt(Predicate.isObject(r.message) ? r.message as JsonObject : {})
      }
      case "Other": {
        if (r.subtype === "elicitation") {
          const onElicitation = options.questions.onElicitation
          // Without a callback the form is declined, as the official SDK does.
          if (onElicitation === undefined) return Effect.succeed(success({ action: "decline" }))
          const elicitation = elicitationOf(r.request as unknown as ElicitationParams)
          return answer("elicitation callback", Effect.suspend(() => onElicitation(elicitation)), undefined)
        }
        if (r.subtype === "request_user_dialog") {
          const params = r.request as unknown as RequestUserDialogParams
          const dialogs = options.questions.userDialogs
          // The CLI sends only the kinds the host declared; anything else is cancelled (the CLI then applies the
          // dialog's default) rather than left pending, which an error answer would do.
          if (dialogs === undefined || !dialogs.kinds.includes(params.dialog_kind)) {
            return Effect.succeed(success({ behavior: "cancelled" }))
          }
          const dialog: UserDialogRequest = {
            kind: params.dialog_kind,
            payload: params.payload,
            toolUseId: params.tool_use_id,
            raw: params
          }
          return answer("user dialog callback", Effect.suspend(() => dialogs.handle(dialog)), undefined)
        }
        return Effect.succeed(error(`Unsupported control request subtype: ${r.subtype}`))
      }
    }
  }
}
