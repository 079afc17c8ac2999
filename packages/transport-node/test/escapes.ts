/**
 * The escapes: shell command lines that leave work running outside a session the way a tool command can (the list
 * of issue 16, plus the shapes the teardown suite already had). Each escaped process appends `<name> <pid>` to a
 * report file, so that a test finds it by pid and start time — never by a marker in its environment, which most
 * of them clear — and checks from /proc that teardown left nothing.
 */
import { Data, Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cgroup from "../src/internal/cgroup.ts"
import { waitUntil } from "./utils.ts"

/** Where an escape is started: by a shell that leads a session of its own (the Bash tool), or in the CLI's. */
export type Where = "tool" | "cli"

export interface Escape {
  readonly name: string
  /** How the escape table shows it. */
  readonly shape: string
  readonly where: Where
  /** The command line; `report` is a path without quotes or spaces. */
  readonly command: (report: string) => string
  /** It clears its environment, or overwrites it (a long process title): the marker is gone. */
  readonly clearsEnvironment: boolean
  /** It leaves the session of the shell that started it (`setsid`). */
  readonly leavesSession: boolean
  /** Its parent exits at once (`setsid -f`, a double fork, `fork and exit`): it is re-parented to PID 1. */
  readonly orphaned: boolean
  /**
   * It moves itself out of its cgroup (root can): to the root cgroup, or to a sibling it makes in its layer's
   * (which teardown looks in).
   */
  readonly leavesCgroup?: "root" | "sibling" | undefined
}

/**
 * Whether the `process-tree` containment finds an escape with teardown's scan alone: by the marker, unless the
 * escape cleared its environment; while the shell that started it is alive, by its parent link to that shell, or
 * by that shell's session (which a live member leads); always in the CLI's own session.
 */
export const treeFinds = (escape: Escape, options: { readonly toolShellAlive: boolean }): boolean =>
  escape.where === "cli" || !escape.clearsEnvironment ||
  (options.toolShellAlive && (!escape.orphaned || !escape.leavesSession))

/**
 * Whether an escape outlives the session under a containment: nothing does in a PID namespace, nor in a session
 * isolated from the others (its box is a PID namespace whose first process is the CLI, and its tools cannot leave
 * their cgroup); under a cgroup, what left the cgroup and is not found by the process tree's rules either (teardown
 * looks for those too); under the process tree, what its rules do not find.
 */
export const survives = (
  escape: Escape,
  mechanism: "cgroup" | "pid-namespace" | "process-tree",
  options: { readonly toolShellAlive: boolean; readonly isolated?: boolean | undefined }
): boolean =>
  mechanism === "pid-namespace" || options.isolated === true
    ? false
    : mechanism === "cgroup"
    ? escape.leavesCgroup === "root" && !treeFinds(escape, options)
    : !treeFinds(escape, options)

/**
 * Appends `<name> <pid> <pid namespace>` to the report. The pid is read from /proc/self/stat, not `$$`: inside a PID
 * namespace whose /proc is the host's (the pid-namespace containment), that is the host's pid; in an isolated
 * session, whose /proc is its namespace's, it is the namespace's, and the test finds the host's by the namespace.
 */
const reportSelf = (name: string, report: string) =>
  `read -r p x < /proc/self/stat; echo ${name} $p $(readlink /proc/self/ns/pid) >> ${report}`
const perlReport = (name: string, report: string) =>
  `open my $s, "<", "/proc/self/stat"; my ($p) = split / /, <$s>; my $n = readlink("/proc/self/ns/pid"); ` +
  `open my $f, ">>", "${report}"; print $f "${name} $p $n\\n"; close $f;`

// Debian's own python3 when there is one: a pyenv shim first on PATH takes seconds to start on a loaded machine.
const python = Fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3"

const sleeper = (name: string, report: string) => `sh -c '${reportSelf(name, report)}; exec sleep 300'`

/** The cgroup2 mount, where there is one (the nested-cgroup escape needs it). */
const cgroupMount = ((): string | undefined => {
  try {
    const location = Cgroup.locate(
      Fs.readFileSync("/proc/self/mountinfo", "utf8"),
      Fs.readFileSync("/proc/self/cgroup", "utf8")
    )
    return location._tag === "Found" ? location.mount : undefined
  } catch {
    return undefined
  }
})()

/**
 * The name of the cgroup the nested-cgroup escape creates inside its own (the session's under a cgroup; the host's
 * otherwise, where {@link makeReport}'s release removes it): unique to the report.
 */
const nestName = (report: string) => `nest-${Path.basename(Path.dirname(report))}`

/** The name of the cgroup the sibling-cgroup escape makes beside its session's: unique to the report. */
const siblingName = (report: string) => `sibling-${Path.basename(Path.dirname(report))}`

/** Every escape, in the order of the table. */
export const escapes: ReadonlyArray<Escape> = [
  {
    name: "env-i-background",
    shape: "`env -i sleep 300 &`",
    where: "tool",
    command: (report) => `env -i ${sleeper("env-i-background", report)} &`,
    clearsEnvironment: true,
    leavesSession: false,
    orphaned: false
  },
  {
    name: "perl-title",
    shape: "`perl -e '$0=\"x\"x4000; sleep 300' &` (setproctitle over the environment)",
    where: "tool",
    command: (report) => `perl -e '${perlReport("perl-title", report)} $0 = "x" x 4000; sleep 300' &`,
    clearsEnvironment: true,
    leavesSession: false,
    orphaned: false
  },
  {
    name: "python-setsid-exec",
    shape: "python: `os.setsid()` + `execve(sleep, {})` (empty environment)",
    where: "tool",
    command: (report) =>
      `${python} -c 'import os; os.setsid(); p = open("/proc/self/stat").read().split()[0]; ` +
      `f = open("${report}", "a"); f.write("python-setsid-exec %s %s\\n" % (p, os.readlink("/proc/self/ns/pid"))); ` +
      `f.close(); ` +
      `os.execve("/bin/sleep", ["sleep", "300"], {})' &`,
    clearsEnvironment: true,
    leavesSession: true,
    orphaned: false
  },
  {
    name: "env-i-setsid-f",
    shape: "`env -i setsid -f sleep 300`",
    where: "tool",
    command: (report) => `env -i setsid -f ${sleeper("env-i-setsid-f", report)}`,
    clearsEnvironment: true,
    leavesSession: true,
    orphaned: true
  },
  {
    name: "nohup",
    shape: "`nohup sleep 300 >/dev/null 2>&1 &`",
    where: "tool",
    command: (report) => `nohup ${sleeper("nohup", report)} >/dev/null 2>&1 &`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: false
  },
  {
    name: "disown",
    shape: "`sleep 300 & disown`",
    where: "tool",
    command: (report) => `${sleeper("disown", report)} & disown`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: false
  },
  {
    name: "perl-fork",
    shape: "`perl -e 'fork and exit; sleep 300'`",
    where: "tool",
    command: (report) => `perl -e 'fork and exit; ${perlReport("perl-fork", report)} sleep 300'`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: true
  },
  {
    name: "setsid",
    shape: "`setsid sh -c 'sleep 300; :' &` (a session leader, like the Bash tool's shell)",
    where: "tool",
    command: (report) => `setsid sh -c '${reportSelf("setsid", report)}; sleep 300; :' &`,
    clearsEnvironment: false,
    leavesSession: true,
    orphaned: false
  },
  {
    name: "double-fork",
    shape: "`(sleep 300 &) &` (double fork, re-parented)",
    where: "tool",
    command: (report) => `(${sleeper("double-fork", report)} &) &`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: true
  },
  {
    name: "ignores-sigterm",
    shape: "a shell that ignores SIGTERM (`trap '' TERM`)",
    where: "tool",
    command: (report) => `sh -c 'trap "" TERM; ${reportSelf("ignores-sigterm", report)}; while :; do sleep 1; done' &`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: false
  },
  {
    name: "nested-cgroup",
    shape: "`env -i setsid -f` into a cgroup it nests in its own, ignoring SIGTERM",
    where: "tool",
    // Without a cgroup2 mount (or the right to write there) the move fails and this is a plain `env -i setsid -f`.
    command: (report) =>
      `d="${cgroupMount ?? "/nonexistent"}$(sed -n 's/^0:://p' /proc/self/cgroup)/${nestName(report)}/deeper"; ` +
      `mkdir -p "$d"; env -i setsid -f sh -c 'echo 0 > "$1/cgroup.procs"; trap "" TERM; ` +
      `${reportSelf("nested-cgroup", report)}; exec sleep 300' sh "$d"`,
    clearsEnvironment: true,
    leavesSession: true,
    orphaned: true
  },
  {
    name: "root-cgroup",
    shape: "`setsid -f` that moves itself to the root cgroup (root can), ignoring SIGTERM",
    where: "tool",
    command: (report) =>
      `setsid -f sh -c 'echo 0 > ${cgroupMount ?? "/nonexistent"}/cgroup.procs; trap "" TERM; ` +
      `${reportSelf("root-cgroup", report)}; exec sleep 300'`,
    clearsEnvironment: false,
    leavesSession: true,
    orphaned: true,
    leavesCgroup: "root"
  },
  {
    name: "root-cgroup-env-i",
    shape: "`env -i setsid -f` that moves itself to the root cgroup (root can), ignoring SIGTERM",
    where: "tool",
    command: (report) =>
      `env -i setsid -f sh -c 'echo 0 > ${cgroupMount ?? "/nonexistent"}/cgroup.procs; trap "" TERM; ` +
      `${reportSelf("root-cgroup-env-i", report)}; exec sleep 300'`,
    clearsEnvironment: true,
    leavesSession: true,
    orphaned: true,
    leavesCgroup: "root"
  },
  {
    name: "sibling-cgroup",
    shape: "`env -i setsid -f` into a cgroup it makes beside its session's (root can), ignoring SIGTERM",
    where: "tool",
    // Only from a session's cgroup (`…/tether-…/s<n>`): elsewhere (the host's cgroup, under the other containments)
    // it makes nothing and is a plain `env -i setsid -f`.
    command: (report) =>
      `c=$(sed -n 's/^0:://p' /proc/self/cgroup); d=; case "$c" in */tether-*/s*) ` +
      `d="${cgroupMount ?? "/nonexistent"}$(dirname "$c")/${siblingName(report)}"; mkdir -p "$d";; esac; ` +
      `env -i setsid -f sh -c '[ -n "$1" ] && echo 0 > "$1/cgroup.procs"; trap "" TERM; ` +
      `${reportSelf("sibling-cgroup", report)}; exec sleep 300' sh "$d"`,
    clearsEnvironment: true,
    leavesSession: true,
    orphaned: true,
    leavesCgroup: "sibling"
  },
  {
    name: "cli-session-env-i",
    shape: "`env -i sleep 300 &` in the CLI's session, its parent exited",
    where: "cli",
    command: (report) => `env -i ${sleeper("cli-session-env-i", report)} &`,
    clearsEnvironment: true,
    leavesSession: false,
    orphaned: true
  },
  {
    name: "cli-group",
    shape: "a grandchild in the CLI's process group",
    where: "cli",
    command: (report) => `${sleeper("cli-group", report)} &`,
    clearsEnvironment: false,
    leavesSession: false,
    orphaned: false
  }
]

/** The escapes started from `where`, as one command line. */
export const commandFor = (list: ReadonlyArray<Escape>, where: Where, report: string): string | undefined => {
  const lines = list.filter((escape) => escape.where === where).map((escape) => escape.command(report))
  return lines.length === 0 ? undefined : lines.join("\n")
}

/** An escaped process: its name, pid and start time (clock ticks since boot, from /proc). */
export interface Escaped {
  readonly name: string
  readonly pid: number
  readonly start: string
}

const startOf = (pid: number): { readonly start: string; readonly zombie: boolean } | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { start: fields[19], zombie: fields[0] === "Z" || fields[0] === "X" }
  } catch {
    return undefined
  }
}

/** Whether this process (by pid and start time) is still alive: not gone, not a zombie, not a reused pid. */
export const isAlive = (escaped: Escaped): boolean => {
  const now = startOf(escaped.pid)
  return now !== undefined && !now.zombie && now.start === escaped.start
}

/**
 * A fresh report file (in a directory removed by the scope). The release also removes the cgroups the
 * nested-cgroup escape made where no session's teardown removes them (in the host's cgroup, under the process tree
 * and a PID namespace), once their processes are gone (killed a moment before, by the escapes' own finalizer).
 */
export const makeReport: Effect.Effect<string, never, Scope.Scope> = Effect.suspend(() => makeReportIn(Os.tmpdir()))

/**
 * {@link makeReport}, its directory made in `parent`: a session's workspace, for a session in a box (which sees
 * neither the host's /tmp nor, as another uid, a directory it was not lent).
 */
export const makeReportIn = (parent: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(parent, "tether-escapes-"))
      Fs.chmodSync(dir, 0o777)
      return Path.join(dir, "report")
    }),
    (report) =>
      Effect.gen(function*() {
        Fs.rmSync(Path.dirname(report), { recursive: true, force: true })
        if (cgroupMount === undefined) return
        const own = Cgroup.locate(
          Fs.readFileSync("/proc/self/mountinfo", "utf8"),
          Fs.readFileSync("/proc/self/cgroup", "utf8")
        )
        if (own._tag === "Missing") return
        const nest = Path.join(own.own, nestName(report))
        yield* waitUntil("the escape's nested cgroups to be removed", () => Cgroup.removeTree(nest), 2_000).pipe(
          Effect.ignore
        )
      })
  )

const hostPidNamespace = Fs.readlinkSync("/proc/self/ns/pid")

/** The host's pid of a process that saw itself as `pid` in the PID namespace `namespace`, by their NSpid. */
const hostPid = (pid: number, namespace: string | undefined): number | undefined => {
  if (namespace === undefined || namespace === hostPidNamespace) return pid
  for (const name of Fs.readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name)) continue
    try {
      if (Fs.readlinkSync(`/proc/${name}/ns/pid`) !== namespace) continue
      const nspid = /^NSpid:\s+(.*)$/m.exec(Fs.readFileSync(`/proc/${name}/status`, "latin1"))?.[1].split(/\s+/)
      if (nspid?.map(Number).includes(pid)) return Number(name)
    } catch {
      continue
    }
  }
  return undefined
}

const resolved = new Map<string, number>()

const readReport = (report: string): ReadonlyArray<{ readonly name: string; readonly pid: number }> => {
  let text: string
  try {
    text = Fs.readFileSync(report, "utf8")
  } catch {
    return []
  }
  return text.split("\n").filter((line) => line.length > 0).flatMap((line) => {
    const [name, pid, namespace] = line.split(" ")
    // Kept once found (the process may exit later, and its namespace with it), by report: a namespace's inode is
    // reused once it is gone, and the same escapes get the same pids in the next session's.
    const key = `${report} ${line}`
    const host = resolved.get(key) ?? hostPid(Number(pid), namespace)
    if (host !== undefined) resolved.set(key, host)
    return host === undefined ? [] : [{ name, pid: host }]
  })
}

export class EscapesMissing extends Data.TaggedError("EscapesMissing")<{ readonly missing: ReadonlyArray<string> }> {}

/**
 * Waits until every escape of `list` has reported and runs (for `perl-title`, until its title is written), and
 * returns them with their start times. Registers a finalizer that SIGKILLs any of them still alive (by pid and
 * start time), so a test that expects survivors leaves none behind.
 */
export const awaitEscaped = (list: ReadonlyArray<Escape>, report: string, timeoutMillis = 10_000) =>
  Effect.gen(function*() {
    const names = new Set(list.map((escape) => escape.name))
    const ready = () => {
      const seen = readReport(report).filter((entry) => names.has(entry.name))
      return seen.length >= names.size && seen.every((entry) => {
        const now = startOf(entry.pid)
        if (now === undefined || now.zombie) return false
        // The title overwrite is the point of that case: wait until it happened.
        return entry.name !== "perl-title" || Fs.readFileSync(`/proc/${entry.pid}/cmdline`, "latin1").startsWith("xxx")
      })
    }
    yield* waitUntil("every escape to run", ready, timeoutMillis).pipe(
      Effect.catchTag("WaitTimeout", () =>
        Effect.fail(
          new EscapesMissing({
            missing: [...names].filter((name) => !readReport(report).some((entry) => entry.name === name))
          })
        ))
    )
    const escaped: Array<Escaped> = []
    for (const entry of readReport(report)) {
      const now = startOf(entry.pid)
      if (now !== undefined && names.has(entry.name)) escaped.push({ ...entry, start: now.start })
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => killEscaped(escaped)))
    return escaped
  })

/** SIGKILLs those still alive (by pid and start time). */
export const killEscaped = (escaped: ReadonlyArray<Escaped>): void => {
  for (const each of escaped) {
    if (!isAlive(each)) continue
    try {
      process.kill(each.pid, "SIGKILL")
    } catch {
      // Gone since.
    }
  }
}

/** The names of those still alive now, sorted. */
export const survivors = (escaped: ReadonlyArray<Escaped>): ReadonlyArray<string> =>
  escaped.filter(isAlive).map((each) => each.name).sort()

/**
 * Waits until the shell that started the tool escapes is gone, zombie included (its parent reaped it): the
 * outcome under the process tree depends on it. Its pid is the session id of an escape that stayed in its session.
 */
export const awaitToolShellGone = (escaped: ReadonlyArray<Escaped>) =>
  Effect.gen(function*() {
    const stayed = escaped.find((each) => each.name === "env-i-background")
    if (stayed === undefined) return
    const stat = Fs.readFileSync(`/proc/${stayed.pid}/stat`, "latin1")
    const sid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3])
    yield* waitUntil("the tool's shell to be reaped", () => !Fs.existsSync(`/proc/${sid}`))
  })
