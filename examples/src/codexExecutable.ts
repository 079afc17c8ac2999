/**
 * Which `codex` the examples run (the Codex counterpart of claudeExecutable.ts).
 */
import type { TetherError } from "@tether/core"
import { Executable } from "@tether/transport-node"
import { Effect } from "effect"
import * as Path from "node:path"

/**
 * The `codex` to run: `TETHER_CODEX_PATH` if set. Online (against the real API), the one on PATH first. Offline
 * (against a local mock of the Responses API), the version this package pins (its devDependency `@openai/codex`)
 * first, since that is the one checked against the mock; then whatever the default search finds. Always the native
 * binary, never the npm package's Node launcher (`Executable.resolve` follows a launcher to its binary).
 *
 * @category executables
 * @since 0.2.0
 */
export const find = (options: { readonly online: boolean }): Effect.Effect<string, TetherError.ExecutableNotFound> =>
  Executable.resolve({
    program: "codex",
    env: options.online ? process.env : { TETHER_CODEX_PATH: process.env.TETHER_CODEX_PATH },
    roots: [Path.resolve(import.meta.dirname, "..")]
  }).pipe(Effect.catch(() => Executable.resolve({ program: "codex" })))
