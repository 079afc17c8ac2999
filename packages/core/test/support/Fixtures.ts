import * as fs from "node:fs"

// shared/ is the sibling of the repository root, wherever the repository is cloned.
const repoRoot = new URL("../../../../", import.meta.url)

/**
 * The directory of the recorded `claude` 2.1.332 transcripts.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const fixtures = new URL("../shared/fixtures/claude/", repoRoot)

/**
 * The names of the fixture files ending with `suffix`, sorted.
 *
 * @category fixtures
 * @since 0.1.0
 */
export const fixtureFiles = (suffix: string): ReadonlyArray<string> =>
  fs.readdirSync(fixtures).filter((name) => name.endsWith(suffix)).sort()

/**
 * The non-empty lines of a fixture file.
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
