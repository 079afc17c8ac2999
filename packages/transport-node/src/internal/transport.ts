/**
 * The transport service: the containment decided, the watchdog started, a connection opened per launch spec.
 *
 * @internal
 */
import { SpawnFailed } from "@tether/core/TetherError"
import type { SpawnError } from "@tether/core/TetherError"
import * as Transport from "@tether/core/Transport"
import type * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
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
import { buildEnvironment, findNul, secretsOf } from "./environment.ts"
import * as Isolation from "./isolation.ts"
import * as Limits from "./limits.ts"
import { handOver, planFor } from "./plans.ts"
import { isWindows } from "./platform.ts"
import * as ProcessTree from "./processTree.ts"
import * as Runnable from "./runnable.ts"
import * as Secrets from "./secrets.ts"
import { describe, spawnProcess } from "./spawn.ts"
import * as Teardown from "./teardown.ts"
import * as Watchdog from "./watchdog.ts"

/**
 * Builds the transport service. The containment is decided here (a cgroup layer is created, or the PID namespace
 * probed); the watchdog (when enabled) is started at the first `open`; both are released when the enclosing scope
 * closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const maxLineBytes = options?.maxLineBytes ?? defaultMaxLineBytes
  const stderrTailBytes = options?.stderrTailBytes ?? defaultStderrTailBytes
  const killGraceMillis = Duration.toMillis(options?.killGrace ?? defaultKillGrace)
  const scanMillis = Duration.toMillis(options?.scanInterval ?? defaultScanInterval)
  const useWatchdog = watchdogEnabled(options)
  const resolved = Containment.resolve(options?.containment ?? "auto")
  const backend = resolved._tag === "Cgroup" || resolved._tag === "PidNamespace"
    ? "proc" as const
    : resolved._tag === "ProcessTree"
    ? resolved.backend
    : undefined
  const watchdog = useWatchdog ? Watchdog.make() : undefined
  const limitsMillis = Duration.toMillis(options?.limitsInterval ?? defaultLimitsInterval)
  const privateTmp = (options?.privateTmp ?? true) && !isWindows
  const requestedLimits = options?.limits ?? {}
  const limitProblems = Limits.problems(requestedLimits)
  const limitsLayer = limitProblems.length === 0 && Limits.controllersOf(requestedLimits).length > 0 &&
      process.platform === "linux"
    ? Limits.makeLayer(requestedLimits, resolved._tag === "Cgroup" ? resolved.layer.path : undefined)
    : undefined
  // Why every open fails: limits asked for that cannot be (enforced here).
  const limitsRefused = limitProblems.length > 0
    ? limitProblems.join("; ")
    : Limits.controllersOf(requestedLimits).length > 0 && limitsLayer?.complete !== true
    ? `limits were asked for and cannot all be enforced here: ${limitsLayer?.notes.join("; ") ?? "cgroups are Linux's"}`
    : undefined
  // Isolation between sessions: on when asked for (`isolation: true`); asked for where it cannot be, every open fails.
  const isolationProbe = options?.isolation !== true || isWindows ? undefined : Isolation.probe()
  const isolated = isolationProbe === true
  const isolationRefused = options?.isolation === true && isolationProbe !== true
    ? `isolation between sessions was requested and is unavailable: ${isolationProbe ?? "Windows has no namespaces"}`
    : undefined
  const isolationMillis = Duration.toMillis(options?.isolationTimeout ?? defaultIsolationTimeout)
  const ownUserNamespace = isolated ? Isolation.userNamespace("self") : undefined
  if (isolated) Isolation.sweep()
  const services = yield* Effect.context<never>()

  // The layer's cgroup is removed when the layer is released and its last session is gone, whichever is last.
  let open = 0
  let released = false
  const cgroupLayer = resolved._tag === "Cgroup" ? resolved.layer : undefined
  const removeLayer = () => {
    if (!released || open > 0) return
    limitsLayer?.remove()
    if (cgroupLayer !== undefined && Cgroup.removeDir(cgroupLayer.path)) watchdog?.layer(cgroupLayer.path, false)
  }
  if (cgroupLayer !== undefined) watchdog?.layer(cgroupLayer.path, true)
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      released = true
      removeLayer()
      watchdog?.close()
    })
  )

  // What teardown never signals, whatever a tool wrote into its session's cgroup.procs: the host, its ancestors,
  // PID 1, the watchdog's keepers. Read at each look: a parent may exit, a keeper may be replaced meanwhile.
  const guarded = (): ReadonlySet<number> => {
    const pids = new Set(ProcessTree.ancestry(process.pid))
    for (const pid of watchdog?.pids() ?? []) pids.add(pid)
    return pids
  }

  // Periodic scans of the process-tree containment: one table read for every open tree of the layer.
  const watched = new Set<ProcessTree.Tree>()
  let scanner: ReturnType<typeof setInterval> | undefined
  const watch = (tree: ProcessTree.Tree): () => void => {
    if (scanMillis <= 0 || backend !== "proc") return () => {}
    watched.add(tree)
    if (scanner === undefined) {
      scanner = setInterval(() => {
        try {
          const table = ProcessTree.readTable("proc")
          for (const each of watched) each.scan(table)
        } catch {
          // An unreadable table this time: teardown reads it again.
        }
      }, scanMillis)
      scanner.unref()
    }
    return () => {
      watched.delete(tree)
      if (watched.size === 0 && scanner !== undefined) {
        clearInterval(scanner)
        scanner = undefined
      }
    }
  }

  const acquire = (
    program: string,
    file: string,
    spec: Transport.LaunchSpec,
    cwd: string | undefined,
    termGraceMillis: number
  ): Effect.Effect<Handle, SpawnFailed> =>
    Effect.gen(function*() {
      if (resolved._tag === "Unavailable") {
        return yield* new SpawnFailed({
          program,
          reason: `${resolved.requested} containment was requested and is unavailable: ${resolved.reason}`
        })
      }
      if (limitsRefused !== undefined) return yield* new SpawnFailed({ program, reason: limitsRefused })
      if (isolationRefused !== undefined) return yield* new SpawnFailed({ program, reason: isolationRefused })
      const secrets = secretsOf(spec)
      // Scrubbed of every open connection's secrets too: a tool that reads another session's key hands it on to
      // this session's host otherwise.
      const scrub = Secrets.forConnection(Secrets.make(secrets))
      const token = randomUUID()
      const marker = `${markerVariable}=${token}`
      const env = buildEnvironment(spec.env)
      env[markerVariable] = token
      // The box: a uid range of its own, its directories lent to it, its /tmp (see isolation.ts).
      const box = isolated ? yield* makeBox(program, file, spec, cwd) : undefined
      const plan = planFor(resolved, file, spec.args, limitsLayer !== undefined, box)
      const secretPipes = spec.secretPipes ?? []
      if (secretPipes.length > 0 && isWindows) {
        return yield* new SpawnFailed({ program, reason: "secret pipes are not supported on Windows" })
      }
      secretPipes.forEach((pipe, i) => {
        env[pipe.variable] = String(plan.firstSecretFd + i)
      })
      if (plan.firstSecretFd === 4) {
        const absent = Cgroup.shellVariables.filter((name) => env[name] === undefined)
        if (absent.length > 0) env.TETHER_LAUNCHER_UNSET = absent.join(" ")
      }
      const nul = findNul(file, spec.args, env)
      if (nul !== undefined) {
        box?.undo()
        return yield* new SpawnFailed({ program, reason: nul })
      }
      const unrunnable = Runnable.check(file, env.PATH)
      if (unrunnable !== undefined) {
        box?.undo()
        return yield* new SpawnFailed({ program, reason: scrub(unrunnable) })
      }

      const session = cgroupLayer?.session()
      const limits = yield* Effect.try({
        try: () => limitsLayer?.session(session?.path),
        catch: (error) => new SpawnFailed({ program, reason: `could not set the session's limits: ${describe(error)}` })
      }).pipe(Effect.tapError(() =>
        Effect.sync(() => {
          session?.remove()
          box?.undo()
        })
      ))
      // The session's private temporary directory, unless the host set TMPDIR itself (a box has its own: /tmp).
      const tmp = box !== undefined ? undefined : privateTmp && !Object.hasOwn(spec.env.set, "TMPDIR")
        ? yield* Effect.try({
          try: () => Box.makeTmp(),
          catch: (error) =>
            new SpawnFailed({
              program,
              reason: `could not create the session's temporary directory: ${describe(error)}`
            })
        }).pipe(Effect.tapError(() =>
          Effect.sync(() => {
            session?.remove()
            limits?.remove()
          })
        ))
        : undefined
      const tmpVariable = box !== undefined && privateTmp && !Object.hasOwn(spec.env.set, "TMPDIR") ? "/tmp" : tmp
      if (tmpVariable !== undefined) {
        env.TMPDIR = tmpVariable
        env.TMP = tmpVariable
        env.TEMP = tmpVariable
      }
      // `clean`: nothing of the session survived its teardown, so its uid range may be given to another.
      const removeBox = (clean = true) => {
        limits?.remove()
        if (tmp !== undefined) Box.removeTmp(tmp)
        box?.undo(clean)
      }
      const stdio: Array<"pipe" | "ignore"> = ["pipe", "pipe", "pipe"]
      if (plan.firstSecretFd === 4) stdio.push("pipe")
      for (let i = 0; i < secretPipes.length; i++) stdio.push("pipe")
      // Registered before the spawn: there is no moment where the CLI runs and the watchdog does not know it.
      watchdog?.register(marker, termGraceMillis, session?.path)
      const unregisterSecrets = Secrets.register(secrets)
      const unregister = Effect.sync(() => {
        watchdog?.unregister(marker)
        session?.remove()
        removeBox()
        unregisterSecrets()
      })
      open++
      const { child, placed: start } = yield* spawnProcess(program, plan.file, plan.args, {
        cwd,
        env,
        stdio,
        // Its own session and process group (setsid): terminal signals aimed at the host do not reach it, and its
        // session id names the tree.
        detached: !isWindows,
        windowsHide: true
      }, (child) => {
        // Before control returns to the event loop, so the child cannot have been reaped and its pid reused.
        const start = backend === "proc" ? ProcessTree.readStat(child.pid!)?.start : undefined
        if (session !== undefined) {
          try {
            session.place(child.pid!)
          } catch (error) {
            throw new Error(`could not place the CLI in its cgroup ${session.path}: ${describe(error)}`)
          }
        }
        if (limits !== undefined) {
          try {
            limits.place(child.pid!)
          } catch (error) {
            throw new Error(`could not place the CLI in its limits' cgroups: ${describe(error)}`)
          }
        }
        // Placed: the launcher may exec the CLI now.
        if (box !== undefined) (child.stdio[3] as Writable).write("go\n")
        else if (plan.firstSecretFd === 4) handOver(child.stdio[3], "go")
        return start
      }, scrub).pipe(
        Effect.tapError(() =>
          Effect.andThen(
            unregister,
            Effect.sync(() => {
              open--
              removeLayer()
            })
          )
        )
      )
      secretPipes.forEach((pipe, i) => handOver(child.stdio[plan.firstSecretFd + i], Redacted.value(pipe.value)))
      const pid = child.pid!
      watchdog?.setRoot(marker, pid, start)
      let exitedNow = () => false
      // The CLI's pid: the launcher's, until a box's handshake finds the CLI in its namespace.
      let cliPid = pid
      const hits = limits === undefined ? undefined : yield* Queue.unbounded<Transport.LimitHit, Cause.Done>()
      const limitWatch = limits === undefined || hits === undefined ? undefined : Box.watchLimits({
        session: limits,
        requested: requestedLimits,
        pid: () => cliPid,
        exited: () => exitedNow(),
        intervalMillis: limitsMillis,
        report: (hit) => {
          Queue.offerUnsafe(hits, hit)
          Effect.runSyncWith(services)(
            Effect.andThen(
              Effect.logWarning(
                `a process of the session hit its ${hit.limit} limit (${hit.max}): ` +
                  (hit.limit === "memory" ? `${hit.count} OOM kill(s)` : `${hit.count} fork(s) refused`),
                hit
              ),
              Metric.update(Metric.withAttributes(limitHitsMetric, { limit: hit.limit }), hit.count)
            ).pipe(Effect.annotateLogs({ pid }))
          )
        }
      })
      const { connection, exited } = makeConnection(child, {
        maxLineBytes,
        stderrTailBytes,
        scrub,
        outOfMemory: limitWatch?.outOfMemory,
        limitHits: hits === undefined ? undefined : Stream.fromQueue(hits)
      })
      exitedNow = exited
      const extras = {
        lastLook: () => {
          limitWatch?.lastLook()
          if (hits !== undefined) Queue.endUnsafe(hits)
        },
        remove: removeBox
      }
      const rootOnly = (): ReadonlyArray<ProcessTree.ProcessInfo> =>
        exited() ? [] : [{ pid, ppid: 0, pgid: pid, sid: -1, zombie: false, start: "" }]
      let container: Teardown.Container
      let unwatch = () => {}
      if (session !== undefined) {
        // The process tree too, read by teardown twice: what it finds outside the cgroup left it (a root tool can).
        const tree = ProcessTree.make({ backend: "proc", rootPid: pid, rootStart: start, rootReaped: exited, marker })
        container = Teardown.cgroupContainer(
          session,
          guarded,
          () => exited() ? undefined : pid,
          () => tree.scan()
        )
      } else if (backend === undefined) {
        container = Teardown.windowsContainer(pid, rootOnly)
      } else {
        const tree = ProcessTree.make({ backend, rootPid: pid, rootStart: start, rootReaped: exited, marker })
        if (resolved._tag === "PidNamespace") {
          // unshare is spared SIGTERM: its death would SIGKILL the namespace before the CLI could end cleanly.
          container = Teardown.treeContainer("pid-namespace", tree, rootOnly, pid)
        } else {
          container = Teardown.treeContainer("process-tree", tree, rootOnly)
          unwatch = watch(tree)
        }
      }
      // An isolated session's stage 1 is the transport's, as a launcher is: never signalled by itself nor counted (it
      // ends when the CLI does; cgroup.kill, or the CLI's parent-death signal the other way round).
      if (box !== undefined) container = Teardown.sparing(container, pid)
      return {
        child,
        pid,
        marker,
        container,
        exited,
        connection,
        scrub,
        unregisterSecrets,
        unwatch,
        box: extras,
        isolated: box === undefined ? undefined : {
          base: box.base,
          found: (cli: number) => {
            cliPid = cli
          }
        }
      }
    })

  const release = (handle: Handle, termGraceMillis: number) => {
    let survived = false
    return Effect.callback<Teardown.Report>((resume) =>
      Effect.sync(
        Teardown.run({
          child: handle.child,
          exited: handle.exited,
          container: handle.container,
          termGraceMillis,
          killGraceMillis,
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
        watchdog?.unregister(handle.marker)
        open--
        removeLayer()
      })),
      Effect.annotateLogs({ pid: handle.pid }),
      Effect.withSpan("NodeTransport.teardown", { attributes: { pid: handle.pid } })
    )
  }

  /**
   * A session's box, before its spawn: a uid range of its own, its private /tmp directory and the directories it
   * keeps visible under /tmp (owned by its range), its workspace and config directories lent to its range.
   */
  const makeBox = (program: string, file: string, spec: Transport.LaunchSpec, cwd: string | undefined) =>
    Effect.suspend(() => {
      // The CLI runs as the session's uid, which owns nothing of the host's: it must reach the executable and its
      // directories. Where it cannot (a repository or workspace under a directory only its owner may enter, as
      // `mktemp -d` makes them), the open fails saying why.
      const denied = Isolation.unreachable(file) ??
        Isolation.unreachableDirectories(Isolation.directoriesOf(spec, cwd, file).lent)
      if (denied !== undefined) {
        const reason = `the session's uid cannot run its CLI: ${denied}`
        return Effect.fail(new SpawnFailed({ program, reason: `could not make the session's box: ${reason}` }))
      }
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
        try: () => {
          const directories = Isolation.directoriesOf(spec, cwd, file)
          for (const dir of directories.lent) {
            if (Path.resolve(dir) === "/") throw new Error("the workspace or config directory is /")
            lent.push(Isolation.lend(dir, range.base))
          }
          tmp = Box.makeTmp()
          Fs.chownSync(tmp, range.base, range.base)
          const keep = Isolation.keepUnderTmp(tmp, directories.kept, range.base)
          return { tmp, keep, base: range.base, undo }
        },
        catch: (error) => {
          undo()
          return new SpawnFailed({ program, reason: `could not make the session's box: ${describe(error)}` })
        }
      })
    })

  /**
   * The box's handshake, after the spawn: waits (native timers, bounded by `isolationTimeout`) until the launcher is
   * in a user namespace of its own, writes its maps, sends `mapped`, and waits for the CLI (the child of the
   * namespace's first process, once it has exec'd): its pid is the connection's.
   */
  const mapBox = (program: string, handle: Handle, base: number) =>
    Effect.callback<number, SpawnFailed>((resume) => {
      const deadline = Date.now() + isolationMillis
      const pid = handle.pid
      let mapped = false
      let timer: ReturnType<typeof setTimeout> | undefined
      let cli: number | undefined
      const fail = (reason: string) => {
        // Stage 1 exits when its descriptor 3 ends without `mapped`.
        ;(handle.child.stdio[3] as Writable | null)?.destroy()
        resume(Effect.fail(new SpawnFailed({ program, reason })))
      }
      const poll = () => {
        // Ended after `mapped`: the CLI ran (and ended before it was seen, perhaps); its exit status says how.
        if (handle.exited()) {
          return mapped ? resume(Effect.succeed(cli ?? pid)) : fail("the CLI's launcher exited before its box was made")
        }
        if (!mapped) {
          const namespace = Isolation.userNamespace(pid)
          if (namespace !== undefined && namespace !== ownUserNamespace) {
            try {
              Isolation.writeMaps(pid, base)
            } catch (error) {
              return fail(`could not write the uid and gid maps of the session's user namespace: ${describe(error)}`)
            }
            mapped = true
            handOver(handle.child.stdio[3], "mapped")
          }
        }
        if (mapped) {
          // Stage 1's child is the namespace's PID 1 (stage 2), whose child is the CLI.
          const [init] = Isolation.children(pid)
          cli = init === undefined ? undefined : Isolation.cliOf(init)
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

  const openConnection = Effect.fn("NodeTransport.open")(function*(
    spec: Transport.LaunchSpec,
    teardownOptions: Transport.TeardownOptions
  ): Effect.fn.Return<Transport.Connection, SpawnError, Scope.Scope> {
    const file = yield* Executable.resolve({ program: spec.program, path: options?.executables?.[spec.program] })
    const cwd = Option.getOrUndefined(spec.cwd)
    if (cwd !== undefined && !isDirectory(cwd)) {
      return yield* new SpawnFailed({ program: spec.program, reason: `cwd ${cwd} is not a directory` })
    }
    const termGraceMillis = Duration.toMillis(teardownOptions.termGrace)
    const handle = yield* Effect.acquireRelease(
      acquire(spec.program, file, spec, cwd === undefined ? undefined : Path.resolve(cwd), termGraceMillis),
      (handle) => release(handle, termGraceMillis)
    )
    if (handle.isolated === undefined) return handle.connection
    // A failure here closes the scope as any other: the teardown ends what was started.
    const cli = yield* mapBox(spec.program, handle, handle.isolated.base)
    handle.isolated.found(cli)
    return { ...handle.connection, pid: Option.some(cli) }
  })

  const note = resolved._tag === "ProcessTree" && resolved.fallback !== undefined
    ? `auto chose the process tree: no cgroup could be created (${resolved.fallback})`
    : resolved._tag === "Unavailable"
    ? `${resolved.requested} containment is unavailable (${resolved.reason}): every open fails with SpawnFailed`
    : undefined
  return Transport.Transport.of({
    open: openConnection,
    capabilities: capabilitiesFor({
      containment: Containment.mechanismOf(resolved),
      watchdog: useWatchdog,
      note,
      parentDeathSignal: resolved._tag === "PidNamespace" && resolved.parentDeathSignal,
      limits: limitsLayer?.support ?? Limits.probe(resolved._tag === "Cgroup" ? resolved.layer.path : undefined),
      limitNotes: [
        ...(limitsLayer?.notes ?? []),
        ...(limitsRefused === undefined ? [] : [`${limitsRefused}: every open fails with SpawnFailed`]),
        ...(privateTmp && !isolated
          ? [
            "each session gets a private temporary directory (TMPDIR, TMP, TEMP), removed with what is in it when " +
            "the session is released; other paths (/tmp itself) are shared"
          ]
          : [])
      ],
      isolation: isolated
        ? true
        : isolationRefused !== undefined
        ? `${isolationRefused}: every open fails with SpawnFailed`
        : options?.isolation !== true
        ? "isolation between sessions is off (isolation: true turns it on): the sessions' tools run as the host's " +
          "user and can read each other's environment, memory and files, and signal each other"
        : isolationProbe ?? "isolation between sessions needs Linux namespaces"
    })
  })
})

export const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}
