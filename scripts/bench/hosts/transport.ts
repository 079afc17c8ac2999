/**
 * A reference point, not a competitor: Tether's `NodeTransport` under the Effect runtime, with no session. The fake
 * is spawned, torn down and read exactly as Tether does it (the same layer, lines from the same splitter, writes
 * with the same completion), and each line is `JSON.parse`d as the bare host does, with no validation and no events.
 * Set against the bare host it prices the transport and one Effect run per turn; set against Tether it prices the
 * session (validation, numbering and publishing events, turn bookkeeping and deadlines).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import { Transport } from "../../../packages/core/src/index.ts"
import { NodeTransport } from "../../../packages/transport-node/src/index.ts"
import { claudeArgs, fakeClaude, fakeEnv, initializeLine, userMessageLine } from "../fake.ts"
import { count } from "../host.ts"
import type { Host, HostSession, TurnStats, Waiter } from "../host.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude } }))

const launch: Transport.LaunchSpec = {
  program: "claude",
  args: claudeArgs,
  cwd: Option.none(),
  env: { mode: "inherit", set: { PATH: fakeEnv().PATH! }, unset: [] }
}

const open = async (): Promise<HostSession> => {
  let waiter: Waiter | undefined
  let initialized: (() => void) | undefined
  const initId = `req_1_${randomUUID().slice(0, 6)}`
  const onLines = (lines: ReadonlyArray<Transport.Line>) => {
    for (const line of lines) {
      if (line._tag !== "Text") continue
      const message = JSON.parse(line.text)
      if (waiter !== undefined) {
        if (count(waiter, message)) waiter = undefined
      } else if (message.type === "control_response" && message.response.request_id === initId) {
        initialized?.()
      }
    }
  }

  const scope = await runtime.runPromise(Scope.make())
  const ready = new Promise<void>((resolve) => (initialized = resolve))
  const connection = await runtime.runPromise(
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      const connection = yield* transport.open(launch, { termGrace: Duration.seconds(5) })
      yield* Effect.forkIn(
        Stream.runForEachArray(connection.stdout, (lines) => Effect.sync(() => onLines(lines))),
        scope
      )
      yield* connection.write(initializeLine(initId))
      return connection
    }).pipe(Scope.provide(scope))
  )
  await ready

  return {
    turn: async (prompt) => {
      const seen = new Promise<TurnStats>((resolve, reject) => {
        waiter = { resolve, reject, deltas: 0, messages: 0 }
      })
      await runtime.runPromise(
        connection.write(
          userMessageLine(prompt)
        )
      )
      return seen
    },
    close: () => runtime.runPromise(Scope.close(scope, Exit.void))
  }
}

/** `NodeTransport` alone under the Effect runtime, for runner.ts. */
export const host: Host = {
  // Builds the layer (and its host-death watchdog) once per process, as the Tether host does.
  init: () => runtime.runPromise(Effect.void),
  open
}
