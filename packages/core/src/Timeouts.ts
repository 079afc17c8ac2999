/**
 * Every wait a session makes has a deadline, and every deadline is here.
 *
 * All values are `Duration`s, read from this record by the session at the moment it waits, so tests drive them
 * with `TestClock`. Build them with {@link make} (or {@link config} from Effect `Config`): nested budgets are
 * validated when the record is built, not when a turn is already running.
 *
 * The budgets nested in a turn (`stall`, `ack`, `interrupt`, `permission`, `control`, `delivery`) never exceed it,
 * and `control` and `delivery` never exceed `startup` either. Overriding a parent shrinks the defaults nested in it
 * (`turn: "5 minutes"` makes `permission` 5 minutes too); only a value the host set itself can be rejected.
 *
 * | timeout | default | bounds |
 * | --- | --- | --- |
 * | `startup` | 60 s | spawn + handshake |
 * | `control` | 15 s | a control request until its response |
 * | `delivery` | 10 s | one write to the CLI's stdin |
 * | `ack` | 30 s | prompt written until the CLI acknowledges it (diagnostic: logged, the turn goes on) |
 * | `turn` | 30 min | a whole turn |
 * | `stall` | 5 min | no frame for the running turn (waiting on a permission decision does not count) |
 * | `interrupt` | 10 s | an interrupt until the turn's terminal result; then the session is retired and torn down |
 * | `permission` | 10 min | a deferred permission decision; then a deny is sent |
 * | `closeGrace` | 2 s | stdin EOF until the CLI exits by itself at release |
 * | `termGrace` | 5 s | SIGTERM until SIGKILL at teardown |
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidConfig } from "./TetherError.ts"

/**
 * The deadlines of a session.
 *
 * @category models
 * @since 0.1.0
 */
export interface Timeouts {
  readonly startup: Duration.Duration
  readonly control: Duration.Duration
  readonly delivery: Duration.Duration
  readonly ack: Duration.Duration
  readonly turn: Duration.Duration
  readonly stall: Duration.Duration
  readonly interrupt: Duration.Duration
  readonly permission: Duration.Duration
  readonly closeGrace: Duration.Duration
  readonly termGrace: Duration.Duration
}

/**
 * The defaults, chosen from what the systems that do this job use in production (see the README).
 *
 * @category constructors
 * @since 0.1.0
 */
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

const names = Object.keys(defaults) as ReadonlyArray<keyof Timeouts>

const isUsable = (duration: Duration.Duration): boolean => Duration.isFinite(duration) && Duration.isPositive(duration)

/** The budgets nested in a turn. */
const inTurn = ["stall", "ack", "interrupt", "permission", "control", "delivery"] as const

/** The budgets nested in the startup (the handshake is a control request, written like any other). */
const inStartup = ["control", "delivery"] as const

const nestedProblem = (nested: keyof Timeouts, parent: keyof Timeouts, timeouts: Timeouts): string =>
  `${nested} (${Duration.format(timeouts[nested])}) must not exceed ${parent} (${Duration.format(timeouts[parent])})`

/**
 * The problems with a complete set of timeouts, empty when it is valid: every timeout is positive and finite, the
 * budgets nested in a turn (stall, ack, interrupt, permission, control, delivery) do not exceed it, and control and
 * delivery do not exceed startup.
 *
 * A record is checked as a whole, whoever chose each value: `{ ...defaults, turn: Duration.minutes(5) }` fails here
 * (the default permission, 10 minutes, is longer), where `make({ turn: "5 minutes" })` shrinks the nested defaults.
 *
 * @category validation
 * @since 0.1.0
 */
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
 */
const resolve = (
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

/**
 * Overrides of the defaults, as {@link make} takes them.
 *
 * @category models
 * @since 0.1.0
 */
export type Overrides = Partial<{ readonly [K in keyof Timeouts]: Duration.Input }>

/**
 * Builds a validated set of timeouts from overrides of the defaults. The defaults nested in an overridden budget
 * shrink to fit it (`turn: "5 minutes"` alone is valid: `permission` and `stall` become at most 5 minutes), so it
 * fails only for a value the host set itself: not positive and finite, or longer than the budget it is nested in.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Timeouts } from "@tether/core"
 *
 * // Effect<Timeouts, InvalidConfig>: permission (10 min by default) shrinks to the 5-minute turn.
 * const timeouts = Timeouts.make({ turn: "5 minutes", stall: "90 seconds" })
 *
 * // Fails with InvalidConfig: the host asked for a permission wait longer than its turn.
 * const invalid = Timeouts.make({ turn: "5 minutes", permission: "10 minutes" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
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

/**
 * Reads timeouts from Effect `Config` (`startup`, `control`, … each optional, e.g. `TETHER_TIMEOUTS_STALL=90
 * seconds` with a `ConfigProvider` that maps the `TETHER_TIMEOUTS` prefix), completed and validated like
 * {@link make}: the defaults nested in a configured budget shrink to fit it.
 *
 * @example
 * ```ts
 * import { ConfigProvider } from "effect"
 * import { Timeouts } from "@tether/core"
 *
 * const timeouts = Timeouts.config.parse(ConfigProvider.fromUnknown({ turn: "5 minutes" }))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const config: Config.Config<Timeouts> = Config.all(
  Object.fromEntries(names.map((name) => [name, Config.option(Config.Duration(name))])) as {
    readonly [K in keyof Timeouts]: Config.Config<Option.Option<Duration.Duration>>
  }
).pipe(
  Config.mapEffect((read) => {
    const chosen: Partial<{ -readonly [K in keyof Timeouts]: Duration.Duration }> = {}
    for (const name of names) {
      const value = read[name]
      if (Option.isSome(value)) chosen[name] = value.value
    }
    const resolved = resolve(chosen)
    return resolved.problems.length > 0
      ? Effect.fail(
        new Config.ConfigError(
          new ConfigProvider.SourceError({ message: new InvalidConfig({ problems: resolved.problems }).message })
        )
      )
      : Effect.succeed(resolved.timeouts)
  })
)
