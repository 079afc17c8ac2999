// Mutation testing of the pure machines (`pnpm mutate`; not part of `pnpm test`: it runs the machine tests once per
// mutant). Scope: the session machine and each provider's protocol machine, against the tests that table-drive and
// property-test them (vitest.mutate.config.ts). Incremental: a run re-tests only the mutants whose
// code or tests changed since the last run (reports/stryker-incremental.json); `pnpm mutate --force` runs them all.
//
// Two settings make Stryker 10 run on this repository:
// - `tsconfigFile` names a file that does not exist, so Stryker leaves the tsconfig alone: its rewriting needs
//   TypeScript's JS API, which TypeScript 7 (the Go compiler) does not have. Node and vitest strip types anyway.
// - the vitest runner is listed in `plugins`: pnpm's layout hides it from Stryker's default plugin discovery.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  packageManager: "pnpm",
  testRunner: "vitest",
  plugins: ["@stryker-mutator/vitest-runner"],
  vitest: {
    configFile: "vitest.mutate.config.ts",
    dir: "."
  },
  tsconfigFile: "tsconfig.stryker-none.json",
  checkers: [],
  mutate: [
    "packages/core/src/internal/session/machine.ts",
    "packages/claude/src/internal/machine.ts",
    "packages/codex/src/internal/machine.ts"
  ],
  // The sandbox needs the core and provider packages, the testing package (the Claude surface's session tests run
  // there, against its simulator) and the workspace's node_modules (linked, not copied); nothing else.
  ignorePatterns: [
    "/.tools",
    "/.bench",
    "/.scratch",
    "/examples",
    "/scripts",
    // Codex's transcripts test reads the pinned codex version from transport-node's package.json.
    "/packages/transport-node/*",
    "!/packages/transport-node/package.json",
    "/packages/cluster",
    "/reports",
    "**/dist",
    "**/build"
  ],
  coverageAnalysis: "perTest",
  incremental: true,
  incrementalFile: "reports/stryker-incremental.json",
  // Two cores are shared with other work: one test process at a time keeps the machine usable.
  concurrency: 1,
  timeoutMS: 10_000,
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  thresholds: { high: 95, low: 90, break: null },
  cleanTempDir: "always"
}
