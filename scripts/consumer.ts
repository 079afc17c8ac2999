/**
 * The consumer test (`pnpm consumer`, the last step of `pnpm test`): Tether installed the way an application installs
 * it, from the tarballs it would publish.
 *
 * 1. `pnpm pack`s the packages (their `prepack` builds `dist`), and checks each tarball: README, LICENSE,
 *    description, keywords, repository, no `.tsbuildinfo`, no `workspace:` or `catalog:` left, exports into `dist`.
 * 2. Makes an application in a temporary directory (removed at the end, whatever happens) with `effect` at the floor
 *    of Tether's peer range, a different version than the repository's, and `npm install`s the tarballs into it
 *    with `--strict-peer-deps`: a peer range that excludes the application's `effect` fails here. Then checks
 *    that the application has one `effect` and one `@tether/core`. `@tether/cluster`, whose floor is higher, gets
 *    a second application at its own floors (effect, `@effect/platform-node`, `@effect/sql-pg`), installed, listed
 *    with no invalid peer, type-checked (its README's example) and loaded.
 * 3. Type-checks the application's host and its test (`scripts/consumer/`) with the registry's `tsc`, `strict`,
 *    declaration files included: a missing export or a wrong type fails here.
 * 4. Runs the host (`node src/main.ts`) against the fake `claude` of the installed `@tether/testing`, as real
 *    processes, checks its output and that none of its processes is left; and runs the host's test with vitest.
 *
 * Nothing is cached outside the temporary directory but npm's own cache.
 */
import { execFileSync, type ExecFileSyncOptions, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const packages = ["core", "claude", "codex", "acp", "transport-node", "testing", "cluster"] as const
const started = Date.now()

const log = (message: string) => console.log(`consumer: ${message}`)
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`

class Failed extends Error {}

const fail = (message: string): never => {
  throw new Failed(message)
}

const check = (condition: boolean, message: string) => {
  if (!condition) fail(message)
}

/** Runs a command to its end; its output is shown only when it fails. */
const run = (command: string, args: ReadonlyArray<string>, options: ExecFileSyncOptions & { readonly cwd: string }) => {
  try {
    return execFileSync(command, args, { encoding: "utf8", stdio: "pipe", timeout: 600_000, ...options }).toString()
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string }
    return fail(
      `${command} ${args.join(" ")} (in ${options.cwd}) failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`
    )
  }
}

const readJson = (file: string) => JSON.parse(Fs.readFileSync(file, "utf8"))

/** The floor of a caret range (`^4.0.6` → `4.0.6`). */
const floorOf = (range: string): string => {
  const match = /^\^(\d+\.\d+\.\d+)$/.exec(range)
  return match === null
    ? fail(`the peer range ${range} is not a caret range: which version would the test install?`)
    : match[1]
}

/** Live processes whose environment has `entry` (Linux: /proc; elsewhere none are found). */
const withEnvironment = (entry: string): ReadonlyArray<number> => {
  if (process.platform !== "linux") return []
  return Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return !/\) [ZX] /.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1")) &&
        Fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(`${entry}\0`)
    } catch {
      return false
    }
  })
}

const killAll = (entry: string) => {
  for (const pid of withEnvironment(entry)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone already
    }
  }
}

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-consumer-"))
// A project directory as a user's is (mkdtemp makes it 0700): the default box runs each session as a uid of its own,
// which must reach the CLI installed under it, or the session runs unboxed with a warning (docs/teardown.md).
Fs.chmodSync(work, 0o755)
const mark = `TETHER_CONSUMER_RUN=${randomUUID()}`
// Whatever happens below (a failure, Ctrl-C), nothing of this run stays on the machine.
process.on("exit", () => {
  killAll(mark)
  Fs.rmSync(work, { recursive: true, force: true })
})
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))

try {
  // --- 1. pack -------------------------------------------------------------------------------------------------
  const packedAt = Date.now()
  const tarballs = Path.join(work, "tarballs")
  const manifests = packages.map((name) => readJson(Path.join(root, "packages", name, "package.json")))
  for (const name of packages) {
    run("pnpm", ["pack", "--pack-destination", tarballs], { cwd: Path.join(root, "packages", name) })
  }
  const tarballOf = new Map<string, string>()
  for (const [i, name] of packages.entries()) {
    const manifest = manifests[i]
    const file = Path.join(tarballs, `${manifest.name.replace("@", "").replace("/", "-")}-${manifest.version}.tgz`)
    check(Fs.existsSync(file), `pnpm pack made no ${file}`)
    tarballOf.set(manifest.name, file)
    const listing = run("tar", ["-tzf", file], { cwd: work }).split("\n")
    for (const needed of ["package/README.md", "package/LICENSE", "package/dist/index.js", "package/dist/index.d.ts"]) {
      check(listing.includes(needed), `${name}'s tarball has no ${needed.slice("package/".length)}`)
    }
    check(!listing.some((entry) => entry.endsWith(".tsbuildinfo")), `${name}'s tarball carries a .tsbuildinfo`)
    const packed = run("tar", ["-xzOf", file, "package/package.json"], { cwd: work })
    check(!/"(workspace|catalog):/.test(packed), `${name}'s packed package.json still says workspace: or catalog:`)
    const json = JSON.parse(packed)
    for (const field of ["description", "keywords", "repository", "license"]) {
      check(json[field] !== undefined && json[field] !== "" && json[field].length !== 0, `${name} has no ${field}`)
    }
    check(JSON.stringify(json.exports).includes("./dist/index.js"), `${name}'s packed exports do not point into dist`)
  }
  log(`packed ${manifests.map((m) => m.name).join(", ")} with pnpm (${seconds(packedAt)})`)

  // --- 2. install ----------------------------------------------------------------------------------------------
  const ranges = new Set(
    manifests.filter((manifest) => manifest.name !== "@tether/cluster").map((manifest) =>
      manifest.peerDependencies?.effect
    )
  )
  check(ranges.size === 1 && !ranges.has(undefined), `the packages disagree on their effect peer range: ${[...ranges]}`)
  const [range] = ranges as Set<string>
  const effect = floorOf(range)
  const repositoryEffect = readJson(Path.join(root, "node_modules", "effect", "package.json")).version as string
  check(
    effect !== repositoryEffect,
    `the floor of ${range} is the repository's effect ${repositoryEffect}: test another`
  )
  const catalog = Fs.readFileSync(Path.join(root, "pnpm-workspace.yaml"), "utf8")
  const pinned = (name: string) => {
    const match = new RegExp(`^  "?${name.replace("/", "\\/")}"?: (\\S+)$`, "m").exec(catalog)
    return match === null ? fail(`no ${name} in the workspace's catalog`) : match[1]
  }
  const rootManifest = readJson(Path.join(root, "package.json"))
  const app = Path.join(work, "app")
  Fs.cpSync(Path.join(root, "scripts", "consumer"), app, { recursive: true })
  Fs.writeFileSync(
    Path.join(app, "package.json"),
    JSON.stringify(
      {
        name: "tether-consumer",
        private: true,
        type: "module",
        dependencies: {
          "@tether/core": `file:${tarballOf.get("@tether/core")}`,
          "@tether/claude": `file:${tarballOf.get("@tether/claude")}`,
          "@tether/codex": `file:${tarballOf.get("@tether/codex")}`,
          "@tether/acp": `file:${tarballOf.get("@tether/acp")}`,
          "@tether/transport-node": `file:${tarballOf.get("@tether/transport-node")}`,
          effect,
          "@effect/platform-node": effect,
          // @effect/platform-node asks for ^<its version> of platform-node-shared, whose latest release asks for the
          // latest effect: an application pinned to an older effect pins this one too.
          "@effect/platform-node-shared": effect
        },
        devDependencies: {
          "@tether/testing": `file:${tarballOf.get("@tether/testing")}`,
          "@effect/vitest": pinned("@effect/vitest"),
          vitest: pinned("vitest"),
          typescript: rootManifest.devDependencies.typescript,
          "@types/node": rootManifest.devDependencies["@types/node"]
        }
      },
      null,
      2
    )
  )
  const installedAt = Date.now()
  run("npm", ["install", "--strict-peer-deps", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: app
  })
  // `npm ls` fails on a missing or unmet peer anywhere in the tree.
  run("npm", ["ls", "--all"], { cwd: app })
  for (const name of ["effect", "@tether/core"]) {
    const copies = run("npm", ["ls", name, "--all", "--parseable"], { cwd: app }).split("\n").filter((l) => l !== "")
    check(copies.length === 1, `the application has ${copies.length} copies of ${name}:\n${copies.join("\n")}`)
  }
  const installed = readJson(Path.join(app, "node_modules", "effect", "package.json")).version
  check(installed === effect, `npm installed effect ${installed}, not ${effect}`)
  log(
    `npm installed the tarballs into ${app} with effect ${installed} (the repository has ${repositoryEffect}): ` +
      `one copy of effect and of @tether/core, no unmet peer (${seconds(installedAt)})`
  )
  // Internal modules are not part of the API: each package's exports refuse them, wherever they sit.
  const internals = [
    "@tether/core/internal/timeouts",
    "@tether/claude/internal/machine",
    "@tether/codex/internal/machine",
    "@tether/acp/internal/machine",
    "@tether/transport-node/internal/watchdog",
    "@tether/testing/internal/claudeSimulator"
  ]
  for (const specifier of internals) {
    const imported = spawnSync(process.execPath, [
      "--input-type=module",
      "-e",
      `await import(${JSON.stringify(specifier)})`
    ], {
      cwd: app,
      encoding: "utf8"
    })
    // The refusal must be this subpath's, not one met by a module it imports.
    const subpath = `./${specifier.split("/").slice(2).join("/")}`
    check(
      imported.status !== 0 && imported.stderr.includes("ERR_PACKAGE_PATH_NOT_EXPORTED") &&
        imported.stderr.includes(`'${subpath}'`),
      `${specifier} is importable from the application (exit ${imported.status}): ${imported.stderr.slice(-500)}`
    )
  }
  log(`the packages' internal modules are not importable (${internals.length} tried)`)

  // --- 3. type-check -------------------------------------------------------------------------------------------
  const checkedAt = Date.now()
  const tsc = Path.join(app, "node_modules", ".bin", "tsc")
  run(tsc, ["-p", "tsconfig.json"], { cwd: app })
  const tsVersion = run(tsc, ["--version"], { cwd: app }).trim().replace(/^Version /, "")
  log(`tsc ${tsVersion} (strict, declaration files included): the host and its test type-check (${seconds(checkedAt)})`)

  // --- 4. run --------------------------------------------------------------------------------------------------
  const ranAt = Date.now()
  const fake = run(process.execPath, ["fake-claude-path.ts"], { cwd: app }).trim()
  check(fake.startsWith(Path.join(app, "node_modules")), `FakeClaude.path is not in the installed package: ${fake}`)
  const [markName, markValue] = mark.split("=")
  const host = spawnSync(process.execPath, ["src/main.ts", "Say hello"], {
    cwd: app,
    encoding: "utf8",
    timeout: 60_000,
    killSignal: "SIGKILL",
    env: { ...process.env, TETHER_CLAUDE_PATH: fake, [markName]: markValue }
  })
  check(
    host.status === 0,
    `the host exited ${host.status ?? host.signal}:\n${host.stdout}\n${host.stderr}`
  )
  const said = host.stdout.split("\n")[0]
  check(said === "Hello from fake-claude #1: Say hello", `the host printed ${JSON.stringify(host.stdout)}`)
  const left = withEnvironment(mark)
  check(left.length === 0, `the host left ${left.length} processes behind (pids ${left.join(", ")})`)
  const missing = spawnSync(process.execPath, ["src/main.ts", "Say hello"], {
    cwd: app,
    encoding: "utf8",
    timeout: 60_000,
    killSignal: "SIGKILL",
    env: { ...process.env, TETHER_CLAUDE_PATH: Path.join(work, "no-claude-here") }
  })
  check(
    missing.status === 1 &&
      missing.stderr.startsWith("nothing reached the CLI, fall back: claude executable not found"),
    `without claude, the host exited ${missing.status}:\n${missing.stderr}`
  )
  log(`the host ran against the installed fake claude and left nothing running: "${said}" (${seconds(ranAt)})`)
  log(`without claude, the host exits 1 with: "${missing.stderr.trim()}"`)

  const testedAt = Date.now()
  const vitest = run(Path.join(app, "node_modules", ".bin", "vitest"), ["run", "--reporter=dot"], {
    cwd: app,
    env: { ...process.env, [markName]: markValue }
  })
  const summary = /Tests\s+(.*)/.exec(vitest.replace(/\x1b\[[0-9;]*m/g, ""))?.[1]?.trim() ?? "?"
  log(
    `the host's test ran with vitest ${pinned("vitest")} and @effect/vitest ${pinned("@effect/vitest")}: ${summary} (${
      seconds(testedAt)
    })`
  )
  // --- 5. the cluster's application, at its own floors --------------------------------------------------------
  const clusterAt = Date.now()
  const clusterPeers = manifests[packages.indexOf("cluster")].peerDependencies as Record<string, string>
  const clusterFloor = (name: string) => floorOf(clusterPeers[name] ?? fail(`@tether/cluster has no peer ${name}`))
  const clusterEffect = clusterFloor("effect")
  const clusterApp = Path.join(work, "cluster-app")
  Fs.cpSync(Path.join(root, "scripts", "consumer-cluster"), clusterApp, { recursive: true })
  // The application is the cluster README's example, as the README shows it: they cannot drift apart.
  const readme = Fs.readFileSync(Path.join(root, "packages", "cluster", "README.md"), "utf8")
  const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1] ?? fail("the cluster's README has no ts block")
  Fs.mkdirSync(Path.join(clusterApp, "src"), { recursive: true })
  Fs.writeFileSync(Path.join(clusterApp, "src", "app.ts"), example)
  const tarball = (name: string) => `file:${tarballOf.get(name) ?? fail(`no tarball of ${name}`)}`
  Fs.writeFileSync(
    Path.join(clusterApp, "package.json"),
    JSON.stringify(
      {
        name: "tether-cluster-consumer",
        private: true,
        type: "module",
        dependencies: {
          "@tether/core": tarball("@tether/core"),
          "@tether/claude": tarball("@tether/claude"),
          "@tether/codex": tarball("@tether/codex"),
          "@tether/acp": tarball("@tether/acp"),
          "@tether/transport-node": tarball("@tether/transport-node"),
          "@tether/cluster": tarball("@tether/cluster"),
          effect: clusterEffect,
          "@effect/platform-node": clusterFloor("@effect/platform-node"),
          // As above: pinned with platform-node, whose caret range would take the latest, which wants the latest effect.
          "@effect/platform-node-shared": clusterFloor("@effect/platform-node"),
          "@effect/sql-pg": clusterFloor("@effect/sql-pg")
        },
        devDependencies: {
          typescript: rootManifest.devDependencies.typescript,
          "@types/node": rootManifest.devDependencies["@types/node"]
        }
      },
      null,
      2
    )
  )
  run("npm", ["install", "--strict-peer-deps", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: clusterApp
  })
  run("npm", ["ls", "--all"], { cwd: clusterApp })
  for (const name of ["effect", "@tether/core"]) {
    const copies = run("npm", ["ls", name, "--all", "--parseable"], { cwd: clusterApp }).split("\n").filter((l) =>
      l !== ""
    )
    check(copies.length === 1, `the cluster application has ${copies.length} copies of ${name}:\n${copies.join("\n")}`)
  }
  run(Path.join(clusterApp, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.json"], { cwd: clusterApp })
  const loaded = spawnSync(process.execPath, [
    "--input-type=module",
    "-e",
    `const { ClusterRegistry, NodeCluster } = await import("@tether/cluster")
if (typeof ClusterRegistry.make !== "function" || typeof NodeCluster.layer !== "function") process.exit(3)`
  ], { cwd: clusterApp, encoding: "utf8" })
  check(loaded.status === 0, `@tether/cluster does not load (exit ${loaded.status}): ${loaded.stderr.slice(-500)}`)
  const internal = spawnSync(process.execPath, [
    "--input-type=module",
    "-e",
    `await import("@tether/cluster/internal/runner")`
  ], { cwd: clusterApp, encoding: "utf8" })
  check(
    internal.status !== 0 && internal.stderr.includes("ERR_PACKAGE_PATH_NOT_EXPORTED"),
    `@tether/cluster/internal/runner is importable from the application (exit ${internal.status})`
  )
  log(
    `npm installed @tether/cluster with effect ${clusterEffect} (its floor), no unmet peer; its README's example ` +
      `type-checks and the package loads (${seconds(clusterAt)})`
  )
  log(`ok (${seconds(started)})`)
} catch (error) {
  console.error(`consumer: FAILED: ${error instanceof Failed ? error.message : error}`)
  process.exitCode = 1
}
