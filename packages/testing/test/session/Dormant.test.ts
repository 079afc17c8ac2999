/**
 * Dormant conversations in a local registry, over ClaudeSession, MockTransport and the in-memory dormant store, on
 * TestClock: what goes dormant and when, what a message to a dormant id does, and what the host can do with them.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { DormantStore, SessionRegistry, TetherError, type Transport } from "@tether/core"
import { MockClaude, MockTransport } from "@tether/testing"
import { Context, Effect, Exit, Fiber, Layer, Metric, Scope } from "effect"
import { TestClock } from "effect/testing"
import { advanceUntil, settle } from "../../../core/test/support/TestTime.ts"

type Registry = SessionRegistry.Registry<
  ClaudeSession.Options,
  ClaudeSession.StartError,
  ClaudeSession.TurnResult,
  ClaudeSession.TurnError
>

/** The transport and a dormant store, shared by the registries a test makes (a host restarting over the same disk). */
const environment = (options: MockTransport.LayerOptions = {}) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      Layer.merge(MockTransport.layer(MockClaude.make([]), options), DormantStore.layerMemory)
    )
    return { context, mock: Context.get(context, MockTransport.MockTransport) }
  })

/** A registry with dormancy in its own scope, closed (moving the clock) after `body`. */
const withRegistry = <A, E>(
  context: Context.Context<Transport.Transport | DormantStore.DormantStore>,
  settings: SessionRegistry.Settings,
  body: (registry: Registry) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, dormancy: true, ...settings }).pipe(
      Scope.provide(scope),
      Effect.provideContext(context)
    )
    const exit = yield* Effect.exit(body(registry))
    yield* settle(Scope.close(scope, Exit.void))
    return yield* exit
  })

const resumed = (spec: Transport.LaunchSpec) => spec.args.find((arg) => arg.startsWith("--resume="))
const configDir = (spec: Transport.LaunchSpec) => spec.env.set.CLAUDE_CONFIG_DIR

const dormantIds = (registry: Registry) =>
  Effect.map(
    registry.dormant,
    (listings) =>
      listings.map((listing) => listing._tag === "Dormant" ? listing.record.id : `corrupt ${listing.id}`).sort()
  )

/** A conversation that ran one turn ("hello"), then idled out (the registry's `idleTimeToLive`): dormant. */
const dormantAfterOneTurn = (registry: Registry, id: string) =>
  Effect.gen(function*() {
    yield* settle(Effect.scoped(registry.getOrCreate(id, {})))
    const first = yield* settle(registry.run(id, "hello"))
    yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
    return first
  })

const count = (metric: Metric.Counter<number>) => Effect.map(Metric.value(metric), (state) => state.count)

/**
 * The in-memory store, as on disk: a released directory is gone (a record naming one cannot be resumed), and
 * `failSaves` makes writing a record fail.
 */
const diskLikeStore = () =>
  Effect.gen(function*() {
    const memory = Context.get(yield* Layer.build(DormantStore.layerMemory), DormantStore.DormantStore)
    const released = new Set<string>()
    const control = { failSaves: false }
    const store = DormantStore.DormantStore.of({
      ...memory,
      save: (record) =>
        control.failSaves
          ? Effect.fail(new SessionRegistry.DormantStoreFailed({ operation: "write", reason: "disk full" }))
          : memory.save(record),
      release: (directory) => Effect.sync(() => void released.add(directory)),
      load: (id) =>
        Effect.flatMap(memory.load(id), (found) =>
          found._tag === "Some" && released.has(found.value.directory)
            ? Effect.fail(new SessionRegistry.DormantStateCorrupt({ id, reason: "its directory is missing" }))
            : Effect.succeed(found))
    })
    return { released, store, control }
  })

describe("dormant conversations", () => {
  it.effect("an idle conversation goes dormant: its CLI closes, and its next message resumes it in a new one", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          const wentDormant = yield* count(SessionRegistry.metrics.dormant)
          yield* settle(Effect.scoped(registry.getOrCreate("a", {})))
          const first = yield* settle(registry.run("a", "hello"))
          const cli = yield* mock.connection(0)
          assert.strictEqual(configDir(cli.spec), "memory:0")
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          assert.isFalse(yield* cli.isAlive)
          assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
          const [listing] = yield* registry.dormant
          assert.strictEqual(listing._tag === "Dormant" ? listing.record.conversationId : "", first.sessionId)
          assert.strictEqual((yield* count(SessionRegistry.metrics.dormant)) - wentDormant, 1)
          // A message by id wakes it: a new CLI resumes the conversation in the same directory.
          const again = yield* settle(registry.run("a", "again"))
          assert.strictEqual(again.text, "again")
          assert.strictEqual(again.sessionId, first.sessionId)
          const woken = yield* mock.connection(1)
          assert.strictEqual(resumed(woken.spec), `--resume=${first.sessionId}`)
          assert.strictEqual(configDir(woken.spec), "memory:0")
          assert.deepStrictEqual(yield* dormantIds(registry), [])
        }))
    }))

  it.effect("messages sent while a conversation wakes are each delivered once, to the one CLI that resumed it", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          yield* settle(Effect.scoped(registry.getOrCreate("a", { queue: true })))
          yield* settle(registry.run("a", "hello"))
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          const sends = yield* Effect.forEach(
            ["one", "two", "three"],
            (text) => Effect.forkChild(Effect.flatMap(registry.send("a", text), (turn) => turn.result))
          )
          const results = yield* settle(Fiber.joinAll(sends))
          assert.deepStrictEqual(results.map((result) => result.text), ["one", "two", "three"])
          assert.strictEqual((yield* mock.connections).length, 2)
          const prompts = (yield* (yield* mock.connection(1)).written).flatMap((frame) => {
            const message = frame as { readonly type?: string; readonly message?: { readonly content?: unknown } }
            return message.type === "user" ? [JSON.stringify(message.message?.content)] : []
          })
          for (const text of ["one", "two", "three"]) {
            assert.strictEqual(prompts.filter((prompt) => prompt.includes(`"${text}"`)).length, 1, text)
          }
        }))
    }))

  it.effect("capacity counts live CLIs: a conversation evicted to make room goes dormant", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 1 }, (registry) =>
        Effect.gen(function*() {
          for (const id of ["a", "b", "c"]) {
            yield* settle(Effect.scoped(registry.getOrCreate(id, {})))
            yield* settle(registry.run(id, `hello ${id}`))
          }
          assert.strictEqual(yield* registry.size, 1)
          assert.deepStrictEqual(yield* dormantIds(registry), ["a", "b"])
          // Waking "a" makes room: "c" goes dormant in its turn.
          assert.strictEqual((yield* settle(registry.run("a", "back"))).text, "back")
          assert.deepStrictEqual(yield* dormantIds(registry), ["b", "c"])
          const live = (yield* mock.connections).filter((connection) => connection.index >= 0)
          let alive = 0
          for (const connection of live) if (yield* connection.isAlive) alive++
          assert.strictEqual(alive, 1)
        }))
    }))

  it.effect("an evicted conversation ends for good; a dormant one can be deleted; the host can wake one ahead", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          for (const id of ["a", "b", "c"]) {
            yield* settle(Effect.scoped(registry.getOrCreate(id, {})))
            yield* settle(registry.run(id, "hello"))
          }
          yield* settle(registry.evict("a"))
          assert.strictEqual((yield* Effect.flip(registry.send("a", "hi")))._tag, "SessionNotFound")
          const notDormant = yield* Effect.flip(registry.wake("a"))
          assert.strictEqual(notDormant._tag, "DormantNotFound")
          // A live conversation is not dormant either.
          assert.strictEqual((yield* Effect.flip(registry.deleteDormant("b")))._tag, "DormantNotFound")
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          assert.deepStrictEqual(yield* dormantIds(registry), ["b", "c"])
          yield* registry.deleteDormant("b")
          assert.deepStrictEqual(yield* dormantIds(registry), ["c"])
          assert.strictEqual((yield* Effect.flip(registry.send("b", "hi")))._tag, "SessionNotFound")
          // Woken ahead of its message: live and idle when wake returns, resumed once.
          const before = (yield* mock.connections).length
          yield* settle(registry.wake("c"))
          assert.strictEqual((yield* registry.snapshot("c")).status, "idle")
          assert.strictEqual((yield* settle(registry.run("c", "later"))).text, "later")
          assert.strictEqual((yield* mock.connections).length, before + 1)
        }))
    }))

  it.effect("a dormant conversation asked for with another configuration is a conflict, or replaced", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "sonnet" })))
          yield* settle(registry.run("a", "hello"))
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          const conflict = yield* Effect.flip(settle(Effect.scoped(registry.getOrCreate("a", { model: "opus" }))))
          assert.strictEqual(conflict._tag, "SessionConflict")
          assert.isTrue(conflict.safeToRequeue)
          assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
          yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "opus" }, { onConflict: "replace" })))
          const fresh = yield* mock.latest
          assert.isUndefined(resumed(fresh.spec))
          assert.deepStrictEqual(yield* dormantIds(registry), [])
        }))
    }))

  it.effect("a CLI that fails to resume: RestoreFailed, safe to requeue, and the conversation stays dormant", () =>
    Effect.gen(function*() {
      let refuse = true
      const { context } = yield* environment({
        spawnError: (spec) =>
          refuse && resumed(spec) !== undefined
            ? new TetherError.SpawnFailed({ program: "claude", reason: "no more processes" })
            : undefined
      })
      const wakes = yield* count(
        Metric.withAttributes(SessionRegistry.metrics.wakes, { outcome: "failed" }) as Metric.Counter<number>
      )
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          yield* settle(Effect.scoped(registry.getOrCreate("a", {})))
          yield* settle(registry.run("a", "hello"))
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          const error = yield* Effect.flip(settle(registry.run("a", "again")))
          assert.strictEqual(error._tag, "RestoreFailed")
          assert.isTrue(error.safeToRequeue)
          assert.isFalse(error.deliveryUncertain)
          assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
          refuse = false
          assert.strictEqual((yield* settle(registry.run("a", "again"))).text, "again")
        }))
      assert.strictEqual(
        (yield* count(
          Metric.withAttributes(SessionRegistry.metrics.wakes, { outcome: "failed" }) as Metric.Counter<number>
        )) - wakes,
        1
      )
    }))

  it.effect("a conversation woken and sent nothing goes dormant again, idle or at release, and keeps its turns", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      const first = yield* withRegistry(
        context,
        { capacity: 4, idleTimeToLive: "1 minute" },
        (registry) =>
          Effect.gen(function*() {
            const first = yield* dormantAfterOneTurn(registry, "a")
            // Woken ahead of a message that does not come: its CLI, resumed, has run no turn when it idles out.
            yield* settle(registry.wake("a"))
            assert.strictEqual((yield* mock.connections).length, 2)
            yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
            assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
            // Woken again, and live when the registry is released.
            yield* settle(registry.wake("a"))
            return first
          })
      )
      yield* withRegistry(context, { capacity: 4 }, (registry) =>
        Effect.gen(function*() {
          const [listing] = yield* registry.dormant
          assert.strictEqual(listing?._tag === "Dormant" ? listing.record.conversationId : "", first.sessionId)
          yield* settle(registry.wake("a", {}))
          const again = yield* settle(registry.run("a", "again"))
          assert.strictEqual(again.sessionId, first.sessionId)
          assert.strictEqual(resumed((yield* mock.latest).spec), `--resume=${first.sessionId}`)
          assert.strictEqual(configDir((yield* mock.latest).spec), "memory:0")
        }))
    }))

  it.effect("a conversation closed while it wakes keeps its record and its directory together", () =>
    Effect.gen(function*() {
      const { released, store } = yield* diskLikeStore()
      // The CLI that resumes a conversation never answers `initialize`: the wake is still starting when it closes.
      const transport = yield* Layer.build(MockTransport.layer((spec) =>
        MockClaude.make([], {
          faults: resumed(spec) === undefined ? [] : [MockClaude.neverAnswer("initialize")]
        })
      ))
      const context = Context.add(transport, DormantStore.DormantStore, store)
      const first = yield* withRegistry(
        context,
        { capacity: 4, idleTimeToLive: "1 minute" },
        (registry) =>
          Effect.gen(function*() {
            const first = yield* dormantAfterOneTurn(registry, "a")
            yield* Effect.forkChild(registry.wake("a"))
            yield* settle(Effect.void)
            assert.strictEqual((yield* registry.snapshot("a")).status, "starting")
            return first
          })
      )
      assert.deepStrictEqual([...released], [])
      const loaded = yield* store.load("a")
      assert.strictEqual(loaded._tag === "Some" ? loaded.value.conversationId : "", first.sessionId)
    }))

  it.effect("a conversation whose record cannot be written loses it with its directory, never one without the other", () =>
    Effect.gen(function*() {
      const { released, store, control } = yield* diskLikeStore()
      const context = Context.add(
        yield* Layer.build(MockTransport.layer(MockClaude.make([]))),
        DormantStore.DormantStore,
        store
      )
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          yield* settle(Effect.scoped(registry.getOrCreate("a", {})))
          yield* settle(registry.run("a", "hello"))
          // Recorded after its turn; the disk fails before it idles out.
          assert.strictEqual((yield* store.load("a"))._tag, "Some")
          control.failSaves = true
          yield* advanceUntil(Effect.map(registry.size, (size) => size === 0), { step: "1 second" })
          assert.deepStrictEqual(yield* dormantIds(registry), [])
          assert.strictEqual((yield* store.load("a"))._tag, "None")
          assert.strictEqual((yield* Effect.flip(registry.send("a", "hi")))._tag, "SessionNotFound")
        }))
      assert.deepStrictEqual([...released], [])
    }))

  it.effect("across a restart: released conversations go dormant, and a new registry resumes them with their configuration", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4 }, (registry) =>
        Effect.gen(function*() {
          yield* settle(Effect.scoped(registry.getOrCreate("a", { model: "sonnet" })))
          yield* settle(registry.run("a", "hello"))
          // Started but never used: no conversation to keep.
          yield* settle(Effect.scoped(registry.getOrCreate("b", {})))
        }))
      for (const connection of yield* mock.connections) assert.isFalse(yield* connection.isAlive)
      yield* withRegistry(context, { capacity: 4 }, (registry) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
          // The new registry does not know its configuration: a message alone cannot wake it.
          assert.strictEqual((yield* Effect.flip(registry.send("a", "hi")))._tag, "SessionNotFound")
          assert.strictEqual((yield* Effect.flip(registry.wake("a")))._tag, "InvalidConfig")
          yield* settle(registry.wake("a", { model: "sonnet" }))
          assert.strictEqual((yield* settle(registry.run("a", "again"))).text, "again")
          assert.isDefined(resumed((yield* mock.latest).spec))
        }))
    }))

  it.effect("a host that dies without releasing its registry: its restart finds every conversation that ran a turn dormant", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      /** A registry whose host dies: its scope is never closed, so nothing of it runs at the end. */
      const dying = Effect.provideContext(
        SessionRegistry.make({ ...ClaudeSession.kind, dormancy: true, capacity: 4 }),
        Context.add(context, Scope.Scope, yield* Scope.make())
      )
      const first = yield* dying
      yield* settle(Effect.scoped(first.getOrCreate("a", {})))
      const ran = yield* settle(first.run("a", "hello"))
      // Started but never used: nothing to resume.
      yield* settle(Effect.scoped(first.getOrCreate("b", {})))
      // Ended for good: its record goes with it.
      yield* settle(Effect.scoped(first.getOrCreate("c", {})))
      yield* settle(first.run("c", "hello"))
      yield* settle(first.evict("c"))
      // While they run, they are not listed dormant.
      assert.deepStrictEqual(yield* dormantIds(first), [])
      // The restart: a new registry over the same store, the first one never released.
      yield* withRegistry(context, { capacity: 4 }, (registry) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* dormantIds(registry), ["a"])
          yield* settle(registry.wake("a", {}))
          assert.strictEqual(resumed((yield* mock.latest).spec), `--resume=${ran.sessionId}`)
          assert.strictEqual((yield* settle(registry.run("a", "again"))).text, "again")
        }))
      // Woken, then released: dormant again; woken and its host dead: dormant too.
      const second = yield* dying
      assert.deepStrictEqual(yield* dormantIds(second), ["a"])
      yield* settle(second.wake("a", {}))
      assert.deepStrictEqual(yield* dormantIds(second), [])
      yield* withRegistry(
        context,
        { capacity: 4 },
        (registry) => Effect.map(dormantIds(registry), (ids) => assert.deepStrictEqual(ids, ["a"]))
      )
    }))

  it.effect("with a warm pool: a new conversation keeps the warm CLI's directory; a dormant one resumes in its own", () =>
    Effect.gen(function*() {
      const { context, mock } = yield* environment()
      yield* withRegistry(context, { capacity: 4, idleTimeToLive: "1 minute" }, (registry) =>
        Effect.gen(function*() {
          yield* registry.warm({}, 1)
          yield* advanceUntil(Effect.map(registry.pools, (pools) => pools[0]?.ready === 1))
          const warm = yield* mock.connection(0)
          yield* settle(Effect.scoped(registry.getOrCreate("a", {})))
          const first = yield* settle(registry.run("a", "hello"))
          assert.isTrue((yield* warm.writtenLines).some((line) => line.includes("hello")))
          yield* advanceUntil(Effect.map(registry.dormant, (listings) => listings.length === 1), { step: "1 second" })
          const [listing] = yield* registry.dormant
          assert.strictEqual(listing._tag === "Dormant" ? listing.record.directory : "", configDir(warm.spec))
          // The pool has a warm CLI ready again; the dormant conversation does not take it.
          yield* advanceUntil(Effect.map(registry.pools, (pools) => pools[0]?.ready === 1))
          const spare = yield* mock.latest
          assert.strictEqual((yield* settle(registry.run("a", "again"))).text, "again")
          const woken = yield* mock.latest
          assert.notStrictEqual(woken.index, spare.index)
          assert.strictEqual(resumed(woken.spec), `--resume=${first.sessionId}`)
          assert.strictEqual(configDir(woken.spec), configDir(warm.spec))
          assert.isTrue(yield* spare.isAlive)
          assert.isFalse((yield* spare.writtenLines).some((line) => line.includes("again")))
        }))
    }))

  it.effect("dormancy without a DormantStore is InvalidConfig", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(MockTransport.layer(MockClaude.make([])))
      const error = yield* Effect.flip(
        SessionRegistry.make({ ...ClaudeSession.kind, dormancy: true }).pipe(Effect.provideContext(context))
      )
      assert.strictEqual(error._tag, "InvalidConfig")
      yield* TestClock.adjust("1 millis")
    }))
})
