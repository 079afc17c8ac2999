/**
 * The client side of ACP that an agent may use: reading and writing text files through the client
 * (`fs/read_text_file`, `fs/write_text_file`). Off by default: the agent is told the client has no such capability,
 * and a request for one is answered "method not found". A host turns them on in `AcpSession.Options.client`; they are
 * then served inside the session's working directory only (a path outside it, also through a symbolic link, is
 * refused), each request decided by the host's {@link Policy}, each bounded by {@link Options.timeout}.
 *
 * Terminals (`terminal/*`) are not served yet: the client does not advertise them, and they are answered "method not
 * found".
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import type * as Provider from "@tether/core/Provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import type * as Machine from "./internal/machine.ts"
import * as Decode from "./internal/protocol/runtime.ts"

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
  /** How long one request may take, the policy's decision included. Default 10 seconds. */
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
  terminal: false
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
export const serve = (options: Options | undefined, cwd: string, fileSystem: FileSystem.FileSystem | undefined) => {
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
  return (method: string, params: unknown): Effect.Effect<Provider.Reply> => {
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
