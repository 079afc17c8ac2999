/**
 * The client side of ACP that an agent may use: reading and writing text files through the client
 * (`fs/read_text_file`, `fs/write_text_file`). Off by default: the agent is told the client has no such capability,
 * and a request for one is answered "method not found". A host turns them on in `AcpSession.Options.client`; they are
 * then served inside the session's working directory only (a path outside it, also through a symbolic link, is
 * refused), each request decided by the host's {@link Policy}, each bounded by {@link Options.timeout}.
 *
 * Terminals (`terminal/*`), when the host turns them on, are processes the session's own transport opens (under
 * its containment: the whole tree is torn down when the agent kills or releases the terminal, and at the latest with
 * the session), in the session's directory or one inside it, each decided by the host's {@link TerminalPolicy}. Their
 * output is their stdout, then their stderr's tail once they exit, kept to the agent's `outputByteLimit` from the
 * end. Waiting for a terminal's exit is bounded by the turn the agent asks in (the session stops the wait when the
 * turn ends).
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as Machine from "./internal/machine.ts"
import * as Decode from "./internal/protocol/runtime.ts"
import type * as Terminals from "./internal/terminals.ts"

/**
 * A file request of the agent, as the policy sees it: `path` is the file's path once resolved (absolute, `.` and `..`
 * removed, symbolic links followed), which is inside the session's directory.
 *
 * @category models
 * @since 0.1.0
 */
export type FileRequest =
  | {
    readonly _tag: "Read"
    readonly path: string
    readonly line: number | undefined
    readonly limit: number | undefined
  }
  | { readonly _tag: "Write"; readonly path: string; readonly content: string }

/**
 * Decides a file request: `true` serves it, `false` refuses it (the agent gets an error answer).
 *
 * @category models
 * @since 0.1.0
 */
export type Policy = (request: FileRequest) => Effect.Effect<boolean, Permission.PolicyError>

/**
 * A terminal the agent asks to run, as the policy sees it: `cwd` is resolved and inside the session's directory.
 *
 * @category models
 * @since 0.1.0
 */
export interface TerminalRequest {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: { readonly [name: string]: string }
}

/**
 * Decides a terminal request: `true` runs it, `false` refuses it.
 *
 * @category models
 * @since 0.1.0
 */
export type TerminalPolicy = (request: TerminalRequest) => Effect.Effect<boolean, Permission.PolicyError>

/**
 * What the client serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Serve `fs/read_text_file`. Default false. */
  readonly readTextFile?: boolean | undefined
  /** Serve `fs/write_text_file`. Default false. */
  readonly writeTextFile?: boolean | undefined
  /** Decides each request. Default: serve every request inside the session's directory. */
  readonly policy?: Policy | undefined
  /** Serve `terminal/*`. Default false. */
  readonly terminal?: boolean | undefined
  /** Decides each terminal. Default: run every terminal inside the session's directory. */
  readonly terminalPolicy?: TerminalPolicy | undefined
  /** SIGTERM to SIGKILL when a terminal is killed or released. Default 2 seconds. */
  readonly terminalTermGrace?: Duration.Input | undefined
  /** How long one request may take (but `terminal/wait_for_exit`), the policy's decision included. Default 10 seconds. */
  readonly timeout?: Duration.Input | undefined
  /** The file system to serve from. Default: the `FileSystem` in the session's context. */
  readonly fileSystem?: FileSystem.FileSystem | undefined
}

/**
 * What the client tells the agent it can do (`clientCapabilities`).
 *
 * @category models
 * @since 0.1.0
 */
export const capabilities = (options: Options | undefined): Machine.ClientCapabilities => ({
  readTextFile: options?.readTextFile === true,
  writeTextFile: options?.writeTextFile === true,
  terminal: options?.terminal === true
})

/**
 * Whether a method is the client's to serve (a file or terminal method).
 *
 * @category models
 * @since 0.1.0
 */
export const handles = (method: string): boolean => method.startsWith("fs/") || method.startsWith("terminal/")

/** `path` with `.` and `..` segments removed, if absolute. */
export const normalize = (path: string): string | undefined => {
  if (!path.startsWith("/")) return undefined
  const out: Array<string> = []
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") out.pop()
    else out.push(segment)
  }
  return `/${out.join("/")}`
}

/** Whether `path` is `root` or inside it. */
export const isInside = (root: string, path: string): boolean =>
  path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)

const refuse = (message: string): Provider.Reply => ({ _tag: "Error", message })

const sliceLines = (content: string, line: number | undefined, limit: number | undefined): string => {
  if (line === undefined && limit === undefined) return content
  const lines = content.split("\n")
  const start = Math.max(0, (line ?? 1) - 1)
  return lines.slice(start, limit === undefined ? undefined : start + limit).join("\n")
}

/**
 * The server of the client's file requests for a session in `cwd`: a reply for each request, never a failure.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (
  options: Options | undefined,
  cwd: string,
  fileSystem: FileSystem.FileSystem | undefined,
  terminals: Terminals.Terminals | undefined
) => {
  const timeout = Duration.fromInputUnsafe(options?.timeout ?? "10 seconds")
  const policy: Policy = options?.policy ?? (() => Effect.succeed(true))
  const fs = options?.fileSystem ?? fileSystem
  /** The real path of `path` (or of its directory, for a file still to be written), if inside the real cwd. */
  const resolve = (path: string, mustExist: boolean) =>
    Effect.gen(function*() {
      if (fs === undefined) return undefined
      const normal = normalize(path)
      if (normal === undefined || !isInside(normalize(cwd) ?? cwd, normal)) return undefined
      const root = yield* fs.realPath(cwd)
      const exists = yield* fs.exists(normal)
      if (mustExist && !exists) return undefined
      const real = exists
        ? yield* fs.realPath(normal)
        : `${yield* fs.realPath(normal.slice(0, normal.lastIndexOf("/")) || "/")}/${
          normal.slice(normal.lastIndexOf("/") + 1)
        }`
      return isInside(root, real) ? real : undefined
    })
  const terminal = serveTerminals(options, cwd, terminals)
  return (method: string, params: unknown): Effect.Effect<Provider.Reply> => {
    if (method.startsWith("terminal/")) {
      const served = terminal(method, params)
      // Waiting for an exit is bounded by the turn (the session stops the handler when it ends).
      return (method === "terminal/wait_for_exit" ? served : served.pipe(
        Effect.timeoutOrElse({
          duration: timeout,
          orElse: () => Effect.succeed(refuse(`${method} did not finish within ${Duration.toMillis(timeout)} ms`))
        })
      )).pipe(Effect.catchCause(() => Effect.succeed(refuse(`${method} failed`))))
    }
    const run = Effect.gen(function*() {
      if (fs === undefined) return refuse("the host serves no files")
      if (method === "fs/read_text_file" && options?.readTextFile === true) {
        const decoded = Decode.decodeReadTextFile(method, params)
        if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
        const p = decoded.success
        const path = yield* resolve(p.path, true)
        if (path === undefined) return refuse(`${p.path} is not a file inside the session's directory`)
        const request: FileRequest = { _tag: "Read", path, line: p.line ?? undefined, limit: p.limit ?? undefined }
        if (!(yield* policy(request))) return refuse(`the host refused to read ${p.path}`)
        const content = yield* fs.readFileString(path)
        return { _tag: "Success", payload: { content: sliceLines(content, request.line, request.limit) } } as const
      }
      if (method === "fs/write_text_file" && options?.writeTextFile === true) {
        const decoded = Decode.decodeWriteTextFile(method, params)
        if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
        const p = decoded.success
        const path = yield* resolve(p.path, false)
        if (path === undefined) return refuse(`${p.path} is not inside the session's directory`)
        if (!(yield* policy({ _tag: "Write", path, content: p.content }))) {
          return refuse(`the host refused to write ${p.path}`)
        }
        yield* fs.writeFileString(path, p.content)
        return { _tag: "Success", payload: {} } as const
      }
      return refuse(`this host does not serve ${method}`)
    })
    return run.pipe(
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.succeed(refuse(`${method} did not finish within ${Duration.toMillis(timeout)} ms`))
      }),
      Effect.catchCause(() => Effect.succeed(refuse(`${method} failed`)))
    )
  }
}

const success = (payload: unknown): Provider.Reply => ({ _tag: "Success", payload })

/** The server of the agent's terminal requests. */
const serveTerminals = (options: Options | undefined, cwd: string, terminals: Terminals.Terminals | undefined) => {
  const policy: TerminalPolicy = options?.terminalPolicy ?? (() => Effect.succeed(true))
  const root = normalize(cwd) ?? cwd
  const notFound = (id: string) => refuse(`no terminal ${id}`)
  return (method: string, params: unknown): Effect.Effect<Provider.Reply, Permission.PolicyError> =>
    Effect.gen(function*() {
      if (terminals === undefined || options?.terminal !== true) return refuse(`this host does not serve ${method}`)
      switch (method) {
        case "terminal/create": {
          const decoded = Decode.decodeCreateTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const p = decoded.success
          const dir = normalize(p.cwd ?? root)
          if (dir === undefined || !isInside(root, dir)) {
            return refuse(`${p.cwd} is not inside the session's directory`)
          }
          const env = Object.fromEntries((p.env ?? []).map((variable) => [variable.name, variable.value]))
          const request: TerminalRequest = { command: p.command, args: p.args ?? [], cwd: dir, env }
          if (!(yield* policy(request))) return refuse(`the host refused to run ${p.command}`)
          const id = yield* terminals.create({
            program: request.command,
            args: request.args,
            cwd: Option.some(dir),
            env: { mode: "inherit", set: env, unset: [] }
          }, p.outputByteLimit ?? undefined).pipe(
            Effect.catch((error) => Effect.succeed(refuse(`could not start ${p.command}: ${error.message}`)))
          )
          return typeof id === "string" ? success({ terminalId: id }) : id
        }
        case "terminal/output": {
          const decoded = Decode.decodeTerminalOutput(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const out = yield* terminals.output(decoded.success.terminalId)
          return out === undefined ? notFound(decoded.success.terminalId) : success(out)
        }
        case "terminal/wait_for_exit": {
          const decoded = Decode.decodeWaitForTerminalExit(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const status = yield* terminals.waitForExit(decoded.success.terminalId)
          return Option.isNone(status) ? notFound(decoded.success.terminalId) : success(status.value)
        }
        case "terminal/kill": {
          const decoded = Decode.decodeKillTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          return (yield* terminals.kill(decoded.success.terminalId))
            ? success({})
            : notFound(decoded.success.terminalId)
        }
        case "terminal/release": {
          const decoded = Decode.decodeReleaseTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          return (yield* terminals.release(decoded.success.terminalId))
            ? success({})
            : notFound(decoded.success.terminalId)
        }
        default:
          return refuse(`this host does not serve ${method}`)
      }
    })
}
