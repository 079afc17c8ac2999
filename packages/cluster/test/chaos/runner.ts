/**
 * One runner of the chaos suite: `node runner.ts` with its world in the environment (CHAOS_*: world.ts). It holds
 * shards of the cluster at 127.0.0.1:<CHAOS_PORT> and owns the fake CLIs of their sessions. SIGTERM drains it (it
 * exits 0); the driver SIGKILLs and SIGSTOPs it to play a lost or frozen machine, and SIGUSR2 toggles a load on its
 * event loop (busy 200 ms of every 250 ms: a runner starved of CPU, its lock refreshes late).
 */
import { NodeRuntime } from "@effect/platform-node"
import { NodeCluster } from "@tether/cluster"
import { NodeTransport } from "@tether/transport-node"
import { Effect, Layer } from "effect"
import { ChaosCluster, fakeClaude, sharding, variables } from "./world.ts"

const env = process.env
const port = Number(env[variables.port])

let load: ReturnType<typeof setInterval> | undefined
process.on("SIGUSR2", () => {
  if (load !== undefined) {
    clearInterval(load)
    load = undefined
    return
  }
  load = setInterval(() => {
    const until = Date.now() + 200
    while (Date.now() < until) {
      // busy
    }
  }, 250)
})

const Runner = ChaosCluster.layerRunner({
  capacity: 200,
  idleTimeToLive: "10 minutes",
  drainTimeout: "10 seconds",
  finalSaveTimeout: "5 seconds",
  stateDirectory: env[variables.state]
}).pipe(
  // Unboxed: the fake CLIs append to the driver's prompt log, in the driver's own (0700) directory, which a session's
  // box could not write; the suite is about the cluster, and a CLI that cannot write its log would fail every turn.
  Layer.provide(NodeTransport.layer({ executables: { claude: fakeClaude }, isolation: false })),
  Layer.provide(
    NodeCluster.layer({
      postgres: env[variables.database] ?? "",
      runner: { host: "127.0.0.1", port },
      sharding,
      ...(env[variables.lease] === "off" ? { lease: false } : {})
    })
  )
)

Effect.logInfo(`runner ready on 127.0.0.1:${port} (pid ${process.pid})`).pipe(
  Effect.andThen(Effect.never),
  Effect.provide(Runner),
  NodeRuntime.runMain({ teardown: NodeCluster.teardown })
)
