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

/**
 * Who allocated a CLI directory, as its name says: the kernel's boot, the PID namespace, the process's pid in it and
 * its start (in clock ticks after boot: a pid used again is another start), all read from `/proc`.
 */
interface Allocator {
  readonly boot: string
  readonly namespace: string
  readonly pid: string
  readonly start: string
}

/** A CLI directory's name: its allocator (see {@link Allocator}), then a random id. */
const allocatedName =
  /^([0-9a-f]{12})-(\d+)-([1-9]\d*)-(\d+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A process's pid and start from its `/proc/<pid>/stat` (its name, in parentheses, may hold anything). */
const statOf = (stat: string): { readonly pid: string; readonly start: string } | undefined => {
  const pid = /^([1-9]\d*) \(/.exec(stat)?.[1]
  // Fields 3 onwards follow the name's last ")": the start is field 22.
  const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  return pid === undefined || start === undefined || !/^\d+$/.test(start) ? undefined : { pid, start }
}

const isNotFound = (error: unknown): boolean => {
  const reason = (error as { readonly reason?: { readonly _tag?: unknown } } | null)?.reason
  return reason?._tag === "NotFound"
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
    Effect.mapError(fs.remove(directory, { recursive: true, force: true }), failed(`remove ${directory}`))
  // This process, as the names of the directories it allocates say (none without /proc: then never swept).
  const self: Allocator | undefined = yield* Effect.gen(function*() {
    const boot = (yield* fs.readFileString("/proc/sys/kernel/random/boot_id")).trim().replace(/-/g, "").slice(0, 12)
    const namespace = /^pid:\[(\d+)\]$/.exec(yield* fs.readLink("/proc/self/ns/pid"))?.[1]
    const stat = statOf(yield* fs.readFileString("/proc/self/stat"))
    return /^[0-9a-f]{12}$/.test(boot) && namespace !== undefined && stat !== undefined
      ? { boot, namespace, ...stat }
      : undefined
  }).pipe(Effect.orElseSucceed(() => undefined))

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
      const owner = self === undefined ? "" : `${self.boot}-${self.namespace}-${self.pid}-${self.start}-`
      const directory = path.join(clis, `${owner}${globalThis.crypto.randomUUID()}`)
      return Effect.as(Effect.mapError(fs.makeDirectory(directory), failed(`create ${directory}`)), directory)
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
          yield* removeDirectory(decoded.directory)
        }
        yield* Effect.mapError(fs.remove(file, { force: true }), failed(`remove ${file}`))
      }),
    release: (directory) => isOurs(directory) ? removeDirectory(directory) : Effect.void
  }

  /**
   * Whether the process that allocated a directory named so is gone: it ran under this boot and in this PID
   * namespace (others' liveness cannot be seen here: their directories stay), is not this process, and no process has
   * its pid and start now.
   */
  const allocatorGone = (name: string): Effect.Effect<boolean> => {
    const match = allocatedName.exec(name)
    if (self === undefined || match === null) return Effect.succeed(false)
    const [, boot, namespace, pid, start] = match
    if (boot !== self.boot || namespace !== self.namespace) return Effect.succeed(false)
    if (pid === self.pid) return Effect.succeed(start !== self.start)
    return fs.readFileString(`/proc/${pid}/stat`).pipe(
      Effect.map((stat) => statOf(stat)?.start !== start),
      Effect.catch((error) => Effect.succeed(isNotFound(error)))
    )
  }

  /**
   * The CLI directories a host that died without its finalizers (SIGKILL, a crash) left and no record names: its
   * warm CLIs', and its new conversations' that had not ended a turn. Removed when the store is made, only those whose
   * allocating process is gone (see {@link allocatorGone}), and none while a record cannot be read (it may name one).
   * A record names a directory by its last part: a store reached by another path still knows its own.
   */
  const sweep = Effect.gen(function*() {
    const named = new Set<string>()
    for (const file of yield* fs.readDirectory(conversations)) {
      const id = idOf(file)
      if (id === undefined) continue
      const text = yield* fs.readFileString(path.join(conversations, file)).pipe(
        // Removed since the listing: it names nothing now.
        Effect.catchIf(isNotFound, () => Effect.succeed(undefined))
      )
      if (text === undefined) continue
      const decoded = decode(id, text)
      if (decoded instanceof DormantStateCorrupt) return { unreadable: id }
      named.add(path.basename(decoded.directory))
    }
    let removed = 0
    for (const name of yield* fs.readDirectory(clis)) {
      if (named.has(name) || !(yield* allocatorGone(name))) continue
      yield* fs.remove(path.join(clis, name), { recursive: true, force: true })
      removed++
    }
    return { removed }
  })
  if (self !== undefined) {
    const swept = yield* Effect.exit(sweep)
    if (swept._tag === "Failure") {
      yield* Effect.logWarning(`the dormant store ${base} could not remove what a dead host left`, swept.cause)
    } else if ("unreadable" in swept.value) {
      yield* Effect.logWarning(
        `the dormant store ${base} keeps what a dead host left: the record of ${swept.value.unreadable} cannot be ` +
          `read (delete it: SessionRegistry's deleteDormant)`
      )
    } else if (swept.value.removed > 0) {
      yield* Effect.logDebug(`the dormant store ${base} removed ${swept.value.removed} directories a dead host left`)
    }
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
