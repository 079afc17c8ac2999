/**
 * What a host's first session leaves on the heap, by kind and by source file: the `memory` figure's "heap, first
 * session" taken apart. Two heap snapshots (V8's, through the inspector, each after a full GC): after the host's
 * modules are loaded, and after its first session has opened and run one 3-frame turn (what the memory figure
 * measures). The objects in the second and not in the first are the first session's; the code among them
 * (bytecode, its constant pools, source positions, scope infos and feedback metadata) is attributed to the function
 * it belongs to, and so to its script. It also prints the net growth between the two snapshots, the measure closer
 * to the memory figure's (which reads `heapUsed`); the new objects are more than that, since objects of the first
 * snapshot freed since are not subtracted from them.
 *
 *   node --expose-gc scripts/bench/heap.ts <host> [functions]
 *
 * where <host> is a module of hosts/ and `functions` (default 0) is how many of the largest functions to list.
 * Prints markdown. Counts bytes, times nothing: it may run while the machine is busy.
 */
import * as Fs from "node:fs"
import * as Inspector from "node:inspector/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { prompt } from "./fake.ts"
import type { Host } from "./host.ts"

const [hostName, topArg] = process.argv.slice(2)
if (globalThis.gc === undefined) throw new Error("heap.ts needs --expose-gc")

interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: ReadonlyArray<string>
      readonly node_types: readonly [ReadonlyArray<string>, ...Array<unknown>]
      readonly edge_fields: ReadonlyArray<string>
      readonly edge_types: readonly [ReadonlyArray<string>, ...Array<unknown>]
    }
  }
  readonly nodes: ReadonlyArray<number>
  readonly edges: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

const inspector = new Inspector.Session()
inspector.connect()

const collect = async () => {
  for (let i = 0; i < 4; i++) {
    globalThis.gc?.()
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * Takes a heap snapshot into `file`, chunk by chunk, so that nothing of it is on the heap when the next one is taken.
 */
const take = async (file: string): Promise<void> => {
  await collect()
  Fs.writeFileSync(file, "")
  const onChunk = (message: { readonly params: { readonly chunk: string } }) =>
    Fs.appendFileSync(file, message.params.chunk)
  inspector.on("HeapProfiler.addHeapSnapshotChunk", onChunk)
  await inspector.post("HeapProfiler.takeHeapSnapshot", { reportProgress: false })
  inspector.off("HeapProfiler.addHeapSnapshotChunk", onChunk)
}

const read = (file: string): Snapshot => JSON.parse(Fs.readFileSync(file, "utf8")) as Snapshot

/** The code objects that belong to one function: found from its SharedFunctionInfo by these edges and kinds. */
const ownedEdges = new Set([
  "trusted_function_data",
  "function_data",
  "name_or_scope_info",
  "raw_outer_scope_info_or_feedback_metadata"
])
const ownedKinds = new Set([
  "system / BytecodeArray",
  "system / BytecodeWrapper",
  "system / ScopeInfo",
  "system / FeedbackMetadata",
  "system / TrustedByteArray",
  "(constant pool)"
])

/**
 * A code object's kind: V8's own kinds keep their name (`system / BytecodeArray`, `(constant pool)`); compiled code is
 * one kind whatever its function; what is named after a function or a script (its SharedFunctionInfo, the Script) is
 * one kind too.
 */
const kindName = (name: string): string =>
  name.startsWith("system / ")
    ? name.slice(0, 40)
    : name.startsWith("(instruction stream") || name.startsWith("(BASELINE")
    ? "(compiled code)"
    : name.startsWith("(")
    ? name.slice(0, 40)
    : "(a function's or a script's info)"

/** Where a script's code comes from, shortened: `effect/…`, a repository path, or `node:…`. */
const origin = (url: string): string => {
  const effect = /\/node_modules\/effect\/(?:src|dist)\/(.*)$/.exec(url)
  if (effect !== null) return `effect/${effect[1]}`
  const repository = /\/(packages\/.*|scripts\/.*)$/.exec(url)
  if (repository !== null) return repository[1]!
  // The package after the last node_modules/ (pnpm's store has two in a path).
  const dependency = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  return dependency !== null ? dependency[1]! : url
}

const analyze = (before: Snapshot, after: Snapshot, top: number) => {
  const meta = after.snapshot.meta
  const width = meta.node_fields.length
  const edgeWidth = meta.edge_fields.length
  const [typeAt, nameAt, idAt, sizeAt, edgeCountAt] = ["type", "name", "id", "self_size", "edge_count"].map((f) =>
    meta.node_fields.indexOf(f)
  ) as [number, number, number, number, number]
  const types = meta.node_types[0]
  const edgeTypes = meta.edge_types[0]
  const [edgeTypeAt, edgeNameAt, edgeToAt] = ["type", "name_or_index", "to_node"].map((f) =>
    meta.edge_fields.indexOf(f)
  ) as [number, number, number]
  // Both snapshots come from this process, so they share one layout (`meta`).
  const nativeType = types.indexOf("native")
  const beforeIds = new Set<number>()
  // The V8 heap of each snapshot (external memory left out), for the net growth between the two.
  let net = 0
  for (let i = 0; i < before.nodes.length; i += width) {
    beforeIds.add(before.nodes[i + idAt]!)
    if (before.nodes[i + typeAt] !== nativeType) net -= before.nodes[i + sizeAt]!
  }
  for (let i = 0; i < after.nodes.length; i += width) {
    if (after.nodes[i + typeAt] !== nativeType) net += after.nodes[i + sizeAt]!
  }
  const { edges, nodes, strings } = after
  const count = nodes.length / width
  const firstEdge = new Uint32Array(count + 1)
  for (let k = 0; k < count; k++) firstEdge[k + 1] = firstEdge[k]! + nodes[k * width + edgeCountAt]! * edgeWidth
  const type = (k: number) => types[nodes[k * width + typeAt]!]!
  const name = (k: number) => strings[nodes[k * width + nameAt]!]!
  const isNew = (k: number) => !beforeIds.has(nodes[k * width + idAt]!)
  const size = (k: number) => nodes[k * width + sizeAt]!
  const named = (edgeType: string) => edgeType !== "element" && edgeType !== "hidden"
  const edgesOf = function*(k: number) {
    for (let e = firstEdge[k]!; e < firstEdge[k + 1]!; e += edgeWidth) {
      const edgeType = edgeTypes[edges[e + edgeTypeAt]!]!
      yield {
        name: named(edgeType) ? strings[edges[e + edgeNameAt]!]! : "",
        to: edges[e + edgeToAt]! / width
      }
    }
  }

  // Every new object by kind: code objects and hidden classes by their name, the rest by their type.
  const kinds = new Map<string, { bytes: number; count: number }>()
  let total = 0
  for (let k = 0; k < count; k++) {
    const t = type(k)
    if (t === "native" || !isNew(k)) continue
    const kind = t === "code" || t === "hidden" || t === "object shape" ? `${t}: ${kindName(name(k))}` : t
    const entry = kinds.get(kind) ?? { bytes: 0, count: 0 }
    entry.bytes += size(k)
    entry.count++
    kinds.set(kind, entry)
    total += size(k)
  }

  // Per function (a SharedFunctionInfo: a code object with a `script` edge), the new code objects it owns.
  const files = new Map<string, { bytes: number; functions: number }>()
  const functions: Array<{ readonly bytes: number; readonly file: string; readonly name: string }> = []
  let attributed = 0
  for (let k = 0; k < count; k++) {
    if (type(k) !== "code") continue
    let script: string | undefined
    for (const edge of edgesOf(k)) if (edge.name === "script") script = name(edge.to)
    if (script === undefined) continue
    let bytes = 0
    const seen = new Set<number>()
    const own = (to: number) => {
      if (seen.has(to) || !isNew(to) || !ownedKinds.has(name(to))) return
      seen.add(to)
      bytes += size(to)
      // The bytecode's own constant pool and source positions.
      if (name(to) === "system / BytecodeArray" || name(to) === "system / BytecodeWrapper") {
        for (const inner of edgesOf(to)) own(inner.to)
      }
    }
    // Only a function compiled since the first snapshot: one with new bytecode. (Before a function is compiled, its
    // `raw_outer_scope_info_or_feedback_metadata` is its enclosing scope's info, which is not its own: that edge
    // counts only when it leads to feedback metadata.)
    let compiled = false
    for (const edge of edgesOf(k)) {
      if (!ownedEdges.has(edge.name)) continue
      if (edge.name === "raw_outer_scope_info_or_feedback_metadata" && name(edge.to) !== "system / FeedbackMetadata") {
        continue
      }
      if (isNew(edge.to) && /^system \/ Bytecode(Array|Wrapper)$/.test(name(edge.to))) compiled = true
      own(edge.to)
    }
    if (!compiled) continue
    const file = origin(script)
    const entry = files.get(file) ?? { bytes: 0, functions: 0 }
    entry.bytes += bytes
    entry.functions++
    files.set(file, entry)
    const fn = name(k)
    functions.push({ bytes, file, name: fn === "" || fn === "(shared function info)" ? "(anonymous)" : fn })
    attributed += bytes
  }
  return {
    total,
    net,
    kinds,
    files,
    functions: functions.sort((a, b) => b.bytes - a.bytes).slice(0, top),
    attributed
  }
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`

const main = async () => {
  const { host } = (await import(`./hosts/${hostName}.ts`)) as { readonly host: Host }
  await host.init?.()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-heap-"))
  try {
    await take(Path.join(dir, "before.heapsnapshot"))
    const session = await host.open()
    await session.turn(prompt(3))
    await new Promise((resolve) => setTimeout(resolve, 100))
    await take(Path.join(dir, "after.heapsnapshot"))
    await session.close()
    report(read(Path.join(dir, "before.heapsnapshot")), read(Path.join(dir, "after.heapsnapshot")))
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

const report = (before: Snapshot, after: Snapshot) => {
  const { attributed, files, functions, kinds, net, total } = analyze(before, after, Number(topArg ?? 0))
  const out: Array<string> = [
    `### ${hostName}: the first session's new heap objects, ${kib(total)} (V8 heap; external memory left out)`,
    "",
    `Objects in the second snapshot and not in the first, whatever became of the first's since (the memory figure ` +
    `counts the net growth instead: here ${kib(net)} between the two snapshots; both include the inspector's ` +
    `own objects).`,
    "",
    "| kind | bytes | objects |",
    "| --- | ---: | ---: |",
    ...[...kinds].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 20).map((
      [kind, { bytes, count }]
    ) => `| ${kind} | ${kib(bytes)} | ${count} |`),
    "",
    `Code of the functions first run by the session (bytecode with its constant pools and source positions, scope ` +
    `infos, feedback metadata): ${kib(attributed)}, by file:`,
    "",
    "| file | code | functions |",
    "| --- | ---: | ---: |",
    ...[...files].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 30).map(([file, { bytes, functions }]) =>
      `| ${file} | ${kib(bytes)} | ${functions} |`
    )
  ]
  if (functions.length > 0) {
    out.push("", "| function | file | code |", "| --- | --- | ---: |")
    for (const f of functions) out.push(`| ${f.name} | ${f.file} | ${kib(f.bytes)} |`)
  }
  process.stdout.write(out.join("\n") + "\n", () => process.exit(0))
}

main().catch((error: unknown) => {
  process.stderr.write(`heap: ${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
