/**
 * The ceiling: what the fake CLI delivers to a host that does nothing with it. Stdout is read as raw chunks, lines
 * are found by their newline bytes and told apart by a byte prefix (`{"type":"stream_event","event":{"type":
 * "content_block_delta"`, `{"type":"result"`), never decoded: no string, no `JSON.parse`, no `readline`. No real
 * host does less, so its median throughput over a run is about the most a host gets from the fake on this machine
 * (one sample of another host can come out above it: the pipeline's pace moves from sample to sample); a target
 * above it is a target for the fake, not for the host. Not a reference for correctness (it trusts the fake's key
 * order; the runner still checks its counts).
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { claudeArgs, fakeClaude, fakeEnv, initializeLine, userMessageLine } from "../fake.ts"
import type { Host, HostSession, Waiter } from "../host.ts"

const deltaPrefix = Buffer.from(`{"type":"stream_event","event":{"type":"content_block_delta"`)
const resultPrefix = Buffer.from(`{"type":"result"`)
const responsePrefix = Buffer.from(`{"type":"control_response"`)

/** True when `chunk[start..]` begins with `prefix` (within the line that ends at `end`). */
const startsWith = (chunk: Buffer, start: number, end: number, prefix: Buffer): boolean =>
  end - start >= prefix.length && chunk.compare(prefix, 0, prefix.length, start, start + prefix.length) === 0

const open = (): Promise<HostSession> =>
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
    // The start of a line split across two reads: only its first bytes matter, so they are all it keeps.
    let carry: Buffer | undefined

    const fail = (error: Error) => {
      if (!initialized) rejectOpen(error)
      waiter?.reject(error)
      waiter = undefined
    }
    child.once("error", fail)
    child.once("exit", (code, signal) => {
      if (!closing) fail(new Error(`fake exited code=${code} signal=${signal}`))
    })

    const line = (chunk: Buffer, start: number, end: number) => {
      if (waiter !== undefined) {
        waiter.messages++
        if (startsWith(chunk, start, end, deltaPrefix)) waiter.deltas++
        else if (startsWith(chunk, start, end, resultPrefix)) {
          const done = waiter
          waiter = undefined
          done.resolve({ deltas: done.deltas, messages: done.messages })
        }
        return
      }
      if (!initialized && startsWith(chunk, start, end, responsePrefix)) {
        initialized = true
        resolveOpen(session)
      }
    }

    child.stdout.on("data", (chunk: Buffer) => {
      let start = 0
      let newline = chunk.indexOf(10)
      if (carry !== undefined) {
        // The line's first bytes, up to the longest prefix: all the line is when it is shorter than that.
        const head = Buffer.concat([carry, chunk.subarray(0, newline === -1 ? chunk.length : newline)])
          .subarray(0, deltaPrefix.length)
        if (newline === -1) {
          carry = head
          return
        }
        carry = undefined
        line(head, 0, head.length)
        start = newline + 1
        newline = chunk.indexOf(10, start)
      }
      while (newline !== -1) {
        line(chunk, start, newline)
        start = newline + 1
        newline = chunk.indexOf(10, start)
      }
      if (start < chunk.length) carry = Buffer.from(chunk.subarray(start, start + deltaPrefix.length))
    })

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

    child.stdin.write(initializeLine(`req_1_${randomUUID().slice(0, 6)}`) + "\n")
  })

/** The ceiling host (raw chunks, lines told apart by byte prefixes, nothing decoded), for runner.ts. */
export const host: Host = { open }
