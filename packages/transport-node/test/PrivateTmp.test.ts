/**
 * A session's temporary files go when it does: the CLI gets a private directory as TMPDIR, TMP and TEMP, and a tool
 * that fills it (20 MiB, a directory it locked) leaves nothing once the session is released. Real processes (a shell
 * as the CLI); POSIX only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Duration, Effect, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const fill = 20 * 1024 * 1024

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
    const lines = yield* connection.stdout.pipe(
      Stream.map((line) => line._tag === "Text" ? line.text : ""),
      Stream.takeWhile((line) => line !== "ready"),
      Stream.runCollect,
      Effect.timeout("5 seconds")
    )
    return Array.from(lines)
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
    }).pipe(Effect.provide(NodeTransport.layer({ watchdog: false }))))

  it.live("private to its session: mode 0700, one per session", () =>
    Effect.gen(function*() {
      const a = yield* openShell(`echo "$TMPDIR"; echo ready; exec sleep 30`)
      const b = yield* openShell(`echo "$TMPDIR"; echo ready; exec sleep 30`)
      assert.notStrictEqual(a[0], b[0])
      assert.strictEqual(Fs.statSync(a[0]).mode & 0o777, 0o700)
    }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ watchdog: false }))))

  it.live("a TMPDIR the host sets wins (no directory is made); privateTmp: false makes none", () =>
    Effect.gen(function*() {
      const [own] = yield* Effect.scoped(openShell(`echo "$TMPDIR"; echo ready`, { TMPDIR: "/var/tmp" }))
      assert.strictEqual(own, "/var/tmp")
      const [none] = yield* Effect.scoped(openShell(`echo "x$TMPDIR"; echo ready`)).pipe(
        Effect.provide(NodeTransport.layer({ watchdog: false, privateTmp: false }))
      )
      assert.strictEqual(none, "x")
    }).pipe(Effect.provide(NodeTransport.layer({ watchdog: false }))))
})
