/**
 * The dormant stores: over a local directory (`effect/FileSystem`), and in memory.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import * as Path from "effect/Path"
import type { Listing, Record, Store } from "../../DormantStore.ts"
import { DormantStateCorrupt, DormantStoreFailed } from "./errors.ts"

/** A record read back, checked field by field (a store is written by this module, but a disk can be edited). */
export const decode = (id: string, text: string): Record | DormantStateCorrupt => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return new DormantStateCorrupt({ id, reason: `the record is not JSON (${String(error)})` })
  }
  const record = value as { readonly [key: string]: unknown } | null
  if (
    record === null || typeof record !== "object" || record.id !== id || typeof record.fingerprint !== "string" ||
    typeof record.conversationId !== "string" || typeof record.directory !== "string" ||
    typeof record.since !== "number"
  ) {
    return new DormantStateCorrupt({ id, reason: "the record is not a dormant conversation's record" })
  }
  return {
    id,
    fingerprint: record.fingerprint,
    conversationId: record.conversationId,
    directory: record.directory,
    since: record.since
  }
}

/** File names of ids: any id, one file name (`%` escapes), never `.` or `..`. */
const fileOf = (id: string): string => `${encodeURIComponent(id).replace(/\./g, "%2E")}.json`

const idOf = (file: string): string | undefined => {
  if (!file.endsWith(".json")) return undefined
  try {
    return decodeURIComponent(file.slice(0, -".json".length))
  } catch {
    return undefined
  }
}

const failed = (operation: string) => (error: { readonly message: string }) =>
  new DormantStoreFailed({ operation, reason: error.message })

/** The process this runs in, where there is one (Node, Bun, Deno): its pid names the CLI directories it allocates. */
const host = (globalThis as unknown as {
  readonly process?: { readonly pid?: number; readonly kill?: (pid: number, signal: 0) => boolean }
}).process

/** The CLI directories this process's file-system stores allocated and have not released (see {@link sweep}). */
const held = new Set<string>()

/** A CLI directory's name: the pid of the process that allocated it, then a random id. */
const allocatedName = /^([1-9]\d*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * Whether the process that allocated a CLI directory is gone: no process has its pid (`kill(pid, 0)` says ESRCH;
 * EPERM is another user's, alive), or it is this process's, which holds none of the directories it is asked about.
 * Unknown (no process API): not gone.
 */
const allocatorGone = (pid: number): boolean => {
  if (host?.pid === undefined || host.kill === undefined) return false
  if (pid === host.pid) return true
  try {
    host.kill(pid, 0)
    return false
  } catch (error) {
    return (error as { readonly code?: unknown } | null)?.code === "ESRCH"
  }
}

export const fileSystem = Effect.fnUntraced(function*(root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = path.resolve(root)
  const conversations = path.join(base, "conversations")
  const clis = path.join(base, "cli")
  yield* Effect.mapError(
    Effect.andThen(
      fs.makeDirectory(conversations, { recursive: true }),
      fs.makeDirectory(clis, { recursive: true })
    ),
    failed(`create ${base}`)
  )
  const recordPath = (id: string) => path.join(conversations, fileOf(id))
  // A directory of this store: a record naming one elsewhere is not trusted with a removal.
  const isOurs = (directory: string) => path.dirname(path.resolve(directory)) === clis
  const removeDirectory = (directory: string) =>
    Effect.andThen(
      Effect.mapError(fs.remove(directory, { recursive: true, force: true }), failed(`remove ${directory}`)),
      Effect.sync(() => void held.delete(directory))
    )

  const load = (id: string): Effect.Effect<Option.Option<Record>, DormantStateCorrupt | DormantStoreFailed> =>
    Effect.gen(function*() {
      const file = recordPath(id)
      if (!(yield* Effect.mapError(fs.exists(file), failed(`read ${file}`)))) return Option.none()
      const text = yield* Effect.mapError(fs.readFileString(file), failed(`read ${file}`))
      const decoded = decode(id, text)
      if (decoded instanceof DormantStateCorrupt) return yield* decoded
      if (!(yield* Effect.mapError(fs.exists(decoded.directory), failed(`read ${decoded.directory}`)))) {
        return yield* new DormantStateCorrupt({ id, reason: `its directory ${decoded.directory} is missing` })
      }
      return Option.some(decoded)
    })

  const store: Store = {
    // In `cli`, made with the store: a store whose directory was removed (a temporary one, its host gone) fails
    // rather than making it again, empty, for a registry still refilling its pools.
    allocate: Effect.suspend(() => {
      const directory = path.join(clis, `${host?.pid ?? 0}-${globalThis.crypto.randomUUID()}`)
      held.add(directory)
      return Effect.as(
        Effect.mapError(fs.makeDirectory(directory), failed(`create ${directory}`)).pipe(
          Effect.tapError(() => Effect.sync(() => void held.delete(directory)))
        ),
        directory
      )
    }),
    save: (record) =>
      Effect.suspend(() => {
        const file = recordPath(record.id)
        const temporary = `${file}.${globalThis.crypto.randomUUID()}.tmp`
        return Effect.andThen(
          fs.writeFileString(temporary, JSON.stringify(record)),
          fs.rename(temporary, file)
        ).pipe(Effect.mapError(failed(`write ${file}`)))
      }),
    load,
    list: Effect.gen(function*() {
      const files = yield* Effect.mapError(fs.readDirectory(conversations), failed(`list ${conversations}`))
      const out: Array<Listing> = []
      for (const file of files.sort()) {
        const id = idOf(file)
        if (id === undefined) continue
        const found = yield* Effect.result(load(id))
        if (found._tag === "Success") {
          if (Option.isSome(found.success)) out.push({ _tag: "Dormant", record: found.success.value })
        } else if (found.failure._tag === "DormantStateCorrupt") {
          out.push({ _tag: "Corrupt", id, reason: found.failure.reason })
        } else {
          return yield* found.failure
        }
      }
      return out
    }),
    remove: (id) =>
      Effect.gen(function*() {
        const file = recordPath(id)
        const text = yield* fs.readFileString(file).pipe(Effect.option)
        const decoded = Option.isSome(text) ? decode(id, text.value) : undefined
        if (decoded !== undefined && !(decoded instanceof DormantStateCorrupt) && isOurs(decoded.directory)) {
          yield* removeDirectory(path.resolve(decoded.directory))
        }
        yield* Effect.mapError(fs.remove(file, { force: true }), failed(`remove ${file}`))
      }),
    release: (directory) => isOurs(directory) ? removeDirectory(path.resolve(directory)) : Effect.void
  }

  /**
   * The CLI directories a host that died without its finalizers (SIGKILL, a crash) left and no record names: its
   * warm CLIs', and its new conversations' that had not ended a turn. Removed when the store is made: only those whose
   * allocating process is gone (see {@link allocatorGone}: stores shared by processes must share a pid namespace),
   * and none while a record cannot be read (it may name one).
   */
  const sweep = Effect.gen(function*() {
    const named = new Set<string>()
    for (const file of yield* fs.readDirectory(conversations)) {
      const id = idOf(file)
      if (id === undefined) continue
      const text = yield* fs.readFileString(path.join(conversations, file)).pipe(Effect.option)
      if (Option.isNone(text)) continue
      const decoded = decode(id, text.value)
      if (decoded instanceof DormantStateCorrupt) return 0
      named.add(path.resolve(decoded.directory))
    }
    let removed = 0
    for (const name of yield* fs.readDirectory(clis)) {
      const pid = allocatedName.exec(name)?.[1]
      const directory = path.join(clis, name)
      if (pid === undefined || named.has(directory) || held.has(directory) || !allocatorGone(Number(pid))) continue
      yield* fs.remove(directory, { recursive: true, force: true })
      removed++
    }
    return removed
  })
  const swept = yield* Effect.exit(sweep)
  if (swept._tag === "Failure") {
    yield* Effect.logWarning(`the dormant store ${base} could not remove what a dead host left`, swept.cause)
  } else if (swept.value > 0) {
    yield* Effect.logDebug(`the dormant store ${base} removed ${swept.value} directories a dead host left`)
  }
  return store
})

export const memory = (): Store => {
  const records = new Map<string, Record>()
  let next = 0
  return {
    allocate: Effect.sync(() => `memory:${next++}`),
    save: (record) => Effect.sync(() => void records.set(record.id, record)),
    load: (id) => Effect.sync(() => Option.fromUndefinedOr(records.get(id))),
    list: Effect.sync(() => [...records.values()].map((record): Listing => ({ _tag: "Dormant", record }))),
    remove: (id) => Effect.sync(() => void records.delete(id)),
    release: () => Effect.void
  }
}
