/**
 * `AcpSession` (@tether/acp) with its presets, over NodeTransport, against the pinned real agents offline: the
 * Gemini CLI on MockGemini, claude-agent-acp on MockAnthropic, inside a loopback-only network namespace. One test per
 * agent walks what a host does most — a turn with streamed text, a shell command the host's policy allows, an
 * interrupt while text streams, a turn after it — then the release, after which no process of the agent is left.
 * What the agents do on the wire is in docs/protocol/acp-agents.md.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { AcpAgent, AcpSession } from "@tether/acp"
import { Permission, Timeouts } from "@tether/core"
import { MockAnthropic, MockGemini, PinnedAcp } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Cause, Effect, Exit, Layer, Option, Redacted, Scope, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import { marked as markedWith, type Proc } from "../../utils.ts"

const markVariable = "TETHER_IT_MARK"
const marked = (mark: string): Array<Proc> => markedWith(mark, markVariable)
const marks = new Set<string>()

const gemini = PinnedAcp.resolveSync("gemini")
const claudeAgentAcp = PinnedAcp.resolveSync("claude-agent-acp")

const Live = Layer.mergeAll(NodeTransport.layer(), NodeServices.layer)

/** Deadlines for a real agent on a loaded 2-core machine. */
const timeouts = Effect.runSync(Timeouts.make({
  startup: "60 seconds",
  control: "10 seconds",
  turn: "60 seconds",
  stall: "30 seconds",
  interrupt: "10 seconds",
  permission: "30 seconds",
  closeGrace: "1 second",
  termGrace: "2 seconds"
}))

afterAll(() => {
  const left = [...marks].flatMap(marked)
  assert.deepStrictEqual(left, [], `processes left behind by the suite: ${JSON.stringify(left)}`)
})

/** The host's policy: allow the shell commands that touch `allowed.txt`, deny the rest. */
const policy: Permission.Policy = (request) =>
  Effect.succeed(
    JSON.stringify(request.input).includes("allowed.txt") ? Permission.allow() : Permission.deny("not this one")
  )

/** Closing the session's scope: close grace, then SIGTERM, term grace, the transport's kill grace, plus slack. */
const releaseBoundMillis = 1_000 + 2_000 + 1_000 + 2_000

/**
 * What a host does most, in one session: a turn, a turn with a shell command the policy allows, an interrupt while
 * text streams, a turn after it; then the release. Returns what the test asserts on.
 */
const walk = (session: AcpSession.AcpSession, scope: Scope.Closeable, cwd: string, mark: string) =>
  Effect.gen(function*() {
    const first = yield* session.run("Say hello")
    const tool = yield* session.run("Make a file")
    const allowed = Fs.existsSync(`${cwd}/allowed.txt`)
    const streaming = yield* session.send("Tell me a long story")
    yield* streaming.events.pipe(
      Stream.filter((delivery) => delivery._tag === "Event" && delivery.event._tag === "TextDelta"),
      Stream.take(2),
      Stream.runDrain,
      Effect.timeout("30 seconds")
    )
    yield* session.interrupt
    const interrupted = yield* Effect.flip(streaming.result)
    const after = yield* Effect.exit(session.run("Are you still there?"))
    const running = marked(mark).length
    const started = Date.now()
    yield* Scope.close(scope, Exit.void)
    const releaseMillis = Date.now() - started
    return { first, tool, allowed, interrupted, after, running, releaseMillis, left: marked(mark) }
  })

/** The session's own scope, closed by the walk to time the release; closed with the test's if a check fails first. */
const sessionScope = Effect.gen(function*() {
  const scope = yield* Scope.make()
  yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
  return scope
})

const newMark = () => {
  const mark = randomUUID()
  marks.add(mark)
  return mark
}

describe("AcpSession over NodeTransport, against the real agents offline", () => {
  it.live(
    "the gemini preset: turns, an allowed command, an interrupt, a turn after it, nothing left",
    () =>
      Effect.gen(function*() {
        const mock = yield* MockGemini.make([
          MockGemini.text("Hello from the Gemini mock", { chunks: 2 }),
          MockGemini.shell("touch allowed.txt"),
          MockGemini.text("made it"),
          MockGemini.slow({ deltas: 200, interval: "50 millis" }),
          MockGemini.text("still here")
        ])
        const home = yield* MockGemini.offlineHome({ baseUrl: mock.url, prefix: "tether-it-acp-gemini-" })
        const mark = newMark()
        const scope = yield* sessionScope
        const session = yield* AcpSession.make({
          // The pinned script runs through its `#!/usr/bin/env node`: the Node on the host's PATH.
          agent: AcpAgent.gemini({
            executable: gemini.script,
            baseUrl: mock.url,
            apiKey: Redacted.make("mock-gemini-api-key"),
            home: home.home,
            env: { mode: "clean", set: { HOME: home.home, TMPDIR: home.env.TMPDIR, [markVariable]: mark } }
          }),
          cwd: home.cwd,
          policy,
          timeouts
        }).pipe(Scope.provide(scope))
        const outcome = yield* walk(session, scope, home.cwd, mark)
        assert.strictEqual(outcome.first.text, "Hello from the Gemini mock")
        assert.strictEqual(outcome.first.stopReason, "end_turn")
        assert.strictEqual(outcome.tool.text, "made it")
        assert.isTrue(outcome.allowed, "the command the policy allowed ran")
        assert.strictEqual(outcome.interrupted._tag, "TurnInterrupted")
        assert.isTrue(Exit.isSuccess(outcome.after) && outcome.after.value.text === "still here", String(outcome.after))
        assert.deepStrictEqual(yield* mock.unknown, [])
        const log = yield* mock.requests
        assert.isTrue(
          log.some((entry) => entry.reply === "Slow" && entry.outcome === "client-closed"),
          "the interrupt stopped the model's stream"
        )
        assert.isAtLeast(outcome.running, 1)
        assert.deepStrictEqual(outcome.left, [], "no process of the agent is left")
        assert.isBelow(outcome.releaseMillis, releaseBoundMillis)
      }).pipe(Effect.scoped, Effect.provide(Live)),
    120_000
  )

  it.live(
    "the gemini preset resumes a session in a new process within the minute it was created, its history seen",
    () =>
      Effect.gen(function*() {
        const mock = yield* MockGemini.make([
          MockGemini.text("I will remember the word apple"),
          MockGemini.text("The word was apple")
        ])
        const home = yield* MockGemini.offlineHome({ baseUrl: mock.url, prefix: "tether-it-acp-gemini-resume-" })
        const mark = newMark()
        const agent = AcpAgent.gemini({
          executable: gemini.script,
          baseUrl: mock.url,
          apiKey: Redacted.make("mock-gemini-api-key"),
          home: home.home,
          env: { mode: "clean", set: { HOME: home.home, TMPDIR: home.env.TMPDIR, [markVariable]: mark } }
        })
        const open = (resume?: string) =>
          AcpSession.make({ agent, cwd: home.cwd, policy, timeouts, ...(resume === undefined ? {} : { resume }) })
        const sessionId = yield* Effect.scoped(Effect.gen(function*() {
          const first = yield* open()
          assert.strictEqual((yield* first.run("Remember the word apple")).text, "I will remember the word apple")
          return first.agentSessionId
        }))
        // A new process, a few seconds later: the same minute as the session's creation, most of the time.
        const resumed = yield* Effect.scoped(Effect.gen(function*() {
          const second = yield* open(sessionId)
          return yield* second.run("Which word?")
        }))
        assert.strictEqual(resumed.text, "The word was apple")
        const calls = (yield* mock.requests).flatMap((entry) => Option.toArray(entry.request))
        const last = calls.at(-1)
        assert.include(JSON.stringify(last?.body), "Remember the word apple", "the model saw the earlier turn")
        assert.deepStrictEqual(marked(mark), [], "no process of the agent is left")
      }).pipe(Effect.scoped, Effect.provide(Live)),
    120_000
  )

  it.live(
    "the claude-agent-acp preset: the same walk; the turn after an interrupt fails as an empty answer",
    () =>
      Effect.gen(function*() {
        const mock = yield* MockAnthropic.make([
          MockAnthropic.text("Hello from the Anthropic mock", { chunks: 2 }),
          MockAnthropic.bash("touch allowed.txt"),
          MockAnthropic.text("made it"),
          MockAnthropic.slow({ deltas: 200, interval: "50 millis" }),
          MockAnthropic.text("still here")
        ])
        const home = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-it-acp-caa-" })
        const mark = newMark()
        const scope = yield* sessionScope
        const { ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CONFIG_DIR, ...rest } = home.env
        const session = yield* AcpSession.make({
          agent: AcpAgent.claudeAgentAcp({
            executable: claudeAgentAcp.script,
            baseUrl: ANTHROPIC_BASE_URL,
            apiKey: ANTHROPIC_API_KEY,
            configDir: CLAUDE_CONFIG_DIR,
            env: { mode: "clean", set: { ...rest, [markVariable]: mark } }
          }),
          cwd: home.cwd,
          policy,
          timeouts
        }).pipe(Scope.provide(scope))
        const outcome = yield* walk(session, scope, home.cwd, mark)
        assert.strictEqual(outcome.first.text, "Hello from the Anthropic mock")
        assert.strictEqual(outcome.tool.text, "made it")
        assert.isTrue(outcome.allowed, "the command the policy allowed ran")
        assert.strictEqual(outcome.interrupted._tag, "TurnInterrupted")
        // claude-agent-acp answers the prompt after a cancelled one at once, `end_turn` with nothing and zero usage,
        // before calling the model (docs/protocol/acp-agents.md §5): the session fails that turn as an empty answer
        // rather than report an empty success.
        const failure = Exit.isFailure(outcome.after) ? Cause.findErrorOption(outcome.after.cause) : Option.none()
        assert.isTrue(
          Option.isSome(failure) && failure.value._tag === "TurnFailed" && failure.value.subtype === "empty-answer",
          String(outcome.after)
        )
        assert.isAtLeast(outcome.running, 2, "claude-agent-acp and its Claude Code")
        assert.deepStrictEqual(outcome.left, [], "the release ended the agent, which ignores EOF, and its Claude Code")
        assert.isBelow(outcome.releaseMillis, releaseBoundMillis)
      }).pipe(Effect.scoped, Effect.provide(Live)),
    120_000
  )
})
