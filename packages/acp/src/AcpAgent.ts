/**
 * Which ACP agent a session runs, and how: a command line, an environment, and what the agent needs prepared in the
 * session's scope before it starts. Presets for the agents Tether knows ({@link gemini}, {@link claudeAgentAcp}),
 * and {@link command} for any other agent that speaks ACP over stdio.
 *
 * Executables: a preset runs the command the host names (`executable`: an absolute path, e.g. of a pinned npm
 * installation), or by default the command's name, which the transport resolves (`NodeTransport`: its
 * `executables` option, then `TETHER_<NAME>_PATH`, then `PATH`).
 *
 * @since 0.1.0
 */
import { InvalidConfig } from "@tether/core/TetherError"
import { credentialProblems } from "@tether/core/Transport"
import type * as Transport from "@tether/core/Transport"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"

/**
 * What an agent launches with: the program, its arguments, its environment.
 *
 * @category models
 * @since 0.1.0
 */
export interface Launch {
  /** The program (a name the transport resolves, or an absolute path). */
  readonly program: string
  readonly args: ReadonlyArray<string>
  readonly env: Transport.Environment
}

/**
 * Where the agent's session runs, as its `prepare` step sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Context {
  /** The session's working directory (absolute). */
  readonly cwd: string
  /**
   * The directory a `Session.Conversation` placement gives the agent's state (Gemini CLI's `GEMINI_CLI_HOME`,
   * claude-agent-acp's `CLAUDE_CONFIG_DIR`), or undefined.
   */
  readonly home: string | undefined
}

/**
 * An ACP agent: its name, and the effect that prepares its launch in the session's scope (a directory of its own,
 * settings files), which may need services (`R`: the gemini preset needs a `FileSystem`).
 *
 * @category models
 * @since 0.1.0
 */
export interface Agent<R = never> {
  /** The agent's name, as the session's capabilities report it (`"gemini"`, `"claude-agent-acp"`, the command). */
  readonly name: string
  /** The preset's options (a registry fingerprints a session's options by them: functions are left out). */
  readonly options: unknown
  readonly prepare: (context: Context) => Effect.Effect<Launch, InvalidConfig, R | Scope.Scope>
  /**
   * Which files of the agent's state directory (the {@link Context} `home`; paths relative to it) hold a
   * conversation: what `@tether/cluster` saves and restores for `session/load` on another runner. Default
   * (`Session.namesConversation`): a path that names the conversation's id.
   */
  readonly conversationFile?: ((path: string, conversationId: string) => boolean) | undefined
}

/**
 * The environment of the agent's process: `Transport.EnvironmentOptions`, as for every provider.
 *
 * @category models
 * @since 0.1.0
 */
export type EnvironmentOptions = Transport.EnvironmentOptions

const environment = (
  defaults: { readonly [name: string]: string | Redacted.Redacted<string> },
  env: EnvironmentOptions | undefined
): Transport.Environment => {
  const set = { ...defaults, ...env?.set }
  const base: Transport.Environment = { mode: env?.mode ?? "inherit", set, unset: env?.unset ?? [] }
  return env?.inheritCredentials === undefined ? base : { ...base, inheritCredentials: env.inheritCredentials }
}

const checked = (problems: ReadonlyArray<string>): Effect.Effect<void, InvalidConfig> =>
  problems.length === 0 ? Effect.void : Effect.fail(new InvalidConfig({ problems }))

/**
 * An agent without a preset: its command line (`argv[0]` the program), its environment.
 *
 * @example
 * ```ts
 * import { AcpAgent } from "@tether/acp"
 *
 * const codexAcp = AcpAgent.command(["codex-acp"])
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const command = (
  argv: ReadonlyArray<string>,
  options?: { readonly env?: EnvironmentOptions | undefined; readonly name?: string | undefined }
): Agent => ({
  name: options?.name ?? argv[0] ?? "acp",
  options: { argv, env: options?.env },
  prepare: () =>
    Effect.as(
      checked([
        ...(argv.length === 0 || argv[0] === "" ? ["the agent's command line is empty"] : []),
        ...(options?.env === undefined ? [] : credentialProblems(options.env))
      ]),
      { program: argv[0], args: argv.slice(1), env: environment({}, options?.env) }
    )
})

/**
 * Options of the Gemini CLI preset.
 *
 * @category models
 * @since 0.1.0
 */
export interface GeminiOptions {
  /** The `gemini` executable. Default: `gemini`, resolved by the transport. */
  readonly executable?: string | undefined
  /** `--model`. */
  readonly model?: string | undefined
  /** The Gemini API's base URL (`GOOGLE_GEMINI_BASE_URL`), e.g. a local mock or a gateway. */
  readonly baseUrl?: string | undefined
  /**
   * The API key (`GEMINI_API_KEY` in the agent's environment: every command it runs inherits it, see
   * docs/secrets.md).
   */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /**
   * `GEMINI_CLI_HOME`: where the CLI keeps its settings and conversations. Default: a fresh directory made in the
   * session's scope (removed with it) holding the offline settings. A directory given here (or by a
   * `Session.Conversation` placement) must exist; the settings file is written into it if it has none.
   */
  readonly home?: string | undefined
  /** More arguments after `--acp`. */
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: EnvironmentOptions | undefined
}

/**
 * The settings the gemini preset writes to `<GEMINI_CLI_HOME>/.gemini/settings.json`: no usage statistics, no
 * telemetry, no update checks (without them the CLI reports usage to a Google host and looks for updates).
 *
 * @category presets
 * @since 0.1.0
 */
export const geminiSettings = {
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false }
} as const

/** A directory of the session's own: the given one, or a fresh one removed with the session's scope. */
const homeDirectory = (fs: FileSystem.FileSystem, given: string | undefined, prefix: string) =>
  given === undefined
    ? fs.makeTempDirectoryScoped({ prefix }).pipe(
      Effect.mapError((error) => new InvalidConfig({ problems: [`could not make the agent's directory: ${error}`] }))
    )
    : Effect.succeed(given)

const writeFile = (fs: FileSystem.FileSystem, directory: string, file: string, content: string, overwrite: boolean) =>
  Effect.gen(function*() {
    const path = `${directory}/${file}`
    if (!overwrite && (yield* fs.exists(path))) return
    yield* fs.makeDirectory(path.slice(0, path.lastIndexOf("/")), { recursive: true })
    yield* fs.writeFileString(path, content)
  }).pipe(
    Effect.mapError((error) => new InvalidConfig({ problems: [`could not write ${directory}/${file}: ${error}`] }))
  )

/** Gemini CLI's name of a saved session: `session-<minute>-<id prefix>.jsonl`. */
const savedSession = /^session-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2})-(.+\.jsonl)$/

/** The minute the gemini preset gives saved sessions' names, one no process starts in. */
const unpinnedMinute = "2000-01-01T00-00"

/**
 * Renames the sessions Gemini CLI saved under `home` (`.gemini/tmp/<project>/chats/session-<minute>-<id>.jsonl`) to
 * the minute {@link unpinnedMinute}. A new process names the session file it writes by the minute it starts in, so
 * a `session/load` in the minute the session was created would write over the saved conversation (the load fails
 * with "No previous sessions found for this project"); the CLI finds a session by the id inside its file, not by
 * the file's name. A file that cannot be renamed is left as it is.
 */
const unpinSessions = (fs: FileSystem.FileSystem, home: string) =>
  Effect.gen(function*() {
    const root = `${home}/.gemini/tmp`
    const projects = yield* Effect.orElseSucceed(fs.readDirectory(root), () => [] as Array<string>)
    for (const project of projects) {
      const chats = `${root}/${project}/chats`
      const files = yield* Effect.orElseSucceed(fs.readDirectory(chats), () => [] as Array<string>)
      for (const file of files) {
        const named = savedSession.exec(file)
        if (named === null || named[1] === unpinnedMinute) continue
        const target = `${chats}/session-${unpinnedMinute}-${named[2]}`
        if (yield* Effect.orElseSucceed(fs.exists(target), () => true)) continue
        yield* Effect.ignore(fs.rename(`${chats}/${file}`, target))
      }
    }
  })

/** A conversation's file in Gemini CLI's `GEMINI_CLI_HOME`: `session-<minute>-<first 8 of the id>.jsonl`. */
const geminiChat = /^\.gemini\/tmp\/[^/]+\/chats\/session-[^/]*-([^-/]{8})\.jsonl?$/

/**
 * Gemini CLI's conversation files under its `GEMINI_CLI_HOME`: the session's file in its project's `chats`
 * (named by the id's first eight characters), whatever names the whole id, and what tells the CLI which project
 * directory is the working directory's (`.gemini/projects.json`, each project's `.project_root`), so that the
 * conversation is found under the same project after a restore.
 *
 * @category presets
 * @since 0.1.0
 */
export const geminiConversationFile = (path: string, conversationId: string): boolean =>
  path.includes(conversationId) ||
  path === ".gemini/projects.json" ||
  /^\.gemini\/(tmp|history)\/[^/]+\/\.project_root$/.test(path) ||
  geminiChat.exec(path)?.[1] === conversationId.slice(0, 8)

/**
 * Google's Gemini CLI (`@google/gemini-cli`) in ACP mode: `gemini --acp`, with `GEMINI_CLI_NO_RELAUNCH=true` (no
 * second Node process), a `GEMINI_CLI_HOME` of the session's own with the offline {@link geminiSettings}, and the
 * base URL and API key the host gives. With a base URL, `session/new` needs no `authenticate`.
 *
 * @category presets
 * @since 0.1.0
 */
export const gemini = (options: GeminiOptions = {}): Agent<FileSystem.FileSystem> => ({
  name: "gemini",
  options,
  conversationFile: geminiConversationFile,
  prepare: (context) =>
    Effect.gen(function*() {
      yield* checked([
        ...(options.baseUrl !== undefined && !/^https?:\/\//.test(options.baseUrl)
          ? ["baseUrl must be an http(s) URL"]
          : []),
        ...(options.env === undefined ? [] : credentialProblems(options.env))
      ])
      const fs = yield* FileSystem.FileSystem
      const home = yield* homeDirectory(fs, context.home ?? options.home, "tether-gemini-")
      yield* writeFile(fs, home, ".gemini/settings.json", JSON.stringify(geminiSettings, null, 2), false)
      yield* unpinSessions(fs, home)
      const defaults: { [name: string]: string | Redacted.Redacted<string> } = {
        GEMINI_CLI_NO_RELAUNCH: "true",
        GEMINI_CLI_HOME: home
      }
      if (options.baseUrl !== undefined) defaults["GOOGLE_GEMINI_BASE_URL"] = options.baseUrl
      if (options.apiKey !== undefined) defaults["GEMINI_API_KEY"] = options.apiKey
      return {
        program: options.executable ?? "gemini",
        args: ["--acp", ...(options.model === undefined ? [] : ["--model", options.model]), ...(options.args ?? [])],
        env: environment(defaults, options.env)
      }
    })
})

/**
 * Options of the claude-agent-acp preset.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaudeAgentAcpOptions {
  /** The `claude-agent-acp` executable. Default: `claude-agent-acp`, resolved by the transport. */
  readonly executable?: string | undefined
  /** The Messages API's base URL (`ANTHROPIC_BASE_URL`). */
  readonly baseUrl?: string | undefined
  /** The API key (`ANTHROPIC_API_KEY` in the agent's environment; see docs/secrets.md). */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /**
   * `CLAUDE_CONFIG_DIR`. Default: a fresh directory made in the session's scope. Either way a fresh
   * `plugins/blocklist.json` is written into it, so that the agent does not fetch one at start (it refetches after
   * an hour).
   */
  readonly configDir?: string | undefined
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: EnvironmentOptions | undefined
}

/**
 * Zed's ACP adapter of Claude Code (`@zed-industries/claude-agent-acp`), with `CLAUDE_CONFIG_DIR` of the session's
 * own, a fresh plugin blocklist in it, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, and the base URL and API key the
 * host gives.
 *
 * @category presets
 * @since 0.1.0
 */
export const claudeAgentAcp = (options: ClaudeAgentAcpOptions = {}): Agent<FileSystem.FileSystem> => ({
  name: "claude-agent-acp",
  options,
  prepare: (context) =>
    Effect.gen(function*() {
      yield* checked([
        ...(options.baseUrl !== undefined && !/^https?:\/\//.test(options.baseUrl)
          ? ["baseUrl must be an http(s) URL"]
          : []),
        ...(options.env === undefined ? [] : credentialProblems(options.env))
      ])
      const fs = yield* FileSystem.FileSystem
      const home = yield* homeDirectory(fs, context.home ?? options.configDir, "tether-claude-acp-")
      const clock = yield* Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe()))
      yield* writeFile(
        fs,
        home,
        "plugins/blocklist.json",
        JSON.stringify({ fetchedAt: new Date(clock).toISOString(), plugins: [] }),
        true
      )
      const defaults: { [name: string]: string | Redacted.Redacted<string> } = {
        CLAUDE_CONFIG_DIR: home,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
      }
      if (options.baseUrl !== undefined) defaults["ANTHROPIC_BASE_URL"] = options.baseUrl
      if (options.apiKey !== undefined) defaults["ANTHROPIC_API_KEY"] = options.apiKey
      return {
        program: options.executable ?? "claude-agent-acp",
        args: options.args ?? [],
        env: environment(defaults, options.env)
      }
    })
})
