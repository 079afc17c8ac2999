import * as fs from "node:fs"

/**
 * The directory of the recorded `claude` transcripts: one folder per CLI version (`2.1.332/`, `2.1.197/`), each with
 * `<scenario>.ndjson` (both directions) and `<scenario>.stdout.jsonl` (the CLI's stdout). Recorded by
 * `pnpm fixtures:record` (scripts/fixtures/record.ts).
 *
 * @category fixtures
 * @since 0.1.0
 */
export const fixtures = new URL("../fixtures/claude/", import.meta.url)

/**
 * The CLI versions that recorded fixtures, newest first.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const fixtureVersions: ReadonlyArray<string> = fs.readdirSync(fixtures, { withFileTypes: true })
  .filter((entry) => entry.isDirectory()).map((entry) => entry.name)
  .sort((a, b) => b.localeCompare(a, "en", { numeric: true }))

/**
 * The fixture files ending with `suffix`, as `<version>/<file>`, newest version first, then by name.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const fixtureFiles = (suffix: string): ReadonlyArray<string> =>
  fixtureVersions.flatMap((version) =>
    fs.readdirSync(new URL(`${version}/`, fixtures)).filter((name) => name.endsWith(suffix)).sort().map((name) =>
      `${version}/${name}`
    )
  )

/**
 * The CLI version that recorded a fixture file (`"2.1.197"` for `"2.1.197/interrupt.ndjson"`).
 *
 * @category fixtures
 * @since 0.1.0
 */
export const versionOf = (file: string): string => file.slice(0, file.indexOf("/"))

/**
 * A fixture file's version and scenario, as test names show it: `"2.1.197/interrupt"` for
 * `"2.1.197/interrupt.stdout.jsonl"`.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const scenarioOf = (file: string): string => file.slice(0, file.indexOf(".", file.indexOf("/")))

/**
 * The non-empty lines of a fixture file (`<version>/<file>`).
 *
 * @category fixtures
 * @since 0.1.0
 */
export const readLines = (name: string): ReadonlyArray<string> =>
  fs.readFileSync(new URL(name, fixtures), "utf8").split("\n").filter((line) => line.length > 0)

/**
 * One line of a `.ndjson` transcript: a frame the CLI wrote (`"<"`) or the host wrote (`">"`), as parsed JSON in
 * `msg`, or a line the host wrote that is not JSON, in `raw`. Other directions record process events.
 *
 * @category fixtures
 * @since 0.1.0
 */
export interface TranscriptEntry {
  readonly dir: string
  readonly msg?: any
  readonly raw?: string
}

/**
 * Every entry of every `.ndjson` transcript, with the file it comes from.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const transcriptEntries: ReadonlyArray<{ readonly file: string; readonly entry: TranscriptEntry }> =
  fixtureFiles(".ndjson").flatMap((file) =>
    readLines(file).map((line) => ({ file, entry: JSON.parse(line) as TranscriptEntry }))
  )

/**
 * An instance of a class whose own keys look like a text block: not JSON for a schema, though its keys look right.
 *
 * @category values
 * @since 0.1.0
 */
export class TextBlockLike {
  readonly type = "text"
  readonly text = "t"
}
