/**
 * The real-CLI suite as its own vitest project, whose workers start inside a network namespace that has only
 * loopback (scripts/netns.sh, through netnsPool.ts). The Codex suite (codex/) is a project of its own.
 */
import { defineProject } from "vitest/config"
import { netnsPool } from "./netnsPool.ts"

export default defineProject({
  test: {
    name: "claude-cli",
    include: ["*.test.ts"],
    pool: netnsPool,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
