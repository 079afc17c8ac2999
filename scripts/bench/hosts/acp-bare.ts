/**
 * The ACP floor: `child_process` + `readline` + `JSON.parse` against the fast fake ACP agent (fast-acp.mjs), no
 * validation, no events, no bookkeeping beyond what a turn needs: `initialize`, `session/new`, then one
 * `session/prompt` per turn, its `session/update` lines counted until the prompt's answer (which ends an ACP turn).
 * Anything a real ACP client does costs more than this.
 */
import { spawn } from "node:child_process"
import * as Readline from "node:readline"
import { fakeEnv, fastAcp, root } from "../fake.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

/** An agent line as the bare host reads it: the fields it routes and counts by. */
interface Line {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: { readonly update?: { readonly sessionUpdate?: unknown } }
  readonly result?: { readonly sessionId?: unknown }
  readonly error?: { readonly message?: unknown }
}

interface Waiter {
  readonly id: number
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
}

const request = (id: number, method: string, params: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n"

const open = (): Promise<HostSession> =>
  new Promise((resolveOpen, rejectOpen) => {
    const child = spawn(process.execPath, [fastAcp], { stdio: ["pipe", "pipe", "pipe"], env: fakeEnv() })
    child.stderr.resume()
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    let waiter: Waiter | undefined
    let sessionId: string | undefined
    let closing = false
    let ids = 2

    const fail = (error: Error) => {
      if (sessionId === undefined) rejectOpen(error)
      waiter?.reject(error)
      waiter = undefined
    }
    child.once("error", fail)
    child.once("exit", (code, signal) => {
      if (!closing) fail(new Error(`fake exited code=${code} signal=${signal}`))
    })

    Readline.createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (text) => {
      const line = JSON.parse(text) as Line
      if (waiter !== undefined) {
        if (line.method === "session/update") {
          waiter.messages++
          if (line.params?.update?.sessionUpdate === "agent_message_chunk") waiter.deltas++
        } else if (line.id === waiter.id && line.method === undefined) {
          // The prompt's answer: the turn's end (its stopReason, or an error).
          const done = waiter
          waiter = undefined
          if (line.error !== undefined) done.reject(new Error(`prompt failed: ${String(line.error.message)}`))
          else done.resolve({ deltas: done.deltas, messages: done.messages + 1 })
        }
        return
      }
      if (line.id === 0 && line.method === undefined) {
        child.stdin.write(request(1, "session/new", { cwd: root, mcpServers: [] }))
      } else if (line.id === 1 && line.method === undefined && typeof line.result?.sessionId === "string") {
        sessionId = line.result.sessionId
        resolveOpen(session)
      }
    })

    const session: HostSession = {
      turn: (prompt) =>
        new Promise((resolve, reject) => {
          const id = ids++
          waiter = { id, resolve, reject, deltas: 0, messages: 0 }
          child.stdin.write(request(id, "session/prompt", { sessionId, prompt: [{ type: "text", text: prompt }] }))
        }),
      close: async () => {
        closing = true
        child.stdin.end()
        await exited
      }
    }

    child.stdin.write(
      request(0, "initialize", {
        protocolVersion: 1,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "bench", version: "0" }
      })
    )
  })

/** The bare ACP host, for runner.ts. */
export const host: Host = { open }
