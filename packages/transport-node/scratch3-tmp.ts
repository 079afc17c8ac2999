import { Transport } from "@tether/core"
import { Duration, Effect, Option } from "effect"
import * as NodeTransport from "./src/NodeTransport.ts"
import { execSync } from "node:child_process"
const program = Effect.gen(function*() {
  const t = yield* Transport.Transport
  yield* Effect.scoped(t.open({ program: "true", args: [], cwd: Option.none(), env: { mode: "inherit", set: {}, unset: [] } }, { termGrace: Duration.millis(300) }))
  yield* Effect.sleep(Duration.millis(500))
  console.log(execSync("ps -eo pid,rss,args | grep 'node -e' | grep -v grep | cut -c1-40").toString())
}).pipe(Effect.scoped)
Effect.runPromise(program.pipe(Effect.provide(NodeTransport.layer())))
