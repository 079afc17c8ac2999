/**
 * `pnpm bench`: Tether against the official SDK and a bare host, all driving the same fast fake CLI
 * (packages/testing/bin/fast-claude.mjs), each measurement in its own child Node process (scripts/bench/runner.ts).
 * Two reference hosts split Tether's cost, each adding one layer: the bare host with Tether's frame decoder
 * (validation), then that decoder behind Tether's transport under the Effect runtime (Tether without its session);
 * a second table sets every host against the bare one. Codex has its own pair of hosts on its own fast fake
 * (packages/testing/bin/fast-codex.mjs, the Codex simulator as `codex app-server`): a bare JSON-RPC host and Tether's
 * `CodexSession`, in a third table and as a row of the second (Tether for Codex against the bare Codex host). ACP has
 * its pair the same way on packages/testing/bin/fast-acp.mjs (the ACP simulator as an agent): a bare JSON-RPC client
 * and Tether's `AcpSession` with `AcpAgent.command`, in a table of their own and as a row of the second.
 *
 * Tether is measured read two ways: with one session-wide subscriber (tether.ts, "Tether (subscriber)") and the way
 * the README's host reads a turn (tether-events.ts, "Tether (per turn)": `send`, `Turn.forEachEvent` to the turn's
 * end, `turn.result`, one `runPromise` per turn); both against the SDK and the bare host, both held to the targets.
 * (hosts/tether-stream.ts, run by hand, reads each turn as the stream `turn.events` instead.)
 *
 * Two figures need the built packages (it runs `pnpm build`'s `tsc -b` first, unless BENCH_BUILD=0, and stops if a
 * package's `dist/` is missing): a cold host (a fresh process: import the host's library, open one session, run one
 * tiny turn; the time from process start to that result, and the process's peak RSS), and the peak RSS of
 * `node -e "await import(X)"` for Node alone, the SDK, `effect`, `effect/Effect` and each built Tether package, before
 * any session opens. Both run type-stripped copies of the bench's own files (.bench/cold/) with scripts/bench/
 * dist-hooks.ts resolving `@tether/*` to `dist/`, so no process pays for stripping types. Every other figure runs the
 * hosts from the packages' sources.
 *
 * Prints a markdown table (machine, Node, each figure's median and min–max over several runs, Tether's ratios to the
 * SDK and to the bare host, and the targets) and writes .bench/bench.json and .bench/bench.md. Where Tether misses a
 * throughput or round-trip target it profiles that figure once more and prints the top self-time functions. Then it
 * runs scripts/bench-teardown.ts, scripts/bench-registry.ts, scripts/bench-cluster.ts and scripts/bench-box.ts (the box's
 * startup: the real `claude` offline, spawn → first result with and without `isolation: true`; inside a loopback-only
 * network namespace, scripts/netns.sh; root on Linux only, elsewhere a line says why it is skipped) and includes what
 * they print.
 *
 * Knobs (environment):
 *   BENCH_RUNS (5)           runs of the throughput, round-trip and lifecycle figures, per host
 *   BENCH_MEM_RUNS (3)       runs of the memory figure, per host
 *   BENCH_FRAMES (100000)    text deltas in the throughput turn
 *   BENCH_TURNS (1000)       tiny sequential turns in the round-trip figure
 *   BENCH_STEADY_WARMUP (20000) warm-up turns before the steady-state round trip (0 leaves that figure out)
 *   BENCH_STEADY_TURNS (2000) measured turns of the steady-state round trip
 *   BENCH_WARMUP_BLOCKS (30)  blocks of 1,000 turns of the warm-up curve, one run per host (0 leaves it out)
 *   BENCH_SEGMENT_RUNS (3)   runs per Claude host of where a steady turn's round trip goes (0 leaves it out)
 *   BENCH_CODE (1)           0 leaves out what JavaScript a turn runs (one counted run per Claude host)
 *   BENCH_CYCLES (5)         spawn → first result → teardown cycles per lifecycle run (after one cold cycle)
 *   BENCH_SESSIONS (1,10,100) live-session counts of the memory figure
 *   BENCH_BUSY_FRAMES (5000) the turn after which the memory figure measures what 10 sessions keep
 *   BENCH_COLD_RUNS (5)      cold-host processes per host (process start → first result, peak RSS of a one-session host)
 *   BENCH_IMPORT_RUNS (5)    `node -e "await import(X)"` processes per module of the before-any-session table
 *   BENCH_BUILD (1)          0 skips building the packages before the two figures above (their dist/ must exist)
 *   BENCH_HOSTS (bare,validated,transport,sdk,tether,tether-events,codex-bare,codex-tether,acp-bare,acp-tether)
 *   BENCH_CEILING (1)        0 leaves out the fake's ceiling: hosts/ceiling.ts (reads stdout, decodes nothing), whose
 *                            throughput in each run says how fast the fake delivers frames to a host that does nothing
 *                            (measured only with the SDK host, which the throughput target is set against)
 *   BENCH_PROFILE (auto)     auto: profile Tether's missed targets; 1: profile Tether's throughput and round trip; 0: never
 *   BENCH_EXTRAS (1)         0 skips bench-teardown.ts, bench-registry.ts, bench-cluster.ts and bench-box.ts; a list
 *                            (teardown,registry,cluster,box) runs only those. The box alone, briefly:
 *                            BENCH_HOSTS= BENCH_RUNS=0 BENCH_MEM_RUNS=0 BENCH_COLD_RUNS=0 BENCH_IMPORT_RUNS=0
 *                            BENCH_WARMUP_BLOCKS=0 BENCH_SEGMENT_RUNS=0 BENCH_CODE=0 BENCH_EXTRAS=box pnpm bench
 *   BENCH_BOX_RUNS (5)       runs per mode of bench-box.ts (isolated and not, interleaved)
 *   BENCH_ISOLATION (auto)   false: the Tether hosts open their sessions unboxed (NodeTransport's isolation: false)
 *   BENCH_EXTRA_TIMEOUT_MS (600000) per extra script
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { build, missingDist, prepare } from "./bench/built.ts"
import { isolation, root } from "./bench/fake.ts"
import { renderProfile, summarizeProfile } from "./bench/profile.ts"
import type { ProfileSummary } from "./bench/profile.ts"
import { summarize } from "./bench/stats.ts"
import type { Summary } from "./bench/stats.ts"

const env = process.env
const int = (key: string, fallback: number): number => {
  const value = env[key]
  if (value === undefined || value === "") return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${key} must be a non-negative integer, got ${value}`)
  return n
}

const config = {
  runs: int("BENCH_RUNS", 5),
  memRuns: int("BENCH_MEM_RUNS", 3),
  frames: int("BENCH_FRAMES", 100_000),
  turns: int("BENCH_TURNS", 1_000),
  steadyWarmup: int("BENCH_STEADY_WARMUP", 20_000),
  steadyTurns: int("BENCH_STEADY_TURNS", 2_000),
  warmupBlocks: int("BENCH_WARMUP_BLOCKS", 30),
  segmentRuns: int("BENCH_SEGMENT_RUNS", 3),
  code: env.BENCH_CODE !== "0",
  cycles: int("BENCH_CYCLES", 5),
  busyFrames: int("BENCH_BUSY_FRAMES", 5_000),
  coldRuns: int("BENCH_COLD_RUNS", 5),
  importRuns: int("BENCH_IMPORT_RUNS", 5),
  build: env.BENCH_BUILD !== "0",
  levels: (env.BENCH_SESSIONS ?? "1,10,100").split(",").map((s) => Number(s.trim())).filter((n) => n > 0),
  hosts: (env.BENCH_HOSTS ??
    "bare,validated,transport,sdk,tether,tether-events,codex-bare,codex-tether,acp-bare,acp-tether").split(",")
    .map((
      s
    ) => s.trim()).filter((s) => s.length > 0),
  ceiling: env.BENCH_CEILING !== "0",
  profile: env.BENCH_PROFILE ?? "auto",
  extras: env.BENCH_EXTRAS === undefined || env.BENCH_EXTRAS === "" || env.BENCH_EXTRAS === "1"
    ? ["teardown", "registry", "cluster", "box"]
    : env.BENCH_EXTRAS === "0"
    ? []
    : env.BENCH_EXTRAS.split(",").map((s) => s.trim()).filter((s) => s.length > 0),
  extraTimeoutMs: int("BENCH_EXTRA_TIMEOUT_MS", 600_000)
}

const outDir = Path.join(root, ".bench")
const runner = Path.join(root, "scripts/bench/runner.ts")
const log = (line: string) => process.stderr.write(`${line}\n`)

// --- child processes ---------------------------------------------------------------------------------------------

type Outcome = { readonly ok: true; readonly value: any } | { readonly ok: false; readonly error: string }

const packagesDir = Path.join(root, "packages") + Path.sep

/** A process's start, in clock ticks after boot (field 22 of /proc/<pid>/stat; its name, field 2, may hold spaces). */
const startTicks = (pid: string): number | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
  } catch {
    return undefined
  }
}

/** When the bench started, on the same clock (undefined without /proc). */
const benchStarted = startTicks("self")

/**
 * How many processes started after the bench run a file under the repository's packages/ (Linux; 0 elsewhere):
 * what a finished child can leave behind for a moment, its fake CLI exiting or its watchdog, which starts Node when
 * its host exits without releasing its layer. The bench and its children run scripts/ and .bench/ files, never
 * these; a process that was running before the bench (an editor, a test run) is not counted.
 */
const leftovers = (): number => {
  if (benchStarted === undefined) return 0
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return 0
  }
  let count = 0
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    const started = startTicks(entry)
    if (started === undefined || started < benchStarted) continue
    try {
      if (Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(packagesDir)) count++
    } catch {
      // Gone meanwhile.
    }
  }
  return count
}

/**
 * Waits (up to 10 s) until no process a previous child left behind still runs, so that no measurement shares the
 * cores with the last one's exit: a cold SDK host that followed a Tether one began running its program 117–170 ms
 * after its process started, against 90–114 ms after a pause.
 */
const quiesce = async (): Promise<void> => {
  const deadline = performance.now() + 10_000
  let left = leftovers()
  while (left > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    left = leftovers()
  }
  if (left > 0) log(`bench: ${left} processes of a previous run still running; measuring anyway`)
}

/** Runs `node <args>`, once no previous child's processes remain (see {@link quiesce}), and reads its `BENCH_RESULT` line. */
const runNode = async (args: ReadonlyArray<string>) => {
  await quiesce()
  return new Promise<Outcome>((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-4000)))
    child.on("close", (code) => {
      const line = stdout.split("\n").find((l) => l.startsWith("BENCH_RESULT "))
      if (code === 0 && line !== undefined) resolve({ ok: true, value: JSON.parse(line.slice("BENCH_RESULT ".length)) })
      else {
        // The runner's own line says what failed; otherwise the last lines of stderr.
        const lines = stderr.trim().split("\n")
        const own = lines.find((l) => l.startsWith("runner: "))
        resolve({ ok: false, error: `exit ${code}: ${own ?? lines.slice(-3).join(" | ")}` })
      }
    })
  })
}

const runChild = (host: string, figure: string, params: object, nodeArgs: ReadonlyArray<string> = []) =>
  runNode([...nodeArgs, runner, host, figure, JSON.stringify(params)])

/**
 * What is loaded before any session opens: the peak RSS of `node -e "await import(X)"` (with dist-hooks, so
 * `@tether/*` is the built package; Node alone loads the hooks too).
 */
const modules: ReadonlyArray<{ readonly label: string; readonly specifier: string | undefined }> = [
  { label: "Node alone (nothing imported)", specifier: undefined },
  { label: "`@anthropic-ai/claude-agent-sdk`", specifier: "@anthropic-ai/claude-agent-sdk" },
  { label: "`effect` (the barrel)", specifier: "effect" },
  { label: "`effect/Effect`", specifier: "effect/Effect" },
  {
    label: "a Claude host's modules: `@tether/claude/ClaudeSession` + `@tether/transport-node/NodeTransport` (dist)",
    specifier: "@tether/claude/ClaudeSession @tether/transport-node/NodeTransport"
  },
  { label: "`@tether/core` (dist)", specifier: "@tether/core" },
  { label: "`@tether/transport-node` (dist)", specifier: "@tether/transport-node" },
  { label: "`@tether/testing` (dist)", specifier: "@tether/testing" }
]

const importScript = (specifier: string | undefined): string =>
  [
    // A specifier may name several modules, separated by spaces: what one host imports.
    ...(specifier === undefined ? [] : specifier.split(" ").map((one) => `await import(${JSON.stringify(one)})`)),
    `const { readFileSync } = await import("node:fs")`,
    `let status = ""`,
    `try { status = readFileSync("/proc/self/status", "utf8") } catch {}`,
    `const hwm = /VmHWM:\\s+(\\d+) kB/.exec(status)`,
    `const peakRss = hwm === null ? process.resourceUsage().maxRSS * 1024 : Number(hwm[1]) * 1024`,
    `process.stdout.write("BENCH_RESULT " + JSON.stringify({ peakRss }) + "\\n")`
  ].join("\n")

/**
 * Runs a script of another bench (if present) and returns what it printed. `netns`: inside a loopback-only network
 * namespace (scripts/netns.sh, required), for a script that runs a real CLI.
 */
const runExtra = async (file: string, netns = false) => {
  await quiesce()
  return new Promise<
    { readonly code: number | null; readonly stdout: string; readonly stderr: string; readonly ms: number }
  >(
    (resolve) => {
      const started = performance.now()
      const child = netns
        ? spawn(Path.join(root, "scripts/netns.sh"), [process.execPath, file], {
          cwd: root,
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...env, TETHER_NETNS_REQUIRED: "1" }
        })
        : spawn(process.execPath, [file], { cwd: root, stdio: ["ignore", "pipe", "pipe"], env })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-8000)))
      const timer = setTimeout(() => {
        stderr += `\nbench: ${Path.basename(file)} killed after ${config.extraTimeoutMs} ms`
        child.kill("SIGTERM")
        setTimeout(() => child.kill("SIGKILL"), 5_000).unref()
      }, config.extraTimeoutMs)
      child.on("close", (code) => {
        clearTimeout(timer)
        resolve({ code, stdout, stderr, ms: performance.now() - started })
      })
    }
  )
}

// --- figures -----------------------------------------------------------------------------------------------------

type Better = "higher" | "lower"
type Unit = "rate" | "us" | "ms" | "bytes" | "count"

/** A Tether host's median over the reference host's median must satisfy this. */
interface RatioTarget {
  readonly against: "sdk" | "bare"
  readonly op: ">=" | "<="
  readonly ratio: number
}

/** Every run of a Tether host must satisfy this (its worst run is held to it). */
interface AbsoluteTarget {
  readonly op: "<="
  readonly value: number
}

type Target = RatioTarget | AbsoluteTarget

const isRatio = (target: Target): target is RatioTarget => "against" in target

interface Figure {
  readonly id: string
  readonly label: string
  readonly unit: Unit
  readonly better: Better
  readonly targets: ReadonlyArray<Target>
  readonly samples: Map<string, Array<number>>
  readonly errors: Map<string, Array<string>>
}

const figure = (id: string, label: string, unit: Unit, better: Better, ...targets: Array<Target>): Figure => ({
  id,
  label,
  unit,
  better,
  targets,
  samples: new Map(),
  errors: new Map()
})

const atMostSdk: Target = { against: "sdk", op: "<=", ratio: 1.0 }

/** The two largest live-session levels, for the marginal heap figure. */
const marginalLevels = (): readonly [number, number] => {
  const sorted = [...config.levels].sort((a, b) => a - b)
  return [sorted[sorted.length - 2]!, sorted[sorted.length - 1]!]
}

const figures = {
  throughput: figure(
    "throughput",
    `throughput, one ${config.frames.toLocaleString("en")}-frame turn`,
    "rate",
    "higher",
    { against: "sdk", op: ">=", ratio: 1.3 }
  ),
  rtt: figure(
    "rtt",
    `round trip, mean of ${config.turns.toLocaleString("en")} tiny sequential turns (after 50 warm-up turns)`,
    "us",
    "lower",
    atMostSdk,
    { against: "bare", op: "<=", ratio: 1.3 }
  ),
  // Tiny turns once the hosts are warm: the figure above (after 50 warm-up turns) includes the JIT's work, which is
  // larger for a host that runs more code. Every host (the bare one and the fake too) keeps getting faster for
  // thousands of turns (see the warm-up curve), so the warm-up is long enough for all of them to be flat.
  ...(config.steadyWarmup > 0
    ? {
      rttSteady: figure(
        "rttSteady",
        `round trip at steady state, mean of ${config.steadyTurns.toLocaleString("en")} turns after ${
          config.steadyWarmup.toLocaleString("en")
        } warm-up turns`,
        "us",
        "lower",
        { against: "bare", op: "<=", ratio: 1.2 }
      ),
      cpuPerTurnSteady: figure("cpuPerTurnSteady", "host CPU per turn at steady state (same turns)", "us", "lower")
    }
    : {}),
  rttP99: figure("rttP99", `round trip p99 (same ${config.turns.toLocaleString("en")} turns)`, "us", "lower"),
  // The host process's CPU time (all its threads) over the measured stretch: less sensitive than wall time to other
  // load on the machine, and what a host pays per frame and per turn.
  cpuPerFrame: figure("cpuPerFrame", "host CPU per frame (same throughput turn)", "us", "lower"),
  // Tether's deliveries in that turn, to a consumer that only counts: one that keeps up never sees `Lag`.
  lags: figure(
    "lags",
    "`Lag` deliveries in the throughput turn (a consumer that only counts)",
    "count",
    "lower",
    { op: "<=", value: 0 }
  ),
  lagMissed: figure("lagMissed", "events missed by lag (same turn)", "count", "lower", { op: "<=", value: 0 }),
  cpuPerTurn: figure("cpuPerTurn", "host CPU per turn (same round-trip turns)", "us", "lower"),
  firstResult: figure("firstResult", "spawn → first result (warm host)", "ms", "lower"),
  // A fresh process per sample, on the built packages (see cold.ts): what a CLI tool or a serverless host pays.
  coldFirstResult: figure(
    "coldFirstResult",
    "process start → first result (cold host: load, open one session, one tiny turn; built packages)",
    "ms",
    "lower",
    atMostSdk
  ),
  peakRss: figure("peakRss", "peak RSS of a one-session host (the same cold process)", "bytes", "lower", atMostSdk),
  teardown: figure("teardown", "teardown, one idle session (close → process reaped)", "ms", "lower"),
  ...Object.fromEntries(
    config.levels.flatMap((level) => [
      [
        `rss${level}`,
        figure(`rss${level}`, `RSS growth per session, ${level} live`, "bytes", "lower", atMostSdk)
      ],
      [
        `heap${level}`,
        figure(`heap${level}`, `heap growth per session, ${level} live`, "bytes", "lower", atMostSdk)
      ]
    ])
  ),
  // The slope between the two largest levels: what one more session costs once the code every session runs is
  // loaded and compiled (the per-level averages above include that one-time cost, spread over the sessions).
  ...(config.levels.length >= 2
    ? {
      heapMarginal: figure(
        "heapMarginal",
        `heap per additional session, ${marginalLevels().join(" → ")} live`,
        "bytes",
        "lower",
        atMostSdk
      )
    }
    : {}),
  busyHeap: figure(
    "busyHeap",
    `heap kept per session after one ${config.busyFrames.toLocaleString("en")}-frame turn (10 sessions)`,
    "bytes",
    "lower"
  ),
  teardownAll: figure(
    "teardownAll",
    `teardown, ${Math.max(...config.levels)} idle sessions at once`,
    "ms",
    "lower"
  )
} as Record<string, Figure>

const add = (id: string, host: string, ...values: Array<number>) => {
  const f = figures[id]!
  f.samples.set(host, [...(f.samples.get(host) ?? []), ...values])
}
const addError = (ids: ReadonlyArray<string>, host: string, error: string) => {
  for (const id of ids) {
    const f = figures[id]!
    f.errors.set(host, [...(f.errors.get(host) ?? []), error])
  }
}

// --- formatting --------------------------------------------------------------------------------------------------

const format = (unit: Unit, x: number): string => {
  switch (unit) {
    case "rate":
      return x >= 1e6 ? `${(x / 1e6).toFixed(2)}M/s` : `${(x / 1e3).toFixed(0)}k/s`
    case "us":
      return `${x.toFixed(x < 10 ? 2 : 0)} µs`
    case "ms":
      return x >= 100 ? `${x.toFixed(0)} ms` : `${x.toFixed(1)} ms`
    case "count":
      return Number.isInteger(x) ? `${x}` : x.toFixed(1)
    case "bytes": {
      const abs = Math.abs(x)
      if (abs >= 1024 * 1024) return `${(x / 1024 / 1024).toFixed(2)} MiB`
      return `${(x / 1024).toFixed(abs >= 100 * 1024 ? 0 : 1)} KiB`
    }
  }
}

/** A summary as a table shows it: the median, and the min–max when there was more than one sample. */
const withSpread = (unit: Unit, s: Summary): string =>
  `${format(unit, s.median)}${s.n > 1 ? ` (${format(unit, s.min)}–${format(unit, s.max)})` : ""}`

const cell = (f: Figure, host: string): string => {
  const s = summarize(f.samples.get(host) ?? [])
  const errors = f.errors.get(host)?.length ?? 0
  if (s === undefined) return errors > 0 ? `failed (${errors})` : "—"
  return `${withSpread(f.unit, s)}${errors > 0 ? `, ${errors} failed` : ""}`
}

const ratio = (f: Figure, host: string, against: string): number | undefined => {
  const a = summarize(f.samples.get(host) ?? [])
  const b = summarize(f.samples.get(against) ?? [])
  if (a === undefined || b === undefined || b.median === 0) return undefined
  return a.median / b.median
}

/** The Tether hosts the targets hold: the session-wide subscriber and the README's per-turn path. */
const tetherHosts = (): ReadonlyArray<string> => ["tether", "tether-events"].filter((h) => config.hosts.includes(h))

const goal = (t: Target): string =>
  isRatio(t)
    ? `${t.op === ">=" ? "≥" : "≤"} ${t.ratio.toFixed(1)}x ${t.against === "sdk" ? "SDK" : "bare"}`
    : `${t.value} in every run`

/** Whether `host` meets `t`: undefined where a figure it needs is missing. */
const meets = (f: Figure, t: Target, host: string): boolean | undefined => {
  if (isRatio(t)) {
    const r = ratio(f, host, t.against)
    if (r === undefined) return undefined
    return t.op === ">=" ? r >= t.ratio : r <= t.ratio
  }
  const s = summarize(f.samples.get(host) ?? [])
  return s === undefined ? undefined : s.max <= t.value
}

/**
 * Every target of `f`, each with each Tether host's verdict (in the order of `tetherHosts()`); `met` is false if any
 * is missed, true if all are met.
 */
const verdict = (
  f: Figure,
  hosts: ReadonlyArray<string> = tetherHosts()
): { readonly text: string; readonly met: boolean | undefined } => {
  if (f.targets.length === 0 || hosts.length === 0) return { text: "", met: undefined }
  const results = f.targets.map((t) => hosts.map((h) => meets(f, t, h)))
  const word = (m: boolean | undefined) => (m === undefined ? "n/a" : m ? "met" : "**missed**")
  const text = f.targets.map((t, i) => `${goal(t)}: ${results[i]!.map(word).join(" / ")}`).join("; ")
  const all = results.flat()
  return { text, met: all.includes(false) ? false : all.every((m) => m === true) ? true : undefined }
}

const hostLabel: Record<string, string> = {
  bare: "bare",
  validated: "bare + decoder",
  transport: "transport + decoder",
  sdk: "SDK",
  tether: "Tether (subscriber)",
  "tether-events": "Tether (per turn)",
  "codex-bare": "bare (Codex)",
  "codex-tether": "Tether (Codex)",
  "acp-bare": "bare (ACP)",
  "acp-tether": "Tether (ACP)"
}

/**
 * A provider with a pair of hosts on its own fake (Codex, ACP): a bare JSON-RPC host and Tether's session, set against
 * each other in a table of their own and in a row of the table against the bare hosts, never against the Claude hosts.
 */
interface Pair {
  /** The provider's name, as the tables show it. */
  readonly name: string
  /** What its hosts' names start with. */
  readonly prefix: string
  readonly bare: string
  readonly tether: string
  /** The key of Tether's ratio to the bare host in bench.json's `ratios`. */
  readonly ratioKey: string
  /** The section's heading and what it says of the two hosts. */
  readonly heading: string
  readonly description: string
}

const pairs: ReadonlyArray<Pair> = [
  {
    name: "Codex",
    prefix: "codex-",
    bare: "codex-bare",
    tether: "codex-tether",
    ratioKey: "codexTetherVsCodexBare",
    heading: "Codex: Tether's CodexSession against a bare host",
    description:
      "Both drive packages/testing/bin/fast-codex.mjs (`codex app-server` simulated, no waits) over JSON-RPC: the bare " +
      "host with `child_process`, `readline` and `JSON.parse`, Tether with `CodexSession` over `NodeTransport`, " +
      "every line decoded into events read by one subscriber."
  },
  {
    name: "ACP",
    prefix: "acp-",
    bare: "acp-bare",
    tether: "acp-tether",
    ratioKey: "acpTetherVsAcpBare",
    heading: "ACP: Tether's AcpSession against a bare host",
    description:
      "Both drive packages/testing/bin/fast-acp.mjs (an ACP agent simulated, no waits) over JSON-RPC: the bare host " +
      "with `child_process`, `readline` and `JSON.parse` (`initialize`, `session/new`, then per turn " +
      "`session/prompt`, its `session/update` lines counted until the prompt's answer), Tether with `AcpSession` and " +
      "`AcpAgent.command` over `NodeTransport`, every line decoded into events read by one subscriber."
  }
]

const pairOf = (host: string): Pair | undefined => pairs.find((p) => host.startsWith(p.prefix))
const claudeHosts = (): ReadonlyArray<string> => config.hosts.filter((host) => pairOf(host) === undefined)
const pairHosts = (pair: Pair): ReadonlyArray<string> => config.hosts.filter((host) => pairOf(host) === pair)

/** A markdown table; `align` gives the separator of every column after the first (which is left-aligned). */
const markdownTable = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  align: (column: number) => string
): string =>
  [
    `| ${header.join(" | ")} |`,
    `| ${header.map((_, i) => (i === 0 ? "---" : align(i))).join(" | ")} |`,
    ...rows.map((row) => `| ${row.join(" | ")} |`)
  ].join("\n")

/**
 * Every host against the bare one, on the figures the reference hosts exist to split: where Tether's round trip and
 * first-session heap go (validation, the transport under Effect, or the session).
 */
const decompositionIds = ["rtt", "rttSteady", "cpuPerTurn", "cpuPerTurnSteady", `heap${Math.min(...config.levels)}`]

const renderDecomposition = (): string => {
  const ids = decompositionIds.filter((id) => figures[id] !== undefined)
  const header = ["host", ...ids.map((id) => figures[id]!.label)]
  const row = (label: string, host: string, against: string) => [
    label,
    ...ids.map((id) => {
      const x = ratio(figures[id]!, host, against)
      return x === undefined ? "—" : `${x.toFixed(2)}x`
    })
  ]
  const rows = claudeHosts().filter((h) => h !== "bare").map((host) => row(hostLabel[host] ?? host, host, "bare"))
  for (const pair of pairs) {
    if (config.hosts.includes(pair.bare) && config.hosts.includes(pair.tether)) {
      rows.push(row(`Tether (${pair.name}), against the bare ${pair.name} host`, pair.tether, pair.bare))
    }
  }
  return markdownTable(header, rows, () => ":---:")
}

/** A provider's pair: Tether's session against a bare host driving the same fake, every figure. */
const renderPairTable = (pair: Pair): string => {
  const hosts = pairHosts(pair)
  const header = ["figure", ...hosts.map((h) => `${hostLabel[h] ?? h} median (min–max)`), "Tether/bare"]
  const rows = Object.values(figures).map((f) => {
    const x = ratio(f, pair.tether, pair.bare)
    return [
      `${f.label} (${f.better} is better)`,
      ...hosts.map((h) => cell(f, h)),
      x === undefined ? "—" : `${x.toFixed(x >= 100 ? 0 : x >= 10 ? 1 : 2)}x`
    ]
  })
  return markdownTable(header, rows, (i) => (i > hosts.length ? ":---:" : "---:"))
}

/**
 * The fake's ceiling under the table: the throughput of a host that decodes nothing (hosts/ceiling.ts), against the
 * SDK's and against the throughput target. A target above the ceiling cannot be met by any host on this fake.
 */
const renderCeiling = (): ReadonlyArray<string> => {
  const f = figures.throughput
  const s = summarize(f.samples.get("ceiling") ?? [])
  const errors = f.errors.get("ceiling") ?? []
  if (s === undefined) return errors.length > 0 ? [`The fake's ceiling: failed (${errors[0]}).`, ""] : []
  const target = f.targets.find(isRatio)
  const sdk = summarize(f.samples.get("sdk") ?? [])
  const vsSdk = ratio(f, "ceiling", "sdk")
  const text = [
    `The fake's ceiling (a host that reads the fake's stdout and decodes nothing, hosts/ceiling.ts, once a run in the ` +
    `same rotation): ${withSpread("rate", s)}${vsSdk === undefined ? "" : `, ${ratioText(vsSdk)} the SDK's median`}.`
  ]
  if (target !== undefined && sdk !== undefined && target.against === "sdk") {
    const asked = sdk.median * target.ratio
    text.push(
      `The throughput target (${goal(target)}, ${format("rate", asked)}) is ${ratioText(asked / s.median)} the ` +
        `ceiling's median${asked > s.median ? ": above what the fake delivered to a host that did nothing" : ""}.`
    )
  }
  return [text.join(" "), ""]
}

const ratioText = (x: number | undefined): string =>
  x === undefined ? "—" : `${x.toFixed(x >= 100 ? 0 : x >= 10 ? 1 : 2)}x`

const renderTable = (): string => {
  const hosts = claudeHosts()
  const tethers = tetherHosts()
  const short = (h: string) => (h === "tether" ? "Tether" : "Tether events")
  const header = [
    "figure",
    ...hosts.map((h) => `${hostLabel[h] ?? h} median (min–max)`),
    ...tethers.flatMap((h) => [`${short(h)}/SDK`, `${short(h)}/bare`]),
    `target (${tethers.map((h) => hostLabel[h] ?? h).join(" / ")})`
  ]
  const rows = Object.values(figures).map((f) => [
    `${f.label} (${f.better} is better)`,
    ...hosts.map((h) => cell(f, h)),
    ...tethers.flatMap((h) => [ratioText(ratio(f, h, "sdk")), ratioText(ratio(f, h, "bare"))]),
    verdict(f).text
  ])
  return markdownTable(header, rows, (i) => (i > hosts.length ? ":---:" : "---:"))
}

/** What runner.ts's `warmup` figure reports: each block's mean round trip and host CPU per turn. */
interface WarmupCurve {
  readonly block: number
  readonly meanUs: ReadonlyArray<number>
  readonly cpuUsPerTurn: ReadonlyArray<number>
}

/** The warm-up curves: per host, the round trip / CPU per turn of the blocks that end at a few turn counts. */
const renderCurves = (curves: ReadonlyMap<string, WarmupCurve>): string => {
  const [first] = curves.values()
  const blocks = first?.meanUs.length ?? 0
  const block = first?.block ?? 1_000
  const shown = [1, 2, 3, 5, 10, 15, 20, 25, 30, 40, 50].filter((k) => k <= blocks)
  if (!shown.includes(blocks)) shown.push(blocks)
  const header = ["host", ...shown.map((k) => `${(k * block).toLocaleString("en")} turns`)]
  const rows = [...curves].map(([host, curve]) => [
    hostLabel[host] ?? host,
    ...shown.map((k) => {
      const rtt = curve.meanUs[k - 1]
      const cpu = curve.cpuUsPerTurn[k - 1]
      return rtt === undefined || cpu === undefined ? "—" : `${rtt.toFixed(0)} / ${cpu.toFixed(0)}`
    })
  ])
  return markdownTable(header, rows, () => "---:")
}

/** What runner.ts's `segments` figure reports: medians of a steady turn's parts, in µs. */
interface Segments {
  readonly sendUs: number
  readonly writeUs: number
  readonly cliUs: number
  readonly receiveUs: number
  readonly roundTripUs: number
  readonly meanRoundTripUs: number
  readonly readsPerTurn: number
}

const segmentParts = ["sendUs", "writeUs", "cliUs", "receiveUs", "roundTripUs", "meanRoundTripUs"] as const

const asRecord = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  typeof value === "object" && value !== null ? value as Record<string, unknown> : undefined

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/** A runner's `segments` result, checked: every part a finite number (a malformed one is reported as a failed run). */
const asSegments = (value: unknown): Segments | undefined => {
  const record = asRecord(value)
  return record !== undefined && [...segmentParts, "readsPerTurn"].every((key) => isFiniteNumber(record[key]))
    ? record as unknown as Segments
    : undefined
}

/**
 * Where a steady turn's round trip goes: per host that has runs, the median over runs of each part's median, and its
 * spread; and its receive part over bare's.
 */
const renderSegments = (runs: ReadonlyMap<string, ReadonlyArray<Segments>>): string => {
  const medianOf = (results: ReadonlyArray<Segments> | undefined, part: keyof Segments) =>
    summarize(results?.map((r) => r[part]) ?? [])
  const bareReceive = medianOf(runs.get("bare"), "receiveUs")
  const receiveOverBare = (host: string, results: ReadonlyArray<Segments>): string => {
    const mine = medianOf(results, "receiveUs")
    return mine === undefined || bareReceive === undefined || host === "bare"
      ? "—"
      : format("us", mine.median - bareReceive.median)
  }
  const header = [
    "host",
    "call → prompt's write",
    "the write",
    "written → the turn's frames read (the fake, the pipes)",
    "read → result in hand",
    "round trip, median",
    "round trip, mean",
    "reads per turn (median)",
    "receive over bare (difference of medians)"
  ]
  const rows = [...runs].filter(([, results]) => results.length > 0).map(([host, results]) => [
    hostLabel[host] ?? host,
    ...segmentParts.map((part) => withSpread("us", medianOf(results, part)!)),
    medianOf(results, "readsPerTurn")!.median.toFixed(2),
    receiveOverBare(host, results)
  ])
  return markdownTable(header, rows, () => "---:")
}

/** What runner.ts's `code` figure reports: per origin of the code, the functions every turn runs and its calls. */
interface Code {
  readonly functions: Readonly<Record<string, number>>
  readonly calls: Readonly<Record<string, number>>
  readonly functionsPerTurn: number
  readonly callsPerTurn: number
}

/** Where the code comes from, in the table's order, and the heading of each. */
const codeOrigins = [["node", "Node"], ["effect", "`effect`"], ["tether", "Tether"], ["library", "other libraries"], [
  "host",
  "the host"
]] as const

/** A runner's `code` result, checked (a malformed one is reported as a failed run). */
const asCode = (value: unknown): Code | undefined => {
  const record = asRecord(value)
  if (record === undefined) return undefined
  const counts = (key: string) => {
    const byOrigin = asRecord(record[key])
    return byOrigin !== undefined && Object.values(byOrigin).every(isFiniteNumber)
  }
  return counts("functions") && counts("calls") && isFiniteNumber(record.functionsPerTurn) &&
      isFiniteNumber(record.callsPerTurn)
    ? record as unknown as Code
    : undefined
}

/**
 * What a turn runs: per host, its functions and its calls, in all and by where the code comes from (each part
 * rounded on its own, so the parts of a call count can miss its total by one).
 */
const renderCode = (results: ReadonlyMap<string, Code>): string => {
  const cell = (total: number, byOrigin: Readonly<Record<string, number>>) =>
    `${Math.round(total).toLocaleString("en")} (${
      codeOrigins.map(([origin]) => Math.round(byOrigin[origin] ?? 0).toLocaleString("en")).join(" · ")
    })`
  const origins = codeOrigins.map(([, heading]) => heading).join(" · ")
  const sdk = results.get("sdk")
  const overSdk = (mine: number, theirs: number | undefined) =>
    theirs === undefined || theirs === 0 ? "—" : `${(mine / theirs).toFixed(2)}x`
  return markdownTable(
    [
      "host",
      `functions run in every turn (${origins})`,
      `calls per turn (${origins})`,
      "functions / the SDK's",
      "calls / the SDK's"
    ],
    [...results].map(([host, code]) => [
      hostLabel[host] ?? host,
      cell(code.functionsPerTurn, code.functions),
      cell(code.callsPerTurn, code.calls),
      overSdk(code.functionsPerTurn, sdk?.functionsPerTurn),
      overSdk(code.callsPerTurn, sdk?.callsPerTurn)
    ]),
    () => "---:"
  )
}

/** The lines that list a figure's failed runs under its table, if any failed. */
const failedRuns = (title: string, errors: ReadonlyArray<string>): Array<string> =>
  errors.length > 0 ? [title, "", ...errors.map((e) => `- ${e}`), ""] : []

type Imports = ReadonlyMap<string, { readonly samples: ReadonlyArray<number>; readonly errors: ReadonlyArray<string> }>

/** The before-any-session table: one row per module, its peak RSS and what it adds to Node alone. */
const renderImports = (imports: Imports): string => {
  const alone = summarize(imports.get(modules[0]!.label)?.samples ?? [])
  const rows = [...imports].map(([label, { errors, samples }]) => {
    const s = summarize(samples)
    const value = s === undefined
      ? errors.length > 0 ? `failed (${errors.length})` : "—"
      : withSpread("bytes", s)
    const added = s === undefined || alone === undefined || label === modules[0]!.label
      ? "—"
      : `+${format("bytes", s.median - alone.median)}`
    return [label, value, added]
  })
  return markdownTable(
    ["`node -e \"await import(X)\"`, X =", "peak RSS median (min–max)", "over Node alone"],
    rows,
    () => "---:"
  )
}

const machine = () => {
  const cpus = Os.cpus()
  return {
    cpu: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    memoryGiB: Math.round((Os.totalmem() / 1024 ** 3) * 10) / 10,
    os: `${Os.type()} ${Os.release()} ${Os.arch()}`,
    node: process.version
  }
}

// --- main --------------------------------------------------------------------------------------------------------

const rotate = <A>(xs: ReadonlyArray<A>, n: number): Array<A> => xs.map((_, i) => xs[(i + n) % xs.length]!)

const main = async () => {
  const started = performance.now()
  const m = machine()
  Fs.mkdirSync(outDir, { recursive: true })
  log(`bench: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, Node ${m.node}; config ${JSON.stringify(config)}`)

  // A host that cannot even load (e.g. a package not there yet) is reported once and left out.
  const unavailable: Array<string> = []
  for (const host of [...config.hosts]) {
    const p = await runChild(host, "probe", {})
    if (!p.ok) {
      unavailable.push(`${host}: ${p.error}`)
      log(`host ${host} unavailable: ${p.error}`)
    }
  }
  const hosts = config.hosts.filter((h) => !unavailable.some((u) => u.startsWith(`${h}: `)))

  // The figures on the built packages: build them (or find them built), and the bench's own files type-stripped.
  const onBuilt = config.coldRuns > 0 || config.importRuns > 0
  if (onBuilt && config.build) {
    log("bench: building the packages (tsc -b)")
    await build()
  }
  const missing = onBuilt ? missingDist() : []
  if (missing.length > 0) {
    throw new Error(
      `bench: no dist/ for ${missing.map((name) => `packages/${name}`).join(", ")}; run pnpm build ` +
        `(or set BENCH_COLD_RUNS=0 BENCH_IMPORT_RUNS=0 to leave out the figures on the built packages)`
    )
  }
  const copies = onBuilt ? prepare(Path.join(outDir, "cold")) : undefined
  const hooks = copies === undefined ? [] : ["--import", pathToFileURL(copies.hooks).href]

  // A runner's deadline grows with its turns (about a millisecond a turn at the slowest, the first ones).
  const deadlineFor = (turns: number) => 180_000 + turns * 2
  const steadyTimeoutMs = deadlineFor(config.steadyWarmup + config.steadyTurns)
  // Hosts take turns in a rotating order, so drift over the run (thermal, page cache, other load) is spread evenly.
  for (let run = 0; run < config.runs; run++) {
    // The fake's ceiling, once a run, taking its turn with the hosts (throughput only: it is not a host to compare).
    for (const host of rotate(config.ceiling && hosts.includes("sdk") ? [...hosts, "ceiling"] : hosts, run)) {
      if (host === "ceiling") {
        const c = await runChild(host, "throughput", { frames: config.frames })
        if (c.ok) add("throughput", host, c.value.framesPerSecond)
        else addError(["throughput"], host, c.error)
        log(
          `run ${run + 1}/${config.runs} ceiling throughput: ${
            c.ok ? format("rate", c.value.framesPerSecond) : c.error
          }`
        )
        continue
      }
      const t = await runChild(host, "throughput", { frames: config.frames })
      if (t.ok) {
        add("throughput", host, t.value.framesPerSecond)
        add("cpuPerFrame", host, t.value.cpuUsPerFrame)
        // Only the Tether hosts' consumers can be told they skipped events.
        if (typeof t.value.lags === "number") add("lags", host, t.value.lags)
        if (typeof t.value.missed === "number") add("lagMissed", host, t.value.missed)
      } else addError(["throughput", "cpuPerFrame"], host, t.error)
      log(
        `run ${run + 1}/${config.runs} ${host} throughput: ${t.ok ? format("rate", t.value.framesPerSecond) : t.error}`
      )

      const r = await runChild(host, "rtt", { turns: config.turns })
      if (r.ok) {
        add("rtt", host, r.value.meanUs)
        add("rttP99", host, r.value.p99Us)
        add("cpuPerTurn", host, r.value.cpuUsPerTurn)
      } else addError(["rtt", "rttP99", "cpuPerTurn"], host, r.error)
      log(`run ${run + 1}/${config.runs} ${host} rtt: ${r.ok ? format("us", r.value.meanUs) : r.error}`)

      if (config.steadyWarmup > 0) {
        const w = await runChild(host, "rtt", {
          turns: config.steadyTurns,
          warmupTurns: config.steadyWarmup,
          timeoutMs: steadyTimeoutMs
        })
        if (w.ok) {
          add("rttSteady", host, w.value.meanUs)
          add("cpuPerTurnSteady", host, w.value.cpuUsPerTurn)
        } else addError(["rttSteady", "cpuPerTurnSteady"], host, w.error)
        log(`run ${run + 1}/${config.runs} ${host} steady rtt: ${w.ok ? format("us", w.value.meanUs) : w.error}`)
      }

      const l = await runChild(host, "lifecycle", { cycles: config.cycles })
      if (l.ok) {
        add("firstResult", host, ...l.value.firstResultMs)
        add("teardown", host, ...l.value.teardownMs)
      } else addError(["firstResult", "teardown"], host, l.error)
      log(
        `run ${run + 1}/${config.runs} ${host} lifecycle: ${
          l.ok ? `first result ${format("ms", summarize(l.value.firstResultMs)!.median)}` : l.error
        }`
      )
    }
  }
  // How each Claude host warms up, once per host: what says how long the steady state's warm-up must be.
  const claudeRunHosts = hosts.filter((h) => pairOf(h) === undefined)
  const curveErrors: Array<string> = []
  const curves = new Map<string, WarmupCurve>()
  if (config.warmupBlocks > 0) {
    for (const host of claudeRunHosts) {
      const r = await runChild(host, "warmup", {
        blocks: config.warmupBlocks,
        block: 1_000,
        timeoutMs: deadlineFor(config.warmupBlocks * 1_000)
      })
      if (r.ok) curves.set(host, r.value)
      else curveErrors.push(`${hostLabel[host] ?? host}: ${r.error}`)
      log(`warm-up curve ${host}: ${r.ok ? "ok" : r.error}`)
    }
  }
  // Where a steady turn's round trip goes, per Claude host, the hosts taking turns as above.
  const segmentErrors: Array<string> = []
  // Keyed in the tables' host order, whatever order the runs come in.
  const segmentRuns = new Map<string, Array<Segments>>(claudeRunHosts.map((h) => [h, []]))
  for (let run = 0; run < config.segmentRuns; run++) {
    for (const host of rotate(claudeRunHosts, run)) {
      const r = await runChild(host, "segments", {
        turns: config.steadyTurns,
        warmupTurns: config.steadyWarmup,
        timeoutMs: steadyTimeoutMs
      })
      const value = r.ok ? asSegments(r.value) : undefined
      if (value !== undefined) segmentRuns.get(host)!.push(value)
      else segmentErrors.push(`${hostLabel[host] ?? host}: ${r.ok ? "a malformed result" : r.error}`)
      log(
        `run ${run + 1}/${config.segmentRuns} ${host} segments: ${
          value !== undefined ? format("us", value.receiveUs) : "failed"
        }`
      )
    }
  }
  // What JavaScript a turn runs, per Claude host: counted, not timed, so one run each.
  const codeTurns = { turns: 200, warmupTurns: 2_000 }
  const codeErrors: Array<string> = []
  const codeResults = new Map<string, Code>()
  if (config.code) {
    for (const host of claudeRunHosts) {
      // Counting (with V8 not optimizing) takes a few seconds; the deadline is the runner's default.
      const r = await runChild(host, "code", codeTurns)
      const value = r.ok ? asCode(r.value) : undefined
      if (value !== undefined) codeResults.set(host, value)
      else codeErrors.push(`${hostLabel[host] ?? host}: ${r.ok ? "a malformed result" : r.error}`)
      log(`code ${host}: ${value !== undefined ? `${value.functionsPerTurn} functions a turn` : "failed"}`)
    }
  }
  for (let run = 0; run < config.coldRuns; run++) {
    for (const host of rotate(hosts, run)) {
      const c = await runNode([...hooks, copies!.cold, host])
      if (c.ok) {
        add("coldFirstResult", host, c.value.firstResultMs)
        add("peakRss", host, c.value.peakRss)
      } else addError(["coldFirstResult", "peakRss"], host, c.error)
      log(`cold run ${run + 1}/${config.coldRuns} ${host}: ${c.ok ? format("ms", c.value.firstResultMs) : c.error}`)
    }
  }
  const imports = new Map<string, { readonly samples: Array<number>; readonly errors: Array<string> }>(
    modules.map((m) => [m.label, { samples: [], errors: [] }])
  )
  for (let run = 0; run < config.importRuns; run++) {
    for (const m of rotate(modules, run)) {
      const r = await runNode([...hooks, "--input-type=module", "-e", importScript(m.specifier)])
      if (r.ok) imports.get(m.label)!.samples.push(r.value.peakRss)
      else imports.get(m.label)!.errors.push(r.error)
      log(`import run ${run + 1}/${config.importRuns} ${m.label}: ${r.ok ? format("bytes", r.value.peakRss) : r.error}`)
    }
  }

  const memoryIds = [
    ...config.levels.flatMap((level) => [`rss${level}`, `heap${level}`]),
    ...(figures.heapMarginal !== undefined ? ["heapMarginal"] : []),
    "busyHeap",
    "teardownAll"
  ]
  for (let run = 0; run < config.memRuns; run++) {
    for (const host of rotate(hosts, run)) {
      const r = await runChild(host, "memory", { levels: config.levels, busyFrames: config.busyFrames }, [
        "--expose-gc"
      ])
      if (r.ok) {
        for (const level of r.value.levels) {
          add(`rss${level.sessions}`, host, level.rssPerSession)
          add(`heap${level.sessions}`, host, level.heapPerSession)
        }
        if (figures.heapMarginal !== undefined) {
          const [from, to] = marginalLevels()
          const at = (n: number) => r.value.levels.find((level: { sessions: number }) => level.sessions === n)
          if (at(from) !== undefined && at(to) !== undefined) {
            add("heapMarginal", host, (at(to).heapUsed - at(from).heapUsed) / (to - from))
          }
        }
        add("busyHeap", host, r.value.busyTurn.heapPerSession)
        add("teardownAll", host, r.value.teardownAllMs)
      } else addError(memoryIds, host, r.error)
      log(`memory run ${run + 1}/${config.memRuns} ${host}: ${r.ok ? "ok" : r.error}`)
    }
  }

  // Profiles of Tether where it misses a speed target (memory misses are reported by their numbers).
  const profiles: Array<{ readonly host: string; readonly figure: string; readonly summary: ProfileSummary }> = []
  for (const host of config.profile === "0" ? [] : tetherHosts().filter((h) => hosts.includes(h))) {
    const wanted = (["throughput", "rtt"] as const).filter((id) =>
      config.profile === "1" || verdict(figures[id]!, [host]).met === false
    )
    for (const id of wanted) {
      const file = Path.join(outDir, "profiles", `${host}-${id}.cpuprofile`)
      const params = id === "throughput"
        ? { frames: config.frames, profile: file }
        : { turns: config.turns, profile: file }
      const r = await runChild(host, id, params)
      if (r.ok) profiles.push({ host, figure: id, summary: summarizeProfile(file) })
      else log(`profile ${host} ${id} failed: ${r.error}`)
    }
  }
  const benchMs = performance.now() - started

  // The other benches, each in its own process, with their own output.
  const extras: Array<
    {
      readonly script: string
      readonly code: number | null
      readonly ms: number
      readonly stdout: string
      readonly stderr: string
    }
  > = []
  for (const name of config.extras) {
    const script = `scripts/bench-${name}.ts`
    if (!Fs.existsSync(Path.join(root, script))) throw new Error(`BENCH_EXTRAS: no ${script}`)
    // The box's startup runs the real CLI (in a network namespace) and needs root on Linux: elsewhere, why not.
    const noBox = name !== "box"
      ? undefined
      : process.platform !== "linux"
      ? `skipped: a session's box needs Linux namespaces (this is ${process.platform})`
      : process.getuid?.() !== 0
      ? "skipped: a session's box needs root here (each session's user namespace maps its root to a uid range of its own)"
      : undefined
    if (noBox !== undefined) {
      log(`${script}: ${noBox}`)
      extras.push({ script, code: 0, ms: 0, stdout: noBox, stderr: "" })
      continue
    }
    log(`${script}: running`)
    const r = await runExtra(Path.join(root, script), name === "box")
    extras.push({ script, ...r })
    log(`${script}: exit ${r.code} after ${(r.ms / 1000).toFixed(1)} s`)
  }

  const lines = [
    "## Tether vs the official SDK vs a bare host",
    "",
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB; ${m.os}; Node ${m.node}. ` +
    `Fake CLI: packages/testing/bin/fast-claude.mjs. Runs per host: ${config.runs} ` +
    `(lifecycle: ${config.runs} × ${config.cycles} cycles after a cold one), memory: ${config.memRuns}. ` +
    `Each measurement in its own Node process; medians with min–max across runs. ` +
    `Tether (subscriber) reads every turn through one session-wide subscriber (\`session.subscribe("latest")\`, ` +
    `\`session.run\` per turn); Tether (per turn) runs each turn as the README's host does (\`send\`, ` +
    `\`Turn.forEachEvent\` to the turn's end, \`turn.result\`: one \`runPromise\` per turn). The cold host is a fresh process ` +
    `per run (${config.coldRuns} per host) on the built packages; every other figure runs on the sources. ` +
    (isolation === false
      ? "The Tether hosts' sessions are unboxed (`BENCH_ISOLATION=false`: `isolation: false`)."
      : "The Tether hosts' sessions are boxed (`isolation: \"auto\"`, the default); the SDK and the bare hosts box " +
        "nothing."),
    "",
    // Only Codex or ACP hosts asked for (BENCH_HOSTS=codex-bare,codex-tether): no Claude table.
    claudeHosts().length > 0 ? renderTable() : "(no Claude host in BENCH_HOSTS)",
    "",
    ...renderCeiling(),
    `Ratios are Tether's median over the other host's median (for rates, above 1 is better; for times and memory, below 1). ` +
    `Bench time ${(benchMs / 1000).toFixed(0)} s.`,
    ""
  ]
  if (config.hosts.includes("bare") && claudeHosts().length > 2) {
    lines.push(
      "### Each host against the bare one (median over median)",
      "",
      "Each reference host adds one layer of Tether to the one before: bare + decoder is the bare host validating " +
        "every frame with `ClaudeProtocol.decodeLine`; transport + decoder is that decoder behind `NodeTransport` " +
        "under the Effect runtime, one Effect run per turn: Tether without its session.",
      "",
      renderDecomposition(),
      ""
    )
  }
  if (curves.size > 0 || curveErrors.length > 0) {
    lines.push(
      "### How the hosts warm up",
      "",
      "One session per host runs tiny turns in blocks of 1,000 (one run per host); each cell is the block's mean round " +
        "trip / host CPU per turn, in µs, for the block that ends at that turn. The steady-state figure above is " +
        (config.steadyWarmup > 0
          ? `measured after ${config.steadyWarmup.toLocaleString("en")} warm-up turns.`
          : "left out (BENCH_STEADY_WARMUP=0)."),
      "",
      curves.size > 0 ? renderCurves(curves) : "(no curve)",
      "",
      ...failedRuns("Curves that failed:", curveErrors)
    )
  }
  const segmentsRun = [...segmentRuns.values()].some((results) => results.length > 0)
  if (segmentsRun || segmentErrors.length > 0) {
    lines.push(
      "### Where a steady turn's round trip goes",
      "",
      `One session per host runs ${config.steadyWarmup.toLocaleString("en")} warm-up turns, then ` +
        `${config.steadyTurns.toLocaleString("en")} tiny turns, each split at three moments seen on the CLI's pipes ` +
        "(scripts/bench/segments.ts): the host's call of the prompt's write, that call's return, and the read of the " +
        "CLI's stdout that brings the turn's frames (one read a turn: the fake writes them at once). The time cells " +
        `are the median over ${config.segmentRuns} runs of each run's median, in µs, with min–max; the parts' medians ` +
        "need not add up to the round trip's. The fourth column is the fake's work (the same program for every host) " +
        "and the pipes, and also any time the host takes to come back to the read.",
      "",
      segmentsRun ? renderSegments(segmentRuns) : "(no run)",
      "",
      ...failedRuns("Runs that failed:", segmentErrors)
    )
  }
  if (codeResults.size > 0 || codeErrors.length > 0) {
    lines.push(
      "### What JavaScript a turn runs",
      "",
      `One session per host runs ${codeTurns.warmupTurns.toLocaleString("en")} turns, then ${codeTurns.turns} tiny ` +
        "turns counted by V8 after each turn (precise call counts, the coverage behind `c8`; runner.ts's `code` " +
        `figure): the functions that ran in every one of the ${codeTurns.turns} turns, and the calls per turn, ` +
        "in all and by where the code comes from (the parts rounded each on its " +
        "own). Counted, not timed (V8 does not optimize while it counts): the counts move only with what a turn " +
        "does. Every function a turn runs is one V8 compiles and optimizes while the process warms up.",
      "",
      codeResults.size > 0 ? renderCode(codeResults) : "(no run)",
      "",
      ...failedRuns("Runs that failed:", codeErrors)
    )
  }
  if (config.importRuns > 0) {
    lines.push(
      "### Where the memory goes before any session opens",
      "",
      `Peak RSS (VmHWM) of a fresh \`node --input-type=module -e "await import(X)"\` per module, ${config.importRuns} ` +
        "runs each; `@tether/*` resolved to the built packages' `dist/` by scripts/bench/dist-hooks.ts, which every " +
        "row loads (Node alone too).",
      "",
      renderImports(imports),
      ""
    )
  }
  for (const pair of pairs) {
    if (pairHosts(pair).length > 0) {
      lines.push(`### ${pair.heading}`, "", pair.description, "", renderPairTable(pair), "")
    }
  }
  const failed = new Map<string, Array<string>>()
  for (const f of Object.values(figures)) {
    for (const [host, errors] of f.errors) {
      for (const error of new Set(errors)) {
        const key = `${hostLabel[host] ?? host}: ${error}`
        failed.set(key, [...(failed.get(key) ?? []), f.id])
      }
    }
  }
  const failures = [...failed].map(([key, ids]) => `- ${key} (${ids.join(", ")})`)
  if (unavailable.length > 0) lines.push("Hosts left out:", "", ...unavailable.map((u) => `- ${u}`), "")
  if (failures.length > 0) lines.push("Failures:", "", ...failures, "")
  for (const p of profiles) {
    lines.push(renderProfile(`${hostLabel[p.host] ?? p.host} CPU profile: ${figures[p.figure]!.label}`, p.summary))
  }
  for (const extra of extras) {
    lines.push(
      `## ${extra.script} (exit ${extra.code}, ${(extra.ms / 1000).toFixed(1)} s)`,
      "",
      extra.stdout.trim(),
      ""
    )
    if (extra.code !== 0) lines.push("```", extra.stderr.trim().split("\n").slice(-20).join("\n"), "```", "")
  }
  const markdown = lines.join("\n")
  console.log(markdown)

  const json = {
    date: new Date().toISOString(),
    machine: m,
    config,
    benchMs,
    unavailable,
    figures: Object.values(figures).map((f) => ({
      id: f.id,
      label: f.label,
      unit: f.unit,
      better: f.better,
      targets: f.targets,
      verdict: verdict(f),
      hosts: Object.fromEntries(
        [...config.hosts, ...(f.samples.has("ceiling") || f.errors.has("ceiling") ? ["ceiling"] : [])].map((
          h
        ) => [h, { summary: summarize(f.samples.get(h) ?? []) ?? null, errors: f.errors.get(h) ?? [] }])
      ) as Record<string, { summary: Summary | null; errors: Array<string> }>,
      // Both Tether hosts against the SDK, and every host against the bare one (`tetherVsBare`, `sdkVsBare`, …).
      ratios: {
        tetherVsSdk: ratio(f, "tether", "sdk") ?? null,
        tetherEventsVsSdk: ratio(f, "tether-events", "sdk") ?? null,
        ...Object.fromEntries(
          claudeHosts().filter((h) => h !== "bare").map((h) => [`${h}VsBare`, ratio(f, h, "bare") ?? null])
        ),
        ...Object.fromEntries(
          pairs.filter((pair) => pairHosts(pair).length > 0).map((
            pair
          ) => [pair.ratioKey, ratio(f, pair.tether, pair.bare) ?? null])
        )
      }
    })),
    imports: Object.fromEntries(
      [...imports].map(([label, { errors, samples }]) => [
        label,
        {
          specifier: modules.find((m) => m.label === label)?.specifier ?? null,
          summary: summarize(samples) ?? null,
          errors
        }
      ])
    ),
    warmup: { curves: Object.fromEntries(curves), errors: curveErrors },
    segments: {
      runs: Object.fromEntries([...segmentRuns].filter(([, results]) => results.length > 0)),
      errors: segmentErrors
    },
    code: { results: Object.fromEntries(codeResults), errors: codeErrors },
    profiles,
    extras
  }
  Fs.writeFileSync(Path.join(outDir, "bench.json"), JSON.stringify(json, null, 2) + "\n")
  Fs.writeFileSync(Path.join(outDir, "bench.md"), markdown + "\n")
  log(`bench: wrote .bench/bench.json and .bench/bench.md in ${((performance.now() - started) / 1000).toFixed(0)} s`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
