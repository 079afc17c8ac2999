/**
 * The real `codex app-server` (the version pinned by packages/transport-node) driven through Tether's public API:
 * CodexSession over NodeTransport, against MockOpenAI on 127.0.0.1, with its own CODEX_HOME, TMPDIR, HOME and
 * working directory per test and `features.plugins=false`. The vitest project runs it inside a loopback-only network
 * namespace when the machine allows it (see vitest.config.ts).
 *
 * Scenarios that can share one server share one session; whether a process survived is read from /proc (the
 * marker variable every process of a test inherits), not from Tether's bookkeeping.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { CodexSession } from "@tether/codex"
import { Permission, type Transport } from "@tether/core"
import { Duration, Effect, Exit, Option, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  codexPath,
  codexVersion,
  environOf,
  eventsOf,
  firstEvent,
  isAlive,
  isTag,
  leftBehind,
  makeWorld,
  marked,
  networkInterfaces,
  pinnedVersion,
  releaseBoundMillis,
  sleeping,
  TransportLive,
  tree,
  waitUntil,
  type World
} from "./harness.ts"

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The test's body with a world and the transport; the world (folders, mock) is released after the sessions. */
const inWorld = <A, E>(
  body: (world: World) => Effect.Effect<A, E, Scope.Scope | Transport.Transport>,
  settings?: { readonly retries?: number }
) =>
  Effect.gen(function*() {
    const world = yield* makeWorld(settings)
    return yield* body(world)
  }).pipe(Effect.provide(TransportLive))

/** What the Linux sandbox makes in a writable root that lacks them (it masks them read-only). */
const protectedDirs = [".git", ".agents", ".codex", ".aws"]

/** The user's own Codex home: no test may create or change it. */
const userCodexHome = Path.join(Os.homedir(), ".codex")
const statOf = (path: string) => Fs.existsSync(path) ? Fs.statSync(path).mtimeMs : undefined
const userCodexHomeBefore = statOf(userCodexHome)

beforeAll(() => {
  const interfaces = networkInterfaces()
  const isolated = interfaces.length === 1 && interfaces[0] === "lo"
  console.log(
    [
      `codex CLI: ${codexVersion} (${codexPath})`,
      isolated
        ? "network: isolated namespace, loopback only (scripts/netns.sh)"
        : `network: NOT ISOLATED (interfaces: ${interfaces.join(", ")}): no namespace could be made; ` +
          "offline only by features.plugins=false and the provider on 127.0.0.1"
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
  assert.strictEqual(statOf(userCodexHome), userCodexHomeBefore, `${userCodexHome} was created or changed`)
})

describe("the real codex app-server, offline", () => {
  it.live("runs the pinned version", () =>
    Effect.sync(() => {
      assert.strictEqual(codexVersion, `codex-cli ${pinnedVersion}`)
      assert.notInclude(codexPath, `${Path.sep}bin${Path.sep}codex.js`, "the native binary, not the npm launcher")
    }))

  it.live(
    "handshake, thread, streamed deltas, two turns in one process; everything in the world's folders",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const session = yield* CodexSession.make(world.options())
          assert.match(session.threadId, uuid)
          assert.deepStrictEqual(yield* session.sessionId, Option.some(session.threadId))
          const capabilities = yield* session.capabilities
          assert.strictEqual(capabilities.provider, "codex")
          assert.strictEqual(capabilities.receipts, "explicit")
          const pid = Option.getOrThrow(session.pid)
          const env = environOf(pid)
          assert.deepStrictEqual(
            [env.CODEX_HOME, env.TMPDIR, env.HOME, env.TETHER_CODEX_API_KEY],
            [world.codexHome, world.tmpDir, world.home, "sk-mock"]
          )
          assert.strictEqual(Fs.readlinkSync(`/proc/${pid}/cwd`), world.cwd)
          assert.strictEqual(yield* session.status, "idle")

          const first = yield* session.send("[chunks 3] Say hello")
          const busy = yield* Effect.flip(session.send("Not now"))
          assert.strictEqual(busy._tag, "TurnInFlight", "one turn at a time: a second prompt is refused")
          assert.isTrue(busy.safeToRequeue)
          const events = yield* eventsOf(first)
          const result = yield* first.result
          assert.strictEqual(result.text, "Hello from the mock: [chunks 3] Say hello")
          assert.strictEqual(result.status, "completed")
          assert.strictEqual(result.sessionId, session.threadId)
          assert.isAbove(result.usage.inputTokens, 0)
          assert.isAbove(result.usage.outputTokens, 0)
          assert.deepStrictEqual(events.find(isTag("Usage"))?.usage, result.usage)
          const deltas = events.filter(isTag("TextDelta"))
          assert.strictEqual(deltas.length, 3, "three streamed deltas")
          assert.strictEqual(deltas.map((delta) => delta.text).join(""), result.text)
          assert.isTrue(deltas.every((delta) => delta.turnId === first.id))
          assert.deepStrictEqual(
            [events[0]._tag, events.at(-1)?._tag],
            ["TurnStarted", "TurnCompleted"],
            "the turn's events run from its start to its completion"
          )
          assert.isTrue(events.some(isTag("TurnAcknowledged")))

          const second = yield* session.run("Say hello again")
          assert.strictEqual(second.text, "Hello from the mock: Say hello again")
          assert.notStrictEqual(second.serverTurnId, result.serverTurnId)
          assert.deepStrictEqual(session.pid, Option.some(pid), "the same process")
          assert.isTrue(isAlive(pid))

          const log = yield* world.mock.requests
          assert.deepStrictEqual(log.map((entry) => `${entry.method} ${entry.path}`), [
            "POST /v1/responses",
            "POST /v1/responses"
          ])
          assert.strictEqual(log[0].headers["authorization"], "Bearer sk-mock")
          assert.strictEqual(log[0].headers["originator"], "tether")
          assert.deepStrictEqual(
            Option.getOrThrow(log[1].request).prompts,
            ["[chunks 3] Say hello", "Say hello again"],
            "the second turn carries the first one"
          )
          // Codex keeps its state where the host said: the thread's rollout is in this world's CODEX_HOME.
          assert.isTrue(tree(world.codexHome).some((file) => file.includes(session.threadId)))
        })
      ),
    60_000
  )

  it.live(
    "approvals: allowed, denied, deferred and answered later, denied with an interrupt, a file change, a rewrite",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const file = (name: string) => Path.join(world.cwd, name)
          const policy: Permission.Policy = (request) => {
            if (request.kind === "file-change") return Effect.succeed(Permission.allow())
            const command = String(request.input["command"])
            if (command.includes("allowed.txt") || command.includes("/tmp/.git")) {
              return Effect.succeed(Permission.allow())
            }
            if (command.includes("denied.txt")) return Effect.succeed(Permission.deny("the host says no"))
            if (command.includes("stopped.txt")) {
              return Effect.succeed(Permission.deny("the host says stop", { interrupt: true }))
            }
            if (command.includes("asked.txt")) {
              return Effect.succeed(Permission.allow({ ...request.input, command: "touch rewritten.txt" }))
            }
            return Effect.succeed(Permission.defer)
          }
          const session = yield* CodexSession.make(
            world.options({ approvalPolicy: "untrusted", sandbox: "workspace-write", policy })
          )

          // allow: the command runs in the sandbox, its output goes back to the model.
          const allowed = yield* session.send("[exec] touch allowed.txt && echo made-it")
          const allowedEvents = yield* eventsOf(allowed)
          const allowedResult = yield* allowed.result
          assert.isTrue(Fs.existsSync(file("allowed.txt")), "allow: the command ran")
          assert.include(allowedResult.text, "Process exited with code 0")
          assert.include(allowedResult.text, "made-it")
          const asked = allowedEvents.find(isTag("PermissionRequested"))
          assert.strictEqual(asked?.request.kind, "command")
          assert.strictEqual(asked?.request.input["command"], "/bin/bash -lc 'touch allowed.txt && echo made-it'")
          assert.strictEqual(asked?.request.input["cwd"], world.cwd)
          assert.deepStrictEqual(
            allowedEvents.filter(isTag("ToolResult")).map((result) => [result.isError, result.content]),
            [[false, "made-it\n"]]
          )

          // deny: the command does not run, the model is told, the turn goes on.
          const denied = yield* session.send("[exec] touch denied.txt")
          const deniedEvents = yield* eventsOf(denied)
          const deniedResult = yield* denied.result
          assert.isFalse(Fs.existsSync(file("denied.txt")), "deny: the command did not run")
          assert.include(deniedResult.text, "rejected by user", "deny: the model saw the refusal")
          assert.deepStrictEqual(deniedEvents.filter(isTag("ToolResult")).map((result) => result.isError), [true])

          // defer: the host answers later, through the session, exactly once.
          const deferred = yield* session.send("[exec] touch deferred.txt")
          const requested = yield* firstEvent(deferred, isTag("PermissionRequested"), "the deferred approval request")
          const pending = yield* session.pendingPermissions
          assert.deepStrictEqual(pending.map((request) => request.requestId), [requested.request.requestId])
          assert.strictEqual(pending[0].turnId, deferred.id)
          assert.strictEqual(yield* session.status, "awaiting-permission")
          yield* Effect.sleep("200 millis")
          assert.isFalse(Fs.existsSync(file("deferred.txt")), "defer: nothing runs before the answer")
          yield* session.answerPermission(requested.request.requestId, Permission.allow())
          yield* deferred.result
          assert.isTrue(Fs.existsSync(file("deferred.txt")), "defer: the command ran after the host's answer")
          const again = yield* Effect.flip(session.answerPermission(requested.request.requestId, Permission.allow()))
          assert.strictEqual(again._tag, "PermissionAlreadyResolved")
          const unknown = yield* Effect.flip(session.answerPermission("no-such-request", Permission.allow()))
          assert.strictEqual(unknown._tag, "PermissionNotFound")

          // deny + interrupt: Codex gets `cancel` and interrupts the turn.
          const stopped = yield* Effect.flip(session.run("[exec] touch stopped.txt"))
          assert.isFalse(Fs.existsSync(file("stopped.txt")), "deny + interrupt: the command did not run")
          assert.strictEqual(stopped._tag, "TurnInterrupted")
          if (stopped._tag === "TurnInterrupted") {
            assert.strictEqual(stopped.reason, "permission")
            assert.isTrue(stopped.acknowledged)
          }

          // a file change (apply_patch, which gpt-5.5 is offered): the approval names the file; allowed, it is made.
          const patch = yield* session.send("[patch patched.txt] hello from the patch")
          const patchEvents = yield* eventsOf(patch)
          yield* patch.result
          const change = patchEvents.find(isTag("PermissionRequested"))
          assert.strictEqual(change?.request.kind, "file-change")
          assert.deepStrictEqual(
            (change?.request.input["changes"] as ReadonlyArray<any>).map((c) => c.path),
            [file("patched.txt")]
          )
          assert.strictEqual(Fs.readFileSync(file("patched.txt"), "utf8"), "hello from the patch\n")

          // a rewritten input: Codex runs what it asked about or nothing, so the answer is a decline.
          const rewritten = yield* session.run("[exec] touch asked.txt")
          assert.isFalse(Fs.existsSync(file("asked.txt")))
          assert.isFalse(Fs.existsSync(file("rewritten.txt")))
          assert.include(rewritten.text, "rejected by user")

          // The process served every decision and still works.
          const after = yield* session.run("Still there?")
          assert.strictEqual(after.text, "Hello from the mock: Still there?")
          assert.strictEqual(yield* session.status, "idle")

          // The sandbox masks its protected folders in every writable root by making them there while a command
          // runs: with a TMPDIR of the session's own, /tmp is no writable root, so nothing is made in it.
          const probe = yield* session.send("[exec] test -e /tmp/.git && echo masked || echo clean")
          const probeEvents = yield* eventsOf(probe)
          yield* probe.result
          assert.deepStrictEqual(probeEvents.filter(isTag("ToolResult")).map((result) => result.content), ["clean\n"])
          for (const dir of protectedDirs) assert.isFalse(Fs.existsSync(Path.join("/tmp", dir)), `/tmp/${dir}`)
        })
      ),
    60_000
  )

  it.live(
    "interrupts mid-stream and mid-command; the command outlives the interrupt, not the session",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const session = yield* CodexSession.make(
            world.options({ approvalPolicy: "never", sandbox: "danger-full-access" })
          ).pipe(Scope.provide(scope))
          const pid = Option.getOrThrow(session.pid)

          // Mid-stream: codex drops the model's stream; the turn ends interrupted.
          const streaming = yield* session.send("[slow 200 50] Take your time")
          yield* firstEvent(streaming, isTag("TextDelta"), "the first streamed delta")
          assert.strictEqual(yield* session.interrupt, "interrupted")
          const streamError = yield* Effect.flip(streaming.result)
          assert.strictEqual(streamError._tag, "TurnInterrupted")
          if (streamError._tag === "TurnInterrupted") {
            assert.strictEqual(streamError.reason, "host")
            assert.isTrue(streamError.acknowledged)
          }
          const log = yield* world.mock.awaitRequests((log) => log.at(-1)?.outcome === "client-closed").pipe(
            Effect.timeoutOption(Duration.seconds(5))
          )
          assert.isTrue(Option.isSome(log), "the mock saw codex close the stream")
          if (Option.isSome(log)) assert.isBelow(log.value.at(-1)!.deltasSent, 200, "the stream was cut short")

          // Mid-command: once codex reported the command, an interrupt ends the turn but not the command.
          const running = yield* session.send("[exec] sleep 30")
          const use = yield* firstEvent(running, isTag("ToolUse"), "the command's item/started")
          assert.strictEqual(use.name, "command")
          yield* waitUntil("the command's sleep 30 to run", () => sleeping(marked(world.mark)).length > 0)
          const command = sleeping(marked(world.mark))[0]
          assert.strictEqual(yield* session.interrupt, "interrupted")
          const commandError = yield* Effect.flip(running.result)
          assert.strictEqual(commandError._tag, "TurnInterrupted")
          yield* Effect.sleep("500 millis")
          assert.isTrue(isAlive(command.pid), "codex leaves the interrupted turn's command running")

          // The session goes on, in the same process.
          const after = yield* session.run("Are you still there?")
          assert.strictEqual(after.text, "Hello from the mock: Are you still there?")
          assert.deepStrictEqual(session.pid, Option.some(pid))

          // Closing the session tears the tree down: the command is gone with it.
          const started = Date.now()
          yield* Scope.close(scope, Exit.void)
          const millis = Date.now() - started
          assert.isFalse(isAlive(command.pid), "the command is gone after close")
          const survivors = marked(world.mark)
          assert.deepStrictEqual(survivors, [], `survivors: ${JSON.stringify(survivors)}`)
          assert.isBelow(millis, releaseBoundMillis, `release took ${millis} ms`)
        })
      ),
    60_000
  )

  it.live(
    "resume: a new process continues the thread by id, and the model sees the earlier turn",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const first = yield* Effect.scoped(
            Effect.gen(function*() {
              const session = yield* CodexSession.make(world.options())
              const result = yield* session.run("Remember the word pelican")
              return { result, threadId: session.threadId, pid: Option.getOrThrow(session.pid) }
            })
          )
          assert.strictEqual(first.result.sessionId, first.threadId)
          assert.isFalse(isAlive(first.pid), "the first process is gone")

          const resumed = yield* CodexSession.make(world.options({ resume: first.threadId }))
          assert.strictEqual(resumed.threadId, first.threadId, "the same thread")
          assert.notStrictEqual(Option.getOrThrow(resumed.pid), first.pid, "a new process")
          const result = yield* resumed.run("Which word?")
          assert.strictEqual(result.sessionId, first.threadId)
          const log = yield* world.mock.requests
          const last = Option.getOrThrow(log.at(-1)!.request)
          assert.deepStrictEqual(last.prompts, ["Remember the word pelican", "Which word?"])
          assert.include(
            JSON.stringify(last.body),
            "Hello from the mock: Remember the word pelican",
            "the earlier answer reached the model"
          )
        })
      ),
    60_000
  )

  it.live(
    "an upstream error is a typed ApiError (with its status when codex has one), and the next turn works",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const session = yield* CodexSession.make(world.options())
          const error = yield* Effect.flip(session.run("[error 500] Fail please"))
          assert.strictEqual(error._tag, "ApiError")
          if (error._tag === "ApiError") {
            assert.include(error.detail, "internalServerError")
            assert.isNull(error.status, "codex does not say which 5xx")
            assert.isFalse(error.deliveryUncertain)
          }
          const limited = yield* Effect.flip(session.run("[error 429] Slow down"))
          assert.strictEqual(limited._tag, "ApiError")
          if (limited._tag === "ApiError") assert.strictEqual(limited.status, 429)
          const next = yield* session.run("And now?")
          assert.strictEqual(next.text, "Hello from the mock: And now?")
          assert.strictEqual(yield* session.status, "idle")
        })
      ),
    60_000
  )

  it.live(
    "a CLI that exits non-zero at start (an invalid -c override): its stderr is in the typed error",
    () =>
      inWorld((world) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(
            Effect.scoped(CodexSession.make(world.options({ config: { sandbox_mode: "nope" } })))
          )
          assert.strictEqual(error._tag, "HandshakeFailed")
          if (error._tag === "HandshakeFailed") {
            assert.include(error.stderrTail, "unknown variant `nope`")
            assert.notInclude(error.stderrTail, "\u001b[", "plain text, no colour codes (NO_COLOR)")
            assert.include(error.reason, "exit code 1")
            assert.isTrue(error.safeToFallback)
          }
          assert.deepStrictEqual(marked(world.mark), [])
        })
      ),
    60_000
  )
})
