/**
 * What the replays of recorded CLI transcripts share (ClaudeTranscripts.test.ts, CodexTranscripts.test.ts): the
 * `.ndjson` line, the split into processes, deadlines that never fire during a replay, and how a settled turn and
 * its events read in a failure message.
 */
import type { SessionEvent } from "@tether/core"
import { Cause, Exit, Option } from "effect"
import type * as SessionMachine from "../../src/internal/session/machine.ts"
import type { AnyTurnError, TurnResult } from "../../src/Turn.ts"

/**
 * One line of a `.ndjson` transcript: what the CLI wrote (`"<"`), what the host wrote (`">"`, as JSON in `msg`, or
 * in `raw` when it is not JSON), the CLI's stderr (`"err"`), or what the recorder noted (`"note"`, in `text`: the
 * spawn of a process, stdin closed, the exit status, a signal sent). `t`: milliseconds since the first spawn.
 */
export interface Entry {
  readonly t: number
  readonly dir: ">" | "<" | "err" | "note"
  readonly msg?: any
  readonly raw?: string
  readonly text?: string
}

/** Deadlines a replay never reaches: what happens is what the transcript shows, not a timeout. */
export const deadlines: SessionMachine.Deadlines = {
  startup: 600_000,
  control: 600_000,
  delivery: 600_000,
  ack: 600_000,
  turn: 600_000,
  stall: 600_000,
  interrupt: 600_000,
  permission: 600_000
}

/** A transcript's entries split into its processes, at each `spawned process` note (the header before is dropped). */
export const processesOf = (entries: ReadonlyArray<Entry>): ReadonlyArray<ReadonlyArray<Entry>> => {
  const segments: Array<Array<Entry>> = []
  for (const entry of entries) {
    if (entry.dir === "note" && entry.text?.startsWith("spawned process ")) segments.push([])
    segments.at(-1)?.push(entry)
  }
  return segments
}

/** A settled (or not) turn, for a failure message. */
export const describeExit = (exit: Exit.Exit<TurnResult, AnyTurnError> | undefined): string => {
  if (exit === undefined) return "unsettled"
  if (Exit.isSuccess(exit)) return `Completed ${JSON.stringify(exit.value.text)}`
  const error = Cause.findErrorOption(exit.cause)
  return Option.isSome(error) ? `${error.value._tag} ${error.value.message}` : Cause.pretty(exit.cause)
}

/** The events of one kind. */
export const eventsTagged = <T extends SessionEvent.SessionEvent["_tag"]>(
  events: ReadonlyArray<SessionEvent.SessionEvent>,
  tag: T
) => events.filter((event): event is Extract<SessionEvent.SessionEvent, { readonly _tag: T }> => event._tag === tag)
