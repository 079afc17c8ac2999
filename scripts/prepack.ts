/**
 * The `prepack` step of every published package (`"prepack": "node ../../scripts/prepack.ts"`), run in the
 * package's directory by whatever packs it.
 *
 * 1. It refuses any packer but pnpm. The manifests say `workspace:^` and `catalog:`, which only `pnpm pack` (and
 *    `pnpm publish`) replace with real versions; `npm pack` would ship them verbatim, and the tarball would not
 *    install anywhere.
 * 2. It builds `dist` afresh (`tsc -b tsconfig.build.json` after removing `dist` and its build info), so that a
 *    tarball never carries a missing, stale or partial build, nor a module deleted since the last build.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const manifest = JSON.parse(Fs.readFileSync("package.json", "utf8")) as { readonly name: string }
const agent = process.env.npm_config_user_agent ?? ""

if (!agent.startsWith("pnpm/")) {
  const rule = "!".repeat(100)
  console.error(
    [
      rule,
      `${manifest.name} must be packed with pnpm: \`pnpm pack\` (or \`pnpm publish\`), not ${
        agent === "" ? "this tool" : `\`${agent.split(" ")[0]}\``
      }.`,
      "Its package.json uses `workspace:` and `catalog:` versions, which only pnpm resolves at pack time: any other",
      "packer would ship them verbatim and the tarball would not install.",
      rule
    ].join("\n")
  )
  process.exit(1)
}

const buildInfo = JSON.parse(Fs.readFileSync("tsconfig.build.json", "utf8")) as {
  readonly compilerOptions: { readonly outDir: string; readonly tsBuildInfoFile: string }
}
Fs.rmSync(buildInfo.compilerOptions.outDir, { recursive: true, force: true })
Fs.rmSync(buildInfo.compilerOptions.tsBuildInfoFile, { force: true })
// The workspace's own TypeScript, whichever directory pnpm runs this from.
const tsc = Path.resolve(import.meta.dirname, "../node_modules/.bin/tsc")
execFileSync(tsc, ["-b", "tsconfig.build.json"], { stdio: "inherit" })
