/**
 * Where a tiny turn's round trip goes, seen from outside the host: runner.ts's `segments` figure installs this probe
 * before it loads the host, so whatever spawns the CLI (the bare host and the SDK spawn it directly, Tether through
 * its launcher) the probe sees the CLI's pipes. It marks three moments of each turn:
 *
 * - the prompt's write begins: the host calls `stdin.write` with a stream-json `user` message;
 * - that call returns: Node has handed the line to the pipe (usually written by then: the kernel wakes the CLI);
 * - the last read of the CLI's stdout: the moment Node pushes a chunk read from the pipe into the stream, before any
 *   listener of the host runs. A tiny turn's frames come in one read (`reads` counts them).
 *
 * So a turn splits into what the host does before its prompt is written, the write itself, what the CLI and the
 * pipes take until the frames are read (the fake's own work, and any time the host's event loop takes to come back
 * to the read), and what the host does with the frames until the turn is its caller's. The probe adds no listener:
 * a `data` listener would set the stream flowing before the host reads.
 */
import { ChildProcess } from "node:child_process"

/** The moments the probe saw last, in `performance.now()` milliseconds, and the stdout reads so far. */
export interface Probe {
  lastWriteAt: number
  lastWrittenAt: number
  lastReadAt: number
  reads: number
}

type Spawn = (this: ChildProcess, options: unknown) => unknown

/**
 * Wraps `ChildProcess.prototype.spawn` (what `child_process.spawn` calls) so that every child whose stdin and stdout
 * are both pipes is watched (the watchdog's keeper, whose stdout is not a pipe, is not).
 */
export const install = (): Probe => {
  const probe: Probe = { lastWriteAt: 0, lastWrittenAt: 0, lastReadAt: 0, reads: 0 }
  const prototype = ChildProcess.prototype as unknown as { spawn: Spawn }
  const spawn = prototype.spawn
  prototype.spawn = function(options) {
    const result = spawn.call(this, options)
    const { stdin, stdout } = this
    if (stdin !== null && stdout !== null) {
      const write = stdin.write
      stdin.write = function(this: typeof stdin, chunk: unknown, ...rest: Array<unknown>) {
        const prompt = typeof chunk === "string" && chunk.startsWith(`{"type":"user"`)
        if (prompt) probe.lastWriteAt = performance.now()
        const accepted = (write as (...args: Array<unknown>) => boolean).call(this, chunk, ...rest)
        if (prompt) probe.lastWrittenAt = performance.now()
        return accepted
      } as typeof stdin.write
      const push = stdout.push
      stdout.push = function(this: typeof stdout, chunk: unknown, encoding?: BufferEncoding) {
        if (chunk !== null) {
          probe.lastReadAt = performance.now()
          probe.reads++
        }
        return push.call(this, chunk, encoding)
      }
    }
    return result
  }
  return probe
}
