import { assert, describe, it } from "@effect/vitest"
import { ClaudeProtocol, ClaudeSession } from "@tether/claude"
import {
  EventLog,
  Permission,
  type Provider,
  Session,
  SessionEvent,
  TetherError,
  Timeouts,
  Transport,
  Turn
} from "@tether/core"
import { MockClaude, MockTransport } from "@tether/testing"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Metric, Option, Queue, Scope, Stream } from "effect"
import { expectTypeOf } from "vitest"
import {
  advance,
  mock,
  now,
  settle,
  snapshotDeliveries,
  snapshotEvents,
  timeouts,
  withSession,
  writtenFrames
} from "../support/ClaudeSessions.ts"

// Every test here runs on TestClock through MockTransport: the simulated CLI's own timing (startup 300 ms, first
// token 60 ms, chunks 25 ms, …) and every session deadline move only when the test moves the clock.

const script = (...turns: ReadonlyArray<MockClaude.Turn>) => MockClaude.make(turns)

/** Collects every delivery of a subscription until the session's log ends (at most 10 000, against a runaway log). */
const collectEvents = (session: ClaudeSession.ClaudeSession, from: EventLog.From = "start") =>
  Effect.map(
    Effect.scoped(Effect.flatMap(session.subscribe(from), (s) => Stream.runCollect(Stream.take(s, 10_000)))),
    (all) => Array.from(all)
  )

const tagsOf = (events: ReadonlyArray<SessionEvent.SessionEvent>) => events.map((e) => e._tag)

const bash = (command: string, extra: Partial<Parameters<typeof MockClaude.tool>[0]> = {}) =>
  MockClaude.tool({
    name: "Bash",
    input: { command, description: "test" },
    output: (i) => `ran: ${i.command}`,
    ...extra
  })

/** MockTransport (running `cliScript`) whose connections are altered by `wrap` (to simulate a misbehaving pipe). */
const wrapConnections = (
  wrap: (connection: Transport.Connection) => Transport.Connection,
  cliScript: MockClaude.Script = MockClaude.defaultScript
) =>
  Layer.effect(
    Transport.Transport,
    Effect.gen(function*() {
      const inner = yield* Transport.Transport
      return Transport.Transport.of({
        capabilities: inner.capabilities,
        open: (spec, options) => Effect.map(inner.open(spec, options), wrap)
      })
    })
  ).pipe(Layer.provideMerge(MockTransport.layer(cliScript)))

/** Writes after the first `n` (the handshake, …) go through `slow`, which gets the write as it would have run. */
const writesAfter = (
  n: number,
  slow: (
    write: Effect.Effect<void, TetherError.TransportWriteError>
  ) => Effect.Effect<void, TetherError.TransportWriteError>,
  cliScript?: MockClaude.Script
) =>
  wrapConnections((connection) => {
    let writes = 0
    return { ...connection, write: (line) => ++writes > n ? slow(connection.write(line)) : connection.write(line) }
  }, cliScript)

/** Writes never complete after the first `n` (the handshake), like a CLI that stopped reading its stdin. */
const blockWritesAfter = (n: number) => writesAfter(n, () => Effect.never)

/** Writes after the first `n` take `delay` before they reach the CLI, like a CLI slow to read its stdin. */
const slowWritesAfter = (n: number, delay: Duration.Input, cliScript: MockClaude.Script) =>
  writesAfter(n, (write) => Effect.andThen(Effect.sleep(delay), write), cliScript)

// ---------------------------------------------------------------------------------------------------------------

describe("Session lifecycle", () => {
  it.effect("writes initialize first, without waiting for output, and becomes idle", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const written = yield* writtenFrames(cli)
        assert.strictEqual(written[0].type, "control_request")
        assert.strictEqual(written[0].request.subtype, "initialize")
        assert.strictEqual(yield* session.status, "idle")
        assert.strictEqual(session.initializeResponse.claude_code_version, "2.1.332")
        assert.isTrue(yield* session.isAlive)
        // The command line the session asked for: stream-json both ways, replays; no one to ask for permission
        // without a policy (see "Permissions").
        assert.include([...cli.spec.args], "--replay-user-messages")
        assert.notInclude(cli.spec.args.join(" "), "--permission-prompt-tool")
      })).pipe(mock()))

  it.effect("a CLI that never answers initialize fails with StartupTimeout, safe to fall back, and is torn down", () =>
    Effect.gen(function*() {
      const started = yield* now
      const exit = yield* settle(
        Effect.scoped(
          ClaudeSession.make({
            timeouts: timeouts({ startup: "2 seconds", control: "1 second", delivery: "1 second" })
          })
        ).pipe(
          Effect.exit
        )
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
      // The handshake is bounded by the startup timeout as a whole (not by the control timeout).
      assert.strictEqual(error?._tag, "StartupTimeout")
      assert.isTrue(error?.safeToFallback)
      assert.isTrue(error?.safeToRequeue)
      assert.isFalse(error?.deliveryUncertain)
      assert.isAtMost((yield* now) - started, 2_100)
      const cli = yield* (yield* MockTransport.MockTransport).latest
      assert.isFalse(yield* cli.isAlive)
    }).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("initialize")] }))))

  it.effect("the startup timeout bounds the whole handshake", () =>
    Effect.gen(function*() {
      const exit = yield* settle(
        Effect.scoped(
          ClaudeSession.make({
            timeouts: timeouts({ startup: "200 millis", control: "100 millis", delivery: "100 millis" })
          })
        ).pipe(
          Effect.exit
        )
      )
      const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
      // The mock CLI takes 300 ms to start: the 200 ms startup budget fires first.
      assert.strictEqual(error?._tag, "StartupTimeout")
      assert.isTrue(error?.safeToFallback)
    }).pipe(mock()))

  it.effect("a missing executable is a typed, safe-to-fallback error", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(ClaudeSession.make({})))
      const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
      assert.strictEqual(error?._tag, "ExecutableNotFound")
      assert.isTrue(error?.safeToFallback)
    }).pipe(
      mock(MockClaude.defaultScript, {
        spawnError: () => new TetherError.ExecutableNotFound({ program: "claude", searched: ["PATH"] })
      })
    ))

  it.effect("a CLI that exits during the handshake fails with HandshakeFailed carrying stderr", () =>
    Effect.gen(function*() {
      const exit = yield* settle(Effect.scoped(ClaudeSession.make({})).pipe(Effect.exit))
      const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
      assert.strictEqual(error?._tag, "HandshakeFailed")
      assert.include(error?._tag === "HandshakeFailed" ? error.reason : "", "bad flag")
    }).pipe(mock(MockClaude.make([], { faults: [MockClaude.crash({ code: 2, stderr: "error: bad flag\n" })] }))))

  it.effect("invalid timeouts are rejected when built", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Timeouts.make({ stall: "2 hours", turn: "1 hour" }))
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.include(error.problems[0], "stall")
      const zero = yield* Effect.flip(Timeouts.make({ control: 0 }))
      assert.include(zero.problems[0], "control")
      const startError = yield* Effect.flip(
        Effect.scoped(ClaudeSession.make({ timeouts: { ...Timeouts.defaults, interrupt: Duration.hours(2) } }))
      )
      assert.strictEqual(startError._tag, "InvalidConfig")
    }).pipe(mock()))

  it.effect("release ends stdin, the CLI exits cleanly, and the session is closed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const session = yield* settle(ClaudeSession.make({}).pipe(Scope.provide(scope)))
      const cli = yield* (yield* MockTransport.MockTransport).latest
      yield* settle(session.run("hi"))
      yield* settle(Scope.close(scope, Exit.void))
      assert.isTrue(yield* cli.stdinEnded)
      assert.isFalse(yield* cli.isAlive)
      assert.strictEqual(yield* session.status, "closed")
      const state = yield* session.process
      assert.strictEqual(state._tag, "Completed")
      assert.deepStrictEqual(yield* cli.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
    }).pipe(mock()))

  it.effect("release never hangs past closeGrace + termGrace, even for a CLI that ignores EOF and SIGTERM", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const session = yield* settle(
        ClaudeSession.make({ timeouts: timeouts({ closeGrace: "1 second", termGrace: "2 seconds" }) }).pipe(
          Scope.provide(scope)
        )
      )
      const cli = yield* (yield* MockTransport.MockTransport).latest
      yield* cli.trigger(MockClaude.hang)
      const started = yield* now
      yield* settle(Scope.close(scope, Exit.void))
      const took = (yield* now) - started
      assert.isAtMost(took, 3_050)
      assert.isAtLeast(took, 3_000)
      assert.isFalse(yield* cli.isAlive)
      assert.strictEqual(yield* session.status, "closed")
    }).pipe(mock(MockClaude.make([], { faults: [MockClaude.ignoreSigterm] }))))
})

describe("Turns", () => {
  it.effect("a plain turn: the turn id is the uuid written, events in order, the process stays alive", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("hello there")
        const result = yield* settle(turn.result)
        assert.include(result.text, "hello there")
        assert.strictEqual(result.turnId, turn.id)
        assert.isFalse(result.isError)
        assert.isAbove(result.usage.outputTokens, 0)
        assert.isDefined(result.totalCostUsd)
        assert.isTrue(Option.isSome(yield* session.sessionId))
        assert.strictEqual(result.sessionId, Option.getOrThrow(yield* session.sessionId))
        const userFrames = (yield* writtenFrames(cli)).filter((f) => f.type === "user")
        assert.strictEqual(userFrames.length, 1)
        assert.strictEqual(userFrames[0].uuid, turn.id)
        // A result ends the turn, not the process.
        assert.isTrue(yield* session.isAlive)
        assert.strictEqual(yield* session.status, "idle")

        const events = (yield* snapshotEvents(session)).filter((e) =>
          e.turnId === turn.id && e._tag !== "Status" && e._tag !== "Frame"
        )
        const tags = tagsOf(events)
        assert.strictEqual(tags[0], "TurnStarted")
        assert.strictEqual(tags[1], "TurnAcknowledged")
        assert.include(tags, "TextDelta")
        assert.include(tags, "AssistantMessage")
        assert.strictEqual(tags.at(-1), "TurnCompleted")
        const text = events.flatMap((e) => (e._tag === "TextDelta" ? [e.text] : [])).join("")
        assert.include(text, "hello there")

        // The turn's own stream replays from its start and ends with its terminal event.
        const own = yield* Effect.map(Stream.runCollect(turn.events), (all) => Array.from(all))
        const ownEvents = own.flatMap((d) => (d._tag === "Event" ? [d.event] : []))
        assert.strictEqual(ownEvents.at(-1)?._tag, "TurnCompleted")
        assert.isTrue(ownEvents.every((e) => e.turnId === turn.id))
      })).pipe(mock()))

  it.effect("default turn ids: version-4 UUIDs, distinct within a session and across sessions", () =>
    Effect.gen(function*() {
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
      const idsOf = withSession({}, (session) =>
        Effect.gen(function*() {
          const ids: Array<string> = []
          for (let i = 0; i < 3; i++) ids.push((yield* settle(session.run(`turn ${i}`))).turnId)
          return ids
        }))
      const first = yield* idsOf
      const second = yield* idsOf
      for (const id of [...first, ...second]) assert.match(id, uuid)
      assert.strictEqual(new Set([...first, ...second]).size, 6)
    }).pipe(mock()))

  it.effect("every event gets a strictly increasing seq", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        yield* settle(session.run("one"))
        yield* settle(session.run("two"))
        const seqs = (yield* snapshotDeliveries(session)).map((d) => d.seq)
        assert.isAbove(seqs.length, 10)
        for (let i = 1; i < seqs.length; i++) assert.strictEqual(seqs[i], seqs[i - 1] + 1)
      })).pipe(mock()))

  it.effect("a second send while a turn runs is refused with TurnInFlight (safe to requeue) and writes nothing", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const first = yield* session.send("first")
        const error = yield* Effect.flip(session.send("second"))
        assert.strictEqual(error._tag, "TurnInFlight")
        assert.isTrue(error.safeToRequeue)
        assert.isFalse(error.deliveryUncertain)
        yield* settle(first.result)
        const userFrames = (yield* writtenFrames(cli)).filter((f) => f.type === "user")
        assert.strictEqual(userFrames.length, 1)
        // Once idle, the next send goes through.
        const again = yield* settle(session.run("second"))
        assert.include(again.text, "second")
      })).pipe(mock()))

  it.effect("with a queue, queued prompts have a visible lifecycle and run in order", () =>
    withSession({ queue: true }, (session) =>
      Effect.gen(function*() {
        const a = yield* session.send("alpha")
        const b = yield* session.send("beta")
        assert.strictEqual(yield* b.phase, "queued")
        const [ra, rb] = yield* settle(Effect.all([a.result, b.result]))
        assert.include(ra.text, "alpha")
        assert.include(rb.text, "beta")
        assert.strictEqual(yield* b.phase, "completed")
        const tags = tagsOf(
          (yield* snapshotEvents(session)).filter((e) => e.turnId === b.id && e._tag !== "Status" && e._tag !== "Frame")
        )
        assert.deepStrictEqual(tags.slice(0, 3), ["TurnQueued", "TurnStarted", "TurnAcknowledged"])
        assert.strictEqual(tags.at(-1), "TurnCompleted")
      })).pipe(mock()))

  it.effect("a full queue refuses with QueueFull (safe to requeue)", () =>
    withSession({ queue: true, queueCapacity: 1 }, (session) =>
      Effect.gen(function*() {
        const a = yield* session.send("a")
        yield* session.send("b")
        const error = yield* Effect.flip(session.send("c"))
        assert.strictEqual(error._tag, "QueueFull")
        assert.isTrue(error.safeToRequeue)
        yield* settle(a.result)
      })).pipe(mock()))

  it.effect("a stdin write that does not finish within the delivery timeout retires the session (uncertain)", () =>
    Effect.gen(function*() {
      // A transport whose writes block once the handshake is done, like a CLI that stopped reading stdin.
      const blocking = blockWritesAfter(1)
      yield* withSession({ timeouts: timeouts({ delivery: "1 second" }) }, (session) =>
        Effect.gen(function*() {
          // send returns once the prompt is written: here, once the delivery timeout gave up on the write.
          const turn = yield* settle(session.send("hello"))
          const error = yield* settle(Effect.flip(turn.result))
          assert.strictEqual(error._tag, "DeliveryTimeout")
          assert.isTrue(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "failed")
        })).pipe(Effect.provide(blocking))
    }))

  it.effect("a malformed or oversized line becomes a ProtocolError event and the session keeps running", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        yield* cli.trigger(MockClaude.malformed())
        yield* cli.trigger(MockClaude.oversized())
        yield* cli.inject(`{"type":"result","subtype":"success","is_error":"yes"}`)
        yield* advance("100 millis")
        const errors = (yield* snapshotEvents(session)).flatMap((e) => e._tag === "ProtocolError" ? [e.error] : [])
        assert.sameMembers(errors.map((e) => e.reason), ["not-json", "too-long", "malformed"])
        const result = yield* settle(session.run("still there?"))
        assert.include(result.text, "still there?")
      })).pipe(mock()))

  it.effect("result errors map to typed errors: max turns and budget carry the session id to resume", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const maxTurns = yield* settle(Effect.flip(session.run("loop forever")))
        assert.strictEqual(maxTurns._tag, "MaxTurnsExceeded")
        const sessionId = Option.getOrNull(yield* session.sessionId)
        assert.isNotNull(sessionId)
        if (maxTurns._tag === "MaxTurnsExceeded") assert.strictEqual(maxTurns.sessionId, sessionId)
        const budget = yield* settle(Effect.flip(session.run("spend it all")))
        assert.strictEqual(budget._tag, "BudgetExceeded")
        if (budget._tag === "BudgetExceeded") assert.strictEqual(budget.sessionId, sessionId)
        const api = yield* settle(Effect.flip(session.run("api down")))
        assert.strictEqual(api._tag, "ApiError")
        if (api._tag === "ApiError") assert.strictEqual(api.status, 529)
        assert.isFalse(api.deliveryUncertain)
        // The session goes on after an API error.
        const ok = yield* settle(session.run("fine now"))
        assert.include(ok.text, "fine now")
      })).pipe(mock(script(
        MockClaude.when("loop", MockClaude.maxTurns(3)),
        MockClaude.when("spend", MockClaude.maxBudget(0.5)),
        MockClaude.when("api down", MockClaude.apiError({ status: 529 }))
      ))))

  it.effect("a settled turn's handle answers from its outcome: result, settled and events, read again and again", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const failed = yield* session.send("api down")
        const failedExit = yield* settle(failed.settled)
        const ok = yield* session.send("fine now")
        const okResult = yield* settle(ok.result)
        yield* settle(session.run("a later turn"))
        // Read after later turns, twice each, with the clock still: nothing is waited for.
        for (let i = 0; i < 2; i++) {
          const error = yield* Effect.flip(failed.result)
          assert.strictEqual(error._tag, "ApiError")
          if (error._tag === "ApiError") assert.strictEqual(error.status, 529)
          assert.strictEqual(error, Exit.isFailure(failedExit) ? Cause.squash(failedExit.cause) : undefined)
          assert.deepStrictEqual(yield* failed.settled, failedExit)
          assert.strictEqual(yield* ok.result, okResult)
          const settled = yield* ok.settled
          assert.isTrue(Exit.isSuccess(settled) && settled.value === okResult)
          const own = Array.from(yield* Stream.runCollect(ok.events)).flatMap((d) =>
            d._tag === "Event" ? [d.event] : []
          )
          assert.strictEqual(own.at(-1)?._tag, "TurnCompleted")
          assert.isTrue(own.every((e) => e.turnId === ok.id))
          assert.include(okResult.text, "fine now")
        }
        assert.strictEqual(yield* ok.phase, "completed")
        assert.strictEqual(yield* failed.phase, "failed")
      })).pipe(mock(script(MockClaude.when("api down", MockClaude.apiError({ status: 529 }))))))
})

describe("Permissions", () => {
  const toolScript = script(MockClaude.when("touch", bash("touch perm.txt")))

  it.effect("allow sends updatedInput = the original input; requests and resolutions are events", () =>
    withSession({ policy: Permission.allowAll }, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("touch it")
        const result = yield* settle(turn.result)
        assert.include(result.text, "ran: touch perm.txt")
        const answer = (yield* writtenFrames(cli)).find((f) => f.type === "control_response")
        assert.strictEqual(answer?.response.response.behavior, "allow")
        assert.deepStrictEqual(answer?.response.response.updatedInput, {
          command: "touch perm.txt",
          description: "test"
        })
        const events = yield* snapshotEvents(session)
        const requested = events.find((e) => e._tag === "PermissionRequested")
        const resolved = events.find((e) => e._tag === "PermissionResolved")
        assert.strictEqual(requested?._tag === "PermissionRequested" ? requested.request.toolName : "", "Bash")
        assert.strictEqual(requested?.turnId, turn.id)
        assert.deepStrictEqual(
          resolved?._tag === "PermissionResolved" ? resolved.resolution : undefined,
          { _tag: "Decided", by: "policy", decision: Permission.allow() }
        )
      })).pipe(mock(toolScript)))

  it.effect("allow with a rewritten input runs the rewritten input", () =>
    withSession({
      policy: (request) => Effect.succeed(Permission.allow({ ...request.input, command: "echo rewritten" }))
    }, (session) =>
      Effect.gen(function*() {
        const result = yield* settle(session.run("touch it"))
        assert.include(result.text, "ran: echo rewritten")
      })).pipe(mock(toolScript)))

  it.effect("deny: the turn goes on and the result lists the denial", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        // The default policy denies everything.
        const result = yield* settle(session.run("touch it"))
        assert.isFalse(result.isError)
        assert.strictEqual(result.permissionDenials.length, 1)
        assert.strictEqual(result.permissionDenials[0].toolName, "Bash")
      })).pipe(mock(toolScript)))

  it.effect("the CLI asks the host when the host has a policy (stdio), no one without; the host's option wins", () =>
    Effect.gen(function*() {
      const promptTool = (options: ClaudeSession.Options) =>
        withSession(
          options,
          (_session, cli) => Effect.succeed(cli.spec.args.filter((arg) => arg.startsWith("--permission-prompt-tool")))
        ).pipe(mock())
      assert.deepStrictEqual(yield* promptTool({}), [])
      assert.deepStrictEqual(yield* promptTool({ policy: Permission.allowAll }), ["--permission-prompt-tool=stdio"])
      // The default policy given by name is a policy of the host's: it is asked.
      assert.deepStrictEqual(yield* promptTool({ policy: Permission.denyAll }), ["--permission-prompt-tool=stdio"])
      assert.deepStrictEqual(yield* promptTool({ policy: Permission.allowAll, permissionPromptTool: false }), [])
      assert.deepStrictEqual(yield* promptTool({ permissionPromptTool: "stdio" }), ["--permission-prompt-tool=stdio"])
      assert.deepStrictEqual(yield* promptTool({ permissionPromptTool: "mcp__perm__ask" }), [
        "--permission-prompt-tool=mcp__perm__ask"
      ])
    }))

  it.effect("without a policy, a tool the CLI denies on its own reaches the host as the default policy's deny", () =>
    Effect.gen(function*() {
      // The same turn, the CLI denying on its own (no policy: no prompt tool) and asking the default policy (the
      // prompt tool forced on, as every session had it before).
      const denial = (options: ClaudeSession.Options) =>
        withSession(options, (session, cli) =>
          Effect.gen(function*() {
            const waits = (yield* Metric.value(Session.metrics.permissionWait)).count
            const turn = yield* session.send("touch it")
            const result = yield* settle(turn.result)
            const events = (yield* snapshotEvents(session)).filter((e) =>
              e.turnId === turn.id &&
              ["ToolUse", "PermissionRequested", "PermissionResolved", "ToolResult", "TurnCompleted"].includes(e._tag)
            )
            const requested = events.find((e) => e._tag === "PermissionRequested")
            const request = requested?._tag === "PermissionRequested" ? requested.request : undefined
            const resolved = events.find((e) => e._tag === "PermissionResolved")
            const resolution = resolved?._tag === "PermissionResolved" ? resolved.resolution : undefined
            const toolResult = events.find((e) => e._tag === "ToolResult")
            const toolUse = events.find((e) => e._tag === "ToolUse")
            return {
              tags: tagsOf(events) as ReadonlyArray<string>,
              request: request === undefined
                ? undefined
                : {
                  toolName: request.toolName,
                  // The tool use the CLI announced.
                  toolUseId: request.toolUseId === (toolUse?._tag === "ToolUse" ? toolUse.toolUseId : "none"),
                  input: request.input,
                  kind: request.kind
                },
              by: resolution?._tag === "Decided" ? `${resolution.by}:${resolution.decision._tag}` : resolution?._tag,
              // The model reads the deny's message as the tool's result.
              messageIsResult: resolution?._tag === "Decided" && resolution.decision._tag === "Deny" &&
                toolResult?._tag === "ToolResult" && toolResult.isError &&
                String(toolResult.content).includes(resolution.decision.message),
              denials: result.permissionDenials.map((d) => ({ toolName: d.toolName, input: d.input })),
              pending: (yield* session.pendingPermissions).length,
              lateAnswer: request === undefined
                ? undefined
                : (yield* Effect.flip(session.answerPermission(request.requestId, Permission.allow())))._tag as string,
              waits: (yield* Metric.value(Session.metrics.permissionWait)).count - waits,
              written: (yield* writtenFrames(cli)).filter((f) => f.type === "control_response").length,
              askedByCli: (yield* cli.frames).some((f) => (f as any).request?.subtype === "can_use_tool")
            }
          })).pipe(mock(toolScript))
      const onItsOwn = yield* denial({})
      const asked = yield* denial({ permissionPromptTool: "stdio" })
      const same = {
        tags: ["ToolUse", "PermissionRequested", "PermissionResolved", "ToolResult", "TurnCompleted"],
        request: {
          toolName: "Bash",
          toolUseId: true,
          input: { command: "touch perm.txt", description: "test" },
          kind: "tool"
        },
        by: "policy:Deny",
        messageIsResult: true,
        denials: [{ toolName: "Bash", input: { command: "touch perm.txt", description: "test" } }],
        pending: 0,
        lateAnswer: "PermissionAlreadyResolved",
        waits: 1
      }
      assert.deepStrictEqual(onItsOwn, { ...same, written: 0, askedByCli: false })
      assert.deepStrictEqual(asked, { ...same, written: 1, askedByCli: true })
    }))

  it.effect("deny with interrupt ends the turn as interrupted by the permission decision", () =>
    withSession(
      { policy: () => Effect.succeed(Permission.deny("no", { interrupt: true })) },
      (session) =>
        Effect.gen(function*() {
          const error = yield* settle(Effect.flip(session.run("touch it")))
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag !== "TurnInterrupted") return
          assert.strictEqual(error.reason, "permission")
          assert.isTrue(error.acknowledged)
          assert.isFalse(error.deliveryUncertain)
          assert.strictEqual(yield* session.status, "idle")
        })
    ).pipe(mock(toolScript)))

  it.effect("defer: answered later, exactly once; unknown ids are typed errors; waiting is not a stall", () =>
    withSession({
      policy: () => Effect.succeed(Permission.defer),
      timeouts: timeouts({ stall: "1 second", permission: "1 minute" })
    }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("touch it")
        yield* advance("500 millis")
        const [pending] = yield* session.pendingPermissions
        assert.strictEqual(pending.toolName, "Bash")
        assert.strictEqual(yield* session.status, "awaiting-permission")
        // Much longer than the stall timeout: waiting on a decision is not a stall.
        yield* advance("5 seconds")
        assert.strictEqual(yield* session.status, "awaiting-permission")
        yield* session.answerPermission(pending.requestId, Permission.allow())
        const again = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
        assert.strictEqual(again._tag, "PermissionAlreadyResolved")
        const unknown = yield* Effect.flip(session.answerPermission("nope", Permission.allow()))
        assert.strictEqual(unknown._tag, "PermissionNotFound")
        const result = yield* settle(turn.result)
        assert.include(result.text, "ran: touch perm.txt")
      })).pipe(mock(toolScript)))

  it.effect("an answer whose caller is interrupted while it is being written still reaches the CLI", () =>
    withSession({ policy: () => Effect.succeed(Permission.defer) }, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("touch it")
        yield* advance("500 millis")
        const [pending] = yield* session.pendingPermissions
        // The answer's write takes a second (the CLI is slow to read); its caller gives up half-way.
        const answering = yield* Effect.forkChild(session.answerPermission(pending.requestId, Permission.allow()))
        yield* advance("300 millis")
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(answering))
        yield* advance("1 second")
        yield* Fiber.join(interrupting)
        const answer = (yield* writtenFrames(cli)).find((f) => f.type === "control_response")
        assert.strictEqual(answer?.response.response.behavior, "allow")
        const result = yield* settle(turn.result)
        assert.include(result.text, "ran: touch perm.txt")
      })).pipe(Effect.provide(slowWritesAfter(2, "1 second", toolScript))))

  it.effect("a deferred request expires after the permission timeout with a deny, and its wait is timed", () =>
    withSession({ policy: () => Effect.succeed(Permission.defer), timeouts: timeouts({ permission: "2 seconds" }) }, (
      session,
      cli
    ) =>
      Effect.gen(function*() {
        const waitsBefore = yield* Metric.value(Session.metrics.permissionWait)
        const turn = yield* session.send("touch it")
        yield* advance("500 millis")
        const [pending] = yield* session.pendingPermissions
        const result = yield* settle(turn.result)
        assert.strictEqual(result.permissionDenials.length, 1)
        const answer = (yield* writtenFrames(cli)).find((f) => f.type === "control_response")
        assert.strictEqual(answer?.response.response.behavior, "deny")
        const late = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
        assert.strictEqual(late._tag, "PermissionAlreadyResolved")
        // Every session records its permission waits (here outside any registry): this one waited its timeout.
        const waits = yield* Metric.value(Session.metrics.permissionWait)
        assert.strictEqual(waits.count - waitsBefore.count, 1)
        assert.strictEqual(waits.sum - waitsBefore.sum, 2000)
      })).pipe(mock(toolScript)))

  it.effect("a policy that fails or dies never wedges the turn: the CLI receives a deny", () =>
    Effect.gen(function*() {
      for (
        const policy of [
          () => Effect.fail({ _tag: "PolicyExploded" }),
          () => Effect.die("policy died")
        ] satisfies ReadonlyArray<Permission.Policy>
      ) {
        yield* withSession({ policy }, (session) =>
          Effect.gen(function*() {
            const result = yield* settle(session.run("touch it"))
            assert.strictEqual(result.permissionDenials.length, 1)
            const resolved = (yield* snapshotEvents(session)).find((e) => e._tag === "PermissionResolved")
            assert.strictEqual(resolved?._tag === "PermissionResolved" ? resolved.resolution._tag : "", "PolicyFailed")
          }))
      }
    }).pipe(mock(toolScript)))

  it.effect("an interrupt during a pending permission: the CLI cancels it, and a late answer is refused", () =>
    withSession({ policy: () => Effect.succeed(Permission.defer) }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("touch it")
        yield* advance("500 millis")
        const [pending] = yield* session.pendingPermissions
        const outcome = yield* settle(session.interrupt)
        assert.strictEqual(outcome, "interrupted")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
        const late = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
        assert.strictEqual(late._tag, "PermissionAlreadyResolved")
        const resolved = (yield* snapshotEvents(session)).find((e) => e._tag === "PermissionResolved")
        assert.deepStrictEqual(
          resolved?._tag === "PermissionResolved" ? resolved.resolution : undefined,
          { _tag: "Expired", why: "cancelled-by-cli" }
        )
      })).pipe(mock(toolScript)))

  it.effect("hook callbacks are registered at initialize and answered with the host's output", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      yield* withSession({
        hooks: {
          PreToolUse: [{
            matcher: "Bash",
            callback: (input) =>
              Effect.sync(() => {
                seen.push(input["tool_name"])
                return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
              })
          }]
        }
      }, (session, cli) =>
        Effect.gen(function*() {
          const init = (yield* writtenFrames(cli))[0]
          assert.deepStrictEqual(Object.keys(init.request.hooks), ["PreToolUse"])
          // A PreToolUse allow skips the permission prompt: the default deny-all policy is never asked.
          const result = yield* settle(session.run("touch it"))
          assert.include(result.text, "ran: touch perm.txt")
          assert.strictEqual(result.permissionDenials.length, 0)
          assert.deepStrictEqual(seen, ["Bash"])
        }))
    }).pipe(mock(toolScript)))

  it.effect("ready-made policies: allow-list and deny-list (the detach-denying one is ShellPolicy's, in transport-node)", () =>
    Effect.gen(function*() {
      const request = (toolName: string, input: Record<string, unknown>): Permission.PermissionRequest => ({
        requestId: "r",
        turnId: "t",
        kind: "tool",
        toolName,
        toolUseId: undefined,
        input,
        description: undefined,
        raw: undefined
      })
      const allowRead = Permission.allowTools(["Read"])
      assert.strictEqual((yield* allowRead(request("Read", {})))._tag, "Allow")
      assert.strictEqual((yield* allowRead(request("Bash", {})))._tag, "Deny")
      assert.strictEqual((yield* Permission.denyTools(["Bash"])(request("Bash", {})))._tag, "Deny")
      assert.strictEqual((yield* Permission.denyTools(["Bash"])(request("Read", {})))._tag, "Allow")
      assert.strictEqual((yield* Permission.denyAll(request("Read", {})))._tag, "Deny")
    }))
})

describe("Controls", () => {
  it("the controls take the protocol's types: a mode that does not exist does not compile", () => {
    type Mode = Parameters<ClaudeSession.ClaudeSession["setPermissionMode"]>[0]
    expectTypeOf<Mode>().toEqualTypeOf<ClaudeProtocol.PermissionMode>()
    expectTypeOf<Mode>().toEqualTypeOf<"default" | "acceptEdits" | "bypassPermissions" | "plan" | "dontAsk" | "auto">()
    // @ts-expect-error "acceptEdit" is not a permission mode
    const typo: Mode = "acceptEdit"
    assert.strictEqual(typo, "acceptEdit")
  })

  it.effect("controls are typed operations with decoded responses", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* settle(session.setPermissionMode("acceptEdits")), { mode: "acceptEdits" })
        assert.deepStrictEqual(yield* settle(session.setModel("claude-haiku")), { model: "claude-haiku" })
        yield* settle(session.setMaxThinkingTokens(1024))
        assert.deepStrictEqual(yield* settle(session.mcpStatus), { mcpServers: [] })
        const usage = yield* settle(session.getContextUsage)
        assert.isTrue(Array.isArray(usage["categories"]))
        const failed = yield* settle(Effect.flip(Effect.asVoid(session.control({ subtype: "no_such_subtype" }))))
        assert.strictEqual(failed._tag, "ControlFailed")
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock()))

  it.effect("a control answered without a payload, as older CLIs do, succeeds with what the CLI sent", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        // claude 2.1.197 answers set_model and set_permission_mode with no payload, although the change was made.
        const model = yield* Effect.forkChild(session.setModel("claude-haiku"))
        const mode = yield* Effect.forkChild(session.setPermissionMode("plan"))
        yield* advance("10 millis")
        const ids = (yield* writtenFrames(cli)).flatMap((frame) =>
          frame.type === "control_request" && frame.request?.subtype !== "initialize" ? [frame.request_id] : []
        )
        assert.strictEqual(ids.length, 2)
        for (const id of ids) {
          yield* cli.inject(`{"type":"control_response","response":{"subtype":"success","request_id":"${id}"}}`)
        }
        assert.deepStrictEqual(yield* settle(Fiber.join(model)), {})
        assert.deepStrictEqual(yield* settle(Fiber.join(mode)), {})
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(
        mock(
          MockClaude.make([], {
            faults: [MockClaude.neverAnswer("set_model"), MockClaude.neverAnswer("set_permission_mode")]
          })
        )
      ))

  // A connection's writes as a wrapper makes them: through `write` (an Effect), or through a callback (the driver
  // calls it without a fiber). Either way, once `hold` has run, each write waits until the test lets it through;
  // `callers` records the fiber each write was called from.
  const heldWrites = (kind: "effect" | "callback") => {
    const held: Array<() => void> = []
    const callers: Array<Fiber.Fiber<unknown, unknown> | undefined> = []
    let holding = false
    const layer = wrapConnections((connection) => {
      const pass = Transport.writeCallbackOf(connection)!
      const write: Transport.WriteCallback = (line, done) => {
        if (!holding) return pass(line, done)
        callers.push(Fiber.getCurrent())
        held.push(() => pass(line, done))
      }
      const made = Transport.writeFromCallback(write)
      // A function of the test's own around the made write carries no callback: the session runs its Effect.
      return { ...connection, write: kind === "callback" ? made : (line: string) => made(line) }
    })
    return { held, callers, hold: Effect.sync(() => holding = true), layer }
  }

  for (const kind of ["effect", "callback"] as const) {
    it.effect(`lines queued behind a write that ends later are written when it ends, in order (${kind} writes)`, () => {
      const writes = heldWrites(kind)
      return withSession({}, (session, cli) =>
        Effect.gen(function*() {
          const before = (yield* writtenFrames(cli)).length
          yield* writes.hold
          const model = yield* Effect.forkChild(session.setModel("claude-haiku"))
          const mode = yield* Effect.forkChild(session.setPermissionMode("plan"))
          yield* advance("10 millis")
          // The first is in flight, the second waits behind it.
          assert.strictEqual(writes.held.length, 1)
          // A callback write is made on its sender's stack; any other write in a fiber of the session's.
          if (kind === "callback") assert.strictEqual(writes.callers[0], model)
          else assert.notStrictEqual(writes.callers[0], model)
          writes.held[0]()
          yield* advance("10 millis")
          assert.strictEqual(writes.held.length, 2)
          writes.held[1]()
          assert.deepStrictEqual(yield* settle(Fiber.join(model)), { model: "claude-haiku" })
          assert.deepStrictEqual(yield* settle(Fiber.join(mode)), { mode: "plan" })
          const subtypes = (yield* writtenFrames(cli)).slice(before).map((frame) => frame.request?.subtype)
          assert.deepStrictEqual(subtypes, ["set_model", "set_permission_mode"])
        })).pipe(Effect.provide(writes.layer))
    })
  }

  it.effect("a write callback that reports its write twice does not end the next write", () => {
    const writes = heldWrites("callback")
    return withSession({}, (session) =>
      Effect.gen(function*() {
        yield* writes.hold
        const model = yield* Effect.forkChild(session.setModel("claude-haiku"))
        const mode = yield* Effect.forkChild(session.setPermissionMode("plan"))
        yield* advance("10 millis")
        writes.held[0]()
        yield* advance("10 millis")
        // The second line's write is in flight; the first's report comes again.
        writes.held[0]()
        const third = yield* Effect.forkChild(session.setMaxThinkingTokens(1024))
        yield* advance("10 millis")
        // Still one write at a time: the third waits behind the second.
        assert.strictEqual(writes.held.length, 2)
        writes.held[1]()
        yield* advance("10 millis")
        assert.strictEqual(writes.held.length, 3)
        writes.held[2]()
        yield* settle(Effect.all([Fiber.join(model), Fiber.join(mode), Fiber.join(third)]))
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(Effect.provide(writes.layer))
  })

  for (const kind of ["effect", "callback"] as const) {
    it.effect(`a write that throws fails like a broken pipe: the session is retired (${kind} writes)`, () => {
      let throwing = false
      const layer = wrapConnections((connection) => {
        const pass = Transport.writeCallbackOf(connection)!
        const write: Transport.WriteCallback = (line, done) => {
          if (throwing) throw new Error("the pipe's buffer is gone")
          pass(line, done)
        }
        return {
          ...connection,
          write: kind === "callback"
            ? Transport.writeFromCallback(write)
            : (line: string) => throwing ? Effect.die(new Error("the pipe's buffer is gone")) : connection.write(line)
        }
      })
      return withSession({}, (session) =>
        Effect.gen(function*() {
          throwing = true
          const started = yield* now
          const error = yield* settle(Effect.flip(session.setModel("claude-haiku")))
          assert.strictEqual(error._tag, "SessionRetired")
          assert.strictEqual(yield* session.status, "failed")
          // At once, not at the delivery deadline of a write left in flight.
          assert.isBelow((yield* now) - started, 100)
        })).pipe(Effect.provide(layer))
    })
  }

  it.effect("a control left unanswered past its deadline retires the session with ControlTimeout", () =>
    withSession({ timeouts: timeouts({ control: "2 seconds" }) }, (session, cli) =>
      Effect.gen(function*() {
        const started = yield* now
        const error = yield* settle(Effect.flip(session.setModel("x")))
        assert.strictEqual(error._tag, "ControlTimeout")
        assert.isTrue(error.deliveryUncertain)
        assert.strictEqual((yield* now) - started, 2_000)
        assert.strictEqual(yield* session.status, "failed")
        yield* advance("10 seconds")
        assert.isFalse(yield* cli.isAlive)
      })).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("set_model")] }))))

  it.effect("control responses for ids this host did not send are ignored", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        yield* cli.inject(
          `{"type":"control_response","response":{"subtype":"success","request_id":"not-ours","response":{}}}`
        )
        yield* advance("50 millis")
        const result = yield* settle(session.run("fine"))
        assert.include(result.text, "fine")
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock()))
})

describe("Interrupts, stalls, deadlines", () => {
  const slow = script(MockClaude.when(
    "slow",
    MockClaude.text(Array.from({ length: 40 }, (_, i) => `w${i} `), {
      delay: "100 millis"
    })
  ))

  it.effect("interrupt mid-stream settles the turn as interrupted; the session stays usable", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("slow please")
        yield* advance("500 millis")
        const outcome = yield* settle(turn.interrupt.pipe(Effect.andThen(session.status)))
        assert.strictEqual(outcome, "idle")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag !== "TurnInterrupted") return
        assert.strictEqual(error.reason, "host")
        assert.isTrue(error.acknowledged)
        assert.isFalse(error.deliveryUncertain)
        const next = yield* settle(session.run("after"))
        assert.include(next.text, "after")
      })).pipe(mock(slow)))

  it.effect("an interrupt that does not settle within the interrupt timeout retires the session and its process", () =>
    withSession({ timeouts: timeouts({ interrupt: "3 seconds" }) }, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("slow please")
        yield* advance("300 millis")
        const outcome = yield* settle(session.interrupt)
        assert.strictEqual(outcome, "retired")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "InterruptTimeout")
        // The CLI had acknowledged the prompt: its outcome is unknown, its delivery is not.
        assert.isFalse(error.deliveryUncertain)
        assert.strictEqual(yield* session.status, "failed")
        yield* advance("6 seconds")
        assert.isFalse(yield* cli.isAlive)
      })).pipe(mock(MockClaude.make(slow.turns, { faults: [MockClaude.ignoreInterrupts] }))))

  it.effect("an interrupt before the CLI acknowledged the prompt makes delivery uncertain and retires the session", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("hello")
        const outcome = yield* settle(session.interrupt)
        assert.strictEqual(outcome, "retired")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
        assert.isTrue(error.deliveryUncertain)
        assert.strictEqual(yield* session.status, "failed")
      })).pipe(mock(MockClaude.make([], { timing: { receipt: "2 seconds" } }))))

  it.effect("an interrupt with no active turn is reported, not silently dropped", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        assert.strictEqual(yield* session.interrupt, "no-active-turn")
      })).pipe(mock()))

  it.effect("interrupting the fiber that waits on a turn interrupts the turn in the CLI", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("slow please")
        const waiter = yield* Effect.forkChild(turn.result)
        yield* advance("500 millis")
        yield* Fiber.interrupt(waiter)
        yield* advance("500 millis")
        const interrupts = (yield* writtenFrames(cli)).filter((f) => f.request?.subtype === "interrupt")
        assert.strictEqual(interrupts.length, 1)
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
      })).pipe(mock(slow)))

  it.effect("with interruptOnCancel: false, a host that stops waiting lets the turn finish", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const turn = yield* session.send("slow please", { interruptOnCancel: false })
        const waiter = yield* Effect.forkChild(turn.result)
        yield* advance("500 millis")
        yield* Fiber.interrupt(waiter)
        const result = yield* settle(turn.result)
        assert.include(result.text, "w39")
        const interrupts = (yield* writtenFrames(cli)).filter((f) => f.request?.subtype === "interrupt")
        assert.strictEqual(interrupts.length, 0)
      })).pipe(mock(slow)))

  it.effect("interrupting the fiber in session.run interrupts the turn in the CLI, and the session goes on", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const waiter = yield* Effect.forkChild(session.run("slow please"))
        yield* advance("500 millis")
        yield* Fiber.interrupt(waiter)
        yield* advance("500 millis")
        const interrupts = (yield* writtenFrames(cli)).filter((f) => f.request?.subtype === "interrupt")
        assert.strictEqual(interrupts.length, 1)
        // The interrupted turn settled: the next one is taken.
        const result = yield* settle(session.run("hello"))
        assert.isFalse(result.isError)
      })).pipe(mock(slow)))

  it.effect("session.run with interruptOnCancel: false lets the turn finish when its caller stops waiting", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const waiter = yield* Effect.forkChild(session.run("slow please", { interruptOnCancel: false }))
        yield* advance("500 millis")
        yield* Fiber.interrupt(waiter)
        // Still running: a second prompt is refused until it ends.
        const refused = yield* Effect.flip(session.send("hello"))
        assert.strictEqual(refused._tag, "TurnInFlight")
        yield* advance("10 seconds")
        const interrupts = (yield* writtenFrames(cli)).filter((f) => f.request?.subtype === "interrupt")
        assert.strictEqual(interrupts.length, 0)
        const result = yield* settle(session.run("hello"))
        assert.isFalse(result.isError)
      })).pipe(mock(slow)))

  it.effect("session.run fails with the send's error when the prompt cannot be sent", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const first = yield* session.send("slow please")
        const refused = yield* Effect.flip(session.run("hello"))
        assert.strictEqual(refused._tag, "TurnInFlight")
        if (refused._tag === "TurnInFlight") assert.strictEqual(refused.activeTurnId, first.id)
      })).pipe(mock(slow)))

  it.effect("a stalled stream is interrupted after the stall timeout", () =>
    withSession({ timeouts: timeouts({ stall: "2 seconds" }) }, (session) =>
      Effect.gen(function*() {
        const started = yield* now
        const error = yield* settle(Effect.flip(session.run("stall please")))
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, "stall")
        const took = (yield* now) - started
        // The stall timeout counts from the last chunk, then the interrupt settles: 2 135 ms here.
        assert.isAtLeast(took, 2_000)
        assert.isAtMost(took, 2_200)
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock(script(MockClaude.when("stall", MockClaude.text("partial"), MockClaude.stall())))))
})

describe("Events", () => {
  it.effect("subscribe from latest, from start, after a seq; replay unavailable once the seq left the ring", () =>
    withSession({ eventRing: 8 }, (session) =>
      Effect.gen(function*() {
        yield* settle(session.run("one"))
        const latest = yield* session.latestSeq
        assert.isAbove(latest, 8)
        const unavailable = yield* Effect.flip(Effect.scoped(session.subscribe({ after: 1 })))
        assert.strictEqual(unavailable._tag, "ReplayUnavailable")
        const replay = yield* Effect.scoped(
          Effect.flatMap(session.subscribe({ after: latest - 3 }), (s) => Stream.runCollect(Stream.take(s, 3)))
        )
        assert.deepStrictEqual(Array.from(replay).map((d) => d._tag === "Event" ? d.seq : -1), [
          latest - 2,
          latest - 1,
          latest
        ])
        // "latest" sees only what comes next.
        const next = yield* Effect.scoped(
          Effect.gen(function*() {
            const stream = yield* session.subscribe("latest")
            const fiber = yield* Effect.forkChild(Stream.runCollect(Stream.take(stream, 1)))
            yield* settle(session.run("two"))
            return yield* Fiber.join(fiber)
          })
        )
        const first = Array.from(next)[0]
        assert.strictEqual(first._tag === "Event" ? first.seq : 0, latest + 1)
      })).pipe(mock()))

  it.effect("a subscriber that falls behind sees an explicit lag marker, never a silent gap", () =>
    withSession({ eventRing: 64, subscriberBuffer: 4 }, (session) =>
      Effect.gen(function*() {
        const subscribedAt = yield* session.latestSeq
        const deliveries = yield* Effect.scoped(
          Effect.gen(function*() {
            const stream = yield* session.subscribe("latest")
            // Nobody reads while the turn runs: the subscriber falls behind.
            yield* settle(session.run("a long answer to fill the buffer"))
            const latest = yield* session.latestSeq
            return Array.from(
              yield* Stream.runCollect(Stream.takeUntil(stream, (d) => d._tag === "Event" && d.seq >= latest))
            )
          })
        )
        assert.strictEqual(deliveries[0]._tag, "Lag")
        const lag = deliveries[0] as EventLog.Lag
        const events = deliveries.slice(1).flatMap((d) => (d._tag === "Event" ? [d.seq] : []))
        assert.strictEqual(events[0], lag.resumeSeq)
        // Everything between the subscription point and the resume point is accounted for as missed.
        assert.strictEqual(lag.missed, lag.resumeSeq - (subscribedAt + 1))
        assert.isAbove(lag.missed, 0)
        for (let i = 1; i < events.length; i++) assert.strictEqual(events[i], events[i - 1] + 1)
      })).pipe(mock()))

  it.effect("the session ends every subscription with an Exit event when the CLI is gone", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(collectEvents(session, "latest"))
        yield* advance("20 millis")
        yield* cli.trigger(MockClaude.crash({ code: 9, stderr: "gone\n" }))
        const events = yield* settle(Fiber.join(fiber))
        const last = events.at(-1)
        assert.strictEqual(last?._tag === "Event" ? last.event._tag : "", "Exit")
      })).pipe(mock()))
})

describe("Startup failures", () => {
  it.effect("a session that fails to start is torn down at once, not when the caller's scope closes", () =>
    Effect.gen(function*() {
      // The caller's scope stays open: the failed session must not keep its process until then. The handshake
      // fails on a malformed initialize answer (nothing retires the session on that path).
      const starting = yield* Effect.forkChild(
        Effect.exit(ClaudeSession.make({ makeId: () => "aaaaaaaa-0000-4000-8000-000000000000" }))
      )
      const cli = yield* (yield* MockTransport.MockTransport).latest
      yield* cli.inject(
        `{"type":"control_response","response":{"subtype":"success","request_id":"tether_init","response":{"pid":"not a pid"}}}`
      )
      const exit = yield* settle(Fiber.join(starting))
      const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
      assert.strictEqual(error?._tag, "HandshakeFailed")
      yield* advance("100 millis")
      assert.isTrue(yield* cli.stdinEnded)
      assert.isFalse(yield* cli.isAlive)
    }).pipe(mock()))
})

describe("Races and dispositions", () => {
  it.effect("a stall before the ack retires the session: every queued turn settles and the CLI is torn down", () =>
    withSession(
      { queue: true, queueCapacity: 500, timeouts: timeouts({ stall: "1 second" }) },
      (session, cli) =>
        Effect.gen(function*() {
          const first = yield* session.send("first")
          const queued = []
          for (let i = 0; i < 300; i++) queued.push(yield* session.send(`q${i}`))
          yield* advance("1500 millis")
          assert.strictEqual(yield* session.status, "failed")
          assert.isTrue(Exit.isFailure(yield* first.settled))
          for (const turn of queued) {
            assert.strictEqual(yield* turn.phase, "cancelled")
            const exit = yield* turn.settled
            const error = Exit.isFailure(exit) ? Option.getOrThrow(Exit.findErrorOption(exit)) : undefined
            assert.strictEqual(error?._tag, "SessionUnavailable")
            assert.isTrue(error?.safeToRequeue)
          }
          yield* advance("10 seconds")
          assert.isFalse(yield* cli.isAlive)
        })
    ).pipe(mock(MockClaude.make([], { timing: { receipt: "10 seconds" } }))))

  it.effect("interrupting a queued turn (never written) is safe to requeue; the running turn is untouched", () =>
    withSession({ queue: true }, (session) =>
      Effect.gen(function*() {
        const a = yield* session.send("alpha")
        const b = yield* session.send("beta")
        yield* b.interrupt
        const error = yield* Effect.flip(b.result)
        assert.strictEqual(error._tag, "TurnInterrupted")
        assert.isFalse(error.deliveryUncertain)
        assert.isTrue(error.safeToRequeue)
        assert.strictEqual(yield* b.phase, "cancelled")
        const result = yield* settle(a.result)
        assert.include(result.text, "alpha")
      })).pipe(mock()))

  it.effect("a send interrupted while its prompt is being written retires the session (delivery uncertain)", () =>
    Effect.gen(function*() {
      const blocking = blockWritesAfter(1)
      yield* withSession(
        { timeouts: timeouts({ delivery: "5 seconds", stall: "60 seconds" }) },
        (session) =>
          Effect.gen(function*() {
            const sent = yield* settle(Effect.exit(Effect.timeout(session.send("hello"), "100 millis")))
            assert.isTrue(Exit.isFailure(sent))
            yield* advance("200 millis")
            assert.strictEqual(yield* session.status, "failed")
            const refused = yield* Effect.flip(session.send("again"))
            assert.strictEqual(refused._tag, "SessionUnavailable")
          })
      ).pipe(Effect.provide(blocking))
    }))

  it.effect("a control timeout mid-turn fails the turn with SessionRetired, not a CLI exit", () =>
    withSession({ timeouts: timeouts({ control: "1 second" }) }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("slow please")
        yield* advance("300 millis")
        const control = yield* settle(Effect.flip(session.setModel("x")))
        assert.strictEqual(control._tag, "ControlTimeout")
        const error = yield* Effect.flip(turn.result)
        assert.strictEqual(error._tag, "SessionRetired")
        assert.isFalse(error.deliveryUncertain)
      })).pipe(mock(MockClaude.make([
        MockClaude.when(
          "slow",
          MockClaude.text(Array.from({ length: 40 }, (_, i) => `w${i} `), { delay: "100 millis" })
        )
      ], { faults: [MockClaude.neverAnswer("set_model")] }))))

  it.effect("a turn's event stream ends with its turn even when a lag skipped the terminal event", () =>
    withSession({ subscriberBuffer: 2, eventRing: 256 }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("hello")
        const reader = yield* Effect.forkChild(
          Stream.runCollect(Stream.tap(turn.events, () => Effect.sleep("2 seconds")))
        )
        yield* settle(turn.result)
        yield* settle(session.run("second"))
        yield* advance("30 seconds")
        const deliveries = Array.from(yield* Fiber.join(reader))
        assert.isTrue(deliveries.some((d) => d._tag === "Lag"))
        // The terminal event itself was skipped: the stream ended on the turn's end, not on reading it.
        assert.isFalse(deliveries.some((d) => d._tag === "Event" && d.event._tag === "TurnCompleted"))
      })).pipe(mock()))

  it.effect("Turn.forEachEvent hands over what turn.events gives, one delivery at a time, and ends with the turn", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("hello")
        const seen: Array<EventLog.Delivery<SessionEvent.SessionEvent>> = []
        const reader = yield* Effect.forkChild(Turn.forEachEvent(turn, (d) => Effect.sync(() => void seen.push(d))))
        const result = yield* settle(turn.result)
        yield* settle(Fiber.join(reader))
        const streamed = Array.from(yield* Stream.runCollect(turn.events))
        assert.deepStrictEqual(seen, streamed)
        assert.isTrue(seen.every((d) => d._tag === "Event" && d.event.turnId === turn.id))
        const last = seen.at(-1)
        assert.strictEqual(last?._tag === "Event" ? last.event._tag : undefined, "TurnCompleted")
        assert.include(result.text, "hello")
        // Read again after the turn: the same, at once.
        const again: Array<EventLog.Delivery<SessionEvent.SessionEvent>> = []
        yield* Turn.forEachEvent(turn, (d) => Effect.sync(() => void again.push(d)))
        assert.deepStrictEqual(again, seen)
        // A consumer's failure is the reading's failure; the session goes on.
        const failed = yield* Effect.flip(Turn.forEachEvent(turn, () => Effect.fail("stop" as const)))
        assert.strictEqual(failed, "stop")
        assert.include((yield* settle(session.run("still there?"))).text, "still there?")
      })).pipe(mock()))

  it.effect("Turn.forEachEvent ends with its turn even when a lag skipped the terminal event", () =>
    withSession({ subscriberBuffer: 2, eventRing: 256 }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("hello")
        const seen: Array<EventLog.Delivery<SessionEvent.SessionEvent>> = []
        const reader = yield* Effect.forkChild(
          Turn.forEachEvent(
            turn,
            (d) => Effect.andThen(Effect.sleep("2 seconds"), Effect.sync(() => void seen.push(d)))
          )
        )
        yield* settle(turn.result)
        yield* settle(session.run("second"))
        yield* advance("30 seconds")
        yield* Fiber.join(reader)
        assert.isTrue(seen.some((d) => d._tag === "Lag"))
        assert.isFalse(seen.some((d) => d._tag === "Event" && d.event._tag === "TurnCompleted"))
      })).pipe(mock()))

  it.effect("Turn.forEachEvent on a handle without its own reading runs the turn's events stream", () =>
    Effect.gen(function*() {
      const event = SessionEvent.SessionEvent.TurnStarted({ turnId: "t", raw: undefined })
      const deliveries: ReadonlyArray<EventLog.Delivery<SessionEvent.SessionEvent>> = [
        { _tag: "Event", seq: 1, event },
        { _tag: "Lag", missed: 2, resumeSeq: 4 }
      ]
      // A handle as another registry (`@tether/cluster`) makes it: the interface only.
      const remote: Turn.Turn = {
        id: "t",
        result: Effect.die("not read"),
        settled: Effect.die("not read"),
        events: Stream.fromIterable(deliveries),
        phase: Effect.succeed("completed"),
        interrupt: Effect.void
      }
      const seen: Array<EventLog.Delivery<SessionEvent.SessionEvent>> = []
      yield* Turn.forEachEvent(remote, (d) => Effect.sync(() => void seen.push(d)))
      assert.deepStrictEqual(seen, deliveries)
      const unavailable = new EventLog.ReplayUnavailable({ requestedAfter: 0, oldestAvailable: 3, latestSeq: 9 })
      const error = yield* Effect.flip(
        Turn.forEachEvent({ ...remote, events: Stream.fail(unavailable) }, () => Effect.void)
      )
      assert.strictEqual(error, unavailable)
    }))

  it.effect("an interrupt racing the turn's result sends nothing and leaves the session idle", () =>
    Effect.gen(function*() {
      // Interrupt the turn at the moment its result line is read.
      const target: { turn: ClaudeSession.Turn | undefined } = { turn: undefined }
      const racing = wrapConnections((connection) => ({
        ...connection,
        stdout: Stream.tap(
          connection.stdout,
          (line) =>
            line._tag === "Text" && target.turn !== undefined && line.text.includes(`"type":"result"`)
              ? Effect.andThen(Effect.forkDetach(target.turn.interrupt), Effect.yieldNow)
              : Effect.void
        )
      }))
      yield* withSession({}, (session, cli) =>
        Effect.gen(function*() {
          const turn = yield* session.send("alpha")
          target.turn = turn
          yield* advance("2 seconds")
          assert.isTrue(Exit.isSuccess(yield* turn.settled))
          const interrupts = (yield* writtenFrames(cli)).filter((f) => f.request?.subtype === "interrupt")
          assert.strictEqual(interrupts.length, 0)
          assert.strictEqual(yield* session.status, "idle")
        })).pipe(Effect.provide(racing))
    }))

  it.effect("queued turns dropped by release or retire end as cancelled", () =>
    withSession({ queue: true }, (session) =>
      Effect.gen(function*() {
        const a = yield* session.send("alpha")
        const b = yield* session.send("beta")
        yield* session.retire("test")
        assert.strictEqual(yield* b.phase, "cancelled")
        assert.strictEqual(yield* a.phase, "failed")
        const error = yield* Effect.flip(a.result)
        // The CLI is still running when the host retires the session: the turn says so, not "the CLI exited".
        assert.strictEqual(error._tag, "SessionRetired")
      })).pipe(mock()))
})

describe("Prompts, events and statuses", () => {
  it.effect("content-block prompts are sent as blocks; a prompt that is not valid JSON is refused before writing", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const result = yield* settle(session.run([{ type: "text", text: "blocks work" }]))
        assert.include(result.text, "blocks work")
        const user = (yield* writtenFrames(cli)).find((f) => f.type === "user")
        assert.deepStrictEqual(user?.message.content, [{ type: "text", text: "blocks work" }])
        const circular: { type: string; self?: unknown } = { type: "text" }
        circular.self = circular
        const before = (yield* cli.writtenLines).length
        const error = yield* Effect.flip(session.send([circular]))
        assert.strictEqual(error._tag, "InvalidPrompt")
        assert.isTrue(error.safeToFallback)
        assert.strictEqual((yield* cli.writtenLines).length, before)
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock()))

  it.effect("tool use, tool result and usage are events of the turn; the status goes through cancelling", () =>
    withSession({ policy: Permission.allowAll }, (session) =>
      Effect.gen(function*() {
        const statuses: Array<string> = []
        const watcher = yield* Effect.forkChild(
          Effect.scoped(Effect.flatMap(session.subscribe("latest"), (s) =>
            Stream.runForEach(s, (d) =>
              Effect.sync(() => {
                if (d._tag === "Event" && d.event._tag === "Status") statuses.push(d.event.status)
              }))))
        )
        yield* advance("10 millis")
        const result = yield* settle(session.run("touch it"))
        const events = (yield* snapshotEvents(session)).filter((e) => e.turnId === result.turnId)
        const toolUse = events.find((e) => e._tag === "ToolUse")
        assert.strictEqual(toolUse?._tag === "ToolUse" ? toolUse.name : "", "Bash")
        assert.isTrue(events.some((e) => e._tag === "ToolResult" && !e.isError))
        const usage = events.find((e) => e._tag === "Usage")
        assert.isAbove(usage?._tag === "Usage" ? usage.usage.inputTokens : 0, 0)
        const turn = yield* session.send("slow please")
        yield* advance("300 millis")
        yield* settle(turn.interrupt)
        yield* advance("10 millis")
        yield* Fiber.interrupt(watcher)
        assert.includeMembers(statuses, ["running", "awaiting-permission", "cancelling", "idle"])
      })).pipe(mock(script(
        MockClaude.when("touch", bash("touch perm.txt")),
        MockClaude.when(
          "slow",
          MockClaude.text(Array.from({ length: 40 }, (_, i) => `w${i} `), { delay: "100 millis" })
        )
      ))))

  it.effect("a deferred request expires when its turn ends", () =>
    withSession({ policy: () => Effect.succeed(Permission.defer) }, (session) =>
      Effect.gen(function*() {
        const turn = yield* session.send("touch it")
        yield* advance("500 millis")
        const [pending] = yield* session.pendingPermissions
        // The turn ends under the pending request (the host interrupts it).
        yield* settle(turn.interrupt)
        assert.deepStrictEqual(yield* session.pendingPermissions, [])
        const late = yield* Effect.flip(session.answerPermission(pending.requestId, Permission.allow()))
        assert.strictEqual(late._tag, "PermissionAlreadyResolved")
      })).pipe(mock(script(MockClaude.when("touch", bash("touch perm.txt"))))))

  it.effect("a failing hook callback answers the CLI with an error and the turn goes on", () =>
    withSession({
      policy: Permission.allowAll,
      hooks: { PreToolUse: [{ callback: () => Effect.fail({ _tag: "HookBroke" }) }] }
    }, (session, cli) =>
      Effect.gen(function*() {
        const result = yield* settle(session.run("touch it"))
        assert.isFalse(result.isError)
        const errors = (yield* writtenFrames(cli)).filter((f) =>
          f.type === "control_response" && f.response.subtype === "error"
        )
        assert.strictEqual(errors.length, 1)
      })).pipe(mock(script(MockClaude.when("touch", bash("touch perm.txt"))))))

  it.effect("awaitExit and process report how the CLI ended", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* session.process, { _tag: "Running" })
        yield* cli.trigger(MockClaude.crash({ code: 4, stderr: "bye\n" }))
        const status = yield* settle(session.awaitExit)
        assert.deepStrictEqual(status, Transport.ExitStatus.Exited({ code: 4 }))
        const state = yield* session.process
        assert.strictEqual(state._tag, "Failed")
        assert.include(yield* session.stderrTail, "bye")
        assert.isFalse(yield* session.isAlive)
      })).pipe(mock()))
})

describe("Early close", () => {
  it.effect("close(reason) releases the session now; the running turn and its event carry the reason", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const session = yield* settle(ClaudeSession.make({}).pipe(Scope.provide(scope)))
      const cli = yield* (yield* MockTransport.MockTransport).latest
      const turn = yield* session.send("slow please")
      yield* advance("300 millis")
      const failed = yield* Effect.forkChild(
        Effect.scoped(
          Effect.flatMap(
            session.subscribe("latest"),
            (s) => Stream.runHead(Stream.filter(s, (d) => d._tag === "Event" && d.event._tag === "TurnFailed"))
          )
        )
      )
      yield* advance("10 millis")
      yield* settle(session.close("evicted"))
      const error = yield* Effect.flip(turn.result)
      assert.instanceOf(error, TetherError.TurnInterrupted)
      assert.strictEqual(error.reason, "evicted")
      const event = Option.getOrThrow(yield* settle(Fiber.join(failed)))
      assert.strictEqual(
        event._tag === "Event" && event.event._tag === "TurnFailed" &&
          event.event.error instanceof TetherError.TurnInterrupted
          ? event.event.error.reason
          : "",
        "evicted"
      )
      assert.strictEqual(yield* session.status, "closed")
      assert.isFalse(yield* cli.isAlive)
      // Closing the caller's scope afterwards is a no-op.
      yield* settle(Scope.close(scope, Exit.void))
    }).pipe(mock(script(
      MockClaude.when("slow", MockClaude.text(Array.from({ length: 40 }, (_, i) => `w${i} `), { delay: "100 millis" }))
    ))))
})

describe("Controls and retirement", () => {
  it.effect("a control waiting when the session is retired fails with SessionRetired, and later controls too", () =>
    withSession({}, (session) =>
      Effect.gen(function*() {
        const waiting = yield* Effect.forkChild(Effect.flip(session.setModel("x")))
        yield* advance("10 millis")
        yield* session.retire("host decision")
        const error = yield* settle(Fiber.join(waiting))
        assert.strictEqual(error._tag, "SessionRetired")
        const later = yield* Effect.flip(session.mcpStatus)
        assert.strictEqual(later._tag, "SessionRetired")
      })).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("set_model")] }))))

  it.effect("an answer that does not match the control's response schema fails the control with ControlFailed", () =>
    withSession({}, (session, cli) =>
      Effect.gen(function*() {
        const waiting = yield* Effect.forkChild(Effect.flip(session.setModel("x")))
        yield* advance("10 millis")
        const request = (yield* writtenFrames(cli)).findLast((frame) => frame.request?.subtype === "set_model")
        assert.isDefined(request)
        yield* cli.inject(JSON.stringify({
          type: "control_response",
          response: { subtype: "success", request_id: request!.request_id, response: { model: 5 } }
        }))
        const error = yield* settle(Fiber.join(waiting))
        assert.strictEqual(error._tag, "ControlFailed")
        if (error._tag === "ControlFailed") {
          assert.strictEqual(error.subtype, "set_model")
          assert.strictEqual(error.code, "malformed_response")
        }
        // A malformed answer is the CLI's answer all the same: the session goes on.
        assert.strictEqual(yield* session.status, "idle")
      })).pipe(mock(MockClaude.make([], { faults: [MockClaude.neverAnswer("set_model")] }))))
})

describe("Startup races", () => {
  // A CLI that answers the handshake's one control request and exits at once, and a protocol whose handshake still
  // has work to do after that answer: the reader sees the exit (and retires the session) before the handshake ends.
  const answersThenExits = Layer.succeed(Transport.Transport)({
    capabilities: MockTransport.capabilities,
    open: () =>
      Effect.gen(function*() {
        const lines = yield* Queue.unbounded<Transport.Line, Cause.Done>()
        const exited = yield* Deferred.make<Transport.ExitStatus>()
        let status: Option.Option<Transport.ExitStatus> = Option.none()
        const connection: Transport.Connection = {
          pid: Option.none(),
          write: (line) =>
            Effect.gen(function*() {
              yield* Queue.offer(lines, Transport.Line.Text({ text: JSON.parse(line).id }))
              yield* Queue.end(lines)
              const exit = Transport.ExitStatus.Exited({ code: 1 })
              status = Option.some(exit)
              yield* Deferred.succeed(exited, exit)
            }),
          endInput: Effect.void,
          stdout: Stream.fromQueue(lines),
          stderrTail: Effect.succeed(""),
          exit: Deferred.await(exited),
          exitStatus: Effect.sync(() => status)
        }
        return connection
      })
  })
  const provider: Provider.ProtocolMachine = {
    start: () => ({ _tag: "Write", line: "{}" }),
    receive: () => ({ _tag: "Ready", info: {} }),
    prompt: (id) => ({ _tag: "Write", line: JSON.stringify({ id }) }),
    interrupt: (id) => ({ _tag: "Write", line: JSON.stringify({ id }) }),
    control: (ref) => ({ _tag: "Write", line: JSON.stringify({ ref }) }),
    answerPermission: () => undefined,
    reply: () => undefined,
    capabilities: () => ({
      provider: "test",
      receipts: "explicit",
      interrupt: true,
      permissionKinds: [],
      resume: false,
      sandbox: undefined,
      notes: []
    })
  }

  it.effect("a session whose CLI exits as the handshake finishes is failed, never idle", () =>
    Effect.gen(function*() {
      const session = yield* Session.make({
        provider,
        launch: MockTransport.launchSpec(),
        timeouts: Timeouts.defaults
      })
      yield* advance("10 millis")
      assert.strictEqual((yield* session.process)._tag, "Failed")
      assert.strictEqual(yield* session.status, "failed")
      const error = yield* Effect.flip(session.send("hi"))
      assert.strictEqual(error._tag, "SessionUnavailable")
    }).pipe(Effect.scoped, Effect.provide(answersThenExits)))
})
