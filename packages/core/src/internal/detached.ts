/**
 * A copy of a string that shares no memory with it.
 *
 * A transport may hand lines over as slices of a larger decoded string (a whole pipe read), and a slice keeps the
 * whole string alive. Text that outlives its line (a bad line kept in the event ring, the prefix of a line quoted by
 * an error) is copied with this, so that it does not keep its neighbours alive. Only for error paths: it encodes and
 * decodes the text (a lone surrogate becomes U+FFFD).
 *
 * @internal
 */
export const detached = (text: string): string => decoder.decode(encoder.encode(text))

const encoder = new TextEncoder()
const decoder = new TextDecoder()
