import { assert, describe, it } from "@effect/vitest"
import { CodexOptions } from "@tether/codex"
import { Effect, Exit, Fiber, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MockOpenAI from "../src/MockOpenAI.ts"

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

const userMessage = (text: string) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })

/** A body shaped like Codex 0.171's: developer messages, an environment context, the prompt, tools. */
const codexBody = (prompt: string, extra: ReadonlyArray<unknown> = []) => ({
  model: "gpt-5.5",
  instructions: "You are Codex",
  stream: true,
  store: false,
  tool_choice: "auto",
  parallel_tool_calls: true,
  tools: [
    { type: "function", name: "exec_command", parameters: { type: "object" } },
    { type: "custom", name: "apply_patch", format: { type: "grammar" } },
    { type: "web_search" }
  ],
  input: [
    { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions instructions>…" }] },
    userMessage("<environment_context>\n  <cwd>/home/user/project</cwd>\n</environment_context>"),
    userMessage(prompt),
    ...extra
  ]
})

const post = (url: string, body: unknown, init?: RequestInit) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer sk-mock" },
      body: typeof body === "string" ? body : JSON.stringify(body),
      ...init
    })
  )

const responses = (mock: MockOpenAI.MockOpenAI, body: unknown) => post(`${mock.url}/responses`, body)

const events = (response: Response) => Effect.promise(() => response.text()).pipe(Effect.map(parseSse))

const json = (response: Response) => Effect.promise(() => response.json() as Promise<Record<string, any>>)

const deltas = (sse: ReadonlyArray<SseEvent>) =>
  sse.filter((e) => e.event === "response.output_text.delta").map((e) => e.data.delta as string)

const doneItems = (sse: ReadonlyArray<SseEvent>) =>
  sse.filter((e) => e.event === "response.output_item.done").map((e) => e.data.item)

describe("MockOpenAI", () => {
  it.live("streams a text reply as the Responses API's SSE events that codex accepts", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.text("Hello there, host", { chunks: 3 })])
      assert.match(mock.url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/)
      const response = yield* responses(mock, codexBody("hi"))
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
      const sse = yield* events(response)
      assert.deepStrictEqual(sse.map((e) => e.event), [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed"
      ])
      for (const e of sse) assert.strictEqual(e.data.type, e.event)
      const added = sse[1].data.item
      assert.deepStrictEqual([added.type, added.role, added.status, added.content], [
        "message",
        "assistant",
        "in_progress",
        []
      ])
      assert.isTrue(added.id.startsWith("msg_mock"))
      for (const delta of sse.slice(2, 5)) {
        assert.strictEqual(delta.data.item_id, added.id)
        assert.deepStrictEqual([delta.data.output_index, delta.data.content_index], [0, 0])
      }
      assert.strictEqual(deltas(sse).join(""), "Hello there, host")
      assert.deepStrictEqual(sse[5].data.item.content, [
        { type: "output_text", text: "Hello there, host", annotations: [] }
      ])
      const completed = sse[6].data.response
      assert.strictEqual(completed.status, "completed")
      assert.strictEqual(completed.id, sse[0].data.response.id)
      assert.isAbove(completed.usage.input_tokens, 0)
      assert.strictEqual(completed.usage.output_tokens, 3)
      assert.strictEqual(completed.usage.total_tokens, completed.usage.input_tokens + 3)
    }))

  it.live("an exec_command call, then an echo of its function_call_output", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.execCommand("touch x", { preamble: "Making x." })])
      const sse = yield* responses(mock, codexBody("make a file")).pipe(Effect.flatMap(events))
      const items = doneItems(sse)
      assert.deepStrictEqual(items.map((item) => item.type), ["message", "function_call"])
      assert.deepStrictEqual(deltas(sse), ["Making x."])
      const call = items[1]
      assert.strictEqual(call.name, "exec_command")
      assert.isTrue(call.call_id.startsWith("call_mock"))
      assert.deepStrictEqual(JSON.parse(call.arguments), { cmd: "touch x", yield_time_ms: 30_000 })
      assert.strictEqual(sse.at(-1)!.event, "response.completed")

      const follow = yield* responses(
        mock,
        codexBody("make a file", [
          { type: "function_call", call_id: call.call_id, name: "exec_command", arguments: call.arguments },
          { type: "function_call_output", call_id: call.call_id, output: "Process exited with code 0" }
        ])
      ).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltas(follow), ["Tool said: Process exited with code 0"])
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((e) => e.reply), ["FunctionCall", "Echo"])
      assert.deepStrictEqual(
        Option.getOrThrow(log[1].request).toolOutput,
        Option.some({ kind: "function", callId: call.call_id, output: "Process exited with code 0" })
      )
    }))

  it.live("an escalating exec_command asks for require_escalated with the justification", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([
        MockOpenAI.execCommand("touch /elsewhere/x", { escalate: "it writes outside", workdir: "/w", callId: "c1" })
      ])
      const call = doneItems(yield* responses(mock, codexBody("go")).pipe(Effect.flatMap(events)))[0]
      assert.strictEqual(call.call_id, "c1")
      assert.deepStrictEqual(JSON.parse(call.arguments), {
        cmd: "touch /elsewhere/x",
        workdir: "/w",
        yield_time_ms: 30_000,
        sandbox_permissions: "require_escalated",
        justification: "it writes outside"
      })
    }))

  it.live("apply_patch is a custom_tool_call whose input is the patch; its output is echoed", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.applyPatch({ addFile: "notes.txt", contents: "one\ntwo\n" })])
      const call = doneItems(yield* responses(mock, codexBody("patch it")).pipe(Effect.flatMap(events)))[0]
      assert.strictEqual(call.type, "custom_tool_call")
      assert.strictEqual(call.name, "apply_patch")
      assert.strictEqual(call.input, "*** Begin Patch\n*** Add File: notes.txt\n+one\n+two\n*** End Patch\n")
      const follow = yield* responses(
        mock,
        codexBody("patch it", [
          { type: "custom_tool_call", call_id: call.call_id, name: "apply_patch", input: call.input },
          { type: "custom_tool_call_output", call_id: call.call_id, output: "Success. Updated: A notes.txt" }
        ])
      ).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltas(follow), ["Tool said: Success. Updated: A notes.txt"])
      const request = Option.getOrThrow((yield* mock.requests)[1].request)
      assert.strictEqual(Option.getOrThrow(request.toolOutput).kind, "custom")
    }))

  it.live("API errors carry the status and the OpenAI error body; retry-after when asked", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [number, string, string | null]> = [
        [400, "invalid_request_error", null],
        [429, "requests", "rate_limit_exceeded"],
        [500, "server_error", null],
        [503, "server_error", null]
      ]
      const mock = yield* MockOpenAI.make((request) =>
        MockOpenAI.apiError(Number(request.prompt), {
          message: `nope ${request.prompt}`,
          retryAfter: request.prompt === "429" ? 7 : undefined
        })
      )
      for (const [status, type, code] of cases) {
        const response = yield* responses(mock, codexBody(String(status)))
        assert.strictEqual(response.status, status)
        assert.strictEqual(response.headers.get("retry-after"), status === 429 ? "7" : null)
        assert.deepStrictEqual((yield* json(response)).error, { message: `nope ${status}`, type, param: null, code })
      }
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((e) => [e.reply, e.status]), cases.map(([status]) => ["ApiError", status]))
    }))

  it.live("in a list script an error answers every retry of the same call; attempts: 1 only the first", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([
        MockOpenAI.apiError(500),
        MockOpenAI.apiError(500, { attempts: 1 }),
        MockOpenAI.text("recovered")
      ])
      const statuses: Array<number> = []
      for (let attempt = 0; attempt < 3; attempt++) statuses.push((yield* responses(mock, codexBody("first"))).status)
      assert.deepStrictEqual(statuses, [500, 500, 500])
      assert.strictEqual((yield* responses(mock, codexBody("second"))).status, 500)
      const retry = yield* responses(mock, codexBody("second")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltas(retry), ["recovered"])
    }))

  it.live("a dropped stream ends without response.completed; with attempts: 1 the retry gets the next reply", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.drop({ deltas: 2, attempts: 1 }), MockOpenAI.text("whole")])
      const dropped = yield* responses(mock, codexBody("go")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(dropped.map((e) => e.event), [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta"
      ])
      const retry = yield* responses(mock, codexBody("go")).pipe(Effect.flatMap(events))
      assert.deepStrictEqual(deltas(retry), ["whole"])
      assert.deepStrictEqual((yield* mock.requests).map((e) => [e.reply, e.outcome]), [
        ["Drop", "completed"],
        ["Text", "completed"]
      ])
    }))

  it.live("a function script sees the parsed request: the prompt without codex's context blocks", () =>
    Effect.gen(function*() {
      const seen: Array<MockOpenAI.ResponsesRequest> = []
      const mock = yield* MockOpenAI.make((request) => {
        seen.push(request)
        return MockOpenAI.text(`#${request.index} ${request.prompt}`)
      })
      const first = yield* responses(mock, codexBody("one")).pipe(Effect.flatMap(events))
      const second = yield* responses(
        mock,
        codexBody("one", [
          { type: "message", role: "assistant", content: [{ type: "output_text", text: "#0 one" }] },
          userMessage("<turn_aborted>\nThe user interrupted the previous turn on purpose.\n</turn_aborted>"),
          userMessage("two")
        ])
      ).pipe(Effect.flatMap(events))
      assert.deepStrictEqual([deltas(first), deltas(second)], [["#0 one"], ["#1 two"]])
      assert.deepStrictEqual(seen[1].prompts, ["one", "two"])
      assert.deepStrictEqual(seen[0].toolNames, ["exec_command", "apply_patch", "web_search"])
      assert.strictEqual(seen[0].model, "gpt-5.5")
      assert.isTrue(seen[0].stream)
      assert.isTrue(Option.isNone(seen[0].toolOutput))
    }))

  it.live("markers choose the reply from a tag at the start of the prompt", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make(MockOpenAI.markers())
      const first = (prompt: string) =>
        responses(mock, codexBody(prompt)).pipe(
          Effect.flatMap((response) =>
            response.status === 200
              ? Effect.map(events(response), (sse) => doneItems(sse)[0] ?? sse.map((e) => e.event))
              : Effect.succeed(response.status)
          )
        )
      assert.deepStrictEqual(JSON.parse((yield* first("[exec] touch a")).arguments), {
        cmd: "touch a",
        yield_time_ms: 30_000
      })
      assert.strictEqual(
        JSON.parse((yield* first("[escalate] touch b")).arguments).sandbox_permissions,
        "require_escalated"
      )
      assert.strictEqual(
        (yield* first("[patch p.txt] hi")).input,
        "*** Begin Patch\n*** Add File: p.txt\n+hi\n*** End Patch\n"
      )
      assert.strictEqual(yield* first("[error 503] x"), 503)
      assert.strictEqual(yield* first("[error 503] x"), 503)
      assert.strictEqual(yield* first("[error 500 once] y"), 500)
      assert.strictEqual(
        (yield* first("[error 500 once] y")).content[0].text,
        "Hello from the mock: [error 500 once] y"
      )
      assert.notInclude(yield* first("[drop once] z"), "response.completed")
      assert.strictEqual((yield* first("[chunks 2] hey")).content[0].text, "Hello from the mock: [chunks 2] hey")
      assert.deepStrictEqual(
        (yield* mock.requests).map((e) => e.reply),
        ["FunctionCall", "FunctionCall", "CustomToolCall", "ApiError", "ApiError", "ApiError", "Text", "Drop", "Text"]
      )
    }))

  it.live("a function script that throws gets the client a 500 that says so", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make(() => {
        throw new Error("no reply for you")
      })
      const response = yield* responses(mock, codexBody("x"))
      assert.strictEqual(response.status, 500)
      assert.include((yield* json(response)).error.message, "no reply for you")
      assert.deepStrictEqual((yield* mock.requests).map((e) => e.reply), ["ScriptError"])
    }))

  it.live("anything but POST /v1/responses is a JSON 404, a non-JSON body is a 400; the log has both", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make()
      const models = yield* Effect.promise(() => fetch(`${mock.url}/models`))
      assert.strictEqual(models.status, 404)
      assert.strictEqual((yield* json(models)).error.code, "not_found")
      const get = yield* Effect.promise(() => fetch(`${mock.url}/responses?x=1`))
      assert.strictEqual(get.status, 404)
      const bad = yield* post(`${mock.url}/responses`, "{not json")
      assert.strictEqual(bad.status, 400)
      assert.strictEqual((yield* json(bad)).error.type, "invalid_request_error")
      const log = yield* mock.requests
      assert.deepStrictEqual(log.map((e) => [e.seq, e.method, e.path, e.query, e.reply, e.status]), [
        [0, "GET", "/v1/models", "", "NotFound", 404],
        [1, "GET", "/v1/responses", "?x=1", "NotFound", 404],
        [2, "POST", "/v1/responses", "", "BadRequest", 400]
      ])
      assert.strictEqual(log[2].headers["authorization"], "Bearer sk-mock")
    }))

  it.live("a slow stream runs to the end when the client stays", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.slow({ deltas: 5, interval: "20 millis" })])
      const started = Date.now()
      const sse = yield* responses(mock, codexBody("slowly")).pipe(Effect.flatMap(events))
      assert.isAtLeast(Date.now() - started, 4 * 20 - 5)
      assert.deepStrictEqual(deltas(sse), ["w0 ", "w1 ", "w2 ", "w3 ", "w4 "])
      const log = yield* mock.requests
      assert.deepStrictEqual([log[0].outcome, log[0].deltasSent], ["completed", 5])
    }))

  it.live("a slow stream stops when the client disconnects", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.slow({ deltas: 200, interval: "20 millis" })])
      // A reader interrupted mid-stream aborts the fetch, which hangs up as codex does on turn/interrupt.
      const reader = yield* Effect.forkChild(Effect.promise(async (signal) => {
        const response = await fetch(`${mock.url}/responses`, {
          method: "POST",
          body: JSON.stringify(codexBody("slowly")),
          signal
        })
        const body = response.body!.getReader()
        for (;;) if ((await body.read()).done) return
      }))
      yield* mock.awaitRequests((log) => log.length === 1 && log[0].deltasSent >= 3).pipe(Effect.timeout("5 seconds"))
      yield* Fiber.interrupt(reader)
      const log = yield* mock.awaitRequests((log) => log.length === 1 && log[0].outcome !== "pending").pipe(
        Effect.timeout("5 seconds")
      )
      assert.strictEqual(log[0].outcome, "client-closed")
      assert.isBelow(log[0].deltasSent, 100)
      yield* Effect.sleep("150 millis")
      assert.strictEqual((yield* mock.requests)[0].deltasSent, log[0].deltasSent, "nothing is sent afterwards")
    }))

  it.live("a stalled stream sends its headers, then nothing until the client goes away", () =>
    Effect.gen(function*() {
      const mock = yield* MockOpenAI.make([MockOpenAI.stall])
      const received: Array<string> = []
      const reader = yield* Effect.forkChild(Effect.promise(async (signal) => {
        const response = await fetch(`${mock.url}/responses`, {
          method: "POST",
          body: JSON.stringify(codexBody("hang")),
          signal
        })
        received.push(`${response.status} ${response.headers.get("content-type")}`)
        const body = response.body!.getReader()
        for (;;) {
          const chunk = await body.read()
          if (chunk.done) return
          received.push(new TextDecoder().decode(chunk.value))
        }
      }))
      yield* mock.awaitRequests((log) => log.length === 1).pipe(Effect.timeout("5 seconds"))
      yield* Effect.sleep("300 millis")
      assert.deepStrictEqual(received, ["200 text/event-stream"], "headers, and not one event")
      assert.strictEqual((yield* mock.requests)[0].outcome, "pending")
      yield* Fiber.interrupt(reader)
      const log = yield* mock.awaitRequests((log) => log[0]?.outcome !== "pending").pipe(Effect.timeout("5 seconds"))
      assert.deepStrictEqual([log[0].reply, log[0].outcome], ["Stall", "client-closed"])
    }))

  it.live("closing the scope stops the server, even with a stalled stream in flight", () =>
    Effect.gen(function*() {
      const { inflight, url } = yield* Effect.scoped(Effect.gen(function*() {
        const mock = yield* MockOpenAI.make([MockOpenAI.stall])
        const response = yield* responses(mock, codexBody("forever"))
        return { url: mock.url, inflight: response }
      })).pipe(Effect.timeout("5 seconds"))
      const body = yield* Effect.exit(Effect.tryPromise(() => inflight.text()))
      assert.isTrue(Exit.isFailure(body), "the in-flight stream is cut when the scope closes")
      const after = yield* Effect.exit(Effect.tryPromise(() => fetch(`${url}/responses`)))
      assert.isTrue(Exit.isFailure(after), "nothing listens after release")
    }))

  it.live("offlineHome: folders for CODEX_HOME, TMPDIR and the cwd, session options offline, removed with its scope", () =>
    Effect.gen(function*() {
      const made = yield* Effect.scoped(Effect.gen(function*() {
        const offline = yield* MockOpenAI.offlineHome({ baseUrl: "http://127.0.0.1:1234/v1", prefix: "tether-oh-" })
        assert.isTrue(Path.basename(offline.home).startsWith("tether-oh-"))
        assert.deepStrictEqual(
          [offline.codexHome, offline.tmpDir, offline.cwd],
          ["codex", "tmp", "work"].map((dir) => Path.join(offline.home, dir))
        )
        for (const dir of [offline.codexHome, offline.tmpDir, offline.cwd]) {
          assert.isTrue(Fs.statSync(dir).isDirectory(), dir)
        }
        const options = offline.options
        assert.deepStrictEqual(
          [options.codexHome, options.tmpDir, options.cwd],
          [offline.codexHome, offline.tmpDir, offline.cwd]
        )
        assert.strictEqual(options.plugins, false)
        assert.strictEqual(options.env?.mode, "clean")
        assert.strictEqual(options.env?.set?.["HOME"], offline.home)
        assert.strictEqual(options.provider?.baseUrl, "http://127.0.0.1:1234/v1")
        assert.strictEqual(Redacted.value(options.provider!.apiKey!), "sk-mock")
        const overrides = Object.fromEntries(CodexOptions.toOverrides(options))
        assert.deepStrictEqual(overrides["model_providers.mock"], {
          name: "MockOpenAI",
          base_url: "http://127.0.0.1:1234/v1",
          wire_api: "responses",
          env_key: "TETHER_CODEX_API_KEY",
          request_max_retries: 0,
          stream_max_retries: 0
        })
        assert.strictEqual(overrides["features.plugins"], false)
        return offline
      }))
      assert.isFalse(Fs.existsSync(made.home), "the home is removed when the scope closes")
    }))
})
