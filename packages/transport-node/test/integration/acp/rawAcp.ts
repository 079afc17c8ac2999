/**
 * A minimal raw JSON-RPC 2.0 client of an ACP agent over a transport `Connection` (one message a line): enough to
 * run initialize → session/new → one prompt against a real agent and see the answer, with no ACP provider in
 * between. Requests are numbered from 0; the agent's own requests (`session/request_permission`) are answered by a
 * handler (default: the first `allow_once` option).
 */
import type { Transport } from "@tether/core"
import { Data, Duration, Effect, Option, type Scope, Stream, SubscriptionRef } from "effect"

/** A JSON object from or for the wire. */
export type Json = { readonly [key: string]: any }

/** The agent did not answer within the bound, or exited first. */
export class AcpTimeout extends Data.TaggedError("AcpTimeout")<{ readonly what: string }> {}

export interface RawAcp {
  /** Every message the agent wrote so far, in order. */
  readonly received: Effect.Effect<ReadonlyArray<Json>>
  /** Sends a request and waits (at most `timeout`) for its response. */
  readonly request: (method: string, params: Json, timeout: Duration.Input) => Effect.Effect<Json, AcpTimeout>
  readonly notify: (method: string, params: Json) => Effect.Effect<void>
}

const allowOnce = (request: Json): Json => {
  const option = (request.params?.options ?? []).find((candidate: Json) => candidate.kind === "allow_once")
  return option === undefined
    ? { outcome: { outcome: "cancelled" } }
    : { outcome: { outcome: "selected", optionId: option.optionId } }
}

/** A line as a JSON object; undefined when it is not one. */
const parse = (text: string): Json | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Json : undefined
  } catch {
    return undefined
  }
}

/** Reads the connection's stdout in the scope; answers the agent's requests with `answer`. */
export const make = (
  connection: Transport.Connection,
  answer: (request: Json) => Json = allowOnce
): Effect.Effect<RawAcp, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received = yield* SubscriptionRef.make<ReadonlyArray<Json>>([])
    const send = (message: Json) => connection.write(JSON.stringify({ jsonrpc: "2.0", ...message })).pipe(Effect.ignore)
    yield* Effect.forkScoped(
      Stream.runForEach(connection.stdout, (line) =>
        Effect.gen(function*() {
          const message = line._tag === "Text" ? parse(line.text) : undefined
          if (message === undefined) return
          yield* SubscriptionRef.update(received, (all) => [...all, message])
          if (typeof message.method === "string" && "id" in message) {
            yield* send({ id: message.id, result: answer(message) })
          }
        }))
    )
    let nextId = 0
    const request = (method: string, params: Json, timeout: Duration.Input) =>
      Effect.gen(function*() {
        const id = nextId++
        yield* send({ id, method, params })
        return yield* SubscriptionRef.changes(received).pipe(
          Stream.map((all) => all.find((message) => message.id === id && !("method" in message))),
          Stream.filter((found): found is Json => found !== undefined),
          Stream.runHead,
          Effect.timeoutOption(timeout),
          Effect.flatMap((found) =>
            Option.isSome(found) && Option.isSome(found.value)
              ? Effect.succeed(found.value.value)
              : Effect.fail(
                new AcpTimeout({
                  what: `the response to ${method} (${Duration.format(Duration.fromInputUnsafe(timeout))})`
                })
              )
          )
        )
      })
    return {
      received: SubscriptionRef.get(received),
      request,
      notify: (method, params) => send({ method, params })
    }
  })
