/**
 * A fake ACP agent executable for process-level tests: the simulated agent of `MockAcp` (the same simulator
 * `MockTransport` runs in memory) run as a real process over real stdio, with real timers and signals.
 * `bin/fake-acp.mjs` is the executable; `bin/fast-acp.mjs`, the benchmarks' agent, is the same simulator with no
 * waits, streaming `FRAMES:<n>` text chunks. Both reach the simulator through this package's own export
 * (`@tether/testing/FakeAcp`). Run an `AcpSession` against it with `AcpAgent.command([FakeAcp.path])`.
 *
 * Its knobs are environment variables: `FAKE_ACP_CHUNKS` (3) and `FAKE_ACP_CHUNK_DELAY_MS` (0) shape every answer
 * (`Hello from fake-acp #<n>: <prompt>`); a prompt `run: <shell command>` runs the command in a terminal of the
 * client and answers its output, `background: <shell command>` starts it there and leaves it running (the terminals
 * carry the fake's `TEST_MARK`); `FAKE_ACP_FAULTS` (comma separated: `ignore-stdin-eof`, `ignore-sigterm`,
 * `ignore-cancel`, `fail-load`) makes it misbehave from the start.
 *
 * @since 0.1.0
 */
import { fileURLToPath } from "node:url"
import * as internal from "./internal/fakeAcp.ts"

/**
 * The absolute path of the fake agent script (`bin/fake-acp.mjs`), executable (`#!/usr/bin/env node`).
 *
 * @example
 * ```ts
 * import { AcpAgent } from "@tether/acp"
 * import { FakeAcp } from "@tether/testing"
 *
 * const agent = AcpAgent.command([FakeAcp.path])
 * ```
 *
 * @category paths
 * @since 0.1.0
 */
export const path: string = fileURLToPath(new URL("../bin/fake-acp.mjs", import.meta.url))

/**
 * The absolute path of the benchmarks' agent (`bin/fast-acp.mjs`): no waits; a prompt `FRAMES:<n>` streams n text
 * chunks (default `FAST_ACP_FRAMES`, 3), written in batches of `FAST_ACP_BATCH_BYTES` (256 KiB).
 *
 * @category paths
 * @since 0.1.0
 */
export const fastPath: string = fileURLToPath(new URL("../bin/fast-acp.mjs", import.meta.url))

/**
 * Runs this process as the fake ACP agent: the entry point of `bin/fake-acp.mjs` (and, with `fast`, of
 * `bin/fast-acp.mjs`).
 *
 * @category entry points
 * @since 0.1.0
 */
export const main = (options: { readonly fast?: boolean | undefined } = {}): void =>
  internal.main({ fast: options.fast ?? false })
