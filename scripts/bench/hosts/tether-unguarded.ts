/**
 * Tether (subscriber) without the two guarantees that cost at a session's start and that the SDK does not give:
 * containment `process-tree` instead of a cgroup (no launcher shell between the spawn and the CLI) and no host-death
 * watchdog (no keeper process started with the first session), and no periodic scan of the process table during the
 * session (only the one at teardown). Everything else as tether.ts. Not one of the hosts
 * `pnpm bench` holds to the targets: run it by hand, to see what those guarantees cost, as
 *
 *   node --import .bench/cold/dist-hooks.js .bench/cold/cold.js tether-unguarded   (after a pnpm bench, or its prepare)
 *   node scripts/bench/runner.ts tether-unguarded <figure> '{}'
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as ClaudeSession from "../../../packages/claude/src/ClaudeSession.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { fakeClaude, fakeEnv } from "../fake.ts"
import type { Host } from "../host.ts"
import { sessionHost } from "./session.ts"

const runtime = ManagedRuntime.make(
  // No periodic scan of the process table either (`scanInterval: 0`): only the one at teardown, as the SDK's host
  // reads none.
  NodeTransport.layer({
    executables: { claude: fakeClaude },
    containment: "process-tree",
    watchdog: false,
    scanInterval: 0
  })
)

/** The Tether host without cgroup containment and without the watchdog, for runner.ts and cold.ts. */
export const host: Host = sessionHost(
  runtime,
  ClaudeSession.make({ includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }),
  (result) => result.isError ? result.subtype : undefined
)
