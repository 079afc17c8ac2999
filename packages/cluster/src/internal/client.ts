/**
 * A client's side of the cluster registry: the registry contract (`SessionRegistry.Registry`) over the session
 * entity's messages, so that a caller's code is the same in one process and in a cluster.
 *
 * What only a client can do: a subscription survives the loss of its session's runner. The cluster re-sends a
 * stream request to the session's next owner as it was first sent, so the runner starts every subscription with a
 * `Position` marker; a second marker (or a stream that ends without the session's end) means the subscription now
 * runs elsewhere, and the client subscribes again after the last seq it delivered. Deliveries it already has are
 * dropped; what the new owner cannot replay arrives as a `Lag` (a gap), never silently.
 *
 * @internal
 */
import type { EventLog, Permission, Session, SessionEvent, Turn } from "@tether/core"
import { SessionRegistry, TetherError } from "@tether/core"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Protocol from "./protocol.ts"
import * as Store from "./store.ts"
import * as Wire from "./wire.ts"

/**
 * The cluster's own failures of a call (not the session's). For a call that delivers nothing (a lookup, an answer,
 * an interrupt) they mean the call did not happen. For one that may have delivered a prompt they do not: the
 * cluster re-sends a volatile request by itself when the socket to its runner breaks (`Sharding.sendOutgoing`
 * retries `RunnerUnavailable`, which is what an `RpcClientError` becomes, after the first runner may have had it),
 * so whichever of these reaches the caller (`MailboxFull` or `EntityNotAssignedToRunner` from a later attempt,
 * `AlreadyProcessingMessage` while the first attempt still runs) may follow a delivery.
 */
const transportTags: ReadonlySet<string> = new Set([
  "MailboxFull",
  "AlreadyProcessingMessage",
  "PersistenceError",
  "EntityNotAssignedToRunner",
  "RunnerUnavailable",
  "RpcClientError"
])

const isTransport = (error: unknown): boolean =>
  typeof error === "object" && error !== null && transportTags.has((error as { readonly _tag?: string })._tag ?? "")

/**
 * The failure of a call that the cluster cut off (`why`: the cluster's error, or how the call was cut off), as the
 * host's: `SessionUnavailable` for a call that delivers nothing (nothing was delivered), or, for a call that may
 * have delivered a prompt (`delivery`: a send, or the wait for its turn), the loss of its runner: a
 * `SessionRetired` whose delivery is uncertain (`ClusterRegistry.isRunnerLost`). A host retries that with the same
 * `promptId`: the session's ledger answers it with the turn instead of running the prompt again.
 */
const cutOff = (
  id: string,
  delivery: { readonly promptId: string } | undefined,
  why: string
): TetherError.SessionUnavailable | TetherError.SessionRetired =>
  delivery === undefined
    ? new TetherError.SessionUnavailable({ status: "unknown", reason: `session ${id} could not be reached (${why})` })
    : new TetherError.SessionRetired({
      reason:
        `runner lost: the call for prompt ${delivery.promptId} of session ${id} failed (${why}) after the cluster may have delivered it, and whether its CLI ran the prompt is unknown`,
      acknowledged: false
    })

/**
 * A wire error as the host's error (typed as `E`, the errors of the calling method's local signature, which the
 * runner fails it with; as a known class by default: an error of a host's own provider keeps its own tag);
 * the cluster's own failures as the call's {@link cutOff}.
 *
 * @internal
 */
export const fromCall = <E = Wire.Known>(id: string, delivery?: { readonly promptId: string }) =>
(
  error: unknown
): E | TetherError.SessionUnavailable | TetherError.SessionRetired => {
  if (!isTransport(error)) return Wire.fromWire<E>(error as Wire.Failure)
  return cutOff(id, delivery, (error as { readonly _tag: string })._tag)
}

/**
 * A call's whole cause as the host's: its error mapped by {@link fromCall}; an interrupt, or a defect that is one of
 * the cluster's own errors, as the call's {@link cutOff}. An interrupt that reaches a call is never its caller's own
 * (a fiber interrupted from outside runs no handler: it stays interrupted): it is the runner's, whose `Sharding`
 * force-interrupts the entities of its shards when their lock storage is unhealthy (lock refreshes that failed or
 * timed out past the runner's outage tolerance) and when it shuts down, and the reply carries the interrupt
 * to the caller. A volatile request whose reply the cluster could not deliver is answered with a defect. Any other
 * defect stays a defect.
 *
 * @internal
 */
export const causeOfCall = <E = Wire.Known>(id: string, delivery?: { readonly promptId: string }) =>
(
  cause: Cause.Cause<unknown>
): Cause.Cause<E | TetherError.SessionUnavailable | TetherError.SessionRetired> => {
  const error = Cause.findErrorOption(cause)
  if (Option.isSome(error)) return Cause.fail(fromCall<E>(id, delivery)(error.value))
  const defect = Cause.findDefect(cause)
  if (Result.isSuccess(defect)) {
    return isTransport(defect.success)
      ? Cause.fail(cutOff(id, delivery, (defect.success as { readonly _tag: string })._tag))
      : cause as Cause.Cause<never>
  }
  return Cause.hasInterrupts(cause)
    ? Cause.fail(cutOff(id, delivery, "interrupted by its runner"))
    : cause as Cause.Cause<never>
}

/** An effect of the cluster with every outcome typed by {@link causeOfCall} (the caller's own interruption aside). */
const typedCall = <E = Wire.Known>(id: string, delivery?: { readonly promptId: string }) =>
<X, EX, RX>(
  effect: Effect.Effect<X, EX, RX>
): Effect.Effect<X, E | TetherError.SessionUnavailable | TetherError.SessionRetired, RX> =>
  Effect.catchCause(effect, (cause) => Effect.failCause(causeOfCall<E>(id, delivery)(cause)))

/** A stream of the cluster with every outcome typed by {@link causeOfCall} (the caller's own interruption aside). */
const typedStream = <X, EX, RX>(
  id: string,
  stream: Stream.Stream<X, EX, RX>
): Stream.Stream<X, Wire.Known, RX> => Stream.catchCause(stream, (cause) => Stream.failCause(causeOfCall(id)(cause)))

/**
 * A caller's timeout as the wire carries it (its numbers are finite), read as the local registry reads it: none when
 * not given, `infinite` for `"Infinity"` (an admission sends `"Infinity"`; an eviction, no timeout, which waits as
 * long as it takes), and no time at all for one that does not read as a duration or is negative (an eviction forces
 * at once, an admission fails at once when full).
 */
const wireMillis = <I>(input: Duration.Input | undefined, infinite: I): number | undefined | I => {
  if (input === undefined) return undefined
  const decoded = Duration.fromInput(input)
  if (Option.isNone(decoded)) return 0
  const millis = Duration.toMillis(decoded.value)
  return millis === Number.POSITIVE_INFINITY ? infinite : Number.isFinite(millis) ? Math.max(0, millis) : 0
}

/** A lag marker as hosts see it: an `EventLog.Lag`, with the cluster's reason as an extra field. */
export interface Gap extends EventLog.Lag {
  readonly reason: "behind" | "lost" | "not-durable"
}

export interface Options<C, CE> {
  readonly entity: Protocol.SessionEntity<C, CE>
  readonly tablePrefix?: string | undefined
  readonly durableEvents?: boolean | undefined
  /** How long a call that answers without waiting for a turn may go unanswered; none: as long as it takes. */
  readonly callTimeout?: Duration.Duration | undefined
}

/** The registry contract over the cluster. */
export const make = <C, CE, E, A extends Turn.TurnResult, TE>(options: Options<C, CE>) =>
  Effect.gen(function*() {
    const makeClient = yield* options.entity.client
    // The pools of this process's runner, when the client is built on one (`layer`).
    const local = yield* Effect.serviceOption(Protocol.localPools(options.entity.type))
    const store = yield* Store.make({
      entityType: options.entity.type,
      prefix: options.tablePrefix ?? "tether",
      migrate: false
    })
    const entity = (id: string) => makeClient(id)
    const call = <X, EX, RX>(
      id: string,
      effect: Effect.Effect<X, EX, RX>,
      delivery?: { readonly promptId: string }
    ): Effect.Effect<X, Wire.Known, RX> => bounded(id, delivery)(typedCall<Wire.Known>(id, delivery)(effect))

    /**
     * A call that answers without waiting for a turn, bounded by `callTimeout` when the host set one: while no
     * runner can serve the session (a database outage keeps every runner from its shard locks, the session moves)
     * the cluster holds the call until one can; past the deadline it fails typed, as the cluster's failures do
     * (a send's prompt may have reached the runner meanwhile: runner lost, delivery uncertain).
     */
    const bounded = (id: string, delivery?: { readonly promptId: string }) =>
    <X, EX, RX>(
      effect: Effect.Effect<X, EX, RX>
    ): Effect.Effect<X, EX | TetherError.SessionUnavailable | TetherError.SessionRetired, RX> => {
      const deadline = options.callTimeout
      if (deadline === undefined) return effect
      return Effect.timeoutOrElse(effect, {
        duration: deadline,
        orElse: () => Effect.fail(cutOff(id, delivery, `no answer within ${Duration.format(deadline)}`))
      })
    }

    // ------------------------------------------------------------------------------------------------------------
    // Turns
    // ------------------------------------------------------------------------------------------------------------

    /** Deliveries of a runner's stream, deduplicated by seq (the cluster may re-send it), until its end marker. */
    const turnEvents = (
      id: string,
      ref: { readonly promptId: string; readonly turnId: string; readonly generation: number }
    ) =>
      Stream.suspend(() => {
        let last = -1
        return entity(id).TurnEvents(ref).pipe(
          Stream.takeWhile((delivery) => delivery._tag !== "End"),
          Stream.flatMap((delivery): Stream.Stream<EventLog.Delivery<SessionEvent.SessionEvent>> => {
            if (delivery._tag === "Event") {
              if (delivery.seq <= last) return Stream.empty
              last = delivery.seq
              return Stream.succeed({ _tag: "Event", seq: delivery.seq, event: Wire.eventFromJson(delivery.event) })
            }
            if (delivery._tag === "Lag") {
              const gap: Gap = {
                _tag: "Lag",
                missed: delivery.missed,
                resumeSeq: delivery.resumeSeq,
                reason: delivery.reason
              }
              return Stream.succeed(gap)
            }
            return Stream.empty
          }),
          (stream) => typedStream(id, stream)
        )
      })

    const makeTurn = (
      id: string,
      ref: { readonly promptId: string; readonly turnId: string; readonly generation: number }
    ): Turn.Turn<A, TE> => ({
      id: ref.turnId,
      // A turn's outcome waits for the turn, bounded by the turn's own deadline, never by `callTimeout`: a turn longer
      // than it is no cut-off (and timing the wait out would interrupt the turn in the CLI).
      get result() {
        return typedCall<Wire.Known>(id, ref)(entity(id).Await({ ...ref, settled: false })) as Effect.Effect<
          A,
          Turn.TurnError | TE
        >
      },
      get settled() {
        return Effect.exit(
          typedCall<Wire.Known>(id, ref)(entity(id).Await({ ...ref, settled: true }))
        ) as Effect.Effect<
          Exit.Exit<A, Turn.TurnError | TE>
        >
      },
      get events() {
        return turnEvents(id, ref) as Stream.Stream<
          EventLog.Delivery<SessionEvent.SessionEvent>,
          EventLog.ReplayUnavailable
        >
      },
      get phase() {
        return call(id, entity(id).TurnPhase(ref)) as Effect.Effect<Turn.Phase, TetherError.SessionUnavailable>
      },
      get interrupt() {
        // The turn's session may have moved (or its runner cut the call off): then there is nothing left of the
        // turn to interrupt.
        return Effect.ignoreCause(entity(id).Interrupt({ generation: ref.generation, turnId: ref.turnId }))
      }
    })

    const promptIdOf = (options: SessionRegistry.SendOptions | undefined): string => {
      const given = (options as { readonly promptId?: unknown } | undefined)?.promptId
      return typeof given === "string" && given.length > 0 ? given : Crypto.randomUUID()
    }

    const send = (id: string, prompt: Turn.Prompt, options?: SessionRegistry.SendOptions) => {
      // Once per call, as for `run`: retrying the effect after a runner-lost failure is answered by the ledger.
      const promptId = promptIdOf(options)
      return Effect.gen(function*() {
        const sent = yield* entity(id).Send({
          promptId,
          prompt,
          queue: options?.queue,
          interruptOnCancel: options?.interruptOnCancel,
          generation: options?.generation,
          wait: false
        }).pipe(
          // The runner fails a send with the local registry's errors; the cluster, with the loss of its runner.
          typedCall<Session.SendError | SessionRegistry.LookupError>(id, { promptId }),
          bounded(id, { promptId })
        )
        return makeTurn(id, { promptId, turnId: sent.turnId, generation: sent.generation })
      }).pipe(Effect.withSpan("ClusterRegistry.client.send", { attributes: { "tether.session.id": id } }))
    }

    const run = (id: string, prompt: Turn.Prompt, options?: SessionRegistry.SendOptions) => {
      // Chosen once per call, not per execution: a host that retries this effect retries the same prompt id, and
      // the session's ledger answers it instead of running the prompt again.
      const promptId = promptIdOf(options)
      return entity(id).Send({
        promptId,
        prompt,
        queue: options?.queue,
        interruptOnCancel: options?.interruptOnCancel,
        generation: options?.generation,
        wait: true
      }).pipe(
        typedCall<Session.SendError | Turn.TurnError | TE | SessionRegistry.LookupError>(id, { promptId }),
        Effect.map((sent) => sent.result as A),
        Effect.withSpan("ClusterRegistry.client.run", { attributes: { "tether.session.id": id } })
      )
    }

    // ------------------------------------------------------------------------------------------------------------
    // Subscriptions
    // ------------------------------------------------------------------------------------------------------------

    const subscribe = (id: string, from: EventLog.From = "latest", target?: SessionRegistry.Target) =>
      Effect.gen(function*() {
        const scope = yield* Scope.Scope
        const queue = yield* Queue.make<EventLog.Delivery<SessionEvent.SessionEvent>, Wire.Known | Cause.Done>({
          capacity: 512
        })
        const ready = yield* Deferred.make<void, Wire.Known>()
        let last: number | undefined
        /** One subscription to whichever runner has the session; true when it must be made again. */
        const once = (start: typeof Protocol.From.Type) =>
          Effect.suspend(() => {
            let positions = 0
            let again = true
            return entity(id).Subscribe({ from: start, generation: target?.generation }).pipe(
              Stream.takeUntil((delivery) => {
                if (delivery._tag === "End") again = false
                return delivery._tag === "End" || (delivery._tag === "Position" && positions > 0)
              }),
              Stream.runForEach((delivery) =>
                Effect.suspend(() => {
                  switch (delivery._tag) {
                    case "Position": {
                      positions++
                      if (positions > 1) return Effect.void
                      last ??= delivery.seq
                      return Deferred.succeed(ready, undefined)
                    }
                    case "Event": {
                      if (last !== undefined && delivery.seq <= last) return Effect.void
                      last = delivery.seq
                      return Queue.offer(queue, {
                        _tag: "Event",
                        seq: delivery.seq,
                        event: Wire.eventFromJson(delivery.event)
                      })
                    }
                    case "Lag": {
                      const through = delivery.resumeSeq - 1
                      if (last !== undefined && through <= last) return Effect.void
                      const missed = last === undefined ? delivery.missed : through - last
                      last = through
                      const gap: Gap = { _tag: "Lag", missed, resumeSeq: delivery.resumeSeq, reason: delivery.reason }
                      return Queue.offer(queue, gap)
                    }
                    case "End":
                      return Effect.void
                  }
                })
              ),
              Effect.as(again)
            )
          })
        const loop: Effect.Effect<void> = Effect.gen(function*() {
          let start: typeof Protocol.From.Type = from
          while (true) {
            const exit = yield* Effect.exit(once(start))
            if (Exit.isSuccess(exit) && !exit.value) break
            if (Exit.isFailure(exit)) {
              const error = Cause.findErrorOption(exit.cause)
              const typed = Option.isSome(error) && !isTransport(error.value)
              if (typed || !(yield* Deferred.isDone(ready))) {
                // The session's own failure, or any failure before the subscription started: the caller's, typed (an
                // interrupt that gets here is the runner's: the caller's own interrupts this loop as a whole).
                const failure = causeOfCall(id)(exit.cause)
                yield* Deferred.failCause(ready, failure)
                yield* Queue.failCause(queue, failure)
                return
              }
              // The runner went away mid-stream (shut down, or the stream was cut): subscribe again, by seq.
              yield* Effect.sleep(Duration.millis(100))
            }
            if (last !== undefined) start = { after: last }
          }
          yield* Queue.end(queue)
        })
        yield* Effect.forkIn(loop, scope)
        yield* Deferred.await(ready)
        return Stream.fromQueue(queue)
      })

    // ------------------------------------------------------------------------------------------------------------
    // Handles
    // ------------------------------------------------------------------------------------------------------------

    /** Opens (or gets, without a configuration) the session, pinned until the caller's scope closes. */
    const open = (id: string, payload: {
      readonly config?: C | undefined
      readonly onConflict?: SessionRegistry.ConflictPolicy | undefined
      readonly admissionTimeoutMillis?: number | "Infinity" | undefined
      readonly generation?: number | undefined
    }) =>
      Effect.gen(function*() {
        const scope = yield* Scope.Scope
        const opened = yield* Deferred.make<typeof Protocol.Opened.Type, Wire.Known>()
        const pin = entity(id).Open({ ...payload, durableEvents: options.durableEvents }).pipe(
          // The pin lasts as long as the stream; a second element is the next owner re-opening a session whose
          // runner was lost: that generation is not this handle's, so let it go.
          Stream.takeWhile(() => !Deferred.isDoneUnsafe(opened)),
          Stream.runForEach((first) => Deferred.succeed(opened, first)),
          Effect.onExit((exit) =>
            Exit.isFailure(exit) ? Deferred.failCause(opened, causeOfCall(id)(exit.cause)) : Effect.void
          )
        )
        yield* Effect.forkIn(Effect.andThen(pin, Effect.never), scope)
        // Bounded as any call (an admission that waits for a slot counts); the pin goes with the caller's scope.
        const first = yield* bounded(id)(Deferred.await(opened))
        return handle(id, first.generation)
      })

    const interrupt = (id: string, target?: SessionRegistry.Target) =>
      call(id, entity(id).Interrupt({ generation: target?.generation }))

    const answerPermission = (
      id: string,
      requestId: string,
      decision: Permission.Verdict,
      target?: SessionRegistry.Target
    ) =>
      call(
        id,
        entity(id).AnswerPermission({
          requestId,
          decision: Wire.verdictToWire(decision),
          generation: target?.generation
        })
      )

    const pendingPermissions = (id: string, target?: SessionRegistry.Target) =>
      Effect.map(
        call(id, entity(id).PendingPermissions({ generation: target?.generation })),
        (pending) => pending as ReadonlyArray<Permission.PermissionRequest>
      )

    const control = (id: string, request: unknown, target?: SessionRegistry.Target) =>
      call(id, entity(id).Control({ request, generation: target?.generation }))

    /** The runner's snapshot; its failures are `SessionNotFound` or `SessionUnavailable` (the runner answers no other). */
    const snapshot = (id: string) =>
      entity(id).Snapshot().pipe(
        typedCall(id),
        bounded(id),
        Effect.map((snapshot) => snapshot as SessionRegistry.Snapshot)
      ) as Effect.Effect<SessionRegistry.Snapshot, SessionRegistry.SessionNotFound | TetherError.SessionUnavailable>

    const databaseUnavailable = (error: { readonly message: string }) =>
      new TetherError.SessionUnavailable({
        status: "unknown",
        reason: `the cluster's database failed: ${error.message}`
      })

    // Not bounded by `callTimeout`: a graceful eviction waits for the running turn, as long as its own timeout says.
    const evict = (id: string, evictOptions?: SessionRegistry.EvictOptions) =>
      typedCall(id)(
        entity(id).Evict({
          force: false,
          generation: evictOptions?.generation,
          timeoutMillis: wireMillis(evictOptions?.timeout, undefined)
        })
      )

    const forceEvict = (id: string, target?: SessionRegistry.Target) =>
      call(id, entity(id).Evict({ force: true, generation: target?.generation }))

    const handle = (id: string, generation: number): SessionRegistry.Handle<A, TE> => {
      const target = { generation }
      type H = SessionRegistry.Handle<A, TE>
      return {
        id,
        generation,
        send: (prompt, options) => send(id, prompt, { ...options, generation }),
        run: (prompt, options) => run(id, prompt, { ...options, generation }),
        interrupt: interrupt(id, target) as H["interrupt"],
        answerPermission: (requestId, decision) =>
          answerPermission(id, requestId, decision, target) as ReturnType<H["answerPermission"]>,
        pendingPermissions: pendingPermissions(id, target) as H["pendingPermissions"],
        control: (request) => control(id, request, target) as ReturnType<H["control"]>,
        subscribe: (from) => subscribe(id, from, target) as ReturnType<H["subscribe"]>,
        snapshot: snapshot(id).pipe(
          Effect.filterOrFail(
            (found) => found.generation === generation,
            (found) => new SessionRegistry.GenerationChanged({ id, expected: generation, current: found.generation })
          )
        )
      }
    }

    /** The live sessions the database lists, each asked for its snapshot (a session that is not live is skipped). */
    const list = Effect.gen(function*() {
      const records = yield* Effect.mapError(store.list, databaseUnavailable)
      const snapshots = yield* Effect.forEach(
        records.filter((entry) => entry.record.state === "live"),
        // A runner that died mid-call answers with a defect: that session is skipped like one that is not live.
        (entry) => Effect.option(Effect.catchDefect(snapshot(entry.id), () => Effect.fail(undefined))),
        { concurrency: 16 }
      )
      return snapshots.flatMap((found) => Option.isSome(found) ? [found.value] : [])
    })

    // The calls' errors are those of the local registry's signatures: the runner fails them with the same classes.
    type Reg = SessionRegistry.Registry<C, E, A, TE>
    const registry: Reg = {
      getOrCreate: (id, config, getOptions) =>
        open(id, {
          config,
          onConflict: getOptions?.onConflict,
          admissionTimeoutMillis: wireMillis(getOptions?.admissionTimeout, "Infinity" as const)
        }) as ReturnType<Reg["getOrCreate"]>,
      get: (id, target) => open(id, { generation: target?.generation }) as ReturnType<Reg["get"]>,
      send,
      run,
      interrupt: (id, target) => interrupt(id, target) as ReturnType<Reg["interrupt"]>,
      answerPermission: (id, requestId, decision, target) =>
        answerPermission(id, requestId, decision, target) as ReturnType<Reg["answerPermission"]>,
      pendingPermissions: (id, target) => pendingPermissions(id, target) as ReturnType<Reg["pendingPermissions"]>,
      control: (id, request, target) => control(id, request, target) as ReturnType<Reg["control"]>,
      subscribe: (id, from, target) => subscribe(id, from, target) as ReturnType<Reg["subscribe"]>,
      snapshot,
      list,
      evict: (id, options) => evict(id, options) as ReturnType<Reg["evict"]>,
      forceEvict: (id, target) => forceEvict(id, target) as ReturnType<Reg["forceEvict"]>,
      size: Effect.map(
        Effect.mapError(store.list, databaseUnavailable),
        (records) => records.filter((entry) => entry.record.state === "live").length
      ),
      // Each runner keeps its own pools: a client reaches those of its process's runner only (`layer`).
      warm: (config, size) =>
        Option.isSome(local) ? local.value.warm(config, size) : Effect.fail(
          new TetherError.InvalidConfig({
            problems: [
              "this node runs no runner: on a cluster each runner keeps its own warm pools; give them in its settings " +
              "(RunnerSettings.warm), or call warm on a node that runs one (ClusterBinding.layer)"
            ]
          })
        ),
      pools: Option.isSome(local) ? local.value.pools : Effect.succeed([]),
      // Dormancy is a local registry's: the cluster keeps every conversation's state in its database already.
      dormant: Effect.succeed([]),
      wake: (id) => Effect.fail(new SessionRegistry.DormantNotFound({ id })),
      deleteDormant: (id) => Effect.fail(new SessionRegistry.DormantNotFound({ id }))
    }
    return registry
  })
