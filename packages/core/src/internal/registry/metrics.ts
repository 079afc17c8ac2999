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
  teardownDuration: Metric.timer("tether_registry_teardown_duration", { description: "Closing one session" })
} as const
