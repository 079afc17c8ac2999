/**
 * Errors as the cluster sends and stores them: the JSON of a Tether error is its tag and fields (what runners of
 * earlier versions wrote to the database and what a client of another version reads), and it comes back as an
 * instance of its class (Claude's structured-output errors too, which earlier versions sent as records); any other
 * tagged error travels as a plain record.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { EventLog, SessionRegistry, TetherError, Turn } from "@tether/core"
import { Data, Schema } from "effect"
import * as Wire from "../src/internal/wire.ts"

const rpcJson = Schema.encodeSync(Schema.toCodecJson(Wire.Errors))

describe("Wire", () => {
  it("an error of a known class is its tag and fields, in the store and on the RPC wire", () => {
    const pinned: ReadonlyArray<readonly [unknown, string]> = [
      [
        new TetherError.CliExited({ exit: "exit code 1", code: 1, signal: null, stderrTail: "x", acknowledged: false }),
        `{"_tag":"CliExited","exit":"exit code 1","code":1,"signal":null,"stderrTail":"x","acknowledged":false}`
      ],
      [
        new TetherError.TurnInterrupted({ turnId: "t", reason: "evicted", acknowledged: false, written: false }),
        `{"_tag":"TurnInterrupted","turnId":"t","reason":"evicted","acknowledged":false,"written":false}`
      ],
      [
        new Turn.TurnFailed({ turnId: "t", subtype: "error_during_execution", terminalReason: null, errors: ["boom"] }),
        `{"_tag":"TurnFailed","turnId":"t","subtype":"error_during_execution","terminalReason":null,"errors":["boom"]}`
      ],
      [
        new SessionRegistry.SessionConflict({
          id: "s",
          generation: 2,
          liveFingerprint: "a",
          requestedFingerprint: "b"
        }),
        `{"_tag":"SessionConflict","id":"s","generation":2,"liveFingerprint":"a","requestedFingerprint":"b"}`
      ],
      [new SessionRegistry.RegistryClosed(), `{"_tag":"RegistryClosed"}`],
      [
        new ClaudeSession.StructuredOutputMissing({ turnId: "t", raw: { type: "result" } }),
        `{"_tag":"StructuredOutputMissing","turnId":"t","raw":{"type":"result"}}`
      ],
      [
        new ClaudeSession.StructuredOutputInvalid({
          turnId: "t",
          reason: "no",
          value: { n: 1 },
          raw: { type: "result" }
        }),
        `{"_tag":"StructuredOutputInvalid","turnId":"t","reason":"no","value":{"n":1},"raw":{"type":"result"}}`
      ],
      [
        new ClaudeSession.StructuredOutputRetriesExhausted({ turnId: "t", errors: ["e"], raw: { type: "result" } }),
        `{"_tag":"StructuredOutputRetriesExhausted","turnId":"t","errors":["e"],"raw":{"type":"result"}}`
      ]
    ]
    for (const [error, json] of pinned) {
      assert.strictEqual(JSON.stringify(Wire.errorToJson(error)), json)
      assert.strictEqual(JSON.stringify(rpcJson(Wire.toWire(error))), json)
      const back = Wire.errorFromJson<object>(JSON.parse(json))
      assert.strictEqual(Object.getPrototypeOf(back), Object.getPrototypeOf(error))
      assert.deepStrictEqual({ ...back }, { ...(error as object) })
    }
  })

  it("an error of no known class travels as a record, and comes back with its tag, message and disposition", () => {
    class QuotaExceeded extends Data.TaggedError("QuotaExceeded")<{ readonly tenant: string }> {
      get message() {
        return `tenant ${this.tenant} is over its quota`
      }
      readonly safeToRequeue = true
    }
    const error = new QuotaExceeded({ tenant: "a" })
    const json = JSON.stringify(Wire.errorToJson(error))
    assert.strictEqual(
      json,
      `{"_tag":"ForeignError","tag":"QuotaExceeded","text":"tenant a is over its quota",` +
        `"fallback":false,"requeue":true,"uncertain":false,"fields":{"tenant":"a","safeToRequeue":true}}`
    )
    const back = Wire.errorFromJson<QuotaExceeded & TetherError.Disposition>(JSON.parse(json))
    assert.deepStrictEqual(
      [back._tag, back.tenant, back.message, back.safeToRequeue, back.safeToFallback, back.deliveryUncertain],
      ["QuotaExceeded", "a", error.message, true, false, false]
    )
  })

  it("an error of a known class made by another copy of @tether/core travels as this copy's class", () => {
    // Another copy's QueueFull: the same tag and fields, another class.
    class OtherQueueFull extends Data.TaggedError("QueueFull")<{ readonly capacity: number }> {}
    const wire = Wire.toWire(new OtherQueueFull({ capacity: 3 }))
    assert.instanceOf(wire, TetherError.QueueFull)
    assert.strictEqual(
      JSON.stringify(Wire.errorToJson(new OtherQueueFull({ capacity: 3 }))),
      `{"_tag":"QueueFull","capacity":3}`
    )
    // A host's own error that happens to share a tag, with other fields: a record, as any other.
    class HostQueueFull extends Data.TaggedError("QueueFull")<{ readonly tenant: string }> {}
    assert.strictEqual(Wire.toWire(new HostQueueFull({ tenant: "a" }))._tag, "ForeignError")
  })

  it("an instance whose fields its schema refuses travels as a record, with its message and disposition", () => {
    const error = new TetherError.QueueFull({ capacity: Number.NaN })
    const json = JSON.stringify(Wire.errorToJson(error))
    assert.strictEqual(JSON.stringify(rpcJson(Wire.toWire(error))), json)
    const back = Wire.errorFromJson<TetherError.QueueFull>(JSON.parse(json))
    assert.deepStrictEqual(
      [back._tag, back.capacity, back.message, back.safeToRequeue],
      ["QueueFull", null, error.message, true]
    )
  })

  it("a number JSON cannot hold is stored as on the RPC wire, and read back", () => {
    const error = new EventLog.ReplayUnavailable({ requestedAfter: Number.NaN, oldestAvailable: 1, latestSeq: 5 })
    const json = JSON.stringify(Wire.errorToJson(error))
    assert.strictEqual(json, JSON.stringify(rpcJson(Wire.toWire(error))))
    const back = Wire.errorFromJson<EventLog.ReplayUnavailable>(JSON.parse(json))
    assert.instanceOf(back, EventLog.ReplayUnavailable)
    assert.isTrue(Number.isNaN(back.requestedAfter))
    assert.strictEqual(back.latestSeq, 5)
  })

  it("a structured-output error stored as a record by an earlier version still reads back, as that record", () => {
    const stored = `{"_tag":"ForeignError","tag":"StructuredOutputMissing","text":"turn t ended without structured ` +
      `output","fallback":false,"requeue":false,"uncertain":false,"fields":{"turnId":"t","raw":{"type":"result"}}}`
    const back = Wire.errorFromJson<ClaudeSession.StructuredOutputMissing>(JSON.parse(stored))
    assert.deepStrictEqual(
      [back._tag, back.turnId, back.raw, back.message, back.safeToFallback, back.deliveryUncertain],
      ["StructuredOutputMissing", "t", { type: "result" }, "turn t ended without structured output", false, false]
    )
  })
})
