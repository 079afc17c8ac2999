/**
 * A tiny OTLP/HTTP collector for tests: listens on 127.0.0.1 (a free port), accepts JSON on `/v1/traces`,
 * `/v1/metrics` and `/v1/logs`, and keeps what it received, decoded into plain spans and data points.
 */
import { Effect, type Scope } from "effect"
import * as Http from "node:http"

type AnyValue = { readonly [kind: string]: unknown }
type KeyValue = { readonly key: string; readonly value: AnyValue }

/** OTLP attributes as a plain record (`intValue`s as numbers: OTLP/JSON may send int64 as strings). */
const attributes = (list: ReadonlyArray<KeyValue> | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map(({ key, value }) => {
    const [kind, v] = Object.entries(value)[0] ?? ["", undefined]
    return [key, kind === "intValue" ? Number(v) : v]
  }))

export interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<string>
  readonly links: ReadonlyArray<string>
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: number
  readonly resource: Record<string, unknown>
}

export interface Metric {
  readonly name: string
  readonly unit: string
  readonly kind: "sum" | "gauge" | "histogram" | "other"
  readonly isMonotonic: boolean | undefined
  readonly points: ReadonlyArray<{
    readonly attributes: Record<string, unknown>
    readonly value: number | undefined
    readonly count: number | undefined
  }>
}

export interface Collector {
  readonly url: string
  readonly requests: Readonly<Record<string, number>>
  readonly spans: () => ReadonlyArray<Span>
  /** The metrics of the last export (cumulative: the last one holds every series). */
  readonly metrics: () => ReadonlyArray<Metric>
}

/** Starts the collector in the current scope (closed with it). */
export const make: Effect.Effect<Collector, never, Scope.Scope> = Effect.gen(function*() {
  const bodies: Record<string, Array<any>> = { traces: [], metrics: [], logs: [] }
  const server = yield* Effect.acquireRelease(
    Effect.callback<Http.Server>((resume) => {
      const server = Http.createServer((request, response) => {
        let body = ""
        request.setEncoding("utf8").on("data", (chunk: string) => body += chunk)
        request.on("end", () => {
          const kind = (request.url ?? "").replace(/^\/v1\//, "")
          if (request.method === "POST" && kind in bodies) bodies[kind].push(JSON.parse(body))
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const collector: Collector = {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return Object.fromEntries(Object.entries(bodies).map(([kind, list]) => [kind, list.length]))
    },
    spans: () =>
      bodies.traces.flatMap((data) =>
        data.resourceSpans.flatMap((resourceSpans: any) =>
          resourceSpans.scopeSpans.flatMap((scopeSpans: any) =>
            scopeSpans.spans.map((span: any): Span => ({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId,
              name: span.name,
              attributes: attributes(span.attributes),
              events: span.events.map((event: any) => event.name),
              links: span.links.map((link: any) => link.spanId),
              status: span.status.code,
              resource: attributes(resourceSpans.resource.attributes)
            }))
          )
        )
      ),
    metrics: () =>
      (bodies.metrics.at(-1)?.resourceMetrics ?? []).flatMap((resourceMetrics: any) =>
        resourceMetrics.scopeMetrics.flatMap((scopeMetrics: any) =>
          scopeMetrics.metrics.map((metric: any): Metric => {
            const kind = metric.sum ? "sum" : metric.gauge ? "gauge" : metric.histogram ? "histogram" : "other"
            const data = metric.sum ?? metric.gauge ?? metric.histogram ?? { dataPoints: [] }
            return {
              name: metric.name,
              unit: metric.unit,
              kind,
              isMonotonic: metric.sum?.isMonotonic,
              points: data.dataPoints.map((point: any) => ({
                attributes: attributes(point.attributes),
                value: point.asDouble ?? (point.asInt === undefined ? undefined : Number(point.asInt)),
                count: point.count === undefined ? undefined : Number(point.count)
              }))
            }
          })
        )
      )
  }
  return collector
})
