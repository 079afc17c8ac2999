/**
 * A local Gemini API for running the real Gemini CLI (`gemini --acp`) offline.
 *
 * `MockGemini.make(script)` listens on `127.0.0.1` at an ephemeral port inside a `Scope` and answers what the CLI
 * calls (docs/protocol/acp-agents.md §2.1):
 *
 * - `POST /v1beta/models/<model>:generateContent` from the CLI's model router (the request asks for JSON with
 *   `complexity_reasoning` and `complexity_score`): answered with a {@link Route}, never from the script;
 * - `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`: the model's turn, streamed as server-sent events,
 *   from the script: text, thoughts, a function call (the CLI runs the tool, asking the client's permission first
 *   when the tool needs it, and calls again with the `functionResponse`), a slow stream, an HTTP error;
 * - `POST /v1beta/models/<model>:generateContent` that is not the router's: the script's reply as one JSON response;
 * - `POST /v1beta/models/<model>:countTokens`: an estimate.
 *
 * Anything else is answered `404` with a Gemini API error body naming the route, and logged with reply `Unknown`,
 * so that a test sees a call the mock does not know ({@link MockGemini.unknown}) instead of a CLI that hangs.
 *
 * Point the CLI at it with {@link offlineEnv} and {@link offlineSettings} (or {@link offlineHome}, which makes the
 * home they point into): `GOOGLE_GEMINI_BASE_URL` on the mock, a dummy `GEMINI_API_KEY`, `GEMINI_CLI_HOME` in a
 * temporary directory whose `.gemini/settings.json` turns usage statistics, telemetry and auto-update off.
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockGemini.make([
 *     MockGemini.functionCall("run_shell_command", { command: "touch x" }), // first model call: a tool call
 *     MockGemini.text("done") //                                               second call: plain text
 *   ])
 *   const { cwd, env } = yield* MockGemini.offlineHome({ baseUrl: mock.url })
 *   // ... spawn `gemini --acp` in `cwd` with `env` as its whole environment, drive a prompt ...
 *   const log = yield* mock.requests
 *   return log.map((entry) => entry.reply) // ["Router", "FunctionCall", "Router", "Text"]
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
import * as Json from "./internal/json.ts"
import * as MockServer from "./internal/mockServer.ts"

// ---------------------------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------------------------

/**
 * What the mock model answers to one model call (`:streamGenerateContent`, or a `:generateContent` that is not the
 * router's).
 *
 * - `Text`: text in `chunks` streamed pieces, after an optional thought (`thought: true` parts, which the CLI
 *   reports as `agent_thought_chunk`; a thought written `**Subject** description` is shown as its subject and
 *   description).
 * - `FunctionCall`: an optional thought and preamble text, then one `functionCall` part: the CLI runs the tool
 *   (asking the client first when the tool needs it: `run_shell_command` does) and calls the model again with a
 *   `functionResponse`.
 * - `Slow`: `deltas` text pieces (`"w0 "`, `"w1 "`, …) `interval` apart. The stream stops as soon as the client
 *   disconnects (the CLI aborts the request on `session/cancel`), and the log records how far it got.
 * - `ApiError`: an HTTP error with the Gemini API's error body (`{"error":{"code","message","status"}}`).
 * - `Echo`: the default: `"Tool said: <output>"` after a `functionResponse`, otherwise
 *   `"Hello from mock #<n>: <prompt>"`.
 *
 * Build them with {@link text}, {@link functionCall}, {@link shell}, {@link slow}, {@link apiError} and
 * {@link echo}.
 *
 * @category models
 * @since 0.1.0
 */
export type Reply = Data.TaggedEnum<{
  Text: { readonly text: string; readonly chunks: number; readonly thought: Option.Option<string> }
  FunctionCall: {
    readonly name: string
    readonly args: { readonly [key: string]: unknown }
    readonly preamble: string
    readonly thought: Option.Option<string>
  }
  Slow: {
    readonly deltas: number
    readonly interval: Duration.Duration
    /** A pause before the response starts (before its status line): a model that has not answered yet. */
    readonly before: Duration.Duration
  }
  ApiError: {
    readonly status: number
    /** The error's `status` string (`RESOURCE_EXHAUSTED` for 429, …). */
    readonly errorStatus: string
    readonly message: string
    /**
     * In a list script: how many consecutive attempts of the same model call this reply answers (the CLI's retries
     * resend the same `contents`). `Infinity` (the default) fails the call however often it is retried.
     */
    readonly attempts: number
  }
  Echo: {}
}>

/**
 * Raw constructors and matchers for {@link Reply}; prefer the helpers ({@link text}, {@link functionCall}, …),
 * which fill in the defaults.
 *
 * @category models
 * @since 0.1.0
 */
export const Reply = Data.taggedEnum<Reply>()

/**
 * The kind of a logged request's answer: a {@link Reply} tag, or what the mock answered outside the script
 * (`Router`: the model router's JSON; `CountTokens`; `BadRequest`: a body that is not a JSON object;
 * `ScriptError`: a function script threw; `Unknown`: a route the mock does not know, answered 404).
 *
 * @category models
 * @since 0.1.0
 */
export type ReplyKind = Reply["_tag"] | "Router" | "CountTokens" | "BadRequest" | "ScriptError" | "Unknown"

/**
 * A text reply. `chunks` (default 1) splits the text into that many streamed pieces; `thought` comes first, as a
 * `thought: true` part.
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 *
 * const reply = MockGemini.text("Hello there", { chunks: 3, thought: "**Greeting** the user" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const text = (
  text: string,
  options?: { readonly chunks?: number | undefined; readonly thought?: string | undefined }
): Reply =>
  Reply.Text({
    text,
    chunks: Math.max(1, Math.floor(options?.chunks ?? 1)),
    thought: Option.fromUndefinedOr(options?.thought)
  })

/**
 * A function call: the model asks the CLI to run the tool `name` with `args`.
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 *
 * const reply = MockGemini.functionCall("write_file", { file_path: "x.txt", content: "hi" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const functionCall = (
  name: string,
  args: { readonly [key: string]: unknown },
  options?: { readonly preamble?: string | undefined; readonly thought?: string | undefined }
): Reply =>
  Reply.FunctionCall({
    name,
    args,
    preamble: options?.preamble ?? "",
    thought: Option.fromUndefinedOr(options?.thought)
  })

/**
 * A `run_shell_command` call. The Gemini CLI asks the client's permission (`session/request_permission`) before it
 * runs a shell command, unless the session's mode approves it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const shell = (
  command: string,
  options?: { readonly description?: string | undefined; readonly thought?: string | undefined }
): Reply =>
  functionCall("run_shell_command", { command, description: options?.description ?? "mock command" }, {
    thought: options?.thought
  })

/**
 * A slow text stream: `deltas` pieces (default 50) `interval` apart (default 100 millis). Use it to cancel a prompt
 * mid-stream. The delays run on the `Clock` of the fiber that created the server.
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
 * The Gemini API's error `status` string for an HTTP status.
 *
 * @category constructors
 * @since 0.1.0
 */
export const errorStatusOf = (status: number): string => {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT"
    case 401:
      return "UNAUTHENTICATED"
    case 403:
      return "PERMISSION_DENIED"
    case 404:
      return "NOT_FOUND"
    case 429:
      return "RESOURCE_EXHAUSTED"
    case 503:
      return "UNAVAILABLE"
    case 504:
      return "DEADLINE_EXCEEDED"
    default:
      return "INTERNAL"
  }
}

/**
 * An API error with `status`; the body is `{"error":{"code","message","status"}}`.
 *
 * The CLI retries 429 and 5xx with backoff (seconds, growing): up to `general.maxAttempts` attempts (1 in
 * {@link offlineSettings}) for a model named with `--model`, but up to 10 for the `auto` model's last-resort
 * model whatever the setting; a 400 is not retried. In a list script an error therefore answers every retry of the
 * same call (same `contents`) and the next reply is used for the next call; pass `attempts: 1` to fail only the
 * first attempt. The CLI answers the `session/prompt` with a JSON-RPC error whose `code` is the HTTP status.
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 *
 * const script = [MockGemini.apiError(400), MockGemini.text("back again")]
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const apiError = (
  status: number,
  options?: {
    readonly message?: string | undefined
    readonly errorStatus?: string | undefined
    readonly attempts?: number | undefined
  }
): Reply =>
  Reply.ApiError({
    status,
    errorStatus: options?.errorStatus ?? errorStatusOf(status),
    message: options?.message ?? `mock ${status}`,
    attempts: Math.max(1, options?.attempts ?? Infinity)
  })

/**
 * The default reply: `"Tool said: <output>"` after a `functionResponse`, otherwise
 * `"Hello from mock #<n>: <prompt>"` (`n` counts model calls from 1; the router's requests are not counted).
 *
 * @category constructors
 * @since 0.1.0
 */
export const echo: Reply = Reply.Echo()

/**
 * What the model router is told: its JSON answer (`complexity_score` 1–100; the CLI picks its pro model above its
 * threshold, its flash model below).
 *
 * @category models
 * @since 0.1.0
 */
export interface Route {
  readonly score: number
  readonly reasoning: string
}

/**
 * The default route: a simple request (score 10), which sends the turn to the CLI's flash model.
 *
 * @category constructors
 * @since 0.1.0
 */
export const simpleRoute: Route = { score: 10, reasoning: "mock: a simple request" }

// ---------------------------------------------------------------------------------------------------------------
// Requests, scripts and the log
// ---------------------------------------------------------------------------------------------------------------

/**
 * A `functionResponse` part of the last user content: the result of a tool the model called.
 *
 * @category models
 * @since 0.1.0
 */
export interface FunctionResponse {
  readonly name: string
  readonly id: Option.Option<string>
  /** `response.output` when it is a string, else the whole `response` as JSON. */
  readonly output: string
}

/**
 * A parsed model call, as a script sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface GenerateRequest {
  /** 0-based position among the model calls this server received (router requests excluded). */
  readonly index: number
  /** The model of the path (`gemini-2.5-flash` in `/v1beta/models/gemini-2.5-flash:streamGenerateContent`). */
  readonly model: string
  readonly stream: boolean
  /** Names of the function declarations the request offers. */
  readonly toolNames: ReadonlyArray<string>
  /** Roles of `contents`, in order. */
  readonly roles: ReadonlyArray<string>
  /**
   * The last text part of the last user content that is not the CLI's `<session_context>`: normally the prompt.
   * Empty when there is none (the content carries a `functionResponse`).
   */
  readonly prompt: string
  /** The `functionResponse` the last user content carries, if any. */
  readonly functionResponse: Option.Option<FunctionResponse>
  /** The whole JSON body, as sent. */
  readonly body: unknown
}

/**
 * The behaviour of the mock model: a list of replies consumed one per model call, in order (once exhausted, every
 * call gets {@link echo}; retries of a call that got an {@link apiError} get the same error), or a function from the
 * request to a reply. The router's requests never consume the script.
 *
 * @category models
 * @since 0.1.0
 */
export type Script = ReadonlyArray<Reply> | ((request: GenerateRequest) => Reply)

/**
 * How a logged request ended: `pending` while the reply is written, `completed` when it was written in full,
 * `client-closed` when the client went away first (a cancelled stream).
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
  /** The path without the query (`/v1beta/models/gemini-2.5-flash:streamGenerateContent`). */
  readonly path: string
  /** The query string including `?` (`"?alt=sse"`), or `""`. */
  readonly query: string
  /** Request headers (lower-case names). `x-goog-api-key` is logged as sent: the CLI sends the dummy key. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed body of a model call (not of a router request). */
  readonly request: Option.Option<GenerateRequest>
  readonly reply: ReplyKind
  /** The HTTP status sent. */
  readonly status: number
  /** For streamed replies, how many chunks were written so far (updated live). */
  readonly chunksSent: number
  readonly outcome: Outcome
}

/**
 * A running mock Gemini API.
 *
 * @category models
 * @since 0.1.0
 */
export interface MockGemini {
  /** `http://127.0.0.1:<port>`: the value for `GOOGLE_GEMINI_BASE_URL`. */
  readonly url: string
  readonly port: number
  /** A snapshot of the request log, oldest first. */
  readonly requests: Effect.Effect<ReadonlyArray<LoggedRequest>>
  /** The requests the mock did not know (answered 404, reply `Unknown`): a test of the CLI expects none. */
  readonly unknown: Effect.Effect<ReadonlyArray<LoggedRequest>>
  /** Waits until `predicate` holds for the log and returns that log. */
  readonly awaitRequests: (
    predicate: (log: ReadonlyArray<LoggedRequest>) => boolean
  ) => Effect.Effect<ReadonlyArray<LoggedRequest>>
  /** The log now and after every change (a request arrives, a chunk is sent, a request settles). Never ends. */
  readonly changes: Stream.Stream<ReadonlyArray<LoggedRequest>>
}

/**
 * The service key for a {@link MockGemini} provided by {@link layer}.
 *
 * @category services
 * @since 0.1.0
 */
export const MockGemini: Context.Service<MockGemini, MockGemini> = Context.Service("@tether/testing/MockGemini")

// ---------------------------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * Starts a mock Gemini API on `127.0.0.1` at an ephemeral port. Closing the scope interrupts in-flight replies,
 * drops open connections and stops the server. `options.route` is what the model router is told (default
 * {@link simpleRoute}).
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockGemini.make()
 *   const response = yield* Effect.promise(() =>
 *     fetch(`${mock.url}/v1beta/models/gemini-2.5-flash:generateContent`, {
 *       method: "POST",
 *       body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] })
 *     }).then((r) => r.json())
 *   )
 *   return response // { candidates: [{ content: { role: "model", parts: [{ text: "Hello from mock #1: hi" }] }, … }] }
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (
  script?: Script,
  options?: { readonly route?: Route | undefined }
) => Effect.Effect<MockGemini, never, Scope.Scope> = Effect.fnUntraced(
  function*(script?: Script, options?: { readonly route?: Route | undefined }) {
    const log = yield* SubscriptionRef.make<ReadonlyArray<LoggedRequest>>([])
    const state = { seq: 0, calls: 0 }
    // The CLI resends the same `contents` on a retry.
    const choose = MockServer.chooser(script, {
      fallback: echo,
      keyOf: (request: GenerateRequest) =>
        JSON.stringify(Json.isRecord(request.body) ? request.body.contents : undefined),
      attempts: (reply) => reply._tag === "ApiError" ? reply.attempts : undefined
    })
    const ctx: HandlerContext = {
      log,
      route: options?.route ?? simpleRoute,
      nextSeq: () => state.seq++,
      nextCallIndex: () => state.calls++,
      choose
    }
    const port = yield* MockServer.listen((req, res) => handle(ctx, req, res))
    return MockGemini.of({
      url: `http://127.0.0.1:${port}`,
      port,
      requests: SubscriptionRef.get(log),
      unknown: Effect.map(SubscriptionRef.get(log), (entries) => entries.filter((entry) => entry.reply === "Unknown")),
      awaitRequests: MockServer.awaitLog(log),
      changes: SubscriptionRef.changes(log)
    })
  }
)

/**
 * A layer that provides a {@link MockGemini} running `script` for the lifetime of the layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (script?: Script, options?: { readonly route?: Route | undefined }): Layer.Layer<MockGemini> =>
  Layer.effect(MockGemini, make(script, options))

// ---------------------------------------------------------------------------------------------------------------
// Offline configuration
// ---------------------------------------------------------------------------------------------------------------

/**
 * The `settings.json` that keeps the Gemini CLI from reaching the network by itself (docs/protocol/acp-agents.md
 * §2.2): no usage statistics (otherwise it reports to a Google host), no telemetry, no auto-update check, and one
 * attempt per model call (its default of 10 attempts with backoff would make an error take minutes). The model
 * router's `auto` model keeps up to 10 attempts for its last-resort model whatever `maxAttempts` says: name a
 * model (`--model`) to test errors that the CLI would retry.
 *
 * @category offline
 * @since 0.1.0
 */
export const offlineSettings = (options?: { readonly maxAttempts?: number | undefined }) => ({
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: {
    enableAutoUpdate: false,
    enableAutoUpdateNotification: false,
    maxAttempts: Math.max(1, Math.floor(options?.maxAttempts ?? 1))
  }
})

/**
 * What {@link offlineEnv} sets: directories as strings, the dummy key as a `Redacted` (a credential variable,
 * which the session options refuse as a plain string).
 *
 * @category offline
 * @since 0.1.0
 */
export type OfflineEnv =
  & { readonly [name: string]: string | Redacted.Redacted<string> }
  & {
    readonly HOME: string
    readonly GEMINI_CLI_HOME: string
    readonly TMPDIR: string
    readonly GOOGLE_GEMINI_BASE_URL: string
    readonly GEMINI_API_KEY: Redacted.Redacted<string>
    readonly GEMINI_CLI_NO_RELAUNCH: string
  }

/**
 * The environment that runs the real Gemini CLI offline against the mock at `baseUrl`: `GEMINI_CLI_HOME` (where
 * it reads `.gemini/settings.json` and keeps its sessions), `HOME` and `TMPDIR` under `home`; the mock as the API
 * gateway (`GOOGLE_GEMINI_BASE_URL`: with it set, `session/new` needs no `authenticate`); a dummy
 * `GEMINI_API_KEY`; `GEMINI_CLI_NO_RELAUNCH=true` (no second node process). Pass it as the whole environment, with
 * a `PATH`; `home/.gemini/settings.json` must hold {@link offlineSettings} and `home/tmp` must exist:
 * {@link offlineHome} makes both.
 *
 * @category offline
 * @since 0.1.0
 */
export const offlineEnv = (options: { readonly baseUrl: string; readonly home: string }): OfflineEnv => ({
  HOME: options.home,
  GEMINI_CLI_HOME: options.home,
  TMPDIR: Path.join(options.home, "tmp"),
  GOOGLE_GEMINI_BASE_URL: options.baseUrl,
  GEMINI_API_KEY: Redacted.make("mock-gemini-api-key"),
  GEMINI_CLI_NO_RELAUNCH: "true",
  NO_COLOR: "1"
})

/**
 * A throwaway home for the real Gemini CLI running offline, made by {@link offlineHome}.
 *
 * @category offline
 * @since 0.1.0
 */
export interface OfflineHome {
  /** `HOME` and `GEMINI_CLI_HOME`: holds `.gemini/settings.json`, `.gemini/tmp/<project>/chats` and `tmp`. */
  readonly home: string
  /** `home/work`: an empty directory to run the CLI in (the `cwd` of `session/new`). */
  readonly cwd: string
  /** {@link offlineEnv} for `home`: pass it as the whole environment (mode `"clean"`). */
  readonly env: OfflineEnv
}

/**
 * Makes a temporary home for running the real Gemini CLI offline against the mock at `baseUrl`: `.gemini/settings.json`
 * with {@link offlineSettings}, `tmp`, a working directory, and the environment. Everything is removed when the
 * scope closes.
 *
 * @example
 * ```ts
 * import { MockGemini } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockGemini.make([MockGemini.text("hi")])
 *   const { cwd, env } = yield* MockGemini.offlineHome({ baseUrl: mock.url })
 *   // ... spawn `node <gemini.js> --acp` in `cwd` with `{ mode: "clean", set: env }` ...
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category offline
 * @since 0.1.0
 */
export const offlineHome = (options: {
  readonly baseUrl: string
  /** `general.maxAttempts` (default 1). */
  readonly maxAttempts?: number | undefined
  /** The temporary directory's name prefix (default `"tether-gemini-"`). */
  readonly prefix?: string | undefined
}): Effect.Effect<OfflineHome, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), options.prefix ?? "tether-gemini-"))
        for (const dir of [".gemini", "tmp", "work"]) Fs.mkdirSync(Path.join(home, dir))
        Fs.writeFileSync(
          Path.join(home, ".gemini", "settings.json"),
          JSON.stringify(offlineSettings({ maxAttempts: options.maxAttempts }), null, 2)
        )
        return home
      }),
      // Retried: a process that still writes there (a CLI being torn down) can make one pass fail with ENOTEMPTY.
      (home) => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
    ),
    (home): OfflineHome => ({
      home,
      cwd: Path.join(home, "work"),
      env: offlineEnv({ baseUrl: options.baseUrl, home })
    })
  )

// ---------------------------------------------------------------------------------------------------------------
// Request handling
// ---------------------------------------------------------------------------------------------------------------

interface HandlerContext {
  readonly log: SubscriptionRef.SubscriptionRef<ReadonlyArray<LoggedRequest>>
  readonly route: Route
  readonly nextSeq: () => number
  readonly nextCallIndex: () => number
  readonly choose: (request: GenerateRequest) => Reply
}

/** `/v1beta/models/<model>:<method>` (any API version), the model and the method. */
const modelRoute = /^\/v1[a-z0-9]*\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/

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
    const done = { chunksSent: 0, outcome: "completed" } as const

    const matched = req.method === "POST" ? modelRoute.exec(url.pathname) : null
    if (matched === null) {
      yield* record({ request: Option.none(), reply: "Unknown", status: 404, ...done })
      return yield* sendJson(
        res,
        404,
        errorBody(404, `mock: no route for ${req.method} ${url.pathname}${url.search}`, "NOT_FOUND")
      )
    }
    const [, model, method] = matched
    const body = Option.getOrUndefined(Option.filter(Json.parseJson(raw), Json.isRecord))
    if (body === undefined) {
      yield* record({ request: Option.none(), reply: "BadRequest", status: 400, ...done })
      return yield* sendJson(res, 400, errorBody(400, "mock: body is not a JSON object", "INVALID_ARGUMENT"))
    }
    if (method === "countTokens") {
      yield* record({ request: Option.none(), reply: "CountTokens", status: 200, ...done })
      return yield* sendJson(res, 200, { totalTokens: estimateTokens(raw) })
    }
    if (method === "generateContent" && isRouterRequest(body)) {
      yield* record({ request: Option.none(), reply: "Router", status: 200, ...done })
      const answer = JSON.stringify({ complexity_reasoning: ctx.route.reasoning, complexity_score: ctx.route.score })
      return yield* sendJson(res, 200, {
        candidates: [{ content: { role: "model", parts: [{ text: answer }] }, finishReason: "STOP", index: 0 }],
        usageMetadata: usage(estimateTokens(raw), 1),
        modelVersion: model,
        responseId: mockId("resp_mock")
      })
    }
    const request = parseGenerateRequest(ctx.nextCallIndex(), model, method === "streamGenerateContent", body)
    const chosen = yield* Effect.try({
      try: () => ctx.choose(request),
      catch: (error): string => error instanceof Error ? error.message : String(error)
    }).pipe(Effect.result)
    if (chosen._tag === "Failure") {
      yield* record({ request: Option.some(request), reply: "ScriptError", status: 500, ...done })
      return yield* sendJson(res, 500, errorBody(500, `mock: the script threw: ${chosen.failure}`, "INTERNAL"))
    }
    const reply = chosen.success
    if (reply._tag === "ApiError") {
      yield* record({ request: Option.some(request), reply: reply._tag, status: reply.status, ...done })
      return yield* sendJson(res, reply.status, errorBody(reply.status, reply.message, reply.errorStatus))
    }
    yield* record({
      request: Option.some(request),
      reply: reply._tag,
      status: 200,
      chunksSent: 0,
      outcome: "pending"
    })
    const plan = planReply(request, reply, estimateTokens(raw))
    const sent = { chunks: 0 }
    const write = request.stream
      ? streamChunks(res, plan, Effect.suspend(() => settle({ chunksSent: ++sent.chunks })))
      : Effect.sleep(Duration.sum(plan.before, plan.delay)).pipe(
        Effect.andThen(sendJson(res, 200, wholeResponse(plan)))
      )
    const completed = yield* Effect.raceFirst(write.pipe(Effect.as(true)), clientGone(res).pipe(Effect.as(false)))
    return yield* settle({ outcome: completed ? "completed" : "client-closed" })
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

/** The router's request asks for JSON with a `complexity_score` (its `responseJsonSchema`). */
const isRouterRequest = (body: Json.JsonObject): boolean => {
  const config = body.generationConfig
  if (!Json.isRecord(config)) return false
  const schema = config.responseJsonSchema ?? config.responseSchema
  return Json.isRecord(schema) && Json.isRecord(schema.properties) && "complexity_score" in schema.properties
}

const estimateTokens = (raw: string) => Math.max(1, Math.ceil(raw.length / 4))

const usage = (prompt: number, candidates: number, thoughts = 0) => ({
  promptTokenCount: prompt,
  candidatesTokenCount: candidates,
  ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
  totalTokenCount: prompt + candidates + thoughts
})

const errorBody = (code: number, message: string, status: string) => ({ error: { code, message, status } })

const mockId = (prefix: string) => `${prefix}${Crypto.randomBytes(10).toString("hex")}`

const sendJson = (res: Http.ServerResponse, status: number, body: unknown) =>
  Effect.sync(() => {
    if (res.destroyed) return
    res.writeHead(status, { "content-type": "application/json; charset=UTF-8" })
    res.end(JSON.stringify(body))
  })

const partsOf = (content: unknown): ReadonlyArray<Json.JsonObject> =>
  Json.isRecord(content) && Array.isArray(content.parts) ? content.parts.filter(Json.isRecord) : []

const parseGenerateRequest = (
  index: number,
  model: string,
  stream: boolean,
  body: Json.JsonObject
): GenerateRequest => {
  const contents = Array.isArray(body.contents) ? body.contents.filter(Json.isRecord) : []
  const tools = Array.isArray(body.tools) ? body.tools.filter(Json.isRecord) : []
  const lastUser = contents.findLast((content) => content.role === "user")
  const parts = partsOf(lastUser)
  const prompt = parts
    .filter((part) => typeof part.text === "string" && part.thought !== true)
    .map((part) => part.text as string)
    .filter((text) => !text.trimStart().startsWith("<session_context>"))
    .at(-1) ?? ""
  const response = parts.findLast((part) => Json.isRecord(part.functionResponse))?.functionResponse
  const functionResponse = Json.isRecord(response)
    ? Option.some<FunctionResponse>({
      name: Json.stringOr(response.name, ""),
      id: typeof response.id === "string" ? Option.some(response.id) : Option.none(),
      output: Json.isRecord(response.response) && typeof response.response.output === "string"
        ? response.response.output
        : JSON.stringify(response.response ?? null)
    })
    : Option.none()
  return {
    index,
    model,
    stream,
    toolNames: tools.flatMap((tool) =>
      Array.isArray(tool.functionDeclarations)
        ? tool.functionDeclarations.filter(Json.isRecord).map((declaration) => Json.stringOr(declaration.name, ""))
        : []
    ),
    roles: contents.map((content) => Json.stringOr(content.role, "")),
    prompt,
    functionResponse,
    body
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Replies on the wire
// ---------------------------------------------------------------------------------------------------------------

interface Plan {
  readonly model: string
  readonly responseId: string
  /** The parts of each streamed chunk, in order; the last chunk carries `finishReason`. */
  readonly chunks: ReadonlyArray<ReadonlyArray<Json.JsonObject>>
  readonly promptTokens: number
  readonly thoughtTokens: number
  /** Pause before the response starts. */
  readonly before: Duration.Duration
  /** Pause before each chunk after the first one (slow streams). */
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

const echoText = (request: GenerateRequest) =>
  Option.match(request.functionResponse, {
    onNone: () => `Hello from mock #${request.index + 1}: ${request.prompt}`,
    onSome: (response) => `Tool said: ${response.output}`
  })

const thoughtPart = (thought: Option.Option<string>): ReadonlyArray<ReadonlyArray<Json.JsonObject>> =>
  Option.match(thought, { onNone: () => [], onSome: (text) => [[{ text, thought: true }]] })

const planReply = (
  request: GenerateRequest,
  reply: Exclude<Reply, { readonly _tag: "ApiError" }>,
  promptTokens: number
): Plan => {
  let chunks: Array<ReadonlyArray<Json.JsonObject>> = []
  let interval = Duration.zero
  let before = Duration.zero
  let thoughtTokens = 0
  switch (reply._tag) {
    case "Text":
      chunks = [...thoughtPart(reply.thought), ...split(reply.text, reply.chunks).map((text) => [{ text }])]
      thoughtTokens = Option.isSome(reply.thought) ? 1 : 0
      break
    case "Echo":
      chunks = [[{ text: echoText(request) }]]
      break
    case "Slow":
      chunks = Array.from({ length: reply.deltas }, (_, i) => [{ text: `w${i} ` }])
      interval = reply.interval
      before = reply.before
      break
    case "FunctionCall":
      chunks = [
        ...thoughtPart(reply.thought),
        ...(reply.preamble === "" ? [] : [[{ text: reply.preamble }]]),
        [{ functionCall: { name: reply.name, args: reply.args } }]
      ]
      thoughtTokens = Option.isSome(reply.thought) ? 1 : 0
      break
  }
  return {
    model: request.model,
    responseId: mockId("resp_mock"),
    chunks,
    promptTokens,
    thoughtTokens,
    before,
    interval,
    delay: Duration.times(interval, Math.max(0, chunks.length - 1))
  }
}

/** One response object of the API: a streamed chunk, or (with every part) the whole non-streamed response. */
const responseOf = (plan: Plan, parts: ReadonlyArray<Json.JsonObject>, sent: number, last: boolean) => ({
  candidates: [{
    content: { role: "model", parts },
    ...(last ? { finishReason: "STOP" } : {}),
    index: 0
  }],
  usageMetadata: usage(plan.promptTokens, sent, last ? plan.thoughtTokens : 0),
  modelVersion: plan.model,
  responseId: plan.responseId
})

const wholeResponse = (plan: Plan) => responseOf(plan, plan.chunks.flat(), plan.chunks.length, true)

const streamChunks = (res: Http.ServerResponse, plan: Plan, onChunk: Effect.Effect<void>) =>
  Effect.gen(function*() {
    if (Duration.isGreaterThan(plan.before, Duration.zero)) yield* Effect.sleep(plan.before)
    yield* Effect.sync(() => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      res.flushHeaders()
    })
    for (let i = 0; i < plan.chunks.length; i++) {
      if (i > 0 && Duration.isGreaterThan(plan.interval, Duration.zero)) yield* Effect.sleep(plan.interval)
      const data = responseOf(plan, plan.chunks[i], i + 1, i === plan.chunks.length - 1)
      yield* Effect.sync(() => {
        if (!res.destroyed) res.write(`data: ${JSON.stringify(data)}\r\n\r\n`)
      })
      yield* onChunk
    }
    yield* Effect.sync(() => res.end())
  })
