/**
 * Test helpers that look at the operating system, never at the transport's bookkeeping.
 */
import type { Transport } from "@tether/core"
import { FakeClaude } from "@tether/testing"
import { Data, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"

export interface Proc {
  readonly pid: number
  readonly ppid: number
  readonly sid: number
  readonly state: string
  readonly args: string
}

const stat = (pid: number): Proc | undefined => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    const args = Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ").trim()
    return { pid, ppid: Number(fields[1]), sid: Number(fields[3]), state: fields[0], args }
  } catch {
    return undefined
  }
}

/**
 * Live (non-zombie) processes, other than this one, whose environment has an entry starting with `entry` (pass
 * `"NAME=value\0"` for an exact match), read from /proc.
 */
export const withEnvironment = (entry: string): Array<Proc> => {
  const needle = Buffer.from(entry)
  const found: Array<Proc> = []
  for (const name of Fs.readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue
    let environ: Buffer
    try {
      environ = Fs.readFileSync(`/proc/${name}/environ`)
    } catch {
      continue
    }
    const at = environ.indexOf(needle)
    if (at === -1 || (at > 0 && environ[at - 1] !== 0)) continue
    const info = stat(Number(name))
    if (info !== undefined && info.state !== "Z" && info.state !== "X") found.push(info)
  }
  return found
}

/** Live (non-zombie) processes whose environment carries `TEST_MARK=<mark>`, read from /proc. */
export const marked = (mark: string): Array<Proc> => withEnvironment(`TEST_MARK=${mark}\0`)

/** True while the process exists and is not a zombie. */
export const isAlive = (pid: number): boolean => {
  const info = stat(pid)
  return info !== undefined && info.state !== "Z" && info.state !== "X"
}

export class WaitTimeout extends Data.TaggedError("WaitTimeout")<{ readonly what: string }> {}

/** Polls (real time: these tests watch real processes) until `f` holds, failing after `timeoutMillis`. */
export const waitUntil = (what: string, f: () => boolean, timeoutMillis = 5_000) =>
  Effect.callback<void, WaitTimeout>((resume) => {
    const deadline = Date.now() + timeoutMillis
    let timer: ReturnType<typeof setTimeout> | undefined
    const poll = () => {
      if (f()) return resume(Effect.void)
      if (Date.now() > deadline) return resume(Effect.fail(new WaitTimeout({ what })))
      timer = setTimeout(poll, 10)
    }
    poll()
    return Effect.sync(() => clearTimeout(timer))
  })

export const newMark = () => randomUUID()

/** A launch spec for the fake CLI, marked so that its whole tree can be found in /proc. */
export const fakeSpec = (mark: string, knobs: FakeClaude.Knobs, extra?: {
  readonly args?: ReadonlyArray<string>
  readonly set?: Transport.Environment["set"]
}): Transport.LaunchSpec => ({
  program: "claude",
  args: extra?.args ?? ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
  cwd: Option.none(),
  env: { mode: "inherit", set: { ...FakeClaude.env(knobs), TEST_MARK: mark, ...extra?.set }, unset: [] }
})

export const initialize = JSON.stringify({
  type: "control_request",
  request_id: "req_1",
  request: { subtype: "initialize", hooks: {} }
})

export const userMessage = (text: string, uuid: string = randomUUID()) =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "text", text }] },
    parent_tool_use_id: null,
    session_id: "",
    uuid
  })

export const fakeClaudePath = FakeClaude.path
