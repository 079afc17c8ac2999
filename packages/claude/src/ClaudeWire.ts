/**
 * The stream-json wire without its schemas: what a program that trusts the frames it handles needs, at the cost of
 * a few property reads, and without loading `effect/Schema` (about 140 modules, most of a second to import). A
 * simulated CLI writes its frames with {@link writeFrame} and reads the host's lines with {@link readHostLine}; a
 * host decodes and validates with `ClaudeProtocol`, whose types these are.
 *
 * Who checks what: a Tether session validates every frame it writes against the host-frame schemas before the write
 * (one line the CLI cannot parse kills the CLI) and every line it reads against the CLI-frame schemas. A simulator
 * on the other end therefore reads what it must act on (the envelope the CLI routes on) and leaves the rest to the
 * schemas that already ran.
 *
 * @example
 * ```ts
 * import { ClaudeWire } from "@tether/claude"
 *
 * const line = ClaudeWire.writeFrame({ type: "keep_alive" })
 * const read = ClaudeWire.readHostLine(`{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}`)
 * if (read._tag === "Frame" && read.frame.type === "control_request") {
 *   console.log(read.frame.request.subtype) // "interrupt"
 * }
 * ```
 *
 * @since 0.1.0
 */
import type { Frame } from "./internal/protocol/cliFrames.ts"
import type { HostFrame } from "./internal/protocol/hostFrames.ts"

/**
 * @category decoding
 * @since 0.1.0
 */
export interface DecodeOptions {
  /**
   * The longest line that is parsed, in UTF-16 code units (`string.length`); longer lines fail with `too-long`
   * without being parsed.
   */
  readonly maxLineLength: number
}

/**
 * The default line limit: 16 Mi code units. Real lines exceed 1 MiB (tool results carrying whole files).
 *
 * @category decoding
 * @since 0.1.0
 */
export const defaultMaxLineLength: number = 16 * 1024 * 1024

/**
 * Writes a CLI frame as one line (no trailing newline), unchecked: the frame's type is the check. What a simulated
 * CLI writes with; `ClaudeProtocol.encodeFrame` is the same with the schema check (and gives the same line).
 *
 * @category encoding
 * @since 0.1.0
 */
export const writeFrame = (frame: Frame): string => JSON.stringify(frame)

/**
 * What {@link readHostLine} made of a line.
 *
 * - `Frame`: a host frame whose envelope is sound: `user` with a `message` (`role: "user"`, string or array
 *   `content`), `parent_tool_use_id` and `session_id`; `control_request` with a `request_id` and a `request` with a
 *   string `subtype`; `control_response` with a `response` that is a `success` or an `error` for a `request_id`;
 *   `control_cancel_request` with a `request_id`. Gotcha: only the envelope was checked, not the payloads (a
 *   permission answer, an `initialize` body): use `ClaudeProtocol.decodeHostLine` to validate a line completely.
 * - `NotJson`: the line does not parse (the real CLI exits on such a line).
 * - `Refused`: a known frame type whose envelope is not sound (the real CLI exits on such a line too).
 * - `Ignored`: a JSON object of another type (or none): the CLI ignores what it does not know.
 *
 * @category decoding
 * @since 0.1.0
 */
export type HostLine =
  | { readonly _tag: "Frame"; readonly frame: HostFrame }
  | { readonly _tag: "NotJson"; readonly detail: string }
  | { readonly _tag: "Refused"; readonly type: string; readonly detail: string }
  | { readonly _tag: "Ignored"; readonly type: string | undefined }

type JsonObject = { readonly [key: string]: unknown }

const isObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

/** What is wrong with the envelope of a known host frame, or undefined when it is sound. */
const envelopeProblem = (type: string, frame: JsonObject): string | undefined => {
  switch (type) {
    case "user": {
      const message = frame.message
      if (!isObject(message) || message.role !== "user") return "`message` must be an object with `role: \"user\"`"
      if (typeof message.content !== "string" && !Array.isArray(message.content)) {
        return "`message.content` must be a string or an array"
      }
      const parent = frame.parent_tool_use_id
      if (parent !== null && typeof parent !== "string") return "`parent_tool_use_id` must be a string or null"
      if (typeof frame.session_id !== "string") return "`session_id` must be a string"
      if (frame.uuid !== undefined && typeof frame.uuid !== "string") return "`uuid` must be a string"
      return undefined
    }
    case "control_request": {
      if (typeof frame.request_id !== "string") return "`request_id` must be a string"
      const request = frame.request
      return isObject(request) && typeof request.subtype === "string"
        ? undefined
        : "`request` must be an object with a string `subtype`"
    }
    case "control_response": {
      const response = frame.response
      if (!isObject(response) || typeof response.request_id !== "string") {
        return "`response` must be an object with a string `request_id`"
      }
      if (response.subtype === "success") {
        return response.response === undefined || isObject(response.response)
          ? undefined
          : "a success `response.response` must be an object"
      }
      return response.subtype === "error" && typeof response.error === "string"
        ? undefined
        : "`response` must be a success, or an error with a string `error`"
    }
    case "control_cancel_request":
      return typeof frame.request_id === "string" ? undefined : "`request_id` must be a string"
    default:
      return undefined
  }
}

const hostFrameTypes: ReadonlySet<string> = new Set([
  "user",
  "control_request",
  "control_response",
  "control_cancel_request"
])

/**
 * Reads one line the host wrote on the CLI's stdin (without its newline): parsed once, its envelope checked by
 * hand (see {@link HostLine}).
 *
 * @category decoding
 * @since 0.1.0
 */
export const readHostLine = (line: string): HostLine => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return { _tag: "NotJson", detail: error instanceof Error ? error.message : String(error) }
  }
  if (!isObject(json)) return { _tag: "Ignored", type: undefined }
  const type = json.type
  if (typeof type !== "string" || !hostFrameTypes.has(type)) {
    return { _tag: "Ignored", type: typeof type === "string" ? type : undefined }
  }
  const problem = envelopeProblem(type, json)
  return problem === undefined
    ? { _tag: "Frame", frame: json as HostFrame }
    : { _tag: "Refused", type, detail: problem }
}
