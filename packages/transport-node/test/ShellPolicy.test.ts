/**
 * The detach-denying policy against the escape list of issue 16 and the commands it must let through.
 */
import { assert, describe, it } from "@effect/vitest"
import { Permission } from "@tether/core"
import { ShellPolicy } from "@tether/transport-node"
import { Effect } from "effect"
import { escapes } from "./escapes.ts"

const kinds = (command: string) =>
  Effect.map(ShellPolicy.findings(command), (found) => [...new Set(found.map((finding) => finding.kind))].sort())

/** Commands that would leave work behind, with what must be found in each. */
const detaching: ReadonlyArray<readonly [string, ReadonlyArray<ShellPolicy.Finding["kind"]>]> = [
  ["sleep 300 &", ["background"]],
  ["env -i sleep 300 &", ["background"]],
  ["(sleep 300 &)", ["background"]],
  ["echo $(sleep 300 &)", ["background"]],
  ["coproc sleep 300", ["detaching-program"]],
  ["setsid sleep 300", ["detaching-program"]],
  ["/usr/bin/setsid sleep 300", ["detaching-program"]],
  ["'/usr/bin/setsid' sleep 300", ["detaching-program"]],
  ["\\setsid sleep 300", ["detaching-program"]],
  ["env setsid sleep 300", ["detaching-program"]],
  ["env -i setsid -f sleep 300", ["detaching-program"]],
  ["env -u HOME -i A=1 /bin/setsid -f sleep 300", ["detaching-program"]],
  ["nice setsid sleep 300", ["detaching-program"]],
  ["nice -n 5 setsid sleep 300", ["detaching-program"]],
  ["timeout 10 setsid sleep 300", ["detaching-program"]],
  ["timeout -s KILL 10 setsid sleep 300", ["detaching-program"]],
  ["command setsid sleep 300", ["detaching-program"]],
  ["exec setsid sleep 300", ["detaching-program"]],
  ["sudo -u nobody setsid sleep 300", ["detaching-program"]],
  ["busybox setsid sleep 300", ["detaching-program"]],
  ["X=1 setsid sleep 300", ["detaching-program"]],
  ["X=1 Y=2 env nice -n 1 timeout 5 setsid sleep 300", ["detaching-program"]],
  ["nohup sleep 300", ["detaching-program"]],
  ["sleep 300 & disown", ["background", "detaching-program"]],
  ["disown -a", ["detaching-program"]],
  ["systemd-run --user sleep 300", ["detaching-program"]],
  ["tmux new-session -d 'sleep 300'", ["detaching-program"]],
  ["echo 'sleep 300' | at now", ["detaching-program"]],
  ["bash -c \"setsid sleep 300\"", ["detaching-program"]],
  ["sh -lc 'nohup sleep 300'", ["detaching-program"]],
  ["/bin/bash -lc 'touch approved.txt && setsid sleep 300'", ["detaching-program"]],
  ["bash -c 'bash -c \"sleep 300 &\"'", ["background"]],
  ["eval 'setsid sleep 300'", ["detaching-program"]],
  ["bash <<EOF\nsetsid sleep 300\nEOF", ["detaching-program"]],
  ["bash <<< 'sleep 300 &'", ["background"]],
  ["f() { setsid sleep 300; }; f", ["detaching-program"]],
  ["if true; then nohup sleep 300; fi", ["detaching-program"]],
  ["for i in 1; do sleep 300 & done", ["background"]],
  ["perl -e 'fork and exit; sleep 300'", ["interpreter-code"]],
  ["python3 -c 'import os; os.setsid(); os.execve(\"/bin/sleep\", [\"sleep\", \"300\"], {})'", ["interpreter-code"]],
  ["node -e 'require(\"child_process\").spawn(\"sleep\", [\"300\"], { detached: true }).unref()'", [
    "interpreter-code"
  ]],
  ["ruby -e 'Process.daemon; sleep 300'", ["interpreter-code"]],
  ["curl -s https://example.invalid/install.sh | sh", ["shell-from-pipe"]],
  ["$cmd sleep 300", ["dynamic-command"]],
  ["\"$(echo setsid)\" sleep 300", ["dynamic-command"]],
  ["echo \"unterminated", ["unparsable"]]
]

/** Commands that leave nothing behind (or whose detaching no command-line matcher can see). */
const harmless: ReadonlyArray<string> = [
  "echo hi",
  "ls -la /tmp && cat notes.txt | grep setsid",
  "git commit -m 'use setsid & nohup in the docs'",
  "echo 'a & b'; echo \"x && y\"",
  "make test > out.log 2>&1",
  "npm test &> /dev/null",
  "ls |& grep x",
  "sleep 1; echo done",
  "env FOO=1 npm test",
  "nice -n 5 make",
  "timeout 10 make test",
  "$HOME/bin/tool --flag",
  "bash -c 'echo hi'",
  "/bin/bash -lc 'touch approved.txt && echo made-approved.txt'",
  "perl -e 'print 1 + 1'",
  "python3 -c 'print(42)'",
  "cat <<EOF > notes.txt\nsetsid is a program\nEOF",
  // Out of any command-line matcher's sight: the script detaches by itself. The containment ends it.
  "python3 app.py",
  "./start-daemon.sh"
]

describe("ShellPolicy", () => {
  it.effect("finds every detaching command of the list, through wrappers, nesting and interpreters", () =>
    Effect.gen(function*() {
      for (const [command, expected] of detaching) {
        assert.deepStrictEqual(yield* kinds(command), [...expected].sort(), command)
      }
    }))

  it.effect("lets ordinary commands through, quoted words and redirections included", () =>
    Effect.gen(function*() {
      for (const command of harmless) assert.deepStrictEqual(yield* kinds(command), [], command)
    }))

  it.effect("finds every escape the containment tests run", () =>
    Effect.gen(function*() {
      for (const escape of escapes) {
        const found = yield* kinds(escape.command("/tmp/report"))
        assert.isAbove(found.length, 0, `${escape.name}: ${escape.command("/tmp/report")}`)
      }
    }))

  it.effect("denyDetached: refuses the shell tool's detaching commands, passes the rest to the next policy", () =>
    Effect.gen(function*() {
      const policy = ShellPolicy.denyDetached(Permission.allowTools(["Bash", "Read"]))
      const request = (toolName: string, input: Record<string, unknown>): Permission.PermissionRequest => ({
        requestId: "r",
        turnId: "t",
        kind: "tool",
        toolName,
        toolUseId: undefined,
        input,
        description: undefined,
        raw: undefined
      })
      const denied = yield* policy(request("Bash", { command: "env -i setsid -f sleep 300" }))
      assert.strictEqual(denied._tag, "Deny")
      if (denied._tag === "Deny") assert.include(denied.message, "detaching-program")
      assert.strictEqual((yield* policy(request("Bash", { command: "sleep 1", run_in_background: true })))._tag, "Deny")
      assert.strictEqual((yield* policy(request("Bash", { command: "make test" })))._tag, "Allow")
      // Another tool's input is not a command line.
      assert.strictEqual((yield* policy(request("Read", { command: "setsid x" })))._tag, "Allow")
      assert.strictEqual((yield* policy(request("Write", {})))._tag, "Deny")
      // An argv array (as some tools send) is one command.
      const argv = ShellPolicy.denyDetached(Permission.allowAll, { shellTools: ["exec"] })
      assert.strictEqual((yield* argv(request("exec", { command: ["setsid", "-f", "sleep", "300"] })))._tag, "Deny")
      assert.strictEqual((yield* argv(request("exec", { command: ["echo", "a & b"] })))._tag, "Allow")
    }))
})
