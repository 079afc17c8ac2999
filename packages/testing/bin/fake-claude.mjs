#!/usr/bin/env node
// A stand-in for the `claude` CLI for process-level tests: the simulated CLI of `MockClaude` (the one MockTransport
// runs in memory) run as this process, over real stdio, with real timers and signals. See FakeClaude.ts for what it
// does and for its knobs (FAKE_CLAUDE_MODE and the others).
//
// What is about the process rather than the protocol happens here, first, in plain Node: descendants (grandchildren
// in its process group, a setsid shell, a double-forked daemon, the tool commands of FAKE_CLAUDE_TOOL, run the way
// the Bash tool runs one, and FAKE_CLAUDE_CLI_TOOL, run in the CLI's own session) and a flood on stderr. Then it loads the simulator
// through the package's own export, which is the TypeScript source in the workspace and the build when installed.
import { spawn } from "node:child_process"
import { withCompileCache } from "./compile-cache.mjs"

const env = process.env
const modes = new Set((env.FAKE_CLAUDE_MODE ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0))
const spawnAt = env.FAKE_CLAUDE_SPAWN_AT ?? "start"
const sleepSeconds = env.FAKE_CLAUDE_SLEEP_SECONDS ?? "1000"
const childStdio = env.FAKE_CLAUDE_CHILD_STDIO === "inherit" ? "inherit" : "ignore"

const log = (text) => process.stderr.write(`fake-claude[${process.pid}]: ${text}\n`)

// SIGTERM is ignored from the first instant, not only once the simulator is loaded.
if (modes.has("ignore-sigterm")) process.on("SIGTERM", () => log("ignoring SIGTERM"))

let descendantsStarted = false
const startDescendants = () => {
  if (descendantsStarted) return
  descendantsStarted = true
  if (modes.has("grandchildren")) {
    const count = Number(env.FAKE_CLAUDE_CHILDREN ?? "2")
    for (let i = 0; i < count; i++) {
      const child = spawn("sleep", [sleepSeconds], { stdio: childStdio })
      log(`spawned grandchild ${child.pid}`)
    }
  }
  if (modes.has("setsid-child")) {
    // `detached` makes the child call setsid(): a session and group leader, out of reach of a group kill. The
    // trailing `:` keeps sh from exec'ing sleep, so there is a leader and a member, like the Bash tool's shell.
    const child = spawn("/bin/sh", ["-c", `sleep ${sleepSeconds}; :`], { stdio: childStdio, detached: true })
    child.unref()
    log(`spawned setsid child ${child.pid}`)
  }
  for (const [command, detached] of [[env.FAKE_CLAUDE_TOOL, true], [env.FAKE_CLAUDE_CLI_TOOL, false]]) {
    if (command === undefined) continue
    const child = spawn("/bin/bash", ["-c", command], { stdio: childStdio, detached })
    child.on("error", () => {})
    child.unref()
    log(`ran tool ${child.pid}`)
  }
  if (modes.has("double-fork-daemon")) {
    // sh starts a new session, backgrounds sleep and exits: sleep is re-parented (PID 1 or a subreaper).
    const child = spawn("/bin/sh", ["-c", `sleep ${sleepSeconds} </dev/null >/dev/null 2>&1 & exit 0`], {
      stdio: childStdio,
      detached: true
    })
    child.unref()
    log(`spawned daemon launcher ${child.pid}`)
  }
}
if (spawnAt === "start") startDescendants()

if (modes.has("stderr-flood")) {
  const noise = "x".repeat(1023) + "\n"
  const pump = () => {
    // An async write loop that respects stderr's backpressure, so a host that does not drain stderr blocks us.
    while (process.stderr.write(noise)) {
      if (Math.random() < 0.01) break
    }
    if (process.stderr.writableNeedDrain) process.stderr.once("drain", pump)
    else setImmediate(pump)
  }
  pump()
}

const { main } = await withCompileCache(() => import("@tether/testing/FakeClaude"))
main({ onTurn: spawnAt === "turn" ? startDescendants : undefined })
