import { assert } from "@effect/vitest"
import type { EventLog } from "@tether/core"

/**
 * One delivery, short: its seq, or the range a lag skipped.
 *
 * @category formatting
 * @since 0.1.0
 */
export const describeDelivery = <A>(d: EventLog.Delivery<A>): string =>
  d._tag === "Event" ? `${d.seq}` : `lag(${d.missed}->${d.resumeSeq})`

/**
 * Reads deliveries as event seqs plus lag ranges and checks they cover every seq from `first` contiguously, in
 * order, without duplicates. Returns the next seq the subscriber would have received.
 *
 * @category assertions
 * @since 0.1.0
 */
export const assertContiguous = <A>(deliveries: ReadonlyArray<EventLog.Delivery<A>>, first: number): number => {
  let cursor = first
  for (const d of deliveries) {
    if (d._tag === "Event") {
      if (d.seq !== cursor) {
        assert.fail(`expected seq ${cursor}, got ${d.seq} in ${deliveries.map(describeDelivery).join(",")}`)
      }
      cursor++
    } else {
      if (!(d.missed > 0) || d.resumeSeq !== cursor + d.missed) {
        assert.fail(`lag ${describeDelivery(d)} at cursor ${cursor} is not an explicit range starting at the cursor`)
      }
      cursor = d.resumeSeq
    }
  }
  return cursor
}
