import { assert, describe, it } from "@effect/vitest"
import * as Machine from "../src/internal/session/machine.ts"
import * as Permission from "../src/Permission.ts"
import type * as Provider from "../src/Provider.ts"
import {
  type Bench,
  type Cli,
  describeError,
  fake,
  type FakeProtocol,
  I,
  type Overrides
} from "./support/MachineHarness.ts"

// The session machine as input → output tables, against a scripted protocol machine (support/MachineHarness.ts):
// each row puts the machine in a state (`given`), feeds one input (`when`) and compares everything the machine did
// in answer, in its order, with `then` (events PascalCase, outputs lower case, lines the writer wrote as `> line`).
// Deadlines (harness defaults): startup 1000, control 100, delivery 50, ack 300, turn 10 000, stall 1000,
// interrupt 200, permission 500 ms; two protocol errors logged per 1000 ms.

type FakeBench = Bench<FakeProtocol> & { cli: Cli }

interface Row {
  readonly name: string
  readonly overrides?: Overrides
  /** Start the machine and finish its handshake at 0 before `given` (default). */
  readonly started?: boolean
  readonly given?: (b: FakeBench) => void
  readonly when: (b: FakeBench) => unknown
  readonly then: ReadonlyArray<string>
  /** What the input returned: an error (described), a turn (its id), or the plain value. */
  readonly returns?: unknown
  /** Checks on the state the row leaves behind. */
  readonly after?: (b: FakeBench) => void
}

const describeResult = (value: unknown): unknown =>
  value instanceof Machine.Turn
    ? `turn ${value.id}`
    : typeof value === "object" && value !== null && "_tag" in value
    ? describeError(value)
    : value

const table = (title: string, rows: ReadonlyArray<Row>) =>
  describe(title, () => {
    for (const row of rows) {
      it(row.name, () => {
        const b = fake(row.overrides, row.started ?? true)
        row.given?.(b)
        b.trace()
        const result = row.when(b)
        assert.deepStrictEqual(b.trace(), row.then)
        if ("returns" in row) assert.deepStrictEqual(describeResult(result), row.returns)
        row.after?.(b)
      })
    }
  })

// --- steps --------------------------------------------------------------------------------------------------------

const send = (b: FakeBench, prompt: unknown = "hi", queue?: boolean) =>
  b.input((m, now) => m.send(now, prompt as string, queue, true))

/** A running turn whose prompt was written; acknowledged by a receipt unless `acknowledged` is false. */
const running = (b: FakeBench, acknowledged = true): Machine.Turn => {
  const turn = send(b) as Machine.Turn
  if (acknowledged) b.cli(I.receipt(turn.id))
  return turn
}

/** A running turn (see `running`), then the clock at `ms`. */
const runningAt = (ms: number, acknowledged = true) => (b: FakeBench) => {
  running(b, acknowledged)
  b.at(ms)
}

const interrupt = (b: FakeBench, turn: Machine.Turn | undefined = b.m.active, reason: "host" = "host") =>
  b.input((m, now) => m.interrupt(now, turn!, reason))

const exited = (b: FakeBench, code: number, stderr = "") =>
  b.input((m, now) => m.exited(now, { _tag: "Exited", code }, stderr))

const answer = (b: FakeBench, requestId: string, verdict: Permission.Verdict = Permission.allow()) =>
  b.input((m, now) => m.answerPermission(now, requestId, verdict))

const decided = (b: FakeBench, requestId: string, decision: Permission.Decision) =>
  b.input((m, now) => m.decided(now, requestId, decision))

const control = (b: FakeBench, request: unknown = { subtype: "set_model" }) =>
  b.input((m, now) => m.control(now, request))

const retired = (kind: Machine.RetireKind, reason: string) => [
  "Status:failed",
  `log Warning: session retired (${kind}): ${reason}`
]

/** The running turn t1 fails because the session is retired for `reason` (of that `kind`). */
const retiredTurn = (kind: Machine.RetireKind, reason: string, error: string) => [
  "Status:failed@t1",
  `log Warning: session retired (${kind}): ${reason}`,
  `TurnFailed@t1 ${error}`,
  `settle t1 ${error}`
]

const turnEnded = (id: string, settle: string) => {
  const ok = settle === "ok"
  return [
    `Usage@${id}`,
    ok ? `TurnCompleted@${id}` : `TurnFailed@${id} ${settle}`,
    "Status:idle",
    `settle ${id} ${settle}`
  ]
}

// --- startup -------------------------------------------------------------------------------------------------------

table("startup", [
  {
    name: "the handshake's first line is written at once: the CLI prints nothing before its first stdin line",
    started: false,
    when: (b) => b.input((m, now) => m.start(now)),
    then: ["flush", "> initialize"],
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), 1000)
      assert.deepStrictEqual(b.m.process, { _tag: "Running" })
      assert.strictEqual(b.m.closeReason, "closed")
    }
  },
  {
    name: "ready: the session goes idle and reports the handshake, and the startup deadline stops",
    started: false,
    given: (b) => b.input((m, now) => m.start(now)),
    when: (b) => b.at(400).cli(I.ready),
    then: ["Status:idle", "ready {\"version\":\"fake\"}"],
    after: (b) => {
      assert.strictEqual(b.m.status, "idle")
      assert.strictEqual(b.m.nextDeadline(), Infinity)
    }
  },
  {
    name: "refused: startup fails and the session is retired",
    started: false,
    given: (b) => b.input((m, now) => m.start(now)),
    when: (b) => b.cli(I.refused("bad flags")),
    then: [
      "start failed (refused): bad flags []",
      ...retired("handshake-refused", "the CLI refused the handshake: bad flags"),
      "teardown"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "exit during the handshake: startup fails with the exit, and the session ends",
    started: false,
    given: (b) => b.input((m, now) => m.start(now)),
    when: (b) => exited(b, 1, "no such flag"),
    then: [
      "start failed (exited): the CLI exited (exit code 1): no such flag [no such flag]",
      ...retired("cli-exited", "the CLI exited (exit code 1)"),
      "teardown",
      "Exit 1 \"no such flag\"",
      "ended"
    ],
    after: (b) => assert.deepStrictEqual(b.m.process._tag, "Failed")
  },
  {
    name: "the startup deadline does not fire a millisecond early",
    started: false,
    given: (b) => b.input((m, now) => m.start(now)),
    when: (b) => b.at(999).tick(),
    then: []
  },
  {
    name: "the startup deadline fails startup and retires the session",
    started: false,
    given: (b) => b.input((m, now) => m.start(now)),
    when: (b) => b.at(1000).tick(),
    then: [
      "start failed (timeout): the handshake did not finish within 1000 ms",
      ...retired("startup-timeout", "the handshake did not finish in time"),
      "teardown"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "a ready that comes after the startup deadline is ignored",
    started: false,
    given: (b) => {
      b.input((m, now) => m.start(now))
      b.at(1000).tick()
    },
    when: (b) => b.cli(I.ready),
    then: [],
    after: (b) => assert.strictEqual(b.m.status, "failed")
  },
  {
    name: "a second ready or a late refusal is ignored once the session is up",
    when: (b) => b.cli(I.ready, I.refused("late")),
    then: [],
    after: (b) => assert.strictEqual(b.m.status, "idle")
  },
  {
    name: "a handshake whose first write fails ends startup (it does not wait for a deadline that is gone)",
    started: false,
    given: (b) => {
      b.autoWrite = false
      b.input((m, now) => m.start(now))
      b.take()
    },
    when: (b) => b.input((m, now) => m.writeFailed(now, "EPIPE")),
    then: ["start failed (failed): EPIPE", ...retired("write-failed", "EPIPE"), "teardown"]
  },
  {
    name: "a handshake whose first write times out ends startup",
    started: false,
    given: (b) => {
      b.autoWrite = false
      b.input((m, now) => m.start(now))
      b.take()
    },
    when: (b) => b.at(50).tick(),
    then: [
      "start failed (failed): writing to the CLI did not finish within 50 ms",
      ...retired("delivery-timeout", "writing to the CLI did not finish within 50 ms"),
      "teardown"
    ]
  }
])

// --- send ------------------------------------------------------------------------------------------------------------

table("send", [
  {
    name: "idle: the turn starts and its prompt is written",
    when: (b) => send(b),
    then: ["TurnStarted@t1", "Status:running@t1", "flush", "> prompt t1", "written t1"],
    returns: "turn t1",
    after: (b) => {
      assert.strictEqual(b.m.active?.phase, "started")
      assert.strictEqual(b.m.status, "running")
    }
  },
  {
    name: "busy, no queue: refused with TurnInFlight naming the running turn, nothing written",
    given: (b) => running(b),
    when: (b) => send(b),
    then: [],
    returns: "TurnInFlight(t1)"
  },
  {
    name: "busy, queue asked for: the prompt waits, unwritten",
    given: (b) => running(b),
    when: (b) => send(b, "next", true),
    then: ["TurnQueued@t2"],
    returns: "turn t2",
    after: (b) => assert.strictEqual(b.m.queue[0].phase, "queued")
  },
  {
    name: "busy, queueing by default",
    overrides: { queue: true },
    given: (b) => running(b),
    when: (b) => send(b),
    then: ["TurnQueued@t2"],
    returns: "turn t2"
  },
  {
    name: "busy, queueing by default but not for this send",
    overrides: { queue: true },
    given: (b) => running(b),
    when: (b) => send(b, "hi", false),
    then: [],
    returns: "TurnInFlight(t1)"
  },
  {
    name: "queue full: refused with QueueFull",
    overrides: { queue: true, queueCapacity: 2 },
    given: (b) => {
      running(b)
      send(b)
      send(b)
    },
    when: (b) => send(b),
    then: [],
    returns: "QueueFull(2)"
  },
  {
    name: "an invalid prompt is refused and nothing is written",
    when: (b) => send(b, "invalid"),
    then: [],
    returns: "InvalidPrompt(the prompt cannot be encoded)",
    after: (b) => assert.strictEqual(b.m.status, "idle")
  },
  {
    name: "a prompt whose codec throws something else than an Error: refused, with what it threw",
    when: (b) => send(b, "thrown"),
    then: [],
    returns: "InvalidPrompt(not an Error)"
  },
  {
    name: "after close: SessionUnavailable",
    given: (b) => b.input((m, now) => m.close(now, "closed")),
    when: (b) => send(b),
    then: [],
    returns: "SessionUnavailable(idle)"
  },
  {
    name: "after retire: SessionUnavailable",
    given: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    when: (b) => send(b),
    then: [],
    returns: "SessionUnavailable(failed)"
  },
  {
    name: "a closed session refuses prompts whatever else it remembers",
    given: (b) => b.m.closed(),
    when: (b) => send(b),
    then: [],
    returns: "SessionUnavailable(closed)",
    after: (b) =>
      assert.strictEqual(
        (send(b) as { readonly reason: string }).reason,
        "the session no longer accepts prompts"
      )
  },
  {
    name: "after closed: SessionUnavailable",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      b.m.closed()
    },
    when: (b) => send(b),
    then: [],
    returns: "SessionUnavailable(closed)"
  },
  {
    name: "a queued turn starts when the running one ends, and only then is its prompt written",
    given: (b) => {
      running(b)
      send(b, "next", true)
    },
    when: (b) => b.cli(I.end()),
    then: [
      ...turnEnded("t1", "ok"),
      "TurnStarted@t2",
      "Status:running@t2",
      "flush",
      "> prompt t2",
      "written t2"
    ]
  },
  {
    name: "items a provider returns with a prompt are applied after its line",
    given: (b) => {
      b.protocol.promptExtra = [I.sessionId("from-prompt")]
    },
    when: (b) => send(b),
    then: ["TurnStarted@t1", "Status:running@t1", "flush", "> prompt t1", "written t1"],
    after: (b) => assert.strictEqual(b.m.sessionId, "from-prompt")
  }
])

// --- the delivery fence ------------------------------------------------------------------------------------------

table("delivery fence", [
  {
    name: "an explicit receipt acknowledges the turn",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.receipt("t1")),
    then: ["TurnAcknowledged@t1"],
    after: (b) => assert.strictEqual(b.m.active?.phase, "acknowledged")
  },
  {
    name: "a receipt for another turn does not",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.receipt("t0")),
    then: [],
    after: (b) => assert.isFalse(b.m.active?.acknowledged)
  },
  {
    name: "a second receipt says nothing more",
    given: (b) => running(b),
    when: (b) => b.cli(I.receipt("t1")),
    then: []
  },
  {
    name: "no receipt: the first turn-scoped frame acknowledges, and is attributed to the running turn",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.frame("system")),
    then: ["TurnAcknowledged@t1", "Frame:system@t1"]
  },
  {
    name: "no receipt: a frame naming the running turn acknowledges it",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.text("a", "t1")),
    then: ["TurnAcknowledged@t1", "TextDelta@t1 a"]
  },
  {
    name: "a session-scoped frame never acknowledges, and belongs to no turn",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.sessionFrame("keep_alive")),
    then: ["Frame:keep_alive"],
    after: (b) => assert.isFalse(b.m.active?.acknowledged)
  },
  {
    name: "a frame naming another turn never acknowledges, and keeps its turn",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.frame("command_lifecycle", "t0")),
    then: ["Frame:command_lifecycle@t0"],
    after: (b) => assert.isFalse(b.m.active?.acknowledged)
  },
  {
    name: "output after the prompt's write is the running turn's even before any receipt (older CLIs)",
    given: (b) => running(b, false),
    when: (b) => b.at(5).cli(I.text("a"), I.text("b")),
    then: ["TurnAcknowledged@t1", "TextDelta@t1 a", "TextDelta@t1 b"]
  },
  {
    name: "output while the prompt's write is in flight is the running turn's too",
    given: (b) => {
      b.autoWrite = false
      send(b)
      assert.strictEqual(b.take(), "prompt t1")
    },
    when: (b) => b.cli(I.text("a")),
    then: ["TurnAcknowledged@t1", "TextDelta@t1 a"]
  },
  {
    name: "output before the prompt's write is not the turn's (the previous turn's trailing frames)",
    given: (b) => {
      b.autoWrite = false
      send(b)
    },
    when: (b) => b.cli(I.frame("prompt_suggestion"), I.text("late")),
    then: ["Frame:prompt_suggestion", "TextDelta late"],
    after: (b) => {
      assert.isFalse(b.m.active?.acknowledged)
      assert.strictEqual(b.m.nextDeadline(), 300)
    }
  },
  {
    name: "a result naming no turn before the prompt's write does not end the turn, and the prompt is still written",
    given: (b) => {
      b.autoWrite = false
      send(b)
    },
    when: (b) => b.cli(I.end()),
    then: ["Frame:result"],
    after: (b) => {
      assert.strictEqual(b.m.active?.id, "t1")
      assert.strictEqual(b.take(), "prompt t1")
    }
  },
  {
    name: "a line the provider makes nothing of changes nothing",
    given: (b) => running(b, false),
    when: (b) => b.input((m, now) => m.receive(now, "nothing")),
    then: [],
    after: (b) => assert.isFalse(b.m.active?.acknowledged)
  },
  {
    name: "output with no turn running belongs to no turn",
    when: (b) => b.cli(I.frame("system"), I.text("x")),
    then: ["Frame:system", "TextDelta x"]
  },
  {
    name: "a frame naming another turn is not the running turn's progress",
    given: runningAt(900),
    when: (b) => b.cli(I.frame("command_lifecycle", "t0")),
    then: ["Frame:command_lifecycle@t0"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1000)
  },
  {
    name: "session traffic is not progress",
    given: runningAt(900),
    when: (b) => b.cli(I.sessionFrame("keep_alive")),
    then: ["Frame:keep_alive"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1000)
  },
  {
    name: "attributed output is progress: the stall deadline moves",
    given: runningAt(900, false),
    when: (b) => b.cli(I.text("a")),
    then: ["TurnAcknowledged@t1", "TextDelta@t1 a"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1900)
  },
  {
    name: "a frame naming the running turn is progress too",
    given: runningAt(900),
    when: (b) => b.cli(I.text("a", "t1")),
    then: ["TextDelta@t1 a"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1900)
  },
  {
    name: "the ack warning does not come at another deadline's tick",
    given: (b) => {
      running(b, false)
      b.cli(I.hostRequest("h1"))
    },
    when: (b) => b.at(100).tick(),
    then: ["stop handling h1", "flush", "> reply h1 error: the host did not answer in time"]
  },
  {
    name: "the ack deadline only logs, once, and the turn goes on",
    given: (b) => running(b, false),
    when: (b) => b.at(300).tick(),
    then: ["log Warning: turn t1 was not acknowledged by the CLI within 300 ms"],
    after: (b) => {
      assert.strictEqual(b.m.status, "running")
      assert.strictEqual(b.m.nextDeadline(), 1000)
      assert.deepStrictEqual(b.at(301).tick(), [])
    }
  }
])

// --- turn end -------------------------------------------------------------------------------------------------------

table("turn end", [
  {
    name: "success",
    given: (b) => running(b),
    when: (b) => b.cli(I.end()),
    then: turnEnded("t1", "ok"),
    after: (b) => {
      assert.strictEqual(b.outputs().find((o) => o._tag === "Settle")?.turn.phase, "completed")
      assert.strictEqual(b.m.status, "idle")
      assert.isUndefined(b.m.active)
      assert.strictEqual(b.m.nextDeadline(), Infinity)
    }
  },
  {
    name: "success naming the running turn",
    given: (b) => running(b),
    when: (b) => b.cli(I.end({ _tag: "Success" }, "t1")),
    then: turnEnded("t1", "ok")
  },
  {
    name: "a result acknowledges a turn nothing acknowledged before",
    given: (b) => running(b, false),
    when: (b) => b.cli(I.end()),
    then: ["TurnAcknowledged@t1", ...turnEnded("t1", "ok")]
  },
  {
    name: "interrupted in the CLI (not by the host): reason host, acknowledged, written",
    given: (b) => running(b),
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: turnEnded("t1", "TurnInterrupted(host,acknowledged,written)")
  },
  {
    name: "api error: the session stays usable",
    given: (b) => running(b),
    when: (b) => b.cli(I.end({ _tag: "Api", status: 529, detail: "overloaded" })),
    then: turnEnded("t1", "ApiError(529)"),
    after: (b) => assert.strictEqual(b.m.status, "idle")
  },
  {
    name: "a provider failure carries the provider's error for the turn",
    given: (b) => running(b),
    when: (b) =>
      b.cli(I.end({
        _tag: "Failed",
        error: (turnId) => new Permission.PermissionNotFound({ requestId: turnId }) as never
      })),
    then: turnEnded("t1", "PermissionNotFound")
  },
  {
    name: "a stray result (no turn running) is only a frame",
    when: (b) => b.cli(I.end()),
    then: ["Frame:result"]
  },
  {
    name: "a result naming another turn is only a frame, and the running turn goes on",
    given: (b) => running(b),
    when: (b) => b.cli(I.end({ _tag: "Success" }, "t0")),
    then: ["Frame:result@t0"],
    after: (b) => assert.strictEqual(b.m.active?.id, "t1")
  },
  {
    name: "the result's session id is the session's",
    given: (b) => running(b),
    when: (b) => b.cli(I.sessionId("abc"), I.end()),
    then: turnEnded("t1", "ok"),
    after: (b) => assert.strictEqual(b.m.sessionId, "abc")
  }
])

// --- interrupts -----------------------------------------------------------------------------------------------------

table("interrupts", [
  {
    name: "a queued turn is dropped, unwritten: safe to requeue",
    given: (b) => {
      running(b)
      send(b, "next", true)
      send(b, "after", true)
    },
    when: (b) => interrupt(b, b.m.queue[0]),
    then: ["TurnFailed@t2 TurnInterrupted(host)", "settle t2 TurnInterrupted(host)"],
    returns: "interrupted",
    after: (b) => {
      assert.deepStrictEqual(b.m.queue.map((t) => t.id), ["t3"])
      assert.strictEqual(b.m.active?.id, "t1")
      assert.strictEqual(b.outputs().find((o) => o._tag === "Settle")?.turn.phase, "cancelled")
      assert.deepStrictEqual(b.wrote(), ["initialize", "prompt t1"])
    }
  },
  {
    name: "a prompt still waiting behind another write is dropped unwritten: safe to requeue, the session goes on",
    given: (b) => {
      b.autoWrite = false
      control(b)
      assert.strictEqual(b.take(), "control #1") // in flight: the prompt waits behind it
      send(b)
    },
    when: (b) => interrupt(b),
    then: ["written t1", "TurnFailed@t1 TurnInterrupted(host)", "Status:idle", "settle t1 TurnInterrupted(host)"],
    returns: "interrupted",
    after: (b) => {
      b.written()
      assert.isUndefined(b.take())
      assert.strictEqual(b.m.status, "idle")
      assert.isUndefined(b.m.retiredBecause)
    }
  },
  {
    name: "an unacknowledged turn retires the session: delivery is uncertain",
    given: (b) => running(b, false),
    when: (b) => interrupt(b),
    then: [
      ...retiredTurn(
        "unacknowledged-interrupt",
        "turn t1 was interrupted before the CLI acknowledged it",
        "TurnInterrupted(host,written)"
      ),
      "teardown"
    ],
    returns: "retired"
  },
  {
    name: "an acknowledged turn: the interrupt is sent, its deadline runs",
    given: (b) => running(b),
    when: (b) => b.at(10).input((m, now) => m.interrupt(now, m.active!, "host")),
    then: ["Status:cancelling@t1", "flush", "> interrupt t1 #1"],
    returns: { waiter: 1 },
    after: (b) => {
      // The control deadline of the interrupt request (110) comes before the interrupt's own (210).
      assert.strictEqual(b.m.nextDeadline(), 110)
      b.cli(I.controlOk(1))
      assert.strictEqual(b.m.nextDeadline(), 210)
    }
  },
  {
    name: "the interrupted turn's result settles it and every waiter",
    given: (b) => {
      running(b)
      interrupt(b)
      interrupt(b)
    },
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: [
      ...turnEnded("t1", "TurnInterrupted(host,acknowledged,written)"),
      "interrupt waiter 1 interrupted",
      "interrupt waiter 2 interrupted"
    ]
  },
  {
    name: "an interrupt request the CLI leaves unanswered retires the session as a control would",
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => b.at(100).tick(),
    then: [
      ...retiredTurn(
        "control-timeout",
        "control request interrupt was not answered within 100 ms; the session was retired",
        "SessionRetired(acknowledged)"
      ),
      "interrupt waiter 1 retired",
      "teardown"
    ]
  },
  {
    name: "the interrupt deadline does not fire at another deadline's tick",
    given: (b) => {
      running(b)
      interrupt(b)
      b.cli(I.controlOk(1))
      b.at(50).cli(I.hostRequest("h1"))
    },
    when: (b) => b.at(150).tick(),
    then: ["stop handling h1", "flush", "> reply h1 error: the host did not answer in time"],
    after: (b) => assert.strictEqual(b.m.status, "cancelling")
  },
  {
    name: "a stall interrupt that times out says it was the stall's",
    given: (b) => {
      running(b)
      b.at(1000).tick()
      b.cli(I.controlOk(1))
    },
    when: (b) => b.at(1200).tick(),
    then: [
      ...retiredTurn(
        "interrupt-timeout",
        "turn t1 did not settle within 200 ms of its interrupt (stall); the session was retired",
        "InterruptTimeout(stall,acknowledged)"
      ),
      // The stall's own interrupt has a waiter no one holds: the driver ignores it.
      "interrupt waiter 1 retired",
      "teardown"
    ]
  },
  {
    name: "retiring while an interrupt's request is pending tells its waiter, and no control caller",
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => b.input((m, now) => m.retire(now, "x", undefined, "host")),
    then: [...retiredTurn("host", "x", "SessionRetired(acknowledged)"), "interrupt waiter 1 retired", "teardown"]
  },
  {
    name: "an interrupt whose provider writes nothing still cancels",
    given: (b) => {
      running(b)
      b.protocol.interruptItems = () => undefined
    },
    when: (b) => interrupt(b),
    then: ["Status:cancelling@t1"]
  },
  {
    name: "a second interrupt joins the first: nothing more is written",
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => interrupt(b),
    then: [],
    returns: { waiter: 2 }
  },
  {
    name: "a turn that completes before its interrupt takes effect: completed-first",
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => b.cli(I.end()),
    then: [...turnEnded("t1", "ok"), "interrupt waiter 1 completed-first"]
  },
  {
    name: "interrupting a turn that already ended: completed-first, nothing written",
    given: (b) => {
      running(b)
      b.cli(I.end())
    },
    when: (b) => interrupt(b, b.outputs().find((o) => o._tag === "Settle")!.turn as Machine.Turn),
    then: [],
    returns: "completed-first"
  },
  {
    name: "no turn running: no-active-turn",
    when: (b) => b.input((m, now) => m.interruptActive(now, "host")),
    then: [],
    returns: "no-active-turn"
  },
  {
    name: "the interrupt deadline retires the session and tells the waiters so",
    given: (b) => {
      running(b)
      interrupt(b)
      b.cli(I.controlOk(1))
    },
    when: (b) => b.at(200).tick(),
    then: [
      ...retiredTurn(
        "interrupt-timeout",
        "turn t1 did not settle within 200 ms of its interrupt (host); the session was retired",
        "InterruptTimeout(host,acknowledged)"
      ),
      "interrupt waiter 1 retired",
      "teardown"
    ]
  },
  {
    name: "a tick late past both the interrupt's deadline and its request's: the earlier, the interrupt's, decides",
    overrides: { deadlines: { control: 300 } },
    given: (b) => {
      running(b)
      interrupt(b)
    },
    // A busy event loop fires the timer set for 200 ms after the control request's deadline too.
    when: (b) => b.at(400).tick(),
    then: [
      ...retiredTurn(
        "interrupt-timeout",
        "turn t1 did not settle within 200 ms of its interrupt (host); the session was retired",
        "InterruptTimeout(host,acknowledged)"
      ),
      "interrupt waiter 1 retired",
      "teardown"
    ]
  },
  {
    name: "the same late tick with the request's deadline the earlier: the unanswered request decides",
    overrides: { deadlines: { control: 100 } },
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => b.at(400).tick(),
    then: [
      ...retiredTurn(
        "control-timeout",
        "control request interrupt was not answered within 100 ms; the session was retired",
        "SessionRetired(acknowledged)"
      ),
      "interrupt waiter 1 retired",
      "teardown"
    ]
  },
  {
    name: "an interrupt racing a result: the outbox drops it, unwritten",
    given: (b) => {
      running(b)
      b.autoWrite = false
      interrupt(b)
      b.cli(I.end())
    },
    when: (b) => b.take(),
    then: [],
    returns: undefined,
    after: (b) => assert.deepStrictEqual(b.wrote(), ["initialize", "prompt t1"])
  },
  {
    name: "an interrupt dropped unwritten is not a control left unanswered: the session is not retired for it",
    given: (b) => {
      running(b)
      b.autoWrite = false
      interrupt(b)
      b.cli(I.end())
      b.take()
    },
    when: (b) => b.at(500).tick(),
    then: [],
    after: (b) => {
      assert.strictEqual(b.m.status, "idle")
      assert.strictEqual(b.m.nextDeadline(), Infinity)
    }
  },
  {
    name: "an interrupt written before the result stays: the CLI answers it",
    given: (b) => {
      running(b)
      interrupt(b)
      b.cli(I.end())
    },
    when: (b) => b.cli(I.controlOk(1)),
    then: [],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "the turn deadline interrupts an acknowledged turn",
    given: (b) => {
      running(b)
      // Progress keeps the stall watchdog quiet up to the turn deadline.
      for (let t = 900; t < 10_000; t += 900) b.at(t).cli(I.text("."))
    },
    when: (b) => b.at(10_000).tick(),
    then: ["Status:cancelling@t1", "flush", "> interrupt t1 #1"],
    after: (b) => {
      b.cli(I.end({ _tag: "Interrupted" }))
      assert.strictEqual(
        b.trace().find((line) => line.startsWith("settle")),
        "settle t1 TurnInterrupted(turn-timeout,acknowledged,written)"
      )
    }
  },
  {
    name: "the turn deadline retires a session whose turn was never acknowledged",
    overrides: { deadlines: { stall: 10_000 } },
    given: (b) => running(b, false),
    when: (b) => b.at(10_000).tick(),
    then: [
      ...retiredTurn(
        "unacknowledged-interrupt",
        "turn t1 was interrupted before the CLI acknowledged it",
        "TurnInterrupted(turn-timeout,written)"
      ),
      "teardown"
    ]
  },
  {
    name: "the stall deadline interrupts a turn that made no progress",
    given: (b) => running(b),
    when: (b) => b.at(1000).tick(),
    then: ["Status:cancelling@t1", "flush", "> interrupt t1 #1"],
    after: (b) => {
      b.cli(I.end({ _tag: "Interrupted" }))
      assert.include(b.trace(), "settle t1 TurnInterrupted(stall,acknowledged,written)")
    }
  },
  {
    name: "the stall deadline does not fire a millisecond early",
    given: (b) => running(b),
    when: (b) => b.at(999).tick(),
    then: []
  },
  {
    name: "an interrupt a provider answers at once (its items applied in order)",
    given: (b) => {
      running(b)
      b.protocol.interruptItems = (turnId, ref) => [I.controlOk(ref), { _tag: "Write", line: `interrupt ${turnId}` }]
    },
    when: (b) => interrupt(b),
    then: ["Status:cancelling@t1", "flush", "> interrupt t1"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 200)
  }
])

// --- writes -------------------------------------------------------------------------------------------------------

table("writes", [
  {
    name: "take: the prompt's write is in flight, bounded by the delivery deadline; its sender waits",
    given: (b) => {
      b.autoWrite = false
      send(b)
    },
    when: (b) => b.at(10).take(),
    then: [],
    returns: "prompt t1",
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), 60)
      assert.isUndefined(b.m.take(b.now), "one write at a time")
    }
  },
  {
    name: "written: the sender may return, the delivery deadline stops",
    given: (b) => {
      b.autoWrite = false
      send(b)
      b.take()
    },
    when: (b) => b.written(),
    then: ["> prompt t1", "written t1"],
    // What runs now is the turn's: the ack deadline of its unacknowledged prompt.
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 300)
  },
  {
    name: "a line that is not a prompt has no sender to release",
    given: (b) => {
      b.autoWrite = false
      control(b)
      b.take()
    },
    when: (b) => b.written(),
    then: ["> control #1"]
  },
  {
    name: "the writer is woken once for lines queued while it is busy",
    given: (b) => {
      b.autoWrite = false
      control(b)
    },
    when: (b) => control(b),
    then: [],
    after: (b) => {
      assert.strictEqual(b.take(), "control #1")
      b.written()
      assert.strictEqual(b.take(), "control #2")
    }
  },
  {
    name: "a line queued while another is in flight does not wake the writer (it is still writing)",
    given: (b) => {
      b.autoWrite = false
      control(b)
      b.take()
    },
    when: (b) => control(b),
    then: []
  },
  {
    name: "the delivery deadline retires the session; the sender is released",
    given: (b) => {
      b.autoWrite = false
      send(b)
      b.take()
    },
    when: (b) => b.at(50).tick(),
    then: [
      ...retiredTurn("delivery-timeout", "writing to the CLI did not finish within 50 ms", "DeliveryTimeout(50)"),
      "written t1",
      "teardown"
    ]
  },
  {
    name: "a failed write retires the session; its turn fails with the transport's error",
    given: (b) => {
      b.autoWrite = false
      send(b)
      b.take()
    },
    when: (b) => b.input((m, now) => m.writeFailed(now, "EPIPE")),
    then: [
      ...retiredTurn("write-failed", "EPIPE", "TransportWriteError(EPIPE)"),
      "written t1",
      "teardown"
    ]
  },
  {
    name: "a prompt's write abandoned half-way retires the session: delivery is uncertain",
    given: (b) => {
      b.autoWrite = false
      send(b)
      b.take()
    },
    when: (b) => b.input((m, now) => m.abandoned(now)),
    then: [
      ...retiredTurn(
        "write-abandoned",
        "the prompt of turn t1 was being written when its writer was interrupted",
        "TurnInterrupted(host,written)"
      ),
      "written t1",
      "teardown"
    ]
  },
  {
    name: "another line abandoned half-way retires the session too",
    given: (b) => {
      running(b)
      b.autoWrite = false
      control(b)
      b.take()
    },
    when: (b) => b.input((m, now) => m.abandoned(now)),
    then: [
      ...retiredTurn("write-abandoned", "a write to the CLI was abandoned half-way", "SessionRetired(acknowledged)"),
      "control #1 SessionRetired(acknowledged)",
      "teardown"
    ]
  },
  {
    name: "abandoned with nothing in flight: nothing happens",
    when: (b) => b.input((m, now) => m.abandoned(now)),
    then: []
  },
  {
    name: "lines queued behind a retirement are never written, and their senders are released",
    given: (b) => {
      b.autoWrite = false
      control(b)
      b.take()
    },
    when: (b) => {
      send(b)
      return b.input((m, now) => m.writeFailed(now, "EPIPE"))
    },
    then: [
      "TurnStarted@t1",
      "Status:running@t1",
      ...retiredTurn("write-failed", "EPIPE", "TransportWriteError(EPIPE)"),
      "control #1 SessionRetired(acknowledged)",
      "written t1",
      "teardown"
    ],
    after: (b) => assert.isUndefined(b.m.take(b.now))
  },
  {
    name: "a prompt sent after the process exited is released at once, never written",
    given: (b) => {
      send(b, "a", false)
      b.m.active!.acknowledged = true
      b.input((m, now) => m.close(now, "closed"))
    },
    when: (b) => b.input((m, now) => m.written(now)),
    then: []
  }
])

// --- controls -----------------------------------------------------------------------------------------------------

table("controls", [
  {
    name: "a control request is written and bounded by the control deadline",
    when: (b) => control(b),
    then: ["flush", "> control #1"],
    returns: 1,
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 100)
  },
  {
    name: "its answer settles it",
    given: (b) => control(b),
    when: (b) => b.cli(I.controlOk(1, { model: "m" })),
    then: ["control #1 ok {\"model\":\"m\"}"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "an error answer fails it with the CLI's reason and code",
    given: (b) => control(b),
    when: (b) => b.cli(I.controlError(1)),
    then: ["control #1 ControlFailed(set_model,unsupported_request)"]
  },
  {
    name: "a request named by its method (JSON-RPC) fails under that name",
    given: (b) => control(b, { method: "thread/compact" }),
    when: (b) => b.cli(I.controlError(1, "no", null)),
    then: ["control #1 ControlFailed(thread/compact,null)"]
  },
  {
    name: "a request with neither a subtype nor a method fails as a control",
    given: (b) => control(b, { subtype: 7 }),
    when: (b) => b.cli(I.controlError(1)),
    then: ["control #1 ControlFailed(control,unsupported_request)"]
  },
  {
    name: "a request that is not an object fails as a control",
    given: (b) => control(b, 42),
    when: (b) => b.cli(I.controlError(1)),
    then: ["control #1 ControlFailed(control,unsupported_request)"]
  },
  {
    name: "an answer to an unknown ref (or a second answer) is ignored",
    given: (b) => {
      control(b)
      b.cli(I.controlOk(1))
    },
    when: (b) => b.cli(I.controlOk(1), I.controlError(9)),
    then: []
  },
  {
    name: "a request the protocol cannot encode is refused, nothing written",
    when: (b) => control(b, "invalid"),
    then: [],
    returns: "ControlFailed(control,invalid_request)",
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), Infinity)
      assert.strictEqual(
        (control(b, "invalid") as { readonly reason: string }).reason,
        "not sent, the request is not a valid frame: the request cannot be encoded"
      )
    }
  },
  {
    name: "the control deadline fails it and retires the session (the CLI may have applied it)",
    given: (b) => control(b),
    when: (b) => b.at(100).tick(),
    then: [
      "control #1 ControlTimeout(set_model)",
      ...retired(
        "control-timeout",
        "control request set_model was not answered within 100 ms; the session was retired"
      ),
      "teardown"
    ]
  },
  {
    name: "the control deadline does not fire a millisecond early",
    given: (b) => control(b),
    when: (b) => b.at(99).tick(),
    then: []
  },
  {
    name: "after retire: SessionRetired",
    given: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    when: (b) => control(b),
    then: [],
    returns: "SessionRetired(acknowledged)"
  },
  {
    name: "after the CLI exited during a close: CliExited",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      exited(b, 0)
    },
    when: (b) => control(b),
    then: [],
    returns: "CliExited(exit code 0,acknowledged)"
  },
  {
    name: "a null request fails as a control",
    given: (b) => control(b, null),
    when: (b) => b.cli(I.controlError(1)),
    then: ["control #1 ControlFailed(control,unsupported_request)"]
  },
  {
    name: "a request whose method is not a string fails as a control",
    given: (b) => control(b, { method: 5 }),
    when: (b) => b.cli(I.controlError(1)),
    then: ["control #1 ControlFailed(control,unsupported_request)"]
  },
  {
    name: "after the CLI exited: CliExited",
    given: (b) => exited(b, 0),
    when: (b) => control(b),
    then: [],
    returns: "CliExited(exit code 0,acknowledged)"
  },
  {
    name: "pending controls fail when the session is retired",
    given: (b) => {
      control(b)
      control(b)
    },
    when: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    then: [
      ...retired("host", "host"),
      "control #1 SessionRetired(acknowledged)",
      "control #2 SessionRetired(acknowledged)",
      "teardown"
    ]
  },
  {
    name: "pending controls fail when the CLI exits",
    given: (b) => control(b),
    when: (b) => exited(b, 1),
    then: [
      ...retired("cli-exited", "the CLI exited (exit code 1)"),
      "control #1 CliExited(exit code 1,acknowledged)",
      "teardown",
      "Exit 1",
      "ended"
    ]
  },
  {
    name: "pending controls fail when the CLI exits during close",
    given: (b) => {
      control(b)
      b.input((m, now) => m.close(now, "closed"))
    },
    when: (b) => exited(b, 0),
    then: ["control #1 CliExited(exit code 0,acknowledged)", "Exit 0", "ended"]
  },
  {
    // Found by the property test: the line's delivery deadline outlived the process, and every tick at it found it
    // still due (retirement does nothing once the process has ended), which would spin the driver's timer.
    name: "a control sent during close whose write is still in flight when the CLI exits leaves no deadline",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      b.autoWrite = false
      control(b)
      b.take()
    },
    when: (b) => exited(b, 0),
    then: ["control #1 CliExited(exit code 0,acknowledged)", "Exit 0", "ended"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  }
])

// --- permissions --------------------------------------------------------------------------------------------------

const permission = (b: FakeBench, requestId = "p1") => b.cli(I.permission(requestId))

/** A running, acknowledged turn awaiting the policy's decision on request p1. */
const awaiting = (b: FakeBench) => {
  running(b)
  permission(b)
}

/** The same, deferred by the policy. */
const deferred = (b: FakeBench) => {
  awaiting(b)
  decided(b, "p1", Permission.defer)
}

const resolvedAt = (requestId: string, how: string, wait: number) => [
  `PermissionResolved@t1 ${requestId} ${how}`,
  `permission wait ${wait}`
]

table("permissions", [
  {
    name: "a request during a turn: the turn awaits it, the policy decides",
    given: (b) => running(b),
    when: (b) => permission(b),
    then: ["Status:awaiting-permission@t1", "PermissionRequested@t1 p1", "decide p1@t1"],
    after: (b) => assert.deepStrictEqual(b.m.pendingPermissions().map((r) => r.requestId), ["p1"])
  },
  {
    name: "a request acknowledges the turn and is its progress",
    given: (b) => {
      running(b, false)
      b.at(700)
    },
    when: (b) => permission(b),
    then: ["TurnAcknowledged@t1", "Status:awaiting-permission@t1", "PermissionRequested@t1 p1", "decide p1@t1"]
  },
  {
    name: "a request with no turn running belongs to no turn",
    when: (b) => permission(b),
    // The request's turn id is "" (PermissionRequest.turnId is a string), and so is its events'.
    then: ["PermissionRequested@ p1", "decide p1@"],
    after: (b) => assert.strictEqual(b.m.status, "idle")
  },
  {
    name: "policy allow: answered once, the turn runs on",
    given: (b) => {
      awaiting(b)
      b.at(30)
    },
    when: (b) => decided(b, "p1", Permission.allow()),
    then: [
      "stop deciding p1",
      "flush",
      ...resolvedAt("p1", "policy:allow", 30),
      "Status:running@t1",
      "> answer p1 allow"
    ],
    after: (b) => assert.deepStrictEqual(b.m.pendingPermissions(), [])
  },
  {
    name: "policy deny",
    given: awaiting,
    when: (b) => decided(b, "p1", Permission.deny("no")),
    then: [
      "stop deciding p1",
      "flush",
      ...resolvedAt("p1", "policy:deny", 0),
      "Status:running@t1",
      "> answer p1 deny: no"
    ]
  },
  {
    name: "policy deny and interrupt: the CLI ends the turn, and the turn says why",
    given: (b) => {
      awaiting(b)
      decided(b, "p1", Permission.deny("no", { interrupt: true }))
    },
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: turnEnded("t1", "TurnInterrupted(permission,acknowledged,written)"),
    after: (b) => assert.include(b.wrote(), "answer p1 deny+interrupt: no")
  },
  {
    name: "policy defer: nothing is answered yet, the request stays pending",
    given: awaiting,
    when: (b) => decided(b, "p1", Permission.defer),
    then: [],
    after: (b) => assert.deepStrictEqual(b.m.pendingPermissions().map((r) => r.requestId), ["p1"])
  },
  {
    name: "a deferred request answered by the host",
    given: (b) => {
      deferred(b)
      b.at(40)
    },
    when: (b) => answer(b, "p1"),
    then: ["flush", ...resolvedAt("p1", "host:allow", 40), "Status:running@t1", "> answer p1 allow"],
    returns: undefined
  },
  {
    name: "the host answers while the policy is still deciding: the policy is stopped",
    given: awaiting,
    when: (b) => answer(b, "p1", Permission.deny("host says no")),
    then: [
      "stop deciding p1",
      "flush",
      ...resolvedAt("p1", "host:deny", 0),
      "Status:running@t1",
      "> answer p1 deny: host says no"
    ]
  },
  {
    name: "a policy decision after the host answered is ignored",
    given: (b) => {
      awaiting(b)
      answer(b, "p1")
    },
    when: (b) => decided(b, "p1", Permission.deny("late")),
    then: []
  },
  {
    name: "a policy failure after the host answered is ignored",
    given: (b) => {
      awaiting(b)
      answer(b, "p1")
    },
    when: (b) => b.input((m, now) => m.policyFailed(now, "p1")),
    then: []
  },
  {
    name: "a second host answer: AlreadyResolved, and nothing more reaches the CLI",
    given: (b) => {
      deferred(b)
      answer(b, "p1")
    },
    when: (b) => answer(b, "p1", Permission.deny("again")),
    then: [],
    returns: "PermissionAlreadyResolved(Decided)",
    after: (b) => assert.deepStrictEqual(b.wrote().filter((l) => l.startsWith("answer")), ["answer p1 allow"])
  },
  {
    name: "two answers before the writer ran: the second is refused, one answer is written",
    given: (b) => {
      deferred(b)
      b.autoWrite = false
      answer(b, "p1")
    },
    when: (b) => answer(b, "p1", Permission.deny("again")),
    then: [],
    returns: "PermissionAlreadyResolved(Decided)",
    after: (b) => {
      assert.strictEqual(b.take(), "answer p1 allow")
      b.written()
      assert.isUndefined(b.take())
    }
  },
  {
    name: "an unknown request: NotFound",
    when: (b) => answer(b, "nope"),
    then: [],
    returns: "PermissionNotFound"
  },
  {
    name: "an answer after the CLI cancelled the request: AlreadyResolved (expired)",
    given: (b) => {
      awaiting(b)
      b.cli(I.cancel("p1"))
    },
    when: (b) => answer(b, "p1"),
    then: [],
    returns: "PermissionAlreadyResolved(expired: cancelled-by-cli)"
  },
  {
    name: "cancelled by the CLI: resolved without an answer",
    given: (b) => {
      awaiting(b)
      b.at(20)
    },
    when: (b) => b.cli(I.cancel("p1")),
    then: ["stop deciding p1", ...resolvedAt("p1", "expired:cancelled-by-cli", 20), "Status:running@t1"]
  },
  {
    name: "a cancel for a request already answered is ignored",
    given: (b) => {
      awaiting(b)
      answer(b, "p1")
    },
    when: (b) => b.cli(I.cancel("p1")),
    then: []
  },
  {
    name: "a second policy decision (after a deferral) is ignored",
    given: deferred,
    when: (b) => {
      decided(b, "p1", Permission.allow())
      decided(b, "p1", Permission.defer)
      b.input((m, now) => m.policyFailed(now, "p1"))
    },
    then: [],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 500)
  },
  {
    name: "an allow or a plain deny does not make the CLI's own interrupt a permission one",
    given: (b) => {
      running(b)
      permission(b, "p1")
      permission(b, "p2")
      decided(b, "p1", Permission.allow())
      decided(b, "p2", Permission.deny("no"))
    },
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: turnEnded("t1", "TurnInterrupted(host,acknowledged,written)")
  },
  {
    name: "a deny and interrupt for a request of no turn does not mark the running turn",
    given: (b) => {
      permission(b, "p0")
      running(b)
      answer(b, "p0", Permission.deny("no", { interrupt: true }))
    },
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: turnEnded("t1", "TurnInterrupted(host,acknowledged,written)")
  },
  {
    name: "answering a request of no turn is not the running turn's progress",
    given: (b) => {
      permission(b, "p0")
      running(b)
      b.at(500)
    },
    when: (b) => answer(b, "p0"),
    then: [
      "stop deciding p0",
      "flush",
      "PermissionResolved@ p0 host:allow",
      "permission wait 500",
      "> answer p0 allow"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1000)
  },
  {
    name: "a second request while one is awaited changes no status",
    given: awaiting,
    when: (b) => permission(b, "p2"),
    then: ["PermissionRequested@t1 p2", "decide p2@t1"]
  },
  {
    name: "a request after retirement is decided but its answer is never written",
    given: (b) => {
      b.input((m, now) => m.retire(now, "x", undefined, "host"))
      permission(b)
    },
    when: (b) => decided(b, "p1", Permission.allow()),
    then: ["stop deciding p1", "PermissionResolved@ p1 policy:allow", "permission wait 0"]
  },
  {
    name: "a cancel for something unknown is ignored",
    given: (b) => running(b),
    when: (b) => b.cli(I.cancel("nope")),
    then: []
  },
  {
    name: "expired by the turn's end: resolved without an answer",
    given: deferred,
    when: (b) => b.cli(I.end({ _tag: "Interrupted" })),
    then: [
      "Usage@t1",
      ...resolvedAt("p1", "expired:turn-ended", 0),
      "Status:running@t1",
      "TurnFailed@t1 TurnInterrupted(host,acknowledged,written)",
      "Status:idle",
      "settle t1 TurnInterrupted(host,acknowledged,written)"
    ],
    after: (b) => assert.deepStrictEqual(b.m.pendingPermissions(), [])
  },
  {
    name: "the turn's end leaves another turn's requests alone",
    given: (b) => {
      permission(b, "p0")
      running(b)
    },
    when: (b) => b.cli(I.end()),
    then: turnEnded("t1", "ok"),
    after: (b) => assert.deepStrictEqual(b.m.pendingPermissions().map((r) => r.requestId), ["p0"])
  },
  {
    name: "the permission deadline denies a deferred request",
    given: (b) => {
      awaiting(b)
      b.at(100)
      decided(b, "p1", Permission.defer)
    },
    when: (b) => b.at(600).tick(),
    then: [
      "flush",
      ...resolvedAt("p1", "expired:timeout", 600),
      "Status:running@t1",
      "> answer p1 deny: the permission request timed out"
    ]
  },
  {
    name: "the deferred deadline counts from the deferral, not a millisecond less",
    given: (b) => {
      awaiting(b)
      b.at(100)
      decided(b, "p1", Permission.defer)
    },
    when: (b) => b.at(599).tick(),
    then: []
  },
  {
    name: "the policy deadline denies a request the policy did not decide",
    given: awaiting,
    when: (b) => b.at(500).tick(),
    then: [
      "stop deciding p1",
      "flush",
      ...resolvedAt("p1", "policy:deny", 500),
      "Status:running@t1",
      "> answer p1 deny: the host's permission policy did not decide in time"
    ]
  },
  {
    name: "a failed policy: the CLI gets a deny",
    given: awaiting,
    when: (b) => b.input((m, now) => m.policyFailed(now, "p1")),
    then: [
      "stop deciding p1",
      "flush",
      ...resolvedAt("p1", "PolicyFailed: the host's permission policy failed", 0),
      "Status:running@t1",
      "> answer p1 deny: the host's permission policy failed"
    ]
  },
  {
    name: "a policy failure for an unknown request is ignored",
    when: (b) => b.input((m, now) => m.policyFailed(now, "nope")),
    then: []
  },
  {
    name: "a decision for an unknown request is ignored",
    when: (b) => decided(b, "nope", Permission.allow()),
    then: []
  },
  {
    name: "an answer the protocol cannot encode: the CLI gets an error reply instead, never the invalid line",
    given: awaiting,
    when: (b) => answer(b, "p1", Permission.allow({ invalid: 1n })),
    then: [
      "stop deciding p1",
      "log Warning: refusing to send an invalid answer to CLI request p1: the input is not JSON",
      "flush",
      ...resolvedAt("p1", "host:allow", 0),
      "Status:running@t1",
      "> reply p1 error: the host's answer was invalid"
    ]
  },
  {
    name: "the stall clock stops while a decision is awaited",
    overrides: { deadlines: { permission: 5000 } },
    given: (b) => {
      running(b)
      b.at(100)
      permission(b)
      decided(b, "p1", Permission.defer)
    },
    when: (b) => b.at(3000).tick(),
    then: [],
    after: (b) => {
      assert.strictEqual(b.m.status, "awaiting-permission")
      assert.strictEqual(b.m.nextDeadline(), 5100)
    }
  },
  {
    name: "the stall clock restarts when the last awaited decision is made",
    overrides: { deadlines: { permission: 5000 } },
    given: (b) => {
      running(b)
      b.at(100)
      permission(b, "p1")
      permission(b, "p2")
      decided(b, "p1", Permission.defer)
      decided(b, "p2", Permission.defer)
      b.at(2000)
      answer(b, "p1")
      // One decision still awaited: the stall clock stays stopped.
      assert.strictEqual(b.m.nextDeadline(), 5100)
    },
    when: (b) => b.at(3000).input((m, now) => m.answerPermission(now, "p2", Permission.allow())),
    then: ["flush", ...resolvedAt("p2", "host:allow", 2900), "Status:running@t1", "> answer p2 allow"],
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), 4000)
      assert.deepStrictEqual(b.at(3999).tick(), [])
      assert.deepStrictEqual(b.at(4000).tick(), ["Status:cancelling@t1", "flush", "> interrupt t1 #1"])
    }
  },
  {
    name: "a request while the turn is being interrupted",
    given: (b) => {
      running(b)
      interrupt(b)
    },
    when: (b) => permission(b),
    then: ["Status:awaiting-permission@t1", "PermissionRequested@t1 p1", "decide p1@t1"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 100)
  }
])

table("permissions the CLI denied on its own (no one to ask: the session's default policy)", [
  {
    name: "reported as the policy's deny, as a request it decided at once: nothing asked, nothing answered",
    given: (b) => {
      running(b)
      b.at(40)
    },
    when: (b) => b.cli(I.denied("p1", "touch needs approval")),
    then: [
      "PermissionRequested@t1 p1",
      "decided p1@t1",
      "stop deciding p1",
      ...resolvedAt("p1", "policy:deny", 0)
    ],
    after: (b) => {
      assert.strictEqual(b.m.status, "running")
      assert.deepStrictEqual(b.m.pendingPermissions(), [])
      const resolved = b.records.flatMap((r) =>
        r._tag === "Event" && r.event._tag === "PermissionResolved" ? [r.event.resolution] : []
      )
      assert.deepStrictEqual(resolved, [{
        _tag: "Decided",
        by: "policy",
        decision: Permission.deny("touch needs approval")
      }])
      // Resolved like any other: a late answer says so, and writes nothing.
      assert.strictEqual(describeError(answer(b, "p1")), "PermissionAlreadyResolved(Decided)")
      assert.deepStrictEqual(b.trace(), [])
    }
  },
  {
    name: "it is the turn's progress and acknowledges it",
    given: (b) => {
      running(b, false)
      b.at(700)
    },
    when: (b) => b.cli(I.denied("p1")),
    then: [
      "TurnAcknowledged@t1",
      "PermissionRequested@t1 p1",
      "decided p1@t1",
      "stop deciding p1",
      ...resolvedAt("p1", "policy:deny", 0)
    ]
  },
  {
    name: "while another request waits for the policy, the turn still awaits that one",
    given: (b) => awaiting(b),
    when: (b) => b.cli(I.denied("p2")),
    then: [
      "PermissionRequested@t1 p2",
      "decided p2@t1",
      "stop deciding p2",
      ...resolvedAt("p2", "policy:deny", 0)
    ],
    after: (b) => {
      assert.strictEqual(b.m.status, "awaiting-permission")
      assert.deepStrictEqual(b.m.pendingPermissions().map((r) => r.requestId), ["p1"])
    }
  }
])

// --- host requests ------------------------------------------------------------------------------------------------

table("host requests", [
  {
    name: "a request from the CLI goes to the host's handler, bounded by the control deadline",
    given: (b) => b.at(10),
    when: (b) => b.cli(I.hostRequest("h1")),
    then: ["handle h1 {\"hook\":\"h1\"}"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 110)
  },
  {
    name: "the handler's answer is written",
    given: (b) => b.cli(I.hostRequest("h1")),
    when: (b) => b.input((m, now) => m.handled(now, "h1", { _tag: "Success", payload: { ok: true } })),
    then: ["flush", "> reply h1 success"],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "the handler's error is written as an error",
    given: (b) => b.cli(I.hostRequest("h1")),
    when: (b) => b.input((m, now) => m.handled(now, "h1", { _tag: "Error", message: "nope" })),
    then: ["flush", "> reply h1 error: nope"]
  },
  {
    name: "the deadline answers with an error and stops the handler",
    given: (b) => b.cli(I.hostRequest("h1")),
    when: (b) => b.at(100).tick(),
    then: ["stop handling h1", "flush", "> reply h1 error: the host did not answer in time"]
  },
  {
    name: "the deadline does not fire a millisecond early",
    given: (b) => b.cli(I.hostRequest("h1")),
    when: (b) => b.at(99).tick(),
    then: []
  },
  {
    name: "every request past its deadline is answered at one tick",
    given: (b) => {
      b.cli(I.hostRequest("h1"))
      b.at(50).cli(I.hostRequest("h2"))
      b.at(60).cli(I.hostRequest("h3"))
    },
    when: (b) => b.at(155).tick(),
    then: [
      "stop handling h1",
      "flush",
      "stop handling h2",
      "> reply h1 error: the host did not answer in time",
      "> reply h2 error: the host did not answer in time"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 160)
  },
  {
    name: "a late answer is ignored",
    given: (b) => {
      b.cli(I.hostRequest("h1"))
      b.at(100).tick()
    },
    when: (b) => b.input((m, now) => m.handled(now, "h1", { _tag: "Success", payload: {} })),
    then: []
  },
  {
    name: "cancelled by the CLI: the handler is stopped, nothing is written",
    given: (b) => b.cli(I.hostRequest("h1")),
    when: (b) => b.cli(I.cancel("h1")),
    then: ["stop handling h1"],
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), Infinity)
      assert.deepStrictEqual(b.step((m, now) => m.handled(now, "h1", { _tag: "Success", payload: {} })), [])
    }
  },
  {
    name: "a handler whose answer the protocol cannot encode: an error reply instead",
    given: (b) => {
      b.cli(I.hostRequest("h1"))
      const reply = b.protocol.reply
      ;(b.protocol as { reply: FakeProtocol["reply"] }).reply = (id, r) => {
        if (r._tag === "Success") throw new Error("not JSON")
        return reply(id, r)
      }
    },
    when: (b) => b.input((m, now) => m.handled(now, "h1", { _tag: "Success", payload: 1n })),
    then: [
      "log Warning: refusing to send an invalid answer to CLI request h1: not JSON",
      "flush",
      "> reply h1 error: the host's answer was invalid"
    ]
  },
  {
    name: "retirement stops every handler",
    given: (b) => {
      b.cli(I.hostRequest("h1"))
      b.cli(I.hostRequest("h2"))
    },
    when: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    then: [...retired("host", "host"), "stop handling h1", "stop handling h2", "teardown"]
  }
])

// --- process exit ---------------------------------------------------------------------------------------------------

table("process exit", [
  {
    name: "a clean exit while idle: completed, and the session ends",
    when: (b) => exited(b, 0),
    then: [...retired("cli-exited", "the CLI exited (exit code 0)"), "teardown", "Exit 0", "ended"],
    after: (b) => assert.strictEqual(b.m.process._tag, "Completed")
  },
  {
    name: "a failed exit while idle",
    when: (b) => exited(b, 2, "boom"),
    then: [...retired("cli-exited", "the CLI exited (exit code 2)"), "teardown", "Exit 2 \"boom\"", "ended"],
    after: (b) => {
      assert.deepStrictEqual(b.m.process, { _tag: "Failed", status: { _tag: "Exited", code: 2 }, stderrTail: "boom" })
    }
  },
  {
    name: "killed by a signal",
    when: (b) => b.input((m, now) => m.exited(now, { _tag: "Signaled", signal: "SIGKILL" }, "")),
    then: [...retired("cli-exited", "the CLI exited (signal SIGKILL)"), "teardown", "Exit SIGKILL", "ended"],
    after: (b) => assert.strictEqual(b.m.process._tag, "Failed")
  },
  {
    name: "exit 0 during a turn is a failure, and the turn fails with CliExited, unacknowledged",
    given: (b) => running(b, false),
    when: (b) => exited(b, 0),
    then: [
      ...retiredTurn("cli-exited", "the CLI exited (exit code 0)", "CliExited(exit code 0)"),
      "teardown",
      "Exit 0",
      "ended"
    ],
    after: (b) => assert.strictEqual(b.m.process._tag, "Failed")
  },
  {
    name: "exit during an acknowledged turn: CliExited says acknowledged",
    given: (b) => running(b),
    when: (b) => exited(b, 1),
    then: [
      ...retiredTurn("cli-exited", "the CLI exited (exit code 1)", "CliExited(exit code 1,acknowledged)"),
      "teardown",
      "Exit 1",
      "ended"
    ]
  },
  {
    name: "CliExited carries the exit code or the signal",
    given: (b) => running(b),
    when: (b) => b.input((m, now) => m.exited(now, { _tag: "Signaled", signal: "SIGKILL" }, "")),
    then: [
      ...retiredTurn("cli-exited", "the CLI exited (signal SIGKILL)", "CliExited(signal SIGKILL,acknowledged)"),
      "teardown",
      "Exit SIGKILL",
      "ended"
    ],
    after: (b) => {
      const failed = b.events().find((e) => e._tag === "TurnFailed") as any
      assert.deepStrictEqual([failed.error.code, failed.error.signal], [null, "SIGKILL"])
      const other = fake()
      running(other)
      exited(other, 7)
      const byCode = other.events().find((e) => e._tag === "TurnFailed") as any
      assert.deepStrictEqual([byCode.error.code, byCode.error.signal], [7, null])
    }
  },
  {
    name: "exit with turns queued: they fail, unwritten",
    given: (b) => {
      running(b)
      send(b, "next", true)
    },
    when: (b) => exited(b, 1),
    then: [
      ...retiredTurn("cli-exited", "the CLI exited (exit code 1)", "CliExited(exit code 1,acknowledged)"),
      "TurnFailed@t2 SessionUnavailable(failed)",
      "settle t2 SessionUnavailable(failed)",
      "teardown",
      "Exit 1",
      "ended"
    ]
  },
  {
    name: "an exit while closing is the close, not a failure",
    given: (b) => b.input((m, now) => m.close(now, "closed")),
    when: (b) => b.input((m, now) => m.exited(now, { _tag: "Signaled", signal: "SIGTERM" }, "")),
    then: ["Exit SIGTERM", "ended"],
    after: (b) => assert.strictEqual(b.m.process._tag, "Completed")
  },
  {
    name: "an exit after retirement records the exit only",
    given: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    when: (b) => exited(b, 0),
    then: ["Exit 0", "ended"]
  },
  {
    name: "a second exit is ignored",
    given: (b) => exited(b, 0),
    when: (b) => exited(b, 1),
    then: []
  },
  {
    name:
      "stdout ends while the process runs on: retired at once, the turn fails (delivery uncertain before a receipt)",
    given: (b) => running(b, false),
    when: (b) => b.input((m, now) => m.stdoutEnded(now)),
    then: [
      ...retiredTurn("stdout-closed", "the CLI closed its stdout but did not exit", "SessionRetired()"),
      "teardown"
    ]
  },
  {
    name: "stdout ends while idle: retired, so that the session does not look alive",
    when: (b) => b.input((m, now) => m.stdoutEnded(now)),
    then: [...retired("stdout-closed", "the CLI closed its stdout but did not exit"), "teardown"]
  },
  {
    name: "stdout ends after the exit, or while closing: nothing to do",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      exited(b, 0)
    },
    when: (b) => b.input((m, now) => m.stdoutEnded(now)),
    then: []
  },
  {
    name: "after the exit: no deadline is left and a tick does nothing",
    given: (b) => {
      running(b)
      control(b)
      b.cli(I.hostRequest("h1"))
      b.cli(I.permission("p1"))
      exited(b, 1)
    },
    when: (b) => b.at(100_000).tick(),
    then: [],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  }
])

// --- close and retire -------------------------------------------------------------------------------------------

table("close and retire", [
  {
    name: "close: the running turn is interrupted (closed), queued ones fail, requests expire, handlers stop",
    given: (b) => {
      running(b)
      b.cli(I.hostRequest("h1"))
      permission(b)
      send(b, "next", true)
    },
    when: (b) => b.input((m, now) => m.close(now, "evicted")),
    then: [
      "stop deciding p1",
      ...resolvedAt("p1", "expired:turn-ended", 0),
      "Status:running@t1",
      "TurnFailed@t1 TurnInterrupted(evicted,acknowledged,written)",
      "settle t1 TurnInterrupted(evicted,acknowledged,written)",
      "TurnFailed@t2 SessionUnavailable(running)",
      "settle t2 SessionUnavailable(running)",
      "stop handling h1"
    ],
    after: (b) => {
      assert.isTrue(b.m.closing)
      assert.strictEqual(b.m.closeReason, "evicted")
    }
  },
  {
    name: "close expires a request of no turn as session-ended, and says why queued turns failed",
    given: (b) => {
      permission(b, "p0")
      running(b)
      send(b, "next", true)
    },
    when: (b) => b.input((m, now) => m.close(now, "closed")),
    then: [
      "TurnFailed@t1 TurnInterrupted(closed,acknowledged,written)",
      "settle t1 TurnInterrupted(closed,acknowledged,written)",
      "TurnFailed@t2 SessionUnavailable(running)",
      "settle t2 SessionUnavailable(running)",
      "stop deciding p0",
      "PermissionResolved@ p0 expired:session-ended",
      "permission wait 0"
    ],
    after: (b) => {
      const failed = b.events().find((e) => e._tag === "TurnFailed" && e.turnId === "t2")
      assert.strictEqual((failed as any).error.reason, "the session was closed")
      assert.strictEqual(b.outputs().find((o) => o._tag === "Settle")?.turn.phase, "failed")
    }
  },
  {
    name: "a retire after closed leaves the status closed",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      b.m.closed()
    },
    when: (b) => b.input((m, now) => m.retire(now, "late", undefined, "host")),
    then: ["log Warning: session retired (host): late", "teardown"],
    after: (b) => assert.strictEqual(b.m.status, "closed")
  },
  {
    name: "retire says why queued turns failed, and drops lines no one waits for",
    given: (b) => {
      running(b)
      send(b, "next", true)
      b.autoWrite = false
      control(b)
      control(b)
      b.take()
    },
    when: (b) => b.input((m, now) => m.retire(now, "x", undefined, "host")),
    then: [
      ...retiredTurn("host", "x", "SessionRetired(acknowledged)"),
      "TurnFailed@t2 SessionUnavailable(failed)",
      "settle t2 SessionUnavailable(failed)",
      "control #1 SessionRetired(acknowledged)",
      "control #2 SessionRetired(acknowledged)",
      "teardown"
    ],
    after: (b) => {
      const failed = b.events().find((e) => e._tag === "TurnFailed" && e.turnId === "t2")
      assert.strictEqual((failed as any).error.reason, "the session was retired: x")
    }
  },
  {
    name: "close of an unacknowledged turn says so",
    given: (b) => running(b, false),
    when: (b) => b.input((m, now) => m.close(now, "closed")),
    then: ["TurnFailed@t1 TurnInterrupted(closed,written)", "settle t1 TurnInterrupted(closed,written)"]
  },
  {
    name: "close releases the sender of a prompt that was never written",
    given: (b) => {
      b.autoWrite = false
      send(b)
    },
    when: (b) => b.input((m, now) => m.close(now, "closed")),
    // Nothing of it reached the CLI: safe to send again.
    then: ["TurnFailed@t1 TurnInterrupted(closed)", "settle t1 TurnInterrupted(closed)", "written t1"],
    after: (b) => assert.isUndefined(b.m.take(b.now))
  },
  {
    name: "a second close does nothing",
    given: (b) => b.input((m, now) => m.close(now, "closed")),
    when: (b) => b.input((m, now) => m.close(now, "evicted")),
    then: [],
    after: (b) => assert.strictEqual(b.m.closeReason, "closed")
  },
  {
    name: "closed: the status says so",
    given: (b) => b.input((m, now) => m.close(now, "closed")),
    when: (b) => b.m.closed(),
    then: [],
    after: (b) => assert.strictEqual(b.m.status, "closed")
  },
  {
    name: "closed after a failure stays failed",
    given: (b) => b.input((m, now) => m.retire(now, "host", undefined, "host")),
    when: (b) => b.m.closed(),
    then: [],
    after: (b) => assert.strictEqual(b.m.status, "failed")
  },
  {
    name: "retire: the running turn fails with SessionRetired, the process tree is torn down",
    given: (b) => running(b),
    when: (b) => b.input((m, now) => m.retire(now, "the host said so", undefined, "host")),
    then: [
      ...retiredTurn("host", "the host said so", "SessionRetired(acknowledged)"),
      "teardown"
    ],
    after: (b) => assert.strictEqual(b.m.retiredBecause, "the host said so")
  },
  {
    name: "retire an unacknowledged turn: delivery uncertain",
    given: (b) => running(b, false),
    when: (b) => b.input((m, now) => m.retire(now, "x", undefined, "host")),
    then: [
      ...retiredTurn("host", "x", "SessionRetired()"),
      "teardown"
    ]
  },
  {
    name: "a second retire does nothing",
    given: (b) => b.input((m, now) => m.retire(now, "first", undefined, "host")),
    when: (b) => b.input((m, now) => m.retire(now, "second", undefined, "host")),
    then: [],
    after: (b) => assert.strictEqual(b.m.retiredBecause, "first")
  },
  {
    name: "a retire after the process ended (closed, then exited) does nothing",
    given: (b) => {
      b.input((m, now) => m.close(now, "closed"))
      exited(b, 0)
    },
    when: (b) => b.input((m, now) => m.retire(now, "late", undefined, "host")),
    then: [],
    after: (b) => assert.isUndefined(b.m.retiredBecause)
  },
  {
    name: "requests the CLI made after retirement expire when it exits",
    given: (b) => {
      b.input((m, now) => m.retire(now, "x", undefined, "host"))
      permission(b)
      b.cli(I.hostRequest("h1"))
    },
    when: (b) => exited(b, 143),
    then: [
      "stop deciding p1",
      "PermissionResolved@ p1 expired:session-ended",
      "permission wait 0",
      "stop handling h1",
      "Exit 143",
      "ended"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "retire expires pending requests (session-ended)",
    given: (b) => permission(b),
    when: (b) => b.input((m, now) => m.retire(now, "x", undefined, "host")),
    then: [
      ...retired("host", "x"),
      "stop deciding p1",
      "PermissionResolved@ p1 expired:session-ended",
      "permission wait 0",
      "teardown"
    ]
  }
])

// --- protocol errors ------------------------------------------------------------------------------------------------

table("protocol errors", [
  {
    name: "each malformed line is an event; the first burst is logged verbatim, the rest counted",
    when: (b) => b.cli(I.malformed(0), I.malformed(1), I.malformed(2), I.malformed(3)),
    then: [
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 0",
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 1",
      "ProtocolError",
      "ProtocolError"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), 1000)
  },
  {
    name: "the summary line comes at the end of the window",
    given: (b) => b.cli(I.malformed(0), I.malformed(1), I.malformed(2), I.malformed(3)),
    when: (b) => b.at(1000).tick(),
    then: ["log Warning: 2 more protocol errors in the last 1000 ms were not logged"],
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), Infinity)
      // A new window from the summary on: the next burst is logged again, its summary due at 2000.
      assert.deepStrictEqual(b.at(1001).cli(I.malformed(4)), [
        "ProtocolError",
        "log Warning: protocol error (not-json): bad 4"
      ])
      b.cli(I.malformed(5), I.malformed(6))
      assert.strictEqual(b.m.nextDeadline(), 2000)
    }
  },
  {
    name: "the summary line comes with the exit when the session ends inside the window",
    given: (b) => b.cli(I.malformed(0), I.malformed(1), I.malformed(2)),
    when: (b) => b.at(500).input((m, now) => m.exited(now, { _tag: "Exited", code: 1 }, "")),
    then: [
      ...retired("cli-exited", "the CLI exited (exit code 1)"),
      "teardown",
      "log Warning: 1 more protocol errors in the last 1000 ms were not logged",
      "Exit 1",
      "ended"
    ],
    after: (b) => {
      assert.strictEqual(b.m.nextDeadline(), Infinity)
      assert.deepStrictEqual(b.at(1000).tick(), [])
    }
  },
  {
    name: "the summary line does not come a millisecond early",
    given: (b) => b.cli(I.malformed(0), I.malformed(1), I.malformed(2)),
    when: (b) => b.at(999).tick(),
    then: []
  },
  {
    name: "a burst within the limit needs no summary and no tick",
    when: (b) => b.cli(I.malformed(0), I.malformed(1)),
    then: [
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 0",
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 1"
    ],
    after: (b) => assert.strictEqual(b.m.nextDeadline(), Infinity)
  },
  {
    name: "an error after the window (with no tick in between) brings the summary first",
    given: (b) => b.cli(I.malformed(0), I.malformed(1), I.malformed(2)),
    when: (b) => b.at(1500).cli(I.malformed(3)),
    then: [
      "ProtocolError",
      "log Warning: 1 more protocol errors in the last 1000 ms were not logged",
      "log Warning: protocol error (not-json): bad 3"
    ]
  },
  {
    name: "a new window after a quiet one logs its burst again",
    given: (b) => b.cli(I.malformed(0), I.malformed(1)),
    when: (b) => b.at(1000).cli(I.malformed(2), I.malformed(3), I.malformed(4)),
    then: [
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 2",
      "ProtocolError",
      "log Warning: protocol error (not-json): bad 3",
      "ProtocolError"
    ]
  },
  {
    name: "a line too long for the transport is a protocol error",
    when: (b) => b.input((m, now) => m.tooLong(now, 200, 100, "{\"type\"")),
    then: ["ProtocolError", "log Warning: protocol error (too-long): line of 200 characters exceeds the limit of 100"]
  },
  {
    name: "a malformed line keeps what it can of the line and belongs to no turn",
    given: (b) => running(b),
    when: (b) => b.cli(I.malformed(7)),
    then: ["ProtocolError", "log Warning: protocol error (not-json): bad 7"],
    after: (b) => {
      const event = b.events().at(-1)!
      assert.strictEqual(event.raw, "bad 7")
      assert.isUndefined(event.turnId)
    }
  }
])

// --- nextDeadline ---------------------------------------------------------------------------------------------------

describe("nextDeadline", () => {
  interface DeadlineRow {
    readonly name: string
    readonly overrides?: Overrides
    /** Through the handshake first (default). */
    readonly started?: boolean
    readonly given: (b: FakeBench) => void
    readonly next: number
  }
  const rows: ReadonlyArray<DeadlineRow> = [
    { name: "idle: none", given: () => {}, next: Infinity },
    { name: "startup", started: false, given: (b) => b.at(5).input((m, now) => m.start(now)), next: 1005 },
    {
      name: "delivery, while a write is in flight (earlier than startup)",
      started: false,
      given: (b) => {
        b.autoWrite = false
        b.input((m, now) => m.start(now))
        b.at(7).take()
      },
      next: 57
    },
    { name: "control", given: (b) => b.at(3).input((m, now) => m.control(now, {})), next: 103 },
    { name: "stall (before turn and ack)", given: (b) => running(b, false), next: 300 },
    { name: "stall, acknowledged", given: (b) => running(b), next: 1000 },
    {
      name: "turn, when it comes before the stall",
      overrides: { deadlines: { turn: 800, ack: 900 } },
      given: (b) => running(b),
      next: 800
    },
    {
      name: "ack, once only",
      given: (b) => {
        running(b, false)
        b.at(300).tick()
      },
      next: 1000
    },
    {
      name: "interrupt (its control answered)",
      given: (b) => {
        running(b)
        b.at(10)
        interrupt(b)
        b.cli(I.controlOk(1))
      },
      next: 210
    },
    {
      name: "policy decision",
      given: (b) => {
        b.at(20)
        permission(b)
      },
      next: 520
    },
    {
      name: "deferred decision",
      given: (b) => {
        b.at(20)
        permission(b)
        b.at(70)
        decided(b, "p1", Permission.defer)
      },
      next: 570
    },
    {
      name: "awaiting a decision: no stall deadline",
      overrides: { deadlines: { permission: 5000 } },
      given: (b) => {
        running(b)
        permission(b)
      },
      next: 5000
    },
    {
      name: "host request",
      given: (b) => {
        b.at(30)
        b.cli(I.hostRequest("h1"))
      },
      next: 130
    },
    {
      name: "log summary",
      given: (b) => {
        b.at(40)
        b.cli(I.malformed(), I.malformed(), I.malformed())
      },
      next: 1040
    },
    {
      name: "the earliest of several",
      given: (b) => {
        running(b)
        b.at(950).cli(I.text("x"))
        b.cli(I.hostRequest("h1"))
        control(b)
      },
      next: 1050
    },
    {
      name: "a write due before a control",
      given: (b) => {
        b.autoWrite = false
        control(b)
        b.take()
      },
      next: 50
    },
    {
      name: "a stall due before a host request",
      given: (b) => {
        running(b)
        b.at(950).cli(I.hostRequest("h1"))
      },
      next: 1000
    },
    {
      name: "resolved requests no longer count",
      given: (b) => {
        permission(b)
        answer(b, "p1")
      },
      next: Infinity
    }
  ]
  for (const row of rows) {
    it(row.name, () => {
      const b = fake(row.overrides, row.started ?? true)
      row.given(b)
      assert.strictEqual(b.m.nextDeadline(), row.next)
    })
  }

  it("a tick at each deadline moves it: the driver's timer never spins", () => {
    const b = fake({ deadlines: { permission: 700 } })
    running(b, false)
    b.cli(I.hostRequest("h1"))
    control(b)
    b.cli(I.malformed(), I.malformed(), I.malformed())
    permission(b)
    let previous = -1
    for (let i = 0; i < 20 && Number.isFinite(b.m.nextDeadline()); i++) {
      const next = b.m.nextDeadline()
      assert.isAbove(next, previous)
      b.tickAtDeadline()
      previous = next
      assert.isAbove(b.m.nextDeadline(), next)
    }
  })
})

// --- what events carry -----------------------------------------------------------------------------------------

describe("event payloads", () => {
  it("a turn's end: its usage and cost, then its result with the turn's id and the raw frame", () => {
    const b = fake()
    running(b)
    b.cli({
      ...I.end(),
      result: { ...(I.end() as { result: object }).result, totalCostUsd: 0.5 }
    } as never)
    const [usage, completed] = b.events().filter((e) => e._tag === "Usage" || e._tag === "TurnCompleted")
    assert.deepStrictEqual(usage, {
      _tag: "Usage",
      turnId: "t1",
      raw: undefined,
      usage: { inputTokens: 1, outputTokens: 2, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      totalCostUsd: 0.5
    } as never)
    assert.strictEqual(completed._tag, "TurnCompleted")
    if (completed._tag === "TurnCompleted") {
      assert.deepStrictEqual(completed.raw, { type: "result" })
      assert.strictEqual(completed.result.turnId, "t1")
      assert.strictEqual(completed.result.text, "done")
    }
    const settle = b.outputs().find((o) => o._tag === "Settle")
    assert.deepStrictEqual(
      settle?._tag === "Settle" && settle.exit._tag === "Success" && settle.exit.value,
      (completed as any).result
    )
  })

  it("a permission request: the request with its turn, and the CLI's raw frame", () => {
    const b = fake()
    running(b)
    b.cli(I.permission("p1"))
    const requested = b.events().find((e) => e._tag === "PermissionRequested")!
    assert.deepStrictEqual(requested.raw, { requestId: "p1" })
    if (requested._tag === "PermissionRequested") {
      assert.deepStrictEqual(requested.request, {
        requestId: "p1",
        kind: "tool",
        toolName: "Bash",
        toolUseId: "tool-p1",
        input: { command: "touch x" },
        description: undefined,
        raw: { requestId: "p1" },
        turnId: "t1"
      })
    }
    const decide = b.outputs().find((o) => o._tag === "Decide")
    assert.deepStrictEqual(decide?._tag === "Decide" && decide.request, (requested as any).request)
  })

  it("an attributed frame keeps every field the provider gave it", () => {
    const b = fake()
    running(b)
    b.cli({ _tag: "Frame", type: "x", subtype: "y", raw: { type: "x", extra: [1] }, turnId: undefined })
    assert.deepStrictEqual(b.events().at(-1), {
      _tag: "Frame",
      type: "x",
      subtype: "y",
      raw: { type: "x", extra: [1] },
      turnId: "t1"
    } as never)
  })

  it("the exit: its status and the CLI's last stderr", () => {
    const b = fake()
    exited(b, 3, "tail")
    assert.deepStrictEqual(b.events().at(-1), {
      _tag: "Exit",
      turnId: undefined,
      raw: undefined,
      status: { _tag: "Exited", code: 3 },
      stderrTail: "tail"
    } as never)
  })

  it("status events name the running turn", () => {
    const b = fake()
    running(b)
    assert.deepStrictEqual(
      b.events().filter((e) => e._tag === "Status").at(-1),
      { _tag: "Status", turnId: "t1", raw: undefined, status: "running" } as never
    )
  })
})

// --- how many resolved requests are remembered ------------------------------------------------------------------

describe("resolved permission requests", () => {
  const answerAll = (b: FakeBench, n: number) => {
    for (let i = 0; i < n; i++) {
      b.cli(I.permission(`p${i}`))
      answer(b, `p${i}`)
    }
  }

  it("up to 1024 are remembered, so a second answer says AlreadyResolved", () => {
    const b = fake()
    answerAll(b, 1024)
    assert.strictEqual(describeError(answer(b, "p0")), "PermissionAlreadyResolved(Decided)")
  })

  it("past 1024 the oldest resolved ones are forgotten down to 512; pending ones never are", () => {
    const b = fake()
    b.cli(I.permission("pending"))
    answerAll(b, 1024)
    assert.strictEqual(describeError(answer(b, "p0")), "PermissionNotFound")
    assert.strictEqual(describeError(answer(b, "p512")), "PermissionNotFound")
    assert.strictEqual(describeError(answer(b, "p513")), "PermissionAlreadyResolved(Decided)")
    assert.deepStrictEqual(b.m.pendingPermissions().map((r) => r.requestId), ["pending"])
  })
})

describe("a turn's first output", () => {
  const message = (turnId?: string): Provider.Item => ({ _tag: "AssistantMessage", turnId, raw: {}, text: "m" })
  const toolUse = (turnId?: string): Provider.Item => ({
    _tag: "ToolUse",
    turnId,
    raw: {},
    toolUseId: "u1",
    name: "Bash",
    input: {}
  })
  const firstOutputOf = (items: ReadonlyArray<readonly [number, Provider.Item]>): number | undefined => {
    const b = fake(undefined, true)
    const turn = running(b)
    for (const [ms, item] of items) {
      b.at(ms)
      b.cli(item)
    }
    return turn.firstOutputAt
  }

  it("is when the first text, message or tool use of the turn arrives, named or not; nothing else counts", () => {
    assert.strictEqual(firstOutputOf([[10, I.frame("status")], [20, I.text("a")], [30, I.text("b")]]), 20)
    assert.strictEqual(firstOutputOf([[10, I.frame("status")], [15, message()], [30, I.text("b")]]), 15)
    assert.strictEqual(firstOutputOf([[10, I.frame("status")], [17, toolUse()], [30, message()]]), 17)
    assert.strictEqual(firstOutputOf([[12, I.text("a", "t1")], [30, I.text("b", "t1")]]), 12)
    assert.strictEqual(firstOutputOf([[10, I.frame("status")], [11, I.frame("status", "t1")]]), undefined)
    assert.strictEqual(
      firstOutputOf([[10, I.sessionFrame("status")], [11, { ...I.text("x"), scope: "session" } as Provider.Item]]),
      undefined
    )
  })
})

// --- rules `pnpm mutate` found untested ---------------------------------------------------------------------------

table("limits hit", [
  {
    name: "a limit hit during a turn is an event of that turn, with the limit's numbers",
    given: (b) => running(b),
    when: (b) => b.input((m) => m.limitHit({ limit: "memory", count: 2, max: 1024 })),
    then: ["LimitHit@t1"],
    after: (b) =>
      assert.deepStrictEqual(b.events().at(-1), {
        _tag: "LimitHit",
        turnId: "t1",
        raw: undefined,
        limit: "memory",
        count: 2,
        max: 1024
      } as never)
  },
  {
    name: "a limit hit while idle belongs to no turn",
    when: (b) => b.input((m) => m.limitHit({ limit: "processes", count: 1, max: 64 })),
    then: ["LimitHit"]
  }
])

table("stdout during a close", [
  {
    name: "stdout ends during a close, before the exit: the close goes on, nothing is retired",
    given: (b) => {
      running(b)
      b.input((m, now) => m.close(now, "closed"))
    },
    when: (b) => b.input((m, now) => m.stdoutEnded(now)),
    then: [],
    after: (b) => assert.isUndefined(b.m.retiredBecause)
  }
])

describe("the CLI's exit as the turn's error", () => {
  const errorOf = (
    status: { readonly _tag: "Exited"; readonly code: number } | {
      readonly _tag: "Signaled"
      readonly signal: string
      readonly cause?: "out-of-memory"
    }
  ) => {
    const b = fake()
    running(b)
    b.input((m, now) => m.exited(now, status, "tail"))
    const failed = b.events().find((e) => e._tag === "TurnFailed")
    // The fields a host reads (and encodes), and the error's `cause`: what an OOM kill sets, and nothing else.
    return failed?._tag === "TurnFailed" ? [{ ...failed.error }, (failed.error as Error).cause] : undefined
  }

  it("carries the exit's code or signal, and an OOM kill as its cause (and no cause otherwise)", () => {
    assert.deepStrictEqual(errorOf({ _tag: "Exited", code: 3 }), [{
      _tag: "CliExited",
      exit: "exit code 3",
      code: 3,
      signal: null,
      stderrTail: "tail",
      acknowledged: true
    }, undefined] as never)
    assert.deepStrictEqual(errorOf({ _tag: "Signaled", signal: "SIGTERM" }), [{
      _tag: "CliExited",
      exit: "signal SIGTERM",
      code: null,
      signal: "SIGTERM",
      stderrTail: "tail",
      acknowledged: true
    }, undefined] as never)
    assert.deepStrictEqual(errorOf({ _tag: "Signaled", signal: "SIGKILL", cause: "out-of-memory" }), [{
      _tag: "CliExited",
      exit: "signal SIGKILL, out of memory: the session's memory limit",
      code: null,
      signal: "SIGKILL",
      stderrTail: "tail",
      acknowledged: true
    }, "out-of-memory"] as never)
  })
})

table("permission answers, once more", [
  {
    name: "an answer to an unknown request says which request it did not find",
    when: (b) => (answer(b, "p9") as { readonly requestId: string }).requestId,
    then: [],
    returns: "p9"
  }
])

table("an interrupt's deadlines", [
  {
    name: "an interrupt and its request due at the same time: the interrupt's own timeout decides",
    overrides: { deadlines: { control: 200 } },
    given: (b) => {
      running(b)
      b.at(10)
      interrupt(b)
    },
    when: (b) => b.at(210).tick(),
    then: [
      ...retiredTurn(
        "interrupt-timeout",
        "turn t1 did not settle within 200 ms of its interrupt (host); the session was retired",
        "InterruptTimeout(host,acknowledged)"
      ),
      "interrupt waiter 1 retired",
      "teardown"
    ]
  }
])

describe("deadlines while an interrupt runs", () => {
  it("only the interrupt's own deadline counts, not the turn's", () => {
    const b = fake({ deadlines: { turn: 150 } })
    running(b)
    b.at(10)
    interrupt(b)
    b.cli(I.controlOk(1))
    assert.strictEqual(b.m.nextDeadline(), 210)
  })
})

describe("the writer's wake-up", () => {
  const flushes = (b: FakeBench) => b.outputs().flatMap((o) => o._tag === "Flush" ? [o.deferred] : [])

  it("is deferred for an interrupt's line (a result racing it may drop it), never for a prompt's", () => {
    const b = fake()
    running(b)
    // The handshake's line, then the prompt's.
    assert.deepStrictEqual(flushes(b), [false, false])
    interrupt(b)
    assert.deepStrictEqual(flushes(b), [false, false, true])
  })
})

describe("a prompt dropped from the outbox", () => {
  it("takes only its own line: what waits behind it is still written", () => {
    const b = fake()
    b.autoWrite = false
    control(b)
    assert.strictEqual(b.take(), "control #1")
    const turn = send(b) as Machine.Turn
    control(b)
    assert.strictEqual(interrupt(b, turn), "interrupted")
    b.written()
    assert.strictEqual(b.take(), "control #2")
  })
})
