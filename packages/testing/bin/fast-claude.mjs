#!/usr/bin/env node
// A fast stand-in for the `claude` CLI, for benchmarks (`pnpm bench`): the simulated CLI of `MockClaude` with no
// waits, run as this process. A prompt `FRAMES:<n>` streams n text deltas (default FAST_CLAUDE_FRAMES, 3), and
// `FAULT:<name>` words in it inject faults (`pnpm soak`; see src/internal/fakeClaude.ts); output goes out in writes
// of FAST_CLAUDE_BATCH_BYTES (256 KiB) that wait for the pipe, with stdin read in between.
// With FAST_CLAUDE_PROMPT_LOG set to a file, every prompt whose turn starts is appended to it as a JSON line
// (`pnpm chaos` counts executions with it; FAST_CLAUDE_PROMPT_LOG_TAG names the process's session there).
// It loads the simulator through the package's own export: the TypeScript source in the workspace, the build when
// installed.
import { withCompileCache } from "./compile-cache.mjs"

const { main } = await withCompileCache(() => import("@tether/testing/FakeClaude"))
main({ fast: true })
