import { assert, describe, it } from "@effect/vitest"
import { ClaudeProtocol } from "@tether/claude"
import { PinnedClaude } from "@tether/testing"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import {
  fixtureFiles,
  fixtureVersions,
  readLines,
  scenarioOf,
  TextBlockLike,
  transcriptEntries,
  versionOf
} from "../../../claude/test/support/Fixtures.ts"

/** Sets the value at `path` inside `root` (deletes it with `remove`); a path through a non-object is left alone. */
const setAt = (root: unknown, path: ReadonlyArray<string | number>, value: unknown, remove: boolean): void => {
  let target: any = root
  for (const key of path.slice(0, -1)) {
    target = target !== null && typeof target === "object" ? target[key] : undefined
  }
  if (target === null || typeof target !== "object") return
  const last = path[path.length - 1]
  if (remove) delete target[last]
  else target[last] = value
}

const decodeOk = (line: string): ClaudeProtocol.Decoded => {
  const result = ClaudeProtocol.decodeLine(line)
  if (Result.isFailure(result)) {
    assert.fail(`expected ${line.slice(0, 120)} to decode, got ${result.failure.message}`)
  }
  return result.success
}

const frameOf = (line: string): ClaudeProtocol.Frame => {
  const decoded = decodeOk(line)
  if (decoded._tag !== "Frame") assert.fail(`expected a known frame, got Unknown ${decoded.type}`)
  return decoded.frame
}

const protocolError = (line: string, options?: ClaudeProtocol.DecodeOptions) => {
  const result = ClaudeProtocol.decodeLine(line, options)
  if (Result.isSuccess(result)) assert.fail(`expected ${line.slice(0, 120)} to fail`)
  return result.failure
}

const stdoutFiles = fixtureFiles(".stdout.jsonl")

// Every type and system subtype in the fixtures is one Tether knows.
const knownTypes = new Set([
  "control_response",
  "control_request",
  "control_cancel_request",
  "keep_alive",
  "system",
  "command_lifecycle",
  "assistant",
  "user",
  "stream_event",
  "result",
  "tool_progress",
  "auth_status",
  "tool_use_summary",
  "rate_limit_event",
  "prompt_suggestion",
  "conversation_reset"
])
const knownSystemSubtypes = new Set([
  "init",
  "status",
  "api_retry",
  "session_state_changed",
  "task_started",
  "task_progress",
  "task_notification",
  "task_updated",
  "permission_denied",
  "compact_boundary",
  "background_tasks_changed",
  "hook_started",
  "hook_progress",
  "hook_response"
])

const assistantLine = JSON.stringify({
  type: "assistant",
  message: {
    id: "msg_1",
    type: "message",
    role: "assistant",
    model: "claude-opus-5-5",
    content: [{ type: "text", text: "hi" }],
    stop_reason: null,
    stop_sequence: null
  },
  parent_tool_use_id: null,
  session_id: "s",
  uuid: "u"
})

const resultLine = JSON.stringify({
  type: "result",
  subtype: "success",
  is_error: false,
  session_id: "s",
  uuid: "u",
  duration_ms: 10,
  duration_api_ms: 5,
  num_turns: 1,
  total_cost_usd: 0.1,
  usage: { input_tokens: 1, output_tokens: 2 },
  permission_denials: [],
  result: "done"
})

const user = (content: string): ClaudeProtocol.UserMessageInput => ({
  type: "user",
  message: { role: "user", content },
  parent_tool_use_id: null,
  session_id: ""
})

const withField = (line: string, patch: (json: Record<string, any>) => void): string => {
  const json = JSON.parse(line)
  patch(json)
  return JSON.stringify(json)
}

describe("ClaudeProtocol", () => {
  describe("decodeLine on the recorded transcripts", () => {
    it("has fixtures recorded by every pinned CLI version", () => {
      assert.deepStrictEqual(fixtureVersions, [...PinnedClaude.versions])
      for (const version of fixtureVersions) {
        assert.isAtLeast(stdoutFiles.filter((file) => versionOf(file) === version).length, 20, version)
      }
    })

    for (const file of stdoutFiles) {
      it(`decodes every frame of ${scenarioOf(file)} to a known frame`, () => {
        const lines = readLines(file)
        assert.isAbove(lines.length, 0)
        const unknown: Array<string> = []
        for (const line of lines) {
          const decoded = decodeOk(line)
          const json = JSON.parse(line)
          if (decoded._tag === "Unknown") {
            // Unknown only where the type (or system subtype) is truly unknown.
            assert.isFalse(
              knownTypes.has(json.type) && (json.type !== "system" || knownSystemSubtypes.has(json.subtype)),
              `${json.type}/${json.subtype} is known but decoded as Unknown`
            )
            unknown.push(`${decoded.type}/${decoded.subtype}`)
          } else {
            assert.strictEqual(decoded.frame.type, json.type)
          }
        }
        // The recorded transcripts contain no type Tether does not know.
        assert.deepStrictEqual(unknown, [])
      })

      it(`re-encodes every frame of ${scenarioOf(file)} with all its fields`, () => {
        for (const line of readLines(file)) {
          const frame = frameOf(line)
          assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeFrame(frame)), JSON.parse(line))
        }
      })
    }

    it("decodes the startup-failure result the real 2.1.332 CLI prints for --resume of an unknown session", () => {
      // Captured from `claude --output-format stream-json --verbose --input-format stream-json --resume=<unknown>`.
      const line =
        "{\"type\":\"result\",\"subtype\":\"error_during_execution\",\"duration_ms\":0,\"duration_api_ms\":0,\"is_error\":true,\"num_turns\":0,\"stop_reason\":null,\"session_id\":\"e965fb50-5d14-4270-bf4c-e88d19c77449\",\"total_cost_usd\":0,\"usage\":{\"output_tokens_details\":{\"thinking_tokens\":0},\"input_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":0,\"server_tool_use\":{\"web_search_requests\":0,\"web_fetch_requests\":0},\"service_tier\":\"standard\",\"cache_creation\":{\"ephemeral_1h_input_tokens\":0,\"ephemeral_5m_input_tokens\":0},\"inference_geo\":\"\",\"iterations\":[],\"speed\":\"standard\",\"fallback_credit\":null},\"modelUsage\":{},\"permission_denials\":[],\"uuid\":\"7f16dae3-394c-4e1c-bdb8-8599e1d83d76\",\"errors\":[\"No conversation found with session ID: e965fb50-5d14-4270-bf4c-e88d19c77449\"],\"result_index\":0}"
      const frame = frameOf(line)
      assert.strictEqual(frame.type, "result")
      if (frame.type === "result") {
        assert.strictEqual(frame.subtype, "error_during_execution")
        assert.deepStrictEqual(frame.errors, [
          "No conversation found with session ID: e965fb50-5d14-4270-bf4c-e88d19c77449"
        ])
        assert.isUndefined(frame.result)
      }
    })

    it("decodes the frames the session routes on with their fields typed", () => {
      const all = stdoutFiles.flatMap(readLines).map(frameOf)
      const result = all.find((frame): frame is ClaudeProtocol.ResultFrame =>
        frame.type === "result" && frame.subtype === "error_during_execution"
      )
      assert.isDefined(result)
      assert.strictEqual(result!.is_error, true)
      assert.strictEqual(result!.terminal_reason, "aborted_streaming")

      const canUseTool = all.find((frame) =>
        frame.type === "control_request" && ClaudeProtocol.isControlRequest(frame, "can_use_tool")
      ) as ClaudeProtocol.CanUseToolRequest | undefined
      assert.isDefined(canUseTool)
      assert.strictEqual(canUseTool!.request.tool_name, "Bash")
      assert.isString(canUseTool!.request.input.command)

      const lifecycle = all.filter((frame): frame is ClaudeProtocol.CommandLifecycleFrame =>
        frame.type === "command_lifecycle"
      )
      assert.includeMembers(lifecycle.map((frame) => frame.state), ["queued", "started", "completed", "cancelled"])

      const replay = all.find((frame): frame is ClaudeProtocol.UserFrame => frame.type === "user" && !!frame.isReplay)
      assert.isDefined(replay)

      const deltas = all.flatMap((frame) =>
        frame.type === "stream_event" && ClaudeProtocol.isType(frame.event, "content_block_delta")
          ? [frame.event.delta]
          : []
      )
      assert.includeMembers(deltas.map((delta) => delta.type), ["text_delta", "input_json_delta"])
    })
  })

  describe("narrowing", () => {
    it("narrows known members by their discriminant, catch-all members included", () => {
      const describeFrame = (frame: ClaudeProtocol.Frame): string => {
        switch (frame.type) {
          case "control_request":
            switch (frame.request.subtype) {
              case "can_use_tool":
                return `permission ${frame.request.tool_name}`
              case "hook_callback":
                return `hook ${frame.request.callback_id}`
              case "mcp_message":
                return `mcp ${frame.request.server_name}`
              default:
                return `other ${frame.request.subtype}`
            }
          case "assistant":
            return frame.message.content.map((block) => {
              switch (block.type) {
                case "text":
                  return block.text
                case "tool_use":
                  return block.name
                default:
                  return String(block.type)
              }
            }).join(",")
          case "system":
            return frame.subtype === "init" ? `init ${frame.model}` : frame.subtype
          default:
            return frame.type
        }
      }
      assert.strictEqual(
        describeFrame(
          frameOf(`{"type":"control_request","request_id":"r","request":{"subtype":"oauth_token_refresh"}}`)
        ),
        "other oauth_token_refresh"
      )
      assert.strictEqual(
        describeFrame(frameOf(withField(assistantLine, (json) => json.message.content.push({ type: "image" })))),
        "hi,image"
      )
      const requests = stdoutFiles.flatMap(readLines).map(frameOf).filter((frame) => frame.type === "control_request")
      const described = new Set(requests.map(describeFrame))
      assert.isTrue(described.has("permission Bash"))
      assert.isTrue(described.has("hook hook_pre_tool"))
    })
  })

  describe("unknown fields", () => {
    it("keeps unknown fields at every level through decode and encode", () => {
      const line = withField(assistantLine, (json) => {
        json.future_top = { nested: [1, 2] }
        json.message.future_message = "x"
        json.message.content[0].citations = [{ a: 1 }]
        json.message.content.push({ type: "server_tool_use", id: "srv_1", input: { q: 1 } })
      })
      const frame = frameOf(line)
      assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeFrame(frame)), JSON.parse(line))
      const assistant = frame as ClaudeProtocol.AssistantFrame
      assert.deepStrictEqual(assistant.future_top, { nested: [1, 2] })
      assert.strictEqual(String(assistant.message.content[1].type), "server_tool_use")
    })

    it("keeps unknown stream events and deltas", () => {
      const base = { session_id: "s", uuid: "u", parent_tool_use_id: null }
      const ping = frameOf(JSON.stringify({ type: "stream_event", event: { type: "ping", extra: 1 }, ...base }))
      assert.strictEqual(String((ping as ClaudeProtocol.StreamEventFrame).event.type), "ping")
      const citations = JSON.stringify({
        type: "stream_event",
        event: { type: "content_block_delta", index: 0, delta: { type: "citations_delta", citation: { x: 1 } } },
        ...base
      })
      assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeFrame(frameOf(citations))), JSON.parse(citations))
    })
  })

  describe("unknown frames", () => {
    it("decodes an unknown type to Unknown with the raw object", () => {
      const decoded = decodeOk(`{"type":"brand_new","subtype":"x","payload":[1]}`)
      assert.deepStrictEqual(decoded, {
        _tag: "Unknown",
        type: "brand_new",
        subtype: "x",
        raw: { type: "brand_new", subtype: "x", payload: [1] }
      })
    })

    it("decodes an unknown system subtype to Unknown", () => {
      const decoded = decodeOk(`{"type":"system","subtype":"model_refusal_fallback","uuid":"u","session_id":"s"}`)
      assert.strictEqual(decoded._tag, "Unknown")
      if (decoded._tag === "Unknown") {
        assert.strictEqual(decoded.type, "system")
        assert.strictEqual(decoded.subtype, "model_refusal_fallback")
        assert.strictEqual(decoded.raw.uuid, "u")
      }
    })

    it("decodes the loosely known types as frames", () => {
      const frame = frameOf(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"uuid":"u"}`)
      assert.strictEqual(frame.type, "rate_limit_event")
    })

    it("decodes other control requests from the CLI as a frame the host must answer", () => {
      const frame = frameOf(
        `{"type":"control_request","request_id":"r1","request":{"subtype":"oauth_token_refresh","message":"?"}}`
      )
      assert.strictEqual(frame.type, "control_request")
      if (frame.type === "control_request") {
        assert.strictEqual(frame.request_id, "r1")
        assert.strictEqual(String(frame.request.subtype), "oauth_token_refresh")
        assert.isFalse(ClaudeProtocol.isControlRequest(frame, "can_use_tool"))
      }
    })
  })

  describe("errors", () => {
    it("refuses a result whose is_error is not a boolean", () => {
      const error = protocolError(withField(resultLine, (json) => (json.is_error = "yes")))
      assert.strictEqual(error._tag, "ProtocolError")
      assert.strictEqual(error.reason, "malformed")
      assert.include(error.detail, "is_error")
    })

    it("refuses malformed known frames instead of calling them unknown", () => {
      const cases = [
        // a known content block with a wrong field is not an "other" block
        withField(assistantLine, (json) => (json.message.content[0].text = 5)),
        // a can_use_tool without tool_name is not an "other" control request
        `{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool","input":{},"tool_use_id":"t"}}`,
        `{"type":"control_request","request_id":"r","request":{}}`,
        `{"type":"command_lifecycle","command_uuid":"c","state":"exploded","uuid":"u","session_id":"s"}`,
        `{"type":"system","subtype":"init","uuid":"u"}`,
        `{"type":"system"}`,
        `{"type":"control_response","response":{"subtype":"error","request_id":"r"}}`,
        withField(resultLine, (json) => (json.subtype = "error_unheard_of")),
        withField(resultLine, (json) => delete json.session_id),
        `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}},` +
        `"session_id":"s","uuid":"u","parent_tool_use_id":null}`,
        `{"no_type":true}`,
        `{"type":7}`,
        `[1,2]`,
        `"assistant"`,
        `null`
      ]
      for (const line of cases) {
        assert.strictEqual(protocolError(line).reason, "malformed", line)
      }
    })

    it("reports non-JSON as not-json", () => {
      const error = protocolError("this is not json")
      assert.strictEqual(error.reason, "not-json")
      assert.strictEqual(error.linePrefix, "this is not json")
    })

    it("reports an over-long line as too-long without parsing it", () => {
      // Not JSON: had it been parsed, the reason would be not-json.
      const line = "x".repeat(1000)
      const error = protocolError(line, { maxLineLength: 999 })
      assert.strictEqual(error.reason, "too-long")
      assert.isAtMost(error.linePrefix.length, 200)
      assert.strictEqual(protocolError(`{"type":"keep_alive"}`, { maxLineLength: 5 }).reason, "too-long")
      assert.isTrue(Result.isSuccess(ClaudeProtocol.decodeLine(`{"type":"keep_alive"}`, { maxLineLength: 21 })))
    })

    it("accepts lines longer than 1 MiB by default", () => {
      const big = withField(assistantLine, (json) => (json.message.content[0].text = "y".repeat(2 * 1024 * 1024)))
      assert.strictEqual(frameOf(big).type, "assistant")
      assert.strictEqual(ClaudeProtocol.defaultMaxLineLength, 16 * 1024 * 1024)
    })
  })

  describe("stream_event fast path", () => {
    const deltaTypes = ["text_delta", "input_json_delta", "thinking_delta", "signature_delta"] as const
    const deltaFields = ["text", "partial_json", "thinking", "signature"] as const
    const isStreamEventFrame = Schema.is(ClaudeProtocol.StreamEventFrame)
    // "__INF__" becomes 1e400 in the line, which JSON.parse reads as Infinity.
    const odd = fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.integer(),
      fc.double({ noNaN: true }),
      fc.boolean(),
      fc.constantFrom(null, "__INF__", "content_block_delta", "toString", "__proto__", ...deltaTypes),
      fc.array(fc.oneof(fc.string({ maxLength: 2 }), fc.integer()), { maxLength: 2 }),
      fc.jsonValue({ maxDepth: 2 })
    )
    const paths: ReadonlyArray<ReadonlyArray<string | number>> = [
      ["event"],
      ["event", "type"],
      ["event", "index"],
      ["event", "delta"],
      ["event", "delta", "type"],
      ...deltaFields.map((field) => ["event", "delta", field]),
      ["parent_tool_use_id"],
      ["session_id"],
      ["uuid"],
      ["api_message_id"],
      ["ttft_ms"],
      ["user_message_uuid"],
      ["user_message_uuids"],
      ["user_message_uuids", 0],
      ["extra_field"]
    ]
    const mutation = fc.record({
      path: fc.constantFrom(...paths),
      value: fc.option(odd, { nil: undefined }) // undefined: delete the key
    })
    const frame = fc.record({
      kind: fc.integer({ min: 0, max: 3 }),
      optionals: fc.boolean(),
      mutations: fc.array(mutation, { maxLength: 3 })
    }).map(({ kind, mutations, optionals }) => {
      const json: Record<string, any> = {
        type: "stream_event",
        event: { type: "content_block_delta", index: 0, delta: { type: deltaTypes[kind], [deltaFields[kind]]: "x" } },
        parent_tool_use_id: null,
        session_id: "s",
        uuid: "u",
        ...(optionals
          ? { api_message_id: "m", ttft_ms: 1.5, user_message_uuid: "t", user_message_uuids: ["t"] }
          : {})
      }
      for (const { path, value } of mutations) setAt(json, path, value, value === undefined)
      return JSON.stringify(json).replaceAll("\"__INF__\"", "1e400")
    })

    it("accepts exactly the frames the StreamEventFrame schema accepts", () => {
      fc.assert(
        fc.property(frame, (line) => {
          const decoded = ClaudeProtocol.decodeLine(line)
          assert.strictEqual(Result.isSuccess(decoded), isStreamEventFrame(JSON.parse(line)), line)
          if (Result.isSuccess(decoded) && decoded.success._tag === "Frame") {
            assert.deepStrictEqual(decoded.success.frame, JSON.parse(line))
          }
        }),
        { numRuns: 3000 }
      )
    })
  })

  describe("host frames", () => {
    const hostLines = transcriptEntries.filter(({ entry }) => entry.dir === ">")

    it("decodes and re-encodes every host frame of the transcripts", () => {
      const messages = hostLines.filter(({ entry }) => entry.msg !== undefined)
      assert.isAtLeast(messages.length, 50)
      const kinds = new Set<string>()
      for (const { entry, file } of messages) {
        const line = JSON.stringify(entry.msg)
        const decoded = ClaudeProtocol.decodeHostLine(line)
        if (Result.isFailure(decoded)) assert.fail(`${file}: ${line}: ${decoded.failure.message}`)
        assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeHostFrame(decoded.success)), entry.msg)
        kinds.add(`${entry.msg.type}/${entry.msg.request?.subtype ?? entry.msg.response?.subtype ?? ""}`)
      }
      assert.includeMembers([...kinds], [
        "user/",
        "control_request/initialize",
        "control_request/interrupt",
        "control_request/set_permission_mode",
        "control_request/set_model",
        "control_request/set_max_thinking_tokens",
        "control_request/mcp_status",
        "control_request/get_context_usage",
        "control_request/no_such_subtype",
        "control_response/success",
        "control_response/error"
      ])
    })

    it("refuses the raw non-JSON line of the bad-input transcripts", () => {
      const raw = hostLines.flatMap(({ entry, file }) => entry.raw !== undefined ? [{ file, raw: entry.raw }] : [])
      assert.deepStrictEqual(
        raw.map(({ file }) => file),
        fixtureVersions.map((version) => `${version}/badInput.ndjson`)
      )
      for (const { raw: line } of raw) {
        const decoded = ClaudeProtocol.decodeHostLine(line)
        assert.isTrue(Result.isFailure(decoded) && decoded.failure.reason === "not-json")
      }
    })
  })

  describe("encoders", () => {
    it("encodes a user message as one line the CLI accepts", () => {
      const line = ClaudeProtocol.encodeUserMessage({
        type: "user",
        message: { role: "user", content: [{ type: "text", text: "Say hello please\nand more" }] },
        parent_tool_use_id: null,
        session_id: "",
        uuid: "e965fb50-5d14-4270-bf4c-e88d19c77449"
      })
      assert.notInclude(line, "\n")
      assert.deepStrictEqual(JSON.parse(line), {
        type: "user",
        message: { role: "user", content: [{ type: "text", text: "Say hello please\nand more" }] },
        parent_tool_use_id: null,
        session_id: "",
        uuid: "e965fb50-5d14-4270-bf4c-e88d19c77449"
      })
      const context = {
        type: "user",
        message: { role: "user", content: "context" },
        parent_tool_use_id: null,
        session_id: "",
        priority: "next",
        shouldQuery: false
      } as const
      assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeUserMessage(context)), context)
    })

    it("encodes control requests", () => {
      assert.deepStrictEqual(
        JSON.parse(ClaudeProtocol.encodeControlRequest("req_1", { subtype: "initialize", hooks: {} })),
        { type: "control_request", request_id: "req_1", request: { subtype: "initialize", hooks: {} } }
      )
      assert.deepStrictEqual(
        JSON.parse(
          ClaudeProtocol.encodeControlRequest("req_2", {
            subtype: "initialize",
            hooks: { PreToolUse: [{ matcher: "Bash", hookCallbackIds: ["hook_0"], timeout: 30 }] }
          })
        ).request.hooks.PreToolUse[0].hookCallbackIds,
        ["hook_0"]
      )
      assert.deepStrictEqual(
        JSON.parse(ClaudeProtocol.encodeControlRequest("req_3", { subtype: "set_permission_mode", mode: "plan" })),
        { type: "control_request", request_id: "req_3", request: { subtype: "set_permission_mode", mode: "plan" } }
      )
      assert.deepStrictEqual(
        JSON.parse(ClaudeProtocol.encodeControlRequest("req_4", { subtype: "get_settings" })).request,
        { subtype: "get_settings" }
      )
    })

    it("encodes answers to the CLI's requests", () => {
      assert.deepStrictEqual(
        JSON.parse(
          ClaudeProtocol.encodeControlSuccess("r1", {
            behavior: "allow",
            updatedInput: { command: "echo rewritten" },
            toolUseID: "toolu_1"
          })
        ),
        {
          type: "control_response",
          response: {
            subtype: "success",
            request_id: "r1",
            response: { behavior: "allow", updatedInput: { command: "echo rewritten" }, toolUseID: "toolu_1" }
          }
        }
      )
      assert.deepStrictEqual(
        JSON.parse(ClaudeProtocol.encodeControlSuccess("r2", { behavior: "deny", message: "no", interrupt: true }))
          .response.response,
        { behavior: "deny", message: "no", interrupt: true }
      )
      assert.deepStrictEqual(
        JSON.parse(ClaudeProtocol.encodeControlSuccess("r3", { continue: true })).response.response,
        { continue: true }
      )
      assert.deepStrictEqual(
        JSON.parse(
          ClaudeProtocol.encodeControlSuccess("r4", { mcp_response: { jsonrpc: "2.0", id: 2, result: {} } })
        ).response.response,
        { mcp_response: { jsonrpc: "2.0", id: 2, result: {} } }
      )
      assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeControlError("r5", "Unsupported")), {
        type: "control_response",
        response: { subtype: "error", request_id: "r5", error: "Unsupported" }
      })
      assert.deepStrictEqual(JSON.parse(ClaudeProtocol.encodeControlCancel("r6")), {
        type: "control_cancel_request",
        request_id: "r6"
      })
    })

    it("refuses to write invalid frames", () => {
      const invalid: ReadonlyArray<() => string> = [
        // a non-JSON value inside a payload
        () => ClaudeProtocol.encodeControlSuccess("r", { behavior: "allow", updatedInput: { n: Number.NaN } }),
        () => ClaudeProtocol.encodeControlSuccess("r", { behavior: "allow", updatedInput: { big: 1n as never } }),
        // a deny without its message is not taken for a hook output
        () => ClaudeProtocol.encodeControlSuccess("r", { behavior: "deny" } as never),
        // a typed request without its field is not taken for a generic one
        () => ClaudeProtocol.encodeControlRequest("r", { subtype: "set_permission_mode" } as never),
        () => ClaudeProtocol.encodeControlRequest("r", { subtype: "set_permission_mode", mode: "yolo" } as never),
        () =>
          ClaudeProtocol.encodeUserMessage({
            ...user("x"),
            message: { role: "user", content: [{ type: "text" } as never] }
          }),
        () => ClaudeProtocol.encodeUserMessage({ ...user("x"), priority: "urgent" as never }),
        () => ClaudeProtocol.encodeUserMessage({ ...user("x"), uuid: undefined as never })
      ]
      for (const encode of invalid) {
        assert.throws(encode, /refusing to write an invalid frame/)
      }
    })
  })

  describe("user message fast path", () => {
    const isHostUserMessage = Schema.is(ClaudeProtocol.HostUserMessage)
    // Not JSON for the schema, though their own keys look right.
    class MessageLike {
      readonly role = "user"
      readonly content = "hi"
    }
    // A copy of a generated value for each insertion: the constants are shared between runs and must never be
    // mutated (or inserted into themselves).
    const fresh = (v: unknown): unknown =>
      v instanceof TextBlockLike
        ? new TextBlockLike()
        : v instanceof MessageLike
        ? new MessageLike()
        : Array.isArray(v)
        ? v.map(fresh)
        : typeof v === "object" && v !== null
        ? Object.fromEntries(Object.entries(v).map(([key, value]) => [key, fresh(value)]))
        : v
    const odd = fc.oneof(
      fc.string({ maxLength: 3 }),
      fc.integer(),
      fc.constantFrom(null, undefined, Number.NaN, "user", "text", "assistant", [], {}),
      fc.constantFrom(new TextBlockLike(), [new TextBlockLike()], new MessageLike()),
      fc.constant([{ type: "text", text: "t" }]),
      fc.constant([{ type: "text", text: "t", extra: 1 }]),
      fc.constant([{ type: "image", source: {} }]),
      fc.jsonValue({ maxDepth: 2 })
    )
    const paths: ReadonlyArray<ReadonlyArray<string | number>> = [
      ["type"],
      ["message"],
      ["message", "role"],
      ["message", "content"],
      ["message", "content", 0],
      ["message", "content", 0, "type"],
      ["message", "content", 0, "text"],
      ["message", "extra"],
      ["parent_tool_use_id"],
      ["session_id"],
      ["uuid"],
      ["priority"],
      ["shouldQuery"],
      ["extra"]
    ]
    const message = fc.record({
      blocks: fc.boolean(),
      uuid: fc.boolean(),
      mutations: fc.array(fc.record({ path: fc.constantFrom(...paths), value: odd, remove: fc.boolean() }), {
        maxLength: 3
      })
    }).map(({ blocks, mutations, uuid }) => {
      const value: Record<string, any> = {
        type: "user",
        message: { role: "user", content: blocks ? [{ type: "text", text: "hi" }, { type: "text", text: "" }] : "hi" },
        parent_tool_use_id: null,
        session_id: "",
        ...(uuid ? { uuid: "u" } : {})
      }
      for (const { path, remove, value: v } of mutations) setAt(value, path, fresh(v), remove)
      return value as ClaudeProtocol.UserMessageInput
    })

    it("writes exactly the messages the HostUserMessage schema accepts, as their JSON", () => {
      fc.assert(
        fc.property(message, (value) => {
          let line: string | undefined
          try {
            line = ClaudeProtocol.encodeUserMessage(value)
          } catch {
            line = undefined
          }
          assert.strictEqual(line !== undefined, isHostUserMessage(value), JSON.stringify(value))
          if (line !== undefined) assert.strictEqual(line, JSON.stringify(value))
        }),
        { numRuns: 3000 }
      )
    })
  })

  describe("control response payloads", () => {
    it("decodes the initialize response of the transcripts", () => {
      const checked = new Map<string, number>()
      for (const file of stdoutFiles) {
        const first = frameOf(readLines(file)[0])
        if (first.type !== "control_response" || first.response.subtype !== "success") continue
        const decoded = ClaudeProtocol.decodeInitializeResponse(first.response.response)
        if (Result.isFailure(decoded)) assert.fail(`${file}: ${decoded.failure.message}`)
        const version = versionOf(file)
        // 2.1.197 does not say its version (nor much else: commands, agents, output styles, models, account, pid).
        assert.strictEqual(decoded.success.claude_code_version, version === "2.1.197" ? undefined : version, file)
        assert.isAbove(decoded.success.models?.length ?? 0, 0)
        assert.isNumber(decoded.success.pid)
        checked.set(version, (checked.get(version) ?? 0) + 1)
      }
      // Every transcript but the one recorded without a handshake opens with the initialize response.
      for (const version of fixtureVersions) {
        assert.strictEqual(
          checked.get(version),
          stdoutFiles.filter((file) => versionOf(file) === version).length - 1,
          version
        )
      }
    })

    // The decoder a session applies to the answer of each control request it sends.
    const payloadDecoders: Record<string, (payload: unknown) => Result.Result<unknown, { readonly message: string }>> =
      {
        initialize: ClaudeProtocol.decodeInitializeResponse,
        interrupt: ClaudeProtocol.decodeInterruptResponse,
        set_permission_mode: ClaudeProtocol.decodeSetPermissionModeResponse,
        set_model: ClaudeProtocol.decodeSetModelResponse,
        mcp_status: ClaudeProtocol.decodeMcpStatusResponse,
        get_context_usage: ClaudeProtocol.decodeContextUsageResponse
      }

    for (const file of fixtureFiles(".ndjson")) {
      it(`decodes the payload of every control response in ${scenarioOf(file)} with its request's decoder`, () => {
        const entries = transcriptEntries.filter((entry) => entry.file === file).map(({ entry }) => entry)
        for (const { msg } of entries.filter((entry) => entry.dir === ">" && entry.msg?.type === "control_request")) {
          const decode = payloadDecoders[msg.request.subtype]
          if (decode === undefined) continue
          const answer = entries.find((entry) =>
            entry.dir === "<" && entry.msg?.type === "control_response" &&
            entry.msg.response.request_id === msg.request_id
          )
          assert.isDefined(answer, `${msg.request.subtype} ${msg.request_id} was answered`)
          if (answer!.msg.response.subtype !== "success") continue
          const decoded = decode(answer!.msg.response.response)
          if (Result.isFailure(decoded)) {
            assert.fail(`${msg.request.subtype}: ${JSON.stringify(answer!.msg.response)}: ${decoded.failure.message}`)
          }
        }
      })
    }

    it("decodes the other control responses, with or without a payload", () => {
      assert.deepStrictEqual(ClaudeProtocol.decodeInterruptResponse(undefined), Result.succeed({}))
      assert.deepStrictEqual(
        ClaudeProtocol.decodeInterruptResponse({ still_queued: [] }),
        Result.succeed({ still_queued: [] })
      )
      assert.deepStrictEqual(
        ClaudeProtocol.decodeSetPermissionModeResponse({ mode: "acceptEdits" }),
        Result.succeed({ mode: "acceptEdits" })
      )
      assert.deepStrictEqual(
        ClaudeProtocol.decodeSetModelResponse({ model: "claude-opus-5-5" }),
        Result.succeed({ model: "claude-opus-5-5" })
      )
      // 2.1.197 answers set_model (like set_max_thinking_tokens, and interrupt) without a payload.
      assert.deepStrictEqual(ClaudeProtocol.decodeSetModelResponse(undefined), Result.succeed({}))
      assert.deepStrictEqual(
        ClaudeProtocol.decodeMcpStatusResponse({ mcpServers: [] }),
        Result.succeed({ mcpServers: [] })
      )
      const malformed = ClaudeProtocol.decodeSetPermissionModeResponse({ mode: 3 })
      assert.isTrue(Result.isFailure(malformed) && malformed.failure.reason === "malformed")
    })
  })
})
