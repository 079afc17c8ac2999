/**
 * Codex's adapter for the contract suite: `CodexSession` against `MockCodex` (0.171.0), with the `untrusted` approval
 * policy so that every command asks the host.
 */
import { CodexSession } from "@tether/codex"
import { MockCodex, MockTransport } from "@tether/testing"
import type { Adapter, Behaviour, Script } from "./Adapter.ts"

type Line = { readonly [key: string]: any }

const steps = (behaviour: Behaviour): ReadonlyArray<MockCodex.Step> => {
  switch (behaviour._tag) {
    case "Text":
      return [MockCodex.text(behaviour.chunks, { delay: behaviour.delay })]
    case "Tool":
      return [MockCodex.command({ command: behaviour.command, output: behaviour.output })]
    case "Stall":
      return [MockCodex.text(behaviour.before), MockCodex.stall()]
    case "Crash":
      return [MockCodex.text(behaviour.before), MockCodex.crash({ code: behaviour.code, stderr: behaviour.stderr })]
    case "ApiError":
      return [MockCodex.apiError({ status: behaviour.status })]
  }
}

const scriptOf = (script: Script): MockCodex.Script =>
  MockCodex.make(
    (script.rules ?? []).map(([match, behaviour]) => MockCodex.when(match, ...steps(behaviour))),
    {
      timing: script.slowReceipt === undefined ? {} : { turnStart: script.slowReceipt },
      faults: [
        ...(script.ignoreInterrupts === true ? [MockCodex.ignoreInterrupts] : []),
        ...(script.neverAnswerControl === true ? [MockCodex.neverAnswer("model/list")] : []),
        ...(script.neverAnswerHandshake === true ? [MockCodex.neverAnswer("initialize")] : []),
        ...(script.exitAtStart === undefined ? [] : [MockCodex.crash(script.exitAtStart)])
      ]
    }
  )

const lines = (written: ReadonlyArray<unknown>) => written as ReadonlyArray<Line>

export const codex: Adapter = {
  name: "codex",
  provider: "codex",
  // Codex runs what it asked about or nothing: an allow with a rewritten input is sent as a decline.
  lacks: new Set(["rewrite-input"]),
  permissionKind: "command",
  // One script per layer: the threads a process starts are kept in it, so a later process can resume them.
  transport: (script, options) => MockTransport.layer(scriptOf(script), options),
  make: (options) => CodexSession.make({ approvalPolicy: "untrusted", ...options }),
  control: {
    request: { method: "model/list", params: {} },
    answered: (payload) => Array.isArray((payload as Line)["data"])
  },
  crash: (code, stderr) => MockCodex.crash({ code, stderr }),
  prompts: (written) => lines(written).filter((line) => line.method === "turn/start").length,
  interrupts: (written) => lines(written).filter((line) => line.method === "turn/interrupt").length,
  resumed: (_spec, written, id) =>
    lines(written).some((line) => line.method === "thread/resume" && line.params?.threadId === id)
}
