#!/usr/bin/env node
// A stand-in for `codex app-server` for process-level tests: the simulated server of `MockCodex` (the one
// MockTransport runs in memory) run as this process, over real stdio, with real timers and signals. See FakeCodex.ts
// for what it does and for its knobs. It loads the simulator through the package's own export, which is the
// TypeScript source in the workspace and the build when installed.
import module from "node:module"

// The simulator is TypeScript and the codec it encodes with is big: Node's compile cache spares the next starts the
// parsing and compiling. It is kept next to the package, not in the OS's temporary directory: a session's TMPDIR is
// its own (the transport's privateTmp) and goes with it.
module.enableCompileCache?.(
  process.env.NODE_COMPILE_CACHE ?? new URL("../node_modules/.cache/node-compile-cache", import.meta.url).pathname
)
const { main } = await import("@tether/testing/FakeCodex")
main()
