/**
 * The soak's schedule: what each worker does next, drawn from a seeded generator, so that a seed gives the same
 * faults, prompts and host behaviour in the same order on every run (which actions a worker reaches in a given
 * duration depends on the machine's speed; the n-th action of worker w does not).
 *
 * Every plan draws the same number of values whatever it turns out to be, so one choice never shifts the ones
 * after it.
 */
import { createHash } from "node:crypto"

/** A generator of numbers in [0, 1): splitmix32, seeded by the run's seed and the worker's index. */
export interface Rng {
  readonly next: () => number
}

export const makeRng = (seed: number, stream: number): Rng => {
  let state = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(stream + 1, 0x85ebca6b)) >>> 0
  return {
    next: () => {
      state = (state + 0x9e3779b9) >>> 0
      let z = state
      z = Math.imul(z ^ (z >>> 16), 0x21f0aaad)
      z = Math.imul(z ^ (z >>> 15), 0x735a2d97)
      z = (z ^ (z >>> 15)) >>> 0
      return z / 4294967296
    }
  }
}

/**
 * The faults a turn can be given (the fast fake's `FAULT:` words, see `packages/testing/src/internal/fakeClaude.ts`):
 *
 * | fault | the fake | what the host should see |
 * | --- | --- | --- |
 * | `none` | answers | the result |
 * | `crash` | exits 3 after the answer's text, before the result | `CliExited`, acknowledged |
 * | `crash-on-read` | exits 3 on reading the prompt, before its receipt | `CliExited`, delivery uncertain |
 * | `hang` | stops doing anything (EOF ignored, SIGTERM ends it) | the stall deadline, an interrupt nobody answers |
 * | `stall` | pauses under the stall timeout, then answers | the result, late |
 * | `stall-long` | pauses for ever (interrupts still work) | `TurnInterrupted` (stall) |
 * | `garbage` | lines that are not JSON, then the answer | the result; protocol errors, rate-limited in the log |
 * | `slow-receipt` | the prompt's receipt comes late (sometimes past the stall timeout) | the result, or a retirement |
 * | `ignore-interrupts` | answers interrupts, goes on; pauses near the stall timeout | the result, `InterruptTimeout` |
 * | `stdout-closed` | closes stdout and goes on running | `SessionRetired` once the close grace is over |
 * | `ignore-sigterm` | ignores SIGTERM from now on, answers | the result; its teardown needs SIGKILL |
 * | `tool` | asks permission for a Bash call; the host's answer is in the plan | the result, or `TurnInterrupted` |
 */
export const faults = [
  "none",
  "crash",
  "crash-on-read",
  "hang",
  "stall",
  "stall-long",
  "garbage",
  "slow-receipt",
  "ignore-interrupts",
  "stdout-closed",
  "ignore-sigterm",
  "tool"
] as const

export type Fault = typeof faults[number]

/** The default weights of the faults (a turn in three gets none). */
export const defaultMix: Readonly<Record<Fault, number>> = {
  none: 34,
  crash: 5,
  "crash-on-read": 3,
  hang: 3,
  stall: 6,
  "stall-long": 4,
  garbage: 7,
  "slow-receipt": 6,
  "ignore-interrupts": 4,
  "stdout-closed": 3,
  "ignore-sigterm": 3,
  tool: 22
}

/**
 * Reads a mix such as `none=5,crash=1,tool=2`: the faults it names get those weights, the others 0. Empty or
 * `default`: {@link defaultMix}.
 */
export const parseMix = (text: string | undefined): Readonly<Record<Fault, number>> => {
  if (text === undefined || text.trim() === "" || text.trim() === "default") return defaultMix
  const mix = Object.fromEntries(faults.map((fault) => [fault, 0])) as Record<Fault, number>
  for (const part of text.split(",")) {
    const [name, weight] = part.split("=").map((s) => s.trim())
    if (!(faults as ReadonlyArray<string>).includes(name!)) {
      throw new Error(`unknown fault "${name}" in the mix (known: ${faults.join(", ")})`)
    }
    const value = Number(weight ?? "1")
    if (!Number.isFinite(value) || value < 0) throw new Error(`bad weight for ${name}: ${weight}`)
    mix[name as Fault] = value
  }
  if (Object.values(mix).every((weight) => weight === 0)) throw new Error("the mix gives every fault weight 0")
  return mix
}

/**
 * How the host answers a permission request (the fake puts the word in the tool's input, the soak's policy reads
 * it): the policy allows, denies, denies and interrupts, fails, takes longer than the permission timeout, or defers
 * and the host answers later through the registry, or never (the permission timeout denies).
 */
export const answers = ["allow", "deny", "deny-interrupt", "fail", "slow", "defer-answer", "defer-expire"] as const

export type Answer = typeof answers[number]

/** What the workers do, as the soak's knobs set it: the faults' weights, and the host's behaviour around a turn. */
export interface Behaviour {
  readonly mix: Readonly<Record<Fault, number>>
  /** Session ids the workers pick from; a hot set of `capacity` of them gets 70% of the actions. */
  readonly ids: number
  readonly capacity: number
  /** Chance that a turn is interrupted by the host, some time under the stall timeout after it started. */
  readonly interruptRate: number
  /** Chance that the turn's session is evicted while the turn runs (half gracefully, half forced). */
  readonly evictRate: number
  /** Chance that an action is an eviction of an id (running or idle) instead of a turn. */
  readonly idleEvictRate: number
  /** The session's stall timeout, in ms (the faults' pauses are sized from it). */
  readonly stallMs: number
  /** The most think time between two actions of a worker, in ms. */
  readonly pauseMs: number
}

export interface Plan {
  readonly worker: number
  readonly index: number
  readonly action: "turn" | "evict" | "force-evict"
  readonly id: string
  readonly fault: Fault
  readonly prompt: string
  readonly answer: Answer
  /** How long after the request the host answers a deferred permission request. */
  readonly answerAfterMs: number
  readonly interruptAfterMs: number | undefined
  readonly evict: { readonly force: boolean; readonly afterMs: number } | undefined
  readonly pauseMs: number
}

const pickWeighted = <K extends string>(weights: Readonly<Record<K, number>>, u: number): K => {
  const entries = Object.entries(weights) as Array<[K, number]>
  const total = entries.reduce((sum, [, weight]) => sum + weight, 0)
  let at = u * total
  for (const [key, weight] of entries) {
    if (at < weight) return key
    at -= weight
  }
  return entries.findLast(([, weight]) => weight > 0)![0]
}

const directive = (fault: Fault, answer: Answer, stallMs: number, u: number, garbage: number): string => {
  switch (fault) {
    case "none":
      return ""
    case "stall":
      return `FAULT:stall=${Math.round(stallMs * (0.2 + 0.5 * u))}`
    case "stall-long":
      return "FAULT:stall"
    case "garbage":
      return `FAULT:garbage=${garbage}`
    case "slow-receipt":
      return `FAULT:slow-receipt=${Math.round(stallMs * 2 * u)}`
    case "ignore-interrupts":
      return `FAULT:ignore-interrupts FAULT:stall=${Math.round(stallMs * (0.5 + 2 * u))}`
    case "tool":
      return `FAULT:tool=${answer}`
    default:
      return `FAULT:${fault}`
  }
}

/** The `index`-th action of worker `worker`. Draws exactly ten values from `rng`. */
export const next = (rng: Rng, worker: number, index: number, behaviour: Behaviour): Plan => {
  const [uAction, uHot, uId, uFault, uSize, uAnswer, uInterrupt, uEvict, uWhen, uPause] = Array.from(
    { length: 10 },
    () => rng.next()
  ) as [number, number, number, number, number, number, number, number, number, number]
  const hot = Math.max(1, Math.min(behaviour.ids, behaviour.capacity))
  const id = `soak-${uHot < 0.7 ? Math.floor(uId * hot) : Math.floor(uId * behaviour.ids)}`
  const action = uAction < behaviour.idleEvictRate
    ? (uAction < behaviour.idleEvictRate / 2 ? "force-evict" : "evict")
    : "turn"
  const fault = pickWeighted(behaviour.mix, uFault)
  const answer = answers[Math.floor(uAnswer * answers.length)]!
  const frames = 1 + Math.floor(uSize * 20)
  const garbage = 1 + Math.floor(uSize * uSize * 200)
  const faultWords = directive(fault, answer, behaviour.stallMs, uSize, garbage)
  const when = Math.round(uWhen * behaviour.stallMs)
  return {
    worker,
    index,
    action,
    id,
    fault,
    prompt: `soak ${worker}.${index} FRAMES:${frames}${faultWords === "" ? "" : ` ${faultWords}`}`,
    answer,
    answerAfterMs: Math.round(uSize * behaviour.stallMs),
    interruptAfterMs: uInterrupt < behaviour.interruptRate ? when : undefined,
    evict: uEvict < behaviour.evictRate ? { force: uEvict < behaviour.evictRate / 2, afterMs: when } : undefined,
    pauseMs: Math.round(uPause * behaviour.pauseMs)
  }
}

/** A short digest of the first `count` plans of each worker: the same seed and knobs give the same digest. */
export const digest = (seed: number, workers: number, count: number, behaviour: Behaviour): string => {
  const hash = createHash("sha256")
  for (let worker = 0; worker < workers; worker++) {
    const rng = makeRng(seed, worker)
    for (let index = 0; index < count; index++) hash.update(JSON.stringify(next(rng, worker, index, behaviour)))
  }
  return hash.digest("hex").slice(0, 16)
}
