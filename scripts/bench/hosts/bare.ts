/**
 * The floor: `child_process` + `readline` + `JSON.parse`, no validation, no events, no bookkeeping beyond what a
 * turn needs. Anything a real host does costs more than this.
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Readline from "node:readline"
import { claudeArgs, fakeClaude, fakeEnv } from "../fake.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
}

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

    const lines = Readline.createInterface({ input: child.stdout, crlfDelay: Infinity })
    lines.on("line", (line) => {
      const message = JSON.parse(line)
      if (waiter !== undefined) {
        waiter.messages++
        if (message.type === "stream_event" && message.event.type === "content_block_delta") waiter.deltas++
        if (message.type === "result") {
          const done = waiter
          waiter = undefined
          done.resolve({ deltas: done.deltas, messages: done.messages })
        }
        return
      }
      if (!initialized && message.type === "control_response" && message.response.request_id === initId) {
        initialized = true
        resolveOpen(session)
      }
    })

    const session: HostSession = {
      turn: (prompt) =>
        new Promise((resolve, reject) => {
          waiter = { resolve, reject, deltas: 0, messages: 0 }
          child.stdin.write(
            JSON.stringify({
              type: "user",
              message: { role: "user", content: [{ type: "text", text: prompt }] },
              parent_tool_use_id: null,
              session_id: "",
              uuid: randomUUID()
            }) + "\n"
          )
        }),
      close: async () => {
        closing = true
        child.stdin.end()
        await exited
      }
    }

    child.stdin.write(
      JSON.stringify({ type: "control_request", request_id: initId, request: { subtype: "initialize", hooks: {} } }) +
        "\n"
    )
  })

/** The bare host (`child_process` + `readline` + `JSON.parse`), for runner.ts. */
export const host: Host = { open }
