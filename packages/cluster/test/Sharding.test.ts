/**
 * A node's sharding configuration (`internal/sharding.ts`): `NodeCluster.shardingDefaults` over Effect's defaults,
 * the environment over them (a variable that is set wins), the layer's options over everything.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { NodeCluster } from "../src/index.ts"
import * as Sharding from "../src/internal/sharding.ts"

const seconds = (input: Duration.Input) => Duration.toSeconds(Duration.fromInputUnsafe(input))

describe("a node's sharding configuration", () => {
  it.effect("the environment wins over NodeCluster's defaults, the options over both", () =>
    Effect.gen(function*() {
      const name = Sharding.variableOf("shardLockExpiration")
      assert.strictEqual(name, "SHARD_LOCK_EXPIRATION")
      const before = process.env[name]
      try {
        delete process.env[name]
        const defaults = yield* Sharding.config(NodeCluster.shardingDefaults, {})
        assert.strictEqual(seconds(defaults.shardLockExpiration), 45)
        assert.isTrue(defaults.shardLockDisableAdvisory)
        assert.strictEqual(seconds(defaults.runnerHealthCheckInterval), 1)
        // Effect's own default where NodeCluster has none.
        assert.strictEqual(defaults.shardsPerGroup, 300)

        process.env[name] = "20 seconds"
        const fromEnv = yield* Sharding.config(NodeCluster.shardingDefaults, {})
        assert.strictEqual(seconds(fromEnv.shardLockExpiration), 20)
        // Only the variable that is set moves: the other defaults stay NodeCluster's.
        assert.strictEqual(seconds(fromEnv.shardLockRefreshInterval), 5)

        const fromOptions = yield* Sharding.config(NodeCluster.shardingDefaults, {
          shardLockExpiration: Duration.seconds(12)
        })
        assert.strictEqual(seconds(fromOptions.shardLockExpiration), 12)
      } finally {
        if (before === undefined) delete process.env[name]
        else process.env[name] = before
      }
    }))
})
