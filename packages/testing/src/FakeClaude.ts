/**
 * A fake `claude` executable for process-level tests: the simulated CLI of `MockClaude` (the same simulator
 * `MockTransport` runs in memory) run as a real process over real stdio, with real timers and signals, plus
 * misbehaving modes for teardown and framing tests.
 *
 * `bin/fake-claude.mjs` is the executable: it starts what is about the process (descendants, a flood on stderr)
 * before it loads the simulator, then calls {@link main}. `bin/fast-claude.mjs`, the benchmarks' CLI, is the same
 * simulator with no waits, streaming `FRAMES:<n>` text deltas. Both reach the simulator through this package's own
 * export (`@tether/testing/FakeClaude`): the TypeScript sources in the workspace, the build once installed, where
 * Node strips no types.
 *
 * @since 0.1.0
 */
import { fileURLToPath } from "node:url"
import * as internal from "./internal/fakeClaude.ts"

/**
 * The absolute path of the fake CLI script (`bin/fake-claude.mjs`). It is executable (`#!/usr/bin/env node`), so
 * a transport can spawn it directly as the `claude` program.
 *
 * @example
 * ```ts
 * import { FakeClaude } from "@tether/testing"
 *
 * process.env.TETHER_CLAUDE_PATH = FakeClaude.path
 * ```
 *
 * @category paths
 * @since 0.1.0
 */
export const path: string = fileURLToPath(new URL("../bin/fake-claude.mjs", import.meta.url))

/**
 * The misbehaving modes, selected with the `FAKE_CLAUDE_MODE` environment variable (comma separated to combine).
 *
 * - `ignore-sigterm`: ignores SIGTERM and stdin EOF; only SIGKILL ends it.
 * - `grandchildren`: spawns `sleep` children in its own process group (`FAKE_CLAUDE_CHILDREN`, default 2).
 * - `setsid-child`: spawns `sh -c 'sleep N; :'` as the leader of a new session, as the Bash tool does.
 * - `double-fork-daemon`: spawns a daemon whose parent exits at once (the daemon is re-parented).
 * - `crash-mid-turn`: exits with `FAKE_CLAUDE_EXIT_CODE` (default 3) after the turn's `system/init`.
 * - `hang`: reads stdin but never answers, and ignores EOF (SIGTERM ends it).
 * - `flood`: writes `stream_event` frames without end from the start (`FAKE_CLAUDE_FLOOD_COUNT` bounds them).
 * - `giant-line`: the first turn starts with a text block of `FAKE_CLAUDE_GIANT_BYTES` (default 3 MiB) characters:
 *   one assistant frame that long (and one `stream_event` delta, with partial messages).
 * - `stderr-flood`: writes to stderr without end.
 * - `exit-after-result`: exits 0 right after the first result.
 *
 * @category models
 * @since 0.1.0
 */
export const modes = [
  "ignore-sigterm",
  "grandchildren",
  "setsid-child",
  "double-fork-daemon",
  "crash-mid-turn",
  "hang",
  "flood",
  "giant-line",
  "stderr-flood",
  "exit-after-result"
] as const

/**
 * One of {@link modes}.
 *
 * @category models
 * @since 0.1.0
 */
export type Mode = typeof modes[number]

/**
 * The knobs of the fake CLI, as environment variables.
 *
 * @category models
 * @since 0.1.0
 */
export interface Knobs {
  readonly modes?: ReadonlyArray<Mode> | undefined
  /** Delay between the frames of a turn (lets a test interrupt mid-turn). */
  readonly frameDelayMillis?: number | undefined
  /** When descendants are started: at process start (default) or at the first turn. */
  readonly spawnAt?: "start" | "turn" | undefined
  /** Lifetime of the `sleep` descendants, in seconds (default 1000). */
  readonly sleepSeconds?: number | undefined
  /** `inherit` makes descendants hold the CLI's stdout and stderr open. */
  readonly childStdio?: "ignore" | "inherit" | undefined
  readonly children?: number | undefined
  readonly exitCode?: number | undefined
  readonly floodCount?: number | undefined
  readonly giantBytes?: number | undefined
  readonly deltas?: number | undefined
  /**
   * A shell command run the way the Bash tool runs one: `/bin/bash -c <tool>` as the leader of a new session, not
   * waited for; started with the descendants (`spawnAt`).
   */
  readonly tool?: string | undefined
  /** The same, run in the CLI's own session and process group. */
  readonly cliTool?: string | undefined
}

/**
 * Renders {@link Knobs} as the environment variables the fake CLI reads.
 *
 * @example
 * ```ts
 * import { FakeClaude } from "@tether/testing"
 *
 * const env = FakeClaude.env({ modes: ["setsid-child", "ignore-sigterm"] })
 * // { FAKE_CLAUDE_MODE: "setsid-child,ignore-sigterm" }
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const env = (knobs: Knobs): Record<string, string> => {
  const out: Record<string, string> = {}
  const put = (key: string, value: string | number | undefined) => {
    if (value !== undefined) out[key] = String(value)
  }
  if (knobs.modes !== undefined && knobs.modes.length > 0) out.FAKE_CLAUDE_MODE = knobs.modes.join(",")
  put("FAKE_CLAUDE_FRAME_DELAY_MS", knobs.frameDelayMillis)
  put("FAKE_CLAUDE_SPAWN_AT", knobs.spawnAt)
  put("FAKE_CLAUDE_SLEEP_SECONDS", knobs.sleepSeconds)
  put("FAKE_CLAUDE_CHILD_STDIO", knobs.childStdio)
  put("FAKE_CLAUDE_CHILDREN", knobs.children)
  put("FAKE_CLAUDE_EXIT_CODE", knobs.exitCode)
  put("FAKE_CLAUDE_FLOOD_COUNT", knobs.floodCount)
  put("FAKE_CLAUDE_GIANT_BYTES", knobs.giantBytes)
  put("FAKE_CLAUDE_DELTAS", knobs.deltas)
  put("FAKE_CLAUDE_TOOL", knobs.tool)
  put("FAKE_CLAUDE_CLI_TOOL", knobs.cliTool)
  return out
}

/**
 * Runs this process as the fake `claude`: the entry point of `bin/fake-claude.mjs` (and, with `fast`, of
 * `bin/fast-claude.mjs`). It reads the launch arguments and the knobs from the process, and keeps it alive until
 * the simulated CLI exits. `onTurn` runs when a turn starts (for descendants started at the first turn).
 *
 * @category entry points
 * @since 0.1.0
 */
export const main = (
  options: { readonly fast?: boolean | undefined; readonly onTurn?: (() => void) | undefined } = {}
): void => internal.main({ fast: options.fast ?? false, onTurn: options.onTurn ?? (() => {}) })
