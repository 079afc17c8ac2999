/**
 * What a benchmarked host is: something that opens sessions on the fake CLI, runs turns and closes them. Each of
 * bare.ts, sdk.ts, tether.ts and the others in hosts/ exports one; runner.ts measures them all the same way.
 */

/** What a host saw of one turn. */
export interface TurnStats {
  /** `content_block_delta` text deltas the host delivered to its consumer during the turn. */
  readonly deltas: number
  /** Every message the host delivered to its consumer during the turn. */
  readonly messages: number
  /** Messages the host's consumer was told it missed (Tether's lag markers); absent where a host cannot skip. */
  readonly missed?: number
  /** Lag markers (`{_tag: "Lag"}` deliveries) the host's consumer received; absent where a host cannot skip. */
  readonly lags?: number
}

/** One live session. */
export interface HostSession {
  /** Sends one prompt and resolves once the host has delivered its result. */
  readonly turn: (prompt: string) => Promise<TurnStats>
  /** Ends the session and resolves once the CLI process has exited and been reaped. */
  readonly close: () => Promise<void>
}

/** A benchmarked host: how it opens sessions on the fake CLI. */
export interface Host {
  /** One-time set-up that belongs with loading the library (Tether builds its transport layer), before any figure. */
  readonly init?: () => Promise<void>
  /** Spawns the CLI and resolves once the host considers the session usable. */
  readonly open: () => Promise<HostSession>
}

/** A turn waiting for its result: what it has counted so far, and how to settle it. */
export interface Waiter {
  readonly resolve: (stats: TurnStats) => void
  readonly reject: (error: Error) => void
  deltas: number
  messages: number
}

/** The fields of a CLI message the hosts count by (every host sees the same stream-json frames). */
export interface Counted {
  readonly type: unknown
  readonly event?: { readonly type?: unknown }
}

/**
 * Counts one message towards the waiting turn, the same way in every host: every message, and text deltas apart.
 * Resolves the waiter with its counts and returns `true` at the turn's `result`.
 */
export const count = (waiter: Waiter, message: Counted): boolean => {
  waiter.messages++
  if (message.type === "stream_event" && message.event?.type === "content_block_delta") waiter.deltas++
  if (message.type !== "result") return false
  waiter.resolve({ deltas: waiter.deltas, messages: waiter.messages })
  return true
}
