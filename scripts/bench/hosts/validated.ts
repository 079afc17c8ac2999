/**
 * A reference point, not a competitor: the bare host (bare.ts) with its `JSON.parse` replaced by Tether's own frame
 * decoder (`ClaudeProtocol.decodeLine`: the line is measured, parsed, and checked against the schema of its frame
 * type), and nothing else of Tether. Set against the bare host it prices validation alone; set against Tether it
 * prices everything else (the Effect runtime, the transport, the session and its events).
 *
 * It imports the decoder from the module a Claude session decodes with (the generated guards, no `effect/Schema`),
 * not from the `@tether/core` index: the index loads every module of the package, Schema included, and that
 * footprint alone cost the early turns about 90 µs each, which is not validation's price.
 */
import * as ClaudeProtocol from "../../../packages/claude/src/internal/protocol/runtime.ts"
import type { Host } from "../host.ts"
import { openWith, readLines } from "./bare.ts"
import type { Message } from "./bare.ts"

/** `ClaudeProtocol.decodeLine` as a parser for `readLines`: the frame, or a throw for a line it refuses. */
export const decode = (line: string): Message => {
  const decoded = ClaudeProtocol.decodeLine(line)
  if (decoded._tag === "Failure") throw new Error(decoded.failure.message)
  if (decoded.success._tag !== "Frame") throw new Error(`not a known frame: ${line.slice(0, 80)}`)
  return decoded.success.frame
}

/** The bare host with Tether's frame decoder, for runner.ts. */
export const host: Host = { open: () => openWith(readLines(decode)) }
