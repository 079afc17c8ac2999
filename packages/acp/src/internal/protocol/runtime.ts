/**
 * The decoders of the messages the ACP protocol machine reads, without `effect/Schema`: each checks its value with a
 * generated guard (guards.generated.ts, made by `pnpm codegen` from the schemas generated from the protocol's JSON
 * Schema), which gives `Schema.is`'s answer, and returns the value itself when the guard accepts it (the schemas are
 * open objects without transformations, so it is its own decoded value). Only when a guard refuses is
 * `effect/Schema` loaded (explain.ts), to word the `ProtocolError`'s detail as Effect's decoder does.
 *
 * @internal
 */
import * as Explainer from "@tether/core/codec/Explainer"
import type { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"
import type * as Explain from "./explain.ts"
import * as Guards from "./guards.generated.ts"
import type * as Schemas from "./schemas.generated.ts"
import { paramsError } from "./wire.ts"

const explain: (schema: Explain.SchemaName, input: unknown) => Explainer.Decoded = Explainer.lazy(import.meta.url)

/**
 * A decoder of params, named by its method in an error.
 *
 * @category models
 * @since 0.1.0
 */
export type Decoder<A> = (method: string, params: unknown) => Result.Result<A, ProtocolError>

type TypeOf<K extends Explain.SchemaName> = (typeof Schemas)[K]["Type"]

const decoder =
  <K extends Explain.SchemaName>(schema: K, is: (u: unknown) => boolean): Decoder<TypeOf<K>> => (method, params) => {
    if (is(params)) return Result.succeed(params as TypeOf<K>)
    const decoded = explain(schema, params)
    return decoded._tag === "Success"
      ? Result.succeed(decoded.value as TypeOf<K>)
      : Result.fail(paramsError(method, decoded.message))
  }

/** `initialize`'s result. */
export const decodeInitializeResponse = decoder("InitializeResponse", Guards.isInitializeResponse)
/** `session/new`'s result. */
export const decodeNewSessionResponse = decoder("NewSessionResponse", Guards.isNewSessionResponse)
/** `session/load`'s result. */
export const decodeLoadSessionResponse = decoder("LoadSessionResponse", Guards.isLoadSessionResponse)
/** `session/prompt`'s result. */
export const decodePromptResponse = decoder("PromptResponse", Guards.isPromptResponse)
/** `session/request_permission`'s params. */
export const decodeRequestPermission = decoder("RequestPermissionRequest", Guards.isRequestPermissionRequest)
/** `fs/read_text_file`'s params. */
export const decodeReadTextFile = decoder("ReadTextFileRequest", Guards.isReadTextFileRequest)
/** `fs/write_text_file`'s params. */
export const decodeWriteTextFile = decoder("WriteTextFileRequest", Guards.isWriteTextFileRequest)
/** `terminal/create`'s params. */
export const decodeCreateTerminal = decoder("CreateTerminalRequest", Guards.isCreateTerminalRequest)
/** `terminal/output`'s params. */
export const decodeTerminalOutput = decoder("TerminalOutputRequest", Guards.isTerminalOutputRequest)
/** `terminal/release`'s params. */
export const decodeReleaseTerminal = decoder("ReleaseTerminalRequest", Guards.isReleaseTerminalRequest)
/** `terminal/wait_for_exit`'s params. */
export const decodeWaitForTerminalExit = decoder("WaitForTerminalExitRequest", Guards.isWaitForTerminalExitRequest)
/** `terminal/kill`'s params. */
export const decodeKillTerminal = decoder("KillTerminalRequest", Guards.isKillTerminalRequest)

/**
 * The decoders of the `session/update` variants Tether reads, by their `sessionUpdate`. A variant not listed here
 * (one a newer agent sends, or one Tether only passes on) is published as a frame without being checked.
 */
export const updates = {
  user_message_chunk: decoder("SessionUpdateUserMessageChunk", Guards.isSessionUpdateUserMessageChunk),
  agent_message_chunk: decoder("SessionUpdateAgentMessageChunk", Guards.isSessionUpdateAgentMessageChunk),
  agent_thought_chunk: decoder("SessionUpdateAgentThoughtChunk", Guards.isSessionUpdateAgentThoughtChunk),
  tool_call: decoder("SessionUpdateToolCall", Guards.isSessionUpdateToolCall),
  tool_call_update: decoder("SessionUpdateToolCallUpdate", Guards.isSessionUpdateToolCallUpdate),
  plan: decoder("SessionUpdatePlan", Guards.isSessionUpdatePlan),
  available_commands_update: decoder(
    "SessionUpdateAvailableCommandsUpdate",
    Guards.isSessionUpdateAvailableCommandsUpdate
  ),
  current_mode_update: decoder("SessionUpdateCurrentModeUpdate", Guards.isSessionUpdateCurrentModeUpdate),
  config_option_update: decoder("SessionUpdateConfigOptionUpdate", Guards.isSessionUpdateConfigOptionUpdate),
  usage_update: decoder("SessionUpdateUsageUpdate", Guards.isSessionUpdateUsageUpdate)
} as const

/** `initialize`'s decoded result. */
export type InitializeResult = Schemas.InitializeResponse
/** `session/new`'s or `session/load`'s decoded result. */
export type OpenResult = Schemas.NewSessionResponse | Schemas.LoadSessionResponse
/** A `tool_call` update. */
export type ToolCall = Schemas.SessionUpdateToolCall
/** A `tool_call_update` update. */
export type ToolCallUpdate = Schemas.SessionUpdateToolCallUpdate
