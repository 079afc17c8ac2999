import { assert, describe, it } from "@effect/vitest"
import { Postgres } from "@tether/testing"
import { Effect, Exit, Redacted, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"

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
  it.live(
    "starts a server on 127.0.0.1 that is gone, with its data directory, when the scope closes",
    () =>
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
      }),
    60_000
  )

  it.live(
    "a data directory with many files is gone when the scope closes (the guardian never removes it alongside)",
    () =>
      Effect.gen(function*() {
        // Removing a large tree takes long enough that a guardian cleaning at the same time would overlap the
        // host's own removal, and Node's rmSync returns early, with the tree still there, when another process
        // removes entries under it: the host's release must be the only one removing.
        const scope = yield* Scope.make()
        const server = yield* Postgres.make().pipe(Scope.provide(scope))
        const extra = Path.join(server.dataDirectory, "extra")
        for (let dir = 0; dir < 100; dir++) {
          Fs.mkdirSync(Path.join(extra, String(dir)), { recursive: true })
          for (let file = 0; file < 100; file++) Fs.writeFileSync(Path.join(extra, String(dir), String(file)), "")
        }
        yield* Scope.close(scope, Exit.void)
        assert.isFalse(Fs.existsSync(Path.dirname(server.dataDirectory)))
      }),
    60_000
  )

  it.live(
    "a host killed without running its finalizers leaves no server and no directory behind",
    () =>
      Effect.gen(function*() {
        // A host that starts a server, says where, and waits to be killed.
        const host = yield* Effect.acquireRelease(
          Effect.sync(() =>
            ChildProcess.spawn(process.execPath, [
              "--input-type=module",
              "-e",
              `import { Postgres } from "@tether/testing"
             import { Effect } from "effect"
             Effect.runFork(Effect.scoped(Effect.gen(function*() {
               const server = yield* Postgres.make()
               console.log(JSON.stringify({ pid: server.pid, port: server.port, dir: server.dataDirectory }))
               yield* Effect.never
             })))`
            ], { cwd: Path.resolve(import.meta.dirname, ".."), stdio: ["ignore", "pipe", "inherit"] })
          ),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        const started = yield* Effect.callback<{ pid: number; port: number; dir: string }>((resume) => {
          let out = ""
          host.stdout!.setEncoding("utf8").on("data", (data: string) => {
            out += data
            if (out.includes("\n")) resume(Effect.succeed(JSON.parse(out.split("\n")[0])))
          })
        })
        assert.isTrue(yield* accepts(started.port))
        host.kill("SIGKILL")
        const deadline = Date.now() + 15_000
        while ((isAlive(started.pid) || Fs.existsSync(started.dir)) && Date.now() < deadline) {
          yield* Effect.sleep("100 millis")
        }
        assert.isFalse(isAlive(started.pid), "the server is gone")
        assert.isFalse(Fs.existsSync(started.dir), "its directory is gone")
      }),
    60_000
  )
})
