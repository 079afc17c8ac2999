/**
 * Session events: every decoded frame, and every change in a session's life, normalized across providers.
 *
 * Each event carries `turnId` when it belongs to a turn (everything the CLI prints after a turn's prompt was
 * written belongs to that turn, unless the frame names another turn or is session traffic such as a control
 * answer) and `raw`, the provider's frame as received, unknown fields included. The session numbers events with a
 * strictly increasing `seq` (see `EventLog`).
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { PermissionRequest, Resolution } from "./Permission.ts"
import type { ProtocolError } from "./TetherError.ts"
import type * as Transport from "./Transport.ts"
import type { AnyTurnError, TurnResult, Usage } from "./Turn.ts"

/**
 * A session's status.
 *
 * @category models
 * @since 0.1.0
 */
export type Status = "starting" | "idle" | "running" | "awaiting-permission" | "cancelling" | "closed" | "failed"

interface Common {
  readonly turnId: string | undefined
  readonly raw: unknown
}

/**
 * A normalized session event.
 *
 * @category models
 * @since 0.1.0
 */
export type SessionEvent = Data.TaggedEnum<{
  /** A prompt waits in the session's queue behind the running turn. */
  TurnQueued: Common
  /** The prompt was written to the CLI. */
  TurnStarted: Common
  /** The CLI confirmed it received the prompt. */
  TurnAcknowledged: Common
  TextDelta: Common & { readonly text: string }
  AssistantMessage: Common & { readonly text: string }
  ToolUse: Common & { readonly toolUseId: string; readonly name: string; readonly input: unknown }
  ToolResult: Common & { readonly toolUseId: string; readonly isError: boolean; readonly content: unknown }
  PermissionRequested: Common & { readonly request: PermissionRequest }
  PermissionResolved: Common & { readonly requestId: string; readonly resolution: Resolution }
  /** A turn's token usage; `totalCostUsd` where the provider reports a cost (Claude: cumulative over the process). */
  Usage: Common & { readonly usage: Usage; readonly totalCostUsd: number | undefined }
  TurnCompleted: Common & { readonly result: TurnResult }
  TurnFailed: Common & { readonly error: AnyTurnError }
  /** The session's status changed. */
  Status: Common & { readonly status: Status }
  /**
   * The CLI is retrying a failed model request (Claude's `system/api_retry`, a Codex `error` notification with
   * `willRetry`). The turn goes on.
   */
  Retry: Common & {
    readonly attempt: number | undefined
    readonly maxRetries: number | undefined
    readonly delayMs: number | undefined
    readonly errorStatus: number | undefined
    readonly message: string | undefined
  }
  ProtocolError: Common & { readonly error: ProtocolError }
  /**
   * A process of the session's tree ran into one of its limits (the transport's `limits`): `memory`, the OOM killer
   * ended `count` of them; `processes`, `count` forks were refused. The session goes on; an OOM kill of the CLI
   * itself is its `Exit` (and the turn's `CliExited`, `cause: "out-of-memory"`).
   */
  LimitHit: Common & Transport.LimitHit
  Exit: Common & { readonly status: Transport.ExitStatus; readonly stderrTail: string }
  /** Any other decoded frame (system/init, lifecycle, control traffic, unknown types). */
  Frame: Common & { readonly type: string; readonly subtype: string | undefined }
}>

/**
 * Constructors and matchers for {@link SessionEvent}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const SessionEvent = Data.taggedEnum<SessionEvent>()

/**
 * True for the event that ends a turn.
 *
 * @category guards
 * @since 0.1.0
 */
export const isTerminal = (
  event: SessionEvent
): event is Extract<SessionEvent, { _tag: "TurnCompleted" | "TurnFailed" }> =>
  event._tag === "TurnCompleted" || event._tag === "TurnFailed"
