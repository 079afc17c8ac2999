/**
 * A local Anthropic Messages API for running the real `claude` CLI offline.
 *
 * `MockAnthropic.make(script)` listens on `127.0.0.1` at an ephemeral port inside a `Scope` and answers the one
 * endpoint the CLI calls (`POST /v1/messages?beta=true`, streaming SSE or JSON), plus
 * `POST /v1/messages/count_tokens`; anything else is a JSON 404. What the "model" says is scripted per test as
 * data: a list of {@link Reply} values consumed in order, or a function from the {@link MessagesRequest} to a
 * reply. Every request is logged ({@link LoggedRequest}) for assertions.
 *
 * Point the CLI at it with {@link offlineEnv}, which carries the variables that keep `claude` from reaching the
 * network (`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` above all), or with {@link offlineHome}, which also makes
 * (and removes) the home that environment points into.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockAnthropic.make([
 *     MockAnthropic.bash("touch x"), // first model call: a Bash tool use
 *     MockAnthropic.text("done") //      second call (with the tool_result): plain text
 *   ])
 *   const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url })
 *   // ... spawn `claude` in `cwd` with `env` as its whole environment, drive a turn ...
 *   const log = yield* mock.requests
 *   return log.map((entry) => entry.reply) // ["ToolUse", "Text"]
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { apiErrorType } from "./internal/apiError.ts"
import * as Json from "./internal/json.ts"
import * as MockServer from "./internal/mockServer.ts"

// ---------------------------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------------------------

/**
 * What the mock model answers to one `POST /v1/messages`.
 *
 * - `Text`: one text block, streamed in `chunks` `text_delta` pieces.
 * - `ToolUse`: an optional text block, then one `tool_use` block whose input is streamed as `input_json_delta`
 *   pieces; `stop_reason` is `"tool_use"`, so the CLI runs the tool (asking the host first when the tool needs
 *   approval) and calls the API again with the `tool_result`.
 * - `Slow`: `deltas` text deltas (`"w0 "`, `"w1 "`, …) `interval` apart. The stream stops as soon as the client
 *   disconnects (the CLI closes the request when it is interrupted), and the log records how far it got.
 * - `ApiError`: an HTTP error with the Messages API error body. The CLI retries some statuses (see
 *   {@link apiError}).
 * - `Echo`: the default: `"Tool said: <content>"` after a `tool_result`, otherwise
 *   `"Hello from mock #<n>: <prompt>"`.
 *
 * Build them with {@link text}, {@link toolUse}, {@link bash}, {@link slow}, {@link apiError} and {@link echo}.
 *
 * @category models
 * @since 0.1.0
 */
export type Reply = Data.TaggedEnum<{
  Text: { readonly text: string; readonly chunks: number }
  ToolUse: {
    readonly name: string
    readonly input: unknown
    /** Text the model "says" before the tool call (empty: no text block). */
    readonly preamble: string
    /** The tool_use id; generated (`toolu_mock…`) when absent. */
    readonly id: Option.Option<string>
  }
  Slow: {
    readonly deltas: number
    readonly interval: Duration.Duration
    /** A pause before the response starts (before its status line): a model that has not answered yet. */
    readonly before: Duration.Duration
  }
  ApiError: {
    readonly status: number
    readonly errorType: string
    readonly message: string
    /** Sent as the `x-should-retry` header when present (the Anthropic SDK honours it). */
    readonly shouldRetry: Option.Option<boolean>
    /**
     * In a list script: how many consecutive attempts of the same model call this reply answers (the CLI's
     * retries resend the same `messages`). `Infinity` (the default) fails the call however often it is retried.
     */
    readonly attempts: number
  }
  Echo: {}
}>

/**
 * Raw constructors and matchers for {@link Reply}; prefer the helpers ({@link text}, {@link toolUse}, …), which
 * fill in the defaults.
 *
 * @category models
 * @since 0.1.0
 */
export const Reply = Data.taggedEnum<Reply>()

/**
 * The kind of a {@link Reply}, plus what the mock answered outside the script (`ScriptError`: a function script
 * threw; the client got a 500 whose message carries the error).
 *
 * @category models
 * @since 0.1.0
 */
export type ReplyKind = Reply["_tag"] | "CountTokens" | "NotFound" | "BadRequest" | "ScriptError"

/**
 * A text reply. `chunks` (default 1) splits the text into that many `text_delta` events.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 *
 * const reply = MockAnthropic.text("Hello there", { chunks: 3 })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const text = (text: string, options?: { readonly chunks?: number | undefined }): Reply =>
  Reply.Text({ text, chunks: Math.max(1, Math.floor(options?.chunks ?? 1)) })

/**
 * A tool call: the model asks the CLI to run `name` with `input`.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 *
 * const reply = MockAnthropic.toolUse("Write", { file_path: "/tmp/x", content: "hi" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolUse = (
  name: string,
  input: unknown,
  options?: { readonly preamble?: string | undefined; readonly id?: string | undefined }
): Reply => Reply.ToolUse({ name, input, preamble: options?.preamble ?? "", id: Option.fromUndefinedOr(options?.id) })

/**
 * A call to a tool of an MCP server, as the model names it: `mcp__<server>__<tool>`. For an in-process server of
 * the host (`ClaudeMcp`), the CLI asks the host's permission, then sends it `tools/call` over `mcp_message`; the
 * tool_result of the next request carries the host's answer. The CLI offers the server's tools in `tools` only with
 * tool search off (`ENABLE_TOOL_SEARCH=false`, as {@link offlineEnv} sets).
 *
 * @category constructors
 * @since 0.1.0
 */
export const mcpTool = (server: string, tool: string, input: unknown): Reply =>
  toolUse(`mcp__${server}__${tool}`, input)

/**
 * The model answers through the `StructuredOutput` tool, which the CLI offers when it was given a JSON Schema
 * (`--json-schema`, a session's `outputSchema`): the CLI checks `value` against the schema and, when it matches,
 * ends the turn with it as the result's `structured_output` (no further model call). A value that does not match
 * comes back as an error tool_result, and the model is asked again (5 attempts).
 *
 * @category constructors
 * @since 0.1.0
 */
export const structuredOutput = (value: unknown): Reply => toolUse("StructuredOutput", value)

/**
 * A Bash tool call. Note that the CLI runs harmless read-only commands (`echo hi`) without asking; a command that
 * writes (`touch x`) makes it send a `can_use_tool` permission request to the host first.
 *
 * @category constructors
 * @since 0.1.0
 */
export const bash = (command: string, options?: { readonly description?: string | undefined }): Reply =>
  toolUse("Bash", { command, description: options?.description ?? "mock command" })

/**
 * A slow text stream: `deltas` pieces (default 50) `interval` apart (default 100 millis). Use it to interrupt a
 * turn mid-stream. The delays run on the `Clock` of the fiber that created the server.
 *
 * @category constructors
 * @since 0.1.0
 */
export const slow = (options?: {
  readonly deltas?: number | undefined
  readonly interval?: Duration.Input | undefined
  /** A pause before the response starts (default none): the model takes that long to answer at all. */
  readonly before?: Duration.Input | undefined
}): Reply =>
  Reply.Slow({
    deltas: Math.max(1, Math.floor(options?.deltas ?? 50)),
    interval: Duration.fromInputUnsafe(options?.interval ?? "100 millis"),
    before: Duration.fromInputUnsafe(options?.before ?? 0)
  })

/**
 * A model that starts answering, then goes silent: one text piece (`"w0 "`) streamed, then nothing for an
 * hour (the connection stays open). The stream stops when the client disconnects. With `wait`, the silence starts
 * before the response does: the client never hears anything.
 *
 * @category constructors
 * @since 0.1.0
 */
export const stall = (options?: { readonly wait?: Duration.Input | undefined }): Reply =>
  slow({ deltas: 2, interval: "1 hour", before: options?.wait })

/**
 * An API error with `status`; the body is `{"type":"error","error":{"type","message"}}` with the error type the
 * real API uses for the status (`overloaded_error` for 529, `rate_limit_error` for 429, …).
 *
 * The CLI retries: 429, 5xx and 529 with backoff up to `CLAUDE_CODE_MAX_RETRIES` times (0 in {@link offlineEnv});
 * 400 is sent three times (2.1.332, whatever the setting). In a list script an error therefore answers every
 * retry of the same call (same `messages`) and the next reply is used for the next call. Pass `attempts: 1` to
 * fail only the first attempt, so that a retry gets the next reply (e.g. to test recovery after `api_retry`).
 * A function script sees each retry as a request of its own.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 *
 * // The first turn fails with "overloaded", the second one gets text.
 * const script = [MockAnthropic.apiError(529), MockAnthropic.text("back again")]
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const apiError = (
  status: number,
  options?: {
    readonly message?: string | undefined
    readonly errorType?: string | undefined
    readonly shouldRetry?: boolean | undefined
    readonly attempts?: number | undefined
  }
): Reply =>
  Reply.ApiError({
    status,
    errorType: options?.errorType ?? apiErrorType(status),
    message: options?.message ?? `mock ${status}`,
    shouldRetry: Option.fromUndefinedOr(options?.shouldRetry),
    attempts: Math.max(1, options?.attempts ?? Infinity)
  })

/**
 * The default reply: `"Tool said: <content>"` after a `tool_result`, otherwise `"Hello from mock #<n>: <prompt>"`
 * (`n` counts `/v1/messages` requests from 1).
 *
 * @category constructors
 * @since 0.1.0
 */
export const echo: Reply = Reply.Echo()

// ---------------------------------------------------------------------------------------------------------------
// Requests, scripts and the log
// ---------------------------------------------------------------------------------------------------------------

/**
 * A trailing `tool_result` block of the last user message.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolResult {
  readonly toolUseId: string
  /** The result's text (text blocks joined with newlines). */
  readonly content: string
  readonly isError: boolean
}

/**
 * A parsed `POST /v1/messages` body, as a script sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface MessagesRequest {
  /** 0-based position among the `/v1/messages` requests this server received. */
  readonly index: number
  readonly model: string
  readonly stream: boolean
  /** Names of the tools the request offers. Requests that offer none (e.g. title generation) always get text. */
  readonly toolNames: ReadonlyArray<string>
  /** Roles of `messages`, in order. The CLI puts `role: "system"` entries among them. */
  readonly roles: ReadonlyArray<string>
  /**
   * The last text block of the last user message that is not a `<system-reminder>`: normally the prompt. Empty
   * when there is none (e.g. the message only carries a tool_result).
   */
  readonly prompt: string
  /** The tool_result the last user message ends with, if any. */
  readonly toolResult: Option.Option<ToolResult>
  /** The whole JSON body, as sent. */
  readonly body: unknown
}

/**
 * The behaviour of the mock model.
 *
 * - A list of replies, consumed one per model call, in order; once exhausted, every request gets {@link echo}.
 *   Retries of a call that got an {@link apiError} get the same error (see there).
 * - A function from the request to a reply (it sees `request.index`, `request.prompt`, `request.toolResult`).
 *
 * Requests that offer no tools (the CLI's title generation when non-essential traffic is on) bypass the script
 * and get an echo, so they never consume a scripted reply.
 *
 * @category models
 * @since 0.1.0
 */
export type Script = ReadonlyArray<Reply> | ((request: MessagesRequest) => Reply)

/**
 * How a logged request ended: `pending` while the reply is still being written, `completed` when it was written
 * in full, `client-closed` when the client went away first (an interrupted stream).
 *
 * @category models
 * @since 0.1.0
 */
export type Outcome = "pending" | "completed" | "client-closed"

/**
 * One request the server received.
 *
 * @category models
 * @since 0.1.0
 */
export interface LoggedRequest {
  /** 0-based position among all requests. */
  readonly seq: number
  readonly method: string
  /** The path without the query (`/v1/messages`). */
  readonly path: string
  /** The query string including `?` (`"?beta=true"`), or `""`. */
  readonly query: string
  /** Request headers (lower-case names). `x-api-key` is logged as sent: the CLI sends a dummy key here. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed body of a `/v1/messages` request. */
  readonly messages: Option.Option<MessagesRequest>
  /** What the mock answered. */
  readonly reply: ReplyKind
  /** The HTTP status sent. */
  readonly status: number
  /** For streamed replies, how many `content_block_delta` events were written so far (updated live). */
  readonly deltasSent: number
  readonly outcome: Outcome
}

/**
 * A running mock Messages API.
 *
 * @category models
 * @since 0.1.0
 */
export interface MockAnthropic {
  /** `http://127.0.0.1:<port>`: the value for `ANTHROPIC_BASE_URL`. */
  readonly url: string
  readonly port: number
  /** A snapshot of the request log, oldest first. */
  readonly requests: Effect.Effect<ReadonlyArray<LoggedRequest>>
  /**
   * Waits until `predicate` holds for the log and returns that log. Use it for things that settle after the
   * response, such as an interrupted stream's `outcome`.
   */
  readonly awaitRequests: (
    predicate: (log: ReadonlyArray<LoggedRequest>) => boolean
  ) => Effect.Effect<ReadonlyArray<LoggedRequest>>
  /**
   * The log now and after every change (a request arrives, a stream sends a delta, a request settles): for a
   * recorder that notes each request when it happens. Never ends.
   */
  readonly changes: Stream.Stream<ReadonlyArray<LoggedRequest>>
}

/**
 * The service key for a {@link MockAnthropic} provided by {@link layer}.
 *
 * @category services
 * @since 0.1.0
 */
export const MockAnthropic: Context.Service<MockAnthropic, MockAnthropic> = Context.Service(
  "@tether/testing/MockAnthropic"
)

// ---------------------------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * Starts a mock Messages API on `127.0.0.1` at an ephemeral port. Closing the scope interrupts in-flight replies,
 * drops open connections and stops the server.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockAnthropic.make((request) =>
 *     request.prompt.includes("fail") ? MockAnthropic.apiError(529) : MockAnthropic.echo
 *   )
 *   const response = yield* Effect.promise(() =>
 *     fetch(`${mock.url}/v1/messages`, {
 *       method: "POST",
 *       body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], tools: [{ name: "Bash" }] })
 *     }).then((r) => r.json())
 *   )
 *   return response // { type: "message", content: [{ type: "text", text: "Hello from mock #1: hi" }], … }
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (script?: Script) => Effect.Effect<MockAnthropic, never, Scope.Scope> = Effect.fnUntraced(
  function*(script?: Script) {
    const log = yield* SubscriptionRef.make<ReadonlyArray<LoggedRequest>>([])
    const state = { seq: 0, messages: 0 }
    // The CLI resends the same `messages` on a retry.
    const scripted = MockServer.chooser(script, {
      fallback: echo,
      keyOf: (request: MessagesRequest) =>
        JSON.stringify(Json.isRecord(request.body) ? request.body.messages : undefined),
      attempts: (reply) => reply._tag === "ApiError" ? reply.attempts : undefined
    })
    // The CLI's side requests (no tools offered) never consume the script.
    const choose = (request: MessagesRequest): Reply => request.toolNames.length === 0 ? echo : scripted(request)
    const ctx: HandlerContext = {
      log,
      nextSeq: () => state.seq++,
      nextMessagesIndex: () => state.messages++,
      choose
    }
    const port = yield* MockServer.listen((req, res) => handle(ctx, req, res))
    return MockAnthropic.of({
      url: `http://127.0.0.1:${port}`,
      port,
      requests: SubscriptionRef.get(log),
      awaitRequests: MockServer.awaitLog(log),
      changes: SubscriptionRef.changes(log)
    })
  }
)

/**
 * A layer that provides a {@link MockAnthropic} running `script` for the lifetime of the layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (script?: Script): Layer.Layer<MockAnthropic> => Layer.effect(MockAnthropic, make(script))

/**
 * What {@link offlineEnv} sets: the directories as strings, and the dummy key as a `Redacted` (a credential variable,
 * which the options refuse as a plain string).
 *
 * @category models
 * @since 0.1.0
 */
export type OfflineEnv =
  & { readonly [name: string]: string | Redacted.Redacted<string> }
  & {
    readonly HOME: string
    readonly CLAUDE_CONFIG_DIR: string
    readonly CLAUDE_CODE_TMPDIR: string
    readonly TMPDIR: string
    readonly XDG_RUNTIME_DIR: string
    readonly ANTHROPIC_BASE_URL: string
    readonly ANTHROPIC_API_KEY: Redacted.Redacted<string>
  }

/**
 * The environment that runs the real `claude` offline against the mock (docs/protocol/claude-stream-json.md §2.3, §8.1):
 * everything lives under `home` (`HOME`, `CLAUDE_CONFIG_DIR`, temp dirs, runtime dir), the API key is a dummy,
 * non-essential traffic (DNS lookups of api.anthropic.com, `/api/hello` probes, title generation) is off, retries
 * are off, and every tool definition is sent (no `ToolSearch` deferral). Pass it as the whole environment (not
 * on top of the host's), with a `PATH`. The directories `home/.claude`, `home/tmp` and `home/run` must exist:
 * {@link offlineHome} makes them (and removes them).
 *
 * @category constructors
 * @since 0.1.0
 */
export const offlineEnv = (options: {
  readonly baseUrl: string
  readonly home: string
  /** `CLAUDE_CODE_MAX_RETRIES` (default 0). */
  readonly maxRetries?: number | undefined
}): OfflineEnv => ({
  HOME: options.home,
  CLAUDE_CONFIG_DIR: Path.join(options.home, ".claude"),
  CLAUDE_CODE_TMPDIR: Path.join(options.home, "tmp"),
  TMPDIR: Path.join(options.home, "tmp"),
  XDG_RUNTIME_DIR: Path.join(options.home, "run"),
  ANTHROPIC_BASE_URL: options.baseUrl,
  // A credential variable: Redacted, as the options require of one in `env.set` (the mock takes any key).
  ANTHROPIC_API_KEY: Redacted.make("dummy"),
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  CLAUDE_CODE_MAX_RETRIES: String(options.maxRetries ?? 0),
  ENABLE_TOOL_SEARCH: "false",
  BUN_ENABLE_CRASH_REPORTING: "0"
})

/**
 * A throwaway home for the real `claude` running offline, made by {@link offlineHome}.
 *
 * @category models
 * @since 0.1.0
 */
export interface OfflineHome {
  /** `HOME`, holding `.claude` (`CLAUDE_CONFIG_DIR`), `tmp` (`TMPDIR`, `CLAUDE_CODE_TMPDIR`) and `run` (`XDG_RUNTIME_DIR`). */
  readonly home: string
  /** `home/work`: an empty directory to run the CLI in (where its tools create files). */
  readonly cwd: string
  /** {@link offlineEnv} for `home`: pass it as the whole environment (mode `"clean"`). */
  readonly env: OfflineEnv
}

/**
 * Makes a temporary home for running the real `claude` offline against the mock at `baseUrl`: the directories
 * {@link offlineEnv} needs, a working directory, and the environment itself. Everything is removed when the scope
 * closes. A temporary directory that cannot be created is a defect.
 *
 * @example
 * ```ts
 * import { MockAnthropic } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockAnthropic.make([MockAnthropic.text("hi")])
 *   const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url })
 *   // ... spawn `claude` in `cwd` with `{ mode: "clean", set: env }` ...
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const offlineHome = (options: {
  readonly baseUrl: string
  /** `CLAUDE_CODE_MAX_RETRIES` (default 0). */
  readonly maxRetries?: number | undefined
  /** The temporary directory's name prefix (default `"tether-offline-"`). */
  readonly prefix?: string | undefined
}): Effect.Effect<OfflineHome, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), options.prefix ?? "tether-offline-"))
        for (const dir of [".claude", "tmp", "run", "work"]) Fs.mkdirSync(Path.join(home, dir))
        return home
      }),
      // Retried: a process that still writes there (a CLI being torn down) can make one pass fail with ENOTEMPTY.
      (home) => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
    ),
    (home): OfflineHome => ({
      home,
      cwd: Path.join(home, "work"),
      env: offlineEnv({ baseUrl: options.baseUrl, home, maxRetries: options.maxRetries })
    })
  )

// ---------------------------------------------------------------------------------------------------------------
// Request handling
// ---------------------------------------------------------------------------------------------------------------

interface HandlerContext {
  readonly log: SubscriptionRef.SubscriptionRef<ReadonlyArray<LoggedRequest>>
  readonly nextSeq: () => number
  readonly nextMessagesIndex: () => number
  readonly choose: (request: MessagesRequest) => Reply
}

const handle = (ctx: HandlerContext, req: Http.IncomingMessage, res: Http.ServerResponse) =>
  respond(ctx, req, res).pipe(
    // A reply cut short (the server's scope closed, or a defect) must not leave the client waiting.
    Effect.ensuring(Effect.sync(() => {
      if (!res.writableEnded) res.destroy()
    }))
  )

const respond = Effect.fnUntraced(
  function*(ctx: HandlerContext, req: Http.IncomingMessage, res: Http.ServerResponse) {
    const raw = yield* readBody(req)
    const url = new URL(req.url ?? "/", "http://127.0.0.1")
    const seq = ctx.nextSeq()
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
    }
    const base = { seq, method: req.method ?? "GET", path: url.pathname, query: url.search, headers }
    const record = (entry: Omit<LoggedRequest, keyof typeof base>) =>
      SubscriptionRef.update(ctx.log, (log) => [...log, { ...base, ...entry }])
    const settle = (patch: Partial<LoggedRequest>) =>
      SubscriptionRef.update(ctx.log, (log) => log.map((entry) => entry.seq === seq ? { ...entry, ...patch } : entry))

    const isPost = req.method === "POST"
    if (isPost && (url.pathname === "/v1/messages/count_tokens" || url.pathname === "/v1/messages")) {
      const body = Option.getOrUndefined(Option.filter(Json.parseJson(raw), Json.isRecord))
      if (body === undefined) {
        yield* record({
          messages: Option.none(),
          reply: "BadRequest",
          status: 400,
          deltasSent: 0,
          outcome: "completed"
        })
        return yield* sendJson(res, 400, errorBody("invalid_request_error", "mock: body is not a JSON object"))
      }
      if (url.pathname === "/v1/messages/count_tokens") {
        yield* record({
          messages: Option.none(),
          reply: "CountTokens",
          status: 200,
          deltasSent: 0,
          outcome: "completed"
        })
        return yield* sendJson(res, 200, { input_tokens: estimateTokens(raw) })
      }
      const request = parseMessagesRequest(ctx.nextMessagesIndex(), body)
      const chosen = yield* Effect.try({
        try: () => ctx.choose(request),
        catch: (error): string => error instanceof Error ? error.message : String(error)
      }).pipe(Effect.result)
      if (chosen._tag === "Failure") {
        yield* record({
          messages: Option.some(request),
          reply: "ScriptError",
          status: 500,
          deltasSent: 0,
          outcome: "completed"
        })
        return yield* sendJson(res, 500, errorBody("api_error", `mock: the script threw: ${chosen.failure}`))
      }
      const reply = chosen.success
      if (reply._tag === "ApiError") {
        yield* record({
          messages: Option.some(request),
          reply: reply._tag,
          status: reply.status,
          deltasSent: 0,
          outcome: "completed"
        })
        const extra: Record<string, string> = Option.match(reply.shouldRetry, {
          onNone: () => ({}),
          onSome: (retry) => ({ "x-should-retry": String(retry) })
        })
        return yield* sendJson(res, reply.status, errorBody(reply.errorType, reply.message), extra)
      }
      yield* record({
        messages: Option.some(request),
        reply: reply._tag,
        status: 200,
        deltasSent: 0,
        outcome: "pending"
      })
      const plan = planMessage(request, reply, estimateTokens(raw))
      // The log follows the stream live, so a test can wait for "streaming has begun" before interrupting.
      const sent = { deltas: 0 }
      const write = request.stream
        ? streamMessage(res, plan, Effect.suspend(() => settle({ deltasSent: ++sent.deltas })))
        : Effect.sleep(Duration.sum(plan.before, plan.delay)).pipe(Effect.andThen(sendJson(res, 200, plan.message)))
      const completed = yield* Effect.raceFirst(write.pipe(Effect.as(true)), clientGone(res).pipe(Effect.as(false)))
      return yield* settle({ outcome: completed ? "completed" : "client-closed" })
    }
    yield* record({ messages: Option.none(), reply: "NotFound", status: 404, deltasSent: 0, outcome: "completed" })
    return yield* sendJson(res, 404, errorBody("not_found_error", `mock: no route for ${req.method} ${url.pathname}`))
  }
)

const readBody = (req: Http.IncomingMessage) =>
  Effect.callback<string>((resume) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.once("end", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
    // A client that aborts while sending leaves nothing worth answering; the handler sees an empty body.
    req.once("error", () => resume(Effect.succeed("")))
  })

const clientGone = (res: Http.ServerResponse) =>
  Effect.callback<void>((resume) => {
    if (res.destroyed) return resume(Effect.void)
    const onClose = () => resume(Effect.void)
    res.once("close", onClose)
    return Effect.sync(() => res.off("close", onClose))
  })

const estimateTokens = (raw: string) => Math.max(1, Math.ceil(raw.length / 4))

const errorBody = (type: string, message: string) => ({
  type: "error",
  error: { type, message },
  request_id: mockId("req_mock")
})

const mockId = (prefix: string) => `${prefix}${Crypto.randomBytes(10).toString("hex")}`

const sendJson = (res: Http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  Effect.sync(() => {
    if (res.destroyed) return
    res.writeHead(status, { "content-type": "application/json", "request-id": mockId("req_mock"), ...headers })
    res.end(JSON.stringify(body))
  })

const parseMessagesRequest = (index: number, body: Json.JsonObject): MessagesRequest => {
  const messages = Array.isArray(body.messages) ? body.messages.filter(Json.isRecord) : []
  const tools = Array.isArray(body.tools) ? body.tools.filter(Json.isRecord) : []
  const lastUser = messages.findLast((message) => message.role === "user")
  const content = lastUser === undefined
    ? []
    : typeof lastUser.content === "string"
    ? [{ type: "text", text: lastUser.content }]
    : Array.isArray(lastUser.content)
    ? lastUser.content.filter(Json.isRecord)
    : []
  const prompt = content
    .filter((block) => block.type === "text" && typeof block.text === "string")
    .map((block) => block.text as string)
    .filter((text) => !text.trimStart().startsWith("<system-reminder>"))
    .at(-1) ?? ""
  const last = content.at(-1)
  const toolResult = last !== undefined && last.type === "tool_result"
    ? Option.some<ToolResult>({
      toolUseId: String(last.tool_use_id ?? ""),
      content: Json.textOf(last.content),
      isError: last.is_error === true
    })
    : Option.none()
  return {
    index,
    model: typeof body.model === "string" ? body.model : "claude-mock",
    stream: body.stream === true,
    toolNames: tools.map((tool) => String(tool.name ?? "")),
    roles: messages.map((message) => String(message.role ?? "")),
    prompt,
    toolResult,
    body
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Replies on the wire
// ---------------------------------------------------------------------------------------------------------------

type Block =
  | { readonly type: "text"; readonly pieces: ReadonlyArray<string> }
  | {
    readonly type: "tool_use"
    readonly id: string
    readonly name: string
    readonly input: unknown
    readonly pieces: ReadonlyArray<string>
  }

interface Plan {
  readonly message: {
    readonly id: string
    readonly type: "message"
    readonly role: "assistant"
    readonly model: string
    readonly content: ReadonlyArray<unknown>
    readonly stop_reason: "end_turn" | "tool_use"
    readonly stop_sequence: null
    readonly usage: {
      readonly input_tokens: number
      readonly output_tokens: number
      readonly cache_creation_input_tokens: number
      readonly cache_read_input_tokens: number
    }
  }
  readonly blocks: ReadonlyArray<Block>
  /** Pause before the response starts. */
  readonly before: Duration.Duration
  /** Pause before each delta after the first one (slow streams). */
  readonly interval: Duration.Duration
  /** Total pause for a non-streamed reply. */
  readonly delay: Duration.Duration
}

const split = (text: string, parts: number): ReadonlyArray<string> => {
  if (parts <= 1 || text.length <= 1) return [text]
  const size = Math.ceil(text.length / parts)
  const pieces: Array<string> = []
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size))
  return pieces
}

const echoText = (request: MessagesRequest) =>
  Option.match(request.toolResult, {
    onNone: () => `Hello from mock #${request.index + 1}: ${request.prompt}`,
    onSome: (result) => `Tool said: ${result.content}`
  })

const planMessage = (
  request: MessagesRequest,
  reply: Exclude<Reply, { readonly _tag: "ApiError" }>,
  inputTokens: number
): Plan => {
  const blocks: Array<Block> = []
  let interval = Duration.zero
  let before = Duration.zero
  switch (reply._tag) {
    case "Text":
      blocks.push({ type: "text", pieces: split(reply.text, reply.chunks) })
      break
    case "Echo":
      blocks.push({ type: "text", pieces: [echoText(request)] })
      break
    case "Slow":
      blocks.push({ type: "text", pieces: Array.from({ length: reply.deltas }, (_, i) => `w${i} `) })
      interval = reply.interval
      before = reply.before
      break
    case "ToolUse": {
      if (reply.preamble !== "") blocks.push({ type: "text", pieces: [reply.preamble] })
      const json = JSON.stringify(reply.input ?? {})
      blocks.push({
        type: "tool_use",
        id: Option.getOrElse(reply.id, () => mockId("toolu_mock")),
        name: reply.name,
        input: reply.input ?? {},
        pieces: split(json, 2)
      })
      break
    }
  }
  const deltas = blocks.reduce((n, block) => n + block.pieces.length, 0)
  return {
    message: {
      id: mockId("msg_mock"),
      type: "message",
      role: "assistant",
      model: request.model,
      content: blocks.map((block) =>
        block.type === "text"
          ? { type: "text", text: block.pieces.join("") }
          : { type: "tool_use", id: block.id, name: block.name, input: block.input }
      ),
      stop_reason: blocks.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: inputTokens,
        output_tokens: deltas,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0
      }
    },
    blocks,
    before,
    interval,
    delay: Duration.times(interval, Math.max(0, deltas - 1))
  }
}

const writeEvent = (res: Http.ServerResponse, event: string, data: unknown) =>
  Effect.sync(() => {
    if (!res.destroyed) res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...(data as object) })}\n\n`)
  })

const streamMessage = (res: Http.ServerResponse, plan: Plan, onDelta: Effect.Effect<void>) =>
  Effect.gen(function*() {
    if (Duration.isGreaterThan(plan.before, Duration.zero)) yield* Effect.sleep(plan.before)
    const { message } = plan
    yield* Effect.sync(() => {
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "request-id": mockId("req_mock")
      })
      res.flushHeaders()
    })
    yield* writeEvent(res, "message_start", {
      message: {
        ...message,
        content: [],
        stop_reason: null,
        usage: { ...message.usage, output_tokens: 1 }
      }
    })
    yield* writeEvent(res, "ping", {})
    let first = true
    for (let index = 0; index < plan.blocks.length; index++) {
      const block = plan.blocks[index]
      yield* writeEvent(res, "content_block_start", {
        index,
        content_block: block.type === "text"
          ? { type: "text", text: "" }
          : { type: "tool_use", id: block.id, name: block.name, input: {} }
      })
      for (const piece of block.pieces) {
        if (!first && Duration.isGreaterThan(plan.interval, Duration.zero)) yield* Effect.sleep(plan.interval)
        first = false
        yield* writeEvent(res, "content_block_delta", {
          index,
          delta: block.type === "text"
            ? { type: "text_delta", text: piece }
            : { type: "input_json_delta", partial_json: piece }
        })
        yield* onDelta
      }
      yield* writeEvent(res, "content_block_stop", { index })
    }
    yield* writeEvent(res, "message_delta", {
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { output_tokens: message.usage.output_tokens }
    })
    yield* writeEvent(res, "message_stop", {})
    yield* Effect.sync(() => res.end())
  })
