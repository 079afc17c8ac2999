/**
 * The environment a CLI starts with: built from the launch spec, its secrets listed, checked for NUL characters.
 *
 * @internal
 */
import * as Transport from "@tether/core/Transport"
import * as Redacted from "effect/Redacted"
import * as Secrets from "./secrets.ts"

export const reveal = (value: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(value) ? Redacted.value(value) : value

/** The environment a process starts with, with `Redacted` values revealed: built only to spawn. */
export const buildEnvironment = (environment: Transport.Environment): Record<string, string> => {
  const env: Record<string, string> = {}
  if (environment.mode === "inherit") {
    const passed = new Set(environment.inheritCredentials ?? [])
    for (const [key, value] of Object.entries(process.env)) {
      // A credential of the host's own reaches the CLI, and every tool it runs, only when the host named it.
      if (value !== undefined && (!Transport.isCredentialVariable(key) || passed.has(key))) env[key] = value
    }
  } else {
    for (const key of ["PATH", "HOME"]) {
      const value = process.env[key]
      if (value !== undefined) env[key] = value
    }
  }
  for (const [key, value] of Object.entries(environment.set)) env[key] = reveal(value)
  for (const key of environment.unset) delete env[key]
  return env
}

/** `PATH` as {@link buildEnvironment} makes it, without making the rest (on Linux, where the box needs it). */
export const pathOf = (environment: Transport.Environment): string | undefined => {
  if (environment.unset.includes("PATH")) return undefined
  return Object.hasOwn(environment.set, "PATH") ? reveal(environment.set["PATH"]!) : process.env.PATH
}

/**
 * The secrets of a launch spec, by the name they are reported under: its `Redacted` values, and the values of its
 * credential variables however they came (a plain string in `set`, which the typed options refuse but a spec built
 * by hand may hold; the host's own, inherited by name).
 */
export const secretsOf = (spec: Transport.LaunchSpec): ReadonlyArray<Secrets.Secret> => {
  const secrets: Array<Secrets.Secret> = []
  for (const [name, value] of Object.entries(spec.env.set)) {
    if (Redacted.isRedacted(value)) secrets.push({ name, value: Redacted.value(value) })
    else if (Transport.isCredentialVariable(name)) secrets.push({ name, value })
  }
  if (spec.env.mode === "inherit") {
    for (const name of spec.env.inheritCredentials ?? []) {
      const value = process.env[name]
      if (value !== undefined && !Object.hasOwn(spec.env.set, name)) secrets.push({ name, value })
    }
  }
  for (const pipe of spec.secretPipes ?? []) secrets.push({ name: pipe.variable, value: Redacted.value(pipe.value) })
  return secrets
}

// Node's own NUL check throws an error that quotes the value: check first, so a Redacted value never reaches an
// error message.
export const findNul = (file: string, args: ReadonlyArray<string>, env: Record<string, string>): string | undefined => {
  if (file.includes("\0")) return "the executable path contains a NUL character"
  const index = args.findIndex((arg) => arg.includes("\0"))
  if (index !== -1) return `argument ${index + 1} contains a NUL character`
  for (const [key, value] of Object.entries(env)) {
    if (key.includes("\0") || value.includes("\0")) return `the environment variable ${key} contains a NUL character`
  }
  return undefined
}
