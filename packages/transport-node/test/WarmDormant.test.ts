/**
 * Warm and dormant sessions as real processes: a registry's warm CLIs and its dormant transitions leave no process
 * behind when a pool shrinks, when a conversation goes dormant, when the registry is released, and when its host is
 * SIGKILLed (checked in /proc by the marker in the CLIs' environment), whose live conversation the next host resumes;
 * and the file-system dormant store on a real disk.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { ClaudeSession } from "@tether/claude"
import { DormantStore, SessionRegistry } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Context, Data, Effect, Exit, Layer, Option, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { fakeClaudePath, killAllMarked, marked, newMark, tempDir, waitUntil } from "./utils.ts"

const hostScript = fileURLToPath(new URL("./fixtures/warmHost.ts", import.meta.url))

// The fake CLI, 2 sleeping grandchildren, a setsid shell and its sleep.
const treeSize = 5

/** The marked processes but a box's own two (its stage 1 and its namespace's first process, `tether-box`). */
const trees = (mark: string) => marked(mark).filter((proc) => !proc.args.includes("tether-box"))

/** Whether a CLI runs in a box (its user namespace is not the host's): warm and dormant sessions are boxed too. */
const boxed = (pid: number | undefined): boolean =>
  pid !== undefined &&
  Fs.readlinkSync(`/proc/${pid}/ns/user`) !== Fs.readlinkSync("/proc/self/ns/user")

/** As root on Linux, each session is boxed by default (the store's directories are under a 0700 one: mkdtemp's). */
const boxable = process.platform === "linux" && process.getuid?.() === 0

const configOf = (mark: string): ClaudeSession.Options => ({
  env: { set: { TEST_MARK: mark, FAKE_CLAUDE_MODE: "grandchildren,setsid-child" } }
})

/** Besides, each CLI's tool writes into its configuration directory (the store's, under its 0700 root): boxed, it can. */
const writingConfigOf = (mark: string): ClaudeSession.Options => ({
  env: { set: { ...configOf(mark).env?.set, FAKE_CLAUDE_TOOL: `echo written > "$CLAUDE_CONFIG_DIR/written"` } }
})

// Built in the test's scope: a layer provided to `make` alone would be released when `make` returns.
const transportLayer = Layer.build(NodeTransport.layer({ executables: { claude: fakeClaudePath }, watchdog: false }))

const storeIn = (directory: string) =>
  Layer.build(DormantStore.layerFileSystem({ directory }).pipe(Layer.provide(NodeServices.layer)))

describe("warm and dormant sessions, as processes", { timeout: 30_000 }, () => {
  it.live("a pool that shrinks, a conversation that goes dormant and the registry's release leave nothing", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const directory = yield* tempDir("tether-dormant-")
      const store = yield* storeIn(directory)
      const transport = yield* transportLayer
      const scope = yield* Scope.make()
      // Closed by the test's last lines; this closes it when an assertion failed first (a registry left refilling
      // its pool after the store's directory is removed).
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const registry = yield* SessionRegistry.make({
        ...ClaudeSession.kind,
        capacity: 4,
        idleTimeToLive: "1 second",
        dormancy: true
      }).pipe(Scope.provide(scope), Effect.provideContext(Context.merge(store, transport)))
      const config = writingConfigOf(mark)
      yield* registry.warm(config, 2)
      yield* waitUntil("two warm trees", () => trees(mark).length === 2 * treeSize, 20_000)
      // Shrinking closes the surplus before `warm` returns.
      yield* registry.warm(config, 0)
      assert.deepStrictEqual(marked(mark), [])
      // A conversation from the pool (refilled), its turn, then its idle time: dormant, its whole tree gone.
      yield* registry.warm(config, 1)
      yield* waitUntil("a warm tree", () => trees(mark).length === treeSize, 20_000)
      const handle = yield* Effect.scoped(registry.getOrCreate("a", config))
      const pid = (yield* handle.snapshot).pid
      assert.strictEqual(boxed(pid), boxable, "the warm CLI handed out is boxed")
      assert.strictEqual((yield* registry.run("a", "hello")).text.length > 0, true)
      // Recorded on disk from its turn on (for a host that dies), dormant once its CLI is gone.
      yield* waitUntil(
        "the conversation recorded",
        // Its record, not the temporary file it is renamed from.
        () => Fs.readdirSync(Path.join(directory, "conversations")).includes("a.json"),
        10_000
      )
      yield* Effect.gen(function*() {
        while ((yield* registry.dormant).length !== 1) yield* Effect.sleep("50 millis")
      }).pipe(Effect.timeout("10 seconds"))
      yield* waitUntil("only the refilled warm tree", () => trees(mark).length === treeSize, 10_000)
      assert.isFalse(marked(mark).some((proc) => proc.pid === pid))
      const [listing] = yield* registry.dormant
      assert.strictEqual(listing._tag, "Dormant")
      // Its CLI (warm, then handed out) wrote its directory in the store; what it left is the host's user's.
      const written = Path.join(listing._tag === "Dormant" ? listing.record.directory : "", "written")
      assert.strictEqual(Fs.readFileSync(written, "utf8"), "written\n")
      assert.strictEqual(Fs.statSync(written).uid, process.getuid!())
      assert.strictEqual(Fs.statSync(directory).mode & 0o777, 0o700, "the store's root is never opened")
      // Woken by its next message in a new CLI (boxed: its directory is in the store); then the release closes it
      // and the warm one.
      assert.isTrue((yield* registry.run("a", "again")).text.length > 0)
      const woken = (yield* registry.snapshot("a")).pid
      assert.strictEqual(boxed(woken), boxable, "the woken dormant conversation's CLI is boxed")
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(marked(mark), [])
      // Released while live: dormant again, on disk, for the next host.
      assert.deepStrictEqual(Fs.readdirSync(Path.join(directory, "conversations")), ["a.json"])
    }).pipe(Effect.scoped, Effect.ensuring(killAllMarked(mark)))
  })

  it.live("a host SIGKILLed with a warm CLI, a live and a dormant conversation leaves no process, and both resumable", () => {
    const mark = newMark()
    return Effect.gen(function*() {
      const directory = yield* tempDir("tether-dormant-host-")
      const host = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(process.execPath, [hostScript, mark, fakeClaudePath, directory], {
            stdio: ["ignore", "pipe", "inherit"]
          })
        ),
        (host) => Effect.sync(() => host.kill("SIGKILL"))
      )
      const ready = yield* Effect.callback<string, HostFailed>((resume) => {
        host.stdout!.setEncoding("utf8")
        // Its ready line, after whatever it logged before (Effect's default logger prints to stdout).
        let out = ""
        host.stdout!.on("data", (data: string) => {
          out += data
          const line = out.split("\n").find((line) => line.startsWith("ready"))
          if (line !== undefined) resume(Effect.succeed(line))
        })
        host.once("exit", (code) => resume(Effect.fail(new HostFailed({ reason: `exited ${code}` }))))
      }).pipe(Effect.timeout("25 seconds"))
      assert.include(ready, `"id":"dormant"`)
      // The live conversation's tree and the warm one's: the dormant one's CLI is gone already.
      yield* waitUntil("two trees", () => trees(mark).length === 2 * treeSize, 5_000)
      const exited = Effect.callback<void>((resume) => {
        if (host.exitCode !== null || host.signalCode !== null) resume(Effect.void)
        else host.once("exit", () => resume(Effect.void))
      })
      host.kill("SIGKILL")
      // Reaped: a dead host's directories are known by its pid being gone.
      yield* exited
      yield* waitUntil("nothing left", () => marked(mark).length === 0, 10_000)
      // What the host left dormant is on disk for the next one, and so is the conversation it was running.
      const clis = Path.join(directory, "cli")
      assert.strictEqual(Fs.readdirSync(clis).length, 3, "the warm CLI's directory, the live and the dormant one's")
      const store = yield* storeIn(directory)
      const listings = yield* Context.get(store, DormantStore.DormantStore).list
      assert.deepStrictEqual(listings.map((listing) => listing._tag === "Dormant" ? listing.record.id : ""), [
        "dormant",
        "live"
      ])
      // The next store removed the dead host's warm CLI's directory, which no record names.
      assert.deepStrictEqual(
        Fs.readdirSync(clis).map((name) => Path.join(clis, name)).sort(),
        listings.map((listing) => listing._tag === "Dormant" ? listing.record.directory : "").sort()
      )
      // The next host resumes the conversation the dead one was running.
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, capacity: 4, dormancy: true }).pipe(
        Effect.provideContext(Context.merge(store, yield* transportLayer))
      )
      yield* registry.wake("live", configOf(mark))
      assert.isTrue((yield* registry.run("live", "again")).text.length > 0)
      const snapshot = yield* registry.snapshot("live")
      const recorded = listings.find((listing) => listing._tag === "Dormant" && listing.record.id === "live")
      assert.strictEqual(
        snapshot.sessionId,
        recorded?._tag === "Dormant" ? recorded.record.conversationId : "",
        "the woken CLI resumed the dead host's conversation"
      )
    }).pipe(Effect.scoped, Effect.ensuring(killAllMarked(mark)))
  })

  it.effect("the file-system store removes the CLI directories a dead host left that no record names, and only those", () =>
    Effect.gen(function*() {
      const temporary = yield* tempDir("tether-dormant-sweep-")
      const directory = Path.join(temporary, "store")
      const clis = Path.join(directory, "cli")
      const conversations = Path.join(directory, "conversations")
      Fs.mkdirSync(clis, { recursive: true })
      Fs.mkdirSync(conversations, { recursive: true })
      // A directory's name: the boot, the PID namespace, the allocating process's pid and start, a random id.
      const boot = Fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().replace(/-/g, "").slice(0, 12)
      const namespace = /\[(\d+)\]/.exec(Fs.readlinkSync("/proc/self/ns/pid"))![1]!
      const statOf = (stat: string) => ({
        pid: stat.split(" ")[0]!,
        start: stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!
      })
      const named = (process: { readonly pid: string; readonly start: string }, where = `${boot}-${namespace}`) => {
        const made = Path.join(clis, `${where}-${process.pid}-${process.start}-${crypto.randomUUID()}`)
        Fs.mkdirSync(made)
        Fs.writeFileSync(Path.join(made, ".claude.json"), "{}")
        return made
      }
      const record = (id: string, cli: string) =>
        Fs.writeFileSync(
          Path.join(conversations, `${id}.json`),
          JSON.stringify({ id, fingerprint: "f", conversationId: "c", directory: cli, since: 1 })
        )
      // A process that has exited, this one, and a live one (this one's parent).
      const dead = statOf(ChildProcess.spawnSync("sh", ["-c", "cat /proc/$$/stat"], { encoding: "utf8" }).stdout)
      const self = statOf(Fs.readFileSync("/proc/self/stat", "utf8"))
      const parent = statOf(Fs.readFileSync(`/proc/${process.ppid}/stat`, "utf8"))
      const left = named(dead)
      const recorded = named(dead)
      // Named through another path to the store (a symbolic link): still this store's directory.
      Fs.symlinkSync(directory, Path.join(temporary, "link"))
      record("kept", Path.join(temporary, "link", "cli", Path.basename(recorded)))
      const earlier = named({ pid: self.pid, start: `${Number(self.start) - 1}` })
      const own = named(self)
      const alive = named(parent)
      const reused = named({ pid: parent.pid, start: `${Number(parent.start) + 1}` })
      const elsewhere = [named(dead, `${boot}-1`), named(dead, `000000000000-${namespace}`)]
      const unnamed = Path.join(clis, crypto.randomUUID())
      Fs.mkdirSync(unnamed)
      const all = [left, recorded, earlier, own, alive, reused, ...elsewhere, unnamed].sort()
      const present = () => Fs.readdirSync(clis).map((name) => Path.join(clis, name)).sort()
      // A record that cannot be read may name any of them: nothing goes.
      Fs.writeFileSync(Path.join(conversations, "broken.json"), "{ not json")
      yield* storeIn(directory)
      assert.deepStrictEqual(present(), all)
      Fs.rmSync(Path.join(conversations, "broken.json"))
      const store = Context.get(yield* storeIn(directory), DormantStore.DormantStore)
      assert.deepStrictEqual(present(), [recorded, own, alive, ...elsewhere, unnamed].sort())
      // What this process allocates is named so, and stays.
      const allocated = yield* store.allocate
      assert.match(Path.basename(allocated), new RegExp(`^${boot}-${namespace}-${self.pid}-${self.start}-`))
      yield* storeIn(directory)
      assert.isTrue(Fs.existsSync(allocated))
      assert.isTrue(Option.isSome(yield* store.load("kept")))
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("the file-system store: records by any id, unreadable ones reported, a wake of one typed", () =>
    Effect.gen(function*() {
      const directory = yield* tempDir("tether-dormant-store-")
      const context = yield* storeIn(directory)
      const store = Context.get(context, DormantStore.DormantStore)
      const cli = yield* store.allocate
      assert.isTrue(Fs.statSync(cli).isDirectory())
      Fs.writeFileSync(Path.join(cli, "transcript.jsonl"), "{}\n")
      for (const id of ["a", "../escape", "..", "with/slash"]) {
        yield* store.save({ id, fingerprint: "f", conversationId: "c", directory: cli, since: 1 })
      }
      assert.deepStrictEqual(Fs.readdirSync(directory).sort(), ["cli", "conversations"])
      const loaded = yield* store.load("../escape")
      assert.strictEqual(Option.getOrThrow(loaded).directory, cli)
      Fs.writeFileSync(Path.join(directory, "conversations", "broken.json"), "{ not json")
      const listings = yield* store.list
      assert.deepStrictEqual(
        listings.map((listing) => listing._tag === "Dormant" ? listing.record.id : `corrupt ${listing.id}`).sort(),
        ["..", "../escape", "a", "corrupt broken", "with/slash"]
      )
      // A registry over it: the unreadable conversation's wake is DormantStateCorrupt, and it can be deleted.
      const transport = yield* transportLayer
      const registry = yield* SessionRegistry.make({ ...ClaudeSession.kind, dormancy: true }).pipe(
        Effect.provideContext(Context.merge(context, transport))
      )
      const corrupt = yield* Effect.flip(registry.wake("broken", {}))
      assert.strictEqual(corrupt._tag, "DormantStateCorrupt")
      assert.isFalse(corrupt.safeToRequeue)
      yield* registry.deleteDormant("broken")
      // Deleting one removes its directory (shared here by every record: the others now point at nothing).
      yield* registry.deleteDormant("a")
      assert.isFalse(Fs.existsSync(cli))
      assert.strictEqual((yield* Effect.flip(store.load("..")))._tag, "DormantStateCorrupt")
    }).pipe(Effect.provide(NodeServices.layer)))
})

class HostFailed extends Data.TaggedError("HostFailed")<{ readonly reason: string }> {}
