/**
 * The session registry's pure core (`internal/registry/state.ts`): its rules as input → output tables, and the
 * property the eviction and the idle sweep rest on (the map's order is the order of last use).
 */
import { assert, describe, it } from "@effect/vitest"
import type { SessionRegistry } from "@tether/core"
import type { Status } from "@tether/core/SessionEvent"
import { Result } from "effect"
import * as fc from "fast-check"
import * as State from "../src/internal/registry/state.ts"

const slot = (id: string, fields: Partial<State.Slot> = {}): State.Slot => ({
  id,
  generation: 1,
  fingerprint: "fp",
  createdAt: 0,
  phase: "live",
  closeReason: undefined,
  pins: 0,
  turns: 0,
  lastUsed: 0,
  ...fields
})

/** A state holding `slots` in this order (least recently used first), with generations 1, 2, … */
const stateOf = (...slots: ReadonlyArray<State.Slot>): State.State<State.Slot> => {
  const state = State.make<State.Slot>()
  for (const s of slots) State.insert(state, { ...s, generation: State.claimGeneration(state) })
  return state
}

const ids = (entries: Iterable<State.Slot>) => Array.from(entries, (entry) => entry.id)

describe("SessionRegistry's pure core", () => {
  describe("settings", () => {
    it("fills in the defaults", () => {
      const resolved = State.resolve({})
      assert.isTrue(Result.isSuccess(resolved))
      if (Result.isSuccess(resolved)) {
        assert.deepStrictEqual(resolved.success, {
          capacity: 12,
          idleTimeToLive: 15 * 60_000,
          onConflict: "fail",
          admissionTimeout: 0,
          shutdownConcurrency: 16,
          dormancy: false,
          warmRefillDelay: 500
        })
      }
      const never = State.resolve({ idleTimeToLive: "Infinity" })
      assert.isTrue(Result.isSuccess(never) && never.success.idleTimeToLive === Number.POSITIVE_INFINITY)
    })

    const invalid: ReadonlyArray<[SessionRegistry.Settings, number]> = [
      [{ capacity: 0 }, 1],
      [{ capacity: 1.5 }, 1],
      [{ shutdownConcurrency: 0 }, 1],
      [{ idleTimeToLive: "-1 seconds" }, 1],
      [{ idleTimeToLive: 0 }, 1],
      [{ admissionTimeout: "Infinity" }, 1],
      [{ warmRefillDelay: "Infinity" }, 1],
      [{ warmRefillDelay: -1 }, 1],
      [{ onConflict: "ignore" as SessionRegistry.ConflictPolicy }, 1],
      [{ capacity: 0, idleTimeToLive: "-1 seconds", shutdownConcurrency: -1 }, 3]
    ]
    it.each(invalid)("refuses %j with %i problem(s), all at once", (settings, count) => {
      const resolved = State.resolve(settings)
      assert.isTrue(Result.isFailure(resolved))
      if (Result.isFailure(resolved)) assert.strictEqual(resolved.failure.length, count)
    })
  })

  describe("admission", () => {
    const table: ReadonlyArray<[string, State.State<State.Slot>, string, State.Admission<State.Slot>["_tag"]]> = [
      ["a vacant id with room", stateOf(slot("b")), "fp", "Vacant"],
      ["a vacant id in a full registry", stateOf(slot("b"), slot("c")), "fp", "Full"],
      ["the id live with the same fingerprint", stateOf(slot("a")), "fp", "Live"],
      ["the id starting with the same fingerprint", stateOf(slot("a", { phase: "starting" })), "fp", "Starting"],
      ["the id live with another fingerprint", stateOf(slot("a")), "other", "Conflict"],
      ["the id starting with another fingerprint", stateOf(slot("a", { phase: "starting" })), "other", "Conflict"],
      ["the id draining (any fingerprint)", stateOf(slot("a", { phase: "draining" })), "other", "Leaving"],
      ["the id closing", stateOf(slot("a", { phase: "closing" })), "fp", "Leaving"],
      // The id's own entry is found before the capacity counts.
      ["the id live in a full registry", stateOf(slot("a"), slot("b")), "fp", "Live"]
    ]
    it.each(table)("%s: %s", (_name, state, fingerprint, expected) => {
      assert.strictEqual(State.admit(state, "a", fingerprint, 2)._tag, expected)
    })

    it("a closed registry admits nothing", () => {
      const state = stateOf(slot("a"))
      assert.deepStrictEqual(ids(State.close(state)), ["a"])
      assert.strictEqual(State.admit(state, "a", "fp", 2)._tag, "Closed")
      assert.strictEqual(State.admit(state, "b", "fp", 2)._tag, "Closed")
    })

    it("a started entry is live and the most recently used; one that failed to start is closing", () => {
      const state = stateOf(slot("a", { phase: "starting" }), slot("b"), slot("c", { phase: "starting" }))
      const [a, , c] = state.entries.values()
      State.started(state, a, 4)
      assert.deepStrictEqual([a.phase, a.lastUsed], ["live", 4])
      assert.deepStrictEqual(ids(state.entries.values()), ["b", "c", "a"])
      State.startFailed(c)
      assert.deepStrictEqual([c.phase, c.closeReason], ["closing", "failed"])
      assert.strictEqual(State.admit(state, "c", "fp", 3)._tag, "Leaving")
    })

    it("generations are never reused, across ids", () => {
      const state = State.make<State.Slot>()
      const seen = Array.from({ length: 5 }, () => State.claimGeneration(state))
      assert.deepStrictEqual(seen, [1, 2, 3, 4, 5])
    })
  })

  describe("lookups", () => {
    const state = stateOf(slot("a"))
    const table: ReadonlyArray<[string, string, number | undefined, State.Lookup<State.Slot>["_tag"], unknown]> = [
      ["the id, any generation", "a", undefined, "Found", undefined],
      ["the id, its generation", "a", 1, "Found", undefined],
      ["the id, an older generation", "a", 0, "GenerationChanged", 1],
      ["a missing id", "b", undefined, "NotFound", undefined],
      ["a missing id with a generation", "b", 1, "GenerationChanged", null]
    ]
    it.each(table)("%s", (_name, id, generation, tag, current) => {
      const found = State.lookup(state, id, generation)
      assert.strictEqual(found._tag, tag)
      if (found._tag === "GenerationChanged") assert.strictEqual(found.current, current)
    })

    const access: ReadonlyArray<[SessionRegistry.Phase, State.Intent, ReturnType<typeof State.access>]> = [
      ["starting", "work", "wait"],
      ["starting", "control", "wait"],
      ["live", "work", "ready"],
      ["live", "control", "ready"],
      ["draining", "work", "unavailable"],
      ["draining", "control", "ready"],
      ["closing", "work", "unavailable"],
      ["closing", "control", "unavailable"]
    ]
    it.each(access)("a %s entry, for %s: %s", (phase, intent, expected) => {
      assert.strictEqual(State.access(slot("a", { phase }), intent), expected)
    })

    it("an unavailable entry says why, safe to requeue", () => {
      const draining = State.unavailable(slot("a", { phase: "draining" }))
      assert.strictEqual(draining.reason, "session a is draining")
      assert.isTrue(draining.safeToRequeue)
      assert.strictEqual(
        State.unavailable(slot("a", { phase: "closing", closeReason: "idle" })).reason,
        "session a is being closed (idle)"
      )
    })
  })

  describe("recency, pins and turns", () => {
    it("using an entry makes it the most recently used", () => {
      const state = stateOf(slot("a"), slot("b"), slot("c"))
      State.touch(state, state.entries.get("a")!, 5)
      assert.deepStrictEqual(ids(state.entries.values()), ["b", "c", "a"])
      assert.strictEqual(state.entries.get("a")!.lastUsed, 5)
    })

    it("an entry replaced under its id neither moves nor removes its successor", () => {
      const state = stateOf(slot("a"), slot("b"))
      const old = state.entries.get("a")!
      State.insert(state, { ...slot("a"), generation: State.claimGeneration(state) })
      State.touch(state, old, 9)
      State.remove(state, old)
      assert.deepStrictEqual(ids(state.entries.values()), ["a", "b"])
      assert.notStrictEqual(state.entries.get("a"), old)
    })

    it("pins only a live entry; a pin and a turn keep it from eviction until released", () => {
      const state = stateOf(slot("a"), slot("s", { phase: "starting" }), slot("d", { phase: "draining" }))
      const [a, s, d] = state.entries.values()
      assert.isFalse(State.pin(state, s, 1))
      assert.isFalse(State.pin(state, d, 1))
      assert.isTrue(State.pin(state, a, 1))
      assert.isFalse(State.isEvictable(a))
      State.unpin(state, a, 2)
      assert.isTrue(State.isEvictable(a))
      State.turnSent(state, a, 3)
      assert.isFalse(State.isEvictable(a))
      State.turnRefused(a)
      assert.isTrue(State.isEvictable(a))
      State.turnSent(state, a, 4)
      State.turnEnded(state, a, 5)
      assert.deepStrictEqual([a.pins, a.turns, a.lastUsed], [0, 0, 5])
    })
  })

  describe("eviction", () => {
    it("candidates are the evictable entries, least recently used first", () => {
      const state = stateOf(
        slot("pinned", { pins: 1 }),
        slot("busy", { turns: 1 }),
        slot("old"),
        slot("starting", { phase: "starting" }),
        slot("draining", { phase: "draining" }),
        slot("closing", { phase: "closing" }),
        slot("new")
      )
      assert.deepStrictEqual(ids(State.evictionCandidates(state)), ["old", "new"])
      State.touch(state, state.entries.get("old")!, 1)
      assert.deepStrictEqual(ids(State.evictionCandidates(state)), ["new", "old"])
    })

    const statuses: ReadonlyArray<[Status, boolean, ReturnType<typeof State.expiry>]> = [
      ["idle", true, "idle"],
      ["running", false, undefined],
      ["awaiting-permission", false, undefined],
      ["cancelling", false, undefined],
      ["failed", true, "failed"],
      ["closed", true, "failed"]
    ]
    it.each(statuses)("a session %s: evictable %s, expires as %s", (status, evictable, expiry) => {
      assert.strictEqual(State.canEvict(status), evictable)
      assert.strictEqual(State.expiry(status), expiry)
    })

    it("the sweep takes the expired entries and sleeps until the next one expires", () => {
      const state = stateOf(
        slot("a", { lastUsed: 0 }),
        slot("pinned", { lastUsed: 10, pins: 1 }),
        slot("b", { lastUsed: 20 }),
        slot("c", { lastUsed: 70 }),
        slot("d", { lastUsed: 80 })
      )
      const at100 = State.expired(state, 100, 50)
      assert.deepStrictEqual(ids(at100.entries), ["a", "b"])
      assert.strictEqual(at100.wakeIn, 20)
      // Exactly at its expiry an entry has expired.
      assert.deepStrictEqual(ids(State.expired(state, 120, 50).entries), ["a", "b", "c"])
      const nothing = State.expired(stateOf(slot("p", { pins: 1 })), 1_000, 50)
      assert.deepStrictEqual([nothing.entries.length, nothing.wakeIn], [0, 50])
    })
  })

  describe("closing", () => {
    const table: ReadonlyArray<[string, State.Slot, boolean, ReturnType<typeof State.beginClose>]> = [
      ["an idle entry", slot("a"), false, "closing"],
      ["an idle entry, only if evictable", slot("a"), true, "closing"],
      ["a pinned entry", slot("a", { pins: 1 }), false, "closing"],
      ["a pinned entry, only if evictable", slot("a", { pins: 1 }), true, "kept"],
      ["a busy entry, only if evictable", slot("a", { turns: 1 }), true, "kept"],
      ["a starting entry", slot("a", { phase: "starting" }), false, "closing"],
      ["a closing entry", slot("a", { phase: "closing", closeReason: "idle" }), false, "already-closing"]
    ]
    it.each(table)("%s: %s", (_name, entry, onlyIfEvictable, expected) => {
      const before = entry.closeReason
      assert.strictEqual(State.beginClose(entry, "capacity", onlyIfEvictable), expected)
      if (expected === "closing") assert.deepStrictEqual([entry.phase, entry.closeReason], ["closing", "capacity"])
      else assert.strictEqual(entry.closeReason, before)
    })

    it("a draining entry is drained once its pins and turns are gone", () => {
      const entry = slot("a", { pins: 1, turns: 1 })
      State.beginDrain(entry)
      assert.isFalse(State.isDrained(entry))
      entry.pins = 0
      assert.isFalse(State.isDrained(entry))
      entry.turns = 0
      assert.isTrue(State.isDrained(entry))
      // Closed by someone else meanwhile (a force-evict): nothing to wait for.
      assert.isTrue(State.isDrained(slot("b", { phase: "closing", pins: 1 })))
    })

    const reasons: ReadonlyArray<[SessionRegistry.EvictionReason, string]> = [
      ["idle", "evicted"],
      ["capacity", "evicted"],
      ["evicted", "evicted"],
      ["forced", "evicted"],
      ["replaced", "evicted"],
      ["failed", "evicted"],
      ["shutdown", "closed"]
    ]
    it.each(reasons)("a session closed for %s ends its running turn as %s", (reason, turnReason) => {
      assert.strictEqual(State.sessionCloseReason(reason), turnReason)
    })

    const open: ReadonlyArray<[SessionRegistry.Phase, boolean]> = [
      ["starting", false],
      ["live", true],
      ["draining", true],
      ["closing", false]
    ]
    it.each(open)("a %s entry whose session exits is closed as failed: %s", (phase, expected) => {
      assert.strictEqual(State.isOpen(slot("a", { phase })), expected)
    })
  })

  describe("snapshots", () => {
    it("a starting entry", () => {
      const snapshot = State.snapshot(slot("a", { phase: "starting", createdAt: 3, lastUsed: 3 }), undefined)
      assert.deepStrictEqual(snapshot, {
        id: "a",
        generation: 1,
        fingerprint: "fp",
        phase: "starting",
        status: "starting",
        pins: 0,
        turnsInFlight: 0,
        pendingPermissions: 0,
        createdAt: 3,
        lastUsedAt: 3,
        pid: undefined,
        sessionId: undefined,
        exit: undefined
      })
    })

    it("a live entry whose process has exited", () => {
      const status = { _tag: "Exited", code: 3 } as const
      const snapshot = State.snapshot(slot("a", { pins: 2, turns: 1, lastUsed: 7 }), {
        status: "failed",
        sessionId: "conversation",
        process: { _tag: "Failed", status, stderrTail: "" },
        pendingPermissions: 1,
        pid: 42
      })
      assert.deepStrictEqual(
        [snapshot.status, snapshot.pins, snapshot.turnsInFlight, snapshot.pendingPermissions, snapshot.lastUsedAt],
        ["failed", 2, 1, 1, 7]
      )
      assert.deepStrictEqual([snapshot.pid, snapshot.sessionId, snapshot.exit], [42, "conversation", status])
      assert.isUndefined(State.snapshot(slot("a"), { ...snapshotView, process: { _tag: "Running" } }).exit)
    })
  })

  describe("properties", () => {
    type Op =
      | { readonly _tag: "insert"; readonly id: number }
      | { readonly _tag: "touch" | "pin" | "unpin" | "send" | "end" | "remove"; readonly id: number }
      | { readonly _tag: "tick"; readonly by: number }
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ _tag: fc.constant("insert" as const), id: fc.nat(7) }),
      fc.record({
        _tag: fc.constantFrom("touch" as const, "pin" as const, "unpin" as const, "send" as const, "end" as const),
        id: fc.nat(7)
      }),
      fc.record({ _tag: fc.constant("remove" as const), id: fc.nat(7) }),
      fc.record({ _tag: fc.constant("tick" as const), by: fc.nat(30) })
    )

    it("the map's order is the order of last use, so the sweep and the eviction miss no entry", () => {
      fc.assert(
        fc.property(fc.array(opArb, { maxLength: 60 }), fc.nat(60), (ops, ttl) => {
          const state = State.make<State.Slot>()
          let now = 0
          for (const op of ops) {
            if (op._tag === "tick") {
              now += op.by
              continue
            }
            const id = `s${op.id}`
            const entry = state.entries.get(id)
            if (op._tag === "insert") {
              if (entry === undefined) {
                State.insert(
                  state,
                  slot(id, { generation: State.claimGeneration(state), createdAt: now, lastUsed: now })
                )
              }
              continue
            }
            if (entry === undefined) continue
            switch (op._tag) {
              case "touch":
                State.touch(state, entry, now)
                break
              case "pin":
                State.pin(state, entry, now)
                break
              case "unpin":
                if (entry.pins > 0) State.unpin(state, entry, now)
                break
              case "send":
                State.turnSent(state, entry, now)
                break
              case "end":
                if (entry.turns > 0) State.turnEnded(state, entry, now)
                break
              case "remove":
                State.remove(state, entry)
                break
            }
          }
          const entries = [...state.entries.values()]
          for (let i = 1; i < entries.length; i++) assert.isAtMost(entries[i - 1].lastUsed, entries[i].lastUsed)
          const evictable = entries.filter(State.isEvictable)
          assert.deepStrictEqual(ids(State.evictionCandidates(state)), ids(evictable))
          const swept = State.expired(state, now, ttl + 1)
          assert.deepStrictEqual(ids(swept.entries), ids(evictable.filter((e) => e.lastUsed + ttl + 1 <= now)))
          const next = evictable.find((e) => e.lastUsed + ttl + 1 > now)
          assert.strictEqual(swept.wakeIn, next === undefined ? ttl + 1 : next.lastUsed + ttl + 1 - now)
        }),
        { numRuns: 300, seed: 20261201 }
      )
    })
  })
})

const snapshotView: State.SessionView = {
  status: "idle",
  sessionId: undefined,
  process: { _tag: "Running" },
  pendingPermissions: 0,
  pid: undefined
}
