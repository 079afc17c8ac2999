/**
 * The chaos suite's client: `node client.ts` with its world in the environment (CHAOS_*: world.ts). It sends to
 * every session of CHAOS_SESSIONS continuously, one prompt at a time per session, each with a unique prompt id, and
 * writes what it sent and what became of it to its journal (JSON lines). A prompt that fails as the loss of its
 * runner, or with an error that is safe to requeue, is sent again with the same prompt id, as a host would, until it
 * gets an answer that is neither or CHAOS_RETRY_MS has passed (the ledger's answer that the turn's runner died before
 * the turn ended is final: it is not asked again). An attempt that goes unanswered for CHAOS_HANG_MS is
 * hung. A client started on a journal that has prompts without an outcome (the previous client was killed
 * mid-turn) sends those first, with their ids. When the file CHAOS_STOP exists it sends nothing new, waits for what
 * it has in flight, and exits.
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClusterRegistry, NodeCluster } from "@tether/cluster"
import { Cause, Duration, Effect, Exit, Layer, Option } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import { ChaosChats, ChaosCluster, promptOf, sharding, variables } from "./world.ts"

const env = process.env
const journal = env[variables.journal] ?? ""
const stopFile = env[variables.stop] ?? ""
const sessions = (env[variables.sessions] ?? "").split(",").filter((id) => id.length > 0)
const turnMillis = Number(env[variables.turnMillis] ?? "200")
const thinkMillis = Number(env[variables.thinkMillis] ?? "300")
const hangMillis = Number(env[variables.hangMillis] ?? "90000")
const retryMillis = Number(env[variables.retryMillis] ?? "60000")
const client = Crypto.randomUUID().slice(0, 8)

/** One line of the journal. */
export type Entry =
  | { readonly k: "sent"; readonly at: number; readonly session: string; readonly promptId: string }
  | {
    readonly k: "attempt" | "final"
    readonly at: number
    readonly session: string
    readonly promptId: string
    readonly outcome: "ok" | "typed" | "untyped" | "hung"
    readonly tag?: string | undefined
    readonly disposition?: string | undefined
    readonly detail?: string | undefined
    readonly attempts?: number | undefined
  }
  | { readonly k: "open"; readonly at: number; readonly session: string; readonly outcome: string }

const write = (entry: Entry) => Effect.sync(() => Fs.appendFileSync(journal, `${JSON.stringify(entry)}\n`))

interface Outcome {
  readonly outcome: "ok" | "typed" | "untyped" | "hung"
  readonly tag?: string | undefined
  readonly disposition?: string | undefined
  readonly detail?: string | undefined
  readonly retry: boolean
  readonly notFound: boolean
}

/** What an attempt's exit is: a result, a typed error (its tag and disposition), or anything else (untyped). */
const classify = (exit: Exit.Exit<unknown, unknown>): Outcome => {
  if (Exit.isSuccess(exit)) return { outcome: "ok", retry: false, notFound: false }
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isSome(error)) {
    const e = error.value as {
      readonly _tag?: unknown
      readonly deliveryUncertain?: unknown
      readonly safeToRequeue?: unknown
      readonly safeToFallback?: unknown
    }
    if (typeof e === "object" && e !== null && typeof e._tag === "string" && typeof e.deliveryUncertain === "boolean") {
      const disposition = e.deliveryUncertain ? "uncertain" : e.safeToRequeue ? "requeue" : e.safeToFallback
        ? "fallback"
        : "none"
      const lost = ClusterRegistry.isRunnerLost(e)
      // The ledger's answer for a turn whose runner died before it ended is final: asking again gets it again.
      const final = lost && String((e as { readonly reason?: unknown }).reason).includes("stopped before turn")
      return {
        outcome: "typed",
        tag: lost ? "SessionRetired (runner lost)" : e._tag,
        disposition,
        detail: String((e as { readonly reason?: unknown }).reason ?? "").slice(0, 300),
        retry: (lost && !final) || e.safeToRequeue === true,
        notFound: e._tag === "SessionNotFound"
      }
    }
  }
  return { outcome: "untyped", detail: Cause.pretty(exit.cause).slice(0, 400), retry: false, notFound: false }
}

const stopping = () => Fs.existsSync(stopFile)

const program = Effect.gen(function*() {
  const chats = yield* ChaosChats
  const open = (session: string) =>
    Effect.gen(function*() {
      const started = Date.now()
      while (true) {
        const exit = yield* Effect.exit(
          Effect.scoped(chats.getOrCreate(session, {})).pipe(Effect.timeout(Duration.millis(hangMillis)))
        )
        const outcome = classify(exit)
        if (outcome.outcome === "ok") return
        if (!outcome.retry || Date.now() - started > retryMillis) {
          return yield* write({ k: "open", at: Date.now(), session, outcome: outcome.tag ?? outcome.detail ?? "" })
        }
        yield* Effect.sleep("500 millis")
      }
    })

  /** One prompt, sent until it has an outcome that is not worth another attempt. */
  const prompt = (session: string, promptId: string) =>
    Effect.gen(function*() {
      const started = Date.now()
      for (let attempts = 1;; attempts++) {
        const exit = yield* Effect.exit(
          chats.run(session, promptOf(promptId, turnMillis), { promptId } as ClusterRegistry.SendOptions).pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(hangMillis),
              orElse: () => Effect.fail({ hung: true } as const)
            })
          )
        )
        const hung = Exit.isFailure(exit) && Option.exists(
          Cause.findErrorOption(exit.cause),
          (error) => typeof error === "object" && error !== null && "hung" in error
        )
        const outcome: Outcome = hung ? { outcome: "hung", retry: false, notFound: false } : classify(exit)
        const last = outcome.outcome !== "typed" || !outcome.retry || Date.now() - started > retryMillis
        const { retry: _r, notFound: _n, ...shown } = outcome
        yield* write({ k: last ? "final" : "attempt", at: Date.now(), session, promptId, ...shown, attempts })
        if (last) return
        if (outcome.notFound) yield* open(session)
        yield* Effect.sleep(Duration.millis(Math.min(2_000, 200 * attempts)))
      }
    })

  // What the previous client left without an outcome goes first, with its ids.
  const pending = new Map<string, string>()
  if (Fs.existsSync(journal)) {
    for (const line of Fs.readFileSync(journal, "utf8").split("\n")) {
      if (line.length === 0) continue
      const entry = JSON.parse(line) as Entry
      if (entry.k === "sent") pending.set(entry.promptId, entry.session)
      else if (entry.k === "final") pending.delete(entry.promptId)
    }
  }
  yield* Effect.forEach(sessions, open, { concurrency: "unbounded", discard: true })
  yield* Effect.logInfo(`client ${client} ready: ${sessions.length} sessions, ${pending.size} prompts to retry`)
  yield* Effect.forEach(sessions, (session) =>
    Effect.gen(function*() {
      for (const [promptId, of] of pending) if (of === session) yield* prompt(session, promptId)
      for (let n = 0; !stopping(); n++) {
        const promptId = `${client}-${session}-${n}`
        yield* write({ k: "sent", at: Date.now(), session, promptId })
        yield* prompt(session, promptId)
        yield* Effect.sleep(Duration.millis(thinkMillis * (0.5 + Math.random())))
      }
    }), { concurrency: "unbounded", discard: true })
})

program.pipe(
  Effect.provide(
    ChaosCluster.layerClient({ callTimeout: "10 seconds" }).pipe(
      Layer.provide(NodeCluster.layer({ postgres: env[variables.database] ?? "", sharding }))
    )
  ),
  NodeRuntime.runMain({ teardown: NodeCluster.teardown })
)
