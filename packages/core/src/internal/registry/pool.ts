/**
 * The registry's warm pools as data: per pool key, the configuration its CLIs are started with, how many the host
 * asked for, the CLIs ready to be handed out, and the starts in progress; and the rules over them as plain
 * synchronous functions (what counts against capacity, which pool needs a start, which CLI to take or to close).
 *
 * A pool key (`Kind.warm.key`, by default the configuration's shape) leaves out what the protocol can change after
 * start (Claude's model and permission mode), which is applied at hand-out instead of splitting the pool. The
 * configuration's functions (policy, hooks, tool handlers) are bound at hand-out too ({@link bindable}): a warm CLI
 * never runs another conversation's policy.
 *
 * @internal
 */
import type * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type * as Session from "../../Session.ts"
import type { TurnResult } from "../../Turn.ts"

/** A started, initialized CLI waiting in a pool. It is handed out at most once. */
export interface Item<C, A extends TurnResult, TE> {
  readonly key: string
  /** Its own scope, a child of the registry's sessions scope: closing it releases the CLI. */
  readonly scope: Scope.Closeable
  readonly session: Session.Session<A, TE>
  /** The directory its CLI keeps its conversation state in (with dormancy). */
  readonly directory: string | undefined
  /** The configuration it was started with (the pool's at the time). */
  readonly config: C
  /** Binds the functions of the CLI's configuration to those of the configuration it is handed to. */
  readonly bind: (to: C) => void
  /** `ready` in its pool; `taken` by a conversation (or being checked for one); `closing`. */
  state: "ready" | "taken" | "closing"
  /** Epoch milliseconds. */
  readonly readyAt: number
}

/** A start in progress: its fiber, once forked (shutdown interrupts it). */
export interface Start {
  fiber: Fiber.Fiber<void> | undefined
}

export interface Pool<C, A extends TurnResult, TE> {
  readonly key: string
  /** The configuration new CLIs of the pool start with: the last one the host gave for this key. */
  config: C
  /** How many CLIs the host wants ready. */
  target: number
  /** Ready CLIs, oldest first. */
  readonly ready: Array<Item<C, A, TE>>
  /** Starts in progress (each with its fiber, once forked). */
  readonly starting: Set<Start>
  /** Starts that failed in a row: the next one waits `backoff(failures)`. */
  failures: number
  /** Epoch milliseconds before which no start is tried (after a failure). */
  retryAt: number
}

export interface Pools<C, A extends TurnResult, TE> {
  readonly byKey: Map<string, Pool<C, A, TE>>
  /** Warm CLIs being closed: they hold their slot until their teardown is done. */
  closing: number
  /** Admissions waiting for a slot: no refill takes a slot while one waits. */
  waiting: number
  /**
   * Epoch milliseconds before which no start is tried: a CLI just handed out does its first turn's work (Claude
   * builds its system prompt and its first request) without a CLI start competing for the CPU.
   */
  heldUntil: number
  closed: boolean
}

export const make = <C, A extends TurnResult, TE>(): Pools<C, A, TE> => ({
  byKey: new Map(),
  closing: 0,
  waiting: 0,
  heldUntil: 0,
  closed: false
})

/** A CLI was handed out at `now`: no start before `now + delay` (a later hand-out extends it). */
export const hold = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, now: number, delay: number): void => {
  pools.heldUntil = Math.max(pools.heldUntil, now + delay)
}

/** Warm CLIs that hold a slot: ready, starting and closing ones. */
export const occupied = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>): number => {
  let total = pools.closing
  for (const pool of pools.byKey.values()) total += pool.ready.length + pool.starting.size
  return total
}

/** Whether a CLI is ready for `key` (the conversation that takes it takes its slot too). */
export const hasReady = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, key: string): boolean =>
  (pools.byKey.get(key)?.ready.length ?? 0) > 0

/** Takes the oldest ready CLI for `key`, if any: from now on no one else can. */
export const take = <C, A extends TurnResult, TE>(
  pools: Pools<C, A, TE>,
  key: string
): Item<C, A, TE> | undefined => {
  const item = pools.byKey.get(key)?.ready.shift()
  if (item !== undefined) item.state = "taken"
  return item
}

/** Whether `key` has a pool the host asked for (for the hit and miss counts). */
export const isPooled = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, key: string): boolean =>
  (pools.byKey.get(key)?.target ?? 0) > 0

/** Removes a ready CLI from its pool (it died, or is closed to make room): true if it was there. */
export const withdraw = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, item: Item<C, A, TE>): boolean => {
  if (item.state !== "ready") return false
  item.state = "closing"
  const ready = pools.byKey.get(item.key)?.ready
  const index = ready === undefined ? -1 : ready.indexOf(item)
  if (index >= 0) ready!.splice(index, 1)
  return true
}

/** The ready CLI to close when a conversation needs a slot: the oldest of the fullest pool. */
export const evictionCandidate = <C, A extends TurnResult, TE>(
  pools: Pools<C, A, TE>
): Item<C, A, TE> | undefined => {
  let best: Pool<C, A, TE> | undefined
  for (const pool of pools.byKey.values()) {
    if (pool.ready.length > 0 && (best === undefined || pool.ready.length > best.ready.length)) best = pool
  }
  return best?.ready[0]
}

/** The ready CLIs a pool holds beyond its target, newest first (the oldest stay: they started first). */
export const surplus = <C, A extends TurnResult, TE>(pool: Pool<C, A, TE>): ReadonlyArray<Item<C, A, TE>> => {
  const extra = pool.ready.length + pool.starting.size - pool.target
  return extra <= 0 ? [] : pool.ready.slice(Math.max(0, pool.ready.length - extra)).reverse()
}

/** The starts in progress a pool does not need any more, beyond its ready CLIs' surplus. */
export const surplusStarts = <C, A extends TurnResult, TE>(pool: Pool<C, A, TE>): ReadonlyArray<Start> => {
  const extra = pool.ready.length + pool.starting.size - pool.target - surplus(pool).length
  return extra <= 0 ? [] : [...pool.starting].slice(0, extra)
}

/** How long a pool waits before its next start after `failures` failed starts in a row: 1 s doubling, at most 60 s. */
export const backoff = (failures: number): number => Math.min(60_000, 1_000 * 2 ** Math.max(0, failures - 1))

/**
 * The pools that may start a CLI now, one start each per call, given the slots free (capacity minus the sessions
 * and the warm CLIs that hold one). None while an admission waits, while a hand-out holds the refills (see
 * {@link hold}), or once the pools are closed.
 */
export const toStart = <C, A extends TurnResult, TE>(
  pools: Pools<C, A, TE>,
  free: number,
  now: number
): ReadonlyArray<Pool<C, A, TE>> => {
  if (pools.closed || pools.waiting > 0 || free <= 0 || now < pools.heldUntil) return []
  const out: Array<Pool<C, A, TE>> = []
  for (const pool of pools.byKey.values()) {
    if (out.length >= free) break
    if (pool.ready.length + pool.starting.size < pool.target && now >= pool.retryAt) out.push(pool)
  }
  return out
}

/** The earliest time a pool that is short waits for (after failures, or a hand-out's hold), if any. */
export const nextRetry = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, now: number): number | undefined => {
  let next: number | undefined
  for (const pool of pools.byKey.values()) {
    if (pool.ready.length + pool.starting.size < pool.target) {
      const at = Math.max(pool.retryAt, pools.heldUntil)
      if (at > now) next = next === undefined ? at : Math.min(next, at)
    }
  }
  return next
}

/** A pool whose target is 0 and that holds and starts nothing is forgotten. */
export const prune = <C, A extends TurnResult, TE>(pools: Pools<C, A, TE>, pool: Pool<C, A, TE>): void => {
  if (pool.target === 0 && pool.ready.length === 0 && pool.starting.size === 0 && pools.byKey.get(pool.key) === pool) {
    pools.byKey.delete(pool.key)
  }
}

const isPlain = (value: unknown): value is { readonly [key: string]: unknown } => {
  if (value === null || typeof value !== "object") return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const at = (root: unknown, path: ReadonlyArray<string | number>): unknown => {
  let value = root
  for (const key of path) {
    if (value === null || value === undefined) return undefined
    value = (value as { readonly [key: string | number]: unknown })[key]
  }
  return value
}

/**
 * A copy of `config` (through plain objects and arrays) whose every function calls, at call time, the function at
 * the same path of the configuration it is bound to (`bind`), or its own until it is bound. A warm CLI is started
 * with the copy and bound to the configuration of the conversation it is handed to: that conversation's policy,
 * hooks and tool handlers answer its CLI. Pool keys include where a configuration holds functions, so the bound
 * configuration has a function wherever the copy has one.
 */
export const bindable = <C>(config: C): { readonly config: C; readonly bind: (to: C) => void } => {
  let current: unknown = config
  const copy = (value: unknown, path: ReadonlyArray<string | number>): unknown => {
    if (typeof value === "function") {
      const own = value as (...args: Array<unknown>) => unknown
      return function(this: unknown, ...args: Array<unknown>): unknown {
        const target = at(current, path)
        return typeof target === "function"
          ? (target as (...args: Array<unknown>) => unknown).apply(at(current, path.slice(0, -1)), args)
          : own.apply(this, args)
      }
    }
    if (Array.isArray(value)) return value.map((item, index) => copy(item, [...path, index]))
    if (isPlain(value)) {
      const out: Record<string, unknown> = {}
      for (const key of Object.keys(value)) out[key] = copy(value[key], [...path, key])
      return out
    }
    return value
  }
  return {
    config: copy(config, []) as C,
    bind: (to) => {
      current = to
    }
  }
}
