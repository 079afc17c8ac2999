import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MockGemini from "../src/MockGemini.ts"

// Real sockets and real time are the point of this module, so these tests run `it.live`.

type Chunk = Record<string, any>

/** The SSE framing of `:streamGenerateContent?alt=sse`: `data: <json>` events separated by a blank line. */
const parseSse = (raw: string): ReadonlyArray<Chunk> =>
  raw.split(/\r?\n\r?\n/).filter((frame) => frame.trim() !== "").map((frame) => {
    assert.isTrue(frame.startsWith("data: "), `an SSE data event: ${frame}`)
    return JSON.parse(frame.slice("data: ".length))
  })

const sessionContext = "<session_context>\nThis is the Gemini CLI. We are setting up the context.\n</session_context>"

/** A body shaped like the CLI's model call: the session context and the prompt in one user content, tools. */
const cliBody = (prompt: string) => ({
  contents: [{ role: "user", parts: [{ text: sessionContext }, { text: prompt }] }],
  systemInstruction: { parts: [{ text: "You are an interactive CLI agent" }] },
  tools: [{ functionDeclarations: [{ name: "run_shell_command" }, { name: "read_file" }] }],
  generationConfig: { temperature: 1, thinkingConfig: { includeThoughts: true } }
})

/** The CLI's model router request: JSON asked for with `complexity_reasoning` and `complexity_score`. */
const routerBody = (prompt: string) => ({
  contents: [{ role: "user", parts: [{ text: sessionContext }] }, { role: "user", parts: [{ text: prompt }] }],
  systemInstruction: { parts: [{ text: "You are a specialized Task Routing AI." }] },
  generationConfig: {
    responseMimeType: "application/json",
    responseJsonSchema: {
      type: "OBJECT",
      properties: { complexity_reasoning: { type: "STRING" }, complexity_score: { type: "INTEGER" } },
      required: ["complexity_reasoning", "complexity_score"]
    }
  }
})

/** The call after a function call: the model's call and the CLI's `functionResponse`. */
const functionResponseBody = (output: string) => ({
  ...cliBody("run it"),
  contents: [
    ...cliBody("run it").contents,
    { role: "model", parts: [{ functionCall: { id: "c1", name: "run_shell_command", args: { command: "ls" } } }] },
    {
      role: "user",
      parts: [{ functionResponse: { id: "c1", name: "run_shell_command", response: { output } } }]
    }
  ]
})

const post = (url: string, body: unknown, init?: RequestInit) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": "mock" },
      body: typeof body === "string" ? body : JSON.stringify(body),
      ...init
    })
  )

const stream = (mock: MockGemini.MockGemini, body: unknown, model = "gemini-2.5-flash") =>
  post(`${mock.url}/v1beta/models/${model}:streamGenerateContent?alt=sse`, body)

const generate = (mock: MockGemini.MockGemini, body: unknown, model = "gemini-2.5-flash-lite") =>
  post(`${mock.url}/v1beta/models/${model}:generateContent`, body)

const chunks = (response: Response) => Effect.promise(() => response.text()).pipe(Effect.map(parseSse))

const json = (response: Response) => Effect.promise(() => response.json() as Promise<Record<string, any>>)

const partsOf = (all: ReadonlyArray<Chunk>) => all.flatMap((chunk) => chunk.candidates[0].content.parts)

const textOf = (all: ReadonlyArray<Chunk>) =>
  partsOf(all).filter((part) => part.thought !== true && typeof part.text === "string").map((part) => part.text)

describe("MockGemini", () => {
  it.live("streams a text reply as SSE chunks of GenerateContentResponse, the last with finishReason and usage", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.text("Hello there, host", { chunks: 3 })])
      const response = yield* stream(mock, cliBody("hi"))
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
      const all = yield* chunks(response)
      assert.strictEqual(all.length, 3)
      assert.deepStrictEqual(textOf(all), ["Hello ", "there,", " host"])
      assert.deepStrictEqual(all.map((chunk) => chunk.candidates[0].finishReason), [undefined, undefined, "STOP"])
      for (const chunk of all) {
        assert.strictEqual(chunk.candidates[0].content.role, "model")
        assert.strictEqual(chunk.modelVersion, "gemini-2.5-flash")
        assert.strictEqual(chunk.responseId, all[0].responseId)
      }
      const usage = all[2].usageMetadata
      assert.isAbove(usage.promptTokenCount, 0)
      assert.strictEqual(usage.candidatesTokenCount, 3)
      assert.strictEqual(usage.totalTokenCount, usage.promptTokenCount + 3)
    }))

  it.live("a thought comes first, as a thought part", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.text("done", { thought: "**Planning** the answer" })])
      const all = yield* stream(mock, cliBody("hi")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(partsOf(all), [{ text: "**Planning** the answer", thought: true }, { text: "done" }])
      assert.strictEqual(all.at(-1)?.usageMetadata.thoughtsTokenCount, 1)
    }))

  it.live("the router's request gets the route as JSON text and does not consume the script", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.text("scripted")], {
        route: { score: 90, reasoning: "hard" }
      })
      const routed = yield* generate(mock, routerBody("hi"))
      assert.strictEqual(routed.status, 200)
      const body = yield* json(routed)
      assert.deepStrictEqual(JSON.parse(body.candidates[0].content.parts[0].text), {
        complexity_reasoning: "hard",
        complexity_score: 90
      })
      assert.strictEqual(body.candidates[0].finishReason, "STOP")
      const all = yield* stream(mock, cliBody("hi")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(all), ["scripted"])
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((entry) => entry.reply), ["Router", "Text"])
      assert.isTrue(Option.isNone(log[0].request))
      assert.strictEqual(Option.getOrThrow(log[1].request).index, 0, "the router is not counted among model calls")
    }))

  it.live("the default route is a simple request", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make()
      const body = yield* generate(mock, routerBody("hi")).pipe(Effect.flatMap(json))
      assert.deepStrictEqual(JSON.parse(body.candidates[0].content.parts[0].text), {
        complexity_reasoning: MockGemini.simpleRoute.reasoning,
        complexity_score: MockGemini.simpleRoute.score
      })
    }))

  it.live("echoes the prompt, skipping the session context, and a tool's output after a function call", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make()
      const first = yield* stream(mock, cliBody("What is 2+2?")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(first), ["Hello from mock #1: What is 2+2?"])
      const second = yield* stream(mock, functionResponseBody("Output: 4")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(second), ["Tool said: Output: 4"])
    }))

  it.live("a function call streams its thought, its preamble, then the functionCall part", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([
        MockGemini.functionCall("write_file", { file_path: "x.txt", content: "hi" }, {
          preamble: "Writing it.",
          thought: "**Writing** a file"
        }),
        MockGemini.shell("touch y.txt")
      ])
      const first = yield* stream(mock, cliBody("write")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(partsOf(first), [
        { text: "**Writing** a file", thought: true },
        { text: "Writing it." },
        { functionCall: { name: "write_file", args: { file_path: "x.txt", content: "hi" } } }
      ])
      assert.strictEqual(first.at(-1)?.candidates[0].finishReason, "STOP")
      const second = yield* stream(mock, cliBody("shell")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(partsOf(second), [{
        functionCall: { name: "run_shell_command", args: { command: "touch y.txt", description: "mock command" } }
      }])
    }))

  it.live("a model call that is not the router's, without streaming, gets the scripted reply as one response", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.text("whole", { chunks: 2 })])
      const response = yield* generate(mock, cliBody("hi"), "gemini-2.5-flash")
      const body = yield* json(response)
      assert.deepStrictEqual(body.candidates[0].content.parts, [{ text: "who" }, { text: "le" }])
      assert.strictEqual(body.candidates[0].finishReason, "STOP")
      const log = yield* mock.requests
      assert.isFalse(Option.getOrThrow(log[0].request).stream)
    }))

  it.live("API errors carry the status and the Gemini API error body", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([
        MockGemini.apiError(429),
        MockGemini.apiError(500, { message: "boom" }),
        MockGemini.apiError(400, { errorStatus: "FAILED_PRECONDITION" })
      ])
      const expected = [
        [429, { code: 429, message: "mock 429", status: "RESOURCE_EXHAUSTED" }],
        [500, { code: 500, message: "boom", status: "INTERNAL" }],
        [400, { code: 400, message: "mock 400", status: "FAILED_PRECONDITION" }]
      ] as const
      for (const [i, [status, error]] of expected.entries()) {
        const response = yield* stream(mock, cliBody(`call ${i}`))
        assert.strictEqual(response.status, status)
        assert.deepStrictEqual(yield* json(response), { error })
      }
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((entry) => [entry.reply, entry.status]), [
        ["ApiError", 429],
        ["ApiError", 500],
        ["ApiError", 400]
      ])
    }))

  it.live("in a list script an error answers every retry of the same call; attempts: 1 lets the retry through", () =>
    Effect.gen(function*() {
      const always = yield* MockGemini.make([MockGemini.apiError(503), MockGemini.text("next")])
      const statuses: Array<number> = []
      for (let i = 0; i < 3; i++) statuses.push((yield* stream(always, cliBody("same"))).status)
      assert.deepStrictEqual(statuses, [503, 503, 503])
      const next = yield* stream(always, cliBody("another call")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(next), ["next"])

      const once = yield* MockGemini.make([MockGemini.apiError(429, { attempts: 1 }), MockGemini.text("recovered")])
      assert.strictEqual((yield* stream(once, cliBody("same"))).status, 429)
      const retried = yield* stream(once, cliBody("same")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(retried), ["recovered"])
    }))

  it.live("a function script sees the parsed request", () =>
    Effect.gen(function*() {
      const seen: Array<MockGemini.GenerateRequest> = []
      const mock = yield* MockGemini.make((request) => {
        seen.push(request)
        return MockGemini.text(`model ${request.model}`)
      })
      const all = yield* stream(mock, functionResponseBody("Output: hi"), "gemini-3-flash").pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(all), ["model gemini-3-flash"])
      const [request] = seen
      assert.strictEqual(request.index, 0)
      assert.isTrue(request.stream)
      assert.deepStrictEqual(request.toolNames, ["run_shell_command", "read_file"])
      assert.deepStrictEqual(request.roles, ["user", "model", "user"])
      assert.strictEqual(request.prompt, "", "a content that carries a functionResponse has no prompt")
      assert.deepStrictEqual(
        request.functionResponse,
        Option.some({ name: "run_shell_command", id: Option.some("c1"), output: "Output: hi" })
      )
    }))

  it.live("a function script that throws gets the client a 500 that says so", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make(() => {
        throw new Error("no reply for this")
      })
      const response = yield* stream(mock, cliBody("hi"))
      assert.strictEqual(response.status, 500)
      const body = yield* json(response)
      assert.include(body.error.message, "no reply for this")
      assert.deepStrictEqual((yield* mock.requests).map((entry) => entry.reply), ["ScriptError"])
    }))

  it.live("countTokens answers; an unknown request is a 404 naming the route, recorded as Unknown", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make()
      const counted = yield* post(`${mock.url}/v1beta/models/gemini-2.5-flash:countTokens`, cliBody("hi"))
      assert.strictEqual(counted.status, 200)
      assert.isAbove((yield* json(counted)).totalTokens, 0)
      const unknown = yield* post(`${mock.url}/v1internal:loadCodeAssist`, { metadata: {} })
      assert.strictEqual(unknown.status, 404)
      const error = (yield* json(unknown)).error
      assert.strictEqual(error.code, 404)
      assert.strictEqual(error.status, "NOT_FOUND")
      assert.include(error.message, "POST /v1internal:loadCodeAssist")
      const got = yield* Effect.promise(() => fetch(`${mock.url}/v1beta/models`))
      assert.strictEqual(got.status, 404, "a GET is unknown too")
      const bad = yield* stream(mock, "not json")
      assert.strictEqual(bad.status, 400)
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((entry) => entry.reply), ["CountTokens", "Unknown", "Unknown", "BadRequest"])
      const unknownLog = yield* mock.unknown
      assert.deepStrictEqual(unknownLog.map((entry) => `${entry.method} ${entry.path}`), [
        "POST /v1internal:loadCodeAssist",
        "GET /v1beta/models"
      ])
    }))

  it.live("the request log records the path, the query, the headers, the reply and how it ended", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.text("a")])
      yield* stream(mock, cliBody("first")).pipe(Effect.flatMap(chunks))
      const [entry] = yield* mock.requests
      assert.strictEqual(entry.seq, 0)
      assert.strictEqual(entry.method, "POST")
      assert.strictEqual(entry.path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
      assert.strictEqual(entry.query, "?alt=sse")
      assert.strictEqual(entry.headers["x-goog-api-key"], "mock")
      assert.strictEqual(Option.getOrThrow(entry.request).prompt, "first")
      assert.deepStrictEqual([entry.reply, entry.status, entry.chunksSent, entry.outcome], [
        "Text",
        200,
        1,
        "completed"
      ])
    }))

  it.live("a slow stream stops when the client disconnects", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.slow({ deltas: 200, interval: "20 millis" })])
      // A reader interrupted mid-stream aborts the fetch, which hangs up as the CLI does on session/cancel.
      const reader = yield* Effect.forkChild(Effect.promise(async (signal) => {
        const response = await fetch(`${mock.url}/v1beta/models/m:streamGenerateContent?alt=sse`, {
          method: "POST",
          body: JSON.stringify(cliBody("slowly")),
          signal
        })
        const body = response.body!.getReader()
        for (;;) if ((await body.read()).done) return
      }))
      yield* mock.awaitRequests((log) => log.length === 1 && log[0].chunksSent >= 3).pipe(Effect.timeout("5 seconds"))
      yield* Fiber.interrupt(reader)
      const log = yield* mock.awaitRequests((log) => log.length === 1 && log[0].outcome !== "pending").pipe(
        Effect.timeout("5 seconds")
      )
      assert.strictEqual(log[0].outcome, "client-closed")
      assert.isAtLeast(log[0].chunksSent, 3)
      assert.isBelow(log[0].chunksSent, 100, "well before its 200 chunks")
      yield* Effect.sleep("150 millis")
      assert.strictEqual((yield* mock.requests)[0].chunksSent, log[0].chunksSent, "nothing is sent afterwards")
    }))

  it.live("stall: one piece, then silence; with wait, not even the status line; hanging up ends it", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.stall(), MockGemini.stall({ wait: "1 hour" })])
      // Resolves with the response's headers; interrupting it aborts the request, as an agent's cancel does.
      const answered = (prompt: string) =>
        Effect.forkChild(
          Effect.promise((signal) =>
            fetch(`${mock.url}/v1beta/models/m:streamGenerateContent?alt=sse`, {
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
      yield* mock.awaitRequests((log) => log.length === 1 && log[0].chunksSent === 1).pipe(Effect.timeout(within))
      yield* Effect.sleep("300 millis")
      const [first] = yield* mock.requests
      assert.deepStrictEqual([first.chunksSent, first.outcome], [1, "pending"], "one piece, then nothing")

      const waiting = yield* answered("wait")
      yield* mock.awaitRequests((log) => log.length === 2).pipe(Effect.timeout(within))
      const heard = yield* Effect.raceFirst(
        Fiber.join(waiting).pipe(Effect.as("answered")),
        Effect.sleep("300 millis").pipe(Effect.as("silent"))
      )
      assert.strictEqual(heard, "silent", "no status line before the wait is over")
      yield* Fiber.interrupt(waiting)
      const log = yield* mock.awaitRequests((log) => log[1]?.outcome === "client-closed").pipe(Effect.timeout(within))
      assert.strictEqual(log[1].chunksSent, 0)
    }))

  it.live("a slow stream runs to the end when the client stays", () =>
    Effect.gen(function*() {
      const mock = yield* MockGemini.make([MockGemini.slow({ deltas: 4, interval: "10 millis" })])
      const all = yield* stream(mock, cliBody("slowly")).pipe(Effect.flatMap(chunks))
      assert.deepStrictEqual(textOf(all), ["w0 ", "w1 ", "w2 ", "w3 "])
      const log = yield* mock.requests
      assert.deepStrictEqual([log[0].outcome, log[0].chunksSent], ["completed", 4])
    }))

  it.live("closing the scope stops the server, even with a stream in flight", () =>
    Effect.gen(function*() {
      const { url, inflight } = yield* Effect.scoped(Effect.gen(function*() {
        const mock = yield* MockGemini.make([MockGemini.slow({ deltas: 1000, interval: "50 millis" })])
        const response = yield* stream(mock, cliBody("forever"))
        yield* mock.awaitRequests((log) => log.length === 1)
        return { url: mock.url, inflight: response }
      })).pipe(Effect.timeout("5 seconds"))
      const body = yield* Effect.exit(Effect.tryPromise(() => inflight.text()))
      assert.isTrue(Exit.isFailure(body), "the in-flight stream is cut when the scope closes")
      const after = yield* Effect.exit(Effect.tryPromise(() => fetch(`${url}/v1beta/models`)))
      assert.isTrue(Exit.isFailure(after), "nothing listens after release")
    }))

  it.live("offlineEnv points the CLI at the mock and into the given home", () =>
    Effect.sync(() => {
      const env = MockGemini.offlineEnv({ baseUrl: "http://127.0.0.1:1234", home: "/tmp/h" })
      assert.strictEqual(env.GOOGLE_GEMINI_BASE_URL, "http://127.0.0.1:1234")
      assert.strictEqual(env.GEMINI_CLI_HOME, "/tmp/h")
      assert.strictEqual(env.HOME, "/tmp/h")
      assert.strictEqual(env.TMPDIR, "/tmp/h/tmp")
      assert.strictEqual(env.GEMINI_CLI_NO_RELAUNCH, "true")
      assert.isTrue(Redacted.isRedacted(env.GEMINI_API_KEY), "the key is a Redacted credential")
    }))

  it.live("offlineSettings turn off statistics, telemetry and auto-update, and retries", () =>
    Effect.sync(() => {
      assert.deepStrictEqual(MockGemini.offlineSettings(), {
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
        general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, maxAttempts: 1 }
      })
      assert.strictEqual(MockGemini.offlineSettings({ maxAttempts: 3 }).general.maxAttempts, 3)
    }))

  it.live("offlineHome writes the settings and makes the directories, and removes them with its scope", () =>
    Effect.gen(function*() {
      const made = yield* Effect.scoped(Effect.gen(function*() {
        const offline = yield* MockGemini.offlineHome({ baseUrl: "http://127.0.0.1:1234", prefix: "tether-gh-" })
        assert.isTrue(Path.basename(offline.home).startsWith("tether-gh-"))
        assert.deepStrictEqual(
          offline.env,
          MockGemini.offlineEnv({ baseUrl: "http://127.0.0.1:1234", home: offline.home })
        )
        assert.strictEqual(offline.cwd, Path.join(offline.home, "work"))
        for (const dir of [offline.cwd, offline.env.TMPDIR]) assert.isTrue(Fs.statSync(dir).isDirectory(), dir)
        const settings = JSON.parse(Fs.readFileSync(Path.join(offline.home, ".gemini", "settings.json"), "utf8"))
        assert.deepStrictEqual(settings, MockGemini.offlineSettings())
        return offline
      }))
      assert.isFalse(Fs.existsSync(made.home), "the home is removed when the scope closes")
    }))
})

layer(MockGemini.layer([MockGemini.text("from the layer")]), { excludeTestServices: true })(
  "MockGemini.layer",
  (it) => {
    it.effect("provides a running mock", () =>
      Effect.gen(function*() {
        const mock = yield* MockGemini.MockGemini
        const all = yield* stream(mock, cliBody("hi")).pipe(Effect.flatMap(chunks))
        assert.deepStrictEqual(textOf(all), ["from the layer"])
      }))
  }
)
