/**
 * A runner's host lease: what stops its agents when it can no longer reach the cluster.
 *
 * A runner holds its shards through locks that expire: the table locks `NodeCluster` uses by default are rows stamped
 * at each refresh that another runner may take `shardLockExpiration` after the last one (the advisory locks of
 * Effect's default belong to the lock connection, which the server closes once it has been idle that long), and a
 * runner that is frozen (SIGSTOP, a stalled VM) or cut off from the database cannot refresh them; another runner
 * then takes its shards and starts its sessions' CLIs again. The frozen runner's own CLIs are not frozen with it, and
 * its finalizers cannot run: something else must end them.
 *
 * That something is the transport's host-death keeper (`@tether/transport-node`'s watchdog), a process of its own.
 * The runner renews a lease at every lock refresh that reached the database and kept every shard it asked about
 * (`locks.ts`), to the moment its locks might be gone: the refresh's *start* plus the TTL (the lock's stamp, and the
 * idle timer of an advisory lock's connection, start no earlier than the refresh's statement). When the lease runs out before the next renewal, the keeper kills the whole trees of the
 * runner's CLIs. The lease travels through a board shared by a global symbol (the contract is `LeaseBoard` in
 * transport-node's `internal/watchdog.ts`: `holders`, a map from holder to the end of its lease in
 * `performance.now()` milliseconds, and `listeners`, called after each change), so neither package imports the
 * other; a transport without a keeper ignores it.
 *
 * On the runner itself, a prompt is not written to a CLI once the lease has run out ({@link expired}): a runner
 * that resumes after a freeze must not run a prompt whose session may be live elsewhere.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** The board shared with the transport's watchdog (see the module's description). */
interface LeaseBoard {
  readonly holders: Map<object, number>
  readonly listeners: Set<() => void>
}

/** The process's board: the same object the transport's watchdog reads, whichever module made it first. */
export const board: LeaseBoard = (() => {
  const key = Symbol.for("@tether/host-lease")
  const global = globalThis as { [key]?: LeaseBoard }
  return global[key] ??= { holders: new Map(), listeners: new Set() }
})()

const notify = (target: LeaseBoard) => {
  for (const listener of target.listeners) listener()
}

/** One runner's lease: renewed for `remainingMillis` from now. */
export interface Lease {
  readonly renew: (remainingMillis: number) => void
}

/**
 * Holds a lease on `target` for the scope: it runs for `ttl` from now, until renewed; released with the scope (the
 * keeper then goes back to watching for the host's death only, unless another runner of the process holds one).
 */
export const hold = (
  ttl: Duration.Duration,
  target: LeaseBoard = board
): Effect.Effect<Lease, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const holder = {}
      const renew = (remainingMillis: number) => {
        target.holders.set(holder, performance.now() + remainingMillis)
        notify(target)
      }
      renew(Duration.toMillis(ttl))
      return { holder, renew }
    }),
    ({ holder }) =>
      Effect.sync(() => {
        target.holders.delete(holder)
        notify(target)
      })
  )

/** Whether a lease of this process has run out (never, without one). */
export const expired = (target: LeaseBoard = board, now?: number): boolean => {
  if (target.holders.size === 0) return false
  const at = now ?? performance.now()
  for (const end of target.holders.values()) if (end <= at) return true
  return false
}
