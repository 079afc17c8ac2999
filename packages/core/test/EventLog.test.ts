import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Pull, Scope, Stream } from "effect"
import * as fc from "fast-check"
import * as EventLog from "../src/EventLog.ts"
import { assertContiguous, describeDelivery } from "./support/Deliveries.ts"

type Delivery<A> = EventLog.Delivery<A>

const seqs = <A>(deliveries: ReadonlyArray<Delivery<A>>) => deliveries.flatMap((d) => d._tag === "Event" ? [d.seq] : [])

const lags = <A>(deliveries: ReadonlyArray<Delivery<A>>) => deliveries.filter(EventLog.isLag)

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

const publishRange = (log: EventLog.EventLog<number>, from: number, to: number) =>
  Effect.gen(function*() {
    for (let i = from; i <= to; i++) yield* log.publish(i)
  })

const yieldTimes = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* Effect.yieldNow
  })

describe("EventLog", () => {
  it.effect("assigns strictly increasing seqs from 1", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<string>({ ringSize: 8, subscriberBuffer: 4 })
      assert.strictEqual(yield* log.latestSeq, 0)
      const a = yield* log.publish("a")
      const b = yield* log.publish("b")
      const rest = yield* log.publishAll(["c", "d", "e"])
      assert.deepStrictEqual([a, b, ...rest].map((e) => [e.seq, e.event]), [
        [1, "a"],
        [2, "b"],
        [3, "c"],
        [4, "d"],
        [5, "e"]
      ])
      assert.strictEqual(yield* log.latestSeq, 5)
      assert.deepStrictEqual((yield* log.snapshot).map((e) => e.seq), [1, 2, 3, 4, 5])
    }))

  it.effect("subscribe(latest) delivers only events published after it", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      yield* publishRange(log, 1, 3)
      const stream = yield* log.subscribe("latest")
      yield* publishRange(log, 4, 5)
      yield* log.end
      const got = yield* Stream.runCollect(stream)
      assert.deepStrictEqual(got.map(describeDelivery), ["4", "5"])
      assert.deepStrictEqual(got.map((d) => d._tag === "Event" ? d.event : -1), [4, 5])
    }))

  it.effect("subscribe(start) replays the whole ring, then live events", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 2 })
      yield* publishRange(log, 1, 6)
      // 6 replayed entries exceed the subscriber buffer of 2: replay is bounded by the ring, not the buffer
      const stream = yield* log.subscribe("start")
      yield* publishRange(log, 7, 8)
      yield* log.end
      const got = yield* Stream.runCollect(stream)
      assert.deepStrictEqual(got.map(describeDelivery), ["1", "2", "3", "4", "5", "6", "7", "8"])
    }))

  it.effect("subscribe(start) after the ring dropped early entries leads with a Lag", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 4 })
      yield* publishRange(log, 1, 10)
      const stream = yield* log.subscribe("start")
      yield* log.end
      const got = yield* Stream.runCollect(stream)
      assert.deepStrictEqual(got.map(describeDelivery), ["lag(6->7)", "7", "8", "9", "10"])
    }))

  it.effect("subscribe({ after }) replays entries with a greater seq", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      yield* publishRange(log, 1, 5)
      const fromTwo = yield* log.subscribe({ after: 2 })
      const fromNow = yield* log.subscribe({ after: 5 })
      const fromZero = yield* log.subscribe({ after: 0 })
      yield* log.publish(6)
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(fromTwo)), [3, 4, 5, 6])
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(fromNow)), [6])
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(fromZero)), [1, 2, 3, 4, 5, 6])
    }))

  it.effect("subscribe({ after }) on an empty log waits for the first event", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 4 })
      const stream = yield* log.subscribe({ after: 0 })
      yield* log.publish(1)
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(stream)), [1])
    }))

  it.effect("fails with ReplayUnavailable when seq n + 1 has left the ring", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 4 })
      yield* publishRange(log, 1, 10)
      const error = yield* Effect.flip(log.subscribe({ after: 5 }))
      assert.strictEqual(error._tag, "ReplayUnavailable")
      assert.strictEqual(error.requestedAfter, 5)
      assert.strictEqual(error.oldestAvailable, 7)
      assert.strictEqual(error.latestSeq, 10)
      assert.isFalse(error.safeToFallback)
      assert.isFalse(error.safeToRequeue)
      assert.isFalse(error.deliveryUncertain)
      // the oldest retained entry is still replayable
      const ok = yield* log.subscribe({ after: error.oldestAvailable - 1 })
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(ok)), [7, 8, 9, 10])
    }))

  it.effect("fails with ReplayUnavailable for a seq the log has not reached or that is not a seq", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 4 })
      const onEmpty = yield* Effect.flip(log.subscribe({ after: 1 }))
      assert.deepStrictEqual([onEmpty.requestedAfter, onEmpty.oldestAvailable, onEmpty.latestSeq], [1, 1, 0])
      yield* publishRange(log, 1, 3)
      for (const after of [4, 100, -1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(log.subscribe({ after }))
        assert.strictEqual(error._tag, "ReplayUnavailable")
        assert.strictEqual(error.latestSeq, 3)
      }
      const diagnostics = yield* log.diagnostics
      assert.strictEqual(diagnostics.subscribers, 0, "a failed subscribe registers nothing")
    }))

  it.effect("subscribing while a publisher runs never loses or repeats an event", () =>
    Effect.gen(function*() {
      for (const subscriberBuffer of [4096, 8]) {
        const total = 3000
        const log = yield* EventLog.make<number>({ ringSize: 4096, subscriberBuffer })
        const publisher = yield* Effect.forkChild(Effect.gen(function*() {
          for (let i = 1; i <= total; i++) {
            yield* log.publish(i)
            if (i % 7 === 0) yield* Effect.yieldNow
          }
        }))
        const subscriptions: Array<{
          readonly kind: "latest" | "start" | "after"
          readonly before: number
          readonly fiber: Fiber.Fiber<Array<Delivery<number>>>
        }> = []
        for (let k = 0; k < 60; k++) {
          yield* yieldTimes((k * 5) % 11)
          const kind = (["latest", "start", "after"] as const)[k % 3]
          const before = yield* log.latestSeq
          const stream = yield* log.subscribe(kind === "after" ? { after: before } : kind)
          subscriptions.push({ kind, before, fiber: yield* Effect.forkChild(Stream.runCollect(stream)) })
        }
        yield* Fiber.join(publisher)
        yield* log.end
        assert.isTrue(subscriptions.some((s) => s.before > 0 && s.before < total), "subscribed mid-stream")
        for (const { before, fiber, kind } of subscriptions) {
          const got = yield* Fiber.join(fiber)
          const first = kind === "start" ? 1 : before + 1
          if (kind === "latest" && got.length > 0 && got[0]._tag === "Event") {
            // `latest` starts wherever the log was at the subscribe step, which is not before `before`
            assert.isAtLeast(got[0].seq, first)
            assert.strictEqual(assertContiguous(got, got[0].seq), total + 1)
          } else {
            assert.strictEqual(assertContiguous(got, first), total + 1)
          }
          if (subscriberBuffer >= total) assert.strictEqual(lags(got).length, 0)
        }
      }
    }))

  it.effect("a slow subscriber gets exactly one Lag with the right count and resume seq, then continues", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 16, subscriberBuffer: 4 })
      const pull = yield* Stream.toPull(yield* log.subscribe("latest"))
      yield* publishRange(log, 1, 10)
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["lag(6->7)", "7", "8", "9", "10"])
      yield* publishRange(log, 11, 14)
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["11", "12", "13", "14"])
      yield* publishRange(log, 15, 15)
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["15"])
    }))

  it.effect("a subscriber exactly subscriberBuffer behind does not lag", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 16, subscriberBuffer: 4 })
      const pull = yield* Stream.toPull(yield* log.subscribe("latest"))
      yield* publishRange(log, 1, 4)
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["1", "2", "3", "4"])
      yield* publishRange(log, 5, 9)
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["lag(1->6)", "6", "7", "8", "9"])
    }))

  it.effect("a fast subscriber is unaffected by a stalled one", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 64, subscriberBuffer: 8 })
      const slow = yield* Stream.toPull(yield* log.subscribe("latest"))
      const fast = yield* Effect.forkChild(Stream.runCollect(yield* log.subscribe("latest")))
      for (let i = 1; i <= 1000; i++) {
        yield* log.publish(i)
        yield* Effect.yieldNow
      }
      yield* log.end
      const got = yield* Fiber.join(fast)
      assert.strictEqual(lags(got).length, 0)
      assert.deepStrictEqual(seqs(got), range(1, 1000))
      assert.deepStrictEqual((yield* slow).map(describeDelivery), [
        "lag(992->993)",
        ...range(993, 1000).map(String)
      ])
      const done = yield* Effect.exit(slow)
      assert.isTrue(Exit.isFailure(done) && Pull.isDoneCause(done.cause))
    }))

  it.effect("end completes waiting subscribers after what was already published", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      const waiting = yield* Effect.forkChild(Stream.runCollect(yield* log.subscribe("latest")))
      yield* yieldTimes(3)
      assert.strictEqual((yield* log.diagnostics).waiting, 1)
      yield* publishRange(log, 1, 3)
      yield* log.end
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Fiber.join(waiting)), [1, 2, 3])
      // subscribing after the end replays, then completes
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(yield* log.subscribe("start"))), [1, 2, 3])
      assert.deepStrictEqual(yield* Stream.runCollect(yield* log.subscribe("latest")), [])
      assert.isTrue((yield* log.diagnostics).ended)
    }))

  it.effect("publishing after end is a defect", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      yield* log.end
      const exit = yield* Effect.exit(log.publish(1))
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause))
      const batch = yield* Effect.exit(log.publishAll([1]))
      assert.isTrue(Exit.isFailure(batch) && Cause.hasDies(batch.cause))
      assert.strictEqual(yield* log.latestSeq, 0)
    }))

  it.effect("publishUnsafe and publishAllUnsafe: same seqs and wake-ups as publish, and a no-op after end", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      const waiting = yield* Effect.forkChild(
        Stream.runCollect(Stream.take(yield* log.subscribe("latest"), 4))
      )
      yield* yieldTimes(3)
      assert.strictEqual((yield* log.diagnostics).waiting, 1)
      // Published from plain code: the parked subscriber is woken in a scheduled task, not on this stack.
      const entry = log.publishUnsafe(1)
      assert.deepStrictEqual(entry && [entry.seq, entry.event], [1, 1])
      assert.strictEqual((yield* log.diagnostics).waiting, 1)
      assert.isTrue(log.publishAllUnsafe([2, 3]))
      yield* log.publish(4)
      assert.deepStrictEqual((yield* Fiber.join(waiting)).map(describeDelivery), ["1", "2", "3", "4"])
      yield* log.end
      assert.isUndefined(log.publishUnsafe(5))
      assert.isFalse(log.publishAllUnsafe([5, 6]))
      assert.strictEqual(yield* log.latestSeq, 4)
    }))

  it.effect("the ring holds what was published, up to ringSize, before and after it wraps", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 4 })
      assert.deepStrictEqual(yield* log.snapshot, [])
      assert.strictEqual((yield* log.diagnostics).retained, 0)
      for (let i = 1; i <= 9; i++) {
        log.publishUnsafe(i)
        const held = (yield* log.snapshot).map((e) => e.seq)
        assert.deepStrictEqual(held, range(Math.max(1, i - 3), i))
        assert.strictEqual((yield* log.diagnostics).retained, held.length)
      }
      const replay = yield* log.subscribe({ after: 6 })
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(replay)), [7, 8, 9])
    }))

  it.effect("closing the log's scope ends its subscribers", () =>
    Effect.gen(function*() {
      const logScope = yield* Scope.make()
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 }).pipe(Scope.provide(logScope))
      const consumer = yield* Effect.forkChild(Stream.runCollect(yield* log.subscribe("latest")))
      yield* publishRange(log, 1, 2)
      yield* Scope.close(logScope, Exit.void)
      assert.deepStrictEqual(seqs(yield* Fiber.join(consumer)), [1, 2])
    }))

  it.effect("closing a subscriber's scope stops its delivery and unregisters it", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 8 })
      const scope = yield* Scope.make()
      const stream = yield* log.subscribe("latest").pipe(Scope.provide(scope))
      const other = yield* Effect.forkChild(Stream.runCollect(yield* log.subscribe("latest")))
      const consumer = yield* Effect.forkChild(Stream.runCollect(stream))
      yield* log.publish(1)
      yield* yieldTimes(3)
      assert.strictEqual((yield* log.diagnostics).subscribers, 2)
      yield* Scope.close(scope, Exit.void)
      yield* log.publish(2)
      // the consumer's stream ends without the end of the log
      assert.deepStrictEqual(seqs(yield* Fiber.join(consumer)), [1])
      assert.strictEqual((yield* log.diagnostics).subscribers, 1)
      assert.deepStrictEqual(yield* Stream.runCollect(stream), [])
      yield* log.end
      assert.deepStrictEqual(seqs(yield* Fiber.join(other)), [1, 2])
    }))

  // A view of tagged events, as a turn's stream reads the session's log: the events of `id`, up to its "end".
  const viewOf = (id: string) => {
    const box: { seq: number | undefined } = { seq: undefined }
    const view: EventLog.View<readonly [string, string]> = {
      keep: ([owner]) => owner === id,
      last: ([, what]) => what === "end",
      lastSeq: () => box.seq
    }
    return { box, view }
  }

  it.effect("stream with a view: subscribes when run, delivers the kept events in order, ends after the last", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 16, subscriberBuffer: 16 })
      yield* log.publish(["b", "x"])
      const { view } = viewOf("a")
      const stream = log.stream({ after: 1 }, view)
      // Made, not run: no subscription yet.
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      yield* log.publishAll([["a", "1"], ["b", "y"], ["a", "2"]])
      const reader = yield* Effect.forkChild(Stream.runCollect(stream))
      yield* yieldTimes(3)
      assert.deepStrictEqual(yield* log.diagnostics, {
        ringSize: 16,
        subscriberBuffer: 16,
        retained: 4,
        latestSeq: 4,
        subscribers: 1,
        waiting: 1,
        ended: false
      })
      yield* log.publishAll([["a", "end"], ["a", "after the end"], ["b", "z"]])
      const got = yield* Fiber.join(reader)
      assert.deepStrictEqual(got.map((d) => d._tag === "Event" ? `${d.seq}:${d.event[1]}` : describeDelivery(d)), [
        "2:1",
        "4:2",
        "5:end"
      ])
      // Ended on its last event, the log still open: unregistered.
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      // Run again, it subscribes afresh from the same point.
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(stream)), [2, 4, 5])
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
    }))

  it.effect("stream with a view: a consumer that stops early or is interrupted leaves no subscription", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 16, subscriberBuffer: 16 })
      const { view } = viewOf("a")
      yield* log.publishAll([["a", "1"], ["a", "2"]])
      // Stops after one delivery, the stream not at its end and not parked.
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(Stream.take(log.stream({ after: 0 }, view), 1))), [1])
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      // Interrupted while parked waiting for an event.
      const parked = yield* Effect.forkChild(Stream.runCollect(log.stream("latest", view)))
      yield* yieldTimes(3)
      assert.strictEqual((yield* log.diagnostics).waiting, 1)
      yield* Fiber.interrupt(parked)
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      // A consumer that fails mid-stream.
      const failed = yield* Effect.exit(Stream.runForEach(log.stream({ after: 0 }, view), () => Effect.fail("no")))
      assert.isTrue(Exit.isFailure(failed))
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      // The log goes on for the others.
      yield* log.publish(["a", "end"])
      assert.deepStrictEqual(seqs(yield* Stream.runCollect(log.stream({ after: 0 }, view))), [1, 2, 3])
    }))

  it.effect("stream with a view: fails with ReplayUnavailable when its start left the ring, registering nothing", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 2, subscriberBuffer: 2 })
      yield* log.publishAll([["a", "1"], ["a", "2"], ["a", "3"]])
      const error = yield* Effect.flip(Stream.runCollect(log.stream({ after: 0 }, viewOf("a").view)))
      assert.deepStrictEqual(
        [error._tag, error.requestedAfter, error.oldestAvailable, error.latestSeq],
        ["ReplayUnavailable", 0, 2, 3]
      )
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
    }))

  it.effect("stream with a view: a lag past its last event ends it; without the last seq known it goes on", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 16, subscriberBuffer: 2 })
      const { box, view } = viewOf("a")
      const pull = yield* Stream.toPull(log.stream("latest", view))
      yield* log.publishAll([["a", "1"], ["a", "2"], ["a", "3"], ["a", "4"]])
      // Behind by 4 with a buffer of 2: a lag, the last event not yet known.
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["lag(2->3)", "3", "4"])
      yield* log.publishAll([["a", "end"], ["b", "1"], ["b", "2"], ["b", "3"]])
      box.seq = 5
      // The lag skipped seq 5, the view's last: the stream ends with the lag.
      assert.deepStrictEqual((yield* pull).map(describeDelivery), ["lag(2->7)"])
      assert.isTrue(Pull.isDoneCause(yield* Effect.flip(Effect.sandbox(pull))))
      assert.strictEqual((yield* log.diagnostics).subscribers, 1, "held by the pull's scope until it closes")
    }))

  it.effect("forEach with a view: the deliveries stream gives, one at a time, subscribed only while it runs", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 16, subscriberBuffer: 2 })
      const { box, view } = viewOf("a")
      yield* log.publishAll([["a", "1"], ["b", "x"], ["a", "2"], ["a", "3"]])
      const seen: Array<string> = []
      const reader = yield* Effect.forkChild(log.forEach({ after: 0 }, view, (d) =>
        Effect.sync(() => {
          seen.push(describeDelivery(d))
        })))
      // A stream of the same view run alongside, for comparison.
      const streamed = yield* Effect.forkChild(Stream.runCollect(log.stream({ after: 0 }, view)))
      yield* yieldTimes(3)
      // Caught up and parked: two subscribers, both waiting.
      assert.deepStrictEqual(seen, ["1", "3", "4"])
      assert.deepStrictEqual([(yield* log.diagnostics).subscribers, (yield* log.diagnostics).waiting], [2, 2])
      yield* log.publishAll([["a", "4"], ["a", "5"], ["a", "6"], ["a", "end"], ["a", "after the end"]])
      box.seq = 8
      yield* Fiber.join(reader)
      // Five behind with a buffer of two: a lag, then the view's last event, and the end.
      assert.deepStrictEqual(seen, ["1", "3", "4", "lag(3->8)", "8"])
      assert.deepStrictEqual((yield* Fiber.join(streamed)).map(describeDelivery), seen)
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
    }))

  it.effect("forEach: a failing consumer, an interruption or a replay out of reach leave no subscription", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<readonly [string, string]>({ ringSize: 2, subscriberBuffer: 2 })
      const { view } = viewOf("a")
      yield* log.publishAll([["a", "1"], ["a", "2"]])
      let calls = 0
      const failed = yield* Effect.flip(log.forEach({ after: 0 }, view, () => {
        calls++
        return Effect.fail("no" as const)
      }))
      assert.deepStrictEqual([failed, calls], ["no", 1])
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      const parked = yield* Effect.forkChild(log.forEach("latest", view, () => Effect.void))
      yield* yieldTimes(3)
      assert.strictEqual((yield* log.diagnostics).waiting, 1)
      yield* Fiber.interrupt(parked)
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      yield* log.publish(["a", "3"])
      const error = yield* Effect.flip(log.forEach({ after: 0 }, view, () => Effect.void))
      assert.deepStrictEqual([error._tag, error.oldestAvailable], ["ReplayUnavailable", 2])
      assert.strictEqual((yield* log.diagnostics).subscribers, 0)
      // The log's end ends it, after what was published.
      const seen: Array<number> = []
      const reader = yield* Effect.forkChild(log.forEach({ after: 2 }, view, (d) =>
        Effect.sync(() => {
          if (d._tag === "Event") seen.push(d.seq)
        })))
      yield* log.publish(["a", "4"])
      yield* log.end
      yield* Fiber.join(reader)
      assert.deepStrictEqual(seen, [3, 4])
    }))

  it.effect("memory stays bounded: 100k events with a stalled subscriber", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 64, subscriberBuffer: 16 })
      const stalled = yield* Stream.toPull(yield* log.subscribe("latest"))
      for (let i = 1; i <= 100_000; i++) yield* log.publish(i)
      const snapshot = yield* log.snapshot
      assert.strictEqual(snapshot.length, 64)
      assert.deepStrictEqual(snapshot.map((e) => e.seq), range(99_937, 100_000))
      const diagnostics = yield* log.diagnostics
      assert.deepStrictEqual(
        [diagnostics.retained, diagnostics.ringSize, diagnostics.subscriberBuffer, diagnostics.latestSeq],
        [64, 64, 16, 100_000]
      )
      assert.deepStrictEqual((yield* stalled).map(describeDelivery), [
        "lag(99984->99985)",
        ...range(99_985, 100_000).map(String)
      ])
    }))

  it.effect("clamps subscriberBuffer to ringSize and rejects non-positive sizes", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 4, subscriberBuffer: 100 })
      assert.strictEqual((yield* log.diagnostics).subscriberBuffer, 4)
      const bad = yield* Effect.exit(EventLog.make<number>({ ringSize: 0, subscriberBuffer: 1 }))
      assert.isTrue(Exit.isFailure(bad) && Cause.hasDies(bad.cause))
      const badBuffer = yield* Effect.exit(EventLog.make<number>({ ringSize: 4, subscriberBuffer: 0.5 }))
      assert.isTrue(Exit.isFailure(badBuffer) && Cause.hasDies(badBuffer.cause))
    }))

  it.effect("failOnLag passes events through and fails with Lagged at the first lag", () =>
    Effect.gen(function*() {
      const log = yield* EventLog.make<number>({ ringSize: 8, subscriberBuffer: 2 })
      const unread = yield* log.subscribe("latest")
      yield* publishRange(log, 1, 2)
      const lagging = yield* log.subscribe("latest")
      yield* publishRange(log, 3, 6)
      yield* log.end
      assert.deepStrictEqual(
        (yield* Stream.runCollect(EventLog.failOnLag(yield* log.subscribe({ after: 4 })))).map((e) => e.seq),
        [5, 6]
      )
      const lagged = yield* Effect.flip(Stream.runCollect(EventLog.failOnLag(lagging)))
      assert.deepStrictEqual([lagged._tag, lagged.missed, lagged.resumeSeq], ["Lagged", 2, 5])
      // events before a lag in the same chunk are delivered before the failure
      const seen: Array<number> = []
      const mixed: ReadonlyArray<Delivery<number>> = [
        { _tag: "Event", seq: 1, event: 1 },
        { _tag: "Lag", missed: 3, resumeSeq: 5 },
        { _tag: "Event", seq: 5, event: 5 }
      ]
      const error = yield* Effect.flip(
        Stream.runForEach(EventLog.failOnLag(Stream.fromIterable(mixed)), (e) => Effect.sync(() => seen.push(e.seq)))
      )
      assert.deepStrictEqual(seen, [1])
      assert.strictEqual(error.resumeSeq, 5)
      // a subscriber that did not read while 4 events arrived with a buffer of 2 lagged too
      assert.deepStrictEqual((yield* Stream.runCollect(unread)).map(describeDelivery), ["lag(4->5)", "5", "6"])
    }))

  it.effect("property: random publish/subscribe/read interleavings keep every subscriber contiguous", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 12 }),
          fc.array(commandArbitrary, { minLength: 1, maxLength: 60 }),
          (ringSize, subscriberBuffer, commands) =>
            Effect.runPromise(Effect.scoped(runModel(ringSize, subscriberBuffer, commands)))
        ),
        { numRuns: 1000, seed: 20261101 }
      )
    ))
})

// ---------------------------------------------------------------------------------------------------------------
// Model-based property test
// ---------------------------------------------------------------------------------------------------------------

type Command =
  | { readonly _tag: "publish"; readonly count: number; readonly batch: boolean }
  | { readonly _tag: "subscribe"; readonly from: "latest" | "start" | { readonly back: number } }
  | { readonly _tag: "pull"; readonly sub: number }
  | { readonly _tag: "close"; readonly sub: number }
  | { readonly _tag: "yield" }
  | { readonly _tag: "end" }

const commandArbitrary: fc.Arbitrary<Command> = fc.oneof(
  {
    arbitrary: fc.record({ _tag: fc.constant("publish"), count: fc.integer({ min: 1, max: 20 }), batch: fc.boolean() }),
    weight: 4
  },
  {
    arbitrary: fc.record({
      _tag: fc.constant("subscribe"),
      from: fc.oneof(
        fc.constant("latest" as const),
        fc.constant("start" as const),
        // back < 0 asks for a seq past the latest
        fc.record({ back: fc.integer({ min: -2, max: 16 }) })
      )
    }),
    weight: 2
  },
  { arbitrary: fc.record({ _tag: fc.constant("pull"), sub: fc.nat(7) }), weight: 6 },
  { arbitrary: fc.record({ _tag: fc.constant("close"), sub: fc.nat(7) }), weight: 1 },
  { arbitrary: fc.constant({ _tag: "yield" as const }), weight: 1 },
  { arbitrary: fc.constant({ _tag: "end" as const }), weight: 1 }
)

interface ModelSubscriber {
  /** A pull, and the latest seq right after it (the pull and that read happen without a yield between). */
  readonly pull: Effect.Effect<readonly [ReadonlyArray<Delivery<number>>, number], Cause.Done>
  readonly scope: Scope.Closeable
  readonly replayEnd: number
  readonly deliveries: Array<Delivery<number>>
  /** The next seq the subscriber has not yet been told about (by an event or a lag). */
  cursor: number
  closed: boolean
  done: boolean
  pending: Fiber.Fiber<readonly [ReadonlyArray<Delivery<number>>, number], Cause.Done> | undefined
}

const runModel = (ringSize: number, subscriberBuffer: number, commands: ReadonlyArray<Command>) =>
  Effect.gen(function*() {
    const log = yield* EventLog.make<number>({ ringSize, subscriberBuffer })
    const buffer = Math.min(subscriberBuffer, ringSize)
    const subs: Array<ModelSubscriber> = []
    let latest = 0
    let ended = false
    const oldest = () => Math.max(1, latest - ringSize + 1)

    // Checks one chunk against the model, given the latest seq at the moment the chunk was taken: contiguity,
    // payloads, a lag exactly when the subscriber was outside its window (behind the ring, or more than `buffer`
    // behind on events published after it subscribed), resuming at the oldest seq it may still read.
    const accept = (sub: ModelSubscriber, chunk: ReadonlyArray<Delivery<number>>, latestThen: number) => {
      assert.isAbove(chunk.length, 0)
      assert.isAtMost(
        chunk.filter(EventLog.isEvent).length,
        buffer,
        "a pull hands over at most subscriberBuffer events"
      )
      const oldestThen = Math.max(1, latestThen - ringSize + 1)
      const windowStart = (seq: number) => {
        const inRing = Math.max(seq, oldestThen)
        return inRing > sub.replayEnd ? Math.max(inRing, latestThen - buffer + 1) : inRing
      }
      const expectedResume = windowStart(sub.cursor)
      if (expectedResume > sub.cursor) {
        assert.deepStrictEqual(chunk[0], {
          _tag: "Lag",
          missed: expectedResume - sub.cursor,
          resumeSeq: expectedResume
        })
      } else {
        assert.strictEqual(chunk[0]._tag, "Event", `unneeded lag at ${sub.cursor}: ${describeDelivery(chunk[0])}`)
      }
      for (const d of chunk) {
        if (d._tag === "Event") assert.strictEqual(d.event, d.seq * 10)
        sub.deliveries.push(d)
        sub.cursor = assertContiguous([d], sub.cursor)
      }
      assert.isTrue(chunk.slice(1).every(EventLog.isEvent), "a lag marker only leads a chunk")
      assert.isAtMost(sub.cursor, latestThen + 1)
    }

    // Takes the result of a pull that has completed.
    const settle = (
      sub: ModelSubscriber,
      exit: Exit.Exit<readonly [ReadonlyArray<Delivery<number>>, number], Cause.Done>
    ) => {
      sub.pending = undefined
      if (Exit.isSuccess(exit)) {
        assert.isFalse(sub.closed, "a closed subscription delivered")
        accept(sub, exit.value[0], exit.value[1])
      } else {
        assert.isTrue(Pull.isDoneCause(exit.cause), `unexpected failure ${Cause.pretty(exit.cause)}`)
        assert.isTrue(sub.closed || (ended && sub.cursor === latest + 1), "stream ended early")
        sub.done = true
      }
    }

    // Pulls (or keeps waiting on an earlier pull) and checks whether it should have completed.
    const pullOnce = (sub: ModelSubscriber) =>
      Effect.gen(function*() {
        if (sub.done) return
        if (sub.pending === undefined) sub.pending = yield* Effect.forkChild(sub.pull)
        yield* yieldTimes(4)
        const exit = sub.pending.pollUnsafe()
        const shouldComplete = sub.closed || ended || sub.cursor <= latest
        if (exit === undefined) {
          assert.isFalse(shouldComplete, `pull blocked with cursor ${sub.cursor}, latest ${latest}, ended ${ended}`)
          return
        }
        assert.isTrue(shouldComplete, `pull completed with nothing to deliver`)
        settle(sub, exit)
      })

    for (const command of commands) {
      switch (command._tag) {
        case "publish": {
          if (ended) break
          const values = range(latest + 1, latest + command.count).map((seq) => seq * 10)
          const entries = command.batch
            ? yield* log.publishAll(values)
            : yield* Effect.forEach(values, (v) => log.publish(v))
          assert.deepStrictEqual(entries.map((e) => e.seq), range(latest + 1, latest + command.count))
          latest += command.count
          break
        }
        case "subscribe": {
          const from = command.from
          const after = typeof from === "string" ? undefined : latest - from.back
          const scope = yield* Scope.make()
          const result = yield* Effect.result(
            log.subscribe(after === undefined ? from as "latest" | "start" : { after }).pipe(Scope.provide(scope))
          )
          if (after !== undefined) {
            const unavailable = after > latest || after + 1 < oldest() || after < 0
            assert.strictEqual(result._tag === "Failure", unavailable, `subscribe after ${after} at ${latest}`)
          }
          if (result._tag === "Failure") break
          const pull = yield* Stream.toPull(result.success).pipe(Scope.provide(scope))
          subs.push({
            pull: Effect.flatMap(pull, (chunk) => Effect.map(log.latestSeq, (seq) => [chunk, seq] as const)),
            scope,
            replayEnd: latest,
            deliveries: [],
            cursor: from === "latest" ? latest + 1 : from === "start" ? 1 : after! + 1,
            closed: false,
            done: false,
            pending: undefined
          })
          break
        }
        case "pull": {
          if (subs.length > 0) yield* pullOnce(subs[command.sub % subs.length])
          break
        }
        case "close": {
          if (subs.length === 0) break
          const sub = subs[command.sub % subs.length]
          // a pull that completed before the close delivered legitimately
          const before = sub.pending?.pollUnsafe()
          if (before !== undefined) settle(sub, before)
          sub.closed = true
          yield* Scope.close(sub.scope, Exit.void)
          break
        }
        case "yield":
          yield* yieldTimes(2)
          break
        case "end":
          ended = true
          yield* log.end
          break
      }
      assert.strictEqual(yield* log.latestSeq, latest)
      assert.strictEqual((yield* log.snapshot).length, Math.min(latest, ringSize))
    }

    // Drain: after the end every live subscriber must have covered every seq up to the latest.
    ended = true
    yield* log.end
    for (const sub of subs) {
      let guard = 0
      while (!sub.done) {
        yield* pullOnce(sub)
        assert.isBelow(++guard, 10_000)
      }
      if (!sub.closed) assert.strictEqual(sub.cursor, latest + 1)
    }
  })
