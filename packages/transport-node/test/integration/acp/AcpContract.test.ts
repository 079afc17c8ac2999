/**
 * The contract suite (packages/testing/test/contract/suite.ts) against the REAL ACP agents: the pinned Gemini CLI on
 * MockGemini and the pinned claude-agent-acp on MockAnthropic, through `AcpSession` over `NodeTransport`, in real
 * time, inside the integration project's loopback-only network namespace. The scenarios carry the suite's names and
 * its assertions on tags, dispositions and events wherever a real agent and the mock model can be made to play
 * them; where an agent differs, `differs` says how and the test checks what the agent does instead (stated in
 * docs/protocol/acp-agents.md §8). What the host wrote is read from a recording transport around NodeTransport,
 * as the suite reads MockTransport's.
 *
 * Cost: scenarios share a session where they can (one per group of options; a scenario that ends its session comes
 * last in its group): each agent runs in three shared sessions, plus a release and its resume (two processes) and,
 * for Gemini CLI, a start that fails on a bad flag.
 *
 * Simulator-only (Contract.test.ts plays them on MockAcp; a real agent cannot be made to do them, and faking them
 * here would prove nothing about the agent):
 * - "a CLI that never finishes its handshake": both agents answer `initialize` as soon as they have loaded; nothing
 *   the model server does delays it (no model call happens before `session/new`).
 * - "an interrupt that does not settle within the interrupt timeout": both agents honour `session/cancel` within
 *   ~150 ms (docs/protocol/acp-agents.md §4.6); neither can be made to ignore it.
 * - "a control left unanswered past its deadline": both answer `session/set_mode` at once, without the model.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it, layer } from "@effect/vitest"
import { AcpAgent, AcpSession } from "@tether/acp"
import { EventLog, Permission, type SessionEvent, Timeouts, Transport } from "@tether/core"
import { MockAnthropic, MockGemini, PinnedAcp } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import {
  Cause,
  Context,
  type Duration,
  Effect,
  Exit,
  type FileSystem,
  Layer,
  Option,
  Redacted,
  Schedule,
  Scope,
  Stream
} from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import { marked as markedWith, type Proc } from "../../utils.ts"

const markVariable = "TETHER_IT_MARK"
const marked = (mark: string): Array<Proc> => markedWith(mark, markVariable)
const marks = new Set<string>()

/** The interfaces of this process's network namespace: only `lo` in the one scripts/netns.sh makes. */
const networkInterfaces = (): ReadonlyArray<string> =>
  Fs.readFileSync("/proc/self/net/dev", "utf8").split("\n").slice(2).map((line) => line.split(":")[0].trim())
    .filter((name) => name.length > 0)

beforeAll(() => {
  const interfaces = networkInterfaces()
  const isolated = interfaces.length === 1 && interfaces[0] === "lo"
  console.log(
    `ACP agents: gemini ${PinnedAcp.versions.gemini}, claude-agent-acp ${PinnedAcp.versions["claude-agent-acp"]}; ` +
      (isolated
        ? "network: isolated namespace, loopback only (scripts/netns.sh)"
        : `network: NOT ISOLATED (interfaces: ${interfaces.join(", ")}): no namespace could be made`)
  )
  if (!isolated && process.env.TETHER_NETNS_REQUIRED === "1") {
    throw new Error("TETHER_NETNS_REQUIRED=1 but the suite is not running in a loopback-only network namespace")
  }
})

afterAll(() => {
  const left = [...marks].flatMap(marked)
  assert.deepStrictEqual(left, [], `processes left behind by the live contract: ${JSON.stringify(left)}`)
})

const Live = Layer.mergeAll(NodeTransport.layer(), NodeServices.layer)

// ---------------------------------------------------------------------------------------------------------------
// What the model does: one rule per scenario, matched on the prompt, so that scenarios can share a session
// ---------------------------------------------------------------------------------------------------------------

/** The shell command of the tool scenarios: it needs the host's permission on both agents, and prints `output`. */
const tool = { command: "touch contract.txt && echo tool-output-42", output: "tool-output-42", file: "contract.txt" }

/** What the mock model does for a prompt (a model call that carries a tool's result is always echoed). */
type Behaviour =
  | { readonly _tag: "Text"; readonly text: string; readonly chunks: number }
  | { readonly _tag: "Tool" }
  /** Text pieces 50 ms apart, for 20 s: a turn to interrupt, to time out or to kill mid-stream. */
  | { readonly _tag: "Slow" }
  /** One piece, then silence: a stalled stream. */
  | { readonly _tag: "Stall" }
  /** Nothing at all, for an hour: the agent hears nothing from its model, so it sends no update. */
  | { readonly _tag: "Hold" }
  | { readonly _tag: "ApiError"; readonly status: number }
  /** The default: `Hello from mock #<n>: <prompt>`. */
  | { readonly _tag: "Echo" }

const rules = (apiStatus: number): ReadonlyArray<readonly [string, Behaviour]> => [
  ["stream please", { _tag: "Text", text: "one two three", chunks: 3 }],
  ["touch it", { _tag: "Tool" }],
  ["slow please", { _tag: "Slow" }],
  ["stall please", { _tag: "Stall" }],
  ["hold please", { _tag: "Hold" }],
  ["api down", { _tag: "ApiError", status: apiStatus }]
]

const behaviourOf = (apiStatus: number, prompt: string): Behaviour =>
  rules(apiStatus).find(([match]) => prompt.includes(match))?.[1] ?? { _tag: "Echo" }

/** A model call as the tests read the mock's log. */
interface ModelCall {
  readonly prompt: string
  readonly clientClosed: boolean
  readonly body: string
}

/** A mock model server running the rules, and where the agent keeps its state. */
interface World {
  readonly url: string
  readonly calls: Effect.Effect<ReadonlyArray<ModelCall>>
  readonly home: string
  readonly cwd: string
  /** The environment the agent runs with, besides what its preset sets. */
  readonly env: { readonly [name: string]: string | Redacted.Redacted<string> }
  readonly apiKey: Redacted.Redacted<string>
}

// ---------------------------------------------------------------------------------------------------------------
// The agents
// ---------------------------------------------------------------------------------------------------------------

/**
 * Where a real agent does not do what the suite expects of a provider (each stated in
 * docs/protocol/acp-agents.md §8), like the suite's `lacks`:
 *
 * - `ignores-bad-flags`: the agent takes no command-line flags and ignores unknown ones, so no real flag makes it
 *   exit during the handshake (claude-agent-acp); the Gemini CLI exits 1 with "Unknown arguments".
 * - `empty-turn-after-cancel`: after a cancelled or failed prompt, the agent answers the next prompt at once with
 *   nothing (claude-agent-acp, §5 quirk 5): the session fails that turn `TurnFailed` (`empty-answer`), and the
 *   turn after it works. "The session goes on" is checked across that turn.
 * - `no-tool-update-on-reject`: a rejected permission produces no update at all (Gemini CLI, §4.5), so the turn
 *   has no `ToolResult` for the call; claude-agent-acp reports it `failed`.
 * - `killed-at-release`: the agent does not exit when its stdin closes (claude-agent-acp, §4.10): the release ends
 *   it with SIGTERM at the close grace, so its exit is a signal, not code 0.
 */
type Difference = "ignores-bad-flags" | "empty-turn-after-cancel" | "no-tool-update-on-reject" | "killed-at-release"

interface LiveAgent {
  readonly name: string
  readonly differs: ReadonlySet<Difference>
  /** The model API status the ApiError scenario uses: one the agent does not retry. */
  readonly apiStatus: number
  /** What the agent says on stderr when it is given a flag it does not know. */
  readonly badFlag: string | undefined
  readonly world: (prefix: string) => Effect.Effect<World, never, Scope.Scope>
  readonly agent: (
    world: World,
    mark: string,
    options?: { readonly executable?: string; readonly args?: ReadonlyArray<string> }
  ) => AcpAgent.Agent<FileSystem.FileSystem>
}

const gemini: LiveAgent = (() => {
  const pinned = PinnedAcp.resolveSync("gemini")
  const reply = (request: MockGemini.GenerateRequest): MockGemini.Reply => {
    if (Option.isSome(request.functionResponse)) return MockGemini.echo
    const behaviour = behaviourOf(400, request.prompt)
    switch (behaviour._tag) {
      case "Text":
        return MockGemini.text(behaviour.text, { chunks: behaviour.chunks })
      case "Tool":
        return MockGemini.shell(tool.command)
      case "Slow":
        return MockGemini.slow({ deltas: 400, interval: "50 millis" })
      case "Stall":
        return MockGemini.stall()
      case "Hold":
        return MockGemini.stall({ wait: "1 hour" })
      case "ApiError":
        return MockGemini.apiError(behaviour.status)
      case "Echo":
        return MockGemini.echo
    }
  }
  return {
    name: "gemini",
    // A 400 is never retried, whatever the model (the CLI retries 429 and 5xx, the `auto` model's last resort up to
    // 10 times whatever `maxAttempts` says).
    apiStatus: 400,
    badFlag: "Unknown arguments",
    differs: new Set(["no-tool-update-on-reject"]),
    world: (prefix) =>
      Effect.gen(function*() {
        const mock = yield* MockGemini.make(reply)
        const home = yield* MockGemini.offlineHome({ baseUrl: mock.url, prefix })
        const calls = Effect.map(mock.requests, (log) =>
          log.flatMap((entry) =>
            Option.toArray(entry.request).map((request) => ({
              prompt: request.prompt,
              clientClosed: entry.outcome === "client-closed",
              body: JSON.stringify(request.body)
            }))
          ))
        return {
          url: mock.url,
          calls,
          home: home.home,
          cwd: home.cwd,
          env: { HOME: home.home, TMPDIR: home.env.TMPDIR },
          apiKey: Redacted.make("mock-gemini-api-key")
        }
      }),
    agent: (world, mark, options) =>
      AcpAgent.gemini({
        // The pinned script runs through its `#!/usr/bin/env node`: the Node on the host's PATH.
        executable: options?.executable ?? pinned.script,
        args: options?.args,
        baseUrl: world.url,
        apiKey: world.apiKey,
        home: world.home,
        env: { mode: "clean", set: { ...world.env, [markVariable]: mark } }
      })
  }
})()

const claudeAgentAcp: LiveAgent = (() => {
  const pinned = PinnedAcp.resolveSync("claude-agent-acp")
  const reply = (request: MockAnthropic.MessagesRequest): MockAnthropic.Reply => {
    if (Option.isSome(request.toolResult)) return MockAnthropic.echo
    const behaviour = behaviourOf(429, request.prompt)
    switch (behaviour._tag) {
      case "Text":
        return MockAnthropic.text(behaviour.text, { chunks: behaviour.chunks })
      case "Tool":
        return MockAnthropic.bash(tool.command)
      case "Slow":
        return MockAnthropic.slow({ deltas: 400, interval: "50 millis" })
      case "Stall":
        return MockAnthropic.stall()
      case "Hold":
        return MockAnthropic.stall({ wait: "1 hour" })
      case "ApiError":
        return MockAnthropic.apiError(behaviour.status)
      case "Echo":
        return MockAnthropic.echo
    }
  }
  return {
    name: "claude-agent-acp",
    // CLAUDE_CODE_MAX_RETRIES=0 (MockAnthropic.offlineEnv): a 429 is sent once (a 400 is sent three times).
    apiStatus: 429,
    badFlag: undefined,
    differs: new Set(["ignores-bad-flags", "empty-turn-after-cancel", "killed-at-release"]),
    world: (prefix) =>
      Effect.gen(function*() {
        const mock = yield* MockAnthropic.make(reply)
        const home = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix })
        const { ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL: _, CLAUDE_CONFIG_DIR, ...rest } = home.env
        const calls = Effect.map(mock.requests, (log) =>
          log.flatMap((entry) =>
            Option.toArray(entry.messages).map((request) => ({
              prompt: request.prompt,
              clientClosed: entry.outcome === "client-closed",
              body: JSON.stringify(request.body)
            }))
          ))
        return {
          url: mock.url,
          calls,
          home: CLAUDE_CONFIG_DIR,
          cwd: home.cwd,
          env: rest,
          apiKey: ANTHROPIC_API_KEY
        }
      }),
    agent: (world, mark, options) =>
      AcpAgent.claudeAgentAcp({
        executable: options?.executable ?? pinned.script,
        args: options?.args,
        baseUrl: world.url,
        apiKey: world.apiKey,
        configDir: world.home,
        env: { mode: "clean", set: { ...world.env, [markVariable]: mark } }
      })
  }
})()

// ---------------------------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------------------------

/** Deadlines for a real agent on a loaded 2-core machine; a group overrides what its scenarios time. */
const timeouts = (overrides: Partial<{ readonly [K in keyof Timeouts.Timeouts]: Duration.Input }> = {}) =>
  Effect.runSync(Timeouts.make({
    startup: "60 seconds",
    control: "10 seconds",
    turn: "60 seconds",
    stall: "30 seconds",
    interrupt: "10 seconds",
    permission: "30 seconds",
    closeGrace: "1 second",
    termGrace: "2 seconds",
    ...overrides
  }))

/** The lines the host wrote to the agent: NodeTransport's connections, with every write recorded. */
const recording = (written: Array<unknown>) =>
  Effect.provideServiceEffect(
    Transport.Transport,
    Effect.map(Effect.service(Transport.Transport), (inner) =>
      Transport.Transport.of({
        ...inner,
        open: (spec, options) =>
          Effect.map(inner.open(spec, options), (connection): Transport.Connection => ({
            ...connection,
            write: (line) => Effect.andThen(Effect.sync(() => written.push(JSON.parse(line))), connection.write(line))
          }))
      }))
  )

type Line = { readonly method?: string; readonly params?: { readonly sessionId?: string } }
const count = (written: ReadonlyArray<unknown>, method: string) =>
  (written as ReadonlyArray<Line>).filter((line) => line.method === method).length

/** A session of a real agent, what the host wrote to it, and the host's policy (a group's scenarios set it). */
interface Fixture {
  readonly session: AcpSession.AcpSession
  readonly world: World
  readonly mark: string
  readonly written: Array<unknown>
  readonly policy: { current: Permission.Policy | undefined }
}

const newMark = () => {
  const mark = randomUUID()
  marks.add(mark)
  return mark
}

const open = (
  agent: LiveAgent,
  world: World,
  options: {
    readonly timeouts?: Timeouts.Timeouts
    readonly queue?: boolean
    readonly queueCapacity?: number
    readonly resume?: string
  } = {}
) =>
  Effect.gen(function*() {
    const mark = newMark()
    const written: Array<unknown> = []
    const policy: Fixture["policy"] = { current: undefined }
    const session = yield* AcpSession.make({
      agent: agent.agent(world, mark),
      cwd: world.cwd,
      // The host's policy of the moment; none is the session's default policy, `Permission.denyAll`.
      policy: (request) => (policy.current ?? Permission.denyAll)(request),
      timeouts: options.timeouts ?? timeouts(),
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      ...(options.queueCapacity === undefined ? {} : { queueCapacity: options.queueCapacity }),
      ...(options.resume === undefined ? {} : { resume: options.resume })
    }).pipe(recording(written))
    return { session, world, mark, written, policy } satisfies Fixture
  })

class Shared extends Context.Service<Shared, Fixture>()("AcpContract/Shared") {}

/** A session shared by a group of scenarios, started once with the group's options, released after it. */
const shared = (agent: LiveAgent, prefix: string, options: Parameters<typeof open>[2] = {}) =>
  Layer.effect(
    Shared,
    Effect.gen(function*() {
      const world = yield* agent.world(`tether-it-contract-${agent.name}-${prefix}-`)
      return yield* open(agent, world, options)
    }).pipe(Effect.orDie)
  ).pipe(Layer.provide(Live))

/** Every event the session has published so far, with its delivery (seq). */
const snapshot = (session: AcpSession.AcpSession) =>
  Effect.scoped(Effect.gen(function*() {
    const stream = yield* session.subscribe("start")
    const latest = yield* session.latestSeq
    const deliveries = yield* Stream.runCollect(Stream.takeUntil(stream, (d) => d._tag === "Event" && d.seq >= latest))
    return Array.from(deliveries).filter(EventLog.isEvent)
  }))

const eventsOf = (session: AcpSession.AcpSession) => Effect.map(snapshot(session), (all) => all.map((d) => d.event))

const tagged = <T extends SessionEvent.SessionEvent["_tag"]>(
  events: ReadonlyArray<SessionEvent.SessionEvent>,
  tag: T
) => events.filter((e): e is Extract<SessionEvent.SessionEvent, { readonly _tag: T }> => e._tag === tag)

/** The events of one turn, without the session's frames and statuses. */
const turnTags = (events: ReadonlyArray<SessionEvent.SessionEvent>, turnId: string) =>
  events.filter((e) => e.turnId === turnId).map((e) => e._tag).filter((tag) => tag !== "Status" && tag !== "Frame")

/** Polls `read` until `done` holds (every 50 ms, for at most 30 s: a bound, not a timing assertion). */
const until = <A, E, R>(read: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  read.pipe(
    Effect.filterOrFail(done, () => "not yet" as const),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 600 }),
    Effect.orDie
  )

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit), `expected a failure, got ${String(exit)}`)
  return Option.getOrThrow(Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none())
}

/**
 * "The session goes on": the next turn works. On an agent that answers the prompt after a cancelled or failed one
 * with nothing (`empty-turn-after-cancel`), that turn fails as an empty answer, and the one after it works.
 */
const goesOn = (agent: LiveAgent, session: AcpSession.AcpSession, prompt: string) =>
  Effect.gen(function*() {
    if (agent.differs.has("empty-turn-after-cancel")) {
      const error = failureOf(yield* Effect.exit(session.run(`${prompt} (answered empty)`)))
      assert.strictEqual(error._tag, "TurnFailed")
      if (error._tag === "TurnFailed") assert.strictEqual(error.subtype, "empty-answer")
      assert.strictEqual(yield* session.status, "idle")
    }
    assert.include((yield* session.run(prompt)).text, prompt)
  })

/** Waits for the first text of `turn` (the agent acknowledged the prompt and its model is streaming). */
const firstText = <E>(turn: { readonly events: Stream.Stream<EventLog.Delivery<SessionEvent.SessionEvent>, E> }) =>
  turn.events.pipe(
    Stream.filter((d) => d._tag === "Event" && d.event._tag === "TextDelta" && d.event.text !== ""),
    Stream.take(1),
    Stream.runDrain,
    Effect.timeout("30 seconds")
  )

/** Runs a turn a deadline interrupts: TurnInterrupted for `reason`, no sooner than the deadline, within `max` ms. */
const interruptedWithin = (session: AcpSession.AcpSession, prompt: string, reason: string, [min, max]: readonly [
  number,
  number
]) =>
  Effect.gen(function*() {
    const started = Date.now()
    const error = yield* Effect.flip(session.run(prompt))
    const took = Date.now() - started
    assert.strictEqual(error._tag, "TurnInterrupted")
    if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, reason)
    assert.isAtLeast(took, min)
    // Generous: a real agent answers the cancel within ~150 ms; the bound only catches a deadline that never fires.
    assert.isAtMost(took, max)
  })

// ---------------------------------------------------------------------------------------------------------------
// The contract, per agent
// ---------------------------------------------------------------------------------------------------------------

const live = (agent: LiveAgent) =>
  describe(`the live contract: ${agent.name}`, () => {
    // --- One session for the scenarios that take the default options -------------------------------------------
    layer(shared(agent, "main"), { excludeTestServices: true, timeout: "90 seconds" })("one session", (it) => {
      it.effect("the session starts idle, and declares what its provider can do", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          assert.strictEqual(session.protocol, "acp")
          assert.strictEqual(yield* session.status, "idle")
          assert.isTrue(yield* session.isAlive)
          const capabilities = yield* session.capabilities
          assert.strictEqual(capabilities.provider, "acp")
          assert.isTrue(capabilities.interrupt)
          assert.isTrue(capabilities.resume, "both agents advertise loadSession")
          assert.include(capabilities.permissionKinds, "tool")
          assert.strictEqual(capabilities.receipts, "first-output")
        }))

      it.effect("events attributed to the turn, in order, with increasing seqs; its stream ends with its result", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          const turn = yield* session.send("stream please")
          const result = yield* turn.result
          assert.strictEqual(result.turnId, turn.id)
          assert.strictEqual(result.text, "one two three")
          // Both agents report usage outside ACP v1's schema (docs/protocol/acp-agents.md §7): the real ones are
          // not `lacks: usage` as the simulator is.
          assert.isAbove(result.usage.inputTokens, 0)
          assert.isAbove(result.usage.outputTokens, 0)
          assert.strictEqual(result.sessionId, Option.getOrUndefined(yield* session.sessionId))
          assert.isDefined(result.sessionId)
          assert.isTrue(yield* session.isAlive)
          assert.strictEqual(yield* session.status, "idle")

          const deliveries = yield* snapshot(session)
          for (let i = 1; i < deliveries.length; i++) assert.strictEqual(deliveries[i].seq, deliveries[i - 1].seq + 1)
          const own = deliveries.map((d) => d.event).filter((e) => e.turnId === turn.id)
          const tags = own.map((e) => e._tag).filter((tag) => tag !== "Status" && tag !== "Frame")
          assert.deepStrictEqual(tags.slice(0, 2), ["TurnStarted", "TurnAcknowledged"])
          assert.strictEqual(tags.at(-1), "TurnCompleted")
          // The mock streams three pieces; claude-agent-acp opens the text block with an empty chunk.
          const deltas = tagged(own, "TextDelta").map((e) => e.text).filter((text) => text !== "")
          assert.strictEqual(deltas.length, 3)
          assert.strictEqual(deltas.join(""), "one two three")
          assert.deepStrictEqual(tagged(own, "AssistantMessage").map((e) => e.text), ["one two three"])
          assert.deepStrictEqual(tagged(own, "Usage").map((e) => e.usage), [result.usage])

          const stream = Array.from(yield* Stream.runCollect(turn.events)).filter(EventLog.isEvent)
          assert.isTrue(stream.every((d) => d.event.turnId === turn.id))
          assert.strictEqual(stream[0].event._tag, "TurnStarted")
          assert.strictEqual(stream.at(-1)?.event._tag, "TurnCompleted")
          assert.strictEqual(yield* turn.phase, "completed")
        }))

      it.effect("a second send while a turn runs: TurnInFlight, safe to requeue, nothing written", () =>
        Effect.gen(function*() {
          const { session, written } = yield* Shared
          const before = count(written, "session/prompt")
          const first = yield* session.send("first")
          const error = yield* Effect.flip(session.send("second"))
          assert.strictEqual(error._tag, "TurnInFlight")
          assert.isTrue(error.safeToRequeue)
          assert.isFalse(error.deliveryUncertain)
          yield* first.result
          assert.strictEqual(count(written, "session/prompt") - before, 1)
          assert.include((yield* session.run("second")).text, "second")
        }))

      it.effect("allow: the tool runs; the request and its resolution are events of the turn", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = Permission.allowAll
          const turn = yield* session.send("touch it (allow)")
          const result = yield* turn.result
          assert.include(result.text, tool.output)
          assert.isTrue(Fs.existsSync(`${world.cwd}/${tool.file}`), "the command ran")
          Fs.rmSync(`${world.cwd}/${tool.file}`)
          const events = (yield* eventsOf(session)).filter((e) => e.turnId === turn.id)
          const [requested] = tagged(events, "PermissionRequested")
          assert.strictEqual(requested.turnId, turn.id)
          assert.strictEqual(requested.request.kind, "tool")
          assert.include(JSON.stringify(requested.request.input), tool.command)
          assert.deepStrictEqual(tagged(events, "PermissionResolved").map((e) => e.resolution), [
            { _tag: "Decided", by: "policy", decision: Permission.allow() }
          ])
          assert.deepStrictEqual(tagged(events, "ToolResult").map((e) => e.isError), [false])
        }))

      it.effect("deny: the tool does not run, the model is told, and the turn goes on", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = () => Effect.succeed(Permission.deny("not today"))
          const turn = yield* session.send("touch it (deny)")
          const result = yield* turn.result
          assert.notInclude(result.text, tool.output)
          assert.isFalse(Fs.existsSync(`${world.cwd}/${tool.file}`), "the command did not run")
          const events = (yield* eventsOf(session)).filter((e) => e.turnId === turn.id)
          assert.deepStrictEqual(
            tagged(events, "ToolResult").map((e) => e.isError),
            agent.differs.has("no-tool-update-on-reject") ? [] : [true]
          )
          assert.strictEqual(yield* session.status, "idle")
        }))

      it.effect("the default policy denies", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = undefined
          const turn = yield* session.send("touch it (default)")
          const result = yield* turn.result
          assert.notInclude(result.text, tool.output)
          assert.isFalse(Fs.existsSync(`${world.cwd}/${tool.file}`))
          const [resolved] = tagged(
            (yield* eventsOf(session)).filter((e) => e.turnId === turn.id),
            "PermissionResolved"
          )
          assert.strictEqual(resolved.resolution._tag === "Decided" ? resolved.resolution.decision._tag : "", "Deny")
        }))

      it.effect("allow with a rewritten input: the provider cannot run it, so it is declined and nothing runs", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = (request) =>
            Effect.succeed(Permission.allow({ ...request.input, command: "echo rewritten" }))
          const turn = yield* session.send("touch it (rewrite)")
          const result = yield* turn.result
          assert.notInclude(result.text, tool.output)
          assert.notInclude(result.text, "rewritten")
          assert.isFalse(Fs.existsSync(`${world.cwd}/${tool.file}`), "neither the command nor a rewrite ran")
          const events = (yield* eventsOf(session)).filter((e) => e.turnId === turn.id)
          assert.deepStrictEqual(
            tagged(events, "ToolResult").map((e) => e.isError),
            agent.differs.has("no-tool-update-on-reject") ? [] : [true]
          )
        }))

      it.effect("a raw control request is answered with the CLI's payload", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          // A mode both agents advertise in session/new (docs/protocol/acp-agents.md §4.3).
          const payload = yield* session.control({ method: "session/set_mode", params: { modeId: "default" } })
          assert.isTrue(typeof payload === "object" && payload !== null, JSON.stringify(payload))
          assert.strictEqual(yield* session.status, "idle")
        }))

      it.effect("with no active turn, the interrupt says so", () =>
        Effect.gen(function*() {
          const { session, written } = yield* Shared
          const before = count(written, "session/cancel")
          assert.strictEqual(yield* session.interrupt, "no-active-turn")
          assert.strictEqual(count(written, "session/cancel"), before)
        }))

      it.effect("deny and interrupt: the turn ends interrupted by the permission decision; the session goes on", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = () => Effect.succeed(Permission.deny("stop", { interrupt: true }))
          const error = yield* Effect.flip(session.run("touch it (deny and interrupt)"))
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag !== "TurnInterrupted") return
          assert.strictEqual(error.reason, "permission")
          assert.isTrue(error.acknowledged)
          assert.isFalse(error.deliveryUncertain)
          assert.isFalse(Fs.existsSync(`${world.cwd}/${tool.file}`))
          assert.strictEqual(yield* session.status, "idle")
          policy.current = undefined
          yield* goesOn(agent, session, "after the denial")
        }))

      it.effect("mid-stream, acknowledged: the turn ends interrupted, delivery certain; the session goes on", () =>
        Effect.gen(function*() {
          const { session, world, written } = yield* Shared
          const before = count(written, "session/cancel")
          const turn = yield* session.send("slow please")
          yield* firstText(turn)
          assert.strictEqual(yield* turn.phase, "acknowledged")
          assert.strictEqual(yield* session.interrupt, "interrupted")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag !== "TurnInterrupted") return
          assert.strictEqual(error.reason, "host")
          assert.isTrue(error.acknowledged)
          assert.isFalse(error.deliveryUncertain)
          assert.strictEqual(count(written, "session/cancel") - before, 1)
          assert.strictEqual(yield* session.status, "idle")
          // The agent may answer the cancel before it hangs up on its model (claude-agent-acp): wait for it.
          yield* until(
            world.calls,
            (calls) => calls.some((call) => call.prompt.includes("slow please") && call.clientClosed)
          )
          yield* goesOn(agent, session, "after the interrupt")
        }))

      it.effect("an API error fails the turn with its status, delivery certain; the next turn works", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          const error = yield* Effect.flip(session.run("api down"))
          assert.strictEqual(error._tag, "ApiError")
          if (error._tag === "ApiError") assert.strictEqual(error.status, agent.apiStatus)
          assert.isFalse(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "idle")
          yield* goesOn(agent, session, "fine now")
        }))

      // Last of the group: it retires the session.
      it.effect("before the CLI acknowledged the prompt: the session is retired, delivery uncertain", () =>
        Effect.gen(function*() {
          const { mark, session, world, written } = yield* Shared
          const before = count(written, "session/cancel")
          const turn = yield* session.send("hold please")
          // The prompt reached the model, which says nothing: the agent has sent no update of the turn.
          yield* until(world.calls, (calls) => calls.some((call) => call.prompt.includes("hold please")))
          assert.strictEqual(yield* turn.phase, "started")
          assert.strictEqual(yield* session.interrupt, "retired")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "TurnInterrupted")
          assert.isTrue(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "failed")
          assert.strictEqual(count(written, "session/cancel"), before)
          yield* session.awaitExit.pipe(Effect.timeout("15 seconds"))
          assert.isFalse(yield* session.isAlive)
          // The agent's own process exits first; its children (claude-agent-acp's Claude Code) go with the tree.
          yield* until(Effect.sync(() => marked(mark)), (left) => left.length === 0)
        }))
    })

    // --- A short stall and permission timeout, and a queue; then a crash mid-turn (which ends the session) -------
    layer(
      shared(agent, "short", {
        timeouts: timeouts({ stall: "2 seconds", permission: "5 seconds" }),
        queue: true,
        queueCapacity: 1
      }),
      { excludeTestServices: true, timeout: "90 seconds" }
    )("short deadlines and a queue", (it) => {
      it.effect("with a queue: queued prompts have a visible lifecycle and run in order; a full queue refuses", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          const a = yield* session.send("alpha")
          const b = yield* session.send("beta")
          assert.strictEqual(yield* b.phase, "queued")
          const full = yield* Effect.flip(session.send("gamma"))
          assert.strictEqual(full._tag, "QueueFull")
          assert.isTrue(full.safeToRequeue)
          const [ra, rb] = yield* Effect.all([a.result, b.result])
          assert.include(ra.text, "alpha")
          assert.include(rb.text, "beta")
          const tags = turnTags(yield* eventsOf(session), b.id)
          assert.deepStrictEqual(tags.slice(0, 3), ["TurnQueued", "TurnStarted", "TurnAcknowledged"])
          assert.strictEqual(tags.at(-1), "TurnCompleted")
        }))

      it.effect("defer: answered later, exactly once; unknown ids are typed errors; waiting is not a stall", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = () => Effect.succeed(Permission.defer)
          const turn = yield* session.send("touch it (defer)")
          yield* until(session.pendingPermissions, (pending) => pending.length > 0)
          const [pending] = yield* session.pendingPermissions
          assert.strictEqual(pending.kind, "tool")
          assert.strictEqual(pending.turnId, turn.id)
          assert.strictEqual(yield* session.status, "awaiting-permission")
          // Longer than the stall timeout (2 s), shorter than the permission timeout (5 s).
          yield* Effect.sleep("3 seconds")
          assert.strictEqual(yield* session.status, "awaiting-permission")
          yield* session.answerPermission(pending.requestId, Permission.allow())
          const again = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
          assert.strictEqual(again._tag, "PermissionAlreadyResolved")
          const unknown = yield* Effect.flip(session.answerPermission("nope", Permission.allow()))
          assert.strictEqual(unknown._tag, "PermissionNotFound")
          const result = yield* turn.result
          assert.include(result.text, tool.output)
          Fs.rmSync(`${world.cwd}/${tool.file}`)
        }))

      it.effect("a deferred request expires after the permission timeout: denied, and a late answer is refused", () =>
        Effect.gen(function*() {
          const { policy, session, world } = yield* Shared
          policy.current = () => Effect.succeed(Permission.defer)
          const turn = yield* session.send("touch it (expire)")
          yield* until(session.pendingPermissions, (pending) => pending.length > 0)
          const [pending] = yield* session.pendingPermissions
          const result = yield* turn.result
          assert.notInclude(result.text, tool.output)
          assert.isFalse(Fs.existsSync(`${world.cwd}/${tool.file}`))
          const events = (yield* eventsOf(session)).filter((e) => e.turnId === turn.id)
          assert.deepStrictEqual(tagged(events, "PermissionResolved").map((e) => e.resolution), [
            { _tag: "Expired", why: "timeout" }
          ])
          assert.deepStrictEqual(
            tagged(events, "ToolResult").map((e) => e.isError),
            agent.differs.has("no-tool-update-on-reject") ? [] : [true]
          )
          const late = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
          assert.strictEqual(late._tag, "PermissionAlreadyResolved")
        }))

      it.effect("a stalled stream is interrupted after the stall timeout", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          yield* interruptedWithin(session, "stall please", "stall", [2_000, 15_000])
          assert.strictEqual(yield* session.status, "idle")
          yield* goesOn(agent, session, "after the stall")
        }))

      // Last of the group: the agent is killed.
      it.effect("mid-turn: CliExited with its exit code and stderr, acknowledged; the session is failed", () =>
        Effect.gen(function*() {
          const { mark, session } = yield* Shared
          const turn = yield* session.send("slow please")
          yield* firstText(turn)
          // The agent crashes: SIGKILL, which no program can catch.
          process.kill(Option.getOrThrow(session.pid), "SIGKILL")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "CliExited")
          if (error._tag !== "CliExited") {
            return
          }
          assert.strictEqual(error.signal, "SIGKILL")
          assert.isNull(error.code)
          assert.isTrue(error.acknowledged)
          assert.isFalse(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "failed")
          const refused = yield* Effect.flip(session.send("again"))
          assert.strictEqual(refused._tag, "SessionUnavailable")
          assert.isTrue(refused.safeToFallback)
          assert.strictEqual((yield* session.process)._tag, "Failed")
          // Its children (claude-agent-acp's Claude Code) are torn down with it.
          yield* until(
            Effect.sync(() => marked(mark)),
            (left) => left.length === 0
          )
        }))
    })

    // --- The turn deadline, then a crash before the acknowledgement (which ends the session) -----------------
    layer(
      shared(agent, "deadline", {
        timeouts: timeouts({
          turn: "5 seconds",
          stall: "5 seconds",
          interrupt: "2 seconds",
          permission: "2 seconds",
          control: "2 seconds"
        })
      }),
      { excludeTestServices: true, timeout: "90 seconds" }
    )("a short turn deadline, then a crash before the acknowledgement", (it) => {
      it.effect("the turn deadline interrupts a turn that keeps streaming", () =>
        Effect.gen(function*() {
          const { session } = yield* Shared
          yield* interruptedWithin(session, "slow please", "turn-timeout", [5_000, 20_000])
          assert.strictEqual(yield* session.status, "idle")
          yield* goesOn(agent, session, "after the deadline")
        }))

      // Last of the group: the agent is killed.
      it.effect("before the acknowledgement: delivery is uncertain", () =>
        Effect.gen(function*() {
          const { mark, session, world } = yield* Shared
          const turn = yield* session.send("hold please")
          // The prompt reached the model, which says nothing: the agent has sent no update of the turn.
          yield* until(world.calls, (calls) => calls.some((call) => call.prompt.includes("hold please")))
          assert.strictEqual(yield* turn.phase, "started")
          process.kill(Option.getOrThrow(session.pid), "SIGKILL")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "CliExited")
          if (error._tag === "CliExited") assert.isFalse(error.acknowledged)
          assert.isTrue(error.deliveryUncertain)
          yield* until(Effect.sync(() => marked(mark)), (left) => left.length === 0)
        }))
    })

    // --- Sessions of their own --------------------------------------------------------------------------------
    it.live("a CLI that cannot be started: its spawn error, safe to fall back", () =>
      Effect.gen(function*() {
        const world = yield* agent.world(`tether-it-contract-${agent.name}-spawn-`)
        const error = failureOf(
          yield* Effect.exit(Effect.scoped(AcpSession.make({
            agent: agent.agent(world, newMark(), { executable: "/nonexistent/tether-contract-agent" }),
            cwd: world.cwd,
            timeouts: timeouts()
          })))
        )
        assert.strictEqual(error._tag, "ExecutableNotFound")
        assert.isTrue(error.safeToFallback)
      }).pipe(Effect.scoped, Effect.provide(Live)))

    if (agent.badFlag === undefined) {
      it.skip(`a CLI that exits during the handshake: ${agent.name} ignores unknown flags (ignores-bad-flags)`)
    } else {
      const badFlag = agent.badFlag
      it.live("a CLI that exits during the handshake: HandshakeFailed with its stderr, safe to fall back", () =>
        Effect.gen(function*() {
          const world = yield* agent.world(`tether-it-contract-${agent.name}-flag-`)
          const error = failureOf(
            yield* Effect.exit(Effect.scoped(AcpSession.make({
              agent: agent.agent(world, newMark(), { args: ["--no-such-flag-tether"] }),
              cwd: world.cwd,
              timeouts: timeouts()
            })))
          )
          assert.strictEqual(error._tag, "HandshakeFailed")
          assert.include(error._tag === "HandshakeFailed" ? error.reason : "", badFlag)
          assert.isTrue(error.safeToFallback)
        }).pipe(Effect.scoped, Effect.provide(Live)), 60_000)
    }

    it.live("closing the scope ends stdin, the agent exits, nothing is left; a new session resumes it by its id", () =>
      Effect.gen(function*() {
        const world = yield* agent.world(`tether-it-contract-${agent.name}-resume-`)
        const scope = yield* Scope.make()
        const first = yield* open(agent, world).pipe(Scope.provide(scope))
        yield* first.session.run("remember pelican")
        const id = Option.getOrThrow(yield* first.session.sessionId)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* first.session.status, "closed")
        assert.isFalse(yield* first.session.isAlive)
        const state = yield* first.session.process
        const status = state._tag === "Running" ? undefined : state.status
        if (agent.differs.has("killed-at-release")) {
          assert.deepStrictEqual(status, Transport.ExitStatus.Signaled({ signal: "SIGTERM" }))
        } else {
          assert.strictEqual(state._tag, "Completed")
          assert.deepStrictEqual(status, Transport.ExitStatus.Exited({ code: 0 }))
        }
        assert.deepStrictEqual(marked(first.mark), [], "no process of the agent is left")

        const second = yield* open(agent, world, { resume: id })
        const result = yield* second.session.run("which word?")
        assert.strictEqual(result.sessionId, id)
        assert.strictEqual(Option.getOrThrow(yield* second.session.sessionId), id)
        assert.isTrue(
          (second.written as ReadonlyArray<Line>).some((line) =>
            line.method === "session/load" && line.params?.sessionId === id
          ),
          "the new process was asked to load the session"
        )
        const last = (yield* world.calls).findLast((call) =>
          call.prompt.includes("which word?")
        )
        assert.include(last?.body, "remember pelican", "the model saw the earlier turn")
      }).pipe(Effect.scoped, Effect.provide(Live)), 120_000)
  })

live(gemini)
live(claudeAgentAcp)
