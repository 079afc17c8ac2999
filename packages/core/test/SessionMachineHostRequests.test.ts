import { assert, describe, it } from "@effect/vitest"
import type * as Machine from "../src/internal/session/machine.ts"
import type * as Provider from "../src/Provider.ts"
import { type Bench, type Cli, fake, type FakeProtocol, I } from "./support/MachineHarness.ts"

// The session machine's bound on the CLI's requests that a turn waits on (`HostRequest` with `bound: "turn"`: an
// in-process tool call, a hook, a question to the user): they live as long as their turn, not the control timeout.
// Deadlines (harness defaults): control 100, turn 10 000, stall 1000, interrupt 200 ms.

type FakeBench = Bench<FakeProtocol> & { cli: Cli }

const turnBound = (requestId: string): Provider.Item => ({
  _tag: "HostRequest",
  requestId,
  request: { tool: requestId },
  bound: "turn"
})

/** A running turn t1 whose prompt was written and acknowledged. */
const running = (b: FakeBench): Machine.Turn => {
  const turn = b.input((m, now) => m.send(now, "hi", undefined, true)) as Machine.Turn
  b.cli(I.receipt(turn.id))
  b.trace()
  return turn
}

const handled = (b: FakeBench, requestId: string) =>
  b.input((m, now) => m.handled(now, requestId, { _tag: "Success", payload: {} }))

describe("host requests bound to the turn", () => {
  it("outlive the control timeout, and the turn does not stall while the host works", () => {
    const b = fake()
    running(b)
    b.at(10)
    assert.deepStrictEqual(b.cli(turnBound("h1")), ["handle h1 {\"tool\":\"h1\"}"])
    // Only the turn's own deadline remains (10 000), not the control (110) nor the stall (1 010) deadline.
    assert.strictEqual(b.m.nextDeadline(), 10_000)
    assert.deepStrictEqual(b.at(5_000).tick(), [])
    assert.strictEqual(b.m.status, "running")
    // The answer goes out, and the stall clock restarts from it.
    assert.deepStrictEqual(b.step((m, now) => m.handled(now, "h1", { _tag: "Success", payload: {} })), [
      "flush",
      "> reply h1 success"
    ])
    assert.strictEqual(b.m.nextDeadline(), 6_000)
  })

  it("are stopped, unanswered, when their turn ends: the CLI no longer waits", () => {
    const b = fake()
    running(b)
    b.cli(turnBound("h1"))
    b.trace()
    assert.deepStrictEqual(b.at(50).cli(I.end()), [
      "Usage@t1",
      "stop handling h1",
      "TurnCompleted@t1",
      "Status:idle",
      "settle t1 ok"
    ])
    b.trace()
    handled(b, "h1")
    assert.deepStrictEqual(b.trace(), [])
  })

  it("are stopped when the turn is interrupted, and when the CLI withdraws them", () => {
    const b = fake()
    running(b)
    b.cli(turnBound("h1"), turnBound("h2"))
    b.trace()
    assert.deepStrictEqual(b.at(20).cli(I.cancel("h1")), ["stop handling h1"])
    // While h2 still runs there is no stall deadline: only the turn's remains.
    assert.strictEqual(b.m.nextDeadline(), 10_000)
    b.input((m, now) => m.interrupt(now, m.active!, "host"))
    b.trace()
    assert.deepStrictEqual(b.at(30).cli(I.end({ _tag: "Interrupted" })), [
      "Usage@t1",
      "stop handling h2",
      "TurnFailed@t1 TurnInterrupted(host,acknowledged,written)",
      "Status:idle",
      "settle t1 TurnInterrupted(host,acknowledged,written)",
      "interrupt waiter 1 interrupted"
    ])
  })

  it("with no turn running, are bounded by the control timeout", () => {
    const b = fake()
    b.at(10)
    assert.deepStrictEqual(b.cli(turnBound("h1")), ["handle h1 {\"tool\":\"h1\"}"])
    assert.strictEqual(b.m.nextDeadline(), 110)
    assert.deepStrictEqual(b.at(110).tick(), [
      "stop handling h1",
      "flush",
      "> reply h1 error: the host did not answer in time"
    ])
  })

  it("leave requests bound by the control timeout as they were, in any order of deadlines", () => {
    const b = fake()
    running(b)
    b.cli(turnBound("tool"))
    b.at(10).cli(I.hostRequest("hook"))
    b.trace()
    assert.strictEqual(b.m.nextDeadline(), 110)
    assert.deepStrictEqual(b.at(110).tick(), [
      "stop handling hook",
      "flush",
      "> reply hook error: the host did not answer in time"
    ])
    assert.strictEqual(b.m.nextDeadline(), 10_000)
  })
})

describe("a request bound to the turn withdrawn by the CLI", () => {
  it("restarts the turn's stall clock: waiting on the host was not a stall", () => {
    const b = fake()
    running(b)
    b.at(10).cli(turnBound("h1"))
    b.trace()
    assert.deepStrictEqual(b.at(5_000).cli(I.cancel("h1")), ["stop handling h1"])
    assert.strictEqual(b.m.nextDeadline(), 6_000)
  })
})

describe("host requests and the delivery fence", () => {
  it("a request bound to the turn is its progress but not its acknowledgement: a hook may cross a prompt just written", () => {
    const b = fake()
    const turn = b.input((m, now) => m.send(now, "hi", undefined, true)) as Machine.Turn
    b.trace()
    b.at(10).cli(turnBound("h1"))
    assert.isFalse(turn.acknowledged)
    assert.strictEqual(turn.phase, "started")
    // The receipt still acknowledges it.
    b.cli(I.receipt(turn.id))
    assert.isTrue(turn.acknowledged)
  })
})
