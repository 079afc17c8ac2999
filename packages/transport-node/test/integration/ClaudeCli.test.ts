/**
 * The real `claude` CLIs (every version pinned by packages/testing: the newest and the oldest supported, 2.1.197)
 * driven through Tether's public API: ClaudeSession over NodeTransport, against MockAnthropic on 127.0.0.1, with an
 * isolated home per test and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 always. The vitest project runs it inside a
 * loopback-only network namespace when the machine allows it (see vitest.config.ts).
 *
 * Every scenario runs on every version, and says which in its name (`claude 2.1.197 > …`); the versions run side
 * by side, each one's scenarios one after the other. The oldest CLI sends no receipts (no `command_lifecycle`),
 * replays a prompt only with the first model response, and answers some controls without a payload: what a host
 * sees must not differ for that.
 *
 * Scenarios that can share one CLI process share one session; whether a process survived is read from /proc
 * (the marker variable every process of a test inherits), not from Tether's bookkeeping.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { EventLog, Permission, Transport } from "@tether/core"
import { PinnedClaude } from "@tether/testing"
import { Duration, Effect, Exit, Fiber, Option, Redacted, Scope, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  type Cli,
  clis,
  describeClis,
  environOf,
  eventsOf,
  firstEvent,
  isAlive,
  isTag,
  leftBehind,
  makeWorld,
  marked,
  networkInterfaces,
  releaseBoundMillis,
  sleeping,
  timeouts,
  versionOf,
  waitUntil,
  type World
} from "./harness.ts"

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * The test's body with a world and the transport to `cli`; the world (home, mock) is released after the sessions.
 */
const inWorld = <A, E>(cli: Cli, body: (world: World) => Effect.Effect<A, E, Scope.Scope | Transport.Transport>) =>
  Effect.gen(function*() {
    const world = yield* makeWorld()
    return yield* body(world)
  }).pipe(Effect.provide(cli.transport))

/** The oldest supported CLI: no receipts, late replays, controls answered without a payload. */
const isOldest = (cli: Cli) => cli.version === PinnedClaude.oldest

/** The requests that were model calls (2.1.197 also probes `HEAD /`; 2.1.332 checks a new model with one call). */
const modelCalls = (world: World) =>
  Effect.map(world.mock.requests, (log) => log.filter((request) => request.path === "/v1/messages"))

/** Every event the session published so far (a fresh subscription from the start of the log). */
const sessionEvents = (session: ClaudeSession.ClaudeSession) =>
  Effect.scoped(
    Effect.gen(function*() {
      const stream = yield* session.subscribe("start")
      const latest = yield* session.latestSeq
      const deliveries = yield* Stream.runCollect(
        Stream.takeUntil(stream, (delivery) => delivery._tag === "Event" && delivery.seq >= latest)
      )
      return Array.from(deliveries).filter(EventLog.isEvent).map((delivery) => delivery.event)
    })
  )

beforeAll(() => {
  const interfaces = networkInterfaces()
  const isolated = interfaces.length === 1 && interfaces[0] === "lo"
  console.log(
    [
      describeClis(),
      isolated
        ? "network: isolated namespace, loopback only (scripts/netns.sh)"
        : `network: NOT ISOLATED (interfaces: ${interfaces.join(", ")}): no namespace could be made; ` +
          "offline only by CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 and the local base URL"
    ].join("\n")
  )
  if (!isolated && process.env.TETHER_NETNS_REQUIRED === "1") {
    throw new Error("TETHER_NETNS_REQUIRED=1 but the suite is not running in a loopback-only network namespace")
  }
})

afterAll(() => {
  // Every session of this file was released: no process of any of its worlds may be left on the machine.
  const left = leftBehind()
  assert.deepStrictEqual(left, [], `processes left behind by the suite: ${JSON.stringify(left)}`)
})

const scenarios = (cli: Cli) => {
  it.live(
    "handshake, session id, streamed text deltas, two turns in one process",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          assert.strictEqual(versionOf(cli.path), `${cli.version} (Claude Code)`)
          const session = yield* ClaudeSession.make(world.options({ includePartialMessages: true }))
          // 2.1.197's handshake does not name its version (its system/init does); 2.1.332's does, and it is known
          // from there on that the CLI sends receipts.
          const atHandshake = yield* session.capabilities
          if (isOldest(cli)) {
            assert.isUndefined(session.initializeResponse.claude_code_version)
            assert.deepStrictEqual([atHandshake.receipts, atHandshake.notes], ["first-output", []])
          } else {
            assert.strictEqual(session.initializeResponse.claude_code_version, cli.version)
            assert.deepStrictEqual([atHandshake.receipts, atHandshake.notes], ["explicit", [`claude ${cli.version}`]])
          }
          const pid = Option.getOrThrow(session.pid)
          const env = environOf(pid)
          assert.strictEqual(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, "1")
          assert.strictEqual(env.ANTHROPIC_BASE_URL, world.mock.url)
          assert.strictEqual(yield* session.status, "idle")

          const first = yield* session.send("Say hello")
          const busy = yield* Effect.flip(session.send("Not now"))
          assert.strictEqual(busy._tag, "TurnInFlight", "one turn at a time: a second prompt is refused")
          assert.isTrue(busy.safeToRequeue)
          const events = yield* eventsOf(first)
          const result = yield* first.result
          assert.strictEqual(result.text, "Hello from the mock: Say hello")
          assert.isFalse(result.isError)
          assert.isAbove(result.usage.inputTokens, 0)
          assert.isAbove(result.usage.outputTokens, 0)
          assert.isAbove(result.totalCostUsd ?? 0, 0)
          assert.deepStrictEqual(events.find(isTag("Usage"))?.usage, result.usage)
          const deltas = events.filter(isTag("TextDelta"))
          assert.strictEqual(deltas.length, 3, "three streamed text deltas")
          assert.strictEqual(deltas.map((delta) => delta.text).join(""), result.text)
          assert.deepStrictEqual(
            [events[0]._tag, events.at(-1)?._tag],
            ["TurnStarted", "TurnCompleted"],
            "the turn's events run from its start to its completion"
          )
          const acknowledged = events.findIndex(isTag("TurnAcknowledged"))
          assert.isAbove(acknowledged, 0, "the turn was acknowledged")
          assert.isBelow(acknowledged, events.findIndex(isTag("TextDelta")), "before its first delta")
          assert.isTrue(deltas.every((delta) => delta.turnId === first.id))
          const afterTurn = yield* session.capabilities
          assert.deepStrictEqual(
            [afterTurn.receipts, afterTurn.notes],
            [isOldest(cli) ? "first-output" : "explicit", [`claude ${cli.version}`]],
            "what the CLI showed of itself by its first turn"
          )

          const sessionId = Option.getOrThrow(yield* session.sessionId)
          assert.match(sessionId, uuid)
          assert.strictEqual(result.sessionId, sessionId)

          const second = yield* session.run("Say hello again")
          assert.strictEqual(second.text, "Hello from the mock: Say hello again")
          assert.strictEqual(second.sessionId, sessionId, "the same conversation")
          assert.deepStrictEqual(session.pid, Option.some(pid), "the same process")
          assert.isTrue(isAlive(pid))

          const log = yield* modelCalls(world)
          assert.strictEqual(log.length, 2, "one model call per turn")
          const history = JSON.stringify(Option.getOrThrow(log[1].messages).body)
          assert.include(history, "Say hello", "the second turn carries the first one")
          assert.include(history, "Hello from the mock: Say hello")
        })),
    60_000
  )

  it.live(
    "a steady stream longer than the stall budget is the turn's progress, not a stall",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const stall = Duration.millis(2_500)
          const session = yield* ClaudeSession.make(
            world.options({ includePartialMessages: true, timeouts: { ...timeouts, stall } })
          )
          const started = Date.now()
          const turn = yield* session.send("[stream 60 100] keep talking")
          const events = yield* eventsOf(turn)
          const result = yield* turn.result
          const took = Date.now() - started
          assert.isAtLeast(took, 2 * Duration.toMillis(stall), `the stream lasted ${took} ms`)
          const deltas = events.filter(isTag("TextDelta"))
          assert.strictEqual(deltas.length, 60, "every delta reached turn.events")
          assert.isTrue(deltas.every((delta) => delta.turnId === turn.id))
          assert.strictEqual(deltas.map((delta) => delta.text).join(""), result.text)
          assert.strictEqual(yield* session.status, "idle")
        })),
    60_000
  )

  it.live(
    "controls: permission mode, model, thinking budget, MCP status, context usage; the next turn uses the new model",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const session = yield* ClaudeSession.make(world.options())
          assert.deepStrictEqual(yield* session.setPermissionMode("acceptEdits"), { mode: "acceptEdits" })
          // 2.1.197 answers set_model without a payload, although the model did change (the next call shows it).
          assert.deepStrictEqual(
            yield* session.setModel("claude-sonnet-4-5"),
            isOldest(cli) ? {} : { model: "claude-sonnet-4-5" }
          )
          // Answered without a payload on both versions.
          yield* session.setMaxThinkingTokens(1024)
          assert.deepStrictEqual(yield* session.mcpStatus, { mcpServers: [] })
          assert.isAbove((yield* session.getContextUsage).categories?.length ?? 0, 0)
          const unknown = yield* Effect.flip(Effect.asVoid(session.control({ subtype: "no_such_subtype" })))
          assert.strictEqual(unknown._tag, "ControlFailed")

          const turn = yield* session.send("Which model?")
          const events = yield* eventsOf(turn)
          const result = yield* turn.result
          assert.strictEqual(result.text, "Hello from the mock: Which model?")
          const calls = yield* modelCalls(world)
          assert.strictEqual(Option.getOrThrow(calls.at(-1)!.messages).model, "claude-sonnet-4-5")

          // set_model's output comes back as a replayed user frame under a uuid the CLI minted (2.1.197 at once,
          // 2.1.332 at a later set_model): the session's, neither a turn's nor the next turn's receipt.
          yield* session.setModel(null)
          const all = yield* sessionEvents(session)
          const local = all.filter((event) =>
            event._tag === "Frame" && event.type === "user" &&
            JSON.stringify(event.raw).includes("local-command-stdout")
          )
          if (isOldest(cli)) assert.isAbove(local.length, 0, "2.1.197 replays set_model's output")
          assert.isTrue(local.every((event) => event.turnId === undefined), JSON.stringify(local))
          assert.isFalse(events.some((event) => JSON.stringify(event.raw ?? null).includes("local-command-stdout")))
          assert.strictEqual(yield* session.status, "idle")
        })),
    60_000
  )

  it.live(
    "without a policy the CLI is not asked to prompt, and a tool it denies on its own reaches the host as the default policy's deny",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const session = yield* ClaudeSession.make(world.options())
          const turn = yield* session.send("[bash] touch denied.txt")
          const events = yield* eventsOf(turn)
          const result = yield* turn.result
          assert.isFalse(Fs.existsSync(Path.join(world.cwd, "denied.txt")), "the command did not run")
          assert.deepStrictEqual(result.permissionDenials.map((denial) => denial.toolName), ["Bash"])
          const resolutions = events.filter(isTag("PermissionResolved")).map(({ resolution }) =>
            resolution._tag === "Decided" ? `${resolution.by} ${resolution.decision._tag}` : resolution._tag
          )
          // 2.1.197 reports no system/permission_denied: its host sees the denial in the result only.
          assert.deepStrictEqual(resolutions, isOldest(cli) ? [] : ["policy Deny"])
          const [first] = yield* modelCalls(world)
          const tools = Option.match(first?.messages ?? Option.none(), {
            onNone: () => [] as ReadonlyArray<string>,
            onSome: (request) => request.toolNames
          })
          assert.include(tools, "Bash", "the model was offered its tools")
          assert.notInclude(
            tools,
            "AskUserQuestion",
            "no --permission-prompt-tool: the prompting tools are not offered"
          )
        })),
    60_000
  )

  it.live(
    "a tool use under each permission decision: allow, rewritten input, deny, deferred, deny + interrupt",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const file = (name: string) => Path.join(world.cwd, name)
          const policy: Permission.Policy = (request) => {
            const command = String(request.input["command"])
            if (command === "touch allowed.txt") return Effect.succeed(Permission.allow())
            if (command === "touch asked.txt") {
              return Effect.succeed(Permission.allow({ ...request.input, command: "touch rewritten.txt" }))
            }
            if (command === "touch denied.txt") return Effect.succeed(Permission.deny("the host says no"))
            if (command === "touch stopped.txt") {
              return Effect.succeed(Permission.deny("the host says stop", { interrupt: true }))
            }
            return Effect.succeed(Permission.defer)
          }
          const session = yield* ClaudeSession.make(world.options({ policy }))

          // allow: the tool runs, its result goes back to the model.
          const allowed = yield* session.run("[bash] touch allowed.txt")
          assert.isTrue(Fs.existsSync(file("allowed.txt")), "allow: the command ran")
          assert.strictEqual(allowed.text, "Tool said: (Bash completed with no output)")
          assert.strictEqual(allowed.numTurns, 2)
          assert.deepStrictEqual(allowed.permissionDenials, [])

          // allow with a rewritten input: the rewritten command runs, not the one the model asked for.
          const rewritten = yield* session.send("[bash] touch asked.txt")
          const rewrittenEvents = yield* eventsOf(rewritten)
          yield* rewritten.result
          assert.isTrue(Fs.existsSync(file("rewritten.txt")), "rewrite: the rewritten command ran")
          assert.isFalse(Fs.existsSync(file("asked.txt")), "rewrite: the original command did not run")
          const asked = rewrittenEvents.find(isTag("PermissionRequested"))
          assert.strictEqual(asked?.request.toolName, "Bash")
          assert.strictEqual(asked?.request.input["command"], "touch asked.txt")

          // deny: the tool does not run, the model sees the reason, the turn goes on and lists the denial.
          const denied = yield* session.send("[bash] touch denied.txt")
          const deniedEvents = yield* eventsOf(denied)
          const deniedResult = yield* denied.result
          assert.isFalse(Fs.existsSync(file("denied.txt")), "deny: the command did not run")
          assert.deepStrictEqual(deniedResult.permissionDenials.map((denial) => denial.toolName), ["Bash"])
          const refusal = deniedEvents.find(isTag("ToolResult"))
          assert.isTrue(refusal?.isError, "deny: the tool result is an error")
          assert.include(JSON.stringify(refusal?.content), "the host says no")
          assert.include(deniedResult.text, "the host says no", "deny: the model saw the reason")

          // defer: the host answers later, through the session, exactly once.
          const deferred = yield* session.send("[bash] touch deferred.txt")
          const requested = yield* firstEvent(deferred, isTag("PermissionRequested"), "the deferred permission request")
          const pending = yield* session.pendingPermissions
          assert.deepStrictEqual(pending.map((request) => request.requestId), [requested.request.requestId])
          assert.strictEqual(pending[0].turnId, deferred.id)
          assert.strictEqual(yield* session.status, "awaiting-permission")
          assert.isFalse(Fs.existsSync(file("deferred.txt")), "defer: nothing runs before the answer")
          yield* session.answerPermission(requested.request.requestId, Permission.allow())
          const deferredResult = yield* deferred.result
          assert.isTrue(Fs.existsSync(file("deferred.txt")), "defer: the command ran after the host's answer")
          assert.strictEqual(deferredResult.numTurns, 2)
          const again = yield* Effect.flip(session.answerPermission(requested.request.requestId, Permission.allow()))
          assert.strictEqual(again._tag, "PermissionAlreadyResolved")
          const unknown = yield* Effect.flip(session.answerPermission("no-such-request", Permission.allow()))
          assert.strictEqual(unknown._tag, "PermissionNotFound")

          // deny + interrupt: the turn ends, interrupted by the permission decision.
          const stopped = yield* session.send("[bash] touch stopped.txt")
          const stoppedError = yield* Effect.flip(stopped.result)
          assert.isFalse(Fs.existsSync(file("stopped.txt")), "deny + interrupt: the command did not run")
          assert.strictEqual(stoppedError._tag, "TurnInterrupted")
          if (stoppedError._tag === "TurnInterrupted") {
            assert.strictEqual(stoppedError.reason, "permission")
            assert.isTrue(stoppedError.acknowledged)
            assert.isFalse(stoppedError.deliveryUncertain)
          }

          // The process served every decision and still works.
          const after = yield* session.run("Still there?")
          assert.strictEqual(after.text, "Hello from the mock: Still there?")
          assert.strictEqual(yield* session.status, "idle")
        })),
    60_000
  )

  it.live(
    "interrupts mid-stream, mid-permission and mid-tool; the session goes on",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const policy: Permission.Policy = (request) =>
            Effect.succeed(request.input["command"] === "sleep 20" ? Permission.allow() : Permission.defer)
          const session = yield* ClaudeSession.make(world.options({ policy, includePartialMessages: true }))
          const pid = Option.getOrThrow(session.pid)

          // Mid-stream, through the session: the CLI stops the model's stream.
          const streaming = yield* session.send("[slow] take your time")
          yield* firstEvent(streaming, isTag("TextDelta"), "the first streamed delta")
          assert.strictEqual(yield* session.interrupt, "interrupted")
          const streamError = yield* Effect.flip(streaming.result)
          assert.strictEqual(streamError._tag, "TurnInterrupted")
          if (streamError._tag === "TurnInterrupted") {
            assert.strictEqual(streamError.reason, "host")
            assert.isTrue(streamError.acknowledged)
            assert.isFalse(streamError.deliveryUncertain)
          }
          const streamed = yield* eventsOf(streaming)
          const sofar = streamed.filter(isTag("TextDelta"))
          assert.isAbove(sofar.length, 0, "the deltas before the interrupt reached turn.events")
          assert.isTrue(sofar.every((delta) => delta.turnId === streaming.id))
          assert.strictEqual(streamed.at(-1)?._tag, "TurnFailed")
          assert.strictEqual(yield* session.status, "idle", "the session was not retired")
          assert.strictEqual((yield* session.process)._tag, "Running")
          assert.isTrue(isAlive(pid), "the CLI was not killed")
          const log = yield* world.mock.awaitRequests((log) => log.at(-1)?.outcome === "client-closed").pipe(
            Effect.timeoutOption(Duration.seconds(5))
          )
          assert.isTrue(Option.isSome(log), "the mock saw the CLI close the stream")
          if (Option.isSome(log)) assert.isBelow(log.value.at(-1)!.deltasSent, 400, "the stream was cut short")

          // Mid-permission, through the turn: the CLI withdraws its request; a late answer is refused.
          const asking = yield* session.send("[bash] touch never.txt")
          const requested = yield* firstEvent(asking, isTag("PermissionRequested"), "the permission request")
          yield* asking.interrupt
          const askingError = yield* Effect.flip(asking.result)
          const resolutions = (yield* eventsOf(asking)).filter(isTag("PermissionResolved"))
          assert.deepStrictEqual(resolutions.map((event) => event.resolution), [{
            _tag: "Expired",
            why: "cancelled-by-cli"
          }], "the CLI withdrew its request")
          assert.strictEqual(askingError._tag, "TurnInterrupted")
          assert.deepStrictEqual(yield* session.pendingPermissions, [])
          const late = yield* Effect.flip(session.answerPermission(requested.request.requestId, Permission.allow()))
          assert.strictEqual(late._tag, "PermissionAlreadyResolved")
          assert.isFalse(Fs.existsSync(Path.join(world.cwd, "never.txt")))

          // Mid-tool, by interrupting the fiber that waits for the result: the CLI kills the running command.
          const running = yield* session.send("[bash] sleep 20")
          const waiting = yield* Effect.forkChild(running.result)
          yield* waitUntil("the tool's sleep 20 to run", () => sleeping(marked(world.mark)).length > 0)
          yield* Fiber.interrupt(waiting)
          const toolError = yield* Effect.flip(running.result)
          assert.strictEqual(toolError._tag, "TurnInterrupted")
          yield* waitUntil(
            "the interrupted tool's sleep to be gone",
            () => sleeping(marked(world.mark)).length === 0,
            5_000
          )
          assert.isTrue(isAlive(pid), "the CLI itself is still running")

          const after = yield* session.run("Are you still there?")
          assert.strictEqual(after.text, "Hello from the mock: Are you still there?")
          assert.deepStrictEqual(session.pid, Option.some(pid), "the same process served every turn")
        })),
    60_000
  )

  it.live(
    "an API error is a typed ApiError, and the next turn works",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const session = yield* ClaudeSession.make(world.options())
          const error = yield* Effect.flip(session.run("[error 529] overloaded, please"))
          assert.strictEqual(error._tag, "ApiError")
          if (error._tag === "ApiError") {
            assert.strictEqual(error.status, 529)
            assert.include(error.detail, "529")
            assert.isFalse(error.deliveryUncertain)
          }
          const next = yield* session.run("And now?")
          assert.strictEqual(next.text, "Hello from the mock: And now?")
          assert.strictEqual(yield* session.status, "idle")
        })),
    60_000
  )

  it.live(
    "resume: a new process continues a previous session by id, and the model sees the old history",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const first = yield* Effect.scoped(
            Effect.gen(function*() {
              const session = yield* ClaudeSession.make(world.options())
              const result = yield* session.run("Remember the word pelican")
              return { result, pid: Option.getOrThrow(session.pid), session }
            })
          )
          const sessionId = first.result.sessionId!
          assert.match(sessionId, uuid)
          assert.isFalse(isAlive(first.pid), "the first process is gone")
          // A clean close: stdin ended, the CLI exited by itself with 0, and the session says so.
          const state = yield* first.session.process
          assert.strictEqual(state._tag, "Completed")
          if (state._tag === "Completed") assert.deepStrictEqual(state.status, Transport.ExitStatus.Exited({ code: 0 }))
          assert.isFalse(yield* first.session.isAlive)
          assert.strictEqual(yield* first.session.status, "closed")

          const resumed = yield* ClaudeSession.make(world.options({ resume: sessionId }))
          assert.notStrictEqual(Option.getOrThrow(resumed.pid), first.pid, "a new process")
          const result = yield* resumed.run("Which word?")
          assert.strictEqual(result.sessionId, sessionId, "the same conversation")
          const log = yield* world.mock.requests
          const last = Option.getOrThrow(log.at(-1)!.messages)
          const history = JSON.stringify(last.body)
          assert.include(history, "Remember the word pelican", "the old prompt reached the model")
          assert.include(history, "Hello from the mock: Remember the word pelican", "the old answer reached the model")
          assert.strictEqual(last.prompt, "Which word?")
        })),
    60_000
  )

  it.live(
    "a Bash tool's process still running when the session is closed: nothing survives",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll })).pipe(
            Scope.provide(scope)
          )
          const turn = yield* session.send("[bash] sleep 20")
          yield* waitUntil("the tool's sleep 20 to run", () => sleeping(marked(world.mark)).length > 0)
          const pid = Option.getOrThrow(session.pid)
          const tool = sleeping(marked(world.mark))[0]
          assert.notStrictEqual(tool.sid, pid, "the tool runs in a session of its own: a group kill cannot reach it")

          const started = Date.now()
          yield* Scope.close(scope, Exit.void)
          const millis = Date.now() - started

          const survivors = marked(world.mark)
          assert.deepStrictEqual(survivors, [], `survivors: ${JSON.stringify(survivors)}`)
          assert.isBelow(millis, releaseBoundMillis, `release took ${millis} ms`)
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "TurnInterrupted")
          if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, "closed")
        })),
    60_000
  )

  it.live(
    "a Bash tool's process still running when the CLI is SIGKILLed: a typed CliExited, nothing survives",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const session = yield* ClaudeSession.make(world.options({ policy: Permission.allowAll }))
          const pid = Option.getOrThrow(session.pid)
          const turn = yield* session.send("[bash] sleep 20")
          yield* waitUntil("the tool's sleep 20 to run", () => sleeping(marked(world.mark)).length > 0)
          const tools = sleeping(marked(world.mark))
          assert.notStrictEqual(tools[0].sid, pid, "the tool runs in a session of its own")

          process.kill(pid, "SIGKILL")
          const error = yield* Effect.flip(turn.result)
          assert.strictEqual(error._tag, "CliExited")
          if (error._tag === "CliExited") {
            assert.strictEqual(error.signal, "SIGKILL")
            assert.isTrue(error.acknowledged)
            assert.isFalse(error.deliveryUncertain)
          }
          // The CLI's death orphans its tool (a session leader); the retired session's teardown finds it.
          yield* waitUntil(
            "every process of the session to be gone",
            () => marked(world.mark).length === 0,
            releaseBoundMillis
          )
          assert.isFalse(tools.some((tool) => isAlive(tool.pid)))
          assert.strictEqual(yield* session.status, "failed")
          const state = yield* session.process
          assert.strictEqual(state._tag, "Failed")
          if (state._tag === "Failed") {
            assert.deepStrictEqual(state.status, Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
          }
          const refused = yield* Effect.flip(session.send("Anyone?"))
          assert.strictEqual(refused._tag, "SessionUnavailable")
        })),
    60_000
  )

  it.live(
    "a CLI that exits non-zero at start (an unknown flag): its stderr is in the typed error",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(
            Effect.scoped(ClaudeSession.make(world.options({ extraArgs: { "no-such-flag": null } })))
          )
          assert.strictEqual(error._tag, "HandshakeFailed")
          if (error._tag === "HandshakeFailed") {
            assert.include(error.stderrTail, "unknown option '--no-such-flag'")
            assert.include(error.reason, "exit code 1")
            assert.isTrue(error.safeToFallback)
          }
          assert.deepStrictEqual(marked(world.mark), [])
        })),
    60_000
  )

  it.live(
    "the API key through a pipe (2.1.3xx: it reaches the model server as x-api-key, no tool process can print it; " +
      "2.1.197 does not read it)",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const key = `sk-ant-tether-test-${randomUUID()}`
          /** Options with the key given as `source` says, instead of the world's dummy in the environment. */
          const withKey = (source: "descriptor" | "environment") => {
            const base = world.options({ policy: Permission.allowAll })
            const { ANTHROPIC_API_KEY: _, ...set } = base.env?.set ?? {}
            return { ...base, env: { ...base.env, set }, apiKey: Redacted.make(key), apiKeySource: source }
          }
          // The tool prints its environment and the CLI's (its parent's) initial environment.
          const dump = "[bash] printenv; tr '\\0' '\\n' < /proc/$PPID/environ"
          const toolSaw = Effect.fnUntraced(function*(from: number) {
            const log = yield* world.mock.requests
            const sent = log.slice(from).filter((request) => request.path === "/v1/messages")
            return {
              keys: sent.map((request) => request.headers["x-api-key"]),
              // What the model was sent after the tool ran: the tool's output, in the tool_result.
              bodies: sent.map((request) => JSON.stringify(Option.getOrUndefined(request.messages)?.body ?? null))
            }
          })

          if (isOldest(cli)) {
            // 2.1.197 never reads CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR (its reader is compiled out of the build): it
            // has no key, makes no model call and says so in the turn's result (see ClaudeOptions.apiKeySource).
            const refused = yield* Effect.scoped(Effect.gen(function*() {
              const session = yield* ClaudeSession.make(withKey("descriptor"))
              const error = yield* Effect.flip(session.run(dump))
              assert.notInclude(JSON.stringify(environOf(Option.getOrThrow(session.pid))), key)
              return error
            }))
            assert.strictEqual(refused._tag, "ApiError")
            if (refused._tag === "ApiError") assert.include(refused.detail, "Not logged in")
            assert.deepStrictEqual((yield* toolSaw(0)).keys, [], "no model call without a key")
          } else {
            const piped = yield* Effect.scoped(Effect.gen(function*() {
              const session = yield* ClaudeSession.make(withKey("descriptor"))
              const result = yield* session.run(dump)
              // The host sees the tool's output too (scrubbed or not: the key must not be there in the first place).
              assert.notInclude(result.text, key)
              assert.notInclude(JSON.stringify(environOf(Option.getOrThrow(session.pid))), key)
              return yield* toolSaw(0)
            }))
            assert.isAtLeast(piped.keys.length, 2, "a tool turn is two model requests")
            assert.isTrue(piped.keys.every((sent) => sent === key), "every request carried the key as x-api-key")
            assert.include(
              piped.bodies.at(-1),
              "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
              "the tool's output was sent"
            )
            for (const body of piped.bodies) assert.notInclude(body, key, "the model never saw the key")

            // The host's own ANTHROPIC_API_KEY, under the default `inherit`: not named in inheritCredentials, it is
            // not handed over, so the tool's printenv (and the CLI's initial environment) cannot show it.
            const hostKey = `sk-ant-host-${randomUUID()}`
            const saved = process.env.ANTHROPIC_API_KEY
            const restore = Effect.sync(() => {
              if (saved === undefined) delete process.env.ANTHROPIC_API_KEY
              else process.env.ANTHROPIC_API_KEY = saved
            })
            const from = (yield* world.mock.requests).length
            const inherited = yield* Effect.scoped(Effect.gen(function*() {
              process.env.ANTHROPIC_API_KEY = hostKey
              const options = withKey("descriptor")
              const session = yield* ClaudeSession.make({ ...options, env: { ...options.env, mode: "inherit" } })
              const result = yield* session.run(dump)
              assert.notInclude(result.text, hostKey)
              assert.notInclude(JSON.stringify(environOf(Option.getOrThrow(session.pid))), hostKey)
              return yield* toolSaw(from)
            })).pipe(Effect.ensuring(restore))
            assert.isTrue(inherited.keys.every((sent) => sent === key), "the piped key, not the host's, was sent")
            assert.include(inherited.bodies.at(-1), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "the tool ran")
            for (const body of inherited.bodies) assert.notInclude(body, hostKey, "the tool printed the host's key")
          }

          // The same through the environment: the tool's printenv hands the key to the model (the documented risk).
          const before = (yield* world.mock.requests).length
          const inEnvironment = yield* Effect.scoped(Effect.gen(function*() {
            const session = yield* ClaudeSession.make(withKey("environment"))
            const result = yield* session.run(dump)
            // What reaches the host is scrubbed by the transport.
            assert.notInclude(result.text, key)
            return yield* toolSaw(before)
          }))
          assert.isTrue(inEnvironment.keys.every((sent) => sent === key))
          assert.include(inEnvironment.bodies.at(-1), key, "through the environment, the tool printed the key")
        })),
    60_000
  )

  it.live.runIf(process.getuid?.() === 0)(
    "bypassPermissions as root without IS_SANDBOX: the CLI refuses to start, and says why",
    () =>
      inWorld(cli, (world) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(
            Effect.scoped(ClaudeSession.make(world.options({ permissionMode: "bypassPermissions" })))
          )
          assert.strictEqual(error._tag, "HandshakeFailed")
          if (error._tag === "HandshakeFailed") {
            assert.include(error.stderrTail, "cannot be used with root/sudo privileges")
          }
          assert.deepStrictEqual(marked(world.mark), [])
        })),
    60_000
  )
}

// The versions run side by side (each in its own worlds and CLI processes); within a version, one scenario at a time.
for (const cli of clis) {
  describe(`claude ${cli.version}`, { concurrent: true }, () => {
    describe("the real claude CLI, offline", { concurrent: false }, () => scenarios(cli))
  })
}
