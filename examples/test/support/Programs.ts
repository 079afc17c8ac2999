/**
 * Example programs run as a user runs them, `node <file>`, as real processes. Every process a run starts carries a
 * marker in its environment and is killed when the run's scope closes, however it ends.
 */
import { Data, Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

const markVariable = "TETHER_PROGRAM_RUN"

/** Live processes whose environment carries the marker (Linux: /proc; elsewhere none are found). */
const marked = (mark: string): ReadonlyArray<number> => {
  if (process.platform !== "linux") return []
  const needle = `${markVariable}=${mark}\0`
  return Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return !/\) [ZX] /.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1")) &&
        Fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(needle)
    } catch {
      return false
    }
  })
}

const killMarked = (mark: string) =>
  Effect.sync(() => {
    for (const pid of marked(mark)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
    }
  })

export class ProgramFailed extends Data.TaggedError("ProgramFailed")<{ readonly reason: string }> {}

export interface Outcome {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A program that runs: what it printed so far, and its end. */
export interface Running {
  readonly pid: number | undefined
  readonly stdout: () => string
  readonly stderr: () => string
  /** Waits for the program to exit: its exit code. */
  readonly exit: Effect.Effect<number | null, ProgramFailed>
}

/**
 * Starts `node <file> ...args` with `env` added to this process's environment. It and whatever it started are killed
 * when the scope closes.
 */
export const start = (
  file: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): Effect.Effect<Running, never, Scope.Scope> =>
  Effect.gen(function*() {
    const mark = randomUUID()
    yield* Effect.addFinalizer(() => killMarked(mark))
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [file, ...args], {
          cwd: Path.dirname(file),
          env: { ...process.env, ...env, [markVariable]: mark },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (data: string) => stdout += data)
    child.stderr.setEncoding("utf8").on("data", (data: string) => stderr += data)
    const closed = new Promise<number | null>((resolve, reject) => {
      child.once("error", reject)
      child.once("close", resolve)
    })
    // Read only through `exit`: a spawn error nobody waits for is not an unhandled rejection.
    closed.catch(() => {})
    const running: Running = {
      pid: child.pid,
      stdout: () => stdout,
      stderr: () => stderr,
      exit: Effect.tryPromise({
        try: () => closed,
        catch: (error) => new ProgramFailed({ reason: error instanceof Error ? error.message : String(error) })
      })
    }
    return running
  })

/**
 * Runs `node <file> ...args` to its end (at most 30 s) with `env` added to this process's environment. Whatever it
 * started is killed when the scope closes.
 */
export const run = (file: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const program = yield* start(file, args, env)
    const code = yield* program.exit.pipe(
      Effect.timeoutOrElse({
        duration: "30 seconds",
        orElse: () =>
          Effect.fail(
            new ProgramFailed({ reason: `still running after 30 s\n${program.stdout()}\n${program.stderr()}` })
          )
      })
    )
    const outcome: Outcome = { code, stdout: program.stdout(), stderr: program.stderr() }
    return outcome
  })
