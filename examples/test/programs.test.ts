/**
 * The programs the READMEs show (```ts run blocks, extracted by scripts/readme.ts) and the host example run as a
 * user runs them: `node <file>` against the fake `claude` of @tether/testing (TETHER_CLAUDE_PATH), as real processes.
 * Every process a run starts carries a marker in its environment and is killed when the test ends, however it ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { FakeClaude, FakeCodex } from "@tether/testing"
import { Data, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

const examples = Path.resolve(import.meta.dirname, "..")

interface Program {
  readonly file: string
  readonly source: string
}

const programs: ReadonlyArray<Program> = JSON.parse(
  Fs.readFileSync(Path.join(examples, "readme", "programs.json"), "utf8")
)

const markVariable = "TETHER_PROGRAM_RUN"

/** Live processes whose environment carries the marker (Linux: /proc; elsewhere none are found). */
const marked = (mark: string): ReadonlyArray<number> => {
  if (process.platform !== "linux") return []
  const needle = `${markVariable}=${mark}\0`
  return Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return !/\) [ZX] /.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1")) &&
        Fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(needle)
    } catch {
      return false
    }
  })
}

const killMarked = (mark: string) =>
  Effect.sync(() => {
    for (const pid of marked(mark)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
    }
  })

class ProgramFailed extends Data.TaggedError("ProgramFailed")<{ readonly reason: string }> {}

interface Outcome {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `node <file> ...args` to its end (at most 30 s) with `env` added to this process's environment. Whatever it
 * started is killed when the scope closes.
 */
const run = (file: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const mark = randomUUID()
    yield* Effect.addFinalizer(() => killMarked(mark))
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [file, ...args], {
          cwd: Path.dirname(file),
          env: { ...process.env, ...env, [markVariable]: mark },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (data: string) => stdout += data)
    child.stderr.setEncoding("utf8").on("data", (data: string) => stderr += data)
    const code = yield* Effect.callback<number | null, ProgramFailed>((resume) => {
      child.once("error", (error) => resume(Effect.fail(new ProgramFailed({ reason: error.message }))))
      child.once("close", (code) => resume(Effect.succeed(code)))
    }).pipe(
      Effect.timeoutOrElse({
        duration: "30 seconds",
        orElse: () => Effect.fail(new ProgramFailed({ reason: `still running after 30 s\n${stdout}\n${stderr}` }))
      })
    )
    const outcome: Outcome = { code, stdout, stderr }
    return outcome
  })

const fake = { TETHER_CLAUDE_PATH: FakeClaude.path }

describe("the READMEs' programs", () => {
  it("the READMEs have programs to run", () => {
    assert.isAbove(programs.length, 0)
  })

  for (const program of programs) {
    it.live(`${program.source} runs against the fake claude and exits 0`, () =>
      Effect.gen(function*() {
        const outcome = yield* run(Path.join(examples, "readme", program.file), [], fake)
        assert.strictEqual(outcome.code, 0, `${program.source} exited ${outcome.code}\n${outcome.stderr}`)
      }), 60_000)
  }
})

describe("examples/src/host.ts", () => {
  const host = Path.join(examples, "src", "host.ts")

  it.live("streams one turn's text and prints its usage", () =>
    Effect.gen(function*() {
      const outcome = yield* run(host, ["Say hello"], fake)
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.include(outcome.stdout, "Hello from fake-claude #1: Say hello")
      assert.match(outcome.stdout, /\d+ tokens in, \d+ out/)
      assert.strictEqual(outcome.stderr, "")
    }), 60_000)

  it.live(
    "handles a startup failure as a value with its disposition, not as an unhandled error",
    () =>
      Effect.gen(function*() {
        const outcome = yield* run(host, ["Say hello"], { TETHER_CLAUDE_PATH: "/nonexistent/claude" })
        assert.strictEqual(outcome.code, 0, outcome.stderr)
        assert.strictEqual(
          outcome.stderr,
          "nothing reached the CLI, fall back: claude executable not found (searched: " +
            "TETHER_CLAUDE_PATH=/nonexistent/claude)\n"
        )
      }),
    60_000
  )

  it.live("handles a CLI that exits during the handshake the same way", () =>
    Effect.gen(function*() {
      // A shell refuses Claude's flags and exits at once: the handshake fails.
      const outcome = yield* run(host, ["Say hello"], { TETHER_CLAUDE_PATH: "/bin/sh" })
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.match(outcome.stderr, /^nothing reached the CLI, fall back: /)
      assert.notInclude(outcome.stderr, "    at ", "no stack trace")
    }), 60_000)
})

describe("examples/src/switch-provider.ts", () => {
  const host = Path.join(examples, "src", "switch-provider.ts")
  const fakes = { TETHER_CLAUDE_PATH: FakeClaude.path, TETHER_CODEX_PATH: FakeCodex.path }

  for (const [provider, greeting] of [["claude", "fake-claude"], ["codex", "fake-codex"]] as const) {
    it.live(`with TETHER_PROVIDER=${provider}, the same program runs ${provider}`, () =>
      Effect.gen(function*() {
        const outcome = yield* run(host, ["Say hello"], { ...fakes, TETHER_PROVIDER: provider })
        assert.strictEqual(outcome.code, 0, outcome.stderr)
        assert.include(outcome.stdout, `Hello from ${greeting} #1: Say hello`)
        assert.match(outcome.stdout, new RegExp(`${provider}: \\d+ tokens in, \\d+ out`))
      }), 60_000)
  }
})
