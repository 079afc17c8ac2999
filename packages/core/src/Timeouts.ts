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
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as internal from "./internal/timeouts.ts"
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
export const defaults: Timeouts = internal.defaults

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
export const validate: (timeouts: Timeouts) => ReadonlyArray<string> = internal.validate

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
export const make: (overrides?: Overrides) => Effect.Effect<Timeouts, InvalidConfig> = internal.make

/**
 * Reads timeouts from Effect `Config` (`startup`, `control`, … each optional, e.g. `TETHER_TIMEOUTS_STALL=90
 * seconds` with a `ConfigProvider` that maps the `TETHER_TIMEOUTS` prefix), completed and validated like
 * {@link make}: the defaults nested in a configured budget shrink to fit it.
 *
 * Gotcha: a `Config` value is built when its module loads, so importing `Timeouts` loads `effect/Config` (and the
 * `effect/Schema` it imports), whether or not the host reads Config. Sessions themselves do not import this module.
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
  Object.fromEntries(internal.names.map((name) => [name, Config.option(Config.Duration(name))])) as {
    readonly [K in keyof Timeouts]: Config.Config<Option.Option<Duration.Duration>>
  }
).pipe(
  Config.mapEffect((read) => {
    const chosen: Partial<{ -readonly [K in keyof Timeouts]: Duration.Duration }> = {}
    for (const name of internal.names) {
      const value = read[name]
      if (Option.isSome(value)) chosen[name] = value.value
    }
    const resolved = internal.resolve(chosen)
    return resolved.problems.length > 0
      ? Effect.fail(
        new Config.ConfigError(
          new ConfigProvider.SourceError({ message: new InvalidConfig({ problems: resolved.problems }).message })
        )
      )
      : Effect.succeed(resolved.timeouts)
  })
)
