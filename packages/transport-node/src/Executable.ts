/**
 * Executable discovery: where the transport finds the program a `LaunchSpec` names.
 *
 * In order: an explicit path from the transport's options, the environment variable `TETHER_<PROGRAM>_PATH`
 * (`TETHER_CLAUDE_PATH` for `claude`), the directories of `PATH`, and for `claude` the native binary of an installed
 * `@anthropic-ai/claude-code` (its per-platform package `@anthropic-ai/claude-code-<platform>-<arch>`, looked up the
 * way Node resolves packages, from the working directory and from this package, and next to the main package for
 * pnpm's strict layout; `NODE_PATH` is not consulted). An explicit path or the environment variable, when set, is
 * authoritative: if it does not name an executable file the search fails there rather than silently running another
 * binary from `PATH`.
 *
 * @since 0.1.0
 */
import { ExecutableNotFound } from "@tether/core/TetherError"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { isWindows } from "./internal/platform.ts"

/**
 * Where to look, beyond the defaults.
 *
 * @category models
 * @since 0.1.0
 */
export interface Search {
  /** The logical program (`"claude"`). */
  readonly program: string
  /** An explicit path: authoritative when set. */
  readonly path?: string | undefined
  /** The environment to read `TETHER_<PROGRAM>_PATH` and `PATH` from (default: the host's). */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /**
   * Where installed npm packages are looked for, walking `node_modules` upwards from each (default: the host's
   * working directory and this package's own directory).
   */
  readonly roots?: ReadonlyArray<string> | undefined
}

/**
 * The environment variable that names a program's executable: `TETHER_CLAUDE_PATH` for `claude`.
 *
 * @category naming
 * @since 0.1.0
 */
export const envVar = (program: string): string => `TETHER_${program.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_PATH`

const isExecutable = (file: string): boolean => {
  try {
    if (!Fs.statSync(file).isFile()) return false
    if (!isWindows) Fs.accessSync(file, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

let musl: boolean | undefined
const isMusl = (): boolean => {
  if (musl === undefined) {
    // A process report is slow to build: ask once. glibc reports its version; musl does not.
    const report = process.platform === "linux"
      ? process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined
      : undefined
    musl = report !== undefined && report.header?.glibcVersionRuntime === undefined
  }
  return musl
}

/**
 * The npm packages that ship a program's native binary for this platform, most specific first.
 *
 * @category naming
 * @since 0.1.0
 */
export const packagedBinaries = (program: string): ReadonlyArray<string> => {
  if (program !== "claude") return []
  const base = `@anthropic-ai/claude-code-${process.platform}-${process.arch}`
  const binary = isWindows ? "claude.exe" : "claude"
  return isMusl() ? [`${base}-musl/${binary}`, `${base}/${binary}`] : [`${base}/${binary}`]
}

const pathCandidates = (program: string, pathVar: string | undefined, pathExt: string | undefined) => {
  const dirs = (pathVar ?? "").split(Path.delimiter).filter((dir) => dir.length > 0)
  const names = isWindows
    ? (pathExt ?? ".EXE;.CMD;.BAT;.COM").split(";").filter((ext) => ext.length > 0).map((ext) => program + ext)
    : [program]
  return { dirs, names }
}

/** The `node_modules` directories Node would look in from `from`, nearest first (NODE_PATH aside). */
const nodeModulesDirs = (from: string): Array<string> => {
  const dirs: Array<string> = []
  let dir = Path.resolve(from)
  while (true) {
    if (Path.basename(dir) !== "node_modules") dirs.push(Path.join(dir, "node_modules"))
    const parent = Path.dirname(dir)
    if (parent === dir) return dirs
    dir = parent
  }
}

const mainPackage: Record<string, string> = { claude: "@anthropic-ai/claude-code" }

const fromPackages = (
  program: string,
  roots: ReadonlyArray<string>,
  searched: Array<string>
): string | undefined => {
  const specifiers = packagedBinaries(program)
  if (specifiers.length === 0) return undefined
  const starts: Array<string> = []
  for (const root of roots) {
    starts.push(root)
    // The platform package is an optional dependency of the main package: under pnpm's strict layout it is visible
    // only from the main package's own (real) directory.
    for (const dir of nodeModulesDirs(root)) {
      const main = Path.join(dir, mainPackage[program])
      if (Fs.existsSync(main)) {
        starts.push(Fs.realpathSync(main))
        break
      }
    }
  }
  for (const specifier of specifiers) {
    const seen = new Set<string>()
    for (const start of starts) {
      for (const dir of nodeModulesDirs(start)) {
        const candidate = Path.join(dir, specifier)
        if (seen.has(candidate)) continue
        seen.add(candidate)
        if (isExecutable(candidate)) return candidate
      }
    }
    searched.push(`npm package ${specifier} (from ${roots.join(", ")})`)
  }
  return undefined
}

/**
 * Resolves a program to the absolute path of an executable, or fails with `ExecutableNotFound` naming every place
 * that was searched (safe to fall back: nothing was started).
 *
 * @example
 * ```ts
 * import { Executable } from "@tether/transport-node"
 *
 * const claude = Executable.resolve({ program: "claude" })
 * ```
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolve = (search: Search): Effect.Effect<string, ExecutableNotFound> =>
  Effect.suspend(() => {
    const { program } = search
    const env = search.env ?? process.env
    const notFound = (searched: ReadonlyArray<string>) => Effect.fail(new ExecutableNotFound({ program, searched }))

    if (search.path !== undefined) {
      const file = Path.resolve(search.path)
      return isExecutable(file) ? Effect.succeed(file) : notFound([`explicit path ${file}`])
    }
    const variable = envVar(program)
    const fromEnv = env[variable]
    if (fromEnv !== undefined && fromEnv.length > 0) {
      const file = Path.resolve(fromEnv)
      return isExecutable(file) ? Effect.succeed(file) : notFound([`${variable}=${file}`])
    }

    const searched: Array<string> = [`${variable} (unset)`]
    const { dirs, names } = pathCandidates(program, env.PATH ?? env.Path, env.PATHEXT)
    for (const dir of dirs) {
      for (const name of names) {
        const file = Path.resolve(dir, name)
        if (isExecutable(file)) return Effect.succeed(file)
      }
    }
    searched.push(dirs.length === 0 ? "PATH (empty)" : `PATH (${dirs.join(Path.delimiter)})`)

    const roots = search.roots ?? [process.cwd(), Path.dirname(import.meta.filename)]
    const packaged = fromPackages(program, roots, searched)
    return packaged !== undefined ? Effect.succeed(packaged) : notFound(searched)
  })
