/**
 * The terminals an agent runs through the client (`terminal/*`): each is a process the session's transport opens in
 * a scope of its own, forked from the session's, so that it is torn down (whole tree, within its grace) when the
 * agent releases or kills it, and at the latest with the session. Its output is its stdout, and its stderr's tail
 * once it exits, kept to the agent's byte limit (else {@link defaultOutputLimit}) from the end.
 *
 * @internal
 */
import * as Transport from "@tether/core/Transport"
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/** Where terminals are opened: the session's transport, and the scope they live in. */
export interface Host {
  readonly transport: Context.Service.Shape<typeof Transport.Transport>
  readonly scope: Scope.Scope
  readonly termGrace: Duration.Duration
}

interface Terminal {
  readonly scope: Scope.Closeable
  output: string
  /** The UTF-8 size of `output`, kept as it grows (never re-encoded whole). */
  bytes: number
  truncated: boolean
  readonly limit: number
  exit: Transport.ExitStatus | undefined
  readonly exited: Deferred.Deferred<Transport.ExitStatus>
}

/** The output kept of a terminal when the agent gives no `outputByteLimit`: its last 1 MiB. */
export const defaultOutputLimit = 1024 * 1024

/** The UTF-8 size of the code point at `index` of `text` (a surrogate pair is one code point of 4 bytes). */
const codePointBytes = (code: number): number => code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4

const utf8Length = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.codePointAt(i)!
    bytes += codePointBytes(code)
    if (code > 0xffff) i++
  }
  return bytes
}

/**
 * Appends `text`, then keeps the last `limit` bytes of the output, cut at a character boundary (never inside a
 * surrogate pair): what is dropped is measured as it is dropped, never by encoding the whole output again.
 */
export const append = (
  terminal: { output: string; bytes: number; truncated: boolean; readonly limit: number },
  text: string
): void => {
  terminal.output += text
  terminal.bytes += utf8Length(text)
  if (terminal.bytes <= terminal.limit) return
  terminal.truncated = true
  let start = 0
  while (terminal.bytes > terminal.limit && start < terminal.output.length) {
    const code = terminal.output.codePointAt(start)!
    terminal.bytes -= codePointBytes(code)
    start += code > 0xffff ? 2 : 1
  }
  terminal.output = terminal.output.slice(start)
}

/** The exit status as ACP reports it. */
export const exitStatusOf = (status: Transport.ExitStatus) =>
  status._tag === "Exited" ? { exitCode: status.code, signal: null } : { exitCode: null, signal: status.signal }

/** The terminals of one session. */
export const make = (host: Host) => {
  const terminals = new Map<string, Terminal>()
  let count = 0

  const create = (spec: Transport.LaunchSpec, limit: number | undefined) =>
    Effect.gen(function*() {
      const scope = yield* Scope.fork(host.scope, "sequential")
      const connection = yield* host.transport.open(spec, { termGrace: host.termGrace }).pipe(
        Scope.provide(scope),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const terminal: Terminal = {
        scope,
        output: "",
        bytes: 0,
        truncated: false,
        limit: limit ?? defaultOutputLimit,
        exit: undefined,
        exited: yield* Deferred.make<Transport.ExitStatus>()
      }
      const id = `terminal-${++count}`
      terminals.set(id, terminal)
      yield* Effect.forkIn(
        Stream.runForEach(connection.stdout, (line) =>
          Effect.sync(() => append(terminal, `${line._tag === "Text" ? line.text : line.prefix}\n`))).pipe(
            Effect.andThen(connection.exit),
            Effect.tap(() =>
              Effect.flatMap(connection.stderrTail, (tail) => Effect.sync(() => append(terminal, tail)))
            ),
            Effect.tap((status) =>
              Effect.andThen(Effect.sync(() => (terminal.exit = status)), Deferred.succeed(terminal.exited, status))
            )
          ),
        scope
      )
      return id
    })

  const output = (id: string) =>
    Effect.sync(() => {
      const terminal = terminals.get(id)
      if (terminal === undefined) return undefined
      return {
        output: terminal.output,
        truncated: terminal.truncated,
        exitStatus: terminal.exit === undefined ? null : exitStatusOf(terminal.exit)
      }
    })

  /** Waits for the terminal's process to exit (bounded by the turn the agent's request belongs to). */
  const waitForExit = (id: string) =>
    Effect.suspend(() => {
      const terminal = terminals.get(id)
      return terminal === undefined
        ? Effect.succeedNone
        : Effect.map(Deferred.await(terminal.exited), (status) => Option.some(exitStatusOf(status)))
    })

  /** Ends the terminal's process tree; its output stays readable until it is released. */
  const kill = (id: string) =>
    Effect.suspend(() => {
      const terminal = terminals.get(id)
      if (terminal === undefined) return Effect.succeed(false)
      return Effect.as(
        Scope.close(terminal.scope, Exit.void).pipe(
          Effect.andThen(Effect.suspend(() => {
            if (terminal.exit !== undefined) return Effect.void
            // Torn down before its reader saw the exit: the teardown's first signal is what ended it.
            const status = Transport.ExitStatus.Signaled({ signal: "SIGTERM" })
            terminal.exit = status
            return Deferred.succeed(terminal.exited, status)
          }))
        ),
        true
      )
    })

  /** Kills the terminal if it runs, and forgets it. */
  const release = (id: string) => Effect.flatMap(kill(id), (found) => Effect.sync(() => found && terminals.delete(id)))

  return { create, output, waitForExit, kill, release }
}

/** The terminals of one session. */
export type Terminals = ReturnType<typeof make>
