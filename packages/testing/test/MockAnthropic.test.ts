import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MockAnthropic from "../src/MockAnthropic.ts"

// Real sockets and real time are the point of this module, so these tests run `it.live`.

interface SseEvent {
  readonly event: string
  readonly data: Record<string, any>
}

const parseSse = (raw: string): ReadonlyArray<SseEvent> =>
  raw.split("\n\n").filter((frame) => frame.trim() !== "").map((frame) => {
    const lines = frame.split("\n")
    const event = lines.find((line) => line.startsWith("event: "))?.slice("event: ".length) ?? ""
    const data = lines.find((line) => line.startsWith("data: "))?.slice("data: ".length) ?? "null"
    return { event, data: JSON.parse(data) }
  })

const bashTool = { name: "Bash", description: "run", input_schema: { type: "object" } }

/** A body shaped like the CLI's: `?beta=true`, system-reminder blocks, a `role: "system"` entry, tools. */
const cliBody = (prompt: string, options?: { readonly stream?: boolean; readonly tools?: boolean }) => ({
  model: "claude-opus-5-5",
  max_tokens: 128000,
  stream: options?.stream ?? true,
  system: [{ type: "text", text: "You are Claude Code" }],
  tools: options?.tools === false ? [] : [bashTool],
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "<system-reminder>\nSkills are available.\n</system-reminder>" },
        { type: "text", text: prompt }
      ]
    },
    { role: "system", content: "# Environment\nPlatform: linux" }
  ]
})

const toolResultBody = (toolUseId: string, output: string) => ({
  ...cliBody("run it"),
  messages: [
    ...cliBody("run it").messages,
    { role: "assistant", content: [{ type: "tool_use", id: toolUseId, name: "Bash", input: { command: "touch x" } }] },
    {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: toolUseId, content: [{ type: "text", text: output }] }]
    }
  ]
})

const post = (url: string, body: unknown, init?: RequestInit) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "dummy" },
      body: typeof body === "string" ? body : JSON.stringify(body),
      ...init
    })
  )

const messages = (mock: MockAnthropic.MockAnthropic, body: unknown) => post(`${mock.url}/v1/messages?beta=true`, body)

const events = (response: Response) => Effect.promise(() => response.text()).pipe(Effect.map(parseSse))

const json = (response: Response) => Effect.promise(() => response.json() as Promise<Record<string, any>>)

const deltaText = (sse: ReadonlyArray<SseEvent>) =>
  sse.filter((e) => e.event === "content_block_delta" && e.data.delta.type === "text_delta")
    .map((e) => e.data.delta.text as string)

describe("MockAnthropic", () => {
  it.live("streams a text reply with the Messages API's SSE framing", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.text("Hello there, host", { chunks: 3 })])
      const response = yield* messages(mock, cliBody("hi"))
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
      const sse = yield* events(response)
      assert.deepStrictEqual(sse.map((e) => e.event), [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      for (const e of sse) assert.strictEqual(e.data.type, e.event)
      const start = sse[0].data.message
      assert.strictEqual(start.role, "assistant")
      assert.strictEqual(start.model, "claude-opus-5-5")
      assert.deepStrictEqual(start.content, [])
      assert.isTrue(start.id.startsWith("msg_"))
      assert.deepStrictEqual(sse[2].data, {
        type: "content_block_start",
        index: 0,
        content_block: { type: "text", text: "" }
      })
      assert.strictEqual(deltaText(sse).join(""), "Hello there, host")
      assert.strictEqual(sse[7].data.delta.stop_reason, "end_turn")
    }))

  it.live("answers a non-streaming request with JSON, echoing the prompt and skipping system-reminders", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make()
      const response = yield* messages(mock, cliBody("What is 2+2?", { stream: false }))
      assert.strictEqual(response.status, 200)
      const body = yield* json(response)
      assert.strictEqual(body.type, "message")
      assert.strictEqual(body.stop_reason, "end_turn")
      assert.deepStrictEqual(body.content, [{ type: "text", text: "Hello from mock #1: What is 2+2?" }])
      assert.isAbove(body.usage.input_tokens, 0)
    }))

  it.live("streams a tool_use with its input in input_json_delta pieces, then echoes the tool_result", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.bash("touch x", { description: "make x" })])
      const sse = yield* messages(mock, cliBody("make a file")).pipe(Effect.flatMap(events))
      const start = sse.find((e) => e.event === "content_block_start")!.data.content_block
      assert.strictEqual(start.type, "tool_use")
      assert.strictEqual(start.name, "Bash")
      assert.deepStrictEqual(start.input, {})
      assert.isTrue(start.id.startsWith("toolu_"))
      const pieces = sse.filter((e) => e.event === "content_block_delta").map((e) => e.data.delta)
      assert.isAtLeast(pieces.length, 2)
      for (const piece of pieces) assert.strictEqual(piece.type, "input_json_delta")
      assert.deepStrictEqual(JSON.parse(pieces.map((p) => p.partial_json).join("")), {
        command: "touch x",
        description: "make x"
      })
      assert.strictEqual(sse.find((e) => e.event === "message_delta")!.data.delta.stop_reason, "tool_use")

      const follow = yield* messages(mock, toolResultBody(start.id, "made it")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltaText(follow), ["Tool said: made it"])
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((e) => e.reply), ["ToolUse", "Echo"])
      const second = Option.getOrThrow(log[1].messages)
      assert.deepStrictEqual(
        second.toolResult,
        Option.some({ toolUseId: start.id, content: "made it", isError: false })
      )
    }))

  it.live("a tool_use with a preamble sends a text block first", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([
        MockAnthropic.toolUse("Write", { file_path: "/tmp/a", content: "b" }, {
          preamble: "Writing.",
          id: "toolu_fixed"
        })
      ])
      const body = yield* messages(mock, cliBody("write", { stream: false })).pipe(Effect.flatMap(json))
      assert.deepStrictEqual(body.content, [
        { type: "text", text: "Writing." },
        { type: "tool_use", id: "toolu_fixed", name: "Write", input: { file_path: "/tmp/a", content: "b" } }
      ])
      assert.strictEqual(body.stop_reason, "tool_use")
    }))

  it.live("API errors carry the status, the error type and the Messages API error body", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [number, string]> = [
        [400, "invalid_request_error"],
        [429, "rate_limit_error"],
        [500, "api_error"],
        [529, "overloaded_error"]
      ]
      const mock = yield* MockAnthropic.make((request) =>
        MockAnthropic.apiError(Number(request.prompt), { message: `nope ${request.prompt}` })
      )
      for (const [status, type] of cases) {
        const response = yield* messages(mock, cliBody(String(status)))
        assert.strictEqual(response.status, status)
        assert.isNull(response.headers.get("x-should-retry"))
        const body = yield* json(response)
        assert.strictEqual(body.type, "error")
        assert.deepStrictEqual(body.error, { type, message: `nope ${status}` })
      }
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((e) => [e.reply, e.status]), cases.map(([status]) => ["ApiError", status]))
    }))

  it.live("shouldRetry is sent as x-should-retry", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.apiError(529, { shouldRetry: false })])
      const response = yield* messages(mock, cliBody("x"))
      assert.strictEqual(response.headers.get("x-should-retry"), "false")
    }))

  it.live("in a list script an error answers every retry of the same call; the next call gets the next reply", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.apiError(529), MockAnthropic.text("back again")])
      const statuses: Array<number> = []
      for (let attempt = 0; attempt < 3; attempt++) {
        statuses.push((yield* messages(mock, cliBody("first"))).status)
      }
      assert.deepStrictEqual(statuses, [529, 529, 529])
      const next = yield* messages(mock, cliBody("second")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltaText(next), ["back again"])
    }))

  it.live("an error with attempts: 1 lets the retry take the next reply", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([
        MockAnthropic.apiError(529, { attempts: 1 }),
        MockAnthropic.text("recovered")
      ])
      assert.strictEqual((yield* messages(mock, cliBody("same"))).status, 529)
      const retry = yield* messages(mock, cliBody("same")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltaText(retry), ["recovered"])
    }))

  it.live("requests that offer no tools get text and do not consume the script", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.bash("touch x")])
      const title = yield* messages(mock, cliBody("Write a title", { stream: false, tools: false })).pipe(
        Effect.flatMap(json)
      )
      assert.deepStrictEqual(title.content, [{ type: "text", text: "Hello from mock #1: Write a title" }])
      const turn = yield* messages(mock, cliBody("go", { stream: false })).pipe(Effect.flatMap(json))
      assert.strictEqual(turn.content[0].type, "tool_use")
    }))

  it.live("a function script sees the parsed request", () =>
    Effect.gen(function*() {
      const seen: Array<MockAnthropic.MessagesRequest> = []
      const mock = yield* MockAnthropic.make((request) => {
        seen.push(request)
        return MockAnthropic.text(`#${request.index} ${request.prompt}`)
      })
      const a = yield* messages(mock, cliBody("one", { stream: false })).pipe(Effect.flatMap(json))
      const b = yield* messages(mock, cliBody("two", { stream: false })).pipe(Effect.flatMap(json))
      assert.strictEqual(a.content[0].text, "#0 one")
      assert.strictEqual(b.content[0].text, "#1 two")
      assert.deepStrictEqual(seen[0].roles, ["user", "system"])
      assert.deepStrictEqual(seen[0].toolNames, ["Bash"])
      assert.strictEqual(seen[0].model, "claude-opus-5-5")
      assert.isFalse(seen[0].stream)
      assert.isTrue(Option.isNone(seen[0].toolResult))
    }))

  it.live("a function script that throws gets the client a 500 that says so", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make(() => {
        throw new Error("no reply for you")
      })
      const response = yield* messages(mock, cliBody("x"))
      assert.strictEqual(response.status, 500)
      assert.include((yield* json(response)).error.message, "no reply for you")
      assert.deepStrictEqual((yield* mock.requests).map((e) => e.reply), ["ScriptError"])
    }))

  it.live("count_tokens answers, anything else is a JSON 404, a non-JSON body is a 400", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make()
      const count = yield* post(`${mock.url}/v1/messages/count_tokens?beta=true`, cliBody("x"))
      assert.strictEqual(count.status, 200)
      assert.isAbove((yield* json(count)).input_tokens, 0)

      const models = yield* Effect.promise(() => fetch(`${mock.url}/v1/models`))
      assert.strictEqual(models.status, 404)
      assert.strictEqual((yield* json(models)).error.type, "not_found_error")
      const head = yield* Effect.promise(() => fetch(`${mock.url}/`, { method: "HEAD" }))
      assert.strictEqual(head.status, 404)
      const get = yield* Effect.promise(() => fetch(`${mock.url}/v1/messages`))
      assert.strictEqual(get.status, 404)

      const bad = yield* post(`${mock.url}/v1/messages`, "{not json")
      assert.strictEqual(bad.status, 400)
      assert.strictEqual((yield* json(bad)).error.type, "invalid_request_error")

      const log = yield* mock.requests
      assert.deepStrictEqual(
        log.map((e) => [e.seq, e.method, e.path, e.query, e.reply, e.status]),
        [
          [0, "POST", "/v1/messages/count_tokens", "?beta=true", "CountTokens", 200],
          [1, "GET", "/v1/models", "", "NotFound", 404],
          [2, "HEAD", "/", "", "NotFound", 404],
          [3, "GET", "/v1/messages", "", "NotFound", 404],
          [4, "POST", "/v1/messages", "", "BadRequest", 400]
        ]
      )
      assert.strictEqual(log[0].headers["x-api-key"], "dummy")
    }))

  it.live("the request log records each request, the reply used and how it ended", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.text("a b", { chunks: 2 }), MockAnthropic.bash("ls")])
      yield* messages(mock, cliBody("first")).pipe(Effect.flatMap(events))
      yield* messages(mock, cliBody("second", { stream: false })).pipe(Effect.flatMap(json))
      const log = yield* mock.requests
      assert.strictEqual(log.length, 2)
      assert.deepStrictEqual(log.map((e) => [e.reply, e.status, e.outcome, e.deltasSent]), [
        ["Text", 200, "completed", 2],
        ["ToolUse", 200, "completed", 0]
      ])
      const first = Option.getOrThrow(log[0].messages)
      assert.strictEqual(first.prompt, "first")
      assert.strictEqual(first.index, 0)
      assert.isTrue(first.stream)
      assert.strictEqual(log[0].query, "?beta=true")
    }))

  it.live("changes shows the log as it grows and as each request settles", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.text("a b", { chunks: 2 })])
      const seen: Array<string> = []
      const watcher = yield* Effect.forkChild(
        mock.changes.pipe(
          Stream.runForEach((log) => Effect.sync(() => seen.push(log.map((e) => e.outcome).join(","))))
        )
      )
      yield* messages(mock, cliBody("first")).pipe(Effect.flatMap(events))
      yield* mock.awaitRequests((log) => log[0]?.outcome === "completed")
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(watcher)
      assert.include(seen, "pending", "the request when it arrived")
      assert.strictEqual(seen.at(-1), "completed", "and when it settled")
    }))

  it.live("stall: one piece, then silence; with wait, not even the status line; hanging up ends it", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.stall(), MockAnthropic.stall({ wait: "1 hour" })])
      // Resolves with the response's headers; interrupting it aborts the request, as an agent's cancel does.
      const answered = (prompt: string) =>
        Effect.forkChild(
          Effect.promise((signal) =>
            fetch(`${mock.url}/v1/messages?beta=true`, {
              method: "POST",
              body: JSON.stringify(cliBody(prompt)),
              signal
            }).then((response) => {
              void response.body?.getReader().read()
              return response.status
            })
          )
        )
      const within = "5 seconds"
      const stalled = yield* answered("stall")
      assert.strictEqual(yield* Fiber.join(stalled).pipe(Effect.timeout(within)), 200)
      yield* mock.awaitRequests((log) => log.length === 1 && log[0].deltasSent === 1).pipe(Effect.timeout(within))
      yield* Effect.sleep("300 millis")
      const [first] = yield* mock.requests
      assert.deepStrictEqual([first.deltasSent, first.outcome], [1, "pending"], "one piece, then nothing")

      const waiting = yield* answered("wait")
      yield* mock.awaitRequests((log) => log.length === 2).pipe(Effect.timeout(within))
      const heard = yield* Effect.raceFirst(
        Fiber.join(waiting).pipe(Effect.as("answered")),
        Effect.sleep("300 millis").pipe(Effect.as("silent"))
      )
      assert.strictEqual(heard, "silent", "no status line before the wait is over")
      yield* Fiber.interrupt(waiting)
      const log = yield* mock.awaitRequests((log) => log[1]?.outcome === "client-closed").pipe(Effect.timeout(within))
      assert.strictEqual(log[1].deltasSent, 0)
    }))

  it.live("a slow stream runs to the end when the client stays", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.slow({ deltas: 5, interval: "20 millis" })])
      const started = Date.now()
      const sse = yield* messages(mock, cliBody("slowly")).pipe(Effect.flatMap(events))
      assert.isAtLeast(Date.now() - started, 4 * 20 - 5)
      assert.deepStrictEqual(deltaText(sse), ["w0 ", "w1 ", "w2 ", "w3 ", "w4 "])
      const log = yield* mock.requests
      assert.deepStrictEqual([log[0].outcome, log[0].deltasSent], ["completed", 5])
    }))

  it.live("a slow stream stops when the client disconnects", () =>
    Effect.gen(function*() {
      const mock = yield* MockAnthropic.make([MockAnthropic.slow({ deltas: 200, interval: "20 millis" })])
      // A reader that counts deltas until it is interrupted; interruption aborts the fetch, which hangs up the
      // connection as the CLI does when a turn is interrupted.
      const received = { deltas: 0 }
      const reader = yield* Effect.forkChild(Effect.promise(async (signal) => {
        const response = await fetch(`${mock.url}/v1/messages?beta=true`, {
          method: "POST",
          body: JSON.stringify(cliBody("slowly")),
          signal
        })
        const body = response.body!.getReader()
        const decoder = new TextDecoder()
        for (;;) {
          const chunk = await body.read()
          if (chunk.done) return
          received.deltas += (decoder.decode(chunk.value, { stream: true }).match(/"text_delta"/g) ?? []).length
        }
      }))
      yield* mock.awaitRequests((log) => log.length === 1 && log[0].deltasSent >= 3).pipe(Effect.timeout("5 seconds"))
      yield* Fiber.interrupt(reader)
      assert.isAtLeast(received.deltas, 1)
      const log = yield* mock.awaitRequests((log) => log.length === 1 && log[0].outcome !== "pending").pipe(
        Effect.timeout("5 seconds")
      )
      assert.strictEqual(log[0].outcome, "client-closed")
      assert.isAtLeast(log[0].deltasSent, 3)
      // Well before its 200 deltas (4 s), with room for a loaded machine noticing the hang-up late.
      assert.isBelow(log[0].deltasSent, 100)
      // And nothing more is sent afterwards.
      yield* Effect.sleep("150 millis")
      const later = yield* mock.requests
      assert.strictEqual(later[0].deltasSent, log[0].deltasSent)
    }))

  it.live("closing the scope stops the server, even with a stream in flight", () =>
    Effect.gen(function*() {
      const { url, inflight } = yield* Effect.scoped(Effect.gen(function*() {
        const mock = yield* MockAnthropic.make([MockAnthropic.slow({ deltas: 1000, interval: "50 millis" })])
        const response = yield* messages(mock, cliBody("forever"))
        yield* mock.awaitRequests((log) => log.length === 1)
        return { url: mock.url, inflight: response }
      })).pipe(Effect.timeout("5 seconds"))
      const body = yield* Effect.exit(Effect.tryPromise(() => inflight.text()))
      assert.isTrue(Exit.isFailure(body), "the in-flight stream is cut when the scope closes")
      const after = yield* Effect.exit(Effect.tryPromise(() => fetch(`${url}/v1/messages`)))
      assert.isTrue(Exit.isFailure(after), "nothing listens after release")
    }))

  it.live("offlineEnv keeps the CLI offline and inside the given home", () =>
    Effect.sync(() => {
      const env = MockAnthropic.offlineEnv({ baseUrl: "http://127.0.0.1:1234", home: "/tmp/h" })
      assert.strictEqual(env.ANTHROPIC_BASE_URL, "http://127.0.0.1:1234")
      assert.strictEqual(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, "1")
      assert.strictEqual(env.CLAUDE_CONFIG_DIR, "/tmp/h/.claude")
      assert.strictEqual(env.TMPDIR, "/tmp/h/tmp")
      assert.strictEqual(env.CLAUDE_CODE_MAX_RETRIES, "0")
      assert.strictEqual(env.ENABLE_TOOL_SEARCH, "false")
    }))

  it.live("offlineHome makes the directories offlineEnv points into, and removes them with its scope", () =>
    Effect.gen(function*() {
      const made = yield* Effect.scoped(Effect.gen(function*() {
        const offline = yield* MockAnthropic.offlineHome({ baseUrl: "http://127.0.0.1:1234", prefix: "tether-oh-" })
        assert.isTrue(Path.basename(offline.home).startsWith("tether-oh-"))
        assert.deepStrictEqual(
          offline.env,
          MockAnthropic.offlineEnv({ baseUrl: "http://127.0.0.1:1234", home: offline.home })
        )
        assert.strictEqual(offline.cwd, Path.join(offline.home, "work"))
        for (
          const dir of [offline.env.CLAUDE_CONFIG_DIR, offline.env.TMPDIR, offline.env.XDG_RUNTIME_DIR, offline.cwd]
        ) {
          assert.isTrue(Fs.statSync(dir).isDirectory(), dir)
        }
        return offline
      }))
      assert.isFalse(Fs.existsSync(made.home), "the home is removed when the scope closes")
    }))
})

layer(MockAnthropic.layer([MockAnthropic.text("from the layer")]), { excludeTestServices: true })(
  "MockAnthropic.layer",
  (it) => {
    it.effect("provides a running server", () =>
      Effect.gen(function*() {
        const mock = yield* MockAnthropic.MockAnthropic
        const body = yield* messages(mock, cliBody("x", { stream: false })).pipe(Effect.flatMap(json))
        assert.deepStrictEqual(body.content, [{ type: "text", text: "from the layer" }])
        assert.match(mock.url, /^http:\/\/127\.0\.0\.1:\d+$/)
      }))
  }
)
