/**
 * Which `claude` the examples run, shared by the quick start and the chat server.
 */
import type { TetherError } from "@tether/core"
import { Executable } from "@tether/transport-node"
import { Effect } from "effect"
import * as Path from "node:path"
import * as Url from "node:url"

/**
 * The `claude` to run: `TETHER_CLAUDE_PATH` if set. Online (against the real API), the one on PATH first. Offline
 * (against a local mock of the API), the version this repository pins (the devDependency of @tether/testing) first,
 * since that is the one checked against the mock; then whatever the default search finds.
 *
 * @category executables
 * @since 0.1.0
 */
export const find = (options: { readonly online: boolean }): Effect.Effect<string, TetherError.ExecutableNotFound> =>
  Executable.resolve({
    program: "claude",
    env: options.online ? process.env : { TETHER_CLAUDE_PATH: process.env.TETHER_CLAUDE_PATH },
    roots: [process.cwd(), Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.resolve("@tether/testing"))), "..")]
  }).pipe(Effect.catch(() => Executable.resolve({ program: "claude" })))
