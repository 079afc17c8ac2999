/**
 * The Codex floor: `child_process` + `readline` + `JSON.parse` against the fast fake `codex app-server`
 * (fast-codex.mjs), no validation, no events, no bookkeeping beyond what a turn needs: `initialize`, `initialized`,
 * `thread/start`, then one `turn/start` per turn, done at its `turn/completed`. Anything a real Codex host does costs
 * more than this.
 */
import { spawn } from "node:child_process"
import * as Readline from "node:readline"
import { fakeEnv, fastCodex } from "../fake.ts"
import type { Host, HostSession, TurnStats } from "../host.ts"

/** A server line as the bare host reads it: the fields it routes and counts by. */
interface Line {
  readonly id?: unknown
  readonly method?: unknown
  readonly result?: { readonly thread?: { readonly id?: unknown } }
}

interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
}

const request = (id: number, method: string, params: unknown) => JSON.stringify({ method, id, params }) + "\n"

const open = (): Promise<HostSession> =>
  new Promise((resolveOpen, rejectOpen) => {
    const child = spawn(process.execPath, [fastCodex, "app-server"], {
      stdio: ["pipe", "pipe", "pipe"],
      env: fakeEnv()
    })
    child.stderr.resume()
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    let waiter: Waiter | undefined
    let threadId: string | undefined
    let closing = false
    let ids = 2

    const fail = (error: Error) => {
      if (threadId === undefined) rejectOpen(error)
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
        waiter.messages++
        if (line.method === "item/agentMessage/delta") waiter.deltas++
        else if (line.method === "turn/completed") {
          const done = waiter
          waiter = undefined
          done.resolve({ deltas: done.deltas, messages: done.messages })
        }
        return
      }
      if (line.id === 0 && line.method === undefined) {
        child.stdin.write(JSON.stringify({ method: "initialized" }) + "\n" + request(1, "thread/start", {}))
      } else if (line.id === 1 && line.method === undefined && typeof line.result?.thread?.id === "string") {
        threadId = line.result.thread.id
        resolveOpen(session)
      }
    })

    const session: HostSession = {
      turn: (prompt) =>
        new Promise((resolve, reject) => {
          waiter = { resolve, reject, deltas: 0, messages: 0 }
          child.stdin.write(
            request(ids++, "turn/start", { threadId, input: [{ type: "text", text: prompt, text_elements: [] }] })
          )
        }),
      close: async () => {
        closing = true
        child.stdin.end()
        await exited
      }
    }

    child.stdin.write(request(0, "initialize", { clientInfo: { name: "bench", title: null, version: "0" } }))
  })

/** The bare Codex host, for runner.ts. */
export const host: Host = { open }
