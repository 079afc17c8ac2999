import { assert, describe, it } from "@effect/vitest"
import { Executable } from "@tether/transport-node"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { tempDir } from "./utils.ts"

/** A fresh directory, removed when the test's scope closes, passed or failed. */
const tmp = tempDir("tether-exe-")

const touch = (file: string, mode = 0o755) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, "#!/bin/sh\n")
  Fs.chmodSync(file, mode)
  return file
}

const packaged = Executable.packagedBinaries("claude")

describe("Executable", () => {
  it.effect("names the environment variable after the program", () =>
    Effect.sync(() => {
      assert.strictEqual(Executable.envVar("claude"), "TETHER_CLAUDE_PATH")
      assert.strictEqual(Executable.envVar("my-cli.v2"), "TETHER_MY_CLI_V2_PATH")
    }))

  it.effect("an explicit path wins over the environment variable and PATH", () =>
    Effect.gen(function*() {
      const dir = yield* tmp
      const explicit = touch(Path.join(dir, "explicit", "claude"))
      const fromEnv = touch(Path.join(dir, "env", "claude"))
      touch(Path.join(dir, "bin", "claude"))
      const found = yield* Executable.resolve({
        program: "claude",
        path: explicit,
        env: { TETHER_CLAUDE_PATH: fromEnv, PATH: Path.join(dir, "bin") }
      })
      assert.strictEqual(found, explicit)
    }))

  it.effect("an explicit path that is not an executable file fails there (no silent fallback)", () =>
    Effect.gen(function*() {
      const dir = yield* tmp
      touch(Path.join(dir, "bin", "claude"))
      const error = yield* Effect.flip(Executable.resolve({
        program: "claude",
        path: Path.join(dir, "missing"),
        env: { PATH: Path.join(dir, "bin") }
      }))
      assert.strictEqual(error._tag, "ExecutableNotFound")
      assert.deepStrictEqual(error.searched, [`explicit path ${Path.join(dir, "missing")}`])
      assert.isTrue(error.safeToFallback)
    }))

  it.effect("then TETHER_<PROGRAM>_PATH, authoritative when set", () =>
    Effect.gen(function*() {
      const dir = yield* tmp
      const fromEnv = touch(Path.join(dir, "env", "claude"))
      touch(Path.join(dir, "bin", "claude"))
      assert.strictEqual(
        yield* Executable.resolve({
          program: "claude",
          env: { TETHER_CLAUDE_PATH: fromEnv, PATH: Path.join(dir, "bin") }
        }),
        fromEnv
      )
      const notExecutable = touch(Path.join(dir, "env", "plain"), 0o644)
      const error = yield* Effect.flip(
        Executable.resolve({
          program: "claude",
          env: { TETHER_CLAUDE_PATH: notExecutable, PATH: Path.join(dir, "bin") }
        })
      )
      assert.deepStrictEqual(error.searched, [`TETHER_CLAUDE_PATH=${notExecutable}`])
    }))

  it.effect("then the directories of PATH, in order, skipping files that are not executable", () =>
    Effect.gen(function*() {
      const dir = yield* tmp
      touch(Path.join(dir, "a", "claude"), 0o644)
      const second = touch(Path.join(dir, "b", "claude"))
      touch(Path.join(dir, "c", "claude"))
      const PATH = ["a", "b", "c"].map((name) => Path.join(dir, name)).join(Path.delimiter)
      assert.strictEqual(yield* Executable.resolve({ program: "claude", env: { PATH }, roots: [dir] }), second)
    }))

  it.effect("then the native binary of an installed @anthropic-ai/claude-code platform package", () =>
    Effect.gen(function*() {
      const project = yield* tmp
      const binary = touch(Path.join(project, "node_modules", packaged[0]))
      const nested = Path.join(project, "packages", "app")
      Fs.mkdirSync(nested, { recursive: true })
      // Resolved like require() would: from the working directory upwards.
      assert.strictEqual(yield* Executable.resolve({ program: "claude", env: { PATH: "" }, roots: [nested] }), binary)
    }))

  it.effect("finds the platform package next to the main package in pnpm's strict layout", () =>
    Effect.gen(function*() {
      const project = yield* tmp
      const store = Path.join(project, "node_modules", ".pnpm", "@anthropic-ai+claude-code@1.0.0", "node_modules")
      Fs.mkdirSync(Path.join(store, "@anthropic-ai", "claude-code"), { recursive: true })
      const binary = touch(Path.join(store, packaged[0]))
      Fs.mkdirSync(Path.join(project, "node_modules", "@anthropic-ai"), { recursive: true })
      Fs.symlinkSync(
        Path.join(store, "@anthropic-ai", "claude-code"),
        Path.join(project, "node_modules", "@anthropic-ai", "claude-code")
      )
      assert.strictEqual(yield* Executable.resolve({ program: "claude", env: { PATH: "" }, roots: [project] }), binary)
    }))

  it.effect("not found names every place searched", () =>
    Effect.gen(function*() {
      const dir = yield* tmp
      const error = yield* Effect.flip(Executable.resolve({ program: "claude", env: { PATH: dir }, roots: [dir] }))
      assert.strictEqual(error._tag, "ExecutableNotFound")
      assert.strictEqual(error.program, "claude")
      assert.deepStrictEqual(error.searched.slice(0, 2), ["TETHER_CLAUDE_PATH (unset)", `PATH (${dir})`])
      assert.isTrue(error.searched.slice(2).some((place) => place.includes(packaged[0])))
      assert.include(error.message, "TETHER_CLAUDE_PATH")
    }))
})
