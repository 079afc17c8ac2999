/**
 * Claude Code's adapters for the contract suite: `ClaudeSession` against `MockClaude`, once for each pinned CLI
 * version it simulates (2.1.332, and 2.1.197 with its older frame order: no `command_lifecycle`, the prompt replayed
 * only after the first model response).
 */
import { ClaudeSession } from "@tether/claude"
import { MockClaude, MockTransport, PinnedClaude } from "@tether/testing"
import type { Adapter, Behaviour, Script } from "./Adapter.ts"

type Frame = { readonly [key: string]: any }

const steps = (behaviour: Behaviour): ReadonlyArray<MockClaude.Step> => {
  switch (behaviour._tag) {
    case "Text":
      return [MockClaude.text(behaviour.chunks, { delay: behaviour.delay })]
    case "Tool":
      return [
        MockClaude.tool({
          name: "Bash",
          input: { command: behaviour.command, description: "contract" },
          output: (input) => input["command"] === behaviour.command ? behaviour.output : `ran ${input["command"]}`
        })
      ]
    case "Stall":
      return [MockClaude.text(behaviour.before), MockClaude.stall()]
    case "Crash":
      return [MockClaude.text(behaviour.before), MockClaude.crash({ code: behaviour.code, stderr: behaviour.stderr })]
    case "ApiError":
      return [MockClaude.apiError({ status: behaviour.status })]
  }
}

const scriptOf = (script: Script, version: string): MockClaude.Script =>
  MockClaude.make(
    (script.rules ?? []).map(([match, behaviour]) => MockClaude.when(match, ...steps(behaviour))),
    {
      version,
      timing: script.slowReceipt === undefined ? {} : { receipt: script.slowReceipt },
      faults: [
        ...(script.ignoreInterrupts === true ? [MockClaude.ignoreInterrupts] : []),
        ...(script.neverAnswerControl === true ? [MockClaude.neverAnswer("mcp_status")] : []),
        ...(script.neverAnswerHandshake === true ? [MockClaude.neverAnswer("initialize")] : []),
        ...(script.exitAtStart === undefined ? [] : [MockClaude.crash(script.exitAtStart)])
      ]
    }
  )

const frames = (written: ReadonlyArray<unknown>) => written as ReadonlyArray<Frame>

const adapter = (version: string): Adapter => ({
  name: `claude ${version}`,
  provider: "claude",
  lacks: new Set(version === "2.1.197" ? ["default-deny-events"] : []),
  permissionKind: "tool",
  transport: (script, options) => MockTransport.layer(scriptOf(script, version), options),
  make: (options) => ClaudeSession.make(options),
  control: {
    request: { subtype: "mcp_status" },
    answered: (payload) => Array.isArray((payload as Frame)["mcpServers"])
  },
  crash: (code, stderr) => MockClaude.crash({ code, stderr }),
  prompts: (written) => frames(written).filter((frame) => frame.type === "user").length,
  interrupts: (written) => frames(written).filter((frame) => frame.request?.subtype === "interrupt").length,
  resumed: (spec, _written, id) =>
    spec.args.some((arg, i) => arg === `--resume=${id}` || spec.args[i - 1] === "--resume" && arg === id)
})

/** One adapter per pinned Claude Code version, newest first. */
export const claude: ReadonlyArray<Adapter> = PinnedClaude.versions.map(adapter)
