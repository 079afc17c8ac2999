/**
 * Deterministic ids for the simulated CLIs: every id a simulator mints (session, thread, turn, item and request ids)
 * comes from one generator seeded by the simulated process's pid, so that the same script and seed give the same
 * frames.
 *
 * @internal
 */

const lowDigits = Array.from({ length: 4096 }, (_, i) => i.toString(16).padStart(3, "0"))

/** A generator of ids: UUIDs (version 4 in shape) and hex strings of a given length. */
export interface Ids {
  readonly uuid: () => string
  readonly hex: (length: number) => string
}

/**
 * Deterministic ids: a prefix drawn from the seed (mulberry32), then a counter. The same script and seed give the
 * same frames, ids never repeat within a process, and a frame's id costs a few string operations, not a draw per
 * digit (a benchmark's fake CLI mints one per frame).
 */
export const makeIds = (seed: number): Ids => {
  let s = seed >>> 0
  const next = () => {
    s = (s + 0x6D2B79F5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  let random = ""
  for (let i = 0; i < 20; i++) random += Math.floor(next() * 16).toString(16)
  const variant = (8 + Math.floor(next() * 4)).toString(16)
  const uuidPrefix = `${random.slice(0, 8)}-${random.slice(8, 12)}-4${random.slice(12, 15)}-${variant}${
    random.slice(15, 18)
  }-`
  // The low three hex digits from a table, the rest formatted once every 4,096 ids.
  let counter = 0
  let high = ""
  let uuidHigh = ""
  const next12 = () => {
    const low = counter & 0xfff
    if (low === 0) {
      high = random + (counter / 4096).toString(16).padStart(9, "0")
      uuidHigh = uuidPrefix + high.slice(-9)
    }
    counter++
    return low
  }
  return {
    uuid: () => {
      const low = next12()
      return uuidHigh + lowDigits[low]
    },
    hex: (length) => {
      const low = next12()
      return (high + lowDigits[low]).slice(-length)
    }
  }
}
