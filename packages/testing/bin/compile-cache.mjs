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
 * writes what `load` compiled and opens the cache for reading (files 0644, directories 0755): only the directories
 * (one per Node version) changed since the last start opened them, so that a start that compiled nothing pays a
 * `readdir` and a `stat`, not a walk of the cache. What a start writes later (at its exit) changes its directory,
 * and the next start opens it.
 */
export const withCompileCache = async (load) => {
  const directory = process.env.NODE_COMPILE_CACHE ??
    new URL("../node_modules/.cache/node-compile-cache", import.meta.url).pathname
  const enabled = module.enableCompileCache?.(directory)
  const loaded = await load()
  if (enabled?.directory !== undefined && owns(enabled.directory)) {
    module.flushCompileCache?.()
    openChanged(enabled.directory)
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

/** Each directory of the cache whose modification time differs from the one recorded when it was last opened. */
const openChanged = (cache) => {
  try {
    for (const entry of Fs.readdirSync(cache, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue
      const dir = Path.join(cache, entry.name)
      const record = Path.join(cache, `.opened-${entry.name}`)
      const stamp = String(Fs.statSync(dir).mtimeMs)
      if (Fs.existsSync(record) && Fs.readFileSync(record, "utf8") === stamp) continue
      openForReading(dir)
      Fs.writeFileSync(record, stamp, { mode: 0o644 })
    }
  } catch {
    // Another start is writing it too, or it is not ours: the next start opens what is left.
  }
}

const openForReading = (dir) => {
  Fs.chmodSync(dir, 0o755)
  for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) openForReading(path)
    else if ((Fs.statSync(path).mode & 0o644) !== 0o644) Fs.chmodSync(path, 0o644)
  }
}
