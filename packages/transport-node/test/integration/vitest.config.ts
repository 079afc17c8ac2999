/**
 * The real-CLI suite as its own vitest project, whose workers start inside a network namespace that has only
 * loopback (scripts/netns.sh), so that a regression in the CLI's offline behaviour cannot reach the network.
 *
 * The pool is vitest's `forks` pool with one change: the worker process is started through scripts/netns.sh
 * (`unshare -n`, then `exec node <worker>`: same pid, same IPC channel). Where no namespace can be made (no root
 * and no user namespaces), netns.sh warns and runs the worker directly; the suite prints which of the two it got,
 * and `TETHER_NETNS_REQUIRED=1` turns the fallback into a failure.
 */
import type { ChildProcess } from "node:child_process"
import { fork } from "node:child_process"
import * as Path from "node:path"
import { defineProject } from "vitest/config"
import { ForksPoolWorker, type PoolOptions } from "vitest/node"

const netns = Path.resolve(import.meta.dirname, "../../../../scripts/netns.sh")

class NetnsForksPoolWorker extends ForksPoolWorker {
  override readonly name = "netns-forks"

  constructor(options: PoolOptions) {
    super(options)
  }

  override async start() {
    // `ForksPoolWorker.start` forks only when it has no process yet (`_fork ||= fork(...)`): give it ours, spawned
    // through netns.sh, and let it do the rest (output piping, vitest's own watchdog).
    const self = this as unknown as { _fork?: ChildProcess }
    self._fork ??= fork(this.entrypoint, [], {
      execPath: netns,
      execArgv: [process.execPath, ...this.execArgv],
      env: this.env,
      stdio: "pipe",
      serialization: "advanced"
    })
    return super.start()
  }
}

export default defineProject({
  test: {
    name: "claude-cli",
    include: ["*.test.ts"],
    pool: { name: "netns-forks", createPoolWorker: (options) => new NetnsForksPoolWorker(options) },
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
