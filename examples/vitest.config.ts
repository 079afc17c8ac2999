import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "docs",
    // The docs' tests (extracted by scripts/readme.ts) and the tests that run the docs' programs and the examples.
    include: ["readme/**/*.test.ts", "test/**/*.test.ts"]
  }
})
