/**
 * The ACP codec is generated from the protocol's published JSON Schema (scripts/codegen/acp.ts), and its guards from
 * the generated schemas (scripts/codegen/guards.ts): the committed files must be what the generators make now, and
 * each guard must say what `Schema.is` says of the schema it stands for.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpProtocol } from "@tether/acp"
import { Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Guards from "../src/internal/protocol/guards.generated.ts"

const root = Url.fileURLToPath(new URL("../../../", import.meta.url))

/** Valid and invalid values of each guarded schema, as the agents send them and as they must not. */
const samples: { readonly [schema: string]: ReadonlyArray<unknown> } = {
  InitializeResponse: [
    { protocolVersion: 1, agentCapabilities: { loadSession: true }, agentInfo: { name: "g", version: "1" } },
    { protocolVersion: 1, extra: [1] },
    { protocolVersion: "1" },
    { protocolVersion: 1.5 },
    { agentCapabilities: {} },
    null
  ],
  NewSessionResponse: [
    { sessionId: "s", modes: { currentModeId: "a", availableModes: [{ id: "a", name: "A" }] } },
    { sessionId: "s", configOptions: [{ id: "m", name: "M", type: "boolean", currentValue: true }] },
    { sessionId: "s", configOptions: [{ id: "m", name: "M", type: "select", currentValue: "x", options: [] }] },
    { sessionId: "s", configOptions: [{ id: "m", name: "M", type: "select", currentValue: true, options: [] }] },
    { sessionId: 1 },
    {}
  ],
  PromptResponse: [
    { stopReason: "end_turn" },
    { stopReason: "refusal", _meta: null },
    { stopReason: "bored" },
    {}
  ],
  SessionUpdateAgentMessageChunk: [
    { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "hi" } },
    { sessionUpdate: "agent_message_chunk", content: { type: "image", data: "", mimeType: "image/png" } },
    { sessionUpdate: "agent_message_chunk", content: { type: "text" } },
    { sessionUpdate: "agent_message_chunk", content: { type: "video" } },
    { sessionUpdate: "user_message_chunk", content: { type: "text", text: "hi" } }
  ],
  SessionUpdateToolCall: [
    { sessionUpdate: "tool_call", toolCallId: "c", title: "t", kind: "execute", status: "pending", rawInput: 1 },
    { sessionUpdate: "tool_call", toolCallId: "c", title: "t", kind: "sing" },
    { sessionUpdate: "tool_call", toolCallId: "c" },
    {
      sessionUpdate: "tool_call",
      toolCallId: "c",
      title: "t",
      content: [{ type: "diff", path: "/a", newText: "x" }, { type: "terminal", terminalId: "t1" }]
    }
  ],
  SessionUpdateToolCallUpdate: [
    { sessionUpdate: "tool_call_update", toolCallId: "c", status: null, title: null },
    { sessionUpdate: "tool_call_update", toolCallId: "c", status: "done" }
  ],
  RequestPermissionRequest: [
    {
      sessionId: "s",
      toolCall: { toolCallId: "c" },
      options: [{ optionId: "o", name: "Allow", kind: "allow_once" }]
    },
    { sessionId: "s", toolCall: { toolCallId: "c" }, options: [{ optionId: "o", name: "Allow", kind: "maybe" }] },
    { sessionId: "s", options: [] }
  ],
  ReadTextFileRequest: [
    { sessionId: "s", path: "/a", line: 3, limit: null },
    { sessionId: "s", path: "/a", line: 2.5 },
    { sessionId: "s" }
  ]
}

describe("the ACP codec", () => {
  it("is what scripts/codegen/acp.ts generates from @agentclientprotocol/sdk's JSON Schema now", () => {
    const out = execFileSync(process.execPath, [Path.join(root, "scripts/codegen/acp.ts"), "--check"], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
    assert.include(out, "checked packages/acp/src/internal/protocol/schemas.generated.ts")
  }, 60_000)

  it("was generated from the pinned SDK's schema", () => {
    assert.strictEqual(AcpProtocol.sdkVersion, "2.4.0")
  })

  for (const [name, values] of Object.entries(samples)) {
    it(`the guard of ${name} says what Schema.is says`, () => {
      const schema = (AcpProtocol as unknown as { readonly [name: string]: Schema.Top })[name]
      const guard = (Guards as unknown as { readonly [name: string]: (u: unknown) => boolean })[`is${name}`]
      const is = Schema.is(schema as Schema.Codec<unknown, unknown>)
      const answers = values.map((value) => guard(value))
      assert.deepStrictEqual(answers, values.map((value) => is(value)), name)
      // Each table has values of both kinds: the guard is not trivially true or false.
      assert.include(answers, true)
      assert.include(answers, false)
    })
  }
})
