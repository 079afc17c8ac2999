/**
 * The server of the client side of ACP (`fs/*`, `terminal/*`) for one session: a reply for each request, never a
 * failure. What it serves and why is `AcpClient`'s documentation.
 *
 * @internal
 */
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as PlatformError from "effect/PlatformError"
import type * as AcpClient from "../AcpClient.ts"
import * as Decode from "./protocol/runtime.ts"
import * as Wire from "./protocol/wire.ts"
import type * as Terminals from "./terminals.ts"

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

const insideAny = (roots: ReadonlyArray<string>, path: string): boolean => roots.some((root) => isInside(root, path))

/** A refusal: the host will not do it (`-32603`, internal error, as Zed answers). */
const refuse = (message: string): Provider.Reply => ({
  _tag: "Error",
  message,
  code: Wire.errorCodes.internalError
})

/**
 * A file that is not there: `-32002` with "Resource not found: <path>", the one way an agent recognises a missing
 * file (Gemini CLI's `AcpFileSystemService` maps only that message, "ENOENT", "does not exist" and "No such file"
 * to ENOENT; its write tools read first and create the file on ENOENT).
 */
const notFound = (path: string): Provider.Reply => ({
  _tag: "Error",
  message: `Resource not found: ${path}`,
  code: Wire.errorCodes.resourceNotFound
})

const success = (payload: unknown): Provider.Reply => ({ _tag: "Success", payload })

const sliceLines = (content: string, line: number | undefined, limit: number | undefined): string => {
  if (line === undefined && limit === undefined) return content
  const lines = content.split("\n")
  const start = Math.max(0, (line ?? 1) - 1)
  return lines.slice(start, limit === undefined ? undefined : start + limit).join("\n")
}

/** Where a file request leads once resolved. */
type Target =
  | { readonly _tag: "Inside"; readonly path: string; readonly create: boolean }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Outside"; readonly reason: string }

const outside = (reason: string): Target => ({ _tag: "Outside", reason })

/** A shell word, quoted unless it needs no quoting. */
const quote = (word: string): string =>
  /^[A-Za-z0-9_/.:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`

/**
 * The shell line a terminal runs: the agent's `command` with its `args` quoted (agents send whole shell lines as
 * `command`, as Zed runs them through a shell).
 */
export const commandLine = (command: string, args: ReadonlyArray<string>): string =>
  args.length === 0 ? command : [command, ...args.map(quote)].join(" ")

/**
 * The server of a session's client requests: files inside `roots` (the session's directory, then its additional
 * directories), terminals through `terminals`.
 */
export const serve = (
  options: AcpClient.Options | undefined,
  roots: ReadonlyArray<string>,
  fileSystem: FileSystem.FileSystem | undefined,
  terminals: Terminals.Terminals | undefined
) => {
  const timeout = Duration.fromInputUnsafe(options?.timeout ?? "10 seconds")
  const policy: AcpClient.Policy = options?.policy ?? (() => Effect.succeed(true))
  const fs = options?.fileSystem ?? fileSystem
  const normalRoots = roots.flatMap((root) => normalize(root) ?? [])
  /** The real paths of the roots (those that exist). */
  const realRoots = (fs: FileSystem.FileSystem) =>
    Effect.map(
      Effect.forEach(normalRoots, (root) => Effect.option(fs.realPath(root))),
      (found) => found.flatMap((root) => Option.isSome(root) ? [root.value] : [])
    )

  /**
   * The real path of a file to read: the file itself, symbolic links followed, which must be inside a real root.
   * A missing file (or a link to one) is `Missing`.
   */
  const resolveRead = (fs: FileSystem.FileSystem, path: string) =>
    Effect.gen(function*() {
      const normal = normalize(path)
      if (normal === undefined || !insideAny(normalRoots, normal)) {
        return outside("is not inside the session's directory")
      }
      const real = yield* Effect.option(fs.realPath(normal))
      if (Option.isNone(real)) return { _tag: "Missing" } as Target
      return insideAny(yield* realRoots(fs), real.value)
        ? { _tag: "Inside", path: real.value, create: false } as Target
        : outside("is not inside the session's directory")
    })

  /**
   * Where a write lands: an existing file (through its links) inside a real root; or, if nothing is there (not even
   * a dangling link: the entry itself is looked at, never followed), a new file in a real directory inside a root,
   * created exclusively (`wx`: it never follows a link that appears meanwhile). A link whose target is missing is
   * refused: writing through it would create a file wherever it points.
   */
  const resolveWrite = (fs: FileSystem.FileSystem, path: string) =>
    Effect.gen(function*() {
      const normal = normalize(path)
      if (normal === undefined || !insideAny(normalRoots, normal)) {
        return outside("is not inside the session's directory")
      }
      const roots = yield* realRoots(fs)
      const entry = yield* Effect.option(fs.lstat(normal))
      if (Option.isSome(entry)) {
        const real = yield* Effect.option(fs.realPath(normal))
        if (Option.isNone(real)) return outside("is a symbolic link to a missing file")
        return insideAny(roots, real.value)
          ? { _tag: "Inside", path: real.value, create: false } as Target
          : outside("is not inside the session's directory")
      }
      const slash = normal.lastIndexOf("/")
      const parent = yield* Effect.option(fs.realPath(normal.slice(0, slash) || "/"))
      if (Option.isNone(parent)) return { _tag: "Missing" } as Target
      const real = `${parent.value === "/" ? "" : parent.value}/${normal.slice(slash + 1)}`
      return insideAny(roots, real)
        ? { _tag: "Inside", path: real, create: true } as Target
        : outside("is not inside the session's directory")
    })

  const sameTarget = (a: Target, b: Target): boolean =>
    a._tag === "Inside" && b._tag === "Inside" && a.path === b.path && a.create === b.create

  const files = (method: string, params: unknown) =>
    Effect.gen(function*() {
      if (fs === undefined) return refuse("the host serves no files")
      if (method === "fs/read_text_file" && options?.readTextFile === true) {
        const decoded = Decode.decodeReadTextFile(method, params)
        if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
        const p = decoded.success
        const target = yield* resolveRead(fs, p.path)
        if (target._tag === "Missing") return notFound(p.path)
        if (target._tag === "Outside") return refuse(`${p.path} ${target.reason}`)
        const request: AcpClient.FileRequest = {
          _tag: "Read",
          path: target.path,
          line: p.line ?? undefined,
          limit: p.limit ?? undefined
        }
        if (!(yield* policy(request))) return refuse(`the host refused to read ${p.path}`)
        // Resolved again once the policy has decided: what it allowed is what is read.
        if (!sameTarget(target, yield* resolveRead(fs, p.path))) return refuse(`${p.path} changed meanwhile`)
        const content = yield* fs.readFileString(target.path)
        return success({ content: sliceLines(content, request.line, request.limit) })
      }
      if (method === "fs/write_text_file" && options?.writeTextFile === true) {
        const decoded = Decode.decodeWriteTextFile(method, params)
        if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
        const p = decoded.success
        const target = yield* resolveWrite(fs, p.path)
        if (target._tag === "Missing") return notFound(p.path)
        if (target._tag === "Outside") return refuse(`${p.path} ${target.reason}`)
        if (!(yield* policy({ _tag: "Write", path: target.path, content: p.content }))) {
          return refuse(`the host refused to write ${p.path}`)
        }
        if (!sameTarget(target, yield* resolveWrite(fs, p.path))) return refuse(`${p.path} changed meanwhile`)
        yield* fs.writeFileString(target.path, p.content, { flag: target.create ? "wx" : "w" })
        return success({})
      }
      return refuse(`this host does not serve ${method}`)
    })

  const terminal = serveTerminals(options, normalRoots, fs, terminals)
  return (method: string, params: unknown): Effect.Effect<Provider.Reply> => {
    const served: Effect.Effect<Provider.Reply, PlatformError.PlatformError | Permission.PolicyError> =
      method.startsWith("terminal/")
        ? terminal(method, params)
        : files(method, params)
    // Waiting for an exit is bounded by the turn (the session stops the handler when it ends), not by `timeout`.
    return (method === "terminal/wait_for_exit" ? served : served.pipe(
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.succeed(refuse(`${method} did not finish within ${Duration.toMillis(timeout)} ms`))
      })
    )).pipe(Effect.catchCause(() => Effect.succeed(refuse(`${method} failed`))))
  }
}

/** The server of the agent's terminal requests. */
const serveTerminals = (
  options: AcpClient.Options | undefined,
  roots: ReadonlyArray<string>,
  fs: FileSystem.FileSystem | undefined,
  terminals: Terminals.Terminals | undefined
) => {
  const policy: AcpClient.TerminalPolicy = options?.terminalPolicy ?? (() => Effect.succeed(true))
  const unknown = (id: string) => refuse(`no terminal ${id}`)
  /** The terminal's directory, symbolic links followed where a file system is at hand, if inside a root. */
  const directory = (cwd: string | null | undefined) =>
    Effect.gen(function*() {
      const dir = normalize(cwd ?? roots[0] ?? "")
      if (dir === undefined || !insideAny(roots, dir)) return undefined
      if (fs === undefined) return dir
      const real = yield* Effect.option(fs.realPath(dir))
      if (Option.isNone(real)) return undefined
      const realRoots = yield* Effect.forEach(roots, (root) => Effect.option(fs.realPath(root)))
      return insideAny(realRoots.flatMap((root) => Option.isSome(root) ? [root.value] : []), real.value)
        ? real.value
        : undefined
    })
  return (method: string, params: unknown) =>
    Effect.gen(function*() {
      if (terminals === undefined || options?.terminal !== true) return refuse(`this host does not serve ${method}`)
      switch (method) {
        case "terminal/create": {
          const decoded = Decode.decodeCreateTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const p = decoded.success
          const dir = yield* directory(p.cwd)
          if (dir === undefined) return refuse(`${p.cwd} is not a directory inside the session's directory`)
          const env = Object.fromEntries((p.env ?? []).map((variable) => [variable.name, variable.value]))
          const line = commandLine(p.command, p.args ?? [])
          const request: AcpClient.TerminalRequest = {
            command: p.command,
            args: p.args ?? [],
            commandLine: line,
            cwd: dir,
            env
          }
          if (!(yield* policy(request))) return refuse(`the host refused to run ${p.command}`)
          const id = yield* terminals.create({
            // Through a shell, as Zed runs them (agents send whole shell lines), with no input and no pager.
            program: "/bin/sh",
            args: ["-c", `exec </dev/null\n${line}`],
            cwd: Option.some(dir),
            env: { mode: "inherit", set: { PAGER: "", GIT_PAGER: "cat", ...env }, unset: [] }
          }, p.outputByteLimit ?? undefined).pipe(
            Effect.catch((error) => Effect.succeed(refuse(`could not start ${p.command}: ${error.message}`)))
          )
          return typeof id === "string" ? success({ terminalId: id }) : id
        }
        case "terminal/output": {
          const decoded = Decode.decodeTerminalOutput(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const out = yield* terminals.output(decoded.success.terminalId)
          return out === undefined ? unknown(decoded.success.terminalId) : success(out)
        }
        case "terminal/wait_for_exit": {
          const decoded = Decode.decodeWaitForTerminalExit(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          const status = yield* terminals.waitForExit(decoded.success.terminalId)
          return Option.isNone(status) ? unknown(decoded.success.terminalId) : success(status.value)
        }
        case "terminal/kill": {
          const decoded = Decode.decodeKillTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          return (yield* terminals.kill(decoded.success.terminalId))
            ? success({})
            : unknown(decoded.success.terminalId)
        }
        case "terminal/release": {
          const decoded = Decode.decodeReleaseTerminal(method, params)
          if (decoded._tag === "Failure") return refuse(decoded.failure.detail)
          return (yield* terminals.release(decoded.success.terminalId))
            ? success({})
            : unknown(decoded.success.terminalId)
        }
        default:
          return refuse(`this host does not serve ${method}`)
      }
    })
}
