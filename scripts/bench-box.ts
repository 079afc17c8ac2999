/**
 * `node scripts/bench-box.ts` (run by `pnpm bench` inside a loopback-only network namespace, scripts/netns.sh): what
 * a session's box costs at start. The real `claude` (the pinned 2.1.332), offline against MockAnthropic on
 * 127.0.0.1 answering at once, as the bench's other real-CLI figures run (scripts/bench-warm.ts): the time from
 * `ClaudeSession.make` (the CLI spawned, its handshake) to the result of one tiny turn, with and without
 * `isolation: true` (cgroup containment, as `auto` picks here). The modes alternate run by run (so that the
 * machine's load falls on both), after one warm-up each (the first start reads the CLI from disk); prints a markdown
 * table of the median, min and max of each and the ratio of the medians.
 *
 * Root on Linux only (a box needs it): elsewhere it prints why it is skipped and exits 0.
 * Knob: BENCH_BOX_RUNS (5) measured runs per mode.
 */
import { Duration, Effect } from "effect"
import { randomUUID } from "node:crypto"
import { ClaudeSession } from "../packages/claude/src/index.ts"
import { Permission, Timeouts } from "../packages/core/src/index.ts"
import * as MockAnthropic from "../packages/testing/src/MockAnthropic.ts"
import * as PinnedClaude from "../packages/testing/src/PinnedClaude.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"
import { percentile } from "./bench/stats.ts"

const runsValue = Number(process.env.BENCH_BOX_RUNS ?? "5")
if (!Number.isInteger(runsValue) || runsValue < 1) throw new Error("BENCH_BOX_RUNS must be a positive integer")
const runs = runsValue

/** Why there is no box to measure here, if there is none. */
const skipped = (): string | undefined =>
  process.platform !== "linux"
    ? `skipped: a session's box needs Linux namespaces (this is ${process.platform})`
    : process.getuid?.() !== 0
    ? "skipped: a session's box needs root here (each session's user namespace maps its root to a uid range of its own)"
    : undefined

const modes = ["isolated", "not isolated"] as const
type Mode = typeof modes[number]

const timeouts = { ...Timeouts.defaults, startup: Duration.seconds(60), turn: Duration.minutes(15) }

const program = Effect.gen(function*() {
  const claudePath = PinnedClaude.resolveSync("2.1.332")
  const mock = yield* MockAnthropic.make(() => MockAnthropic.text("ok"))
  const { cwd, env } = yield* MockAnthropic.offlineHome({ baseUrl: mock.url, prefix: "tether-bench-box-" })
  const options: ClaudeSession.Options = {
    cwd,
    timeouts,
    policy: Permission.allowAll,
    env: { mode: "clean", set: { ...env, PATH: process.env.PATH ?? "/usr/bin:/bin" } }
  }
  const layers: Record<Mode, ReturnType<typeof NodeTransport.layer>> = {
    isolated: NodeTransport.layer({ executables: { claude: claudePath }, containment: "cgroup", isolation: true }),
    "not isolated": NodeTransport.layer({
      executables: { claude: claudePath },
      containment: "cgroup",
      isolation: false
    })
  }
  /** Milliseconds from `ClaudeSession.make` to the tiny turn's result; the session then released. */
  const once = (mode: Mode) =>
    Effect.gen(function*() {
      const started = performance.now()
      const session = yield* ClaudeSession.make(options)
      const result = yield* session.run(`hi ${randomUUID()}`)
      if (!result.text.includes("ok")) return yield* Effect.die(new Error(`unexpected answer: ${result.text}`))
      return performance.now() - started
    }).pipe(Effect.scoped, Effect.provide(layers[mode]))

  for (const mode of modes) yield* once(mode)
  const times: Record<Mode, Array<number>> = { isolated: [], "not isolated": [] }
  for (let run = 0; run < runs; run++) {
    for (const mode of run % 2 === 0 ? modes : [...modes].reverse()) times[mode].push(yield* once(mode))
  }
  const median = (mode: Mode) => percentile(times[mode], 0.5)
  const lines = [
    `Real \`claude\` 2.1.332 offline against MockAnthropic, cgroup containment; spawn → first result of a tiny turn ` +
    `(\`ClaudeSession.make\` to \`session.run\`'s result), ${runs} runs per mode, interleaved, after one warm-up each.`,
    "",
    "| box | median ms | min | max |",
    "| --- | ---: | ---: | ---: |",
    ...modes.map((mode) =>
      `| ${
        mode === "isolated"
          ? "isolated (`isolation: true`; the default boxes it too)"
          : "not isolated (`isolation: false`)"
      } | ` +
      `${median(mode).toFixed(0)} | ${Math.min(...times[mode]).toFixed(0)} | ${Math.max(...times[mode]).toFixed(0)} |`
    ),
    `| ratio of the medians (isolated / not) | ${(median("isolated") / median("not isolated")).toFixed(2)} | | |`
  ]
  console.log(lines.join("\n"))
}).pipe(Effect.scoped)

const why = skipped()
if (why !== undefined) console.log(why)
else {
  Effect.runPromise(program).catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
