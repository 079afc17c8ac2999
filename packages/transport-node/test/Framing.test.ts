import { assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { Framing } from "@tether/transport-node"
import { Effect } from "effect"
import * as fc from "fast-check"

const encode = (text: string) => new TextEncoder().encode(text)

const texts = (lines: ReadonlyArray<Transport.Line>) =>
  lines.map((line) => line._tag === "Text" ? line.text : `<too long ${line.length}>`)

/** Cuts `bytes` at every given offset. */
const cut = (bytes: Uint8Array, offsets: ReadonlyArray<number>): Array<Uint8Array> => {
  const chunks: Array<Uint8Array> = []
  let start = 0
  for (const offset of [...offsets].sort((a, b) => a - b)) {
    chunks.push(bytes.subarray(start, offset))
    start = offset
  }
  chunks.push(bytes.subarray(start))
  return chunks
}

describe("Framing", () => {
  it.effect("splits lines and keeps the final line without a newline", () =>
    Effect.sync(() => {
      const lines = Framing.split([encode("{\"a\":1}\n{\"b\":2}\n{\"c\":3}")])
      assert.deepStrictEqual(texts(lines), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"])
    }))

  it.effect("gives the same lines whatever the chunk boundaries, multi-byte characters included", () =>
    Effect.sync(() => {
      const input =
        "{\"t\":\"héllo wörld\"}\n{\"t\":\"日本語のテキスト\"}\n{\"t\":\"emoji 🎉🚀 done\"}\n\n{\"t\":\"last\"}\n"
      const bytes = encode(input)
      const expected = [
        "{\"t\":\"héllo wörld\"}",
        "{\"t\":\"日本語のテキスト\"}",
        "{\"t\":\"emoji 🎉🚀 done\"}",
        "{\"t\":\"last\"}"
      ]
      // Every single cut position, and every pair of cut positions, including inside each multi-byte sequence.
      for (let i = 0; i <= bytes.length; i++) {
        assert.deepStrictEqual(texts(Framing.split(cut(bytes, [i]))), expected, `cut at ${i}`)
        for (let j = i; j <= bytes.length; j += 3) {
          assert.deepStrictEqual(texts(Framing.split(cut(bytes, [i, j]))), expected, `cuts at ${i}, ${j}`)
        }
      }
      // One byte at a time.
      const bytewise = Array.from(bytes, (byte) => Uint8Array.of(byte))
      assert.deepStrictEqual(texts(Framing.split(bytewise)), expected)
    }))

  it.effect("emits a line as soon as its newline arrives, not at the end of input", () =>
    Effect.sync(() => {
      const splitter = Framing.makeSplitter()
      const out: Array<Transport.Line> = []
      splitter.push(encode("{\"a\":"), out)
      assert.strictEqual(out.length, 0)
      splitter.push(encode("1}\n{\"b\""), out)
      assert.deepStrictEqual(texts(out), ["{\"a\":1}"])
      splitter.end(out)
      assert.deepStrictEqual(texts(out), ["{\"a\":1}", "{\"b\""])
    }))

  it.effect("passes a line of several MiB through, across 64 KiB chunks", () =>
    Effect.sync(() => {
      const giant = JSON.stringify({ text: "é".repeat(1_500_000) }) // ~3 MiB of UTF-8
      const bytes = encode(`${giant}\n{"after":true}\n`)
      const chunks: Array<Uint8Array> = []
      for (let i = 0; i < bytes.length; i += 65_536 + 1) chunks.push(bytes.subarray(i, i + 65_536 + 1))
      const lines = Framing.split(chunks)
      assert.strictEqual(lines.length, 2)
      assert.strictEqual(lines[0]._tag, "Text")
      assert.strictEqual(lines[0]._tag === "Text" && lines[0].text, giant)
      assert.deepStrictEqual(texts(lines.slice(1)), ["{\"after\":true}"])
    }))

  it.effect("drops a line past the limit, reports it, and goes on with the next line", () =>
    Effect.sync(() => {
      const limit = 1024
      const long = `{"x":"${"é".repeat(2000)}"}` // 4010 bytes
      const longBytes = encode(long).length
      const bytes = encode(`{"before":1}\n${long}\n{"after":2}\n`)
      for (const size of [1, 7, 100, 1000, 1025, 5000]) {
        const chunks: Array<Uint8Array> = []
        for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size))
        const lines = Framing.split(chunks, { maxLineBytes: limit })
        assert.strictEqual(lines.length, 3, `chunk size ${size}`)
        assert.deepStrictEqual(texts([lines[0], lines[2]]), ["{\"before\":1}", "{\"after\":2}"])
        const marker = lines[1]
        assert.strictEqual(marker._tag, "TooLong")
        if (marker._tag === "TooLong") {
          assert.strictEqual(marker.length, longBytes)
          assert.strictEqual(marker.limit, limit)
          assert.isTrue(marker.prefix.startsWith("{\"x\":\"éé"))
          assert.isAtMost(new TextEncoder().encode(marker.prefix).length, Framing.tooLongPrefixBytes)
          assert.isFalse(marker.prefix.includes("\uFFFD"))
        }
      }
    }))

  it.effect("a line of exactly the limit passes; one byte more does not", () =>
    Effect.sync(() => {
      const exact = "a".repeat(100)
      const lines = Framing.split([encode(`${exact}\n${exact}b\n`)], { maxLineBytes: 100 })
      assert.deepStrictEqual(texts(lines), [exact, "<too long 101>"])
    }))

  it.effect("an oversized final line without a newline is reported at the end", () =>
    Effect.sync(() => {
      const lines = Framing.split([encode("ok\n"), encode("x".repeat(50)), encode("y".repeat(50))], {
        maxLineBytes: 60
      })
      assert.deepStrictEqual(texts(lines), ["ok", "<too long 100>"])
    }))

  it.effect("counts the whole length of a dropped line across many chunks", () =>
    Effect.sync(() => {
      const splitter = Framing.makeSplitter({ maxLineBytes: 1024 })
      const out: Array<Transport.Line> = []
      const chunk = new Uint8Array(65_536).fill(120)
      for (let i = 0; i < 160; i++) splitter.push(chunk, out)
      splitter.push(encode("\nnext\n"), out)
      assert.deepStrictEqual(texts(out), [`<too long ${160 * 65_536}>`, "next"])
    }))

  it.effect("measures a line by its bytes, invalid UTF-8 included, wherever it falls in a read", () =>
    Effect.sync(() => {
      // 8 invalid bytes decode to 8 U+FFFD (24 bytes re-encoded): the line is 8 bytes, under a limit of 10.
      const bad = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
      const input = new Uint8Array([...encode("x\n"), ...bad, ...encode("\n")])
      const lines = Framing.split([input], { maxLineBytes: 10 })
      assert.deepStrictEqual(texts(lines), ["x", "\uFFFD".repeat(8)])
      // The same line in a run of lines longer than the limit, where each line is measured on its own, beside an
      // invalid line of 11 bytes.
      const worse = Uint8Array.of(...bad, 0xff, 0xff, 0xff)
      const longer = new Uint8Array([...encode("x\n"), ...bad, ...encode("\n"), ...worse, ...encode("\ny\n")])
      assert.deepStrictEqual(texts(Framing.split([longer], { maxLineBytes: 10 })), [
        "x",
        "\uFFFD".repeat(8),
        "<too long 11>",
        "y"
      ])
    }))

  it.effect("splits a read's run of lines alike whether the run fits in the limit or not", () =>
    Effect.sync(() => {
      // After a read's first line, the lines up to its last newline are a run: a run of at most the limit holds no
      // line over it and is split on its text alone; a longer run measures each line.
      const split = (text: string) => texts(Framing.split([encode(text)], { maxLineBytes: 10 }))
      // A run of exactly the limit, one line of exactly the limit.
      assert.deepStrictEqual(split(`a\n${"b".repeat(10)}\nc`), ["a", "b".repeat(10), "c"])
      // A run one byte longer: one line one byte over.
      assert.deepStrictEqual(split(`a\n${"b".repeat(11)}\nc`), ["a", "<too long 11>", "c"])
      // A run longer than the limit of short lines, with an empty one.
      assert.deepStrictEqual(split(`a\n${"b".repeat(5)}\n\n${"c".repeat(5)}\n`), ["a", "b".repeat(5), "c".repeat(5)])
      // A run within the limit with empty lines.
      assert.deepStrictEqual(split("a\n\nb\n\n\nc\n"), ["a", "b", "c"])
    }))

  it.effect("gives what a reference splitter gives, for any bytes cut anywhere", () =>
    Effect.sync(() => {
      // The reference: split the whole input on the newline byte, drop empty lines, decode each line on its own.
      const reference = (bytes: Uint8Array, limit: number): Array<string> => {
        const out: Array<string> = []
        let start = 0
        for (let i = 0; i <= bytes.length; i++) {
          if (i < bytes.length && bytes[i] !== 10) continue
          const line = bytes.subarray(start, i)
          if (line.length > limit) out.push(`<too long ${line.length}>`)
          else if (line.length > 0) out.push(new TextDecoder("utf-8", { ignoreBOM: true }).decode(line))
          start = i + 1
        }
        return out
      }
      const byte = fc.oneof(
        fc.constant(10),
        fc.integer({ min: 0x20, max: 0x7e }),
        fc.integer({ min: 0x80, max: 0xff }),
        fc.constantFrom(0xc3, 0xa9, 0xe6, 0x97, 0xa5, 0xf0, 0x9f, 0x8e, 0x89)
      )
      fc.assert(
        fc.property(
          fc.array(byte, { maxLength: 300 }),
          fc.array(fc.nat({ max: 300 }), { maxLength: 6 }),
          fc.integer({ min: 1, max: 40 }),
          (values, cuts, limit) => {
            const bytes = Uint8Array.from(values)
            const chunks = cut(bytes, cuts.map((c) => Math.min(c, bytes.length)))
            assert.deepStrictEqual(texts(Framing.split(chunks, { maxLineBytes: limit })), reference(bytes, limit))
          }
        ),
        { numRuns: 2000 }
      )
    }))
})
