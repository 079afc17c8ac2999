/**
 * The transport's defaults and its survivors metric, in a leaf module: the implementation uses them, and
 * `NodeTransport` re-exports them.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Metric from "effect/Metric"
import * as Framing from "../Framing.ts"

export const markerVariable = "TETHER_SESSION_TOKEN"

export const defaultMaxLineBytes = Framing.defaultMaxLineBytes

export const defaultStderrTailBytes = 8 * 1024

export const defaultKillGrace: Duration.Duration = Duration.seconds(1)

export const defaultScanInterval: Duration.Duration = Duration.seconds(1)

export const survivorsMetric: Metric.Counter<number> = Metric.counter("tether_teardown_survivors", {
  description: "Processes of a Tether session still alive after its teardown's kill",
  incremental: true
})

export const defaultLimitsInterval: Duration.Duration = Duration.millis(250)

export const limitHitsMetric: Metric.Counter<number> = Metric.counter("tether_limit_hits", {
  description: "Limits hit by the processes of Tether sessions: OOM kills (limit=memory), refused forks " +
    "(limit=processes)",
  incremental: true
})

export const defaultIsolationTimeout: Duration.Duration = Duration.seconds(5)
