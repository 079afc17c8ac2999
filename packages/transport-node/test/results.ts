/**
 * What the escape and isolation suites observed, recorded into committed JSON (packages/transport-node/test/results/)
 * when `TETHER_RECORD_RESULTS=1`: scripts/teardown-tables.ts renders docs/teardown.md's escape and isolation tables
 * from them, and `pnpm check` fails when the docs' tables differ from that rendering. Without the variable nothing
 * is written.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** Whether this run records its results. */
export const recording = process.env.TETHER_RECORD_RESULTS === "1"

/** Where the results are committed. */
export const resultsDir = fileURLToPath(new URL("./results/", import.meta.url))

/** One session of the escape suites ended one way: the escapes that survived it (their names). */
export interface EscapeRun {
  readonly containment: "cgroup" | "pid-namespace" | "process-tree"
  readonly isolation: boolean
  readonly closing: "close" | "interrupt" | "host SIGKILL"
  readonly survivors: ReadonlyArray<string>
}

/** What an escape suite observed. */
export interface EscapeResults {
  readonly suite: string
  /** The CLI the sessions ran: "the fake CLI", or the real one and its version. */
  readonly cli: string
  /** The escapes every session's tool started, in the table's order. */
  readonly escapes: ReadonlyArray<{ readonly name: string; readonly shape: string }>
  readonly runs: ReadonlyArray<EscapeRun>
}

/** What the cross-session suite observed: per mode, each attack and phase (`environ1`, …) → `ok` or `refused`. */
export interface IsolationResults {
  readonly suite: string
  readonly modes: { readonly [mode in "isolated" | "not isolated"]?: { readonly [attack: string]: string } }
}

/** Writes `results/<name>.json` when recording (sorted keys are the suite's own order: stable diffs). */
export const write = (name: string, value: EscapeResults | IsolationResults): void => {
  if (!recording) return
  Fs.mkdirSync(resultsDir, { recursive: true })
  Fs.writeFileSync(Path.join(resultsDir, `${name}.json`), JSON.stringify(value, null, 2) + "\n")
}
