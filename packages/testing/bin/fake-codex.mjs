#!/usr/bin/env node
// A stand-in for `codex app-server` for process-level tests: the simulated server of `MockCodex` (the one
// MockTransport runs in memory) run as this process, over real stdio, with real timers and signals. See FakeCodex.ts
// for what it does and for its knobs. It loads the simulator through the package's own export, which is the
// TypeScript source in the workspace and the build when installed.
import { withCompileCache } from "./compile-cache.mjs"

const { main } = await withCompileCache(() => import("@tether/testing/FakeCodex"))
main()
