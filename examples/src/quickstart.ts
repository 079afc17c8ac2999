/**
 * Tether's quick start: one real session of each coding-agent CLI installed (Claude Code's `claude`, Codex's
 * `codex app-server`, then Google's Gemini CLI through ACP, `gemini --acp`), three turns each, the same program for
 * all.
 *
 *   pnpm --filter @tether/examples demo                 # every provider whose CLI is installed
 *   pnpm --filter @tether/examples demo gemini          # or some of them
 *
 * 1. a turn whose text is streamed to the console as it arrives;
 * 2. a turn where the model asks to run a shell command, and a permission policy decides;
 * 3. a slow turn that is interrupted, with its typed outcome;
 * and the result of each turn with its usage (and, for Claude, its cost). Closing a session (at the end, or on
 * Ctrl-C: the program runs under `NodeRuntime.runMain`, so interruption runs the finalizers) stops the CLI and
 * everything it started.
 *
 * Without `ANTHROPIC_API_KEY` (`OPENAI_API_KEY` for Codex, `GEMINI_API_KEY` for Gemini), the CLI talks to an
 * embedded mock of its model API on 127.0.0.1 (`MockAnthropic`, `MockOpenAI`, `MockGemini`), in a temporary home,
 * with its non-essential traffic off: nothing leaves the machine. With the key, it talks to the real API with your
 * environment (and costs a few cents).
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { AcpAgent, AcpSession } from "@tether/acp"
import { ClaudeSession } from "@tether/claude"
import { CodexSession } from "@tether/codex"
import { Permission, type Session, TetherError, type Transport, type Turn } from "@tether/core"
import { MockAnthropic, MockGemini, MockOpenAI } from "@tether/testing"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Console, Deferred, Duration, Effect, Fiber, Option, Redacted, type Scope, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ClaudeExecutable from "./claudeExecutable.ts"
import * as CodexExecutable from "./codexExecutable.ts"
import * as GeminiExecutable from "./geminiExecutable.ts"

// --- presentation ------------------------------------------------------------------------------------------------

const tty = process.stdout.isTTY === true && process.env.NO_COLOR === undefined
const dim = (text: string) => tty ? `\x1b[2m${text}\x1b[22m` : text
const bold = (text: string) => tty ? `\x1b[1m${text}\x1b[22m` : text

/** Console output that knows whether it is at the start of a line, so streamed text and notes interleave cleanly. */
let atLineStart = true
const write = (text: string) =>
  Effect.sync(() => {
    if (text.length === 0) return
    const indented = (atLineStart ? "  " : "") + text.replace(/\n(?=.)/g, "\n  ")
    process.stdout.write(indented)
    atLineStart = text.endsWith("\n")
  })
const line = (text: string) => write(`${atLineStart ? "" : "\n"}${text}\n`)
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

const prompts = {
  hello: "Introduce yourself in one short sentence.",
  tool: "Use your shell tool to run exactly this command: touch hello.txt",
  slow: "Count from 1 to 500, one number per line."
}

const greeting = "Hi! I'm a mock model on 127.0.0.1, and this sentence reaches you one streamed delta at a time."

/** The mock model of Claude: what a real one would plausibly say to the three prompts. */
const anthropicScript: MockAnthropic.Script = (request) => {
  if (Option.isSome(request.toolResult)) return MockAnthropic.text("Done: hello.txt now exists.", { chunks: 4 })
  if (request.prompt === prompts.tool) return MockAnthropic.bash("touch hello.txt", { description: "Create hello.txt" })
  if (request.prompt === prompts.slow) return MockAnthropic.slow({ deltas: 500, interval: "40 millis" })
  return MockAnthropic.text(greeting, { chunks: 12 })
}

/** The mock model of Codex, the same. */
const openaiScript: MockOpenAI.Script = (request) => {
  if (Option.isSome(request.toolOutput)) return MockOpenAI.text("Done: hello.txt now exists.", { chunks: 4 })
  if (request.prompt === prompts.tool) return MockOpenAI.execCommand("touch hello.txt")
  if (request.prompt === prompts.slow) return MockOpenAI.slow({ deltas: 500, interval: "40 millis" })
  return MockOpenAI.text(greeting, { chunks: 12 })
}

/** The mock model of Gemini, the same (with a thought first, which Gemini streams as such). */
const geminiScript: MockGemini.Script = (request) => {
  if (Option.isSome(request.functionResponse)) return MockGemini.text("Done: hello.txt now exists.", { chunks: 4 })
  if (request.prompt === prompts.tool) return MockGemini.shell("touch hello.txt", { description: "Create hello.txt" })
  if (request.prompt === prompts.slow) return MockGemini.slow({ deltas: 500, interval: "40 millis" })
  return MockGemini.text(greeting, { chunks: 12, thought: "**Greeting** the user" })
}

/**
 * A policy that allows shell commands unless they would detach work from the session, and says what it decided.
 * Claude asks for its `Bash` tool, Codex for a `command`, an ACP agent for a tool of kind `execute` (Gemini names
 * the command only in the request's title).
 */
const shellTools = ["Bash", "command", "execute"]
const policy: Permission.Policy = (request) =>
  ShellPolicy.denyDetached(Permission.allowTools(shellTools), { shellTools })(request).pipe(
    Effect.tap((decision) =>
      line(
        `${bold("permission")} ${request.toolName} ` +
          `${JSON.stringify(request.input["command"] ?? request.input["title"] ?? request.input)} → ` +
          (decision._tag === "Deny" ? `deny: ${decision.message}` : decision._tag.toLowerCase()) +
          dim(" (policy: allow shell commands unless they detach from the session)")
      )
    )
  )

/**
 * A turn's usage, and what the provider adds: Claude's model calls and cost, Codex's turn status, the stop reason
 * (Claude's and an ACP agent's).
 */
const summary = (result: Turn.TurnResult) => {
  const claude = result as Partial<ClaudeSession.TurnResult>
  const codex = result as Partial<CodexSession.TurnResult>
  const stopped = result as Partial<AcpSession.TurnResult | ClaudeSession.TurnResult>
  // What a provider does not report (an ACP agent's duration, Codex's cost) is left out.
  const parts = [
    `${result.usage.inputTokens} in / ${result.usage.outputTokens} out tokens`,
    claude.numTurns === undefined ? undefined : plural(claude.numTurns, "model call"),
    result.durationMs === undefined ? undefined : `${result.durationMs} ms`,
    claude.totalCostUsd === undefined ? undefined : `$${claude.totalCostUsd.toFixed(4)} so far`,
    codex.status === undefined ? undefined : `turn ${codex.status}`,
    stopped.stopReason === undefined || stopped.stopReason === null ? undefined : stopped.stopReason
  ]
  return line(dim(`✓ ${parts.filter((part) => part !== undefined).join(" · ")}`))
}

const header = (prompt: string) =>
  Effect.sync(() => {
    process.stdout.write(`${atLineStart ? "" : "\n"}\n${bold("›")} ${prompt}\n`)
    atLineStart = true
  })

/** Sends a prompt and prints its text as it streams in, then its result. */
const streamTurn = (session: AnySession, prompt: string) =>
  Effect.gen(function*() {
    yield* header(prompt)
    const turn = yield* session.send(prompt)
    yield* turn.events.pipe(
      Stream.runForEach((delivery) =>
        delivery._tag === "Event" && delivery.event._tag === "TextDelta" ? write(delivery.event.text) : Effect.void
      )
    )
    const result = yield* turn.result
    yield* summary(result)
    return result
  })

// --- where the CLI runs ------------------------------------------------------------------------------------------

/** Online: a temporary directory for the session (its cwd; Codex's home too), removed at the end. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-quickstart-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** A session of either provider: the neutral result, and each provider's own turn errors. */
type AnySession = Session.Session<
  Turn.TurnResult,
  ClaudeSession.TurnError | CodexSession.TurnError | AcpSession.TurnError
>

/** A provider of the demo: how its CLI is found, and how its session starts offline or online. */
interface Provider {
  readonly name: "claude" | "codex" | "gemini"
  /** The environment variable of the real API's key: set, the demo runs online. */
  readonly keyVariable: string
  readonly find: (online: boolean) => Effect.Effect<string, TetherError.ExecutableNotFound>
  /** Starts the session, its processes marked with `marker`; `banner` says where it runs. */
  readonly start: (online: boolean, marker: Record<string, string>) => Effect.Effect<
    { readonly session: AnySession; readonly banner: string; readonly version: string },
    Session.StartError,
    Scope.Scope | Transport.Transport
  >
}

/**
 * Claude offline: the embedded mock model, and a temporary home (removed at the end) with an environment that keeps
 * the CLI on this machine. Online: the real API, with the host's environment (Tether still turns non-essential
 * traffic off).
 */
const claude: Provider = {
  name: "claude",
  keyVariable: "ANTHROPIC_API_KEY",
  find: (online) => ClaudeExecutable.find({ online }),
  start: (online, marker) =>
    Effect.gen(function*() {
      const where = online
        ? {
          banner: "against the Anthropic API (ANTHROPIC_API_KEY is set)",
          cwd: yield* tempDir,
          // The host's key, by name: credentials are not inherited otherwise.
          env: { mode: "inherit" as const, set: {}, inheritCredentials: ["ANTHROPIC_API_KEY"] }
        }
        : yield* Effect.gen(function*() {
          const mock = yield* MockAnthropic.make(anthropicScript)
          const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-quickstart-" })
          return {
            banner: `offline against a mock model at ${mock.url} (no ANTHROPIC_API_KEY: nothing leaves this machine)`,
            cwd,
            env: { mode: "clean" as const, set: env, inheritCredentials: [] }
          }
        })
      const session = yield* ClaudeSession.make({
        cwd: where.cwd,
        env: { ...where.env, set: { ...where.env.set, ...marker } },
        includePartialMessages: true,
        policy
      })
      return { session, banner: where.banner, version: `claude ${session.initializeResponse.claude_code_version}` }
    })
}

/**
 * Codex offline: the embedded mock of the Responses API, and a temporary home (removed at the end) with plugins off
 * and a clean environment. Online: the OpenAI API with OPENAI_API_KEY, in a temporary home of its own.
 */
const codex: Provider = {
  name: "codex",
  keyVariable: "OPENAI_API_KEY",
  find: (online) => CodexExecutable.find({ online }),
  start: (online, marker) =>
    Effect.gen(function*() {
      const where = online
        ? yield* Effect.map(tempDir, (home) => {
          for (const dir of ["codex", "tmp", "work"]) Fs.mkdirSync(Path.join(home, dir))
          const options: CodexSession.Options = {
            provider: {
              id: "openai-key",
              baseUrl: "https://api.openai.com/v1",
              apiKey: Redacted.make(process.env.OPENAI_API_KEY ?? "")
            },
            codexHome: Path.join(home, "codex"),
            tmpDir: Path.join(home, "tmp"),
            cwd: Path.join(home, "work")
          }
          return { banner: "against the OpenAI API (OPENAI_API_KEY is set)", options }
        })
        : yield* Effect.gen(function*() {
          const mock = yield* MockOpenAI.make(openaiScript)
          const home = yield* MockOpenAI.offlineHome({ baseUrl: mock.url, prefix: "tether-quickstart-codex-" })
          return {
            banner: `offline against a mock model at ${mock.url} (no OPENAI_API_KEY: nothing leaves this machine)`,
            // gpt-5.5's metadata ships with codex: no warning about an unknown model.
            options: { ...home.options, model: "gpt-5.5" }
          }
        })
      const session = yield* CodexSession.make({
        ...where.options,
        env: { ...where.options.env, set: { ...where.options.env?.set, ...marker } },
        // Codex asks before every command under `untrusted`; its sandbox keeps them to the working directory.
        approvalPolicy: "untrusted",
        sandbox: "workspace-write",
        policy
      })
      return { session, banner: where.banner, version: `codex app-server (thread ${session.threadId})` }
    })
}

/**
 * Gemini offline: the embedded mock of the Gemini API as the CLI's gateway (`GOOGLE_GEMINI_BASE_URL`), the preset's
 * offline settings in a temporary `GEMINI_CLI_HOME`, a clean environment. Online: the Gemini API with
 * GEMINI_API_KEY (authenticated with the agent's `gemini-api-key` method), in a temporary home of its own.
 */
const gemini: Provider = {
  name: "gemini",
  keyVariable: "GEMINI_API_KEY",
  find: (online) => GeminiExecutable.find({ online }),
  start: (online, marker) =>
    Effect.gen(function*() {
      const where = online
        ? {
          banner: "against the Gemini API (GEMINI_API_KEY is set)",
          cwd: yield* tempDir,
          authMethod: "gemini-api-key",
          options: { apiKey: Redacted.make(process.env.GEMINI_API_KEY ?? ""), env: { set: marker } }
        }
        : yield* Effect.gen(function*() {
          const mock = yield* MockGemini.make(geminiScript)
          const home = yield* MockGemini.offlineHome({ baseUrl: mock.url, prefix: "tether-quickstart-gemini-" })
          return {
            banner: `offline against a mock model at ${mock.url} (no GEMINI_API_KEY: nothing leaves this machine)`,
            cwd: home.cwd,
            authMethod: undefined,
            options: {
              baseUrl: mock.url,
              apiKey: home.env.GEMINI_API_KEY,
              home: home.home,
              env: { mode: "clean" as const, set: { HOME: home.home, TMPDIR: home.env.TMPDIR, ...marker } }
            }
          }
        })
      const session = yield* AcpSession.make({
        agent: AcpAgent.gemini(where.options),
        cwd: where.cwd,
        authMethod: where.authMethod,
        policy
      })
      const agent = session.info.agentInfo
      return { session, banner: where.banner, version: `${agent?.name ?? "gemini"} ${agent?.version ?? ""} over ACP` }
    }).pipe(Effect.provide(NodeServices.layer))
}

/** Processes that still carry this run's marker (Linux: read from /proc). */
const leftBehind = (marker: string): number => {
  if (process.platform !== "linux") return 0
  let count = 0
  for (const pid of Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
      if (!/\) [ZX] /.test(stat) && Fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(marker)) count++
    } catch {
      // gone, or not ours to read
    }
  }
  return count
}

// --- the program -------------------------------------------------------------------------------------------------

// Every process of this run inherits the marker: that is how the end of the demo checks that none is left.
const marker = randomUUID()

const goodbye = (name: string, pid: number | undefined) =>
  Effect.suspend(() => {
    const left = leftBehind(`TETHER_QUICKSTART_RUN=${marker}`)
    return Console.log(
      `\n${bold("closed")} · ` +
        (left > 0
          ? `${left} process${left === 1 ? "" : "es"} left behind!`
          : `${name}${pid === undefined ? "" : ` (pid ${pid})`} and everything it started are gone`)
    )
  })

/** The demo of one provider: its session, the three turns, its release. */
const demo = (provider: Provider, executable: string) =>
  Effect.gen(function*() {
    const online = process.env[provider.keyVariable] !== undefined && process.env[provider.keyVariable] !== ""
    const pid = yield* Effect.gen(function*() {
      const { banner, session, version } = yield* provider.start(online, { TETHER_QUICKSTART_RUN: marker })
      const pid = Option.getOrElse(session.pid, () => 0)
      yield* Console.log(
        `${bold("Tether quickstart")} · ${version} (pid ${pid})\n` +
          dim(`${banner}\n${executable}`)
      )

      // 1. Streamed text.
      yield* streamTurn(session, prompts.hello)
      yield* line(dim(`session ${Option.getOrElse(yield* session.sessionId, () => "?")}`))

      // 2. A tool use, decided by the policy.
      yield* streamTurn(session, prompts.tool)

      // 3. A slow turn, interrupted after a second of streaming.
      yield* header(prompts.slow)
      const slow = yield* session.send(prompts.slow)
      const streaming = yield* Deferred.make<void>()
      let deltas = 0
      const counter = yield* slow.events.pipe(
        Stream.runForEach((delivery) =>
          delivery._tag === "Event" && delivery.event._tag === "TextDelta"
            ? Effect.sync(() => {
              deltas++
              if (tty) process.stdout.write(`\r  ${dim(`streaming… ${plural(deltas, "delta")}`)}`)
            }).pipe(Effect.andThen(Deferred.succeed(streaming, undefined)))
            : Effect.void
        ),
        Effect.forkChild
      )
      yield* Effect.raceFirst(Deferred.await(streaming), Fiber.join(counter))
      yield* Effect.sleep(Duration.seconds(1))
      yield* slow.interrupt
      yield* Fiber.join(counter)
      if (tty) process.stdout.write("\r\x1b[2K")
      yield* slow.result.pipe(
        Effect.matchEffect({
          onSuccess: () => line(`the turn completed before the interrupt (${plural(deltas, "streamed delta")})`),
          onFailure: (error) =>
            line(
              `${bold("interrupted")} after ${plural(deltas, "streamed delta")} → ${error._tag}` +
                (error._tag === "TurnInterrupted"
                  ? ` (reason: ${error.reason}, acknowledged: ${error.acknowledged})`
                  : `: ${error.message}`) +
                dim(` · deliveryUncertain: ${error.deliveryUncertain}`)
            )
        })
      )
      yield* line(dim(`the session is ${yield* session.status} and ready for the next prompt`))
      return pid
    }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ executables: { [provider.name]: executable } })))

    yield* goodbye(provider.name, pid)
  })

/**
 * Every provider asked for (the command line's, else all) whose CLI is installed, in turn. None installed: the
 * first one's `ExecutableNotFound`.
 */
const main = Effect.gen(function*() {
  const asked = process.argv.slice(2)
  const all = [claude, codex, gemini]
  const unknown = asked.filter((name) => !all.some((provider) => provider.name === name))
  if (unknown.length > 0) {
    yield* Console.error(`unknown provider ${unknown.join(", ")}: ./run demo [claude|codex|gemini]`)
    return yield* Effect.sync(() => {
      process.exitCode = 2
    })
  }
  const providers = all.filter((provider) => asked.length === 0 || asked.includes(provider.name))
  const found = yield* Effect.forEach(providers, (provider) => {
    const online = process.env[provider.keyVariable] !== undefined && process.env[provider.keyVariable] !== ""
    return Effect.map(Effect.result(provider.find(online)), (executable) => ({ provider, executable }))
  })
  const installed = found.flatMap(({ executable, provider }) =>
    executable._tag === "Success" ? [{ provider, executable: executable.success }] : []
  )
  if (installed.length === 0) {
    const first = found[0]?.executable
    if (first?._tag === "Failure") return yield* first.failure
  }
  for (const [i, { executable, provider }] of installed.entries()) {
    if (i > 0) yield* Console.log("")
    yield* demo(provider, executable)
  }
  for (const { executable, provider } of found) {
    if (executable._tag === "Failure") yield* Console.log(dim(`\n(no ${provider.name} installed: skipped)`))
  }
})

NodeRuntime.runMain(
  main.pipe(
    // Every failure is a typed error that says what a host may do next.
    Effect.tapError((error) =>
      Console.error(
        `\n${bold("failed")} · ${error._tag}: ${error.message}` +
          dim(
            TetherError.hasDisposition(error)
              ? ` · safeToFallback: ${error.safeToFallback}, safeToRequeue: ${error.safeToRequeue}, ` +
                `deliveryUncertain: ${error.deliveryUncertain}`
              : ""
          )
      )
    ),
    // Ctrl-C interrupts the program: the session's finalizers have run by the time this prints.
    Effect.onInterrupt(() => goodbye("the CLI", undefined)),
    Effect.scoped
  ),
  { disableErrorReporting: true }
)
