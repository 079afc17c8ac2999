/**
 * The provider contract: what a coding-agent CLI's protocol must give the session machinery.
 *
 * A provider is a pure, synchronous **protocol machine** (the sans-IO shape of h11 or quinn-proto): it turns each
 * stdout line of the CLI into neutral {@link Item}s, and each host command (a prompt, an interrupt, a control
 * request, an answer) into lines to write. It never performs I/O, never sleeps and holds no Effect: the session
 * machine decides what the items mean (which turn a frame belongs to, when a turn ends, which deadline runs), and
 * one Effect driver does the reading, the writing and the waiting around both.
 *
 * Provider-side ids stay inside the provider: the session names turns by the host's turn ids and control requests
 * by small integer refs, and the provider maps them to what its wire uses (Claude's user-message uuid and
 * `request_id`; Codex's JSON-RPC ids, thread id and server-assigned turn ids).
 *
 * `@tether/claude` (stream-json) and `@tether/codex` (app-server JSON-RPC) implement it; a third CLI implements it the
 * same way, in a package of its own, and gets every guarantee of the session for free.
 *
 * @since 0.1.0
 */
import * as fingerprints from "./internal/registry/fingerprint.ts"
import type { PermissionRequest, Verdict } from "./Permission.ts"
import type { SessionEvent } from "./SessionEvent.ts"
import type { ProtocolError } from "./TetherError.ts"
import type { AnyTurnError, Prompt, TurnResult } from "./Turn.ts"

/**
 * `SessionRegistry.fingerprint`, for a provider's registry kind: from a module that does not load `effect/Config`,
 * which `SessionRegistry` does.
 *
 * @category provider packages
 * @since 0.1.0
 */
export const fingerprint: (config: unknown) => string = fingerprints.fingerprint

/**
 * `SessionRegistry.shape` (a configuration's data and where it holds functions: the default key of a warm pool), for
 * a provider's registry kind, from a module that does not load `effect/Config`.
 *
 * @category provider packages
 * @since 0.1.0
 */
export const shape: (config: unknown) => string = fingerprints.shape

/**
 * What a provider can do, declared by the provider and reported by every session at runtime
 * (`session.capabilities`), so a host can check instead of reading the README.
 *
 * @category models
 * @since 0.1.0
 */
export interface Capabilities {
  /** The provider's name (`"claude"`, `"codex"`). */
  readonly provider: string
  /**
   * How the CLI confirms it took a prompt. `"explicit"`: a receipt frame (Claude 2.1.3xx `command_lifecycle
   * queued`, Codex's `turn/start` response), or the turn's first frame if it comes first. `"first-output"`: no
   * receipt; the first frame of the turn shows it.
   * Older Claude releases have no receipt, so Claude reports what the running CLI does once its handshake is done.
   */
  readonly receipts: "explicit" | "first-output"
  /** The running turn can be interrupted in the CLI (the turn then ends with an interrupted outcome). */
  readonly interrupt: boolean
  /** What the CLI asks permission for (`"tool"` for Claude's tools; `"command"`, `"file-change"` for Codex). */
  readonly permissionKinds: ReadonlyArray<string>
  /** A conversation can be resumed in a new process (Claude `--resume`, Codex `thread/resume`). */
  readonly resume: boolean
  /** The CLI can run tool commands in a sandbox of its own, and how. */
  readonly sandbox: string | undefined
  /** Free-form notes: versions, limits, what is emulated. */
  readonly notes: ReadonlyArray<string>
}

/**
 * How a provider ended a turn. The session attaches the turn's id and acknowledgement.
 *
 * @category models
 * @since 0.1.0
 */
export type TurnOutcome =
  | { readonly _tag: "Success" }
  | { readonly _tag: "Interrupted" }
  /** The model API failed for the turn (after the CLI's own retries); the session stays usable. */
  | { readonly _tag: "Api"; readonly status: number | null; readonly detail: string }
  /** Any other failure; the provider builds its own error (Claude's `MaxTurnsExceeded`, for instance). */
  | { readonly _tag: "Failed"; readonly error: (turnId: string) => AnyTurnError }

/**
 * A reply to a request the CLI made (a hook callback, an MCP message, an elicitation).
 *
 * @category models
 * @since 0.1.0
 */
export type Reply =
  | { readonly _tag: "Success"; readonly payload: unknown }
  /** `code`: the protocol's own error code for this failure, where the provider's protocol has codes. */
  | { readonly _tag: "Error"; readonly message: string; readonly code?: number | undefined }

/**
 * An event as a provider builds it: a {@link SessionEvent} whose `turnId` the session may complete.
 *
 * - `turnId` set: the frame names its turn (Claude's `user_message_uuid`, a Codex notification's turn id mapped to
 *   the host's id). It is attributed to that turn.
 * - `turnId` absent and `scope` absent or `"turn"`: the frame belongs to whatever turn is running once that turn's
 *   prompt was written (the session never writes a second prompt while a turn runs), and it counts as that turn's
 *   progress and, if no receipt came before it, as its acknowledgement.
 * - `scope: "session"`: traffic that says nothing about the running turn (answers to controls, a session going
 *   idle after a result): published without a turn, never counted as progress or receipt.
 *
 * @category models
 * @since 0.1.0
 */
export type EventItem = SessionEvent extends infer E ? E extends { readonly turnId: string | undefined } ?
      & Omit<E, "turnId">
      & { readonly turnId?: string | undefined; readonly scope?: "turn" | "session" | undefined }
  : never
  : never

/**
 * What a provider makes of a line or a command: the neutral vocabulary the session machine understands.
 *
 * @category models
 * @since 0.1.0
 */
export type Item =
  | EventItem
  /** Write this line to the CLI (handshake steps, answers the provider gives on its own). */
  | { readonly _tag: "Write"; readonly line: string }
  /** The handshake is done; `info` is what the session reports as its handshake (Claude's initialize response). */
  | { readonly _tag: "Ready"; readonly info: unknown }
  /** The CLI refused the handshake. */
  | { readonly _tag: "Refused"; readonly reason: string }
  /** The CLI confirmed it took the prompt of this turn. */
  | { readonly _tag: "Receipt"; readonly turnId: string }
  /** The CLI ended a turn (`turnId` absent: the running one). */
  | {
    readonly _tag: "TurnEnd"
    readonly turnId: string | undefined
    readonly outcome: TurnOutcome
    readonly result: Omit<TurnResult, "turnId">
  }
  /** An answer to a control request the session sent (answers to unknown refs are ignored). */
  | {
    readonly _tag: "ControlAnswer"
    readonly ref: number
    readonly answer:
      | { readonly _tag: "Success"; readonly payload: unknown }
      | { readonly _tag: "Error"; readonly message: string; readonly code: string | null }
  }
  /** The CLI asks the host's permission. */
  | { readonly _tag: "PermissionRequest"; readonly request: Omit<PermissionRequest, "turnId"> }
  /**
   * The CLI denied a tool use on its own, with no one to ask, where the session's policy is the default one, which
   * denies everything (Claude started without `--permission-prompt-tool` because the host gave no policy). The
   * session reports it as that policy's denial, as when the CLI asks: `PermissionRequested`, then
   * `PermissionResolved` decided by the policy with a deny carrying `message` (what the CLI told the model), and it
   * answers nothing. A provider sends it only for a session without a policy of the host's.
   */
  | {
    readonly _tag: "PermissionDenied"
    readonly request: Omit<PermissionRequest, "turnId">
    readonly message: string
  }
  /**
   * Another request from the CLI that the host answers (a hook callback, an MCP message). `request` is the
   * provider's own description, handed to the provider's handler; the session replies through
   * {@link ProtocolMachine.reply}. `bound` says how long the session waits for the handler:
   *
   * - `"control"` (the default): the control timeout; past it the CLI gets an error answer.
   * - `"turn"`: the work of the running turn that the CLI waits on (an in-process tool call, a hook, a question to
   *   the user): as long as that turn runs. While it is pending the turn is not stalled (the CLI is waiting for the
   *   host, as during a permission request); when the turn ends the handler is stopped and nothing is answered (the
   *   CLI no longer waits). The handler bounds itself more tightly where it has a bound of its own (a tool's
   *   timeout). With no turn running, the control timeout applies. It counts as the turn's progress, never as the
   *   acknowledgement of its prompt (a hook of the session's may cross a prompt just written).
   */
  | {
    readonly _tag: "HostRequest"
    readonly requestId: string
    readonly request: unknown
    readonly bound?: "control" | "turn" | undefined
  }
  /** The CLI withdrew one of its requests (a permission or a host request). */
  | { readonly _tag: "Cancel"; readonly requestId: string }
  /** The CLI's conversation id (Claude's session id, Codex's thread id). */
  | { readonly _tag: "SessionId"; readonly sessionId: string }
  /** A line that could not be decoded. */
  | { readonly _tag: "Malformed"; readonly error: ProtocolError; readonly raw: unknown }

/**
 * What a provider's decoder returns for one line: one item (most lines), several in order, or nothing.
 *
 * @category models
 * @since 0.1.0
 */
export type Items = Item | ReadonlyArray<Item> | undefined

/**
 * A protocol machine: one per session, created by {@link Provider.machine}. Every method is synchronous and pure
 * with respect to the outside world; methods that cannot encode what they are given throw, and the session turns
 * that into a typed error (`InvalidPrompt`, `ControlFailed`) without writing anything.
 *
 * @category models
 * @since 0.1.0
 */
export interface ProtocolMachine {
  /** Begins the handshake. The CLI may print nothing before its first stdin line: never wait before writing. */
  readonly start: () => Items
  /** Decodes one stdout line. */
  readonly receive: (line: string) => Items
  /** The lines that send a prompt for the host's turn `turnId` (throws when the prompt cannot be encoded). */
  readonly prompt: (turnId: string, prompt: Prompt) => Items
  /** The lines that interrupt the running turn `turnId`; its answer comes back as a `ControlAnswer` for `ref`. */
  readonly interrupt: (turnId: string, ref: number) => Items
  /** The lines of a raw control request; its answer comes back as a `ControlAnswer` for `ref`. */
  readonly control: (ref: number, request: unknown) => Items
  /** The lines that answer a permission request. */
  readonly answerPermission: (request: PermissionRequest, verdict: Verdict) => Items
  /** The lines that answer a {@link Item} `HostRequest`. */
  readonly reply: (requestId: string, reply: Reply) => Items
  /** What the provider can do; may change once the handshake tells it which CLI runs. */
  readonly capabilities: () => Capabilities
}
