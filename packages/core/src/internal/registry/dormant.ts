/**
 * How an entry's session opens (a warm CLI, a dormant conversation resumed, or a cold start) and what becomes of its
 * conversation when it closes (kept dormant, or its directory released); and the registry's dormant operations:
 * list, wake, delete, and the wake a message by id makes.
 *
 * A dormant conversation is a record in the registry's `DormantStore` (the CLI's conversation id, the directory its
 * CLI left, the configuration's fingerprint) and, for the life of the process, its configuration. Waking it is an
 * admission like any other (`getOrCreate`): concurrent messages for a waking id wait for the same start, so each is
 * delivered once, to the one CLI that resumed the conversation.
 *
 * A live conversation has its record too, from its first turn (or the record it woke from): a host that dies
 * without releasing its registry (SIGKILL, a crash) leaves it in the store, and the registry of its restart finds it
 * dormant. The record goes when the conversation ends for good (evicted, replaced, failed).
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { Listing } from "../../DormantStore.ts"
import type * as Session from "../../Session.ts"
import type { ConflictPolicy, EvictionReason } from "../../SessionRegistry.ts"
import { InvalidConfig } from "../../TetherError.ts"
import type { TurnResult } from "../../Turn.ts"
import type { Dormancy, Entry, Opening, Registry } from "./entries.ts"
import { DormantNotFound, type DormantStoreFailed, RestoreFailed, SessionConflict } from "./errors.ts"
import { metrics } from "./metrics.ts"
import * as Warm from "./warm.ts"

/** The reasons a conversation goes dormant rather than ending: the registry's own choices, and its release. */
const keeps: ReadonlySet<EvictionReason> = new Set(["idle", "capacity", "shutdown"])

/** Writes the entry's record: its conversation, resumable from `directory`, as of now. */
const save = <C, E, A extends TurnResult, TE>(
  dormancy: Dormancy<C>,
  entry: Entry<E, A, TE>,
  conversationId: string,
  directory: string
) =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (since) => dormancy.store.save({ id: entry.id, fingerprint: entry.fingerprint, conversationId, directory, since })
  )

/** A new conversation: a warm CLI if one was taken for it, else a cold start (in a directory of the store). */
const fresh = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  config: C,
  taken: Warm.Taken<C, A, TE> | undefined,
  pooled: boolean
): Effect.fn.Return<Session.Session<A, TE>, E | Opening> {
  const warm = yield* Warm.handOut(self, entry, taken, pooled, config)
  if (warm !== undefined) {
    // The adoption's scope closes after the warm CLI's (see `Warm.take`): what it registers (a last save) runs once
    // the CLI has exited.
    const adoption = taken?.adoption
    if (adoption === undefined) return warm.session
    return yield* self.adopt!(entry.id, config, {
      session: warm.session,
      discard: Scope.close(warm.scope, Exit.void)
    }, adoption)
  }
  if (self.dormancy === undefined) return yield* self.acquire(entry.id, config, entry.scope, undefined)
  const directory = yield* self.dormancy.store.allocate
  entry.directory = directory
  return yield* self.acquire(entry.id, config, entry.scope, { directory, resume: undefined }).pipe(
    Effect.tapError(() => Warm.release(self, directory))
  )
})

/** Resumes the id's dormant conversation; one that is no longer in the store starts fresh. */
const restore = Effect.fnUntraced(function*<C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  config: C,
  onConflict: ConflictPolicy
): Effect.fn.Return<Session.Session<A, TE>, E | Opening> {
  const dormancy = self.dormancy!
  const id = entry.id
  const found = yield* dormancy.store.load(id)
  if (Option.isNone(found)) {
    forget(self, id)
    return yield* fresh(self, entry, config, undefined, false)
  }
  const record = found.value
  if (record.fingerprint !== entry.fingerprint) {
    if (onConflict === "fail") {
      return yield* new SessionConflict({
        id,
        generation: 0,
        liveFingerprint: record.fingerprint,
        requestedFingerprint: entry.fingerprint
      })
    }
    yield* dormancy.store.remove(id)
    forget(self, id)
    return yield* fresh(self, entry, config, undefined, false)
  }
  entry.directory = record.directory
  // Its record stays while it wakes and runs: a close before its CLI is up (the registry released, the id replaced)
  // keeps it or removes it with its directory, never the directory alone; a host that dies finds it dormant again.
  entry.recorded = record.conversationId
  const session = yield* self.acquire(id, config, entry.scope, {
    directory: record.directory,
    resume: record.conversationId
  }).pipe(
    Effect.tapError(() => Metric.update(Metric.withAttributes(metrics.wakes, { outcome: "failed" }), 1)),
    Effect.mapError((cause) =>
      new RestoreFailed({
        id,
        reason: (cause as { readonly message?: unknown } | null)?.message === undefined
          ? String(cause)
          : String((cause as { readonly message: unknown }).message),
        cause
      })
    )
  )
  forget(self, id)
  yield* Metric.update(Metric.withAttributes(metrics.wakes, { outcome: "resumed" }), 1)
  return session
})

const forget = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>, id: string): void => {
  self.dormancy?.ids.delete(id)
  self.dormancy?.configs.delete(id)
}

/**
 * How the entry's session opens, decided by the admission (which took `item` from a pool, if any): an id held
 * dormant resumes its conversation, any other starts fresh.
 */
export const open = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  config: C,
  taken: Warm.Taken<C, A, TE> | undefined,
  pooled: boolean,
  onConflict: ConflictPolicy
): Effect.Effect<Session.Session<A, TE>, E | Opening> =>
  self.dormancy !== undefined && self.dormancy.ids.has(entry.id)
    ? restore(self, entry, config, onConflict)
    : fresh(self, entry, config, taken, pooled)

/** Whether the admission of `id` must not take a warm CLI: it resumes a dormant conversation instead. */
export const isDormant = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>, id: string): boolean =>
  self.dormancy?.ids.has(id) ?? false

/**
 * What becomes of a closed entry's conversation (`Registry.onClosed`): kept dormant when the registry closed it by
 * its own choice (idle, capacity) or at its release, and the CLI had a conversation to resume (its own id, or the
 * one it was resumed from: a CLI woken and sent nothing has not said its id yet); else its directory goes. A record
 * that cannot be written loses the conversation (logged).
 */
export const onClosed = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>,
  reason: EvictionReason,
  said: string | undefined
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const dormancy = self.dormancy
    const directory = entry.directory
    if (dormancy === undefined || directory === undefined) return Effect.void
    const conversationId = said ?? entry.recorded
    // Ended: its directory goes, and with it the record it had (from its first turn, or the one it woke from), never
    // one without the other.
    const end = entry.recorded === undefined
      ? Warm.release(self, directory)
      : Effect.ignore(dormancy.store.remove(entry.id), { log: "Warn" })
    if (!keeps.has(reason) || conversationId === undefined) return end
    return Effect.gen(function*() {
      const saved = yield* Effect.exit(save(dormancy, entry, conversationId, directory))
      if (saved._tag === "Failure") {
        yield* Effect.logWarning(`conversation ${entry.id} could not go dormant: its state is lost`, saved.cause)
        return yield* end
      }
      dormancy.ids.add(entry.id)
      dormancy.configs.set(entry.id, entry.config as C)
      yield* Metric.update(metrics.dormant, 1)
    })
  })

/**
 * Records a live conversation in the store once its CLI has a conversation id, after a turn (again only when the id
 * changes), so that a host that dies without releasing its registry finds it dormant at its restart.
 * Uninterruptible: the entry's close (which interrupts its watchers, then removes or rewrites the record) never
 * races a half-written one. A record that cannot be written is logged: the conversation still goes dormant as usual.
 */
export const recordLive = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  entry: Entry<E, A, TE>
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const dormancy = self.dormancy
    const directory = entry.directory
    const session = entry.session
    if (dormancy === undefined || directory === undefined || session === undefined) return Effect.void
    return Effect.gen(function*() {
      const conversationId = Option.getOrUndefined(yield* session.sessionId)
      if (conversationId === undefined || conversationId === entry.recorded) return
      // Marked before the write: a close from here on removes whatever the write leaves.
      entry.recorded = conversationId
      const saved = yield* Effect.exit(save(dormancy, entry, conversationId, directory))
      if (saved._tag === "Failure") {
        yield* Effect.logWarning(
          `live conversation ${entry.id} is not recorded: a host that dies loses it`,
          saved.cause
        )
      }
    }).pipe(Effect.uninterruptible)
  })

/** `Registry.dormant`: the store's conversations, less those that run now (their records are there for a restart). */
export const list = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>
): Effect.Effect<ReadonlyArray<Listing>, DormantStoreFailed> =>
  self.dormancy === undefined ? Effect.succeed([]) : Effect.map(
    self.dormancy.store.list,
    (listings) =>
      listings.filter((listing) => !self.state.entries.has(listing._tag === "Dormant" ? listing.record.id : listing.id))
  )

/** `Registry.deleteDormant`: only a conversation that is dormant now (not one that is live or waking). */
export const remove = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string
): Effect.Effect<void, DormantNotFound | DormantStoreFailed> =>
  Effect.suspend((): Effect.Effect<void, DormantNotFound | DormantStoreFailed> => {
    const dormancy = self.dormancy
    const entry = self.state.entries.get(id)
    // An entry on its way out (a wake that failed, a conversation going dormant): decide once it is gone.
    if (entry !== undefined && entry.phase === "closing") {
      return Effect.andThen(Deferred.await(entry.closed), remove(self, id))
    }
    if (dormancy === undefined || entry !== undefined || !dormancy.ids.has(id)) {
      return Effect.fail(new DormantNotFound({ id }))
    }
    return Effect.andThen(
      dormancy.store.remove(id),
      Effect.sync(() => forget(self, id))
    )
  })

/**
 * The configuration to wake `id` with: the one given, else the one it went dormant with in this process;
 * `undefined` when it is not dormant.
 */
export const configOf = <C, E, A extends TurnResult, TE>(
  self: Registry<C, E, A, TE>,
  id: string,
  given: C | undefined
): Effect.Effect<C | undefined, InvalidConfig> =>
  Effect.suspend(() => {
    if (!isDormant(self, id)) return Effect.succeed(undefined)
    const config = given ?? self.dormancy!.configs.get(id)
    return config === undefined
      ? Effect.fail(
        new InvalidConfig({
          problems: [
            `the configuration of dormant conversation ${id} is not known here: wake it with its configuration`
          ]
        })
      )
      : Effect.succeed(config)
  })

/** Loads the ids a store holds dormant (those left by an earlier process) into a new registry. */
export const loadIds = <C, E, A extends TurnResult, TE>(self: Registry<C, E, A, TE>) =>
  self.dormancy === undefined ? Effect.void : Effect.map(self.dormancy.store.list, (listings): void => {
    for (const listing of listings) self.dormancy!.ids.add(listing._tag === "Dormant" ? listing.record.id : listing.id)
  })
