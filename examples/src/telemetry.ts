/**
 * A session's traces and metrics, sent to an OpenTelemetry collector over OTLP/HTTP with Effect's own exporter
 * (`effect/observability`): no `@opentelemetry/*` package.
 *
 *   pnpm --filter @tether/examples telemetry
 *
 * It sends to `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://127.0.0.1:4318`, the collector's OTLP/HTTP port on this
 * machine; run one with `docker run -p 127.0.0.1:4318:4318 otel/opentelemetry-collector`, or point it at Jaeger's
 * or Grafana Alloy's). It runs one session through two turns and a control request, offline: the CLI is the
 * version this repository pins (or `TETHER_CLAUDE_PATH`), talking to an embedded mock of the Messages API on
 * 127.0.0.1 in a temporary home. What reaches the collector:
 *
 * - traces: `example.conversation` (this program's span) with, under it, `tether.session` (the session's whole life),
 *   the two `tether.turn` spans (provider, turn id, model, outcome, tokens, cost, time to first output),
 *   `tether.permission` (the tool use the policy allowed) and `tether.control` (`mcp_status`);
 * - metrics: `tether_session_turns`, `tether_session_turn_duration`, `tether_session_tokens`,
 *   `tether_session_cost_usd`, … (every metric of `Session.metrics`, of `SessionRegistry.metrics` when a registry
 *   is used, and `tether_teardown_survivors` when a teardown leaves a process behind).
 *
 * The exporters send on their interval and once more when their layer is released: the program's end flushes
 * everything, the session's span included (it ends when the session is released, before the layer).
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClaudeSession } from "@tether/claude"
import { Permission } from "@tether/core"
import { MockAnthropic } from "@tether/testing"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Console, Effect, Layer, Option } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import { Otlp } from "effect/observability"
import * as ClaudeExecutable from "./claudeExecutable.ts"

const collector = process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "http://127.0.0.1:4318"

/** Traces, metrics and logs to `${collector}/v1/{traces,metrics,logs}`, as JSON, through the global `fetch`. */
const TelemetryLive = Otlp.layerJson({
  baseUrl: collector,
  resource: { serviceName: "tether-example", attributes: { "deployment.environment": "example" } }
}).pipe(Layer.provide(FetchHttpClient.layer))

const prompts = {
  hello: "Introduce yourself in one short sentence.",
  tool: "Use the Bash tool to run exactly this command: touch hello.txt"
}

/** The mock model: a sentence, or a Bash tool use and then a sentence about it. */
const mockScript: MockAnthropic.Script = (request) => {
  if (Option.isSome(request.toolResult)) return MockAnthropic.text("Done: hello.txt now exists.", { chunks: 3 })
  if (request.prompt === prompts.tool) return MockAnthropic.bash("touch hello.txt")
  return MockAnthropic.text("Hi! I'm a mock model on 127.0.0.1, traced by Tether.", { chunks: 6 })
}

const conversation = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make(mockScript)
  const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-telemetry-" })
  const session = yield* ClaudeSession.make({
    cwd,
    env: { mode: "clean", set: env },
    model: "claude-sonnet-4-5",
    includePartialMessages: true,
    policy: ShellPolicy.denyDetached(Permission.allowTools(["Bash"]))
  })
  for (const prompt of [prompts.hello, prompts.tool]) {
    const result = yield* session.run(prompt)
    yield* Console.log(
      `turn ${result.turnId}: ${result.usage.inputTokens} tokens in, ${result.usage.outputTokens} out, ` +
        `$${(result.totalCostUsd ?? 0).toFixed(4)} so far: ${result.text}`
    )
  }
  const status = yield* session.mcpStatus
  yield* Console.log(`MCP servers: ${status.mcpServers.length}`)
}).pipe(
  // The host's own span: the session's and the turns' spans are its children.
  Effect.withSpan("example.conversation"),
  Effect.scoped
)

const main = Effect.gen(function*() {
  const claude = yield* ClaudeExecutable.find({ online: false })
  yield* conversation.pipe(Effect.provide(NodeTransport.layer({ executables: { claude } })))
  yield* Console.log(`traces and metrics sent to ${collector}`)
})

NodeRuntime.runMain(main.pipe(Effect.provide(TelemetryLive)))
