/**
 * Plays a simulator (see `Simulator.ts`) as a table: inputs at given times in, outputs with the times they were
 * handed out. No Effect, no clock but the table's: what the simulator tests of every provider are written with.
 */
import type * as Simulator from "../../src/Simulator.ts"

/** One input at a time: a stdin line, stdin's EOF, a signal, or a fault. */
export type Input<Fault> =
  | string
  | { readonly eof: true }
  | { readonly signal: Simulator.Signal }
  | { readonly fault: Fault }

/** One output and when it was handed out. */
export interface Out {
  readonly at: number
  readonly output: Simulator.Output
}

/** Plays `inputs` (at their times) against a simulator started at 0 until `until`, collecting what it outputs. */
export const play = <Fault>(
  simulator: Simulator.Simulator<Fault>,
  inputs: ReadonlyArray<readonly [number, Input<Fault>]>,
  until: number
): Array<Out> => {
  const queue = [...inputs]
  const out: Array<Out> = []
  let now = 0
  while (true) {
    for (let output = simulator.poll(now); output !== undefined; output = simulator.poll(now)) {
      out.push({ at: now, output })
    }
    const next = Math.min(simulator.nextWake(), queue[0]?.[0] ?? Number.POSITIVE_INFINITY)
    if (next > until) return out
    now = next
    while (queue.length > 0 && queue[0][0] <= now) {
      const input = queue.shift()![1]
      if (typeof input === "string") simulator.write(now, input)
      else if ("eof" in input) simulator.endInput(now)
      else if ("signal" in input) simulator.signal(now, input.signal)
      else simulator.trigger(now, input.fault)
    }
  }
}
