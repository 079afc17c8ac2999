/**
 * The consumer application's session service: what a host built on the installed tarballs looks like. Its layer
 * without transport (`layerNoDeps`) is what its test runs against MockTransport; `layer` runs the real process.
 */
import { ClaudeSession } from "@tether/claude"
import { Permission, Timeouts } from "@tether/core"
import { NodeTransport, ShellPolicy } from "@tether/transport-node"
import { Context, Effect, Layer } from "effect"

export class Assistant extends Context.Service<Assistant, ClaudeSession.ClaudeSession>()("consumer/Assistant") {
  static readonly layerNoDeps = Layer.effect(
    Assistant,
    Effect.gen(function*() {
      // One override: the nested defaults (a 10-minute permission wait) shrink to fit it.
      const timeouts = yield* Timeouts.make({ turn: "5 minutes" })
      return yield* ClaudeSession.make({
        timeouts,
        permissionMode: "default",
        policy: ShellPolicy.denyDetached(Permission.allowTools(["Read", "Bash"]))
      })
    })
  )
  static readonly layer = this.layerNoDeps.pipe(Layer.provide(NodeTransport.layer()))
}
