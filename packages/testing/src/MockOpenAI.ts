/**
 * A local OpenAI Responses API for running the real `codex` CLI (`codex app-server`) offline.
 *
 * `MockOpenAI.make(script)` listens on `127.0.0.1` at an ephemeral port inside a `Scope` and answers the one
 * endpoint Codex calls with a custom Responses-API provider (`POST {base}/responses`, with `stream: true`: Server-Sent
 * Events); anything else is a JSON 404. What the "model" says is scripted per test as data: a list of {@link Reply}
 * values consumed in order, or a function from the {@link ResponsesRequest} to a reply ({@link markers} is one that
 * reads a tag at the start of the prompt). Every request is logged ({@link LoggedRequest}) for assertions.
 *
 * The events are the minimal set the real binary (0.171) accepts (docs/protocol/codex-app-server.md §4):
 * `response.created`, then per output item `response.output_item.added`, its `response.output_text.delta`s and
 * `response.output_item.done`, then `response.completed` with the usage. A stream that ends without
 * `response.completed` counts as dropped for Codex and is retried up to the provider's `stream_max_retries`.
 *
 * Point Codex at it with a custom provider whose `base_url` is {@link MockOpenAI.url} (`CodexSession`'s
 * `provider.baseUrl`), or use {@link offlineOptions} / {@link offlineHome}, which also turn plugins off, set the
 * retries to 0 and give the server a home of its own.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockOpenAI.make([
 *     MockOpenAI.execCommand("touch x"), // first model call: an exec_command tool call
 *     MockOpenAI.text("done") //            second call (with the call's output): plain text
 *   ])
 *   const { options } = yield* MockOpenAI.offlineHome({ baseUrl: mock.url })
 *   // ... CodexSession.make(options), drive a turn ...
 *   const log = yield* mock.requests
 *   return log.map((entry) => entry.reply) // ["FunctionCall", "Text"]
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import type * as CodexOptions from "@tether/codex/CodexOptions"
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
 * What the mock model answers to one `POST {base}/responses`.
 *
 * - `Text`: one assistant message, streamed in `chunks` `response.output_text.delta` pieces.
 * - `FunctionCall`: an optional assistant message (`preamble`), then one `function_call` item (`exec_command`,
 *   `write_stdin`, …) whose `arguments` is a JSON string. Codex runs the tool (asking the host first when its
 *   approval policy says so) and calls the API again with a `function_call_output`.
 * - `CustomToolCall`: one `custom_tool_call` item: a freeform tool such as `apply_patch` (Codex advertises it only
 *   for model slugs it has metadata for, e.g. `gpt-5.5`). The next call carries a `custom_tool_call_output`.
 * - `Slow`: `deltas` text deltas (`"w0 "`, `"w1 "`, …) `interval` apart. The stream stops as soon as the client
 *   disconnects (Codex drops the request when a turn is interrupted), and the log records how far it got.
 * - `Stall`: the response headers, then nothing until the client goes away (a model that hangs).
 * - `Drop`: a text stream cut off after `deltas` deltas, without `response.completed`: Codex counts it as a dropped
 *   stream and reconnects up to the provider's `stream_max_retries`, announcing each retry with an `error`
 *   notification whose `willRetry` is true (see {@link drop}).
 * - `ApiError`: an HTTP error with the OpenAI error body. Codex retries 429 and 5xx up to the provider's
 *   `request_max_retries` (see {@link apiError}).
 * - `Echo`: the default: `"Tool said: <output>"` after a tool call's output, otherwise
 *   `"Hello from mock #<n>: <prompt>"`.
 *
 * Build them with {@link text}, {@link functionCall}, {@link execCommand}, {@link customToolCall},
 * {@link applyPatch}, {@link slow}, {@link stall}, {@link apiError} and {@link echo}.
 *
 * @category models
 * @since 0.1.0
 */
export type Reply = Data.TaggedEnum<{
  Text: { readonly text: string; readonly chunks: number }
  FunctionCall: {
    readonly name: string
    /** The JSON arguments, as the string the API sends. */
    readonly arguments: string
    /** Text the model "says" before the call (empty: no message item). */
    readonly preamble: string
    /** The call id; generated (`call_mock…`) when absent. */
    readonly callId: Option.Option<string>
  }
  CustomToolCall: {
    readonly name: string
    readonly input: string
    readonly callId: Option.Option<string>
  }
  Slow: { readonly deltas: number; readonly interval: Duration.Duration }
  Stall: {}
  Drop: {
    readonly deltas: number
    /** In a list script: how many consecutive attempts of the same model call this reply answers (see `ApiError`). */
    readonly attempts: number
  }
  ApiError: {
    readonly status: number
    readonly errorType: string
    readonly code: string | null
    readonly message: string
    /** Sent as the `retry-after` header (seconds) when present. */
    readonly retryAfter: Option.Option<number>
    /**
     * In a list script: how many consecutive attempts of the same model call this reply answers (Codex's retries
     * resend the same `input`). `Infinity` (the default) fails the call however often it is retried.
     */
    readonly attempts: number
  }
  Echo: {}
}>

/**
 * Raw constructors and matchers for {@link Reply}; prefer the helpers ({@link text}, {@link execCommand}, …),
 * which fill in the defaults.
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
export type ReplyKind = Reply["_tag"] | "NotFound" | "BadRequest" | "ScriptError"

/**
 * A text reply. `chunks` (default 1) splits the text into that many `response.output_text.delta` events.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 *
 * const reply = MockOpenAI.text("Hello there", { chunks: 3 })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const text = (text: string, options?: { readonly chunks?: number | undefined }): Reply =>
  Reply.Text({ text, chunks: Math.max(1, Math.floor(options?.chunks ?? 1)) })

/**
 * A function tool call: the model asks Codex to run `name` with `args` (an object, sent as its JSON, or a string
 * sent as is).
 *
 * @category constructors
 * @since 0.1.0
 */
export const functionCall = (
  name: string,
  args: unknown,
  options?: { readonly preamble?: string | undefined; readonly callId?: string | undefined }
): Reply =>
  Reply.FunctionCall({
    name,
    arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
    preamble: options?.preamble ?? "",
    callId: Option.fromUndefinedOr(options?.callId)
  })

/**
 * An `exec_command` call, the shell tool Codex 0.171 advertises (unified exec). Codex runs it as
 * `/bin/bash -lc '<cmd>'`. Whether the host is asked first depends on the approval policy: `untrusted` asks for
 * anything not known to be safe (`touch` is asked, `echo` is not); `on-request` asks only when the model requests
 * an escalation, which `escalate` (the justification, shown to the host as the request's reason) does with
 * `sandbox_permissions: "require_escalated"`.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 *
 * const asks = MockOpenAI.execCommand("touch /outside/x", { escalate: "it writes outside the workspace" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const execCommand = (
  cmd: string,
  options?: {
    readonly escalate?: string | undefined
    readonly workdir?: string | undefined
    /** How long Codex waits for output before answering the model (default 30 s: the command's whole run). */
    readonly yieldTimeMs?: number | undefined
    readonly preamble?: string | undefined
    readonly callId?: string | undefined
  }
): Reply =>
  functionCall("exec_command", {
    cmd,
    ...(options?.workdir === undefined ? {} : { workdir: options.workdir }),
    yield_time_ms: options?.yieldTimeMs ?? 30_000,
    ...(options?.escalate === undefined
      ? {}
      : { sandbox_permissions: "require_escalated", justification: options.escalate })
  }, { preamble: options?.preamble, callId: options?.callId })

/**
 * A freeform (custom) tool call, such as `apply_patch`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const customToolCall = (
  name: string,
  input: string,
  options?: { readonly callId?: string | undefined }
): Reply => Reply.CustomToolCall({ name, input, callId: Option.fromUndefinedOr(options?.callId) })

/**
 * An `apply_patch` call. `patch` is the whole patch (`*** Begin Patch` … `*** End Patch`), or use `addFile` for a
 * patch that adds one file. Codex asks the host before applying it under `untrusted` (and under `on-request` when
 * it writes outside the writable roots). Codex advertises `apply_patch` only for model slugs it has metadata for
 * (`gpt-5.5` works offline); with an unknown slug the call is refused as an unknown tool.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 *
 * const reply = MockOpenAI.applyPatch({ addFile: "notes.txt", contents: "hello\n" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const applyPatch = (
  patch: string | { readonly addFile: string; readonly contents: string },
  options?: { readonly callId?: string | undefined }
): Reply =>
  customToolCall(
    "apply_patch",
    typeof patch === "string" ? patch : [
      "*** Begin Patch",
      `*** Add File: ${patch.addFile}`,
      ...patch.contents.replace(/\n$/, "").split("\n").map((line) => `+${line}`),
      "*** End Patch",
      ""
    ].join("\n"),
    options
  )

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
}): Reply =>
  Reply.Slow({
    deltas: Math.max(1, Math.floor(options?.deltas ?? 50)),
    interval: Duration.fromInputUnsafe(options?.interval ?? "100 millis")
  })

/**
 * A stalled stream: `200 OK` and the SSE headers, then nothing, until the client disconnects or the server's scope
 * closes. Codex waits for its stream idle timeout (5 minutes by default); Tether's stall timeout comes first.
 *
 * @category constructors
 * @since 0.1.0
 */
export const stall: Reply = Reply.Stall()

/**
 * A dropped stream: `deltas` text deltas (default 1), then the response ends without `response.completed`.
 *
 * Codex treats it as a stream that broke and reconnects, up to the provider's `stream_max_retries` (5 by default; 0
 * in {@link offlineOptions}), telling the client with an `error` notification (`willRetry: true`) per retry; past
 * the limit the turn fails. (Retries of HTTP errors, {@link apiError}, are silent: only streams announce theirs.) As
 * with errors, `attempts` (default `Infinity`) says how many attempts of the same call a list script answers with it.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 *
 * // With stream_max_retries >= 1: an error notification with willRetry, then the retry's text.
 * const script = [MockOpenAI.drop({ attempts: 1 }), MockOpenAI.text("back again")]
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const drop = (
  options?: { readonly deltas?: number | undefined; readonly attempts?: number | undefined }
): Reply =>
  Reply.Drop({
    deltas: Math.max(0, Math.floor(options?.deltas ?? 1)),
    attempts: Math.max(1, options?.attempts ?? Infinity)
  })

const errorTypes: Record<number, readonly [type: string, code: string | null]> = {
  400: ["invalid_request_error", null],
  401: ["invalid_request_error", "invalid_api_key"],
  403: ["invalid_request_error", "unsupported_country_region_territory"],
  404: ["invalid_request_error", "model_not_found"],
  429: ["requests", "rate_limit_exceeded"]
}

/**
 * An API error with `status` and the OpenAI error body `{"error":{"message","type","param","code"}}` (type and
 * code as the real API sends them for the status: `rate_limit_exceeded` for 429, `server_error` for 5xx, …).
 *
 * Codex retries 429 and 5xx with backoff up to the provider's `request_max_retries` (4 by default; 0 in
 * {@link offlineOptions}), reporting each retry as an `error` notification with `willRetry: true`, and does not
 * pass the body's message on for 5xx (the turn fails with a generic text and `codexErrorInfo`). In a list script
 * an error therefore answers every retry of the same call (same `input`) and the next reply is used for the next
 * call. Pass `attempts: 1` to fail only the first attempt, so that the retry gets the next reply. A function script
 * sees each retry as a request of its own.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 *
 * // The first attempt fails with a 500, Codex retries (request_max_retries >= 1), the retry gets text.
 * const script = [MockOpenAI.apiError(500, { attempts: 1 }), MockOpenAI.text("back again")]
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
    readonly code?: string | null | undefined
    readonly retryAfter?: number | undefined
    readonly attempts?: number | undefined
  }
): Reply => {
  const [type, code] = errorTypes[status] ?? (status >= 500 ? ["server_error", null] : ["invalid_request_error", null])
  return Reply.ApiError({
    status,
    errorType: options?.errorType ?? type,
    code: options?.code === undefined ? code : options.code,
    message: options?.message ?? `mock ${status}`,
    retryAfter: Option.fromUndefinedOr(options?.retryAfter),
    attempts: Math.max(1, options?.attempts ?? Infinity)
  })
}

/**
 * The default reply: `"Tool said: <output>"` after a tool call's output, otherwise
 * `"Hello from mock #<n>: <prompt>"` (`n` counts `/responses` requests from 1).
 *
 * @category constructors
 * @since 0.1.0
 */
export const echo: Reply = Reply.Echo()

// ---------------------------------------------------------------------------------------------------------------
// Requests, scripts and the log
// ---------------------------------------------------------------------------------------------------------------

/**
 * The output of a tool call that the last `input` item carries (Codex sends it back to the model).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolOutput {
  readonly kind: "function" | "custom"
  readonly callId: string
  /** The output as text (content items' texts joined with newlines). */
  readonly output: string
}

/**
 * A parsed `POST {base}/responses` body, as a script sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface ResponsesRequest {
  /** 0-based position among the `/responses` requests this server received. */
  readonly index: number
  readonly model: string
  readonly stream: boolean
  /** Names of the tools the request offers (`exec_command`, `apply_patch`, …). */
  readonly toolNames: ReadonlyArray<string>
  /**
   * The last text of the last user message that is not context Codex adds (`<environment_context>`,
   * `<turn_aborted>`, … blocks): normally the prompt of the running turn. Empty when there is none.
   */
  readonly prompt: string
  /** Every user text of `input` that is not such context, oldest first: the conversation's prompts. */
  readonly prompts: ReadonlyArray<string>
  /** The tool output the request ends with, if any (the follow-up call after a tool ran). */
  readonly toolOutput: Option.Option<ToolOutput>
  /** The whole JSON body, as sent. */
  readonly body: unknown
}

/**
 * The behaviour of the mock model.
 *
 * - A list of replies, consumed one per model call, in order; once exhausted, every request gets {@link echo}.
 *   Retries of a call that got an {@link apiError} get the same error (see there).
 * - A function from the request to a reply (it sees `request.index`, `request.prompt`, `request.toolOutput`).
 *
 * @category models
 * @since 0.1.0
 */
export type Script = ReadonlyArray<Reply> | ((request: ResponsesRequest) => Reply)

/**
 * A script steered by a tag at the start of the prompt, for suites that drive the CLI through prompts alone:
 *
 * - `[exec] <cmd>`: an `exec_command` call; `[escalate] <cmd>`: the same, asking for an escalation (so that
 *   `on-request` asks the host);
 * - `[patch <file>] <contents>`: an `apply_patch` that adds `<file>` with `<contents>`;
 * - `[slow <n> <ms>]`: `n` deltas `ms` apart; `[stall]`: headers, then nothing;
 * - `[error <status>]`: that HTTP error on every attempt; `[error <status> once]`: on the first attempt only (a
 *   retry gets text); `[drop]` and `[drop once]`: a dropped stream, the same way;
 * - `[chunks <n>]`: `Hello from the mock: <prompt>` in `n` deltas; anything else in one.
 *
 * After a tool call's output the model says `Tool said: <output>`. Each call makes a fresh script (the `once`
 * errors are remembered per script).
 *
 * @category constructors
 * @since 0.1.0
 */
export const markers = (): Script => {
  const failedOnce = new Set<string>()
  return (request) => {
    if (Option.isSome(request.toolOutput)) return echo
    const prompt = request.prompt
    const exec = /^\[(exec|escalate)\] (.+)$/s.exec(prompt)
    if (exec !== null) {
      return execCommand(exec[2], exec[1] === "escalate" ? { escalate: "the mock asks to leave the sandbox" } : {})
    }
    const patch = /^\[patch (\S+)\] ?(.*)$/s.exec(prompt)
    if (patch !== null) return applyPatch({ addFile: patch[1], contents: patch[2] + "\n" })
    const slowTag = /^\[slow (\d+) (\d+)\]/.exec(prompt)
    if (slowTag !== null) return slow({ deltas: Number(slowTag[1]), interval: Duration.millis(Number(slowTag[2])) })
    if (prompt.startsWith("[stall]")) return stall
    const error = /^\[error (\d{3})( once)?\]/.exec(prompt)
    if (error !== null && (error[2] === undefined || !failedOnce.has(prompt))) {
      failedOnce.add(prompt)
      return apiError(Number(error[1]))
    }
    const dropped = /^\[drop( once)?\]/.exec(prompt)
    if (dropped !== null && (dropped[1] === undefined || !failedOnce.has(prompt))) {
      failedOnce.add(prompt)
      return drop()
    }
    const chunks = /^\[chunks (\d+)\]/.exec(prompt)
    return text(`Hello from the mock: ${prompt}`, { chunks: chunks === null ? 1 : Number(chunks[1]) })
  }
}

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
  /** The path without the query (`/v1/responses`). */
  readonly path: string
  /** The query string including `?`, or `""`. */
  readonly query: string
  /** Request headers (lower-case names), as sent (`authorization` carries the key the test gave Codex). */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed body of a `/responses` request. */
  readonly request: Option.Option<ResponsesRequest>
  /** What the mock answered. */
  readonly reply: ReplyKind
  /** The HTTP status sent. */
  readonly status: number
  /** For streamed replies, how many `response.output_text.delta` events were written so far (updated live). */
  readonly deltasSent: number
  readonly outcome: Outcome
}

/**
 * A running mock Responses API.
 *
 * @category models
 * @since 0.1.0
 */
export interface MockOpenAI {
  /** `http://127.0.0.1:<port>/v1`: the provider's base URL (Codex posts to `{url}/responses`). */
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
  /** The log as it changes: its current value, then every new version. */
  readonly changes: Stream.Stream<ReadonlyArray<LoggedRequest>>
}

/**
 * The service key for a {@link MockOpenAI} provided by {@link layer}.
 *
 * @category services
 * @since 0.1.0
 */
export const MockOpenAI: Context.Service<MockOpenAI, MockOpenAI> = Context.Service("@tether/testing/MockOpenAI")

// ---------------------------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------------------------

/**
 * Starts a mock Responses API on `127.0.0.1` at an ephemeral port. Closing the scope interrupts in-flight replies,
 * drops open connections and stops the server.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockOpenAI.make((request) =>
 *     request.prompt.includes("fail") ? MockOpenAI.apiError(500) : MockOpenAI.echo
 *   )
 *   const response = yield* Effect.promise(() =>
 *     fetch(`${mock.url}/responses`, {
 *       method: "POST",
 *       body: JSON.stringify({
 *         model: "m",
 *         stream: true,
 *         input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }]
 *       })
 *     }).then((r) => r.text())
 *   )
 *   return response // event: response.created …  event: response.completed
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (script?: Script) => Effect.Effect<MockOpenAI, never, Scope.Scope> = Effect.fnUntraced(
  function*(script?: Script) {
    const log = yield* SubscriptionRef.make<ReadonlyArray<LoggedRequest>>([])
    const state = { seq: 0, responses: 0 }
    // Codex resends the same `input` on a retry.
    const choose = MockServer.chooser(script, {
      fallback: echo,
      keyOf: (request: ResponsesRequest) =>
        JSON.stringify(Json.isRecord(request.body) ? request.body.input : undefined),
      attempts: (reply) => reply._tag === "ApiError" || reply._tag === "Drop" ? reply.attempts : undefined
    })
    const ctx: HandlerContext = {
      log,
      nextSeq: () => state.seq++,
      nextResponsesIndex: () => state.responses++,
      choose
    }
    const port = yield* MockServer.listen((req, res) => handle(ctx, req, res))
    return MockOpenAI.of({
      url: `http://127.0.0.1:${port}/v1`,
      port,
      requests: SubscriptionRef.get(log),
      awaitRequests: MockServer.awaitLog(log),
      changes: SubscriptionRef.changes(log)
    })
  }
)

/**
 * A layer that provides a {@link MockOpenAI} running `script` for the lifetime of the layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (script?: Script): Layer.Layer<MockOpenAI> => Layer.effect(MockOpenAI, make(script))

/**
 * The folders of an offline Codex server: `home` holds `codex` (`CODEX_HOME`: configuration, sqlite state,
 * rollouts), `tmp` (`TMPDIR`: the Linux sandbox's mount targets) and `work` (the working directory); `HOME` is
 * `home` too, so the login shell Codex starts for its shell snapshot reads no one's `.bashrc`.
 *
 * @category models
 * @since 0.1.0
 */
export interface OfflineFolders {
  readonly home: string
  readonly codexHome: string
  readonly tmpDir: string
  readonly cwd: string
}

/**
 * `CodexSession` options that run the real `codex app-server` offline against the mock at `baseUrl`, inside
 * `folders`: a custom Responses-API provider on the mock with a dummy key, retries off (`requestMaxRetries` and
 * `streamMaxRetries`, default 0: a failing mock would otherwise cost 4–5 retries with backoff), plugins off,
 * `CODEX_HOME`, `TMPDIR`, `HOME` and the cwd in the folders, and a clean environment (`PATH` only, besides).
 * Spread your own options over it (model, approval policy, sandbox, policy, timeouts).
 *
 * @category constructors
 * @since 0.1.0
 */
export const offlineOptions = (options: {
  readonly baseUrl: string
  readonly folders: OfflineFolders
  /** `request_max_retries` and `stream_max_retries` (default 0). */
  readonly retries?: number | undefined
  /** The `PATH` of the server (default: `/usr/local/bin:/usr/bin:/bin`). */
  readonly path?: string | undefined
}): CodexOptions.Options => ({
  provider: {
    id: "mock",
    name: "MockOpenAI",
    baseUrl: options.baseUrl,
    apiKey: Redacted.make("sk-mock"),
    requestMaxRetries: options.retries ?? 0,
    streamMaxRetries: options.retries ?? 0
  },
  plugins: false,
  codexHome: options.folders.codexHome,
  tmpDir: options.folders.tmpDir,
  cwd: options.folders.cwd,
  env: {
    mode: "clean",
    set: { HOME: options.folders.home, PATH: options.path ?? "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" }
  }
})

/**
 * A throwaway home for the real `codex` running offline, made by {@link offlineHome}.
 *
 * @category models
 * @since 0.1.0
 */
export interface OfflineHome extends OfflineFolders {
  /** {@link offlineOptions} for these folders. */
  readonly options: CodexOptions.Options
}

/**
 * Makes the {@link OfflineFolders} for running the real `codex` offline against the mock at `baseUrl`, and the
 * session options that use them ({@link offlineOptions}). Everything is removed when the scope closes. A
 * temporary directory that cannot be created is a defect.
 *
 * @example
 * ```ts
 * import { MockOpenAI } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const mock = yield* MockOpenAI.make([MockOpenAI.text("hi")])
 *   const { options } = yield* MockOpenAI.offlineHome({ baseUrl: mock.url })
 *   // ... CodexSession.make({ ...options, model: "gpt-5.5" }) ...
 * }).pipe(Effect.scoped)
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const offlineHome = (options: {
  readonly baseUrl: string
  /** `request_max_retries` and `stream_max_retries` (default 0). */
  readonly retries?: number | undefined
  /** The temporary directory's name prefix (default `"tether-codex-"`). */
  readonly prefix?: string | undefined
}): Effect.Effect<OfflineHome, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const home = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), options.prefix ?? "tether-codex-")))
        for (const dir of ["codex", "tmp", "work"]) Fs.mkdirSync(Path.join(home, dir))
        return home
      }),
      (home) => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true }))
    ),
    (home): OfflineHome => {
      const folders: OfflineFolders = {
        home,
        codexHome: Path.join(home, "codex"),
        tmpDir: Path.join(home, "tmp"),
        cwd: Path.join(home, "work")
      }
      return { ...folders, options: offlineOptions({ baseUrl: options.baseUrl, folders, retries: options.retries }) }
    }
  )

// ---------------------------------------------------------------------------------------------------------------
// Request handling
// ---------------------------------------------------------------------------------------------------------------

interface HandlerContext {
  readonly log: SubscriptionRef.SubscriptionRef<ReadonlyArray<LoggedRequest>>
  readonly nextSeq: () => number
  readonly nextResponsesIndex: () => number
  readonly choose: (request: ResponsesRequest) => Reply
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

    if (req.method === "POST" && url.pathname === "/v1/responses") {
      const body = Option.getOrUndefined(Option.filter(Json.parseJson(raw), Json.isRecord))
      if (body === undefined) {
        yield* record({ request: Option.none(), reply: "BadRequest", status: 400, deltasSent: 0, outcome: "completed" })
        return yield* sendJson(res, 400, errorBody("invalid_request_error", null, "mock: body is not a JSON object"))
      }
      const request = parseResponsesRequest(ctx.nextResponsesIndex(), body)
      const chosen = yield* Effect.try({
        try: () => ctx.choose(request),
        catch: (error): string => error instanceof Error ? error.message : String(error)
      }).pipe(Effect.result)
      if (chosen._tag === "Failure") {
        yield* record({
          request: Option.some(request),
          reply: "ScriptError",
          status: 500,
          deltasSent: 0,
          outcome: "completed"
        })
        return yield* sendJson(res, 500, errorBody("server_error", null, `mock: the script threw: ${chosen.failure}`))
      }
      const reply = chosen.success
      if (reply._tag === "ApiError") {
        yield* record({
          request: Option.some(request),
          reply: reply._tag,
          status: reply.status,
          deltasSent: 0,
          outcome: "completed"
        })
        const extra: Record<string, string> = Option.match(reply.retryAfter, {
          onNone: () => ({}),
          onSome: (seconds) => ({ "retry-after": String(seconds) })
        })
        return yield* sendJson(res, reply.status, errorBody(reply.errorType, reply.code, reply.message), extra)
      }
      yield* record({
        request: Option.some(request),
        reply: reply._tag,
        status: 200,
        deltasSent: 0,
        outcome: "pending"
      })
      // The log follows the stream live, so a test can wait for "streaming has begun" before interrupting.
      const sent = { deltas: 0 }
      const write = reply._tag === "Stall"
        ? Effect.andThen(writeHead(res), Effect.never)
        : streamResponse(
          res,
          planResponse(request, reply, estimateTokens(raw)),
          Effect.suspend(() => settle({ deltasSent: ++sent.deltas }))
        )
      const completed = yield* Effect.raceFirst(write.pipe(Effect.as(true)), clientGone(res).pipe(Effect.as(false)))
      return yield* settle({ outcome: completed ? "completed" : "client-closed" })
    }
    yield* record({ request: Option.none(), reply: "NotFound", status: 404, deltasSent: 0, outcome: "completed" })
    return yield* sendJson(
      res,
      404,
      errorBody("invalid_request_error", "not_found", `mock: no route for ${req.method} ${url.pathname}`)
    )
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

const errorBody = (type: string, code: string | null, message: string) => ({
  error: { message, type, param: null, code }
})

const mockId = (prefix: string) => `${prefix}_mock${Crypto.randomBytes(10).toString("hex")}`

const sendJson = (res: Http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  Effect.sync(() => {
    if (res.destroyed) return
    res.writeHead(status, { "content-type": "application/json", "x-request-id": mockId("req"), ...headers })
    res.end(JSON.stringify(body))
  })

/** Codex's own context blocks in user messages (`<environment_context>…</environment_context>`, …). */
const contextBlock = /^<([A-Za-z_][\w -]*)>[\s\S]*<\/\1>$/

const parseResponsesRequest = (index: number, body: Json.JsonObject): ResponsesRequest => {
  const input = Array.isArray(body.input) ? body.input.filter(Json.isRecord) : []
  const tools = Array.isArray(body.tools) ? body.tools.filter(Json.isRecord) : []
  const userTexts = (item: Json.JsonObject): ReadonlyArray<string> =>
    (item.type === "message" || item.type === undefined) && item.role === "user"
      ? contentTexts(item.content).filter((text) => !contextBlock.test(text.trim()))
      : []
  const prompts = input.flatMap(userTexts)
  const lastUser = input.findLast((item) => userTexts(item).length > 0)
  const last = input.at(-1)
  const toolOutput =
    last !== undefined && (last.type === "function_call_output" || last.type === "custom_tool_call_output")
      ? Option.some<ToolOutput>({
        kind: last.type === "function_call_output" ? "function" : "custom",
        callId: String(last.call_id ?? ""),
        output: contentTexts(last.output).join("\n")
      })
      : Option.none()
  return {
    index,
    model: typeof body.model === "string" ? body.model : "mock-model",
    stream: body.stream === true,
    toolNames: tools.map((tool) => String(tool.name ?? tool.type ?? "")),
    prompt: lastUser === undefined ? "" : userTexts(lastUser).at(-1) ?? "",
    prompts,
    toolOutput,
    body
  }
}

/** The texts of a message's or an output's content: the string itself, or its items' `text`s. */
const contentTexts = (content: unknown): ReadonlyArray<string> => {
  if (typeof content === "string") return [content]
  if (!Array.isArray(content)) return []
  return content.flatMap((item) => Json.isRecord(item) && typeof item.text === "string" ? [item.text] : [])
}

// ---------------------------------------------------------------------------------------------------------------
// Replies on the wire
// ---------------------------------------------------------------------------------------------------------------

type OutputItem =
  | { readonly type: "message"; readonly id: string; readonly pieces: ReadonlyArray<string> }
  | {
    readonly type: "function_call"
    readonly id: string
    readonly callId: string
    readonly name: string
    readonly arguments: string
  }
  | {
    readonly type: "custom_tool_call"
    readonly id: string
    readonly callId: string
    readonly name: string
    readonly input: string
  }

interface Plan {
  readonly id: string
  readonly items: ReadonlyArray<OutputItem>
  /** Pause before each delta after the first one (slow streams). */
  readonly interval: Duration.Duration
  readonly usage: { readonly input: number; readonly output: number }
  /** End after the first item's deltas, without `response.output_item.done` or `response.completed`. */
  readonly drop: boolean
}

const split = (text: string, parts: number): ReadonlyArray<string> => {
  if (parts <= 1 || text.length <= 1) return [text]
  const size = Math.ceil(text.length / parts)
  const pieces: Array<string> = []
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size))
  return pieces
}

const echoText = (request: ResponsesRequest) =>
  Option.match(request.toolOutput, {
    onNone: () => `Hello from mock #${request.index + 1}: ${request.prompt}`,
    onSome: (output) => `Tool said: ${output.output}`
  })

const planResponse = (
  request: ResponsesRequest,
  reply: Exclude<Reply, { readonly _tag: "ApiError" | "Stall" }>,
  inputTokens: number
): Plan => {
  const items: Array<OutputItem> = []
  let interval = Duration.zero
  const message = (pieces: ReadonlyArray<string>) => items.push({ type: "message", id: mockId("msg"), pieces })
  switch (reply._tag) {
    case "Text":
      message(split(reply.text, reply.chunks))
      break
    case "Echo":
      message([echoText(request)])
      break
    case "Slow":
      message(Array.from({ length: reply.deltas }, (_, i) => `w${i} `))
      interval = reply.interval
      break
    case "Drop":
      message(Array.from({ length: reply.deltas }, (_, i) => `w${i} `))
      break
    case "FunctionCall":
      if (reply.preamble !== "") message([reply.preamble])
      items.push({
        type: "function_call",
        id: mockId("fc"),
        callId: Option.getOrElse(reply.callId, () => mockId("call")),
        name: reply.name,
        arguments: reply.arguments
      })
      break
    case "CustomToolCall":
      items.push({
        type: "custom_tool_call",
        id: mockId("ctc"),
        callId: Option.getOrElse(reply.callId, () => mockId("call")),
        name: reply.name,
        input: reply.input
      })
      break
  }
  const output = items.reduce((n, item) => n + (item.type === "message" ? item.pieces.length : 1), 0)
  return { id: mockId("resp"), items, interval, usage: { input: inputTokens, output }, drop: reply._tag === "Drop" }
}

const writeHead = (res: Http.ServerResponse) =>
  Effect.sync(() => {
    if (res.destroyed || res.headersSent) return
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-request-id": mockId("req")
    })
    res.flushHeaders()
  })

const writeEvent = (res: Http.ServerResponse, type: string, data: object) =>
  Effect.sync(() => {
    if (!res.destroyed) res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
  })

const doneItem = (item: OutputItem): object => {
  switch (item.type) {
    case "message":
      return {
        type: "message",
        id: item.id,
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: item.pieces.join(""), annotations: [] }]
      }
    case "function_call":
      return {
        type: "function_call",
        id: item.id,
        call_id: item.callId,
        name: item.name,
        arguments: item.arguments,
        status: "completed"
      }
    case "custom_tool_call":
      return {
        type: "custom_tool_call",
        id: item.id,
        call_id: item.callId,
        name: item.name,
        input: item.input,
        status: "completed"
      }
  }
}

const streamResponse = (res: Http.ServerResponse, plan: Plan, onDelta: Effect.Effect<void>) =>
  Effect.gen(function*() {
    yield* writeHead(res)
    yield* writeEvent(res, "response.created", { response: { id: plan.id, status: "in_progress" } })
    let first = true
    for (let index = 0; index < plan.items.length; index++) {
      const item = plan.items[index]
      if (item.type !== "message") {
        yield* writeEvent(res, "response.output_item.added", { output_index: index, item: doneItem(item) })
        yield* writeEvent(res, "response.output_item.done", { output_index: index, item: doneItem(item) })
        continue
      }
      yield* writeEvent(res, "response.output_item.added", {
        output_index: index,
        item: { type: "message", id: item.id, role: "assistant", status: "in_progress", content: [] }
      })
      for (const piece of item.pieces) {
        if (!first && Duration.isGreaterThan(plan.interval, Duration.zero)) yield* Effect.sleep(plan.interval)
        first = false
        yield* writeEvent(res, "response.output_text.delta", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          delta: piece
        })
        yield* onDelta
      }
      if (plan.drop) break
      yield* writeEvent(res, "response.output_item.done", { output_index: index, item: doneItem(item) })
    }
    // A dropped stream just ends: no `response.output_item.done`, no `response.completed`.
    if (!plan.drop) {
      yield* writeEvent(res, "response.completed", {
        response: {
          id: plan.id,
          status: "completed",
          usage: {
            input_tokens: plan.usage.input,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: plan.usage.output,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: plan.usage.input + plan.usage.output
          }
        }
      })
    }
    yield* Effect.sync(() => res.end())
  })
