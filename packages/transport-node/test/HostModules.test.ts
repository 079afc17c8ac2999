/**
 * What a host loads to open a Claude session and run turns (`fixtures/modules-host.ts`, a real Node process): the
 * modules of Effect it does not use itself stay unloaded, so that a one-session host is not charged for them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { fakeClaudePath } from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/modules-host.ts", import.meta.url))

/**
 * Modules such a host must not load: `effect/Config` (and with it `effect/Schema`) is for hosts that read Config
 * (`Timeouts.config`, `SessionRegistry.config`, `NodeTransport.layerConfig`). `effect/Schema` and `effect/SchemaAST`
 * belong here too once the error classes and the wire codec no longer import them.
 */
const unwanted = ["effect/Config", "effect/ConfigProvider"]

describe("a one-session Claude host", () => {
  it("runs a turn without loading effect/Config", { timeout: 30_000 }, () => {
    const out = ChildProcess.execFileSync(process.execPath, [hostScript, fakeClaudePath], {
      encoding: "utf8",
      timeout: 25_000
    })
    const report = JSON.parse(out) as { readonly isError: boolean; readonly modules: ReadonlyArray<string> }
    assert.isFalse(report.isError)
    assert.include(report.modules, "effect/Effect")
    assert.deepStrictEqual(report.modules.filter((module) => unwanted.includes(module)), [])
  })
})
