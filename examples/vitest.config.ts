import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "docs",
    // The README's tests (extracted by scripts/readme.ts) and the tests that run the README's programs and examples.
    include: ["readme/**/*.test.ts", "test/**/*.test.ts"]
  }
})
