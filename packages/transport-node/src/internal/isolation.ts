/**
 * Isolation between sessions (Linux, as root): each session's CLI runs in a user namespace whose root is a uid range
 * of its own outside (65,536 uids, distinct from every other live session's on the machine), a PID namespace (it
 * sees its own processes only), a mount namespace (a private `/tmp`, `/dev/shm` and `/var/tmp`; `/proc` of its own
 * PID namespace) and a cgroup namespace rooted at its session's cgroup.
 *
 * Start (the handshake): the launcher waits on descriptor 3 until the host has placed it in its cgroups (`go`), then
 * execs `unshare --user --pid --mount --cgroup --keep-caps` with {@link stage1}. The host waits until the
 * launcher's user namespace differs from its own (unshare made it), writes its `uid_map` and `gid_map`
 * (`0 <base> 65536`: as root it may map any range; no `newuidmap`), mounts the session's lent directories in its
 * mount namespace ({@link idmapScript}), and sends `mapped` on descriptor 3. Stage 1
 * (still the host's root outside until then, with every capability in the namespace kept by `--keep-caps`) reads
 * it and starts the namespace's first process as its root (`setpriv --reuid 0 --regid 0 --clear-groups`: uid
 * `<base>` outside, no capability outside); that one (stage 2) mounts the namespace's `/proc`, the directories the
 * session keeps at their paths under `/tmp`, the private `/tmp`, and fresh `/dev/shm` and `/var/tmp`, then starts
 * the CLI in a session of its own (`setsid`) and waits for it: when the CLI ends, so does stage 2 and with it every
 * process of the namespace.
 *
 * Uid ranges: slot `i` is uids `firstUid + i × 65536 …` for {@link slots} slots, held by a lock file
 * (`/run/tether/uid-ranges/<i>`, created with `O_EXCL`, holding the host's pid and start time): two hosts on one
 * machine never hold the same slot, and a dead host's slots are taken back (its pid gone, or another process's).
 * A slot is searched from a random one, so a range released is rarely the next one given.
 *
 * What the session may write: its directories (its workspace, its config directory, a `HOME` of its own) are lent to
 * it through idmapped mounts in its own mount namespace, made by the host (root outside): uid and gid `u` on disk
 * are `base + u` for the box, so the host's root is the box's root there, and what the box's root writes is the host
 * root's on disk. Nothing is chowned: sessions that share a workspace each write it as their own uid, at once, and
 * what they leave in it is the host's user's. A lent directory under one other users may not search (a dormant
 * store's, under its 0700 root) is reached through a tmpfs over that ancestor that holds only its path. While any
 * session holds a lent directory it is 0700 (a record per host under {@link defaultLentDir}; the last gives the mode
 * back, a dead host's is given back by the next sweep): another session, another uid, cannot enter it. Its private
 * `/tmp` is a directory owned by its range's root.
 *
 * @internal
 */
import * as NodeChildProcess from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DeadHosts from "./deadHosts.ts"
import * as ProcessTree from "./processTree.ts"

/** The first uid of the first range (2^30: far above the ranges of /etc/subuid, systemd and LXD's). @internal */
export const firstUid = 0x40000000

/** The uids of one session. @internal */
export const rangeSize = 65536

/** How many ranges there are (the last uid is below 2^31). @internal */
export const slots = 8192

/** Where the slots' lock files are. @internal */
export const defaultLockDir = "/run/tether/uid-ranges"

/** Whether a uid is one of a session's (of any host's). @internal */
export const isSessionUid = (uid: number): boolean => uid >= firstUid && uid < firstUid + slots * rangeSize

/** A range held by this host. @internal */
export interface Range {
  readonly slot: number
  /** The uid (and gid) outside of the namespace's root. */
  readonly base: number
  /** Gives the slot back (removes its lock file when it is still this host's). */
  readonly release: () => void
}

const identity = (): string => `${process.pid} ${ProcessTree.readStat(process.pid)?.start ?? "-"}`

/** Whether a lock file's holder is gone (its pid not alive, or alive as another process). */
const stale = (text: string): boolean => {
  const [pid, start] = text.trim().split(" ")
  const info = ProcessTree.readStat(Number(pid))
  return info === undefined || (start !== "-" && info.start !== start)
}

/**
 * Takes a free slot: a lock file created with `O_EXCL` (a dead host's is taken back, through a rename that only
 * one taker wins). `start` is where the search begins (random by default). Returns why not, as a string.
 *
 * @internal
 */
export const allocate = (dir: string = defaultLockDir, start: number = randomBytes(2).readUInt16BE() % slots) => {
  try {
    Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  } catch (error) {
    return `cannot create ${dir} (${code(error)})`
  }
  const me = identity()
  for (let i = 0; i < slots; i++) {
    const slot = (start + i) % slots
    const file = Path.join(dir, String(slot))
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        Fs.writeFileSync(file, me, { flag: "wx", mode: 0o600 })
        const range: Range = {
          slot,
          base: firstUid + slot * rangeSize,
          release: () => {
            try {
              if (Fs.readFileSync(file, "utf8") === me) Fs.unlinkSync(file)
            } catch {
              // Gone already.
            }
          }
        }
        return range
      } catch (error) {
        if (code(error) !== "EEXIST") return `cannot create a lock file in ${dir} (${code(error)})`
      }
      let holder: string
      try {
        holder = Fs.readFileSync(file, "utf8")
      } catch {
        continue
      }
      if (!stale(holder)) break
      // Taken back by whoever renames it first; the others go on to the next slot.
      const aside = `${file}.stale-${randomBytes(4).toString("hex")}`
      try {
        Fs.renameSync(file, aside)
        Fs.unlinkSync(aside)
      } catch {
        break
      }
    }
  }
  return `every uid range (${slots}) is held`
}

/**
 * Removes the lock files of hosts that are gone (killed without their finalizers), so that the directory does not
 * grow with them; the slots were free to take anyway.
 *
 * @internal
 */
export const sweep = (dir: string = defaultLockDir): void => {
  for (const name of DeadHosts.namesIn(dir)) {
    const file = Path.join(dir, name)
    try {
      if (!/^[0-9]+$/.test(name) || !stale(Fs.readFileSync(file, "utf8"))) continue
      const aside = `${file}.stale-${randomBytes(4).toString("hex")}`
      Fs.renameSync(file, aside)
      Fs.unlinkSync(aside)
    } catch {
      // Taken back by another host meanwhile.
    }
  }
}

/** A directory lent to a session while it runs, and how to give it back. @internal */
export interface Lent {
  readonly restore: () => void
}

/** Where the hosts record the directories they lend and the modes to give back (a dead host's are swept). @internal */
export const defaultLentDir = "/run/tether/lent"

/** The lent directories of this process's live sessions: how many hold each, and its mode to give back. */
const held = new Map<string, { count: number; readonly mode: number; readonly record: string }>()

/** The records of every host that lends `dir` (file names `<key>.<pid>`). */
const recordsOf = (records: string, dir: string): ReadonlyArray<{ readonly file: string; readonly mode: number }> => {
  const key = createHash("sha256").update(dir).digest("hex").slice(0, 32)
  return DeadHosts.namesIn(records).filter((name) => name.startsWith(`${key}.`)).flatMap((name) => {
    const file = Path.join(records, name)
    try {
      const [holder, mode, path] = Fs.readFileSync(file, "utf8").split("\n")
      return path === dir ? [{ file, mode: Number(mode), holder: holder! }] : []
    } catch {
      return []
    }
  })
}

/**
 * Lends `dir` to a session (see the module's notes): nothing of it changes owner (the box sees it through an
 * idmapped mount, {@link idmapScript}), but while any session holds it, it is 0700, so that no other session (another
 * uid) may enter it where it is not mounted for it. Sessions that share it count, those of other hosts on the machine
 * too (a record per host under `records`, holding the mode found by the first): the last one's `restore` gives its
 * mode back, and a host killed without its finalizers has it given back by the next {@link sweep}. A directory left
 * lent by a session's uid (the chown lending of earlier versions) is given back to the host's user first.
 *
 * @internal
 */
export const lend = (dir: string, records: string = defaultLentDir): Lent => {
  const stat = Fs.statSync(dir)
  if (isSessionUid(stat.uid) || isSessionUid(stat.gid)) giveBack(dir, process.getuid?.() ?? 0, process.getgid?.() ?? 0)
  const entry = held.get(dir)
  if (entry === undefined) {
    Fs.mkdirSync(records, { recursive: true, mode: 0o700 })
    // Another host lends it already: the mode it found is the one to give back.
    const mode = recordsOf(records, dir)[0]?.mode ?? (stat.mode & 0o7777)
    const record = Path.join(records, `${createHash("sha256").update(dir).digest("hex").slice(0, 32)}.${process.pid}`)
    Fs.writeFileSync(record, `${identity()}\n${mode}\n${dir}`, { mode: 0o600 })
    held.set(dir, { count: 1, mode, record })
    Fs.chmodSync(dir, 0o700)
  } else {
    entry.count++
  }
  let restored = false
  return {
    restore: () => {
      const entry = held.get(dir)
      if (restored || entry === undefined) return
      restored = true
      if (--entry.count > 0) return
      held.delete(dir)
      try {
        Fs.unlinkSync(entry.record)
      } catch {
        // Swept meanwhile.
      }
      if (recordsOf(records, dir).length > 0) return
      try {
        Fs.chmodSync(dir, entry.mode)
      } catch {
        // Removed meanwhile.
      }
    }
  }
}

/**
 * Gives back the modes of the directories that hosts killed without their finalizers left lent (their records'
 * holders are gone), unless a live host lends them still.
 *
 * @internal
 */
export const sweepLent = (records: string = defaultLentDir): void => {
  for (const name of DeadHosts.namesIn(records)) {
    const file = Path.join(records, name)
    try {
      const [holder, mode, path] = Fs.readFileSync(file, "utf8").split("\n")
      if (holder === undefined || path === undefined || !stale(holder)) continue
      Fs.unlinkSync(file)
      if (recordsOf(records, path).length === 0 && !held.has(path)) Fs.chmodSync(path, Number(mode))
    } catch {
      // Taken back by another host meanwhile, or its directory removed.
    }
  }
}

/** Entries owned by a session's uid (a host of an earlier version killed while it lent them) given to `uid`. */
const giveBack = (dir: string, uid: number, gid: number): void => {
  const walk = (path: string): void => {
    let stat: Fs.Stats
    try {
      stat = Fs.lstatSync(path)
      if (isSessionUid(stat.uid) || isSessionUid(stat.gid)) {
        Fs.lchownSync(path, isSessionUid(stat.uid) ? uid : stat.uid, isSessionUid(stat.gid) ? gid : stat.gid)
      }
      if (stat.isDirectory()) { for (const name of Fs.readdirSync(path)) walk(Path.join(path, name)) }
    } catch {
      // Removed meanwhile.
    }
  }
  walk(dir)
}

/**
 * Whether `dir` is one every user shares (sticky, as `/tmp` and `/var/tmp` are, or `/`): never lent to a session (it
 * would be closed to every other user while the session runs).
 *
 * @internal
 */
export const isShared = (dir: string): boolean => {
  try {
    return Path.resolve(dir) === "/" || (Fs.statSync(dir).mode & 0o1000) !== 0
  } catch {
    return false
  }
}

/**
 * The outermost directory above `dir` that other users may not search (`dir`'s own parent included), undefined
 * when every one may be: a box reaches `dir` there through a tmpfs laid over it that holds only `dir`'s path.
 *
 * @internal
 */
export const closedAbove = (dir: string): string | undefined => {
  let closed: string | undefined
  for (let each = Path.dirname(Path.resolve(dir)); each !== "/"; each = Path.dirname(each)) {
    try {
      if ((Fs.statSync(each).mode & 0o001) === 0) closed = each
    } catch {
      return closed
    }
  }
  return closed
}

/**
 * The host's helper for the box's lent directories (Python, for the mount API: `open_tree`, `mount_setattr`,
 * `move_mount`, which util-linux's `mount` before 2.39 does not offer). `mount <userns> <mntns> (<dir> <closed|->)…`:
 * for each directory, a clone of its mount idmapped through the session's user namespace (uid and gid `u` on disk
 * are `base + u` for the box: the host's root is the box's root, and what the box's root writes is the host
 * root's on disk), then, in the box's mount namespace, a tmpfs over its closed ancestor when it has one (holding
 * only the directory's path) and the clone moved onto its path. `probe <base> <dir>…`: whether the directories'
 * filesystems take idmapped mounts (a throwaway user namespace; nothing is mounted).
 *
 * @internal
 */
export const idmapScript = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64), ("prop", ctypes.c_uint64), ("userns", ctypes.c_uint64)]
def call(r, what):
    if r < 0:
        sys.stderr.write(what + ": " + os.strerror(ctypes.get_errno()) + "\\n")
        sys.exit(1)
    return r
def idmapped(path, userns):
    fd = call(libc.syscall(428, -100, path.encode(), 1 | 0o2000000), "open_tree " + path)
    a = Attr(0x100000, 0, 0, userns)
    call(libc.syscall(442, fd, b"", 0x1000, ctypes.byref(a), ctypes.sizeof(a)), "mount_setattr " + path)
    return fd
if sys.argv[1] == "probe":
    r, w = os.pipe()
    r2, w2 = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(w)
        os.close(r2)
        if libc.unshare(0x10000000) != 0:
            os._exit(1)
        os.write(w2, b"u")
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    os.close(w2)
    try:
        if os.read(r2, 1) != b"u":
            sys.stderr.write("unshare --user failed\\n")
            sys.exit(1)
        for name in ("uid_map", "gid_map"):
            with open("/proc/%d/%s" % (child, name), "w") as f:
                f.write("0 %s 1\\n" % sys.argv[2])
        userns = os.open("/proc/%d/ns/user" % child, os.O_RDONLY)
        for path in sys.argv[3:]:
            os.close(idmapped(path, userns))
    finally:
        os.close(w)
        os.waitpid(child, 0)
    sys.exit(0)
userns = os.open(sys.argv[2], os.O_RDONLY)
mntns = os.open(sys.argv[3], os.O_RDONLY)
pairs = [(sys.argv[i], sys.argv[i + 1]) for i in range(4, len(sys.argv), 2)]
fds = [idmapped(path, userns) for path, _ in pairs]
call(libc.setns(mntns, 0x20000), "setns")
covered = set()
for (path, closed), fd in zip(pairs, fds):
    if closed != "-":
        if closed not in covered:
            call(libc.mount(b"tmpfs", closed.encode(), b"tmpfs", 6, b"mode=0755"), "mount tmpfs " + closed)
            covered.add(closed)
        os.makedirs(path, mode=0o755, exist_ok=True)
    call(libc.syscall(429, fd, b"", -100, path.encode(), 4), "move_mount " + path)
`

/** The interpreter of {@link idmapScript}, as found on `PATH`. @internal */
export const python = "python3"

let interpreter: string | undefined

/**
 * The interpreter that runs {@link idmapScript}: `python3`'s own executable (`sys.executable`, asked once: a
 * version manager's shim on `PATH` costs tens of milliseconds a start), isolated and without `site` (`-I -S`).
 *
 * @internal
 */
export const helper = (): { readonly file: string; readonly args: ReadonlyArray<string> } => {
  if (interpreter === undefined) {
    const asked = NodeChildProcess.spawnSync(python, ["-I", "-S", "-c", "import sys; print(sys.executable)"], {
      encoding: "utf8",
      timeout: 5_000,
      stdio: ["ignore", "pipe", "ignore"]
    })
    const found = asked.status === 0 ? asked.stdout.trim() : ""
    interpreter = found.length > 0 && Path.isAbsolute(found) ? found : python
  }
  return { file: interpreter, args: ["-I", "-S", "-c", idmapScript] }
}

/** The filesystems (by device) whose idmapped mounts were probed: whether they take them, or why not. */
const idmappable = new Map<number, true | string>()

/**
 * Whether the box can lend each of `dirs` through an idmapped mount (undefined) or why not: probed once per
 * filesystem (device) with {@link idmapScript}'s `probe`.
 *
 * @internal
 */
export const idmapProblem = (dirs: ReadonlyArray<string>): string | undefined => {
  for (const dir of dirs) {
    let device: number
    try {
      device = Fs.statSync(dir).dev
    } catch (error) {
      return `${dir}: ${code(error)}`
    }
    let known = idmappable.get(device)
    if (known === undefined) {
      const { args, file } = helper()
      const probe = NodeChildProcess.spawnSync(file, [...args, "probe", String(firstUid), dir], {
        stdio: ["ignore", "ignore", "pipe"],
        timeout: 5_000,
        encoding: "utf8"
      })
      known = probe.error !== undefined
        ? `${python} could not be run (${code(probe.error)})`
        : probe.status === 0
        ? true
        : `the filesystem of ${dir} takes no idmapped mount (${probe.stderr.trim() || `exit ${probe.status}`})`
      idmappable.set(device, known)
    }
    if (known !== true) return known
  }
  return undefined
}

/** The arguments of {@link idmapScript}'s `mount` for a box's lent directories (after {@link helper}'s). @internal */
export const idmapArgs = (pid: number, lent: ReadonlyArray<string>): ReadonlyArray<string> => [
  ...helper().args,
  "mount",
  `/proc/${pid}/ns/user`,
  `/proc/${pid}/ns/mnt`,
  ...lent.flatMap((dir) => [dir, closedAbove(dir) ?? "-"])
]

/** The user namespace of a process (`user:[inode]`), undefined when it is gone. @internal */
export const userNamespace = (pid: number | "self"): string | undefined => {
  try {
    return Fs.readlinkSync(`/proc/${pid}/ns/user`)
  } catch {
    return undefined
  }
}

/**
 * Writes a process's user namespace's maps: its root is `base` outside, for {@link rangeSize} uids and gids.
 * Throws on failure (the process is gone, or not in a namespace of its own yet).
 *
 * @internal
 */
export const writeMaps = (pid: number, base: number): void => {
  Fs.writeFileSync(`/proc/${pid}/uid_map`, `0 ${base} ${rangeSize}\n`)
  Fs.writeFileSync(`/proc/${pid}/gid_map`, `0 ${base} ${rangeSize}\n`)
}

/** The children of a process (`/proc/<pid>/task/<pid>/children`). @internal */
export const children = (pid: number): ReadonlyArray<number> => {
  try {
    return Fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "latin1").split(" ").filter((each) => each !== "")
      .map(Number)
  } catch {
    return []
  }
}

const cmdline = (pid: number): string | undefined => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1")
  } catch {
    return undefined
  }
}

/**
 * The CLI of a box, by the pid of its namespace's first process (stage 2), once it has been started: the child that
 * is neither one of stage 2's `mount`s nor a fork of stage 2 that has not exec'd yet (its command line is stage 2's).
 * From `env` on, the pid is the CLI's (`env` execs `setsid`, which execs the CLI).
 *
 * @internal
 */
export const cliOf = (init: number): number | undefined => {
  const own = cmdline(init)
  if (own === undefined) return undefined
  return children(init).find((child) => {
    const command = cmdline(child)
    return command !== undefined && command !== own && command !== "" && !command.startsWith("mount\0")
  })
}

/**
 * What `unshare` is given: every namespace, its capabilities kept across the exec of stage 1. No `--fork`: stage 1
 * forks the namespace's first process itself, and reports how it ended (`unshare --fork` of util-linux 2.38 turns a
 * child's SIGKILL into `exit 1`).
 *
 * @internal
 */
export const unshareArgs: ReadonlyArray<string> = [
  "unshare",
  "--user",
  "--pid",
  "--mount",
  "--cgroup",
  "--keep-caps",
  "--"
]

/**
 * Stage 1 (`sh -c stage1 tether-box <stage2> <tmp> <n> <keep…> <file> <args…>`), the process the host spawned (in
 * the host's PID namespace, in the new others): waits for `mapped` on descriptor 3, then starts stage 2 as the
 * namespace's root, as the first process of the new PID namespace, with a
 * parent-death signal (stage 1 killed, the namespace dies) and its stdio; closes its own (the host sees the CLI's
 * stdout end when the CLI closes it), waits for it, and ends as it ended: its exit code, or the same signal (so an
 * exit code above 128 reads as a signal). Started in the background (so that stage 1 can close its stdio), the
 * child gets SIGINT and SIGQUIT back to their defaults (`env --default-signal`: a shell ignores them in background
 * commands, and the CLI would inherit that). Stage 1 outlives SIGTERM/SIGINT/SIGHUP while the CLI runs (a
 * handler: teardown signals the CLI itself). Exits 125 when the host went away first.
 *
 * @internal
 */
export const stage1 = `IFS= read -r m <&3 && [ "$m" = mapped ] || exit 125
exec 3<&-
s=$1
shift
trap : TERM INT HUP
exec 7<&0 8>&1 9>&2
env --default-signal=INT,QUIT setpriv --reuid 0 --regid 0 --clear-groups --pdeathsig KILL -- \\
  /bin/sh -c "$s" tether-box "$@" 0<&7 1>&8 2>&9 7<&- 8<&- 9<&- &
c=$!
exec 7<&- 8>&- 9>&- </dev/null >/dev/null 2>&1
while :; do
  wait "$c"
  r=$?
  kill -0 "$c" 2>/dev/null || break
done
trap - TERM INT HUP
[ "$r" -gt 128 ] && kill -$((r - 128)) $$
exit "$r"`

/**
 * Stage 2, as the namespace's root and its PID 1: `/proc` of its PID namespace, each kept directory bound at its path
 * inside the private `/tmp` directory, that directory over `/tmp` (with them), fresh `/dev/shm` and `/var/tmp`; then
 * it starts the CLI in a session of its own, without the variables the shells added (as the launcher does), with its
 * stdio (closing its own), and waits for it, reaping the orphans re-parented to it meanwhile. Its exit (the CLI's
 * code, or 128 + its signal) ends the namespace. The CLI is not PID 1: the kernel ignores a signal to a namespace's
 * PID 1 that it has no handler for, SIGTERM included, and teardown's SIGTERM must end the CLI as anywhere else.
 *
 * @internal
 */
export const stage2 = `mount -t proc -o nosuid,nodev,noexec proc /proc || exit 125
t=$1
n=$2
shift 2
while [ "$n" -gt 0 ]; do
  mount --rbind "$1" "$t/\${1#/tmp/}" || exit 125
  shift
  n=$((n - 1))
done
mount --rbind "$t" /tmp || exit 125
for d in /dev/shm /var/tmp; do
  [ -d "$d" ] && { mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$d" || exit 125; }
done
d=$(pwd -P 2>/dev/null) && [ -n "$d" ] && { cd "$d" 2>/dev/null || :; }
unset $TETHER_LAUNCHER_UNSET TETHER_LAUNCHER_UNSET
exec 7<&0 8>&1 9>&2
env --default-signal=INT,QUIT setsid -- "$@" 0<&7 1>&8 2>&9 7<&- 8<&- 9<&- &
c=$!
exec 7<&- 8>&- 9>&- </dev/null >/dev/null 2>&1
wait "$c"`

/** The argv that runs `file args` in a box (after the launcher, which keeps descriptor 3 open). @internal */
export const command = (
  tmp: string,
  keep: ReadonlyArray<string>,
  file: string,
  args: ReadonlyArray<string>,
  prefix: ReadonlyArray<string> = []
): ReadonlyArray<string> => [
  ...prefix,
  ...unshareArgs,
  "/bin/sh",
  "-c",
  stage1,
  "tether-box",
  stage2,
  tmp,
  String(keep.length),
  ...keep,
  file,
  ...args
]

/**
 * The entries of `/tmp` that hold `paths` (real paths; `/tmp` itself excluded), whose mount points are made in the
 * private directory `tmp` (owned by `base`): they stay visible at their paths once it covers `/tmp`.
 *
 * @internal
 */
export const keepUnderTmp = (tmp: string, paths: ReadonlyArray<string>, base: number): ReadonlyArray<string> => {
  const kept: Array<string> = []
  for (const path of paths) {
    let real: string
    try {
      real = Fs.realpathSync(path)
      if (!Fs.statSync(real).isDirectory()) continue
    } catch {
      continue
    }
    if (!real.startsWith("/tmp/")) continue
    // The whole entry of /tmp it is in: a CLI installed under /tmp (a checkout there, as CI's) needs its
    // dependencies beside it, not only its own directory.
    const top = `/tmp/${real.slice("/tmp/".length).split("/")[0]}`
    if (kept.includes(top)) continue
    // The private directory is itself under /tmp: never bound into itself.
    if (top === tmp || tmp.startsWith(top + "/")) continue
    real = top
    const point = Path.join(tmp, real.slice("/tmp/".length))
    Fs.mkdirSync(point, { recursive: true })
    for (let dir = point; dir !== tmp; dir = Path.dirname(dir)) Fs.chownSync(dir, base, base)
    kept.push(real)
  }
  return kept
}

/**
 * Whether sessions can be isolated here, or why not. Linux, root (only root can map a range other than its own
 * uid without `newuidmap`), and `unshare` that makes every namespace (probed with `true`), `setpriv` and `mount`.
 *
 * @internal
 */
export const probe = (): true | string => {
  if (process.platform !== "linux") return "isolation between sessions needs Linux namespaces"
  if (process.getuid?.() !== 0) return nonRoot
  const run = (file: string, args: ReadonlyArray<string>) =>
    NodeChildProcess.spawnSync(file, args, { stdio: "ignore", timeout: 5_000 })
  const probe = run("unshare", ["--user", "--pid", "--mount", "--cgroup", "--fork", "--keep-caps", "--", "true"])
  if (probe.error !== undefined) return `unshare could not be run (${code(probe.error)})`
  if (probe.status !== 0) return "unshare --user --pid --mount --cgroup failed: the kernel refuses these namespaces"
  for (const tool of ["setpriv", "mount", "setsid"]) {
    const version = run(tool, ["--version"])
    if (version.error !== undefined || version.status !== 0) return `${tool} (util-linux) is missing`
  }
  const pythonVersion = run(python, ["--version"])
  if (pythonVersion.error !== undefined || pythonVersion.status !== 0) {
    return `${python} is missing (the host's helper that mounts a box's directories for its uid)`
  }
  const env = run("env", ["--default-signal=INT,QUIT", "true"])
  if (env.error !== undefined || env.status !== 0) return "env --default-signal (GNU coreutils 8.31+) is missing"
  return true
}

/** What a host that is not root needs, and what it gets without it. @internal */
export const nonRoot = "isolation between sessions needs root here: each session's user namespace maps its root to " +
  "a uid range of its own outside, which only root may write into uid_map; a host that is not root would need " +
  "newuidmap and newgidmap (setuid, the uidmap package) and a subordinate range for its user in /etc/subuid and " +
  "/etc/subgid (65,536 uids per concurrent session), which this transport does not use yet. Without them the " +
  "sessions run as the host's own uid: one session's tools can read another's /proc/<pid>/environ and memory, its " +
  "files, and signal it (the pid-namespace containment's user namespace hides the process list only)"

const code = (error: unknown): string =>
  (error as NodeJS.ErrnoException | undefined)?.code ?? (error instanceof Error ? error.message : String(error))

/**
 * The launcher of a box: the cgroup launcher's, but descriptor 3 stays open for stage 1's `mapped`.
 *
 * @internal
 */
export const launcher = `IFS= read -r go <&3 && [ "$go" = go ] || exit 125
exec "$@"`

/** The variables that name a CLI's config directory (Claude Code's, Codex's). @internal */
export const configVariables: ReadonlyArray<string> = ["CLAUDE_CONFIG_DIR", "CODEX_HOME"]

const directory = (path: string): string | undefined => {
  if (!Path.isAbsolute(path)) return undefined
  try {
    const real = Fs.realpathSync(path)
    return Fs.statSync(real).isDirectory() ? real : undefined
  } catch {
    return undefined
  }
}

/**
 * The directories of a launch spec a box treats specially: `lent` (the workspace, `cwd`, the config directory,
 * `HOME` when the spec sets one that is not the host's own, and a `TMPDIR` it sets; the outermost of nested ones) and `kept` (those, the executable's, and every directory an `env.set` value names by
 * absolute path), which stay visible at their paths under `/tmp`.
 *
 * @internal
 */
export const directoriesOf = (
  spec: { readonly env: { readonly set: Readonly<Record<string, unknown>> } },
  cwd: string | undefined,
  file?: string
): { readonly lent: ReadonlyArray<string>; readonly kept: ReadonlyArray<string> } => {
  const candidates: Array<string> = []
  if (cwd !== undefined) candidates.push(cwd)
  for (const name of configVariables) {
    const value = spec.env.set[name]
    if (typeof value === "string") candidates.push(value)
  }
  // A home of the session's own, which the host set (never the host's own, which sessions would share).
  const home = spec.env.set["HOME"]
  if (typeof home === "string" && directory(home) !== directory(Os.homedir())) candidates.push(home)
  // A temporary directory the host set: the session's to write (a shared one, as /tmp, makes it unboxable).
  const tmp = spec.env.set["TMPDIR"]
  if (typeof tmp === "string") candidates.push(tmp)
  const lent: Array<string> = []
  for (const dir of candidates.flatMap((each) => directory(each) ?? []).sort((a, b) => a.length - b.length)) {
    if (!lent.some((outer) => dir === outer || dir.startsWith(outer + "/"))) lent.push(dir)
  }
  const kept = [...lent]
  for (const value of [...(file === undefined ? [] : [Path.dirname(file)]), ...Object.values(spec.env.set)]) {
    const dir = typeof value === "string" ? directory(value) : undefined
    if (dir !== undefined && !kept.includes(dir)) kept.push(dir)
  }
  return { lent, kept }
}

/**
 * Why a session's uid could not run `file` (undefined when it can): the session is not its owner, so every
 * directory on the way needs search permission for others, and the file execute (and read, for a script)
 * permission for others.
 *
 * @internal
 */
export const unreachable = (file: string, lent: ReadonlyArray<string> = []): string | undefined => {
  let stat: Fs.Stats
  let real: string
  try {
    real = Fs.realpathSync(file)
    stat = Fs.statSync(real)
  } catch {
    return undefined
  }
  // In a directory lent to it: reached through the idmapped mount (as its owner), and its path through the tmpfs
  // laid over a closed ancestor.
  if (lent.some((dir) => real.startsWith(dir + "/"))) {
    return (stat.mode & 0o111) === 0 ? `${file} is not executable (mode ${(stat.mode & 0o777).toString(8)})` : undefined
  }
  if ((stat.mode & 0o001) === 0) {
    return `${file} is not executable by other users (mode ${(stat.mode & 0o777).toString(8)})`
  }
  for (let dir = Path.dirname(real);; dir = Path.dirname(dir)) {
    try {
      if ((Fs.statSync(dir).mode & 0o001) === 0) return `${dir} is not searchable by other users`
    } catch {
      return undefined
    }
    if (dir === "/") return undefined
  }
}
