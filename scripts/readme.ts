/**
 * Docs that show code are code: this extracts every fenced `ts` block of the READMEs and of the pages under `docs/`
 * into `examples/readme/` (generated, git-ignored), where `pnpm check` type-checks them with the rest of the
 * repository (`examples/tsconfig.readme.json`, strict, with the Effect diagnostics) and `pnpm test` runs the programs
 * and the tests among them (`examples/test/programs.test.ts`, and vitest's `docs` project). `pnpm check` runs it
 * first.
 *
 * The fence's info string says what a block is:
 *
 *   ```ts              a module: type-checked.
 *   ```ts run          a program: type-checked, then run with `node` (against the fake `claude`: TETHER_CLAUDE_PATH
 *                      points at @tether/testing's fake CLI); it must exit 0 within 30 seconds.
 *   ```ts test         a vitest test file: type-checked, then run by vitest.
 *   ```ts … file=PATH  a copy of the repository file PATH (from its first line after a leading block comment): it
 *                      must stay identical to it.
 *
 * Every block is a complete module (its own imports). Shell blocks and other languages are left alone. Each
 * generated file keeps its block at the page's own line numbers, so a type error at `docs-timeouts/L12.ts(20,7)` is
 * line 20 of docs/timeouts.md.
 *
 * It also fails on a reference to something that does not exist:
 *
 * - a relative link of a page (`[text](docs/errors.md)`, `[text](../README.md#anchor)`) whose file is missing, or
 *   whose anchor is no heading of the page it names (headings are turned into anchors as GitHub does);
 * - a path of the repository a page quotes (`` `scripts/bench.ts` ``, `` `packages/core/src/Session.ts` ``) that
 *   is not there (paths with `<placeholders>` or globs, and generated directories, are left alone);
 * - a comment of a package's sources or tests (`packages/*\/src`, `packages/*\/test`) that cites a page
 *   (`docs/protocol/claude-stream-json.md`), when the page is missing, or when a section it cites on the same line
 *   (`§5.1`) is no numbered heading of that page.
 *
 *   node scripts/readme.ts            # regenerate examples/readme/ and check the references
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")

/** The markdown files under a directory of the repository, recursively, as repository paths. */
const markdownUnder = (dir: string): Array<string> =>
  Fs.existsSync(Path.join(root, dir))
    ? Fs.readdirSync(Path.join(root, dir), { withFileTypes: true })
      .sort((a, b) => a.name.localeCompare(b.name))
      .flatMap((entry) =>
        entry.isDirectory()
          ? markdownUnder(`${dir}/${entry.name}`)
          : entry.name.endsWith(".md")
          ? [`${dir}/${entry.name}`]
          : []
      )
    : []

/** The pages whose blocks and links are checked: the repository's README, every package's, and docs/. */
const pages = [
  "README.md",
  ...Fs.readdirSync(Path.join(root, "packages"))
    .map((name) => `packages/${name}/README.md`)
    .filter((file) => Fs.existsSync(Path.join(root, file))),
  ...markdownUnder("docs"),
  ...["CHANGELOG.md"].filter((file) => Fs.existsSync(Path.join(root, file)))
]

const out = Path.join(root, "examples", "readme")

type Kind = "module" | "run" | "test"

interface Block {
  readonly page: string
  /** The 1-based line of the opening fence. */
  readonly line: number
  readonly kind: Kind
  readonly copyOf: string | undefined
  readonly code: string
}

/**
 * One markdown text split into its fenced `ts` blocks (with what their info strings say) and its prose lines (with
 * every fenced block, of any language, blanked out, so that links and paths are read from the prose only).
 */
const parse = (
  page: string,
  text: string
): { readonly blocks: ReadonlyArray<Block>; readonly prose: Array<string> } => {
  const blocks: Array<Block> = []
  const lines = text.split("\n")
  const prose = [...lines]
  for (let i = 0; i < lines.length; i++) {
    const open = /^```ts(?:\s+(.*))?$/.exec(lines[i])
    if (open === null) {
      // Skip over blocks in other languages, so that a ```ts inside them is not taken for a fence.
      if (/^```/.test(lines[i])) {
        do prose[i++] = ""
        while (i < lines.length && lines[i] !== "```")
        prose[i] = ""
      }
      continue
    }
    const words = (open[1] ?? "").split(/\s+/).filter((word) => word.length > 0)
    const kind: Kind = words.includes("run") ? "run" : words.includes("test") ? "test" : "module"
    const copyOf = words.find((word) => word.startsWith("file="))?.slice("file=".length)
    const unknown = words.filter((word) => word !== "run" && word !== "test" && !word.startsWith("file="))
    if (unknown.length > 0) {
      throw new Error(`${page}:${i + 1}: unknown words in the info string: ${unknown.join(" ")}`)
    }
    const start = i
    const body: Array<string> = []
    prose[i] = ""
    while (++i < lines.length && lines[i] !== "```") {
      body.push(lines[i])
      prose[i] = ""
    }
    if (i === lines.length) throw new Error(`${page}:${start + 1}: the block is never closed`)
    prose[i] = ""
    blocks.push({ page, line: start + 1, kind, copyOf, code: body.join("\n") + "\n" })
  }
  return { blocks, prose }
}

/** A file's text from its first line after a leading block comment (a module's doc comment). */
const withoutLeadingComment = (text: string): string => {
  const match = /^\/\*[\s\S]*?\*\/\n/.exec(text)
  return match === null ? text : text.slice(match[0].length)
}

const slug = (page: string): string => page.replace(/\/README\.md$|\.md$/, "").replace(/\//g, "-")

/** The generated file of a block: the block at its page's line numbers, under a header naming its source. */
const fileOf = (block: Block): { readonly path: string; readonly text: string } => {
  const name = `L${block.line}${block.kind === "test" ? ".test" : ""}.ts`
  const header = `// Generated by scripts/readme.ts from ${block.page}:${block.line}: edit the page, not this file.`
  return {
    path: Path.join(slug(block.page), name),
    text: header + "\n".repeat(block.line) + block.code
  }
}

/** The headings of a markdown text (outside fenced blocks). */
const headingsOf = (prose: ReadonlyArray<string>): Array<string> =>
  prose.flatMap((line) => {
    const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    return match === null ? [] : [match[1]]
  })

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to `-`, repeats numbered. */
const anchorsOf = (prose: ReadonlyArray<string>): Set<string> => {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const heading of headingsOf(prose)) {
    const text = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "").replace(/\s/g, "-")
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

/** The section numbers of a page's numbered headings (`## 5. CLI → host` is 5, `### 5.1 …` is 5.1). */
const sectionsOf = (prose: ReadonlyArray<string>): Set<string> =>
  new Set(
    headingsOf(prose).flatMap((heading) => {
      const match = /^(\d+(?:\.\d+)*)\.?\s/.exec(heading)
      return match === null ? [] : [match[1]]
    })
  )

/** Directories whose files are made by a command (not committed), so a page may name them before they exist. */
const generated = /^(?:examples\/readme|\.bench|reports|dist|build|node_modules|\.tools)(?:\/|$)|\/(?:dist|build)\//

/** The prose of a page, parsed once. */
const parsed = new Map<string, ReturnType<typeof parse>>()
const parsedPage = (page: string): ReturnType<typeof parse> | undefined => {
  if (!parsed.has(page)) {
    const file = Path.join(root, page)
    if (!Fs.existsSync(file) || !Fs.statSync(file).isFile()) return undefined
    parsed.set(page, parse(page, Fs.readFileSync(file, "utf8")))
  }
  return parsed.get(page)
}

/** What is wrong with a page's links and quoted paths. */
const referenceProblems = (page: string, prose: ReadonlyArray<string>): Array<string> => {
  const problems: Array<string> = []
  prose.forEach((line, index) => {
    const where = `${page}:${index + 1}`
    for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1]
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
      const [file, anchor] = target.split("#", 2) as [string, string | undefined]
      const resolved = file === "" ? page : Path.posix.normalize(Path.posix.join(Path.posix.dirname(page), file))
      if (!Fs.existsSync(Path.join(root, resolved))) {
        problems.push(`${where}: the link ${target} points at ${resolved}, which does not exist`)
        continue
      }
      if (anchor !== undefined && resolved.endsWith(".md")) {
        const other = parsedPage(resolved)
        if (other !== undefined && !anchorsOf(other.prose).has(anchor)) {
          problems.push(`${where}: the link ${target}: ${resolved} has no heading whose anchor is #${anchor}`)
        }
      }
    }
    for (const match of line.matchAll(/`((?:packages|examples|scripts|docs|\.ci)\/[^`\s]*)`/g)) {
      const path = match[1].replace(/[#:].*$/, "")
      if (/[<>*{}]/.test(path) || generated.test(path)) continue
      if (!Fs.existsSync(Path.join(root, path))) {
        problems.push(`${where}: \`${match[1]}\` names ${path}, which does not exist`)
      }
    }
  })
  return problems
}

/** The TypeScript sources of the packages, recursively, as repository paths. */
const sourcesUnder = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourcesUnder(`${dir}/${entry.name}`)
      : entry.name.endsWith(".ts")
      ? [`${dir}/${entry.name}`]
      : []
  )

/** What is wrong with the pages the packages' sources and tests cite (a missing page, a section it does not have). */
const citationProblems = (): Array<string> => {
  const problems: Array<string> = []
  const dirs = Fs.readdirSync(Path.join(root, "packages")).flatMap((pkg) =>
    ["src", "test"].map((dir) => `packages/${pkg}/${dir}`).filter((dir) => Fs.existsSync(Path.join(root, dir)))
  )
  for (const dir of dirs) {
    for (const source of sourcesUnder(dir)) {
      Fs.readFileSync(Path.join(root, source), "utf8").split("\n").forEach((line, index) => {
        for (const match of line.matchAll(/\bdocs\/[\w/-]+\.md\b/g)) {
          const cited = match[0]
          const other = parsedPage(cited)
          if (other === undefined) {
            problems.push(`${source}:${index + 1}: cites ${cited}, which does not exist`)
            continue
          }
          const sections = sectionsOf(other.prose)
          for (const section of line.slice(match.index).matchAll(/§(\d+(?:\.\d+)*)/g)) {
            if (!sections.has(section[1])) {
              problems.push(`${source}:${index + 1}: cites ${cited} §${section[1]}, which is no heading of it`)
            }
          }
        }
      })
    }
  }
  return problems
}

{
  const problems: Array<string> = []
  const programs: Array<{ readonly file: string; readonly source: string }> = []
  Fs.rmSync(out, { recursive: true, force: true })
  let count = 0
  for (const page of pages) {
    const { blocks, prose } = parsedPage(page)!
    for (const block of blocks) {
      if (block.copyOf !== undefined) {
        const original = withoutLeadingComment(Fs.readFileSync(Path.join(root, block.copyOf), "utf8"))
        if (original !== block.code) {
          problems.push(
            `${page}:${block.line}: the block is marked as a copy of ${block.copyOf} but differs from it ` +
              `(copy the file, from its first line after its doc comment, into the block)`
          )
        }
      }
      const file = fileOf(block)
      Fs.mkdirSync(Path.join(out, Path.dirname(file.path)), { recursive: true })
      Fs.writeFileSync(Path.join(out, file.path), file.text)
      if (block.kind === "run") programs.push({ file: file.path, source: `${page}:${block.line}` })
      count++
    }
    problems.push(...referenceProblems(page, prose))
  }
  problems.push(...citationProblems())
  Fs.mkdirSync(out, { recursive: true })
  Fs.writeFileSync(Path.join(out, "programs.json"), JSON.stringify(programs, null, 2) + "\n")
  if (problems.length > 0) {
    console.error(problems.join("\n"))
    process.exit(1)
  }
  console.log(
    `docs: ${count} blocks from ${pages.length} pages into examples/readme/ (${programs.length} to run); ` +
      `links, quoted paths and the sources' citations of docs/ resolve`
  )
}
