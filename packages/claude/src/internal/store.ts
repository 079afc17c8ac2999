/**
 * The transcript mirror: the CLI's `transcript_mirror` frames (with `--session-mirror`), appended to the host's
 * session store in order, each append bounded and retried, failures logged and dropped as the SDK does.
 *
 * @internal
 */
import type * as Permission from "@tether/core/Permission"
import type * as Session from "@tether/core/Session"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/** One transcript line, as the CLI wrote it to its local file. */
export interface Entry {
  readonly type: string
  readonly uuid?: string | undefined
  readonly timestamp?: string | undefined
  readonly [key: string]: unknown
}

/** Which transcript the entries belong to: `subpath` for a subagent's (`subagents/agent-<id>`). */
export interface Key {
  readonly projectKey: string
  readonly sessionId: string
  readonly subpath?: string | undefined
}

export interface SessionStore {
  /** Appends entries, in the order the CLI wrote them; make it idempotent by `uuid` where it can be. */
  readonly append: (key: Key, entries: ReadonlyArray<Entry>) => Effect.Effect<void, Permission.PolicyError>
}

/** `<config>/projects/<projectKey>/<sessionId>.jsonl` or `…/<sessionId>/<subpath>.jsonl`. */
export const keyOf = (filePath: string): Key | undefined => {
  const parts = filePath.split(/[\\/]/)
  const at = parts.lastIndexOf("projects")
  if (at < 0 || parts.length < at + 3) return undefined
  const projectKey = parts[at + 1]
  const rest = parts.slice(at + 2)
  const last = rest[rest.length - 1]
  if (!last.endsWith(".jsonl")) return undefined
  if (rest.length === 1) return { projectKey, sessionId: last.slice(0, -".jsonl".length) }
  return { projectKey, sessionId: rest[0], subpath: [...rest.slice(1, -1), last.slice(0, -".jsonl".length)].join("/") }
}

const appendTimeout = Duration.minutes(1)

/** Follows the session's events in the caller's scope and appends what the CLI mirrors. */
export const mirror = (
  session: Pick<Session.Session, "subscribe">,
  store: SessionStore
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const events = yield* session.subscribe("latest").pipe(Effect.orDie)
    yield* events.pipe(
      Stream.runForEach((delivery) => {
        if (delivery._tag !== "Event") {
          return Effect.logWarning(
            `session store: ${delivery.missed} events were missed; their entries are not mirrored`
          )
        }
        const event = delivery.event
        if (event._tag !== "Frame" || event.type !== "transcript_mirror") return Effect.void
        const frame = event.raw as { readonly filePath?: unknown; readonly entries?: unknown }
        const key = typeof frame.filePath === "string" ? keyOf(frame.filePath) : undefined
        if (key === undefined || !Array.isArray(frame.entries)) return Effect.void
        const entries = frame.entries as ReadonlyArray<Entry>
        return Effect.suspend(() => store.append(key, entries)).pipe(
          // A timeout is not retried (the append may still land), a failure twice more, as the SDK does.
          Effect.timeoutOrElse({ duration: appendTimeout, orElse: () => Effect.fail("timeout" as const) }),
          Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 2, while: (error) => error !== "timeout" }),
          Effect.catchCause((cause) =>
            Effect.logWarning(`session store: ${entries.length} transcript entries were not mirrored`, cause)
          )
        )
      }),
      Effect.forkScoped
    )
  })
