/**
 * The transport service: the containment decided, the watchdog started, a connection opened per launch spec.
 *
 * Every step is a top-level function over an explicit record: {@link Settings} (what the layer decided once, from
 * its options), {@link State} (the layer's own bookkeeping: its open sessions, its scans), {@link Launch} (one
 * open's program, executable, spec and directory) and {@link Prepared} (what a session has before its spawn: its
 * environment, plan, cgroups, box and temporary directory).
 *
 * @internal
 */
import { SpawnFailed } from "@tether/core/TetherError"
import type { SpawnError } from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import type * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Writable } from "node:stream"
import * as Executable from "../Executable.ts"
import type { Options } from "../NodeTransport.ts"
import * as Box from "./box.ts"
import { capabilitiesFor, watchdogEnabled } from "./capabilities.ts"
import * as Cgroup from "./cgroup.ts"
import { type Handle, makeConnection } from "./connection.ts"
import * as Containment from "./containment.ts"
import {
  defaultIsolationTimeout,
  defaultKillGrace,
  defaultLimitsInterval,
  defaultMaxLineBytes,
  defaultScanInterval,
  defaultStderrTailBytes,
  limitHitsMetric,
  markerVariable,
  survivorsMetric
} from "./defaults.ts"
import { buildEnvironment, findNul, pathOf, secretsOf } from "./environment.ts"
import * as Isolation from "./isolation.ts"
import * as Limits from "./limits.ts"
import { handOver, type Plan, planFor } from "./plans.ts"
import { isWindows } from "./platform.ts"
import * as ProcessTree from "./processTree.ts"
import * as Runnable from "./runnable.ts"
import * as Secrets from "./secrets.ts"
import { describe, spawnProcess } from "./spawn.ts"
import * as Teardown from "./teardown.ts"
import * as Watchdog from "./watchdog.ts"

// -----------------------------------------------------------------------------
// The layer's settings and state
// -----------------------------------------------------------------------------

/** What a layer decides once, from its options: read by every open. */
interface Settings {
  readonly options: Options | undefined
  readonly maxLineBytes: number
  readonly stderrTailBytes: number
  readonly killGraceMillis: number
  readonly scanMillis: number
  readonly limitsMillis: number
  readonly isolationMillis: number
  readonly useWatchdog: boolean
  readonly resolved: Containment.Resolved
  /** How the process tree is read: `proc` under a cgroup or a PID namespace too; none on Windows. */
  readonly backend: ProcessTree.Backend | undefined
  readonly privateTmp: boolean
  readonly requestedLimits: Limits.Requested
  readonly limitsLayer: Limits.Layer | undefined
  /** Why every open fails: limits asked for that cannot be (enforced here). */
  readonly limitsRefused: string | undefined
  /** `true` when isolation was asked for and is available here, else why not; undefined when not asked for. */
  readonly isolationProbe: true | string | undefined
  readonly isolated: boolean
  /** `isolation: "auto"`: a session whose box cannot be made runs unboxed (with a warning) instead of failing. */
  readonly isolationAuto: boolean
  /** Why every open fails: isolation asked for where it cannot be. */
  readonly isolationRefused: string | undefined
  /** The host's own user namespace: a box's launcher has left it once its own is made. */
  readonly ownUserNamespace: string | undefined
}

/** The layer's bookkeeping. */
interface State {
  readonly settings: Settings
  readonly watchdog: Watchdog.Watchdog | undefined
  readonly cgroupLayer: Cgroup.Layer | undefined
  /** The services `make` ran with, for the limits' reports (logged from native timers). */
  readonly services: Context.Context<never>
  /** The sessions open: the layer's cgroup is removed when the layer is released and this is 0, whichever is last. */
  open: number
  released: boolean
  /** The open trees of the process-tree containment, scanned together by one timer. */
  readonly watched: Set<ProcessTree.Tree>
  /** The process table the cgroups' teardowns read (their looks for escaped processes), shared between them. */
  readonly table: ProcessTree.SharedTable
  scanner: ReturnType<typeof setInterval> | undefined
}

/** One open: what to start, and how long its CLI gets to end after SIGTERM. */
interface Launch {
  readonly program: string
  readonly file: string
  readonly spec: Transport.LaunchSpec
  readonly cwd: string | undefined
  readonly termGraceMillis: number
}

const settingsOf = (options: Options | undefined): Settings => {
  const resolved = Containment.resolve(options?.containment ?? "auto")
  const requestedLimits = options?.limits ?? {}
  const limitProblems = Limits.problems(requestedLimits)
  const limitsLayer = limitProblems.length === 0 && Limits.controllersOf(requestedLimits).length > 0 &&
      process.platform === "linux"
    ? Limits.makeLayer(requestedLimits, resolved._tag === "Cgroup" ? resolved.layer.path : undefined)
    : undefined
  // Isolation between sessions: `"auto"` by default, on where it can be, session by session; `true`: asked for, and
  // where it cannot be, every open fails; `false`: off.
  const isolation = options?.isolation ?? "auto"
  const isolationProbe = isolation === false || isWindows ? undefined : Isolation.probe()
  const isolated = isolationProbe === true
  return {
    options,
    maxLineBytes: options?.maxLineBytes ?? defaultMaxLineBytes,
    stderrTailBytes: options?.stderrTailBytes ?? defaultStderrTailBytes,
    killGraceMillis: Duration.toMillis(options?.killGrace ?? defaultKillGrace),
    scanMillis: Duration.toMillis(options?.scanInterval ?? defaultScanInterval),
    limitsMillis: Duration.toMillis(options?.limitsInterval ?? defaultLimitsInterval),
    isolationMillis: Duration.toMillis(options?.isolationTimeout ?? defaultIsolationTimeout),
    useWatchdog: watchdogEnabled(options),
    resolved,
    backend: resolved._tag === "Cgroup" || resolved._tag === "PidNamespace"
      ? "proc"
      : resolved._tag === "ProcessTree"
      ? resolved.backend
      : undefined,
    privateTmp: (options?.privateTmp ?? true) && !isWindows,
    requestedLimits,
    limitsLayer,
    limitsRefused: limitProblems.length > 0
      ? limitProblems.join("; ")
      : Limits.controllersOf(requestedLimits).length > 0 && limitsLayer?.complete !== true
      ? `limits were asked for and cannot all be enforced here: ${
        limitsLayer?.notes.join("; ") ?? "cgroups are Linux's"
      }`
      : undefined,
    isolationProbe,
    isolated,
    isolationAuto: isolation === "auto",
    isolationRefused: isolation === true && isolationProbe !== true
      ? `isolation between sessions was requested and is unavailable: ${isolationProbe ?? "Windows has no namespaces"}`
      : undefined,
    ownUserNamespace: isolated ? Isolation.userNamespace("self") : undefined
  }
}

/** Removes the layer's cgroups once it is released and its last session is gone. */
const removeLayer = (state: State): void => {
  if (!state.released || state.open > 0) return
  state.settings.limitsLayer?.remove()
  if (state.cgroupLayer !== undefined && Cgroup.removeDir(state.cgroupLayer.path)) {
    state.watchdog?.layer(state.cgroupLayer.path, false)
  }
}

/**
 * What teardown never signals, whatever a tool wrote into its session's cgroup.procs: the host, its ancestors,
 * PID 1, the watchdog's keepers. Read at each look: a parent may exit, a keeper may be replaced meanwhile.
 */
const guarded = (state: State): ReadonlySet<number> => {
  const pids = new Set(ProcessTree.ancestry(process.pid))
  for (const pid of state.watchdog?.pids() ?? []) pids.add(pid)
  return pids
}

/** Periodic scans of the process-tree containment: one table read for every open tree of the layer. */
const watch = (state: State, tree: ProcessTree.Tree): () => void => {
  if (state.settings.scanMillis <= 0 || state.settings.backend !== "proc") return () => {}
  state.watched.add(tree)
  if (state.scanner === undefined) {
    state.scanner = setInterval(() => {
      try {
        const table = ProcessTree.readTable("proc")
        for (const each of state.watched) each.scan(table)
      } catch {
        // An unreadable table this time: teardown reads it again.
      }
    }, state.settings.scanMillis)
    state.scanner.unref()
  }
  return () => {
    state.watched.delete(tree)
    if (state.watched.size === 0 && state.scanner !== undefined) {
      clearInterval(state.scanner)
      state.scanner = undefined
    }
  }
}

// -----------------------------------------------------------------------------
// Before the spawn
// -----------------------------------------------------------------------------

/** Why every open of this layer fails, if it does: its containment, limits or isolation cannot be had here. */
const refusal = (settings: Settings): string | undefined => {
  const { resolved } = settings
  if (resolved._tag === "Unavailable") {
    return `${resolved.requested} containment was requested and is unavailable: ${resolved.reason}`
  }
  return settings.limitsRefused ?? settings.isolationRefused
}

/** A session's box as made before its spawn (see {@link makeBox}): what its first process mounts, and its undo. */
interface MadeBox extends Isolation.BoxPlan {
  readonly undo: (clean?: boolean) => void
}

/** What a session has before its spawn. */
interface Prepared {
  readonly secrets: ReadonlyArray<Secrets.Secret>
  readonly scrub: Secrets.ConnectionScrub
  readonly marker: string
  readonly env: Record<string, string>
  readonly plan: Plan
  readonly box: MadeBox | undefined
  readonly session: Cgroup.Session | undefined
  readonly limits: Limits.Session | undefined
  /** The session's private temporary directory (not a box's: its /tmp goes with the box). */
  readonly tmp: string | undefined
}

/**
 * The CLI's environment: the spec's, the connection's marker, the secret pipes' descriptors, and (behind the cgroup
 * launcher) the shell variables the launcher's shell sets that the CLI must not get.
 */
const environmentOf = (spec: Transport.LaunchSpec, token: string, plan: Plan): Record<string, string> => {
  const env = buildEnvironment(spec.env)
  env[markerVariable] = token
  ;(spec.secretPipes ?? []).forEach((pipe, i) => {
    env[pipe.variable] = String(plan.firstSecretFd + i)
  })
  if (plan.firstSecretFd === 4) {
    const absent = Cgroup.shellVariables.filter((name) => env[name] === undefined)
    if (absent.length > 0) env.TETHER_LAUNCHER_UNSET = absent.join(" ")
  }
  return env
}

/** Why the CLI cannot be started with this environment: a NUL byte, or an executable that cannot run. */
const unstartable = (
  file: string,
  spec: Transport.LaunchSpec,
  env: Record<string, string>,
  scrub: Secrets.ConnectionScrub
): string | undefined => {
  const nul = findNul(file, spec.args, env)
  if (nul !== undefined) return nul
  const unrunnable = Runnable.check(file, env.PATH)
  return unrunnable === undefined ? undefined : scrub(unrunnable)
}

/** The host set TMPDIR itself: the session gets no temporary directory of its own. */
const hostTmp = (spec: Transport.LaunchSpec): boolean => Object.hasOwn(spec.env.set, "TMPDIR")

/** The session's cgroups: its containment's (v2) and its limits' (v1 too); the first is removed if the second fails. */
const makeCgroups = (state: State, program: string, box: MadeBox | undefined) =>
  Effect.suspend(() => {
    const session = state.cgroupLayer?.session()
    return Effect.try({
      try: () => ({ session, limits: state.settings.limitsLayer?.session(session?.path) }),
      catch: (error) => new SpawnFailed({ program, reason: `could not set the session's limits: ${describe(error)}` })
    }).pipe(Effect.tapError(() =>
      Effect.sync(() => {
        session?.remove()
        box?.undo()
      })
    ))
  })

/** The session's private temporary directory, unless the host set TMPDIR itself (a box has its own: /tmp). */
const makeSessionTmp = (
  settings: Settings,
  launch: Launch,
  box: MadeBox | undefined,
  cgroups: { readonly session: Cgroup.Session | undefined; readonly limits: Limits.Session | undefined }
): Effect.Effect<string | undefined, SpawnFailed> =>
  box !== undefined || !settings.privateTmp || hostTmp(launch.spec)
    ? Effect.succeed(undefined)
    : Effect.try({
      try: () => Box.makeTmp(),
      catch: (error) =>
        new SpawnFailed({
          program: launch.program,
          reason: `could not create the session's temporary directory: ${describe(error)}`
        })
    }).pipe(Effect.tapError(() =>
      Effect.sync(() => {
        cgroups.session?.remove()
        cgroups.limits?.remove()
      })
    ))

/** TMPDIR, TMP and TEMP: the session's temporary directory, or a box's /tmp. */
const setTmpVariables = (
  env: Record<string, string>,
  settings: Settings,
  launch: Launch,
  box: MadeBox | undefined,
  tmp: string | undefined
): void => {
  const tmpVariable = box !== undefined && settings.privateTmp && !hostTmp(launch.spec) ? "/tmp" : tmp
  if (tmpVariable === undefined) return
  env.TMPDIR = tmpVariable
  env.TMP = tmpVariable
  env.TEMP = tmpVariable
}

/**
 * Everything before the spawn, in order: the secrets and the marker, the box (isolated), the plan and the
 * environment, the checks, the cgroups and the temporary directory. A failure gives back what was made before it.
 */
const prepare = Effect.fnUntraced(function*(state: State, launch: Launch) {
  const { program, file, spec } = launch
  const { settings } = state
  const secrets = secretsOf(spec)
  // Scrubbed of every open connection's secrets too: a tool that reads another session's key hands it on to
  // this session's host otherwise.
  const scrub = Secrets.forConnection(Secrets.make(secrets))
  const token = randomUUID()
  // The box: a uid range of its own, its directories lent to it, its /tmp (see isolation.ts).
  const box = settings.isolated ? yield* boxFor(settings, launch) : undefined
  const plan = planFor(settings.resolved, file, spec.args, settings.limitsLayer !== undefined, box)
  if ((spec.secretPipes ?? []).length > 0 && isWindows) {
    return yield* new SpawnFailed({ program, reason: "secret pipes are not supported on Windows" })
  }
  const environment = environmentOf(spec, token, plan)
  const unfit = unstartable(file, spec, environment, scrub)
  if (unfit !== undefined) {
    box?.undo()
    return yield* new SpawnFailed({ program, reason: unfit })
  }
  // A box's first steps run as the host's root: the loader's variables wait for its CLI.
  const env = box === undefined ? environment : Isolation.holdBack(environment)
  const cgroups = yield* makeCgroups(state, program, box)
  const tmp = yield* makeSessionTmp(settings, launch, box, cgroups)
  setTmpVariables(env, settings, launch, box, tmp)
  const prepared: Prepared = {
    secrets,
    scrub,
    marker: `${markerVariable}=${token}`,
    env,
    plan,
    box,
    session: cgroups.session,
    limits: cgroups.limits,
    tmp
  }
  return prepared
})

/**
 * Why a session's box cannot be made for this launch, if it cannot, else what of the host's closed directories it
 * must be shown: the CLI runs as the session's uid, which owns nothing of the host's, so it must be able to run the
 * executable (and its interpreter): one under a directory only its owner may enter (`/root`, `mktemp -d`'s) is
 * exposed to it read-only (`Isolation.reach`), unless the file itself is not executable (or a script not readable)
 * by other users; its directories are lent through idmapped mounts, which their filesystems must take; and none of
 * them may be one every user shares (`/`, `/tmp`: it is closed to other users while lent).
 */
const unboxable = (
  { file, spec }: Launch,
  { lent }: Isolation.Directories
): { readonly why: string } | { readonly exposed: ReadonlyArray<Isolation.Exposure> } => {
  const reached = Isolation.reach(file, pathOf(spec.env), lent)
  if ("problem" in reached) return { why: `the session's uid cannot run its CLI: ${reached.problem}` }
  const unlendable = Isolation.idmapProblem(lent)
  if (unlendable !== undefined) return { why: `its directories cannot be lent to it: ${unlendable}` }
  const shared = lent.find((dir) => Path.resolve(dir) === "/" || Isolation.isShared(dir))
  return shared === undefined
    ? reached
    : { why: `its workspace or config directory ${shared} is shared by every user` }
}

/**
 * The session's box, or (`isolation: "auto"`) none where it cannot be made: the session then runs unboxed, with a
 * warning saying why. With `isolation: true` that is a `SpawnFailed`.
 */
const boxFor = (settings: Settings, launch: Launch): Effect.Effect<MadeBox | undefined, SpawnFailed> => {
  // Found once: the directories checked are the directories lent (a symbolic link changed in between cannot lend
  // one the checks did not see).
  const directories = Isolation.directoriesOf(launch.spec, launch.cwd, launch.file)
  const boxable = unboxable(launch, directories)
  if ("exposed" in boxable) return makeBox(launch, directories, boxable.exposed)
  return settings.isolationAuto
    ? Effect.as(
      Effect.logWarning(
        `NodeTransport: this session runs without isolation from other sessions (isolation: "auto"): ${boxable.why}`
      ),
      undefined
    )
    : Effect.fail(
      new SpawnFailed({ program: launch.program, reason: `could not make the session's box: ${boxable.why}` })
    )
}

/**
 * A session's box, before its spawn: a uid range of its own, its private /tmp directory and the directories it
 * keeps visible under /tmp (owned by its range; the exposed paths' too), its workspace and config directories lent
 * to its range.
 */
const makeBox = (
  { program }: Launch,
  directories: Isolation.Directories,
  exposed: ReadonlyArray<Isolation.Exposure>
): Effect.Effect<MadeBox, SpawnFailed> =>
  Effect.suspend(() => {
    const range = Isolation.allocate()
    if (typeof range === "string") {
      return Effect.fail(
        new SpawnFailed({ program, reason: `could not allocate the session's uid range: ${range}` })
      )
    }
    const lent: Array<Isolation.Lent> = []
    let tmp: string | undefined
    const undo = (clean = true) => {
      for (const each of lent.splice(0)) each.restore()
      if (tmp !== undefined) Box.removeTmp(tmp)
      tmp = undefined
      if (clean) range.release()
    }
    return Effect.try({
      try: (): MadeBox => {
        for (const dir of directories.lent) {
          lent.push(Isolation.lend(dir))
        }
        tmp = Box.makeTmp()
        Fs.chownSync(tmp, range.base, range.base)
        const keep = Isolation.keepUnderTmp(
          tmp,
          [...directories.kept, ...exposed.map((each) => Path.dirname(each.path))],
          range.base
        )
        return { tmp, keep, lent: directories.lent, exposed, base: range.base, undo }
      },
      catch: (error) => {
        undo()
        return new SpawnFailed({ program, reason: `could not make the session's box: ${describe(error)}` })
      }
    })
  })

// -----------------------------------------------------------------------------
// The spawn
// -----------------------------------------------------------------------------

/** After teardown (or a failed spawn): the session's limits' cgroups, its temporary directory, its box. */
const removeBox = (prepared: Prepared, clean = true): void => {
  prepared.limits?.remove()
  if (prepared.tmp !== undefined) Box.removeTmp(prepared.tmp)
  // `clean`: nothing of the session survived its teardown, so its uid range may be given to another.
  prepared.box?.undo(clean)
}

/** stdin, stdout, stderr; the launcher's go pipe (descriptor 3) when there is one; a pipe per secret. */
const stdioOf = (prepared: Prepared, secretPipes: number): Array<"pipe" | "ignore"> => {
  const stdio: Array<"pipe" | "ignore"> = ["pipe", "pipe", "pipe"]
  if (prepared.plan.firstSecretFd === 4) stdio.push("pipe")
  for (let i = 0; i < secretPipes; i++) stdio.push("pipe")
  return stdio
}

/**
 * Runs right after the spawn, before control returns to the event loop (so the child cannot have been reaped and
 * its pid reused): reads its start time, places it in its cgroups, and lets the launcher exec the CLI. Throws what
 * the spawn reports.
 */
const place = (settings: Settings, prepared: Prepared, child: NodeChildProcess.ChildProcess): string | undefined => {
  const start = settings.backend === "proc" ? ProcessTree.readStat(child.pid!)?.start : undefined
  if (prepared.session !== undefined) {
    try {
      prepared.session.place(child.pid!)
    } catch (error) {
      throw new Error(`could not place the CLI in its cgroup ${prepared.session.path}: ${describe(error)}`)
    }
  }
  if (prepared.limits !== undefined) {
    try {
      prepared.limits.place(child.pid!)
    } catch (error) {
      throw new Error(`could not place the CLI in its limits' cgroups: ${describe(error)}`)
    }
  }
  // Placed: the launcher may exec the CLI now.
  if (prepared.box !== undefined) (child.stdio[3] as Writable).write("go\n")
  else if (prepared.plan.firstSecretFd === 4) handOver(child.stdio[3], "go")
  return start
}

/**
 * Starts the CLI: registered with the watchdog and the secrets before (there is no moment where the CLI runs and
 * the watchdog does not know it), placed in its cgroups before it runs, handed its secrets after. A failed spawn
 * gives back everything the session had.
 */
const spawn = (state: State, launch: Launch, prepared: Prepared) =>
  Effect.suspend(() => {
    const secretPipes = launch.spec.secretPipes ?? []
    state.watchdog?.register(prepared.marker, launch.termGraceMillis, prepared.session?.path)
    const unregisterSecrets = Secrets.register(prepared.secrets)
    const unregister = Effect.sync(() => {
      state.watchdog?.unregister(prepared.marker)
      prepared.session?.remove()
      removeBox(prepared)
      unregisterSecrets()
    })
    state.open++
    return spawnProcess(launch.program, prepared.plan.file, prepared.plan.args, {
      cwd: launch.cwd,
      env: prepared.env,
      stdio: stdioOf(prepared, secretPipes.length),
      // Its own session and process group (setsid): terminal signals aimed at the host do not reach it, and its
      // session id names the tree.
      detached: !isWindows,
      windowsHide: true
    }, (child) =>
      place(state.settings, prepared, child), prepared.scrub).pipe(
        Effect.tapError(() =>
          Effect.andThen(
            unregister,
            Effect.sync(() => {
              state.open--
              removeLayer(state)
            })
          )
        ),
        Effect.map(({ child, placed: start }) => {
          secretPipes.forEach((pipe, i) =>
            handOver(child.stdio[prepared.plan.firstSecretFd + i], Redacted.value(pipe.value))
          )
          state.watchdog?.setRoot(prepared.marker, child.pid!, start)
          return { child, start, unregisterSecrets }
        })
      )
  })

// -----------------------------------------------------------------------------
// After the spawn
// -----------------------------------------------------------------------------

/** What the limits' watch reads of a running session, set once its connection and its CLI are known. */
interface Live {
  /** The CLI's pid: the launcher's, until a box's handshake finds the CLI in its namespace. */
  cliPid: number
  exited: () => boolean
}

/** Logs a limit hit and counts it (from the watch's native timer: run with the layer's services). */
const reportHit = (state: State, pid: number, hit: Transport.LimitHit): void =>
  Effect.runSyncWith(state.services)(
    Effect.andThen(
      Effect.logWarning(
        `a process of the session hit its ${hit.limit} limit (${hit.max}): ` +
          (hit.limit === "memory" ? `${hit.count} OOM kill(s)` : `${hit.count} fork(s) refused`),
        hit
      ),
      Metric.update(Metric.withAttributes(limitHitsMetric, { limit: hit.limit }), hit.count)
    ).pipe(Effect.annotateLogs({ pid }))
  )

/** The watch on the session's limits' counters, and the queue its hits go to (none without limits). */
const watchSessionLimits = (state: State, limits: Limits.Session | undefined, pid: number, live: Live) =>
  Effect.gen(function*() {
    if (limits === undefined) return { hits: undefined, limitWatch: undefined }
    const hits = yield* Queue.unbounded<Transport.LimitHit, Cause.Done>()
    const limitWatch = Box.watchLimits({
      session: limits,
      requested: state.settings.requestedLimits,
      pid: () => live.cliPid,
      exited: () => live.exited(),
      intervalMillis: state.settings.limitsMillis,
      report: (hit) => {
        Queue.offerUnsafe(hits, hit)
        reportHit(state, pid, hit)
      }
    })
    return { hits, limitWatch }
  })

/**
 * What teardown ends: the session's cgroup (with its process tree, read twice: what it finds outside the cgroup
 * left it), its PID namespace, its process tree, or (Windows) its root alone; and the scans' stop.
 */
const containerOf = (
  state: State,
  prepared: Prepared,
  pid: number,
  start: string | undefined,
  exited: () => boolean
): { readonly container: Teardown.Container; readonly unwatch: () => void } => {
  const { backend, resolved } = state.settings
  const rootOnly = (): ReadonlyArray<ProcessTree.ProcessInfo> =>
    exited() ? [] : [{ pid, ppid: 0, pgid: pid, sid: -1, zombie: false, start: "" }]
  const tree = (backend: ProcessTree.Backend) =>
    ProcessTree.make({ backend, rootPid: pid, rootStart: start, rootReaped: exited, marker: prepared.marker })
  const { session } = prepared
  let contained: { readonly container: Teardown.Container; readonly unwatch: () => void }
  if (session !== undefined) {
    // The process tree too, read by teardown twice: what it finds outside the cgroup left it (a root tool can). Only
    // through the layer's shared table, whose tables only ever get newer: a tree's scans never see time go back.
    const cgroupTree = tree("proc")
    contained = {
      container: Teardown.cgroupContainer(
        session,
        () => guarded(state),
        () => exited() ? undefined : pid,
        (notBefore) => cgroupTree.scan(state.table.read(notBefore))
      ),
      unwatch: () => {}
    }
  } else if (backend === undefined) {
    contained = { container: Teardown.windowsContainer(pid, rootOnly), unwatch: () => {} }
  } else if (resolved._tag === "PidNamespace") {
    // unshare is spared SIGTERM: its death would SIGKILL the namespace before the CLI could end cleanly.
    contained = { container: Teardown.treeContainer("pid-namespace", tree(backend), rootOnly, pid), unwatch: () => {} }
  } else {
    const processTree = tree(backend)
    contained = {
      container: Teardown.treeContainer("process-tree", processTree, rootOnly),
      unwatch: watch(state, processTree)
    }
  }
  // An isolated session's stage 1 is the transport's, as a launcher is: never signalled by itself nor counted (it
  // ends when the CLI does; cgroup.kill, or the CLI's parent-death signal the other way round).
  return prepared.box === undefined
    ? contained
    : { ...contained, container: Teardown.sparing(contained.container, pid) }
}

/** Opens one session: prepared, spawned, its limits watched, its connection and its container made. */
const acquire = Effect.fnUntraced(function*(state: State, launch: Launch) {
  const refused = refusal(state.settings)
  if (refused !== undefined) return yield* new SpawnFailed({ program: launch.program, reason: refused })
  const prepared = yield* prepare(state, launch)
  const { child, start, unregisterSecrets } = yield* spawn(state, launch, prepared)
  const pid = child.pid!
  const live: Live = { cliPid: pid, exited: () => false }
  const { hits, limitWatch } = yield* watchSessionLimits(state, prepared.limits, pid, live)
  const { connection, exited } = makeConnection(child, {
    maxLineBytes: state.settings.maxLineBytes,
    stderrTailBytes: state.settings.stderrTailBytes,
    scrub: prepared.scrub,
    outOfMemory: limitWatch?.outOfMemory,
    limitHits: hits === undefined ? undefined : Stream.fromQueue(hits)
  })
  live.exited = exited
  const { container, unwatch } = containerOf(state, prepared, pid, start, exited)
  const handle: Handle = {
    child,
    pid,
    marker: prepared.marker,
    container,
    exited,
    connection,
    scrub: prepared.scrub,
    unregisterSecrets,
    unwatch,
    box: {
      lastLook: () => {
        limitWatch?.lastLook()
        if (hits !== undefined) Queue.endUnsafe(hits)
      },
      remove: (clean) => removeBox(prepared, clean)
    },
    isolated: prepared.box === undefined ? undefined : {
      base: prepared.box.base,
      found: (cli: number) => {
        live.cliPid = cli
      }
    }
  }
  return handle
})

/** Ends a session: its teardown, its report logged and counted, then what it had given back. */
const release = (state: State, handle: Handle, termGraceMillis: number) => {
  let survived = false
  return Effect.callback<Teardown.Report>((resume) =>
    Effect.sync(
      Teardown.run({
        child: handle.child,
        exited: handle.exited,
        container: handle.container,
        termGraceMillis,
        killGraceMillis: state.settings.killGraceMillis,
        describe: (pid) => ProcessTree.describeProcess(pid, handle.scrub),
        done: (report) => resume(Effect.succeed(report))
      })
    )
  ).pipe(
    Effect.tap((report) => Teardown.logReport(report, survivorsMetric)),
    Effect.tap((report) =>
      Effect.sync(() => {
        survived = report.survivors.length > 0
      })
    ),
    Effect.ensuring(Effect.sync(() => {
      handle.box.lastLook()
      handle.box.remove(!survived)
      handle.unwatch()
      handle.unregisterSecrets()
      state.watchdog?.unregister(handle.marker)
      state.open--
      removeLayer(state)
    })),
    Effect.annotateLogs({ pid: handle.pid }),
    Effect.withSpan("NodeTransport.teardown", { attributes: { pid: handle.pid } })
  )
}

// -----------------------------------------------------------------------------
// A box's handshake
// -----------------------------------------------------------------------------

/**
 * The box's handshake, after the spawn: waits (native timers, bounded by `isolationTimeout`) until the box's first
 * process (stage 1's child, the PID namespace's PID 1) has made its mounts and is in a user namespace of its own,
 * writes that namespace's maps, sends `mapped`, and waits for the CLI (the child of the namespace's first process,
 * once it has exec'd): its pid is the connection's. A box that ends before `mapped` fails the open with what its
 * first process said (its stderr: the helper's failed mount, for one).
 */
const mapBox = (
  settings: Settings,
  program: string,
  handle: Handle,
  { base }: { readonly base: number }
) =>
  Effect.callback<number, SpawnFailed>((resume) => {
    const { isolationMillis, ownUserNamespace } = settings
    const deadline = Date.now() + isolationMillis
    const pid = handle.pid
    let mapped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    let init: number | undefined
    const fail = (reason: string) => {
      // Stage 3 exits when its descriptor 3 ends without `mapped`.
      ;(handle.child.stdio[3] as Writable | null)?.destroy()
      resume(Effect.fail(new SpawnFailed({ program, reason })))
    }
    const said = () => {
      const tail = Effect.runSync(handle.connection.stderrTail).trim()
      return tail === "" ? "" : `: ${tail.split("\n").slice(-3).join(" / ")}`
    }
    const poll = () => {
      // Ended after `mapped`: the CLI ran (and ended before it was seen, perhaps); its exit status says how.
      if (handle.exited()) {
        return mapped
          ? resume(Effect.succeed((init === undefined ? undefined : Isolation.cliOf(init)) ?? pid))
          : fail(`the CLI's launcher exited before its box was made${said()}`)
      }
      // Stage 1's one child is the namespace's PID 1: its mounts made, it makes the box's user namespace.
      init ??= Isolation.children(pid)[0]
      if (!mapped && init !== undefined) {
        const namespace = Isolation.userNamespace(init)
        if (namespace !== undefined && namespace !== ownUserNamespace) {
          try {
            Isolation.writeMaps(init, base)
          } catch (error) {
            return fail(`could not write the uid and gid maps of the session's user namespace: ${describe(error)}`)
          }
          mapped = true
          handOver(handle.child.stdio[3], "mapped")
        }
      }
      if (mapped) {
        const cli = Isolation.cliOf(init!)
        if (cli !== undefined) return resume(Effect.succeed(cli))
      }
      if (Date.now() > deadline) {
        return fail(`the session's box was not made within ${isolationMillis} ms (isolationTimeout)`)
      }
      timer = setTimeout(poll, 2)
    }
    poll()
    return Effect.sync(() => clearTimeout(timer))
  })

// -----------------------------------------------------------------------------
// The service
// -----------------------------------------------------------------------------

/** `Transport.open`: the executable resolved, the session acquired in the caller's scope, its box mapped. */
const openConnection = (state: State) =>
  Effect.fn("NodeTransport.open")(function*(
    spec: Transport.LaunchSpec,
    teardownOptions: Transport.TeardownOptions
  ): Effect.fn.Return<Transport.Connection, SpawnError, Scope.Scope> {
    const file = yield* Executable.resolve({
      program: spec.program,
      path: state.settings.options?.executables?.[spec.program]
    })
    const cwd = Option.getOrUndefined(spec.cwd)
    if (cwd !== undefined && !isDirectory(cwd)) {
      return yield* new SpawnFailed({ program: spec.program, reason: `cwd ${cwd} is not a directory` })
    }
    const termGraceMillis = Duration.toMillis(teardownOptions.termGrace)
    const launch: Launch = {
      program: spec.program,
      file,
      spec,
      cwd: cwd === undefined ? undefined : Path.resolve(cwd),
      termGraceMillis
    }
    const handle = yield* Effect.acquireRelease(
      acquire(state, launch),
      (handle) => release(state, handle, termGraceMillis)
    )
    if (handle.isolated === undefined) return handle.connection
    // A failure here closes the scope as any other: the teardown ends what was started.
    const cli = yield* mapBox(state.settings, spec.program, handle, handle.isolated)
    handle.isolated.found(cli)
    return { ...handle.connection, pid: Option.some(cli) }
  })

/** What the layer reports: its containment, watchdog, limits, temporary directories and isolation, and why. */
const capabilitiesOfSettings = (settings: Settings): Transport.Capabilities => {
  const { resolved, limitsLayer, limitsRefused, isolationRefused, isolationProbe, isolated, privateTmp } = settings
  const note = resolved._tag === "ProcessTree" && resolved.fallback !== undefined
    ? `auto chose the process tree: no cgroup could be created (${resolved.fallback})`
    : resolved._tag === "Unavailable"
    ? `${resolved.requested} containment is unavailable (${resolved.reason}): every open fails with SpawnFailed`
    : undefined
  return capabilitiesFor({
    containment: Containment.mechanismOf(resolved),
    watchdog: settings.useWatchdog,
    note,
    parentDeathSignal: resolved._tag === "PidNamespace" && resolved.parentDeathSignal,
    limits: limitsLayer?.support ?? Limits.probe(resolved._tag === "Cgroup" ? resolved.layer.path : undefined),
    limitNotes: [
      ...(limitsLayer?.notes ?? []),
      ...(limitsRefused === undefined ? [] : [`${limitsRefused}: every open fails with SpawnFailed`]),
      ...(privateTmp && (!isolated || settings.isolationAuto)
        ? [
          "each session gets a private temporary directory (TMPDIR, TMP, TEMP), removed with what is in it when " +
          "the session is released; other paths (/tmp itself) are shared"
        ]
        : [])
    ],
    isolation: isolated && settings.isolationAuto
      ? "isolation: \"auto\" (the default): each session gets a box of its own where one can be made (see " +
        "isolation: true); a session whose executable (or its interpreter) other users may not execute, whose " +
        "directories' filesystem takes no " +
        "idmapped mount, or one every user shares (/tmp), runs without one (a warning says why): its tools " +
        "can read other sessions' environment, memory and files"
      : isolated
      ? true
      : isolationRefused !== undefined
      ? `${isolationRefused}: every open fails with SpawnFailed`
      : settings.options?.isolation === false
      ? "isolation between sessions is off (isolation: false): the sessions' tools run as the host's " +
        "user and can read each other's environment, memory and files, and signal each other"
      : settings.isolationAuto
      ? `isolation: "auto" makes no box here, every session runs without one: ${
        isolationProbe ?? "Windows has no namespaces"
      }`
      : isolationProbe ?? "isolation between sessions needs Linux namespaces"
  })
}

/**
 * Builds the transport service. The containment is decided here (a cgroup layer is created, or the PID namespace
 * probed); the watchdog (when enabled) is started at the first `open`; both are released when the enclosing scope
 * closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const settings = settingsOf(options)
  if (settings.isolated) {
    Isolation.sweep()
    Isolation.sweepLent()
  }
  const { resolved } = settings
  const state: State = {
    settings,
    watchdog: settings.useWatchdog ? Watchdog.make() : undefined,
    cgroupLayer: resolved._tag === "Cgroup" ? resolved.layer : undefined,
    services: yield* Effect.context<never>(),
    open: 0,
    released: false,
    watched: new Set(),
    table: ProcessTree.sharedTable("proc", Teardown.firstLookShareMillis),
    scanner: undefined
  }
  if (state.cgroupLayer !== undefined) state.watchdog?.layer(state.cgroupLayer.path, true)
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      state.released = true
      removeLayer(state)
      state.watchdog?.close()
    })
  )
  return Transport.Transport.of({ open: openConnection(state), capabilities: capabilitiesOfSettings(settings) })
})

export const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}
