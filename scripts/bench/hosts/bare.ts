/**
 * The floor: `child_process` + `readline` + `JSON.parse`, no validation, no events, no bookkeeping beyond what a
 * turn needs. Anything a real host does costs more than this.
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Readline from "node:readline"
import type { Readable } from "node:stream"
import { claudeArgs, fakeClaude, fakeEnv, initializeLine, userMessageLine } from "../fake.ts"
import { count } from "../host.ts"
import type { Counted, Host, HostSession, Waiter } from "../host.ts"

/** A CLI message as the bare host reads it: the fields it counts by and the initialize answer's request id. */
export interface Message extends Counted {
  readonly response?: { readonly request_id?: unknown }
}

/**
 * How a host reads the fake's stdout: it calls `deliver` with each line's message, in order, and `fail` on a line it
 * refuses.
 */
export type Reader = (
  stdout: Readable,
  deliver: (message: Message) => void,
  fail: (error: Error) => void
) => void

/**
 * Reads stdout with `readline` and turns each line into a message with `parse` (which throws on a line it refuses):
 * `JSON.parse` for the bare host, a validating decoder for the reference host in validated.ts.
 */
export const readLines = (parse: (line: string) => Message): Reader => (stdout, deliver, fail) => {
  const lines = Readline.createInterface({ input: stdout, crlfDelay: Infinity })
  lines.on("line", (line) => {
    let message: Message
    try {
      message = parse(line)
    } catch (error) {
      return fail(error instanceof Error ? error : new Error(String(error)))
    }
    deliver(message)
  })
}

/** Opens a bare session on the fake, its stdout read by `read`. */
export const openWith = (read: Reader): Promise<HostSession> =>
  new Promise((resolveOpen, rejectOpen) => {
    const child = spawn(process.execPath, [fakeClaude, ...claudeArgs], {
      stdio: ["pipe", "pipe", "pipe"],
      env: fakeEnv()
    })
    child.stderr.resume()
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    let waiter: Waiter | undefined
    let initialized = false
    let closing = false
    const initId = `req_1_${randomUUID().slice(0, 6)}`

    const fail = (error: Error) => {
      if (!initialized) rejectOpen(error)
      waiter?.reject(error)
      waiter = undefined
    }
    child.once("error", fail)
    child.once("exit", (code, signal) => {
      if (!closing) fail(new Error(`fake exited code=${code} signal=${signal}`))
    })

    read(child.stdout, (message) => {
      if (waiter !== undefined) {
        if (count(waiter, message)) waiter = undefined
        return
      }
      if (!initialized && message.type === "control_response" && message.response?.request_id === initId) {
        initialized = true
        resolveOpen(session)
      }
    }, fail)

    const session: HostSession = {
      turn: (prompt) =>
        new Promise((resolve, reject) => {
          waiter = { resolve, reject, deltas: 0, messages: 0 }
          child.stdin.write(userMessageLine(prompt) + "\n")
        }),
      close: async () => {
        closing = true
        child.stdin.end()
        await exited
      }
    }

    child.stdin.write(initializeLine(initId) + "\n")
  })

/** The bare host (`child_process` + `readline` + `JSON.parse`), for runner.ts. */
export const host: Host = { open: () => openWith(readLines(JSON.parse)) }
