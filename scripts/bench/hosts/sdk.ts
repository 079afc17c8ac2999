/**
 * The official SDK: `query()` with streaming input (an async iterable prompt that stays open across turns), pointed at
 * the fake through `pathToClaudeCodeExecutable`, with `includePartialMessages`, consumed by one `for await` loop.
 */
import { query } from "@anthropic-ai/claude-agent-sdk"
import type { SDKUserMessage } from "@anthropic-ai/claude-agent-sdk"
import { randomUUID } from "node:crypto"
import { fakeClaude, fakeEnv } from "../fake.ts"
import { count } from "../host.ts"
import type { Host, HostSession, Waiter } from "../host.ts"

/** Resolves once `pid` no longer exists (exited and reaped by its parent, this process). */
const gone = async (pid: number): Promise<void> => {
  for (;;) {
    try {
      process.kill(pid, 0)
    } catch {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
}

const open = async (): Promise<HostSession> => {
  const inbox: Array<SDKUserMessage> = []
  let wake: (() => void) | undefined
  let closed = false
  async function* prompts(): AsyncGenerator<SDKUserMessage> {
    while (!closed) {
      const next = inbox.shift()
      if (next !== undefined) yield next
      else await new Promise<void>((resolve) => (wake = resolve))
    }
  }
  const q = query({
    prompt: prompts(),
    options: {
      pathToClaudeCodeExecutable: fakeClaude,
      executable: "node",
      includePartialMessages: true,
      env: fakeEnv(),
      stderr: () => {}
    }
  })

  let waiter: Waiter | undefined
  const consumer = (async () => {
    for await (const message of q) {
      if (waiter !== undefined && count(waiter, message)) waiter = undefined
    }
  })().catch((error: unknown) => {
    if (!closed) waiter?.reject(error instanceof Error ? error : new Error(String(error)))
  })

  // The handshake: the SDK writes `initialize` as soon as the query starts; this waits for its answer.
  const init = await q.initializationResult()
  const pid = (init as unknown as { readonly pid: number }).pid

  return {
    turn: (prompt) =>
      new Promise((resolve, reject) => {
        waiter = { resolve, reject, deltas: 0, messages: 0 }
        inbox.push({
          type: "user",
          message: { role: "user", content: [{ type: "text", text: prompt }] },
          parent_tool_use_id: null,
          session_id: "",
          uuid: randomUUID()
        })
        wake?.()
      }),
    close: async () => {
      closed = true
      wake?.()
      q.close()
      await consumer
      await gone(pid)
    }
  }
}

/** The official SDK's `query()` host, for runner.ts. */
export const host: Host = { open }
