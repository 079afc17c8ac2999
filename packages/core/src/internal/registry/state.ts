/**
 * The session registry's pure core: its state as data, and every rule of the registry as a plain, synchronous
 * function over it.
 *
 * The state is a map of entries by id whose insertion order is the recency order (using an entry moves it to the
 * end), a generation counter and whether the registry is closed. Each entry is a {@link Slot}: its id, generation
 * and fingerprint, where it is in its life (`Phase`), its pins and its turns in flight, and when it was last used.
 * The rules: what `getOrCreate` does for an id ({@link admit}), what a call naming an id and a generation finds
 * ({@link lookup}, {@link access}), when an entry may be evicted and in which order ({@link evictionCandidates},
 * {@link expired}), how an entry starts closing ({@link beginClose}), and what a snapshot says ({@link snapshot}).
 *
 * No Effect runs here and time comes in as an argument, so the rules are tested as tables. The Effect shell
 * (`registry.ts`) starts and closes sessions, reads their status, waits and keeps the metrics; it asks this module
 * what to do and tells it what happened. Where a rule needs a session's status (an entry that is running a turn
 * nobody sent through the registry is not idle), the shell reads it and hands it in ({@link canEvict},
 * {@link expiry}).
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type { ProcessState } from "../../Session.ts"
import type { Status } from "../../SessionEvent.ts"
import type { ConflictPolicy, EvictionReason, Phase, Settings, Snapshot } from "../../SessionRegistry.ts"
import { type InterruptReason, SessionUnavailable } from "../../TetherError.ts"

// ---------------------------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------------------------

/** The registry's settings, validated, with the defaults filled in; durations in milliseconds. */
export interface Resolved {
  readonly capacity: number
  /** `Infinity`: idle sessions never expire. */
  readonly idleTimeToLive: number
  readonly onConflict: ConflictPolicy
  readonly admissionTimeout: number
  readonly shutdownConcurrency: number
  readonly dormancy: boolean
  readonly warmRefillDelay: number
}

/** A duration in milliseconds: `fallback` when absent, `undefined` when it is not a duration. */
export const millis = (input: Duration.Input | undefined, fallback: number): number | undefined => {
  if (input === undefined) return fallback
  const decoded = Duration.fromInput(input)
  return Option.isSome(decoded) ? Duration.toMillis(decoded.value) : undefined
}

const isPositiveInteger = (n: number) => Number.isSafeInteger(n) && n >= 1

/** Validates the settings: every problem at once, or the resolved settings. */
export const resolve = (settings: Settings): Result.Result<Resolved, ReadonlyArray<string>> => {
  const problems: Array<string> = []
  const capacity = settings.capacity ?? 12
  if (!isPositiveInteger(capacity)) problems.push(`capacity must be a positive integer (got ${capacity})`)
  const shutdownConcurrency = settings.shutdownConcurrency ?? 16
  if (!isPositiveInteger(shutdownConcurrency)) {
    problems.push(`shutdownConcurrency must be a positive integer (got ${shutdownConcurrency})`)
  }
  const idleTimeToLive = millis(settings.idleTimeToLive, 15 * 60_000)
  if (idleTimeToLive === undefined || !(idleTimeToLive > 0)) problems.push("idleTimeToLive must be a positive duration")
  const admissionTimeout = millis(settings.admissionTimeout, 0)
  if (admissionTimeout === undefined || !Number.isFinite(admissionTimeout)) {
    problems.push("admissionTimeout must be a finite duration")
  }
  const onConflict = settings.onConflict ?? "fail"
  if (onConflict !== "fail" && onConflict !== "replace") problems.push(`onConflict must be "fail" or "replace"`)
  const warmRefillDelay = millis(settings.warmRefillDelay, 500)
  if (warmRefillDelay === undefined || !Number.isFinite(warmRefillDelay) || warmRefillDelay < 0) {
    problems.push("warmRefillDelay must be a finite duration")
  }
  const dormancy = settings.dormancy ?? false
  if (typeof dormancy !== "boolean") problems.push("dormancy must be true or false")
  if (problems.length > 0) return Result.fail(problems)
  return Result.succeed({
    capacity,
    idleTimeToLive: idleTimeToLive!,
    onConflict,
    admissionTimeout: admissionTimeout!,
    shutdownConcurrency,
    dormancy,
    warmRefillDelay: warmRefillDelay!
  })
}

// ---------------------------------------------------------------------------------------------------------------
// The state
// ---------------------------------------------------------------------------------------------------------------

/** What the rules know of an entry. The shell's entries extend it with the session, its scope and its signals. */
export interface Slot {
  readonly id: string
  readonly generation: number
  readonly fingerprint: string
  /** Epoch milliseconds. */
  readonly createdAt: number
  phase: Phase
  /** Why the entry is closing, once it is. */
  closeReason: EvictionReason | undefined
  pins: number
  /** Turns sent through the registry that have not ended. */
  turns: number
  lastUsed: number
}

export interface State<S extends Slot> {
  /** The entries by id, least recently used first. */
  readonly entries: Map<string, S>
  nextGeneration: number
  closed: boolean
}

export const make = <S extends Slot>(): State<S> => ({ entries: new Map(), nextGeneration: 1, closed: false })

/** The generation of the next entry, claimed. Generations are unique across ids, so a handle never matches a stranger. */
export const claimGeneration = <S extends Slot>(state: State<S>): number => state.nextGeneration++

/** Registers a new entry as the most recently used one. */
export const insert = <S extends Slot>(state: State<S>, entry: S): void => {
  state.entries.set(entry.id, entry)
}

/** The entry leaves the map, unless a newer entry has taken its id. */
export const remove = <S extends Slot>(state: State<S>, entry: S): void => {
  if (state.entries.get(entry.id) === entry) state.entries.delete(entry.id)
}

/** Marks the entry used at `now` and moves it to the most recently used end. */
export const touch = <S extends Slot>(state: State<S>, entry: S, now: number): void => {
  entry.lastUsed = now
  if (state.entries.get(entry.id) === entry) {
    state.entries.delete(entry.id)
    state.entries.set(entry.id, entry)
  }
}

/** Closes the registry; returns the entries to close, least recently used first. */
export const close = <S extends Slot>(state: State<S>): ReadonlyArray<S> => {
  state.closed = true
  return [...state.entries.values()]
}

// ---------------------------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------------------------

/**
 * What `getOrCreate(id, config)` finds, decided in one synchronous step so that the check for the id, the
 * capacity check and the insertion of a new entry cannot interleave with another caller:
 *
 * - `Closed`: the registry is closed;
 * - `Leaving`: the id's entry is draining or closing: wait until it is gone, then decide again;
 * - `Conflict`: the id is live (or starting) with another fingerprint;
 * - `Starting`, `Live`: the id's entry, with the same fingerprint;
 * - `Full`: no entry for the id and no room (`reserved`: slots held by warm CLIs): make room (evict) or wait;
 * - `Vacant`: no entry for the id, and room for one.
 */
export type Admission<S extends Slot> =
  | { readonly _tag: "Closed" }
  | { readonly _tag: "Leaving"; readonly entry: S }
  | { readonly _tag: "Conflict"; readonly entry: S }
  | { readonly _tag: "Starting"; readonly entry: S }
  | { readonly _tag: "Live"; readonly entry: S }
  | { readonly _tag: "Full" }
  | { readonly _tag: "Vacant" }

const closedAdmission = { _tag: "Closed" } as const
const fullAdmission = { _tag: "Full" } as const
const vacantAdmission = { _tag: "Vacant" } as const

export const admit = <S extends Slot>(
  state: State<S>,
  id: string,
  fingerprint: string,
  capacity: number,
  reserved = 0
): Admission<S> => {
  if (state.closed) return closedAdmission
  const entry = state.entries.get(id)
  if (entry === undefined) return state.entries.size + reserved >= capacity ? fullAdmission : vacantAdmission
  if (entry.phase === "draining" || entry.phase === "closing") return { _tag: "Leaving", entry }
  if (entry.fingerprint !== fingerprint) return { _tag: "Conflict", entry }
  return entry.phase === "starting" ? { _tag: "Starting", entry } : { _tag: "Live", entry }
}

/** The entry's session has started: it is live, and used now. */
export const started = <S extends Slot>(state: State<S>, entry: S, now: number): void => {
  entry.phase = "live"
  touch(state, entry, now)
}

/** The entry's session failed to start: the entry closes (and leaves once its scope is closed). */
export const startFailed = (slot: Slot): void => {
  slot.phase = "closing"
  slot.closeReason = "failed"
}

// ---------------------------------------------------------------------------------------------------------------
// Lookups and generations
// ---------------------------------------------------------------------------------------------------------------

/**
 * What a call naming an id (and, optionally, the generation it expects) finds. `GenerationChanged` carries the
 * id's current generation, `null` when the id has no entry.
 */
export type Lookup<S extends Slot> =
  | { readonly _tag: "Found"; readonly entry: S }
  | { readonly _tag: "Closed" }
  | { readonly _tag: "NotFound" }
  | { readonly _tag: "GenerationChanged"; readonly current: number | null }

const closedLookup = { _tag: "Closed" } as const
const notFoundLookup = { _tag: "NotFound" } as const
const goneLookup = { _tag: "GenerationChanged", current: null } as const

export const lookup = <S extends Slot>(state: State<S>, id: string, generation: number | undefined): Lookup<S> => {
  if (state.closed) return closedLookup
  const entry = state.entries.get(id)
  if (entry === undefined) return generation === undefined ? notFoundLookup : goneLookup
  if (generation !== undefined && entry.generation !== generation) {
    return { _tag: "GenerationChanged", current: entry.generation }
  }
  return { _tag: "Found", entry }
}

/** What a call wants of a session: to send it work (refused while draining), or to control it. */
export type Intent = "work" | "control"

/** Whether a call may use the entry now (`ready`), must wait for it to start, or cannot (`unavailable`). */
export const access = (slot: Slot, intent: Intent): "ready" | "wait" | "unavailable" => {
  switch (slot.phase) {
    case "starting":
      return "wait"
    case "closing":
      return "unavailable"
    case "draining":
      return intent === "work" ? "unavailable" : "ready"
    case "live":
      return "ready"
  }
}

/** Why the entry cannot be used, as a `SessionUnavailable` (safe to requeue). */
export const unavailable = (slot: Slot): SessionUnavailable =>
  new SessionUnavailable({
    status: slot.phase,
    reason: slot.closeReason === undefined
      ? `session ${slot.id} is ${slot.phase}`
      : `session ${slot.id} is being closed (${slot.closeReason})`
  })

// ---------------------------------------------------------------------------------------------------------------
// Pins and turns
// ---------------------------------------------------------------------------------------------------------------

/** Pins a live entry (false, and no pin, for an entry that is not live). */
export const pin = <S extends Slot>(state: State<S>, entry: S, now: number): boolean => {
  if (entry.phase !== "live") return false
  entry.pins++
  touch(state, entry, now)
  return true
}

/** A pin was released: the entry's idle time starts now. */
export const unpin = <S extends Slot>(state: State<S>, entry: S, now: number): void => {
  entry.pins--
  touch(state, entry, now)
}

/** A turn is about to be sent: counted before the write, so that no eviction can slip in between. */
export const turnSent = <S extends Slot>(state: State<S>, entry: S, now: number): void => {
  entry.turns++
  touch(state, entry, now)
}

/** The session refused the turn. */
export const turnRefused = (slot: Slot): void => {
  slot.turns--
}

/** A turn sent through the registry ended: the entry's idle time starts now. */
export const turnEnded = <S extends Slot>(state: State<S>, entry: S, now: number): void => {
  entry.turns--
  touch(state, entry, now)
}

// ---------------------------------------------------------------------------------------------------------------
// Eviction and the idle sweep
// ---------------------------------------------------------------------------------------------------------------

/** A live entry that nobody has pinned and that runs no turn sent through the registry. */
export const isEvictable = (slot: Slot): boolean => slot.phase === "live" && slot.pins === 0 && slot.turns === 0

// A registry only holds sessions whose handshake is done, so "starting" never shows up here.
const busyStatuses: ReadonlySet<Status> = new Set(["running", "awaiting-permission", "cancelling"])

/** A session that is busy by its own account (a turn the registry did not send, an interrupt in progress). */
export const isBusy = (status: Status): boolean => busyStatuses.has(status)

/** A session that has failed or closed by itself: its entry is removed. */
export const isDead = (status: Status): boolean => status === "failed" || status === "closed"

/** Whether an evictable entry whose session reports `status` may be closed to make room. */
export const canEvict = (status: Status): boolean => !isBusy(status)

/**
 * The entries that may be evicted to make room, least recently used first. Lazy: the shell reads each one's status
 * and stops at the first that is not busy, so a full registry of idle sessions costs one status read, not one per
 * session.
 */
export const evictionCandidates = function*<S extends Slot>(state: State<S>): Generator<S, void, undefined> {
  for (const entry of state.entries.values()) {
    if (isEvictable(entry)) yield entry
  }
}

/** What the idle sweep found at `now`: the expired entries, and how long until the next one expires. */
export interface Expired<S extends Slot> {
  readonly entries: ReadonlyArray<S>
  readonly wakeIn: number
}

/**
 * The evictable entries unused for `ttl` milliseconds at `now`. The map is ordered by last use, so the scan stops
 * at the first evictable entry that has not expired; the sweep then sleeps until that one expires, or a whole TTL
 * when there is none (any entry used after `now` expires later than that).
 */
export const expired = <S extends Slot>(state: State<S>, now: number, ttl: number): Expired<S> => {
  const entries: Array<S> = []
  for (const entry of state.entries.values()) {
    if (!isEvictable(entry)) continue
    const expiresAt = entry.lastUsed + ttl
    if (expiresAt > now) return { entries, wakeIn: expiresAt - now }
    entries.push(entry)
  }
  return { entries, wakeIn: ttl }
}

/** What happens to an expired entry whose session reports `status`: removed as failed, closed as idle, or kept. */
export const expiry = (status: Status): "failed" | "idle" | undefined =>
  isDead(status) ? "failed" : isBusy(status) ? undefined : "idle"

// ---------------------------------------------------------------------------------------------------------------
// Closing
// ---------------------------------------------------------------------------------------------------------------

/**
 * Starts closing the entry for `reason`: `"closing"` when this call does it (the shell then tears it down),
 * `"already-closing"` when another did (wait for it), `"kept"` when `onlyIfEvictable` and the entry is pinned or
 * busy by now.
 */
export const beginClose = (
  slot: Slot,
  reason: EvictionReason,
  onlyIfEvictable: boolean
): "closing" | "already-closing" | "kept" => {
  if (slot.phase === "closing") return "already-closing"
  if (onlyIfEvictable && !isEvictable(slot)) return "kept"
  slot.phase = "closing"
  slot.closeReason = reason
  return "closing"
}

/** Graceful eviction: the entry refuses new work from now on. */
export const beginDrain = (slot: Slot): void => {
  slot.phase = "draining"
}

/** A draining entry has no turn and no pin left (or is no longer draining): it can close. */
export const isDrained = (slot: Slot): boolean => slot.phase !== "draining" || (slot.pins === 0 && slot.turns === 0)

/**
 * The reason a session's running turn reports when the registry closes it: `"closed"` when the registry itself is
 * released, `"evicted"` for every other way a session leaves it.
 */
export const sessionCloseReason = (reason: EvictionReason): InterruptReason =>
  reason === "shutdown" ? "closed" : "evicted"

/** Started and not yet closing: a session that fails or exits in this phase has its entry closed. */
export const isOpen = (slot: Slot): boolean => slot.phase === "live" || slot.phase === "draining"

// ---------------------------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------------------------

/** What the registry reads of a started session for its snapshot. */
export interface SessionView {
  readonly status: Status
  readonly sessionId: string | undefined
  readonly process: ProcessState
  readonly pendingPermissions: number
  readonly pid: number | undefined
}

/** The snapshot of an entry whose session reads `view` (`undefined` while it is starting). */
export const snapshot = (slot: Slot, view: SessionView | undefined): Snapshot => ({
  id: slot.id,
  generation: slot.generation,
  fingerprint: slot.fingerprint,
  phase: slot.phase,
  status: view === undefined ? "starting" : view.status,
  pins: slot.pins,
  turnsInFlight: slot.turns,
  pendingPermissions: view === undefined ? 0 : view.pendingPermissions,
  createdAt: slot.createdAt,
  lastUsedAt: slot.lastUsed,
  pid: view?.pid,
  sessionId: view?.sessionId,
  exit: view === undefined || view.process._tag === "Running" ? undefined : view.process.status
})
