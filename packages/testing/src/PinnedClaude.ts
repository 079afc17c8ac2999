/**
 * The real `claude` CLIs this repository pins for its own tests: the current one and the oldest one Tether
 * supports, each installed from the npm registry as a devDependency of `@tether/testing` (the oldest through an npm
 * alias, so that both live side by side). `resolve(version)` finds the native binary of one of them.
 *
 * Use it to run a real-CLI test, or the fixture recorder (`pnpm fixtures:record`), on every supported version:
 *
 * @example
 * ```ts
 * import { PinnedClaude } from "@tether/testing"
 * import { Effect } from "effect"
 *
 * // One path per pinned version, newest first: ["…/claude-code-linux-x64/claude", …]
 * const paths = Effect.forEach(PinnedClaude.versions, PinnedClaude.resolve)
 *
 * // The version a test run selects with TETHER_CLAUDE_VERSION (default: the newest).
 * const selected = PinnedClaude.resolve(PinnedClaude.fromEnv(process.env))
 * ```
 *
 * The binaries exist only where this repository's devDependencies are installed (a checkout after
 * `pnpm install`); an application that installs the published `@tether/testing` gets `ExecutableNotFound` and should
 * install `@anthropic-ai/claude-code` itself. Bumping a version: change the devDependency (or the alias) in
 * `packages/testing/package.json` and {@link versions} here, `pnpm install`, then `pnpm fixtures:record`.
 *
 * @since 0.1.0
 */
import { ExecutableNotFound } from "@tether/core/TetherError"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"

/**
 * The pinned versions, newest first.
 *
 * @category versions
 * @since 0.1.0
 */
export const versions = ["2.1.332", "2.1.197"] as const

/**
 * One of the pinned versions.
 *
 * @category versions
 * @since 0.1.0
 */
export type Version = typeof versions[number]

/**
 * The newest pinned version: what the real-CLI tests run unless told otherwise.
 *
 * @category versions
 * @since 0.1.0
 */
export const latest: Version = versions[0]

/**
 * The oldest version Tether supports. It differs from the newest in ways the session must handle: no
 * `command_lifecycle` receipts, the replay of a prompt only after the first model response, and some control
 * responses without a payload (`interrupt`: docs/protocol/claude-stream-json.md §5.1).
 *
 * @category versions
 * @since 0.1.0
 */
export const oldest: Version = versions[versions.length - 1]

/**
 * The name under which `@tether/testing` depends on each version's `@anthropic-ai/claude-code` package.
 *
 * @category versions
 * @since 0.1.0
 */
export const packageNames: { readonly [V in Version]: string } = {
  "2.1.332": "@anthropic-ai/claude-code",
  "2.1.197": "claude-code-2.1.197"
}

/**
 * The environment variable that selects a pinned version: `TETHER_CLAUDE_VERSION`.
 *
 * @category versions
 * @since 0.1.0
 */
export const envVar = "TETHER_CLAUDE_VERSION"

/**
 * Is `value` one of the pinned versions?
 *
 * @category guards
 * @since 0.1.0
 */
export const isVersion = (value: unknown): value is Version => versions.includes(value as Version)

/**
 * The version `TETHER_CLAUDE_VERSION` names in `env`, or {@link latest} when it is unset or empty. A value that is
 * not a pinned version is a defect (a typo must not silently run another CLI).
 *
 * @category versions
 * @since 0.1.0
 */
export const fromEnv = (env: Readonly<Record<string, string | undefined>>): Version => {
  const value = env[envVar]
  if (value === undefined || value === "") return latest
  if (isVersion(value)) return value
  throw new Error(`${envVar}=${value} is not a pinned claude version (${versions.join(", ")})`)
}

const require = createRequire(import.meta.url)

/** The package directory of `name` as Node resolves it from `from`'s require, or undefined. */
const packageDir = (from: NodeJS.Require, name: string): string | undefined => {
  try {
    return Path.dirname(Fs.realpathSync(from.resolve(`${name}/package.json`)))
  } catch {
    return undefined
  }
}

const versionOf = (dir: string): unknown => {
  try {
    return JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8")).version
  } catch {
    return undefined
  }
}

const isExecutable = (file: string): boolean => {
  try {
    if (!Fs.statSync(file).isFile()) return false
    if (process.platform !== "win32") Fs.accessSync(file, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The per-platform packages that may carry the native binary, musl first (pnpm installs only the matching one). */
const platformPackages = (): ReadonlyArray<string> => {
  const base = `@anthropic-ai/claude-code-${process.platform}-${process.arch}`
  return process.platform === "linux" ? [`${base}-musl`, base] : [base]
}

/**
 * The absolute path of the native `claude` binary of a pinned version, or `ExecutableNotFound` naming what was
 * searched. The binary is the one in the version's per-platform package (`@anthropic-ai/claude-code-<os>-<arch>`),
 * which works whether or not the main package's postinstall ran; the versions of both packages are checked, so a
 * stale install cannot stand in for the pinned version.
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolve = (version: Version): Effect.Effect<string, ExecutableNotFound> =>
  Effect.suspend(() => {
    const notFound = (reason: string) =>
      Effect.fail(new ExecutableNotFound({ program: `claude ${version}`, searched: [reason] }))
    if (!isVersion(version)) return notFound(`${String(version)} is not a pinned version (${versions.join(", ")})`)
    const name = packageNames[version]
    const main = packageDir(require, name)
    if (main === undefined) {
      return notFound(`npm package ${name} (a devDependency of @tether/testing: run pnpm install in the repository)`)
    }
    if (versionOf(main) !== version) return notFound(`${main} is version ${String(versionOf(main))}, not ${version}`)
    // The platform package is an optional dependency of the main package: resolve it from there (pnpm's strict
    // layout makes it visible only to its dependent).
    const fromMain = createRequire(Path.join(main, "package.json"))
    const searched: Array<string> = []
    for (const platform of platformPackages()) {
      const dir = packageDir(fromMain, platform)
      searched.push(`npm package ${platform} (from ${main})`)
      if (dir === undefined || versionOf(dir) !== version) continue
      const binary = Path.join(dir, process.platform === "win32" ? "claude.exe" : "claude")
      if (isExecutable(binary)) return Effect.succeed(binary)
    }
    return Effect.fail(new ExecutableNotFound({ program: `claude ${version}`, searched }))
  })

/**
 * {@link resolve}, synchronously: the path, or a thrown `ExecutableNotFound`. For module-level constants of test
 * harnesses and scripts.
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolveSync = (version: Version): string => Effect.runSync(Effect.orDie(resolve(version)))
