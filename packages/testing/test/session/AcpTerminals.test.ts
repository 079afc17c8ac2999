/**
 * The terminals of an ACP session (`@tether/acp`'s internal `terminals.ts`) on TestClock, through `MockTransport`
 * running a tiny simulated program (it prints its arguments as lines, then exits, or runs until signalled): output
 * kept to a byte limit at character boundaries (1 MiB by default), kill and release, unknown ids; and the client's
 * check of a terminal's directory through symbolic links.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Transport from "@tether/core/Transport"
import { MockTransport, type Simulator } from "@tether/testing"
import { Duration, Effect, FileSystem, Option, PlatformError } from "effect"
import * as Client from "../../../acp/src/internal/client.ts"
import * as Terminals from "../../../acp/src/internal/terminals.ts"
import { settle } from "../support/Sessions.ts"

/** `lines...` printed, then exit 0; with `forever` first, it prints them and runs until a signal ends it. */
const program: Simulator.Factory<never> = (launch) => {
  const forever = launch.args[0] === "forever"
  const out: Array<Simulator.Output> = (forever ? launch.args.slice(1) : launch.args).map((line) => ({
    _tag: "Stdout",
    line
  }))
  if (!forever) out.push({ _tag: "Exit", status: { _tag: "Exited", code: 0 } })
  let ended = false
  return {
    write: () => {},
    endInput: () => {},
    trigger: () => {},
    signal: (_now, signal) => {
      if (!ended) out.push({ _tag: "Exit", status: { _tag: "Signaled", signal } })
    },
    poll: () => {
      const next = out.shift()
      if (next?._tag === "Exit") ended = true
      return next
    },
    nextWake: () => Infinity
  }
}

const spec = (...args: ReadonlyArray<string>): Transport.LaunchSpec => ({
  program: "program",
  args,
  cwd: Option.none(),
  env: { mode: "inherit", set: {}, unset: [] }
})

const terminals = Effect.gen(function*() {
  return Terminals.make({
    transport: yield* Transport.Transport,
    scope: yield* Effect.scope,
    termGrace: Duration.seconds(1)
  })
})

const layer = MockTransport.layerWith(() => program)

describe("ACP terminals", () => {
  it.effect("output is kept to the agent's limit from the end, cut between characters, never inside one", () =>
    Effect.gen(function*() {
      const t = yield* terminals
      const ascii = yield* t.create(spec("aaaa", "bbbb"), 6)
      // Each emoji is 4 bytes (a surrogate pair): 13 bytes, 11 kept means dropping one whole emoji.
      const emoji = yield* t.create(spec("😀😀😀"), 11)
      yield* settle(t.waitForExit(ascii))
      yield* settle(t.waitForExit(emoji))
      assert.deepStrictEqual(yield* t.output(ascii), {
        output: "\nbbbb\n",
        truncated: true,
        exitStatus: { exitCode: 0, signal: null }
      })
      const kept = (yield* t.output(emoji))!
      assert.strictEqual(kept.output, "😀😀\n")
      assert.isTrue(kept.truncated)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("with no limit from the agent, the last 1 MiB is kept", () =>
    Effect.gen(function*() {
      const t = yield* terminals
      const line = "x".repeat(100_000)
      const id = yield* t.create(spec(...Array.from({ length: 12 }, () => line)), undefined)
      yield* settle(t.waitForExit(id))
      const out = (yield* t.output(id))!
      assert.isTrue(out.truncated)
      assert.strictEqual(out.output.length, Terminals.defaultOutputLimit)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it("the byte count is kept as the output grows: appending never re-measures what is kept", () => {
    const terminal = { output: "", bytes: 0, truncated: false, limit: 8 }
    Terminals.append(terminal, "é€")
    assert.deepStrictEqual(terminal, { output: "é€", bytes: 5, truncated: false, limit: 8 })
    Terminals.append(terminal, "abcd")
    assert.deepStrictEqual(terminal, { output: "€abcd", bytes: 7, truncated: true, limit: 8 })
    // A surrogate pair is dropped whole: 13 bytes kept to 11 lose one 4-byte emoji, never half of one.
    const pairs = { output: "", bytes: 0, truncated: false, limit: 11 }
    Terminals.append(pairs, "😀😀😀\n")
    assert.deepStrictEqual(pairs, { output: "😀😀\n", bytes: 9, truncated: true, limit: 11 })
  })

  it.effect("kill ends the process and keeps its output readable; release forgets it; unknown ids are none", () =>
    Effect.gen(function*() {
      const t = yield* terminals
      const id = yield* t.create(spec("forever", "started"), undefined)
      const connection = yield* (yield* MockTransport.MockTransport).latest
      yield* settle(Effect.void)
      assert.isTrue(yield* connection.isAlive)
      assert.isTrue(yield* settle(t.kill(id)))
      assert.isFalse(yield* connection.isAlive)
      assert.deepStrictEqual(yield* settle(t.waitForExit(id)), Option.some({ exitCode: null, signal: "SIGTERM" }))
      assert.strictEqual((yield* t.output(id))?.output, "started\n")
      assert.isTrue(yield* settle(t.release(id)))
      for (const unknown of [id, "terminal-99"]) {
        assert.isUndefined(yield* t.output(unknown))
        assert.deepStrictEqual(yield* t.waitForExit(unknown), Option.none())
        assert.isFalse(yield* t.kill(unknown))
        assert.isFalse(yield* t.release(unknown))
      }
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("a terminal left running ends with the session's scope", () =>
    Effect.gen(function*() {
      const connection = yield* Effect.scoped(Effect.gen(function*() {
        const t = yield* terminals
        yield* t.create(spec("forever"), undefined)
        return yield* (yield* MockTransport.MockTransport).latest
      }))
      yield* settle(Effect.void)
      assert.isFalse(yield* connection.isAlive)
    }).pipe(Effect.provide(layer)))
})

describe("the client's terminal directory", () => {
  const CWD = "/home/user/project"
  const missing = (path: string) =>
    PlatformError.systemError({ _tag: "NotFound", module: "FileSystem", method: "realPath", pathOrDescriptor: path })
  // `link` inside the cwd points out of it; `sub` is a real directory inside.
  const real: Record<string, string> = { [CWD]: CWD, [`${CWD}/sub`]: `${CWD}/sub`, [`${CWD}/link`]: "/etc" }
  const fs = FileSystem.makeNoop({
    realPath: (path) => real[path] !== undefined ? Effect.succeed(real[path]) : Effect.fail(missing(path))
  })

  it.effect("is followed through symbolic links: one that leads out of the session's directory is refused", () =>
    Effect.gen(function*() {
      const serve = Client.serve({ terminal: true }, [CWD], fs, yield* terminals)
      const create = (cwd: string) => serve("terminal/create", { sessionId: "s", command: "ls", cwd })
      const refused = yield* create(`${CWD}/link`)
      assert.strictEqual(refused._tag, "Error")
      assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 0)
      assert.deepStrictEqual(yield* create(`${CWD}/sub`), { _tag: "Success", payload: { terminalId: "terminal-1" } })
    }).pipe(Effect.scoped, Effect.provide(layer)))
})
