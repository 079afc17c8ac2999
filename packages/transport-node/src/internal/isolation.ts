/**
 * Isolation between sessions (Linux, as root): each session's CLI runs in a user namespace whose root is a uid range
 * of its own outside (65,536 uids, distinct from every other live session's on the machine), a PID namespace (it
 * sees its own processes only), a mount namespace (a private `/tmp`, `/dev/shm` and `/var/tmp`; `/proc` of its own
 * PID namespace) and a cgroup namespace rooted at its session's cgroup.
 *
 * Start (the handshake): the launcher waits on descriptor 3 until the host has placed it in its cgroups (`go`), then
 * execs `unshare --pid --mount` ({@link unshareArgs}; as the host's root: both namespaces are the initial user
 * namespace's) with {@link stage1}, which starts the new PID namespace's first process (PID 1, with a parent-death
 * signal) and reports how it ended. PID 1, still the host's root, is stage 2, the host's helper ({@link idmapScript},
 * one `perl` making system calls): it mounts `/proc` of its PID namespace, the directories the session keeps at their
 * paths under `/tmp`, the private `/tmp`, fresh `/dev/shm` and `/var/tmp`, its lent directories, idmapped, and what
 * it is shown of closed directories, read-only, each under a tmpfs over its closed ancestor. Then it unshares the
 * box's user namespace, a mount namespace of that namespace's, a copy of the first in which the kernel locks every
 * mount (`MNT_LOCKED`, as it does whenever a mount namespace is copied into one owned by a less privileged user
 * namespace), and a cgroup namespace: the box's root cannot unmount its `/proc` (the host's is under it) nor its
 * `/tmp` nor any of the others (`EINVAL`), nor make a read-only one writable; and it cannot mount a new `proc` (its
 * PID namespace is not its user namespace's). The host waits until PID 1 is in a user namespace of its own, writes
 * its `uid_map` and `gid_map` (`0 <base> 65536`: as root it may map any range; no `newuidmap`), and sends `mapped` on
 * descriptor 3. The helper reads it, becomes the namespace's root (no groups, gid and uid 0: `<base>` outside, no
 * capability outside; its parent-death signal set again, which a uid change clears) and execs stage 3
 * ({@link stage3}), which starts the CLI in a session of its own (`setsid`) and waits for it: when the CLI ends, so
 * does PID 1 and with it every process of the namespace. Any failure before `mapped` ends PID 1 (exit 125, its
 * reason on the CLI's stderr): the open fails with it. Nothing of the session runs before its CLI.
 *
 * Uid ranges: slot `i` is uids `firstUid + i × 65536 …` for {@link slots} slots, held by a lock file
 * (`/run/tether/uid-ranges/<i>`, created with `O_EXCL`, holding the host's pid and start time): two hosts on one
 * machine never hold the same slot, and a dead host's slots are taken back (its pid gone, or another process's).
 * A slot is searched from a random one, so a range released is rarely the next one given.
 *
 * What the session may write: its directories (its workspace, its config directory, a `HOME` of its own) are lent to
 * it through idmapped mounts (through a user namespace the helper makes with the box's map): uid and gid `u` on disk
 * are `base + u` for the box, so the host's root is the box's root there, and what the box's root writes is the host
 * root's on disk. Nothing is chowned: sessions that share a workspace each write it as their own uid, at once, and
 * what they leave in it is the host's user's. A lent directory under one other users may not search (a dormant
 * store's, under its 0700 root) is reached through a tmpfs over that ancestor that holds only its path. While any
 * session holds a lent directory it is 0700 (a record per host under {@link defaultLentDir}; the last gives the mode
 * back, a dead host's is given back by the next sweep): another session, another uid, cannot enter it. Its private
 * `/tmp` is a directory owned by its range's root.
 *
 * What it may run: its uid owns nothing of the host's, so a CLI installed under a directory other users may not
 * search (a clone in `/root`) is shown to it read-only ({@link reach}): for the executable, each link on the way to
 * it and its `#!` interpreter, the entry just below the innermost closed directory on its path, bound read-only
 * under a tmpfs over the outermost one that holds only these paths. Nothing else of a closed directory is there.
 *
 * @internal
 */
import * as NodeChildProcess from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DeadHosts from "./deadHosts.ts"
import * as KernelFiles from "./kernelFiles.ts"
import * as ProcessTree from "./processTree.ts"
import * as Runnable from "./runnable.ts"

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
 * when every one may be: a box reaches `dir` there through a tmpfs laid over it that holds only `dir`'s path (and
 * the other paths mounted in it, see {@link idmapScript}).
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
 * The system calls of the helper that the kernel numbers per architecture (`unshare`, `mount`, `execve`, `setgroups`,
 * `setresgid`, `setresuid`, `prctl`); the mount API's (`open_tree` 428, `move_mount` 429, `mount_setattr` 442) are
 * the same on every one. Undefined elsewhere: no box there.
 */
const helperCalls = process.arch === "x64"
  ? { unshare: 272, mount: 165, execve: 59, setgroups: 116, setresgid: 119, setresuid: 117, prctl: 157 }
  : process.arch === "arm64"
  ? { unshare: 97, mount: 40, execve: 221, setgroups: 159, setresgid: 149, setresuid: 147, prctl: 167 }
  : undefined

/** The prefix a variable held back from a box's first steps carries until the helper gives it back. @internal */
export const heldBack = "TETHER_BOX_HELD_"

/**
 * Stage 2, the helper that makes a box (Perl, for its `syscall`: the mount API's `open_tree`, `mount_setattr` and
 * `move_mount`, which util-linux's `mount` before 2.39 does not offer, and every other step without an exec of its
 * own: `perl` starts in about 2 ms, and each exec of `mount`, `unshare` or `setpriv` cost about 1.5). It loads no
 * module, and runs in taint mode (`-T`), which ignores `PERL5OPT`, `PERL5LIB` and `PERLLIB`, with `-C0`
 * (`PERL_UNICODE` would decode its arguments); the variables of the loader and the C library reach no step that runs
 * as the host's root ({@link holdBack}). It execs with the `execve` system call (taint mode refuses `exec` under a
 * `PATH` with a relative or world-writable directory, which the session's may have), its arguments and environment
 * untainted as given.
 *
 * `box <base> <tmp> <n> <keep…> (<lend|expose> <path> <closed|->)… -- <next…>`, the box's first process (exec'd
 * by {@link stage1}), the host's root in a mount namespace of the initial user namespace: `/proc` of its PID
 * namespace (`nosuid`, `nodev`, `noexec`); each kept entry of `/tmp` bound (recursively) at its path inside the
 * private directory `tmp`, that directory over `/tmp`; a tmpfs (1777) over `/dev/shm` and `/var/tmp`; then a clone of
 * every entry's mount — `lend`: idmapped through a user namespace made for it whose root is `base` outside, the map of
 * the box's own (uid and gid `u` on disk are `base + u` for the box: the host's root is the box's root, and what the
 * box's root writes is the host root's on disk); `expose`: with its submounts, read-only, `nosuid`, `nodev` — then, for
 * each in turn (shortest path first), a tmpfs over its closed ancestor when it has one (once per ancestor; holding only
 * the paths mounted in it, read-only once they are), and the clone moved onto its path. Then the box's user namespace,
 * with a mount namespace (every mount copied locked, `MNT_LOCKED`: its root cannot unmount them, nor make a
 * read-only one writable; propagation private) and a cgroup namespace; `mapped` read on descriptor 3 (anything else,
 * or its end: exit 125); `setgroups` (none), `setresgid` and `setresuid` to 0, the parent-death signal (`SIGKILL`)
 * again; and `next…` (an absolute path) exec'd. Any failure: its reason on stderr, exit 125.
 *
 * `probe <base> <dir>…`: whether the directories' filesystems take idmapped mounts (nothing is mounted).
 *
 * @internal
 */
export const idmapScript = `my ($UNSHARE, $MOUNT, $EXECVE, $SETGROUPS, $SETRESGID, $SETRESUID, $PRCTL) = (${
  [
    helperCalls?.unshare,
    helperCalls?.mount,
    helperCalls?.execve,
    helperCalls?.setgroups,
    helperCalls?.setresgid,
    helperCalls?.setresuid,
    helperCalls?.prctl
  ].map((call) => call ?? -1).join(", ")
});
# syscall() may write into a string it is given: none of them is a constant (nor a pack() of constants, folded).
my ($none, $tmpfs, $options, $proc, $root) = ("", "tmpfs", "mode=0755", "proc", "/");
sub mnt {
    my ($source, $target, $type, $flags, $data) = @_;
    syscall($MOUNT, $source, $target, $type, $flags, $data) == 0 or fail("mount $target");
}
sub fail { my $e = "$!"; print STDERR "tether-box: $_[0]: $e\\n"; exit 125 }
sub userns {
    my ($base, $count) = @_;
    pipe(my $r, my $w) && pipe(my $r2, my $w2) or fail("pipe");
    my $child = fork() // fail("fork");
    if ($child == 0) {
        close $w; close $r2;
        exit 1 if syscall($UNSHARE, 0x10000000) != 0;
        syswrite $w2, "u";
        sysread $r, my $x, 1;
        exit 0;
    }
    close $r; close $w2;
    (sysread($r2, my $u, 1) // 0) == 1 or fail("unshare --user");
    for my $name ("uid_map", "gid_map") {
        my $f;
        open($f, ">", "/proc/$child/$name") && (print $f "0 $base $count\\n") && close($f) or fail($name);
    }
    open(my $ns, "<", "/proc/$child/ns/user") or fail("/proc/$child/ns/user");
    close $w;
    waitpid $child, 0;
    return $ns;
}
sub tree {
    my ($path, $recursive, @attr) = @_;
    my $deep = $recursive ? 0x8000 : 0;
    my $fd = syscall(428, -100, $path, 1 | 02000000 | $deep);
    fail("open_tree $path") if $fd < 0;
    syscall(442, $fd, $none, 0x1000 | $deep, pack("Q4", @attr), 32) == 0 or fail("mount_setattr $path");
    return $fd;
}
sub idmapped { my ($path, $ns) = @_; tree($path, 0, 0x100000, 0, 0, fileno $ns) }
sub mkdirs {
    my ($dir) = @_;
    -d $dir or $dir !~ m{^(/.+)/[^/]+$} or mkdirs($1);
    -d $dir or mkdir($dir, 0755) or fail("mkdir $dir");
}
($_) = /(.*)/s for @ARGV, values %ENV;
my ($mode, $base) = (shift @ARGV, 0 + shift @ARGV);
if ($mode eq "probe") {
    my $ns = userns($base, 1);
    idmapped($_, $ns) for @ARGV;
    exit 0;
}
# PID 1 of the box's PID namespace, the host's root in a mount namespace of the initial user namespace, killed with
# stage 1: /proc of its PID namespace, the kept entries of /tmp bound into the private /tmp, that over /tmp, fresh
# /dev/shm and /var/tmp.
syscall($PRCTL, 1, 9, 0, 0, 0) == 0 or fail("prctl PR_SET_PDEATHSIG");
my ($tmp, $n) = (shift @ARGV, 0 + shift @ARGV);
my @keep = splice @ARGV, 0, $n;
my ($procdir, $tmpdir) = ("/proc", "/tmp");
mnt($proc, $procdir, $proc, 2 | 4 | 8, 0);
mnt($_, $tmp . substr($_, 4), 0, 4096 | 16384, 0) for @keep;
mnt($tmp, $tmpdir, 0, 4096 | 16384, 0);
my $shared = "mode=1777";
for ("/dev/shm", "/var/tmp") { my $d = $_; mnt($tmpfs, $d, $tmpfs, 2 | 4, $shared) if -d $d }
# Its lent directories (idmapped) and what it is shown of closed ones (read-only), each under a tmpfs over its closed
# ancestor: a clone of each first, then each moved onto its path, shortest first.
my ($at) = grep { $ARGV[$_] eq "--" } 0 .. $#ARGV;
my @next = @ARGV[$at + 1 .. $#ARGV];
my @entries = map { [@ARGV[3 * $_ .. 3 * $_ + 2]] } 0 .. $at / 3 - 1;
my $ns = (grep { $_->[0] eq "lend" } @entries) ? userns($base, 65536) : undef;
my @fds = map { $_->[0] eq "lend" ? idmapped($_->[1], $ns) : tree($_->[1], 1, 7, 0, 0, 0) } @entries;
my %covered;
for my $i (0 .. $#entries) {
    my ($kind, $path, $closed) = @{$entries[$i]};
    if ($closed ne "-") {
        $covered{$closed}++ or mnt($tmpfs, $closed, $tmpfs, 6, $options);
        if (-d "/proc/self/fd/$fds[$i]") { mkdirs($path) }
        else { mkdirs($path =~ s{/[^/]+$}{}r); sysopen(my $f, $path, 0101, 0644) or fail("create $path"); close $f }
    }
    syscall(429, $fds[$i], $none, -100, $path, 4) == 0 or fail("move_mount $path");
}
for (sort keys %covered) {
    my ($closed, $ro) = ($_, pack("Q4", 7, 0, 0, 0));
    syscall(442, -100, $closed, 0, $ro, 32) == 0 or fail("mount_setattr $closed");
}
# The box's user namespace, a mount namespace of its (a copy of this one: every mount locked) and a cgroup namespace.
syscall($UNSHARE, 0x10000000 | 0x20000 | 0x2000000) == 0 or fail("unshare --user --mount --cgroup");
mnt($none, $root, 0, 16384 | 262144, 0);
# The host writes its maps once it sees this process in a user namespace of its own, then sends "mapped".
open(my $three, "<&=", 3) or fail("descriptor 3");
my $mapped = <$three>;
exit 125 unless defined $mapped && $mapped eq "mapped\n";
close $three;
# The namespace's root (uid base outside, no capability outside); a uid change clears the parent-death signal.
syscall($SETGROUPS, 0, 0) == 0 or fail("setgroups");
syscall($SETRESGID, 0, 0, 0) == 0 or fail("setresgid");
syscall($SETRESUID, 0, 0, 0) == 0 or fail("setresuid");
syscall($PRCTL, 1, 9, 0, 0, 0) == 0 or fail("prctl PR_SET_PDEATHSIG");
# The variables held back from the steps run as the host's root (holdBack), given back for the box's own.
my @env = map { my $name = $_; $name =~ s/^${heldBack}//; "$name=$ENV{$_}" } sort keys %ENV;
syscall($EXECVE, $next[0], pack("p*", @next, undef), pack("p*", @env, undef));
fail("exec $next[0]");
`

/**
 * The variables of a session's environment that would make a program the box runs as the host's root (`unshare`,
 * `sh`, `perl`) load or run what they name, or change how it reads its input: the dynamic loader's and the C
 * library's (glibc ignores them only in a setuid program, which these are not) and Perl's that taint mode does not
 * turn off.
 *
 * @internal
 */
export const rootUnsafe = (name: string): boolean =>
  name.startsWith("LD_") || name.startsWith("MALLOC_") || [
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TZDIR",
    "PERL_UNICODE",
    "PERLIO"
  ].includes(name)

/**
 * A boxed CLI's environment as its launcher is spawned with: each {@link rootUnsafe} variable renamed with the
 * {@link heldBack} prefix (whatever its value, none is seen by the steps that run as the host's root); the helper
 * gives each its name back before it execs the box's shell, which runs as the box's root.
 *
 * @internal
 */
export const holdBack = (env: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) out[rootUnsafe(name) ? heldBack + name : name] = value
  return out
}

/** The interpreter of {@link idmapScript}, as found on `PATH`. @internal */
export const perl = "perl"

let interpreter: string | undefined

/** The system's own `perl` (Debian's `perl-base`, essential), tried before `PATH`'s. @internal */
export const systemPerls: ReadonlyArray<string> = ["/usr/bin/perl", "/bin/perl", "/usr/local/bin/perl"]

/** The `perl` a box runs: the system's own ({@link systemPerls}), else the first on the host's `PATH`. */
const findPerl = (): string | undefined =>
  systemPerls.find(Runnable.isExecutableFile) ?? Runnable.onPath(perl, process.env.PATH)

/**
 * The interpreter that runs {@link idmapScript}, found once: the system's own `perl` ({@link systemPerls}), else
 * `perl` as `PATH` finds it; in taint mode (`-T`), the script given with `-e`.
 *
 * @internal
 */
export const helper = (): { readonly file: string; readonly args: ReadonlyArray<string> } => {
  interpreter ??= findPerl() ?? perl
  return { file: interpreter, args: ["-C0", "-T", "-e", idmapScript] }
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
        ? `${perl} could not be run (${code(probe.error)})`
        : probe.status === 0
        ? true
        : `the filesystem of ${dir} takes no idmapped mount (${probe.stderr.trim() || `exit ${probe.status}`})`
      idmappable.set(device, known)
    }
    if (known !== true) return known
  }
  return undefined
}

/** A path a box needs that is not lent to it: what of its closed ancestor it is shown (read-only). @internal */
export interface Exposure {
  /** The path (a directory, or a file) bound read-only at its own path in the box. */
  readonly path: string
  /** The outermost ancestor other users may not search: a tmpfs over it in the box holds only the exposed paths. */
  readonly closed: string
}

/** A box's mounts by its helper, shortest path first: its lent directories and what is exposed to it. @internal */
export const helperEntries = (
  lent: ReadonlyArray<string>,
  exposed: ReadonlyArray<Exposure>
): ReadonlyArray<readonly [kind: "lend" | "expose", path: string, closed: string]> =>
  [
    ...lent.map((dir) => ["lend", dir, closedAbove(dir) ?? "-"] as const),
    ...exposed.map(({ closed, path }) => ["expose", path, closed] as const)
  ].sort((a, b) => a[1].length - b[1].length)

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
    return KernelFiles.readText(`/proc/${pid}/task/${pid}/children`).split(" ").filter((each) => each !== "")
      .map(Number)
  } catch {
    return []
  }
}

const cmdline = (pid: number): string | undefined => {
  try {
    return KernelFiles.readText(`/proc/${pid}/cmdline`)
  } catch {
    return undefined
  }
}

/** The name every stage's shell runs under (its `$0`): `sh -c <stage> tether-box …`. @internal */
export const stageName = "tether-box"

/**
 * The CLI of a box, by the pid of its namespace's first process, once it has been started: its child that is not
 * one of the box's own (a stage's shell, or a fork of one that has not exec'd yet: `sh -c <stage> tether-box …`;
 * the helper). From `env` on, the pid is the CLI's (`env` execs `setsid`, which execs the CLI).
 *
 * @internal
 */
export const cliOf = (init: number): number | undefined => {
  if (cmdline(init) === undefined) return undefined
  return children(init).find((child) => {
    const command = cmdline(child)
    if (command === undefined || command === "") return false
    const argv = command.split("\0")
    return !(argv[1] === "-c" && argv[3] === stageName) && !argv.includes(idmapScript)
  })
}

/**
 * The programs a box runs as the host's root (and `env` and `setsid` as its own; its helper is {@link helper}), by
 * absolute path: found once on the host's own `PATH`, never on the session's (whose directories a session may have
 * written).
 *
 * @internal
 */
export interface Tools {
  readonly unshare: string
  readonly setpriv: string
  readonly env: string
  readonly setsid: string
}

let foundTools: Tools | undefined

/** {@link Tools}, found on the host's `PATH` (a name not found stays a name: the probe said it runs). @internal */
export const tools = (): Tools => {
  if (foundTools === undefined) {
    const find = (name: string) => Runnable.onPath(name, process.env.PATH) ?? name
    foundTools = {
      unshare: find("unshare"),
      setpriv: find("setpriv"),
      env: find("env"),
      setsid: find("setsid")
    }
  }
  return foundTools
}

/** A word for `sh`: single-quoted. */
const quoted = (word: string): string => `'${word.replaceAll("'", `'\\''`)}'`

/**
 * What the launcher execs once it is placed in its cgroups: a PID namespace and a mount namespace, made by the
 * host's root (the mount namespace is the initial user namespace's: what is mounted in it is copied locked into the
 * box's, see {@link idmapScript}), and stage 1 in them. No `--fork`: stage 1 forks the namespace's first process
 * itself, and reports how it ended (`unshare --fork` of util-linux 2.38 turns a child's SIGKILL into `exit 1`).
 *
 * @internal
 */
export const unshareArgs: ReadonlyArray<string> = ["unshare", "--pid", "--mount", "--propagation", "private", "--"]

/**
 * The namespaces the helper unshares once a box's mounts are made ({@link idmapScript}), as `unshare` makes them:
 * what the probe asks of the kernel in a PID and a mount namespace.
 *
 * @internal
 */
export const userUnshareArgs: ReadonlyArray<string> = [
  "unshare",
  "--user",
  "--mount",
  "--propagation",
  "private",
  "--cgroup",
  "--keep-caps",
  "--"
]

/**
 * Stage 1 (`sh -c stage1 tether-box <first…>`), the process the host spawned, in the host's PID namespace and the
 * new mount namespace: starts `first…` (the helper, {@link idmapScript}, which sets itself a parent-death signal:
 * stage 1 killed, the namespace dies) as the first process of the new PID namespace (still the host's root), with
 * its stdio and descriptor 3; closes its own (the host sees the CLI's stdout end when the CLI closes it), waits for
 * it, and ends as it ended: its exit code, or the same signal (so an exit code above 128 reads as a signal). Started
 * in the background (so that stage 1 can close its stdio; a shell ignores SIGINT and SIGQUIT in background commands:
 * stage 3 gives the CLI their defaults back). Stage 1 outlives SIGTERM/SIGINT/SIGHUP while the CLI runs (a handler:
 * teardown signals the CLI itself).
 *
 * @internal
 */
export const stage1 = `trap : TERM INT HUP
exec 7<&0 8>&1 9>&2
"$@" 0<&7 1>&8 2>&9 7<&- 8<&- 9<&- &
c=$!
exec 3<&- 7<&- 8>&- 9>&- </dev/null >/dev/null 2>&1
while :; do
  wait "$c"
  r=$?
  kill -0 "$c" 2>/dev/null || break
done
trap - TERM INT HUP
[ "$r" -gt 128 ] && kill -$((r - 128)) $$
exit "$r"`

/**
 * Stage 3, the box's root and its PID 1 (exec'd by the helper, {@link idmapScript}): starts the CLI in a session of its
 * own, in its directory as mounted for it, without the variables the shells added (as the launcher does), with its
 * stdio (closing its own), and waits for it, reaping the orphans re-parented to it meanwhile. Its exit (the CLI's code,
 * or 128 + its signal) ends the namespace. The CLI is not PID 1: the kernel ignores a signal to a namespace's PID 1
 * that it has no handler for, SIGTERM included, and teardown's SIGTERM must end the CLI as anywhere else.
 *
 * @internal
 */
export const stage3 = (tools: Tools): string =>
  `d=$(pwd -P 2>/dev/null) && [ -n "$d" ] && { cd "$d" 2>/dev/null || :; }
unset d $TETHER_LAUNCHER_UNSET TETHER_LAUNCHER_UNSET
exec 7<&0 8>&1 9>&2
${quoted(tools.env)} --default-signal=INT,QUIT ${quoted(tools.setsid)} -- "$@" 0<&7 1>&8 2>&9 7<&- 8<&- 9<&- &
c=$!
exec 7<&- 8>&- 9>&- </dev/null >/dev/null 2>&1
wait "$c"`

/** What a box is made of before its spawn (see `transport.ts`'s `makeBox`). @internal */
export interface BoxPlan {
  /** The private `/tmp` directory. */
  readonly tmp: string
  /** The entries of `/tmp` it keeps at their paths ({@link keepUnderTmp}). */
  readonly keep: ReadonlyArray<string>
  /** Its directories lent to it (idmapped). */
  readonly lent: ReadonlyArray<string>
  /** What of closed directories it is shown, read-only (its CLI's installation). */
  readonly exposed: ReadonlyArray<Exposure>
  /** Its uid range's root outside. */
  readonly base: number
}

/** The argv that runs `file args` in a box (after the launcher, which keeps descriptor 3 open). @internal */
export const command = (
  box: BoxPlan,
  file: string,
  args: ReadonlyArray<string>,
  prefix: ReadonlyArray<string> = []
): ReadonlyArray<string> => {
  const found = tools()
  return [
    ...prefix,
    found.unshare,
    ...unshareArgs.slice(1),
    "/bin/sh",
    "-c",
    stage1,
    stageName,
    helper().file,
    ...helper().args,
    "box",
    String(box.base),
    box.tmp,
    String(box.keep.length),
    ...box.keep,
    ...helperEntries(box.lent, box.exposed).flat(),
    "--",
    "/bin/sh",
    "-c",
    stage3(found),
    stageName,
    file,
    ...args
  ]
}

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
 * uid without `newuidmap`), and `unshare` that makes every namespace as a box nests them (probed with `true`),
 * `setpriv`, `setsid`, `perl` and `env --default-signal`, on x86-64 or arm64 (the helper's system calls).
 *
 * @internal
 */
export const probe = (): true | string => {
  if (process.platform !== "linux") return "isolation between sessions needs Linux namespaces"
  if (process.getuid?.() !== 0) return nonRoot
  if (helperCalls === undefined) return `isolation between sessions is built for x86-64 and arm64, not ${process.arch}`
  const key = probeKey()
  if (key !== undefined && readProbed() === key) return true
  // One shell for every check, each failure its own exit code (a spawn each cost a cold host about 5 ms apiece). As
  // a box is made: a PID and a mount namespace, then in them a user namespace with a mount and a cgroup one.
  const checks = `p=$1
shift
command -v unshare >/dev/null || exit 9
unshare --pid --mount --fork -- "$@" true || exit 10
command -v setpriv >/dev/null || exit 11
command -v setsid >/dev/null || exit 13
"$p" -e "" || exit 14
env --default-signal=INT,QUIT true || exit 15`
  const ran = NodeChildProcess.spawnSync("/bin/sh", ["-c", checks, "tether-probe", helper().file, ...userUnshareArgs], {
    stdio: "ignore",
    timeout: 5_000
  })
  if (ran.error !== undefined) return `/bin/sh could not be run (${code(ran.error)})`
  switch (ran.status) {
    case 0:
      break
    case 9:
      return "unshare (util-linux) is missing"
    case 10:
      return "unshare --pid --mount, then --user --mount --cgroup in them, failed: the kernel refuses these namespaces"
    case 11:
    case 13:
      return `${ran.status === 11 ? "setpriv" : "setsid"} (util-linux) is missing`
    case 14:
      return `${perl} is missing (the host's helper that mounts a box's directories for its uid)`
    case 15:
      return "env --default-signal (GNU coreutils 8.31+) is missing"
    default:
      return `the checks of what a box needs ended ${ran.status === null ? `by ${ran.signal}` : `with ${ran.status}`}`
  }
  if (key !== undefined) writeProbed(key)
  return true
}

/**
 * Where a host records that the checks of {@link probe} passed, for the next host on this machine (root's, under
 * `/run`: gone at the next boot): what they passed with, {@link probeKey}.
 *
 * @internal
 */
export const probedFile = "/run/tether/probed"

/**
 * What the checks' outcome depends on, so that a record of it stands for them: the boot (the kernel and what it
 * allows), the architecture, and each program a box runs as the host's `PATH` finds it now (its path, inode, size and
 * change time: another program, or the same one replaced, is checked again). Undefined when one is not found: the
 * checks then run, and say which.
 *
 * @internal
 */
export const probeKey = (): string | undefined => {
  try {
    const boot = Fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
    const programs = ["unshare", "setpriv", "setsid", "env"].map((name) => Runnable.onPath(name, process.env.PATH))
    const files = [...programs, findPerl(), "/bin/sh"]
    if (files.some((file) => file === undefined)) return undefined
    return [
      boot,
      process.arch,
      ...files.map((file) => {
        const stat = Fs.statSync(file!)
        return `${file} ${stat.ino} ${stat.size} ${stat.ctimeMs}`
      })
    ].join("\n")
  } catch {
    return undefined
  }
}

const readProbed = (): string | undefined => {
  try {
    const stat = Fs.lstatSync(probedFile)
    // Root's own file only: a record another user could have written says nothing.
    if (!stat.isFile() || stat.uid !== 0 || (stat.mode & 0o022) !== 0) return undefined
    return Fs.readFileSync(probedFile, "utf8")
  } catch {
    return undefined
  }
}

const writeProbed = (key: string): void => {
  try {
    Fs.mkdirSync(Path.dirname(probedFile), { recursive: true, mode: 0o755 })
    const temporary = `${probedFile}.${process.pid}`
    Fs.writeFileSync(temporary, key, { mode: 0o644 })
    Fs.renameSync(temporary, probedFile)
  } catch {
    // Not recorded: the next host checks again.
  }
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
 * The launcher of a box: the cgroup launcher's, but descriptor 3 stays open for stage 3's `mapped`.
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

/** What {@link directoriesOf} finds. @internal */
export interface Directories {
  readonly lent: ReadonlyArray<string>
  readonly kept: ReadonlyArray<string>
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
): Directories => {
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
 * The paths the kernel looks up to reach `path` that a box's uid may be refused: each symbolic link met on the way
 * (at its own path, whose directories are real ones) and the file it ends at (its real path), undefined when it
 * cannot be reached at all (the spawn says why).
 *
 * @internal
 */
export const walk = (path: string): ReadonlyArray<string> | undefined => {
  const met: Array<string> = []
  let pending = Path.resolve(path).split("/").filter((name) => name !== "")
  let at = "/"
  let links = 0
  while (pending.length > 0) {
    const [name, ...rest] = pending
    pending = rest
    if (name === ".") continue
    if (name === "..") {
      at = Path.dirname(at)
      continue
    }
    const next = Path.join(at, name!)
    try {
      if (!Fs.lstatSync(next).isSymbolicLink()) {
        at = next
        continue
      }
      // As the kernel does (40 links at most): the link's target in its place, from / when it is absolute.
      if (++links > 40) return undefined
      met.push(next)
      const target = Fs.readlinkSync(next)
      if (Path.isAbsolute(target)) at = "/"
      pending = [...target.split("/").filter((each) => each !== ""), ...pending]
    } catch {
      return undefined
    }
  }
  return [...met, at]
}

/**
 * What a box must be shown for its uid to reach `path` (whose directories are real ones, see {@link walk}):
 * undefined when every directory above it may be searched by other users; else the entry just below the innermost
 * one that may not (the topmost directory holding `path` there, or `path` itself), and the outermost one, over which
 * the box's tmpfs holds only the exposed paths.
 *
 * @internal
 */
export const exposureOf = (path: string): Exposure | undefined => {
  let inner: string | undefined
  let outer: string | undefined
  for (let each = Path.dirname(path); each !== "/"; each = Path.dirname(each)) {
    try {
      if ((Fs.statSync(each).mode & 0o001) !== 0) continue
    } catch {
      return undefined
    }
    inner ??= each
    outer = each
  }
  if (inner === undefined || outer === undefined) return undefined
  return { path: Path.join(inner, path.slice(inner.length + 1).split("/")[0]!), closed: outer }
}

const headerOf = (file: string): Runnable.Header | undefined => {
  try {
    const fd = Fs.openSync(file, "r")
    try {
      const head = Buffer.alloc(256)
      return Runnable.classify(
        head.subarray(0, Fs.readSync(fd, head, 0, head.length, 0)),
        process.platform,
        process.arch
      )
    } finally {
      Fs.closeSync(fd)
    }
  } catch {
    return undefined
  }
}

/**
 * How a session's uid reaches `file`, its CLI (it owns nothing of the host's: every directory on the way needs search
 * permission for others, and the file execute permission for others, and read for a script): what the box must be
 * shown of the closed directories on the way ({@link exposureOf}: the executable's installation, read-only) — for
 * `file`, each link on the way to it, and its interpreter when it is a script (`#!`; the program `env` runs, found on
 * the CLI's `PATH` as `env` finds it; four levels at most, as the kernel) — or why it cannot: the file, or its
 * interpreter, that other users may not execute (or read, a script). What is in a lent directory is reached through
 * its mount, as its owner.
 *
 * @internal
 */
export const reach = (
  file: string,
  pathVariable: string | undefined,
  lent: ReadonlyArray<string> = []
): { readonly exposed: ReadonlyArray<Exposure> } | { readonly problem: string } => {
  const exposed: Array<Exposure> = []
  const inLent = (path: string) => lent.some((dir) => path === dir || path.startsWith(dir + "/"))
  const visit = (file: string, depth: number): string | undefined => {
    const paths = walk(file)
    if (paths === undefined) return undefined
    for (const path of paths) {
      const exposure = inLent(path) ? undefined : exposureOf(path)
      if (exposure !== undefined && !inLent(exposure.path) && !exposed.some((each) => each.path === exposure.path)) {
        exposed.push(exposure)
      }
    }
    const real = paths[paths.length - 1]!
    let mode: number
    try {
      mode = Fs.statSync(real).mode
    } catch {
      return undefined
    }
    const shown = (mode & 0o777).toString(8)
    if (inLent(real)) {
      if ((mode & 0o111) === 0) return `${file} is not executable (mode ${shown})`
    } else if ((mode & 0o001) === 0) {
      return `${file} is not executable by other users (mode ${shown})`
    }
    const header = headerOf(real)
    if (header?._tag !== "Script") return undefined
    if (!inLent(real) && (mode & 0o004) === 0) return `${file} is a script other users may not read (mode ${shown})`
    if (depth >= 3) return undefined
    const interpreter = visit(header.interpreter, depth + 1)
    if (interpreter !== undefined || Path.basename(header.interpreter) !== "env" || header.argument === undefined) {
      return interpreter
    }
    const program = header.argument.split(/[ \t]+/).find((word) => !word.startsWith("-") && !word.includes("="))
    const found = program === undefined
      ? undefined
      : program.startsWith("/")
      ? program
      : program.includes("/")
      ? undefined
      : Runnable.onPath(program, pathVariable)
    return found === undefined ? undefined : visit(found, depth + 1)
  }
  const problem = visit(file, 0)
  return problem === undefined ? { exposed } : { problem }
}
