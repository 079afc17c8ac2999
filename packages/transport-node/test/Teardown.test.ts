/**
 * Teardown leaves nothing behind: after the connection's scope closes, no process of the session survives —
 * checked in /proc by the marker the test put in the CLI's environment (inherited by every descendant), not from
 * the transport's bookkeeping — and the close finished within termGrace + killGrace (plus scheduling slack).
 */
import { assert, describe, it } from "@effect/vitest"
import { TetherError, Transport } from "@tether/core"
import type { FakeClaude } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Deferred, Duration, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import { fakeClaudePath, fakeSpec, initialize, marked, newMark, type Proc, userMessage, waitUntil } from "./utils.ts"

const termGraceMillis = 300
const killGraceMillis = 1_000
// Scheduling slack for a loaded 2-core machine: the bound is termGrace + killGrace, plus this.
const slackMillis = 250
const boundMillis = termGraceMillis + killGraceMillis + slackMillis

const TransportLive = NodeTransport.layer({
  executables: { claude: fakeClaudePath },
  killGrace: Duration.millis(killGraceMillis),
  watchdog: false
})

interface Scenario {
  readonly knobs: FakeClaude.Knobs
  /** The session's tree is up: checked in /proc before the scope closes. */
  readonly ready: (procs: ReadonlyArray<Proc>, cliPid: number) => boolean
  /** What to do with the connection before closing (default: nothing). */
  readonly act?: (connection: Transport.Connection) => Effect.Effect<void, TetherError.TransportWriteError>
  readonly termGrace?: number
  /**
   * With no kill grace, teardown sends the last SIGKILL and returns without waiting: the kernel may still be
   * delivering it when the scope is closed, so survivors are allowed a moment to die instead of none at all.
   */
  readonly killNotAwaited?: boolean
}

/** Opens the fake in its own scope, waits for its tree, closes the scope, and checks /proc and the bound. */
const scenario = (s: Scenario, layer = TransportLive) =>
  Effect.gen(function*() {
    const mark = newMark()
    const transport = yield* Transport.Transport
    const scope = yield* Scope.make()
    const termGrace = s.termGrace ?? termGraceMillis
    const connection = yield* transport.open(fakeSpec(mark, s.knobs), { termGrace: Duration.millis(termGrace) }).pipe(
      Scope.provide(scope)
    )
    const cliPid = Option.getOrThrow(connection.pid)
    if (s.act !== undefined) yield* s.act(connection)
    yield* waitUntil("the session's tree", () => s.ready(marked(mark), cliPid))
    const before = marked(mark)

    const started = Date.now()
    yield* Scope.close(scope, Exit.void)
    const millis = Date.now() - started

    if (s.killNotAwaited === true) {
      yield* waitUntil("the SIGKILLed tree to be gone", () => marked(mark).length === 0, 1_000).pipe(Effect.ignore)
    }
    const after = marked(mark)
    assert.deepStrictEqual(after, [], `survivors: ${JSON.stringify(after)}`)
    assert.isBelow(millis, termGrace + killGraceMillis + slackMillis, `teardown took ${millis} ms`)
    return { before, millis, connection, cliPid }
  }).pipe(Effect.provide(layer))

const handshake = (connection: Transport.Connection) =>
  Effect.gen(function*() {
    yield* connection.write(initialize)
    yield* Stream.runHead(connection.stdout)
  })

const count = (n: number) => (procs: ReadonlyArray<Proc>) => procs.length >= n
const sleeping = (procs: ReadonlyArray<Proc>) => procs.filter((proc) => proc.args.startsWith("sleep"))

describe("teardown", () => {
  it.live("a cooperative CLI", () =>
    Effect.gen(function*() {
      const { before } = yield* scenario({ knobs: {}, ready: count(1) })
      assert.strictEqual(before.length, 1)
    }))

  it.live("a CLI that ignores SIGTERM and stdin EOF is SIGKILLed after termGrace", () =>
    Effect.gen(function*() {
      const { connection, millis } = yield* scenario({
        knobs: { modes: ["ignore-sigterm"] },
        // The answer proves the CLI is up and has its signal handlers installed.
        act: handshake,
        ready: count(1)
      })
      assert.isAtLeast(millis, termGraceMillis)
      assert.deepStrictEqual(
        yield* connection.exitStatus,
        Option.some(Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
      )
    }))

  it.live("with no kill grace at all, a CLI that ignores SIGTERM is still SIGKILLed (the last poll kills)", () =>
    Effect.gen(function*() {
      const { connection } = yield* scenario(
        { knobs: { modes: ["ignore-sigterm"] }, act: handshake, ready: count(1), killNotAwaited: true },
        NodeTransport.layer({ executables: { claude: fakeClaudePath }, killGrace: 0, watchdog: false })
      )
      yield* connection.exit
      assert.deepStrictEqual(
        yield* connection.exitStatus,
        Option.some(Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
      )
    }))

  it.live("grandchildren in the CLI's process group", () =>
    Effect.gen(function*() {
      const { before } = yield* scenario({
        knobs: { modes: ["grandchildren"], children: 3 },
        ready: (procs) => sleeping(procs).length === 3
      })
      assert.strictEqual(before.length, 4)
    }))

  it.live("a descendant in its own session (setsid, like the Bash tool)", () =>
    Effect.gen(function*() {
      const { before, cliPid } = yield* scenario({
        knobs: { modes: ["setsid-child"] },
        ready: (procs) => sleeping(procs).length === 1
      })
      const [sleeper] = sleeping(before)
      assert.notStrictEqual(sleeper.sid, cliPid, "the descendant left the CLI's session")
    }))

  it.live("a double-forked daemon, re-parented away from the CLI", () =>
    Effect.gen(function*() {
      const { before, cliPid } = yield* scenario({
        knobs: { modes: ["double-fork-daemon"] },
        ready: (procs) => sleeping(procs).length === 1 && procs.length === 2
      })
      const [daemon] = sleeping(before)
      assert.notStrictEqual(daemon.ppid, cliPid)
      assert.notStrictEqual(daemon.sid, cliPid)
    }))

  it.live("every kind of descendant at once, under a CLI that ignores SIGTERM", () =>
    Effect.gen(function*() {
      const { before } = yield* scenario({
        knobs: { modes: ["ignore-sigterm", "grandchildren", "setsid-child", "double-fork-daemon"] },
        ready: (procs) => sleeping(procs).length === 4
      })
      assert.strictEqual(before.length, 6)
    }))

  it.live("the same with the default options (the host-death watchdog on)", () =>
    Effect.gen(function*() {
      const { before } = yield* scenario(
        {
          knobs: { modes: ["ignore-sigterm", "grandchildren", "setsid-child", "double-fork-daemon"] },
          ready: (procs) => sleeping(procs).length === 4
        },
        NodeTransport.layer({ executables: { claude: fakeClaudePath }, killGrace: Duration.millis(killGraceMillis) })
      )
      assert.strictEqual(before.length, 6)
    }))

  it.live("the CLI already exited by itself, but its setsid descendant survived", () =>
    Effect.gen(function*() {
      const { connection } = yield* scenario({
        knobs: { modes: ["exit-after-result", "setsid-child"] },
        act: (connection) =>
          Effect.gen(function*() {
            yield* connection.write(userMessage("one turn"))
            yield* connection.exit
          }),
        ready: (procs) => procs.length === 2 && sleeping(procs).length === 1
      })
      assert.deepStrictEqual(yield* connection.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 0 })))
    }))

  it.live("the CLI crashed mid-turn, leaving a setsid descendant and an orphaned daemon", () =>
    Effect.gen(function*() {
      yield* scenario({
        knobs: { modes: ["crash-mid-turn", "setsid-child", "double-fork-daemon"] },
        act: (connection) =>
          Effect.gen(function*() {
            yield* connection.write(userMessage("boom"))
            yield* connection.exit
          }),
        ready: (procs) => sleeping(procs).length === 2 && procs.length === 3
      })
    }))

  it.live("the CLI exited on EOF while grandchildren hold its stdout open: the stream ends at teardown", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const transport = yield* Transport.Transport
      const scope = yield* Scope.make()
      const connection = yield* transport.open(
        fakeSpec(mark, { modes: ["grandchildren"], childStdio: "inherit" }),
        { termGrace: Duration.millis(termGraceMillis) }
      ).pipe(Scope.provide(scope))
      const reader = yield* Effect.forkChild(Stream.runCollect(connection.stdout))
      yield* waitUntil("grandchildren", () => sleeping(marked(mark)).length === 2)
      yield* connection.endInput
      yield* connection.exit
      assert.strictEqual(marked(mark).length, 2)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(marked(mark), [])
      const lines = yield* Fiber.join(reader).pipe(Effect.timeout(Duration.seconds(2)))
      assert.deepStrictEqual(lines, [])
    }).pipe(Effect.provide(TransportLive)))

  it.live("a CLI that hangs (reads, never answers, ignores EOF)", () =>
    Effect.gen(function*() {
      yield* scenario({
        knobs: { modes: ["hang"] },
        act: (connection) => connection.write(initialize),
        ready: count(1)
      })
    }))

  it.live("a CLI flooding stdout that nobody reads (blocked on a full pipe)", () =>
    Effect.gen(function*() {
      yield* scenario({ knobs: { modes: ["flood"] }, ready: count(1) })
    }))

  it.live("a CLI flooding stdout while the host reads", () =>
    Effect.gen(function*() {
      yield* scenario({
        knobs: { modes: ["flood"] },
        act: (connection) => Effect.asVoid(Effect.forkChild(Stream.runDrain(connection.stdout))),
        ready: count(1)
      })
    }))

  it.live("a CLI flooding stderr", () =>
    Effect.gen(function*() {
      yield* scenario({ knobs: { modes: ["stderr-flood", "grandchildren"] }, ready: (procs) => procs.length === 3 })
    }))

  it.live("a CLI writing a giant line", () =>
    Effect.gen(function*() {
      yield* scenario({
        knobs: { modes: ["giant-line"] },
        act: (connection) => connection.write(userMessage("big")),
        ready: count(1)
      })
    }))

  it.live("zombies do not count as alive: a cooperative tree is done long before a long termGrace", () =>
    Effect.gen(function*() {
      // The sleeps die on SIGTERM and, re-parented to PID 1, stay zombies until it reaps them. Were zombies counted
      // as alive, teardown would wait out the whole 3 s grace.
      const { millis } = yield* scenario({
        knobs: { modes: ["grandchildren", "double-fork-daemon"], children: 3 },
        ready: (procs) => sleeping(procs).length === 4,
        termGrace: 3_000
      })
      assert.isBelow(millis, 3_000)
    }))

  it.live("a tree that ignores SIGTERM and keeps forking, in and out of its session", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const transport = yield* Transport.Transport
      const scope = yield* Scope.make()
      // A shell that ignores SIGTERM and forks a sleep every 10 ms, plus a setsid shell doing the same.
      const loop = `trap '' TERM; while :; do sleep 1000 & sleep 0.01; done`
      yield* transport.open({
        program: "sh",
        args: ["-c", `setsid sh -c "${loop}" & ${loop}`],
        cwd: Option.none(),
        env: { mode: "inherit", set: { TEST_MARK: mark }, unset: [] }
      }, { termGrace: Duration.millis(termGraceMillis) }).pipe(Scope.provide(scope))
      yield* waitUntil("a growing tree", () => marked(mark).length >= 12)
      const started = Date.now()
      yield* Scope.close(scope, Exit.void)
      const millis = Date.now() - started
      assert.deepStrictEqual(marked(mark), [])
      assert.isBelow(millis, boundMillis)
    }).pipe(Effect.provide(TransportLive)))

  it.live("the host fiber is interrupted mid-turn", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const transport = yield* Transport.Transport
      const midTurn = yield* Deferred.make<number>()
      const session = yield* Effect.forkChild(
        Effect.gen(function*() {
          const connection = yield* transport.open(
            fakeSpec(mark, { modes: ["setsid-child"], spawnAt: "turn", frameDelayMillis: 60_000 }, {
              args: ["--input-format", "stream-json", "--include-partial-messages"]
            }),
            { termGrace: Duration.millis(termGraceMillis) }
          )
          yield* connection.write(userMessage("a long turn"))
          yield* connection.stdout.pipe(
            Stream.runForEach((line) =>
              line._tag === "Text" && line.text.includes("\"subtype\":\"init\"")
                ? Deferred.succeed(midTurn, Option.getOrThrow(connection.pid))
                : Effect.void
            )
          )
        }).pipe(Effect.scoped)
      )
      const cliPid = yield* Deferred.await(midTurn)
      yield* waitUntil("the tool process", () => sleeping(marked(mark)).length === 1)
      assert.isTrue(marked(mark).some((proc) => proc.pid === cliPid))

      const started = Date.now()
      yield* Fiber.interrupt(session)
      const exit = yield* Fiber.await(session)
      const millis = Date.now() - started
      assert.isTrue(Exit.hasInterrupts(exit))
      assert.deepStrictEqual(marked(mark), [])
      assert.isBelow(millis, boundMillis)
    }).pipe(Effect.provide(TransportLive)))

  it.live("several sessions torn down at once", () =>
    Effect.gen(function*() {
      const marks = Array.from({ length: 4 }, newMark)
      const transport = yield* Transport.Transport
      const scope = yield* Scope.make()
      yield* Effect.forEach(marks, (mark) =>
        transport.open(fakeSpec(mark, { modes: ["setsid-child", "grandchildren"] }), {
          termGrace: Duration.millis(termGraceMillis)
        }).pipe(Scope.provide(scope)), { concurrency: "unbounded" })
      yield* waitUntil("every tree", () =>
        marks.every((mark) =>
          marked(mark).length === 5
        ))
      const started = Date.now()
      yield* Scope.close(scope, Exit.void)
      const millis = Date.now() - started
      for (const mark of marks) assert.deepStrictEqual(marked(mark), [])
      assert.isBelow(millis, boundMillis)
    }).pipe(Effect.provide(TransportLive)))
})
