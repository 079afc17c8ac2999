/**
 * `AcpSession` on TestClock through `MockTransport` and `MockAcp`, for what the contract suite does not cover: agents
 * that misbehave (one that outlives its stdin, one that never answers after a cancel, one whose `session/load`
 * fails), the controls where the agent advertises them, the client's file requests, and the presets' launches.
 */
import { assert, describe, it } from "@effect/vitest"
import { AcpAgent, AcpClient, AcpSession } from "@tether/acp"
import { ClaudeSession } from "@tether/claude"
import { Permission, SessionRegistry, Timeouts, Transport } from "@tether/core"
import { MockAcp, MockClaude, MockTransport } from "@tether/testing"
import { Effect, Exit, FileSystem, Layer, Option, PlatformError, Redacted, Scope } from "effect"
import { tagged } from "../../../core/test/support/SessionLog.ts"
import * as SessionLog from "../../../core/test/support/SessionLog.ts"
import { advance, settle, withSession } from "../support/Sessions.ts"

const CWD = "/home/user/project"

const now = Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe()))

const timeouts = (overrides: Parameters<typeof Timeouts.make>[0]) => Effect.runSync(Timeouts.make(overrides))

const make = (options: Partial<AcpSession.Options> = {}) =>
  AcpSession.make({ agent: AcpAgent.command(["mock-acp"]), cwd: CWD, ...options })

const missing = (method: string, path: string) =>
  PlatformError.systemError({ _tag: "NotFound", module: "FileSystem", method, pathOrDescriptor: path })

/** An in-memory file system of `files` (absolute paths), for the client's file requests and the presets. */
const memoryFs = (files: Map<string, string>) => {
  let temps = 0
  const exists = (path: string) => files.has(path) || [...files.keys()].some((file) => file.startsWith(`${path}/`))
  return FileSystem.makeNoop({
    exists: (path) => Effect.succeed(exists(path)),
    // As a real file system's: a path that is not there has no real path, nor an entry.
    realPath: (path) => exists(path) ? Effect.succeed(path) : Effect.fail(missing("realPath", path)),
    lstat: (path) =>
      exists(path)
        ? Effect.succeed({ type: files.has(path) ? "File" : "Directory" } as FileSystem.File.Info)
        : Effect.fail(missing("lstat", path)),
    readFileString: (path) =>
      files.has(path) ? Effect.succeed(files.get(path)!) : Effect.die(new Error(`no file ${path}`)),
    writeFileString: (path, content) => Effect.sync(() => void files.set(path, content)),
    makeDirectory: () => Effect.void,
    makeTempDirectoryScoped: (options) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const dir = `/tmp/${options?.prefix ?? ""}${++temps}`
          files.set(`${dir}/.keep`, "")
          return dir
        }),
        (dir) => Effect.sync(() => [...files.keys()].forEach((file) => file.startsWith(dir) && files.delete(file)))
      )
  })
}

describe("AcpSession", () => {
  describe("agents that misbehave", () => {
    it.effect("one that does not exit when its stdin closes: release still ends it, by SIGTERM after the close grace", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const session = yield* settle(
          make({ timeouts: timeouts({ closeGrace: "2 seconds" }) }).pipe(Scope.provide(scope))
        )
        const connection = yield* (yield* MockTransport.MockTransport).latest
        yield* settle(session.run("hi"))
        const started = yield* now
        yield* settle(Scope.close(scope, Exit.void))
        assert.isTrue(yield* connection.stdinEnded)
        assert.isFalse(yield* connection.isAlive)
        assert.deepStrictEqual(
          yield* connection.exitStatus,
          Option.some(Transport.ExitStatus.Signaled({ signal: "SIGTERM" }))
        )
        const took = (yield* now) - started
        assert.isAtLeast(took, 2_000)
        assert.isAtMost(took, 2_100)
        assert.strictEqual(yield* session.status, "closed")
      }).pipe(Effect.provide(MockTransport.layer(MockAcp.make([], { faults: [MockAcp.ignoreStdinEof] })))))

    it.effect("one that also ignores SIGTERM: killed when the term grace is over, never a hang", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        yield* settle(
          make({ timeouts: timeouts({ closeGrace: "1 second", termGrace: "3 seconds" }) }).pipe(
            Scope.provide(scope)
          )
        )
        const connection = yield* (yield* MockTransport.MockTransport).latest
        const started = yield* now
        yield* settle(Scope.close(scope, Exit.void))
        assert.isFalse(yield* connection.isAlive)
        assert.deepStrictEqual(
          yield* connection.exitStatus,
          Option.some(Transport.ExitStatus.Signaled({ signal: "SIGKILL" }))
        )
        assert.isAtMost((yield* now) - started, 1_000 + 3_000 + 100)
      }).pipe(
        Effect.provide(
          MockTransport.layer(MockAcp.make([], { faults: [MockAcp.ignoreStdinEof, MockAcp.ignoreSigterm] }))
        )
      ))

    it.effect("one that answers nothing after a cancel: InterruptTimeout at the interrupt deadline, session retired", () =>
      withSession(
        make({ timeouts: timeouts({ interrupt: "3 seconds" }) }),
        (session, connection) =>
          Effect.gen(function*() {
            const turn = yield* session.send("slow please")
            yield* advance("300 millis")
            assert.strictEqual(yield* turn.phase, "acknowledged")
            const started = yield* now
            assert.strictEqual(yield* settle(session.interrupt), "retired")
            assert.strictEqual((yield* now) - started, 3_000)
            const error = yield* Effect.flip(turn.result)
            assert.strictEqual(error._tag, "InterruptTimeout")
            assert.isFalse(error.deliveryUncertain)
            assert.strictEqual(yield* session.status, "failed")
            const cancels = (yield* connection.written).filter((line: any) => line.method === "session/cancel")
            assert.strictEqual(cancels.length, 1)
            yield* advance("10 seconds")
            assert.isFalse(yield* connection.isAlive)
          })
      ).pipe(Effect.provide(MockTransport.layer(MockAcp.make(
        [MockAcp.when("slow", MockAcp.text(Array.from({ length: 100 }, (_, i) => `w${i} `), { delay: "100 millis" }))],
        { faults: [MockAcp.ignoreInterrupts] }
      )))))

    it.effect("one whose session/load fails: HandshakeFailed, safe to fall back and to requeue; the agent is gone", () =>
      Effect.gen(function*() {
        const exit = yield* settle(Effect.scoped(make({ resume: "gone-session" })).pipe(Effect.exit))
        assert.isTrue(Exit.isFailure(exit))
        const error = Option.getOrThrow(Exit.findErrorOption(exit))
        assert.strictEqual(error._tag, "HandshakeFailed")
        if (error._tag !== "HandshakeFailed") return
        assert.include(error.reason, "session/load of gone-session failed")
        assert.include(error.reason, "-32002")
        assert.isTrue(error.safeToFallback)
        assert.isTrue(error.safeToRequeue)
        assert.isFalse(error.deliveryUncertain)
        const connection = yield* (yield* MockTransport.MockTransport).latest
        assert.isFalse(yield* connection.isAlive)
        // Falling back: a new session of the same agent works.
        const result = yield* settle(Effect.scoped(Effect.flatMap(make(), (session) => session.run("fresh"))))
        assert.strictEqual(result.text, "fresh")
      }).pipe(Effect.provide(MockTransport.layer(MockAcp.make([], { faults: [MockAcp.failLoad()] })))))
  })

  describe("model errors as the real agents answer them", () => {
    for (const as of ["data", "code", "message"] as const) {
      it.effect(`the HTTP status in the error's ${as}: ApiError with it; the next turn works`, () =>
        withSession(make(), (session) =>
          Effect.gen(function*() {
            const error = yield* settle(Effect.flip(session.run("api down")))
            assert.strictEqual(error._tag, "ApiError")
            if (error._tag === "ApiError") assert.strictEqual(error.status, 429)
            assert.isFalse(error.deliveryUncertain)
            assert.strictEqual((yield* settle(session.run("fine now"))).text, "fine now")
          })).pipe(
            Effect.provide(
              MockTransport.layer(MockAcp.make([MockAcp.when("api down", MockAcp.apiError({ status: 429, as }))]))
            )
          ))
    }
  })

  describe("a loaded session", () => {
    it.effect("the agent's replay after its load answer is the session's: never the first turn's text or receipt", () =>
      Effect.gen(function*() {
        const agentSessionId = yield* withSession(make(), (session) =>
          Effect.gen(function*() {
            yield* settle(session.run("old question"))
            return session.agentSessionId
          }))
        yield* withSession(make({ resume: agentSessionId }), (session) =>
          Effect.gen(function*() {
            const turn = yield* session.send("new question")
            const result = yield* settle(turn.result)
            assert.strictEqual(result.text, "new question")
            const events = yield* SessionLog.events(session)
            // The replay (Gemini's, after its answer) was published as the session's frames, before the turn.
            const replayed = events.flatMap((event) =>
              event._tag === "Frame" && event.type === "session/update" && event.subtype !== undefined &&
                ["user_message_chunk", "agent_message_chunk"].includes(event.subtype)
                ? [[event.subtype, event.turnId]]
                : []
            )
            assert.deepStrictEqual(replayed, [["user_message_chunk", undefined], ["agent_message_chunk", undefined]])
            assert.deepStrictEqual(tagged(events, "TextDelta").map((delta) => delta.text), ["new question"])
          }))
      }).pipe(Effect.provide(MockTransport.layer(MockAcp.make()))))
  })

  describe("controls where the agent advertises them", () => {
    it.effect("setMode and setModel; anything not advertised fails without writing", () =>
      withSession(make(), (session, connection) =>
        Effect.gen(function*() {
          assert.strictEqual(session.info.modes?.currentModeId, "default")
          yield* settle(session.setMode("yolo"))
          yield* settle(session.setModel("mock-flash"))
          const before = (yield* connection.written).length
          const mode = yield* Effect.flip(session.setMode("turbo"))
          assert.strictEqual(mode._tag, "ControlFailed")
          if (mode._tag === "ControlFailed") assert.strictEqual(mode.code, "not_advertised")
          const option = yield* Effect.flip(session.setConfigOption("colour", "blue"))
          assert.strictEqual(option._tag, "ControlFailed")
          assert.strictEqual((yield* connection.written).length, before)
          const written = (yield* connection.written).flatMap((line: any) =>
            line.method?.startsWith("session/set") === true ? [[line.method, line.params]] : []
          )
          // Gemini advertises its models as `models` (no configuration option): chosen by session/set_model.
          assert.deepStrictEqual(written, [
            ["session/set_mode", { sessionId: session.agentSessionId, modeId: "yolo" }],
            ["session/set_model", { sessionId: session.agentSessionId, modelId: "mock-flash" }]
          ])
          const model = yield* Effect.flip(session.setModel("mock-ultra"))
          assert.strictEqual(model._tag === "ControlFailed" ? model.code : undefined, "not_advertised")
          // In yolo mode the agent runs tools without asking.
          const result = yield* settle(session.run("touch it"))
          assert.include(result.text, "done")
          assert.deepStrictEqual(tagged(yield* SessionLog.events(session), "PermissionRequested"), [])
        })).pipe(Effect.provide(MockTransport.layer(MockAcp.make([
          MockAcp.when("touch", MockAcp.tool({ command: "touch a", output: "done" }))
        ])))))

    it.effect("setModel through the configuration option of category model, where the agent has one", () =>
      withSession(make(), (session, connection) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(session.info.models?.availableModels.map((model) => model.modelId), [
            "mock-pro",
            "mock-flash"
          ])
          yield* settle(session.setModel("mock-flash"))
          const written = (yield* connection.written).flatMap((line: any) =>
            line.method?.startsWith("session/set") === true ? [[line.method, line.params]] : []
          )
          assert.deepStrictEqual(written, [
            ["session/set_config_option", { sessionId: session.agentSessionId, configId: "model", value: "mock-flash" }]
          ])
        })).pipe(Effect.provide(MockTransport.layer(MockAcp.make([], { modelOption: true })))))
  })

  describe("the client's file requests", () => {
    const script = MockAcp.make([
      MockAcp.when("read inside", MockAcp.readFile(`${CWD}/notes.txt`)),
      MockAcp.when("read outside", MockAcp.readFile("/etc/passwd")),
      MockAcp.when("climb out", MockAcp.readFile(`${CWD}/../../../etc/passwd`)),
      MockAcp.when("read missing", MockAcp.readFile(`${CWD}/out.txt`)),
      MockAcp.when("write", MockAcp.writeFile(`${CWD}/out.txt`, "written by the agent"))
    ])
    const files = () => new Map([[`${CWD}/notes.txt`, "line 1\nline 2"], ["/etc/passwd", "root:x:0:0"]])

    it.effect("off by default: the agent is told so, and a request is answered 'method not found'", () =>
      withSession(make(), (session, connection) =>
        Effect.gen(function*() {
          const init = (yield* connection.written).find((line: any) => line.method === "initialize") as any
          assert.deepStrictEqual(init.params.clientCapabilities, {
            fs: { readTextFile: false, writeTextFile: false },
            terminal: false
          })
          const result = yield* settle(session.run("read inside"))
          assert.include(result.text, "Method not found")
          assert.notInclude(result.text, "line 1")
        })).pipe(Effect.provide(MockTransport.layer(script))))

    it.effect("on: served inside the cwd only, each request decided by the host's policy", () => {
      const fs = files()
      const decided: Array<AcpClient.FileRequest> = []
      return withSession(
        make({
          client: {
            readTextFile: true,
            writeTextFile: true,
            fileSystem: memoryFs(fs),
            policy: (request) =>
              Effect.sync(() => {
                decided.push(request)
                return request._tag === "Read" || request.content.length < 100
              })
          }
        }),
        (session) =>
          Effect.gen(function*() {
            assert.include((yield* settle(session.run("read inside"))).text, "line 1\nline 2")
            assert.include(
              (yield* settle(session.run("read outside"))).text,
              "is not inside the session's directory"
            )
            assert.include((yield* settle(session.run("climb out"))).text, "is not inside the session's directory")
            // A missing file as agents recognise one; Gemini's write tool reads first, and creates the file on it.
            assert.include((yield* settle(session.run("read missing"))).text, `Resource not found: ${CWD}/out.txt`)
            assert.include((yield* settle(session.run("write"))).text, `wrote ${CWD}/out.txt`)
            assert.strictEqual(fs.get(`${CWD}/out.txt`), "written by the agent")
            // Only the requests inside the cwd reached the policy.
            assert.deepStrictEqual(decided.map((request) => [request._tag, request.path]), [
              ["Read", `${CWD}/notes.txt`],
              ["Write", `${CWD}/out.txt`]
            ])
          })
      ).pipe(Effect.provide(MockTransport.layer(script)))
    })

    it.effect("a policy that refuses: the agent gets an error, nothing is read", () =>
      withSession(
        make({
          client: { readTextFile: true, fileSystem: memoryFs(files()), policy: () => Effect.succeed(false) }
        }),
        (session) =>
          Effect.gen(function*() {
            const result = yield* settle(session.run("read inside"))
            assert.include(result.text, "the host refused to read")
            assert.notInclude(result.text, "line 1")
          })
      ).pipe(Effect.provide(MockTransport.layer(script))))
  })

  describe("the client's terminals", () => {
    const script = MockAcp.make([
      MockAcp.when("list", MockAcp.terminal("ls", { args: ["-la"] }))
    ])

    it.effect("off by default: 'method not found', and nothing is started", () =>
      withSession(make(), (session) =>
        Effect.gen(function*() {
          const result = yield* settle(session.run("list"))
          assert.include(result.text, "Method not found: terminal/create")
          assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 1)
        })).pipe(Effect.provide(MockTransport.layer(script))))

    it.effect("on: each terminal is decided by the host's policy; a refused one starts nothing", () => {
      const asked: Array<AcpClient.TerminalRequest> = []
      return withSession(
        make({
          client: {
            terminal: true,
            terminalPolicy: (request) => Effect.sync(() => (asked.push(request), false))
          }
        }),
        (session) =>
          Effect.gen(function*() {
            const result = yield* settle(session.run("list"))
            assert.include(result.text, "the host refused to run ls")
            assert.deepStrictEqual(asked, [{ command: "ls", args: ["-la"], commandLine: "ls -la", cwd: CWD, env: {} }])
            assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 1)
          })
      ).pipe(Effect.provide(MockTransport.layer(script)))
    })
  })

  describe("presets", () => {
    it.effect("gemini: `gemini --acp`, no relaunch, a GEMINI_CLI_HOME of the session's own with the offline settings", () =>
      Effect.gen(function*() {
        const fs = new Map<string, string>()
        const scope = yield* Scope.make()
        const launch = yield* AcpAgent.gemini({
          executable: "/opt/gemini/bin/gemini",
          model: "gemini-2.5-flash",
          baseUrl: "http://127.0.0.1:4010",
          apiKey: Redacted.make("local-key")
        }).prepare({ cwd: CWD, home: undefined }).pipe(
          Scope.provide(scope),
          Effect.provideService(FileSystem.FileSystem, memoryFs(fs))
        )
        assert.strictEqual(launch.program, "/opt/gemini/bin/gemini")
        assert.deepStrictEqual(launch.args, ["--acp", "--model", "gemini-2.5-flash"])
        const set = launch.env.set
        assert.strictEqual(set["GEMINI_CLI_NO_RELAUNCH"], "true")
        assert.strictEqual(set["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:4010")
        const key = set["GEMINI_API_KEY"]
        assert.isTrue(Redacted.isRedacted(key))
        const home = set["GEMINI_CLI_HOME"] as string
        assert.deepStrictEqual(JSON.parse(fs.get(`${home}/.gemini/settings.json`)!), {
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false }
        })
        yield* Scope.close(scope, Exit.void)
        assert.isFalse([...fs.keys()].some((file) => file.startsWith(home)))
      }))

    it.effect("claude-agent-acp: its config dir with a fresh plugin blocklist; a plain-string credential is refused", () =>
      Effect.gen(function*() {
        const fs = new Map<string, string>()
        const launch = yield* Effect.scoped(
          AcpAgent.claudeAgentAcp({ baseUrl: "http://127.0.0.1:4020" }).prepare({
            cwd: CWD,
            home: "/srv/conversations/c1"
          })
        ).pipe(Effect.provideService(FileSystem.FileSystem, memoryFs(fs)))
        assert.strictEqual(launch.program, "claude-agent-acp")
        assert.strictEqual(launch.env.set["CLAUDE_CONFIG_DIR"], "/srv/conversations/c1")
        assert.deepStrictEqual(JSON.parse(fs.get("/srv/conversations/c1/plugins/blocklist.json")!).plugins, [])
        const refused = yield* Effect.flip(
          Effect.scoped(
            AcpAgent.claudeAgentAcp({ env: { set: { ANTHROPIC_API_KEY: "sk-plain" } } }).prepare({
              cwd: CWD,
              home: undefined
            })
          ).pipe(Effect.provideService(FileSystem.FileSystem, memoryFs(fs)))
        )
        assert.strictEqual(refused._tag, "InvalidConfig")
        const empty = yield* Effect.flip(
          AcpAgent.command([]).prepare({ cwd: CWD, home: undefined }).pipe(Effect.scoped)
        )
        assert.strictEqual(empty._tag, "InvalidConfig")
      }))

    it.effect("a session's cwd and additional directories must be absolute", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Effect.scoped(make({ cwd: "relative/dir" })))
        assert.strictEqual(error._tag, "InvalidConfig")
        const extra = yield* Effect.flip(Effect.scoped(make({ additionalDirectories: ["lib"] })))
        assert.strictEqual(extra._tag, "InvalidConfig")
        assert.strictEqual((yield* (yield* MockTransport.MockTransport).connections).length, 0)
      }).pipe(Effect.provide(MockTransport.layer(MockAcp.make()))))

    it.effect("additional directories the agent does not advertise: HandshakeFailed, never silently ignored", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(settle(Effect.scoped(make({ additionalDirectories: ["/srv/lib"] }))))
        assert.strictEqual(error._tag, "HandshakeFailed")
        if (error._tag === "HandshakeFailed") assert.include(error.reason, "sessionCapabilities.additionalDirectories")
      }).pipe(Effect.provide(MockTransport.layer(MockAcp.make()))))
  })

  it.effect("a deny's reason reaches the agent in _meta; allow_always is selected when the host hands it back", () =>
    withSession(
      make({
        policy: (request) =>
          Effect.succeed(
            request.input["command"] === "touch a"
              ? Permission.allow(undefined, { updatedPermissions: request.suggestions })
              : Permission.deny("not that one")
          )
      }),
      (session, connection) =>
        Effect.gen(function*() {
          yield* settle(session.run("touch a"))
          yield* settle(session.run("rm b"))
          const answers = (yield* connection.written).flatMap((line: any) => line.result?.outcome ? [line.result] : [])
          assert.deepStrictEqual(answers, [
            { outcome: { outcome: "selected", optionId: "proceed_always" } },
            { outcome: { outcome: "selected", optionId: "cancel" }, _meta: { tether: { reason: "not that one" } } }
          ])
        })
    ).pipe(Effect.provide(MockTransport.layer(MockAcp.make([
      MockAcp.when("touch", MockAcp.tool({ command: "touch a", output: "ok" })),
      MockAcp.when("rm", MockAcp.tool({ command: "rm b", output: "gone" }))
    ])))))

  it.effect("the ACP kind in a registry, beside Claude's: sessions by id, a different agent for a live id conflicts", () => {
    class Agents extends SessionRegistry.Service<Agents>()(
      "test/Agents",
      SessionRegistry.kinds({ claude: ClaudeSession.kind, acp: AcpSession.kind })
    ) {}
    const transport = MockTransport.layer((spec) =>
      spec.program === "claude"
        ? MockClaude.make([], { otherwise: (prompt) => [MockClaude.text(`claude: ${prompt}`)] })
        : MockAcp.make([], { otherwise: (prompt) => [MockAcp.text(`${spec.program}: ${prompt}`)] })
    )
    const gemini = { agent: AcpAgent.gemini({ executable: "gemini" }), cwd: CWD }
    return Effect.gen(function*() {
      const agents = yield* Agents
      const [writer, reviewer] = yield* Effect.scoped(
        Effect.all([
          agents.getOrCreate("writer", { provider: "claude", options: {} }),
          agents.getOrCreate("reviewer", { provider: "acp", options: gemini })
        ]).pipe(Effect.flatMap(([writer, reviewer]) => Effect.all([writer.run("draft"), reviewer.run("review")])))
      )
      assert.deepStrictEqual([writer.text, reviewer.text], ["claude: draft", "gemini: review"])
      // The same id with the same agent is the live session; with another agent's options, a conflict.
      const again = yield* Effect.scoped(
        Effect.flatMap(agents.getOrCreate("reviewer", { provider: "acp", options: gemini }), (s) => s.run("again"))
      )
      assert.strictEqual(again.text, "gemini: again")
      const conflict = yield* Effect.flip(Effect.scoped(agents.getOrCreate("reviewer", {
        provider: "acp",
        options: { agent: AcpAgent.gemini({ executable: "gemini", model: "gemini-2.5-pro" }), cwd: CWD }
      })))
      assert.strictEqual(conflict._tag, "SessionConflict")
    }).pipe(
      Effect.provide(
        Agents.layer().pipe(
          Layer.provide(Layer.merge(transport, Layer.succeed(FileSystem.FileSystem, memoryFs(new Map()))))
        )
      ),
      settle
    )
  })
})
