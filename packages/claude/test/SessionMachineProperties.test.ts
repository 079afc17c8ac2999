import { assert, describe, it } from "@effect/vitest"
import * as Permission from "@tether/core/Permission"
import type { SessionEvent } from "@tether/core/SessionEvent"
import * as fc from "fast-check"
import type * as Machine from "../../core/src/internal/session/machine.ts"
import { Bench, describeRecord } from "../../core/test/support/MachineHarness.ts"
import * as ClaudeMachine from "../src/internal/machine.ts"
import { F, line } from "./support/ClaudeFrames.ts"

// The session machine over Claude's protocol machine, driven by random sequences of CLI frames (built with the
// codec's encoders), host commands (send, queue, interrupt, answer, decide, control, handle, close, retire), the
// writer's progress and failures, process exits and clock steps. The clock is driven as the driver's timer drives
// it: whenever it passes the machine's next deadline, the machine ticks there. Invariants, checked after every
// step and once the session has been left to its deadlines:
// - every turn settles exactly once, by its deadlines at the latest (turn + interrupt after it started);
// - a turn's events come in their order (queued, started, acknowledged, terminal) and each settlement follows its
//   terminal event; outputs are stamped in order; no status after "failed";
// - every deadline is honoured: after a tick nothing it bounds is still pending past it;
// - nothing after Ended;
// - a prompt is written only for the running turn, never while an earlier prompt's turn is unsettled, and at most
//   one write is in flight; the writer is never left asleep with lines waiting;
// - every sender, interrupt waiter and control caller hears back exactly once; the CLI gets at most one answer per
//   request.

const deadlines = {
  startup: 1000,
  // Longer than the interrupt deadline, so that an interrupt whose request was never answered times out as such.
  control: 250,
  delivery: 200,
  ack: 300,
  turn: 3000,
  stall: 1000,
  interrupt: 200,
  permission: 500
}

type Target = "active" | "none" | "other"

type Frame =
  | { readonly kind: "receipt"; readonly target: Target }
  | { readonly kind: "lifecycle"; readonly target: Target }
  | { readonly kind: "replay"; readonly target: Target }
  | { readonly kind: "delta"; readonly target: Target }
  | { readonly kind: "init" }
  | { readonly kind: "result"; readonly target: Target; readonly outcome: "success" | "interrupted" | "api" | "max" }
  | { readonly kind: "permission" }
  | { readonly kind: "cancel"; readonly which: number }
  | { readonly kind: "hook" }
  | { readonly kind: "answer"; readonly which: number; readonly ok: boolean }
  | { readonly kind: "session" }
  | { readonly kind: "malformed" }
  | { readonly kind: "unknown" }

type Command =
  | { readonly _tag: "cli"; readonly frame: Frame }
  | { readonly _tag: "send"; readonly queue: boolean; readonly invalid: boolean }
  /** Interrupts a turn: a queued one (`queued`, when there is one) or any the session accepted. */
  | { readonly _tag: "interrupt"; readonly which: number; readonly queued: boolean }
  | { readonly _tag: "answer"; readonly which: number; readonly verdict: "allow" | "deny" | "deny+interrupt" }
  | { readonly _tag: "decide"; readonly which: number; readonly decision: "allow" | "deny" | "defer" | "fail" }
  | { readonly _tag: "control"; readonly valid: boolean }
  | { readonly _tag: "handle"; readonly which: number; readonly ok: boolean }
  | { readonly _tag: "close" }
  | { readonly _tag: "retire" }
  | { readonly _tag: "exit"; readonly code: number }
  /** The pipe stops taking lines (they stay in flight until `write`) or flows again (each is written at once). */
  | { readonly _tag: "pipe"; readonly stuck: boolean }
  | { readonly _tag: "write" }
  | { readonly _tag: "writeFailed" }
  | { readonly _tag: "abandon" }
  /** The clock moves; `drain`: the pipe took every pending line first (else writes stay in flight). */
  | { readonly _tag: "advance"; readonly ms: number; readonly drain: boolean }

const target = fc.constantFrom<Target>("active", "active", "active", "none", "other")
const which = fc.nat({ max: 7 })

const frameArb: fc.Arbitrary<Frame> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("receipt" as const), target }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("lifecycle" as const), target }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("replay" as const), target }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("delta" as const), target }) },
  { weight: 1, arbitrary: fc.constant({ kind: "init" as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("result" as const),
      target,
      outcome: fc.constantFrom("success" as const, "interrupted" as const, "api" as const, "max" as const)
    })
  },
  { weight: 3, arbitrary: fc.constant({ kind: "permission" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("cancel" as const), which }) },
  { weight: 2, arbitrary: fc.constant({ kind: "hook" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("answer" as const), which, ok: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "session" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "malformed" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "unknown" as const }) }
)

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 12, arbitrary: frameArb.map((frame) => ({ _tag: "cli" as const, frame })) },
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("send" as const),
      queue: fc.boolean(),
      invalid: fc.constantFrom(false, false, false, false, true)
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("interrupt" as const), which, queued: fc.boolean() })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("answer" as const),
      which,
      verdict: fc.constantFrom("allow" as const, "deny" as const, "deny+interrupt" as const)
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("decide" as const),
      which,
      decision: fc.constantFrom("allow" as const, "deny" as const, "defer" as const, "fail" as const)
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("control" as const), valid: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("handle" as const), which, ok: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "close" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "retire" as const }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, 143).map((code) => ({ _tag: "exit" as const, code })) },
  { weight: 2, arbitrary: fc.boolean().map((stuck) => ({ _tag: "pipe" as const, stuck })) },
  { weight: 4, arbitrary: fc.constant({ _tag: "write" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "writeFailed" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "abandon" as const }) },
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("advance" as const),
      ms: fc.integer({ min: 1, max: 1500 }),
      drain: fc.constantFrom(true, true, true, false)
    })
  }
)

const scenarioArb = fc.record({
  commands: fc.array(commandArb, { minLength: 1, maxLength: 60 }),
  /** Once the commands are done: the pipe drains (writes finish) or stays stuck. */
  pipeStuck: fc.boolean()
})

/** The test's own bookkeeping of what the machine was asked and what it answered. */
class Run {
  readonly b = new Bench(ClaudeMachine.make({ hooks: {}, initialize: undefined, maxLineLength: 100_000 }), {
    deadlines,
    queueCapacity: 2
  })
  /** Every turn the machine accepted, in order. */
  readonly turns: Array<Machine.Turn> = []
  readonly permissionIds: Array<string> = []
  readonly hostRequestIds: Array<string> = []
  readonly waiters: Array<number> = []
  readonly refs: Array<number> = []
  /** Requests the host deferred while the policy was still deciding, and when. */
  readonly deferredAt = new Map<string, number>()
  /** Index of the first record not yet checked. */
  private checked = 0
  private ids = 0
  ended = false
  exited = false
  stuck = false
  /** The prompt lines the writer took, by turn id, in order. */
  readonly prompts: Array<string> = []
  readonly settledAt = new Map<string, number>()
  readonly startedAt = new Map<string, number>()
  readonly terminalAt = new Map<string, number>()

  constructor() {
    this.b.autoWrite = false
    this.b.input((m, now) => m.start(now))
    this.pump()
    this.drain()
    this.b.step((m, now) => m.receive(now, line(F.initOk())))
    this.check()
  }

  get m() {
    return this.b.m
  }

  private pick<A>(all: ReadonlyArray<A>, index: number): A | undefined {
    return all.length === 0 ? undefined : all[index % all.length]
  }

  /** The turn a frame names: the CLI can only name a turn whose prompt it was sent. */
  private turnId(t: Target): string | undefined {
    if (t === "none") return undefined
    const active = this.m.active
    if (t === "active") return active !== undefined && active.taken ? active.id : undefined
    return this.prompts.length === 0 ? "t0" : this.prompts[this.ids % this.prompts.length]
  }

  private frame(frame: Frame): string {
    this.ids++
    switch (frame.kind) {
      case "receipt":
        return line(F.lifecycle("queued", this.turnId(frame.target) ?? "t0"))
      case "lifecycle":
        return line(F.lifecycle("completed", this.turnId(frame.target) ?? "t0"))
      case "replay":
        return line(F.replay(this.turnId(frame.target) ?? "t0"))
      case "delta":
        return line(F.delta("x", this.turnId(frame.target)))
      case "init":
        return line(F.init())
      case "result": {
        const id = this.turnId(frame.target)
        const named = id === undefined ? {} : { user_message_uuid: id }
        switch (frame.outcome) {
          case "success":
            return line(F.result(named))
          case "interrupted":
            return line(
              F.result({
                ...named,
                subtype: "error_during_execution",
                is_error: true,
                terminal_reason: "aborted_tools"
              })
            )
          case "api":
            return line(F.result({ ...named, is_error: true, api_error_status: 529 }))
          case "max":
            return line(F.result({ ...named, subtype: "error_max_turns", is_error: true }))
        }
      }
      case "permission": {
        const id = `perm-${this.ids}`
        this.permissionIds.push(id)
        return line(F.canUseTool(id))
      }
      case "cancel": {
        const all = [...this.permissionIds, ...this.hostRequestIds]
        return line(F.cancel(this.pick(all, frame.which) ?? "nobody"))
      }
      case "hook": {
        const id = `hook-${this.ids}`
        this.hostRequestIds.push(id)
        return line(F.hook(id))
      }
      case "answer": {
        const ref = this.pick(this.refs, frame.which) ?? frame.which + 1
        return line(frame.ok ? F.controlOk(`tether_${ref}`, {}) : F.controlError(`tether_${ref}`, "no"))
      }
      case "session":
        return line(F.system("session_state_changed", { state: "idle" }))
      case "malformed":
        return "{not json"
      case "unknown":
        return JSON.stringify({ type: "brand_new", n: this.ids })
    }
  }

  run(command: Command): void {
    const b = this.b
    switch (command._tag) {
      case "cli": {
        // The driver reports the exit once stdout has ended: no line comes after it.
        if (this.exited) break
        const text = this.frame(command.frame)
        b.input((m, now) => m.receive(now, text))
        break
      }
      case "send": {
        const turn = b.input((m, now) =>
          m.send(now, command.invalid ? [{ type: "x", n: 1n }] : "p", command.queue, true)
        )
        if (!("_tag" in turn)) this.turns.push(turn)
        break
      }
      case "interrupt": {
        const turn = (command.queued ? this.pick(this.m.queue, command.which) : undefined) ??
          this.pick(this.turns, command.which)
        if (turn === undefined) break
        const outcome = b.input((m, now) => m.interrupt(now, turn, "host"))
        if (typeof outcome !== "string") this.waiters.push(outcome.waiter)
        break
      }
      case "answer": {
        const id = this.pick(this.permissionIds, command.which)
        if (id === undefined) break
        const verdict = command.verdict === "allow"
          ? Permission.allow()
          : Permission.deny("no", { interrupt: command.verdict === "deny+interrupt" })
        b.input((m, now) => m.answerPermission(now, id, verdict))
        break
      }
      case "decide": {
        const id = this.pick(this.permissionIds, command.which)
        if (id === undefined) break
        if (command.decision === "fail") {
          b.input((m, now) => m.policyFailed(now, id))
          break
        }
        const deciding = this.m.pendingPermissions().some((r) => r.requestId === id) && !this.deferredAt.has(id)
        if (command.decision === "defer" && deciding) this.deferredAt.set(id, b.now)
        const decision = command.decision === "allow"
          ? Permission.allow()
          : command.decision === "deny"
          ? Permission.deny("no")
          : Permission.defer
        b.input((m, now) => m.decided(now, id, decision))
        break
      }
      case "control": {
        const ref = b.input((m, now) => m.control(now, command.valid ? { subtype: "get_settings" } : { subtype: 1n }))
        if (typeof ref === "number") this.refs.push(ref)
        break
      }
      case "handle": {
        const id = this.pick(this.hostRequestIds, command.which)
        if (id === undefined) break
        b.input((m, now) =>
          m.handled(now, id, command.ok ? { _tag: "Success", payload: {} } : { _tag: "Error", message: "no" })
        )
        break
      }
      case "close":
        b.input((m, now) => m.close(now, "closed"))
        break
      case "retire":
        b.input((m, now) => m.retire(now, "the host retired it", undefined, "host"))
        break
      case "exit":
        this.exited = true
        b.input((m, now) => m.exited(now, { _tag: "Exited", code: command.code }, ""))
        break
      case "pipe":
        this.stuck = command.stuck
        break
      case "write":
        if (b.inFlight !== undefined) b.written()
        break
      case "writeFailed":
        if (b.inFlight !== undefined) {
          b.inFlight = undefined
          b.input((m, now) => m.writeFailed(now, "EPIPE"))
        }
        break
      case "abandon":
        if (b.inFlight !== undefined) {
          b.inFlight = undefined
          b.input((m, now) => m.abandoned(now))
        }
        break
      case "advance":
        if (command.drain) this.drain()
        this.advance(b.now + command.ms)
        break
    }
    this.check()
    this.pump()
    this.check()
    if (!this.stuck) this.drain()
  }

  /** The driver's writer: woken by Flush, one line in flight. Checks the prompt rules at each take. */
  pump(): void {
    const b = this.b
    if (b.inFlight !== undefined) {
      // One write at a time: the machine hands out nothing while a line it handed out is in flight. (Once a close
      // or a retirement released it, the machine forgets it; the driver's one writer still finishes it first.)
      const machineInFlight = (this.m as unknown as { inFlight: unknown }).inFlight !== undefined
      if (machineInFlight) assert.isUndefined(this.m.take(b.now), "a second write while one is in flight")
      return
    }
    if (!b.writerAwake) return
    const taken = b.take()
    if (taken === undefined) return
    const frame = JSON.parse(taken)
    if (frame.type === "user") {
      // A prompt is the running turn's, and every earlier prompt's turn has settled.
      assert.strictEqual(frame.uuid, this.m.active?.id, "a prompt written for a turn that is not running")
      for (const earlier of this.prompts) {
        assert.isTrue(this.settledAt.has(earlier), `prompt ${frame.uuid} written while ${earlier} runs`)
      }
      this.prompts.push(frame.uuid)
    }
  }

  /** The pipe takes every line waiting, at this instant. */
  drain(): void {
    for (let guard = 0; guard < 100 && this.b.inFlight !== undefined; guard++) {
      this.b.written()
      this.check()
      this.pump()
      this.check()
    }
  }

  /** Moves the clock to `to`, ticking at every deadline on the way (as the driver's timer does). */
  advance(to: number): void {
    const b = this.b
    for (let guard = 0; guard < 1000; guard++) {
      const next = this.m.nextDeadline()
      if (next > to) break
      b.at(Math.max(b.now, next))
      b.input((m, now) => m.tick(now))
      this.check()
      this.pump()
      this.check()
      // The tick did what its deadline bounds: the deadline moved on (else the driver's timer would spin).
      assert.isAbove(this.m.nextDeadline(), b.now, "a deadline still due after its tick")
    }
    b.at(to)
  }

  /** The invariants over what the machine did since the last check. */
  check(): void {
    const records = this.b.records
    const events: Array<SessionEvent> = []
    let lastAt = 0
    for (let i = this.checked; i < records.length; i++) {
      const r = records[i]
      if (this.ended && r._tag !== "Wrote") assert.fail(`after Ended: ${describeRecord(r)}`)
      if (r._tag === "Event") {
        this.event(r.event, r.time)
        events.push(r.event)
      } else if (r._tag === "Output") {
        const o = r.output
        assert.isAtLeast(o.at, lastAt, "outputs stamped out of order")
        lastAt = o.at
        this.output(o, r.time)
      }
    }
    this.checked = records.length
    this.deadlinesHonoured()
    // The writer is never asleep with lines waiting for it.
    if (!this.b.writerAwake && this.b.inFlight === undefined) {
      assert.strictEqual((this.m as unknown as { outbox: Array<unknown> }).outbox.length, 0, "lines left unwritten")
    }
  }

  private readonly seen = new Map<string, Array<string>>()
  private failed = false

  private event(e: SessionEvent, time: number): void {
    if (e._tag === "Status") {
      assert.isFalse(this.failed, `status ${e.status} after failed`)
      if (e.status === "failed") this.failed = true
    }
    const turnId = e.turnId
    if (turnId === undefined || turnId === "" || !this.turns.some((t) => t.id === turnId)) return
    const lifecycle = ["TurnQueued", "TurnStarted", "TurnAcknowledged", "TurnCompleted", "TurnFailed"]
    const seen = this.seen.get(turnId) ?? []
    this.seen.set(turnId, seen)
    const terminal = seen.includes("TurnCompleted") || seen.includes("TurnFailed")
    // Nothing of the turn's own after its end (frames that name it may still come: they are the CLI's).
    if (terminal && e._tag !== "Frame" && e._tag !== "TextDelta") {
      assert.fail(`${e._tag}@${turnId} after its terminal event`)
    }
    if (lifecycle.includes(e._tag)) {
      assert.notInclude(seen, e._tag, `${e._tag}@${turnId} twice`)
      if (e._tag === "TurnStarted") {
        this.startedAt.set(turnId, time)
        assert.notInclude(seen, "TurnAcknowledged")
      }
      if (e._tag === "TurnAcknowledged") assert.include(seen, "TurnStarted", "acknowledged before started")
      if (e._tag === "TurnCompleted" || e._tag === "TurnFailed") {
        assert.isFalse(terminal, `two terminal events for ${turnId}`)
        assert.isTrue(seen.includes("TurnStarted") || seen.includes("TurnQueued"))
        this.terminalAt.set(turnId, time)
      }
      seen.push(e._tag)
    }
  }

  private readonly controlsDone = new Set<number>()
  private readonly interruptsDone = new Set<number>()
  private readonly written = new Set<string>()

  private output(o: Machine.Output, time: number): void {
    switch (o._tag) {
      case "Settle": {
        const id = o.turn.id
        assert.isFalse(this.settledAt.has(id), `turn ${id} settled twice`)
        assert.isTrue(this.terminalAt.has(id), `turn ${id} settled before its terminal event`)
        this.settledAt.set(id, time)
        const started = this.startedAt.get(id)
        if (started !== undefined) {
          assert.isAtMost(time, started + deadlines.turn + deadlines.interrupt, `turn ${id} settled late`)
        }
        break
      }
      case "Written":
        assert.isFalse(this.written.has(o.turn.id), `sender of ${o.turn.id} released twice`)
        this.written.add(o.turn.id)
        break
      case "ControlDone":
        assert.isFalse(this.controlsDone.has(o.ref), `control ${o.ref} settled twice`)
        this.controlsDone.add(o.ref)
        break
      case "InterruptDone":
        assert.isFalse(this.interruptsDone.has(o.waiter), `interrupt waiter ${o.waiter} told twice`)
        this.interruptsDone.add(o.waiter)
        break
      case "Decide":
        this.decideAt.set(o.request.requestId, time)
        break
      case "Ended":
        this.ended = true
        break
      default:
        break
    }
  }

  /** Nothing a deadline bounds is still pending past it (the bench ticks at every deadline it passes). */
  private deadlinesHonoured(): void {
    const now = this.b.now
    const turn = this.m.active
    if (turn !== undefined) {
      if (turn.interruptAt === undefined) {
        assert.isBelow(now, turn.startedAt + deadlines.turn, "a turn past its deadline is not being interrupted")
        // A turn that waits on the host (a permission, or an answer to a request bound to the turn) is not stalled.
        if (this.m.status !== "awaiting-permission" && !this.m.awaitingHost()) {
          assert.isBelow(now, turn.lastProgress + deadlines.stall, "a stalled turn is not being interrupted")
        }
      } else {
        assert.isBelow(now, turn.interruptAt, "an interrupted turn past its interrupt deadline")
      }
    }
    for (const request of this.m.pendingPermissions()) {
      const deferred = this.deferredAt.get(request.requestId)
      const requested = this.decideAt.get(request.requestId)!
      assert.isBelow(now, (deferred ?? requested) + deadlines.permission, `permission ${request.requestId} past due`)
    }
  }

  /** When each permission request came (its Decide). */
  private readonly decideAt = new Map<string, number>()

  /** The session left to itself: the CLI silent, the pipe draining (or stuck), the clock running to each deadline. */
  quiesce(pipeStuck: boolean): void {
    for (let guard = 0; guard < 200; guard++) {
      if (!pipeStuck && this.b.inFlight !== undefined) {
        this.b.written()
        this.pump()
        this.check()
        continue
      }
      const next = this.m.nextDeadline()
      if (!Number.isFinite(next)) break
      this.advance(next)
    }
    assert.strictEqual(this.m.nextDeadline(), Infinity, "deadlines never run out")
    for (const turn of this.turns) {
      assert.isTrue(this.settledAt.has(turn.id), `turn ${turn.id} never settled`)
      // A sender waits only for a started turn's prompt: it is released, written or not.
      if (this.startedAt.has(turn.id)) assert.isTrue(this.written.has(turn.id), `sender of ${turn.id} never released`)
    }
    for (const waiter of this.waiters) assert.isTrue(this.interruptsDone.has(waiter), `waiter ${waiter} never told`)
    for (const ref of this.refs) assert.isTrue(this.controlsDone.has(ref), `control ${ref} never settled`)
  }

  /** The CLI got at most one answer per request it made. */
  answersOnce(): void {
    const answered = new Map<string, number>()
    for (const text of this.b.wrote()) {
      const frame = JSON.parse(text)
      if (frame.type !== "control_response") continue
      const id = frame.response.request_id
      answered.set(id, (answered.get(id) ?? 0) + 1)
    }
    for (const [id, count] of answered) assert.strictEqual(count, 1, `request ${id} answered ${count} times`)
  }
}

const runScenario = (scenario: { readonly commands: ReadonlyArray<Command>; readonly pipeStuck: boolean }) => {
  const run = new Run()
  for (const command of scenario.commands) {
    run.run(command)
  }
  run.quiesce(scenario.pipeStuck)
  run.answersOnce()
  return run
}

// `pnpm mutate` runs this once per mutant: fewer runs from a fixed seed there (vitest.mutate.config.ts), so that a
// mutant is killed or not the same way every time.
const numRuns = Number(process.env.TETHER_PROPERTY_RUNS ?? 1000)
const seed = process.env.TETHER_PROPERTY_SEED === undefined ? undefined : Number(process.env.TETHER_PROPERTY_SEED)

// A thousand scenarios of pure computation: about 2 s on a quiet 2-core machine, several times that on a loaded one.
describe("session machine properties", { timeout: 60_000 }, () => {
  it("random frames, commands, writes and clock steps keep every guarantee", () => {
    const reached = new Set<string>()
    const check = (runs: number, seed: number | undefined) =>
      fc.assert(
        fc.property(scenarioArb, (scenario) => {
          const run = runScenario(scenario)
          for (const r of run.b.records) {
            if (r._tag === "Output" && r.output._tag === "Settle") {
              reached.add(describeRecord(r).split(" ").slice(2).join(" "))
            }
          }
        }),
        { numRuns: runs, ...(seed === undefined ? {} : { seed }) }
      )
    check(numRuns, seed)
    if (numRuns < 1000) return
    // The generators reach every way a turn ends (a property that only ever saw successes would prove little). A
    // random run of a thousand scenarios misses the rarest now and then (seen once on CI); what it missed must come
    // from a run of the same size from a fixed seed, so that the check is of the generators, not of the draw.
    const outcomes = [
      "ok",
      "ApiError(529)",
      "MaxTurnsExceeded",
      "TurnInterrupted(host,written)",
      "TurnInterrupted(host,acknowledged,written)",
      "TurnInterrupted(closed,acknowledged,written)",
      "InterruptTimeout(stall,acknowledged)",
      "DeliveryTimeout(200)",
      "SessionRetired(acknowledged)",
      "SessionUnavailable(failed)"
    ]
    if (outcomes.some((outcome) => !reached.has(outcome))) check(1000, 7)
    for (const outcome of outcomes) {
      assert.include([...reached], outcome)
    }
  })
})
