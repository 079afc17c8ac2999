/**
 * What the chaos suite's processes share (`pnpm chaos`, and its short version in `Chaos.test.ts`): the registry its
 * runners serve (Claude sessions of the fast fake CLI, each prompt recorded in the prompt log), its cluster binding,
 * the sharding settings of every node, and the environment variables the driver passes its runners and its client.
 */
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry } from "@tether/cluster"
import { Permission, SessionRegistry, Timeouts } from "@tether/core"
import { Duration, Effect, Schema } from "effect"
import * as Path from "node:path"

/** The environment of the suite's processes. */
export const variables = {
  /** The database URL (the driver's proxy in front of PostgreSQL). */
  database: "CHAOS_DATABASE",
  /** A runner's port on 127.0.0.1. */
  port: "CHAOS_PORT",
  /** The run's marker: every CLI of the run carries it in its environment (the driver finds them by it). */
  run: "CHAOS_RUN",
  /** A runner's own mark (its CLIs carry it in their prompt log's tag, `<session>@<mark>`). */
  runnerMark: "CHAOS_RUNNER_MARK",
  /** The file the fake CLIs append every prompt they execute to. */
  promptLog: "CHAOS_PROMPT_LOG",
  /** A runner's state directory. */
  state: "CHAOS_STATE",
  /** `off`: the runners hold no host lease (a frozen runner's CLIs live until it resumes), to compare with. */
  lease: "CHAOS_LEASE",
  /** `fast` or `defaults`: the shard lock settings of every node (see {@link shardingOf}). */
  locks: "CHAOS_LOCKS",
  /** The client's journal (what it sent and what became of it). */
  journal: "CHAOS_JOURNAL",
  /** The client's sessions, comma separated. */
  sessions: "CHAOS_SESSIONS",
  /** The file whose existence tells the client to stop sending. */
  stop: "CHAOS_STOP",
  /** How long a turn of the fake takes (ms), the client's pause between two prompts of a session (ms). */
  turnMillis: "CHAOS_TURN_MS",
  thinkMillis: "CHAOS_THINK_MS",
  /** How long one attempt may go unanswered before the client calls it hung (ms). */
  hangMillis: "CHAOS_HANG_MS",
  /** How long the client keeps retrying a prompt that failed retryably (ms). */
  retryMillis: "CHAOS_RETRY_MS"
} as const

/** The fast fake CLI (packages/testing/bin/fast-claude.mjs), as the benchmarks run it. */
export const fakeClaude = Path.resolve(import.meta.dirname, "../../../testing/bin/fast-claude.mjs")

export const ChaosConfig = Schema.Struct({})

/** Deadlines of a session: short, so that nothing the suite does waits for minutes. */
const timeouts = Effect.runSync(Timeouts.make({
  startup: "20 seconds",
  turn: "30 seconds",
  closeGrace: "500 millis",
  termGrace: "1 second"
}))

/**
 * Sessions of the fast fake CLI, with what the suite needs in their environment: the run's marker, the prompt log,
 * and the session's id with its runner's mark (the log's tag: `<session>@<runner>`).
 */
export class ChaosChats extends SessionRegistry.Service<ChaosChats>()("chaos/Chats", {
  acquire: (id, _config: typeof ChaosConfig.Type) =>
    ClaudeSession.make({
      timeouts,
      policy: Permission.denyAll,
      env: {
        set: {
          PATH: `${Path.dirname(process.execPath)}${Path.delimiter}${process.env.PATH ?? ""}`,
          [variables.run]: process.env[variables.run] ?? "",
          FAST_CLAUDE_PROMPT_LOG: process.env[variables.promptLog] ?? "",
          FAST_CLAUDE_PROMPT_LOG_TAG: `${id}@${process.env[variables.runnerMark] ?? ""}`
        }
      }
    }),
  fingerprint: SessionRegistry.fingerprint
}) {}

export const ChaosCluster = ClusterRegistry.make(ChaosChats, { config: ChaosConfig })

/** Which shard lock settings the nodes run with: `NodeCluster`'s defaults, or the integration suite's fast ones. */
export type Locks = "defaults" | "fast"

/**
 * The sharding settings of every node. With `defaults` the shard locks are `NodeCluster.shardingDefaults`' (locks
 * that expire after 45 s, refreshed every 5 s: a database outage of up to 30 s rides through); with `fast`, those of
 * the integration suite (a refresh every second, locks that expire after 6 s: an outage of up to 3 s), for the short
 * run.
 */
export const shardingOf = (locks: Locks) => ({
  shardsPerGroup: 60,
  ...(locks === "fast"
    ? { shardLockRefreshInterval: Duration.seconds(1), shardLockExpiration: Duration.seconds(6) }
    : {}),
  refreshAssignmentsInterval: Duration.millis(500),
  runnerHealthCheckInterval: Duration.seconds(1),
  entityMessagePollInterval: Duration.millis(500),
  entityReplyPollInterval: Duration.millis(100),
  entityTerminationTimeout: Duration.seconds(20),
  sendRetryInterval: Duration.millis(100)
})

/**
 * The database outage those settings ride through whenever it begins: `NodeCluster`'s default tolerance (the
 * expiration less two lock intervals) less one lock interval.
 */
export const toleranceOf = (locks: Locks): number => locks === "fast" ? 3_000 : 30_000

/** The sharding settings of this process, from its environment. */
export const sharding = shardingOf(process.env[variables.locks] === "defaults" ? "defaults" : "fast")

/** The prompt the client sends: the fake stalls `turnMillis` before it answers; the id makes it unique. */
export const promptOf = (promptId: string, turnMillis: number): string =>
  `chaos ${promptId} FAULT:stall=${turnMillis} FRAMES:3`

/** The prompt id in a prompt of {@link promptOf}. */
export const promptIdIn = (prompt: string): string | undefined => /^chaos (\S+) /.exec(prompt)?.[1]
