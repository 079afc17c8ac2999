import { assert, describe, it } from "@effect/vitest"
import { PinnedClaude } from "@tether/testing"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

// The binaries are not run here (that is for the real-CLI tests, inside a loopback-only namespace): resolution
// checks the installed packages' versions.

describe("PinnedClaude", () => {
  it.effect("finds the native binary of every pinned version, each a different file", () =>
    Effect.gen(function*() {
      const paths = yield* Effect.forEach(PinnedClaude.versions, PinnedClaude.resolve)
      assert.strictEqual(new Set(paths).size, PinnedClaude.versions.length)
      for (const [i, path] of paths.entries()) {
        assert.isTrue(Path.isAbsolute(path))
        Fs.accessSync(path, Fs.constants.X_OK)
        const manifest = JSON.parse(Fs.readFileSync(Path.join(Path.dirname(path), "package.json"), "utf8"))
        assert.strictEqual(manifest.version, PinnedClaude.versions[i])
        assert.match(manifest.name, /^@anthropic-ai\/claude-code-/)
      }
      assert.strictEqual(PinnedClaude.resolveSync(PinnedClaude.oldest), paths.at(-1))
    }))

  it.effect("refuses what is not a pinned version", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(PinnedClaude.resolve("2.0.0" as PinnedClaude.Version))
      assert.strictEqual(error._tag, "ExecutableNotFound")
      assert.include(error.message, "not a pinned version")
    }))

  it("TETHER_CLAUDE_VERSION selects a version; unset means the newest; a typo is refused", () => {
    assert.strictEqual(PinnedClaude.fromEnv({}), PinnedClaude.latest)
    assert.strictEqual(PinnedClaude.fromEnv({ TETHER_CLAUDE_VERSION: "" }), PinnedClaude.latest)
    assert.strictEqual(PinnedClaude.fromEnv({ TETHER_CLAUDE_VERSION: "2.1.197" }), "2.1.197")
    assert.throws(() => PinnedClaude.fromEnv({ TETHER_CLAUDE_VERSION: "2.1.19" }), /not a pinned claude version/)
    assert.deepStrictEqual([PinnedClaude.latest, PinnedClaude.oldest], ["2.1.332", "2.1.197"])
  })
})
