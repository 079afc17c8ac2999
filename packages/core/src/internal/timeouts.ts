/**
 * The runtime of `Timeouts`: the defaults, validation and completion of a host's values. A session reads its
 * defaults and validates its record here, so that opening one does not load the public module, whose `config`
 * reader loads `effect/Config` (and with it `effect/Schema`); the public module re-exports these.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { InvalidConfig } from "../TetherError.ts"
import type { Overrides, Timeouts } from "../Timeouts.ts"

/** @internal */
export const defaults: Timeouts = {
  startup: Duration.seconds(60),
  control: Duration.seconds(15),
  delivery: Duration.seconds(10),
  ack: Duration.seconds(30),
  turn: Duration.minutes(30),
  stall: Duration.minutes(5),
  interrupt: Duration.seconds(10),
  permission: Duration.minutes(10),
  closeGrace: Duration.seconds(2),
  termGrace: Duration.seconds(5)
}

/** @internal */
export const names = Object.keys(defaults) as ReadonlyArray<keyof Timeouts>

const isUsable = (duration: Duration.Duration): boolean => Duration.isFinite(duration) && Duration.isPositive(duration)

/** The budgets nested in a turn. */
const inTurn = ["stall", "ack", "interrupt", "permission", "control", "delivery"] as const

/** The budgets nested in the startup (the handshake is a control request, written like any other). */
const inStartup = ["control", "delivery"] as const

const nestedProblem = (nested: keyof Timeouts, parent: keyof Timeouts, timeouts: Timeouts): string =>
  `${nested} (${Duration.format(timeouts[nested])}) must not exceed ${parent} (${Duration.format(timeouts[parent])})`

/** @internal */
export const validate = (timeouts: Timeouts): ReadonlyArray<string> => {
  const problems: Array<string> = []
  for (const name of names) {
    if (!isUsable(timeouts[name])) {
      problems.push(`${name} must be positive and finite (got ${Duration.format(timeouts[name])})`)
    }
  }
  if (problems.length > 0) return problems
  for (const nested of inTurn) {
    if (Duration.isGreaterThan(timeouts[nested], timeouts.turn)) problems.push(nestedProblem(nested, "turn", timeouts))
  }
  for (const nested of inStartup) {
    if (Duration.isGreaterThan(timeouts[nested], timeouts.startup)) {
      problems.push(nestedProblem(nested, "startup", timeouts))
    }
  }
  return problems
}

/**
 * Completes the values a host chose with the defaults, each nested default shrunk to fit its parents, so that the
 * problems left can only be with the host's own values.
 *
 * @internal
 */
export const resolve = (
  chosen: Partial<{ readonly [K in keyof Timeouts]: Duration.Duration }>
): { readonly timeouts: Timeouts; readonly problems: ReadonlyArray<string> } => {
  const timeouts = { ...defaults, ...chosen } as { -readonly [K in keyof Timeouts]: Duration.Duration }
  // A parent that is not usable is reported by itself: shrinking its children to it would report them too.
  if (isUsable(timeouts.turn)) {
    for (const nested of inTurn) {
      if (chosen[nested] === undefined) timeouts[nested] = Duration.min(timeouts[nested], timeouts.turn)
    }
  }
  if (isUsable(timeouts.startup)) {
    for (const nested of inStartup) {
      if (chosen[nested] === undefined) timeouts[nested] = Duration.min(timeouts[nested], timeouts.startup)
    }
  }
  return { timeouts, problems: validate(timeouts) }
}

/** @internal */
export const make = (overrides: Overrides = {}): Effect.Effect<Timeouts, InvalidConfig> =>
  Effect.suspend(() => {
    const chosen: Partial<{ -readonly [K in keyof Timeouts]: Duration.Duration }> = {}
    const problems: Array<string> = []
    for (const name of names) {
      const input = overrides[name]
      if (input === undefined) continue
      const decoded = Duration.fromInput(input)
      if (decoded._tag === "None") problems.push(`${name} is not a duration`)
      else chosen[name] = decoded.value
    }
    if (problems.length > 0) return Effect.fail(new InvalidConfig({ problems }))
    const resolved = resolve(chosen)
    return resolved.problems.length > 0
      ? Effect.fail(new InvalidConfig({ problems: resolved.problems }))
      : Effect.succeed(resolved.timeouts)
  })
