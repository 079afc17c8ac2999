/**
 * Tether for Codex: `CodexSession.make` in its own Scope over `NodeTransport.layer` (pointed at the fast fake
 * `codex app-server`, fast-codex.mjs), with full decoding and the session's events, read by one subscriber, as the
 * Claude host (tether.ts) does; see session.ts for what a turn is for this host.
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as CodexSession from "../../../packages/codex/src/CodexSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeEnv, fastCodex, isolation } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { codex: fastCodex }, isolation }))

/** The Tether host for Codex: `CodexSession` over `NodeTransport`, for runner.ts. */
export const host: Host = sessionHost(
  runtime,
  CodexSession.make({ env: { set: { PATH: fakeEnv().PATH! } } }),
  (result) => result.status === "completed" ? undefined : result.status
)
