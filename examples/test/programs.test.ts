/**
 * The programs the READMEs show (```ts run blocks, extracted by scripts/readme.ts) and the host example run as a
 * user runs them: `node <file>` against the fake `claude` of @tether/testing (TETHER_CLAUDE_PATH), as real processes
 * (`support/Programs.ts`: whatever a run starts is killed when the test ends, however it ends).
 */
import { assert, describe, it } from "@effect/vitest"
import { FakeClaude, FakeCodex } from "@tether/testing"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as OtlpCollector from "./support/OtlpCollector.ts"
import { run } from "./support/Programs.ts"

const examples = Path.resolve(import.meta.dirname, "..")

interface Program {
  readonly file: string
  readonly source: string
}

const programs: ReadonlyArray<Program> = JSON.parse(
  Fs.readFileSync(Path.join(examples, "readme", "programs.json"), "utf8")
)

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

describe("examples/src/telemetry.ts", () => {
  const telemetry = Path.join(examples, "src", "telemetry.ts")

  it.live(
    "sends the session's, its turns' and its control's spans and the session metrics to a collector",
    () =>
      Effect.gen(function*() {
        const collector = yield* OtlpCollector.make
        const outcome = yield* run(telemetry, [], { ...fake, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url })
        assert.strictEqual(outcome.code, 0, outcome.stderr)
        assert.include(outcome.stdout, `traces and metrics sent to ${collector.url}`)
        const turnIds = Array.from(outcome.stdout.matchAll(/^turn ([0-9a-f-]+):/gm), (match) => match[1])
        assert.strictEqual(turnIds.length, 2, outcome.stdout)

        const spans = collector.spans()
        const named = (name: string) => spans.filter((span) => span.name === name)
        const [host] = named("example.conversation")
        const [session] = named("tether.session")
        const turns = named("tether.turn")
        const [control] = named("tether.control")
        assert.isDefined(host, spans.map((span) => span.name).join(", "))
        assert.isDefined(session)
        assert.strictEqual(session.resource["service.name"], "tether-example")
        // One trace: the host's span, the session's life under it, the turns under the host's span (who sent them).
        for (const span of [session, ...turns, control]) assert.strictEqual(span.traceId, host.traceId, span.name)
        assert.strictEqual(session.status, 1)
        assert.deepStrictEqual(session.events, ["ready"])
        assert.include(session.attributes, {
          "tether.provider": "claude",
          "tether.model": "claude-sonnet-4-5",
          "tether.session.status": "closed",
          "tether.session.turns": 2,
          "process.exit.code": 0
        })
        const conversation = session.attributes["tether.conversation.id"]
        assert.isString(conversation)
        assert.isNumber(session.attributes["process.pid"])

        assert.deepStrictEqual(turns.map((turn) => turn.attributes["tether.turn.id"]), turnIds)
        for (const turn of turns) {
          assert.strictEqual(turn.parentSpanId, host.spanId)
          assert.deepStrictEqual(turn.links, [session.spanId])
          assert.strictEqual(turn.status, 1)
          assert.include(turn.attributes, {
            "tether.provider": "claude",
            "tether.model": "claude-sonnet-4-5",
            "tether.turn.outcome": "completed",
            "tether.conversation.id": conversation
          })
          for (const key of ["tether.tokens.input", "tether.tokens.output", "tether.cost_usd"]) {
            assert.isAbove(turn.attributes[key] as number, 0, key)
          }
          assert.isNumber(turn.attributes["tether.turn.first_output_ms"])
        }
        assert.include(control.attributes, { "tether.control.subtype": "mcp_status", "tether.control.outcome": "ok" })

        const metrics = collector.metrics()
        const metric = (name: string) => {
          const found = metrics.find((m) => m.name === name)
          assert.isDefined(found, `${name} among ${metrics.map((m) => m.name).join(", ")}`)
          return found!
        }
        const point = (name: string, attributes: Record<string, unknown>) => {
          const found = metric(name).points.find((p) =>
            Object.entries(attributes).every(([key, value]) => p.attributes[key] === value)
          )
          assert.isDefined(found, `${name} ${JSON.stringify(attributes)}`)
          return found!
        }
        const turnsMetric = metric("tether_session_turns")
        assert.strictEqual(turnsMetric.kind, "sum")
        assert.isTrue(turnsMetric.isMonotonic)
        assert.strictEqual(point("tether_session_turns", { provider: "claude", outcome: "completed" }).value, 2)
        assert.strictEqual(metric("tether_session_turn_duration").unit, "ms")
        assert.strictEqual(point("tether_session_turn_duration", { provider: "claude", outcome: "completed" }).count, 2)
        assert.strictEqual(point("tether_session_turn_first_output", { provider: "claude" }).count, 2)
        assert.strictEqual(point("tether_session_start_duration", { provider: "claude", outcome: "ready" }).count, 1)
        assert.strictEqual(point("tether_sessions_live", { provider: "claude" }).value, 0)
        assert.isAbove(point("tether_session_tokens", { provider: "claude", kind: "input" }).value!, 0)
        assert.isAbove(point("tether_session_cost_usd", { provider: "claude" }).value!, 0)
        assert.strictEqual(point("tether_session_control_duration", { subtype: "mcp_status", outcome: "ok" }).count, 1)
      }),
    60_000
  )
})
