/**
 * Tether for ACP: `AcpSession.make` with `AcpAgent.command` (pointed at the fast fake ACP agent, fast-acp.mjs) in its
 * own Scope over `NodeTransport.layer`, with full decoding and the session's events, read by one subscriber, as the
 * Codex host (codex-tether.ts) does; see session.ts for what a turn is for this host.
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as AcpAgent from "../../../packages/acp/src/AcpAgent.ts"
import * as AcpSession from "../../../packages/acp/src/AcpSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeEnv, fastAcp, isolation, root } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ isolation }))

/** The Tether host for ACP: `AcpSession` over `NodeTransport`, for runner.ts. */
export const host: Host = sessionHost(
  runtime,
  AcpSession.make({ agent: AcpAgent.command([fastAcp], { env: { set: { PATH: fakeEnv().PATH! } } }), cwd: root }),
  (result) => result.stopReason === "end_turn" ? undefined : result.stopReason
)
