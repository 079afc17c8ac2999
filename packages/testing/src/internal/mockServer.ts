/**
 * What the mock model servers (`MockAnthropic`, `MockOpenAI`, `MockGemini`) share: the HTTP server's life on
 * 127.0.0.1, the wait on a request log, and how a script chooses a reply.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Http from "node:http"
import type * as Net from "node:net"

/**
 * Serves `handle` on `127.0.0.1` at an ephemeral port for the life of the scope, and returns the port. Each request
 * is handled in a fiber of the scope: closing it interrupts in-flight replies, drops open connections and stops
 * the server.
 */
export const listen = (
  handle: (req: Http.IncomingMessage, res: Http.ServerResponse) => Effect.Effect<void>
): Effect.Effect<number, never, Scope.Scope> =>
  Effect.gen(function*() {
    const runFork = yield* FiberSet.makeRuntime<never, void, never>()
    const server = yield* Effect.acquireRelease(
      Effect.callback<Http.Server>((resume) => {
        const server = Http.createServer((req, res) => {
          runFork(handle(req, res))
        })
        const onError = (error: Error) => resume(Effect.die(error))
        server.once("error", onError)
        server.listen(0, "127.0.0.1", () => {
          server.off("error", onError)
          resume(Effect.succeed(server))
        })
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          // Keep-alive and in-flight connections (a stalled stream) would otherwise hold `close` open.
          server.closeAllConnections()
        })
    )
    return (server.address() as Net.AddressInfo).port
  })

/** Waits until `predicate` holds for the log and returns that log. */
export const awaitLog =
  <L>(log: SubscriptionRef.SubscriptionRef<ReadonlyArray<L>>) =>
  (predicate: (log: ReadonlyArray<L>) => boolean): Effect.Effect<ReadonlyArray<L>> =>
    SubscriptionRef.changes(log).pipe(
      Stream.filter(predicate),
      Stream.runHead,
      Effect.map(Option.getOrElse((): ReadonlyArray<L> => []))
    )

/**
 * How a script chooses the reply to a request: a function is asked; a list is consumed one reply per request, in
 * order, then `fallback`; a reply that fails the request (`attempts` says for how many tries) also answers the
 * client's retries of the same request (the same `keyOf`) until its attempts are used up. No script: `fallback`.
 */
export const chooser = <Q, R>(
  script: ReadonlyArray<R> | ((request: Q) => R) | undefined,
  options: {
    readonly fallback: R
    /** What a retry of the request repeats (its messages, its input, its contents). */
    readonly keyOf: (request: Q) => string
    /** How many tries a failing reply answers; `undefined` for a reply that does not fail. */
    readonly attempts: (reply: R) => number | undefined
  }
): (request: Q) => R => {
  let cursor = 0
  let failing: { readonly key: string; readonly reply: R; remaining: number } | undefined
  return (request) => {
    if (script === undefined) return options.fallback
    if (typeof script === "function") return script(request)
    const key = options.keyOf(request)
    if (failing !== undefined && failing.key === key && failing.remaining > 0) {
      failing.remaining--
      return failing.reply
    }
    const reply = cursor < script.length ? script[cursor++]! : options.fallback
    const attempts = options.attempts(reply)
    failing = attempts === undefined ? undefined : { key, reply, remaining: attempts - 1 }
    return reply
  }
}
