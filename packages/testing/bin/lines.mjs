/**
 * Stdin as lines, for the fake CLIs in this folder (`fake-claude.mjs`, `fast-claude.mjs`): the stream-json input
 * is one frame per line, and a chunk may end anywhere. Plain Node, no dependencies.
 */

/**
 * Calls `onLine` with every complete line read from stdin (without its newline), in order. `readRest()` gives what
 * is left after the last newline (a final line without one, once stdin ended) and forgets it.
 */
export const onStdinLines = (onLine) => {
  let buffered = ""
  const readRest = () => {
    const rest = buffered
    buffered = ""
    return rest
  }
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk) => {
    buffered += chunk
    let start = 0
    let newline
    while ((newline = buffered.indexOf("\n", start)) !== -1) {
      onLine(buffered.slice(start, newline))
      start = newline + 1
    }
    buffered = buffered.slice(start)
  })
  return { readRest }
}
