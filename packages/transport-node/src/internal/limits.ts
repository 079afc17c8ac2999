/**
 * Per-session resource limits (Linux): the memory, the number of processes and the CPU time of a session's whole
 * tree, enforced by the kernel's cgroup controllers, and the limits hit, read from their counters.
 *
 * Where each controller is: in the cgroup v2 hierarchy, when the layer's cgroup can enable it for its sessions
 * (`cgroup.subtree_control`: the host's own cgroup must offer it, which a cgroup that holds processes cannot do for
 * its children unless it is the root: the no-internal-processes rule); else in a cgroup v1 hierarchy that has it
 * (a machine whose v2 tree offers none, like the ones these tests run on), where each layer gets a cgroup of its own
 * under the host's (`tether-<host pid>-<random>`) and each session one in it (`s<n>`), into which the CLI is placed
 * with its v2 cgroup, before it can fork. A process stays in its v1 cgroups whatever it does, unless it moves itself
 * (root can: the v2 cgroup's teardown still finds it).
 *
 * What is written (v2 / v1): memory `memory.max` (and `memory.swap.max` 0) / `memory.limit_in_bytes` (and
 * `memory.memsw.limit_in_bytes`, the same, where swap is accounted); processes `pids.max` / `pids.max`; CPU
 * `cpu.max` / `cpu.cfs_quota_us` over `cpu.cfs_period_us` (100 ms).
 *
 * What is read: OOM kills, `memory.events` `oom_kill` (v2) / `memory.oom_control` `oom_kill` (v1); refused forks,
 * `pids.events` `max` (both). An OOM kill whose victim is the CLI is its exit status; the others are the tools'.
 *
 * @internal
 */
import type * as Transport from "@tether/core/Transport"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Cgroup from "./cgroup.ts"
import * as DeadHosts from "./deadHosts.ts"
import * as KernelFiles from "./kernelFiles.ts"

/** The limits a host asks for (see `NodeTransport.Limits`). @internal */
export interface Requested {
  readonly memoryBytes?: number | undefined
  readonly processes?: number | undefined
  readonly cpus?: number | undefined
}

/** A controller of the kernel's. @internal */
export type Controller = "memory" | "pids" | "cpu"

/** A file to write, in order; `optional` ones are skipped where they do not exist (swap not accounted). */
export interface Write {
  readonly file: string
  readonly value: string
  readonly optional?: boolean
}

/** The CFS period the CPU limit is expressed over (100 ms, the kernel's default). @internal */
export const cpuPeriodMicros = 100_000

const cpuQuota = (cpus: number): number => Math.max(1_000, Math.round(cpus * cpuPeriodMicros))

/** The controllers a request needs. @internal */
export const controllersOf = (limits: Requested): ReadonlyArray<Controller> => {
  const out: Array<Controller> = []
  if (limits.memoryBytes !== undefined) out.push("memory")
  if (limits.processes !== undefined) out.push("pids")
  if (limits.cpus !== undefined) out.push("cpu")
  return out
}

/** What is written into a session's cgroup for `controller`, on cgroup v2 (pure). @internal */
export const v2Writes = (limits: Requested, controller: Controller): ReadonlyArray<Write> => {
  switch (controller) {
    case "memory":
      return limits.memoryBytes === undefined ? [] : [
        { file: "memory.max", value: String(limits.memoryBytes) },
        { file: "memory.swap.max", value: "0", optional: true }
      ]
    case "pids":
      return limits.processes === undefined ? [] : [{ file: "pids.max", value: String(limits.processes) }]
    case "cpu":
      return limits.cpus === undefined
        ? []
        : [{ file: "cpu.max", value: `${cpuQuota(limits.cpus)} ${cpuPeriodMicros}` }]
  }
}

/** What is written into a session's cgroup of the v1 hierarchy of `controller` (pure). @internal */
export const v1Writes = (limits: Requested, controller: Controller): ReadonlyArray<Write> => {
  switch (controller) {
    case "memory":
      // memsw (memory + swap) must stay at or above the memory limit: written after it.
      return limits.memoryBytes === undefined ? [] : [
        { file: "memory.limit_in_bytes", value: String(limits.memoryBytes) },
        { file: "memory.memsw.limit_in_bytes", value: String(limits.memoryBytes), optional: true }
      ]
    case "pids":
      return limits.processes === undefined ? [] : [{ file: "pids.max", value: String(limits.processes) }]
    case "cpu":
      return limits.cpus === undefined ? [] : [
        { file: "cpu.cfs_period_us", value: String(cpuPeriodMicros) },
        { file: "cpu.cfs_quota_us", value: String(cpuQuota(limits.cpus)) }
      ]
  }
}

/** Why a request cannot be a limit (a problem per field), empty when it can. @internal */
export const problems = (limits: Requested): ReadonlyArray<string> => {
  const out: Array<string> = []
  if (limits.memoryBytes !== undefined && !(Number.isSafeInteger(limits.memoryBytes) && limits.memoryBytes > 0)) {
    out.push("limits.memoryBytes must be a positive integer")
  }
  if (limits.processes !== undefined && !(Number.isSafeInteger(limits.processes) && limits.processes > 0)) {
    out.push("limits.processes must be a positive integer")
  }
  if (limits.cpus !== undefined && !(Number.isFinite(limits.cpus) && limits.cpus > 0)) {
    out.push("limits.cpus must be a positive number")
  }
  return out
}

/**
 * The v1 hierarchies of the controllers and the host's cgroup in each (pure: the text of `/proc/self/mountinfo`
 * and `/proc/self/cgroup`). A controller absent from the result has no v1 hierarchy here.
 *
 * @internal
 */
export const locateV1 = (
  mountinfo: string,
  cgroup: string
): Partial<Record<Controller, { readonly mount: string; readonly own: string }>> => {
  const out: Partial<Record<Controller, { readonly mount: string; readonly own: string }>> = {}
  const paths = new Map<string, string>()
  for (const line of cgroup.split("\n")) {
    // `id:controllers:path`
    const match = /^[0-9]+:([^:]*):(.*)$/.exec(line)
    if (match === null || match[1].length === 0) continue
    for (const name of match[1].split(",")) paths.set(name, match[2])
  }
  for (const line of mountinfo.split("\n")) {
    const dash = line.indexOf(" - ")
    if (dash === -1) continue
    const [fstype, , superOptions] = line.slice(dash + 3).split(" ")
    if (fstype !== "cgroup" || superOptions === undefined) continue
    const fields = line.slice(0, dash).split(" ")
    const root = unescape(fields[3])
    const point = unescape(fields[4])
    const options = new Set(superOptions.split(","))
    for (const controller of ["memory", "pids", "cpu"] as const) {
      const path = paths.get(controller)
      if (!options.has(controller) || path === undefined || out[controller] !== undefined) continue
      const relative = root === "/" ? path : path.startsWith(root) ? path.slice(root.length) : undefined
      if (relative === undefined) continue
      const own = Path.join(point, relative)
      out[controller] = { mount: point, own: own.length > 1 && own.endsWith("/") ? own.slice(0, -1) : own }
    }
  }
  return out
}

const unescape = (field: string): string =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))

/** A counter of a controller's: `key N` in `file` (a flat-keyed file), 0 where it cannot be read. @internal */
export const readCounter = (file: string, key: string): number => {
  let text: string
  try {
    text = KernelFiles.readText(file)
  } catch {
    return 0
  }
  const match = new RegExp(`^${key} ([0-9]+)$`, "m").exec(text)
  return match === null ? 0 : Number(match[1])
}

/** One session's limits: its v1 cgroups (if any), its counters. @internal */
export interface Session {
  /** Places a process in the session's v1 cgroups (its v2 one is the containment's). Throws on failure. */
  readonly place: (pid: number) => void
  /** The OOM kills in the session's tree so far. */
  readonly oomKills: () => number
  /** The forks refused at the process limit so far. */
  readonly forkFailures: () => number
  /** Removes the session's v1 cgroups: false while a process is in one. */
  readonly remove: () => boolean
}

/** A layer's limits: what this machine enforces, and each session's. @internal */
export interface Layer {
  readonly requested: Requested
  readonly support: Transport.LimitSupport
  /** Why a limit asked for is not enforced, and how the others are. */
  readonly notes: ReadonlyArray<string>
  /** Every limit asked for is enforced. */
  readonly complete: boolean
  /** Makes a session's limits: written into its v2 cgroup (`v2`) and the v1 cgroups made here. Throws on failure. */
  readonly session: (v2: string | undefined) => Session
  /** Removes the layer's v1 cgroups (when its sessions' are gone). */
  readonly remove: () => void
}

type Where =
  | { readonly _tag: "V2" }
  | { readonly _tag: "V1"; readonly layer: string }
  | { readonly _tag: "Missing"; readonly reason: string }

const writeAll = (dir: string, writes: ReadonlyArray<Write>) => {
  for (const write of writes) {
    try {
      Fs.writeFileSync(Path.join(dir, write.file), write.value)
    } catch (error) {
      if (write.optional === true && (error as NodeJS.ErrnoException).code === "ENOENT") continue
      throw new Error(`could not write ${write.value} to ${Path.join(dir, write.file)}: ${code(error)}`)
    }
  }
}

const code = (error: unknown): string =>
  (error as NodeJS.ErrnoException | undefined)?.code ?? (error instanceof Error ? error.message : String(error))

const readText = (file: string): string => {
  try {
    return KernelFiles.readText(file)
  } catch {
    return ""
  }
}

/**
 * Enables the controllers it can in the v2 layer's `cgroup.subtree_control` (its sessions' cgroups get them), after
 * offering them from the host's own cgroup where it can. Returns the controllers the sessions' cgroups have.
 */
const enableV2 = (layer: string, wanted: ReadonlyArray<Controller>): ReadonlySet<Controller> => {
  const own = Path.dirname(layer)
  const enabled = new Set<Controller>()
  for (const controller of wanted) {
    const offered = () => readText(Path.join(layer, "cgroup.controllers")).split(/\s+/).includes(controller)
    if (!offered()) {
      try {
        Fs.writeFileSync(Path.join(own, "cgroup.subtree_control"), `+${controller}`)
      } catch {
        // The host's cgroup holds processes (EBUSY) or does not have the controller itself.
      }
    }
    if (!offered()) continue
    try {
      Fs.writeFileSync(Path.join(layer, "cgroup.subtree_control"), `+${controller}`)
      enabled.add(controller)
    } catch {
      // Not delegated to this host.
    }
  }
  return enabled
}

/**
 * Sets up a layer's limits: the v2 controllers enabled in the layer's v2 cgroup (`v2Layer`, the containment's), a
 * v1 cgroup per controller the v2 tree does not offer. Where a controller is neither, its limit is not enforced
 * (`support` and `notes` say so, and the transport decides whether that fails its opens).
 *
 * @internal
 */
export const makeLayer = (requested: Requested, v2Layer: string | undefined): Layer => {
  const wanted = controllersOf(requested)
  const v2 = v2Layer === undefined ? new Set<Controller>() : enableV2(v2Layer, wanted)
  let v1: Partial<Record<Controller, { readonly mount: string; readonly own: string }>> = {}
  if (process.platform === "linux" && wanted.some((controller) => !v2.has(controller))) {
    try {
      v1 = locateV1(Fs.readFileSync("/proc/self/mountinfo", "utf8"), Fs.readFileSync("/proc/self/cgroup", "utf8"))
    } catch {
      v1 = {}
    }
  }
  const name = `tether-${process.pid}-${randomBytes(4).toString("hex")}`
  const where = new Map<Controller, Where>()
  for (const controller of wanted) {
    if (v2.has(controller)) {
      where.set(controller, { _tag: "V2" })
      continue
    }
    const hierarchy = v1[controller]
    if (hierarchy === undefined) {
      where.set(controller, {
        _tag: "Missing",
        reason: v2Layer === undefined
          ? `no cgroup v2 containment and no cgroup v1 ${controller} hierarchy`
          : `the cgroup v2 tree does not offer ${controller} to the host's cgroup's children (cgroup.subtree_control; ` +
            `a cgroup that holds processes cannot enable it unless it is the root) and there is no cgroup v1 ` +
            `${controller} hierarchy`
      })
      continue
    }
    sweep(hierarchy.own)
    const layer = Path.join(hierarchy.own, name)
    try {
      Fs.mkdirSync(layer)
      where.set(controller, { _tag: "V1", layer })
    } catch (error) {
      where.set(controller, {
        _tag: "Missing",
        reason: `cannot create a cgroup under ${hierarchy.own} (${code(error)}): not root and no delegated subtree`
      })
    }
  }
  const enforced = (controller: Controller) => {
    const at = where.get(controller)
    return at !== undefined && at._tag !== "Missing"
  }
  const notes: Array<string> = []
  for (const [controller, at] of where) {
    notes.push(
      at._tag === "V2"
        ? `the ${controller} limit is enforced by the session's cgroup v2`
        : at._tag === "V1"
        ? `the ${controller} limit is enforced by a cgroup v1 per session under ${Path.dirname(at.layer)}`
        : `the ${controller} limit is not enforced: ${at.reason}`
    )
  }
  let sessions = 0
  const v1Layers = [...where.values()].flatMap((at) => at._tag === "V1" ? [at.layer] : [])
  return {
    requested,
    support: {
      memory: enforced("memory"),
      processes: enforced("pids"),
      cpu: enforced("cpu")
    },
    notes,
    complete: wanted.every(enforced),
    session: (v2Session) => {
      const n = ++sessions
      const dirs = new Map<Controller, string>()
      const made: Array<string> = []
      const undo = () => {
        for (const dir of made) Cgroup.removeTree(dir)
      }
      try {
        for (const [controller, at] of where) {
          if (at._tag === "V2") {
            if (v2Session !== undefined) {
              writeAll(v2Session, v2Writes(requested, controller))
              dirs.set(controller, v2Session)
            }
          } else if (at._tag === "V1") {
            const dir = Path.join(at.layer, `s${n}`)
            Fs.mkdirSync(dir)
            made.push(dir)
            writeAll(dir, v1Writes(requested, controller))
            dirs.set(controller, dir)
          }
        }
      } catch (error) {
        undo()
        throw error
      }
      const memory = dirs.get("memory")
      const pids = dirs.get("pids")
      const memoryV2 = where.get("memory")?._tag === "V2"
      return {
        place: (pid) => {
          for (const dir of made) Fs.writeFileSync(Path.join(dir, "cgroup.procs"), `${pid}\n`)
        },
        oomKills: () =>
          memory === undefined
            ? 0
            : readCounter(Path.join(memory, memoryV2 ? "memory.events" : "memory.oom_control"), "oom_kill"),
        forkFailures: () => pids === undefined ? 0 : readCounter(Path.join(pids, "pids.events"), "max"),
        remove: () => made.every((dir) => Cgroup.removeTree(dir))
      }
    },
    remove: () => {
      for (const layer of v1Layers) Cgroup.removeTree(layer)
    }
  }
}

/** Removes the empty v1 cgroups of layers whose host is dead (as the v2 layer's sweep does). */
const sweep = (own: string): void => DeadHosts.sweep(own, Cgroup.layerName, Cgroup.removeTree)

/**
 * What this machine could enforce for a layer that asked for no limits (nothing is created): a controller the v2
 * layer's cgroup is offered, or a v1 hierarchy of it whose host cgroup is writable.
 *
 * @internal
 */
export const probe = (v2Layer: string | undefined): Transport.LimitSupport => {
  if (process.platform !== "linux") return { memory: false, processes: false, cpu: false }
  const offered = v2Layer === undefined
    ? []
    : readText(Path.join(Path.dirname(v2Layer), "cgroup.subtree_control")).split(/\s+/)
  let v1: Partial<Record<Controller, { readonly mount: string; readonly own: string }>> = {}
  try {
    v1 = locateV1(Fs.readFileSync("/proc/self/mountinfo", "utf8"), Fs.readFileSync("/proc/self/cgroup", "utf8"))
  } catch {
    v1 = {}
  }
  const can = (controller: Controller) => {
    if (offered.includes(controller)) return true
    const hierarchy = v1[controller]
    if (hierarchy === undefined) return false
    try {
      Fs.accessSync(hierarchy.own, Fs.constants.W_OK)
      return true
    } catch {
      return false
    }
  }
  return { memory: can("memory"), processes: can("pids"), cpu: can("cpu") }
}
