/**
 * A reference point, not a competitor: the bare host (bare.ts) with its `JSON.parse` replaced by Tether's own frame
 * decoder (`ClaudeProtocol.decodeLine`: the line is measured, parsed, and checked against the schema of its frame
 * type), and nothing else of Tether. Set against the bare host it prices validation alone; set against Tether it
 * prices everything else (the Effect runtime, the transport, the session and its events).
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Readline from "node:readline"
import { ClaudeProtocol } from "../../../packages/core/src/index.ts"
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
      const decoded = ClaudeProtocol.decodeLine(line)
      if (decoded._tag === "Failure") return fail(new Error(decoded.failure.message))
      if (decoded.success._tag !== "Frame") return fail(new Error(`unexpected frame: ${line.slice(0, 80)}`))
      const frame = decoded.success.frame
      if (waiter !== undefined) {
        waiter.messages++
        if (frame.type === "stream_event" && frame.event.type === "content_block_delta") waiter.deltas++
        if (frame.type === "result") {
          const done = waiter
          waiter = undefined
          done.resolve({ deltas: done.deltas, messages: done.messages })
        }
        return
      }
      if (!initialized && frame.type === "control_response" && frame.response.request_id === initId) {
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

/** The bare host with Tether's frame decoder, for runner.ts. */
export const host: Host = { open }
