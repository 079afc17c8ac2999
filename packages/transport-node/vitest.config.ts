import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "transport-node",
    include: ["test/**/*.test.ts"]
  }
})
