/**
 * Every wait a session makes has a deadline, and every deadline is here.
 *
 * All values are `Duration`s, read from this record by the session at the moment it waits, so tests drive them
 * with `TestClock`. Build them with {@link make} (or {@link layerConfig} from Effect `Config`): nested budgets are
 * validated when the record is built, not when a turn is already running.
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

/**
 * The problems with a set of timeouts, empty when it is valid: every timeout is positive and finite, and the
 * budgets nested in a turn (stall, ack, interrupt, permission, control, delivery) do not exceed it.
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = (timeouts: Timeouts): ReadonlyArray<string> => {
  const problems: Array<string> = []
  for (const name of names) {
    const value = timeouts[name]
    if (!Duration.isFinite(value) || !Duration.isPositive(value)) {
      problems.push(`${name} must be positive and finite (got ${Duration.format(value)})`)
    }
  }
  if (problems.length > 0) return problems
  for (const nested of ["stall", "ack", "interrupt", "permission", "control", "delivery"] as const) {
    if (Duration.isGreaterThan(timeouts[nested], timeouts.turn)) {
      problems.push(
        `${nested} (${Duration.format(timeouts[nested])}) must not exceed turn (${Duration.format(timeouts.turn)})`
      )
    }
  }
  for (const nested of ["control", "delivery"] as const) {
    if (Duration.isGreaterThan(timeouts[nested], timeouts.startup)) {
      problems.push(
        `${nested} (${Duration.format(timeouts[nested])}) must not exceed startup (${
          Duration.format(timeouts.startup)
        })`
      )
    }
  }
  return problems
}

/**
 * Builds a validated set of timeouts from overrides of the defaults.
 *
 * @example
 * ```ts
 * import { Duration, Effect } from "effect"
 * import { Timeouts } from "@tether/core"
 *
 * const timeouts = Timeouts.make({ stall: Duration.seconds(90) }) // Effect<Timeouts, InvalidConfig>
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (overrides: Partial<{ readonly [K in keyof Timeouts]: Duration.Input }> = {}) =>
  Effect.suspend(() => {
    const timeouts = { ...defaults } as { -readonly [K in keyof Timeouts]: Duration.Duration }
    const problems: Array<string> = []
    for (const name of names) {
      const input = overrides[name]
      if (input === undefined) continue
      const decoded = Duration.fromInput(input)
      if (decoded._tag === "None") problems.push(`${name} is not a duration`)
      else timeouts[name] = decoded.value
    }
    problems.push(...validate(timeouts))
    return problems.length > 0
      ? Effect.fail(new InvalidConfig({ problems }))
      : Effect.succeed(timeouts as Timeouts)
  })

/**
 * Reads timeouts from Effect `Config` (`startup`, `control`, … each optional, e.g. `TETHER_TIMEOUTS_STALL=90
 * seconds` with a `ConfigProvider` that maps the `TETHER_TIMEOUTS` prefix), validated like {@link make}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const config: Config.Config<Timeouts> = Config.all(
  Object.fromEntries(
    names.map((name) => [name, Config.Duration(name).pipe(Config.withDefault(defaults[name]))])
  ) as { readonly [K in keyof Timeouts]: Config.Config<Duration.Duration> }
).pipe(
  Config.mapEffect((timeouts) => {
    const problems = validate(timeouts)
    return problems.length > 0
      ? Effect.fail(
        new Config.ConfigError(
          new ConfigProvider.SourceError({ message: new InvalidConfig({ problems }).message })
        )
      )
      : Effect.succeed(timeouts)
  })
)
