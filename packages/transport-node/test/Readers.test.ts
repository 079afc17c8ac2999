/**
 * The stderr tail keeps what it shows and nothing more: a chunk a stream hands over is a slice of its 64 KiB read
 * buffer (Node 24), and a few bytes of stderr kept for a session's lifetime must not keep that buffer alive; nor may
 * the marker a session's process tree looks for keep a slab of Node's shared pool (`Buffer.poolSize`, 64 KiB); and
 * the kernel's files the transport polls are read into one kept buffer, not two new 64 KiB ones per read.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as KernelFiles from "../src/internal/kernelFiles.ts"
import * as ProcessTree from "../src/internal/processTree.ts"
import { makeTail } from "../src/internal/readers.ts"

describe("what a session keeps of its buffers", () => {
  it("the stderr tail copies each chunk: a slice of a 64 KiB read buffer is not kept whole", () => {
    const tail = makeTail(1_000)
    for (const text of ["warning: one\n", "warning: two\n"]) {
      const read = Buffer.alloc(64 * 1024)
      const n = read.write(text)
      tail.push(read.subarray(0, n))
    }
    assert.strictEqual(tail.read().text, "warning: one\nwarning: two\n")
    assert.strictEqual(tail.retained(), "warning: one\nwarning: two\n".length)
    // The end of an oversized chunk, too.
    tail.push(Buffer.alloc(64 * 1024, "x"))
    assert.isAtMost(tail.retained(), 1_000 + "warning: two\n".length)
  })

  it("unpooled: a buffer of its own, whatever the source is a slice of", () => {
    const pooled = Buffer.from("\0TETHER_MARK=abc\0")
    assert.isAbove(pooled.buffer.byteLength, pooled.length, "a slice of Node's pool")
    const own = ProcessTree.unpooled(pooled)
    assert.strictEqual(own.buffer.byteLength, pooled.length)
    assert.isTrue(own.equals(pooled))
  })

  it("kernel files: read whole into one kept buffer of their own (not 64 KiB of new memory twice per read), larger ones too", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-kernel-files-"))
    try {
      // /proc reports size 0: what `readFileSync` reads into a new 64 KiB buffer.
      const stat = KernelFiles.readText(`/proc/${process.pid}/stat`)
      assert.isTrue(stat.startsWith(`${process.pid} (`))
      const first = KernelFiles.readBytes(`/proc/${process.pid}/stat`)
      const again = KernelFiles.readBytes(`/proc/${process.pid}/cmdline`)
      assert.strictEqual(again.buffer, first.buffer, "a new buffer for each read")
      // Nothing over 4 KiB was read yet: the buffer is its first, of its own (a slice of Node's pool would be 64 KiB).
      assert.strictEqual(first.buffer.byteLength, 4096, "a slice of Node's pool, or a buffer grown already")
      // Past the first buffer (4 KiB), past what is kept (64 KiB), and a shorter one after both.
      for (const size of [10_000, 200_000, 3]) {
        const file = Path.join(dir, String(size))
        const content = Buffer.alloc(size)
        for (let i = 0; i < size; i++) content[i] = 33 + (i * 7) % 90
        Fs.writeFileSync(file, content)
        assert.isTrue(KernelFiles.readBytes(file).equals(content), `a file of ${size} bytes`)
      }
      assert.isAtMost(KernelFiles.readBytes(`/proc/${process.pid}/stat`).buffer.byteLength, 65_536)
      assert.throws(() => KernelFiles.readText(Path.join(dir, "missing")), /ENOENT/)
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
