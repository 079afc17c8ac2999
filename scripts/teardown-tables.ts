/**
 * `node scripts/teardown-tables.ts`: renders docs/teardown.md's escape table and isolation table from what the tests
 * observed (packages/transport-node/test/results/*.json, written by test/Escapes.test.ts, test/integration/
 * Escapes.test.ts and test/Isolation.test.ts when run with TETHER_RECORD_RESULTS=1), between the page's marker
 * comments. `--check` (run by `pnpm check`) changes nothing and fails when the page's tables differ from that
 * rendering: a table edited by hand, or results recorded and the page not regenerated.
 *
 *   TETHER_RECORD_RESULTS=1 pnpm vitest run packages/transport-node/test/Escapes.test.ts   # (as root: boxes too)
 *   node scripts/teardown-tables.ts                                                         # the page, regenerated
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

// The shapes packages/transport-node/test/results.ts writes (read here as JSON: the scripts do not import tests).
interface EscapeRun {
  readonly containment: "cgroup" | "pid-namespace" | "process-tree"
  readonly isolation: boolean
  readonly closing: "close" | "interrupt" | "host SIGKILL"
  readonly survivors: ReadonlyArray<string>
}
interface EscapeResults {
  readonly suite: string
  readonly cli: string
  readonly escapes: ReadonlyArray<{ readonly name: string; readonly shape: string }>
  readonly runs: ReadonlyArray<EscapeRun>
}
interface IsolationResults {
  readonly suite: string
  readonly modes: { readonly [mode in "isolated" | "not isolated"]?: { readonly [attack: string]: string } }
}

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const page = Path.join(root, "docs/teardown.md")
const results = Path.join(root, "packages/transport-node/test/results")

const read = <A>(name: string): A => JSON.parse(Fs.readFileSync(Path.join(results, `${name}.json`), "utf8")) as A

const closings: ReadonlyArray<EscapeRun["closing"]> = ["close", "interrupt", "host SIGKILL"]
const containments: ReadonlyArray<EscapeRun["containment"]> = ["cgroup", "pid-namespace", "process-tree"]

/**
 * One suite's rows: per isolation (the default first: a box each, as root) and containment, what survived each closing, as the
 * escapes' numbers in the legend below the table.
 */
const escapeRows = (suite: EscapeResults, label: string, numberOf: ReadonlyMap<string, number>): Array<string> => {
  const rows: Array<string> = []
  for (const isolation of [true, false]) {
    for (const containment of containments) {
      const cells = closings.map((closing) => {
        const run = suite.runs.find((each) =>
          each.containment === containment && each.isolation === isolation && each.closing === closing
        )
        if (run === undefined) return "not run"
        if (run.survivors.length === 0) return "none"
        const numbers = run.survivors.map((name) => numberOf.get(name) ?? 0).sort((a, b) => a - b)
        return `**${run.survivors.length}**: ${numbers.map((n) => `#${n}`).join(", ")}`
      })
      if (cells.every((each) => each === "not run")) continue
      rows.push(
        `| ${label} | \`${containment}\` | ${isolation ? "a box each (the default)" : "`isolation: false`"} | ` +
          cells.join(" | ") + " |"
      )
    }
  }
  return rows
}

const escapeTable = (fake: EscapeResults, real: EscapeResults): string => {
  // The fake's escapes include the real CLI's (a tool cannot join the real CLI's own session): one numbering.
  const all = [...fake.escapes, ...real.escapes.filter((escape) => !fake.escapes.some((e) => e.name === escape.name))]
  const numberOf = new Map(all.map((escape, i) => [escape.name, i + 1]))
  const survived = new Set([...fake.runs, ...real.runs].flatMap((run) => run.survivors))
  const tested = (escape: { readonly name: string }) => real.escapes.some((e) => e.name === escape.name)
  return [
    `Escapes that survived teardown, out of ${fake.escapes.length} (${fake.cli}) and ${real.escapes.length} ` +
    `(${real.cli}, whose tool cannot join the CLI's own session), as the suites observed them ` +
    `(\`${fake.suite}\`, \`${real.suite}\`):`,
    "",
    "| CLI | containment | isolation | scope closed | host fiber interrupted mid-turn | host SIGKILLed (watchdog) |",
    "| --- | --- | --- | --- | --- | --- |",
    ...escapeRows(fake, "fake", numberOf),
    ...escapeRows(real, "real", numberOf),
    "",
    "The escapes (started by the session's tool; *fake only*: started in the CLI's own session, which the real " +
    "CLI's Bash tool cannot join):",
    "",
    ...all.map((escape, i) =>
      `${i + 1}. ${escape.shape}${tested(escape) ? "" : " (*fake only*)"}${
        survived.has(escape.name) ? "" : ": found in every run"
      }`
    )
  ].join("\n")
}

/**
 * The attacks of test/Isolation.test.ts, in its order: the table's row and what it is called when it works. `unmount`
 * and `mountproc` are tried once, between the two rounds of the others (`skipped` outside a box: they would unmount
 * the host's).
 */
const attacks: ReadonlyArray<readonly [name: string, row: string, worked: string]> = [
  ["visible", "see B's CLI in `/proc`", "seen"],
  ["host", "see the host's process in `/proc`", "seen"],
  ["environ", "read `/proc/<B>/environ` (B's key)", "read"],
  ["mem", "read `/proc/<B>/mem`", "read"],
  ["config", "read B's config directory (a transcript)", "read"],
  ["signal", "signal B's CLI (`kill -STOP`)", "stopped"],
  ["cgroup", "move B's CLI into its own cgroup", "moved"],
  ["unmount", "unmount its `/proc` or `/tmp` (`umount`, `umount -l`)", "unmounted"],
  ["mountproc", "mount a new `proc` over its `/proc`", "mounted"]
]

const isolationTable = (observed: IsolationResults): string => {
  const outcome = (mode: "isolated" | "not isolated", name: string, worked: string): string => {
    const of = (phase: 1 | 2) => {
      const result = observed.modes[mode]?.[`${name}${phase}`]
      return result === undefined
        ? undefined
        : result === "ok"
        ? worked
        : result === "skipped"
        ? "not tried (the host's own)"
        : "refused"
    }
    const first = of(1) ?? "not run"
    const second = of(2) ?? first
    return first === second ? first : `${first}; after the unmounts: ${second}`
  }
  return [
    `A's tool attacks B, each attack first as the tool finds itself, then after trying to unmount its \`/proc\` and ` +
    `\`/tmp\` (which its root may try in a box; outside one there is nothing of its own to unmount), as ` +
    `\`${observed.suite}\` observed it:`,
    "",
    "| A's tool tries to | a box each (the default) | `isolation: false` |",
    "| --- | :---: | :---: |",
    ...attacks.map(([name, row, worked]) =>
      `| ${row} | ${outcome("isolated", name, worked)} | ${outcome("not isolated", name, worked)} |`
    )
  ].join("\n")
}

/** The generated blocks: marker name → content. */
const blocks = (): ReadonlyMap<string, string> =>
  new Map([
    ["escape-table", escapeTable(read("escapes-fake"), read("escapes-claude"))],
    ["isolation-table", isolationTable(read("isolation"))]
  ])

const begin = (name: string) =>
  `<!-- ${name}: generated by scripts/teardown-tables.ts from packages/transport-node/test/results; do not edit -->`
const end = (name: string) => `<!-- /${name} -->`

/** The page with every block replaced by its rendering. */
const render = (text: string): string => {
  let out = text
  for (const [name, content] of blocks()) {
    const from = out.indexOf(begin(name))
    const to = out.indexOf(end(name))
    if (from < 0 || to < from) throw new Error(`docs/teardown.md: no ${begin(name)} … ${end(name)} block`)
    out = out.slice(0, from) + `${begin(name)}\n${content}\n` + out.slice(to)
  }
  return out
}

const text = Fs.readFileSync(page, "utf8")
const rendered = render(text)
if (process.argv.includes("--check")) {
  if (rendered !== text) {
    const ours = rendered.split("\n")
    const theirs = text.split("\n")
    const at = ours.findIndex((line, i) => line !== theirs[i])
    console.error(
      `docs/teardown.md: its escape or isolation table differs from the tests' recorded results at line ${at + 1}:\n` +
        `  page:     ${theirs[at]}\n  rendered: ${ours[at]}\n` +
        "Run node scripts/teardown-tables.ts to regenerate it (the tables are not edited by hand)."
    )
    process.exit(1)
  }
} else if (rendered !== text) {
  Fs.writeFileSync(page, rendered)
  console.log("docs/teardown.md: tables regenerated")
} else {
  console.log("docs/teardown.md: tables up to date")
}
