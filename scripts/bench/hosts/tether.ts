/**
 * Tether: `ClaudeSession.make` in its own Scope over `NodeTransport.layer` (pointed at the fake), with full decoding
 * and the session's events, read by one subscriber (`session.subscribe("latest")`); see session.ts for what a turn
 * is for this host.
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as ClaudeSession from "../../../packages/claude/src/ClaudeSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeClaude, fakeEnv, isolation } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude }, isolation }))

/** The Tether host: `ClaudeSession` over `NodeTransport`, for runner.ts. */
export const host: Host = sessionHost(
  runtime,
  ClaudeSession.make({ includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }),
  (result) => result.isError ? result.subtype : undefined
)
