/**
 * What a host loads to open a session and run turns (`fixtures/modules-host.ts`, a real Node process, for Claude and
 * for Codex): the modules of Effect it does not use itself stay unloaded, so that a one-session host is not charged
 * for them.
 */
import { assert, describe, it } from "@effect/vitest"
import { FakeCodex } from "@tether/testing"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { fakeClaudePath } from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/modules-host.ts", import.meta.url))

/**
 * Modules such a host must not load (about 80 modules, 11-13 MiB of RSS and a quarter of a second of cold start):
 * `effect/Schema` and everything it loads, for hosts that use schemas themselves (`TetherErrorSchema`,
 * `ClaudeProtocol`'s or `CodexProtocol`'s schemas, an `outputSchema`, MCP tools; a frame or params the codec refuses
 * load it to say why), and `effect/Config`, which loads Schema, for hosts that read Config (`Timeouts.config`,
 * `SessionRegistry.config`, `NodeTransport.layerConfig`).
 */
const unwanted = /^effect\/(Schema\w*|Config|ConfigProvider|schema\/.+|internal\/schema\/.+)$/

/**
 * The host's report: its last line (its log, which Effect's default logger prints to stdout, comes before it: a
 * session the box cannot be made for is logged as a warning).
 */
const lastLine = (out: string): string => out.trimEnd().split("\n").at(-1) ?? ""

describe("a one-session Claude host", () => {
  it("runs a turn without loading effect/Schema or effect/Config", { timeout: 30_000 }, () => {
    const out = ChildProcess.execFileSync(process.execPath, [hostScript, "claude", fakeClaudePath], {
      encoding: "utf8",
      timeout: 25_000
    })
    const report = JSON.parse(lastLine(out)) as {
      readonly isError: boolean
      readonly deliveries: number
      readonly modules: ReadonlyArray<string>
    }
    assert.isFalse(report.isError)
    // The turn's stream ran: its events and its end.
    assert.isAbove(report.deliveries, 1)
    assert.include(report.modules, "effect/Effect")
    assert.include(report.modules, "effect/Stream")
    assert.deepStrictEqual(report.modules.filter((module) => unwanted.test(module)), [])
  })
})

describe("a one-session Codex host", () => {
  it("runs a turn without loading effect/Schema or effect/Config", { timeout: 30_000 }, () => {
    const out = ChildProcess.execFileSync(process.execPath, [hostScript, "codex", FakeCodex.fastPath], {
      encoding: "utf8",
      timeout: 25_000
    })
    const report = JSON.parse(lastLine(out)) as {
      readonly status: string
      readonly text: string
      readonly deliveries: number
      readonly modules: ReadonlyArray<string>
    }
    // The turn ran on the server, and its stream to its end: the fake's deltas, then the turn's end.
    assert.strictEqual(report.status, "completed")
    assert.notStrictEqual(report.text, "")
    assert.isAbove(report.deliveries, 1)
    assert.include(report.modules, "effect/Effect")
    assert.include(report.modules, "effect/Stream")
    assert.deepStrictEqual(report.modules.filter((module) => unwanted.test(module)), [])
  })
})
