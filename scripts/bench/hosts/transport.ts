/**
 * A reference point, not a competitor: Tether without its session. `NodeTransport` under the Effect runtime spawns,
 * reads and tears down the fake exactly as a Tether session does (the same layer, lines from the same splitter,
 * writes with the same completion, and on close stdin ended, the exit awaited for the session's default close
 * grace, then the scope closed), and each line goes through Tether's frame decoder (`ClaudeProtocol.decodeLine`),
 * as in the bare + decoder host (validated.ts); one Effect run per turn. What it lacks is the session: numbering
 * and publishing events, the turn's state, deadlines and result. Set against validated.ts it prices the transport
 * under Effect; set against Tether, the session.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import * as Transport from "../../../packages/core/src/Transport.ts"
import * as NodeTransport from "../../../packages/transport-node/src/NodeTransport.ts"
import { claudeArgs, fakeClaude, fakeEnv, initializeLine, isolation, userMessageLine } from "../fake.ts"
import { count } from "../host.ts"
import type { Host, HostSession, TurnStats, Waiter } from "../host.ts"
import { decode } from "./validated.ts"

const runtime = ManagedRuntime.make(NodeTransport.layer({ executables: { claude: fakeClaude }, isolation }))

const launch: Transport.LaunchSpec = {
  program: "claude",
  args: claudeArgs,
  cwd: Option.none(),
  env: { mode: "inherit", set: { PATH: fakeEnv().PATH! }, unset: [] }
}

/** A session's default close grace: how long it lets the CLI exit by itself after ending stdin. */
const closeGrace = Duration.seconds(2)

const open = async (): Promise<HostSession> => {
  let waiter: Waiter | undefined
  let opening: { readonly resolve: () => void; readonly reject: (error: Error) => void } | undefined
  const initId = `req_1_${randomUUID().slice(0, 6)}`
  const fail = (error: Error) => {
    opening?.reject(error)
    opening = undefined
    waiter?.reject(error)
    waiter = undefined
  }
  const onLines = (lines: ReadonlyArray<Transport.Line>) => {
    for (const line of lines) {
      if (line._tag === "TooLong") throw new Error(`a line of ${line.length} characters`)
      const message = decode(line.text)
      if (waiter !== undefined) {
        if (count(waiter, message)) waiter = undefined
      } else if (message.type === "control_response" && message.response?.request_id === initId) {
        opening?.resolve()
        opening = undefined
      }
    }
  }

  const scope = await runtime.runPromise(Scope.make())
  const ready = new Promise<void>((resolve, reject) => (opening = { resolve, reject }))
  const connection = await runtime.runPromise(
    Effect.gen(function*() {
      const transport = yield* Transport.Transport
      const connection = yield* transport.open(launch, { termGrace: Duration.seconds(5) })
      // A reader that stops (the fake exited, a line it refused) fails what is waiting rather than leaving it hang.
      const reader = Stream.runForEachArray(connection.stdout, (lines) => Effect.sync(() => onLines(lines))).pipe(
        Effect.onExit((exit) =>
          Effect.sync(() =>
            fail(new Error(`stdout ended: ${Exit.isSuccess(exit) ? "end of stream" : Cause.pretty(exit.cause)}`))
          )
        )
      )
      yield* Effect.forkIn(reader, scope)
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
      try {
        await runtime.runPromise(connection.write(userMessageLine(prompt)))
      } catch (error) {
        // The turn fails with the write's error; the reader's end must not reject it a second time, unobserved.
        waiter = undefined
        throw error
      }
      return seen
    },
    close: () =>
      runtime.runPromise(
        connection.endInput.pipe(
          Effect.andThen(Effect.timeoutOption(connection.exit, closeGrace)),
          Effect.andThen(Scope.close(scope, Exit.void))
        )
      )
  }
}

/** Tether without its session (`NodeTransport` + the frame decoder under Effect), for runner.ts. */
export const host: Host = {
  // Builds the layer (and its host-death watchdog) once per process, as the Tether host does.
  init: () => runtime.runPromise(Effect.void),
  open
}
