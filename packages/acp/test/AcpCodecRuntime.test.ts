/**
 * What an ACP session loads: the generated guards and the envelope codec, never `effect/Schema` (nor `Config`); the
 * generated schemas are loaded only by the failure path's module, required on demand to word why a message was
 * refused.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import { isForbidden, src, walk } from "../../core/test/support/ImportWalk.ts"

describe("the ACP codec at run time", () => {
  it("loads no effect/Schema, SchemaAST, SchemaParser, schema/* or Config from AcpSession or AcpAgent", () => {
    const { loaded, pathTo } = walk([Path.join(src("acp"), "AcpSession.ts"), Path.join(src("acp"), "AcpAgent.ts")])
    for (const file of ["machine.ts", "protocol/runtime.ts", "protocol/wire.ts", "protocol/guards.generated.ts"]) {
      assert.include(loaded, Path.join(src("acp"), "internal", file))
    }
    assert.deepStrictEqual(loaded.filter(isForbidden).map(pathTo), [])
    assert.notInclude(loaded, Path.join(src("acp"), "AcpProtocol.ts"))
    assert.notInclude(loaded, Path.join(src("acp"), "internal/protocol/schemas.generated.ts"))
    assert.notInclude(loaded, Path.join(src("acp"), "internal/protocol/explain.ts"))
  })

  it("is checked by a walk that sees Schema where it is loaded", () => {
    for (const module of ["AcpProtocol.ts", "internal/protocol/explain.ts"]) {
      const { loaded, pathTo } = walk([Path.join(src("acp"), module)])
      assert.match(pathTo(loaded.find(isForbidden) ?? ""), /\.ts → .*effect\/dist\/Schema/, module)
    }
  })
})
