import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: [
      "packages/*",
      "packages/transport-node/test/integration",
      "packages/transport-node/test/integration/codex",
      "packages/transport-node/test/integration/acp",
      "packages/cluster/test/integration",
      "examples"
    ],
    reporters: ["default", "./scripts/summary-reporter.ts"]
  }
})
