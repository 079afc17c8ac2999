/**
 * Where a tiny turn's round trip goes, seen from outside the host: runner.ts's `segments` figure installs this probe
 * before it loads the host, so whatever spawns the CLI (the bare host and the SDK spawn it directly, Tether through
 * its launcher) the probe sees the CLI's pipes. It marks two moments of each turn:
 *
 * - the prompt's write: the host's call of `stdin.write` with a stream-json `user` message;
 * - the last read of the CLI's stdout: the moment Node pushes a chunk read from the pipe into the stream, before any
 *   listener of the host runs. A tiny turn's frames come in one read (`reads` counts them).
 *
 * So a turn splits into what the host does before its prompt is written, what the CLI and the pipes take (the fake's
 * own work, and any delay of the host's event loop in reading), and what the host does with the frames until the turn
 * is its caller's. The probe adds no listener: a `data` listener would set the stream flowing before the host reads.
 */
import { ChildProcess } from "node:child_process"

/** The moments the probe saw last, in `performance.now()` milliseconds, and the stdout reads so far. */
export interface Probe {
  lastWriteAt: number
  lastReadAt: number
  reads: number
}

type Spawn = (this: ChildProcess, options: unknown) => unknown

/** Wraps `ChildProcess.prototype.spawn` (what `child_process.spawn` calls) so every child with piped stdio is watched. */
export const install = (): Probe => {
  const probe: Probe = { lastWriteAt: 0, lastReadAt: 0, reads: 0 }
  const prototype = ChildProcess.prototype as unknown as { spawn: Spawn }
  const spawn = prototype.spawn
  prototype.spawn = function(options) {
    const result = spawn.call(this, options)
    const { stdin, stdout } = this
    if (stdin !== null && stdout !== null) {
      const write = stdin.write
      stdin.write = function(this: typeof stdin, chunk: unknown, ...rest: Array<unknown>) {
        if (typeof chunk === "string" && chunk.startsWith(`{"type":"user"`)) probe.lastWriteAt = performance.now()
        return (write as (...args: Array<unknown>) => boolean).call(this, chunk, ...rest)
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
