/**
 * `pnpm bench:warm`: what a user of a chat backend feels, with the real `claude` (the pinned 2.1.332) offline against
 * MockAnthropic on 127.0.0.1 answering at once with 5 text deltas, inside a loopback-only network namespace
 * (scripts/netns.sh). Hosts are running before anything is measured; rounds are interleaved (each round runs every
 * host, in a rotated order). Never part of the tests; run it on an idle machine.
 *
 * 1. First token of a new conversation: Tether from a warm pool (`Registry.warm`), Tether cold (`getOrCreate` then
 *    `send`), the Agent SDK's `query()`, and the SDK's `startup()` (the CLI started before the clock) then
 *    `query()`. Both warm CLIs (the pool's and the one `startup()` gave) sit idle `--idle` ms (2,000) before the
 *    clock starts, as a CLI started ahead waits for its conversation (one asked at once, still hot from its start,
 *    answers sooner). The clock runs from the host's call to the first text delta it sees. Ratios against the SDK's
 *    cold `query()` and its `startup()`.
 * 2. First token after waking a dormant conversation against a cold new one, with the earlier turns seen by the
 *    model: the mock answers `seen <n>`, the number of the conversation's prompts in the request it got, and the
 *    script checks it.
 * 3. Conversations held: N conversations (1,000 by default) through a registry of at most 8 live CLIs with
 *    dormancy, each messaged M times (2 by default) in random order by 8 workers, every answer checked (`seen <k>`
 *    for its k-th message); the RSS of the host and of every live CLI's processes, sampled, against N times the RSS
 *    of one idle CLI (what keeping every conversation live would take) — and the dormant store's size on disk.
 *
 *   pnpm bench:warm                                   # everything, default sizes
 *   pnpm bench:warm --rounds 1 --conversations 10     # a tiny run, to prove the script works
 *   pnpm bench:warm --only first-token,wake           # some of the measurements
 *
 * 4. Opt-in (`--only cluster-first-token`): the first token of a new conversation through a cluster node (a runner
 *    and its client in this process, `NodeCluster` over an embedded PostgreSQL), from the runner's warm pool
 *    (`RunnerSettings.warm`) against cold. Not measured: a warm conversation, once its runner closed it idle, is
 *    restored cold and the model sees its first turn (its transcript was saved from the warm CLI's directory).
 *
 * Flags: --rounds (10) rounds of 1, 2 and 4; --idle (2000) of 1; --conversations (1000), --messages (2), --live (8)
 * of 3; --only.
 * Writes .bench/warm.json.
 */
import { query, startup } from "@anthropic-ai/claude-agent-sdk"
import type { Options as SdkOptions, SDKMessage } from "@anthropic-ai/claude-agent-sdk"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Context, Duration, Effect, Layer, Metric, Redacted, Schema, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { ClaudeSession } from "../packages/claude/src/index.ts"
import { ClusterRegistry, NodeCluster } from "../packages/cluster/src/index.ts"
import { DormantStore, SessionRegistry, Timeouts } from "../packages/core/src/index.ts"
import * as MockAnthropic from "../packages/testing/src/MockAnthropic.ts"
import * as PinnedClaude from "../packages/testing/src/PinnedClaude.ts"
import * as Postgres from "../packages/testing/src/Postgres.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"
import { root } from "./bench/fake.ts"
import { mean, medianInterval, percentile } from "./bench/stats.ts"

// ---------------------------------------------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------------------------------------------

const flag = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(`--${name}`)
  if (at < 0) return fallback
  const value = Number(process.argv[at + 1])
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`)
  return value
}
const onlyAt = process.argv.indexOf("--only")
const only = new Set(onlyAt < 0 ? ["first-token", "wake", "held"] : process.argv[onlyAt + 1].split(","))
const rounds = flag("rounds", 10)
const conversations = flag("conversations", 1000)
const messages = flag("messages", 2)
const live = flag("live", 8)
const idle = flag("idle", 2000)

// ---------------------------------------------------------------------------------------------------------------
// The world: the mock model, the offline environment, the CLI
// ---------------------------------------------------------------------------------------------------------------

const claudePath = PinnedClaude.resolveSync("2.1.332")
const mark = randomUUID()

/** `[conv <id>] …`: the mock answers `ok <id> seen <n>`, n the conversation's prompts in the request, in 5 deltas. */
const script: MockAnthropic.Script = (request) => {
  const id = /^\[conv ([^\]]+)\]/.exec(request.prompt)?.[1] ?? "none"
  const body = JSON.stringify((request.body as { readonly messages?: unknown }).messages ?? [])
  const seen = body.split(`[conv ${id}]`).length - 1
  return MockAnthropic.text(`ok ${id} seen ${seen}`, { chunks: 5 })
}

const timeouts = { ...Timeouts.defaults, startup: Duration.seconds(60), turn: Duration.minutes(15) }

/** The SDK's environment: the same offline variables as plain strings. */
const sdkEnv = (env: MockAnthropic.OfflineEnv): Record<string, string> => {
  const out: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" }
  for (const [key, value] of Object.entries(env)) out[key] = Redacted.isRedacted(value) ? Redacted.value(value) : value
  return out
}

const elapsed = (t0: number) => performance.now() - t0

/** Polls until `done` holds; a minute without it is a failure (a CLI that cannot start must not hang the bench). */
const until = <E>(what: string, done: Effect.Effect<boolean, E>) =>
  Effect.gen(function*() {
    const deadline = performance.now() + 60_000
    while (!(yield* done)) {
      if (performance.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })

// ---------------------------------------------------------------------------------------------------------------
// The cluster's node (--only cluster-first-token): the offline Claude options are the runner's, set at start
// ---------------------------------------------------------------------------------------------------------------

/** `pool`: whether the conversation's key has the runner's pool (the cold host asks with another key). */
const ClusterConfig = Schema.Struct({ pool: Schema.Boolean })
let runnerOptions: ClaudeSession.Options | undefined

class ClusterChats extends SessionRegistry.Service<ClusterChats>()("bench/WarmChats", {
  acquire: (_id, _config: typeof ClusterConfig.Type) => ClaudeSession.make(runnerOptions!),
  fingerprint: SessionRegistry.fingerprint,
  warm: {
    key: SessionRegistry.shape,
    adapt: () => Effect.void,
    prime: (session) => ClaudeSession.kind.warm!.prime!(session, runnerOptions!)
  }
}) {}

const ClusterBench = ClusterRegistry.make(ClusterChats, { config: ClusterConfig })

// ---------------------------------------------------------------------------------------------------------------
// Hosts: each measures one new conversation's first token
// ---------------------------------------------------------------------------------------------------------------

type Registry = SessionRegistry.Registry<
  unknown,
  ClaudeSession.StartError,
  ClaudeSession.TurnResult,
  ClaudeSession.TurnError
>

/** Sends `[conv id] text` and returns the time to the first text delta from `t0`, and the answer. */
const firstToken = (
  registry: Pick<Registry, "send">,
  id: string,
  text: string,
  t0: number
) =>
  Effect.gen(function*() {
    const turn = yield* registry.send(id, `[conv ${id}] ${text}`)
    yield* turn.events.pipe(
      Stream.takeUntil((delivery) => delivery._tag === "Event" && delivery.event._tag === "TextDelta"),
      Stream.runDrain
    )
    const ms = elapsed(t0)
    const result = yield* turn.result
    return { ms, text: result.text }
  })

const check = (text: string, id: string, seen: number) => {
  if (!text.includes(`ok ${id} seen ${seen}`)) {
    throw new Error(`conversation ${id}: expected "seen ${seen}", got ${text}`)
  }
}

/** The first token from the SDK's messages: the first `stream_event` text delta. */
const sdkFirstToken = async (messages: AsyncIterable<SDKMessage>, t0: number): Promise<number> => {
  let first: number | undefined
  for await (const message of messages) {
    const event = message.type === "stream_event"
      ? (message as { readonly event: { readonly type: string; readonly delta?: { readonly type: string } } }).event
      : undefined
    if (first === undefined && event?.type === "content_block_delta" && event.delta?.type === "text_delta") {
      first = elapsed(t0)
    }
  }
  if (first === undefined) throw new Error("the SDK's query ended without a text delta")
  return first
}

interface Figures {
  readonly [host: string]: Array<number>
}

const summary = (samples: ReadonlyArray<number>) =>
  samples.length === 0 ? undefined : {
    median: percentile(samples, 0.5),
    min: Math.min(...samples),
    max: Math.max(...samples),
    mean: mean(samples),
    n: samples.length
  }

// ---------------------------------------------------------------------------------------------------------------
// /proc: the RSS of the CLIs (every process with the bench's mark in its environment)
// ---------------------------------------------------------------------------------------------------------------

const rssOf = (pid: string): number => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return line === undefined ? 0 : Number(line.split(/\s+/)[1]) * 1024
  } catch {
    return 0
  }
}

const markedRss = (): { readonly bytes: number; readonly processes: number } => {
  let bytes = 0
  let processes = 0
  for (const pid of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue
    try {
      if (!Fs.readFileSync(`/proc/${pid}/environ`, "utf8").includes(`TETHER_BENCH_MARK=${mark}\0`)) continue
    } catch {
      continue
    }
    bytes += rssOf(pid)
    processes++
  }
  return { bytes, processes }
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`

// ---------------------------------------------------------------------------------------------------------------
// The program
// ---------------------------------------------------------------------------------------------------------------

const program = Effect.gen(function*() {
  const mock = yield* MockAnthropic.make(script)
  const { cwd, env, home } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-bench-warm-" })
  const config: ClaudeSession.Options = {
    cwd,
    timeouts,
    env: { mode: "clean", set: { ...env, PATH: process.env.PATH ?? "/usr/bin:/bin", TETHER_BENCH_MARK: mark } }
  }
  const sdkOptions: SdkOptions = {
    pathToClaudeCodeExecutable: claudePath,
    cwd,
    env: { ...sdkEnv(env), TETHER_BENCH_MARK: mark },
    includePartialMessages: true,
    stderr: () => {}
  }
  const transport = yield* Layer.build(NodeTransport.layer({ executables: { claude: claudePath } }))
  const services = yield* Layer.build(NodeServices.layer)
  const report: Record<string, unknown> = {
    machine: { cpus: Os.cpus().length, model: Os.cpus()[0]?.model, node: process.version },
    claude: "2.1.332",
    rounds,
    conversations,
    messages,
    live
  }
  const registryWith = (
    settings: SessionRegistry.Settings,
    store?: Context.Context<DormantStore.DormantStore>
  ) =>
    SessionRegistry.make({ ...ClaudeSession.kind, idleTimeToLive: Duration.infinity, ...settings }).pipe(
      Effect.provideContext(store === undefined ? transport : Context.merge(transport, store)),
      Effect.orDie
    )
  const storeIn = (name: string) =>
    Layer.build(
      DormantStore.layerFileSystem({ directory: Path.join(home, name) }).pipe(
        Layer.provide(Layer.succeedContext(services))
      )
    )

  if (only.has("first-token")) {
    const warm = yield* registryWith({ capacity: 4 })
    const cold = yield* registryWith({ capacity: 4 })
    yield* warm.warm(config, 1)
    const figures: Figures = { "tether-warm": [], "tether-cold": [], "sdk-query": [], "sdk-startup": [] }
    const hosts: ReadonlyArray<readonly [string, () => Effect.Effect<number>]> = [
      ["tether-warm", () =>
        Effect.gen(function*() {
          const id = randomUUID()
          const t0 = performance.now()
          yield* Effect.scoped(warm.getOrCreate(id, config))
          const { ms, text } = yield* firstToken(warm, id, "hello", t0)
          check(text, id, 1)
          yield* warm.forceEvict(id)
          return ms
        }).pipe(Effect.orDie)],
      ["tether-cold", () =>
        Effect.gen(function*() {
          const id = randomUUID()
          const t0 = performance.now()
          yield* Effect.scoped(cold.getOrCreate(id, config))
          const { ms, text } = yield* firstToken(cold, id, "hello", t0)
          check(text, id, 1)
          yield* cold.forceEvict(id)
          return ms
        }).pipe(Effect.orDie)],
      ["sdk-query", () =>
        Effect.promise(async () => {
          const t0 = performance.now()
          return await sdkFirstToken(query({ prompt: "[conv sdk] hello", options: sdkOptions }), t0)
        })],
      ["sdk-startup", () =>
        Effect.promise(async () => {
          const warmQuery = await startup({ options: sdkOptions })
          // Started ahead, as a warm pool's CLI is: idle as long before the conversation comes.
          await new Promise((resolve) => setTimeout(resolve, idle))
          const t0 = performance.now()
          return await sdkFirstToken(warmQuery.query("[conv sdk] hello"), t0)
        })]
    ]
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < hosts.length; i++) {
        const [name, measure] = hosts[(round + i) % hosts.length]
        // Not measured: the pool is full again before every host, so that no CLI starts while one is measured.
        yield* until("the warm pool to refill", Effect.map(warm.pools, (pools) => pools[0]?.ready === 1))
        // The pool's CLI idle at least `idle` before its conversation comes, as the SDK's started one is.
        if (name === "tether-warm") yield* Effect.sleep(Duration.millis(idle))
        const ms = yield* measure()
        figures[name].push(ms)
        yield* Effect.logInfo(`first token, round ${round + 1}: ${name} ${ms.toFixed(0)} ms`)
      }
      yield* Effect.logInfo(`first token, round ${round + 1}/${rounds}`)
    }
    // Its warm CLI closed: what the next measurements count of the marked processes is theirs alone.
    yield* warm.warm(config, 0)
    const sdkCold = percentile(figures["sdk-query"], 0.5)
    const sdkWarm = percentile(figures["sdk-startup"], 0.5)
    report.firstToken = Object.fromEntries(Object.entries(figures).map(([name, samples]) => [name, summary(samples)]))
    // Paired: each round's ratio, then their median. Every host runs once in a round, minutes apart from the other
    // rounds: what the machine does meanwhile (another tenant of its host, its clock's frequency) moves a round's
    // figures together, and cancels in the round's own ratio.
    const ratios = (samples: ReadonlyArray<number>, against: ReadonlyArray<number>) =>
      samples.map((ms, round) => ms / against[round])
    report.firstTokenRatios = Object.fromEntries(
      Object.entries(figures).map(([name, samples]) => {
        const toQuery = ratios(samples, figures["sdk-query"])
        const toStartup = ratios(samples, figures["sdk-startup"])
        return [name, {
          toSdkQuery: percentile(samples, 0.5) / sdkCold,
          toSdkStartup: percentile(samples, 0.5) / sdkWarm,
          pairedToSdkQuery: percentile(toQuery, 0.5),
          pairedToSdkStartup: percentile(toStartup, 0.5),
          // Where each paired median lies, 95% confidence (distribution-free): a target is shown met when the whole
          // interval is under it.
          pairedToSdkQueryInterval: medianInterval(toQuery),
          pairedToSdkStartupInterval: medianInterval(toStartup)
        }]
      })
    )
  }

  if (only.has("wake")) {
    const store = yield* storeIn("wake-store")
    const dormant = yield* registryWith({ capacity: 4, idleTimeToLive: "1 second", dormancy: true }, store)
    const cold = yield* registryWith({ capacity: 4 })
    const figures: Figures = { wake: [], "cold-new": [] }
    for (let round = 0; round < rounds; round++) {
      // Not measured: a conversation with one turn, dormant once idle.
      const id = randomUUID()
      yield* Effect.scoped(dormant.getOrCreate(id, config))
      check((yield* dormant.run(id, `[conv ${id}] remember this`)).text, id, 1)
      yield* until(
        "the conversation to go dormant",
        Effect.map(dormant.dormant, (listings) => listings.some((l) => l._tag === "Dormant" && l.record.id === id))
      )
      const measureWake = Effect.gen(function*() {
        const t0 = performance.now()
        const { ms, text } = yield* firstToken(dormant, id, "what did I say?", t0)
        // The model saw the earlier turn: two of the conversation's prompts in its request.
        check(text, id, 2)
        return ms
      })
      const measureCold = Effect.gen(function*() {
        const fresh = randomUUID()
        const t0 = performance.now()
        yield* Effect.scoped(cold.getOrCreate(fresh, config))
        const { ms, text } = yield* firstToken(cold, fresh, "hello", t0)
        check(text, fresh, 1)
        yield* cold.forceEvict(fresh)
        return ms
      })
      if (round % 2 === 0) {
        figures.wake.push(yield* measureWake)
        figures["cold-new"].push(yield* measureCold)
      } else {
        figures["cold-new"].push(yield* measureCold)
        figures.wake.push(yield* measureWake)
      }
      yield* dormant.forceEvict(id)
      yield* Effect.logInfo(`wake, round ${round + 1}/${rounds}`)
    }
    report.wake = Object.fromEntries(Object.entries(figures).map(([name, samples]) => [name, summary(samples)]))
    report.wakeRatio = percentile(figures.wake, 0.5) / percentile(figures["cold-new"], 0.5)
  }

  if (only.has("held")) {
    const store = yield* storeIn("held-store")
    const registry = yield* registryWith({ capacity: live, dormancy: true, admissionTimeout: "10 minutes" }, store)
    // Every CLI counted from here on is this measurement's: none of an earlier one is left.
    const left = markedRss().processes
    if (left > 0) return yield* Effect.die(new Error(`held: ${left} processes of the earlier measurements still run`))
    // Per-CLI RSS: one idle CLI after one turn.
    const probe = randomUUID()
    yield* Effect.scoped(registry.getOrCreate(probe, config))
    yield* registry.run(probe, `[conv ${probe}] hello`)
    yield* Effect.sleep("1 second")
    const perCli = markedRss().bytes
    yield* registry.forceEvict(probe)
    // The schedule: every conversation's messages in order, conversations drawn at random.
    const remaining = Array.from({ length: conversations }, () => messages)
    const sent = Array.from({ length: conversations }, () => 0)
    const busy = new Set<number>()
    const ids = Array.from({ length: conversations }, (_, i) => `c${i}`)
    let done = 0
    let peakCli = 0
    let peakHost = 0
    const samples: Array<number> = []
    const sampler = yield* Effect.forkChild(Effect.forever(Effect.gen(function*() {
      const cli = markedRss().bytes
      const host = process.memoryUsage().rss
      peakCli = Math.max(peakCli, cli)
      peakHost = Math.max(peakHost, host)
      samples.push(cli + host)
      yield* Effect.sleep("500 millis")
    })))
    const next = (): number | undefined => {
      const open = remaining.flatMap((left, i) => left > 0 && !busy.has(i) ? [i] : [])
      if (open.length === 0) return undefined
      const i = open[Math.floor(Math.random() * open.length)]
      busy.add(i)
      remaining[i]--
      return i
    }
    const t0 = performance.now()
    yield* Effect.forEach(Array.from({ length: live }), () =>
      Effect.gen(function*() {
        while (true) {
          const i = next()
          if (i === undefined) {
            if (remaining.every((left) => left === 0)) return
            yield* Effect.sleep("10 millis")
            continue
          }
          const id = ids[i]
          // Starts the conversation, or wakes it from dormancy.
          yield* Effect.scoped(registry.getOrCreate(id, config))
          const result = yield* registry.run(id, `[conv ${id}] message ${sent[i] + 1}`)
          sent[i]++
          check(result.text, id, sent[i])
          busy.delete(i)
          done++
          if (done % 100 === 0) yield* Effect.logInfo(`held: ${done}/${conversations * messages} messages`)
        }
      }), { concurrency: live, discard: true })
    const seconds = elapsed(t0) / 1000
    const du = (dir: string): number =>
      Fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).reduce(
        (total, e) => total + Fs.statSync(Path.join(e.parentPath, e.name)).size,
        0
      )
    report.held = {
      conversations,
      messages: conversations * messages,
      answersChecked: done,
      liveCap: live,
      seconds,
      peakRss: { host: peakHost, clis: peakCli, total: peakHost + peakCli, meanTotal: mean(samples) },
      perCliRss: perCli,
      keepAllEstimate: conversations * perCli + peakHost,
      ratio: (peakHost + peakCli) / (conversations * perCli + peakHost),
      storeBytes: du(Path.join(home, "held-store"))
    }
    yield* Effect.sync(() => sampler.interruptUnsafe())
  }

  if (only.has("cluster-first-token")) {
    runnerOptions = config
    const server = yield* Postgres.make()
    const port = 34_000 + Math.floor(Math.random() * 1_000)
    const node = yield* Layer.build(
      ClusterBench.layer({
        capacity: 8,
        idleTimeToLive: "3 seconds",
        warm: [{ config: { pool: true }, size: 1 }],
        stateDirectory: home
      }).pipe(
        Layer.provide(Layer.succeedContext(transport)),
        Layer.provideMerge(NodeCluster.layer({ postgres: server.url, runner: { host: "127.0.0.1", port } }))
      )
    )
    const chats = Context.get(node, ClusterChats)
    const ready = Effect.map(chats.pools, (pools) => pools[0]?.ready === 1)
    const figures: Figures = { "cluster-warm": [], "cluster-cold": [] }
    const measure = (pool: boolean) =>
      Effect.gen(function*() {
        const id = randomUUID()
        const t0 = performance.now()
        yield* Effect.scoped(chats.getOrCreate(id, { pool }))
        const { ms, text } = yield* firstToken(chats, id, "hello", t0)
        check(text, id, 1)
        return { id, ms }
      }).pipe(Effect.orDie)
    // Not measured: the node's first session waits for its shards.
    const first = randomUUID()
    yield* Effect.scoped(chats.getOrCreate(first, { pool: false })).pipe(Effect.orDie)
    yield* chats.evict(first).pipe(Effect.orDie)
    const hits = Effect.map(Metric.value(SessionRegistry.metrics.warmHits), (state) => state.count)
    for (let round = 0; round < rounds; round++) {
      for (const pool of round % 2 === 0 ? [true, false] : [false, true]) {
        yield* until("the runner's warm pool to refill", ready)
        const before = yield* hits
        const { id, ms } = yield* measure(pool)
        // The runner is in this process: its registry's counter says whether the conversation took the warm CLI.
        if ((yield* hits) - before !== (pool ? 1 : 0)) {
          return yield* Effect.die(new Error(`the ${pool ? "warm" : "cold"} conversation ${id} did not start as such`))
        }
        figures[pool ? "cluster-warm" : "cluster-cold"].push(ms)
        yield* Effect.logInfo(`cluster first token, round ${round + 1}: ${pool ? "warm" : "cold"} ${ms.toFixed(0)} ms`)
        if (pool && round === 0) {
          // Not measured: once closed idle, it is restored cold and resumed from what was saved of the warm CLI.
          yield* until(
            "the warm conversation to close idle",
            Effect.map(Effect.exit(chats.snapshot(id)), (e) => e._tag === "Failure")
          )
          const again = yield* chats.run(id, `[conv ${id}] what did I say?`).pipe(Effect.orDie)
          check(again.text, id, 2)
          yield* Effect.logInfo("cluster: the warm conversation was restored with its first turn")
        }
      }
    }
    report.clusterFirstToken = Object.fromEntries(
      Object.entries(figures).map(([name, samples]) => [name, summary(samples)])
    )
  }

  Fs.mkdirSync(Path.join(root, ".bench"), { recursive: true })
  Fs.writeFileSync(Path.join(root, ".bench/warm.json"), JSON.stringify(report, null, 2))
  return report
})

const print = (report: Record<string, unknown>) => {
  const lines: Array<string> = [`# pnpm bench:warm (claude 2.1.332, ${rounds} rounds)`, ""]
  const table = (title: string, figures: unknown) => {
    if (figures === undefined) return
    lines.push(`## ${title}`, "", "| host | median ms | min | max | n |", "| --- | --- | --- | --- | --- |")
    for (const [name, s] of Object.entries(figures as Record<string, ReturnType<typeof summary>>)) {
      if (s !== undefined) {
        lines.push(`| ${name} | ${s.median.toFixed(0)} | ${s.min.toFixed(0)} | ${s.max.toFixed(0)} | ${s.n} |`)
      }
    }
    lines.push("")
  }
  table("First token of a new conversation", report.firstToken)
  if (report.firstTokenRatios !== undefined) {
    lines.push(
      "| host | / SDK query() | / SDK startup() | / SDK query(), paired (95%) | / SDK startup(), paired (95%) |",
      "| --- | --- | --- | --- | --- |"
    )
    type Interval = readonly [number, number] | undefined
    type Ratios = Record<string, number> & {
      readonly pairedToSdkQueryInterval?: Interval
      readonly pairedToSdkStartupInterval?: Interval
    }
    const within = (interval: Interval) =>
      interval === undefined ? "too few rounds" : `${interval[0].toFixed(2)}–${interval[1].toFixed(2)}`
    for (const [name, r] of Object.entries(report.firstTokenRatios as Record<string, Ratios>)) {
      lines.push(
        `| ${name} | ${r.toSdkQuery.toFixed(2)}x | ${r.toSdkStartup.toFixed(2)}x | ${r.pairedToSdkQuery.toFixed(2)}x (${
          within(r.pairedToSdkQueryInterval)
        }) | ${r.pairedToSdkStartup.toFixed(2)}x (${within(r.pairedToSdkStartupInterval)}) |`
      )
    }
    lines.push(
      "",
      "Paired: the median of each round's ratio (the hosts of a round run within seconds of each other); in " +
        "parentheses, where that median lies with 95% confidence (distribution-free: the order statistics of the " +
        "rounds' ratios)."
    )
    lines.push("")
  }
  table("First token after waking a dormant conversation", report.wake)
  table("First token of a new conversation through a cluster node", report.clusterFirstToken)
  if (report.wakeRatio !== undefined) lines.push(`wake / cold new: ${(report.wakeRatio as number).toFixed(2)}x`, "")
  const held = report.held as
    | {
      readonly conversations: number
      readonly messages: number
      readonly answersChecked: number
      readonly liveCap: number
      readonly seconds: number
      readonly peakRss: { readonly host: number; readonly clis: number; readonly total: number }
      readonly perCliRss: number
      readonly keepAllEstimate: number
      readonly ratio: number
      readonly storeBytes: number
    }
    | undefined
  if (held !== undefined) {
    lines.push(
      `## Conversations held`,
      "",
      `${held.conversations} conversations, ${held.messages} messages (every answer checked: ${held.answersChecked}), ` +
        `at most ${held.liveCap} live CLIs, ${held.seconds.toFixed(0)} s`,
      "",
      "| | RSS |",
      "| --- | --- |",
      `| host (peak) | ${mib(held.peakRss.host)} |`,
      `| live CLIs (peak) | ${mib(held.peakRss.clis)} |`,
      `| total (peak) | ${mib(held.peakRss.total)} |`,
      `| one idle CLI | ${mib(held.perCliRss)} |`,
      `| ${held.conversations} live CLIs (estimate) + host | ${mib(held.keepAllEstimate)} |`,
      `| ratio | ${held.ratio.toFixed(3)}x |`,
      `| dormant store on disk | ${mib(held.storeBytes)} |`,
      ""
    )
  }
  console.log(lines.join("\n"))
}

// Under runMain: Ctrl-C runs the finalizers (every CLI closed, the temporary home removed).
NodeRuntime.runMain(Effect.scoped(program).pipe(Effect.tap((report) => Effect.sync(() => print(report)))))
