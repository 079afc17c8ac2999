import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "acp",
    include: ["test/**/*.test.ts"]
  }
})
