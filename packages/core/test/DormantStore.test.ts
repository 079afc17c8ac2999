import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, FileSystem, Layer, Path, PlatformError } from "effect"
import * as DormantStore from "../src/DormantStore.ts"

// The file-system store over a file system in memory (a set of directories), for what it makes and what it does not.

const memoryFileSystem = () => {
  const directories = new Set<string>(["/"])
  const parent = (path: string) => path.slice(0, Math.max(1, path.lastIndexOf("/")))
  const fileSystem = FileSystem.makeNoop({
    makeDirectory: (path, options) =>
      Effect.suspend(() => {
        if (options?.recursive === true) {
          for (let at = path; !directories.has(at); at = parent(at)) directories.add(at)
          return Effect.void
        }
        if (!directories.has(parent(path))) {
          return Effect.fail(
            PlatformError.systemError({
              _tag: "NotFound",
              module: "FileSystem",
              method: "makeDirectory",
              pathOrDescriptor: path
            })
          )
        }
        directories.add(path)
        return Effect.void
      }),
    remove: (path) =>
      Effect.sync(() => {
        for (const directory of [...directories]) {
          if (directory === path || directory.startsWith(`${path}/`)) directories.delete(directory)
        }
      })
  })
  return { directories, layer: Layer.merge(Layer.succeed(FileSystem.FileSystem)(fileSystem), Path.layer) }
}

describe("DormantStore.layerFileSystem", () => {
  it.effect("a CLI's directory is made in the store's cli directory; a store whose directory is gone is not made again", () =>
    Effect.gen(function*() {
      const { directories, layer } = memoryFileSystem()
      const store = Context.get(
        yield* Layer.build(DormantStore.layerFileSystem({ directory: "/tmp/store" }).pipe(Layer.provide(layer))),
        DormantStore.DormantStore
      )
      assert.isTrue(directories.has("/tmp/store/conversations"))
      const directory = yield* store.allocate
      assert.match(directory, /^\/tmp\/store\/cli\/[^/]+$/)
      assert.isTrue(directories.has(directory))
      // Its host removed it (a temporary directory): a registry still refilling a pool fails to allocate, and leaves
      // nothing behind.
      yield* FileSystem.FileSystem.use((fs) => fs.remove("/tmp/store", { recursive: true })).pipe(
        Effect.provide(layer),
        Effect.orDie
      )
      const failed = yield* Effect.flip(store.allocate)
      assert.strictEqual(failed._tag, "DormantStoreFailed")
      assert.isFalse([...directories].some((path) => path.startsWith("/tmp/store")))
    }))
})
