/**
 * The pool of the real-CLI vitest projects: vitest's `forks` pool with one change, the worker process is started
 * through scripts/netns.sh (`unshare -n`, then `exec node <worker>`: same pid, same IPC channel), so a regression in
 * a CLI's offline behaviour cannot reach the network. Where no namespace can be made (no root and no user
 * namespaces), netns.sh warns and runs the worker directly; the suites print which of the two they got, and
 * `TETHER_NETNS_REQUIRED=1` turns the fallback into a failure.
 */
import type { ChildProcess } from "node:child_process"
import { fork } from "node:child_process"
import * as Path from "node:path"
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

/** The `pool` option of a project whose workers run inside a loopback-only network namespace. */
export const netnsPool = {
  name: "netns-forks",
  createPoolWorker: (options: PoolOptions) => new NetnsForksPoolWorker(options)
}
