/**
 * The fake CLI against the real one: fed what the host sent in a recorded 2.1.332 transcript (the fixtures
 * `pnpm fixtures:record` writes into packages/claude/test/fixtures), it answers with the same sequence of frames, each
 * carrying only fields the real frame of that kind carries.
 */
import { assert, describe, it } from "@effect/vitest"
import { FakeClaude } from "@tether/testing"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

// The fake imitates the newest pinned CLI.
const fixtures = new URL("../../claude/test/fixtures/claude/2.1.332/", import.meta.url)

type Frame = Record<string, unknown>

const kind = (frame: Frame): string => {
  const event = frame.event as Frame | undefined
  const parts = [frame.type, frame.subtype, frame.state, event?.type].filter((part) => typeof part === "string")
  return parts.join("/")
}

const hostFrames = (name: string): Array<Frame> =>
  Fs.readFileSync(new URL(`${name}.ndjson`, fixtures), "utf8").split("\n").filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as { dir: string; msg: Frame }).filter((entry) => entry.dir === ">")
    .map((entry) => entry.msg)

const cliFrames = (name: string): Array<Frame> =>
  Fs.readFileSync(new URL(`${name}.stdout.jsonl`, fixtures), "utf8").split("\n").filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Frame)

/**
 * Runs a fake with the host's frames on stdin (then EOF) and collects its stdout frames; with `readAfterMs`, its
 * stdout is not read until then (the pipe fills and the fake's writes wait).
 */
const runFakeAt = (
  program: string,
  input: ReadonlyArray<Frame>,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  readAfterMs?: number
) =>
  Effect.callback<{ frames: Array<Frame>; code: number | null }>((resume) => {
    const child = ChildProcess.spawn(program, args, {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "ignore"]
    })
    let out = ""
    child.stdout.setEncoding("utf8")
    if (readAfterMs !== undefined) {
      child.stdout.pause()
      setTimeout(() => child.stdout.resume(), readAfterMs)
    }
    child.stdout.on("data", (chunk: string) => {
      out += chunk
    })
    child.on("close", (code) =>
      // Parsed in the effect: a line that is not JSON fails the test instead of escaping the event handler.
      resume(Effect.sync(() => ({
        frames: out.split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line) as Frame),
        code
      }))))
    child.stdin.end(input.map((frame) => JSON.stringify(frame) + "\n").join(""))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const runFake = (input: ReadonlyArray<Frame>, args: ReadonlyArray<string>, env: Record<string, string>) =>
  runFakeAt(FakeClaude.path, input, args, env)

/** The text of each text delta, in order. */
const deltaTexts = (frames: ReadonlyArray<Frame>): Array<unknown> =>
  frames.filter((frame) => kind(frame) === "stream_event/content_block_delta")
    .map((frame) => ((frame.event as Frame).delta as Frame).text)

const extraKeys = (fake: Frame, real: Frame): Array<string> => Object.keys(fake).filter((key) => !(key in real))

describe("FakeClaude", () => {
  it.live("a streamed turn: the same frame sequence as claude 2.1.332, with field names the real frames use", () =>
    Effect.gen(function*() {
      const real = cliFrames("streamed")
      const { frames, code } = yield* runFake(
        hostFrames("streamed"),
        ["--input-format", "stream-json", "--replay-user-messages", "--include-partial-messages"],
        { CLAUDE_CODE_SDK_READS_SESSION_STATE: "1", ...FakeClaude.env({ deltas: 3 }) }
      )
      assert.strictEqual(code, 0)
      assert.deepStrictEqual(frames.map(kind), real.map(kind))
      frames.forEach((frame, i) => {
        assert.deepStrictEqual(extraKeys(frame, real[i]), [], `frame ${i} (${kind(frame)})`)
        const message = frame.message as Frame | undefined
        const realMessage = real[i].message as Frame | undefined
        if (message !== undefined && realMessage !== undefined) {
          assert.deepStrictEqual(extraKeys(message, realMessage), [], `frame ${i} (${kind(frame)}).message`)
        }
      })
      // The acknowledgements carry the host's uuid.
      const uuid = hostFrames("streamed")[1].uuid
      assert.strictEqual(frames.find((frame) => kind(frame) === "command_lifecycle/queued")?.command_uuid, uuid)
      assert.strictEqual(frames.find((frame) => frame.isReplay === true)?.uuid, uuid)
      assert.strictEqual(frames.find((frame) => frame.type === "result")?.user_message_uuid, uuid)
    }))

  it.live("an interrupt while idle is answered with {still_queued: []}", () =>
    Effect.gen(function*() {
      const real = cliFrames("interruptIdle").find((frame) => JSON.stringify(frame).includes("still_queued"))
      const { frames } = yield* runFake(
        [{ type: "control_request", request_id: "req_2", request: { subtype: "interrupt" } }],
        ["--input-format", "stream-json"],
        {}
      )
      assert.deepStrictEqual(frames, [{ ...real, response: { ...(real?.response as Frame), request_id: "req_2" } }])
    }))

  it.live("text beyond ASCII comes out as the UTF-8 of what was sent", () =>
    Effect.gen(function*() {
      const text = "naïve — ✓ 😀 ".repeat(50)
      const { frames, code } = yield* runFake(
        [{ type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" }],
        ["--input-format", "stream-json"],
        { FAKE_CLAUDE_DELTAS: "1" }
      )
      assert.strictEqual(code, 0)
      assert.strictEqual(frames.at(-1)?.result, `Hello from fake-claude #1: ${text}`)
    }))

  it.live("without a uuid on the user message there are no lifecycle frames (as in the real CLI)", () =>
    Effect.gen(function*() {
      const { frames } = yield* runFake(
        [{ type: "user", message: { role: "user", content: "hi" }, parent_tool_use_id: null, session_id: "" }],
        ["--input-format", "stream-json"],
        {}
      )
      assert.deepStrictEqual(frames.map(kind), ["system/init", "assistant", "result/success"])
    }))
})

const fastClaude = Path.join(import.meta.dirname, "../bin/fast-claude.mjs")

const initialize: Frame = {
  type: "control_request",
  request_id: "req_1",
  request: { subtype: "initialize", hooks: {} }
}

const prompt = (text: string, n = 0): Frame => ({
  type: "user",
  message: { role: "user", content: [{ type: "text", text }] },
  parent_tool_use_id: null,
  session_id: "",
  uuid: `00000000-0000-4000-8000-00000000000${n + 1}`
})

/**
 * Runs the fast fake: the initialize request, then, once it is answered (a fault is acted on when the prompt reaches
 * the process, whatever it has not answered yet), each prompt after the previous one's result. Gives its stdout
 * lines as they came (not all JSON), its exit code, whether it was still running when its stdout ended, and for each
 * prompt the milliseconds from its write to its receipt. With `endInput` false stdin stays open, and the fake is sent
 * SIGTERM once its stdout ends.
 */
const runFast = (texts: string | ReadonlyArray<string>, endInput = true) =>
  Effect.callback<{ lines: Array<string>; code: number | null; aliveAtEnd: boolean; receiptMs: Array<number> }>(
    (resume) => {
      const prompts = typeof texts === "string" ? [texts] : texts
      const child = ChildProcess.spawn(fastClaude, ["--input-format", "stream-json"], {
        stdio: ["pipe", "pipe", "ignore"]
      })
      const lines: Array<string> = []
      const receiptMs: Array<number> = []
      let partial = ""
      let sent = 0
      let sentAt = 0
      let aliveAtEnd = false
      const send = () => {
        const line = JSON.stringify(prompt(prompts[sent]!, sent)) + "\n"
        sent++
        sentAt = Date.now()
        if (endInput && sent === prompts.length) child.stdin.end(line)
        else child.stdin.write(line)
      }
      child.stdout.setEncoding("utf8")
      child.stdout.on("data", (chunk: string) => {
        const complete = (partial + chunk).split("\n")
        partial = complete.pop()!
        for (const line of complete) {
          lines.push(line)
          if (line.includes(`"state":"queued"`)) receiptMs.push(Date.now() - sentAt)
          const next = sent === 0 ? line.startsWith(`{"type":"control_response"`) : line.startsWith(`{"type":"result"`)
          if (next && sent < prompts.length) send()
        }
      })
      child.stdout.on("end", () => {
        aliveAtEnd = child.exitCode === null && child.signalCode === null
        if (!endInput) child.kill("SIGTERM")
      })
      child.on("close", (code) => resume(Effect.succeed({ lines, code, aliveAtEnd, receiptMs })))
      child.stdin.write(JSON.stringify(initialize) + "\n")
      return Effect.sync(() => child.kill("SIGKILL"))
    }
  )

/** The kind of each line, `garbage` for a line that is not JSON. */
const kinds = (lines: ReadonlyArray<string>): Array<string> =>
  lines.map((line) => {
    try {
      return kind(JSON.parse(line) as Frame)
    } catch {
      return "garbage"
    }
  })

/** The fast fake streaming one prompt of `frames` text deltas with partial messages on (see {@link runFakeAt}). */
const streamFast = (frames: number, env: Record<string, string> = {}, readAfterMs?: number) =>
  runFakeAt(
    fastClaude,
    [initialize, prompt(`FRAMES:${frames}`)],
    ["--input-format", "stream-json", "--include-partial-messages"],
    env,
    readAfterMs
  )

describe("the fast fake (the benchmarks' CLI)", () => {
  it.live("small batches to a reader that falls behind: every line comes out whole, in order", () =>
    Effect.gen(function*() {
      // Writes of 2 KiB stay under stdout's high-water mark, so the fake goes on while the pipe, full because this
      // reader is not reading yet, still holds them: what it encodes next must not land on bytes not yet written.
      const { frames, code } = yield* streamFast(5000, { FAST_CLAUDE_BATCH_BYTES: "2048" }, 500)
      assert.strictEqual(code, 0)
      assert.deepStrictEqual(deltaTexts(frames), Array.from({ length: 5000 }, (_, i) => `tok ${i} `))
    }))

  it.live("FAULT:garbage=<n>: n lines that are not JSON before the answer", () =>
    Effect.gen(function*() {
      const { code, lines } = yield* runFast("FRAMES:1 FAULT:garbage=3")
      assert.strictEqual(code, 0)
      assert.deepStrictEqual(kinds(lines).slice(3, 8), ["system/init", "garbage", "garbage", "garbage", "assistant"])
      assert.strictEqual(kinds(lines).at(-2), "result/success")
    }))

  it.live("FAULT:crash: the answer's text, then exit code 3 and no result", () =>
    Effect.gen(function*() {
      const { code, lines } = yield* runFast("FRAMES:1 FAULT:crash")
      assert.strictEqual(code, 3)
      assert.include(kinds(lines), "assistant")
      assert.notInclude(kinds(lines), "result/success")
    }))

  it.live("FAULT:crash-on-read: exit code 3 on reading the prompt, before its receipt", () =>
    Effect.gen(function*() {
      const { code, lines } = yield* runFast("FRAMES:1 FAULT:crash-on-read")
      assert.strictEqual(code, 3)
      assert.deepStrictEqual(kinds(lines), ["control_response"])
    }))

  it.live(
    "FAULT:slow-receipt=<ms>: that prompt's receipt comes late, the next prompt's at once",
    () =>
      Effect.gen(function*() {
        const { receiptMs } = yield* runFast(["FRAMES:1 FAULT:slow-receipt=1000", "FRAMES:1 FAULT:garbage=1"])
        assert.strictEqual(receiptMs.length, 2)
        assert.isAtLeast(receiptMs[0]!, 900)
        assert.isBelow(receiptMs[1]!, 500)
      }),
    15_000
  )

  it.live("FAULT:stdout-closed: stdout ends on reading the prompt, and the process runs on", () =>
    Effect.gen(function*() {
      const { aliveAtEnd, lines } = yield* runFast("FRAMES:1 FAULT:stdout-closed", false)
      assert.deepStrictEqual(kinds(lines), ["control_response"])
      assert.isTrue(aliveAtEnd)
    }))

  it.live("a prompt FRAMES:<n> streams n text deltas in order (megabytes of them), then the result; EOF ends it", () =>
    Effect.gen(function*() {
      const { frames, code } = yield* streamFast(20000)
      assert.strictEqual(code, 0)
      // About 6 MB: the output goes out in many writes, through the shell's buffer used again and again.
      const texts = deltaTexts(frames)
      assert.strictEqual(texts.length, 20000)
      assert.deepStrictEqual(texts, Array.from({ length: 20000 }, (_, i) => `tok ${i} `))
      assert.strictEqual(frames.at(-2)?.type, "result")
      assert.strictEqual(frames.at(-1)?.state, "completed")
    }))
})
