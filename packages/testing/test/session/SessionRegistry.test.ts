import { assert, describe, it } from "@effect/vitest"
import { ClaudeRegistry } from "@tether/claude"
import { ClaudeSession } from "@tether/claude"
import {
  type EventLog,
  Permission,
  Session,
  type SessionEvent,
  SessionRegistry,
  TetherError,
  Transport
} from "@tether/core"
import type { Status } from "@tether/core/SessionEvent"
import { MockClaude, MockTransport } from "@tether/testing"
import {
  Clock,
  Config,
  ConfigProvider,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Metric,
  Option,
  Redacted,
  Result,
  Scope,
  Stream
} from "effect"
import { TestClock } from "effect/testing"
import { advanceUntil, settle } from "../../../core/test/support/TestTime.ts"

/** The error of an effect that must fail. */
const errorOf = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

// ---------------------------------------------------------------------------------------------------------------
// The registry is provider-neutral: the first suite runs it over a stub kind (no transport, no protocol) for the
// parts that need no CLI. The second runs it over ClaudeSession over MockTransport, all on TestClock.
// ---------------------------------------------------------------------------------------------------------------

interface StubConfig {
  readonly model: string
  readonly policy?: (() => void) | undefined
}

/** A session that does nothing: always idle, never exits until released. */
const stubSession = (id: string, exited: Deferred.Deferred<Transport.ExitStatus>): Session.Session => {
  let status: Status = "idle"
  return {
    protocol: "stub",
    pid: Option.none(),
    handshake: { id },
    capabilities: Effect.succeed({
      provider: "stub",
      receipts: "explicit",
      interrupt: false,
      permissionKinds: [],
      resume: false,
      sandbox: undefined,
      notes: []
    }),
    status: Effect.sync(() => status),
    sessionId: Effect.succeedSome(`conversation-${id}`),
    send: () => Effect.die("not used"),
    run: () => Effect.die("not used"),
    interrupt: Effect.succeed("no-active-turn"),
    answerPermission: () => Effect.void,
    pendingPermissions: Effect.succeed([]),
    control: (request) => Effect.succeed(request),
    subscribe: () => Effect.succeed(Stream.empty),
    latestSeq: Effect.succeed(0),
    process: Effect.succeed({ _tag: "Running" }),
    isAlive: Effect.map(Deferred.isDone(exited), (done) => !done),
    awaitExit: Deferred.await(exited),
    stderrTail: Effect.succeed(""),
    retire: () =>
      Effect.sync(() => {
        status = "failed"
      }),
    // The registry closes the session's scope anyway; the stub has nothing of its own to release early.
    close: () => Effect.void
  }
}

const makeStub = (options: { readonly startDelay?: Duration.Input } = {}) => {
  const started: Array<string> = []
  const released: Array<string> = []
  const kind: SessionRegistry.Kind<StubConfig, never, never> = {
    acquire: (id, _config) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          if (options.startDelay !== undefined) yield* Effect.sleep(options.startDelay)
          started.push(id)
          return stubSession(id, yield* Deferred.make<Transport.ExitStatus>())
        }),
        () => Effect.sync(() => released.push(id))
      ),
    fingerprint: SessionRegistry.fingerprint
  }
  return { kind, started, released }
}

describe("SessionRegistry over a stub kind", () => {
  describe("fingerprint", () => {
    it("ignores key order, undefined and functions; reads Durations and Redacted values by value", () => {
      const fp = SessionRegistry.fingerprint
      assert.strictEqual(fp({ a: 1, b: "x" }), fp({ b: "x", a: 1 }))
      assert.strictEqual(fp({ a: 1, policy: () => 1 }), fp({ a: 1, policy: () => 2, hooks: undefined }))
      assert.notStrictEqual(fp({ a: 1 }), fp({ a: 2 }))
      assert.notStrictEqual(fp({ a: [1, 2] }), fp({ a: [2, 1] }))
      assert.strictEqual(fp({ t: Duration.seconds(60) }), fp({ t: Duration.minutes(1) }))
      assert.notStrictEqual(fp({ t: Duration.seconds(60) }), fp({ t: Duration.seconds(61) }))
      const secret = fp({ env: { KEY: Redacted.make("s3cret") } })
      assert.strictEqual(secret, fp({ env: { KEY: Redacted.make("s3cret") } }))
      assert.notStrictEqual(secret, fp({ env: { KEY: Redacted.make("other") } }))
      assert.notInclude(secret, "s3cret")
      const cyclic: { self?: unknown } = {}
      cyclic.self = cyclic
      assert.isString(fp(cyclic))
    })
  })

  it.effect("refuses invalid settings with InvalidConfig", () =>
    Effect.gen(function*() {
      const { kind } = makeStub()
      const error = yield* SessionRegistry.make({ ...kind, capacity: 0, idleTimeToLive: "-1 seconds" }).pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "InvalidConfig")
      assert.strictEqual(error.problems.length, 2)
    }))

  it.effect("starts one session for concurrent callers of the same id, with the caller's id and config", () =>
    Effect.gen(function*() {
      const { kind, started } = makeStub({ startDelay: "1 second" })
      const registry = yield* SessionRegistry.make({ ...kind, capacity: 2 })
      const fibers = yield* Effect.forEach(
        [1, 2, 3],
        () => Effect.forkChild(Effect.scoped(registry.getOrCreate("a", { model: "m" })))
      )
      yield* TestClock.adjust("1 second")
      const handles = yield* Fiber.joinAll(fibers)
      assert.deepStrictEqual(started, ["a"])
      assert.deepStrictEqual(new Set(handles.map((h) => h.generation)).size, 1)
      const snapshot = yield* registry.snapshot("a")
      assert.strictEqual(snapshot.sessionId, "conversation-a")
      assert.strictEqual(snapshot.fingerprint, SessionRegistry.fingerprint({ model: "m" }))
      assert.deepStrictEqual(yield* handles[0].control({ subtype: "ping" }), { subtype: "ping" })
    }))

  it.effect("a service made with Service reads its settings from Config, and its layer release closes sessions", () =>
    Effect.gen(function*() {
      const { kind, started, released } = makeStub()
      class Stubs extends SessionRegistry.Service<Stubs>()("test/Stubs", kind) {}
      const provider = ConfigProvider.fromUnknown({ registry: { capacity: 1, idleTimeToLive: "1 hour" } })
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Stubs.layerConfig(Config.nested(SessionRegistry.config, "registry")).pipe(
          Layer.provide(ConfigProvider.layer(provider))
        ),
        scope
      )
      const registry = Context.get(context, Stubs)
      yield* Effect.scoped(registry.getOrCreate("a", { model: "m" }))
      // Capacity 1: the idle "a" makes room for "b".
      yield* Effect.scoped(registry.getOrCreate("b", { model: "m" }))
      assert.deepStrictEqual(started, ["a", "b"])
      assert.deepStrictEqual(released, ["a"])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(released, ["a", "b"])
      const closed = yield* Effect.flip(Effect.scoped(registry.getOrCreate("c", { model: "m" })))
      assert.strictEqual(closed._tag, "RegistryClosed")
      assert.isTrue(closed.safeToRequeue)
    }))

  it.effect("reading bad settings from Config fails the layer", () =>
    Effect.gen(function*() {
      const { kind } = makeStub()
      class Stubs extends SessionRegistry.Service<Stubs>()("test/BadStubs", kind) {}
      const provider = ConfigProvider.fromUnknown({ capacity: "many" })
      const error = yield* Effect.flip(
        Layer.build(Stubs.layerConfig().pipe(Layer.provide(ConfigProvider.layer(provider))))
      )
      assert.strictEqual(error._tag, "ConfigError")
      // Settings that read well but make no sense fail the layer with InvalidConfig.
      const invalid = yield* Effect.flip(
        Layer.build(
          Stubs.layerConfig().pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({ capacity: 0 }))))
        )
      )
      assert.strictEqual(invalid._tag, "InvalidConfig")
    }))

  it.effect("by-id operations on a missing id fail with SessionNotFound, safe to requeue", () =>
    Effect.gen(function*() {
      const { kind } = makeStub()
      const registry = yield* SessionRegistry.make(kind)
      const errors = yield* Effect.all([
        errorOf(registry.send("nope", "hi")),
        errorOf(registry.interrupt("nope")),
        errorOf(registry.snapshot("nope")),
        errorOf(registry.evict("nope")),
        errorOf(registry.forceEvict("nope"))
      ])
      for (const error of errors) {
        assert.strictEqual(error._tag, "SessionNotFound")
        assert.isTrue(error.safeToRequeue)
        assert.isFalse(error.deliveryUncertain)
      }
      assert.deepStrictEqual(yield* registry.list, [])
    }))

  it.effect("a session whose process exits is removed and released", () =>
    Effect.gen(function*() {
      const exits: Array<Deferred.Deferred<Transport.ExitStatus>> = []
      const released: Array<string> = []
      const registry = yield* SessionRegistry.make<StubConfig, never, never>({
        acquire: (id) =>
          Effect.acquireRelease(
            Effect.gen(function*() {
              const exited = yield* Deferred.make<Transport.ExitStatus>()
              exits.push(exited)
              return stubSession(id, exited)
            }),
            () => Effect.sync(() => released.push(id))
          ),
        fingerprint: SessionRegistry.fingerprint
      })
      const first = yield* Effect.scoped(registry.getOrCreate("a", { model: "m" }))
      yield* Deferred.succeed(exits[0], Transport.ExitStatus.Exited({ code: 1 }))
      for (let i = 0; i < 100 && released.length === 0; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(released, ["a"])
      assert.strictEqual(yield* registry.size, 0)
      const stale = yield* Effect.flip(first.interrupt)
      assert.strictEqual(stale._tag, "GenerationChanged")
      const second = yield* Effect.scoped(registry.getOrCreate("a", { model: "m" }))
      assert.isAbove(second.generation, first.generation)
    }))
})

// ---------------------------------------------------------------------------------------------------------------

/** A connection that has been torn down: stdin closed, the process gone, an exit status recorded. */
const assertEnded = (connection: MockTransport.MockConnection) =>
  Effect.gen(function*() {
    assert.isTrue(yield* connection.stdinEnded, `connection ${connection.index}: stdin not closed`)
    assert.isFalse(yield* connection.isAlive, `connection ${connection.index}: still alive`)
    assert.isTrue(Option.isSome(yield* connection.exitStatus), `connection ${connection.index}: no exit status`)
  })

const assertAlive = (connection: MockTransport.MockConnection) =>
  Effect.gen(function*() {
    assert.isTrue(yield* connection.isAlive, `connection ${connection.index}: not alive`)
    assert.isFalse(yield* connection.stdinEnded, `connection ${connection.index}: stdin closed`)
  })

/** The interrupt requests the host wrote to a CLI. */
const interruptsWritten = (connection: MockTransport.MockConnection) =>
  Effect.map(
    connection.written,
    (frames) =>
      frames.filter((f) => (f as { readonly request?: { readonly subtype?: string } }).request?.subtype === "interrupt")
  )

const isReplay = (frame: unknown) =>
  typeof frame === "object" && frame !== null && "isReplay" in frame && frame.isReplay === true

const slow = MockClaude.when("slow", MockClaude.text([{ text: "slow done", delay: "2 minutes" }]))
const script = MockClaude.make([slow])

type Registry = SessionRegistry.Registry<
  ClaudeSession.Options,
  ClaudeSession.StartError,
  ClaudeSession.TurnResult,
  ClaudeSession.TurnError
>

/**
 * A registry of Claude sessions over `MockTransport` in its own scope, closed (with the clock advancing) after
 * `body`, whatever its outcome.
 */
const withRegistry = <A, E>(
  settings: SessionRegistry.Settings,
  body: (
    registry: Registry,
    mock: Context.Service.Shape<typeof MockTransport.MockTransport>
  ) => Effect.Effect<A, E, Scope.Scope>,
  transport: MockClaude.Script = script
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(MockTransport.layer(transport))
    const mock = Context.get(context, MockTransport.MockTransport)
    const scope = yield* Scope.make()
    const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, ...settings }).pipe(
      Scope.provide(scope),
      Effect.provideContext(context)
    )
    const exit = yield* Effect.exit(body(registry, mock))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

/** Starts (or finds) a session and releases the pin at once. */
const touch = (registry: Registry, id: string, config: ClaudeSession.Options = {}) =>
  settle(Effect.scoped(registry.getOrCreate(id, config)))

/** A fiber that subscribes to the id's events and collects what `f` keeps of them until the session closes. */
const collect = <B>(
  registry: Registry,
  id: string,
  f: (delivery: EventLog.Delivery<SessionEvent.SessionEvent>) => Result.Result<B, void>
) =>
  Effect.forkChild(
    Effect.scoped(Effect.flatMap(registry.subscribe(id), (stream) => Stream.runCollect(Stream.filterMap(stream, f))))
  )

const evictions = (reason: SessionRegistry.EvictionReason) =>
  Effect.map(Metric.value(Metric.withAttributes(SessionRegistry.metrics.evictions, { reason })), (state) => state.count)

describe("SessionRegistry over ClaudeSession and MockTransport", () => {
  it.effect("starts a session on first use and reuses it for the same id and configuration", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        const first = yield* touch(registry, "a", { model: "sonnet" })
        // A different permission policy is not a different configuration.
        const second = yield* touch(registry, "a", { model: "sonnet", policy: Permission.allowAll })
        assert.strictEqual(second.generation, first.generation)
        assert.strictEqual((yield* mock.connections).length, 1)
        const result = yield* settle(registry.run("a", "hello"))
        assert.strictEqual(result.text, "hello")
        const snapshot = yield* registry.snapshot("a")
        assert.strictEqual(snapshot.phase, "live")
        assert.strictEqual(snapshot.status, "idle")
        assert.strictEqual(snapshot.pins, 0)
        assert.strictEqual(snapshot.turnsInFlight, 0)
        assert.strictEqual(snapshot.exit, undefined)
        assert.isDefined(result.sessionId)
        assert.strictEqual(snapshot.sessionId, result.sessionId)
      })))

  it.effect("closes a session idle for longer than the TTL, never a pinned or running one", () =>
    withRegistry({ capacity: 4, idleTimeToLive: "1 minute" }, (registry, mock) =>
      Effect.gen(function*() {
        const idleBefore = yield* evictions("idle")
        yield* touch(registry, "idle")
        const pinScope = yield* Scope.make()
        yield* settle(registry.getOrCreate("pinned", {}).pipe(Scope.provide(pinScope)))
        yield* touch(registry, "busy")
        const turn = yield* settle(registry.send("busy", "slow"))
        const [idle, pinned, busy] = yield* mock.connections

        yield* TestClock.adjust("50 seconds")
        assert.strictEqual(yield* registry.size, 3)
        yield* TestClock.adjust("15 seconds")
        yield* advanceUntil(Effect.map(registry.size, (n) => n === 2))
        const ids = (yield* registry.list).map((s) => s.id)
        assert.deepStrictEqual(ids.toSorted(), ["busy", "pinned"])
        yield* assertEnded(idle)
        yield* assertAlive(pinned)
        yield* assertAlive(busy)
        assert.strictEqual((yield* evictions("idle")) - idleBefore, 1)

        // The running turn outlives the TTL; the session's idle time starts when the turn ends.
        const result = yield* settle(turn.result, { step: "1 second" })
        assert.strictEqual(result.text, "slow done")
        yield* TestClock.adjust("50 seconds")
        assert.isTrue(yield* busy.isAlive)
        // Releasing the pin starts the pinned session's idle time too.
        yield* Scope.close(pinScope, Exit.void)
        yield* TestClock.adjust("15 seconds")
        yield* advanceUntil(Effect.map(registry.size, (n) => n === 1))
        yield* assertEnded(busy)
        yield* assertAlive(pinned)
        yield* TestClock.adjust("1 minute")
        yield* advanceUntil(Effect.map(registry.size, (n) => n === 0))
        yield* assertEnded(pinned)
      })))

  it.effect("at capacity evicts the least recently used idle session, never a pinned or active one", () =>
    withRegistry({ capacity: 3 }, (registry, mock) =>
      Effect.gen(function*() {
        const pinScope = yield* Scope.make()
        yield* settle(registry.getOrCreate("pinned", {}).pipe(Scope.provide(pinScope)))
        yield* touch(registry, "active")
        yield* touch(registry, "idle-old")
        yield* settle(registry.send("active", "slow"))
        // "pinned" and "active" are older than "idle-old", but only "idle-old" may go.
        yield* touch(registry, "new")
        const ids = (yield* registry.list).map((s) => s.id)
        assert.deepStrictEqual(ids.toSorted(), ["active", "new", "pinned"])
        const [pinned, active, idleOld, fresh] = yield* mock.connections
        yield* assertEnded(idleOld)
        yield* assertAlive(pinned)
        yield* assertAlive(active)
        yield* assertAlive(fresh)
        assert.strictEqual((yield* registry.snapshot("active")).status, "running")

        // Recency: using "new" again makes it newer than nothing else evictable; with "pinned" and "active"
        // untouchable, it is the victim for the next admission.
        const newPin = yield* Scope.make()
        yield* settle(registry.getOrCreate("new", {}).pipe(Scope.provide(newPin)))
        // Everything is pinned or busy now: admission fails at once, safe to requeue.
        const full = yield* settle(Effect.scoped(registry.getOrCreate("other", {})).pipe(Effect.flip))
        assert.strictEqual(full._tag, "CapacityExceeded")
        assert.isTrue(full.safeToRequeue)
        assert.isFalse(full.deliveryUncertain)
        assert.strictEqual((yield* mock.connections).length, 4)

        // With an admission timeout it waits for a slot: releasing a pin frees one.
        const waiting = yield* Effect.forkChild(
          Effect.scoped(registry.getOrCreate("other", {}, { admissionTimeout: "30 seconds" }))
        )
        yield* TestClock.adjust("5 seconds")
        assert.isUndefined(waiting.pollUnsafe())
        yield* Scope.close(newPin, Exit.void)
        const admitted = yield* settle(Fiber.join(waiting))
        yield* settle(registry.getOrCreate("other", {}).pipe(Scope.provide(pinScope)))
        assert.strictEqual(admitted.id, "other")
        yield* assertEnded(fresh)
        yield* assertAlive(pinned)
        yield* assertAlive(active)

        // A wait that outlasts its deadline fails with the time it waited.
        const timedOut = yield* settle(
          Effect.scoped(registry.getOrCreate("late", {}, { admissionTimeout: "2 seconds" })).pipe(Effect.flip),
          { step: "100 millis" }
        )
        assert.strictEqual(timedOut._tag, "CapacityExceeded")
        yield* Scope.close(pinScope, Exit.void)
      })))

  it.effect("the least recently used of several idle sessions is evicted first", () =>
    withRegistry({ capacity: 2 }, (registry, mock) =>
      Effect.gen(function*() {
        yield* touch(registry, "x")
        yield* touch(registry, "y")
        yield* TestClock.adjust("1 second")
        yield* touch(registry, "x")
        yield* touch(registry, "z")
        const ids = (yield* registry.list).map((s) => s.id)
        assert.deepStrictEqual(ids, ["x", "z"])
        const [x, y] = yield* mock.connections
        yield* assertAlive(x)
        yield* assertEnded(y)
      })))

  it.effect("a different configuration for a live id is a typed conflict; replace starts a new generation", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        const first = yield* touch(registry, "a", { model: "sonnet" })
        const conflict = yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "opus" })).pipe(Effect.flip))
        assert.strictEqual(conflict._tag, "SessionConflict")
        if (conflict._tag !== "SessionConflict") return
        assert.strictEqual(conflict.generation, first.generation)
        assert.notStrictEqual(conflict.liveFingerprint, conflict.requestedFingerprint)
        assert.isTrue(conflict.safeToRequeue)
        assert.isTrue(conflict.safeToFallback)
        assert.isFalse(conflict.deliveryUncertain)
        assert.strictEqual((yield* mock.connections).length, 1)

        const replaced = yield* settle(
          Effect.scoped(registry.getOrCreate("a", { model: "opus" }, { onConflict: "replace" }))
        )
        assert.isAbove(replaced.generation, first.generation)
        const [old, current] = yield* mock.connections
        yield* assertEnded(old)
        yield* assertAlive(current)
        assert.strictEqual((yield* registry.snapshot("a")).fingerprint, SessionRegistry.fingerprint({ model: "opus" }))
      })))

  it.effect("a handle from a previous generation cannot act on its replacement", () =>
    withRegistry({ capacity: 4 }, (registry) =>
      Effect.gen(function*() {
        const old = yield* touch(registry, "a")
        yield* settle(registry.forceEvict("a"))
        const gone = yield* old.send("hello").pipe(Effect.flip)
        assert.strictEqual(gone._tag, "GenerationChanged")
        if (gone._tag === "GenerationChanged") assert.isNull(gone.current)

        const current = yield* touch(registry, "a")
        assert.notStrictEqual(current.generation, old.generation)
        const errors = yield* Effect.all([
          errorOf(old.send("hello")),
          errorOf(old.run("hello")),
          errorOf(old.interrupt),
          errorOf(old.answerPermission("req", Permission.allow())),
          errorOf(old.snapshot),
          errorOf(registry.send("a", "hello", { generation: old.generation }))
        ])
        for (const error of errors) {
          assert.strictEqual(error._tag, "GenerationChanged")
          if (error._tag !== "GenerationChanged") continue
          assert.strictEqual(error.expected, old.generation)
          assert.strictEqual(error.current, current.generation)
          assert.isTrue(error.safeToRequeue)
          assert.isFalse(error.deliveryUncertain)
        }
        const stale = yield* Effect.flip(Effect.scoped(old.subscribe()))
        assert.strictEqual(stale._tag, "GenerationChanged")
        // The current handle works.
        const result = yield* settle(current.run("hello"))
        assert.strictEqual(result.text, "hello")
      })))

  it.effect("force-evict during a turn fails its waiter with TurnInterrupted (evicted), uncertain before the ack", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        // Acknowledged: the CLI has the prompt, so the interruption is certain.
        const handle = yield* touch(registry, "a")
        const turn = yield* settle(handle.send("slow"))
        yield* advanceUntil(Effect.map(turn.phase, (phase) => phase === "acknowledged"))
        const waiter = yield* Effect.forkChild(turn.result)
        yield* settle(registry.forceEvict("a"))
        const error = yield* Fiber.join(waiter).pipe(Effect.flip)
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag === "TurnInterrupted") {
          assert.strictEqual(error.reason, "evicted")
          assert.isTrue(error.acknowledged)
          assert.isFalse(error.deliveryUncertain)
          assert.isFalse(error.safeToRequeue)
        }
        yield* assertEnded(yield* mock.connection(0))
        assert.strictEqual(yield* registry.size, 0)

        // Not yet acknowledged: delivery is uncertain.
        yield* touch(registry, "b")
        const early = yield* registry.send("b", "slow")
        assert.strictEqual(yield* early.phase, "started")
        const earlyWaiter = yield* Effect.forkChild(early.result)
        yield* settle(registry.forceEvict("b"))
        const uncertain = yield* Fiber.join(earlyWaiter).pipe(Effect.flip)
        assert.strictEqual(uncertain._tag, "TurnInterrupted")
        if (uncertain._tag === "TurnInterrupted") {
          assert.strictEqual(uncertain.reason, "evicted")
          assert.isFalse(uncertain.acknowledged)
          assert.isTrue(uncertain.deliveryUncertain)
        }
        yield* assertEnded(yield* mock.connection(1))
      })))

  it.effect("an evicted turn says so to its waiter and to the session's subscribers alike", () =>
    withRegistry({ capacity: 4 }, (registry) =>
      Effect.gen(function*() {
        // The reason comes from the session (the registry closes it with "evicted"), so the session's own event
        // log agrees with the turn's waiter: a subscriber never reads "closed" for an eviction.
        yield* touch(registry, "a")
        const failures = yield* collect(registry, "a", (delivery) =>
          delivery._tag === "Event" && delivery.event._tag === "TurnFailed"
            ? Result.succeed(delivery.event.error)
            : Result.failVoid)
        yield* TestClock.adjust("1 millis")
        const turn = yield* settle(registry.send("a", "slow"))
        yield* advanceUntil(Effect.map(turn.phase, (phase) =>
          phase === "acknowledged"))
        const waiter = yield* Effect.forkChild(turn.result)
        yield* settle(registry.forceEvict("a"))
        const error = yield* Fiber.join(waiter).pipe(Effect.flip)
        const published = yield* settle(Fiber.join(failures))
        assert.strictEqual(published.length, 1)
        for (const failure of [error, published[0]]) {
          assert.instanceOf(failure, TetherError.TurnInterrupted)
          if (failure instanceof TetherError.TurnInterrupted) {
            assert.strictEqual(failure.reason, "evicted")
          }
        }
      })))

  it.effect("replacing a session under a running turn fails the turn as evicted", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        yield* touch(registry, "a", { model: "sonnet" })
        const turn = yield* settle(registry.send("a", "slow"))
        yield* advanceUntil(Effect.map(turn.phase, (phase) => phase === "acknowledged"))
        const waiter = yield* Effect.forkChild(turn.result)
        const replaced = yield* settle(
          Effect.scoped(registry.getOrCreate("a", { model: "opus" }, { onConflict: "replace" }))
        )
        const error = yield* Fiber.join(waiter).pipe(Effect.flip)
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag === "TurnInterrupted") {
          assert.strictEqual(error.reason, "evicted")
          assert.isTrue(error.acknowledged)
        }
        assert.strictEqual((yield* registry.snapshot("a")).generation, replaced.generation)
        yield* assertEnded(yield* mock.connection(0))
      })))

  it.effect("interrupts the running turn by id; the session stays live for the next turn", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        assert.strictEqual(
          yield* registry.interrupt("a").pipe(Effect.flip, Effect.map((e) => e._tag)),
          "SessionNotFound"
        )
        const handle = yield* touch(registry, "a")
        assert.strictEqual(yield* settle(registry.interrupt("a")), "no-active-turn")
        const turn = yield* settle(handle.send("slow"))
        yield* advanceUntil(Effect.map(turn.phase, (phase) => phase === "acknowledged"))
        const waiter = yield* Effect.forkChild(turn.result)
        assert.strictEqual(yield* settle(registry.interrupt("a")), "interrupted")
        const error = yield* Fiber.join(waiter).pipe(Effect.flip)
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, "host")
        assert.strictEqual((yield* registry.snapshot("a")).status, "idle")
        assert.strictEqual((yield* settle(handle.run("hello"))).text, "hello")
        yield* assertAlive(yield* mock.connection(0))
      })))

  it.effect("a caller of run that stops waiting interrupts its turn; the session stays live", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        yield* touch(registry, "a")
        const waiter = yield* Effect.forkChild(registry.run("a", "slow"))
        yield* advanceUntil(Effect.map(registry.snapshot("a"), (s) => s.status === "running"))
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(waiter)
        yield* advanceUntil(Effect.map(registry.snapshot("a"), (s) => s.status === "idle"))
        const interrupts = yield* interruptsWritten(yield* mock.connection(0))
        assert.strictEqual(interrupts.length, 1)
        assert.strictEqual((yield* settle(registry.run("a", "hello"))).text, "hello")
      })))

  it.effect("a caller of run with interruptOnCancel: false that stops waiting lets its turn finish", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        yield* touch(registry, "a")
        const waiter = yield* Effect.forkChild(registry.run("a", "slow", { interruptOnCancel: false }))
        yield* advanceUntil(Effect.map(registry.snapshot("a"), (s) => s.status === "running"))
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(waiter)
        yield* TestClock.adjust("3 minutes")
        assert.strictEqual((yield* registry.snapshot("a")).status, "idle")
        const interrupts = yield* interruptsWritten(yield* mock.connection(0))
        assert.strictEqual(interrupts.length, 0)
      })))

  it.effect("graceful evict refuses new turns, waits for the running one, then closes", () =>
    withRegistry({ capacity: 4 }, (registry, mock) =>
      Effect.gen(function*() {
        yield* touch(registry, "a")
        const turn = yield* settle(registry.send("a", "slow"))
        const evicting = yield* Effect.forkChild(registry.evict("a"))
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* registry.snapshot("a")).phase, "draining")
        const refused = yield* registry.send("a", "more").pipe(Effect.flip)
        assert.strictEqual(refused._tag, "SessionUnavailable")
        assert.isTrue(refused.safeToRequeue)
        // The running turn still completes.
        const result = yield* settle(turn.result, { step: "1 second" })
        assert.strictEqual(result.text, "slow done")
        yield* settle(Fiber.join(evicting))
        yield* assertEnded(yield* mock.connection(0))
        assert.strictEqual((yield* registry.snapshot("a").pipe(Effect.flip))._tag, "SessionNotFound")
        // The id is free for a new generation.
        yield* touch(registry, "a")
        assert.strictEqual((yield* mock.connections).length, 2)
      })))

  it.effect("evict with a timeout escalates to force-evict", () =>
    withRegistry({ capacity: 4 }, (registry) =>
      Effect.gen(function*() {
        yield* touch(registry, "a")
        const turn = yield* settle(registry.send("a", "slow"))
        const waiter = yield* Effect.forkChild(turn.result)
        yield* settle(registry.evict("a", { timeout: "5 seconds" }), { step: "100 millis" })
        const error = yield* Fiber.join(waiter).pipe(Effect.flip)
        assert.strictEqual(error._tag, "TurnInterrupted")
        if (error._tag === "TurnInterrupted") assert.strictEqual(error.reason, "evicted")
      })))

  it.effect("a session whose CLI dies is removed, and the id's next use starts a new generation", () =>
    withRegistry(
      { capacity: 4 },
      (registry, mock) =>
        Effect.gen(function*() {
          const failedBefore = yield* evictions("failed")
          const first = yield* touch(registry, "a")
          const error = yield* settle(registry.run("a", "crash")).pipe(Effect.flip)
          assert.strictEqual(error._tag, "CliExited")
          yield* advanceUntil(Effect.map(registry.size, (n) => n === 0))
          assert.strictEqual((yield* evictions("failed")) - failedBefore, 1)
          yield* assertEnded(yield* mock.connection(0))
          const second = yield* touch(registry, "a")
          assert.isAbove(second.generation, first.generation)
          assert.strictEqual((yield* settle(second.run("hello"))).text, "hello")
        }),
      MockClaude.make([slow, MockClaude.when("crash", MockClaude.crash({ code: 3 }))])
    ))

  it.effect("answers a deferred permission by id and records the wait", () =>
    withRegistry(
      { capacity: 4 },
      (registry) =>
        Effect.gen(function*() {
          const before = yield* Metric.value(Session.metrics.permissionWait)
          yield* touch(registry, "a", { policy: () => Effect.succeed(Permission.defer) })
          const sentAt = yield* Clock.currentTimeMillis
          const turn = yield* settle(registry.send("a", "deploy"))
          yield* advanceUntil(Effect.map(registry.pendingPermissions("a"), (pending) => pending.length === 1))
          const [request] = yield* registry.pendingPermissions("a")
          assert.strictEqual(request.toolName, "Bash")
          assert.strictEqual((yield* registry.snapshot("a")).pendingPermissions, 1)
          yield* TestClock.adjust("3 seconds")
          yield* registry.answerPermission("a", request.requestId, Permission.allow())
          const answeredAt = yield* Clock.currentTimeMillis
          const again = yield* registry.answerPermission("a", request.requestId, Permission.allow()).pipe(Effect.flip)
          assert.strictEqual(again._tag, "PermissionAlreadyResolved")
          const result = yield* settle(turn.result)
          assert.strictEqual(result.text, "deployed")
          const after = yield* Metric.value(Session.metrics.permissionWait)
          assert.strictEqual(after.count - before.count, 1)
          // The request arrived after the send and was answered 3 seconds after it was seen pending.
          const waited = after.sum - before.sum
          assert.isAtLeast(waited, 3000)
          assert.isAtMost(waited, answeredAt - sentAt)
        }),
      MockClaude.make([
        MockClaude.when(
          "deploy",
          MockClaude.tool({ name: "Bash", input: { command: "make deploy" } }),
          MockClaude.text("deployed")
        )
      ])
    ))

  it.effect("subscribes to a session's events by id; the stream ends when the session is evicted", () =>
    withRegistry({ capacity: 4 }, (registry) =>
      Effect.gen(function*() {
        yield* touch(registry, "a")
        const events = yield* collect(
          registry,
          "a",
          (delivery) => Result.succeed(delivery._tag === "Event" ? delivery.event._tag : "Lag")
        )
        yield* TestClock.adjust("1 millis")
        yield* settle(registry.run("a", "hello"))
        yield* settle(registry.forceEvict("a"))
        const tags = yield* settle(Fiber.join(events))
        assert.includeMembers(tags, ["TurnStarted", "TurnAcknowledged", "TurnCompleted", "Exit"])
      })))

  it.effect("releasing the layer closes every session, concurrently, and fails the running turn", () =>
    Effect.gen(function*() {
      // Each CLI takes 1 s to exit after stdin EOF (the busy one exits only when SIGTERMed after the 2 s close
      // grace): closing 6 sessions two at a time takes 4 s, one at a time 7 s, all at once 2 s.
      const transport = yield* Layer.build(
        MockTransport.layer(MockClaude.make([slow], { timing: { exit: "1 second" } }))
      )
      const mock = Context.get(transport, MockTransport.MockTransport)
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        ClaudeRegistry.layer({ capacity: 8, shutdownConcurrency: 2 }).pipe(
          Layer.provide(Layer.succeedContext(transport))
        ),
        scope
      )
      const registry = Context.get(context, ClaudeRegistry.ClaudeRegistry)
      for (const id of ["a", "b", "c", "d", "e"]) yield* touch(registry, id)
      const pinned = yield* settle(registry.getOrCreate("f", {}).pipe(Scope.provide(yield* Scope.make())))
      const turn = yield* settle(pinned.send("slow"))
      yield* advanceUntil(Effect.map(turn.phase, (phase) => phase === "acknowledged"))
      const waiter = yield* Effect.forkChild(turn.result)
      const connections = yield* mock.connections
      assert.strictEqual(connections.length, 6)
      for (const connection of connections) yield* assertAlive(connection)

      const teardownsBefore = (yield* Metric.value(SessionRegistry.metrics.teardownDuration)).count
      const t0 = yield* Clock.currentTimeMillis
      yield* settle(Scope.close(scope, Exit.void), { step: "100 millis" })
      const elapsed = (yield* Clock.currentTimeMillis) - t0
      assert.strictEqual(elapsed, 4000)
      for (const connection of connections) yield* assertEnded(connection)
      assert.strictEqual((yield* Metric.value(SessionRegistry.metrics.teardownDuration)).count - teardownsBefore, 6)
      const error = yield* Fiber.join(waiter).pipe(Effect.flip)
      assert.strictEqual(error._tag, "TurnInterrupted")
      if (error._tag === "TurnInterrupted") {
        // Shut down by its owner, not evicted.
        assert.strictEqual(error.reason, "closed")
        assert.isTrue(error.acknowledged)
      }
      const closed = yield* Effect.scoped(registry.getOrCreate("g", {})).pipe(Effect.flip)
      assert.strictEqual(closed._tag, "RegistryClosed")
      assert.strictEqual((yield* pinned.send("x").pipe(Effect.flip))._tag, "RegistryClosed")
    }))

  it.effect("interrupting the host mid-turn tears every session down", () =>
    Effect.gen(function*() {
      const transport = yield* Layer.build(MockTransport.layer(script))
      const mock = Context.get(transport, MockTransport.MockTransport)
      const host = Effect.gen(function*() {
        const registry = yield* ClaudeRegistry.ClaudeRegistry
        yield* Effect.scoped(registry.getOrCreate("idle", {}))
        const chat = yield* registry.getOrCreate("chat", {})
        return yield* chat.run("slow")
      }).pipe(
        Effect.scoped,
        Effect.provide(ClaudeRegistry.layer().pipe(Layer.provide(Layer.succeedContext(transport))))
      )
      const fiber = yield* Effect.forkChild(host)
      // Mid-turn: the prompt was written to the second CLI, and it has answered with the replay.
      yield* advanceUntil(
        Effect.flatMap(mock.connections, (connections) =>
          connections.length < 2
            ? Effect.succeed(false)
            : Effect.map(connections[1].frames, (frames) => frames.some((frame) => isReplay(frame))))
      )
      const connections = yield* mock.connections
      for (const connection of connections) yield* assertAlive(connection)
      yield* settle(Fiber.interrupt(fiber))
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.hasInterrupts(exit))
      for (const connection of connections) yield* assertEnded(connection)
    }))

  it.effect("reports live sessions and turns in flight", () =>
    withRegistry({ capacity: 4 }, (registry) =>
      Effect.gen(function*() {
        const sessions = () => Effect.map(Metric.value(SessionRegistry.metrics.sessions), (s) => s.value)
        const inFlight = () => Effect.map(Metric.value(SessionRegistry.metrics.turnsInFlight), (s) => s.value)
        const sessionsBefore = yield* sessions()
        const inFlightBefore = yield* inFlight()
        yield* touch(registry, "a")
        yield* touch(registry, "b")
        assert.strictEqual((yield* sessions()) - sessionsBefore, 2)
        const turn = yield* settle(registry.send("a", "slow"))
        assert.strictEqual((yield* inFlight()) - inFlightBefore, 1)
        assert.strictEqual((yield* registry.snapshot("a")).turnsInFlight, 1)
        yield* settle(turn.result, { step: "1 second" })
        yield* advanceUntil(Effect.map(inFlight(), (n) => n === inFlightBefore))
        yield* settle(registry.evict("b"))
        assert.strictEqual((yield* sessions()) - sessionsBefore, 1)
      })))

  it.effect("a session that fails to start fails every waiter with the kind's typed error and leaves no entry", () =>
    Effect.gen(function*() {
      const transport = yield* Layer.build(
        MockTransport.layer(script, {
          spawnError: () => new TetherError.ExecutableNotFound({ program: "claude", searched: ["PATH"] })
        })
      )
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 1 }).pipe(
        Effect.provideContext(transport)
      )
      const [first, second] = yield* settle(
        Effect.all([
          Effect.flip(Effect.scoped(registry.getOrCreate("a", {}))),
          Effect.flip(Effect.scoped(registry.getOrCreate("a", {})))
        ], { concurrency: 2 })
      )
      assert.strictEqual(first._tag, "ExecutableNotFound")
      assert.strictEqual(second._tag, "ExecutableNotFound")
      assert.isTrue(first.safeToFallback)
      assert.isTrue(first.safeToRequeue)
      assert.strictEqual(yield* registry.size, 0)
      // The slot is free again.
      assert.strictEqual((yield* Effect.flip(Effect.scoped(registry.getOrCreate("b", {}))))._tag, "ExecutableNotFound")
    }))
})

// ---------------------------------------------------------------------------------------------------------------

describe("SessionRegistry.kinds: several providers in one registry", () => {
  // Claude over MockTransport and the stub kind (standing in for a second provider) side by side.
  const agentsOf = (stub: SessionRegistry.Kind<StubConfig, never, never>) =>
    SessionRegistry.kinds({ claude: ClaudeSession.kind, stub })
  type Agents = ReturnType<typeof agentsOf>
  type AgentRegistry = SessionRegistry.Registry<
    SessionRegistry.Kind.Config<Agents>,
    SessionRegistry.Kind.StartError<Agents>,
    SessionRegistry.Kind.Result<Agents>,
    SessionRegistry.Kind.TurnError<Agents>
  >

  const withAgents = <A, E>(
    body: (
      registry: AgentRegistry,
      stub: ReturnType<typeof makeStub>,
      mock: Context.Service.Shape<typeof MockTransport.MockTransport>
    ) => Effect.Effect<A, E, Scope.Scope>
  ) =>
    Effect.gen(function*() {
      const stub = makeStub()
      const context = yield* Layer.build(MockTransport.layer(script))
      const scope = yield* Scope.make()
      const registry = yield* SessionRegistry.make({ ...agentsOf(stub.kind), capacity: 4 }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context)
      )
      const exit = yield* Effect.exit(body(registry, stub, Context.get(context, MockTransport.MockTransport)))
      yield* settle(Scope.close(scope, Exit.void))
      return yield* exit
    })

  it.effect("holds sessions of each provider by id, each started by its own kind", () =>
    withAgents((registry, stub, mock) =>
      Effect.gen(function*() {
        const chat = yield* settle(Effect.scoped(registry.getOrCreate("chat", { provider: "claude", options: {} })))
        const tool = yield* settle(
          Effect.scoped(registry.getOrCreate("tool", { provider: "stub", options: { model: "m" } }))
        )
        assert.notStrictEqual(chat.generation, tool.generation)
        assert.strictEqual((yield* settle(chat.run("hello"))).text, "hello")
        assert.deepStrictEqual(yield* tool.control({ subtype: "ping" }), { subtype: "ping" })
        assert.deepStrictEqual(stub.started, ["tool"])
        assert.strictEqual((yield* mock.connections).length, 1)
        const fingerprints = (yield* registry.list).map((s) => [s.id, s.fingerprint])
        assert.deepStrictEqual(fingerprints, [
          ["chat", `claude:${SessionRegistry.fingerprint({})}`],
          ["tool", `stub:${SessionRegistry.fingerprint({ model: "m" })}`]
        ])
      })
    ))

  it.effect("the provider is part of the fingerprint: another provider for a live id is a conflict, or a replacement", () =>
    withAgents((registry, stub, mock) =>
      Effect.gen(function*() {
        const agents = agentsOf(stub.kind)
        // The same options under two providers are two configurations.
        assert.notStrictEqual(
          agents.fingerprint({ provider: "claude", options: { model: "m" } }),
          agents.fingerprint({ provider: "stub", options: { model: "m" } })
        )
        const first = yield* settle(
          Effect.scoped(registry.getOrCreate("a", { provider: "claude", options: { model: "m" } }))
        )
        const conflict = yield* settle(
          Effect.scoped(registry.getOrCreate("a", { provider: "stub", options: { model: "m" } })).pipe(Effect.flip)
        )
        assert.strictEqual(conflict._tag, "SessionConflict")
        if (conflict._tag === "SessionConflict") {
          assert.match(conflict.liveFingerprint, /^claude:/)
          assert.match(conflict.requestedFingerprint, /^stub:/)
        }
        const replaced = yield* settle(
          Effect.scoped(
            registry.getOrCreate("a", { provider: "stub", options: { model: "m" } }, { onConflict: "replace" })
          )
        )
        assert.isAbove(replaced.generation, first.generation)
        assert.deepStrictEqual(stub.started, ["a"])
        yield* assertEnded(yield* mock.connection(0))
      })
    ))

  it.effect("a provider it does not know (a configuration read from outside) fails to start with InvalidConfig", () =>
    withAgents((registry) =>
      Effect.gen(function*() {
        const outside: unknown = { provider: "toString", options: {} }
        const error = yield* settle(
          Effect.scoped(registry.getOrCreate("x", outside as Parameters<typeof registry.getOrCreate>[1])).pipe(
            Effect.flip
          )
        )
        assert.strictEqual(error._tag, "InvalidConfig")
        if (error._tag === "InvalidConfig") assert.include(error.problems[0], `unknown provider "toString"`)
        // Nothing was started, and sending it again as it is cannot help.
        assert.isFalse(error.safeToRequeue)
        assert.isFalse(error.deliveryUncertain)
        assert.strictEqual(yield* registry.size, 0)
      })
    ))

  it("types each provider's options", () => {
    const agents = agentsOf(makeStub().kind)
    agents.fingerprint({ provider: "claude", options: { model: "opus", maxTurns: 3 } })
    agents.fingerprint({ provider: "stub", options: { model: "m" } })
    // @ts-expect-error the stub's options need a model
    agents.fingerprint({ provider: "stub", options: {} })
    // @ts-expect-error Claude's model is a string
    agents.fingerprint({ provider: "claude", options: { model: 1 } })
    // @ts-expect-error no such provider
    agents.fingerprint({ provider: "codex", options: {} })
  })
})
