/**
 * Summaries of repeated measurements: the median and the spread (min, max, quartiles) of a sample.
 */

/** The summary of one figure for one host over several runs. */
export interface Summary {
  readonly n: number
  readonly median: number
  readonly min: number
  readonly max: number
  readonly q1: number
  readonly q3: number
  readonly samples: ReadonlyArray<number>
}

const quantile = (sorted: ReadonlyArray<number>, q: number): number => {
  if (sorted.length === 1) return sorted[0]!
  const position = (sorted.length - 1) * q
  const lower = Math.floor(position)
  const upper = Math.ceil(position)
  return sorted[lower]! + (sorted[upper]! - sorted[lower]!) * (position - lower)
}

/** Summarizes a non-empty sample; `undefined` for an empty one. */
export const summarize = (samples: ReadonlyArray<number>): Summary | undefined => {
  const finite = samples.filter((x) => Number.isFinite(x))
  if (finite.length === 0) return undefined
  const sorted = [...finite].sort((a, b) => a - b)
  return {
    n: sorted.length,
    median: quantile(sorted, 0.5),
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!,
    q1: quantile(sorted, 0.25),
    q3: quantile(sorted, 0.75),
    samples: finite
  }
}

/** The value at quantile `q` (0..1) of a sample. */
export const percentile = (samples: ReadonlyArray<number>, q: number): number =>
  quantile([...samples].sort((a, b) => a - b), q)

/** The arithmetic mean of a non-empty sample. */
export const mean = (samples: ReadonlyArray<number>): number => samples.reduce((a, b) => a + b, 0) / samples.length

/**
 * A distribution-free 95% confidence interval of a sample's median: the order statistics x(j) and x(n + 1 - j), j
 * the largest with P(B < j) ≤ 2.5% for B ~ Binomial(n, 1/2) (n = 30: the 10th and 21st). Undefined under 6 samples,
 * where no such pair exists.
 */
export const medianInterval = (samples: ReadonlyArray<number>): readonly [number, number] | undefined => {
  const sorted = [...samples].sort((a, b) => a - b)
  const n = sorted.length
  let below = 0
  let term = Math.pow(0.5, n)
  let j = 0
  while (j < n && below + term <= 0.025) {
    below += term
    term = (term * (n - j)) / (j + 1)
    j++
  }
  return j === 0 ? undefined : [sorted[j - 1]!, sorted[n - j]!]
}
