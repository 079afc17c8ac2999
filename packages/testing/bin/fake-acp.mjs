#!/usr/bin/env node
// A stand-in for an ACP agent for process-level tests: the simulated agent of `MockAcp` (the one MockTransport runs
// in memory) run as this process, over real stdio, with real timers and signals. See FakeAcp.ts for what it does and
// for its knobs. It loads the simulator through the package's own export.
import { withCompileCache } from "./compile-cache.mjs"

const { main } = await withCompileCache(() => import("@tether/testing/FakeAcp"))
main()
