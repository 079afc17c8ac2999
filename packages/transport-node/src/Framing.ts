/**
 * NDJSON framing: turns a byte stream, cut into chunks anywhere, into {@link Transport.Line}s.
 *
 * Lines are split on the newline byte, which never occurs inside a multi-byte UTF-8 sequence, so a character cut
 * across two chunks is reassembled before it is decoded. A line is decoded once, when it is complete (the complete
 * lines a chunk holds after its first newline in one decode); a partial line is kept as the list of chunk slices
 * that hold it (no concatenation per chunk). A line longer than `maxLineBytes`
 * is not buffered: its bytes are counted and dropped until the next newline, and a {@link Transport.Line} `TooLong`
 * marker is emitted in its place. Empty lines are skipped.
 *
 * @since 0.1.0
 */
import * as Transport from "@tether/core/Transport"
import { Buffer } from "node:buffer"

/**
 * The default maximum line length: 16 MiB.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxLineBytes = 16 * 1024 * 1024

/**
 * How many bytes of an oversized line are kept (decoded) as the marker's `prefix`.
 *
 * @category constants
 * @since 0.1.0
 */
export const tooLongPrefixBytes = 256

/**
 * Options of a {@link LineSplitter}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Lines longer than this (in bytes, without the newline) are dropped and reported as `TooLong`. */
  readonly maxLineBytes?: number | undefined
}

/**
 * A stateful NDJSON splitter. Feed it chunks in order; it appends the complete lines to `out`.
 *
 * @example
 * ```ts
 * import { Framing } from "@tether/transport-node"
 *
 * const splitter = Framing.makeSplitter()
 * const out: Array<Transport.Line> = []
 * splitter.push(new TextEncoder().encode('{"a":1}\n{"b"'), out) // out: [Text {"a":1}]
 * splitter.push(new TextEncoder().encode(":2}\n"), out) // out: [Text {"a":1}, Text {"b":2}]
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface LineSplitter {
  /** Splits a chunk, appending the lines it completes to `out`. */
  readonly push: (chunk: Uint8Array, out: Array<Transport.Line>) => void
  /** Ends the input: a final line without a newline is appended to `out`. */
  readonly end: (out: Array<Transport.Line>) => void
}

const NEWLINE = 10

// The same object `Transport.Line.Text` builds, without the constructor's Proxy lookup and spread: one per line.
const textLine = (text: string): Transport.Line => ({ text, _tag: "Text" })

const toBuffer = (chunk: Uint8Array): Buffer =>
  Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)

/**
 * Creates a {@link LineSplitter}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSplitter = (options?: Options): LineSplitter => {
  const limit = options?.maxLineBytes ?? defaultMaxLineBytes
  // The partial line: slices of the chunks that hold it, and their total length.
  let pending: Array<Buffer> = []
  let pendingBytes = 0
  // While a line exceeds the limit, its bytes are only counted.
  let discarding = false
  let discardedBytes = 0
  let discardedPrefix = ""

  const prefixOf = (parts: ReadonlyArray<Buffer>): string => {
    const bytes: Array<Buffer> = []
    let taken = 0
    for (const part of parts) {
      if (taken >= tooLongPrefixBytes) break
      const slice = part.subarray(0, tooLongPrefixBytes - taken)
      bytes.push(slice)
      taken += slice.length
    }
    // A character cut at the end of the prefix decodes as U+FFFD: drop it.
    return Buffer.concat(bytes, taken).toString("utf8").replace(/\uFFFD+$/, "")
  }

  const startDiscarding = (head: Buffer) => {
    pending.push(head)
    discardedPrefix = prefixOf(pending)
    discardedBytes = pendingBytes + head.length
    discarding = true
    pending = []
    pendingBytes = 0
  }

  const tooLong = (length: number, prefix: string) => Transport.Line.TooLong({ length, limit, prefix })

  const partial = (chunk: Buffer, start: number, end: number) => {
    const length = end - start
    if (discarding) {
      discardedBytes += length
    } else if (pendingBytes + length > limit) {
      startDiscarding(chunk.subarray(start, end))
    } else if (length > 0) {
      pending.push(chunk.subarray(start, end))
      pendingBytes += length
    }
  }

  const complete = (chunk: Buffer, start: number, end: number, out: Array<Transport.Line>) => {
    const length = end - start
    if (discarding) {
      out.push(tooLong(discardedBytes + length, discardedPrefix))
      discarding = false
      discardedBytes = 0
      discardedPrefix = ""
      return
    }
    if (pendingBytes === 0) {
      if (length > limit) {
        out.push(tooLong(length, prefixOf([chunk.subarray(start, end)])))
      } else if (length > 0) {
        out.push(textLine(chunk.toString("utf8", start, end)))
      }
      return
    }
    const total = pendingBytes + length
    if (total > limit) {
      pending.push(chunk.subarray(start, end))
      out.push(tooLong(total, prefixOf(pending)))
    } else {
      pending.push(chunk.subarray(start, end))
      out.push(textLine(Buffer.concat(pending, total).toString("utf8")))
    }
    pending = []
    pendingBytes = 0
  }

  // Every non-empty line of `text`, none of them over the limit.
  const splitText = (text: string, out: Array<Transport.Line>) => {
    let from = 0
    while (from <= text.length) {
      let newline = text.indexOf("\n", from)
      if (newline === -1) newline = text.length
      if (newline > from) out.push(textLine(text.slice(from, newline)))
      from = newline + 1
    }
  }

  // Complete lines after the first newline of a chunk are decoded together: one UTF-8 decode for the run of lines
  // (it starts and ends at a newline, so no character is cut), then split on "\n" in the string. A run no longer
  // than the limit holds no line over it (the usual case: a run is at most one pipe read), so only a longer run
  // measures its lines: a second cursor finds the same newlines in the bytes (a newline byte never occurs inside a
  // multi-byte sequence, and an invalid byte decodes to one U+FFFD, so the nth newline is the same in both).
  const completeRun = (chunk: Buffer, start: number, end: number, out: Array<Transport.Line>) => {
    const text = chunk.toString("utf8", start, end)
    if (end - start <= limit) {
      splitText(text, out)
      return
    }
    let from = 0
    let byteFrom = start
    while (byteFrom <= end) {
      let byteEnd = chunk.indexOf(NEWLINE, byteFrom)
      if (byteEnd === -1 || byteEnd > end) byteEnd = end
      let newline = text.indexOf("\n", from)
      if (newline === -1) newline = text.length
      const bytes = byteEnd - byteFrom
      if (bytes > limit) {
        out.push(tooLong(bytes, prefixOf([chunk.subarray(byteFrom, byteEnd)])))
      } else if (bytes > 0) {
        out.push(textLine(text.slice(from, newline)))
      }
      from = newline + 1
      byteFrom = byteEnd + 1
    }
  }

  return {
    push: (input, out) => {
      const chunk = toBuffer(input)
      const size = chunk.length
      const first = chunk.indexOf(NEWLINE)
      if (first === -1) {
        partial(chunk, 0, size)
        return
      }
      // The first line may continue a partial one (or an oversized one being discarded).
      complete(chunk, 0, first, out)
      const last = chunk.lastIndexOf(NEWLINE)
      if (last > first + 1) completeRun(chunk, first + 1, last, out)
      partial(chunk, last + 1, size)
    },
    end: (out) => {
      if (discarding || pendingBytes > 0) {
        complete(Buffer.alloc(0), 0, 0, out)
      }
    }
  }
}

/**
 * Splits a whole sequence of chunks at once (the input ends after the last chunk). Handy in tests and for
 * recorded transcripts.
 *
 * @category constructors
 * @since 0.1.0
 */
export const split = (chunks: Iterable<Uint8Array>, options?: Options): Array<Transport.Line> => {
  const splitter = makeSplitter(options)
  const out: Array<Transport.Line> = []
  for (const chunk of chunks) splitter.push(chunk, out)
  splitter.end(out)
  return out
}
