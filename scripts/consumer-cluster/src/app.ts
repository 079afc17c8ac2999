/**
 * The cluster consumer's application: packages/cluster/README.md's example, type-checked against the installed
 * tarballs (it needs a PostgreSQL to run, which the consumer test does not start; it loads the modules instead).
 */
import { NodeRuntime } from "@effect/platform-node"
import { ClaudeSession } from "@tether/claude"
import { ClusterRegistry, NodeCluster } from "@tether/cluster"
import { Permission, SessionRegistry } from "@tether/core"
import { NodeTransport } from "@tether/transport-node"
import { Effect, Layer, Schema } from "effect"

// What a caller chooses per session: data, sent with getOrCreate and stored.
const ChatConfig = Schema.Struct({ model: Schema.optional(Schema.String) })

// How a runner starts a session for it: the policy (a function) lives here, on the runner.
class Chats extends SessionRegistry.Service<Chats>()("app/Chats", {
  acquire: (_id, config: typeof ChatConfig.Type) =>
    ClaudeSession.make({ ...config, policy: Permission.allowTools(["Read"]) }),
  fingerprint: SessionRegistry.fingerprint
}) {}

const ChatsCluster = ClusterRegistry.make(Chats, { config: ChatConfig })

const postgres = process.env.DATABASE_URL ?? "postgres://tether@127.0.0.1:5432/tether"
const sharding = { shardsPerGroup: 300 } // the same on every node

// `node app.ts runner 34431`: this process owns sessions.
const Runner = ChatsCluster.layerRunner({ capacity: 64, idleTimeToLive: "15 minutes", drainTimeout: "30 seconds" })
  .pipe(
    Layer.provide(NodeTransport.layer()),
    Layer.provide(NodeCluster.layer({ postgres, runner: { host: "127.0.0.1", port: 34431 }, sharding }))
  )

// `node app.ts`: a client; the same code as with `Chats.layer(...)` in one process.
const Client = ChatsCluster.layerClient().pipe(Layer.provide(NodeCluster.layer({ postgres, sharding })))

const ask = Effect.gen(function*() {
  const chats = yield* Chats
  const result = yield* Effect.scoped(
    Effect.flatMap(chats.getOrCreate("chat-42", { model: "sonnet" }), (chat) => chat.run("Hello"))
  )
  console.log(result.text)
})

if (process.argv[2] === "runner") {
  NodeRuntime.runMain(Layer.launch(Runner))
} else {
  NodeRuntime.runMain(ask.pipe(Effect.provide(Client)))
}
