/**
 * The fake `codex` executables: the simulated app-server over real stdio, driven the way `CodexSession` drives the
 * real one (a handshake, then turns naming the thread the server started).
 */
import { assert, describe, it } from "@effect/vitest"
import * as CodexProtocol from "@tether/codex/CodexProtocol"
import { FakeCodex } from "@tether/testing"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"

type Line = Record<string, any>

/**
 * Runs a fake with `app-server`, completes the handshake, sends `prompts` one turn at a time, then closes stdin.
 * Returns every line it printed and its exit code.
 */
const drive = (program: string, prompts: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.callback<{ readonly lines: Array<Line>; readonly code: number | null }>((resume) => {
    const child = ChildProcess.spawn(program, ["app-server"], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "ignore"]
    })
    const lines: Array<Line> = []
    const write = (line: string) => child.stdin.write(line + "\n")
    let threadId = ""
    let next = 0
    const turn = () => {
      if (next === prompts.length) {
        child.stdin.end()
        return
      }
      write(CodexProtocol.encodeRequest(2 + next, "turn/start", {
        threadId,
        input: [{ type: "text", text: prompts[next++], text_elements: [] }]
      }))
    }
    Readline.createInterface({ input: child.stdout }).on("line", (text) => {
      const line = JSON.parse(text) as Line
      lines.push(line)
      if (line.id === 0 && "result" in line) {
        write(CodexProtocol.encodeNotification("initialized"))
        write(CodexProtocol.encodeRequest(1, "thread/start", {}))
      } else if (line.id === 1 && "result" in line) {
        threadId = line.result.thread.id
        turn()
      } else if (line.method === "turn/completed") {
        turn()
      }
    })
    child.on("close", (code) => resume(Effect.succeed({ lines, code })))
    write(CodexProtocol.encodeRequest(0, "initialize", { clientInfo: { name: "test", title: null, version: "1" } }))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("FakeCodex", () => {
  it.live("answers each turn with its greeting in deltas, and exits 0 at stdin's EOF", () =>
    Effect.gen(function*() {
      const { code, lines } = yield* drive(FakeCodex.path, ["Say hello", "Again"], { FAKE_CODEX_DELTAS: "2" })
      assert.strictEqual(code, 0)
      const completed = lines.filter((line) => line.method === "turn/completed")
      assert.deepStrictEqual(completed.map((line) => line.params.turn.items.map((item: Line) => item.text)), [
        ["Hello from fake-codex #1: Say hello"],
        ["Hello from fake-codex #2: Again"]
      ])
      assert.strictEqual(lines.filter((line) => line.method === "item/agentMessage/delta").length, 4)
    }))

  it.live("the fast fake (the benchmarks' server): a prompt FRAMES:<n> streams n deltas", () =>
    Effect.gen(function*() {
      const { code, lines } = yield* drive(FakeCodex.fastPath, ["FRAMES:1000"])
      assert.strictEqual(code, 0)
      assert.strictEqual(lines.filter((line) => line.method === "item/agentMessage/delta").length, 1000)
      assert.strictEqual(lines.at(-1)?.method, "turn/completed")
    }))
})
