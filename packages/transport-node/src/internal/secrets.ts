/**
 * Scrubbing of secrets from what leaves the transport: the stderr tail (and so every error message built from
 * it), stdout lines (and so events, logged protocol errors and tool results), process descriptions in warnings.
 *
 * The secrets are the `Redacted` values of a launch spec (environment values and secret pipes). Each is replaced
 * by `[redacted NAME]` wherever its exact text or its JSON-escaped text appears, and where a text was cut (a tail
 * that starts mid-stream, a prefix of an oversized line), a piece of a secret at the cut is replaced too. Not
 * caught: a secret transformed any other way (base64, split across lines, reversed, one character per line).
 * Values shorter than {@link minimumLength} are not scrubbed: they would match everywhere.
 */

/** A secret and the name it is reported under. @internal */
export interface Secret {
  readonly name: string
  readonly value: string
}

/** Secrets shorter than this are not scrubbed. @internal */
export const minimumLength = 4

/** Replaces secrets in text; `cut` says which ends of the text were cut from a longer one. @internal */
export type Scrub = (text: string, cut?: { readonly start?: boolean; readonly end?: boolean }) => string

/** The identity, for a launch with no secret. @internal */
export const none: Scrub = (text) => text

interface Needle {
  readonly text: string
  readonly replacement: string
}

/** A scrubber for these secrets (pure). @internal */
export const make = (secrets: ReadonlyArray<Secret>): Scrub => {
  const needles: Array<Needle> = []
  for (const { name, value } of secrets) {
    if (value.length < minimumLength) continue
    const replacement = `[redacted ${name}]`
    needles.push({ text: value, replacement })
    const escaped = JSON.stringify(value).slice(1, -1)
    if (escaped !== value) needles.push({ text: escaped, replacement })
  }
  if (needles.length === 0) return none
  // Longest first: a secret that contains another is replaced whole.
  needles.sort((a, b) => b.text.length - a.text.length)
  return (text, cut) => {
    let out = text
    for (const needle of needles) {
      if (out.includes(needle.text)) out = out.split(needle.text).join(needle.replacement)
    }
    if (cut?.start === true) out = scrubCutStart(out, needles)
    if (cut?.end === true) out = scrubCutEnd(out, needles)
    return out
  }
}

// A text that starts mid-stream may start with the end of a secret: replace the longest such piece.
const scrubCutStart = (text: string, needles: ReadonlyArray<Needle>): string => {
  for (const needle of needles) {
    for (let length = Math.min(needle.text.length - 1, text.length); length >= minimumLength; length--) {
      if (text.startsWith(needle.text.slice(needle.text.length - length))) {
        return needle.replacement + text.slice(length)
      }
    }
  }
  return text
}

// A text cut short may end with the start of a secret.
const scrubCutEnd = (text: string, needles: ReadonlyArray<Needle>): string => {
  for (const needle of needles) {
    for (let length = Math.min(needle.text.length - 1, text.length); length >= minimumLength; length--) {
      if (text.endsWith(needle.text.slice(0, length))) return text.slice(0, text.length - length) + needle.replacement
    }
  }
  return text
}

// ---------------------------------------------------------------------------------------------------------------
// every connection's secrets, for every connection
// ---------------------------------------------------------------------------------------------------------------

/** The secrets of the connections open in this process, by value, with how many connections hold each. */
const open = new Map<string, { readonly secret: Secret; count: number }>()
let shared: Scrub = none

/**
 * Adds a connection's secrets to those every connection of this process is scrubbed of, until the returned function
 * is called (once; later calls do nothing). A session whose tool reads another session's key (from `/proc`, from
 * its files) would otherwise hand it to its own host unscrubbed: its scrubber knew only its own keys.
 *
 * @internal
 */
export const register = (secrets: ReadonlyArray<Secret>): () => void => {
  const values = secrets.filter((secret) => secret.value.length >= minimumLength)
  if (values.length === 0) return () => {}
  for (const secret of values) {
    const entry = open.get(secret.value)
    if (entry === undefined) open.set(secret.value, { secret, count: 1 })
    else entry.count++
  }
  shared = make([...open.values()].map((entry) => entry.secret))
  let done = false
  return () => {
    if (done) return
    done = true
    for (const secret of values) {
      const entry = open.get(secret.value)
      if (entry !== undefined && --entry.count === 0) open.delete(secret.value)
    }
    shared = open.size === 0 ? none : make([...open.values()].map((entry) => entry.secret))
  }
}

/** A connection's scrubber (see {@link forConnection}). @internal */
export interface ConnectionScrub extends Scrub {
  /** True while there is nothing to scrub (no secret of its own, none registered): text can skip it. */
  readonly idle: () => boolean
}

/**
 * A connection's scrubber: its own secrets, always (also after it closed: a stderr tail read late), and those of
 * every connection open in this process at the time of the call ({@link register}).
 *
 * @internal
 */
export const forConnection = (own: Scrub): ConnectionScrub => {
  const scrub: Scrub = (text, cut) => {
    const first = shared === none ? text : shared(text, cut)
    return own === none ? first : own(first, cut)
  }
  return Object.assign(scrub, { idle: () => own === none && shared === none })
}
