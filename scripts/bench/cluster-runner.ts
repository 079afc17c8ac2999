/**
 * One runner of the cluster benchmark: `node --expose-gc cluster-runner.ts <port>` with the database in
 * BENCH_CLUSTER_DATABASE. Its sessions run the fast fake CLI, in processes of their own, so that the runner's memory
 * and CPU are its own. On SIGUSR2 it collects garbage and writes its memory (`process.memoryUsage()`) to
 * `$BENCH_CLUSTER_MEMORY_DIR/<pid>.json`; its sessions' conversations live under that directory too.
 */
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { NodeCluster } from "../../packages/cluster/src/index.ts"
import { NodeTransport } from "../../packages/transport-node/src/index.ts"
import { BenchCluster, sharding } from "./cluster-world.ts"
import { fakeClaude } from "./fake.ts"

const port = Number(process.argv[2])

process.on("SIGUSR2", () => {
  const gc = (globalThis as { gc?: () => void }).gc
  gc?.()
  gc?.()
  const file = Path.join(process.env.BENCH_CLUSTER_MEMORY_DIR ?? "/tmp", `${process.pid}.json`)
  Fs.writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()))
  Fs.renameSync(`${file}.tmp`, file)
})

const Runner = BenchCluster.layerRunner({
  capacity: 1_000,
  idleTimeToLive: "1 hour",
  // The benchmark evicts the sessions that land on a runner that has its share already: their entities go soon, so
  // that what a runner keeps is what its live sessions cost.
  entityIdleTime: "1 second",
  stateDirectory: Path.join(process.env.BENCH_CLUSTER_MEMORY_DIR ?? "/tmp", `state-${port}`)
}).pipe(
  Layer.provide(NodeTransport.layer({ executables: { claude: fakeClaude } })),
  Layer.provide(
    NodeCluster.layer({
      postgres: process.env.BENCH_CLUSTER_DATABASE ?? "",
      runner: { host: "127.0.0.1", port },
      sharding
    })
  )
)

const fiber = Effect.runFork(
  Effect.logInfo(`runner ready on 127.0.0.1:${port}`).pipe(Effect.andThen(Effect.never), Effect.provide(Runner))
)
// SIGTERM drains (the layer's finalizers run); the benchmark SIGKILLs a runner to measure a failover.
process.once("SIGTERM", () => fiber.interruptUnsafe())
fiber.addObserver(() => process.exit(0))
