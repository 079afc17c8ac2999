/**
 * Where the fast fake CLIs are and how every host starts them, so the hosts of a provider drive the very same
 * program: fast-claude for the Claude hosts, fast-codex (the Codex simulator as `codex app-server`) for the Codex ones,
 * fast-acp (the ACP simulator as an agent) for the ACP ones.
 */
import { randomUUID } from "node:crypto"
import * as Path from "node:path"

export const root = Path.resolve(import.meta.dirname, "../..")

/** packages/testing/bin/fast-claude.mjs: the CLI stand-in every host spawns. */
export const fakeClaude = Path.join(root, "packages/testing/bin/fast-claude.mjs")

/** packages/testing/bin/fast-codex.mjs: the `codex app-server` stand-in the Codex hosts spawn. */
export const fastCodex = Path.join(root, "packages/testing/bin/fast-codex.mjs")

/** packages/testing/bin/fast-acp.mjs: the ACP agent stand-in the ACP hosts spawn. */
export const fastAcp = Path.join(root, "packages/testing/bin/fast-acp.mjs")

/** The argv Tether and the bare host pass: the stream-json duplex with replays and partial messages. */
export const claudeArgs: ReadonlyArray<string> = [
  "--output-format",
  "stream-json",
  "--verbose",
  "--input-format",
  "stream-json",
  "--permission-prompt-tool",
  "stdio",
  "--replay-user-messages",
  "--include-partial-messages"
]

/**
 * The environment of a spawned fake: this Node first on PATH (the fake's `#!/usr/bin/env node` and the SDK's
 * `node <script>` both resolve it). Nothing else, so every host reads the same frames: the SDK adds
 * `CLAUDE_CODE_SDK_READS_SESSION_STATE=1` itself (two `session_state_changed` frames a turn), as it does for the real
 * CLI.
 */
export const fakeEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  env.PATH = `${Path.dirname(process.execPath)}${Path.delimiter}${process.env.PATH ?? ""}`
  delete env.CLAUDE_CODE_SDK_READS_SESSION_STATE
  delete env.NODE_OPTIONS
  return env
}

/**
 * The Tether hosts' `isolation` (`NodeTransport`'s): the default `"auto"` (a box per session), or `false` with
 * `BENCH_ISOLATION=false` (the table measured as the hosts were before the box, to set against a floor of then).
 */
export const isolation: "auto" | false = process.env.BENCH_ISOLATION === "false" ? false : "auto"

/** A prompt that makes the fake stream `frames` text deltas. */
export const prompt = (frames: number): string => `FRAMES:${frames}`

/** The stream-json `user` message a bare host writes for one prompt (without its newline). */
export const userMessageLine = (prompt: string): string =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "text", text: prompt }] },
    parent_tool_use_id: null,
    session_id: "",
    uuid: randomUUID()
  })

/** The `initialize` control request a bare host opens with (without its newline). */
export const initializeLine = (requestId: string): string =>
  JSON.stringify({ type: "control_request", request_id: requestId, request: { subtype: "initialize", hooks: {} } })
