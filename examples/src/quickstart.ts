/**
 * Tether's quick start: one real `claude` session, three turns.
 *
 *   pnpm --filter @tether/examples demo
 *
 * 1. a turn whose text is streamed to the console as it arrives;
 * 2. a turn where the model asks to run a shell command, and a permission policy decides;
 * 3. a slow turn that is interrupted, with its typed outcome;
 * and the result of each turn with its usage and cost. Closing the session (at the end, or on Ctrl-C: the program
 * runs under `NodeRuntime.runMain`, so interruption runs the finalizers) stops the CLI and everything it started.
 *
 * Without `ANTHROPIC_API_KEY`, the CLI talks to an embedded mock of the Messages API on 127.0.0.1, in a temporary
 * home, with `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`: nothing leaves the machine. With the key, it talks to the
 * real API with your environment (and costs a few cents).
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClaudeSession, Permission, TetherError } from "@tether/core"
import { MockAnthropic } from "@tether/testing"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Console, Deferred, Duration, Effect, Fiber, Option, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ClaudeExecutable from "./claudeExecutable.ts"

const apiKey = process.env.ANTHROPIC_API_KEY !== undefined && process.env.ANTHROPIC_API_KEY !== ""

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
  tool: "Use the Bash tool to run exactly this command: touch hello.txt",
  slow: "Count from 1 to 500, one number per line."
}

/** The mock model: what a real one would plausibly say to the three prompts. */
const mockScript: MockAnthropic.Script = (request) => {
  if (Option.isSome(request.toolResult)) return MockAnthropic.text("Done: hello.txt now exists.", { chunks: 4 })
  if (request.prompt === prompts.tool) return MockAnthropic.bash("touch hello.txt", { description: "Create hello.txt" })
  if (request.prompt === prompts.slow) return MockAnthropic.slow({ deltas: 500, interval: "40 millis" })
  return MockAnthropic.text(
    "Hi! I'm a mock model on 127.0.0.1, and this sentence reaches you one streamed delta at a time.",
    { chunks: 12 }
  )
}

/** A policy that allows shell commands unless they would detach work from the session, and says what it decided. */
const policy: Permission.Policy = (request) =>
  ShellPolicy.denyDetached(Permission.allowTools(["Bash"]))(request).pipe(
    Effect.tap((decision) =>
      line(
        `${bold("permission")} ${request.toolName} ${JSON.stringify(request.input["command"] ?? request.input)} → ` +
          (decision._tag === "Deny" ? `deny: ${decision.message}` : decision._tag.toLowerCase()) +
          dim(" (policy: allow Bash unless the command detaches from the session)")
      )
    )
  )

const summary = (result: ClaudeSession.TurnResult) =>
  line(dim(
    `✓ ${result.usage.inputTokens} in / ${result.usage.outputTokens} out tokens · ` +
      `${plural(result.numTurns ?? 1, "model call")} · ${result.durationMs ?? 0} ms · ` +
      `$${(result.totalCostUsd ?? 0).toFixed(4)} so far`
  ))

const header = (prompt: string) =>
  Effect.sync(() => {
    process.stdout.write(`${atLineStart ? "" : "\n"}\n${bold("›")} ${prompt}\n`)
    atLineStart = true
  })

/** Sends a prompt and prints its text as it streams in, then its result. */
const streamTurn = (session: ClaudeSession.ClaudeSession, prompt: string) =>
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

/** Online: a temporary directory for the session's cwd, removed at the end. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-quickstart-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

interface Where {
  readonly banner: string
  readonly cwd: string
  readonly env: { readonly mode: "clean" | "inherit"; readonly set: Readonly<Record<string, string>> }
}

/**
 * Offline: the embedded mock model, and a temporary home (removed at the end) with an environment that keeps the
 * CLI on this machine.
 */
const offline = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make(mockScript)
  const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-quickstart-" })
  const where: Where = {
    banner: `offline against a mock model at ${mock.url} (no ANTHROPIC_API_KEY: nothing leaves this machine)`,
    cwd,
    env: { mode: "clean", set: env }
  }
  return where
})

/** Online: the real API, with the host's environment (Tether still turns non-essential traffic off). */
const online = Effect.map(tempDir, (cwd): Where => ({
  banner: "against the Anthropic API (ANTHROPIC_API_KEY is set)",
  cwd,
  env: { mode: "inherit", set: {} }
}))

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

const goodbye = (pid: number | undefined) =>
  Effect.suspend(() => {
    const left = leftBehind(`TETHER_QUICKSTART_RUN=${marker}`)
    return Console.log(
      `\n${bold("closed")} · ` +
        (left > 0
          ? `${left} process${left === 1 ? "" : "es"} left behind!`
          : `claude${pid === undefined ? "" : ` (pid ${pid})`} and everything it started are gone`)
    )
  })

const main = Effect.gen(function*() {
  const claude = yield* ClaudeExecutable.find({ online: apiKey })
  const where = yield* (apiKey ? online : offline)

  const pid = yield* Effect.gen(function*() {
    const session = yield* ClaudeSession.make({
      cwd: where.cwd,
      env: { mode: where.env.mode, set: { ...where.env.set, TETHER_QUICKSTART_RUN: marker } },
      includePartialMessages: true,
      policy
    })
    const pid = Option.getOrElse(session.pid, () => 0)
    yield* Console.log(
      `${bold("Tether quickstart")} · claude ${session.initializeResponse.claude_code_version} (pid ${pid})\n` +
        dim(`${where.banner}\n${claude}`)
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
  }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer({ executables: { claude } })))

  yield* goodbye(pid)
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
    Effect.onInterrupt(() => goodbye(undefined)),
    Effect.scoped
  ),
  { disableErrorReporting: true }
)
