/**
 * What a provider gives the contract suite (suite.ts): how to start its session, how to script each scenario with
 * its simulator, how to read what the host wrote to its CLI, and which capabilities it lacks. Every provider's
 * adapter is small; the scenarios and their assertions are the suite's, the same for every provider.
 */
import type { AcpSession } from "@tether/acp"
import type { ClaudeSession } from "@tether/claude"
import type { CodexSession } from "@tether/codex"
import type { Permission, Session, TetherError, Timeouts, Transport, Turn } from "@tether/core"
import type { MockTransport } from "@tether/testing"
import type { Duration, Effect, Layer, Scope } from "effect"

/** A session of any provider, as the suite drives it: the neutral result, and every provider's own turn errors. */
export type AnySession = Session.Session<
  Turn.TurnResult,
  ClaudeSession.TurnError | CodexSession.TurnError | AcpSession.TurnError
>

/** What the model does in a turn whose prompt matches a rule. */
export type Behaviour =
  /** Streamed text. */
  | { readonly _tag: "Text"; readonly chunks: ReadonlyArray<string>; readonly delay?: Duration.Input | undefined }
  /**
   * A shell command that needs the host's permission (Claude: the Bash tool; Codex: a command execution), whose run
   * prints `output`; after it the model answers with what the tool said. A rewritten command prints
   * `ran <command>`.
   */
  | { readonly _tag: "Tool"; readonly command: string; readonly output: string }
  /** Some text, then the stream goes silent for good (interrupts still work). */
  | { readonly _tag: "Stall"; readonly before: string }
  /** Some text, then the CLI crashes. */
  | { readonly _tag: "Crash"; readonly before: string; readonly code: number; readonly stderr: string }
  /** The model API fails with this HTTP status. */
  | { readonly _tag: "ApiError"; readonly status: number }

/** A scenario's CLI, provider-neutral. Turns no rule matches echo the prompt. */
export interface Script {
  readonly rules?: ReadonlyArray<readonly [match: string, behaviour: Behaviour]> | undefined
  /** The CLI confirms a prompt only after this long (Claude: `command_lifecycle queued`; Codex: `turn/start`'s answer). */
  readonly slowReceipt?: Duration.Input | undefined
  /** Interrupts are answered but the turn goes on. */
  readonly ignoreInterrupts?: boolean | undefined
  /** The CLI never answers the raw control of {@link Adapter.control}. */
  readonly neverAnswerControl?: boolean | undefined
  /** The CLI never answers the first request of its handshake. */
  readonly neverAnswerHandshake?: boolean | undefined
  /** The CLI exits with this code and stderr as soon as it has started (during the handshake). */
  readonly exitAtStart?: { readonly code: number; readonly stderr: string } | undefined
}

/** The session options every provider takes, as the suite sets them. */
export interface Options {
  readonly policy?: Permission.Policy | undefined
  readonly timeouts?: Timeouts.Timeouts | undefined
  readonly queue?: boolean | undefined
  readonly queueCapacity?: number | undefined
  /** Resume the conversation with this id (Claude's session id, Codex's thread id). */
  readonly resume?: string | undefined
}

/** What a provider has that another one lacks: the suite checks the documented substitute instead. */
export type Capability =
  /** Allowing a tool use with a rewritten input runs the rewritten input (Codex cannot: it declines instead). */
  | "rewrite-input"
  /** A turn reports its token usage (ACP v1 reports none: the result's usage, and its `Usage` event's, are zeros). */
  | "usage"
  /**
   * Without a policy of the host's, a tool use the default policy denies is reported as its deny (`PermissionResolved`).
   * Claude 2.1.197, started without a permission prompt tool when the host gives no policy, denies on its own and says
   * nothing of it before the result: the host sees the tool's error result (and Claude's `permissionDenials`) only.
   */
  | "default-deny-events"

export interface Adapter {
  readonly name: string
  /** The provider's name, as `session.protocol` and `capabilities.provider` give it. */
  readonly provider: string
  /** The capabilities of the suite's list this provider lacks. */
  readonly lacks: ReadonlySet<Capability>
  /** The permission request kind of {@link Behaviour} `Tool`. */
  readonly permissionKind: string
  /** The transport that runs this provider's simulator playing `script`. */
  readonly transport: (
    script: Script,
    options?: MockTransport.LayerOptions
  ) => Layer.Layer<Transport.Transport | MockTransport.MockTransport>
  /** Starts a session of this provider in the current scope. */
  readonly make: (
    options: Options
  ) => Effect.Effect<AnySession, Session.StartError, Transport.Transport | Scope.Scope>
  /** A raw control request the CLI answers, and a check of its answer's payload. */
  readonly control: { readonly request: unknown; readonly answered: (payload: unknown) => boolean }
  /** A fault that crashes the CLI now. */
  readonly crash: (code: number, stderr: string) => MockTransport.Fault
  /** The prompts among the lines the host wrote. */
  readonly prompts: (written: ReadonlyArray<unknown>) => number
  /** The interrupt requests among the lines the host wrote. */
  readonly interrupts: (written: ReadonlyArray<unknown>) => number
  /** Whether the host asked the CLI to resume `id` (on its command line or in its handshake). */
  readonly resumed: (spec: Transport.LaunchSpec, written: ReadonlyArray<unknown>, id: string) => boolean
}

export type { TetherError }
