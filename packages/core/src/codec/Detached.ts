/**
 * A copy of a string that shares no memory with it.
 *
 * A transport may hand lines over as slices of a larger decoded string (a whole pipe read), and a slice keeps the
 * whole string alive. Text that outlives its line (a bad line kept in the event ring, the prefix of a line quoted by
 * an error) is copied with this, so that it does not keep its neighbours alive. Only for error paths: it writes the
 * text out as a JSON string and reads it back, which copies every code unit as it was (lone surrogates included).
 *
 * @since 0.1.0
 */
export const detached = (text: string): string => JSON.parse(JSON.stringify(text)) as string

/**
 * The first `length` characters of a string (all of it when shorter), {@link detached}: what an error or an event keeps
 * of a bad line.
 *
 * @since 0.1.0
 */
export const detachedPrefix = (text: string, length: number): string =>
  detached(text.length > length ? text.slice(0, length) : text)
