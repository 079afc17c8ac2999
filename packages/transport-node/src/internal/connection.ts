/**
 * One open CLI: its pipes, its exit status, its writes and its teardown, as a `Transport.Connection`.
 *
 * @internal
 */
import { TransportWriteError } from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import * as NodeChildProcess from "node:child_process"
import * as Framing from "../Framing.ts"
import { endSettleMillis, makeTail, readLines } from "./readers.ts"
import * as Secrets from "./secrets.ts"
import { describe } from "./spawn.ts"
import * as Teardown from "./teardown.ts"

export const toExitStatus = (
  code: number | null,
  signal: NodeJS.Signals | null,
  outOfMemory = false
): Transport.ExitStatus =>
  code !== null
    ? Transport.ExitStatus.Exited({ code })
    : outOfMemory
    ? Transport.ExitStatus.Signaled({ signal: signal ?? "unknown", cause: "out-of-memory" })
    : Transport.ExitStatus.Signaled({ signal: signal ?? "unknown" })

export interface Handle {
  readonly child: NodeChildProcess.ChildProcess
  readonly pid: number
  readonly marker: string
  readonly container: Teardown.Container
  readonly exited: () => boolean
  readonly connection: Transport.Connection
  readonly scrub: Secrets.ConnectionScrub
  /** Takes the connection's secrets out of the set every connection is scrubbed of. */
  readonly unregisterSecrets: () => void
  /** Stops the periodic scans of this connection's tree (process-tree containment). */
  readonly unwatch: () => void
  /** After teardown: the last look at the limits' counters, then the session's v1 cgroups and temporary files go. */
  readonly box: Box
  /** The session's box, when it is isolated: its uid range's root outside. */
  readonly isolated?: {
    readonly base: number
    /** The CLI was found in the box: its pid is the one the limits' watch looks at. */
    readonly found: (cli: number) => void
  } | undefined
}

/** What a session has besides its processes: its limits' cgroups and watch, its private temporary directory. */
export interface Box {
  /** Looks at the limits' counters once more and stops watching them (before the teardown's report). */
  readonly lastLook: () => void
  /**
   * Removes the session's v1 cgroups and its temporary directory (after the teardown), gives back what its box
   * borrowed, and its uid range when `clean` (nothing survived).
   */
  readonly remove: (clean?: boolean) => void
}

export const makeConnection = (
  child: NodeChildProcess.ChildProcess,
  options: {
    readonly maxLineBytes: number
    readonly stderrTailBytes: number
    readonly scrub: Secrets.ConnectionScrub
    /**
     * Asked when the CLI was killed by SIGKILL: whether the kernel's OOM killer did it (its session's memory
     * limit). Absent without a memory limit.
     */
    readonly outOfMemory?: (() => boolean) | undefined
    readonly limitHits?: Stream.Stream<Transport.LimitHit> | undefined
  }
) => {
  const pid = child.pid!
  const exitDeferred = Deferred.makeUnsafe<Transport.ExitStatus>()
  let status: Transport.ExitStatus | undefined
  let stderrEnded = false
  const waiting: Array<() => void> = []
  const check = () => {
    if (status === undefined || !stderrEnded) return
    for (const then of waiting.splice(0)) then()
  }
  const settled = (then: () => void) => {
    if (status !== undefined && stderrEnded) return then()
    waiting.push(then)
    const timer = setTimeout(() => {
      const at = waiting.indexOf(then)
      if (at !== -1) {
        waiting.splice(at, 1)
        then()
      }
    }, endSettleMillis)
    timer.unref()
  }
  const settle = (code: number | null, signal: NodeJS.Signals | null) => {
    if (status !== undefined) return
    status = toExitStatus(code, signal, signal === "SIGKILL" && options.outOfMemory?.() === true)
    Deferred.doneUnsafe(exitDeferred, Exit.succeed(status))
    check()
  }
  child.on("exit", settle)
  // A CLI that exited before this listener was attached (the fiber may yield between the spawn and here) has
  // already emitted `exit`: read its status from the handle.
  if (child.exitCode !== null || child.signalCode !== null) settle(child.exitCode, child.signalCode)
  // Errors after the spawn (a failed kill, for instance) must not crash the host.
  child.on("error", () => {})

  const stdin = child.stdin!
  let inputEnded = false
  let inputError: string | undefined
  stdin.on("error", (error) => {
    inputError ??= describe(error)
  })
  // A write fails because the CLI closed its stdin, which it almost always does by exiting: the failure is handed
  // over once the exit status and the stderr are in (bounded), so that whoever asks why finds them, and its reason
  // names the exit status: a CLI that died at start says how, whichever of the two reaches the session first.
  const failWrite = (done: (error: TransportWriteError) => void, reason: string) =>
    settled(() =>
      done(
        new TransportWriteError({
          reason: status === undefined ? reason : `${reason} (the CLI exited: ${Transport.formatExitStatus(status)})`
        })
      )
    )
  const write = Transport.writeFromCallback((line, done) => {
    if (inputEnded) return done(new TransportWriteError({ reason: "stdin is closed" }))
    if (stdin.destroyed || !stdin.writable) return failWrite(done, inputError ?? "stdin is closed")
    // Completes when the kernel took the bytes: a CLI that does not read keeps the write pending, which is what
    // gives a delivery timeout its meaning.
    let settled = false
    stdin.write(line + "\n", (error) => {
      if (settled) return
      settled = true
      if (error === null || error === undefined) done(undefined)
      else failWrite(done, inputError ?? describe(error))
    })
    // Usually the pipe takes the line at once: nothing is left in the stream's buffer and nothing failed. Then the
    // bytes are in the kernel already, and the write completes now rather than on the next tick.
    if (!settled && stdin.writableLength === 0 && stdin.errored === null) {
      settled = true
      done(undefined)
    }
  })
  const endInput = Effect.sync(() => {
    if (inputEnded) return
    inputEnded = true
    stdin.end()
  })

  const tail = makeTail(options.stderrTailBytes)
  const stderr = child.stderr!
  stderr.on("data", tail.push)
  stderr.on("error", () => {})
  const stderrDone = () => {
    stderrEnded = true
    check()
  }
  stderr.on("end", stderrDone)
  stderr.on("close", stderrDone)
  const stderrTail = Effect.sync(() => {
    const { cut, text } = tail.read()
    return options.scrub(text, { start: cut })
  })

  const stdout = readLines(
    child.stdout!,
    Framing.makeSplitter({ maxLineBytes: options.maxLineBytes }),
    options.scrub,
    settled
  )

  const connection: Transport.Connection = {
    pid: Option.some(pid),
    write,
    endInput,
    stdout,
    stderrTail,
    exit: Deferred.await(exitDeferred),
    exitStatus: Effect.sync(() => Option.fromUndefinedOr(status)),
    ...(options.limitHits === undefined ? {} : { limitHits: options.limitHits })
  }
  return { connection, exited: () => status !== undefined }
}
