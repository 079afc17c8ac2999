/**
 * Where a runner is and what it records there: the cluster registry's metrics, and the runner's place (its address,
 * the attributes its metrics carry, its sessions gauge), learned from the first entity that starts on it.
 *
 * @internal
 */
import type * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as Metric from "effect/Metric"

/** The cluster registry's metrics; every runner records them with its address as the `runner` attribute. */
export const metrics = {
  sessions: Metric.gauge("tether_cluster_sessions", { description: "Sessions live on this runner" }),
  restores: Metric.counter("tether_cluster_restores", {
    description: "Generations started, by how the previous one ended (new, clean, lost, reset)",
    incremental: true
  }),
  saveDuration: Metric.timer("tether_cluster_save_duration", { description: "Saving a session after a turn" }),
  savedBytes: Metric.counter("tether_cluster_saved_bytes", {
    description: "Conversation bytes written to the database",
    incremental: true
  }),
  saveFailures: Metric.counter("tether_cluster_save_failures", {
    description: "Saves that failed (the database was unreachable, or another runner owns the session)",
    incremental: true
  }),
  redeliveries: Metric.counter("tether_cluster_redeliveries", {
    description: "Sends the cluster delivered again, by what they found in the ledger (joined, completed, lost)",
    incremental: true
  }),
  drainDuration: Metric.timer("tether_cluster_drain_duration", {
    description: "Releasing a session when its entity stops (a runner shutting down, a shard moving)"
  })
} as const

/** Where a runner is, for its metrics' attributes and its spans: learned from the first entity that starts there. */
export interface Place {
  address: string
  attributes: { readonly runner: string; readonly registry: string }
  sessionsGauge: Metric.Gauge<number>
}

export const placeOf = (registry: string): Place => {
  const attributes = { runner: "unknown", registry }
  return { address: "unknown", attributes, sessionsGauge: Metric.withAttributes(metrics.sessions, attributes) }
}

export const locateAt = (place: Place, runner: RunnerAddress.RunnerAddress): void => {
  if (place.address !== "unknown") return
  place.address = `${runner.host}:${runner.port}`
  place.attributes = { runner: place.address, registry: place.attributes.registry }
  place.sessionsGauge = Metric.withAttributes(metrics.sessions, place.attributes)
}
