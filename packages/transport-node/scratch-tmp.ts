import { Transport } from "@tether/core"
import { Duration, Effect, Option, Stream } from "effect"
import * as NodeTransport from "./src/NodeTransport.ts"
const N = 300000
const program = Effect.gen(function*() {
  const t = yield* Transport.Transport
  const c = yield* t.open({ program: "cat", args: ["/tmp/flood.jsonl"], cwd: Option.none(), env: { mode: "inherit", set: { FAKE_CLAUDE_MODE: "flood", FAKE_CLAUDE_FLOOD_COUNT: String(N) }, unset: [] } }, { termGrace: Duration.millis(300) })
  const t0 = performance.now()
  let n = 0
  yield* c.stdout.pipe(Stream.runForEachArray((lines) => Effect.sync(() => { n += lines.length })), Effect.timeout(Duration.seconds(30)), Effect.ignore, Effect.forkChild)
  while (n < N) yield* Effect.sleep(Duration.millis(1))
  const ms = performance.now() - t0
  console.log(`${n} frames in ${ms.toFixed(0)} ms = ${(n / ms * 1000).toFixed(0)} frames/s`)
}).pipe(Effect.scoped)
Effect.runPromise(program.pipe(Effect.provide(NodeTransport.layer({ executables: { claude: "/work/main/packages/testing/bin/fake-claude.mjs" } }))))
