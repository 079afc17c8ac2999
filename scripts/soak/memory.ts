/**
 * The host's memory over the run: heap and RSS sampled at a fixed interval (after a full GC when the process runs
 * with `--expose-gc`, so that the heap figure is what is live, not what is waiting to be collected), and whether
 * the curve levels off: the slope of a least-squares line over the second half of the run against the first.
 */

export interface Sample {
  /** Seconds since the soak began. */
  readonly t: number
  readonly heapUsed: number
  readonly rss: number
  /** Processes of the soak alive at that moment, found by marker, by cgroup and by session (see `procs.ts`). */
  readonly processes: { readonly byMarker: number; readonly byCgroup: number; readonly bySession: number }
  /** Sessions in the registry. */
  readonly sessions: number
}

/** Bytes per minute of the least-squares line through `(t, value)`; 0 with fewer than two points. */
const slope = (points: ReadonlyArray<readonly [number, number]>): number => {
  if (points.length < 2) return 0
  const n = points.length
  const mt = points.reduce((sum, [t]) => sum + t, 0) / n
  const mv = points.reduce((sum, [, v]) => sum + v, 0) / n
  let num = 0
  let den = 0
  for (const [t, v] of points) {
    num += (t - mt) * (v - mv)
    den += (t - mt) ** 2
  }
  return den === 0 ? 0 : (num / den) * 60
}

export interface Trend {
  /** Bytes per minute over the first half of the samples. */
  readonly firstHalf: number
  /** Bytes per minute over the second half. */
  readonly secondHalf: number
  readonly start: number
  readonly end: number
  readonly max: number
  /**
   * The second half grows by no more than `tolerance` bytes a minute, or by no more than a quarter of the first
   * half's growth: the warm-up (code loaded and compiled, pools filled) is over and nothing keeps accumulating.
   */
  readonly levelsOff: boolean
}

export const trend = (
  samples: ReadonlyArray<Sample>,
  pick: (sample: Sample) => number,
  tolerance: number
): Trend => {
  const mid = samples.length > 0 ? samples[samples.length - 1]!.t / 2 : 0
  const first = samples.filter((s) => s.t <= mid).map((s) => [s.t, pick(s)] as const)
  const second = samples.filter((s) => s.t >= mid).map((s) => [s.t, pick(s)] as const)
  const firstHalf = slope(first)
  const secondHalf = slope(second)
  return {
    firstHalf,
    secondHalf,
    start: samples.length > 0 ? pick(samples[0]!) : 0,
    end: samples.length > 0 ? pick(samples[samples.length - 1]!) : 0,
    max: samples.reduce((max, s) => Math.max(max, pick(s)), 0),
    levelsOff: secondHalf <= tolerance || secondHalf <= firstHalf / 4
  }
}

const gc = (globalThis as { gc?: () => void }).gc

/** The heap and RSS now, after a full GC when one can be asked for. */
export const measure = (): { readonly heapUsed: number; readonly rss: number } => {
  gc?.()
  const usage = process.memoryUsage()
  return { heapUsed: usage.heapUsed, rss: usage.rss }
}

export const canCollect = gc !== undefined
