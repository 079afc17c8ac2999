/**
 * Test helpers that look at the operating system, never at the transport's bookkeeping.
 */
import type { Transport } from "@tether/core"
import { FakeClaude } from "@tether/testing"
import { Data, Effect, Option, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cgroup from "../src/internal/cgroup.ts"

/** A process, from /proc: `args` is its command line, joined with spaces. */
export interface Proc {
  readonly pid: number
  readonly ppid: number
  readonly sid: number
  readonly state: string
  readonly args: string
}

/** A process as /proc shows it now (pid, parent, session, state, command line); undefined when it is gone. */
export const stat = (pid: number): Proc | undefined => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    const args = Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ").trim()
    return { pid, ppid: Number(fields[1]), sid: Number(fields[3]), state: fields[0], args }
  } catch {
    return undefined
  }
}

const isZombie = (proc: Proc): boolean => proc.state === "Z" || proc.state === "X" || proc.state === "x"

const pidsInProc = (): Array<number> =>
  Fs.readdirSync("/proc").filter((name) => /^[0-9]+$/.test(name)).map(Number).filter((pid) => pid !== process.pid)

/** Every live (non-zombie) process but this one, read from /proc. */
export const allProcs = (): Array<Proc> =>
  pidsInProc().flatMap((pid) => {
    const info = stat(pid)
    return info === undefined || isZombie(info) ? [] : [info]
  })

/**
 * Live (non-zombie) processes, other than this one, whose environment has an entry starting with `entry` (pass
 * `"NAME=value\0"` for an exact match), read from /proc.
 */
export const withEnvironment = (entry: string): Array<Proc> => {
  const needle = Buffer.from(entry)
  const found: Array<Proc> = []
  for (const pid of pidsInProc()) {
    let environ: Buffer
    try {
      environ = Fs.readFileSync(`/proc/${pid}/environ`)
    } catch {
      continue
    }
    const at = environ.indexOf(needle)
    if (at === -1 || (at > 0 && environ[at - 1] !== 0)) continue
    const info = stat(pid)
    if (info !== undefined && !isZombie(info)) found.push(info)
  }
  return found
}

/** Live (non-zombie) processes whose environment carries `<variable>=<mark>` (default `TEST_MARK`), from /proc. */
export const marked = (mark: string, variable = "TEST_MARK"): Array<Proc> => withEnvironment(`${variable}=${mark}\0`)

/** SIGKILLs every process {@link marked} with `mark`, ignoring the ones already gone. */
export const killMarked = (mark: string, variable?: string): void => {
  for (const proc of marked(mark, variable)) {
    try {
      process.kill(proc.pid, "SIGKILL")
    } catch {
      // ESRCH: it exited since /proc was read.
    }
  }
}

/**
 * SIGKILLs every process {@link marked} with `mark` until none is left (a tree that forks while it is killed needs
 * more than one pass), for at most `timeoutMillis`: for finalizers, which must leave the machine as they found it
 * however the test ended.
 */
export const killAllMarked = (mark: string, variable?: string, timeoutMillis = 2_000) =>
  Effect.callback<void>((resume) => {
    const deadline = Date.now() + timeoutMillis
    let timer: ReturnType<typeof setTimeout> | undefined
    // Done after two empty passes in a row: a process that is exec'ing reads for a moment without its environment.
    let empty = 0
    const pass = () => {
      killMarked(mark, variable)
      empty = marked(mark, variable).length === 0 ? empty + 1 : 0
      if (empty === 2 || Date.now() > deadline) return resume(Effect.void)
      timer = setTimeout(pass, 10)
    }
    pass()
    return Effect.sync(() => clearTimeout(timer))
  })

/** The processes of `procs` that run `sleep` (by name or by path). */
export const sleeping = (procs: ReadonlyArray<Proc>): Array<Proc> =>
  procs.filter((proc) => /^(\S*\/)?sleep( |$)/.test(proc.args))

/** True while the process exists and is not a zombie. */
export const isAlive = (pid: number): boolean => {
  const info = stat(pid)
  return info !== undefined && !isZombie(info)
}

/** A {@link waitUntil} condition that did not hold in time. */
export class WaitTimeout extends Data.TaggedError("WaitTimeout")<{ readonly what: string }> {}

/** Polls (real time: these tests watch real processes) until `f` holds, failing after `timeoutMillis`. */
export const waitUntil = (what: string, f: () => boolean, timeoutMillis = 5_000) =>
  Effect.callback<void, WaitTimeout>((resume) => {
    const deadline = Date.now() + timeoutMillis
    let timer: ReturnType<typeof setTimeout> | undefined
    const poll = () => {
      let holds: boolean
      try {
        holds = f()
      } catch (cause) {
        // A condition that throws (a /proc or cgroup entry gone between two reads) ends the wait as a defect: thrown
        // from a timer, it would be an uncaught exception and this wait would never resume.
        return resume(Effect.die(cause))
      }
      if (holds) return resume(Effect.void)
      if (Date.now() > deadline) return resume(Effect.fail(new WaitTimeout({ what })))
      timer = setTimeout(poll, 10)
    }
    poll()
    return Effect.sync(() => clearTimeout(timer))
  })

/** A fresh value for `TEST_MARK`, unique to one test's processes. */
export const newMark = () => randomUUID()

/**
 * Kills every process marked with `mark` when the scope closes, whether the test passed, failed or was interrupted
 * (a teardown that regressed, an assertion before the sessions' scope was closed). Register it before opening the
 * sessions it marks, so that their own teardown runs first and is what the test checks.
 */
export const killOnExit = (mark: string, variable?: string) => Effect.addFinalizer(() => killAllMarked(mark, variable))

/** A fresh mark (see {@link newMark}) whose processes are killed when the scope closes (see {@link killOnExit}). */
export const scopedMark = Effect.tap(Effect.sync(newMark), (mark) => killOnExit(mark))

/** `spec` with `TEST_MARK` set (kept when it has one), and that mark. */
export const withMark = (spec: Transport.LaunchSpec, mark: string = newMark()) => {
  const existing = spec.env.set["TEST_MARK"]
  const used = typeof existing === "string" ? existing : mark
  return { mark: used, spec: { ...spec, env: { ...spec.env, set: { ...spec.env.set, TEST_MARK: used } } } }
}

/**
 * A temporary directory under `base` (the OS's by default), removed with everything in it when the scope closes
 * (also when the test fails). Its path has symlinks resolved, as a process's cwd reports it.
 */
export const tempDir = (prefix: string, base: string = Os.tmpdir()) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(base, prefix)))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/** The text lines a connection writes before its line `ready` (within 5 s), for scripts that report, then wait. */
export const linesUntilReady = (connection: Transport.Connection) =>
  connection.stdout.pipe(
    Stream.map((line) => line._tag === "Text" ? line.text : ""),
    Stream.takeWhile((line) => line !== "ready"),
    Stream.runCollect,
    Effect.timeout("5 seconds"),
    Effect.map((lines) => Array.from(lines))
  )

/** A launch spec for the fake CLI, marked so that its whole tree can be found in /proc. */
export const fakeSpec = (mark: string, knobs: FakeClaude.Knobs, extra?: {
  readonly args?: ReadonlyArray<string>
  readonly set?: Transport.Environment["set"]
  readonly cwd?: string | undefined
}): Transport.LaunchSpec => ({
  program: "claude",
  args: extra?.args ?? ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
  cwd: Option.fromUndefinedOr(extra?.cwd),
  env: { mode: "inherit", set: { ...FakeClaude.env(knobs), TEST_MARK: mark, ...extra?.set }, unset: [] }
})

/** The SDK's initialize control request, as one stream-json line. */
export const initialize = JSON.stringify({
  type: "control_request",
  request_id: "req_1",
  request: { subtype: "initialize", hooks: {} }
})

/** A user message carrying `text`, as one stream-json line. */
export const userMessage = (text: string, uuid: string = randomUUID()) =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "text", text }] },
    parent_tool_use_id: null,
    session_id: "",
    uuid
  })

/** The fake CLI (`@tether/testing`'s fake-claude). */
export const fakeClaudePath = FakeClaude.path

/** The names in `dir`, none when it does not exist (any more). */
const entries = (dir: string): Array<string> => {
  try {
    return Fs.readdirSync(dir)
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === "ENOENT") return []
    throw cause
  }
}

/**
 * Removes the (emptied) cgroups a host left behind: one that died with neither finalizers nor a watchdog cannot
 * remove its own. Call after its processes were killed.
 */
export const removeHostCgroups = (hostPid: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    const location = Cgroup.locate(
      Fs.readFileSync("/proc/self/mountinfo", "utf8"),
      Fs.readFileSync("/proc/self/cgroup", "utf8")
    )
    if (location._tag === "Missing") return
    const own = location.own
    const layers = entries(own).filter((name) => name.startsWith(`tether-${hostPid}-`))
    for (const layer of layers) {
      const dir = `${own}/${layer}`
      // The host's watchdog may be removing the same directories: one gone meanwhile has no entries left.
      const sessions = () => entries(dir).filter((name) => /^s[0-9]+$/.test(name))
      // Killed processes leave cgroup.procs a moment later.
      yield* waitUntil("the host's cgroups to empty", () => {
        for (const session of sessions()) Cgroup.removeDir(`${dir}/${session}`)
        return sessions().length === 0
      }, 2_000).pipe(Effect.ignore)
      Cgroup.removeDir(dir)
    }
  })
