/**
 * A chat server: many conversations, each a long-lived Claude Code session owned by a `SessionRegistry`.
 *
 *   pnpm --filter @tether/examples chat-server          # simulated CLI (MockTransport): works anywhere
 *   TETHER_REAL=1 pnpm --filter @tether/examples chat-server   # the real `claude` (NodeTransport)
 *
 * The same routes over a cluster of runners (`@tether/cluster`) are `chat-cluster.ts`: this module exports them, and
 * its registry service (`Conversations`), whose configuration is plain data for that reason.
 *
 * It listens on 127.0.0.1 only (PORT, default 8787). Routes:
 *
 * | route | what it does |
 * | --- | --- |
 * | `POST /conversations/:id/messages` `{ "text", "model"?, "wait"? }` | sends a turn (starting the conversation's session if needed); 202 with the turn id, or 200 with the result when `wait` is true |
 * | `GET /conversations/:id/events` | the session's events as server-sent events (`?from=start\|latest\|<seq>`, or `Last-Event-ID` to resume) |
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
 * With TETHER_REAL=1 TETHER_MOCK_API=1 the real CLI (the version this repository pins, unless TETHER_CLAUDE_PATH
 * names another) talks to a local mock of the Messages API (`MockAnthropic`) in a throwaway home directory, so the
 * real path can be tried offline (run it under scripts/netns.sh to be sure nothing leaves the machine). Without
 * TETHER_MOCK_API the real CLI uses the host's own login or ANTHROPIC_API_KEY.
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
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { ClaudeSession, Permission, SessionRegistry, TetherError, type Transport } from "@tether/core"
import { MockAnthropic, MockClaude, MockTransport } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Config, ConfigProvider, Context, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Http from "node:http"
import * as ClaudeExecutable from "./claudeExecutable.ts"

// ---------------------------------------------------------------------------------------------------------------
// The transport: the real CLI, or a simulated one
// ---------------------------------------------------------------------------------------------------------------

/** The simulated CLI: echoes prompts word by word; a prompt that mentions "deploy" asks to run a Bash command. */
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

const real = process.env.TETHER_REAL === "1"
const mockApi = real && process.env.TETHER_MOCK_API === "1"

/** The real CLI is found as the quick start finds it: offline, the version this repository pins first. */
export const TransportLive: Layer.Layer<Transport.Transport, TetherError.ExecutableNotFound> = real
  ? Layer.unwrap(
    Effect.map(
      ClaudeExecutable.find({ online: !mockApi }),
      (claude) => NodeTransport.layer({ executables: { claude } })
    )
  )
  : MockTransport.layer(simulated)

// ---------------------------------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------------------------------

/** Every tool use waits for the client's answer. */
const deferToClient: Permission.Policy = () => Effect.succeed(Permission.defer)

/** What every conversation's session starts with (here: the environment of the offline real CLI, if any). */
export class SessionDefaults extends Context.Service<SessionDefaults, Pick<ClaudeSession.Options, "env" | "cwd">>()(
  "examples/chat-server/SessionDefaults"
) {}

/**
 * The real CLI against a local mock of the Messages API, in a throwaway home directory removed at shutdown (tools
 * run in it too).
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
  return { cwd, env: { mode: "clean" as const, set: env } }
}))

export const SessionDefaultsLive = mockApi
  ? OfflineApi
  : Layer.succeed(SessionDefaults)({})

/** The session configuration of a conversation. The policy is a function: it is not part of the fingerprint. */
const sessionConfig = Effect.fnUntraced(function*(model: string | undefined) {
  const defaults = yield* SessionDefaults
  const options: ClaudeSession.Options = {
    ...defaults,
    ...(model === undefined ? {} : { model }),
    includePartialMessages: true,
    policy: deferToClient
  }
  return options
})

/** What a client chooses per conversation: plain data, so that a cluster can send it and store it. */
export const ConversationConfig = Schema.Struct({ model: Schema.optional(Schema.String) })

/** The conversations: Claude sessions by id, started from the defaults, the client's model and the policy. */
export class Conversations extends SessionRegistry.Service<Conversations>()("examples/chat-server/Conversations", {
  acquire: (_id, config: typeof ConversationConfig.Type) =>
    Effect.flatMap(sessionConfig(config.model), (options) => ClaudeSession.make(options)),
  fingerprint: SessionRegistry.fingerprint
}) {}

const RegistryLive = Conversations.layerConfig(Config.nested(SessionRegistry.config, "tetherRegistry")).pipe(
  Layer.provide(TransportLive),
  Layer.provide(SessionDefaultsLive),
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
  const conversation = yield* registry.getOrCreate(id, body.model === undefined ? {} : { model: body.model })
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
    totalCostUsd: result.totalCostUsd
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

const events = Effect.gen(function*() {
  const id = yield* pathParam("id")
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(request.url, "http://127.0.0.1")
  const registry = yield* Conversations
  // 404 now rather than an empty stream; the subscription itself lives as long as the response body.
  const snapshot = yield* registry.snapshot(id)
  const from = fromOf(request, url)
  const deliveries = Stream.unwrap(registry.subscribe(id, from, { generation: snapshot.generation })).pipe(
    Stream.map((delivery) =>
      delivery._tag === "Lag"
        ? sse("lag", { missed: delivery.missed, resumeSeq: delivery.resumeSeq })
        : sse(delivery.event._tag, delivery.event, delivery.seq)
    ),
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
  Effect.logInfo(`chat-server on http://127.0.0.1:${port} (${real ? "the real claude CLI" : "a simulated CLI"})`).pipe(
    Effect.andThen(Layer.launch(serve(RegistryLive))),
    NodeRuntime.runMain
  )
}
