import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "codex",
    include: ["test/**/*.test.ts"]
  }
})
