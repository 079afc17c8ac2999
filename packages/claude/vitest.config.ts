import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "claude",
    include: ["test/**/*.test.ts"]
  }
})
