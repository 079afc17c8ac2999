/**
 * What the suite's runner processes and its client share: the registry (one service, Claude, Codex and Gemini CLI
 * (ACP) sessions side by side, chosen by a plain configuration), its cluster binding, the sharding settings every node must agree on,
 * and the environment a runner reads its world from.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { AcpAgent, AcpSession } from "@tether/acp"
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry } from "@tether/cluster"
import { CodexSession } from "@tether/codex"
import { Permission, type Session, SessionRegistry, Timeouts, type Transport, type Turn } from "@tether/core"
import { MockAnthropic, MockOpenAI, PinnedAcp } from "@tether/testing"
import { Duration, Effect, Redacted, Schema, type Scope } from "effect"
import * as Path from "node:path"

/** A session's configuration: data, sent by the client and stored with the session. */
export const ChatConfig = Schema.Struct({ provider: Schema.Literals(["claude", "codex", "gemini"]) })
export type ChatConfig = typeof ChatConfig.Type

/** The environment variable that marks the CLI processes of one runner (each runner has its own value). */
export const markVariable = "TETHER_IT_MARK"

/** Deadlines for real CLIs on a loaded 2-core machine (as in transport-node's integration suite). */
export const timeouts: Timeouts.Timeouts = {
  ...Timeouts.defaults,
  startup: Duration.seconds(30),
  control: Duration.seconds(10),
  delivery: Duration.seconds(5),
  ack: Duration.seconds(10),
  turn: Duration.seconds(90),
  stall: Duration.seconds(30),
  interrupt: Duration.seconds(10),
  permission: Duration.seconds(30),
  closeGrace: Duration.seconds(1),
  termGrace: Duration.seconds(2)
}

/** What a runner reads from its environment: the mock servers, its own home, the shared working directory. */
const runnerWorld = () => {
  const env = process.env
  return {
    anthropic: env.TETHER_IT_ANTHROPIC ?? "",
    openai: env.TETHER_IT_OPENAI ?? "",
    gemini: env.TETHER_IT_GEMINI ?? "",
    home: env.TETHER_IT_HOME ?? "",
    work: env.TETHER_IT_WORK ?? "",
    mark: env.TETHER_IT_RUNNER_MARK ?? ""
  }
}

/**
 * The host's registry: a Claude, Codex or Gemini CLI session per id, offline against the mocks, denying every tool.
 * The runner's cluster binding decides where the conversation lives (`Session.Conversation`: for Gemini CLI, its
 * `GEMINI_CLI_HOME`): the rest is the host's.
 */
export class Chats extends SessionRegistry.Service<Chats>()("it/Chats", {
  acquire: (_id: string, config: ChatConfig) =>
    Effect.suspend((): Effect.Effect<
      Session.Session<Turn.TurnResult, ClaudeSession.TurnError | CodexSession.TurnError | AcpSession.TurnError>,
      ClaudeSession.StartError,
      Scope.Scope | Transport.Transport
    > => {
      const world = runnerWorld()
      if (config.provider === "claude") {
        return ClaudeSession.make({
          cwd: world.work,
          timeouts,
          policy: Permission.denyAll,
          env: {
            mode: "clean",
            set: {
              ...MockAnthropic.offlineEnv({ baseUrl: world.anthropic, home: world.home }),
              [markVariable]: world.mark
            }
          }
        })
      }
      if (config.provider === "gemini") {
        return AcpSession.make({
          // The pinned script runs through its `#!/usr/bin/env node`: the Node on the runner's PATH.
          agent: AcpAgent.gemini({
            executable: PinnedAcp.resolveSync("gemini").script,
            baseUrl: world.gemini,
            apiKey: Redacted.make("mock-gemini-api-key"),
            env: {
              mode: "clean",
              set: { HOME: world.home, TMPDIR: Path.join(world.home, "tmp"), [markVariable]: world.mark }
            }
          }),
          cwd: world.work,
          timeouts,
          policy: Permission.denyAll
        }).pipe(Effect.provide(NodeFileSystem.layer))
      }
      const options = MockOpenAI.offlineOptions({
        baseUrl: world.openai,
        folders: {
          home: world.home,
          codexHome: Path.join(world.home, "codex"),
          tmpDir: Path.join(world.home, "tmp"),
          cwd: world.work
        }
      })
      return CodexSession.make({
        ...options,
        model: "gpt-5.5",
        timeouts,
        policy: Permission.denyAll,
        env: { ...options.env, mode: "clean", set: { ...options.env?.set, [markVariable]: world.mark } }
      })
    }),
  fingerprint: SessionRegistry.fingerprint
}) {}

export const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })

/**
 * The sharding settings of every node (runners and the client): few shards, and a failover of seconds rather than
 * the defaults' tens of seconds (a dead runner's locks are free as soon as its database connection closes; it is
 * known to be gone after one health check, or when its record expires).
 */
export const sharding = {
  shardsPerGroup: 24,
  shardLockRefreshInterval: Duration.seconds(1),
  shardLockExpiration: Duration.seconds(6),
  refreshAssignmentsInterval: Duration.millis(500),
  runnerHealthCheckInterval: Duration.seconds(1),
  entityMessagePollInterval: Duration.millis(500),
  entityReplyPollInterval: Duration.millis(100),
  entityTerminationTimeout: Duration.seconds(20),
  sendRetryInterval: Duration.millis(100)
} as const
