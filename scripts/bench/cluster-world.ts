/**
 * What the cluster benchmark's runner processes (scripts/bench/cluster-runner.ts) and its client
 * (scripts/bench-cluster.ts) share: a registry of Claude sessions over the fast fake CLI, its cluster binding, and
 * the sharding settings of every node.
 */
import { Duration, Schema } from "effect"
import { ClaudeSession } from "../../packages/claude/src/index.ts"
import { ClusterRegistry } from "../../packages/cluster/src/index.ts"
import { SessionRegistry } from "../../packages/core/src/index.ts"
import { fakeEnv } from "./fake.ts"

export const BenchConfig = Schema.Struct({})

/** Sessions of the fast fake CLI (packages/testing/bin/fast-claude.mjs), as the main benchmark's Tether host. */
export class BenchChats extends SessionRegistry.Service<BenchChats>()("bench/Chats", {
  acquire: (_id, _config: typeof BenchConfig.Type) =>
    ClaudeSession.make({ includePartialMessages: true, env: { set: { PATH: fakeEnv().PATH! } } }),
  fingerprint: SessionRegistry.fingerprint
}) {}

export const BenchCluster = ClusterRegistry.make(BenchChats, { config: BenchConfig })

/** The registry's type, local or clustered. */
export type BenchRegistry = SessionRegistry.Registry<
  typeof BenchConfig.Type,
  ClaudeSession.StartError,
  ClaudeSession.TurnResult,
  ClaudeSession.TurnError
>

/**
 * The sharding settings of every node: `NodeCluster`'s defaults (`NodeCluster.shardingDefaults`: table locks that
 * expire after 45 s, a health check every second, assignments read every 500 ms), which are what the failover
 * figure measures, with fewer shards than Effect's 300.
 */
export const sharding = {
  shardsPerGroup: 60,
  entityTerminationTimeout: Duration.seconds(10)
} as const
