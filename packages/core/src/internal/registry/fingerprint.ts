/**
 * Configuration fingerprints: a hash of a configuration's canonical JSON.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Redacted from "effect/Redacted"

/**
 * Canonical JSON: keys sorted; symbols and `undefined` left out; functions left out, or (`functions`) written as a
 * marker, so that two configurations with functions at different places differ; `Redacted` and `Duration` by value.
 */
const canonical = (value: unknown, seen: Set<object>, functions = false): string | undefined => {
  switch (typeof value) {
    case "function":
      return functions ? `"$fn"` : undefined
    case "undefined":
    case "symbol":
      return undefined
    case "bigint":
      return `"${value}n"`
    case "number":
    case "boolean":
    case "string":
      return JSON.stringify(value)
  }
  if (value === null) return "null"
  if (Redacted.isRedacted(value)) return `{"$redacted":${JSON.stringify(Redacted.value(value))}}`
  if (Duration.isDuration(value)) return `{"$duration":${JSON.stringify(String(Duration.toMillis(value)))}}`
  const object = value as object
  if (seen.has(object)) return `"$cycle"`
  seen.add(object)
  let out: string
  if (Array.isArray(object)) {
    out = `[${object.map((item) => canonical(item, seen, functions) ?? "null").join(",")}]`
  } else {
    const record = object as { readonly [key: string]: unknown }
    const parts: Array<string> = []
    for (const key of Object.keys(record).sort()) {
      const encoded = canonical(record[key], seen, functions)
      if (encoded !== undefined) parts.push(`${JSON.stringify(key)}:${encoded}`)
    }
    out = `{${parts.join(",")}}`
  }
  seen.delete(object)
  return out
}

// cyrb53: a fast 53-bit string hash. Fingerprints only need to tell configurations apart, and hashing keeps
// secrets (Redacted values) out of snapshots and logs.
const hash53 = (input: string): string => {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < input.length; i++) {
    const ch = input.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0")
}

export const fingerprint = (config: unknown): string => hash53(canonical(config, new Set()) ?? "undefined")

/**
 * The fingerprint of a configuration's shape: its data, and where it holds functions (not which ones). Two
 * configurations with the same shape can share a warm CLI: the functions of the one it is handed to are bound at
 * hand-out, path by path (`warm.ts`).
 */
export const shape = (config: unknown): string => hash53(canonical(config, new Set(), true) ?? "undefined")
