// Node's compile cache for the fake and fast CLIs. The simulators are TypeScript and the codec they encode with is
// big: the cache spares every start after the first the parsing and compiling (about 100 ms of a fake's start).
//
// It is kept next to the package (`../node_modules/.cache/node-compile-cache`, or NODE_COMPILE_CACHE), not in the
// OS's temporary directory: a session's TMPDIR is its own (the transport's private /tmp) and goes with it, so a cache
// there is cold at every start. And it is opened for reading to every uid once written: Node writes its cache files
// 0600, and a boxed session (NodeTransport's isolation, the default as root) runs as a uid of its own, which may read
// the cache its host's uid wrote but not write one; with 0600 files every boxed start compiled everything again.
import * as Fs from "node:fs"
import module from "node:module"
import * as Path from "node:path"

/**
 * Enables the cache, runs `load`, then, when this process owns the cache's directory (the uid that wrote it),
 * writes what `load` compiled and opens every file of the cache for reading (0644; its directories 0755).
 */
export const withCompileCache = async (load) => {
  const directory = process.env.NODE_COMPILE_CACHE ??
    new URL("../node_modules/.cache/node-compile-cache", import.meta.url).pathname
  const enabled = module.enableCompileCache?.(directory)
  const loaded = await load()
  if (enabled?.directory !== undefined && owns(enabled.directory)) {
    module.flushCompileCache?.()
    openForReading(enabled.directory)
  }
  return loaded
}

const owns = (path) => {
  try {
    return Fs.statSync(path).uid === process.getuid?.()
  } catch {
    return false
  }
}

const openForReading = (dir) => {
  try {
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      const path = Path.join(dir, entry.name)
      const mode = entry.isDirectory() ? 0o755 : 0o644
      if ((Fs.statSync(path).mode & mode) !== mode) Fs.chmodSync(path, mode)
      if (entry.isDirectory()) openForReading(path)
    }
  } catch {
    // Another start is writing it too, or it is not ours: the next start opens what is left.
  }
}
