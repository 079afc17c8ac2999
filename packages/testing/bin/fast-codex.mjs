#!/usr/bin/env node
// A fast stand-in for `codex app-server`, for benchmarks (`pnpm bench`): the simulated server of `MockCodex` with no
// waits, run as this process. A prompt `FRAMES:<n>` streams n text deltas (default FAST_CODEX_FRAMES, 3); output goes
// out in writes of FAST_CODEX_BATCH_BYTES (256 KiB) that wait for the pipe, with stdin read in between. It loads the
// simulator through the package's own export: the TypeScript source in the workspace, the build when installed.
import { withCompileCache } from "./compile-cache.mjs"

const { main } = await withCompileCache(() => import("@tether/testing/FakeCodex"))
main({ fast: true })
