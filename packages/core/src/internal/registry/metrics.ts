/**
 * The session registry's metrics, in a leaf module: the registry's implementation records them without importing
 * the public \`SessionRegistry\` module, which re-exports them.
 *
 * @internal
 */
import * as Metric from "effect/Metric"

/** See \`SessionRegistry.metrics\`. */
export const metrics = {
  sessions: Metric.gauge("tether_registry_sessions", { description: "Sessions live in session registries" }),
  turnsInFlight: Metric.gauge("tether_registry_turns_in_flight", {
    description: "Turns sent through session registries that have not ended"
  }),
  sessionStart: Metric.timer("tether_registry_session_start", { description: "Session start, spawn to handshake" }),
  turnDuration: Metric.timer("tether_registry_turn_duration", { description: "Turn duration, send to end" }),
  evictions: Metric.counter("tether_registry_evictions", {
    description: "Sessions that left a registry, by reason",
    incremental: true
  }),
  teardownDuration: Metric.timer("tether_registry_teardown_duration", { description: "Closing one session" }),
  warmHits: Metric.counter("tether_registry_warm_hits", {
    description: "Sessions started from a warm CLI",
    incremental: true
  }),
  warmMisses: Metric.counter("tether_registry_warm_misses", {
    description: "Sessions started cold while their configuration has a warm pool",
    incremental: true
  }),
  warmDiscards: Metric.counter("tether_registry_warm_discards", {
    description: "Warm CLIs closed without being handed out, by reason",
    incremental: true
  }),
  warmReady: Metric.gauge("tether_registry_warm_ready", { description: "Warm CLIs ready in session registries" }),
  dormant: Metric.counter("tether_registry_dormant", {
    description: "Conversations that went dormant",
    incremental: true
  }),
  wakes: Metric.counter("tether_registry_wakes", {
    description: "Dormant conversations resumed, by outcome",
    incremental: true
  })
} as const
