/**
 * The host-death watchdog's keeper (`internal/watchdog.ts`): the shell that holds the registrations while the host
 * lives and starts the Node program only when the host's pipe closes. Real processes: what is under test is what
 * a shell does with its input and its signals. The program here is a recorder that writes what it was given to a
 * file; HostDeath.test.ts runs the real program.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Watchdog from "../src/internal/watchdog.ts"
import { waitUntil } from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/watchdogHost.ts", import.meta.url))

/** A temporary directory with a recorder program that writes its stdin to `out-<pid>` beside itself. */
const recorder = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-keeper-"))
    const program = Path.join(dir, "recorder.mjs")
    Fs.writeFileSync(
      program,
      `import * as Fs from "node:fs"\n` +
        `const chunks = []\n` +
        `process.stdin.on("data", (chunk) => chunks.push(chunk))\n` +
        `process.stdin.on("end", () => Fs.writeFileSync(new URL("./out-" + process.pid, import.meta.url), ` +
        `Buffer.concat(chunks)))\n`
    )
    const outputs = () =>
      Fs.readdirSync(dir).filter((name) => name.startsWith("out-")).map((name) =>
        Fs.readFileSync(Path.join(dir, name), "utf8")
      )
    return { dir, program, outputs }
  }),
  ({ dir }) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const spawnKeeper = (program: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      ChildProcess.spawn("/bin/sh", ["-c", Watchdog.keeper, Watchdog.title, process.execPath, program], {
        stdio: ["pipe", "ignore", "inherit"]
      })
    ),
    (keeper) => Effect.sync(() => keeper.exitCode === null && keeper.signalCode === null && keeper.kill("SIGKILL"))
  )

const exited = (keeper: ChildProcess.ChildProcess) =>
  waitUntil("the keeper to exit", () => keeper.exitCode !== null || keeper.signalCode !== null, 10_000)

describe("watchdog keeper", () => {
  it("is rotated past rotateBytes beyond what it started with, and past as much again with many connections open", () => {
    const { rotateBytes, rotates } = Watchdog
    assert.isFalse(rotates(rotateBytes + 100, 100))
    assert.isTrue(rotates(rotateBytes + 101, 100))
    // 200 KiB of open connections: not at the next registration, only once as much again has been sent.
    const open = 200 * 1024
    assert.isFalse(rotates(open + 1, open))
    assert.isFalse(rotates(2 * open, open))
    assert.isTrue(rotates(2 * open + 1, open))
  })

  it.live("hands every line it kept, in order, to the program when its input ends", () =>
    Effect.gen(function*() {
      const { outputs, program } = yield* recorder
      const keeper = yield* spawnKeeper(program)
      const lines = [
        "L %2Fsys%2Ffs%2Fcgroup%2Fa",
        "+ m1 300 -",
        "= m1 42 1234",
        "+ m2 500 %2Fa%20b",
        "- m1",
        "  spaced \\ "
      ]
      for (const line of lines) keeper.stdin!.write(line + "\n")
      keeper.stdin!.end()
      yield* exited(keeper)
      assert.strictEqual(keeper.exitCode, 0)
      yield* waitUntil("the program's record", () => outputs().length === 1, 10_000)
      assert.deepStrictEqual(outputs(), [lines.map((line) => line + "\n").join("")])
    }).pipe(Effect.scoped))

  it.live("exits on Q without starting the program", () =>
    Effect.gen(function*() {
      const { dir, outputs, program } = yield* recorder
      const keeper = yield* spawnKeeper(program)
      keeper.stdin!.write("+ m1 300 -\n= m1 42 1234\n")
      keeper.stdin!.end("Q\n")
      yield* exited(keeper)
      assert.strictEqual(keeper.exitCode, 0)
      // The program would have been started by the keeper before it exited: nothing can appear later.
      assert.deepStrictEqual(outputs(), [], `found in ${dir}`)
    }).pipe(Effect.scoped))

  it.live("outlives SIGINT, SIGHUP and SIGTERM, and still hands its lines over", () =>
    Effect.gen(function*() {
      const { outputs, program } = yield* recorder
      const keeper = yield* spawnKeeper(program)
      keeper.stdin!.write("+ m1 300 -\n")
      // The trap is the keeper's first command: wait until it has read a line, so it has run.
      yield* Effect.sleep("100 millis")
      for (const signal of ["SIGINT", "SIGHUP", "SIGTERM"] as const) keeper.kill(signal)
      yield* Effect.sleep("100 millis")
      assert.strictEqual(keeper.exitCode, null)
      assert.strictEqual(keeper.signalCode, null)
      keeper.stdin!.end("= m1 42 1234\n")
      yield* exited(keeper)
      yield* waitUntil("the program's record", () => outputs().length === 1, 10_000)
      assert.deepStrictEqual(outputs(), ["+ m1 300 -\n= m1 42 1234\n"])
    }).pipe(Effect.scoped))

  it.live("a rotated keeper holds every open connection, and the one it replaced starts nothing", () =>
    Effect.gen(function*() {
      const { outputs, program } = yield* recorder
      const host = ChildProcess.spawnSync(process.execPath, [hostScript, program], {
        encoding: "utf8",
        timeout: 20_000
      })
      assert.match(host.stdout, /^rotated \d+ \d+\n$/, `host said ${host.stdout}, stderr ${host.stderr}`)
      assert.strictEqual(host.signal, "SIGKILL")
      yield* waitUntil("the program's record", () => outputs().length > 0, 10_000)
      assert.deepStrictEqual(outputs(), ["+ a 300 -\n= a 123 456\n+ c 700 %2Fsys%2Ffs%2Fcgroup%2Fx%20y\n"])
    }).pipe(Effect.scoped))
})
