/**
 * Reading the CLI's pipes: stdout as lines with backpressure, stderr as a bounded tail.
 *
 * @internal
 */
import * as Transport from "@tether/core/Transport"
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Pull from "effect/Pull"
import * as Stream from "effect/Stream"
import type { Readable } from "node:stream"
import * as Framing from "../Framing.ts"
import * as ProcessTree from "./processTree.ts"
import * as Secrets from "./secrets.ts"

/** A bounded tail of a byte stream. */
export const makeTail = (limit: number) => {
  const chunks: Array<Buffer> = []
  let bytes = 0
  let cut = false
  return {
    push: (chunk: Buffer) => {
      // A copy of (the end of) the chunk: a chunk is a slice of the stream's 64 KiB read buffer, which a few bytes of
      // stderr kept for the session's lifetime would keep whole.
      if (chunk.length > limit) cut = true
      const kept = ProcessTree.unpooled(chunk.length > limit ? chunk.subarray(chunk.length - limit) : chunk)
      chunks.push(kept)
      bytes += kept.length
      while (chunks.length > 1 && bytes - chunks[0].length >= limit) {
        bytes -= chunks.shift()!.length
        cut = true
      }
    },
    /** The bytes of the buffers the tail keeps alive (not only its own: what its chunks are slices of). */
    retained: (): number => chunks.reduce((sum, chunk) => sum + chunk.buffer.byteLength, 0),
    /** The tail, and whether it starts mid-stream (bytes before it were dropped). */
    read: (): { readonly text: string; readonly cut: boolean } => {
      const all = Buffer.concat(chunks, bytes)
      const last = all.length > limit ? all.subarray(all.length - limit) : all
      // The cut may fall inside a character: drop its undecodable remainder.
      return { text: last.toString("utf8").replace(/^\uFFFD+/, ""), cut: cut || all.length > limit }
    }
  }
}

/**
 * How many bytes of stdout are read ahead of the consumer before the pipe is paused. Past it the CLI blocks on its
 * writes (backpressure); it also bounds how many lines one pull hands over (about one 64 KiB pipe read).
 */
export const stdoutHighWaterBytes = 64 * 1024

/**
 * How long the end of stdout waits for the CLI's exit and the end of its stderr. A CLI closes stdout when it exits,
 * but Node reports the exit and the last stderr bytes separately: a reader that sees stdout end and asks why must
 * find the exit status and the whole stderr (a descendant holding stderr open would hold it forever: bounded).
 */
export const endSettleMillis = 250

/**
 * Stdout as a stream of lines, read in flowing mode straight into the splitter: each pipe read becomes the lines it
 * completes, and a pull hands over every line read since the last pull as one chunk, without a copy. When the
 * consumer falls `stdoutHighWaterBytes` behind, the pipe is paused until the next pull (so memory stays bounded by
 * that, Node's own buffer of the paused socket, and the splitter's `maxLineBytes`). A read error ends the stream like
 * EOF: the pipe is gone. The stream has one consumer at a time; a consumer that stops early leaves the pipe open,
 * and the next run continues with the lines not yet handed over. Lines are scrubbed of secrets as they are handed
 * over; the end is handed over once `settled` says the process's exit and stderr are in.
 */
export const readLines = (
  readable: Readable,
  splitter: Framing.LineSplitter,
  scrub: Secrets.ConnectionScrub,
  settled: (then: () => void) => void
): Stream.Stream<Transport.Line> => {
  let lines: Array<Transport.Line> = []
  let unread = 0
  let paused = false
  let ended = false
  let eof = false
  let wake: ((effect: Effect.Effect<void>) => void) | undefined

  const notify = () => {
    const resume = wake
    if (resume !== undefined) {
      wake = undefined
      resume(Effect.void)
    }
  }
  readable.on("data", (chunk: Buffer) => {
    splitter.push(chunk, lines)
    unread += chunk.length
    if (lines.length > 0) {
      // Only complete lines wait for the consumer: the bytes of a partial line are bounded by the splitter.
      if (unread >= stdoutHighWaterBytes && !paused) {
        paused = true
        readable.pause()
      }
      notify()
    }
  })
  const finish = () => {
    if (eof) return
    eof = true
    splitter.end(lines)
    if (lines.length > 0) notify()
    settled(() => {
      ended = true
      notify()
    })
  }
  readable.on("end", finish)
  readable.on("close", finish)
  readable.on("error", finish)

  const clean = (line: Transport.Line): Transport.Line => {
    if (line._tag === "Text") {
      const text = scrub(line.text)
      return text === line.text ? line : Transport.Line.Text({ text })
    }
    const prefix = scrub(line.prefix, { end: true })
    return prefix === line.prefix ? line : Transport.Line.TooLong({ ...line, prefix })
  }
  const take = (): Arr.NonEmptyReadonlyArray<Transport.Line> => {
    const out = (scrub.idle() ? lines : lines.map(clean)) as unknown as Arr.NonEmptyReadonlyArray<
      Transport.Line
    >
    lines = []
    unread = 0
    if (paused) {
      paused = false
      readable.resume()
    }
    return out
  }
  const wait = Effect.callback<void>((resume) => {
    if (lines.length > 0 || ended) return resume(Effect.void)
    if (wake !== undefined) {
      return resume(Effect.die(new Error("NodeTransport: stdout was read from two fibers at once")))
    }
    wake = resume
    return Effect.sync(() => {
      if (wake === resume) wake = undefined
    })
  })
  const pull: Pull.Pull<Arr.NonEmptyReadonlyArray<Transport.Line>> = Effect.suspend(() =>
    lines.length > 0 ? Effect.succeed(take()) : ended ? Cause.done() : waitThenPull
  )
  const waitThenPull = Effect.flatMap(wait, () => pull)
  return Stream.fromPull(Effect.succeed(pull))
}
