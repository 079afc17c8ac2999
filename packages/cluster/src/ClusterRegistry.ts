/**
 * A session registry across machines, on Effect's own cluster engine (`effect/cluster`): each session id is an
 * entity, sharded over the runners; the registry contract's operations (send, run, interrupt, answer a permission,
 * subscribe from a seq, snapshot, list, evict) are its messages. A caller's code is the same as with a local
 * registry: it uses the host's registry service (`SessionRegistry.Service`); moving from one process to a cluster
 * is a Layer change.
 *
 * - **Runners** own the CLI processes of the sessions whose shards they hold, through an ordinary
 *   `SessionRegistry` each: admission, pins, idle TTL, capacity with LRU eviction, bounded shutdown and whole-tree
 *   teardown hold per runner, with the settings given to {@link ClusterBinding.layerRunner}. A runner that shuts
 *   down drains: each session's running turn finishes (within `drainTimeout`; the cluster's
 *   `entityTerminationTimeout` must be longer), the session is saved and released, and its shard moves.
 * - **Warm pools are per runner.** A runner keeps the warm CLIs its settings name (`RunnerSettings.warm`); a session
 *   placed on it that starts a new conversation takes one instead of spawning a CLI, and the warm CLI's directory
 *   becomes the session's conversation directory. A session restored from a save starts cold, resuming it.
 * - **A session survives its runner.** After every turn, the CLI's own conversation state (Claude's transcript
 *   under its config dir, Codex's thread rollout under `CODEX_HOME`) is saved to the cluster's database, with the
 *   turn's outcome in a ledger. Whichever runner gets the next message for the id restores it and resumes the
 *   conversation (`--resume`, `thread/resume`): the model sees the earlier turns, the host sees the same id with a
 *   new generation.
 * - **Delivery stays honest.** The cluster re-sends a request whose runner died to the session's next owner; the
 *   ledger answers a prompt it has seen with the turn's saved outcome, or, when its runner died before the turn
 *   ended, with `SessionRetired` (`deliveryUncertain`: see {@link isRunnerLost}). A prompt never runs twice.
 *   Permission request ids carry the generation that asked, so an answer (or an interrupt of a handle or a turn)
 *   for a session that moved fails with `GenerationChanged` (safe to requeue).
 * - **Events** are numbered in seqs that continue across generations. With `durableEvents`, every event is saved
 *   with its turn, and a subscriber that reconnects (the client does it by itself when the session moves) resumes
 *   from its last seq; what a lost runner had not saved (the turn in flight) arrives as a `Lag` whose `reason` is
 *   `"lost"` ({@link Gap}), never silently.
 *
 * What the configuration must be: plain data with a `Schema` (it crosses the wire and is stored, to restart the
 * session elsewhere). Functions (a permission policy, hook callbacks) and secrets belong in the kind's `acquire`,
 * which runs on the runner.
 *
 * @example
 * ```ts
 * import { ClaudeSession } from "@tether/claude"
 * import { Permission, SessionRegistry } from "@tether/core"
 * import { ClusterRegistry } from "@tether/cluster"
 * import { Effect, Schema } from "effect"
 *
 * // The configuration a caller chooses per session: data.
 * const ChatConfig = Schema.Struct({ model: Schema.optional(Schema.String) })
 *
 * // How a runner starts a session for it: the policy and the rest of the options live here.
 * class Chats extends SessionRegistry.Service<Chats>()("app/Chats", {
 *   acquire: (_id, config: typeof ChatConfig.Type) =>
 *     ClaudeSession.make({ ...config, policy: Permission.allowTools(["Read"]) }),
 *   fingerprint: SessionRegistry.fingerprint
 * }) {}
 *
 * // One process: Chats.layer({ capacity: 32 }). A cluster: runners and clients.
 * const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })
 *
 * const program = Effect.gen(function*() {
 *   const chats = yield* Chats // the same code either way
 *   const result = yield* Effect.scoped(
 *     Effect.flatMap(chats.getOrCreate("chat-42", { model: "sonnet" }), (chat) => chat.run("Hello"))
 *   )
 *   console.log(result.text)
 * })
 * ```
 *
 * @since 0.1.0
 */
import { type EventLog, type SessionRegistry, TetherError, type Turn } from "@tether/core"
import type * as Sharding from "effect/cluster/Sharding"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import type * as Migrator from "effect/sql/Migrator"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as Client from "./internal/client.ts"
import * as Protocol from "./internal/protocol.ts"
import * as Runner from "./internal/runner.ts"

/**
 * A warm pool a runner keeps (see {@link RunnerSettings}): `size` started, initialized CLIs for new conversations
 * whose configuration has the pool key of `config` (the kind's `warm.key`; by default its shape).
 *
 * @category models
 * @since 0.1.0
 */
export interface WarmPool<C> {
  readonly config: C
  readonly size: number
}

/**
 * A runner's settings: the registry's (`capacity`, `idleTimeToLive`, `onConflict`, `admissionTimeout`,
 * `shutdownConcurrency`, `warmRefillDelay`, per runner) and the cluster's own.
 *
 * | setting | default | meaning |
 * | --- | --- | --- |
 * | `stateDirectory` | the system's temporary directory | where the runner keeps the conversation directories of its live sessions, in a directory of its own (`tether-cluster-<pid>-<random>`; each session's is removed when it closes, the runner's at release). What a runner killed without its finalizers left there is removed by the next runner that starts with the same `stateDirectory` (a directory whose process is gone); nothing else in it is touched |
 * | `drainTimeout` | 10 s | how long a session whose entity stops (the runner drains, its shard moves, or `Sharding` force-interrupts the runner's entities because its lock refreshes failed past the outage tolerance) may finish its running turn before it is closed anyway; the runner takes its shards again only once such turns have ended. `0`: closed at once |
 * | `durableEvents` | `false` | the default for sessions whose opener does not say (see {@link ClientSettings}) |
 * | `tablePrefix` | `"tether"` | the prefix of the cluster registry's tables; the same on every node |
 * | `entityIdleTime` | the cluster's `entityMaxIdleTime` | how long an entity whose session is closed stays resident |
 * | `finalSaveTimeout` | 30 s | how long the last save of a closing session may take (a database that hangs must not hang a release, an eviction or a drain); past it the session closes, and what it did not save is kept (see `unsavedRetention`) |
 * | `warm` | none | the warm pools this runner keeps ({@link WarmPool}): a session that starts a new conversation on it takes one of its warm CLIs instead of spawning one; a session restored from a save (a conversation to resume) starts cold. Warm CLIs count against the runner's `capacity`, refill after `warmRefillDelay`, and are closed with the runner. A client in the same process (`layer`) resizes them with `warm` and reads them with `pools` |
 * | `unsavedRetention` | 10 minutes | how long the runner keeps, and tries every second to write, what a session could not save (the database was unreachable): a turn's outcome for the ledger, the last save of a closed session. Written when the database returns, so that a turn that completed is never reported lost to a retry with its prompt id; written before the session's next generation starts on this runner. Past it (or if the runner dies first) the session's next owner restores it as a lost generation from its last saved turn, and its unsaved turns are reported lost (`deliveryUncertain`) |
 *
 * @category models
 * @since 0.1.0
 */
export interface RunnerSettings<C = never> extends SessionRegistry.Settings {
  readonly warm?: ReadonlyArray<WarmPool<C>> | undefined
  readonly stateDirectory?: string | undefined
  readonly drainTimeout?: Duration.Input | undefined
  readonly durableEvents?: boolean | undefined
  readonly tablePrefix?: string | undefined
  readonly entityIdleTime?: Duration.Input | undefined
  readonly finalSaveTimeout?: Duration.Input | undefined
  readonly unsavedRetention?: Duration.Input | undefined
}

/**
 * A client's settings.
 *
 * - `durableEvents`: sessions this client opens save their events (with each turn) so that a subscription can
 *   resume from any seq after their runner is lost; without it (the runner's default, `false`), events of earlier
 *   generations are reported as a gap (`reason: "not-durable"`).
 * - `callTimeout` (default: none): how long a call that answers without waiting for a turn (`getOrCreate`, `get`,
 *   `send`, `snapshot`, `interrupt`, `answerPermission`, `pendingPermissions`, `control`, `forceEvict`) may wait
 *   for an answer. While no runner can serve the session (a database outage keeps every runner from its shard
 *   locks; the session moves after its runner died) the cluster holds a call until one can: with `callTimeout`, the
 *   call fails typed at the deadline instead (`SessionUnavailable`, safe to requeue; for a `send`, whose prompt may
 *   have reached a runner meanwhile, a runner-lost `SessionRetired`, to retry with the same `promptId`). `run`, a
 *   turn's `result` and a graceful `evict` wait for a turn and are not bounded by it: bound them with the session's
 *   turn timeout, or the host's own.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClientSettings {
  readonly durableEvents?: boolean | undefined
  readonly tablePrefix?: string | undefined
  readonly callTimeout?: Duration.Input | undefined
}

/**
 * Why a runner could not start: its database failed while it created or migrated the cluster registry's tables
 * (unreachable, or its role may not create tables), or its registry settings are invalid (`InvalidConfig`). The
 * layer fails with it, typed, instead of dying.
 *
 * @category errors
 * @since 0.1.0
 */
export type StartError = SqlError.SqlError | Migrator.MigrationError | TetherError.InvalidConfig

/**
 * A registry service bound to the cluster: its session entity, and the layers that provide it.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterBinding<Self, R, C = never> {
  /** The session entity's type: `tether/<the service's key>`. */
  readonly entityType: string
  /**
   * This process runs sessions: it holds shards and owns the CLI processes of their sessions. Requires the cluster
   * (`Sharding`, e.g. `NodeCluster.layer` with a runner address), its database (`SqlClient`) and what the kind's
   * sessions need (a `Transport`). It does not provide the registry service: add {@link layerClient} (or use
   * {@link layer}) where this process also calls it.
   */
  readonly layerRunner: (
    settings?: RunnerSettings<C>
  ) => Layer.Layer<never, StartError, Sharding.Sharding | SqlClient.SqlClient | R>
  /**
   * The registry service, calling the sessions wherever they run. It reads the database only when called (`list`,
   * `size`), so it starts without it; a call whose runner or database cannot be reached fails with
   * `SessionUnavailable`, or, for a send and the wait for its turn, with a runner-lost `SessionRetired` (see
   * {@link isRunnerLost}).
   */
  readonly layerClient: (
    settings?: ClientSettings
  ) => Layer.Layer<Self, TetherError.InvalidConfig, Sharding.Sharding | SqlClient.SqlClient>
  /**
   * Both: this process runs sessions and calls them. Its registry's `warm` and `pools` are this process's runner's
   * (with {@link layerClient} alone, `warm` fails with `InvalidConfig` and `pools` is empty: the pools are the
   * runners').
   */
  readonly layer: (
    settings?: RunnerSettings<C> & ClientSettings
  ) => Layer.Layer<Self, StartError, Sharding.Sharding | SqlClient.SqlClient | R>
}

/** A client's `callTimeout`, checked: a duration that does not read, or is not positive, is `InvalidConfig`. */
const callTimeoutOf = (input: Duration.Input | undefined) => {
  if (input === undefined) return Effect.succeedNone
  const decoded = Duration.fromInput(input)
  if (Option.isSome(decoded) && Duration.isPositive(decoded.value) && !Number.isNaN(input)) {
    return Effect.succeedSome(decoded.value)
  }
  return Effect.fail(
    new TetherError.InvalidConfig({
      problems: [
        `callTimeout must be a positive duration, got ${
          typeof input === "object" ? JSON.stringify(input) : String(input)
        }`
      ]
    })
  )
}

/**
 * Binds a registry service (made with `SessionRegistry.Service`) to the cluster. `config` is the schema of the
 * service's configuration: it is sent with `getOrCreate` and stored, so that any runner can start the session.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <Self, Id extends string, C, E, R, A extends Turn.TurnResult, TE, CE>(
  service: SessionRegistry.ServiceClass<Self, Id, C, E, R, A, TE>,
  options: { readonly config: Schema.Codec<C, CE> }
): ClusterBinding<Self, R, C> => {
  const entity = Protocol.make(`tether/${service.key}`, options.config)
  const layerRunner = (settings: RunnerSettings<C> = {}) =>
    Runner.layer({ name: service.key, entity, kind: service.kind, config: options.config, settings }) as Layer.Layer<
      never,
      StartError,
      Sharding.Sharding | SqlClient.SqlClient | R
    >
  const layerClient = (settings: ClientSettings = {}) =>
    Layer.effect(service)(
      Effect.flatMap(callTimeoutOf(settings.callTimeout), (callTimeout) =>
        Client.make<C, CE, E, A, TE>({
          entity,
          tablePrefix: settings.tablePrefix,
          durableEvents: settings.durableEvents,
          callTimeout: Option.getOrUndefined(callTimeout)
        }))
    ) as Layer.Layer<Self, TetherError.InvalidConfig, Sharding.Sharding | SqlClient.SqlClient>
  return {
    entityType: entity.type,
    layerRunner,
    layerClient,
    // The client is built on the runner: it reaches the runner's warm pools.
    layer: (settings = {}) => Layer.provideMerge(layerClient(settings), layerRunner(settings))
  }
}

/**
 * Options of `send` and `run` through the cluster: the registry's, and `promptId`, the key the session's turn ledger
 * knows the prompt by (a new UUID per call by default). A send with a key the session has seen is never written to
 * a CLI again: it is answered with that turn (its outcome once it ended, or, if the runner that had it died first,
 * a `SessionRetired` whose delivery is uncertain). A host that retries a send after a timeout of its own passes the
 * same key.
 *
 * @category models
 * @since 0.1.0
 */
export interface SendOptions extends SessionRegistry.SendOptions {
  readonly promptId?: string | undefined
}

/**
 * A snapshot of a session through the cluster: the registry's, with the cluster's generation and the address of
 * the runner that holds the session.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterSnapshot extends SessionRegistry.Snapshot {
  readonly runner: string
}

/**
 * A lag marker of a cluster subscription: an `EventLog.Lag` with why the events are missing. `"behind"`: the
 * subscriber fell behind the live session (as in one process); `"lost"`: a runner died before it saved them (the
 * turn that was in flight); `"not-durable"`: the session does not save its events and they went with an earlier
 * generation.
 *
 * For `"lost"`, `missed` is an upper bound: a runner reserves seqs in blocks (of 10,000) before it hands them out,
 * and the next generation starts above the dead runner's block, whether or not it used all of it. Every seq below
 * `resumeSeq` that the subscriber has not seen will never be delivered.
 *
 * @category models
 * @since 0.1.0
 */
export type Gap = Client.Gap

/**
 * Whether a lag marker is a cluster {@link Gap} (it carries a `reason`).
 *
 * @category guards
 * @since 0.1.0
 */
export const isGap = (delivery: EventLog.Delivery<unknown>): delivery is Gap =>
  delivery._tag === "Lag" && typeof (delivery as { readonly reason?: unknown }).reason === "string"

/**
 * Whether a turn's error is the loss of its runner: the runner that had the turn died (or was cut off) before the
 * turn ended. It is a `SessionRetired` that is never acknowledged (`deliveryUncertain`): the CLI may have run the
 * prompt, partly or fully; the session itself lives on under a new generation.
 *
 * @category guards
 * @since 0.1.0
 */
export const isRunnerLost = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "SessionRetired" &&
  String((error as { readonly reason?: unknown }).reason).startsWith("runner lost")

/**
 * The metrics every runner records, each with its address as the `runner` attribute and the registry's service
 * key as `registry` (besides the metrics of its own `SessionRegistry`, which every runner records as any registry
 * does):
 *
 * | metric | kind |
 * | --- | --- |
 * | `tether_cluster_sessions` | gauge: sessions live on the runner |
 * | `tether_cluster_restores` | counter, attribute `previous`: generations started (`new`, `clean`: after a drain or an idle close, `lost`: after a runner died, `reset`) |
 * | `tether_cluster_save_duration` | timer: saving a session after a turn |
 * | `tether_cluster_saved_bytes` | counter: conversation bytes written |
 * | `tether_cluster_save_failures` | counter |
 * | `tether_cluster_redeliveries` | counter, attribute `outcome`: sends the cluster delivered again (`joined`, `completed`, `lost`) |
 * | `tether_cluster_drain_duration` | timer: releasing a session whose entity stops |
 *
 * Spans: `ClusterRegistry.restore` (attribute `tether.warm`: the generation adopted a warm CLI), `ClusterRegistry.send`,
 * `ClusterRegistry.save`, `ClusterRegistry.drain` on the runner (attribute `tether.runner`), `ClusterRegistry.client.send` and `ClusterRegistry.client.run` on the
 * client, inside the cluster's own spans of the entity's messages.
 *
 * @category metrics
 * @since 0.1.0
 */
export const metrics = Runner.metrics
