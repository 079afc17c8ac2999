/**
 * The stderr tail keeps what it shows and nothing more: a chunk a stream hands over is a slice of its 64 KiB read
 * buffer (Node 24), and a few bytes of stderr kept for a session's lifetime must not keep that buffer alive; nor may
 * the marker a session's process tree looks for keep a slab of Node's shared pool (`Buffer.poolSize`, 64 KiB).
 */
import { assert, describe, it } from "@effect/vitest"
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
})
