/**
 * Mutations of recorded JSON values for the codec tests: a field (at any depth) removed or replaced by a value of
 * another kind.
 */

/** A path into a JSON value: keys and array indexes. */
export type Path = ReadonlyArray<string | number>

/** The path of every field and item of `value`, down to five levels. */
export const pathsOf = (value: unknown): Array<Path> => {
  const paths: Array<Path> = []
  const collect = (node: unknown, path: Path) => {
    if (typeof node !== "object" || node === null || path.length > 4) return
    for (const [key, child] of Object.entries(node)) {
      const at = [...path, Array.isArray(node) ? Number(key) : key]
      paths.push(at)
      collect(child, at)
    }
  }
  collect(value, [])
  return paths
}

/**
 * Changes `value` in place at `path`: the field removed when `remove` (an array's item is replaced instead), else
 * set to `replacement`.
 */
export const mutateAt = (value: unknown, path: Path, replacement: unknown, remove: boolean): void => {
  let target: any = value
  for (const key of path.slice(0, -1)) target = target[key]
  const last = path[path.length - 1]!
  if (remove && !Array.isArray(target)) delete target[last]
  else target[last] = replacement
}
