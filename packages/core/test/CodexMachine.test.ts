/**
 * Codex's protocol machine alone, for what the recorded transcripts cannot show: server requests the real 0.171.0
 * never sent in them.
 */
import { assert, describe, it } from "@effect/vitest"
import { CodexProtocol, Permission } from "@tether/core"
import * as CodexMachine from "../src/codex/internal/machine.ts"
import type * as Provider from "../src/Provider.ts"

const machine = () =>
  CodexMachine.make({
    clientInfo: { name: "test", title: null, version: "0" },
    capabilities: null,
    thread: { _tag: "Start", params: {} },
    turnParams: {}
  })

const items = (produced: Provider.Items): ReadonlyArray<Provider.Item> =>
  produced === undefined ? [] : Array.isArray(produced) ? produced : [produced as Provider.Item]

const written = (produced: Provider.Items): ReadonlyArray<unknown> =>
  items(produced).flatMap((item) => item._tag === "Write" ? [JSON.parse(item.line)] : [])

describe("Codex's protocol machine: server requests", () => {
  it("a v2 command approval is a permission request, and an allow is answered `accept`", () => {
    const codex = machine()
    const received = items(codex.receive(CodexProtocol.encodeRequest(7, "item/commandExecution/requestApproval", {
      turnId: "turn-1",
      itemId: "call-1",
      command: "/bin/bash -lc ls",
      cwd: "/tmp"
    })))
    const request = received.find((item) => item._tag === "PermissionRequest")
    assert.isDefined(request)
    if (request?._tag !== "PermissionRequest") return
    assert.strictEqual(request.request.kind, "command")
    const answer = written(codex.answerPermission({ ...request.request, turnId: "host-1" }, Permission.allow()))
    assert.deepStrictEqual(answer, [{ id: 7, result: { decision: "accept" } }])
  })

  for (const method of ["execCommandApproval", "applyPatchApproval"]) {
    it(`the legacy ${method} is not taken for a v2 approval: the host's request handler answers it, by method`, () => {
      const codex = machine()
      const received = items(codex.receive(CodexProtocol.encodeRequest(8, method, {
        conversationId: "c-1",
        callId: "call-1",
        command: ["ls", "-la"],
        cwd: "/tmp"
      })))
      assert.isUndefined(received.find((item) => item._tag === "PermissionRequest"))
      const request = received.find((item) => item._tag === "HostRequest")
      assert.isDefined(request)
      if (request?._tag !== "HostRequest") return
      assert.deepInclude(request.request as object, { _tag: "ServerRequest", method })
      // Without a handler, the session answers with an error (CodexSession's default), which Codex takes as no.
      const answer = written(codex.reply(request.requestId, { _tag: "Error", message: "not answered" }))
      assert.deepStrictEqual(answer, [{ id: 8, error: { code: -32000, message: "not answered" } }])
    })
  }
})
