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
const codexPackaged = Executable.packagedBinaries("codex")

/** An installed `@openai/codex` in `project`, pnpm's way: the store, the main package's link, its bin shim. */
const installCodex = (project: string, options?: { readonly native?: boolean }) => {
  const store = Path.join(project, "node_modules", ".pnpm", "@openai+codex@0.171.0", "node_modules")
  const main = Path.join(store, "@openai", "codex")
  const launcher = touch(Path.join(main, "bin", "codex.js"))
  const native = options?.native === false ? undefined : touch(Path.join(store, codexPackaged[0]))
  Fs.mkdirSync(Path.join(project, "node_modules", "@openai"), { recursive: true })
  Fs.symlinkSync(main, Path.join(project, "node_modules", "@openai", "codex"))
  const shim = Path.join(project, "node_modules", ".bin", "codex")
  Fs.mkdirSync(Path.dirname(shim), { recursive: true })
  // What pnpm writes (abridged): a shell script that runs the launcher with node.
  Fs.writeFileSync(
    shim,
    `#!/bin/sh\nexec node "$basedir_abs"/'../@openai/codex/bin/codex.js' "$@"\n# cmd-shim-target=${launcher}\n`
  )
  Fs.chmodSync(shim, 0o755)
  return { launcher, native, shim }
}

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

  describe("codex", () => {
    it.effect("the native binary of @openai/codex's platform package is vendor/<target triple>/bin/codex", () =>
      Effect.sync(() => {
        assert.strictEqual(Executable.envVar("codex"), "TETHER_CODEX_PATH")
        assert.match(
          codexPackaged[0],
          /^@openai\/codex-(linux|darwin|win32)-(x64|arm64)\/vendor\/(x86_64|aarch64)-[a-z0-9-]+\/bin\/codex(\.exe)?$/
        )
        if (process.platform === "linux" && process.arch === "x64") {
          assert.strictEqual(codexPackaged[0], "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        }
        assert.isFalse(codexPackaged.some((specifier) => specifier.endsWith(".js")), "never the Node launcher")
      }))

    it.effect("an explicit path, then TETHER_CODEX_PATH, then PATH, as for claude", () =>
      Effect.gen(function*() {
        const dir = yield* tmp
        const explicit = touch(Path.join(dir, "explicit", "codex"))
        const fromEnv = touch(Path.join(dir, "env", "codex"))
        const onPath = touch(Path.join(dir, "bin", "codex"))
        const env = { TETHER_CODEX_PATH: fromEnv, PATH: Path.join(dir, "bin") }
        assert.strictEqual(yield* Executable.resolve({ program: "codex", path: explicit, env }), explicit)
        assert.strictEqual(yield* Executable.resolve({ program: "codex", env }), fromEnv)
        assert.strictEqual(
          yield* Executable.resolve({ program: "codex", env: { PATH: Path.join(dir, "bin") }, roots: [dir] }),
          onPath
        )
        const error = yield* Effect.flip(
          Executable.resolve({ program: "codex", env: { TETHER_CODEX_PATH: Path.join(dir, "nope") } })
        )
        assert.deepStrictEqual(error.searched, [`TETHER_CODEX_PATH=${Path.join(dir, "nope")}`])
      }))

    it.effect("then the native binary of an installed @openai/codex (pnpm's strict layout), never its launcher", () =>
      Effect.gen(function*() {
        const project = yield* tmp
        const { native } = installCodex(project)
        const nested = Path.join(project, "packages", "app")
        Fs.mkdirSync(nested, { recursive: true })
        assert.strictEqual(yield* Executable.resolve({ program: "codex", env: { PATH: "" }, roots: [nested] }), native)
      }))

    it.effect("a launcher shim on PATH stands for its installation's native binary", () =>
      Effect.gen(function*() {
        const project = yield* tmp
        const { native, shim } = installCodex(project)
        const later = touch(Path.join(project, "later", "codex"))
        const PATH = [Path.dirname(shim), Path.dirname(later)].join(Path.delimiter)
        assert.strictEqual(yield* Executable.resolve({ program: "codex", env: { PATH }, roots: [yield* tmp] }), native)
      }))

    it.effect("a launcher symlinked onto PATH (npm -g) stands for its installation's native binary", () =>
      Effect.gen(function*() {
        const prefix = yield* tmp
        const main = Path.join(prefix, "lib", "node_modules", "@openai", "codex")
        const launcher = touch(Path.join(main, "bin", "codex.js"))
        // npm nests or hoists the optional dependency; hoisted here.
        const native = touch(Path.join(prefix, "lib", "node_modules", codexPackaged[0]))
        Fs.mkdirSync(Path.join(prefix, "bin"))
        Fs.symlinkSync(launcher, Path.join(prefix, "bin", "codex"))
        assert.strictEqual(
          yield* Executable.resolve({ program: "codex", env: { PATH: Path.join(prefix, "bin") }, roots: [yield* tmp] }),
          native
        )
      }))

    it.effect("a launcher without a native binary is skipped on PATH, and named in ExecutableNotFound", () =>
      Effect.gen(function*() {
        const project = yield* tmp
        const { shim } = installCodex(project, { native: false })
        const later = touch(Path.join(project, "later", "codex"))
        const PATH = [Path.dirname(shim), Path.dirname(later)].join(Path.delimiter)
        assert.strictEqual(yield* Executable.resolve({ program: "codex", env: { PATH }, roots: [yield* tmp] }), later)

        const elsewhere = yield* tmp
        const error = yield* Effect.flip(
          Executable.resolve({ program: "codex", env: { PATH: Path.dirname(shim) }, roots: [elsewhere] })
        )
        assert.strictEqual(error._tag, "ExecutableNotFound")
        assert.strictEqual(error.program, "codex")
        assert.deepStrictEqual(error.searched.slice(0, 3), [
          "TETHER_CODEX_PATH (unset)",
          `${shim} (the npm launcher, with no native binary beside it)`,
          `PATH (${Path.dirname(shim)})`
        ])
        assert.isTrue(error.searched.slice(3).some((place) => place.includes(codexPackaged[0])))
        assert.isTrue(error.searched.slice(3).some((place) => place.includes(elsewhere)))
        assert.include(error.message, "TETHER_CODEX_PATH")
      }))

    it.effect("an explicit launcher resolves to its own installation's native binary, or fails there", () =>
      Effect.gen(function*() {
        const project = yield* tmp
        const { launcher, native, shim } = installCodex(project)
        assert.strictEqual(yield* Executable.resolve({ program: "codex", path: launcher, env: { PATH: "" } }), native)
        assert.strictEqual(
          yield* Executable.resolve({ program: "codex", env: { TETHER_CODEX_PATH: shim, PATH: "" } }),
          native
        )

        const bare = yield* tmp
        const lonely = installCodex(bare, { native: false })
        const onPath = touch(Path.join(bare, "bin", "codex"))
        const error = yield* Effect.flip(
          Executable.resolve({ program: "codex", path: lonely.launcher, env: { PATH: Path.dirname(onPath) } })
        )
        assert.strictEqual(
          error.searched[0],
          `explicit path ${lonely.launcher} (the npm launcher, not the native binary)`
        )
        assert.isTrue(error.searched.slice(1).every((place) => place.startsWith("npm package @openai/codex")))
      }))
  })
})
