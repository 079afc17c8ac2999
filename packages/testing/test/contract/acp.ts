/**
 * The ACP adapter for the contract suite: `AcpSession` running `AcpAgent.command(["mock-acp"])` against `MockAcp`.
 * What ACP lacks, and the suite checks the substitute of: a permission cannot run a rewritten input (the agent gets a
 * reject), and a turn reports no token usage. Its receipt is the turn's first update (no receipt message), so a
 * "slow receipt" is a slow first update.
 */
import { AcpAgent, AcpSession } from "@tether/acp"
import { MockAcp, MockTransport } from "@tether/testing"
import type { Adapter, Behaviour, Script } from "./Adapter.ts"

type Line = { readonly [key: string]: any }

const steps = (behaviour: Behaviour): ReadonlyArray<MockAcp.Step> => {
  switch (behaviour._tag) {
    case "Text":
      return [MockAcp.text(behaviour.chunks, { delay: behaviour.delay })]
    case "Tool":
      return [MockAcp.tool({ command: behaviour.command, output: behaviour.output })]
    case "Stall":
      return [MockAcp.text(behaviour.before), MockAcp.stall()]
    case "Crash":
      return [MockAcp.text(behaviour.before), MockAcp.crash({ code: behaviour.code, stderr: behaviour.stderr })]
    case "ApiError":
      return [MockAcp.apiError({ status: behaviour.status })]
  }
}

const scriptOf = (script: Script): MockAcp.Script =>
  MockAcp.make(
    (script.rules ?? []).map(([match, behaviour]) => MockAcp.when(match, ...steps(behaviour))),
    {
      timing: script.slowReceipt === undefined ? {} : { firstUpdate: script.slowReceipt },
      faults: [
        ...(script.ignoreInterrupts === true ? [MockAcp.ignoreInterrupts] : []),
        ...(script.neverAnswerControl === true ? [MockAcp.neverAnswer("session/set_mode")] : []),
        ...(script.neverAnswerHandshake === true ? [MockAcp.neverAnswer("initialize")] : []),
        ...(script.exitAtStart === undefined ? [] : [MockAcp.crash(script.exitAtStart)])
      ]
    }
  )

const lines = (written: ReadonlyArray<unknown>) => written as ReadonlyArray<Line>

export const acp: Adapter = {
  name: "acp",
  provider: "acp",
  lacks: new Set(["rewrite-input", "usage"]),
  permissionKind: "tool",
  // One script per layer: the sessions a process makes are kept in it, so a later process can load them.
  transport: (script, options) => MockTransport.layer(scriptOf(script), options),
  make: (options) => AcpSession.make({ agent: AcpAgent.command(["mock-acp"]), cwd: "/home/user/project", ...options }),
  control: {
    request: { method: "session/set_mode", params: { modeId: "yolo" } },
    answered: (payload) => typeof payload === "object" && payload !== null
  },
  crash: (code, stderr) => MockAcp.crash({ code, stderr }),
  prompts: (written) => lines(written).filter((line) => line.method === "session/prompt").length,
  interrupts: (written) => lines(written).filter((line) => line.method === "session/cancel").length,
  resumed: (_spec, written, id) =>
    lines(written).some((line) => line.method === "session/load" && line.params?.sessionId === id)
}
