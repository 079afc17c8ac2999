/**
 * The CLI's conversation state on disk, as the cluster saves and restores it: every file under the session's
 * conversation directory that the session says holds the conversation (`Session.conversationFile`: by default a
 * path that names the conversation — Claude: `projects/<cwd>/<session id>.jsonl`, and the session's own folder if it
 * has one; Codex: `sessions/<date>/rollout-…-<thread id>.jsonl`; Gemini CLI's preset names its own). The CLIs append
 * to these files, so a save after a turn usually stores only what the turn appended; a file that changed otherwise
 * is stored again whole.
 *
 * @internal
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

/** What the database has of one file: its length, the hash of that content, and how many chunks hold it. */
export interface Tracked {
  readonly length: number
  readonly hash: string
  readonly chunks: number
}

/** A chunk to store: `append` adds chunk number `chunk`, `replace` drops the file's chunks and stores chunk 0. */
export interface Change {
  readonly path: string
  readonly mode: "append" | "replace"
  readonly chunk: number
  readonly data: Uint8Array
}

const sha256 = (data: Uint8Array): string => Crypto.createHash("sha256").update(data).digest("base64url")

/** Regular files under `dir` (relative paths), or none when `dir` does not exist. */
const walk = async (dir: string): Promise<Array<string>> => {
  const entries = await Fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => [])
  return entries.filter((entry) => entry.isFile()).map((entry) =>
    Path.relative(dir, Path.join(entry.parentPath, entry.name))
  )
}

/**
 * What changed in the conversation's files since `tracked`, and what the database will have after storing it.
 */
export const collect = (
  dir: string,
  conversationId: string,
  tracked: { readonly [path: string]: Tracked },
  conversationFile: (path: string, conversationId: string) => boolean
): Effect.Effect<{ readonly changes: ReadonlyArray<Change>; readonly tracked: { readonly [path: string]: Tracked } }> =>
  Effect.promise(async () => {
    const changes: Array<Change> = []
    const next: Record<string, Tracked> = { ...tracked }
    for (const path of await walk(dir)) {
      if (!conversationFile(path, conversationId)) continue
      const data: Uint8Array | undefined = await Fs.readFile(Path.join(dir, path)).catch(() => undefined)
      if (data === undefined) continue
      const known = tracked[path]
      if (known !== undefined && data.length === known.length && sha256(data) === known.hash) continue
      if (known !== undefined && data.length > known.length && sha256(data.subarray(0, known.length)) === known.hash) {
        changes.push({ path, mode: "append", chunk: known.chunks, data: data.subarray(known.length) })
        next[path] = { length: data.length, hash: sha256(data), chunks: known.chunks + 1 }
      } else {
        changes.push({ path, mode: "replace", chunk: 0, data })
        next[path] = { length: data.length, hash: sha256(data), chunks: 1 }
      }
    }
    return { changes, tracked: next }
  })

/** The runner's disk refused a conversation directory (full, read-only, no permission). */
export class FilesError extends Data.TaggedError("FilesError")<{ readonly dir: string; readonly cause: unknown }> {
  override get message() {
    return `the conversation directory ${this.dir} could not be written or removed: ${String(this.cause)}`
  }
}

/** Writes saved files into a fresh conversation directory (which it creates). */
export const restore = (
  dir: string,
  files: ReadonlyArray<{ readonly path: string; readonly data: Uint8Array }>
): Effect.Effect<void, FilesError> =>
  Effect.tryPromise({
    try: async () => {
      await Fs.mkdir(dir, { recursive: true })
      for (const file of files) {
        const target = Path.resolve(dir, file.path)
        // A path from the database never leaves the directory.
        if (!target.startsWith(Path.resolve(dir) + Path.sep)) continue
        await Fs.mkdir(Path.dirname(target), { recursive: true })
        await Fs.writeFile(target, file.data)
      }
    },
    catch: (cause) => new FilesError({ dir, cause })
  })

/** Removes a conversation directory. */
export const remove = (dir: string): Effect.Effect<void, FilesError> =>
  Effect.tryPromise({
    try: () => Fs.rm(dir, { recursive: true, force: true }),
    catch: (cause) => new FilesError({ dir, cause })
  })

/** The name of a runner's own state directory (under the system's temporary directory or its `stateDirectory`). */
export const stalePrefix = "tether-cluster-"

/** The state directories of the runners of this process: never stale, whatever a sweep finds. */
const owned = new Set<string>()

/**
 * A new state directory for a runner of this process under `root`, named after the process (`tether-cluster-<pid>-
 * <random>`), so that a later sweep knows whose it was. Owned until {@link disown}.
 */
export const own = (root: string): string => {
  const dir = Path.join(root, `${stalePrefix}${process.pid}-${Crypto.randomBytes(4).toString("hex")}`)
  owned.add(dir)
  return dir
}

/** The runner that owned `dir` is done with it (it has removed it, or is about to). */
export const disown = (dir: string): void => {
  owned.delete(dir)
}

/**
 * Removes the state directories under `root` of runners that are gone (killed without running their finalizers): a
 * directory named after a pid that no longer exists, or after this process's own pid but owned by none of its
 * runners (a container restarted with the same pid). Anything else under `root` is left alone.
 */
export const sweepStale = (root: string): Effect.Effect<void> =>
  Effect.promise(async () => {
    const entries = await Fs.readdir(root).catch((): Array<string> => [])
    for (const entry of entries) {
      const match = /^tether-cluster-(\d+)-[0-9a-f]{8}$/.exec(entry)
      if (match === null) continue
      const dir = Path.join(root, entry)
      const pid = Number(match[1])
      if (owned.has(dir)) continue
      if (pid !== process.pid) {
        try {
          process.kill(pid, 0)
          continue
        } catch (error) {
          // EPERM: the process exists (another user's).
          if ((error as { readonly code?: string }).code !== "ESRCH") continue
        }
      }
      await Fs.rm(dir, { recursive: true, force: true }).catch(() => undefined)
    }
  })
