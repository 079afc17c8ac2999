/**
 * The Claude Code stream-json protocol: schemas for every frame in both directions, a synchronous line decoder for
 * the CLI's stdout, and encoders for the host's stdin frames. Three parts, one per direction and one for controls:
 *
 * - CLI → host (stdout): {@link decodeLine} parses one line once, dispatches on `type` (and `subtype` /
 *   `request.subtype`) and runs the guard of that frame only. Unknown `type` values and unknown `system`
 *   subtypes decode to {@link Decoded} `Unknown` with the raw object; a known type with a malformed body is a
 *   `ProtocolError` with reason `"malformed"`, never `Unknown`. {@link encodeFrame} writes a CLI frame back.
 * - Host → CLI (stdin): every encoder validates the frame against its schema before it becomes a line, because a
 *   single line the CLI cannot parse kills the CLI. An invalid value is a defect (the encoder throws): the types
 *   rule it out, so it can only come from a programming error such as a non-JSON value inside a payload.
 *   {@link decodeHostLine} reads such a line back.
 * - Controls: the bodies of the host's control requests ({@link ControlRequestInput}), the host's answers to the
 *   CLI's requests ({@link ControlSuccessPayload}), and the CLI's answers to the host's requests with their decoders
 *   ({@link decodeInitializeResponse}, …).
 * - Unknown fields are preserved at every level: every object schema keeps its extra keys, so decoding and then
 *   encoding a frame gives back the same JSON.
 *
 * The decoders and encoders check every frame with guards generated from the schemas (`pnpm codegen`), which give
 * `Schema.is`'s answer: using them loads `effect/Schema` only to explain a frame a guard refuses, with Effect's
 * decoder's message. A session uses them so; importing this module loads the schemas themselves. What needs no
 * check at all (the line limit, writing a trusted frame, reading the envelope of a host line) is in `ClaudeWire`.
 *
 * @since 0.1.0
 */
export { type DecodeOptions, defaultMaxLineLength } from "./ClaudeWire.ts"
export * from "./internal/protocol/cliFrames.ts"
export * from "./internal/protocol/controls.ts"
export * from "./internal/protocol/hostFrames.ts"
export {
  decodeBackgroundTasksResponse,
  decodeContextUsageResponse,
  decodeHostLine,
  decodeInitializeResponse,
  decodeInterruptResponse,
  decodeLine,
  decodeMcpPermissionModeOverrideResponse,
  decodeMcpReadResourceResponse,
  decodeMcpSetServersResponse,
  decodeMcpStatusResponse,
  decodeOpenResponse,
  decodeReadFileResponse,
  decodeReloadOutputStylesResponse,
  decodeReloadPluginsResponse,
  decodeReloadSkillsResponse,
  decodeRewindFilesResponse,
  decodeSetModelResponse,
  decodeSetPermissionModeResponse,
  encodeControlCancel,
  encodeControlError,
  encodeControlRequest,
  encodeControlSuccess,
  encodeFrame,
  encodeHostFrame,
  encodeUserMessage
} from "./internal/protocol/runtime.ts"
export type { Unrecognized } from "./internal/protocol/shared.ts"
