/**
 * What crosses the wire between a client and the runner of a session, and what is stored in the database: errors
 * (every Tether error class, by its schema in `TetherErrorSchema`, and any other tagged error as a plain record),
 * session events (plain data, with their errors encoded), permission verdicts, and the generation-qualified ids of
 * permission requests.
 *
 * @internal
 */
import * as ClaudeErrorSchema from "@tether/claude/ClaudeErrorSchema"
import * as CodexErrorSchema from "@tether/codex/CodexErrorSchema"
import { Permission, type SessionEvent } from "@tether/core"
import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------------

/**
 * A tagged error of no class the cluster knows (a host's own provider's): its tag, message, disposition and
 * fields travel as a plain record, and the client rebuilds a plain object with the same `_tag`.
 */
export class ForeignError extends Schema.TaggedError<ForeignError>()("ForeignError", {
  tag: Schema.String,
  text: Schema.String,
  fallback: Schema.Boolean,
  requeue: Schema.Boolean,
  uncertain: Schema.Boolean,
  fields: Schema.Record(Schema.String, Schema.Unknown)
}) {}

/** Every error class a session or a registry can fail with. */
const Known = Schema.Union([
  TetherErrorSchema.ExecutableNotFound,
  TetherErrorSchema.SpawnFailed,
  TetherErrorSchema.StartupTimeout,
  TetherErrorSchema.HandshakeFailed,
  TetherErrorSchema.TurnInFlight,
  TetherErrorSchema.QueueFull,
  TetherErrorSchema.SessionUnavailable,
  TetherErrorSchema.InvalidPrompt,
  TetherErrorSchema.TransportWriteError,
  TetherErrorSchema.DeliveryTimeout,
  TetherErrorSchema.CliExited,
  TetherErrorSchema.TurnInterrupted,
  TetherErrorSchema.SessionRetired,
  TetherErrorSchema.InterruptTimeout,
  TetherErrorSchema.ControlTimeout,
  TetherErrorSchema.ControlFailed,
  TetherErrorSchema.ProtocolError,
  TetherErrorSchema.InvalidConfig,
  TetherErrorSchema.ApiError,
  TetherErrorSchema.TurnFailed,
  TetherErrorSchema.PermissionAlreadyResolved,
  TetherErrorSchema.PermissionNotFound,
  TetherErrorSchema.ReplayUnavailable,
  TetherErrorSchema.SessionConflict,
  TetherErrorSchema.CapacityExceeded,
  TetherErrorSchema.GenerationChanged,
  TetherErrorSchema.SessionNotFound,
  TetherErrorSchema.RegistryClosed,
  ClaudeErrorSchema.MaxTurnsExceeded,
  ClaudeErrorSchema.BudgetExceeded,
  ClaudeErrorSchema.StructuredOutputMissing,
  ClaudeErrorSchema.StructuredOutputInvalid,
  ClaudeErrorSchema.StructuredOutputRetriesExhausted,
  CodexErrorSchema.TurnRejected
])

const isKnown = Schema.is(Known)

/**
 * An error of a known class made by another copy of `@tether/core` (a host that bundles its own, two versions in one
 * tree): not an instance of this copy's class, but its JSON (`{ _tag, ...fields }`) decodes to one.
 */
const fromOtherCopy = (error: object): Option.Option<Known> => {
  let json: unknown
  try {
    json = JSON.parse(JSON.stringify(error))
  } catch {
    return Option.none()
  }
  return decodeKnown(json)
}

const decodeKnown = Schema.decodeUnknownOption(Schema.toCodecJson(Known))
const encodeKnown = Schema.encodeUnknownOption(Schema.toCodecJson(Known))

/** Every error class, by its schema, and any other tagged error as a {@link ForeignError}. */
export const Errors = Schema.Union([...Known.members, ForeignError])

/** An error of a known class. */
export type Known = typeof Known.Type

/** What the wire carries. */
export type Failure = typeof Errors.Type

const flag = (u: object, name: string): boolean => (u as { readonly [key: string]: unknown })[name] === true

/**
 * An error as something the wire can carry: an instance of a known class as it is (its schema encodes it), one of a
 * known class made by another copy of `@tether/core` as this copy's instance, any other tagged value (and an
 * instance whose fields its schema refuses) as a {@link ForeignError}.
 */
export const toWire = (error: unknown): Failure => {
  if (Predicate.isObject(error) && Predicate.hasProperty(error, "_tag") && typeof error._tag === "string") {
    // An instance whose fields its schema refuses (the constructors do not check: `capacity: NaN`) travels as a
    // record rather than failing the encoding.
    if (isKnown(error) && Option.isSome(encodeKnown(error))) return error
    const known = fromOtherCopy(error)
    if (Option.isSome(known)) return known.value
    const { _tag, ...fields } = error as { readonly _tag: string; readonly [key: string]: unknown }
    return new ForeignError({
      tag: _tag,
      text: typeof (error as { readonly message?: unknown }).message === "string"
        ? (error as unknown as Error).message
        : _tag,
      fallback: flag(error, "safeToFallback"),
      requeue: flag(error, "safeToRequeue"),
      uncertain: flag(error, "deliveryUncertain"),
      fields: JSON.parse(JSON.stringify(fields)) as Record<string, unknown>
    })
  }
  return new ForeignError({
    tag: "UnknownError",
    text: String(error),
    fallback: false,
    requeue: false,
    uncertain: true,
    fields: {}
  })
}

/** A {@link ForeignError} back as a plain tagged error with its original tag, message and disposition. */
export const fromWire = <E = Known>(error: Failure): E => {
  if (error._tag !== "ForeignError") return error as E
  return {
    ...error.fields,
    _tag: error.tag,
    message: error.text,
    safeToFallback: error.fallback,
    safeToRequeue: error.requeue,
    deliveryUncertain: error.uncertain
  } as E
}

// The JSON codec, as on the RPC wire: a number that JSON cannot hold (NaN, ±Infinity) is written as a string and read
// back, where `JSON.stringify` would have stored `null`.
const ErrorsJson = Schema.toCodecJson(Errors)
const encodeError = Schema.encodeSync(ErrorsJson)
const decodeError = Schema.decodeUnknownSync(ErrorsJson)

/** An error as JSON data (for events and the database). */
export const errorToJson = (error: unknown): unknown => encodeError(toWire(error))

/** JSON data back as an error (see {@link fromWire}). */
export const errorFromJson = <E>(json: unknown): E => fromWire<E>(decodeError(json))

// ---------------------------------------------------------------------------------------------------------------
// Permission request ids
// ---------------------------------------------------------------------------------------------------------------

/**
 * A permission request's id as hosts see it through the cluster: the generation that asked, a slash, and the CLI's
 * id. An answer names the generation it meant, so an answer for a CLI that is gone (its runner died) fails with
 * `GenerationChanged` instead of reaching whatever runs the session now.
 */
export const qualify = (generation: number, requestId: string): string => `${generation}/${requestId}`

/** The generation and the CLI's id of a qualified request id; an unqualified id names no generation. */
export const unqualify = (
  qualified: string
): { readonly generation: number | undefined; readonly requestId: string } => {
  const slash = qualified.indexOf("/")
  if (slash > 0) {
    const generation = Number(qualified.slice(0, slash))
    if (Number.isSafeInteger(generation)) return { generation, requestId: qualified.slice(slash + 1) }
  }
  return { generation: undefined, requestId: qualified }
}

/** A permission request with its id qualified by the generation. */
export const qualifyRequest = (
  generation: number,
  request: Permission.PermissionRequest
): Permission.PermissionRequest => ({ ...request, requestId: qualify(generation, request.requestId) })

// ---------------------------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------------------------

/** A session event as JSON data: its errors encoded, its permission ids qualified by the generation. */
export const eventToJson = (generation: number, event: SessionEvent.SessionEvent): unknown => {
  switch (event._tag) {
    case "TurnFailed":
      return { ...event, error: errorToJson(event.error) }
    case "ProtocolError":
      return { ...event, error: errorToJson(event.error) }
    case "PermissionRequested":
      return { ...event, request: qualifyRequest(generation, event.request) }
    case "PermissionResolved":
      return { ...event, requestId: qualify(generation, event.requestId) }
    default:
      return event
  }
}

/** JSON data back as a session event. */
export const eventFromJson = (json: unknown): SessionEvent.SessionEvent => {
  const event = json as SessionEvent.SessionEvent
  switch (event._tag) {
    case "TurnFailed":
    case "ProtocolError":
      return { ...event, error: errorFromJson(event.error) } as SessionEvent.SessionEvent
    default:
      return event
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Deliveries
// ---------------------------------------------------------------------------------------------------------------

/**
 * What a subscription carries: where it starts (`Position`, the seq after which its events follow; sent first, so a
 * client can tell a subscription that the cluster re-sent to a session's next owner), events, lag markers (`reason`:
 * `"behind"` for a subscriber that fell behind, `"lost"` for events of a runner that died before saving them,
 * `"not-durable"` for events of earlier generations that were not kept), and the end of the session.
 */
export const Delivery = Schema.Union([
  Schema.TaggedStruct("Position", { seq: Schema.Finite, generation: Schema.Finite }),
  Schema.TaggedStruct("Event", { seq: Schema.Finite, event: Schema.Unknown }),
  Schema.TaggedStruct("Lag", {
    missed: Schema.Finite,
    resumeSeq: Schema.Finite,
    reason: Schema.Literals(["behind", "lost", "not-durable"])
  }),
  Schema.TaggedStruct("End", {})
])

export type Delivery = typeof Delivery.Type

/** Decides a verdict's wire form and back. */
export const Verdict = Schema.Union([
  Schema.TaggedStruct("Allow", { updatedInput: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)) }),
  Schema.TaggedStruct("Deny", { message: Schema.String, interrupt: Schema.optional(Schema.Boolean) })
])

export const verdictToWire = (verdict: Permission.Verdict): typeof Verdict.Type =>
  verdict._tag === "Allow"
    ? { _tag: "Allow", ...(verdict.updatedInput === undefined ? {} : { updatedInput: verdict.updatedInput }) }
    : {
      _tag: "Deny",
      message: verdict.message,
      ...(verdict.interrupt === undefined ? {} : { interrupt: verdict.interrupt })
    }

export const verdictFromWire = (verdict: typeof Verdict.Type): Permission.Verdict =>
  verdict._tag === "Allow"
    ? Permission.allow(verdict.updatedInput)
    : Permission.deny(verdict.message, { interrupt: verdict.interrupt ?? false })
