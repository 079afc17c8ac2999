/**
 * A chat server: many conversations, each a long-lived coding-agent session (Claude Code, Codex, or Gemini CLI over
 * the Agent Client Protocol) owned by a `SessionRegistry`.
 *
 *   pnpm --filter @tether/examples chat-server          # simulated CLIs (MockTransport): works anywhere
 *   TETHER_REAL=1 pnpm --filter @tether/examples chat-server   # the real `claude` (NodeTransport)
 *   TETHER_PROVIDER=codex pnpm --filter @tether/examples chat-server   # conversations run Codex by default
 *   TETHER_PROVIDER=gemini pnpm --filter @tether/examples chat-server  # ... or Gemini CLI (`gemini --acp`)
 *
 * TETHER_PROVIDER (`claude` unless set; `codex` or `gemini`) is the provider of new conversations; a message may name
 * another one (`"provider": "gemini"`), and the registry holds the three kinds side by side (a conversation keeps the
 * provider it started with: another one for a live conversation is a `SessionConflict`). A Gemini conversation is an
 * `AcpSession` of the `AcpAgent.gemini` preset: any other ACP agent would be served the same way.
 *
 * The same routes over a cluster of runners (`@tether/cluster`) are `chat-cluster.ts`: this module exports them, and
 * its registry service (`Conversations`), whose configuration is plain data for that reason.
 *
 * It listens on 127.0.0.1 only (PORT, default 8787). Routes:
 *
 * | route | what it does |
 * | --- | --- |
 * | `POST /conversations/:id/messages` `{ "text", "model"?, "provider"? (`claude`, `codex`, `gemini`), "wait"? }` | sends a turn (starting the conversation's session if needed); 202 with the turn id, or 200 with the result when `wait` is true |
 * | `GET /conversations/:id/events` | the session's events as server-sent events (`?from=start\|latest\|<seq>`, or `Last-Event-ID` to resume): normalized events only, without the CLI's raw frames; `?raw=1` adds them (every `Frame` event, and `raw` on each event) |
 * | `GET /conversations/:id/permissions` | permission requests waiting for an answer |
 * | `POST /conversations/:id/permissions/:requestId` `{ "behavior": "allow"\|"deny", "message"?, "updatedInput"? }` | answers one |
 * | `POST /conversations/:id/interrupt` | interrupts the running turn |
 * | `DELETE /conversations/:id` | evicts the session (graceful: waits for the running turn, or force-evicts after `?timeout=<duration>`, e.g. `?timeout=30%20seconds`; `?force=1` interrupts the running turn at once) |
 * | `GET /conversations`, `GET /conversations/:id` | snapshots |
 *
 * Every error is JSON with the error's tag, message and disposition (`safeToFallback`, `safeToRequeue`,
 * `deliveryUncertain`), so a client knows whether it may resend. Tool uses are never decided by the server: every
 * permission request is deferred to the client (answered through the permissions route, or denied after the
 * session's permission timeout).
 *
 * With TETHER_REAL=1 TETHER_MOCK_API=1 the real CLIs (the versions this repository pins, unless TETHER_CLAUDE_PATH,
 * TETHER_CODEX_PATH or TETHER_GEMINI_PATH names another) talk to local mocks of the Messages API (`MockAnthropic`), of
 * the Responses API (`MockOpenAI`) and of the Gemini API (`MockGemini`) in throwaway home directories, so the real
 * path can be tried offline (run it under scripts/netns.sh to be sure nothing leaves the machine). Without
 * TETHER_MOCK_API the real CLIs use the host's own logins or API keys; Gemini CLI, which runs in a home of the
 * session's own, needs GEMINI_API_KEY for that and talks to `MockGemini` without it, as the quick start does. The
 * real path needs the default provider's CLI; the others are used if they are found.
 *
 * Registry settings come from the environment: TETHER_REGISTRY_CAPACITY, TETHER_REGISTRY_IDLE_TIME_TO_LIVE,
 * TETHER_REGISTRY_ON_CONFLICT, TETHER_REGISTRY_ADMISSION_TIMEOUT, TETHER_REGISTRY_SHUTDOWN_CONCURRENCY.
 *
 * Try it:
 *
 *   curl -N localhost:8787/conversations/demo/events &
 *   curl -X POST localhost:8787/conversations/demo/messages -d '{"text":"hello there","wait":true}'
 *   curl -X POST localhost:8787/conversations/demo/messages -d '{"text":"please deploy"}'
 *   curl localhost:8787/conversations/demo/permissions
 *   curl -X POST localhost:8787/conversations/demo/permissions/<requestId> -d '{"behavior":"allow"}'
 *   curl -X DELETE localhost:8787/conversations/demo
 */
import { NodeHttpServer, NodeRuntime, NodeServices } from "@effect/platform-node"
import { AcpAgent, AcpSession } from "@tether/acp"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { Permission, SessionRegistry, TetherError, type Transport } from "@tether/core"
import type { SessionEvent } from "@tether/core"
import { MockAcp, MockAnthropic, MockClaude, MockCodex, MockGemini, MockOpenAI, MockTransport } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Config, ConfigProvider, Context, Duration, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Http from "node:http"
import * as ClaudeExecutable from "./claudeExecutable.ts"
import * as CodexExecutable from "./codexExecutable.ts"
import * as GeminiExecutable from "./geminiExecutable.ts"

// ---------------------------------------------------------------------------------------------------------------
// The transport: the real CLI, or a simulated one
// ---------------------------------------------------------------------------------------------------------------

/** The simulated CLIs: echo prompts word by word; a prompt that mentions "deploy" asks to run a shell command. */
const simulated = MockClaude.make(
  [
    MockClaude.when(
      /deploy/i,
      MockClaude.text("Let me run the deployment."),
      MockClaude.tool({ name: "Bash", input: { command: "make deploy" }, output: "deployed v1.2.3" }),
      MockClaude.text("The deployment finished: v1.2.3 is live.")
    )
  ],
  {
    otherwise: (prompt) => [
      MockClaude.text(`You said: ${prompt}`.split(/(?<= )/), { delay: "40 millis" })
    ]
  }
)

const simulatedCodex = MockCodex.make(
  [
    MockCodex.when(
      /deploy/i,
      MockCodex.text("Let me run the deployment."),
      MockCodex.command({ command: "make deploy", output: "deployed v1.2.3\n" }),
      MockCodex.text("The deployment finished: v1.2.3 is live.")
    )
  ],
  { otherwise: (prompt) => [MockCodex.text(`You said: ${prompt}`.split(/(?<= )/), { delay: "40 millis" })] }
)

/** The simulated ACP agent (for Gemini conversations): the same, its shell tool asking the client first. */
const simulatedAcp = MockAcp.make(
  [
    MockAcp.when(
      /deploy/i,
      MockAcp.text("Let me run the deployment."),
      MockAcp.tool({ command: "make deploy", output: "deployed v1.2.3" }),
      MockAcp.text("The deployment finished: v1.2.3 is live.")
    )
  ],
  { otherwise: (prompt) => [MockAcp.text(`You said: ${prompt}`.split(/(?<= )/), { delay: "40 millis" })] }
)

const real = process.env.TETHER_REAL === "1"
const mockApi = real && process.env.TETHER_MOCK_API === "1"

/** The providers a conversation may run. */
const providers = ["claude", "codex", "gemini"] as const
type Provider = typeof providers[number]

/** The provider of a conversation whose first message names none. */
const defaultProvider: Provider = process.env.TETHER_PROVIDER === "codex"
  ? "codex"
  : process.env.TETHER_PROVIDER === "gemini"
  ? "gemini"
  : "claude"

/** Gemini CLI against `MockGemini`: with TETHER_MOCK_API, or without a GEMINI_API_KEY (as the quick start does). */
const geminiKey = process.env.GEMINI_API_KEY ?? ""
const geminiOffline = mockApi || geminiKey === ""

/**
 * The real CLIs are found as the quick start finds them (offline, the versions this repository pins first): the
 * default provider's must be there, the others are used if they are found. Simulated, each program has its
 * simulator (`gemini` the ACP agent's).
 */
export const TransportLive: Layer.Layer<Transport.Transport, TetherError.ExecutableNotFound> = real
  ? Layer.unwrap(
    Effect.gen(function*() {
      const find = {
        claude: ClaudeExecutable.find({ online: !mockApi }),
        codex: CodexExecutable.find({ online: !mockApi }),
        gemini: GeminiExecutable.find({ online: !geminiOffline })
      }
      const found = yield* find[defaultProvider]
      const executables: Record<string, string> = { [defaultProvider]: found }
      for (const provider of providers) {
        if (provider === defaultProvider) continue
        const other = yield* Effect.option(find[provider])
        if (Option.isSome(other)) executables[provider] = other.value
      }
      return NodeTransport.layer({ executables })
    })
  )
  : MockTransport.layer((spec) =>
    spec.program === "codex" ? simulatedCodex : spec.program === "gemini" ? simulatedAcp : simulated
  )

// ---------------------------------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------------------------------

/** Every tool use waits for the client's answer. */
const deferToClient: Permission.Policy = () => Effect.succeed(Permission.defer)

/**
 * What every conversation's session starts with, per provider (here: the environment of the offline real CLIs, if
 * any). Gemini's are the gemini preset's options (the conversation's model is added to them) and the session's.
 */
export class SessionDefaults extends Context.Service<SessionDefaults, {
  readonly claude: Pick<ClaudeSession.Options, "env" | "cwd">
  readonly codex: CodexSession.Options
  readonly gemini: {
    readonly agent: AcpAgent.GeminiOptions
    readonly session: Pick<AcpSession.Options, "cwd" | "authMethod">
  }
}>()("examples/chat-server/SessionDefaults") {}

/**
 * Gemini CLI against a local mock of the Gemini API as its gateway, its settings and conversations in a throwaway
 * home removed at shutdown, in a clean environment: what the quick start runs without GEMINI_API_KEY.
 */
const offlineGemini = Effect.gen(function*() {
  const api = yield* MockGemini.make((request) =>
    Option.isSome(request.functionResponse)
      ? MockGemini.text("Done.", { chunks: 2 })
      : /deploy/i.test(request.prompt)
      ? MockGemini.shell("touch deployed.txt")
      : MockGemini.text(`You said: ${request.prompt}`, { chunks: 4 })
  )
  const home = yield* MockGemini.offlineHome({ baseUrl: api.url, prefix: "tether-chat-server-gemini-" })
  return {
    agent: {
      baseUrl: api.url,
      apiKey: home.env.GEMINI_API_KEY,
      home: home.home,
      env: { mode: "clean" as const, set: { HOME: home.home, TMPDIR: home.env.TMPDIR } }
    },
    session: { cwd: home.cwd }
  }
})

/** Gemini CLI against the Gemini API with the host's GEMINI_API_KEY, each session in a home of its own. */
const onlineGemini = {
  agent: { apiKey: Redacted.make(geminiKey) },
  session: { authMethod: "gemini-api-key" }
}

/**
 * The real CLIs against local mocks of the Messages API and of the Responses API, in throwaway home directories
 * removed at shutdown (tools run in them too); Gemini CLI against its mock too.
 */
const OfflineApi = Layer.effect(SessionDefaults)(Effect.gen(function*() {
  const api = yield* MockAnthropic.make((request) =>
    request.toolResult._tag === "Some"
      ? MockAnthropic.echo
      : /deploy/i.test(request.prompt)
      ? MockAnthropic.bash("touch deployed.txt")
      : MockAnthropic.text(`You said: ${request.prompt}`, { chunks: 4 })
  )
  const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: api.url, prefix: "tether-chat-server-" })
  const openai = yield* MockOpenAI.make((request) =>
    Option.isSome(request.toolOutput)
      ? MockOpenAI.echo
      : /deploy/i.test(request.prompt)
      ? MockOpenAI.execCommand("touch deployed.txt")
      : MockOpenAI.text(`You said: ${request.prompt}`, { chunks: 4 })
  )
  const codex = yield* MockOpenAI.offlineHome({ baseUrl: openai.url, prefix: "tether-chat-server-codex-" })
  return {
    claude: { cwd, env: { mode: "clean" as const, set: env } },
    codex: codex.options,
    gemini: yield* offlineGemini
  }
}))

// Against the real APIs, the host's own keys, by name: credential variables are not inherited otherwise. Simulated,
// no mock is needed (the simulated agents ignore their environment).
export const SessionDefaultsLive = mockApi
  ? OfflineApi
  : Layer.effect(SessionDefaults)(Effect.gen(function*() {
    return {
      claude: { env: { inheritCredentials: ["ANTHROPIC_API_KEY"] } },
      codex: { env: { inheritCredentials: ["OPENAI_API_KEY", "CODEX_API_KEY"] } },
      gemini: !real ? { agent: {}, session: {} } : geminiOffline ? yield* offlineGemini : onlineGemini
    }
  }))

/**
 * Claude Code, Codex and Gemini CLI (an ACP agent) sessions side by side: a configuration names its provider and
 * carries its options.
 */
const allKinds = SessionRegistry.kinds({
  claude: ClaudeSession.kind,
  codex: CodexSession.kind,
  gemini: AcpSession.kind
})

/** The session configuration of a conversation. The policy is a function: it is not part of the fingerprint. */
const sessionConfig = Effect.fnUntraced(function*(provider: Provider, model: string | undefined) {
  const defaults = yield* SessionDefaults
  const config: SessionRegistry.Kind.Config<typeof allKinds> = provider === "gemini"
    ? {
      provider,
      // Gemini CLI asks before every shell command in its default mode, as Claude does.
      options: {
        ...defaults.gemini.session,
        agent: AcpAgent.gemini({ ...defaults.gemini.agent, ...(model === undefined ? {} : { model }) }),
        ...(model === undefined ? {} : { model }),
        policy: deferToClient
      }
    }
    : provider === "codex"
    ? {
      provider,
      // Codex asks before every command under `untrusted`, as Claude does in its default permission mode.
      options: {
        ...defaults.codex,
        ...(model === undefined ? {} : { model }),
        approvalPolicy: "untrusted",
        policy: deferToClient
      }
    }
    : {
      provider,
      options: {
        ...defaults.claude,
        ...(model === undefined ? {} : { model }),
        includePartialMessages: true,
        policy: deferToClient
      }
    }
  return config
})

/** What a client chooses per conversation: plain data, so that a cluster can send it and store it. */
export const ConversationConfig = Schema.Struct({
  provider: Schema.Literals(providers),
  model: Schema.optional(Schema.String)
})

/**
 * The conversations, by conversation id: each started from the defaults, the client's provider and model, and the
 * policy. The fingerprint is the client's choice, so another provider for a live conversation is a conflict.
 */
export class Conversations extends SessionRegistry.Service<Conversations>()("examples/chat-server/Conversations", {
  acquire: (id, config: typeof ConversationConfig.Type) =>
    Effect.flatMap(sessionConfig(config.provider, config.model), (options) => allKinds.acquire(id, options)),
  fingerprint: SessionRegistry.fingerprint
}) {}

const RegistryLive = Conversations.layerConfig(Config.nested(SessionRegistry.config, "tetherRegistry")).pipe(
  Layer.provide(TransportLive),
  Layer.provide(SessionDefaultsLive),
  // The gemini preset writes its settings into the session's home through a FileSystem.
  Layer.provide(NodeServices.layer),
  Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv().pipe(ConfigProvider.constantCase)))
)

// ---------------------------------------------------------------------------------------------------------------
// Errors as HTTP responses
// ---------------------------------------------------------------------------------------------------------------

interface Tagged {
  readonly _tag: string
  readonly message: string
}

const statusOf = (tag: string): number => {
  switch (tag) {
    case "SessionNotFound":
    case "PermissionNotFound":
      return 404
    case "SessionConflict":
    case "GenerationChanged":
    case "TurnInFlight":
    case "PermissionAlreadyResolved":
      return 409
    case "CapacityExceeded":
    case "QueueFull":
    case "SessionUnavailable":
    case "RegistryClosed":
      return 503
    case "SchemaError":
    case "RequestError":
    case "InvalidConfig":
      return 400
    default:
      // The CLI or the turn failed.
      return 502
  }
}

const errorResponse = (error: Tagged) => {
  const status = statusOf(error._tag)
  const disposition = TetherError.hasDisposition(error) ? error : undefined
  return HttpServerResponse.jsonUnsafe(
    {
      error: error._tag,
      message: error.message,
      safeToFallback: disposition?.safeToFallback,
      safeToRequeue: disposition?.safeToRequeue,
      deliveryUncertain: disposition?.deliveryUncertain
    },
    {
      status,
      ...(status === 503 && disposition?.safeToRequeue === true ? { headers: { "retry-after": "1" } } : {})
    }
  )
}

/** Runs a handler, turning every expected failure into its JSON error response. */
const handle = <E extends Tagged, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.catch(effect, (error) => Effect.succeed(errorResponse(error)))

/** JSON without surprises: bigints as strings, errors as their tag, message and fields. */
const toJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v) =>
    typeof v === "bigint"
      ? v.toString()
      : v instanceof Error
      ? { ...v, _tag: (v as { _tag?: string })._tag ?? v.name, message: v.message }
      : v)

const json = (body: unknown, status = 200) =>
  HttpServerResponse.text(toJson(body), { status, contentType: "application/json" })

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

const pathParam = (name: string) => Effect.map(HttpRouter.params, (params) => decodeURIComponent(params[name] ?? ""))

const MessageBody = Schema.Struct({
  text: Schema.String,
  model: Schema.optional(Schema.String),
  provider: Schema.optional(Schema.Literals(providers)),
  wait: Schema.optional(Schema.Boolean)
})

const AnswerBody = Schema.Struct({
  behavior: Schema.Literals(["allow", "deny"]),
  message: Schema.optional(Schema.String),
  updatedInput: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
  interrupt: Schema.optional(Schema.Boolean)
})

const sendMessage = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const body = yield* HttpServerRequest.schemaBodyJson(MessageBody)
  const registry = yield* Conversations
  const conversation = yield* registry.getOrCreate(id, {
    provider: body.provider ?? defaultProvider,
    ...(body.model === undefined ? {} : { model: body.model })
  })
  // The turn belongs to the conversation, not to this HTTP request: a client that disconnects does not cancel it.
  const turn = yield* conversation.send(body.text, { interruptOnCancel: false })
  if (body.wait !== true) {
    return json({ id, generation: conversation.generation, turnId: turn.id }, 202)
  }
  const result = yield* turn.result
  return json({
    id,
    generation: conversation.generation,
    turnId: turn.id,
    text: result.text,
    sessionId: result.sessionId,
    usage: result.usage,
    // Claude reports what the turn cost; Codex does not.
    totalCostUsd: "totalCostUsd" in result ? result.totalCostUsd : undefined
  })
}).pipe(Effect.scoped, handle)

const fromOf = (request: HttpServerRequest.HttpServerRequest, url: URL) => {
  const lastEventId = request.headers["last-event-id"]
  const from = lastEventId ?? url.searchParams.get("from") ?? "latest"
  if (from === "start" || from === "latest") return from
  const seq = Number(from)
  return Number.isInteger(seq) && seq >= 0 ? { after: seq } : "latest"
}

const sse = (event: string, data: unknown, id?: number) =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${toJson(data)}\n\n`

/**
 * An event as clients see it by default: the session's normalized event without the CLI's raw frames, which carry
 * what a client has no business reading (the `initialize` answer names the account, `system/init` the machine's
 * tools and paths). `Frame` events are nothing but a raw frame: they are left out.
 */
const normalized = (event: SessionEvent.SessionEvent): object | undefined => {
  if (event._tag === "Frame") return undefined
  const { raw: _raw, ...rest } = event
  switch (rest._tag) {
    case "TurnCompleted": {
      const { raw: _resultRaw, ...result } = rest.result
      return { ...rest, result }
    }
    case "PermissionRequested": {
      const { raw: _requestRaw, ...request } = rest.request
      return { ...rest, request }
    }
    case "TurnFailed": {
      // Some errors carry the CLI's result frame (`raw`): the error's fields and message, without it.
      const { raw: _errorRaw, ...error } = rest.error as { readonly raw?: unknown }
      return { ...rest, error: { ...error, message: rest.error.message } }
    }
    default:
      return rest
  }
}

const events = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(request.url, "http://127.0.0.1")
  const registry = yield* Conversations
  // 404 now rather than an empty stream; the subscription itself lives as long as the response body.
  const snapshot = yield* registry.snapshot(id)
  const from = fromOf(request, url)
  const raw = url.searchParams.get("raw") === "1"
  const deliveries = Stream.unwrap(registry.subscribe(id, from, { generation: snapshot.generation })).pipe(
    Stream.map((delivery) => {
      if (delivery._tag === "Lag") return sse("lag", { missed: delivery.missed, resumeSeq: delivery.resumeSeq })
      const data = raw ? delivery.event : normalized(delivery.event)
      return data === undefined ? undefined : sse(delivery.event._tag, data, delivery.seq)
    }),
    Stream.filter((text) => text !== undefined),
    Stream.catch((error) => Stream.make(sse("error", error))),
    Stream.concat(Stream.make(sse("end", { id, generation: snapshot.generation })))
  )
  const keepAlive = Stream.tick("15 seconds").pipe(Stream.drop(1), Stream.map(() => ": keep-alive\n\n"))
  const body = Stream.merge(deliveries, keepAlive, { haltStrategy: "left" }).pipe(Stream.encodeText)
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })
}).pipe(handle)

const pendingPermissions = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const registry = yield* Conversations
  const pending = yield* registry.pendingPermissions(id)
  return json(pending.map(({ raw: _raw, ...request }) => request))
}).pipe(handle)

const answerPermission = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const requestId = yield* pathParam("requestId")
  const body = yield* HttpServerRequest.schemaBodyJson(AnswerBody)
  const registry = yield* Conversations
  const decision = body.behavior === "allow"
    ? Permission.allow(body.updatedInput)
    : Permission.deny(body.message ?? "denied by the user", { interrupt: body.interrupt ?? false })
  yield* registry.answerPermission(id, requestId, decision)
  return HttpServerResponse.empty()
}).pipe(handle)

const interrupt = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const registry = yield* Conversations
  const outcome = yield* registry.interrupt(id)
  return json({ id, outcome })
}).pipe(handle)

const evict = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(request.url, "http://127.0.0.1")
  const registry = yield* Conversations
  if (url.searchParams.get("force") === "1") {
    yield* registry.forceEvict(id)
  } else {
    const timeout = Option.getOrUndefined(Duration.fromInput(url.searchParams.get("timeout") as Duration.Input))
    yield* registry.evict(id, timeout === undefined ? {} : { timeout })
  }
  return HttpServerResponse.empty()
}).pipe(handle)

const list = Effect.gen(function*() {
  const registry = yield* Conversations
  return json(yield* registry.list)
})

const snapshot = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const registry = yield* Conversations
  return json(yield* registry.snapshot(id))
}).pipe(handle)

export const Routes = HttpRouter.addAll([
  HttpRouter.route("POST", "/conversations/:id/messages", sendMessage),
  HttpRouter.route("GET", "/conversations/:id/events", events),
  HttpRouter.route("GET", "/conversations/:id/permissions", pendingPermissions),
  HttpRouter.route("POST", "/conversations/:id/permissions/:requestId", answerPermission),
  HttpRouter.route("POST", "/conversations/:id/interrupt", interrupt),
  HttpRouter.route("DELETE", "/conversations/:id", evict),
  HttpRouter.route("GET", "/conversations/:id", snapshot),
  HttpRouter.route("GET", "/conversations", list)
])

const port = Number(process.env.PORT ?? 8787)

/** The HTTP server of the routes over a registry layer (this one's, or a cluster's). */
export const serve = <E, R>(registry: Layer.Layer<Conversations, E, R>) =>
  HttpRouter.serve(Routes).pipe(
    Layer.provide(registry),
    // Event streams never end by themselves: give in-flight requests 2 s at shutdown (not the default 20 s), then the
    // registry closes every session, which ends their event streams.
    Layer.provide(
      NodeHttpServer.layer(() => Http.createServer(), { port, host: "127.0.0.1", gracefulShutdownTimeout: "2 seconds" })
    )
  )

if (import.meta.main) {
  Effect.logInfo(
    `chat-server on http://127.0.0.1:${port} (${
      real ? "the real CLIs" : "simulated CLIs"
    }; ${defaultProvider} by default)`
  ).pipe(
    Effect.andThen(Layer.launch(serve(RegistryLive))),
    NodeRuntime.runMain
  )
}
