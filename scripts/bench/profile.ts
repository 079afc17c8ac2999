/**
 * Reads a V8 `.cpuprofile` (from `node --cpu-prof`) and ranks self time by function (with file:line) and by file.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { root } from "./fake.ts"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
}
interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

export interface Entry {
  readonly name: string
  readonly where: string
  readonly selfMs: number
  readonly share: number
}

export interface ProfileSummary {
  readonly file: string
  readonly totalMs: number
  readonly functions: ReadonlyArray<Entry>
  readonly files: ReadonlyArray<Entry>
}

const shortUrl = (url: string): string => {
  if (url === "") return "(native)"
  const path = url.startsWith("file://") ? decodeURIComponent(new URL(url).pathname) : url
  const relative = Path.relative(root, path)
  // pnpm's store paths are long: keep the package and the path inside it.
  const store = /node_modules\/\.pnpm\/[^/]+\/node_modules\/(.*)$/.exec(relative)
  if (store) return `node_modules/${store[1]}`
  return relative.startsWith("..") ? path : relative
}

/** Self time by function and by file, idle time left out; `top` rows of each. */
export const summarizeProfile = (file: string, top = 15): ProfileSummary => {
  const profile = JSON.parse(Fs.readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<number, number>()
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  }
  const functions = new Map<string, { name: string; where: string; us: number }>()
  const files = new Map<string, number>()
  let totalUs = 0
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame
    // Idle time, and the profiler's own stop call (runner.ts stops it inside the process), are not the host's work.
    if (frame.functionName === "(idle)" || frame.url === "node:inspector") continue
    totalUs += us
    const url = shortUrl(frame.url)
    const where = frame.url === "" ? url : `${url}:${frame.lineNumber + 1}`
    const name = frame.functionName === "" ? "(anonymous)" : frame.functionName
    const key = `${name} ${where}`
    const entry = functions.get(key) ?? { name, where, us: 0 }
    entry.us += us
    functions.set(key, entry)
    const fileKey = frame.url === "" ? name : url
    files.set(fileKey, (files.get(fileKey) ?? 0) + us)
  }
  const rank = (entries: Array<{ name: string; where: string; us: number }>): Array<Entry> =>
    entries
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((e) => ({ name: e.name, where: e.where, selfMs: e.us / 1000, share: e.us / totalUs }))
  return {
    file: Path.relative(root, file),
    totalMs: totalUs / 1000,
    functions: rank([...functions.values()]),
    files: rank([...files].map(([where, us]) => ({ name: where, where, us })))
  }
}

/** A markdown rendering of a summary. */
export const renderProfile = (title: string, summary: ProfileSummary): string => {
  const lines = [
    `#### ${title}`,
    "",
    `Profile \`${summary.file}\`, ${summary.totalMs.toFixed(0)} ms of samples outside idle.`,
    "",
    "| self ms | share | function | file:line |",
    "| ---: | ---: | --- | --- |",
    ...summary.functions.map((e) =>
      `| ${e.selfMs.toFixed(1)} | ${(e.share * 100).toFixed(1)}% | \`${e.name}\` | ${e.where} |`
    ),
    "",
    "| self ms | share | file |",
    "| ---: | ---: | --- |",
    ...summary.files.map((e) => `| ${e.selfMs.toFixed(1)} | ${(e.share * 100).toFixed(1)}% | ${e.where} |`),
    ""
  ]
  return lines.join("\n")
}

if (import.meta.main) {
  for (const file of process.argv.slice(2)) console.log(renderProfile(file, summarizeProfile(file, 25)))
}
