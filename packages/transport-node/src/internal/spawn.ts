/**
 * Starting the CLI's process (`node:child_process`, and why not `effect/process`).
 *
 * @internal
 */
import { SpawnFailed } from "@tether/core/TetherError"
import * as Effect from "effect/Effect"
import * as NodeChildProcess from "node:child_process"
import { readLines } from "./readers.ts"
import * as Secrets from "./secrets.ts"

export const describe = (error: unknown): string => {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === undefined ? error.message : `${code}: ${error.message}`
  }
  return String(error)
}

/**
 * Starts the process. `node:child_process` directly rather than `effect/process`, because the Effect spawner
 * cannot give three guarantees this transport owes: its release kills the process group only (a `setsid`
 * descendant survives) and polls it with `kill(-pgid, 0)`, which counts zombies as alive, so a group of zombies
 * re-parented to a slow PID 1 makes it wait out `forceKillAfter` and then one more second; its exit code reports a
 * signal only inside an error message (no `Signaled` status); and its stdin is a `Sink`, with no per-write
 * completion to carry backpressure and EPIPE back to `write`. So the transport owns the `ChildProcess` and reads
 * its pipes itself (stdout: {@link readLines}). `placed` runs right after the spawn, before control returns to the
 * event loop (so before the child can have been reaped): it reads the start time, and puts the launcher in its
 * cgroup; when it throws, the child is killed and the spawn fails with its message.
 */
export const spawnProcess = <A>(
  program: string,
  file: string,
  args: ReadonlyArray<string>,
  options: NodeChildProcess.SpawnOptions,
  placed: (child: NodeChildProcess.ChildProcess) => A,
  scrub: Secrets.Scrub
): Effect.Effect<{ readonly child: NodeChildProcess.ChildProcess; readonly placed: A }, SpawnFailed> =>
  Effect.callback((resume) => {
    let child: NodeChildProcess.ChildProcess
    let result: A | undefined
    try {
      child = NodeChildProcess.spawn(file, args, options)
    } catch (error) {
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
      return
    }
    try {
      if (child.pid !== undefined) result = placed(child)
    } catch (error) {
      child.kill("SIGKILL")
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
      return
    }
    const onError = (error: Error) => {
      child.off("spawn", onSpawn)
      resume(Effect.fail(new SpawnFailed({ program, reason: scrub(describe(error)) })))
    }
    const onSpawn = () => {
      child.off("error", onError)
      resume(Effect.succeed({ child, placed: result as A }))
    }
    child.once("error", onError)
    child.once("spawn", onSpawn)
  })
