/**
 * The cluster suite with real processes as its own vitest project: three runner processes and a client (the test)
 * on 127.0.0.1, a real PostgreSQL, and the real `claude` and `codex` offline against the mock model servers. Its
 * workers start inside a network namespace that has only loopback (scripts/netns.sh, through transport-node's
 * netnsPool.ts), so neither the CLIs nor the cluster can reach another machine.
 */
import { defineProject } from "vitest/config"
import { netnsPool } from "../../../transport-node/test/integration/netnsPool.ts"

export default defineProject({
  test: {
    name: "cluster-cli",
    include: ["*.test.ts"],
    pool: netnsPool,
    testTimeout: 300_000,
    hookTimeout: 120_000
  }
})
