/**
 * The real ACP agents (the Gemini CLI, claude-agent-acp) as their own vitest project, whose workers start inside a
 * network namespace that has only loopback (scripts/netns.sh, through ../netnsPool.ts), like the Claude and Codex
 * suites next door.
 */
import { defineProject } from "vitest/config"
import { netnsPool } from "../netnsPool.ts"

export default defineProject({
  test: {
    name: "acp-agents",
    include: ["*.test.ts"],
    pool: netnsPool,
    testTimeout: 90_000,
    hookTimeout: 60_000
  }
})
