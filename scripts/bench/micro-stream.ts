/**
 * Micro: the ways a host can read a turn's events off a session's `EventLog`, in one process, no CLI, no session.
 * Per turn, 21 events are published from a macrotask (3 of no turn, then 18 of this one, ending with its terminal
 * event), and the turn is read:
 *
 * - `subscriber`: by one session-wide subscriber (a stream run once, forked), the host awaiting the terminal event;
 * - `stream`: by `EventLog.stream` with the turn's view run with `Stream.runForEach` (what `turn.events` is);
 * - `forEach`: by `EventLog.forEach` with the same view (what `Turn.forEachEvent` does on a local turn);
 * - `floor`: by the cheapest stream that waits once, hands over the turn's 18 events and ends: what any stream run
 *   per turn costs in Effect's machinery alone.
 *
 *   node scripts/bench/micro-stream.ts [turnsPerBlock (2000)] [rounds (5)]   # Effect operations and CPU per turn,
 *                                                                           # every path in turn, interleaved
 *   ONLY=<path> [WARM=50] node scripts/bench/micro-stream.ts [turns (1000)]  # one path in a fresh process: CPU per
 *                                                                           # turn after WARM turns
 *
 * For instructions rather than time (a busy machine moves CPU time; valgrind counts the same run alike to within
 * 0.01% with `--predictable`): the instructions of `turns` turns are the difference of two runs,
 *
 *   ONLY=forEach valgrind --tool=callgrind --callgrind-out-file=/dev/null node --predictable \
 *     scripts/bench/micro-stream.ts 1000    # and the same with 0
 */
import type * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as EventLog from "../../packages/core/src/EventLog.ts"

interface Ev {
  readonly _tag: string
  readonly turnId: string | undefined
}

let ops = 0
const proto = Scheduler.MixedScheduler.prototype as unknown as { shouldYield: (fiber: unknown) => boolean }
const original = proto.shouldYield
proto.shouldYield = function(this: unknown, fiber: unknown) {
  ops++
  return original.call(this, fiber)
}

const scope = Scope.makeUnsafe()
const makeLog = () =>
  Effect.runSync(EventLog.make<Ev>({ ringSize: 512, subscriberBuffer: 256 }).pipe(Scope.provide(scope)))
// One log per path: the session-wide subscriber must not be woken by the other paths' turns.
const subscribed = makeLog()
const log = makeLog()

let turnNo = 0
const eventsOf = (turnId: string): Array<Ev> => {
  const out: Array<Ev> = []
  for (let i = 0; i < 3; i++) out.push({ _tag: "Status", turnId: undefined })
  for (let i = 0; i < 17; i++) out.push({ _tag: i === 8 ? "TextDelta" : "Other", turnId })
  out.push({ _tag: "TurnCompleted", turnId })
  return out
}
const isTerminal = (event: Ev) => event._tag === "TurnCompleted"

// --- the subscriber path -------------------------------------------------------------------------------------
let waiter: (() => void) | undefined
let seen = 0
const deliveries = Effect.runSync(subscribed.subscribe("latest").pipe(Scope.provide(scope)))
Effect.runFork(Stream.runForEach(deliveries, (delivery) =>
  Effect.sync(() => {
    seen++
    if (delivery._tag === "Event" && isTerminal(delivery.event) && waiter !== undefined) {
      const w = waiter
      waiter = undefined
      w()
    }
  })))

const subscriberTurn = async () => {
  const turnId = `t${++turnNo}`
  const events = eventsOf(turnId)
  const done = new Promise<void>((resolve) => (waiter = resolve))
  setImmediate(() => subscribed.publishAllUnsafe(events))
  // The host's one runPromise per turn (session.run waits for its result): a Deferred here.
  await Effect.runPromise(Effect.promise(() => done))
}

// --- the per-turn stream path --------------------------------------------------------------------------------
const turnStream = (turnId: string, after: number, terminal: { seq: number | undefined }) =>
  log.stream({ after }, {
    keep: (event) => event.turnId === turnId,
    last: isTerminal,
    lastSeq: () => terminal.seq
  })

const streamTurn = async () => {
  const turnId = `t${++turnNo}`
  const events = eventsOf(turnId)
  const terminal: { seq: number | undefined } = { seq: undefined }
  const after = log.latestSeqUnsafe()
  setImmediate(() => {
    log.publishAllUnsafe(events)
    terminal.seq = log.latestSeqUnsafe()
  })
  let count = 0
  await Effect.runPromise(
    turnStream(turnId, after, terminal).pipe(
      Stream.runForEach(() => Effect.sync(() => void count++)),
      Effect.ignore
    )
  )
  if (count !== 18) throw new Error(`saw ${count}`)
}

// --- the floor: the cheapest per-turn stream that waits once, then hands over one chunk and ends ---------------
const floorTurn = async () => {
  const turnId = `t${++turnNo}`
  const events = eventsOf(turnId)
  let ready: Array<Ev> | undefined
  let resume: ((effect: Effect.Effect<void>) => void) | undefined
  setImmediate(() => {
    ready = events.filter((e) => e.turnId === turnId)
    resume?.(Effect.void)
  })
  let count = 0
  let state = 0
  const wait = Effect.callback<void>((r) => {
    if (ready !== undefined) return r(Effect.void)
    resume = r
  })
  const pull: Effect.Effect<Arr.NonEmptyReadonlyArray<Ev>, Cause.Done> = Effect.suspend(() => {
    if (state === 1) return Cause.done()
    if (ready === undefined) return Effect.flatMap(wait, () => pull)
    state = 1
    return Effect.succeed(ready as unknown as Arr.NonEmptyReadonlyArray<Ev>)
  })
  await Effect.runPromise(
    Stream.fromPull(Effect.succeed(pull)).pipe(
      Stream.runForEach(() => Effect.sync(() => void count++)),
      Effect.ignore
    )
  )
  if (count !== 18) throw new Error(`floor saw ${count}`)
}

// --- the per-turn forEach path (EventLog.forEach: the same view, no stream run) ---------------------------------
const forEachTurn = async () => {
  const turnId = `t${++turnNo}`
  const events = eventsOf(turnId)
  const terminal: { seq: number | undefined } = { seq: undefined }
  const after = log.latestSeqUnsafe()
  setImmediate(() => {
    log.publishAllUnsafe(events)
    terminal.seq = log.latestSeqUnsafe()
  })
  let count = 0
  await Effect.runPromise(
    Effect.ignore(log.forEach({ after }, {
      keep: (event) => event.turnId === turnId,
      last: isTerminal,
      lastSeq: () => terminal.seq
    }, () => Effect.sync(() => void count++)))
  )
  if (count !== 18) throw new Error(`forEach saw ${count}`)
}

const paths: Record<string, () => Promise<void>> = {
  subscriber: subscriberTurn,
  stream: streamTurn,
  floor: floorTurn,
  forEach: forEachTurn
}
if (process.env.ONLY !== undefined) {
  const turn = paths[process.env.ONLY]!
  for (let i = 0; i < Number(process.env.WARM ?? 50); i++) await turn()
  const n = Number(process.argv[2] ?? 1000)
  const cpu0 = process.cpuUsage()
  for (let i = 0; i < n; i++) await turn()
  const cpu = process.cpuUsage(cpu0)
  console.log(process.env.ONLY, ((cpu.user + cpu.system) / n).toFixed(1))
  process.exit(0)
}
const turns = Number(process.argv[2] ?? 2000)
const rounds = Number(process.argv[3] ?? 5)
const results: Record<string, Array<{ ops: number; cpuUs: number }>> = {
  subscriber: [],
  stream: [],
  floor: [],
  forEach: []
}
for (let r = 0; r < rounds; r++) {
  for (const [name, turn] of Object.entries(paths)) {
    ops = 0
    const cpu0 = process.cpuUsage()
    for (let i = 0; i < turns; i++) await turn()
    const cpu = process.cpuUsage(cpu0)
    results[name]!.push({ ops: ops / turns, cpuUs: (cpu.user + cpu.system) / turns })
  }
}
for (const [name, rows] of Object.entries(results)) {
  console.log(
    `${name.padEnd(11)} ops/turn ${rows.map((r) => r.ops.toFixed(1)).join(" ")}  cpu µs/turn ${
      rows.map((r) => r.cpuUs.toFixed(1)).join(" ")
    }`
  )
}
void seen
await Effect.runPromise(Scope.close(scope, Exit.void))
