/**
 * Reads the files of /proc and of the cgroup filesystem, which report a size of 0: for those, `readFileSync` reads
 * into a new 64 KiB buffer, twice per file (the second read finds the end). Read at every 2 ms poll of a box's
 * handshake, every teardown poll and for every environment a scan reads, that is garbage the host's allocator
 * keeps in part (about 20 KiB per boxed session). These read into one buffer, grown to the largest file read up to
 * 64 KiB; what a larger file has beyond that is read by `readFileSync`.
 *
 * @internal
 */
import * as Fs from "node:fs"

const keptAtMost = 65_536
// Its own memory, not a slice of Node's shared pool (which a kept slice would keep whole).
let shared = Buffer.allocUnsafeSlow(4096)

/**
 * The bytes of `path`: a view of the shared buffer, valid until the next read (copy what is kept). Throws as
 * `readFileSync` does.
 *
 * @internal
 */
export const readBytes = (path: string): Buffer => {
  const fd = Fs.openSync(path, "r")
  try {
    let length = 0
    for (;;) {
      if (length === shared.length) {
        if (shared.length >= keptAtMost) return Buffer.concat([shared, Fs.readFileSync(fd)])
        const grown = Buffer.allocUnsafeSlow(shared.length * 2)
        shared.copy(grown, 0, 0, length)
        shared = grown
      }
      const read = Fs.readSync(fd, shared, length, shared.length - length, null)
      if (read === 0) return shared.subarray(0, length)
      length += read
    }
  } finally {
    Fs.closeSync(fd)
  }
}

/** The text of `path`, read as {@link readBytes} does (latin1). Throws as `readFileSync` does. @internal */
export const readText = (path: string): string => readBytes(path).toString("latin1")
