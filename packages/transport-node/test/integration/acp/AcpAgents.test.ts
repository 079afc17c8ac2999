/**
 * The pinned real ACP agents (`@tether/testing`'s PinnedAcp: the Gemini CLI and claude-agent-acp) spawned by
 * NodeTransport and driven by a raw JSON-RPC client (rawAcp.ts): initialize → session/new → one prompt → its answer,
 * offline against MockGemini and MockAnthropic on 127.0.0.1, inside a loopback-only network namespace (see
 * vitest.config.ts). Then the transport's teardown: stdin closed, a short wait, the connection's scope closed; no
 * process of the agent (nor the Claude Code that claude-agent-acp starts) may be left, read from /proc through a
 * marker variable every process of the test inherits.
 *
 * One test per agent, each a few seconds: the protocol itself is covered by the recorded transcripts
 * (packages/testing/test/AcpTranscripts.test.ts) and, once it exists, the ACP provider's own suites.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { MockAnthropic, MockGemini, PinnedAcp } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Duration, Effect, Exit, Option, type Redacted, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { marked as markedWith, type Proc } from "../../utils.ts"
import * as RawAcp from "./rawAcp.ts"

const markVariable = "TETHER_IT_MARK"
const marked = (mark: string): Array<Proc> => markedWith(mark, markVariable)
const marks = new Set<string>()

const gemini = PinnedAcp.resolveSync("gemini")
const claudeAgentAcp = PinnedAcp.resolveSync("claude-agent-acp")

/** The transport, each agent's logical program resolved to the Node that runs its pinned script. */
const TransportLive = NodeTransport.layer({
  executables: { gemini: gemini.command, "claude-agent-acp": claudeAgentAcp.command }
})

/** SIGTERM → SIGKILL grace of the teardown; with the transport's kill grace, the bound on a release. */
const termGrace = Duration.seconds(2)
const releaseBoundMillis = Duration.toMillis(termGrace) + Duration.toMillis(NodeTransport.defaultKillGrace) + 1_000

/** The interfaces of this process's network namespace (`/proc/self/net/dev` follows the namespace). */
const networkInterfaces = (): ReadonlyArray<string> =>
  Fs.readFileSync("/proc/self/net/dev", "utf8").split("\n").slice(2).map((line) => line.split(":")[0].trim())
    .filter((name) => name.length > 0)

beforeAll(() => {
  const interfaces = networkInterfaces()
  const isolated = interfaces.length === 1 && interfaces[0] === "lo"
  console.log(
    [
      `ACP agents: gemini ${gemini.version}, claude-agent-acp ${claudeAgentAcp.version} (Node ${process.version})`,
      isolated
        ? "network: isolated namespace, loopback only (scripts/netns.sh)"
        : `network: NOT ISOLATED (interfaces: ${interfaces.join(", ")}): offline only by the mocks' settings`
    ].join("\n")
  )
  if (!isolated && process.env.TETHER_NETNS_REQUIRED === "1") {
    throw new Error("TETHER_NETNS_REQUIRED=1 but the suite is not running in a loopback-only network namespace")
  }
})

afterAll(() => {
  const left = [...marks].flatMap(marked)
  assert.deepStrictEqual(left, [], `processes left behind by the suite: ${JSON.stringify(left)}`)
})

/** What one agent's test needs: its launch, its world's folders, and what the mock saw. */
interface World {
  readonly spec: Transport.LaunchSpec
  readonly cwd: string
  readonly mark: string
  /** The requests the mock did not know (must be none). */
  readonly unknownRequests: Effect.Effect<ReadonlyArray<string>>
  readonly modelCalls: Effect.Effect<number>
}

const launch = (
  program: string,
  pinned: PinnedAcp.Command,
  cwd: string,
  env: Readonly<Record<string, string | Redacted.Redacted<string>>>
) => {
  const mark = randomUUID()
  marks.add(mark)
  const spec: Transport.LaunchSpec = {
    program,
    args: pinned.args,
    cwd: Option.some(cwd),
    env: { mode: "clean", set: { ...env, [markVariable]: mark }, unset: [] }
  }
  return { spec, mark }
}

const geminiWorld = Effect.gen(function*() {
  const mock = yield* MockGemini.make([MockGemini.text("Hello from the Gemini mock", { chunks: 2 })])
  const home = yield* MockGemini.offlineHome({ baseUrl: mock.url, prefix: "tether-it-gemini-" })
  return {
    ...launch("gemini", gemini, home.cwd, home.env),
    cwd: home.cwd,
    unknownRequests: Effect.map(mock.unknown, (log) => log.map((entry) => `${entry.method} ${entry.path}`)),
    modelCalls: Effect.map(mock.requests, (log) => log.filter((entry) => entry.reply === "Text").length)
  } satisfies World
})

const claudeWorld = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make([MockAnthropic.text("Hello from the Anthropic mock", { chunks: 2 })])
  const home = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-it-caa-" })
  // Without a plugin blocklist in its config dir, the Claude Code under claude-agent-acp fetches one.
  const plugins = Path.join(home.env.CLAUDE_CONFIG_DIR, "plugins")
  Fs.mkdirSync(plugins, { recursive: true })
  Fs.writeFileSync(
    Path.join(plugins, "blocklist.json"),
    JSON.stringify({ fetchedAt: new Date().toISOString(), plugins: [] })
  )
  return {
    ...launch("claude-agent-acp", claudeAgentAcp, home.cwd, home.env),
    cwd: home.cwd,
    // Its Claude Code probes the base URL with `HEAD /` (answered 404, harmless); any other unknown route is not.
    unknownRequests: Effect.map(
      mock.requests,
      (log) =>
        log.filter((entry) => entry.reply === "NotFound" && !(entry.method === "HEAD" && entry.path === "/"))
          .map((entry) => `${entry.method} ${entry.path}`)
    ),
    modelCalls: Effect.map(mock.requests, (log) => log.filter((entry) => entry.reply === "Text").length)
  } satisfies World
})

/**
 * initialize → session/new → one prompt, then the teardown: returns what the test asserts on. `exitsOnEof`: whether
 * the agent exited within 1 s of its stdin closing (before the scope closed).
 */
const roundTrip = (world: World, expectedText: string) =>
  Effect.gen(function*() {
    const transport = yield* Transport.Transport
    // The connection's own scope, closed below to time the teardown; closed with the test's scope if a check fails
    // first (closing twice is a no-op).
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const connection = yield* transport.open(world.spec, { termGrace }).pipe(Scope.provide(scope))
    const acp = yield* RawAcp.make(connection).pipe(Scope.provide(scope))

    const init = yield* acp.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false }
    }, "60 seconds")
    assert.strictEqual(init.result?.protocolVersion, 1)
    assert.isTrue(init.result?.agentCapabilities?.loadSession, "both agents advertise loadSession")
    const created = yield* acp.request("session/new", { cwd: world.cwd, mcpServers: [] }, "30 seconds")
    const sessionId = created.result?.sessionId
    assert.isString(sessionId)
    const answered = yield* acp.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "Say hello" }]
    }, "60 seconds")
    assert.strictEqual(answered.result?.stopReason, "end_turn")
    const received = yield* acp.received
    const text = received
      .filter((message) =>
        message.method === "session/update" && message.params?.sessionId === sessionId &&
        message.params.update?.sessionUpdate === "agent_message_chunk"
      )
      .map((message) => message.params.update.content?.text ?? "")
      .join("")
    assert.strictEqual(text, expectedText)
    assert.strictEqual(yield* world.modelCalls, 1)
    assert.deepStrictEqual(yield* world.unknownRequests, [], "the agent called nothing the mock does not know")
    const running = marked(world.mark)
    assert.isAtLeast(running.length, 1, "the agent runs, marked")

    // The teardown a session does: stdin closed, a short grace, then the connection's scope closed.
    yield* connection.endInput
    const exitsOnEof = Option.isSome(yield* connection.exit.pipe(Effect.timeoutOption("1 second")))
    const started = Date.now()
    yield* Scope.close(scope, Exit.void)
    const releaseMillis = Date.now() - started
    return { running, exitsOnEof, releaseMillis, left: marked(world.mark) }
  })

describe("the real ACP agents, offline, through NodeTransport", () => {
  it.live(
    "gemini --acp: a prompt answered from MockGemini; exits on EOF; nothing left after teardown",
    () =>
      Effect.gen(function*() {
        const world = yield* geminiWorld
        const outcome = yield* roundTrip(world, "Hello from the Gemini mock")
        assert.isTrue(outcome.exitsOnEof, "the Gemini CLI exits when its stdin closes")
        assert.deepStrictEqual(outcome.left, [], "no process of the agent is left")
        assert.isBelow(outcome.releaseMillis, releaseBoundMillis)
      }).pipe(Effect.scoped, Effect.provide(TransportLive)),
    90_000
  )

  it.live(
    "claude-agent-acp: a prompt answered from MockAnthropic; ignores EOF; the teardown ends its tree",
    () =>
      Effect.gen(function*() {
        const world = yield* claudeWorld
        const outcome = yield* roundTrip(world, "Hello from the Anthropic mock")
        assert.isAtLeast(outcome.running.length, 2, "claude-agent-acp and the Claude Code it started")
        assert.isFalse(outcome.exitsOnEof, "claude-agent-acp keeps running after its stdin closes")
        assert.deepStrictEqual(outcome.left, [], "the teardown ended the agent and its Claude Code")
        assert.isBelow(outcome.releaseMillis, releaseBoundMillis)
      }).pipe(Effect.scoped, Effect.provide(TransportLive)),
    90_000
  )
})
