import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// The tests `pnpm mutate` runs against each mutant of the machines (see stryker.config.mjs): the machines' own
// tables and properties, Codex's recorded transcripts replayed through its machine, and the Claude surface's
// session tests (in-process MCP calls, structured output, hooks and dialogs on TestClock; no real time). The
// property test runs fewer cases there, from a fixed seed, so that each mutant is killed (or not) the same way on
// every run.
//
// The workspace packages resolve to the sources beside this file: Stryker runs the tests in a sandbox copy of the
// repository whose node_modules are links to the original's, so `@tether/claude` imported by a test of another
// package would otherwise load the original, uninstrumented machine, and its mutants would count as uncovered.
const source = (path: string) => fileURLToPath(new URL(`./packages/${path}`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@tether\/(core|claude|codex)$/, replacement: source("$1/src/index.ts") },
      { find: /^@tether\/(core|claude|codex)\/(.+)$/, replacement: source("$1/src/$2.ts") }
    ]
  },
  test: {
    name: "machines",
    include: [
      "packages/core/test/SessionMachine.test.ts",
      "packages/core/test/SessionMachineHostRequests.test.ts",
      "packages/claude/test/SessionMachineProperties.test.ts",
      "packages/claude/test/ClaudeMachine.test.ts",
      "packages/testing/test/session/ClaudeSurface.test.ts",
      "packages/codex/test/CodexMachine.test.ts",
      "packages/codex/test/CodexTranscripts.test.ts"
    ],
    env: {
      TETHER_PROPERTY_RUNS: "60",
      TETHER_PROPERTY_SEED: "12"
    }
  }
})
