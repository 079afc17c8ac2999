/**
 * The `ProtocolError`s of a line of the Claude wire, shared by the runtime codec and the schema modules. No schema
 * here: a session loads this on its path.
 *
 * @internal
 */
import { detached, detachedPrefix } from "@tether/core/codec/Detached"
import { ProtocolError } from "@tether/core/TetherError"
import * as Result from "effect/Result"

const linePrefixLength = 200
const detailLength = 2000

/**
 * The start of a line, as an error quotes it. A copy: the line may be a slice of a whole pipe read, which the error
 * (kept in the event ring) must not keep alive.
 *
 * @category errors
 * @since 0.1.0
 */
export const prefixOf = (line: string): string => detachedPrefix(line, linePrefixLength)

/**
 * An error's detail, cut to a bounded length.
 *
 * @category errors
 * @since 0.1.0
 */
export const truncate = (text: string): string => text.length > detailLength ? `${text.slice(0, detailLength)}…` : text

/**
 * A line that is JSON but not a valid frame.
 *
 * @category errors
 * @since 0.1.0
 */
export const malformed = (line: string, detail: string): Result.Result<never, ProtocolError> =>
  Result.fail(malformedError(line, detail))

/**
 * {@link malformed}'s error itself.
 *
 * @category errors
 * @since 0.1.0
 */
export const malformedError = (line: string, detail: string): ProtocolError =>
  new ProtocolError({ reason: "malformed", detail: truncate(detail), linePrefix: prefixOf(line) })

/**
 * A line that does not parse, with the parser's error. The parser's message quotes the line, and some V8 versions
 * (Node 20's) quote it as a slice: the detail is a copy too.
 *
 * @category errors
 * @since 0.1.0
 */
export const notJson = (line: string, error: unknown): ProtocolError =>
  new ProtocolError({
    reason: "not-json",
    detail: truncate(detached(error instanceof Error ? error.message : String(error))),
    linePrefix: prefixOf(line)
  })

/**
 * Parses a line, failing with {@link notJson}.
 *
 * @category errors
 * @since 0.1.0
 */
export const parseJson = (line: string): Result.Result<unknown, ProtocolError> => {
  try {
    return Result.succeed(JSON.parse(line))
  } catch (error) {
    return Result.fail(notJson(line, error))
  }
}

/**
 * A line longer than the limit, refused before it is parsed.
 *
 * @category errors
 * @since 0.1.0
 */
export const tooLong = (line: string, limit: number): Result.Result<never, ProtocolError> =>
  Result.fail(tooLongError(line, limit))

/**
 * {@link tooLong}'s error itself.
 *
 * @category errors
 * @since 0.1.0
 */
export const tooLongError = (line: string, limit: number): ProtocolError =>
  new ProtocolError({
    reason: "too-long",
    detail: `the line has ${line.length} characters, more than the limit of ${limit}`,
    linePrefix: prefixOf(line)
  })
