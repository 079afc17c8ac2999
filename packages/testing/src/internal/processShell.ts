/**
 * The Node shell that runs a simulator (see `Simulator.ts`) as this very process: stdin lines in, stdout lines out,
 * real timers, real signals. The fake CLI executables in `bin/` are this shell around a provider's simulator.
 *
 * Output is gathered into writes of up to `batchBytes` and taken from the simulator only while stdout accepts it:
 * a host that stops reading blocks the simulated CLI on a full pipe, as it would the real one, and stdin is read in
 * between two batches, so an interrupt lands mid-stream. Each line is encoded into a reused buffer as it comes: a
 * batch built as one string by `+=` cost about twice as much to write, which held the benchmarks' fast fake below
 * the rate of the hosts it measures. The process lives until the simulator exits (a hung CLI stays alive after
 * stdin's EOF); SIGTERM and SIGINT go to the simulator, which decides.
 *
 * @internal
 */
import type * as Simulator from "../Simulator.ts"

export interface Options<Fault> {
  readonly simulator: Simulator.Factory<Fault>
  /** Bytes of stdout gathered before a write, and before stdin gets a turn. */
  readonly batchBytes: number
  /** Whether stdin's EOF reaches the simulator; a process that ignores EOF outlives its stdin. */
  readonly endInputOnEof: boolean
  /** Sees every stdout line before it is written (process-level behaviour that watches the protocol). */
  readonly onStdout?: ((line: string, simulator: Simulator.Simulator<Fault>) => void) | undefined
}

const signalNumbers: Record<Simulator.Signal, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }

/** Runs `options.simulator` as this process until it exits. */
export const run = <Fault>(options: Options<Fault>): void => {
  const simulator = options.simulator(
    { args: process.argv.slice(2), env: process.env, cwd: process.cwd(), pid: process.pid },
    Date.now()
  )
  // Alive until the simulator exits, whatever happens to stdin.
  const alive = setInterval(() => {}, 1 << 30)
  // The stdout not yet written: `slab[batchStart, batchEnd)`. Bytes handed to a write are not written over while
  // stdout still holds any (its write queue, libuv, a full pipe): the buffer is reused from its start only once
  // stdout has taken everything, and replaced when it runs out of room before that.
  const slabBytes = Math.max(2 * options.batchBytes, 1 << 16)
  let slab = Buffer.allocUnsafe(slabBytes)
  let batchStart = 0
  let batchEnd = 0
  /** Adds one line (and its newline) to the output. */
  const append = (line: string) => {
    if (batchStart === batchEnd && process.stdout.writableLength === 0) {
      batchStart = batchEnd = 0
      // A buffer grown for a giant line is not kept once that line is out.
      if (slab.length > slabBytes) slab = Buffer.allocUnsafe(slabBytes)
    }
    // Three bytes of UTF-8 at most per UTF-16 unit, and the newline.
    const bytes = line.length * 3 + 1
    if (slab.length - batchEnd < bytes) {
      const next = Buffer.allocUnsafe(Math.max(slab.length, 2 * (batchEnd - batchStart + bytes)))
      slab.copy(next, 0, batchStart, batchEnd)
      slab = next
      batchEnd -= batchStart
      batchStart = 0
    }
    batchEnd += slab.write(line, batchEnd)
    slab[batchEnd++] = 10
  }
  /** Writes the output gathered so far; `done` runs once stdout has taken it. False: wait for `drain`. */
  const writePending = (done?: () => void): boolean => {
    const pending = slab.subarray(batchStart, batchEnd)
    batchStart = batchEnd
    return process.stdout.write(pending, done)
  }
  let blocked = false
  let exiting = false
  let scheduled = false
  let timer: ReturnType<typeof setTimeout> | undefined
  let armedAt = Number.POSITIVE_INFINITY

  const exit = (status: Simulator.ExitStatus) => {
    exiting = true
    clearInterval(alive)
    if (timer !== undefined) clearTimeout(timer)
    // Killed by a signal: at once. Exited: once stdout has taken everything (the callback runs when the data reached
    // the pipe).
    if (status._tag === "Signaled") return process.exit(128 + signalNumbers[status.signal])
    writePending(() => process.exit(status.code))
  }

  /** Takes one output; false once the process exits. */
  const handle = (out: Simulator.Output): boolean => {
    switch (out._tag) {
      case "Stdout": {
        options.onStdout?.(out.line, simulator)
        append(out.line)
        return true
      }
      case "TooLong": {
        append(out.prefix + "x".repeat(Math.max(0, out.length - out.prefix.length)))
        return true
      }
      case "Stderr": {
        process.stderr.write(out.text)
        return true
      }
      case "Exit": {
        exit(out.status)
        return false
      }
    }
  }

  const pump = (): void => {
    scheduled = false
    if (blocked || exiting) return
    const now = Date.now()
    let more = false
    for (let out = simulator.poll(now); out !== undefined; out = simulator.poll(now)) {
      if (!handle(out)) return
      if (batchEnd - batchStart >= options.batchBytes) {
        more = true
        break
      }
    }
    if (batchEnd > batchStart) {
      const accepted = writePending()
      if (!accepted) {
        blocked = true
        process.stdout.once("drain", () => {
          blocked = false
          pump()
        })
        return
      }
    }
    // A long stream goes on after stdin had its turn.
    if (more) return void setImmediate(pump)
    arm(simulator.nextWake())
  }

  const arm = (wake: number) => {
    if (wake === Number.POSITIVE_INFINITY || wake >= armedAt) return
    if (timer !== undefined) clearTimeout(timer)
    armedAt = wake
    timer = setTimeout(() => {
      timer = undefined
      armedAt = Number.POSITIVE_INFINITY
      pump()
    }, Math.max(0, wake - Date.now()))
  }

  /** After an input: hand out what it caused, once the current event is done. */
  const schedule = () => {
    if (scheduled) return
    scheduled = true
    queueMicrotask(pump)
  }

  process.stdout.on("error", () => process.exit(141))
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (exiting) return
      // A signal the simulated CLI does not ignore kills it at once, even while it waits for a full stdout.
      const now = Date.now()
      simulator.signal(now, signal)
      const out = simulator.poll(now)
      if (out !== undefined && handle(out)) schedule()
    })
  }

  let buffered = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk: string) => {
    buffered += chunk
    let start = 0
    let newline: number
    const now = Date.now()
    while ((newline = buffered.indexOf("\n", start)) !== -1) {
      simulator.write(now, buffered.slice(start, newline))
      start = newline + 1
    }
    buffered = buffered.slice(start)
    schedule()
  })
  process.stdin.on("end", () => {
    const now = Date.now()
    if (buffered.length > 0) simulator.write(now, buffered)
    buffered = ""
    if (options.endInputOnEof) simulator.endInput(now)
    schedule()
  })
  pump()
}
