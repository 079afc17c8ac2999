import { assert, describe, it } from "@effect/vitest"
import { ClaudeProtocol, ClaudeWire } from "@tether/claude"
import { Result } from "effect"
import * as fc from "fast-check"
import { fixtureFiles, readLines, transcriptEntries } from "./support/Fixtures.ts"

const hostLines = transcriptEntries.flatMap(({ entry }) =>
  entry.dir === ">" && entry.msg !== undefined ? [JSON.stringify(entry.msg)] : []
)

// Frames a Tether host writes, through the codec's own encoders.
const encoded: ReadonlyArray<string> = [
  ClaudeProtocol.encodeUserMessage({
    type: "user",
    message: { role: "user", content: [{ type: "text", text: "hi" }] },
    parent_tool_use_id: null,
    session_id: "",
    uuid: "u-1"
  }),
  ClaudeProtocol.encodeControlRequest("r1", { subtype: "initialize", hooks: {}, sdkMcpServers: ["calc"] }),
  ClaudeProtocol.encodeControlRequest("r2", { subtype: "interrupt" }),
  ClaudeProtocol.encodeControlRequest("r3", { subtype: "rewind_files", user_message_id: "u-1", dry_run: true }),
  ClaudeProtocol.encodeControlSuccess("c1", { behavior: "allow", updatedInput: { command: "ls" } }),
  ClaudeProtocol.encodeControlSuccess("c2", { mcp_response: { jsonrpc: "2.0", id: 1, result: {} } }),
  ClaudeProtocol.encodeControlError("c3", "no"),
  ClaudeProtocol.encodeControlCancel("r1")
]

describe("ClaudeWire", () => {
  it("reads every host line of the recorded transcripts, and every line the codec's encoders write, as a frame", () => {
    assert.isAbove(hostLines.length, 20)
    for (const line of [...hostLines, ...encoded]) {
      const read = ClaudeWire.readHostLine(line)
      assert.strictEqual(read._tag, "Frame", line)
      assert.deepStrictEqual((read as { readonly frame: unknown }).frame, JSON.parse(line))
    }
  })

  it("writes a CLI frame as the codec's checked encoder does", () => {
    for (const file of fixtureFiles(".stdout.jsonl")) {
      for (const line of readLines(file)) {
        const decoded = ClaudeProtocol.decodeLine(line)
        if (Result.isFailure(decoded) || decoded.success._tag !== "Frame") continue
        assert.strictEqual(
          ClaudeWire.writeFrame(decoded.success.frame),
          ClaudeProtocol.encodeFrame(decoded.success.frame)
        )
      }
    }
  })

  it("tells lines that are not JSON, unsound envelopes of known frames, and other types apart", () => {
    assert.strictEqual(ClaudeWire.readHostLine("nope")._tag, "NotJson")
    assert.deepStrictEqual(ClaudeWire.readHostLine(`{"type":"keep_alive"}`), { _tag: "Ignored", type: "keep_alive" })
    assert.deepStrictEqual(ClaudeWire.readHostLine(`[1]`), { _tag: "Ignored", type: undefined })
    for (
      const line of [
        `{"type":"user","message":{"role":"user","content":"hi"}}`,
        `{"type":"user","message":{"role":"assistant","content":"hi"},"parent_tool_use_id":null,"session_id":""}`,
        `{"type":"control_request","request_id":"r","request":{}}`,
        `{"type":"control_request","request":{"subtype":"interrupt"}}`,
        `{"type":"control_response","response":{"subtype":"success"}}`,
        `{"type":"control_response","response":{"subtype":"error","request_id":"r"}}`,
        `{"type":"control_cancel_request"}`
      ]
    ) {
      const read = ClaudeWire.readHostLine(line)
      assert.strictEqual(read._tag, "Refused", line)
      // The codec refuses each of them too: the reader is never laxer than the schemas on an envelope.
      assert.isTrue(Result.isFailure(ClaudeProtocol.decodeHostLine(line)), line)
    }
  })

  it("never refuses a line the codec's schemas accept", () => {
    const paths: ReadonlyArray<ReadonlyArray<string>> = [
      ["type"],
      ["message"],
      ["message", "role"],
      ["message", "content"],
      ["parent_tool_use_id"],
      ["session_id"],
      ["uuid"],
      ["request_id"],
      ["request"],
      ["request", "subtype"],
      ["response"],
      ["response", "subtype"],
      ["response", "request_id"],
      ["response", "error"],
      ["response", "response"]
    ]
    const odd = fc.oneof(
      fc.constantFrom(null, "user", "success", "error", "interrupt", "r", [], {}, { subtype: "interrupt" }),
      fc.jsonValue({ maxDepth: 2 })
    )
    const mutated = fc.record({
      base: fc.constantFrom(...encoded),
      mutations: fc.array(fc.record({ path: fc.constantFrom(...paths), value: fc.option(odd, { nil: undefined }) }), {
        maxLength: 3
      })
    }).map(({ base, mutations }) => {
      const frame = JSON.parse(base)
      for (const { path, value } of mutations) {
        let target = frame
        for (const key of path.slice(0, -1)) {
          target = typeof target === "object" && target !== null
            ? target[key]
            : undefined
        }
        if (typeof target !== "object" || target === null) continue
        if (value === undefined) delete target[path[path.length - 1]]
        else target[path[path.length - 1]] = structuredClone(value) // a copy: a shared value could close a cycle
      }
      return JSON.stringify(frame)
    })
    fc.assert(
      fc.property(mutated, (line) => {
        if (Result.isSuccess(ClaudeProtocol.decodeHostLine(line))) {
          assert.strictEqual(ClaudeWire.readHostLine(line)._tag, "Frame", line)
        }
      }),
      { numRuns: 500 }
    )
  })
})
