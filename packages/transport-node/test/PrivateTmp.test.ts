/**
 * A session's temporary files go when it does: the CLI gets a private directory as TMPDIR, TMP and TEMP, and a tool
 * that fills it (20 MiB, a directory it locked) leaves nothing once the session is released. Without isolation
 * between sessions the directory is named by its path under the host's; in a session's box (the default as root) it
 * is mounted over /tmp, which TMPDIR names. Real processes (a shell as the CLI); POSIX only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Duration, Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { linesUntilReady } from "./utils.ts"

const fill = 20 * 1024 * 1024

const notIsolated = NodeTransport.layer({ watchdog: false, isolation: false })

/** The sessions' private directories this host has now, under the host's temporary directory. */
const privateDirs = () => Fs.readdirSync(Os.tmpdir()).filter((name) => name.startsWith(`tether-tmp-${process.pid}-`))

/** Opens `sh -c script` and reads its stdout until the line `ready`: the lines before it. */
const openShell = (script: string, set: Transport.Environment["set"] = {}) =>
  Effect.gen(function*() {
    const transport = yield* Transport.Transport
    const connection = yield* transport.open({
      program: "sh",
      args: ["-c", script],
      cwd: Option.none(),
      env: { mode: "clean", set, unset: [] }
    }, { termGrace: Duration.millis(200) })
    const lines = yield* linesUntilReady(connection)
    return lines
  })

describe.runIf(process.platform !== "win32")("a session's private temporary directory", { timeout: 20_000 }, () => {
  it.live("TMPDIR, TMP and TEMP name it; what a tool filled it with is gone after release", () =>
    Effect.gen(function*() {
      const [tmpdir, tmp, temp, size] = yield* Effect.scoped(openShell(
        `echo "$TMPDIR"; echo "$TMP"; echo "$TEMP"; head -c ${fill} /dev/zero > "$TMPDIR/fill"; ` +
          `mkdir "$TMPDIR/locked"; head -c 1024 /dev/zero > "$TMPDIR/locked/f"; chmod 000 "$TMPDIR/locked"; ` +
          `wc -c < "$TMPDIR/fill"; echo ready; exec sleep 30`
      ))
      assert.strictEqual(Path.dirname(tmpdir), Os.tmpdir())
      assert.match(Path.basename(tmpdir), /^tether-tmp-[0-9]+-/)
      assert.strictEqual(tmp, tmpdir)
      assert.strictEqual(temp, tmpdir)
      assert.strictEqual(Number(size), fill, "the tool filled it while the session ran")
      assert.isFalse(Fs.existsSync(tmpdir), "released: the directory and everything in it are gone")
    }).pipe(Effect.provide(notIsolated)))

  it.live("private to its session: mode 0700, one per session", () =>
    Effect.gen(function*() {
      const a = yield* openShell(`echo "$TMPDIR"; echo ready; exec sleep 30`)
      const b = yield* openShell(`echo "$TMPDIR"; echo ready; exec sleep 30`)
      assert.notStrictEqual(a[0], b[0])
      assert.strictEqual(Fs.statSync(a[0]).mode & 0o777, 0o700)
    }).pipe(Effect.scoped, Effect.provide(notIsolated)))

  it.live("a session's start sweeps the private directories of hosts that are gone, and no live host's", () => {
    // A pid no process has, and a live one (this process's parent).
    let dead = 4_194_000
    while (Fs.existsSync(`/proc/${dead}`)) dead++
    const left = Path.join(Os.tmpdir(), `tether-tmp-${dead}-AbC123`)
    const live = Path.join(Os.tmpdir(), `tether-tmp-${process.ppid}-AbC123`)
    for (const dir of [left, live]) Fs.mkdirSync(Path.join(dir, "inside"), { recursive: true })
    return Effect.gen(function*() {
      yield* Effect.scoped(openShell("echo ready; exec sleep 30"))
      assert.isFalse(Fs.existsSync(left), "a dead host's directory is swept")
      assert.isTrue(Fs.existsSync(live), "a live host's is kept")
    }).pipe(
      Effect.provide(notIsolated),
      Effect.ensuring(Effect.sync(() => {
        for (const dir of [left, live]) Fs.rmSync(dir, { recursive: true, force: true })
      }))
    )
  })

  it.live("a TMPDIR the host sets wins (no directory is made); privateTmp: false makes none", () =>
    Effect.gen(function*() {
      const [own] = yield* Effect.scoped(openShell(`echo "$TMPDIR"; echo ready`, { TMPDIR: "/var/tmp" }))
      assert.strictEqual(own, "/var/tmp")
      const [none] = yield* Effect.scoped(openShell(`echo "x$TMPDIR"; echo ready`)).pipe(
        Effect.provide(NodeTransport.layer({ watchdog: false, privateTmp: false, isolation: false }))
      )
      assert.strictEqual(none, "x")
    }).pipe(Effect.provide(notIsolated)))

  it.live.runIf(process.platform === "linux" && process.getuid?.() === 0)(
    "in a box: /tmp is the session's own, what a tool filled it with is gone after release",
    () =>
      Effect.gen(function*() {
        const name = `tether-box-fill-${process.pid}`
        const before = privateDirs()
        const [tmpdir, size, mine] = yield* Effect.scoped(Effect.gen(function*() {
          const lines = yield* openShell(
            `echo "$TMPDIR"; head -c ${fill} /dev/zero > /tmp/${name}; mkdir /tmp/locked; chmod 000 /tmp/locked; ` +
              `wc -c < /tmp/${name}; echo ready; exec sleep 30`
          )
          // The host's /tmp does not have it; the session's private directory does.
          assert.isFalse(Fs.existsSync(Path.join("/tmp", name)), "not in the host's /tmp")
          const made = privateDirs().filter((dir) => !before.includes(dir))
          assert.strictEqual(made.length, 1)
          const other = yield* openShell(`ls /tmp/${name} 2>/dev/null || echo absent; echo ready; exec sleep 30`)
          assert.deepStrictEqual(other, ["absent"], "another session's /tmp is its own")
          return [...lines, made[0]]
        }))
        assert.strictEqual(tmpdir, "/tmp")
        assert.strictEqual(Number(size), fill, "the tool filled it while the session ran")
        assert.isFalse(Fs.existsSync(Path.join(Os.tmpdir(), mine)), "released: the directory and everything in it")
      }).pipe(Effect.provide(NodeTransport.layer({ watchdog: false, isolation: true })))
  )
})
