/**
 * The host-death watchdog's keeper (`internal/watchdog.ts`): the shell that holds the registrations while the host
 * lives and starts the Node program only when the host's pipe closes. Real processes: what is under test is what
 * a shell does with its input and its signals. The program here is a recorder that writes what it was given to a
 * file; HostDeath.test.ts runs the real program.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import { EventEmitter } from "node:events"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { vi } from "vitest"
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

/** The keeper as the watchdog starts it (its own session, argv[0] the title), killed at the end if still there. */
const spawnKeeper = (program: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Watchdog.spawnKeeper(program)),
    (keeper) => Effect.sync(() => keeper.exitCode === null && keeper.signalCode === null && keeper.kill("SIGKILL"))
  )

/** Whether `pid` ignores SIGHUP, SIGINT and SIGTERM (bits 1, 2 and 15 of SigIgn in /proc/<pid>/status). */
const ignoresSignals = (pid: number): boolean => {
  try {
    const mask = /SigIgn:\s+([0-9a-f]+)/.exec(Fs.readFileSync(`/proc/${pid}/status`, "latin1"))?.[1]
    return mask !== undefined && (BigInt(`0x${mask}`) & 0x4003n) === 0x4003n
  } catch {
    return false
  }
}

const exited = (keeper: ChildProcess.ChildProcess) =>
  waitUntil("the keeper to exit", () => keeper.exitCode !== null || keeper.signalCode !== null, 10_000)

/** A simulated keeper (see {@link simulated}). */
interface Simulated {
  readonly child: ChildProcess.ChildProcess
  readonly written: Array<string>
  ended: boolean
  full: boolean
  readonly drain: () => void
}

/**
 * Simulated keepers: what each was written, whether its input ended, and events the test emits. A keeper whose pipe
 * is `full` takes the write it has been given only when the test calls `drain` (the write's callback waits as it
 * would for a pipe).
 */
const simulated = () => {
  const keepers: Array<Simulated> = []
  let throws = false
  let startFull = false
  const spawn = (_main: string): ChildProcess.ChildProcess => {
    if (throws) throw new Error("ENOMEM")
    const written: Array<string> = []
    const waiting: Array<() => void> = []
    const child = new EventEmitter() as unknown as ChildProcess.ChildProcess & { stdin: Writable }
    const entry: Simulated = {
      child,
      written,
      ended: false,
      full: startFull,
      drain: () => {
        for (const take of waiting.splice(0)) take()
      }
    }
    const stdin = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        const take = () => {
          written.push(chunk.toString())
          done()
        }
        if (entry.full) waiting.push(take)
        else take()
      },
      final: (done) => {
        entry.ended = true
        done()
      }
    })
    Object.assign(child, { stdin, exitCode: null, signalCode: null, unref: () => {} })
    keepers.push(entry)
    return child
  }
  return {
    keepers,
    spawn,
    failNext: (fail: boolean) => {
      throws = fail
    },
    fullNext: (full: boolean) => {
      startFull = full
    }
  }
}

/** Lets the simulated streams run their callbacks. */
const settle = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))

/**
 * Registers and unregisters connections until a keeper that started with one connection is due for a rotation,
 * counting the bytes beyond that one as the client does: none of these registrations rotates.
 */
const fill = (watchdog: Watchdog.Watchdog) => {
  let sent = 0
  for (let i = 0; sent <= Watchdog.rotateBytes; i++) {
    const marker = `f${i}`.padEnd(90, "x")
    watchdog.register(marker, 300, undefined)
    watchdog.unregister(marker)
    sent += `+ ${marker} 300 -\n- ${marker}\n`.length
  }
}

/** A client over `keepers` whose first keeper holds connection `a` and is due for a rotation at the next registration. */
const dueForRotation = (keepers: { readonly spawn: (main: string) => ChildProcess.ChildProcess }) => {
  const watchdog = Watchdog.make("main", keepers.spawn)
  watchdog.register("a", 300, undefined)
  fill(watchdog)
  return watchdog
}

describe("watchdog client", () => {
  it.effect("a rotation tells the old keeper everything, and Q only once the fresh one has started and holds its lines", () =>
    Effect.gen(function*() {
      const simulation = simulated()
      const { keepers } = simulation
      const watchdog = dueForRotation(simulation)
      watchdog.register("c", 300, undefined)
      assert.strictEqual(keepers.length, 2)
      const [old, fresh] = keepers
      assert.strictEqual(fresh!.written.join(""), "+ a 300 -\n+ c 300 -\n")
      watchdog.setRoot("c", 7, "9")
      yield* settle
      // Its lines are in its pipe, but it has not started yet: the old one still hears everything and is not told Q.
      assert.isFalse(old!.ended)
      assert.isTrue(old!.written.join("").endsWith("= c 7 9\n"))
      fresh!.child.emit("spawn")
      yield* settle
      assert.isTrue(old!.ended)
      assert.isTrue(old!.written.join("").endsWith("= c 7 9\nQ\n"))
      watchdog.unregister("c")
      assert.isTrue(fresh!.written.join("").endsWith("= c 7 9\n- c\n"))
      assert.isFalse(old!.written.join("").includes("- c"))
    }))

  it.effect("a rotation waits until every line written to the fresh keeper is in its pipe", () =>
    Effect.gen(function*() {
      const simulation = simulated()
      const { fullNext, keepers } = simulation
      const watchdog = dueForRotation(simulation)
      // The next keeper's pipe is full from the start: its replay waits in Node's buffer.
      fullNext(true)
      watchdog.register("c", 300, undefined)
      fullNext(false)
      const [old, fresh] = keepers as [Simulated, Simulated]
      fresh.child.emit("spawn")
      yield* settle
      assert.isFalse(old.ended)
      watchdog.register("d", 300, undefined)
      // The replay gets through, "+ d" not yet: still not.
      fresh.drain()
      yield* settle
      assert.isFalse(old.ended)
      assert.isTrue(old.written.join("").endsWith("+ d 300 -\n"))
      fresh.full = false
      fresh.drain()
      yield* settle
      assert.isTrue(old.ended)
      assert.strictEqual(fresh.written.join(""), "+ a 300 -\n+ c 300 -\n+ d 300 -\n")
    }))

  it.effect("a rotation whose spawn throws leaves the old keeper in place, and the next registration tries again", () =>
    Effect.gen(function*() {
      const simulation = simulated()
      const { failNext, keepers } = simulation
      const watchdog = dueForRotation(simulation)
      failNext(true)
      watchdog.register("c", 300, undefined)
      failNext(false)
      assert.strictEqual(keepers.length, 1)
      watchdog.setRoot("c", 7, "9")
      assert.isTrue(keepers[0]!.written.join("").endsWith("+ c 300 -\n= c 7 9\n"))
      watchdog.register("d", 300, undefined)
      assert.strictEqual(keepers.length, 2)
      assert.strictEqual(keepers[1]!.written.join(""), "+ a 300 -\n+ c 300 -\n= c 7 9\n+ d 300 -\n")
      yield* settle
    }))

  it("a lost keeper is started again with the open connections after 100 ms, later while starts keep failing", () => {
    // The client's timer is Node's: fake timers stand in for the clock.
    vi.useFakeTimers()
    try {
      const { keepers, spawn } = simulated()
      const watchdog = Watchdog.make("main", spawn)
      watchdog.register("a", 300, undefined)
      watchdog.setRoot("a", 5, "6")
      keepers[0]!.child.emit("spawn")
      keepers[0]!.child.emit("exit", null, "SIGKILL")
      vi.advanceTimersByTime(99)
      assert.strictEqual(keepers.length, 1, "not before 100 ms")
      vi.advanceTimersByTime(1)
      assert.strictEqual(keepers.length, 2, "without waiting for a registration")
      assert.strictEqual(keepers[1]!.written.join(""), "+ a 300 -\n= a 5 6\n")
      // It failed before it started: the next one 200 ms later.
      keepers[1]!.child.emit("exit", null, "SIGKILL")
      vi.advanceTimersByTime(199)
      assert.strictEqual(keepers.length, 2)
      vi.advanceTimersByTime(1)
      assert.strictEqual(keepers.length, 3)
      // One that started and was lost: 100 ms again.
      keepers[2]!.child.emit("spawn")
      keepers[2]!.child.emit("exit", null, "SIGKILL")
      vi.advanceTimersByTime(100)
      assert.strictEqual(keepers.length, 4)
      // A registration does not wait for the timer; close stops it.
      keepers[3]!.child.emit("exit", null, "SIGKILL")
      watchdog.register("b", 300, undefined)
      assert.strictEqual(keepers.length, 5)
      keepers[4]!.child.emit("exit", null, "SIGKILL")
      watchdog.close()
      vi.advanceTimersByTime(10_000)
      assert.strictEqual(keepers.length, 5)
    } finally {
      vi.useRealTimers()
    }
  })

  it.effect("close during a rotation tells both keepers Q, and their late events change nothing", () =>
    Effect.gen(function*() {
      const simulation = simulated()
      const { keepers } = simulation
      const watchdog = dueForRotation(simulation)
      watchdog.register("c", 300, undefined)
      const [old, fresh] = keepers.slice(-2)
      watchdog.close()
      fresh!.child.emit("spawn")
      fresh!.child.emit("exit", 0, null)
      yield* settle
      assert.isTrue(old!.ended)
      assert.isTrue(fresh!.ended)
      assert.isTrue(old!.written.join("").endsWith("Q\n"))
      assert.isTrue(fresh!.written.join("").endsWith("Q\n"))
      watchdog.register("d", 300, undefined)
      assert.strictEqual(keepers.length, 2)
    }))

  for (const failure of ["error", "exit"] as const) {
    it.effect(`a fresh keeper that fails before it started (${failure}) leaves the old one in place, told everything`, () =>
      Effect.gen(function*() {
        const simulation = simulated()
        const { keepers } = simulation
        const watchdog = dueForRotation(simulation)
        watchdog.register("c", 300, undefined)
        const [old, fresh] = keepers
        if (failure === "error") fresh!.child.emit("error", new Error("EAGAIN"))
        else fresh!.child.emit("exit", null, "SIGKILL")
        yield* settle
        watchdog.setRoot("c", 7, "9")
        assert.isFalse(old!.ended)
        assert.isTrue(old!.written.join("").endsWith("+ c 300 -\n= c 7 9\n"))
        assert.isFalse(fresh!.written.join("").includes("= c 7 9"))
        // Still due: the next registration tries again.
        watchdog.register("d", 300, undefined)
        assert.strictEqual(keepers.length, 3)
        assert.strictEqual(keepers[2]!.written.join(""), "+ a 300 -\n+ c 300 -\n= c 7 9\n+ d 300 -\n")
      }))
  }

  it.effect("a keeper that cannot be spawned keeps the registrations for the next one", () =>
    Effect.gen(function*() {
      const { keepers, spawn } = simulated()
      let fail = true
      const watchdog = Watchdog.make("main", (main) => {
        if (fail) throw new Error("ENOMEM")
        return spawn(main)
      })
      watchdog.register("a", 300, undefined)
      watchdog.setRoot("a", 5, "6")
      fail = false
      watchdog.register("b", 300, "/sys/fs/cgroup/b")
      assert.strictEqual(keepers.length, 1)
      assert.strictEqual(keepers[0]!.written.join(""), "+ a 300 -\n= a 5 6\n+ b 300 %2Fsys%2Ffs%2Fcgroup%2Fb\n")
      watchdog.close()
      yield* settle
      assert.isTrue(keepers[0]!.ended)
      assert.isTrue(keepers[0]!.written.join("").endsWith("Q\n"))
    }))
})

describe("watchdog client under a host lease", () => {
  /** A board of the test's own (the process's is the cluster's), with one holder whose lease ends `inMillis` on. */
  const leasedBoard = () => {
    const board: Watchdog.LeaseBoard = { holders: new Map(), listeners: new Set() }
    const holder = {}
    const set = (inMillis: number | undefined) => {
      if (inMillis === undefined) board.holders.delete(holder)
      else board.holders.set(holder, performance.now() + inMillis)
      for (const listener of board.listeners) listener()
    }
    return { board, set }
  }

  /** The `H` lines a keeper was written, with their millis rounded to seconds (the client reads a real clock). */
  const leaseLines = (written: ReadonlyArray<string>) =>
    written.join("").split("\n").filter((line) => line.startsWith("H ")).map((line) =>
      line === "H -" ? line : `H ${Math.round(Number(line.slice(2)) / 1000)}s`
    )

  it.effect("a leased host's keeper is started leased, told the lease first and at every renewal", () =>
    Effect.gen(function*() {
      const { keepers, spawn } = simulated()
      const modes: Array<boolean> = []
      const { board, set } = leasedBoard()
      set(5_000)
      const watchdog = Watchdog.make("main", (main, leased) => {
        modes.push(leased)
        return spawn(main)
      }, board)
      watchdog.register("a", 300, undefined)
      assert.deepStrictEqual(modes, [true])
      assert.isTrue(keepers[0]!.written.join("").startsWith("H "))
      assert.isTrue(keepers[0]!.written.join("").endsWith("\n+ a 300 -\n"))
      set(9_000)
      set(-1_000)
      set(undefined)
      assert.deepStrictEqual(leaseLines(keepers[0]!.written), ["H 5s", "H 9s", "H 0s", "H -"])
      // A leased keeper keeps only the open connections: it is never rotated for its size.
      fill(watchdog)
      watchdog.register("c", 300, undefined)
      assert.strictEqual(keepers.length, 1)
      watchdog.close()
      set(3_000)
      assert.deepStrictEqual(leaseLines(keepers[0]!.written), ["H 5s", "H 9s", "H 0s", "H -"])
      assert.strictEqual(board.listeners.size, 0)
    }))

  it.effect("a shell keeper is replaced by a leased one, with every open connection, when a lease appears", () =>
    Effect.gen(function*() {
      const { keepers, spawn } = simulated()
      const modes: Array<boolean> = []
      const { board, set } = leasedBoard()
      const watchdog = Watchdog.make("main", (main, leased) => {
        modes.push(leased)
        return spawn(main)
      }, board)
      watchdog.register("a", 300, undefined)
      watchdog.setRoot("a", 5, "6")
      set(4_000)
      assert.deepStrictEqual(modes, [false, true])
      const [shell, leased] = keepers as [Simulated, Simulated]
      assert.deepStrictEqual(leaseLines(shell.written), [])
      assert.deepStrictEqual(leaseLines(leased.written), ["H 4s"])
      assert.isTrue(leased.written.join("").endsWith("\n+ a 300 -\n= a 5 6\n"))
      leased.child.emit("spawn")
      yield* settle
      assert.isTrue(shell.ended)
      watchdog.close()
    }))
})

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

  it.live("keeps every line verbatim, whatever it holds, and thousands of them in order", () =>
    Effect.gen(function*() {
      const { outputs, program } = yield* recorder
      const keeper = yield* spawnKeeper(program)
      // What a shell would expand or a printf would format, were a line ever parsed: each is only assigned.
      const odd = ["$HOME $1 ${n}", "`id` $(echo x)", "'\"'\"", "a\\nb \\", "%s %d %%", "*; k0=1 &", "", "  "]
      const lines = [...odd, ...Array.from({ length: 3_000 }, (_, i) => `+ m${i} ${i} -`)]
      keeper.stdin!.end(lines.map((line) => line + "\n").join(""))
      yield* exited(keeper)
      assert.strictEqual(keeper.exitCode, 0)
      yield* waitUntil("the program's record", () => outputs().length === 1, 10_000)
      assert.deepStrictEqual(outputs()[0]!.split("\n"), [...lines, ""])
    }).pipe(Effect.scoped))

  it.live("drops a last line the host did not finish, as the program would", () =>
    Effect.gen(function*() {
      const { outputs, program } = yield* recorder
      const keeper = yield* spawnKeeper(program)
      keeper.stdin!.end("+ m1 300 -\n= m1 42 1234\n+ m2 30")
      yield* exited(keeper)
      yield* waitUntil("the program's record", () => outputs().length === 1, 10_000)
      assert.deepStrictEqual(outputs(), ["+ m1 300 -\n= m1 42 1234\n"])
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
      // The trap is the keeper's first command: signalled before it ran, the shell would die for the wrong reason.
      yield* waitUntil("the keeper's trap", () => ignoresSignals(keeper.pid!), 10_000)
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
