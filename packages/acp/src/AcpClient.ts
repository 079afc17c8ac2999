/**
 * The client side of ACP that an agent may use: reading and writing text files through the client
 * (`fs/read_text_file`, `fs/write_text_file`). Off by default: the agent is told the client has no such capability,
 * and a request for one is answered "method not found". A host turns them on in `AcpSession.Options.client`; they are
 * then served inside the session's working directory and its `additionalDirectories` only (a path outside them, also
 * through a symbolic link, is refused; so is a symbolic link whose target is missing, and a new file is created
 * exclusively, never through a link), each request decided by the host's {@link Policy} and resolved again once it
 * has decided, each bounded by {@link Options.timeout}. A missing file is answered `-32002` "Resource not found:
 * <path>" (what agents recognise as a missing file: Gemini CLI's write tools read first and create the file then);
 * a refusal `-32603`.
 *
 * Terminals (`terminal/*`), when the host turns them on, are processes the session's own transport opens (under
 * its containment: the whole tree is torn down when the agent kills or releases the terminal, and at the latest with
 * the session), in the session's directory or one inside it (symbolic links followed), each decided by the host's
 * {@link TerminalPolicy}. As Zed runs them, the command line runs through `/bin/sh -c` with no input (`/dev/null`)
 * and no pager (`PAGER=""`, `GIT_PAGER=cat`). Their output is their stdout, then their stderr's tail once they exit,
 * kept to the agent's `outputByteLimit` from the end (1 MiB when it gives none). Waiting for a terminal's exit is
 * bounded by the turn the agent asks in: when its prompt ends, the wait (as every request of the agent still open)
 * is answered `-32800` "Request cancelled" (a terminal left running goes on, until it is killed or released, or the
 * session ends).
 *
 * Capability difference: each terminal is a process of its own under the transport's containment, not inside the
 * agent's: on `NodeTransport` with cgroups it gets a cgroup (and limits) of its own, so the session's memory and
 * process limits bound the agent, and each of its terminals separately, never their sum.
 *
 * @since 0.1.0
 */
import type * as Permission from "@tether/core/Permission"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import type * as Machine from "./internal/machine.ts"

/**
 * A file request of the agent, as the policy sees it: `path` is the file's path once resolved (absolute, `.` and `..`
 * removed, symbolic links followed), which is inside the session's directory or one of its additional directories.
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
 * A terminal the agent asks to run, as the policy sees it: `cwd` is resolved (symbolic links followed) and inside the
 * session's directory.
 *
 * @category models
 * @since 0.1.0
 */
export interface TerminalRequest {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** What runs: `command` and `args` (quoted) as one line for `/bin/sh -c`. */
  readonly commandLine: string
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
