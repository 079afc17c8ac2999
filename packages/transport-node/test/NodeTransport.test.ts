import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { TetherError, Timeouts, Transport } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import {
  Config,
  ConfigProvider,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Redacted,
  Schedule,
  Scope,
  Stream
} from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  fakeClaudePath,
  fakeSpec,
  initialize,
  isAlive,
  killOnExit,
  marked,
  newMark,
  stat,
  tempDir,
  userMessage,
  waitUntil,
  withMark
} from "./utils.ts"

const termGrace = { termGrace: Duration.millis(300) }

/** The benchmarks' fast fake CLI, which takes faults from its prompts (`FAULT:<name>`). */
const fastClaudePath = Path.join(Path.dirname(fakeClaudePath), "fast-claude.mjs")

const TransportLive = NodeTransport.layer({ executables: { claude: fakeClaudePath }, watchdog: false })

/**
 * Opens a connection in the current scope, its processes marked (`TEST_MARK`, kept when the spec has one) and
 * killed when the scope closes, after the transport's own teardown: a failing test leaves nothing running.
 */
const open = (spec: Transport.LaunchSpec) =>
  Effect.gen(function*() {
    const marked = withMark(spec)
    yield* killOnExit(marked.mark)
    const transport = yield* Transport.Transport
    return yield* transport.open(marked.spec, termGrace)
  })

/** Opens a connection with exactly `spec`'s environment: for a process that exits by itself. */
const openAsIs = (spec: Transport.LaunchSpec) =>
  Effect.flatMap(Transport.Transport, (transport) => transport.open(spec, termGrace))

const inheritEnv: Transport.Environment = { mode: "inherit", set: {}, unset: [] }

const json = (line: Transport.Line): Record<string, unknown> => {
  assert.strictEqual(line._tag, "Text")
  return JSON.parse(line._tag === "Text" ? line.text : "null")
}

/** Reads frames until one satisfies `done` (inclusive). */
const readUntil = (connection: Transport.Connection, done: (frame: Record<string, unknown>) => boolean) =>
  connection.stdout.pipe(
    Stream.map(json),
    Stream.takeUntil(done),
    Stream.runCollect
  )

/** An executable file with this content, in a directory removed with the scope. */
const script = (content: string | Buffer) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-script-"))
      // Reachable by others, as an installed CLI is: an isolated session runs it as a uid of its own.
      Fs.chmodSync(dir, 0o755)
      const file = Path.join(dir, "claude")
      Fs.writeFileSync(file, content, { mode: 0o755 })
      return file
    }),
    (file) => Effect.sync(() => Fs.rmSync(Path.dirname(file), { recursive: true, force: true }))
  )

const spawnErrorOf = <A>(effect: Effect.Effect<A, TetherError.SpawnError, Scope.Scope | Transport.Transport>) =>
  effect.pipe(Effect.scoped, Effect.flip, Effect.provide(TransportLive))

describe("NodeTransport", () => {
  it.live("runs a turn over stream-json: frames arrive in order, as lines", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const connection = yield* open(fakeSpec(mark, {}, {
        args: ["--input-format", "stream-json", "--replay-user-messages", "--include-partial-messages"]
      }))
      assert.isTrue(Option.isSome(connection.pid))
      yield* connection.write(initialize)
      yield* connection.write(userMessage("Say hello", "uuid-1"))
      const frames = yield* readUntil(connection, (frame) =>
        frame.type === "command_lifecycle" && frame.state === "completed")
      const kinds = frames.map((frame) =>
        frame.subtype === undefined ? String(frame.type) : `${frame.type}/${frame.subtype}`
      )
      assert.deepStrictEqual(kinds.slice(0, 5), [
        "control_response",
        "command_lifecycle",
        "command_lifecycle",
        "system/init",
        "system/status"
      ])
      assert.strictEqual(frames[1].command_uuid, "uuid-1")
      const replay = frames.find((frame) =>
        frame.type === "user"
      )
      assert.strictEqual(replay?.uuid, "uuid-1")
      assert.strictEqual(replay?.isReplay, true)
      assert.isTrue(kinds.includes("stream_event"))
      const result = frames.find((frame) => frame.type === "result")
      assert.strictEqual(result?.subtype, "success")
      assert.strictEqual(result?.result, "Hello from fake-claude #1: Say hello")
      // A result does not end the process.
      assert.isTrue(Option.isNone(yield* connection.exitStatus))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("keeps stdout until it is read: lines written before the consumer subscribes are not lost", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), {}))
      yield* connection.write(initialize)
      yield* Effect.sleep(Duration.millis(200))
      const first = yield* Stream.runHead(connection.stdout)
      assert.strictEqual(Option.isSome(first) && json(first.value).type, "control_response")
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("stdin EOF: the CLI exits 0, stdout ends, and the exit status is kept", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), {}))
      yield* connection.write(initialize)
      yield* connection.endInput
      yield* connection.endInput
      const lines = yield* Stream.runCollect(connection.stdout)
      assert.strictEqual(lines.length, 1)
      const status = yield* connection.exit
      assert.deepStrictEqual(status, Transport.ExitStatus.Exited({ code: 0 }))
      assert.deepStrictEqual(yield* connection.exitStatus, Option.some(status))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("a crash mid-turn: exit code, stderr tail, and writes afterwards fail with TransportWriteError", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), { modes: ["crash-mid-turn"], exitCode: 7 }))
      yield* connection.write(userMessage("boom"))
      const status = yield* connection.exit
      assert.deepStrictEqual(status, Transport.ExitStatus.Exited({ code: 7 }))
      assert.include(yield* connection.stderrTail, "crashing mid-turn")
      // The CLI has exited: its end of the pipe is closed, so the very first write fails (EPIPE).
      const error = yield* Effect.flip(connection.write(userMessage("again")))
      assert.instanceOf(error, TetherError.TransportWriteError)
      assert.isTrue(error.deliveryUncertain)
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("a signal exit is reported as Signaled", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), {}))
      const pid = Option.getOrThrow(connection.pid)
      process.kill(pid, "SIGKILL")
      assert.deepStrictEqual(yield* connection.exit, Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("write waits for the CLI to take the bytes (backpressure)", () =>
    Effect.gen(function*() {
      // `sleep` never reads its stdin: once the pipe is full, a write cannot complete.
      const connection = yield* open({
        program: "sleep",
        args: ["1000"],
        cwd: Option.none(),
        env: { mode: "inherit", set: {}, unset: [] }
      })
      const line = "x".repeat(1024 * 1024)
      const first = yield* Effect.timeoutOption(connection.write(line), Duration.millis(500))
      assert.isTrue(Option.isNone(first), "a 1 MiB write into a pipe nobody reads must stay pending")
      // The CLI's death (SIGKILL) fails the pending write rather than leaving it hanging.
      const pending = yield* Effect.forkChild(connection.write(line))
      process.kill(Option.getOrThrow(connection.pid), "SIGKILL")
      const exit = yield* Fiber.await(pending)
      assert.isTrue(Exit.isFailure(exit))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("stdout backpressure: a CLI whose output is not read is held back, and no line is lost", () =>
    Effect.gen(function*() {
      // 4,000 lines of 1 KiB with blocking writes (a shell, not Node: Node's stdout on a socket buffers without bound
      // in the writer), each followed by its count on stderr, which is always drained.
      const script = "pad=$(printf '%01017d' 0); i=0; while [ $i -lt 4000 ]; do i=$((i+1)); " +
        "printf '%06d%s\\n' $i \"$pad\"; echo $i >&2; done"
      const connection = yield* open({ program: "sh", args: ["-c", script], cwd: Option.none(), env: inheritEnv })
      yield* Effect.sleep(Duration.millis(500))
      const written = Effect.map(connection.stderrTail, (tail) => Number(/(\d+)\n$/.exec(tail)?.[1] ?? 0))
      const before = yield* written
      assert.isAbove(before, 0)
      // Held back by the pipe and bounded read-ahead buffers (a few hundred KiB), not by the 4 MiB of output.
      assert.isBelow(before, 1000, `the CLI wrote ${before} lines with nobody reading`)
      yield* Effect.sleep(Duration.millis(200))
      assert.strictEqual(yield* written, before, "still held back")
      const lines = yield* Stream.runCollect(connection.stdout)
      assert.strictEqual(lines.length, 4000)
      lines.forEach((line, i) => {
        assert.strictEqual(line._tag === "Text" ? line.text.slice(0, 6) : line._tag, String(i + 1).padStart(6, "0"))
        assert.strictEqual(line._tag === "Text" ? line.text.length : 0, 1023)
      })
      assert.deepStrictEqual(yield* connection.exit, Transport.ExitStatus.Exited({ code: 0 }))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("stderr is always drained and only a bounded tail is kept", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), { modes: ["stderr-flood"] }))
      // The flood has begun (however long the CLI took to start): more than one of its 1 KiB lines is kept.
      yield* connection.stderrTail.pipe(
        Effect.filterOrFail((tail) => tail.length > 1024),
        Effect.retry(Schedule.spaced(Duration.millis(20))),
        Effect.timeout(Duration.seconds(10))
      )
      // The CLI is not blocked on its stderr: a turn still completes, while it floods.
      yield* connection.write(userMessage("still there?"))
      const frames = yield* readUntil(connection, (frame) => frame.type === "result")
      assert.strictEqual(frames.at(-1)?.type, "result")
      const tail = yield* connection.stderrTail
      assert.isAtMost(Buffer.byteLength(tail), NodeTransport.defaultStderrTailBytes)
      assert.isAbove(tail.length, 1024)
      // The latest bytes, whole lines between the cut at its start and the read that ended it (a read from the
      // pipe may stop inside a line).
      const lines = tail.split("\n")
      assert.isAbove(lines.length, 2)
      for (const line of lines.slice(1, -1)) assert.strictEqual(line, "x".repeat(1023))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("a line of 3 MiB arrives whole under the default limit", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), { modes: ["giant-line"], giantBytes: 3 * 1024 * 1024 }))
      yield* connection.write(userMessage("big"))
      const frames = yield* readUntil(connection, (frame) => frame.type === "result")
      const giant = frames.find((frame) => frame.type === "assistant") as {
        message: { content: Array<{ text: string }> }
      }
      assert.strictEqual(giant.message.content[0].text.length, 3 * 1024 * 1024)
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("a line past maxLineBytes becomes a TooLong marker and the stream goes on", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), { modes: ["giant-line"], giantBytes: 2 * 1024 * 1024 }))
      yield* connection.write(userMessage("big"))
      const lines = yield* connection.stdout.pipe(
        Stream.takeUntil((line) => line._tag === "Text" && line.text.includes("\"type\":\"result\"")),
        Stream.runCollect
      )
      const markers = lines.filter((line) => line._tag === "TooLong")
      assert.strictEqual(markers.length, 1)
      const marker = markers[0]
      if (marker._tag === "TooLong") {
        assert.strictEqual(marker.limit, 1024 * 1024)
        assert.isAbove(marker.length, 2 * 1024 * 1024)
        assert.isTrue(marker.prefix.startsWith("{\"type\":\"assistant\""))
      }
      assert.isTrue(lines.at(-1)?._tag === "Text")
    }).pipe(
      Effect.scoped,
      Effect.provide(NodeTransport.layer({ executables: { claude: fakeClaudePath }, maxLineBytes: 1024 * 1024 }))
    ))

  it.live("environment: inherit or clean, set (Redacted revealed to the child), unset, and the marker", () =>
    Effect.gen(function*() {
      const readEnv = (environment: Transport.Environment) =>
        Effect.gen(function*() {
          // `env` exits by itself: opened as is, since a mark would show in the environment it prints.
          const connection = yield* openAsIs({ program: "env", args: [], cwd: Option.none(), env: environment })
          const lines = yield* Stream.runCollect(connection.stdout)
          return new Map(lines.map((line) => {
            const text = line._tag === "Text" ? line.text : ""
            const at = text.indexOf("=")
            return [text.slice(0, at), text.slice(at + 1)] as const
          }))
        }).pipe(Effect.scoped)

      process.env.TETHER_TEST_INHERITED = "from-host"
      const inherited = yield* readEnv({
        mode: "inherit",
        set: { SECRET: Redacted.make("s3cret"), PLAIN: "plain" },
        unset: ["TETHER_TEST_INHERITED_NOT_SET", "PLAIN"]
      })
      assert.strictEqual(inherited.get("TETHER_TEST_INHERITED"), "from-host")
      // The child printed its environment: the secret came back scrubbed (the child itself got the value, below).
      assert.strictEqual(inherited.get("SECRET"), "[redacted SECRET]")
      assert.isFalse(inherited.has("PLAIN"))
      assert.match(inherited.get(NodeTransport.markerVariable) ?? "", /^[0-9a-f-]{36}$/)

      const received = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* open({
          program: "sh",
          args: ["-c", `[ "$SECRET" = s3cret ] && echo received`],
          cwd: Option.none(),
          env: { mode: "clean", set: { SECRET: Redacted.make("s3cret") }, unset: [] }
        })
        return yield* Stream.runCollect(connection.stdout)
      }))
      assert.deepStrictEqual(received, [Transport.Line.Text({ text: "received" })])

      const clean = yield* readEnv({ mode: "clean", set: { ONLY: "this" }, unset: [] })
      delete process.env.TETHER_TEST_INHERITED
      // The session's private temporary directory, under its three names.
      const expected = ["ONLY", "PATH", NodeTransport.markerVariable, "TMPDIR", "TMP", "TEMP"]
      if (process.env.HOME !== undefined) expected.push("HOME")
      assert.deepStrictEqual([...clean.keys()].sort(), expected.sort())
    }).pipe(Effect.provide(TransportLive)))

  it.live("credentials: the host's are not inherited unless named, and every credential value is scrubbed", () =>
    Effect.gen(function*() {
      const readEnv = (environment: Transport.Environment) =>
        Effect.gen(function*() {
          const connection = yield* openAsIs({ program: "env", args: [], cwd: Option.none(), env: environment })
          const lines = yield* Stream.runCollect(connection.stdout)
          return new Map(lines.map((line) => {
            const text = line._tag === "Text" ? line.text : ""
            const at = text.indexOf("=")
            return [text.slice(0, at), text.slice(at + 1)] as const
          }))
        }).pipe(Effect.scoped)
      const hostKey = "sk-ant-host-0123456789"
      const hostToken = "ghp_host0123456789"
      // The host's own environment, as a deployment would have it (this test file's process only).
      const saved = { key: process.env.ANTHROPIC_API_KEY, token: process.env.GITHUB_TOKEN }
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const [name, value] of [["ANTHROPIC_API_KEY", saved.key], ["GITHUB_TOKEN", saved.token]] as const) {
            if (value === undefined) delete process.env[name]
            else process.env[name] = value
          }
        })
      )
      process.env.ANTHROPIC_API_KEY = hostKey
      process.env.GITHUB_TOKEN = hostToken

      const inherited = yield* readEnv(inheritEnv)
      assert.isFalse(inherited.has("ANTHROPIC_API_KEY"), "the host's key was inherited")
      assert.isFalse(inherited.has("GITHUB_TOKEN"), "the host's token was inherited")
      assert.isTrue(inherited.has("PATH"), "the rest of the host's environment is")

      // Named: handed over, and scrubbed like a Redacted value (`env` printed it).
      const named = yield* readEnv({ ...inheritEnv, inheritCredentials: ["ANTHROPIC_API_KEY"] })
      assert.strictEqual(named.get("ANTHROPIC_API_KEY"), "[redacted ANTHROPIC_API_KEY]")
      assert.isFalse(named.has("GITHUB_TOKEN"))
      const received = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* openAsIs({
          program: "sh",
          args: ["-c", `echo "\${#ANTHROPIC_API_KEY}"`],
          cwd: Option.none(),
          env: { ...inheritEnv, inheritCredentials: ["ANTHROPIC_API_KEY"] }
        })
        return yield* Stream.runCollect(connection.stdout)
      }))
      assert.deepStrictEqual(received, [Transport.Line.Text({ text: String(hostKey.length) })])

      // A plain string for a credential in a spec built by hand (the typed options refuse it): still scrubbed.
      const plain = yield* readEnv({ mode: "clean", set: { OPENAI_API_KEY: "sk-plain-0123456789" }, unset: [] })
      assert.strictEqual(plain.get("OPENAI_API_KEY"), "[redacted OPENAI_API_KEY]")
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("a session that reads another's environment hands its host that one's secret scrubbed", () =>
    Effect.gen(function*() {
      const keyB = `sk-ant-b-${randomUUID()}`
      const printed = (args: ReadonlyArray<string>) =>
        Effect.scoped(Effect.gen(function*() {
          const connection = yield* openAsIs({
            program: "sh",
            args,
            cwd: Option.none(),
            env: { mode: "clean", set: {}, unset: [] }
          })
          return yield* Stream.runCollect(connection.stdout)
        }))
      const fromA = yield* Effect.scoped(Effect.gen(function*() {
        // B: a session whose key is in its environment.
        const b = yield* open({
          program: "sleep",
          args: ["30"],
          cwd: Option.none(),
          env: { mode: "clean", set: { B_KEY: Redacted.make(keyB) }, unset: [] }
        })
        const pid = Option.getOrThrow(b.pid)
        yield* waitUntil("B to run sleep", () => /sleep 30$/.test(stat(pid)?.args ?? ""))
        // A: a session with no secret of its own, whose tool reads B's environment (root, or the same user, can, when
        // the sessions are not isolated).
        return yield* printed(["-c", `tr '\\0' '\\n' < /proc/${pid}/environ`])
      }))
      const texts = fromA.map((line) => line._tag === "Text" ? line.text : "")
      assert.include(texts, "B_KEY=[redacted B_KEY]")
      for (const text of texts) assert.notInclude(text, keyB)
      // B is closed: its key is no longer anyone's to scrub (the set does not grow with every session ever opened).
      const after = yield* printed(["-c", `echo ${keyB}`])
      assert.deepStrictEqual(after, [Transport.Line.Text({ text: keyB })])
      // Not isolated: where sessions are (the default as root), A cannot read B's environment at all (see
      // Isolation.test.ts); the scrub is what a host without isolation has.
    }).pipe(
      Effect.provide(
        NodeTransport.layer({ executables: { claude: fakeClaudePath }, watchdog: false, isolation: false })
      )
    ))

  it.live("a missing executable is ExecutableNotFound, naming the places searched, safe to fall back", () =>
    Effect.gen(function*() {
      const error = yield* spawnErrorOf(open({
        program: "tether-no-such-program",
        args: [],
        cwd: Option.none(),
        env: { mode: "inherit", set: {}, unset: [] }
      }))
      assert.strictEqual(error._tag, "ExecutableNotFound")
      assert.isTrue(error.safeToFallback)
      assert.isTrue(error.safeToRequeue)
      if (error._tag === "ExecutableNotFound") {
        assert.isTrue(error.searched.some((place) => place.includes("TETHER_TETHER_NO_SUCH_PROGRAM_PATH")))
        assert.isTrue(error.searched.some((place) => place.startsWith("PATH")))
      }
    }))

  it.live("the OS refusing to start the process is SpawnFailed (safe to fall back)", () =>
    Effect.gen(function*() {
      // A single argument above the kernel's MAX_ARG_STRLEN: execve fails with E2BIG.
      const error = yield* spawnErrorOf(open(fakeSpec(newMark(), {}, { args: ["x".repeat(200_000)] })))
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.include(error.message, "E2BIG")
      assert.isTrue(error.safeToFallback)

      const missingCwd = yield* spawnErrorOf(open({ ...fakeSpec(newMark(), {}), cwd: Option.some("/no/such/dir") }))
      assert.strictEqual(missingCwd._tag, "SpawnFailed")
    }))

  it.live("a Redacted value never reaches an error message", () =>
    Effect.gen(function*() {
      const error = yield* spawnErrorOf(open(fakeSpec(newMark(), {}, { set: { TOKEN: Redacted.make("top\0secret") } })))
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.notInclude(error.message, "secret")
      assert.include(error.message, "TOKEN")
    }))

  it.live("Redacted values are scrubbed from the stderr tail and stdout, a piece at the tail's cut too", () =>
    Effect.gen(function*() {
      const secret = "sk-ant-scrub-me-0123456789"
      // The tail keeps the last 4 + (length - 3) bytes of "AAAA<secret>BBBB": it starts inside the secret.
      const tailBytes = 4 + secret.length - 3
      const lines = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* Effect.flatMap(Transport.Transport, (transport) =>
          transport.open({
            program: "sh",
            args: ["-c", `env >&2; printf 'AAAA%sBBBB' "$API_KEY" >&2; printenv API_KEY; exit 3`],
            cwd: Option.none(),
            env: { mode: "clean", set: { API_KEY: Redacted.make(secret) }, unset: [] }
          }, termGrace))
        const lines = yield* Stream.runCollect(connection.stdout)
        assert.deepStrictEqual(yield* connection.exitStatus, Option.some(Transport.ExitStatus.Exited({ code: 3 })))
        const tail = yield* connection.stderrTail
        assert.notInclude(tail, secret.slice(3))
        assert.strictEqual(tail, "[redacted API_KEY]BBBB")
        return lines
      })).pipe(
        Effect.provide(NodeTransport.layer({ executables: {}, watchdog: false, stderrTailBytes: tailBytes }))
      )
      assert.deepStrictEqual(lines, [Transport.Line.Text({ text: "[redacted API_KEY]" })])
    }))

  it.live("a CLI that prints its environment and exits: the session's error has its stderr, never the key", () =>
    Effect.gen(function*() {
      const key = "sk-ant-never-in-logs-0123456789"
      const claude = yield* script("#!/bin/sh\nenv >&2\necho 'fatal: no config' >&2\nexit 2\n")
      // A CLI that dies at start: 20 times, because the end of stdout, the exit and the stderr race in Node.
      for (let i = 0; i < 20; i++) {
        const error = yield* Effect.flip(Effect.scoped(ClaudeSession.make({
          apiKey: Redacted.make(key),
          apiKeySource: "environment",
          env: { mode: "clean" }
        }))).pipe(Effect.provide(NodeTransport.layer({ executables: { claude }, watchdog: false })))
        assert.strictEqual(error._tag, "HandshakeFailed")
        if (error._tag !== "HandshakeFailed") continue
        assert.include(error.reason, "exit code 2", `run ${i}: ${error.reason}`)
        assert.include(error.stderrTail, "fatal: no config")
        assert.include(error.stderrTail, "ANTHROPIC_API_KEY=[redacted ANTHROPIC_API_KEY]")
        assert.notInclude(`${error.message} ${error.reason} ${error.stderrTail}`, key)
      }
    }).pipe(Effect.scoped))

  it.live("a CLI that closes its stdout and runs on: the session is retired at once, not at the stall deadline", () =>
    Effect.gen(function*() {
      const mark = newMark()
      yield* killOnExit(mark)
      const timeouts = yield* Timeouts.make({ stall: "20 seconds", turn: "1 minute", closeGrace: "500 millis" })
      const session = yield* ClaudeSession.make({ env: { set: { TEST_MARK: mark } }, timeouts })
      // The CLI (node running the fast fake; an isolated session's box has a shell of its own marked too).
      yield* waitUntil("the CLI is up", () => marked(mark).some((proc) => /^\S*node\S* \S*fast-claude/.test(proc.args)))
      const started = Date.now()
      // The fast fake closes its stdout on reading this prompt, before its receipt, and goes on running.
      const error = yield* Effect.flip(session.run("FRAMES:1 FAULT:stdout-closed"))
      const elapsed = Date.now() - started
      assert.strictEqual(error._tag, "SessionRetired")
      assert.isTrue(error.deliveryUncertain)
      assert.isBelow(elapsed, 5_000, "retired when stdout ended, not when the turn stalled")
      assert.strictEqual(yield* session.status, "failed")
      yield* waitUntil("the CLI is torn down", () => marked(mark).length === 0)
    }).pipe(
      Effect.scoped,
      Effect.provide(NodeTransport.layer({ executables: { claude: fastClaudePath }, watchdog: false }))
    ))

  it.live("a `claude` that is not a runnable program: SpawnFailed, saying why", () =>
    Effect.gen(function*() {
      const text = yield* script("hello, I am a text file\n")
      const interpreter = yield* script("#!/no/such/interpreter\n")
      const viaEnv = yield* script("#!/usr/bin/env tether-no-such-runtime\n")
      // An ELF header for another architecture than this machine's.
      const machine = process.arch === "arm64" ? 62 : 183
      const header = Buffer.alloc(64)
      header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0)
      header.writeUInt16LE(machine, 18)
      const foreign = yield* script(header)
      const cases: ReadonlyArray<readonly [string, string]> = [
        [text, "starts with neither #! nor a native executable header"],
        [interpreter, "its interpreter /no/such/interpreter (#! line) is missing"],
        [viaEnv, "tether-no-such-runtime is not on the PATH"],
        [foreign, `and this machine is ${process.arch}`]
      ]
      for (const [claude, why] of cases) {
        const error = yield* Effect.flip(Effect.scoped(ClaudeSession.make({ env: { mode: "clean" } }))).pipe(
          Effect.provide(NodeTransport.layer({ executables: { claude }, watchdog: false }))
        )
        assert.strictEqual(error._tag, "SpawnFailed")
        if (error._tag === "SpawnFailed") {
          assert.include(error.reason, "is not a runnable program")
          assert.include(error.reason, why)
          assert.isTrue(error.safeToFallback)
        }
      }
    }).pipe(Effect.scoped))

  it.live("runs in the requested cwd", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("tether-cwd-")
      const connection = yield* open({
        program: "pwd",
        args: [],
        cwd: Option.some(dir),
        env: { mode: "clean", set: {}, unset: [] }
      })
      const lines = yield* Stream.runCollect(connection.stdout)
      assert.deepStrictEqual(lines, [Transport.Line.Text({ text: dir })])
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("the pid is the CLI's, in its own session", () =>
    Effect.gen(function*() {
      const mark = newMark()
      const connection = yield* open(fakeSpec(mark, {}))
      const pid = Option.getOrThrow(connection.pid)
      // One read of /proc, kept: the launcher execs the CLI under the same pid, and while it does, its environment
      // may read as empty, so a second read can find nothing.
      let found: ReadonlyArray<{ readonly pid: number; readonly ppid: number; readonly sid: number; args: string }> = []
      const cli = () => found.find((proc) => proc.pid === pid && /fake-claude/.test(proc.args))
      yield* waitUntil("the CLI", () => {
        found = marked(mark)
        return cli() !== undefined && /^\S*node\S* \S*fake-claude/.test(cli()!.args)
      })
      assert.strictEqual(cli()!.sid, pid)
      // The other marked processes, where there are any, are the isolated session's box: its namespace's first
      // process (the CLI's parent) and stage 1 (that one's parent).
      const others = found.filter((proc) => proc.pid !== pid).map((proc) => proc.pid).sort()
      const init = cli()!.ppid
      // Boxed (the default, where a box can be made): its user namespace is not the host's.
      const boxed = Fs.readlinkSync(`/proc/${pid}/ns/user`) !== Fs.readlinkSync("/proc/self/ns/user")
      assert.deepStrictEqual(others, boxed ? [init, stat(init)!.ppid].sort() : [])
      assert.isTrue(isAlive(pid))
    }).pipe(Effect.scoped, Effect.provide(TransportLive)))

  it.live("layerConfig reads the executable path and the bounds from Config", () =>
    Effect.gen(function*() {
      const connection = yield* open(fakeSpec(newMark(), { modes: ["giant-line"], giantBytes: 4096 }))
      yield* connection.write(userMessage("configured"))
      const lines = yield* connection.stdout.pipe(
        Stream.takeUntil((line) => line._tag === "Text" && line.text.includes("\"type\":\"result\"")),
        Stream.runCollect
      )
      // maxLineBytes came from the configuration: the 4 KiB line is over it.
      assert.isTrue(lines.some((line) => line._tag === "TooLong" && line.limit === 2048))
    }).pipe(
      Effect.scoped,
      Effect.provide(
        NodeTransport.layerConfig({
          executables: { claude: Config.String("CLAUDE_BIN") },
          maxLineBytes: Config.Int("MAX_LINE"),
          killGrace: Config.Duration("KILL_GRACE")
        }).pipe(
          Layer.provide(ConfigProvider.layer(
            ConfigProvider.fromUnknown({ CLAUDE_BIN: fakeClaudePath, MAX_LINE: "2048", KILL_GRACE: "500 millis" })
          ))
        )
      )
    ))

  it.live("layerConfig fails with a ConfigError when a value is missing", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(
        NodeTransport.layerConfig({ executables: { claude: Config.String("CLAUDE_BIN") } }).pipe(
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({})))
        )
      ))
      assert.instanceOf(error, Config.ConfigError)
    }).pipe(Effect.scoped))

  it.effect("capabilities say which containment is in force and what it guarantees", () =>
    Effect.sync(() => {
      const cgroup = NodeTransport.capabilitiesFor({ containment: "cgroup", watchdog: true })
      const tree = NodeTransport.capabilitiesFor({ containment: "process-tree", watchdog: false })
      const namespace = NodeTransport.capabilitiesFor({ containment: "pid-namespace" })
      assert.strictEqual(cgroup.name, `node/${process.platform}`)
      assert.isFalse(tree.diesWithHost)
      if (process.platform === "linux") {
        assert.strictEqual(cgroup.containment, "cgroup")
        assert.isTrue(cgroup.killsEveryDescendant)
        // The watchdog runs, but the session's tools can kill it: no guarantee, and the notes say why.
        assert.isFalse(cgroup.diesWithHost)
        assert.isTrue(cgroup.notes.some((note) => note.includes("can kill the watchdog")))
        assert.isFalse(NodeTransport.capabilitiesFor({ containment: "process-tree", watchdog: true }).diesWithHost)
        // The kernel's parent-death signal is what a tool cannot undo.
        assert.isTrue(
          NodeTransport.capabilitiesFor({ containment: "pid-namespace", watchdog: false, parentDeathSignal: true })
            .diesWithHost
        )
        assert.isTrue(namespace.killsEveryDescendant)
        assert.strictEqual(tree.containment, "process-tree")
        assert.isTrue(tree.killsDetachedDescendants)
        assert.isTrue(tree.killsOrphanedDescendants)
        // The process tree cannot promise what only the kernel can hold.
        assert.isFalse(tree.killsEveryDescendant)
        assert.isTrue(tree.notes.some((note) => note.includes("env -i")))
      }
    }))

  it.live("auto picks a cgroup where the host can create one, and says so", () =>
    Effect.gen(function*() {
      const { capabilities } = yield* Transport.Transport
      // These machines (and CI) run as root with a cgroup2 hierarchy mounted: a cgroup can be created.
      if (process.platform === "linux" && process.getuid?.() === 0) {
        assert.strictEqual(capabilities.containment, "cgroup")
      }
      const tree = yield* Effect.provide(
        Transport.Transport,
        NodeTransport.layer({ containment: "process-tree", watchdog: false })
      )
      assert.strictEqual(tree.capabilities.containment, "process-tree")
    }).pipe(Effect.provide(NodeTransport.layer({ watchdog: false }))))
})
