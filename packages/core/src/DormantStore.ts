/**
 * Where a registry keeps its dormant conversations: the conversation state a CLI left behind (Claude's transcript,
 * Codex's rollout, in the directory the CLI ran in) and a small record that says how to resume it.
 *
 * A registry with `dormancy: true` starts every conversation's CLI in a directory of the store (`allocate`, given to
 * the CLI as its `Session.Conversation` placement), and, when the conversation has been idle for `idleTimeToLive` or
 * is evicted to make room, closes the CLI and keeps the conversation (`save`). The next message for its id resumes
 * it from that directory (`load`, then `awake` once the CLI runs again).
 *
 * {@link layerFileSystem} keeps both in a local directory that survives a host restart (`effect/FileSystem`: provide
 * `NodeServices.layer` of `@effect/platform-node`); {@link layerMemory} keeps records in memory (tests, and hosts
 * whose dormant conversations need not outlive the process). A store over a database (the cluster's Postgres, which
 * saves the same files) implements the same interface.
 *
 * @example
 * ```ts
 * import { NodeServices } from "@effect/platform-node"
 * import { ClaudeRegistry } from "@tether/claude"
 * import { DormantStore } from "@tether/core"
 * import { NodeTransport } from "@tether/transport-node"
 * import { Layer } from "effect"
 *
 * const Registry = ClaudeRegistry.layer({ capacity: 8, idleTimeToLive: "2 minutes", dormancy: true }).pipe(
 *   Layer.provide(DormantStore.layerFileSystem({ directory: "/var/lib/app/conversations" })),
 *   Layer.provide([NodeTransport.layer(), NodeServices.layer])
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Path from "effect/Path"
import type { DormantStateCorrupt, DormantStoreFailed } from "./internal/registry/errors.ts"
import * as internal from "./internal/registry/store.ts"

export {
  /** @since 0.1.0 */
  DormantNotFound,
  /** @since 0.1.0 */
  DormantStateCorrupt,
  /** @since 0.1.0 */
  DormantStoreFailed,
  /** @since 0.1.0 */
  RestoreFailed
} from "./internal/registry/errors.ts"

/**
 * What the store keeps of a dormant conversation besides its directory.
 *
 * @category models
 * @since 0.1.0
 */
export interface Record {
  /** The registry's id of the conversation. */
  readonly id: string
  /** The fingerprint of its configuration: waking it with another is a `SessionConflict`. */
  readonly fingerprint: string
  /** The CLI's own conversation id (Claude's session id, Codex's thread id), resumed on wake. */
  readonly conversationId: string
  /** The directory the CLI kept its state in (its `Session.Conversation` placement). */
  readonly directory: string
  /**
   * When the record was written, epoch milliseconds: when it went dormant, or, for a conversation a dead host left
   * running, when that host first recorded it.
   */
  readonly since: number
}

/**
 * A dormant conversation as `list` reports it: its record, or why it cannot be read.
 *
 * @category models
 * @since 0.1.0
 */
export type Listing =
  | { readonly _tag: "Dormant"; readonly record: Record }
  | { readonly _tag: "Corrupt"; readonly id: string; readonly reason: string }

/**
 * The store's operations. Every one is bounded by the store itself (a local disk, or a database client's timeouts).
 *
 * @category models
 * @since 0.1.0
 */
export interface Store {
  /** A new, empty directory for a CLI's conversation state. */
  readonly allocate: Effect.Effect<string, DormantStoreFailed>
  /**
   * Records the conversation as resumable from the directory its CLI writes: when it goes dormant, and while it runs
   * (from its first turn), so that a host that dies without releasing its registry finds it dormant at its restart.
   * Replaces the id's record.
   */
  readonly save: (record: Record) => Effect.Effect<void, DormantStoreFailed>
  /** The id's dormant record, if it has one. */
  readonly load: (id: string) => Effect.Effect<Option.Option<Record>, DormantStateCorrupt | DormantStoreFailed>
  /** Every dormant conversation. */
  readonly list: Effect.Effect<ReadonlyArray<Listing>, DormantStoreFailed>
  /** Forgets a conversation: its record and its directory (it was deleted, or ended for good). */
  readonly remove: (id: string) => Effect.Effect<void, DormantStoreFailed>
  /** Removes a directory no conversation needs any more (a conversation that ended without going dormant). */
  readonly release: (directory: string) => Effect.Effect<void, DormantStoreFailed>
}

/**
 * The dormant store a registry with `dormancy: true` uses.
 *
 * @category services
 * @since 0.1.0
 */
export class DormantStore extends Context.Service<DormantStore, Store>()("@tether/core/DormantStore") {}

/**
 * A store in a local directory: `<directory>/conversations/<id>.json` holds each dormant conversation's record,
 * `<directory>/cli/<boot>-<pid namespace>-<pid>-<start>-<random>/` each CLI's state (named by the process that
 * allocated it, read from `/proc`; `<random>` alone without one), in place (going dormant copies nothing). It survives
 * a host restart: a registry made over it lists the conversations it left and resumes them (with their configuration:
 * see `SessionRegistry.Registry.wake`). A record is written whole to a temporary file and renamed, so a crash never
 * leaves half of one. Made over a directory a host left without its finalizers (SIGKILL, a crash), it removes the
 * CLI directories no record names whose process is gone (of this boot and PID namespace, no process with that pid and
 * start): that host's warm CLIs' and its new conversations' that had not ended a turn. One live registry uses a
 * directory at a time.
 *
 * Gotcha: the directory is the CLI's whole configuration directory (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`): the CLI
 * does not see the user's `~/.claude` login or settings; pass an API key in the session's options.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerFileSystem = (options: {
  readonly directory: string
}): Layer.Layer<DormantStore, DormantStoreFailed, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(DormantStore)(internal.fileSystem(options.directory))

/**
 * A store whose records live in memory, and whose directories are names (`memory:<n>`): for tests over
 * `MockTransport`, whose simulated CLIs keep no files. Each build of the layer is a new, empty store.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerMemory: Layer.Layer<DormantStore> = Layer.sync(DormantStore)(internal.memory)
