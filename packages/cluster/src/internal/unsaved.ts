/**
 * What a runner's sessions could not save when they should have (the database was unreachable), kept by the
 * runner and written when the database answers again: the last save of a generation that closed meanwhile, and
 * the outcomes of its turns for the ledger. Without it, a turn that completed while the database was down would be
 * reported lost (`deliveryUncertain`) to a retry with its prompt id, although its CLI had finished it.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Store from "./store.ts"

/**
 * One generation's unsaved work: its last save (`save`; none when only the ledger is left to write) and its turns'
 * outcomes (`completions`). The save is written while the generation is still the record's; once the session has
 * moved on (the save is fenced), only the completions, which stay true wherever the session went.
 */
export interface Entry {
  readonly id: string
  readonly generation: number
  readonly save: Store.Save | undefined
  readonly completions: ReadonlyArray<Store.Completion>
}

/** How long a runner waits between attempts at writing what is unsaved. */
export const retryInterval = Duration.seconds(1)

/**
 * The unsaved work of a runner, tried every {@link retryInterval} in a fiber of `scope`, each write bounded by
 * `writeTimeout` (a database that hangs rather than refuses must not stall the others), each entry given up after
 * `retention`; when `scope` closes, tried once more (bounded).
 */
export const make = Effect.fnUntraced(function*(options: {
  readonly store: Store.Store
  readonly retention: Duration.Duration
  readonly writeTimeout: Duration.Duration
  readonly scope: Scope.Scope
}) {
  const entries = new Map<string, Entry & { readonly until: number }>()

  /** Keeps a generation's unsaved work (replacing what it kept of the same generation). */
  const keep = (entry: Entry) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        entries.set(`${entry.id}/${entry.generation}`, {
          ...entry,
          until: now + Duration.toMillis(options.retention)
        })
      }))

  /** Writes one entry: true once it is written (or has nothing left to write). */
  const write = (entry: Entry) =>
    Effect.gen(function*() {
      if (entry.save !== undefined) {
        const saved = yield* Effect.exit(options.store.save(entry.id, entry.generation, entry.save))
        if (Exit.isSuccess(saved)) return true
        const error = Cause.findErrorOption(saved.cause)
        if (Option.isNone(error) || error.value._tag !== "Fenced") return false
      }
      if (entry.completions.length === 0) return true
      return Exit.isSuccess(yield* Effect.exit(options.store.complete(entry.id, entry.completions)))
    })

  /** Writes what is kept (of one id, or all), once; gives up on what is past its retention. */
  const flush = (id?: string) =>
    Effect.gen(function*() {
      for (const [key, entry] of [...entries]) {
        if (id !== undefined && entry.id !== id) continue
        const written = yield* Effect.timeoutOption(write(entry), options.writeTimeout)
        if (Option.getOrElse(written, () => false)) {
          if (entries.get(key) === entry) entries.delete(key)
          yield* Effect.logInfo(
            `wrote what session ${entry.id} (generation ${entry.generation}) could not save, once the database answered`
          )
          continue
        }
        if ((yield* Clock.currentTimeMillis) > entry.until) {
          if (entries.get(key) === entry) entries.delete(key)
          yield* Effect.logWarning(
            `gave up saving session ${entry.id} (generation ${entry.generation}) after ${
              Duration.format(options.retention)
            }: its turns in flight will be reported lost`
          )
        }
      }
    })

  /** {@link flush}, only when something is kept, bounded by `writeTimeout`: before an id's next generation begins. */
  const flushBounded = (id?: string) =>
    Effect.suspend(() =>
      entries.size === 0 ? Effect.void : Effect.asVoid(Effect.timeoutOption(flush(id), options.writeTimeout))
    )

  yield* Effect.forkIn(Effect.forever(Effect.andThen(Effect.sleep(retryInterval), flush())), options.scope)
  yield* Effect.addFinalizer(() => flushBounded())

  return { keep, flush: flushBounded } as const
})

/** The unsaved work of a runner. */
export type Unsaved = Effect.Success<ReturnType<typeof make>>
