/**
 * The cluster a Node process joins: Effect's socket runner (`NodeClusterSocket`) with its shard locks and message
 * storage in PostgreSQL (`@effect/sql-pg`), and the `SqlClient` the cluster registry keeps its sessions with. A
 * runner gives its address (where the other nodes reach it); a process without one is a client only: it sends to
 * sessions and holds no shards.
 *
 * What must be the same on every node, runners and clients alike: the database, `shardsPerGroup` (a client and a
 * runner that disagree compute different shards for an id, and the call waits forever without an error), the
 * shard groups, and the registry's `tablePrefix`. The rest of the sharding configuration is read from the
 * environment as Effect's cluster reads it (`SHARDS_PER_GROUP`, `SHARD_LOCK_EXPIRATION`, …), and `sharding`
 * overrides it.
 *
 * Every node starts from {@link shardingDefaults} (table locks that expire after 45 s, refreshed every 5 s; a health
 * check every second; assignments read every 500 ms), under the environment and `sharding`.
 *
 * How fast a dead runner's sessions move: every runner pings the others every `runnerHealthCheckInterval` (at most
 * every 500 ms); one whose port refuses two pings (its process is gone) is marked unhealthy and its shard locks are
 * released at once, and the other runners take its shards at their next assignment read (a median under 2 s from a
 * SIGKILL to a session's next answer with the defaults). A runner that is frozen or cut off is not gone: its locks,
 * and its sessions, move when they expire (`shardLockExpiration`), when its host lease (below) has ended its CLIs.
 *
 * What a database outage costs: nothing, up to `Options.outageTolerance` (30 s whenever it begins, with the
 * defaults). Effect's `Sharding` force-interrupts every entity of a runner at the first lock refresh that fails or
 * times out (`refreshShardLocks` and `markShardLocksUnhealthy` in Effect's `Sharding.ts`, 4.1.0); a runner's lock
 * storage here answers such a refresh "still held" within the tolerance, which is true of table locks (nobody can
 * take them while the database is down, nor before they expire). Running turns go on and their results reach their
 * callers; what they could not save is written when the database answers; a new send fails at once as
 * `SessionUnavailable` (requeue it, or retry it with the same prompt id). Past the tolerance, `Sharding` does what it
 * does: the runner's sessions end (running turns go on through `drainTimeout`, their outcomes reach the ledger when
 * the database returns, callers get typed errors) and each comes back as a new generation with its next message.
 *
 * A runner that cannot reach the cluster stops its agents. A runner holds a host lease (`Options.lease`, default
 * `shardLockExpiration`), renewed at each lock refresh that kept every shard it asked about, for the lease from the
 * refresh's start. The transport's watchdog (`@tether/transport-node`), a process of its own, SIGKILLs the whole
 * trees of the runner's CLIs when the lease runs out before the next renewal: a runner frozen (SIGSTOP), cut off
 * from the database or starved past its locks' expiry does not leave its agents running while its sessions start
 * again elsewhere. The runner writes no prompt past its lease (`SessionUnavailable`: nothing was delivered).
 *
 * @example
 * ```ts
 * import { NodeCluster } from "@tether/cluster"
 * import { Redacted } from "effect"
 *
 * const postgres = Redacted.make("postgres://tether:…@db.internal:5432/tether")
 *
 * // A runner, reachable by the other nodes at 10.0.0.7:34431.
 * const RunnerCluster = NodeCluster.layer({
 *   postgres,
 *   runner: { host: "10.0.0.7", port: 34431 },
 *   sharding: { shardsPerGroup: 300 }
 * })
 *
 * // A client (an HTTP front end): the same database and shard count, no address.
 * const ClientCluster = NodeCluster.layer({ postgres, sharding: { shardsPerGroup: 300 } })
 * ```
 *
 * @since 0.1.0
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import * as PgClient from "@effect/sql-pg/PgClient"
import { TetherError } from "@tether/core"
import * as Cause from "effect/Cause"
import type * as MessageStorage from "effect/cluster/MessageStorage"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as RunnerHealth from "effect/cluster/RunnerHealth"
import * as Runners from "effect/cluster/Runners"
import * as RunnerStorage from "effect/cluster/RunnerStorage"
import type * as Sharding from "effect/cluster/Sharding"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SocketRunner from "effect/cluster/SocketRunner"
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as RpcSerialization from "effect/rpc/RpcSerialization"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type * as SocketServer from "effect/socket/SocketServer"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as Lease from "./internal/lease.ts"
import * as Locks from "./internal/locks.ts"
import * as ShardingSettings from "./internal/sharding.ts"

/**
 * Options of {@link layer}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** The PostgreSQL URL of the cluster (every node's is the same database). */
  readonly postgres: Redacted.Redacted<string> | string
  /** The address the other nodes reach this runner at; none: a client only. */
  readonly runner?: {
    readonly host: string
    readonly port: number
    /** Where to listen, when it differs from the address (e.g. `0.0.0.0` behind NAT). */
    readonly listenHost?: string | undefined
  } | undefined
  /** Sharding settings over the environment's (`shardsPerGroup` above all: the same on every node). */
  readonly sharding?: Partial<Omit<ShardingConfig.ShardingConfig["Service"], "runnerAddress" | "runnerListenAddress">>
  /** The size of the database connection pool (default: `@effect/sql-pg`'s). */
  readonly maxConnections?: number | undefined
  /**
   * A runner's host lease (see {@link layer}): how long after the start of its last lock refresh that kept every
   * shard the runner's CLIs may live without another. Default: `shardLockExpiration`, the time after which the
   * database may give the runner's locks, and so its sessions, to another runner. It must be longer than the lock
   * refresh interval (`min(shardLockRefreshInterval, shardLockExpiration / 3)`), else the layer fails with
   * `InvalidConfig`. `false`: no lease (the CLIs of a frozen or cut-off runner live until it resumes). Ignored on a
   * client.
   */
  readonly lease?: Duration.Input | false | undefined
  /**
   * How long a runner keeps its sessions while its shard lock refreshes fail (the database down, unreachable or
   * hanging), counted from the start of the last refresh that reached it (see {@link layer}); a refresh comes every
   * lock interval, so an outage shorter than the tolerance less one lock interval always rides through. Default and
   * most: `shardLockExpiration` less two lock intervals (35 s with the defaults: outages of up to 30 s cost nothing),
   * with table locks (`shardLockDisableAdvisory`, the default); none with advisory locks. A longer one, or one with
   * advisory locks, fails the layer with `InvalidConfig`. `false`: none (the first failing refresh ends every
   * session of the runner, as Effect's `Sharding` does). Ignored on a client.
   */
  readonly outageTolerance?: Duration.Input | false | undefined
}

/**
 * The sharding settings `NodeCluster.layer` starts from, under the environment's (as Effect's cluster reads it) and
 * `Options.sharding`: where they differ from Effect's defaults, what a database outage of up to 30 s and a
 * failover of about two seconds after a runner's death take (docs/cluster.md, "Deployment").
 *
 * | setting | here | Effect's | why |
 * | --- | --- | --- | --- |
 * | `shardLockDisableAdvisory` | `true` | `false` | table locks outlive a lost connection: the runner keeps its shards through an outage |
 * | `shardLockExpiration` | 45 s | 35 s | room for an outage of 30 s, the lock interval before it and one after it |
 * | `shardLockRefreshInterval` | 5 s | 10 s | the lock interval; the outage tolerance is the expiration less two of them |
 * | `runnerHealthCheckInterval` | 1 s | 1 minute | how often a runner pings the others (the check for gone ones: at most every 500 ms) |
 * | `refreshAssignmentsInterval` | 500 ms | 3 s | every node sees the new assignments soon after |
 * | `sendRetryInterval` | 100 ms | 100 ms | a waiting call is re-sent soon after its shard has moved |
 *
 * @category models
 * @since 0.1.0
 */
export const shardingDefaults: Partial<ShardingConfig.ShardingConfig["Service"]> = {
  shardLockDisableAdvisory: true,
  shardLockExpiration: Duration.seconds(45),
  shardLockRefreshInterval: Duration.seconds(5),
  runnerHealthCheckInterval: Duration.seconds(1),
  refreshAssignmentsInterval: Duration.millis(500),
  sendRetryInterval: Duration.millis(100)
}

/** The sharding configuration of a node (`internal/sharding.ts`) over {@link shardingDefaults}. */
const shardingConfig = (options: Partial<ShardingConfig.ShardingConfig["Service"]>) =>
  Layer.effect(ShardingConfig.ShardingConfig, ShardingSettings.config(shardingDefaults, options))

/**
 * How a runner tells whether another runner is alive: a ping over the cluster's own socket, each bounded by
 * `pingTimeout`, tried `pingAttempts` times 250 ms apart. Effect's socket runner (`RunnerHealth.layerPing`) waits
 * 10 s for each of 6 attempts 500 ms apart, so a runner that was SIGKILLed (its port refuses the ping at once) is
 * known to be gone only 2.5 s after the health check first tried it; here, after half a second. A runner that is
 * frozen (its port accepts, nothing answers) is known gone after about `pingAttempts × pingTimeout`, about as long as
 * its shard locks take to expire.
 */
const pingTimeout = Duration.seconds(2)
const pingAttempts = 3

const runnerHealth = Layer.effect(
  RunnerHealth.RunnerHealth,
  Effect.gen(function*() {
    const runners = yield* Runners.Runners
    return RunnerHealth.RunnerHealth.of({
      isAlive: (address) =>
        runners.ping(address).pipe(
          Effect.timeout(pingTimeout),
          Effect.retry({ times: pingAttempts - 1, schedule: Schedule.spaced("250 millis") }),
          Effect.isSuccess
        )
    })
  })
).pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))

/** How often, at most, a runner checks whether the others are gone (a refused connection costs next to nothing). */
const goneCheckInterval = Duration.millis(500)

/**
 * Every runner's watch over the others (`Locks.releaseGone`): one whose port refuses two pings 100 ms apart has its
 * shard locks released at once; checked every `runnerHealthCheckInterval`, at most every 500 ms.
 */
const goneWatch = Layer.effectDiscard(
  Effect.gen(function*() {
    const runners = yield* Runners.Runners
    const storage = yield* RunnerStorage.RunnerStorage
    const config = yield* ShardingConfig.ShardingConfig
    if (Option.isNone(config.runnerAddress)) return
    yield* Effect.forkScoped(Locks.releaseGone({
      storage,
      ping: runners.ping,
      self: config.runnerAddress.value,
      interval: Duration.min(Duration.fromInputUnsafe(config.runnerHealthCheckInterval), goneCheckInterval),
      timeout: pingTimeout,
      attempts: 2,
      spacing: Duration.millis(100)
    }))
  })
).pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))

/**
 * The runner's shard lock storage (`internal/locks.ts`) over Effect's SQL one: it rides out a database outage of up
 * to the tolerance, releases the locks of a runner whose port refused every ping of the health check, and renews
 * the host lease (`internal/lease.ts`), held while the layer is.
 */
const lockStorage = (
  lease: Duration.Input | false | undefined,
  outageTolerance: Duration.Input | false | undefined
) =>
  Layer.effect(
    RunnerStorage.RunnerStorage,
    Effect.gen(function*() {
      const storage = yield* RunnerStorage.RunnerStorage
      const config = yield* ShardingConfig.ShardingConfig
      const expiration = Duration.fromInputUnsafe(config.shardLockExpiration)
      const interval = Duration.min(
        Duration.fromInputUnsafe(config.shardLockRefreshInterval),
        Duration.divideUnsafe(expiration, 3)
      )
      const problems: Array<string> = []
      const ttl = lease === false
        ? undefined
        : lease === undefined
        ? expiration
        : Option.getOrUndefined(Duration.fromInput(lease))
      if (lease !== false && (ttl === undefined || !Duration.isGreaterThan(ttl, interval))) {
        problems.push(
          `lease: ${String(lease)} is not a duration longer than the lock refresh interval (${
            Duration.format(interval)
          })`
        )
      }
      const most = Duration.subtract(expiration, Duration.times(interval, 2))
      const tolerance = outageTolerance === false
        ? Duration.zero
        : outageTolerance === undefined
        ? (config.shardLockDisableAdvisory
          ? Duration.max(Duration.zero, most)
          : Duration.zero)
        : Option.getOrUndefined(Duration.fromInput(outageTolerance))
      if (tolerance === undefined || Duration.isGreaterThan(tolerance, most)) {
        problems.push(
          `outageTolerance: ${
            String(outageTolerance)
          } is not a duration of at most shardLockExpiration less two lock ` +
            `intervals (${Duration.format(most)})`
        )
      } else if (outageTolerance !== undefined && outageTolerance !== false && !config.shardLockDisableAdvisory) {
        problems.push(
          "outageTolerance needs table locks (shardLockDisableAdvisory: true): advisory locks are gone with the " +
            "connection that held them"
        )
      }
      if (problems.length > 0) return yield* new TetherError.InvalidConfig({ problems })
      return Locks.make(storage, {
        lease: ttl === undefined ? undefined : { ttl, lease: yield* Lease.hold(ttl) },
        tolerance: tolerance!,
        attempt: Duration.divideUnsafe(interval, 2)
      })
    })
  )

/**
 * `NodeClusterSocket.layer({ storage: "sql" })` of `@effect/platform-node` for a runner, with
 * {@link runnerHealth} instead of its health check (which it does not let a caller replace), {@link goneWatch}
 * beside it, {@link lockStorage} over its lock storage and {@link shardingConfig} for its configuration.
 */
const socketRunner = (
  sharding: Partial<ShardingConfig.ShardingConfig["Service"]>,
  options: Options
) =>
  Layer.provide(SocketRunner.layer, [NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]).pipe(
    Layer.provide(runnerHealth),
    Layer.merge(goneWatch),
    Layer.provideMerge(SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest))),
    Layer.provide(
      lockStorage(options.lease, options.outageTolerance).pipe(Layer.provide(Layer.orDie(SqlRunnerStorage.layer)))
    ),
    Layer.provide(shardingConfig(sharding)),
    Layer.provide(RpcSerialization.layerSchemaBinary({}))
  )

/**
 * `NodeClusterSocket.layer({ clientOnly: true, storage: "sql" })` of `@effect/platform-node`, with
 * {@link shardingConfig} for its configuration.
 */
const socketClient = (sharding: Partial<ShardingConfig.ShardingConfig["Service"]>) =>
  Layer.provide(SocketRunner.layerClientOnly, NodeClusterSocket.layerClientProtocol).pipe(
    Layer.provideMerge(SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest))),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(shardingConfig(sharding)),
    Layer.provide(RpcSerialization.layerSchemaBinary({}))
  )

/**
 * Joins the cluster: a runner (with `runner`) or a client. Provides `Sharding` (what `ClusterRegistry`'s layers
 * need), the cluster's `Runners` and `MessageStorage`, and the database's `SqlClient`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage | SqlClient.SqlClient,
  Config.ConfigError | SocketServer.SocketServerError | SqlError | TetherError.InvalidConfig
> => {
  const runner = options.runner
  const database = PgClient.layer({
    url: typeof options.postgres === "string" ? Redacted.make(options.postgres) : options.postgres,
    ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
  })
  const cluster = runner === undefined
    ? socketClient({ ...options.sharding, runnerAddress: Option.none() })
    : socketRunner({
      ...options.sharding,
      runnerAddress: Option.some(RunnerAddress.make(runner.host, runner.port)),
      runnerListenAddress: runner.listenHost === undefined
        ? Option.none()
        : Option.some(RunnerAddress.make(runner.listenHost, runner.port))
    }, options)
  return cluster.pipe(
    // A peer's socket that breaks (a runner frozen or cut off, then back; a node killed) fails the server's handler
    // of that connection with a SocketError that no caller receives: an expected fault of a cluster, whose calls
    // fail typed where they were made, not an error of this process. Reported as a warning.
    Layer.provide(Layer.succeed(References.UnhandledLogLevel, "Warn")),
    Layer.provideMerge(database)
  )
}

/**
 * The teardown of a runner process's main program: a runner stopped by SIGTERM or SIGINT (its main fiber
 * interrupted, then its layers released: each session's running turn finished within the drain, the session saved
 * and released, the shards handed off) exits 0, as a server that shut down cleanly does. Effect's default teardown
 * exits 130 for any interruption, which an orchestrator reads as a failed stop. Anything else exits as the default
 * says: a failure, or a defect while draining, exits non-zero.
 *
 * @example
 * ```ts
 * import { NodeRuntime } from "@effect/platform-node"
 * import { NodeCluster } from "@tether/cluster"
 * import { Effect } from "effect"
 *
 * declare const program: Effect.Effect<never> // Effect.never, provided with the runner's layers
 *
 * NodeRuntime.runMain(program, { teardown: NodeCluster.teardown })
 * ```
 *
 * @category running
 * @since 0.1.0
 */
export const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
