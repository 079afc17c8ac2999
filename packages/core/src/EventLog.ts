/**
 * A sequence-numbered log of events with a bounded replay ring and any number of subscribers that can never
 * silently miss an event.
 *
 * Every published event gets the next `seq` (strictly increasing from 1). The log keeps the last `ringSize`
 * entries. A subscriber reads the ring with its own cursor: publishing never waits for a subscriber and never
 * copies an event per subscriber. A subscriber that falls too far behind is told so with one explicit
 * {@link Lag} marker (how many events it missed and where it resumes), so read as event seqs plus lag ranges,
 * every subscriber's deliveries cover every seq from its starting point, in order, with no duplicates.
 *
 * Two sizes bound the memory:
 *
 * - `ringSize`: how many entries the log keeps for replay (`subscribe("start")`, `subscribe({ after })`,
 *   `snapshot`). It is the only storage the log has (it grows with the events up to that size); subscribers hold no
 *   copies.
 * - `subscriberBuffer`: how far a subscriber may fall behind the events published after it subscribed before it
 *   lags (at most `ringSize`; a larger value is clamped). When it lags it skips ahead to the newest
 *   `subscriberBuffer` events, like a broadcast channel. Entries that were already in the ring when it subscribed
 *   (its replay) are bounded by the ring only, so a replay of the whole ring does not lag by itself. Each pull also
 *   hands over at most `subscriberBuffer` deliveries (plus a lag marker).
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { EventLog } from "@tether/core"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const log = yield* EventLog.make<string>({ ringSize: 1024, subscriberBuffer: 256 })
 *   yield* log.publish("hello")
 *   const deliveries = yield* log.subscribe("start")
 *   yield* log.end
 *   return yield* Stream.runCollect(deliveries) // [{ _tag: "Event", seq: 1, event: "hello" }]
 * }))
 * ```
 *
 * @since 0.1.0
 */
import type * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Channel from "effect/Channel"
import * as Effect from "effect/Effect"
import { constVoid } from "effect/Function"
import type * as Pull from "effect/Pull"
import * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { fixDisposition } from "./internal/disposition.ts"
import { TaggedError } from "./internal/taggedError.ts"
import type * as TetherError from "./TetherError.ts"

/**
 * One published event and its sequence number.
 *
 * @category models
 * @since 0.1.0
 */
export interface Entry<A> {
  readonly seq: number
  readonly event: A
}

/**
 * A delivered event. It is also an {@link Entry}: the log stores one such object per event and hands the same
 * object to every subscriber.
 *
 * @category models
 * @since 0.1.0
 */
export interface Event<A> extends Entry<A> {
  readonly _tag: "Event"
}

/**
 * The subscriber fell behind: `missed` events (seqs `resumeSeq - missed` to `resumeSeq - 1`) will never be
 * delivered to it, and its next delivery is the event with seq `resumeSeq`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Lag {
  readonly _tag: "Lag"
  readonly missed: number
  readonly resumeSeq: number
}

/**
 * What a subscriber receives: events in seq order, and an explicit {@link Lag} wherever it skipped some.
 *
 * @category models
 * @since 0.1.0
 */
export type Delivery<A> = Event<A> | Lag

/**
 * Where a subscription starts.
 *
 * - `"latest"`: only events published after the subscription.
 * - `"start"`: everything the ring still holds, then live events. If the log has already dropped early entries,
 *   the first delivery is a `Lag` from seq 1 to the oldest entry (it never fails).
 * - `{ after: n }`: every event with seq greater than `n`, then live events. Fails with {@link ReplayUnavailable}
 *   when seq `n + 1` has left the ring, or when `n` is not a seq this log has reached (negative, fractional, or
 *   greater than the latest seq). `n` equal to the latest seq means "nothing to replay yet".
 *
 * @category models
 * @since 0.1.0
 */
export type From = "latest" | "start" | { readonly after: number }

// The disposition flags of ReplayUnavailable, set once on its prototype.
export interface ReplayUnavailable extends TetherError.Disposition {}

/**
 * A subscription asked for a replay the log cannot give: the entries after `requestedAfter` have left the ring, or
 * `requestedAfter` is not a seq this log has reached. `oldestAvailable` is the seq of the oldest entry the ring
 * holds (`latestSeq + 1` when it is empty), so `{ after: oldestAvailable - 1 }` is the longest replay still
 * possible.
 *
 * @category errors
 * @since 0.1.0
 */
export class ReplayUnavailable extends TaggedError("ReplayUnavailable")<{
  // Whatever the caller asked for, including NaN: the error reports it as given.
  readonly requestedAfter: number
  readonly oldestAvailable: number
  readonly latestSeq: number
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return this.requestedAfter > this.latestSeq || this.requestedAfter < 0 ||
        !Number.isInteger(this.requestedAfter)
      ? `cannot replay after seq ${this.requestedAfter}: the log is at seq ${this.latestSeq}`
      : `cannot replay after seq ${this.requestedAfter}: the oldest retained seq is ${this.oldestAvailable}`
  }
}

// The disposition flags of Lagged, set once on its prototype.
export interface Lagged extends TetherError.Disposition {}

/**
 * Raised by {@link failOnLag} when the subscriber lagged.
 *
 * @category errors
 * @since 0.1.0
 */
export class Lagged extends TaggedError("Lagged")<{
  readonly missed: number
  readonly resumeSeq: number
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `the subscriber fell behind and missed ${this.missed} events (resuming at seq ${this.resumeSeq})`
  }
}

/**
 * Sizes and counters, for diagnostics and tests.
 *
 * @category models
 * @since 0.1.0
 */
export interface Diagnostics {
  readonly ringSize: number
  readonly subscriberBuffer: number
  /** Entries the ring currently holds (at most `ringSize`). */
  readonly retained: number
  readonly latestSeq: number
  /** Open subscriptions. */
  readonly subscribers: number
  /** Subscribers currently parked waiting for an event. */
  readonly waiting: number
  readonly ended: boolean
}

/**
 * A sequence-numbered event log.
 *
 * @category models
 * @since 0.1.0
 */
export interface EventLog<A> {
  /**
   * Appends an event with the next seq and wakes the waiting subscribers. Never waits for a subscriber.
   * Publishing after {@link EventLog.end} is a defect.
   */
  readonly publish: (event: A) => Effect.Effect<Entry<A>>
  /** Appends several events in order, waking subscribers once. */
  readonly publishAll: (events: Iterable<A>) => Effect.Effect<ReadonlyArray<Entry<A>>>
  /**
   * {@link EventLog.publish} as a plain function, for code that already runs inside an effect (a reader fiber
   * publishing what it decoded) and must not pay for one effect per event. The subscribers are woken in a
   * scheduled task, never on the caller's stack. After {@link EventLog.end} it publishes nothing and returns
   * `undefined`.
   */
  readonly publishUnsafe: (event: A) => Entry<A> | undefined
  /**
   * {@link EventLog.publishAll} as a plain function (see {@link EventLog.publishUnsafe}): appends the events in
   * order and wakes the subscribers once. Returns `false`, having published nothing, after {@link EventLog.end}.
   */
  readonly publishAllUnsafe: (events: Iterable<A>) => boolean
  /**
   * Subscribes from the given point, atomically with respect to publishing. The subscription lasts until the
   * scope closes or the log ends; the stream then ends (after the events published before `end`). The stream
   * holds one cursor: run it from one fiber at a time (running it again continues where the last run stopped).
   */
  readonly subscribe: (from: From) => Effect.Effect<Stream.Stream<Delivery<A>>, ReplayUnavailable, Scope.Scope>
  /**
   * A subscription as a stream that holds its own scope: it subscribes when run and unsubscribes when it ends. With
   * a {@link View}, only the events it keeps are delivered (lag markers always are), and the stream ends after the
   * view's last event. Cheaper than `subscribe` piped through `Stream.filter` and `Stream.takeUntil`: one cursor,
   * filtered where it reads the ring.
   */
  readonly stream: (from: From, view?: View<A>) => Stream.Stream<Delivery<A>, ReplayUnavailable>
  /**
   * {@link EventLog.stream} read to its end by `f`, one delivery at a time, as `Stream.runForEach` would, without
   * running a stream: it subscribes when run, hands each delivery to `f` and waits for its effect before the next,
   * and unsubscribes when it ends (after the view's last event, or the log's end), fails (with `f`'s error) or is
   * interrupted. What a consumer that only handles each delivery pays: no channel, scope or pull per run.
   */
  readonly forEach: <E, R>(
    from: From,
    view: View<A> | undefined,
    f: (delivery: Delivery<A>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, ReplayUnavailable | E, R>
  /** The seq of the last published event, 0 before the first. */
  readonly latestSeq: Effect.Effect<number>
  /** {@link EventLog.latestSeq} as a plain function, for code that already runs inside an effect. */
  readonly latestSeqUnsafe: () => number
  /** The entries the ring currently holds, oldest first. */
  readonly snapshot: Effect.Effect<ReadonlyArray<Entry<A>>>
  /** Ends every subscription once it has delivered what was published so far. Idempotent. */
  readonly end: Effect.Effect<void>
  readonly diagnostics: Effect.Effect<Diagnostics>
}

/**
 * What a {@link EventLog.stream} delivers: the events `keep` accepts, up to and including the first event `last`
 * accepts. `lastSeq` gives the seq of that last event once it is known, so that a lag that skipped it still ends
 * the stream.
 *
 * @category models
 * @since 0.1.0
 */
export interface View<A> {
  readonly keep: (event: A) => boolean
  readonly last: (event: A) => boolean
  readonly lastSeq: () => number | undefined
}

interface Subscriber {
  /** The next seq to deliver. */
  next: number
  /** The latest seq when it subscribed: entries up to here are replay, bounded by the ring only. */
  readonly replayEnd: number
  closed: boolean
  /** Resumes the fiber parked in a pull, if any. */
  resume: ((effect: Effect.Effect<void>) => void) | undefined
  /** Whether it is in the list of subscribers to wake on the next flush. */
  queued: boolean
  /** A view's subscriber ends once its last event was delivered. */
  done: boolean
}

const ended = (): Effect.Effect<never, Cause.Done> => Cause.done()

/** What a reader's step returns when its subscription has ended. */
const END: unique symbol = Symbol("EventLog/END")

const publishedAfterEnd = Effect.die(new Error("EventLog.publish: the log has ended"))

/**
 * Creates an event log that ends (see {@link EventLog.end}) when the scope closes.
 *
 * `ringSize` and `subscriberBuffer` must be positive integers (otherwise this dies); `subscriberBuffer` larger
 * than `ringSize` is clamped to `ringSize`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <A>(options: {
  readonly ringSize: number
  readonly subscriberBuffer: number
}): Effect.Effect<EventLog<A>, never, Scope.Scope> =>
  Effect.suspend(() => {
    const { ringSize } = options
    if (!Number.isSafeInteger(ringSize) || ringSize < 1) {
      return Effect.die(new RangeError(`EventLog.make: ringSize must be a positive integer, got ${ringSize}`))
    }
    if (!Number.isSafeInteger(options.subscriberBuffer) || options.subscriberBuffer < 1) {
      return Effect.die(
        new RangeError(`EventLog.make: subscriberBuffer must be a positive integer, got ${options.subscriberBuffer}`)
      )
    }
    return Effect.flatMap(Effect.service(Scheduler.Scheduler), (scheduler) => {
      const log = makeUnsafe<A>(ringSize, Math.min(options.subscriberBuffer, ringSize), scheduler.makeDispatcher())
      return Effect.as(Effect.addFinalizer(() => log.end), log)
    })
  })

const makeUnsafe = <A>(
  ringSize: number,
  subscriberBuffer: number,
  dispatcher: Scheduler.SchedulerDispatcher
): EventLog<A> => {
  // Grows to `ringSize` as events arrive, then wraps: a quiet log costs only what it holds.
  const ring: Array<Event<A>> = []
  let latest = 0
  let isEnded = false
  const subscribers = new Set<Subscriber>()
  let waiting: Array<Subscriber> = []
  let flushScheduled = false

  const oldestSeq = () => latest >= ringSize ? latest - ringSize + 1 : 1

  const append = (event: A): Event<A> => {
    const entry: Event<A> = { _tag: "Event", seq: ++latest, event }
    if (latest <= ringSize) ring.push(entry)
    else ring[(latest - 1) % ringSize] = entry
    return entry
  }

  // Waking happens in a scheduled task rather than inline: resuming a fiber runs it on the caller's stack, and a
  // publisher must not run subscribers' work.
  const flush = () => {
    flushScheduled = false
    const toWake = waiting
    waiting = []
    for (let i = 0; i < toWake.length; i++) {
      const sub = toWake[i]
      sub.queued = false
      const resume = sub.resume
      if (resume !== undefined) {
        sub.resume = undefined
        resume(Effect.void)
      }
    }
  }

  const scheduleFlush = () => {
    if (waiting.length > 0 && !flushScheduled) {
      flushScheduled = true
      dispatcher.scheduleTask(flush, 0)
    }
  }

  const wake = Effect.sync(scheduleFlush)

  const publishUnsafe = (event: A): Entry<A> | undefined => {
    if (isEnded) return undefined
    const entry = append(event)
    scheduleFlush()
    return entry
  }

  const publishAllUnsafe = (events: Iterable<A>): boolean => {
    if (isEnded) return false
    for (const event of events) append(event)
    scheduleFlush()
    return true
  }

  const publish = (event: A): Effect.Effect<Entry<A>> =>
    Effect.suspend(() => {
      const entry = publishUnsafe(event)
      return entry === undefined ? publishedAfterEnd : Effect.succeed(entry)
    })

  const publishAll = (events: Iterable<A>): Effect.Effect<ReadonlyArray<Entry<A>>> =>
    Effect.suspend(() => {
      if (isEnded) return publishedAfterEnd
      const entries: Array<Entry<A>> = []
      for (const event of events) {
        entries.push(append(event))
      }
      scheduleFlush()
      return Effect.succeed(entries)
    })

  const end = Effect.suspend(() => {
    if (isEnded) return Effect.void
    isEnded = true
    return wake
  })

  const ready = (sub: Subscriber) => sub.closed || sub.done || isEnded || sub.next <= latest

  // One step of a reader: a non-empty chunk, END, or undefined when the subscriber must wait.
  const take = (
    sub: Subscriber,
    view: View<A> | undefined
  ): Arr.NonEmptyReadonlyArray<Delivery<A>> | typeof END | undefined => {
    if (sub.closed || sub.done) return END
    if (sub.next > latest) {
      return isEnded ? END : undefined
    }
    const out: Array<Delivery<A>> = []
    let resume = sub.next
    const oldest = oldestSeq()
    if (resume < oldest) resume = oldest
    const liveFloor = latest - subscriberBuffer + 1
    if (resume > sub.replayEnd && resume < liveFloor) resume = liveFloor
    if (resume > sub.next) {
      out.push({ _tag: "Lag", missed: resume - sub.next, resumeSeq: resume })
      if (view !== undefined) {
        const lastSeq = view.lastSeq()
        // A lag that skipped the view's last event still ends the stream.
        if (lastSeq !== undefined && resume > lastSeq) {
          sub.done = true
          sub.next = resume
          return out as unknown as Arr.NonEmptyReadonlyArray<Delivery<A>>
        }
      }
    }
    const last = Math.min(latest, resume + subscriberBuffer - 1)
    if (view === undefined) {
      for (let seq = resume; seq <= last; seq++) {
        out.push(ring[(seq - 1) % ringSize]!)
      }
      sub.next = last + 1
    } else {
      let seq = resume
      for (; seq <= last; seq++) {
        const entry = ring[(seq - 1) % ringSize]!
        if (!view.keep(entry.event)) continue
        out.push(entry)
        if (view.last(entry.event)) {
          sub.done = true
          seq++
          break
        }
      }
      sub.next = seq
      if (out.length === 0) return sub.next > latest ? (isEnded ? END : undefined) : take(sub, view)
    }
    return out as unknown as Arr.NonEmptyReadonlyArray<Delivery<A>>
  }

  /** Parks the reader of `sub` until it has something to take (or must end); its interruption unparks it. */
  const waitFor = (sub: Subscriber): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (ready(sub)) {
        resume(Effect.void)
        return
      }
      if (sub.resume !== undefined) {
        resume(Effect.die(new Error("EventLog: a subscription stream was run from two fibers at once")))
        return
      }
      sub.resume = resume
      if (!sub.queued) {
        sub.queued = true
        waiting.push(sub)
      }
      return Effect.sync(() => {
        if (sub.resume === resume) sub.resume = undefined
      })
    })

  const makePull = (sub: Subscriber, view?: View<A>): Pull.Pull<Arr.NonEmptyReadonlyArray<Delivery<A>>> => {
    const pull: Pull.Pull<Arr.NonEmptyReadonlyArray<Delivery<A>>> = Effect.suspend(() => {
      const chunk = take(sub, view)
      return chunk === undefined ? waitThenPull : chunk === END ? ended() : Effect.succeed(chunk)
    })
    const waitThenPull = Effect.flatMap(waitFor(sub), () => pull)
    return pull
  }

  /** Registers a cursor at `from`, atomically with respect to publishing (one synchronous step). */
  const register = (from: From): Subscriber | ReplayUnavailable => {
    let next: number
    if (from === "latest") {
      next = latest + 1
    } else if (from === "start") {
      next = 1
    } else {
      const after = from.after
      const oldest = oldestSeq()
      if (!Number.isSafeInteger(after) || after < 0 || after > latest || after + 1 < oldest) {
        return new ReplayUnavailable({ requestedAfter: after, oldestAvailable: oldest, latestSeq: latest })
      }
      next = after + 1
    }
    const sub: Subscriber = { next, replayEnd: latest, closed: false, resume: undefined, queued: false, done: false }
    subscribers.add(sub)
    return sub
  }

  const subscribe = (from: From): Effect.Effect<Stream.Stream<Delivery<A>>, ReplayUnavailable, Scope.Scope> =>
    Effect.suspend(() => {
      const sub = register(from)
      if (sub instanceof ReplayUnavailable) return Effect.fail(sub)
      return Effect.as(
        Effect.addFinalizer(() => unsubscribe(sub)),
        Stream.fromPull(Effect.succeed(makePull(sub)))
      )
    }).pipe(Effect.uninterruptible)

  // The transform runs when the stream is run, inside the run's own effect: registering there, synchronously, is
  // atomic with respect to publishing, and costs the run no effect of its own.
  const stream = (from: From, view?: View<A>): Stream.Stream<Delivery<A>, ReplayUnavailable> =>
    Stream.fromChannel(Channel.fromTransform((_, scope) => {
      const sub = register(from)
      if (sub instanceof ReplayUnavailable) return Effect.fail(sub)
      return Effect.as(Scope.addFinalizerExit(scope, () => release(sub)), makePull(sub, view))
    }))

  const forEach = <E, R>(
    from: From,
    view: View<A> | undefined,
    f: (delivery: Delivery<A>) => Effect.Effect<void, E, R>
  ): Effect.Effect<void, ReplayUnavailable | E, R> =>
    Effect.suspend((): Effect.Effect<void, ReplayUnavailable | E, R> => {
      const sub = register(from)
      if (sub instanceof ReplayUnavailable) return Effect.fail(sub)
      let chunk: ReadonlyArray<Delivery<A>> = []
      let i = 0
      // Each chunk's deliveries in turn, as Stream.runForEach runs them.
      const each = Effect.whileLoop({
        while: () => i < chunk.length,
        body: () => f(chunk[i++]),
        step: constVoid
      })
      const next: Effect.Effect<void, E, R> = Effect.suspend(() => {
        const taken = take(sub, view)
        if (taken === undefined) return waitThenNext
        if (taken === END) return Effect.void
        chunk = taken
        i = 0
        return eachThenNext
      })
      const waitThenNext = Effect.flatMap(waitFor(sub), () => next)
      const eachThenNext = Effect.flatMap(each, () => next)
      return Effect.onExit(next, () => release(sub))
    })

  /** Closes a subscriber (its stream ends) and wakes it if it is parked. */
  const close = (sub: Subscriber): void => {
    sub.closed = true
    subscribers.delete(sub)
    if (sub.resume !== undefined) {
      if (!sub.queued) {
        sub.queued = true
        waiting.push(sub)
      }
      scheduleFlush()
    }
  }

  const release = (sub: Subscriber): Effect.Effect<void> => {
    close(sub)
    return Effect.void
  }

  const unsubscribe = (sub: Subscriber) => Effect.sync(() => close(sub))

  return {
    forEach,
    publish,
    publishAll,
    publishUnsafe,
    publishAllUnsafe,
    subscribe,
    stream,
    latestSeq: Effect.sync(() => latest),
    latestSeqUnsafe: () => latest,
    snapshot: Effect.sync(() => {
      const out: Array<Entry<A>> = []
      for (let seq = oldestSeq(); seq <= latest; seq++) {
        out.push(ring[(seq - 1) % ringSize]!)
      }
      return out
    }),
    end,
    diagnostics: Effect.sync(() => {
      let parked = 0
      for (const sub of subscribers) {
        if (sub.resume !== undefined) parked++
      }
      return {
        ringSize,
        subscriberBuffer,
        retained: Math.min(latest, ringSize),
        latestSeq: latest,
        subscribers: subscribers.size,
        waiting: parked,
        ended: isEnded
      }
    })
  }
}

/**
 * True for an event delivery.
 *
 * @category guards
 * @since 0.1.0
 */
export const isEvent = <A>(delivery: Delivery<A>): delivery is Event<A> => delivery._tag === "Event"

/**
 * True for a lag marker.
 *
 * @category guards
 * @since 0.1.0
 */
export const isLag = <A>(delivery: Delivery<A>): delivery is Lag => delivery._tag === "Lag"

/**
 * Turns a delivery stream into a stream of events that fails with {@link Lagged} at the first lag marker (after
 * the events before it). For consumers that cannot tolerate a gap, such as a turn waiting for its result; to
 * skip lags instead, use `Stream.filter(isEvent)`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const failOnLag = <A, E, R>(self: Stream.Stream<Delivery<A>, E, R>): Stream.Stream<Event<A>, E | Lagged, R> =>
  Stream.transformPull(self, (pull) =>
    Effect.sync(() => {
      let pending: Lagged | undefined
      return Effect.suspend(() => {
        if (pending !== undefined) return Effect.fail(pending)
        return Effect.flatMap(pull, (chunk) => {
          const index = chunk.findIndex(isLag)
          if (index === -1) {
            return Effect.succeed(chunk as Arr.NonEmptyReadonlyArray<Event<A>>)
          }
          const lag = chunk[index] as Lag
          const error = new Lagged({ missed: lag.missed, resumeSeq: lag.resumeSeq })
          if (index === 0) return Effect.fail(error)
          pending = error
          return Effect.succeed(chunk.slice(0, index) as unknown as Arr.NonEmptyReadonlyArray<Event<A>>)
        })
      })
    }))
