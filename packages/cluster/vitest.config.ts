import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "cluster",
    include: ["test/**/*.test.ts"],
    // The real-CLI suite is its own project (test/integration/vitest.config.ts), run inside a network namespace.
    exclude: ["test/integration/**"],
    // Every file starts a PostgreSQL of its own (one to a few seconds on a loaded 2-core machine).
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
