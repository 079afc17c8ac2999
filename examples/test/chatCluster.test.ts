/**
 * `examples/src/chat-cluster.ts` as a user runs it (`node src/chat-cluster.ts`, the simulated CLI): it starts its
 * database and two runners, serves the chat routes; a conversation goes on after its runner is SIGKILLed, and Ctrl-C
 * (SIGINT) leaves nothing running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

const markVariable = "TETHER_PROGRAM_RUN"

/** Live processes whose environment carries the marker (Linux: /proc; elsewhere none are found). */
const marked = (mark: string): ReadonlyArray<{ readonly pid: number; readonly args: string }> => {
  if (process.platform !== "linux") return []
  const needle = `${markVariable}=${mark}\0`
  return Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).flatMap((pid) => {
    try {
      if (/\) [ZX] /.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1"))) return []
      if (!Fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(needle)) return []
      return [{ pid, args: Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ") }]
    } catch {
      return []
    }
  })
}

const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const post = (port: number, path: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", body: JSON.stringify(body) })
    return { status: response.status, body: await response.json() as { readonly [key: string]: unknown } }
  })

const get = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    return { status: response.status, body: await response.json() as { readonly [key: string]: unknown } }
  })

describe("examples/src/chat-cluster.ts", () => {
  it.live(
    "two runners behind one entry point: a conversation outlives its runner; Ctrl-C leaves nothing",
    () =>
      Effect.gen(function*() {
        const mark = randomUUID()
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const proc of marked(mark)) {
              try {
                process.kill(proc.pid, "SIGKILL")
              } catch {
                // gone
              }
            }
          })
        )
        const port = yield* freePort
        const runnerPort = yield* freePort
        let output = ""
        const entry = ChildProcess.spawn(
          process.execPath,
          [Path.resolve(import.meta.dirname, "../src/chat-cluster.ts")],
          {
            cwd: Path.resolve(import.meta.dirname, ".."),
            env: { ...process.env, PORT: String(port), RUNNER_PORT: String(runnerPort), [markVariable]: mark },
            stdio: ["ignore", "pipe", "pipe"]
          }
        )
        entry.stdout.setEncoding("utf8").on("data", (data: string) => output += data)
        entry.stderr.setEncoding("utf8").on("data", (data: string) => output += data)
        const exited = Effect.callback<number | null>((resume) => {
          if (entry.exitCode !== null || entry.signalCode !== null) return resume(Effect.succeed(entry.exitCode))
          entry.once("exit", (code) => resume(Effect.succeed(code)))
        })
        const waitFor = (what: string, done: () => boolean, millis: number) =>
          Effect.gen(function*() {
            const deadline = Date.now() + millis
            while (!done()) {
              if (Date.now() > deadline) {
                return yield* Effect.die(new Error(`${what} not within ${millis} ms:\n${output}`))
              }
              yield* Effect.sleep("100 millis")
            }
          })
        yield* waitFor("the entry point and both runners", () =>
          (output.match(/runner ready/g) ?? []).length === 2 &&
          output.includes("Listening on http"), 120_000)

        const first = yield* post(port, "/conversations/demo/messages", { text: "hello there", wait: true })
        assert.strictEqual(first.status, 200, JSON.stringify(first.body))
        assert.strictEqual(first.body.text, "You said: hello there")
        // The cluster may move the conversation's shard between the two runners while it balances them after they
        // joined: the runner it left has released it, and it is not live again until its next message (a snapshot
        // says SessionNotFound meanwhile). Another message then makes it live where it is now.
        let before = yield* get(port, "/conversations/demo")
        for (let attempt = 0; before.status !== 200 && attempt < 5; attempt++) {
          assert.strictEqual(before.body.error, "SessionNotFound", JSON.stringify(before.body))
          const again = yield* post(port, "/conversations/demo/messages", { text: "hello again", wait: true })
          assert.strictEqual(again.status, 200, JSON.stringify(again.body))
          before = yield* get(port, "/conversations/demo")
        }
        assert.strictEqual(before.status, 200, JSON.stringify(before.body))
        const runner = String(before.body.runner)
        // Found by its command line among the marked processes; looked for again until found (a read of /proc can
        // miss a process), and said in full if it never is.
        const runnerArgs = `runner ${runner.split(":")[1]}`
        let runnerPid = 0
        yield* waitFor(
          `the runner process of ${runner} (marked: ${JSON.stringify(marked(mark).map((proc) => proc.args))})`,
          () => (runnerPid = marked(mark).find((proc) => proc.args.includes(runnerArgs))?.pid ?? 0) !== 0,
          5_000
        )
        // A runner killed without its finalizers leaves its conversation directory (the next runner to start on the
        // machine sweeps it); this test removes it itself.
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const entry of Fs.readdirSync(Os.tmpdir())) {
              if (entry.startsWith(`tether-cluster-${runnerPid}-`)) {
                Fs.rmSync(Path.join(Os.tmpdir(), entry), { recursive: true, force: true })
              }
            }
          })
        )
        process.kill(runnerPid, "SIGKILL")

        const second = yield* post(port, "/conversations/demo/messages", { text: "still there?", wait: true })
        assert.strictEqual(second.status, 200, JSON.stringify(second.body))
        assert.strictEqual(second.body.text, "You said: still there?")
        const after = yield* get(port, "/conversations/demo")
        assert.notStrictEqual(after.body.runner, runner, "the conversation moved")
        assert.strictEqual(after.body.generation, Number(before.body.generation) + 1)

        entry.kill("SIGINT")
        const code = yield* exited.pipe(Effect.timeout("60 seconds"))
        assert.strictEqual(code, 130)
        yield* waitFor("every process of the example to end", () => marked(mark).length === 0, 15_000)
      }).pipe(Effect.scoped),
    240_000
  )
})
