/**
 * cgroup v2 containment (Linux): one cgroup per session, which the kernel keeps every descendant of the CLI in,
 * whatever it does (`setsid`, double forks, a cleared environment, a rewritten process title).
 *
 * Layout: the host's own cgroup (read from `/proc/self/cgroup`, under the cgroup2 mount found in
 * `/proc/self/mountinfo`) gets one child per transport layer, `tether-<host pid>-<random>`, and that one a child
 * per session, `s<n>`. The host needs write access there: root, or a delegated subtree (systemd `Delegate=yes`, a
 * container's own cgroup namespace). The layer's cgroup is removed with the layer; a host killed without its
 * finalizers leaves them to the watchdog, and the next layer made under the same cgroup removes the empty ones of
 * hosts that are gone.
 *
 * Placement: the CLI is started through {@link launcher}, a shell that waits on descriptor 3 until the host wrote
 * its pid into the session's `cgroup.procs`, then execs the CLI (same pid): nothing can fork before it is inside.
 *
 * Teardown sees the whole subtree, not only the session's own cgroup: a tool may create cgroups inside its own and
 * move processes there (no privilege needed in a delegated subtree). SIGTERM goes to every process of every cgroup
 * of the subtree, then `cgroup.kill` on the session's cgroup (recursive: SIGKILL to every process of the subtree,
 * atomically with respect to forks, written whatever the session's own `cgroup.procs` holds), a wait until
 * `cgroup.events` says `populated 0` (exited processes leave at once: zombies do not count), and `rmdir` of the
 * nested cgroups, deepest first, then of the session's.
 *
 * A process the host must never signal (itself, its ancestors, PID 1: a tool as root can write any pid into its
 * `cgroup.procs`) is moved out to the host's own cgroup before anything is signalled; `cgroup.kill` would kill it
 * too. Not closed: a tool that moves such a process in between that move and the `cgroup.kill` write (a few
 * microseconds of synchronous code).
 *
 * Leaving the cgroup (root can): the CLI moved elsewhere is moved back (its pid names it until the host reaps it);
 * a process the session's process tree finds outside (parent links, sessions, the marker) is moved back; so is what
 * sits in a cgroup a tool made in the layer's beside the sessions' ({@link foreign}), when the closing session is
 * the layer's only one (with others live, what the tree does not claim could be theirs: it is left to the last
 * session's teardown, the layer's release or the watchdog). One that moved elsewhere with its environment cleared
 * and its parent gone is not found: a cgroup namespace would keep it in.
 */
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as DeadHosts from "./deadHosts.ts"
import * as KernelFiles from "./kernelFiles.ts"

/** Where the cgroup2 hierarchy is mounted, and the host's own cgroup in it, or why there is none. @internal */
export type Location =
  | { readonly _tag: "Found"; readonly mount: string; readonly own: string }
  | { readonly _tag: "Missing"; readonly reason: string }

/**
 * Finds the cgroup2 mount and the host's cgroup (pure: takes the text of `/proc/self/mountinfo` and
 * `/proc/self/cgroup`).
 *
 * @internal
 */
export const locate = (mountinfo: string, cgroup: string): Location => {
  let mount: { readonly point: string; readonly root: string } | undefined
  for (const line of mountinfo.split("\n")) {
    // `id parent major:minor root mountpoint options [optional fields] - fstype source superoptions`
    const dash = line.indexOf(" - ")
    if (dash === -1) continue
    const fstype = line.slice(dash + 3).split(" ")[0]
    if (fstype !== "cgroup2") continue
    const fields = line.slice(0, dash).split(" ")
    mount = { root: unescapeMountinfo(fields[3]), point: unescapeMountinfo(fields[4]) }
    break
  }
  if (mount === undefined) return { _tag: "Missing", reason: "no cgroup2 hierarchy is mounted" }
  const unified = cgroup.split("\n").find((line) => line.startsWith("0::"))
  if (unified === undefined) return { _tag: "Missing", reason: "the host is in no cgroup2 cgroup (/proc/self/cgroup)" }
  const path = unified.slice(3).trim()
  // The mount shows the hierarchy from its root: the host's path is relative to it.
  const relative = mount.root === "/" ? path : path.startsWith(mount.root) ? path.slice(mount.root.length) : undefined
  if (relative === undefined) {
    return { _tag: "Missing", reason: `the host's cgroup ${path} is outside the mounted cgroup2 tree ${mount.root}` }
  }
  const own = Path.join(mount.point, relative)
  return { _tag: "Found", mount: mount.point, own: own.length > 1 && own.endsWith("/") ? own.slice(0, -1) : own }
}

const unescapeMountinfo = (field: string): string =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))

/** A layer's cgroup, under which each session gets its own. @internal */
export interface Layer {
  readonly path: string
  /** Makes the cgroup of one session. */
  readonly session: () => Session
  /** Removes the layer's cgroup (when its sessions' are gone). */
  readonly remove: () => void
}

/** One session's cgroup. @internal */
export interface Session {
  readonly path: string
  /** Moves a process (all its threads) into the cgroup. Throws on failure (with the errno code). */
  readonly place: (pid: number) => void
  /**
   * The pids in the cgroup and in every cgroup nested in it now (exited processes are not listed); empty once it
   * is gone.
   */
  readonly pids: () => ReadonlyArray<number>
  /** `cgroup.events`' `populated`: whether any process is left in the subtree (false once it is gone). */
  readonly populated: () => boolean
  /**
   * `cgroup.kill`: SIGKILL to every process of the subtree, including those that fork meanwhile. False when it
   * could not be written (the cgroup is gone, or the kernel refused).
   */
  readonly kill: () => boolean
  /** Moves a process out of the subtree, to the host's own cgroup; false when the kernel refused. */
  readonly moveOut: (pid: number) => boolean
  /** Moves a process (back) into the session's cgroup; false when the kernel refused. */
  readonly moveIn: (pid: number) => boolean
  /**
   * The cgroups in the layer's that are no session's (`s<n>`): siblings a root tool made to leave its own. Whatever
   * is in them came from a session of the layer.
   */
  readonly foreign: () => ReadonlyArray<string>
  /**
   * No other session's cgroup is in the layer's: what sits in a {@link foreign} cgroup and no process tree claims can
   * only be this session's.
   */
  readonly alone: () => boolean
  /**
   * Removes the nested cgroups, deepest first, then the session's; false while processes are in any of them (EBUSY)
   * or when one cannot be removed. Empty {@link foreign} cgroups go too.
   */
  readonly remove: () => boolean
}

/**
 * Creates the layer's cgroup under the host's own, and checks that it can hold and kill a session: a session
 * cgroup is made and removed, and `cgroup.kill` must exist (Linux 5.14+). Returns why not, as a string, when any
 * step fails; nothing is left behind then.
 *
 * @internal
 */
export const makeLayer = (): Layer | string => {
  let location: Location
  try {
    location = locate(Fs.readFileSync("/proc/self/mountinfo", "utf8"), Fs.readFileSync("/proc/self/cgroup", "utf8"))
  } catch (error) {
    return `cannot read /proc/self/mountinfo or /proc/self/cgroup (${code(error)})`
  }
  if (location._tag === "Missing") return location.reason
  const own = location.own
  sweep(own)
  const path = Path.join(location.own, `tether-${process.pid}-${randomBytes(4).toString("hex")}`)
  try {
    Fs.mkdirSync(path)
  } catch (error) {
    return `cannot create a cgroup under ${location.own} (${code(error)}): not root and no delegated subtree`
  }
  let sessions = 0
  const layer: Layer = {
    path,
    session: () => makeSession(Path.join(path, `s${++sessions}`), own),
    remove: () => removeDir(path)
  }
  const probe = Path.join(path, "probe")
  try {
    Fs.mkdirSync(probe)
    Fs.accessSync(Path.join(probe, "cgroup.kill"), Fs.constants.W_OK)
    // Moving a process needs write access to the common ancestor's cgroup.procs (the host's own cgroup).
    Fs.accessSync(Path.join(location.own, "cgroup.procs"), Fs.constants.W_OK)
  } catch (error) {
    removeDir(probe)
    removeDir(path)
    return `a cgroup under ${location.own} cannot hold a session (${code(error)}): cgroup.kill needs Linux 5.14`
  }
  removeDir(probe)
  return layer
}

/**
 * Removes the empty cgroups of layers whose host is dead (one killed with neither finalizers nor a watchdog, or a
 * watchdog that gave up). `rmdir` removes only empty cgroups, so this can end nothing; a live host's are skipped.
 */
// Every empty cgroup of it, the sessions' and those their tools made in them or beside them.
const sweep = (own: string): void => DeadHosts.sweep(own, layerName, removeTree)

/** A layer's cgroup: `tether-<host pid>-<random>`. */
export const layerName = /^tether-([0-9]+)-[0-9a-f]+$/

const makeSession = (path: string, own: string): Session => {
  Fs.mkdirSync(path)
  const layer = Path.dirname(path)
  return {
    path,
    place: (pid) => Fs.writeFileSync(Path.join(path, "cgroup.procs"), `${pid}\n`),
    pids: () => members(path),
    populated: () => populated(path),
    kill: () => kill(path),
    moveOut: (pid) => move(pid, own),
    moveIn: (pid) => move(pid, path),
    foreign: () => foreign(layer),
    alone: () => sessions(layer).every((dir) => dir === path),
    remove: () => {
      const removed = removeTree(path)
      for (const dir of foreign(layer)) removeTree(dir)
      return removed
    }
  }
}

/**
 * The sessions' cgroups (`s<n>`) in a layer's cgroup.
 *
 * @internal
 */
export const sessions = (layer: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(layer, { withFileTypes: true })
      .filter((child) => child.isDirectory() && /^s[0-9]+$/.test(child.name))
      .map((child) => Path.join(layer, child.name))
  } catch {
    return []
  }
}

/**
 * The child cgroups of a layer's cgroup that are no session's (`s<n>`) nor the layer's probe: made by a tool.
 *
 * @internal
 */
export const foreign = (layer: string): ReadonlyArray<string> => {
  let children: Array<Fs.Dirent>
  try {
    children = Fs.readdirSync(layer, { withFileTypes: true })
  } catch {
    return []
  }
  return children.filter((child) => child.isDirectory() && !/^(s[0-9]+|probe)$/.test(child.name))
    .map((child) => Path.join(layer, child.name))
}

/**
 * The cgroups of the subtree at `dir`, deepest first (`dir` last): the order they can be removed in. Empty when
 * `dir` is gone. A cgroup's subdirectories are its child cgroups (its files are regular files).
 *
 * @internal
 */
export const subtree = (dir: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  const visit = (at: string): boolean => {
    let children: Array<Fs.Dirent>
    try {
      children = Fs.readdirSync(at, { withFileTypes: true })
    } catch {
      return false
    }
    for (const child of children) if (child.isDirectory()) visit(Path.join(at, child.name))
    out.push(at)
    return true
  }
  visit(dir)
  return out
}

/** The pids of every cgroup of the subtree at `dir` (exited processes are not listed). @internal */
export const members = (dir: string): ReadonlyArray<number> => {
  const pids: Array<number> = []
  for (const cgroup of subtree(dir)) {
    let text: string
    try {
      text = KernelFiles.readText(Path.join(cgroup, "cgroup.procs"))
    } catch {
      continue
    }
    for (const line of text.split("\n")) if (line.length > 0) pids.push(Number(line))
  }
  return pids
}

/**
 * Whether the subtree at `dir` holds a process, from `cgroup.events` (recursive, kept by the kernel): false once
 * it is empty or gone. Where that file cannot be read, from the `cgroup.procs` of the subtree.
 *
 * @internal
 */
export const populated = (dir: string): boolean => {
  let events: string
  try {
    events = KernelFiles.readText(Path.join(dir, "cgroup.events"))
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? false : members(dir).length > 0
  }
  const match = /^populated ([01])$/m.exec(events)
  return match === null ? members(dir).length > 0 : match[1] === "1"
}

/** `cgroup.kill` on `dir` (recursive); false when it could not be written. @internal */
export const kill = (dir: string): boolean => {
  try {
    Fs.writeFileSync(Path.join(dir, "cgroup.kill"), "1")
    return true
  } catch {
    return false
  }
}

/** Moves a process to the cgroup `dir`; false when the kernel refused (or the process is gone). @internal */
export const move = (pid: number, dir: string): boolean => {
  try {
    Fs.writeFileSync(Path.join(dir, "cgroup.procs"), `${pid}\n`)
    return true
  } catch {
    return false
  }
}

/** Removes the subtree at `dir`, deepest first; true when it is gone (removed now or already). @internal */
export const removeTree = (dir: string): boolean => {
  let removed = true
  for (const cgroup of subtree(dir)) if (!removeDir(cgroup)) removed = false
  return removed
}

/** `rmdir`, true when the directory is gone (removed now or already). @internal */
export const removeDir = (path: string): boolean => {
  try {
    Fs.rmdirSync(path)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT"
  }
}

const code = (error: unknown): string =>
  (error as NodeJS.ErrnoException | undefined)?.code ?? (error instanceof Error ? error.message : String(error))

/**
 * The launcher: a shell that waits until the host has placed it (a line on descriptor 3), closes that descriptor,
 * and execs the CLI with the same pid, argv and environment. If the host goes away first (EOF), it exits 125
 * without running anything. Used as `sh -c launcher tether-launcher <file> <args…>`.
 *
 * @internal
 */
export const launcher = `IFS= read -r go <&3 && [ "$go" = go ] || exit 125
exec 3<&-
unset $TETHER_LAUNCHER_UNSET TETHER_LAUNCHER_UNSET
exec "$@"`

/**
 * The variables a shell adds to the environment it execs with (dash exports `PWD`; bash `SHLVL` and `OLDPWD`):
 * those the CLI's environment did not have are listed in `TETHER_LAUNCHER_UNSET` for the launcher to remove, so
 * the CLI starts with exactly the environment it was given.
 *
 * @internal
 */
export const shellVariables: ReadonlyArray<string> = ["PWD", "OLDPWD", "SHLVL"]

/** argv[0] of the launcher (what `ps` shows until it execs). @internal */
export const launcherName = "tether-launcher"
