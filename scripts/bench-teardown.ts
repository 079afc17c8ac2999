/**
 * `node scripts/bench-teardown.ts`: how long the Node transport's teardown takes (scope close → every process of the
 * session gone and the CLI reaped), against the fake CLI in three shapes:
 *
 * - cooperative: the CLI exits on SIGTERM;
 * - ignores SIGTERM: the CLI ignores SIGTERM and stdin EOF, so teardown waits out termGrace and SIGKILLs it;
 * - setsid descendant: the CLI has a child in its own session (like the Bash tool's shell), out of reach of a
 *   process-group kill.
 *
 * Each run opens a session, waits (in /proc) until its whole tree is up, closes the scope, and checks /proc that
 * nothing of the session survived. Prints a markdown table (median, min, max) and writes .bench/teardown.json.
 *
 * Knobs (environment): BENCH_TEARDOWN_RUNS (10), BENCH_TEARDOWN_TERM_GRACE_MS (500).
 */
import { Duration, Effect, Exit, Option, Scope, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Transport from "../packages/core/src/Transport.ts"
import * as FakeClaude from "../packages/testing/src/FakeClaude.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"
import { withEnvironment } from "../packages/transport-node/test/utils.ts"
import { summarize, type Summary } from "./bench/stats.ts"

const runs = Number(process.env.BENCH_TEARDOWN_RUNS ?? "10")
const termGraceMillis = Number(process.env.BENCH_TEARDOWN_TERM_GRACE_MS ?? "500")
const root = Path.resolve(import.meta.dirname, "..")

interface Shape {
  readonly name: string
  readonly modes: ReadonlyArray<FakeClaude.Mode>
  /** Processes of the session once it is up (the CLI included). */
  readonly size: number
}

const shapes: ReadonlyArray<Shape> = [
  { name: "cooperative", modes: [], size: 1 },
  { name: "ignores SIGTERM", modes: ["ignore-sigterm"], size: 1 },
  { name: "setsid descendant", modes: ["setsid-child"], size: 3 }
]

/** Live processes carrying the run's marker, from /proc (not from the transport's bookkeeping). */
const marked = (mark: string): number => withEnvironment(`BENCH_MARK=${mark}\0`).length

const waitFor = (f: () => boolean) =>
  Effect.callback<void>((resume) => {
    const deadline = Date.now() + 10_000
    const poll = () => {
      if (f()) return resume(Effect.void)
      if (Date.now() > deadline) return resume(Effect.die(new Error("the session's tree did not come up")))
      setTimeout(poll, 5)
    }
    poll()
  })

const once = (shape: Shape) =>
  Effect.gen(function*() {
    const transport = yield* Transport.Transport
    const mark = randomUUID()
    const scope = yield* Scope.make()
    const connection = yield* transport.open({
      program: "claude",
      args: ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
      cwd: Option.none(),
      env: { mode: "inherit", set: { ...FakeClaude.env({ modes: shape.modes }), BENCH_MARK: mark }, unset: [] }
    }, { termGrace: Duration.millis(termGraceMillis) }).pipe(Scope.provide(scope))
    // The answer to initialize proves the CLI is up with its signal handlers installed.
    yield* connection.write(`{"type":"control_request","request_id":"r1","request":{"subtype":"initialize"}}`)
    yield* Stream.runHead(connection.stdout)
    yield* waitFor(() => marked(mark) === shape.size)
    const started = performance.now()
    yield* Scope.close(scope, Exit.void)
    const millis = performance.now() - started
    const survivors = marked(mark)
    if (survivors > 0) return yield* Effect.die(new Error(`${shape.name}: ${survivors} processes survived teardown`))
    return millis
  })

const program = Effect.gen(function*() {
  const { capabilities } = yield* Transport.Transport
  const results: Array<{ readonly shape: string } & Summary> = []
  for (const shape of shapes) {
    yield* once(shape) // warm-up, not counted
    const samples: Array<number> = []
    for (let i = 0; i < runs; i++) samples.push(yield* once(shape))
    const summary = summarize(samples)
    if (summary === undefined) {
      return yield* Effect.die(new Error(`${shape.name}: no runs (BENCH_TEARDOWN_RUNS=${runs})`))
    }
    results.push({ shape: shape.name, ...summary })
  }
  return { results, capabilities }
}).pipe(Effect.provide(NodeTransport.layer({ executables: { claude: FakeClaude.path } })))

const { capabilities, results } = await Effect.runPromise(program)

const ms = (x: number) => x.toFixed(1)
const lines = [
  `### Teardown latency (termGrace ${termGraceMillis} ms, ${runs} runs each; containment ${capabilities.containment}; ${Os.cpus().length} CPUs, Node ${process.version}, ${process.platform})`,
  "",
  "| shape | median ms | min ms | max ms |",
  "| --- | ---: | ---: | ---: |",
  ...results.map((r) => `| ${r.shape} | ${ms(r.median)} | ${ms(r.min)} | ${ms(r.max)} |`)
]
console.log(lines.join("\n"))

Fs.mkdirSync(Path.join(root, ".bench"), { recursive: true })
Fs.writeFileSync(
  Path.join(root, ".bench", "teardown.json"),
  JSON.stringify(
    {
      date: new Date().toISOString(),
      node: process.version,
      platform: process.platform,
      cpus: Os.cpus().length,
      termGraceMillis,
      runs,
      capabilities,
      results
    },
    null,
    2
  ) + "\n"
)
