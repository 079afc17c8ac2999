/**
 * `node scripts/box-startup.ts`: what isolation between sessions costs at start, spawn → first line of stdout, with
 * and without it (a measurement, not a test: the machine is shared, so the numbers are noisy). Two CLIs:
 *
 * - `sh`: `sh -c 'echo ready; exec sleep 30'`, the transport's own overhead;
 * - `sh` in a workspace of its own (a temporary directory): the same, with the workspace lent to the box (its
 *   idmapped mount, made by the host's `perl` helper);
 * - the fake claude (a Node program): spawn → its answer to `initialize`.
 *
 * Alternates the modes run by run (so that the machine's load falls on both) and prints the median, min and max of
 * each, and the ratio of the medians. Root on Linux (elsewhere there is no box to measure). Knob: BOX_STARTUP_RUNS
 * (10).
 */
import { Duration, Effect, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Transport from "../packages/core/src/Transport.ts"
import * as FakeClaude from "../packages/testing/src/FakeClaude.ts"
import { NodeTransport } from "../packages/transport-node/src/index.ts"

const runs = Number(process.env.BOX_STARTUP_RUNS ?? "10")

const initialize = JSON.stringify({
  type: "control_request",
  request_id: "req_1",
  request: { subtype: "initialize", hooks: {} }
})

const specs: Record<string, Transport.LaunchSpec> = {
  sh: {
    program: "sh",
    args: ["-c", "echo ready; exec sleep 30"],
    cwd: Option.none(),
    env: { mode: "clean", set: {}, unset: [] }
  },
  "sh, its workspace lent": {
    program: "sh",
    args: ["-c", "echo ready; exec sleep 30"],
    cwd: Option.some(Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-box-startup-"))),
    env: { mode: "clean", set: {}, unset: [] }
  },
  "fake claude": {
    program: "claude",
    args: ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
    cwd: Option.none(),
    env: { mode: "inherit", set: FakeClaude.env({}), unset: [] }
  }
}

/** Milliseconds from `open` to the first line, the session then released. */
const once = (spec: Transport.LaunchSpec) =>
  Effect.gen(function*() {
    const transport = yield* Transport.Transport
    const started = performance.now()
    const connection = yield* transport.open(spec, { termGrace: Duration.millis(200) })
    if (spec.program === "claude") yield* connection.write(initialize)
    yield* Stream.runHead(connection.stdout).pipe(Effect.timeout("20 seconds"))
    return performance.now() - started
  }).pipe(Effect.scoped)

const layers = {
  isolated: NodeTransport.layer({ executables: { claude: FakeClaude.path }, watchdog: false, isolation: true }),
  "not isolated": NodeTransport.layer({ executables: { claude: FakeClaude.path }, watchdog: false, isolation: false })
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const program = Effect.gen(function*() {
  const lines = ["| CLI | mode | median ms | min | max |", "| --- | --- | ---: | ---: | ---: |"]
  for (const [name, spec] of Object.entries(specs)) {
    const times: Record<keyof typeof layers, Array<number>> = { isolated: [], "not isolated": [] }
    // One warm-up each (the first Node start reads its files from disk).
    for (const mode of ["isolated", "not isolated"] as const) yield* once(spec).pipe(Effect.provide(layers[mode]))
    for (let run = 0; run < runs; run++) {
      for (
        const mode of run % 2 === 0
          ? ["isolated", "not isolated"] as const
          : ["not isolated", "isolated"] as const
      ) {
        times[mode].push(yield* once(spec).pipe(Effect.provide(layers[mode])))
      }
    }
    for (const mode of ["isolated", "not isolated"] as const) {
      const each = times[mode]
      lines.push(
        `| ${name} | ${mode} | ${median(each).toFixed(1)} | ${Math.min(...each).toFixed(1)} | ` +
          `${Math.max(...each).toFixed(1)} |`
      )
    }
    lines.push(
      `| ${name} | ratio of the medians | ${(median(times.isolated) / median(times["not isolated"])).toFixed(2)} | | |`
    )
  }
  console.log(lines.join("\n"))
  const workspace = Option.getOrThrow(specs["sh, its workspace lent"]!.cwd)
  Fs.rmSync(workspace, { recursive: true, force: true })
})

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
