/**
 * Executable discovery: where the transport finds the program a `LaunchSpec` names.
 *
 * In order: an explicit path from the transport's options, the environment variable `TETHER_<PROGRAM>_PATH`
 * (`TETHER_CLAUDE_PATH` for `claude`), the directories of `PATH`, and for `claude` and `codex` the native binary of
 * an installed npm package (`@anthropic-ai/claude-code`'s per-platform package
 * `@anthropic-ai/claude-code-<platform>-<arch>`; `@openai/codex`'s `@openai/codex-<platform>-<arch>`, whose binary is
 * `vendor/<target triple>/bin/codex`), looked up the way Node resolves packages, from the working directory and from
 * this package, and next to the main package for pnpm's strict layout; `NODE_PATH` is not consulted. An explicit path
 * or the environment variable, when set, is authoritative: if it does not name an executable file the search fails
 * there rather than silently running another binary from `PATH`.
 *
 * `codex` is never resolved to the npm package's Node launcher (`@openai/codex/bin/codex.js`, or the shim a package
 * manager puts on `PATH` for it): that launcher spawns the native binary as its child on older Node and replaces
 * itself with it on newer Node, so what Tether would own differs by Node version. A launcher found on `PATH` (or named
 * by the explicit path or the variable) stands for the native binary of its own installation, which is used in its
 * place; a launcher without one is skipped on `PATH`, and fails an explicit choice.
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
  /** The logical program (`"claude"`, `"codex"`). */
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

/** The target triple `@openai/codex` names its vendored binaries by (as its launcher, `bin/codex.js`, does). */
const codexTriple = (): string | undefined => {
  const arch = process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : undefined
  if (arch === undefined) return undefined
  switch (process.platform) {
    case "linux":
    case "android":
      return `${arch}-unknown-linux-musl`
    case "darwin":
      return `${arch}-apple-darwin`
    case "win32":
      return `${arch}-pc-windows-msvc`
    default:
      return undefined
  }
}

/**
 * The npm packages that ship a program's native binary for this platform, most specific first.
 *
 * @category naming
 * @since 0.1.0
 */
export const packagedBinaries = (program: string): ReadonlyArray<string> => {
  if (program === "codex") {
    const triple = codexTriple()
    if (triple === undefined) return []
    const binary = `vendor/${triple}/bin/${isWindows ? "codex.exe" : "codex"}`
    const platform = process.platform === "android" ? "linux" : process.platform
    // Releases before the per-platform packages vendored every binary in the main package.
    return [`@openai/codex-${platform}-${process.arch}/${binary}`, `@openai/codex/${binary}`]
  }
  if (program !== "claude") return []
  const base = `@anthropic-ai/claude-code-${process.platform}-${process.arch}`
  const binary = isWindows ? "claude.exe" : "claude"
  return isMusl() ? [`${base}-musl/${binary}`, `${base}/${binary}`] : [`${base}/${binary}`]
}

/** The npm launcher of a program that must never run in place of its native binary. */
const launchers: Record<string, string> = { codex: "@openai/codex/bin/codex.js" }

/**
 * Where the installation of a program's npm launcher is, when `file` is that launcher (or a symlink to it), or a
 * shim a package manager wrote for it (pnpm's shell script, npm's `.cmd` on Windows): a directory to search the
 * native binary from. Undefined when `file` is something else.
 */
const launcherInstallation = (program: string, file: string): string | undefined => {
  const launcher = launchers[program]
  if (launcher === undefined) return undefined
  /** The launcher's package directory (`…/node_modules/@openai/codex`), when `path` is the launcher. */
  const packageOf = (path: string) =>
    path.replaceAll("\\", "/").endsWith(`/node_modules/${launcher}`) ? Path.dirname(Path.dirname(path)) : undefined
  try {
    const real = packageOf(Fs.realpathSync(file))
    if (real !== undefined) return real
    // A shim is a small script; the native binary is hundreds of megabytes and is never read here.
    if (Fs.statSync(file).size > 65_536) return undefined
    const text = Fs.readFileSync(file, "utf8")
    if (!text.replaceAll("\\", "/").includes(launcher)) return undefined
    // pnpm names the shim's target in a comment; other shims find it relative to their own directory.
    const target = /^# cmd-shim-target=(.+)$/m.exec(text)?.[1].trim()
    return (target !== undefined ? packageOf(target) : undefined) ?? Path.dirname(file)
  } catch {
    return undefined
  }
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

const mainPackage: Record<string, string> = { claude: "@anthropic-ai/claude-code", codex: "@openai/codex" }

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

    /** An explicit choice: itself, or for a launcher the native binary of the launcher's own installation. */
    const chosen = (file: string, place: string) => {
      const installation = launcherInstallation(program, file)
      if (installation === undefined) return isExecutable(file) ? Effect.succeed(file) : notFound([place])
      const searched: Array<string> = [`${place} (the npm launcher, not the native binary)`]
      const native = fromPackages(program, [installation], searched)
      return native !== undefined ? Effect.succeed(native) : notFound(searched)
    }

    if (search.path !== undefined) {
      const file = Path.resolve(search.path)
      return chosen(file, `explicit path ${file}`)
    }
    const variable = envVar(program)
    const fromEnv = env[variable]
    if (fromEnv !== undefined && fromEnv.length > 0) {
      const file = Path.resolve(fromEnv)
      return chosen(file, `${variable}=${file}`)
    }

    const searched: Array<string> = [`${variable} (unset)`]
    const { dirs, names } = pathCandidates(program, env.PATH ?? env.Path, env.PATHEXT)
    for (const dir of dirs) {
      for (const name of names) {
        const file = Path.resolve(dir, name)
        if (!isExecutable(file)) continue
        const installation = launcherInstallation(program, file)
        if (installation === undefined) return Effect.succeed(file)
        // The launcher's place on PATH is its installation's: the native binary it would have run.
        const native = fromPackages(program, [installation], [])
        if (native !== undefined) return Effect.succeed(native)
        searched.push(`${file} (the npm launcher, with no native binary beside it)`)
      }
    }
    searched.push(dirs.length === 0 ? "PATH (empty)" : `PATH (${dirs.join(Path.delimiter)})`)

    const roots = search.roots ?? [process.cwd(), Path.dirname(import.meta.filename)]
    const packaged = fromPackages(program, roots, searched)
    return packaged !== undefined ? Effect.succeed(packaged) : notFound(searched)
  })
