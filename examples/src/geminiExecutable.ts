/**
 * Which Gemini CLI the examples run (the Gemini counterpart of claudeExecutable.ts).
 */
import type { TetherError } from "@tether/core"
import { PinnedAcp } from "@tether/testing"
import { Executable } from "@tether/transport-node"
import { Effect } from "effect"

/**
 * The `gemini` to run: `TETHER_GEMINI_PATH` if set. Online (against the real API), the one on PATH first. Offline
 * (against a local mock of the Gemini API), the version this repository pins (the devDependency of @tether/testing,
 * see `PinnedAcp`) first, since that is the one checked against the mock; then whatever the default search finds.
 * The pinned one is its `bundle/gemini.js`, which runs with the Node on PATH (its `#!/usr/bin/env node`).
 *
 * @category executables
 * @since 0.1.0
 */
export const find = (options: { readonly online: boolean }): Effect.Effect<string, TetherError.ExecutableNotFound> => {
  const search = Executable.resolve({
    program: "gemini",
    env: { TETHER_GEMINI_PATH: process.env.TETHER_GEMINI_PATH, PATH: process.env.PATH }
  })
  const pinned = Effect.map(PinnedAcp.resolve("gemini"), (command) => command.script)
  return process.env.TETHER_GEMINI_PATH !== undefined || options.online
    ? Effect.catch(search, () => pinned)
    : Effect.catch(pinned, () => search)
}
