import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "transport-node",
    include: ["test/**/*.test.ts"],
    // The real-CLI suite is its own project (test/integration/vitest.config.ts), run inside a network namespace.
    exclude: ["test/integration/**"],
    // Real processes: a host test starts Node and Effect in a child process, which takes seconds on a loaded
    // 2-core machine. The tests' own bounds (teardown within termGrace + killGrace, waits) are what they assert.
    testTimeout: 30_000
  }
})
