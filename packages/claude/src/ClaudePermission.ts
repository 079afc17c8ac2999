/**
 * Claude's side of permission decisions: the changes to its permissions the CLI suggests with each request, and
 * "always allow", which hands them back with the allow.
 *
 * With every `can_use_tool` request the CLI suggests permission updates ("allow `Bash(npm test)` from now on", "add
 * this directory", "switch to acceptEdits"); `Permission.PermissionRequest.suggestions` carries them as they came,
 * and {@link suggestions} reads them as typed {@link PermissionUpdate}s. An allow with `updatedPermissions` applies
 * them: the next call that matches runs without asking (seen on 2.1.332).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClaudePermission } from "@tether/claude"
 * import { type Permission } from "@tether/core"
 *
 * // Ask once per tool and session: the first call is allowed with its suggestions, kept for this session only.
 * const policy: Permission.Policy = (request) => Effect.succeed(ClaudePermission.allowAlways(request))
 * ```
 *
 * @since 0.1.0
 */
import * as Permission from "@tether/core/Permission"
import type { PermissionUpdate as PermissionUpdateSchema } from "./internal/protocol/controls.ts"
import { isPermissionUpdate } from "./internal/protocol/runtime.ts"

/**
 * A change to the CLI's permissions: rules added, replaced or removed (`addRules`, …, with `behavior` and the
 * rules), a permission mode (`setMode`), or working directories (`addDirectories`, `removeDirectories`), each
 * written to a `destination` (a settings file, or `"session"` only).
 *
 * @category models
 * @since 0.1.0
 */
export type PermissionUpdate = PermissionUpdateSchema

/**
 * Where an update is written.
 *
 * @category models
 * @since 0.1.0
 */
export type Destination = PermissionUpdate["destination"]

/**
 * The updates the CLI suggests with a request, typed; suggestions of kinds this version of Tether does not know are
 * left out (they are in `request.suggestions`).
 *
 * @category accessors
 * @since 0.1.0
 */
export const suggestions = (request: Permission.PermissionRequest): ReadonlyArray<PermissionUpdate> =>
  (request.suggestions ?? []).filter(isPermissionUpdate)

/**
 * Allows the request and applies what the CLI suggests, so that matching calls no longer ask: "always allow".
 * `destination` (default `"session"`) says where the updates are written; the CLI's own suggestions often say
 * `localSettings` (the project's `.claude/settings.local.json`), which outlives the session. `only` keeps some of
 * the suggestions (by default: every rule, no mode change, no directory).
 *
 * @category constructors
 * @since 0.1.0
 */
export const allowAlways = (
  request: Permission.PermissionRequest,
  options?: {
    readonly destination?: Destination | undefined
    readonly only?: ((update: PermissionUpdate) => boolean) | undefined
    readonly updatedInput?: { readonly [key: string]: unknown } | undefined
  }
): Permission.Verdict => {
  const destination = options?.destination ?? "session"
  const keep = options?.only ?? ((update: PermissionUpdate) => update.type === "addRules")
  const updates = suggestions(request).filter(keep).map((update) => ({ ...update, destination }))
  return Permission.allow(options?.updatedInput, updates.length > 0 ? { updatedPermissions: updates } : undefined)
}

/**
 * An update that allows the named tools (rules as the CLI writes them: `"Bash"`, `"Bash(npm test)"` as
 * `{ toolName: "Bash", ruleContent: "npm test" }`), for an allow's `updatedPermissions`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const allowRules = (
  rules: ReadonlyArray<{ readonly toolName: string; readonly ruleContent?: string | undefined }>,
  destination: Destination = "session"
): PermissionUpdate => ({
  type: "addRules",
  rules: rules.map((rule) =>
    rule.ruleContent === undefined
      ? { toolName: rule.toolName }
      : { toolName: rule.toolName, ruleContent: rule.ruleContent }
  ),
  behavior: "allow",
  destination
})
