import { assert, describe, it } from "@effect/vitest"
import { Postgres } from "@tether/testing"
import { Effect, Exit, Redacted, Scope } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"

/** Whether something accepts TCP connections on 127.0.0.1:port. */
const accepts = (port: number) =>
  Effect.callback<boolean>((resume) => {
    const socket = Net.connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
  })

const isAlive = (pid: number) => {
  try {
    return !/\) [ZX] /.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    return false
  }
}

/** The effective uid of a process, from /proc. */
const uidOf = (pid: number) => Number(/^Uid:\s+\d+\s+(\d+)/m.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1])

describe("Postgres", () => {
  it.live("starts a server on 127.0.0.1 that is gone, with its data directory, when the scope closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* Postgres.make().pipe(Scope.provide(scope))
      assert.match(Redacted.value(server.url), /^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/postgres$/)
      assert.isTrue(yield* accepts(server.port))
      assert.isTrue(Fs.existsSync(server.dataDirectory))
      assert.include(yield* server.log, "database system is ready to accept connections")
      if (process.platform === "linux") {
        assert.isTrue(isAlive(server.pid))
        // PostgreSQL refuses root: as root, the server runs as another user.
        if (process.getuid?.() === 0) assert.notStrictEqual(uidOf(server.pid), 0)
      }
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(yield* accepts(server.port))
      assert.isFalse(Fs.existsSync(server.dataDirectory))
      if (process.platform === "linux") assert.isFalse(isAlive(server.pid))
    }), 60_000)
})
