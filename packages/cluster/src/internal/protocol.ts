/**
 * The session entity: one entity per session id, its messages the registry contract's operations. Requests are
 * volatile (never stored and replayed by the cluster): a prompt must never be run again behind the host's back, so
 * the entity deduplicates sends itself through the database's turn ledger (see `runner.ts`).
 *
 * @internal
 */
import type { SessionRegistry, TetherError } from "@tether/core"
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as Entity from "effect/cluster/Entity"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Rpc from "effect/rpc/Rpc"
import * as Schema from "effect/Schema"
import * as Wire from "./wire.ts"

const Target = Schema.optional(Schema.Finite)

const Prompt = Schema.Union([Schema.String, Schema.Array(Schema.Record(Schema.String, Schema.Unknown))])

/** Where a subscription starts, in the cluster's seqs (which continue across generations). */
export const From = Schema.Union([
  Schema.Literals(["latest", "start"]),
  Schema.Struct({ after: Schema.Finite })
])

/** The reply to a send: the turn's id and generation, and its result when the send waited for it. */
export const Sent = Schema.Struct({
  turnId: Schema.String,
  generation: Schema.Finite,
  result: Schema.optional(Schema.Unknown)
})

/** The first element of an open: the session's generation and configuration fingerprint. */
export const Opened = Schema.Struct({ generation: Schema.Finite, fingerprint: Schema.String })

/** A turn named by the host's prompt id (the ledger's key) and the id and generation its send returned. */
const TurnRef = {
  promptId: Schema.String,
  turnId: Schema.String,
  generation: Schema.Finite
}

const Phase = Schema.Literals(["queued", "started", "acknowledged", "completed", "failed", "cancelled"])

const Outcome = Schema.Literals(["no-active-turn", "interrupted", "completed-first", "retired"])

/**
 * The entity of a registry's sessions, its configuration crossing the wire (and stored) with `config`. Requests
 * that never end by themselves (an open's pin, subscriptions) are interrupted as soon as their entity starts to stop
 * (a runner drains), instead of holding the drain for its whole bound.
 */
export const make = <C, CE>(type: string, config: Schema.Codec<C, CE>) =>
  Entity.make(type, [
    Rpc.make("Open", {
      payload: {
        config: Schema.optional(config),
        onConflict: Schema.optional(Schema.Literals(["fail", "replace"])),
        // "Infinity": wait for a slot as long as it takes (JSON has no infinite number).
        admissionTimeoutMillis: Schema.optional(Schema.Union([Schema.Finite, Schema.Literal("Infinity")])),
        durableEvents: Schema.optional(Schema.Boolean),
        generation: Target
      },
      success: Opened,
      error: Wire.Errors,
      stream: true
    }).annotate(ClusterSchema.InterruptOnTermination, true),
    Rpc.make("Send", {
      payload: {
        promptId: Schema.String,
        prompt: Prompt,
        queue: Schema.optional(Schema.Boolean),
        interruptOnCancel: Schema.optional(Schema.Boolean),
        generation: Target,
        wait: Schema.Boolean
      },
      success: Sent,
      error: Wire.Errors
    }),
    Rpc.make("Await", {
      payload: { ...TurnRef, settled: Schema.Boolean },
      success: Schema.Unknown,
      error: Wire.Errors
    }),
    Rpc.make("TurnEvents", {
      payload: TurnRef,
      success: Wire.Delivery,
      error: Wire.Errors,
      stream: true
    }).annotate(ClusterSchema.InterruptOnTermination, true),
    Rpc.make("TurnPhase", { payload: TurnRef, success: Phase, error: Wire.Errors }),
    Rpc.make("Interrupt", {
      payload: { generation: Target, turnId: Schema.optional(Schema.String) },
      success: Outcome,
      error: Wire.Errors
    }),
    Rpc.make("AnswerPermission", {
      payload: { requestId: Schema.String, decision: Wire.Verdict, generation: Target },
      error: Wire.Errors
    }),
    Rpc.make("PendingPermissions", {
      payload: { generation: Target },
      success: Schema.Array(Schema.Unknown),
      error: Wire.Errors
    }),
    Rpc.make("Control", {
      payload: { request: Schema.Unknown, generation: Target },
      success: Schema.Unknown,
      error: Wire.Errors
    }),
    Rpc.make("Subscribe", {
      payload: { from: From, generation: Target },
      success: Wire.Delivery,
      error: Wire.Errors,
      stream: true
    }).annotate(ClusterSchema.InterruptOnTermination, true),
    Rpc.make("Snapshot", { success: Schema.Unknown, error: Wire.Errors }),
    Rpc.make("Evict", {
      payload: { force: Schema.Boolean, timeoutMillis: Schema.optional(Schema.Finite), generation: Target },
      error: Wire.Errors
    })
  ])

/** The session entity of a registry. */
export type SessionEntity<C, CE> = ReturnType<typeof make<C, CE>>

/**
 * The warm pools of this process's runner of an entity type, for a client built on it (`ClusterBinding.layer`): a
 * runner keeps its own pools, and only a client in its process reaches them.
 */
export interface LocalPools {
  readonly warm: (config: unknown, size: number) => Effect.Effect<void, TetherError.InvalidConfig>
  readonly pools: Effect.Effect<ReadonlyArray<SessionRegistry.PoolSnapshot>>
}

/** The key of {@link LocalPools} for an entity type: a runner provides it, a client of the same layer reads it. */
export const localPools = (entityType: string): Context.Service<LocalPools, LocalPools> =>
  Context.Service<LocalPools>(`@tether/cluster/LocalPools/${entityType}`)
