/**
 * The real ACP agents this repository pins for its own tests, each installed from the npm registry as an exact
 * devDependency of `@tether/testing`: the Gemini CLI (`@google/gemini-cli`, run as `gemini --acp`) and
 * `claude-agent-acp` (`@zed-industries/claude-agent-acp`, Claude Code behind ACP). Both are Node programs:
 * `resolve(agent)` gives the command line that runs the pinned one with the current Node (`process.execPath`), never
 * a `gemini` found on `PATH` (the machine's Node may be too old, and its version is not the pinned one).
 *
 * @example
 * ```ts
 * import { PinnedAcp } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * // { command: "/…/node", args: ["/…/@google/gemini-cli/bundle/gemini.js", "--acp"], version: "0.61.0", … }
 * const gemini = PinnedAcp.resolve("gemini")
 * ```
 *
 * The packages exist only where this repository's devDependencies are installed (a checkout after `pnpm install`);
 * an application that installs the published `@tether/testing` gets `ExecutableNotFound`. Bumping a version: change
 * the devDependency in `packages/testing/package.json` and {@link versions} here, `pnpm install`, then
 * `pnpm fixtures:record:acp`.
 *
 * @since 0.1.0
 */
import { ExecutableNotFound } from "@tether/core/TetherError"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"

/**
 * The pinned agents.
 *
 * @category agents
 * @since 0.1.0
 */
export const agents = ["gemini", "claude-agent-acp"] as const

/**
 * One of the pinned agents.
 *
 * @category agents
 * @since 0.1.0
 */
export type Agent = typeof agents[number]

/**
 * The pinned version of each agent.
 *
 * @category agents
 * @since 0.1.0
 */
export const versions: { readonly [A in Agent]: string } = {
  gemini: "0.61.0",
  "claude-agent-acp": "0.23.1"
}

/**
 * The npm package of each agent.
 *
 * @category agents
 * @since 0.1.0
 */
export const packageNames: { readonly [A in Agent]: string } = {
  gemini: "@google/gemini-cli",
  "claude-agent-acp": "@zed-industries/claude-agent-acp"
}

/** The script each package's `bin` runs, and the arguments that make it speak ACP on stdio. */
const entries: { readonly [A in Agent]: { readonly script: string; readonly args: ReadonlyArray<string> } } = {
  gemini: { script: "bundle/gemini.js", args: ["--acp"] },
  "claude-agent-acp": { script: "dist/index.js", args: [] }
}

/**
 * Is `value` one of the pinned agents?
 *
 * @category guards
 * @since 0.1.0
 */
export const isAgent = (value: unknown): value is Agent => agents.includes(value as Agent)

/**
 * How to run a pinned agent: `command` with `args` (the script first), e.g. for `NodeTransport`'s executables and
 * a launch's arguments.
 *
 * @category resolution
 * @since 0.1.0
 */
export interface Command {
  readonly agent: Agent
  readonly version: string
  /** The Node that runs the script: `process.execPath`. */
  readonly command: string
  /** The script, then the arguments that make it an ACP agent on stdio (`--acp` for the Gemini CLI). */
  readonly args: ReadonlyArray<string>
  /** The package's entry script (absolute). */
  readonly script: string
}

const require = createRequire(import.meta.url)

/**
 * The command line of a pinned agent, or `ExecutableNotFound` naming what was searched. The package's version is
 * checked, so a stale install cannot stand in for the pinned one.
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolve = (agent: Agent): Effect.Effect<Command, ExecutableNotFound> =>
  Effect.suspend(() => {
    const notFound = (reason: string) => Effect.fail(new ExecutableNotFound({ program: agent, searched: [reason] }))
    if (!isAgent(agent)) return notFound(`${String(agent)} is not a pinned ACP agent (${agents.join(", ")})`)
    const name = packageNames[agent]
    let dir: string
    try {
      dir = Path.dirname(Fs.realpathSync(require.resolve(`${name}/package.json`)))
    } catch {
      return notFound(`npm package ${name} (a devDependency of @tether/testing: run pnpm install in the repository)`)
    }
    let version: unknown
    try {
      version = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8")).version
    } catch {
      version = undefined
    }
    if (version !== versions[agent]) {
      return notFound(`${dir} is version ${String(version)}, not the pinned ${versions[agent]}`)
    }
    const script = Path.join(dir, entries[agent].script)
    if (!Fs.existsSync(script)) return notFound(`${script} (the package's entry script)`)
    return Effect.succeed({
      agent,
      version: versions[agent],
      command: process.execPath,
      args: [script, ...entries[agent].args],
      script
    })
  })

/**
 * {@link resolve}, synchronously: the command, or a thrown `ExecutableNotFound`. For module-level constants of test
 * harnesses and scripts.
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolveSync = (agent: Agent): Command => Effect.runSync(Effect.orDie(resolve(agent)))
