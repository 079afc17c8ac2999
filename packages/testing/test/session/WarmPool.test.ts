import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { DormantStore, Permission, type Session, SessionRegistry, TetherError, Transport } from "@tether/core"
import type { Status } from "@tether/core/SessionEvent"
import { MockClaude, MockCodex, MockTransport } from "@tether/testing"
import {
  Context,
  Deferred,
  type Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Metric,
  Option,
  Scheduler,
  Scope,
  Stream
} from "effect"
import { TestClock } from "effect/testing"
import { advanceUntil, settle } from "../../../core/test/support/TestTime.ts"

// ---------------------------------------------------------------------------------------------------------------
// Over a stub kind: what a pool hands out, and to whom. Each stub session says whether it is alive, what its status
// is, and which configuration it was started with; its `control` calls the configuration's `answer` function, so a
// test sees whose function a handed-out CLI calls.
// ---------------------------------------------------------------------------------------------------------------

interface StubConfig {
  readonly cwd: string
  readonly model?: string | undefined
  readonly answer?: ((question: string) => string) | undefined
}

interface Stub {
  readonly n: number
  readonly config: StubConfig
  status: Status
  alive: boolean
  released: boolean
  readonly exited: Deferred.Deferred<Transport.ExitStatus>
  readonly adapted: Array<string>
  /** Whether the kind's `prime` ran on it, and whether it was ready then (it must not be yet). */
  primed: boolean
}

const stubSession = (stub: Stub): Session.Session => ({
  protocol: "stub",
  pid: Option.some(stub.n),
  handshake: { n: stub.n },
  capabilities: Effect.succeed({
    provider: "stub",
    receipts: "explicit",
    interrupt: false,
    permissionKinds: [],
    resume: false,
    sandbox: undefined,
    notes: []
  }),
  status: Effect.sync(() => stub.status),
  sessionId: Effect.succeedSome(`conversation-${stub.n}`),
  send: () => Effect.die("not used"),
  run: () => Effect.die("not used"),
  interrupt: Effect.succeed("no-active-turn"),
  answerPermission: () => Effect.void,
  pendingPermissions: Effect.succeed([]),
  control: (request) => Effect.sync(() => stub.config.answer?.(String(request)) ?? "no answer"),
  subscribe: () => Effect.succeed(Stream.empty),
  latestSeq: Effect.succeed(0),
  process: Effect.succeed({ _tag: "Running" }),
  isAlive: Effect.sync(() => stub.alive),
  awaitExit: Deferred.await(stub.exited),
  stderrTail: Effect.succeed(""),
  retire: () => Effect.void,
  close: () => Effect.void
})

const makeStubs = (
  options: {
    readonly failStarts?: number
    readonly startDelay?: Duration.Input
    readonly prime?: "succeeds" | "fails"
  } = {}
) => {
  const stubs: Array<Stub> = []
  let attempts = 0
  const kind: SessionRegistry.Kind<StubConfig, TetherError.SpawnFailed, never> = {
    acquire: (_id, config) =>
      Effect.suspend(() => {
        attempts++
        if (attempts <= (options.failStarts ?? 0)) {
          return Effect.fail(new TetherError.SpawnFailed({ program: "stub", reason: "refused" }))
        }
        // The wait is the start's interruptible part (a handshake); the acquisition itself is not.
        const wait = options.startDelay === undefined ? Effect.void : Effect.sleep(options.startDelay)
        return Effect.andThen(
          wait,
          Effect.acquireRelease(
            Effect.gen(function*() {
              const stub: Stub = {
                n: stubs.length,
                config,
                status: "idle",
                alive: true,
                released: false,
                exited: yield* Deferred.make<Transport.ExitStatus>(),
                adapted: [],
                primed: false
              }
              stubs.push(stub)
              return stubSession(stub)
            }),
            (session) =>
              Effect.sync(() => {
                const stub = stubs[Option.getOrThrow(session.pid)]
                stub.released = true
                stub.alive = false
              })
          )
        )
      }),
    fingerprint: SessionRegistry.fingerprint,
    warm: {
      key: (config) => SessionRegistry.shape({ ...config, model: undefined }),
      adapt: (session, from, to) =>
        Effect.sync(() => {
          if (from.model !== to.model) stubs[Option.getOrThrow(session.pid)].adapted.push(`model=${to.model}`)
        }),
      prime: options.prime === undefined ? undefined : (session) =>
        Effect.suspend(() => {
          stubs[Option.getOrThrow(session.pid)].primed = true
          // Its answer takes two seconds.
          return Effect.andThen(
            Effect.sleep("2 seconds"),
            options.prime === "fails"
              ? Effect.fail(new TetherError.ControlFailed({ subtype: "prime", reason: "refused", code: null }))
              : Effect.void
          )
        })
    }
  }
  return { kind, stubs, attempts: () => attempts }
}

/** A scheduler whose fibers run nothing until the test flushes it: a fiber forked under it has not started. */
class HeldScheduler implements Scheduler.Scheduler {
  readonly executionMode = "async" as const
  private readonly tasks: Array<() => void> = []
  shouldYield() {
    return false
  }
  makeDispatcher(): Scheduler.SchedulerDispatcher {
    return { scheduleTask: (task) => this.tasks.push(task), flush: () => this.flush() }
  }
  flush() {
    while (this.tasks.length > 0) this.tasks.shift()!()
  }
}

const ready = (registry: { readonly pools: Effect.Effect<ReadonlyArray<SessionRegistry.PoolSnapshot>> }) =>
  Effect.map(registry.pools, (pools) => pools.reduce((total, pool) => total + pool.ready, 0))

const counter = (metric: Metric.Counter<number>) => Effect.map(Metric.value(metric), (state) => state.count)

describe("warm pools over a stub kind", () => {
  it.effect("a new conversation takes a warm CLI, bound to its own functions; the pool refills", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 4 })
      const hits = yield* counter(SessionRegistry.metrics.warmHits)
      yield* registry.warm({ cwd: "/w", answer: () => "the pool's" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      assert.strictEqual(stubs.length, 1)
      const handle = yield* Effect.scoped(
        registry.getOrCreate("a", { cwd: "/w", model: "opus", answer: (q) => `a's answer to ${q}` })
      )
      // The warm CLI, adapted to the model and answering with the conversation's function.
      assert.strictEqual(yield* handle.snapshot.pipe(Effect.map((s) => s.pid)), 0)
      assert.deepStrictEqual(stubs[0].adapted, ["model=opus"])
      assert.strictEqual(yield* registry.control("a", "q"), "a's answer to q")
      assert.strictEqual((yield* counter(SessionRegistry.metrics.warmHits)) - hits, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      assert.strictEqual(stubs.length, 2)
    }))

  it.effect("a hand-out holds the refills for warmRefillDelay, so the CLI taken starts its turn alone", () =>
    Effect.gen(function*() {
      const { attempts, kind } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8, warmRefillDelay: "300 millis" })
      yield* registry.warm({ cwd: "/w" }, 2)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 2))
      assert.strictEqual(attempts(), 2)
      yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/w" }))
      yield* TestClock.adjust("200 millis")
      // A second hand-out extends the hold from its own time.
      yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/w" }))
      yield* TestClock.adjust("299 millis")
      assert.strictEqual(attempts(), 2)
      assert.strictEqual(yield* ready(registry), 0)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(attempts(), 4)
      assert.strictEqual(yield* ready(registry), 2)
      // `0`: the refill starts at once; a negative delay is InvalidConfig.
      const eager = yield* SessionRegistry.make({ ...kind, capacity: 8, warmRefillDelay: 0 })
      yield* eager.warm({ cwd: "/e" }, 1)
      yield* advanceUntil(Effect.map(ready(eager), (n) => n === 1))
      yield* Effect.scoped(eager.getOrCreate("c", { cwd: "/e" }))
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* ready(eager), 1)
      const invalid = yield* Effect.flip(SessionRegistry.make({ ...kind, warmRefillDelay: -1 }))
      assert.strictEqual(invalid._tag, "InvalidConfig")
    }))

  it.effect("a warm CLI is primed before it is ready; a prime that fails leaves it ready all the same", () =>
    Effect.gen(function*() {
      for (const outcome of ["succeeds", "fails"] as const) {
        const { kind, stubs } = makeStubs({ prime: outcome, startDelay: "1 second" })
        const registry = yield* SessionRegistry.make({ ...kind, capacity: 4 })
        yield* registry.warm({ cwd: "/w" }, 1)
        // Started at one second, priming until three: not ready before.
        yield* TestClock.adjust("2 seconds")
        assert.isTrue(stubs[0].primed)
        assert.strictEqual(yield* ready(registry), 0)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* ready(registry), 1)
        const a = yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/w" }))
        assert.strictEqual(yield* a.snapshot.pipe(Effect.map((s) => s.pid)), 0)
      }
    }))

  it.effect("never hands out a CLI that died, whether or not its exit was seen", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 4 })
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      // Its transport says it is gone, but no exit was reported yet: the check at hand-out catches it.
      stubs[0].alive = false
      const a = yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/w" }))
      assert.notStrictEqual(yield* a.snapshot.pipe(Effect.map((s) => s.pid)), 0)
      assert.isTrue(stubs[0].released)
      // One whose exit was reported leaves its pool at once, and is replaced.
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const warm = stubs[stubs.length - 1]
      warm.alive = false
      yield* Deferred.succeed(warm.exited, Transport.ExitStatus.Exited({ code: 1 }))
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1 && stubs.length === warm.n + 2))
      assert.isTrue(warm.released)
      const b = yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/w" }))
      assert.strictEqual(yield* b.snapshot.pipe(Effect.map((s) => s.pid)), warm.n + 1)
    }))

  it.effect("never hands out a used CLI: each is handed out once, and a closed conversation's never returns", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8 })
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      // Two admissions at once, one warm CLI: one of them takes it, the other starts cold.
      const [a, b] = yield* Effect.all([
        Effect.scoped(registry.getOrCreate("a", { cwd: "/w" })),
        Effect.scoped(registry.getOrCreate("b", { cwd: "/w" }))
      ], { concurrency: "unbounded" })
      const pids = [yield* a.snapshot, yield* b.snapshot].map((s) => s.pid)
      assert.strictEqual(new Set(pids).size, 2)
      assert.include(pids, 0)
      // The conversation that had the warm CLI ends; its CLI goes with it, never back to the pool.
      const owner = pids[0] === 0 ? "a" : "b"
      yield* registry.forceEvict(owner)
      assert.isTrue(stubs[0].released)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const c = yield* Effect.scoped(registry.getOrCreate("c", { cwd: "/w" }))
      assert.notInclude(pids, yield* c.snapshot.pipe(Effect.map((s) => s.pid)))
      // A warm CLI that is busy by its own account (something used it) is not handed out either.
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const busy = stubs[stubs.length - 1]
      busy.status = "running"
      const d = yield* Effect.scoped(registry.getOrCreate("d", { cwd: "/w" }))
      assert.notStrictEqual(yield* d.snapshot.pipe(Effect.map((s) => s.pid)), busy.n)
      assert.isTrue(busy.released)
    }))

  it.effect("never hands out a CLI of another configuration: another key starts cold and leaves the pool alone", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8 })
      const misses = yield* counter(SessionRegistry.metrics.warmMisses)
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      // Another working directory; the same data with a function where the pool's has none.
      const other = yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/elsewhere" }))
      const withFunction = yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/w", answer: () => "b" }))
      assert.deepStrictEqual(
        [stubs[1].config.cwd, stubs[2].config.cwd],
        ["/elsewhere", "/w"]
      )
      assert.notInclude([yield* other.snapshot, yield* withFunction.snapshot].map((s) => s.pid), 0)
      assert.strictEqual(yield* ready(registry), 1)
      // Neither key has a pool: they are not misses.
      assert.strictEqual((yield* counter(SessionRegistry.metrics.warmMisses)) - misses, 0)
    }))

  it.effect("warm CLIs count against capacity: they fill free slots only and go before any conversation", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 2 })
      yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/a" }))
      yield* registry.warm({ cwd: "/w" }, 2)
      yield* advanceUntil(Effect.map(registry.pools, (pools) => pools[0]?.ready === 1))
      yield* TestClock.adjust("1 minute")
      // One free slot, one warm CLI.
      assert.strictEqual(stubs.length, 2)
      // A conversation of another configuration takes the warm CLI's slot, not the idle conversation's.
      yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/b" }))
      assert.isTrue(stubs[1].released)
      assert.deepStrictEqual((yield* registry.list).map((s) => s.id).sort(), ["a", "b"])
      assert.strictEqual(yield* ready(registry), 0)
      // Full of conversations: the pool waits for a free slot.
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(stubs.length, 3)
      yield* registry.forceEvict("a")
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
    }))

  it.effect("a pool that shrinks closes its surplus before warm returns; the registry's release closes the rest", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8 }).pipe(Scope.provide(scope))
      yield* registry.warm({ cwd: "/w" }, 3)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 3))
      yield* registry.warm({ cwd: "/w" }, 1)
      assert.deepStrictEqual(stubs.map((stub) => stub.released), [false, true, true])
      yield* registry.warm({ cwd: "/v" }, 2)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 3))
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(stubs.every((stub) => stub.released))
      assert.strictEqual((yield* Effect.flip(registry.warm({ cwd: "/w" }, 1)))._tag, "RegistryClosed")
    }))

  it.effect("a pool that shrinks stops its starts in progress: none of them becomes a CLI", () =>
    Effect.gen(function*() {
      const { attempts, kind, stubs } = makeStubs({ startDelay: "5 seconds" })
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8 })
      yield* registry.warm({ cwd: "/w" }, 2)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* registry.pools, [
        { key: kind.warm!.key({ cwd: "/w" }), target: 2, ready: 0, starting: 2 }
      ])
      yield* registry.warm({ cwd: "/w" }, 0)
      assert.deepStrictEqual(yield* registry.pools, [])
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(attempts(), 2)
      assert.strictEqual(stubs.length, 0)
    }))

  it.effect("an adoption starts the warm CLIs and makes one an id's session; its scope closes after the CLI's", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const started: Array<string> = []
      const adopted: Array<{ readonly id: string; readonly pid: number; releasedAtClose?: boolean }> = []
      const registry = yield* SessionRegistry.make({
        ...kind,
        capacity: 4,
        adoption: {
          start: (key, config) => Effect.andThen(Effect.sync(() => started.push(key)), kind.acquire("started", config)),
          adopt: (id, _config, warm) =>
            Effect.gen(function*() {
              const record: (typeof adopted)[number] = { id, pid: Option.getOrThrow(warm.session.pid) }
              adopted.push(record)
              // What an adoption registers runs once the CLI has been released.
              yield* Effect.addFinalizer(() =>
                Effect.sync(() => {
                  record.releasedAtClose = stubs[record.pid].released
                })
              )
              return warm.session
            })
        }
      })
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      assert.deepStrictEqual(started, [kind.warm!.key({ cwd: "/w" })])
      const a = yield* Effect.scoped(registry.getOrCreate("a", { cwd: "/w" }))
      assert.strictEqual(yield* a.snapshot.pipe(Effect.map((s) => s.pid)), 0)
      assert.deepStrictEqual(adopted, [{ id: "a", pid: 0 }])
      yield* registry.forceEvict("a")
      assert.isTrue(adopted[0].releasedAtClose, "the adoption's scope closed after the CLI")
      // A cold start is `acquire`'s, never `start`'s or `adopt`'s.
      yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/elsewhere" }))
      assert.strictEqual(adopted.length, 1)
      assert.strictEqual(started.length, 1)
      assert.strictEqual(stubs[1].config.cwd, "/elsewhere")
    }))

  it.effect("an id the adoption resumes takes no warm CLI and is no miss; an adoption may discard the warm CLI", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({
        ...kind,
        capacity: 4,
        adoption: {
          start: (_key, config) => kind.acquire("started", config),
          // It finds a conversation to resume after all: it closes the warm CLI and starts its own.
          adopt: (id, config, warm) =>
            Effect.andThen(warm.discard, id === "late" ? kind.acquire(id, config) : Effect.succeed(warm.session)),
          resumes: (id) => id.startsWith("old")
        }
      })
      const misses = yield* counter(SessionRegistry.metrics.warmMisses)
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const old = yield* Effect.scoped(registry.getOrCreate("old-1", { cwd: "/w" }))
      assert.strictEqual(yield* old.snapshot.pipe(Effect.map((s) => s.pid)), 1, "started cold")
      assert.strictEqual(yield* ready(registry), 1, "the warm CLI stays in its pool")
      assert.strictEqual((yield* counter(SessionRegistry.metrics.warmMisses)) - misses, 0)
      const late = yield* Effect.scoped(registry.getOrCreate("late", { cwd: "/w" }))
      assert.isTrue(stubs[0].released, "discarded at once")
      assert.strictEqual(yield* late.snapshot.pipe(Effect.map((s) => s.pid)), 2)
    }))

  it.effect("a conversation closed before its start runs closes the warm CLI it took, and its slot is free", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 2, warmRefillDelay: 0 })
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      // The admission takes the warm CLI and forks the start; the start is held (its fiber's scheduler runs nothing
      // until flushed) while the conversation is closed: it never runs.
      const held = new HeldScheduler()
      const admission = yield* Effect.forkChild(
        Effect.scoped(registry.getOrCreate("a", { cwd: "/w" })).pipe(Effect.provideService(Scheduler.Scheduler, held))
      )
      yield* advanceUntil(Effect.map(registry.size, (n) => n === 1))
      assert.strictEqual(yield* ready(registry), 0, "taken")
      yield* registry.forceEvict("a")
      assert.isTrue(stubs[0].released, "the warm CLI taken is closed with its conversation")
      held.flush()
      assert.strictEqual((yield* Effect.flip(Fiber.join(admission)))._tag, "SessionUnavailable")
      // Nothing holds a slot it does not count: the pool refills, and two conversations fit the capacity of two.
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      yield* Effect.scoped(registry.getOrCreate("b", { cwd: "/w" }))
      yield* Effect.scoped(registry.getOrCreate("c", { cwd: "/elsewhere" }))
      assert.deepStrictEqual(stubs.filter((stub) => !stub.released).length, 2)
    }))

  it.effect("with dormancy, the directory of a warm CLI taken by a conversation closed before its start is released", () =>
    Effect.gen(function*() {
      const { kind, stubs } = makeStubs()
      const live = new Set<string>()
      let next = 0
      const store: DormantStore.Store = {
        allocate: Effect.sync(() => {
          const directory = `dir-${next++}`
          live.add(directory)
          return directory
        }),
        save: () => Effect.void,
        load: () => Effect.succeedNone,
        list: Effect.succeed([]),
        remove: () => Effect.void,
        release: (directory) => Effect.sync(() => void live.delete(directory))
      }
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 2, dormancy: true }).pipe(
        Effect.provideService(DormantStore.DormantStore, store)
      )
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      assert.deepStrictEqual([...live], ["dir-0"])
      const held = new HeldScheduler()
      const admission = yield* Effect.forkChild(
        Effect.scoped(registry.getOrCreate("a", { cwd: "/w" })).pipe(Effect.provideService(Scheduler.Scheduler, held))
      )
      yield* advanceUntil(Effect.map(registry.size, (n) => n === 1))
      yield* registry.forceEvict("a")
      held.flush()
      yield* Fiber.await(admission)
      assert.isTrue(stubs[0].released)
      assert.isFalse(live.has("dir-0"), "its directory is released with it")
    }))

  it.effect("failed starts back off on the clock; a bad size is InvalidConfig", () =>
    Effect.gen(function*() {
      const { attempts, kind } = makeStubs({ failStarts: 2 })
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 8 })
      assert.strictEqual((yield* Effect.flip(registry.warm({ cwd: "/w" }, -1)))._tag, "InvalidConfig")
      yield* registry.warm({ cwd: "/w" }, 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(attempts(), 1)
      yield* TestClock.adjust("999 millis")
      assert.strictEqual(attempts(), 2)
      // The second failure waits two seconds.
      yield* TestClock.adjust("1999 millis")
      assert.strictEqual(attempts(), 2)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(attempts(), 3)
      assert.strictEqual(yield* ready(registry), 1)
    }))
})

// ---------------------------------------------------------------------------------------------------------------
// Over ClaudeSession and MockTransport: the simulated CLI's own frames.
// ---------------------------------------------------------------------------------------------------------------

const script = MockClaude.make([
  MockClaude.when("deploy", MockClaude.tool({ name: "Bash", input: { command: "make deploy" } }), MockClaude.text("ok"))
])

/** The `get_context_usage` requests written to a connection. */
const primes = (connection: MockTransport.MockConnection) =>
  Effect.map(connection.written, (frames) =>
    frames.flatMap((frame) => {
      const request = (frame as { readonly request?: { readonly subtype?: string } }).request
      return request?.subtype === "get_context_usage" ? [request] : []
    }))

const subtypes = (frames: ReadonlyArray<unknown>) =>
  frames.flatMap((frame) => {
    const request = (frame as { readonly request?: { readonly subtype?: string; readonly model?: string } }).request
    return request?.subtype === "set_model" ? [`set_model ${request.model}`] : []
  })

describe("warm pools of Claude sessions over MockTransport", () => {
  it.effect("a warm CLI is adapted by set_model and answers with the conversation's policy", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      const asked: Array<string> = []
      yield* registry.warm({ model: "sonnet", policy: Permission.denyAll }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      // Primed before it was ready (`warmPrime: "tokens"`, the default): the system prompt, the tools and the model
      // client built by `get_context_usage`, counted with the API.
      assert.deepStrictEqual(yield* primes(yield* mock.connection(0)), [{ subtype: "get_context_usage" }])
      const policy: Permission.Policy = (request) =>
        Effect.sync(() => {
          asked.push(request.toolName)
          return Permission.allow()
        })
      yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "opus", policy })))
      const first = yield* mock.connection(0)
      assert.deepStrictEqual(subtypes(yield* first.written), ["set_model opus"])
      const result = yield* settle(registry.run("a", "deploy"))
      assert.strictEqual(result.text, "ok")
      assert.deepStrictEqual(asked, ["Bash"])
      assert.strictEqual((yield* first.writtenLines).filter((line) => line.includes("make deploy")).length, 1)
      // The pool refilled; the release closes the conversation's CLI and the warm one.
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      yield* settle(Scope.close(scope, Exit.void))
      for (const connection of yield* mock.connections) assert.isFalse(yield* connection.isAlive)
    }))

  it.effect("a hand-out sends no control for what the pool already has, and only what differs", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      const controls = (n: number) =>
        Effect.map(
          Effect.flatMap(mock.connection(n), (connection) => connection.written),
          (frames) =>
            frames.flatMap((frame) => {
              const subtype = (frame as { readonly request?: { readonly subtype?: string } }).request?.subtype
              return subtype === "set_model" || subtype === "set_permission_mode" ? [subtype] : []
            })
        )
      yield* registry.warm({ model: "sonnet" }, 2)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 2))
      // The pool's model, the default permission mode (spelt out or not): nothing to change.
      yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "sonnet", permissionMode: "default" })))
      assert.deepStrictEqual(yield* controls(0), [])
      // Only the permission mode differs: only it is set.
      yield* settle(Effect.scoped(registry.getOrCreate("b", { model: "sonnet", permissionMode: "acceptEdits" })))
      assert.deepStrictEqual(yield* controls(1), ["set_permission_mode"])
      yield* settle(Scope.close(scope, Exit.void))
    }))

  it.effect("a policy splits the pool: its CLI is asked (--permission-prompt-tool), one without is not", () =>
    Effect.gen(function*() {
      const key = ClaudeSession.kind.warm!.key
      // Whether there is a policy, not which one: that is bound at hand-out.
      assert.notStrictEqual(key({}), key({ policy: Permission.denyAll }))
      assert.strictEqual(key({ policy: Permission.denyAll }), key({ policy: Permission.allowAll }))
      assert.notStrictEqual(
        key({ policy: Permission.allowAll }),
        key({ policy: Permission.allowAll, permissionPromptTool: false })
      )
      const context = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 8 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      const promptTool = (n: number) =>
        Effect.map(
          mock.connection(n),
          (connection) => connection.spec.args.filter((arg) => arg.startsWith("--permission-prompt-tool"))
        )
      // The connection that got the conversation's prompt.
      const servedBy = (prompt: string) =>
        Effect.flatMap(mock.connections, (all) =>
          Effect.map(
            Effect.forEach(all, (connection) => connection.writtenLines),
            (lines) => lines.flatMap((written, n) => written.some((line) => line.includes(prompt)) ? [n] : [])
          ))
      yield* registry.warm({ model: "sonnet" }, 1)
      yield* registry.warm({ model: "sonnet", policy: Permission.denyAll }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 2))
      const asked: Array<string> = []
      const policy: Permission.Policy = (request) =>
        Effect.sync(() => {
          asked.push(request.toolName)
          return Permission.allow()
        })
      // A conversation with a policy takes the pool's CLI that asks, and its policy answers it.
      yield* settle(Effect.scoped(registry.getOrCreate("with", { model: "sonnet", policy })))
      assert.strictEqual((yield* settle(registry.run("with", "deploy now"))).text, "ok")
      assert.deepStrictEqual(asked, ["Bash"])
      const [withPolicy] = yield* servedBy("deploy now")
      assert.deepStrictEqual(yield* promptTool(withPolicy), ["--permission-prompt-tool=stdio"])
      // One without takes the CLI that asks no one, and the CLI's own denial is the default policy's.
      yield* settle(Effect.scoped(registry.getOrCreate("without", { model: "sonnet" })))
      const denied = yield* settle(registry.run("without", "deploy later"))
      assert.deepStrictEqual(denied.permissionDenials.map((denial) => denial.toolName), ["Bash"])
      assert.deepStrictEqual(asked, ["Bash"])
      const [without] = yield* servedBy("deploy later")
      assert.deepStrictEqual(yield* promptTool(without), [])
      // Both were the pools' warm CLIs, started before either conversation.
      assert.deepStrictEqual([withPolicy, without].sort(), [0, 1])
      yield* settle(Scope.close(scope, Exit.void))
    }))

  it.effect("a conversation closed before its start runs leaves no warm CLI running", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      yield* registry.warm({}, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const held = new HeldScheduler()
      const admission = yield* Effect.forkChild(
        Effect.scoped(registry.getOrCreate("a", {})).pipe(Effect.provideService(Scheduler.Scheduler, held))
      )
      yield* advanceUntil(Effect.map(registry.size, (n) => n === 1))
      yield* settle(registry.forceEvict("a"))
      held.flush()
      yield* Fiber.await(admission)
      const warm = yield* mock.connection(0)
      assert.isFalse(yield* warm.isAlive, "the warm CLI taken went with its conversation")
      assert.isTrue(yield* warm.stdinEnded)
      yield* settle(Scope.close(scope, Exit.void))
    }))

  // What each `warmPrime` asks a warm CLI before it is ready, by the CLI's version: `"local"` asks for a summary only
  // of a CLI that answers it without calling the API (2.1.197 calls it even for a summary).
  const primings: ReadonlyArray<
    readonly [version: string, warmPrime: ClaudeSession.Options["warmPrime"], expected: ReadonlyArray<unknown>]
  > = [
    ["2.1.332", undefined, [{ subtype: "get_context_usage" }]],
    ["2.1.332", "tokens", [{ subtype: "get_context_usage" }]],
    ["2.1.332", "local", [{ subtype: "get_context_usage", detail: "summary" }]],
    ["2.1.332", false, []],
    ["2.1.197", undefined, [{ subtype: "get_context_usage" }]],
    ["2.1.197", "local", []]
  ]
  for (const [version, warmPrime, expected] of primings) {
    it.effect(`warmPrime ${String(warmPrime)} on ${version}: ${JSON.stringify(expected)} before it is ready`, () =>
      Effect.gen(function*() {
        const context = yield* Layer.build(MockTransport.layer(MockClaude.make([], { version })))
        const mock = Context.get(context, MockTransport.MockTransport)
        const scope = yield* Scope.make()
        const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4 }).pipe(
          Scope.provide(scope),
          Effect.provideContext(context)
        )
        yield* registry.warm(warmPrime === undefined ? {} : { warmPrime }, 1)
        yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
        const connection = yield* mock.connection(0)
        assert.isTrue((yield* connection.writtenLines).some((line) => line.includes(`"initialize"`)))
        assert.deepStrictEqual(yield* primes(connection), expected)
        yield* settle(Scope.close(scope, Exit.void))
      }))
  }

  it.effect("a warm CLI that crashed is not handed out", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      yield* registry.warm({}, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      yield* (yield* mock.connection(0)).trigger(MockClaude.crash())
      yield* advanceUntil(Effect.map(mock.connections, (all) => all.length === 2))
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      yield* settle(Effect.scoped(registry.getOrCreate("a", {})))
      assert.strictEqual((yield* settle(registry.run("a", "hello"))).text, "hello")
      const second = yield* mock.connection(1)
      assert.isTrue((yield* second.writtenLines).some((line) => line.includes("hello")))
      yield* settle(Scope.close(scope, Exit.void))
    }))
})

describe("warm pools of Codex sessions over MockTransport", () => {
  it.effect("a warm app-server, initialized with its thread started, takes the conversation's first turn", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(MockCodex.make([])))
      const mock = Context.get(context, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...CodexSession.kind, capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      yield* registry.warm({ model: "gpt-5" }, 1)
      yield* advanceUntil(Effect.map(ready(registry), (n) => n === 1))
      const warm = yield* mock.connection(0)
      const methods = (frames: ReadonlyArray<unknown>) =>
        frames.flatMap((frame) => {
          const method = (frame as { readonly method?: string }).method
          return method === undefined ? [] : [method]
        })
      // Ready means the thread exists already: the hand-out writes nothing before the turn.
      assert.include(methods(yield* warm.written), "thread/start")
      yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "gpt-5" })))
      assert.strictEqual((yield* settle(registry.run("a", "hello"))).text, "hello")
      assert.include(methods(yield* warm.written), "turn/start")
      // Another model is another pool key for Codex (nothing adapts it): a cold start.
      yield* settle(Effect.scoped(registry.getOrCreate("b", { model: "o3" })))
      const cold = yield* mock.latest
      assert.include(cold.spec.args.join(" "), "o3")
      yield* settle(Scope.close(scope, Exit.void))
      for (const connection of yield* mock.connections) assert.isFalse(yield* connection.isAlive)
    }))
})
