/**
 * The real `codex` suite as its own vitest project, whose workers start inside a network namespace that has only
 * loopback (scripts/netns.sh, through ../netnsPool.ts), like the Claude suite next door.
 */
import { defineProject } from "vitest/config"
import { netnsPool } from "../netnsPool.ts"

export default defineProject({
  test: {
    name: "codex-cli",
    include: ["*.test.ts"],
    pool: netnsPool,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
