/**
 * A node's sharding configuration: Effect's defaults, then the given defaults (`NodeCluster.shardingDefaults`), then
 * the environment as Effect's cluster reads it (`SHARD_LOCK_EXPIRATION`, …: a variable that is set wins over the
 * given default), then the layer's `sharding` options.
 *
 * @internal
 */
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import type * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"

/** The environment variable Effect's cluster reads a setting from (`shardLockExpiration` → `SHARD_LOCK_EXPIRATION`). */
export const variableOf = (key: string): string => key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()

/**
 * The configuration (see the module's description), `env` read when it runs (Effect's `configFromEnv` reads the
 * environment as it was when its module loaded).
 */
export const config = (
  defaults: Partial<ShardingConfig.ShardingConfig["Service"]>,
  options: Partial<ShardingConfig.ShardingConfig["Service"]>,
  env: Readonly<Record<string, string | undefined>> = process.env
): Effect.Effect<ShardingConfig.ShardingConfig["Service"], Config.ConfigError> => {
  const set: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (value !== undefined) set[name] = value
  const provider = ConfigProvider.constantCase(ConfigProvider.fromEnv({ env: set }))
  return Effect.map(
    Effect.provideService(ShardingConfig.config, ConfigProvider.ConfigProvider, provider),
    (fromEnv) => {
      const ours: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(defaults)) {
        if (env[variableOf(key)] === undefined) ours[key] = value
      }
      return { ...fromEnv, ...ours, ...options }
    }
  )
}
