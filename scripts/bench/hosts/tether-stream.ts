/**
 * Tether read per turn as a stream: tether-events.ts with each turn's events read by
 * `Stream.runForEach(turn.events, …)` in place of `Turn.forEachEvent` (see session.ts). Not in `pnpm bench`'s
 * table; run by hand, e.g. `node scripts/bench/runner.ts tether-stream rtt '{"turns":1000}'`.
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as ClaudeSession from "../../../packages/claude/src/ClaudeSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeClaude, fakeEnv, isolation } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude }, isolation }))

/** The Tether host reading each turn's `turn.events` stream: `ClaudeSession` over `NodeTransport`, for runner.ts. */
export const host: Host = sessionHost(
  runtime,
  ClaudeSession.make({ includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }),
  (result) => result.isError ? result.subtype : undefined,
  "turn-stream"
)
