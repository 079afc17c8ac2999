/**
 * Tether read the documented way: `ClaudeSession.make` in its own Scope over `NodeTransport.layer` (pointed at the
 * fake), each turn as the README's host runs it (`session.send`, then `Turn.forEachEvent` to the turn's end, then
 * `turn.result`, one `runPromise` per turn); see session.ts. The same session as tether.ts, without its session-wide
 * subscriber.
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as ClaudeSession from "../../../packages/claude/src/ClaudeSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeClaude, fakeEnv, isolation } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude }, isolation }))

/** The Tether host reading each turn's events: `ClaudeSession` over `NodeTransport`, for runner.ts. */
export const host: Host = sessionHost(
  runtime,
  ClaudeSession.make({ includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }),
  (result) => result.isError ? result.subtype : undefined,
  "turn-events"
)
