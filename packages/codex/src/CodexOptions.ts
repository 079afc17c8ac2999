/**
 * The `codex app-server` command line and its thread settings, built from typed options.
 *
 * Hosts never assemble argv or TOML by hand: {@link toLaunchSpec} gives the transport the program (`codex`, which
 * `NodeTransport` resolves to the platform's native binary, never the npm package's Node launcher), `app-server`,
 * one `-c key=value` per configuration override (values written as TOML), the working directory and the
 * environment; {@link toThreadParams} gives the `thread/start` params. Prompts never travel on argv.
 *
 * Offline by default: `features.plugins` is off unless the host turns it on (with plugins on, the server runs `git
 * ls-remote https://github.com/openai/plugins.git` at every start), and a provider with a `baseUrl` (a mock on
 * 127.0.0.1, a gateway) is configured as a custom Responses-API provider, the only kind that sends the API key
 * from the environment.
 *
 * Where Codex writes: everything of its own goes to `CODEX_HOME` (`codexHome`; Codex's default is `~/.codex`):
 * its config, sqlite state, thread rollouts, shell snapshots, helper links. The Linux sandbox also uses `TMPDIR`
 * (`tmpDir`) for its mount targets, and masks `.git`, `.agents`, `.codex` and `.aws` in every writable root by
 * making them there while a command runs (a server killed mid-command leaves them behind). Give each session its
 * own folders to keep sessions apart and the machine clean: with a `tmpDir`, `/tmp` stops being a writable root of
 * `workspace-write` (`sandbox_workspace_write.exclude_slash_tmp`; commands write their temporary files to the
 * session's `TMPDIR`), so nothing is made there. The one exception Codex 0.171 does not let a host move: its Linux
 * sandbox creates an empty `/tmp/codex-daemon-<uid>` (mode 0700, shared by every Codex of that user) to mask it
 * from commands. Tether creates nothing itself; a `codexHome` that does not exist makes the server exit at start
 * (`HandshakeFailed`, its stderr saying so).
 *
 * @since 0.1.0
 */
import { InvalidConfig } from "@tether/core/TetherError"
import { credentialProblems } from "@tether/core/Transport"
import type * as Transport from "@tether/core/Transport"
import type { Environment, LaunchSpec } from "@tether/core/Transport"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"

/**
 * When Codex asks the host before running a command or applying a patch: `untrusted` (anything not known safe),
 * `on-request` (when the model asks to leave the sandbox), `never`.
 *
 * @category models
 * @since 0.1.0
 */
export type ApprovalPolicy = "untrusted" | "on-request" | "never"

/**
 * Where commands run: `read-only`, `workspace-write` (the cwd and `writableRoots`), `danger-full-access`.
 *
 * @category models
 * @since 0.1.0
 */
export type SandboxMode = "read-only" | "workspace-write" | "danger-full-access"

/**
 * A model provider speaking the OpenAI Responses API, configured as Codex's `model_providers.<id>`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Provider {
  /** The provider's id in Codex's configuration. Default `"tether"`. */
  readonly id?: string | undefined
  readonly name?: string | undefined
  /** The API base, e.g. `http://127.0.0.1:PORT/v1` (Codex posts to `{baseUrl}/responses`). */
  readonly baseUrl: string
  /**
   * The API key, passed to the server in the environment variable `envKey` (never on argv). Gotcha: every process
   * the server starts (the commands the model runs) inherits its environment, key included.
   */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The environment variable the key travels in. Default `TETHER_CODEX_API_KEY`. */
  readonly envKey?: string | undefined
  /** Retries of a failed model request (Codex's default 4). */
  readonly requestMaxRetries?: number | undefined
  /** Reconnects of a dropped response stream (Codex's default 5). */
  readonly streamMaxRetries?: number | undefined
}

/**
 * A TOML value for a `-c key=value` override.
 *
 * @category models
 * @since 0.1.0
 */
export type TomlValue =
  | string
  | number
  | boolean
  | ReadonlyArray<TomlValue>
  | { readonly [key: string]: TomlValue }

/**
 * The environment of the server process: `Transport.EnvironmentOptions`, which every provider's options share.
 *
 * @category models
 * @since 0.1.0
 */
export type EnvironmentOptions = Transport.EnvironmentOptions

/**
 * Typed options for a `codex app-server` session.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** The model slug (`model`). */
  readonly model?: string | undefined
  /** A Responses-API provider (a local mock, a gateway). Without it Codex uses its configured or default one. */
  readonly provider?: Provider | undefined
  readonly approvalPolicy?: ApprovalPolicy | undefined
  readonly sandbox?: SandboxMode | undefined
  /** More writable folders for `workspace-write`. */
  readonly writableRoots?: ReadonlyArray<string> | undefined
  /** The working directory of the server and of the thread. */
  readonly cwd?: string | undefined
  /** `CODEX_HOME`: where Codex keeps its configuration and state (default `~/.codex`). */
  readonly codexHome?: string | undefined
  /**
   * `TMPDIR` of the server (the Linux sandbox puts its mount targets there). Given, it also keeps `/tmp` out of the
   * writable roots of `workspace-write` (see the module's docs; a `config` of its own for
   * `sandbox_workspace_write.exclude_slash_tmp` wins).
   */
  readonly tmpDir?: string | undefined
  /** `features.plugins`. Default `false` (on, the server reaches github.com at start). */
  readonly plugins?: boolean | undefined
  /** A thread without a rollout file (it cannot be resumed). */
  readonly ephemeral?: boolean | undefined
  /** Resume this thread (`thread/resume`) instead of starting one. */
  readonly resume?: string | undefined
  readonly baseInstructions?: string | undefined
  readonly developerInstructions?: string | undefined
  /** Configuration overrides, one `-c key=value` each (dotted keys, TOML values). */
  readonly config?: { readonly [key: string]: TomlValue } | undefined
  /** Notifications the server should not send (exact method names, e.g. `account/rateLimits/updated`). */
  readonly optOutNotificationMethods?: ReadonlyArray<string> | undefined
  readonly env?: EnvironmentOptions | undefined
  /** `clientInfo` of `initialize` (its name becomes the `originator` header). */
  readonly clientInfo?:
    | { readonly name: string; readonly title?: string | undefined; readonly version: string }
    | undefined
}

/**
 * Variables Tether sets for every server: `RUST_LOG=warn` keeps stderr to warnings, `NO_COLOR=1` keeps it plain
 * text (0.171 colours its log lines even when stderr is a pipe, and the tail of stderr ends up in typed errors).
 *
 * @category launch
 * @since 0.1.0
 */
export const defaultEnvironment: { readonly [name: string]: string } = { RUST_LOG: "warn", NO_COLOR: "1" }

const bareKey = /^[A-Za-z0-9_-]+$/

const tomlKey = (key: string): string => bareKey.test(key) ? key : JSON.stringify(key)

/**
 * Writes a value as TOML (strings as basic strings, tables inline).
 *
 * @category launch
 * @since 0.1.0
 */
export const toToml = (value: TomlValue): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`not a TOML number: ${value}`)
    return String(value)
  }
  if (typeof value === "boolean") return value ? "true" : "false"
  if (Array.isArray(value)) return `[${value.map(toToml).join(",")}]`
  return `{${
    Object.entries(value as { readonly [key: string]: TomlValue }).map(([k, v]) => `${tomlKey(k)}=${toToml(v)}`).join(
      ","
    )
  }}`
}

const problemsOf = (options: Options): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const provider = options.provider
  if (provider !== undefined) {
    if (!/^https?:\/\//.test(provider.baseUrl)) problems.push(`provider.baseUrl must be an http(s) URL`)
    if (provider.id !== undefined && !bareKey.test(provider.id)) {
      problems.push(`provider.id must be letters, digits, - or _`)
    }
    if (provider.envKey !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(provider.envKey)) {
      problems.push(`provider.envKey must be an environment variable name`)
    }
    for (const name of ["requestMaxRetries", "streamMaxRetries"] as const) {
      const n = provider[name]
      if (n !== undefined && !(Number.isInteger(n) && n >= 0)) problems.push(`provider.${name} must be >= 0`)
    }
  }
  for (const [key, value] of Object.entries(options.config ?? {})) {
    if (!/^[A-Za-z0-9_.-]+$/.test(key)) problems.push(`config key ${JSON.stringify(key)} is not a dotted TOML key`)
    try {
      toToml(value)
    } catch (error) {
      problems.push(`config ${key}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  if (options.resume !== undefined && options.ephemeral === true) {
    problems.push("an ephemeral thread has no rollout to resume")
  }
  if (options.env !== undefined) problems.push(...credentialProblems(options.env))
  return problems
}

/**
 * Checks the options: a provider URL that is a URL, overrides that are TOML, no contradiction, no credential
 * (`Transport.credentialVariables`) given in `env.set` as a plain string.
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = (options: Options): Effect.Effect<Options, InvalidConfig> => {
  const problems = problemsOf(options)
  return problems.length === 0 ? Effect.succeed(options) : Effect.fail(new InvalidConfig({ problems }))
}

/** The provider's environment variable for its key. */
const envKeyOf = (provider: Provider): string => provider.envKey ?? "TETHER_CODEX_API_KEY"

/**
 * The `-c` overrides for the options: the provider, the model, the plugins feature, `/tmp` out of the sandbox's
 * writable roots when the session has a `tmpDir`, the host's own `config`.
 *
 * @category launch
 * @since 0.1.0
 */
export const toOverrides = (options: Options): ReadonlyArray<readonly [string, TomlValue]> => {
  const overrides: Array<readonly [string, TomlValue]> = []
  const provider = options.provider
  if (provider !== undefined) {
    const id = provider.id ?? "tether"
    const table: { [key: string]: TomlValue } = {
      name: provider.name ?? id,
      base_url: provider.baseUrl,
      wire_api: "responses"
    }
    if (provider.apiKey !== undefined) table["env_key"] = envKeyOf(provider)
    if (provider.requestMaxRetries !== undefined) table["request_max_retries"] = provider.requestMaxRetries
    if (provider.streamMaxRetries !== undefined) table["stream_max_retries"] = provider.streamMaxRetries
    overrides.push(["model_provider", id], [`model_providers.${id}`, table])
  }
  if (options.model !== undefined) overrides.push(["model", options.model])
  overrides.push(["features.plugins", options.plugins ?? false])
  const excludeSlashTmp = "sandbox_workspace_write.exclude_slash_tmp"
  if (options.tmpDir !== undefined && options.config?.[excludeSlashTmp] === undefined) {
    // The session's TMPDIR stays writable for commands; /tmp itself is the machine's, not the host's folder.
    overrides.push([excludeSlashTmp, true])
  }
  for (const [key, value] of Object.entries(options.config ?? {})) overrides.push([key, value])
  return overrides
}

const buildEnvironment = (options: Options): Environment => {
  const set: { [name: string]: string | Redacted.Redacted<string> } = { ...defaultEnvironment }
  if (options.codexHome !== undefined) set["CODEX_HOME"] = options.codexHome
  if (options.tmpDir !== undefined) set["TMPDIR"] = options.tmpDir
  if (options.provider?.apiKey !== undefined) set[envKeyOf(options.provider)] = options.provider.apiKey
  Object.assign(set, options.env?.set)
  const environment: Environment = { mode: options.env?.mode ?? "inherit", set, unset: options.env?.unset ?? [] }
  const inheritCredentials = options.env?.inheritCredentials
  return inheritCredentials === undefined ? environment : { ...environment, inheritCredentials }
}

/**
 * What to launch: `codex app-server` with the overrides, in the cwd, with the environment.
 *
 * @category launch
 * @since 0.1.0
 */
export const toLaunchSpec = (options: Options): Effect.Effect<LaunchSpec, InvalidConfig> =>
  Effect.map(validate(options), (valid) => ({
    program: "codex",
    args: ["app-server", ...toOverrides(valid).flatMap(([key, value]) => ["-c", `${key}=${toToml(value)}`])],
    cwd: Option.fromUndefinedOr(valid.cwd),
    env: buildEnvironment(valid)
  }))

/**
 * The `thread/start` (or `thread/resume`) params for the options.
 *
 * @category launch
 * @since 0.1.0
 */
export const toThreadParams = (options: Options): { readonly [key: string]: unknown } => {
  const params: { [key: string]: unknown } = {}
  if (options.cwd !== undefined) params["cwd"] = options.cwd
  if (options.model !== undefined) params["model"] = options.model
  if (options.approvalPolicy !== undefined) params["approvalPolicy"] = options.approvalPolicy
  if (options.sandbox !== undefined) params["sandbox"] = options.sandbox
  if (options.ephemeral === true) params["ephemeral"] = true
  if (options.baseInstructions !== undefined) params["baseInstructions"] = options.baseInstructions
  if (options.developerInstructions !== undefined) params["developerInstructions"] = options.developerInstructions
  if (options.writableRoots !== undefined && options.writableRoots.length > 0) {
    params["config"] = { "sandbox_workspace_write.writable_roots": options.writableRoots }
  }
  return params
}
