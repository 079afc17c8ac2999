/**
 * The ACP client's file server on a real file system: symbolic links are followed before anything is decided (a live
 * link out of the session's directory is refused, a dangling one is never written through), a missing file is
 * reported the way agents recognise it, and the additional directories are served too.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import * as Client from "../src/internal/client.ts"

const setup = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const base = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "tether-acp-client-" }))
  const cwd = `${base}/cwd`
  const outside = `${base}/outside`
  const extra = `${base}/extra`
  for (const dir of [cwd, outside, extra]) yield* fs.makeDirectory(dir)
  yield* fs.writeFileString(`${cwd}/notes.txt`, "inside")
  yield* fs.writeFileString(`${outside}/secret.txt`, "secret")
  yield* fs.writeFileString(`${extra}/more.txt`, "more")
  yield* fs.symlink(`${outside}/secret.txt`, `${cwd}/live`)
  yield* fs.symlink(`${outside}/planted.txt`, `${cwd}/dangling`)
  yield* fs.symlink(`${cwd}/notes.txt`, `${cwd}/alias`)
  const serve = Client.serve({ readTextFile: true, writeTextFile: true }, [cwd, extra], fs, undefined)
  const read = (path: string) => serve("fs/read_text_file", { sessionId: "s", path })
  const write = (path: string, content: string) => serve("fs/write_text_file", { sessionId: "s", path, content })
  return { fs, cwd, outside, extra, read, write }
})

describe("the ACP client's files on a real file system", () => {
  it.live("a live symbolic link out of the session's directory is refused, for reads and writes", () =>
    Effect.gen(function*() {
      const { cwd, fs, outside, read, write } = yield* setup
      const got = yield* read(`${cwd}/live`)
      assert.strictEqual(got._tag, "Error")
      assert.notDeepEqual(got, { _tag: "Success", payload: { content: "secret" } })
      assert.strictEqual((yield* write(`${cwd}/live`, "overwritten"))._tag, "Error")
      assert.strictEqual(yield* fs.readFileString(`${outside}/secret.txt`), "secret")
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.live("a dangling symbolic link is never written through: nothing is created where it points", () =>
    Effect.gen(function*() {
      const { cwd, fs, outside, write } = yield* setup
      const got = yield* write(`${cwd}/dangling`, "escaped")
      assert.strictEqual(got._tag, "Error")
      assert.isFalse(yield* fs.exists(`${outside}/planted.txt`))
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.live("a link inside is followed; a new file is created; the additional directories are served", () =>
    Effect.gen(function*() {
      const { cwd, extra, fs, read, write } = yield* setup
      assert.deepStrictEqual(yield* read(`${cwd}/alias`), { _tag: "Success", payload: { content: "inside" } })
      assert.deepStrictEqual(yield* write(`${cwd}/new.txt`, "fresh"), { _tag: "Success", payload: {} })
      assert.strictEqual(yield* fs.readFileString(`${cwd}/new.txt`), "fresh")
      assert.deepStrictEqual(yield* read(`${extra}/more.txt`), { _tag: "Success", payload: { content: "more" } })
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.live("a missing file is -32002 'Resource not found: <path>' (what agents take for ENOENT); a refusal -32603", () =>
    Effect.gen(function*() {
      const { cwd, read } = yield* setup
      assert.deepStrictEqual(yield* read(`${cwd}/missing.txt`), {
        _tag: "Error",
        message: `Resource not found: ${cwd}/missing.txt`,
        code: -32002
      })
      const refused = yield* read("/etc/hostname")
      assert.strictEqual(refused._tag === "Error" ? refused.code : undefined, -32603)
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))
})
