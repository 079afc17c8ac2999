/**
 * A permission policy that refuses shell commands which would leave work running after the tool returns
 * (`cmd &`, `nohup`, `setsid`, `disown`, `env -i setsid -f …`, `bash -c "setsid …"`, `perl -e 'fork and exit; …'`,
 * the tool's own `run_in_background`), decided from the command's syntax tree rather than by regular expressions:
 * the bash grammar of tree-sitter (`tree-sitter-bash`, run by `web-tree-sitter` as WebAssembly, so nothing is
 * compiled at install).
 *
 * It is defence in depth, not the guarantee. The guarantee is the transport's containment (a cgroup or a PID
 * namespace per session: see `transport.capabilities`), which ends whatever a tool leaves behind when the session
 * is released. A command-line matcher cannot see what a script or a program does once it runs (`./start.sh`,
 * `python app.py`, `make run`, `docker run -d`, `ssh -f`, `emacs --daemon`), nor functions and aliases defined
 * before the command, nor interpreter code that hides its calls; it refuses what it cannot read (a command name
 * that is an expansion, a shell reading commands from a pipe, text that does not parse, inline interpreter code
 * that mentions forking). The list of what it finds is `internal/shellCommand.ts`'s.
 *
 * It lives here, not in `@tether/core` (which depends on `effect` only), because it needs the parser. In core,
 * `Permission` keeps the policies that need none.
 *
 * Codex: its `item/commandExecution/requestApproval` requests carry the command as one string
 * (`/bin/bash -lc '…'`, which this policy unwraps like any `bash -c`), so when a Codex codec maps them to
 * permission requests, naming that tool in `shellTools` applies the same check. Codex asks only under approval
 * policies that ask (`untrusted`, or `on-request` for escalations), and its `workspace-write` sandbox (bubblewrap
 * with `--die-with-parent`, a PID namespace of its own) already ends what a command leaves behind; without the
 * sandbox, `turn/interrupt` leaves commands running until app-server exits, which is what this policy prevents.
 *
 * @since 0.1.0
 */
import * as Permission from "@tether/core/Permission"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as ShellCommand from "./internal/shellCommand.ts"

/**
 * One reason a command would leave work behind: a background `&`, a detaching program, forking interpreter code,
 * a command name or a shell input that cannot be known before it runs, or text that does not parse.
 *
 * @category models
 * @since 0.1.0
 */
export type Finding = ShellCommand.Finding

/**
 * The reasons a shell command line would leave work running after it returns (empty: none found). Loads the
 * parser at the first call (about 50 ms); later calls parse in well under a millisecond for a typical command.
 *
 * @example
 * ```ts
 * import { ShellPolicy } from "@tether/transport-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const findings = yield* ShellPolicy.findings("env -i setsid -f sleep 300")
 *   // [{ kind: "detaching-program", text: "env -i setsid -f sleep 300" }]
 * })
 * ```
 *
 * @category analysis
 * @since 0.1.0
 */
export const findings = (command: string): Effect.Effect<ReadonlyArray<Finding>> =>
  Effect.map(
    Effect.promise(() => ShellCommand.parser()),
    (parser) => ShellCommand.findings(parser, command)
  )

/**
 * The reasons a tool input would leave work behind: its `run_in_background` flag, and the findings of its
 * `command` (a string, or an argv array taken as one command).
 *
 * @category analysis
 * @since 0.1.0
 */
export const inputFindings = (input: { readonly [key: string]: unknown }): Effect.Effect<ReadonlyArray<Finding>> => {
  const flagged: Array<Finding> = input["run_in_background"] === true
    ? [{ kind: "background", text: "run_in_background" }]
    : []
  const command = input["command"]
  const text = Predicate.isString(command)
    ? command
    : Array.isArray(command) && command.every(Predicate.isString)
    ? command.map(quote).join(" ")
    : undefined
  if (text === undefined) return Effect.succeed(flagged)
  return Effect.map(findings(text), (found) => [...flagged, ...found])
}

const quote = (word: string): string =>
  /^[A-Za-z0-9_./=:,+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`

/**
 * Denies shell tool requests whose command would leave work running after the tool returns (see
 * {@link findings}); every other request goes to `otherwise`. The deny message names what was found, so the model
 * can run the work in the foreground instead.
 *
 * @example
 * ```ts
 * import { Permission } from "@tether/core"
 * import { ShellPolicy } from "@tether/transport-node"
 *
 * const policy = ShellPolicy.denyDetached(Permission.allowTools(["Bash", "Read"]))
 * ```
 *
 * @category policies
 * @since 0.1.0
 */
export const denyDetached = (
  otherwise: Permission.Policy,
  options?: { readonly shellTools?: Iterable<string> | undefined }
): Permission.Policy => {
  const shells = new Set(options?.shellTools ?? ["Bash"])
  return (request) =>
    shells.has(request.toolName)
      ? Effect.flatMap(inputFindings(request.input), (found) =>
        found.length === 0
          ? otherwise(request)
          : Effect.succeed(
            Permission.deny(
              "commands that leave work running after they return are not allowed here (" +
                found.map((finding) => finding.kind).filter((kind, i, all) => all.indexOf(kind) === i).join(", ") +
                "): run it in the foreground"
            )
          ))
      : otherwise(request)
}
