#!/usr/bin/env node
// A fast stand-in for `codex app-server`, for benchmarks (`pnpm bench`): the simulated server of `MockCodex` with no
// waits, run as this process. A prompt `FRAMES:<n>` streams n text deltas (default FAST_CODEX_FRAMES, 3); output goes
// out in writes of FAST_CODEX_BATCH_BYTES (256 KiB) that wait for the pipe, with stdin read in between. It loads the
// simulator through the package's own export: the TypeScript source in the workspace, the build when installed.
import module from "node:module"

// Node's compile cache, kept next to the package, not in the OS's temporary directory: a session's TMPDIR is its own
// (the transport's privateTmp) and goes with it.
module.enableCompileCache?.(
  process.env.NODE_COMPILE_CACHE ?? new URL("../node_modules/.cache/node-compile-cache", import.meta.url).pathname
)
const { main } = await import("@tether/testing/FakeCodex")
main({ fast: true })
