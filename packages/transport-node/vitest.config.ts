import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "transport-node",
    include: ["test/**/*.test.ts"],
    // The real-CLI suite is its own project (test/integration/vitest.config.ts), run inside a network namespace.
    exclude: ["test/integration/**"]
  }
})
