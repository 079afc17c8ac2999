/**
 * A fake `codex` executable for process-level tests: the simulated `codex app-server` of `MockCodex` (the same
 * simulator `MockTransport` runs in memory) run as a real process over real stdio, with real timers and signals.
 *
 * `bin/fake-codex.mjs` is the executable; `bin/fast-codex.mjs`, the benchmarks' server, is the same simulator with
 * no waits, streaming `FRAMES:<n>` text deltas. Both reach the simulator through this package's own export
 * (`@tether/testing/FakeCodex`): the TypeScript sources in the workspace, the build once installed. Point
 * `TETHER_CODEX_PATH` (or `NodeTransport`'s `executables.codex`) at {@link path} to run a `CodexSession` against it.
 *
 * @since 0.1.0
 */
import { fileURLToPath } from "node:url"
import * as internal from "./internal/fakeCodex.ts"

/**
 * The absolute path of the fake server script (`bin/fake-codex.mjs`). It is executable (`#!/usr/bin/env node`),
 * so a transport can spawn it directly as the `codex` program. Every turn answers
 * `Hello from fake-codex #<n>: <prompt>` in `FAKE_CODEX_DELTAS` (3) pieces, `FAKE_CODEX_FRAME_DELAY_MS` (0) apart.
 *
 * @example
 * ```ts
 * import { FakeCodex } from "@tether/testing"
 *
 * process.env.TETHER_CODEX_PATH = FakeCodex.path
 * ```
 *
 * @category paths
 * @since 0.1.0
 */
export const path: string = fileURLToPath(new URL("../bin/fake-codex.mjs", import.meta.url))

/**
 * The absolute path of the benchmarks' server (`bin/fast-codex.mjs`): no waits; a prompt `FRAMES:<n>` streams n
 * text deltas (default `FAST_CODEX_FRAMES`, 3).
 *
 * @category paths
 * @since 0.1.0
 */
export const fastPath: string = fileURLToPath(new URL("../bin/fast-codex.mjs", import.meta.url))

/**
 * Runs this process as the fake `codex`: the entry point of `bin/fake-codex.mjs` (and, with `fast`, of
 * `bin/fast-codex.mjs`). It reads the launch arguments and the knobs from the process, and keeps it alive until the
 * simulated server exits (stdin EOF, SIGTERM: exit code 0).
 *
 * @category entry points
 * @since 0.1.0
 */
export const main = (options: { readonly fast?: boolean | undefined } = {}): void =>
  internal.main({ fast: options.fast ?? false })
