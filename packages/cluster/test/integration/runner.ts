/**
 * One runner process of the suite: `node runner.ts` with its world in the environment (TETHER_IT_*). It holds
 * shards of the cluster at 127.0.0.1:<TETHER_IT_PORT> and owns the CLI processes of their sessions. SIGTERM drains
 * it (NodeRuntime runs the finalizers) and it exits 0; SIGKILL is what the suite does to it to play a lost machine.
 */
import { NodeRuntime } from "@effect/platform-node"
import { NodeCluster } from "@tether/cluster"
import { PinnedClaude } from "@tether/testing"
import { Executable, NodeTransport } from "@tether/transport-node"
import { Effect, Layer } from "effect"
import * as Path from "node:path"
import { ChatsCluster, sharding } from "./world.ts"

const env = process.env
const port = Number(env.TETHER_IT_PORT)

const codex = Effect.runSync(
  Executable.resolve({ program: "codex", env: {}, roots: [Path.resolve(import.meta.dirname, "../..")] }).pipe(
    Effect.orDie
  )
)

const Runner = ChatsCluster.layerRunner({
  capacity: 8,
  idleTimeToLive: "10 minutes",
  drainTimeout: "15 seconds",
  stateDirectory: env.TETHER_IT_STATE
}).pipe(
  Layer.provide(NodeTransport.layer({ executables: { claude: PinnedClaude.resolveSync(PinnedClaude.latest), codex } })),
  Layer.provide(
    NodeCluster.layer({
      postgres: env.TETHER_IT_DATABASE ?? "",
      runner: { host: "127.0.0.1", port },
      sharding
    })
  )
)

Effect.logInfo(`runner ready on 127.0.0.1:${port} (pid ${process.pid})`).pipe(
  Effect.andThen(Effect.never),
  Effect.provide(Runner),
  // SIGTERM drains it and exits 0; Effect's default teardown would exit 130 for the interruption.
  NodeRuntime.runMain({ teardown: NodeCluster.teardown })
)
