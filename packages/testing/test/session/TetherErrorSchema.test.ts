import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import * as ClaudeErrorSchema from "@tether/claude/ClaudeErrorSchema"
import { CodexSession } from "@tether/codex"
import * as CodexErrorSchema from "@tether/codex/CodexErrorSchema"
import { EventLog, Permission, SessionRegistry, TetherError, Turn } from "@tether/core"
import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
import { Equal, Result, Schema } from "effect"

interface Sample {
  readonly schema: Schema.Codec<unknown, unknown>
  readonly error: TetherError.Disposition & { readonly _tag: string; readonly message: string }
}

const sample = <A extends Sample["error"], I>(schema: Schema.Codec<A, I>, error: A): Sample => ({
  schema: schema as unknown as Schema.Codec<unknown, unknown>,
  error
})

// At least one error of every class, and of each class whose disposition depends on its fields, both cases.
const samples: ReadonlyArray<Sample> = [
  sample(
    TetherErrorSchema.ExecutableNotFound,
    new TetherError.ExecutableNotFound({ program: "claude", searched: ["/usr/bin", "/opt/bin"] })
  ),
  sample(TetherErrorSchema.SpawnFailed, new TetherError.SpawnFailed({ program: "claude", reason: "EACCES" })),
  sample(TetherErrorSchema.StartupTimeout, new TetherError.StartupTimeout({ timeoutMillis: 5000, stderrTail: "x" })),
  sample(TetherErrorSchema.HandshakeFailed, new TetherError.HandshakeFailed({ reason: "refused", stderrTail: "" })),
  sample(TetherErrorSchema.TurnInFlight, new TetherError.TurnInFlight({ activeTurnId: "t1" })),
  sample(TetherErrorSchema.QueueFull, new TetherError.QueueFull({ capacity: 8 })),
  sample(TetherErrorSchema.SessionUnavailable, new TetherError.SessionUnavailable({ status: "closed", reason: "r" })),
  sample(TetherErrorSchema.InvalidPrompt, new TetherError.InvalidPrompt({ reason: "not JSON" })),
  sample(TetherErrorSchema.TransportWriteError, new TetherError.TransportWriteError({ reason: "EPIPE" })),
  sample(TetherErrorSchema.DeliveryTimeout, new TetherError.DeliveryTimeout({ timeoutMillis: 100 })),
  sample(
    TetherErrorSchema.CliExited,
    new TetherError.CliExited({ exit: "exit code 1", code: 1, signal: null, stderrTail: "", acknowledged: false })
  ),
  sample(
    TetherErrorSchema.CliExited,
    new TetherError.CliExited({ exit: "SIGKILL", code: null, signal: "SIGKILL", stderrTail: "x", acknowledged: true })
  ),
  sample(
    TetherErrorSchema.TurnInterrupted,
    new TetherError.TurnInterrupted({ turnId: "t", reason: "host", acknowledged: false, written: false })
  ),
  sample(
    TetherErrorSchema.TurnInterrupted,
    new TetherError.TurnInterrupted({ turnId: "t", reason: "stall", acknowledged: false, written: true })
  ),
  sample(TetherErrorSchema.SessionRetired, new TetherError.SessionRetired({ reason: "r", acknowledged: true })),
  sample(
    TetherErrorSchema.InterruptTimeout,
    new TetherError.InterruptTimeout({ turnId: "t", reason: "turn-timeout", timeoutMillis: 10, acknowledged: false })
  ),
  sample(TetherErrorSchema.ControlTimeout, new TetherError.ControlTimeout({ subtype: "interrupt", timeoutMillis: 10 })),
  sample(
    TetherErrorSchema.ControlFailed,
    new TetherError.ControlFailed({ subtype: "set_model", reason: "no", code: "-32602" })
  ),
  sample(
    TetherErrorSchema.ProtocolError,
    new TetherError.ProtocolError({ reason: "malformed", detail: "d", linePrefix: "{\"type\":" })
  ),
  sample(TetherErrorSchema.InvalidConfig, new TetherError.InvalidConfig({ problems: ["a", "b"] })),
  sample(TetherErrorSchema.ApiError, new Turn.ApiError({ turnId: "t", status: 529, detail: "overloaded" })),
  sample(
    TetherErrorSchema.TurnFailed,
    new Turn.TurnFailed({ turnId: "t", subtype: "error_during_execution", terminalReason: null, errors: ["boom"] })
  ),
  sample(
    TetherErrorSchema.PermissionAlreadyResolved,
    new Permission.PermissionAlreadyResolved({ requestId: "r", how: "allowed" })
  ),
  sample(TetherErrorSchema.PermissionNotFound, new Permission.PermissionNotFound({ requestId: "r" })),
  sample(
    TetherErrorSchema.ReplayUnavailable,
    new EventLog.ReplayUnavailable({ requestedAfter: 2, oldestAvailable: 5, latestSeq: 9 })
  ),
  sample(TetherErrorSchema.Lagged, new EventLog.Lagged({ missed: 3, resumeSeq: 7 })),
  sample(
    TetherErrorSchema.SessionConflict,
    new SessionRegistry.SessionConflict({ id: "s", generation: 2, liveFingerprint: "a", requestedFingerprint: "b" })
  ),
  sample(
    TetherErrorSchema.CapacityExceeded,
    new SessionRegistry.CapacityExceeded({ id: "s", capacity: 4, waitedMillis: 250 })
  ),
  sample(
    TetherErrorSchema.GenerationChanged,
    new SessionRegistry.GenerationChanged({ id: "s", expected: 1, current: 2 })
  ),
  sample(TetherErrorSchema.SessionNotFound, new SessionRegistry.SessionNotFound({ id: "s" })),
  sample(TetherErrorSchema.RegistryClosed, new SessionRegistry.RegistryClosed()),
  sample(TetherErrorSchema.DormantNotFound, new SessionRegistry.DormantNotFound({ id: "s" })),
  sample(TetherErrorSchema.DormantStateCorrupt, new SessionRegistry.DormantStateCorrupt({ id: "s", reason: "r" })),
  sample(TetherErrorSchema.RestoreFailed, new SessionRegistry.RestoreFailed({ id: "s", reason: "r", cause: "gone" })),
  sample(TetherErrorSchema.DormantStoreFailed, new SessionRegistry.DormantStoreFailed({ operation: "o", reason: "r" })),
  sample(ClaudeErrorSchema.MaxTurnsExceeded, new ClaudeSession.MaxTurnsExceeded({ turnId: "t", sessionId: null })),
  sample(
    ClaudeErrorSchema.BudgetExceeded,
    new ClaudeSession.BudgetExceeded({ turnId: "t", sessionId: "s", totalCostUsd: 1.25 })
  ),
  sample(
    ClaudeErrorSchema.StructuredOutputMissing,
    new ClaudeSession.StructuredOutputMissing({ turnId: "t", raw: { type: "result", result: "text" } })
  ),
  sample(
    ClaudeErrorSchema.StructuredOutputInvalid,
    new ClaudeSession.StructuredOutputInvalid({ turnId: "t", reason: "r", value: [1], raw: { type: "result" } })
  ),
  sample(
    ClaudeErrorSchema.StructuredOutputRetriesExhausted,
    new ClaudeSession.StructuredOutputRetriesExhausted({ turnId: "t", errors: ["e"], raw: null })
  ),
  sample(CodexErrorSchema.TurnRejected, new CodexSession.TurnRejected({ turnId: "t", code: -32001, reason: "later" }))
]

/** Every error schema: the neutral ones and each provider's own. */
const schemas = { ...TetherErrorSchema, ...ClaudeErrorSchema, ...CodexErrorSchema }

/** Every error class the public modules export. */
const errorClasses = [TetherError, Turn, Permission, EventLog, SessionRegistry, ClaudeSession, CodexSession].flatMap(
  (module) =>
    Object.entries(module).filter(([, value]) => typeof value === "function" && value.prototype instanceof Error)
)

const toJson = (sample: Sample): string =>
  JSON.stringify(Schema.encodeSync(Schema.toCodecJson(sample.schema))(sample.error))

const fromJson = (sample: Sample, json: string) =>
  Schema.decodeUnknownSync(Schema.toCodecJson(sample.schema))(JSON.parse(json)) as Sample["error"]

const fieldsOf = (error: object) => ({ ...error })

describe("TetherErrorSchema", () => {
  it("has a schema of the same name for every error class, and this test a sample of each", () => {
    assert.isAbove(errorClasses.length, 30)
    for (const [name, errorClass] of errorClasses) {
      const schema = (schemas as Record<string, unknown>)[name]
      assert.isTrue(Schema.isSchema(schema), `no schema for ${name}`)
      assert.isTrue(samples.some((s) => s.error instanceof errorClass && s.schema === schema), `no sample of ${name}`)
    }
  })

  it("round-trips every error through JSON text to an instance of its class, with its message and disposition", () => {
    for (const sample of samples) {
      const back = fromJson(sample, toJson(sample))
      assert.strictEqual(Object.getPrototypeOf(back), Object.getPrototypeOf(sample.error), sample.error._tag)
      assert.deepStrictEqual(fieldsOf(back), fieldsOf(sample.error))
      assert.strictEqual(back.message, sample.error.message)
      assert.deepStrictEqual(TetherError.disposition(back), TetherError.disposition(sample.error), sample.error._tag)
      assert.strictEqual(toJson({ ...sample, error: back }), toJson(sample))
    }
  })

  it("decodes to an error equal to the one it encoded, with the same JSON of its own", () => {
    const decode = (schema: Schema.Top, error: unknown) =>
      Schema.decodeUnknownSync(schema as Schema.Codec<unknown, unknown>)(
        JSON.parse(JSON.stringify(Schema.encodeSync(schema as Schema.Codec<unknown, unknown>)(error)))
      )
    const closed = new SessionRegistry.RegistryClosed()
    const decodedClosed = decode(TetherErrorSchema.RegistryClosed, closed)
    assert.isTrue(Equal.equals(decodedClosed, closed))
    const full = new TetherError.QueueFull({ capacity: 8 })
    const decodedFull = decode(TetherErrorSchema.QueueFull, full)
    assert.isTrue(Equal.equals(decodedFull, full))
    assert.strictEqual(JSON.stringify(decodedFull), `{"_tag":"QueueFull","capacity":8}`)
  })

  it("encodes an error as its tag and fields, the tag first: the JSON the cluster sends and stores", () => {
    const pinned: ReadonlyArray<readonly [Sample, string]> = [
      [
        sample(
          TetherErrorSchema.CliExited,
          new TetherError.CliExited({
            exit: "signal SIGKILL",
            code: null,
            signal: "SIGKILL",
            stderrTail: "",
            acknowledged: true
          })
        ),
        `{"_tag":"CliExited","exit":"signal SIGKILL","code":null,"signal":"SIGKILL","stderrTail":"","acknowledged":true}`
      ],
      [
        sample(
          TetherErrorSchema.TurnInterrupted,
          new TetherError.TurnInterrupted({ turnId: "t", reason: "stall", acknowledged: true, written: true })
        ),
        `{"_tag":"TurnInterrupted","turnId":"t","reason":"stall","acknowledged":true,"written":true}`
      ],
      [
        sample(
          TetherErrorSchema.ExecutableNotFound,
          new TetherError.ExecutableNotFound({ program: "claude", searched: ["/a", "/b"] })
        ),
        `{"_tag":"ExecutableNotFound","program":"claude","searched":["/a","/b"]}`
      ],
      [
        sample(
          TetherErrorSchema.GenerationChanged,
          new SessionRegistry.GenerationChanged({ id: "s", expected: 1, current: null })
        ),
        `{"_tag":"GenerationChanged","id":"s","expected":1,"current":null}`
      ],
      [sample(TetherErrorSchema.RegistryClosed, new SessionRegistry.RegistryClosed()), `{"_tag":"RegistryClosed"}`],
      [
        sample(
          ClaudeErrorSchema.BudgetExceeded,
          new ClaudeSession.BudgetExceeded({ turnId: "t", sessionId: "s", totalCostUsd: 1.5 })
        ),
        `{"_tag":"BudgetExceeded","turnId":"t","sessionId":"s","totalCostUsd":1.5}`
      ]
    ]
    for (const [sample, expected] of pinned) {
      // Through the JSON codec (RPC), and encoded, then written as JSON (the store).
      assert.strictEqual(toJson(sample), expected)
      assert.strictEqual(JSON.stringify(Schema.encodeSync(sample.schema)(sample.error)), expected)
    }
  })

  it("encodes a replay asked after NaN as asked: a number, which the JSON codec writes as a string", () => {
    const error = new EventLog.ReplayUnavailable({ requestedAfter: NaN, oldestAvailable: 5, latestSeq: 9 })
    assert.strictEqual(
      toJson(sample(TetherErrorSchema.ReplayUnavailable, error)),
      `{"_tag":"ReplayUnavailable","requestedAfter":"NaN","oldestAvailable":5,"latestSeq":9}`
    )
    assert.isNaN(Schema.encodeSync(TetherErrorSchema.ReplayUnavailable)(error).requestedAfter)
  })

  it("checks what it decodes", () => {
    const decode = Schema.decodeUnknownResult(Schema.toCodecJson(TetherErrorSchema.TurnInterrupted))
    const valid = { _tag: "TurnInterrupted", turnId: "t", reason: "host", acknowledged: true, written: true }
    assert.isTrue(Result.isSuccess(decode(valid)))
    assert.isTrue(Result.isFailure(decode({ ...valid, reason: "bored" })))
    assert.isTrue(Result.isFailure(decode({ ...valid, _tag: "SessionRetired" })))
    assert.isTrue(Result.isFailure(decode({ ...valid, written: undefined })))
    const capacity = Schema.decodeUnknownResult(TetherErrorSchema.QueueFull)
    assert.isTrue(Result.isFailure(capacity({ _tag: "QueueFull", capacity: "8" })))
    assert.isTrue(Result.isFailure(capacity({ _tag: "QueueFull", capacity: Infinity })))
  })

  it("is an instance of the class, not a record with the same fields", () => {
    const is = Schema.is(TetherErrorSchema.QueueFull)
    assert.isTrue(is(new TetherError.QueueFull({ capacity: 8 })))
    assert.isFalse(is({ _tag: "QueueFull", capacity: 8 }))
    assert.isFalse(is(new TetherError.InvalidPrompt({ reason: "r" })))
  })

  it("InterruptReason takes every reason", () => {
    const reasons: ReadonlyArray<TetherError.InterruptReason> = [
      "host",
      "stall",
      "turn-timeout",
      "permission",
      "evicted",
      "closed"
    ]
    for (const reason of reasons) {
      assert.strictEqual(Schema.decodeSync(TetherErrorSchema.InterruptReason)(reason), reason)
    }
    assert.isFalse(Schema.is(TetherErrorSchema.InterruptReason)("bored"))
  })
})
