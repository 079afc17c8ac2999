/**
 * A protocol machine's items as short strings, for the machine tables (`ClaudeMachine.test.ts`,
 * `CodexMachine.test.ts`): one string per item, with the fields the session machine reads (`@turn` for the turn it
 * names, ` (session)` for session traffic).
 */
import type * as Provider from "../../src/Provider.ts"
import { describeError } from "./MachineHarness.ts"

const at = (turnId: string | undefined) => turnId === undefined ? "" : `@${turnId}`

const scoped = (item: { readonly turnId?: string | undefined; readonly scope?: "turn" | "session" | undefined }) =>
  `${at(item.turnId)}${item.scope === "session" ? " (session)" : ""}`

/** A turn's outcome; a provider's own error is built for the turn `T` and shown with its fields. */
export const describeOutcome = (outcome: Provider.TurnOutcome): string => {
  switch (outcome._tag) {
    case "Success":
    case "Interrupted":
      return outcome._tag
    case "Api":
      return `Api(${outcome.status},${outcome.detail})`
    case "Failed": {
      const error = outcome.error("T") as unknown as { readonly [key: string]: unknown }
      return `Failed ${describeError(error)} ${JSON.stringify({ ...error })}`
    }
  }
}

export const describeItem = (item: Provider.Item): string => {
  switch (item._tag) {
    case "Write":
      return `Write ${item.line}`
    case "Frame":
      return `Frame ${item.type}${item.subtype === undefined ? "" : `/${item.subtype}`}${scoped(item)}`
    case "TextDelta":
      return `TextDelta ${JSON.stringify(item.text)}${scoped(item)}`
    case "AssistantMessage":
      return `AssistantMessage ${JSON.stringify(item.text)}${scoped(item)}`
    case "ToolUse":
      return `ToolUse ${item.name} ${item.toolUseId} ${JSON.stringify(item.input)}${scoped(item)}`
    case "ToolResult":
      return `ToolResult ${item.toolUseId}${item.isError ? " error" : ""} ${JSON.stringify(item.content)}${
        scoped(item)
      }`
    case "Retry":
      return `Retry ${item.attempt}/${item.maxRetries} after ${item.delayMs} (${item.errorStatus}: ${item.message})${
        scoped(item)
      }`
    case "Receipt":
      return `Receipt ${item.turnId}`
    case "TurnEnd":
      return `TurnEnd${at(item.turnId)} ${describeOutcome(item.outcome)}`
    case "SessionId":
      return `SessionId ${item.sessionId}`
    case "ControlAnswer":
      return `ControlAnswer #${item.ref} ${
        item.answer._tag === "Success"
          ? `ok ${JSON.stringify(item.answer.payload)}`
          : `error ${item.answer.message} (${item.answer.code})`
      }`
    case "PermissionRequest":
      return `PermissionRequest ${item.request.requestId} ${item.request.kind} ${item.request.toolName} ${item.request.toolUseId} ${
        JSON.stringify(item.request.input)
      } ${item.request.description}`
    case "HostRequest":
      return `HostRequest ${item.requestId}${item.bound === "turn" ? " (turn)" : ""} ${JSON.stringify(item.request)}`
    case "Cancel":
      return `Cancel ${item.requestId}`
    case "Ready":
      return `Ready ${JSON.stringify(item.info)}`
    case "Refused":
      return `Refused ${item.reason}`
    case "Malformed":
      return `Malformed ${item.error.reason}`
    default:
      return item._tag
  }
}

/** What a machine returned, as an array. */
export const itemsOf = (items: Provider.Items): Array<Provider.Item> =>
  items === undefined ? [] : Array.isArray(items) ? [...items] : [items as Provider.Item]
