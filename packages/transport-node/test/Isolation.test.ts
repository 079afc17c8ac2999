/**
 * Isolation between sessions (Linux, as root): two sessions of one host, each the fake CLI; A's tool (run the way
 * the Bash tool runs one) attacks B — sees B's CLI and the host in /proc, reads B's CLI's environment and memory, B's
 * config directory, signals B's CLI, moves it into A's cgroup — first as it finds itself, then after trying to
 * unmount its /proc and /tmp (`umount`, `umount -l`: the box's mounts are locked) and to mount a new proc. Every
 * attack must fail in the default mode (`"auto"`: a box each, as root), and succeed with `isolation: false` (so the
 * suite can fail). What each attack did in each mode is docs/teardown.md's isolation table (results.ts: recorded with
 * TETHER_RECORD_RESULTS=1). Also: each session's uid range outside is its own, its /tmp is private, two sessions
 * sharing a workspace both write it (each through its own idmapped mount) and what they leave is the host's user's; a
 * config directory under a directory only the host may enter (a dormant store's root) is reached, its siblings
 * hidden; a CLI installed under a closed directory (its interpreter under another) is boxed, shown its installation
 * only, read-only; the box's start is bounded and ends with its stage 1; a lent directory's mode is given back by its
 * last holder; the uid ranges' allocator never hands one range to two holders. Real processes.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Transport } from "@tether/core"
import { FakeClaude } from "@tether/testing"
import { NodeTransport } from "@tether/transport-node"
import { Duration, Effect, type Layer, Option, Redacted, Stream } from "effect"
import { createHash, randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cgroup from "../src/internal/cgroup.ts"
import * as Isolation from "../src/internal/isolation.ts"
import * as Results from "./results.ts"
import { fakeClaudePath, isAlive, killOnExit, linesUntilReady, newMark, stat, tempDir, waitUntil } from "./utils.ts"

const isRoot = process.getuid?.() === 0 && process.platform === "linux"
const termGrace = { termGrace: Duration.millis(200) }

const layer = (isolation: boolean = true) =>
  NodeTransport.layer({ executables: { claude: fakeClaudePath }, watchdog: false, isolation })

/** The default (`"auto"`: a box for each session, as root here), or off. */
const defaultOrOff = (boxed: boolean) =>
  NodeTransport.layer({
    executables: { claude: fakeClaudePath },
    watchdog: false,
    ...(boxed ? {} : { isolation: false })
  })

/** The fake CLI in `cwd`, its tool `tool` run at start, its config directory `config`, its key in its environment. */
const fakeIn = (mark: string, cwd: string, config: string, key: string, tool?: string): Transport.LaunchSpec => ({
  program: "claude",
  args: ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
  cwd: Option.some(cwd),
  env: {
    mode: "inherit",
    set: {
      ...FakeClaude.env({ tool }),
      TEST_MARK: mark,
      CLAUDE_CONFIG_DIR: config,
      ANTHROPIC_API_KEY: Redacted.make(key)
    },
    unset: []
  }
})

/** A process's uid outside (the real uid of /proc/<pid>/status). */
const uidOf = (pid: number): number => {
  const status = Fs.readFileSync(`/proc/${pid}/status`, "latin1")
  return Number(/^Uid:\s+([0-9]+)/m.exec(status)![1])
}

const cgroupOf = (pid: number): string =>
  Fs.readFileSync(`/proc/${pid}/cgroup`, "latin1").split("\n").find((line) => line.startsWith("0::"))!.slice(3)

const cgroupMount = (() => {
  const location = Cgroup.locate(
    Fs.readFileSync("/proc/self/mountinfo", "utf8"),
    Fs.readFileSync("/proc/self/cgroup", "utf8")
  )
  return location._tag === "Found" ? location.mount : "/sys/fs/cgroup"
})()

/**
 * A's tool: each attack once as the tool finds itself (`1`) and once after trying to unmount its /proc (`umount`,
 * `umount -l`) and /tmp where it is in a mount namespace of its own (`2`; then it tries to mount a new `proc` over
 * /proc too), each writing `<attack><phase> ok|refused` to `results` (`unmount1` and `mountproc1`: whether those
 * worked, `skipped` outside a box: they would unmount the host's).
 */
const attacks = (options: {
  readonly results: string
  readonly pid: number
  readonly hostPid: number
  readonly configFile: string
  readonly cgroupProcs: string
  readonly hostMountNamespace: string
}) => {
  const { pid, results } = options
  const attempt = (name: string, command: string) =>
    `if ${command} >/dev/null 2>&1; then echo "${name}$n ok"; else echo "${name}$n refused"; fi >> ${results}`
  const round = [
    attempt("visible", `[ -e /proc/${pid} ]`),
    attempt("host", `[ -e /proc/${options.hostPid} ]`),
    attempt("environ", `tr '\\0' '\\n' < /proc/${pid}/environ | grep -q '^ANTHROPIC_API_KEY='`),
    attempt(
      "mem",
      `a=$(head -1 /proc/${pid}/maps | cut -d- -f1) && [ -n "$a" ] && ` +
        `dd if=/proc/${pid}/mem bs=4096 count=1 skip=$((0x$a / 4096)) status=none | od | grep -q .`
    ),
    attempt("config", `grep -q secret ${options.configFile}`),
    attempt("cgroup", `sh -c 'echo ${pid} > ${options.cgroupProcs}'`),
    attempt("signal", `kill -STOP ${pid}`),
    `kill -CONT ${pid} 2>/dev/null`
  ].join("\n")
  return [
    `n=1`,
    round,
    // Only in a mount namespace of its own: unmounting the host's /proc would break the machine. Any one that works
    // counts (the host's /proc is under the box's, the host's /tmp under the private one).
    `if [ "$(readlink /proc/self/ns/mnt)" != "${options.hostMountNamespace}" ]; then`,
    `  u=refused`,
    `  for each in "umount /proc" "umount -l /proc" "umount /tmp" "umount -l /tmp"; do $each 2>/dev/null && u=ok; done`,
    `  echo "unmount1 $u" >> ${results}`,
    `else`,
    `  echo "unmount1 skipped" >> ${results}`,
    `fi`,
    `n=2`,
    round,
    // A new proc over the box's (its own PID namespace's, were it allowed: nothing of the host either).
    `if [ "$(readlink /proc/self/ns/mnt)" != "${options.hostMountNamespace}" ]; then`,
    `  if mount -t proc proc /proc 2>/dev/null; then echo "mountproc1 ok"; else echo "mountproc1 refused"; fi`,
    `else`,
    `  echo "mountproc1 skipped"`,
    `fi >> ${results}`,
    `echo done >> ${results}`
  ].join("\n")
}

const readResults = (file: string): Map<string, string> => {
  const out = new Map<string, string>()
  for (const line of Fs.readFileSync(file, "utf8").split("\n")) {
    const [name, outcome] = line.split(" ")
    if (outcome !== undefined) out.set(name, outcome)
  }
  return out
}

/** What each attack did, per mode, for docs/teardown.md's isolation table. */
const observed: { -readonly [mode in "isolated" | "not isolated"]?: Record<string, string> } = {}

/** The name a lent directory's records begin with (as isolation.ts names them). */
const lentKey = (dir: string): string => createHash("sha256").update(dir).digest("hex").slice(0, 32)

/** A copy of sh only its owner may execute (mode 0700), in a directory every user may enter. */
const privateDir = isRoot ? Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-iso-private-")) : ""
const privateSh = Path.join(privateDir, "sh")
if (isRoot) {
  Fs.chmodSync(privateDir, 0o755)
  Fs.copyFileSync("/bin/sh", privateSh)
  Fs.chmodSync(privateSh, 0o700)
}

describe.runIf(isRoot)("isolation between sessions", { timeout: 20_000 }, () => {
  afterAll(() => {
    Fs.rmSync(privateDir, { recursive: true, force: true })
    if (observed.isolated !== undefined && observed["not isolated"] !== undefined) {
      Results.write("isolation", { suite: "packages/transport-node/test/Isolation.test.ts", modes: observed })
    }
  })

  it.live("the capabilities say it is on when asked for, as root, \"auto\" by default, off when turned off", () =>
    Effect.gen(function*() {
      const capabilitiesOf = (layer: Layer.Layer<Transport.Transport>) =>
        Effect.provide(Effect.map(Transport.Transport, (transport) => transport.capabilities), layer)
      const on = { capabilities: yield* capabilitiesOf(layer(true)) }
      assert.isTrue(on.capabilities.isolatesSessions)
      assert.isTrue(on.capabilities.notes.some((note) => note.includes("uid range of its own")))
      const byDefault = {
        capabilities: yield* capabilitiesOf(
          NodeTransport.layer({ executables: { claude: fakeClaudePath }, watchdog: false })
        )
      }
      // Not every session is guaranteed a box under "auto"; the notes say it is the default and why not.
      assert.isFalse(byDefault.capabilities.isolatesSessions)
      assert.isTrue(byDefault.capabilities.notes.some((note) => note.includes(`isolation: "auto" (the default)`)))
      const off = { capabilities: yield* capabilitiesOf(layer(false)) }
      assert.isFalse(off.capabilities.isolatesSessions)
      assert.isTrue(off.capabilities.notes.some((note) => note.includes("isolation between sessions is off")))
    }).pipe(Effect.scoped))

  for (const isolation of [true, false] as const) {
    const label = isolation === false ? "isolation: false" : "the default, a box each"
    it.live(`A's tool attacks B (${label}): environment, memory, config files, a signal, a cgroup move`, () =>
      Effect.gen(function*() {
        const mark = newMark()
        yield* killOnExit(mark)
        const transport = yield* Transport.Transport
        const workA = yield* tempDir("tether-iso-a-")
        const workB = yield* tempDir("tether-iso-b-")
        const configA = yield* tempDir("tether-iso-config-a-")
        const configB = yield* tempDir("tether-iso-config-b-")
        const configFile = Path.join(configB, "transcript.jsonl")
        Fs.writeFileSync(configFile, "a secret prompt\n", { mode: 0o644 })
        const b = yield* transport.open(fakeIn(mark, workB, configB, `sk-ant-b-${randomUUID()}`), termGrace)
        const pidB = Option.getOrThrow(b.pid)
        yield* waitUntil("B's CLI to run", () => isFake(pidB))
        assert.strictEqual(Isolation.isSessionUid(uidOf(pidB)), isolation, "B is boxed by default")
        const cgroupB = cgroupOf(pidB)
        const results = Path.join(workA, "results")
        // A's tool, started by A's CLI as the Bash tool starts one: its script is in A's workspace, where the
        // host wrote it before A started.
        const hostMount = Fs.readlinkSync("/proc/self/ns/mnt")
        const aCgroupProcs = "$A_CGROUP_PROCS"
        const script = attacks({
          results,
          pid: pidB,
          hostPid: process.pid,
          configFile,
          cgroupProcs: aCgroupProcs,
          hostMountNamespace: hostMount
        })
        Fs.writeFileSync(Path.join(workA, "attack.sh"), script)
        // A's own cgroup, as the host names it: the tool cannot see it inside its cgroup namespace (`0::/`).
        const tool = `A_CGROUP_PROCS=${cgroupMount}$(cat ${Path.join(workA, "cgroup")})/cgroup.procs ` +
          `bash ${Path.join(workA, "attack.sh")}`
        // The tool waits for the host to name A's cgroup (known once A runs).
        const waiting = `while [ ! -s ${Path.join(workA, "cgroup")} ]; do sleep 0.02; done; ${tool}`
        const a = yield* transport.open(
          fakeIn(mark, workA, configA, `sk-ant-a-${randomUUID()}`, waiting),
          termGrace
        )
        const pidA = Option.getOrThrow(a.pid)
        Fs.writeFileSync(Path.join(workA, "cgroup"), cgroupOf(pidA))
        yield* waitUntil("A's tool to be done", () => {
          try {
            return Fs.readFileSync(results, "utf8").includes("done")
          } catch {
            return false
          }
        }, 10_000)
        const outcome = readResults(results)
        observed[isolation ? "isolated" : "not isolated"] = Object.fromEntries(outcome)
        const bAlive = isFake(pidB) && stateOf(pidB) !== "T"
        const bCgroup = cgroupOf(pidB)
        if (isolation === false) {
          // Not isolated: the attacks work (as the suite's own control), B is stopped and in A's cgroup.
          for (const name of ["visible1", "host1", "environ1", "mem1", "config1", "cgroup1", "signal1"]) {
            assert.strictEqual(outcome.get(name), "ok", `${name}: ${JSON.stringify([...outcome])}`)
          }
          assert.notStrictEqual(bCgroup, cgroupB, "B's CLI was moved into A's cgroup")
          return
        }
        // Its PID namespace hides B and the host; its root can neither unmount its /proc (nor /tmp), whose mounts
        // its user namespace copied locked, nor mount a new proc: the host's /proc under the box's stays hidden.
        // Every read, the signal and the move are refused: another uid, no capability outside its namespaces.
        for (const [name, result] of outcome) {
          assert.strictEqual(result, "refused", `${name}: ${JSON.stringify([...outcome])}`)
        }
        assert.strictEqual(outcome.size, 16, JSON.stringify([...outcome]))
        assert.isTrue(bAlive, "B's CLI runs, not stopped")
        assert.strictEqual(bCgroup, cgroupB, "B's CLI is still in its own cgroup")
        // B still answers.
        yield* b.write(JSON.stringify({
          type: "control_request",
          request_id: "req_1",
          request: { subtype: "initialize", hooks: {} }
        }))
        const first = yield* Stream.runHead(b.stdout).pipe(Effect.timeout("5 seconds"))
        assert.isTrue(Option.isSome(first))
      }).pipe(Effect.scoped, Effect.provide(defaultOrOff(isolation))))
  }

  it.live("each session: a uid range of its own, a PID namespace, a private /tmp; both write the workspace they share", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      const work = yield* tempDir("tether-iso-work-")
      Fs.writeFileSync(Path.join(work, "file.txt"), "before\n")
      const name = `tether-iso-${randomUUID()}`
      const openShell = (script: string) =>
        Effect.gen(function*() {
          const connection = yield* transport.open({
            program: "sh",
            args: ["-c", script],
            cwd: Option.some(work),
            env: { mode: "clean", set: {}, unset: [] }
          }, termGrace)
          const lines = yield* linesUntilReady(connection)
          return { pid: Option.getOrThrow(connection.pid), lines }
        })
      const [a, b] = yield* Effect.scoped(Effect.gen(function*() {
        // A edits the workspace, and once B has started (and written it too) writes it again: a workspace two
        // sessions share is writable by both for as long as they run, each as a uid of its own.
        const a = yield* openShell(
          `id -u; echo "$TMPDIR"; echo a > /tmp/${name}; ls /proc | grep -c '^[0-9]'; ` +
            `sed -i s/before/after/ file.txt && echo edited > new.txt && cat file.txt; echo ready; ` +
            `while [ ! -e b.txt ]; do sleep 0.02; done; echo again >> new.txt && mkdir -p dir && echo a > dir/a.txt; ` +
            // Written whole, then renamed: the host reads it once it exists.
            `echo $? > a-after-b.part; mv a-after-b.part a-after-b; exec sleep 30`
        )
        const b = yield* openShell(
          `id -u; echo "$TMPDIR"; cat /tmp/${name} 2>/dev/null || echo absent; echo b >> new.txt && echo b > b.txt; ` +
            `echo ready; exec sleep 30`
        )
        // Outside: distinct ranges, both session uids, neither the host's.
        const uids = [uidOf(a.pid), uidOf(b.pid)]
        assert.notStrictEqual(uids[0], uids[1])
        for (const uid of uids) assert.isTrue(Isolation.isSessionUid(uid), `uid ${uid}`)
        assert.notStrictEqual(Fs.readlinkSync(`/proc/${a.pid}/ns/pid`), Fs.readlinkSync("/proc/self/ns/pid"))
        assert.notStrictEqual(Fs.readlinkSync(`/proc/${a.pid}/ns/pid`), Fs.readlinkSync(`/proc/${b.pid}/ns/pid`))
        yield* waitUntil("A's write after B started", () => Fs.existsSync(Path.join(work, "a-after-b")), 5_000)
        assert.strictEqual(Fs.readFileSync(Path.join(work, "a-after-b"), "utf8"), "0\n", "A still writes it")
        assert.strictEqual(Fs.statSync(work).mode & 0o777, 0o700, "while lent, closed to other uids")
        return [a, b]
      }))
      // Inside: root, TMPDIR is /tmp, a few processes of its own.
      assert.strictEqual(a.lines[0], "0")
      assert.strictEqual(a.lines[1], "/tmp")
      assert.isBelow(Number(a.lines[2]), 5, "its /proc shows its own processes only")
      assert.strictEqual(a.lines[3], "after", "the tool edited the workspace's file")
      assert.strictEqual(b.lines[2], "absent", "B does not see A's /tmp")
      assert.isFalse(Fs.existsSync(Path.join(Os.tmpdir(), name)), "A's /tmp is not the host's")
      // Released: what the tools made in the workspace is the host's (written through the idmapped mount: the
      // box's root is the host's user on disk).
      assert.strictEqual(Fs.readFileSync(Path.join(work, "file.txt"), "utf8"), "after\n")
      assert.strictEqual(Fs.readFileSync(Path.join(work, "new.txt"), "utf8"), "edited\nb\nagain\n")
      for (const file of ["", "file.txt", "new.txt", "b.txt", "dir", "dir/a.txt"]) {
        assert.strictEqual(Fs.statSync(Path.join(work, file)).uid, process.getuid!(), file)
        assert.strictEqual(Fs.statSync(Path.join(work, file)).gid, process.getgid!(), file)
      }
      assert.strictEqual(Fs.statSync(work).mode & 0o777, 0o700, "its mode given back (tempDir's 0700)")
    }).pipe(Effect.provide(layer())))

  it.live("a config directory under a directory only its owner may enter (a dormant store's): reached, alone", () =>
    Effect.gen(function*() {
      // As a registry's dormant store keeps its conversations' directories: under a root only the host may enter.
      const store = yield* tempDir("tether-iso-store-")
      Fs.chmodSync(store, 0o700)
      const mine = Path.join(store, "cli", "mine")
      const other = Path.join(store, "cli", "other")
      Fs.mkdirSync(mine, { recursive: true })
      Fs.mkdirSync(other, { recursive: true })
      Fs.writeFileSync(Path.join(other, "transcript.jsonl"), "another conversation's secret\n", { mode: 0o644 })
      Fs.writeFileSync(Path.join(mine, "transcript.jsonl"), "mine\n", { mode: 0o600 })
      const transport = yield* Transport.Transport
      const lines = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* transport.open({
          program: "sh",
          args: [
            "-c",
            `id -u; cat "$CLAUDE_CONFIG_DIR/transcript.jsonl"; echo more >> "$CLAUDE_CONFIG_DIR/transcript.jsonl" && ` +
            `echo wrote; cat ${Path.join(other, "transcript.jsonl")} 2>/dev/null || echo hidden; ` +
            `ls ${store} ${Path.join(store, "cli")} | tr '\n' ' '; echo; echo ready; exec sleep 30`
          ],
          cwd: Option.some(mine),
          env: { mode: "clean", set: { CLAUDE_CONFIG_DIR: mine }, unset: [] }
        }, termGrace)
        assert.isTrue(Isolation.isSessionUid(uidOf(Option.getOrThrow(connection.pid))), "boxed")
        return yield* linesUntilReady(connection)
      }))
      assert.deepStrictEqual(lines.slice(0, 4), ["0", "mine", "wrote", "hidden"], JSON.stringify(lines))
      // The store's root seen from the box holds only the session's own directory's path.
      assert.strictEqual(lines[4]?.trim().split(/\s+/).filter((each) => !each.endsWith(":")).join(" "), "cli mine")
      assert.strictEqual(Fs.readFileSync(Path.join(mine, "transcript.jsonl"), "utf8"), "mine\nmore\n")
      assert.strictEqual(Fs.statSync(store).mode & 0o777, 0o700, "the store's root is never opened")
      assert.strictEqual(Fs.statSync(mine).uid, process.getuid!())
    }).pipe(Effect.scoped, Effect.provide(layer(true))))

  it.live("an executable its uid cannot run (only its owner may execute it): SpawnFailed, saying why", () =>
    Effect.gen(function*() {
      // Its workspace elsewhere: a directory lent to the session is reached through its mount, whatever is above.
      const work = yield* tempDir("tether-iso-work-")
      const spec: Transport.LaunchSpec = {
        program: "claude",
        args: ["-c", "id -u; echo ready; exec sleep 30"],
        cwd: Option.some(work),
        env: { mode: "clean", set: {}, unset: [] }
      }
      const refused = yield* Effect.flip(
        Effect.scoped(Effect.gen(function*() {
          return yield* (yield* Transport.Transport).open(spec, termGrace)
        })).pipe(Effect.provide(
          NodeTransport.layer({ executables: { claude: privateSh }, watchdog: false, isolation: true })
        ))
      )
      assert.strictEqual(refused._tag, "SpawnFailed")
      assert.include((refused as { readonly reason: string }).reason, "is not executable by other users (mode 700)")
    }).pipe(Effect.scoped))

  // Under the host's /tmp (reached through the box's private one, which keeps it); in the host's home when only its
  // owner may enter it (root's /root, where a user's clone is); and in the closed directory the helper's own
  // interpreter is under, when it is (a perl of perlbrew's in /root, on a host without a system perl): the helper,
  // covering it, must need nothing more from it.
  const closedOf = (dir: string) => (Fs.statSync(dir).mode & 0o001) === 0 ? dir : undefined
  const helperHome = isRoot ? Isolation.exposureOf(Fs.realpathSync(Isolation.helper().file))?.closed : undefined
  const bases = [Os.tmpdir(), closedOf(Os.homedir()), helperHome].filter((base, i, all): base is string =>
    base !== undefined && all.indexOf(base) === i
  )
  for (const base of bases) {
    it.live(`a CLI installed under a directory only its owner may enter (in ${base}): boxed, shown its installation only, read-only`, () =>
      Effect.gen(function*() {
        // As a clone in /root (0700) holds its CLI: the installation, a world-writable directory in it, and beside it
        // a file of the closed directory's that the box must not see.
        const closed = yield* tempDir("tether-iso-install-", base)
        Fs.chmodSync(closed, 0o700)
        Fs.writeFileSync(Path.join(closed, "secret.txt"), "the closed directory's secret\n", { mode: 0o644 })
        const install = Path.join(closed, "clone")
        Fs.mkdirSync(Path.join(install, "bin"), { recursive: true, mode: 0o755 })
        Fs.mkdirSync(Path.join(install, "open"), { mode: 0o777 })
        Fs.chmodSync(Path.join(install, "open"), 0o777)
        // Its interpreter (`#!/usr/bin/env`, found on its PATH) under another closed directory: exposed too.
        const tools = yield* tempDir("tether-iso-tools-", base)
        Fs.chmodSync(tools, 0o700)
        Fs.writeFileSync(Path.join(tools, "secret.txt"), "the tools' secret\n", { mode: 0o644 })
        Fs.mkdirSync(Path.join(tools, "bin"), { mode: 0o755 })
        Fs.copyFileSync("/bin/sh", Path.join(tools, "bin", "tether-test-sh"))
        Fs.chmodSync(Path.join(tools, "bin", "tether-test-sh"), 0o755)
        const cli = Path.join(install, "bin", "cli")
        Fs.writeFileSync(
          cli,
          [
            "#!/usr/bin/env tether-test-sh",
            "id -u",
            `cat ${closed}/secret.txt 2>/dev/null || echo hidden`,
            `cat ${tools}/secret.txt 2>/dev/null || echo hidden`,
            `echo $(ls -A ${closed}) / $(ls -A ${tools})`,
            `touch ${install}/open/x 2>/dev/null && echo wrote || echo read-only`,
            `mount -o remount,bind,rw ${install} 2>/dev/null && echo remounted || echo locked`,
            `umount -l ${install} 2>/dev/null || umount -l ${closed} 2>/dev/null && echo unmounted || echo locked`,
            "echo ready",
            "exec sleep 30"
          ].join("\n") + "\n",
          { mode: 0o755 }
        )
        const work = yield* tempDir("tether-iso-work-")
        const lines = yield* Effect.scoped(Effect.gen(function*() {
          const connection = yield* (yield* Transport.Transport).open({
            program: "claude",
            args: [],
            cwd: Option.some(work),
            env: { mode: "clean", set: { PATH: `${Path.join(tools, "bin")}:/usr/bin:/bin` }, unset: [] }
          }, termGrace)
          assert.isTrue(
            Isolation.isSessionUid(uidOf(Option.getOrThrow(connection.pid))),
            "boxed: a session uid outside"
          )
          return yield* linesUntilReady(connection)
        })).pipe(
          Effect.provide(NodeTransport.layer({ executables: { claude: cli }, watchdog: false, isolation: true }))
        )
        // Its root sees the closed directories hold only the exposed paths, and can neither write the installation
        // (a world-writable directory in it included), nor make it writable, nor unmount it or the tmpfs over them.
        assert.deepStrictEqual(
          lines,
          ["0", "hidden", "hidden", "clone / bin", "read-only", "locked", "locked"],
          JSON.stringify(lines)
        )
        assert.isFalse(Fs.existsSync(Path.join(install, "open", "x")))
        assert.strictEqual(Fs.statSync(closed).mode & 0o777, 0o700, "the closed directory is never opened")
      }).pipe(Effect.scoped))
  }

  it.live("the steps run as the host's root (unshare, perl): nothing of the session's environment runs in them, and the CLI gets that environment whole", () =>
    Effect.gen(function*() {
      // A module the helper would load if it honoured PERL5OPT (it runs in taint mode, which ignores it and
      // PERL5LIB): it would write its mark. A relative and a world-writable directory on PATH (taint mode refuses
      // perl's own exec under them; the helper execs with the system call).
      const lib = yield* tempDir("tether-iso-perl5lib-")
      const marked = Path.join(lib, "ran")
      Fs.writeFileSync(
        Path.join(lib, "TetherPlanted.pm"),
        `open(my $f, ">", "${marked}"); print $f "ran"; close $f; 1;\n`
      )
      const open = yield* tempDir("tether-iso-open-")
      Fs.chmodSync(open, 0o777)
      const work = yield* tempDir("tether-iso-env-")
      const path = `.:${open}:/usr/bin:/bin`
      // The loader's debug log of every program that runs with it: unshare and perl (the host's root) must not; the
      // box's own (its shell, env, setsid, the CLI) do.
      const debug = Path.join(work, "ld")
      const lines = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* (yield* Transport.Transport).open({
          program: "sh",
          args: ["-c", "echo \"$PERL5OPT|$PERL5LIB|$PATH|$LD_DEBUG|$PERL_UNICODE\"; echo ready; exec sleep 30"],
          cwd: Option.some(work),
          env: {
            mode: "clean",
            set: {
              PERL5OPT: "-MTetherPlanted",
              PERL5LIB: lib,
              PATH: path,
              LD_DEBUG: "files",
              LD_DEBUG_OUTPUT: debug,
              PERL_UNICODE: "SDA"
            },
            unset: []
          }
        }, termGrace)
        assert.isTrue(Isolation.isSessionUid(uidOf(Option.getOrThrow(connection.pid))), "boxed, its workspace lent")
        return yield* linesUntilReady(connection)
      })).pipe(Effect.provide(layer()))
      assert.deepStrictEqual(lines, [`-MTetherPlanted|${lib}|${path}|files|SDA`])
      assert.isFalse(Fs.existsSync(marked), "the helper loaded no module of the session's")
      const logs = Fs.readdirSync(work).filter((name) => name.startsWith("ld."))
      assert.isAbove(logs.length, 0, "the box's own programs ran with the loader's variables")
      const loaded = logs.map((name) => Fs.readFileSync(Path.join(work, name), "utf8")).join("\n")
      assert.notMatch(loaded, /needed by \S*\/(perl|unshare) /, "no program run as the host's root did")
    }).pipe(Effect.scoped))

  it.live("isolation: \"auto\": a box where one can be made; a session it cannot box runs unboxed, not refused", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      assert.isFalse(transport.capabilities.isolatesSessions, "not every session is guaranteed a box")
      assert.isTrue(transport.capabilities.notes.some((note) => note.includes(`isolation: "auto"`)))
      const work = yield* tempDir("tether-iso-auto-")
      const uidIn = (cwd: string, set: Record<string, string>, program = "sh") =>
        Effect.scoped(Effect.gen(function*() {
          const connection = yield* transport.open({
            program,
            args: ["-c", "echo ready; exec sleep 30"],
            cwd: Option.some(cwd),
            env: { mode: "clean", set, unset: [] }
          }, termGrace)
          yield* Stream.runHead(connection.stdout).pipe(Effect.timeout("5 seconds"))
          return uidOf(Option.getOrThrow(connection.pid))
        }))
      assert.isTrue(Isolation.isSessionUid(yield* uidIn(work, {})), "boxed: a session uid")
      assert.isTrue(Isolation.isSessionUid(yield* uidIn(work, { TMPDIR: work })), "a TMPDIR of its own: lent")
      assert.strictEqual(yield* uidIn(work, { TMPDIR: "/tmp" }), process.getuid!(), "a TMPDIR every user shares")
      assert.strictEqual(yield* uidIn(work, {}, "claude"), process.getuid!(), "its executable not for others: unboxed")
    }).pipe(
      Effect.scoped,
      Effect.provide(
        // The default: "auto". Its claude, a copy of sh only its owner may execute.
        NodeTransport.layer({ executables: { claude: privateSh }, watchdog: false })
      )
    ))

  it.live("the box's start: bounded by isolationTimeout (SpawnFailed); stage 1 killed, the box ends with it", () =>
    Effect.gen(function*() {
      const spec: Transport.LaunchSpec = {
        program: "sh",
        args: ["-c", "echo ready; exec sleep 30"],
        cwd: Option.some(yield* tempDir("tether-iso-start-")),
        env: { mode: "clean", set: {}, unset: [] }
      }
      const open = (layer: Layer.Layer<Transport.Transport>) =>
        Effect.gen(function*() {
          const connection = yield* (yield* Transport.Transport).open(spec, termGrace)
          yield* Stream.runHead(connection.stdout).pipe(Effect.timeout("5 seconds"))
          return Option.getOrThrow(connection.pid)
        }).pipe(Effect.provide(layer))
      // A box takes more than a millisecond to make (its mounts, its helper): the open fails, saying why.
      const late = yield* Effect.flip(Effect.scoped(open(
        NodeTransport.layer({ watchdog: false, isolation: true, isolationTimeout: Duration.millis(1) })
      )))
      assert.strictEqual(late._tag, "SpawnFailed")
      assert.include((late as { readonly reason: string }).reason, "isolationTimeout")
      // The CLI's parent is the box's PID 1, whose parent is stage 1 (the process the host spawned): killed, the
      // parent-death signal ends PID 1, and the kernel the rest of its namespace.
      yield* Effect.scoped(Effect.gen(function*() {
        const cli = yield* open(layer(true))
        const init = stat(cli)!.ppid
        const stage1 = stat(init)!.ppid
        assert.match(stat(stage1)!.args, /^\/bin\/sh -c .* tether-box /s)
        process.kill(stage1, "SIGKILL")
        yield* waitUntil("the box to end with its stage 1", () => !isAlive(init) && !isAlive(cli))
      }))
    }))

  it.live("what a box runs as the host's root is found on the host's PATH, never on the session's", () =>
    Effect.gen(function*() {
      // A session's PATH may name a directory another session wrote: its `mount`, `unshare`, `setpriv` and `env`
      // would run as the host's root while the box is made.
      const planted = yield* tempDir("tether-iso-planted-")
      Fs.chmodSync(planted, 0o755)
      const ran = Path.join(planted, "ran")
      for (const name of ["mount", "unshare", "setpriv", "env", "setsid"]) {
        Fs.writeFileSync(Path.join(planted, name), `#!/bin/sh\necho ${name} >> ${ran}\nexit 1\n`, { mode: 0o755 })
      }
      const transport = yield* Transport.Transport
      const line = yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* transport.open({
          program: "sh",
          args: ["-c", "id -u; exec sleep 30"],
          cwd: Option.some(yield* tempDir("tether-iso-work-")),
          env: { mode: "clean", set: { PATH: `${planted}:/usr/bin:/bin` }, unset: [] }
        }, termGrace)
        assert.isTrue(Isolation.isSessionUid(uidOf(Option.getOrThrow(connection.pid))), "boxed")
        return yield* Stream.runHead(connection.stdout).pipe(Effect.timeout("5 seconds"))
      }))
      assert.deepStrictEqual(Option.map(line, (each) => each._tag === "Text" ? each.text : ""), Option.some("0"))
      assert.isFalse(Fs.existsSync(ran), Fs.existsSync(ran) ? Fs.readFileSync(ran, "utf8") : "")
    }).pipe(Effect.scoped, Effect.provide(layer(true))))

  it("the probe of what a box needs: true here, and which tool is missing when one is", () => {
    assert.strictEqual(Isolation.probe(), true)
    // A PATH that has every tool a box runs but one: the probe names that one.
    const bin = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-probe-path-"))
    const saved = process.env.PATH
    const which = (tool: string) =>
      (saved ?? "/usr/bin:/bin").split(":").map((dir) => Path.join(dir, tool)).find((file) => {
        try {
          Fs.accessSync(file, Fs.constants.X_OK)
          return true
        } catch {
          return false
        }
      })
    try {
      const tools = ["unshare", "setpriv", "setsid", "env", "true"]
      const found = Object.fromEntries(tools.map((tool) => [tool, which(tool)]))
      for (const missing of ["setpriv", "setsid", "unshare"]) {
        for (const tool of tools) Fs.rmSync(Path.join(bin, tool), { force: true })
        for (const tool of tools) if (tool !== missing) Fs.symlinkSync(found[tool]!, Path.join(bin, tool))
        process.env.PATH = bin
        assert.strictEqual(Isolation.probe(), `${missing} (util-linux) is missing`)
        process.env.PATH = saved
      }
    } finally {
      process.env.PATH = saved
      Fs.rmSync(bin, { recursive: true, force: true })
    }
  })

  it("the probe's record: written once its checks pass, trusted only when it matches them and only root could write it", () => {
    assert.strictEqual(Isolation.probe(), true)
    const key = Isolation.probeKey()
    assert.isDefined(key)
    assert.strictEqual(Fs.readFileSync(Isolation.probedFile, "utf8"), key)
    // A record of other programs (or another boot): the checks run again and record what they passed with.
    Fs.writeFileSync(Isolation.probedFile, "another boot\n", { mode: 0o644 })
    assert.strictEqual(Isolation.probe(), true)
    assert.strictEqual(Fs.readFileSync(Isolation.probedFile, "utf8"), key)
    // The right record, but writable by others: not trusted, checked again, recorded again as root's alone.
    Fs.chmodSync(Isolation.probedFile, 0o666)
    assert.strictEqual(Isolation.probe(), true)
    assert.strictEqual(Fs.statSync(Isolation.probedFile).mode & 0o777, 0o644)
  })

  it("a lent directory: 0700 while any holder lends it, its mode given back by the last; a dead host's swept", () => {
    const records = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-lent-records-"))
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-lent-"))
    const modeOf = () => Fs.statSync(dir).mode & 0o777
    try {
      Fs.chmodSync(dir, 0o755)
      const first = Isolation.lend(dir, records)
      const second = Isolation.lend(dir, records)
      assert.strictEqual(modeOf(), 0o700)
      first.restore()
      first.restore()
      assert.strictEqual(modeOf(), 0o700, "the second session holds it still (a restore counts once)")
      second.restore()
      assert.strictEqual(modeOf(), 0o755, "the last one gives the mode back")
      assert.deepStrictEqual(Fs.readdirSync(records), [])
      // Another host (this test's parent: alive) lends it: its mode is the one it found, and ours is not given back
      // while it holds it; once it is dead, the sweep gives it back.
      Fs.chmodSync(dir, 0o700)
      Fs.writeFileSync(Path.join(records, `${lentKey(dir)}.${process.ppid}`), `${process.ppid} -\n${0o755}\n${dir}`)
      const mine = Isolation.lend(dir, records)
      mine.restore()
      assert.strictEqual(modeOf(), 0o700, "the other host holds it")
      Isolation.sweepLent(records)
      assert.strictEqual(modeOf(), 0o700, "a live host's record is not swept")
      Fs.writeFileSync(Path.join(records, `${lentKey(dir)}.${process.ppid}`), `999999999 -\n${0o755}\n${dir}`)
      Isolation.sweepLent(records)
      assert.strictEqual(modeOf(), 0o755, "a dead host's is given back")
      assert.deepStrictEqual(Fs.readdirSync(records), [])
    } finally {
      Fs.rmSync(records, { recursive: true, force: true })
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the uid ranges: one holder per range, two hosts on one machine included; a dead host's taken back", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-uid-ranges-"))
    try {
      const first = Isolation.allocate(dir, 7)
      const second = Isolation.allocate(dir, 7)
      assert.isFalse(typeof first === "string" || typeof second === "string")
      if (typeof first === "string" || typeof second === "string") return
      assert.strictEqual(first.slot, 7)
      assert.strictEqual(second.slot, 8, "the held range is skipped")
      assert.strictEqual(second.base - first.base, Isolation.rangeSize)
      first.release()
      const third = Isolation.allocate(dir, 7)
      assert.strictEqual(typeof third === "string" ? third : third.slot, 7, "released, it can be held again")
      // Another host's lock (this test's parent: alive) is respected; a dead one's is taken back.
      Fs.writeFileSync(Path.join(dir, "20"), `${process.ppid} -`)
      Fs.writeFileSync(Path.join(dir, "21"), `999999999 -`)
      const fourth = Isolation.allocate(dir, 20)
      assert.strictEqual(typeof fourth === "string" ? fourth : fourth.slot, 21)
      // The sweep removes a dead host's lock files, not a live one's.
      Fs.writeFileSync(Path.join(dir, "30"), `999999999 -`)
      Isolation.sweep(dir)
      assert.deepStrictEqual(Fs.readdirSync(dir).sort(), ["20", "21", "7", "8"])
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe.runIf(process.platform === "linux" && process.getuid?.() !== 0)("isolation without root", () => {
  it.live("is reported as not isolated, saying what it needs", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      assert.isFalse(transport.capabilities.isolatesSessions)
      assert.isTrue(transport.capabilities.notes.some((note) => note.includes("newuidmap")))
    }).pipe(Effect.provide(layer())))

  it.live("by default: no box, and the capabilities say why", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      assert.isFalse(transport.capabilities.isolatesSessions)
      assert.isTrue(
        transport.capabilities.notes.some((note) =>
          note.includes(`isolation: "auto" makes no box here`) && note.includes("newuidmap")
        )
      )
    }).pipe(Effect.provide(NodeTransport.layer({ watchdog: false }))))
})

const isFake = (pid: number): boolean => {
  try {
    return /fake-claude/.test(Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1"))
  } catch {
    return false
  }
}

const stateOf = (pid: number): string => {
  const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]
}
