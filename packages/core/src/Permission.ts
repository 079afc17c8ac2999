/**
 * Permission requests from the CLI, the host's decisions, and ready-made policies.
 *
 * A policy is `(request) => Effect<Decision>`. It may allow (optionally with a rewritten input), deny (optionally
 * interrupting the turn) or defer: a deferred request is answered later through the session by its request id,
 * exactly once. A policy that fails or dies never wedges the turn: the CLI receives a deny with the reason.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { fixDisposition } from "./internal/disposition.ts"
import { TaggedError } from "./internal/taggedError.ts"
import type * as TetherError from "./TetherError.ts"

/**
 * A tool-use permission request from the CLI.
 *
 * @category models
 * @since 0.1.0
 */
export interface PermissionRequest {
  /** The CLI's request id: answer deferred requests with it. */
  readonly requestId: string
  /** The turn the request belongs to. */
  readonly turnId: string
  /**
   * What the CLI asks permission for: `"tool"` (Claude: any tool use), `"command"` (Codex: a command to execute),
   * `"file-change"` (Codex: a patch to apply). The provider's capabilities list the kinds it sends.
   */
  readonly kind: string
  /** The tool (Claude's tool name; Codex: `"command"` or `"apply_patch"`). */
  readonly toolName: string
  readonly toolUseId: string | undefined
  readonly input: { readonly [key: string]: unknown }
  /** Human-readable description the CLI gave, if any. */
  readonly description: string | undefined
  /** The raw provider payload, unknown fields included. */
  readonly raw: unknown
  /**
   * Changes to the CLI's permissions that the CLI suggests with the request ("always allow this command"), in the
   * provider's format (Claude's `permission_suggestions`: `ClaudePermission.PermissionUpdate`). Hand them back,
   * whole or in part, as an allow's `updatedPermissions`. Absent for providers that suggest none (Codex).
   */
  readonly suggestions?: ReadonlyArray<PermissionUpdate> | undefined
}

/**
 * A change to the CLI's permissions, in the provider's format (Claude: `ClaudePermission.PermissionUpdate`, e.g.
 * `{ type: "addRules", rules: [{ toolName: "Bash", ruleContent: "npm test" }], behavior: "allow", destination:
 * "session" }`).
 *
 * @category models
 * @since 0.1.0
 */
export interface PermissionUpdate {
  readonly type: string
  readonly [key: string]: unknown
}

/**
 * A decision on a permission request.
 *
 * @category models
 * @since 0.1.0
 */
export type Decision = Data.TaggedEnum<{
  /**
   * Run the tool. `updatedInput` replaces the input (Claude requires an input; the original is sent if absent).
   * `updatedPermissions` also changes the CLI's permissions (an "always allow": the request's `suggestions`, or a
   * part of them), where the provider supports it (Claude; Codex ignores it).
   */
  Allow: {
    readonly updatedInput?: { readonly [key: string]: unknown } | undefined
    readonly updatedPermissions?: ReadonlyArray<PermissionUpdate> | undefined
  }
  /** Refuse the tool with a message the model sees; `interrupt` also ends the turn. */
  Deny: { readonly message: string; readonly interrupt?: boolean | undefined }
  /** Decide later through `Session.answerPermission`. Expires after the permission timeout (then denied). */
  Defer: {}
}>

const DecisionEnum = Data.taggedEnum<Decision>()

/**
 * A final decision: allow or deny (what a deferred request is eventually answered with).
 *
 * @category models
 * @since 0.1.0
 */
export type Verdict = Exclude<Decision, { readonly _tag: "Defer" }>

/**
 * Allow a tool use, with the original input or a rewritten one; `updatedPermissions` also changes the CLI's
 * permissions (see `ClaudePermission.allowAlways`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const allow = (
  updatedInput?: { readonly [key: string]: unknown },
  options?: { readonly updatedPermissions?: ReadonlyArray<PermissionUpdate> | undefined }
): Verdict =>
  options?.updatedPermissions === undefined
    ? DecisionEnum.Allow({ updatedInput })
    : DecisionEnum.Allow({ updatedInput, updatedPermissions: options.updatedPermissions })

/**
 * Deny a tool use with a message; `interrupt: true` also ends the turn.
 *
 * @category constructors
 * @since 0.1.0
 */
export const deny = (message: string, options?: { readonly interrupt?: boolean }): Verdict =>
  DecisionEnum.Deny({ message, interrupt: options?.interrupt })

/**
 * Defer the decision: answer later with `Session.answerPermission(requestId, decision)`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const defer: Decision = DecisionEnum.Defer()

/**
 * A host's permission policy.
 *
 * @category models
 * @since 0.1.0
 */
export type Policy = (request: PermissionRequest) => Effect.Effect<Decision, PolicyError>

/**
 * What a policy may fail with: any error. The session turns a failure (or a defect) into a deny with a reason and
 * logs it; the turn goes on.
 *
 * @category models
 * @since 0.1.0
 */
export type PolicyError = Error | string | { readonly _tag: string }

/**
 * The default policy: deny everything.
 *
 * @category policies
 * @since 0.1.0
 */
export const denyAll: Policy = () => Effect.succeed(deny("denied by the host's default policy"))

/**
 * Allow every tool use (use with care: tools run with the CLI's permissions).
 *
 * @category policies
 * @since 0.1.0
 */
export const allowAll: Policy = () => Effect.succeed(allow())

/**
 * Allow the named tools and deny every other one.
 *
 * @category policies
 * @since 0.1.0
 */
export const allowTools = (tools: Iterable<string>): Policy => {
  const allowed = new Set(tools)
  return (request) =>
    Effect.succeed(allowed.has(request.toolName) ? allow() : deny(`tool ${request.toolName} is not allowed`))
}

/**
 * Deny the named tools and pass every other request to `otherwise` (allow by default).
 *
 * @category policies
 * @since 0.1.0
 */
export const denyTools = (tools: Iterable<string>, otherwise: Policy = allowAll): Policy => {
  const denied = new Set(tools)
  return (request) =>
    denied.has(request.toolName) ? Effect.succeed(deny(`tool ${request.toolName} is denied`)) : otherwise(request)
}

/**
 * How a permission request was resolved.
 *
 * @category models
 * @since 0.1.0
 */
export type Resolution =
  | { readonly _tag: "Decided"; readonly by: "policy" | "host"; readonly decision: Verdict }
  | { readonly _tag: "PolicyFailed"; readonly reason: string }
  | { readonly _tag: "Expired"; readonly why: "timeout" | "cancelled-by-cli" | "turn-ended" | "session-ended" }

// The disposition flags of PermissionAlreadyResolved, set once on its prototype.
export interface PermissionAlreadyResolved extends TetherError.Disposition {}

/**
 * A deferred permission request was already answered (or expired).
 *
 * @category errors
 * @since 0.1.0
 */
export class PermissionAlreadyResolved extends TaggedError("PermissionAlreadyResolved")<{
  readonly requestId: string
  readonly how: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `permission request ${this.requestId} was already resolved (${this.how})`
  }
}

// The disposition flags of PermissionNotFound, set once on its prototype.
export interface PermissionNotFound extends TetherError.Disposition {}

/**
 * No deferred permission request with this id is known to the session.
 *
 * @category errors
 * @since 0.1.0
 */
export class PermissionNotFound extends TaggedError("PermissionNotFound")<{
  readonly requestId: string
}> {
  static {
    fixDisposition(this, false, false, false)
  }
  override get message() {
    return `no pending permission request ${this.requestId}`
  }
}
