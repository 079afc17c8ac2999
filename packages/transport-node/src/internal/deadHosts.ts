/**
 * What hosts killed without their finalizers leave behind (a layer's cgroups, a session's temporary directory), swept
 * by the next host: entries named after their host's pid.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The names in `dir`; none when it cannot be read (it does not exist, or is not this host's to read). */
export const namesIn = (dir: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(dir)
  } catch {
    return []
  }
}

/**
 * Removes, with `remove`, every entry of `dir` whose name `pattern` matches with the pid of a host that is gone (its
 * first group: not this process, no such process). A directory that cannot be read is left alone.
 */
export const sweep = (dir: string, pattern: RegExp, remove: (path: string) => void): void => {
  for (const name of namesIn(dir)) {
    const match = pattern.exec(name)
    if (match === null || Number(match[1]) === process.pid || Fs.existsSync(`/proc/${match[1]}`)) continue
    remove(Path.join(dir, name))
  }
}
