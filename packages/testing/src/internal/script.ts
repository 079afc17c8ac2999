/**
 * What the scripts of every simulated CLI share: streamed text as chunks, turn rules matched against the prompt, and
 * the choice of a turn's steps.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"

/** A piece of streamed text, emitted after `delay` (the public modules document it as their `Chunk`). */
export interface Chunk {
  readonly text: string
  readonly delay?: Duration.Input | undefined
}

/** Text as chunks: a string is one chunk; a chunk's own delay wins over `delay`. */
export const chunksOf = (
  content: string | ReadonlyArray<string | Chunk>,
  delay: Duration.Input | undefined
): ReadonlyArray<Chunk> =>
  (typeof content === "string" ? [content] : content).map((part) =>
    typeof part === "string" ? { text: part, delay } : { text: part.text, delay: part.delay ?? delay }
  )

/** A prompt matcher from a substring, a regular expression or a predicate. */
export const predicateOf = (match: string | RegExp | ((prompt: string) => boolean)): (prompt: string) => boolean =>
  typeof match === "string"
    ? (prompt) => prompt.includes(match)
    : match instanceof RegExp
    ? (prompt) => match.test(prompt)
    : match

/** A turn rule, as both scripts have them. */
export interface Rule<Step> {
  readonly match: ((prompt: string) => boolean) | undefined
  readonly once: boolean
  readonly steps: ReadonlyArray<Step> | ((prompt: string) => ReadonlyArray<Step>)
}

/**
 * The steps of a turn: the first rule (in script order) not used up whose `match` accepts the prompt, else
 * `otherwise`. A `once` rule is used up (its index added to `consumed`, which the process keeps).
 */
export const pickSteps = <Step>(
  turns: ReadonlyArray<Rule<Step>>,
  otherwise: (prompt: string) => ReadonlyArray<Step>,
  consumed: Set<number>,
  prompt: string
): ReadonlyArray<Step> => {
  for (let i = 0; i < turns.length; i++) {
    const rule = turns[i]
    if (consumed.has(i)) continue
    if (rule.match !== undefined && !rule.match(prompt)) continue
    if (rule.once) consumed.add(i)
    return typeof rule.steps === "function" ? rule.steps(prompt) : rule.steps
  }
  return otherwise(prompt)
}

/**
 * The turns of a benchmark's fake CLI: a prompt `FRAMES:<n>` (else `frames`) streams n text chunks `tok <i> `, made
 * into a step by `text`. A benchmark sends the same prompt turn after turn: each n's steps are built once (a few
 * kept).
 */
export const framesTurns = <Step>(
  frames: number,
  text: (chunks: ReadonlyArray<string>) => Step
): (prompt: string) => ReadonlyArray<Step> => {
  const steps = new Map<number, ReadonlyArray<Step>>()
  return (prompt) => {
    const match = /FRAMES:(\d+)/.exec(prompt)
    const n = match === null ? frames : Number(match[1])
    let turn = steps.get(n)
    if (turn === undefined) {
      if (steps.size >= 8) steps.clear()
      turn = [text(Array.from({ length: n }, (_, i) => `tok ${i} `))]
      steps.set(n, turn)
    }
    return turn
  }
}
