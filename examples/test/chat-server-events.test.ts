/**
 * What an SSE client of the chat server (examples/src/chat-server.ts, on its simulated CLI) receives: the session's
 * normalized events, never the CLI's raw frames (the `initialize` answer carries the account), unless it asks for
 * them with `?raw=1`. And the server serving an ACP agent (Gemini conversations, on the simulated ACP agent): turns,
 * and a tool use deferred to the client through the permissions route.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import * as Net from "node:net"
import * as Path from "node:path"
import { start } from "./support/Programs.ts"

const server = Path.resolve(import.meta.dirname, "..", "src", "chat-server.ts")

const freePort = Effect.callback<number>((resume) => {
  const probe = Net.createServer()
  probe.listen(0, "127.0.0.1", () => {
    const address = probe.address() as Net.AddressInfo
    probe.close(() => resume(Effect.succeed(address.port)))
  })
})

const request = (url: string, init?: RequestInit) =>
  Effect.tryPromise(() =>
    fetch(url, init).then(async (response) => ({ status: response.status, body: await response.text() }))
  )

interface Received {
  readonly event: string
  readonly data: unknown
}

/** Reads a server-sent event stream to its end. */
const readEvents = (url: string) =>
  Effect.tryPromise(async () => {
    const response = await fetch(url)
    const text = await response.text()
    return text.split("\n\n").flatMap((block): Array<Received> => {
      const event = /^event: (.*)$/m.exec(block)?.[1]
      const data = /^data: (.*)$/m.exec(block)?.[1]
      return event === undefined || data === undefined ? [] : [{ event, data: JSON.parse(data) }]
    })
  })

/** Every key anywhere in a JSON value. */
const keys = (value: unknown): Array<string> =>
  Array.isArray(value)
    ? value.flatMap(keys)
    : typeof value === "object" && value !== null
    ? Object.entries(value).flatMap(([key, v]) => [key, ...keys(v)])
    : []

const tally = (events: ReadonlyArray<Received>) => {
  const counts: Record<string, number> = {}
  for (const { event } of events) counts[event] = (counts[event] ?? 0) + 1
  return counts
}

/** Starts the chat server on a free port, with `env`; its base URL once it listens. */
const startServer = (env: Readonly<Record<string, string>> = {}) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const base = `http://127.0.0.1:${port}`
    const program = yield* start(server, [], { PORT: String(port), ...env })
    // Until it listens (a few seconds: Node loads the workspace's TypeScript sources).
    yield* request(`${base}/conversations`).pipe(
      Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 300 }),
      Effect.catch(() => Effect.sync(() => assert.fail(`the chat server did not start\n${program.stderr()}`)))
    )
    return base
  })

/** Reads the conversation's events from the start, ending the stream by evicting the conversation. */
const eventsUntilEvicted = (base: string, id: string) =>
  Effect.map(
    Effect.all([
      readEvents(`${base}/conversations/${id}/events?from=start`),
      Effect.sleep("500 millis").pipe(
        Effect.andThen(request(`${base}/conversations/${id}?force=1`, { method: "DELETE" }))
      )
    ], { concurrency: "unbounded" }),
    ([events]) => events
  )

describe("examples/src/chat-server.ts", () => {
  it.live(
    "streams normalized events to SSE clients, and the CLI's raw frames only to those that ask",
    () =>
      Effect.gen(function*() {
        const base = yield* startServer()
        const sent = yield* request(`${base}/conversations/demo/messages`, {
          method: "POST",
          body: JSON.stringify({ text: "hello there", wait: true })
        })
        assert.strictEqual(sent.status, 200, sent.body)

        // Both clients read the log from its start; the eviction ends their streams.
        const [normal, raw] = yield* Effect.all([
          readEvents(`${base}/conversations/demo/events?from=start`),
          readEvents(`${base}/conversations/demo/events?from=start&raw=1`),
          Effect.sleep("500 millis").pipe(
            Effect.andThen(request(`${base}/conversations/demo?force=1`, { method: "DELETE" }))
          )
        ], { concurrency: "unbounded" })

        const normalCounts = tally(normal)
        const rawCounts = tally(raw)
        // The raw stream has every event: the session's and the CLI's frames (the initialize answer among them).
        assert.isAbove(rawCounts.Frame ?? 0, 0, JSON.stringify(rawCounts))
        assert.include(keys(raw.map((r) => r.data)), "raw")
        assert.include(keys(raw.map((r) => r.data)), "account")
        // The default stream: the same normalized events, no frame, no raw payload, nothing of the account.
        assert.notProperty(normalCounts, "Frame")
        assert.notInclude(keys(normal.map((r) => r.data)), "raw")
        assert.notInclude(keys(normal.map((r) => r.data)), "account")
        const { Frame: frames, ...rawNormalized } = rawCounts
        assert.deepStrictEqual(normalCounts, rawNormalized)
        assert.isAbove(normalCounts.TextDelta ?? 0, 0)
        assert.strictEqual(normalCounts.TurnCompleted, 1)
        assert.strictEqual(normalCounts.end, 1)
        const completed = normal.find((r) => r.event === "TurnCompleted")!.data as {
          readonly result: { readonly text: string }
        }
        assert.include(completed.result.text, "hello there")
        assert.isAbove(frames!, 0)
      }),
    60_000
  )

  it.live(
    "serves an ACP agent: a Gemini conversation's turns, and its tool use deferred to the client",
    () =>
      Effect.gen(function*() {
        // New conversations run Gemini CLI (an AcpSession of the gemini preset), on the simulated ACP agent.
        const base = yield* startServer({ TETHER_PROVIDER: "gemini" })
        const messages = `${base}/conversations/g/messages`
        const hello = yield* request(messages, { method: "POST", body: JSON.stringify({ text: "hello", wait: true }) })
        assert.strictEqual(hello.status, 200, hello.body)
        assert.strictEqual(JSON.parse(hello.body).text, "You said: hello")

        const deploy = yield* request(messages, { method: "POST", body: JSON.stringify({ text: "please deploy" }) })
        assert.strictEqual(deploy.status, 202, deploy.body)
        // The agent's `session/request_permission`, waiting for the client (the server decides nothing).
        const pending = yield* request(`${base}/conversations/g/permissions`).pipe(
          Effect.map((response) => JSON.parse(response.body) as ReadonlyArray<Record<string, any>>),
          Effect.repeat({
            schedule: Schedule.spaced("50 millis"),
            until: (requests) => requests.length > 0,
            times: 200
          })
        )
        assert.strictEqual(pending.length, 1)
        // An ACP tool call, named by its kind (Claude's would be its `Bash` tool).
        assert.strictEqual(pending[0]!.toolName, "execute")
        assert.deepStrictEqual(pending[0]!.input, { command: "make deploy" })
        const answered = yield* request(`${base}/conversations/g/permissions/${pending[0]!.requestId}`, {
          method: "POST",
          body: JSON.stringify({ behavior: "allow" })
        })
        assert.strictEqual(answered.status, 204, answered.body)
        // A conversation keeps its provider: Claude for it now is a conflict.
        const conflict = yield* request(messages, {
          method: "POST",
          body: JSON.stringify({ text: "hi", provider: "claude" })
        })
        assert.strictEqual(conflict.status, 409, conflict.body)
        assert.strictEqual(JSON.parse(conflict.body).error, "SessionConflict")
        yield* request(`${base}/conversations/g`).pipe(
          Effect.map((response) => JSON.parse(response.body) as { readonly turnsInFlight: number }),
          Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (s) => s.turnsInFlight === 0, times: 200 })
        )

        const events = yield* eventsUntilEvicted(base, "g")
        const counts = tally(events)
        assert.strictEqual(counts.TurnCompleted, 2, JSON.stringify(counts))
        assert.strictEqual(counts.PermissionRequested, 1)
        assert.strictEqual(counts.PermissionResolved, 1)
        assert.notProperty(counts, "Frame")
        assert.notInclude(keys(events.map((r) => r.data)), "raw")
        const results = events.filter((r) => r.event === "TurnCompleted").map((r) =>
          (r.data as { readonly result: { readonly text: string; readonly stopReason: string } }).result
        )
        // ACP's end of a turn: the prompt's answer, `end_turn`.
        assert.deepStrictEqual(results.map((result) => result.stopReason), ["end_turn", "end_turn"])
        assert.include(results[1]!.text, "v1.2.3 is live")
      }),
    60_000
  )
})
