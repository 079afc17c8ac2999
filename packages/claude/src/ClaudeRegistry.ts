/**
 * The registry of Claude Code sessions: `SessionRegistry` bound to `ClaudeSession.kind`.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { ClaudeRegistry } from "@tether/claude"
 * import { NodeTransport } from "@tether/transport-node"
 *
 * const program = Effect.gen(function*() {
 *   const registry = yield* ClaudeRegistry.ClaudeRegistry
 *   // Starts the session for this id, or finds it live (pinned while the scope is open).
 *   yield* registry.getOrCreate("chat-42", { model: "sonnet" })
 *   const result = yield* registry.run("chat-42", "Summarize the README")
 *   console.log(result.text, result.totalCostUsd)
 * }).pipe(Effect.scoped)
 *
 * program.pipe(Effect.provide(ClaudeRegistry.layer({ capacity: 32 }).pipe(Layer.provide(NodeTransport.layer()))))
 * ```
 *
 * @since 0.1.0
 */
import * as SessionRegistry from "@tether/core/SessionRegistry"
import type { InvalidConfig } from "@tether/core/TetherError"
import type * as Transport from "@tether/core/Transport"
import type * as Config from "effect/Config"
import type * as Layer from "effect/Layer"
import * as ClaudeSession from "./ClaudeSession.ts"

/**
 * The registry of Claude Code sessions. Provide it with {@link layer} or {@link layerConfig} (and a `Transport`).
 *
 * @category services
 * @since 0.1.0
 */
export class ClaudeRegistry
  extends SessionRegistry.Service<ClaudeRegistry>()("@tether/core/ClaudeRegistry", ClaudeSession.kind)
{}

/**
 * Provides {@link ClaudeRegistry} with the given settings. Requires a `Transport` (`NodeTransport`, or
 * `MockTransport` in tests). Releasing the layer closes every session.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  settings?: SessionRegistry.Settings
): Layer.Layer<ClaudeRegistry, InvalidConfig, Transport.Transport> => ClaudeRegistry.layer(settings)

/**
 * Provides {@link ClaudeRegistry} with settings read from `Config` (see `SessionRegistry.config`).
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (
  settings?: Config.Config<SessionRegistry.Settings>
): Layer.Layer<ClaudeRegistry, Config.ConfigError | InvalidConfig, Transport.Transport> =>
  ClaudeRegistry.layerConfig(settings)
