/**
 * The ceiling: what the fake CLI delivers to a host that does nothing with it. Stdout is read as raw chunks, lines
 * are found by their newline bytes and told apart by a byte prefix (`{"type":"stream_event","event":{"type":
 * "content_block_delta"`, `{"type":"result"`), never decoded: no string, no `JSON.parse`, no `readline` (but for the
 * initialize answer, once a session, whose request id the bare host's opening checks). No real host does less, so
 * its median throughput over a run is about the most a host gets from the fake on this machine (one sample of another
 * host can come out above it: the pipeline's pace moves from sample to sample); a target above it is a target for
 * the fake, not for the host. Not a reference for correctness (it trusts the fake's key order; the runner still
 * checks its counts).
 */
import type { Host } from "../host.ts"
import { openWith } from "./bare.ts"
import type { Message, Reader } from "./bare.ts"

const deltaPrefix = Buffer.from(`{"type":"stream_event","event":{"type":"content_block_delta"`)
const resultPrefix = Buffer.from(`{"type":"result"`)
const responsePrefix = Buffer.from(`{"type":"control_response"`)

/** What the ceiling hands the bare host's counting for each kind of line: the same objects every time. */
const delta: Message = { type: "stream_event", event: { type: "content_block_delta" } }
const result: Message = { type: "result" }
const other: Message = { type: "other" }

/** True when the line `chunk[start..end]` begins with `prefix`. */
const startsWith = (chunk: Buffer, start: number, end: number, prefix: Buffer): boolean =>
  end - start >= prefix.length && chunk.compare(prefix, 0, prefix.length, start, start + prefix.length) === 0

/** Reads raw chunks and delivers each line as one of the objects above, found by its first bytes. */
const readPrefixes: Reader = (stdout, deliver, fail) => {
  // The start of a line split across two reads: only its first bytes matter, so they are all it keeps (the whole
  // line, for the initialize answer).
  let carry: Buffer | undefined
  const line = (chunk: Buffer, start: number, end: number) => {
    if (startsWith(chunk, start, end, deltaPrefix)) deliver(delta)
    else if (startsWith(chunk, start, end, resultPrefix)) deliver(result)
    else if (startsWith(chunk, start, end, responsePrefix)) {
      try {
        deliver(JSON.parse(chunk.toString("utf8", start, end)) as Message)
      } catch (error) {
        fail(error instanceof Error ? error : new Error(String(error)))
      }
    } else deliver(other)
  }
  const keep = (head: Buffer) =>
    head.length >= responsePrefix.length && head.compare(responsePrefix, 0, responsePrefix.length, 0) === 0
      ? head
      : head.subarray(0, deltaPrefix.length)
  stdout.on("data", (chunk: Buffer) => {
    let start = 0
    let newline = chunk.indexOf(10)
    if (carry !== undefined) {
      const head = keep(Buffer.concat([carry, chunk.subarray(0, newline === -1 ? chunk.length : newline)]))
      if (newline === -1) {
        carry = head
        return
      }
      carry = undefined
      line(head, 0, head.length)
      start = newline + 1
      newline = chunk.indexOf(10, start)
    }
    while (newline !== -1) {
      line(chunk, start, newline)
      start = newline + 1
      newline = chunk.indexOf(10, start)
    }
    if (start < chunk.length) carry = Buffer.from(keep(chunk.subarray(start)))
  })
}

/** The ceiling host (raw chunks, lines told apart by byte prefixes, nothing decoded), for runner.ts. */
export const host: Host = { open: () => openWith(readPrefixes) }
