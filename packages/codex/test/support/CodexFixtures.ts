/**
 * The params and results of the recorded `codex app-server` transcripts (test/fixtures/codex/<version>/, recorded by
 * `pnpm fixtures:record:codex`), both directions: what the Codex codec's guards and decoders are checked on.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Entry } from "../../../core/test/support/Transcripts.ts"

const root = Path.join(import.meta.dirname, "..", "fixtures", "codex")

/**
 * A params or result value of a recorded message, with the method it belongs to (a response's is its request's),
 * who wrote it (`"<"` the server, `">"` the client) and the transcript it comes from (`<version>/<scenario>`).
 *
 * @category fixtures
 * @since 0.3.0
 */
export interface Payload {
  readonly transcript: string
  readonly dir: "<" | ">"
  readonly kind: "params" | "result"
  readonly method: string
  readonly value: unknown
}

const payloadsOf = (transcript: string, entries: ReadonlyArray<Entry>): ReadonlyArray<Payload> => {
  const payloads: Array<Payload> = []
  // The methods of the requests each side has in flight, by id (ids restart with a new process, so the last wins).
  const requests = { ">": new Map<unknown, string>(), "<": new Map<unknown, string>() }
  for (const entry of entries) {
    if ((entry.dir !== ">" && entry.dir !== "<") || typeof entry.msg !== "object" || entry.msg === null) continue
    const msg = entry.msg as { readonly method?: unknown; readonly id?: unknown; readonly params?: unknown }
    if (typeof msg.method === "string") {
      if ("id" in msg) requests[entry.dir].set(msg.id, msg.method)
      if ("params" in msg) {
        payloads.push({ transcript, dir: entry.dir, kind: "params", method: msg.method, value: msg.params })
      }
    } else if ("result" in msg) {
      const method = requests[entry.dir === ">" ? "<" : ">"].get(msg.id) ?? "response"
      const value = (msg as { readonly result: unknown }).result
      payloads.push({ transcript, dir: entry.dir, kind: "result", method, value })
    }
  }
  return payloads
}

/**
 * Every params and result value of the recorded transcripts, in order.
 *
 * @category fixtures
 * @since 0.3.0
 */
export const codexPayloads: ReadonlyArray<Payload> = Fs.readdirSync(root).sort().flatMap((version) =>
  Fs.readdirSync(Path.join(root, version)).filter((file) => file.endsWith(".ndjson")).sort().flatMap((file) =>
    payloadsOf(
      `${version}/${file.slice(0, -".ndjson".length)}`,
      Fs.readFileSync(Path.join(root, version, file), "utf8").split("\n").filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as Entry)
    )
  )
)
