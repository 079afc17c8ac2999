/**
 * A schema for every Tether error class, for hosts that send errors to another process or store them
 * (`@tether/cluster` does both).
 *
 * The error classes are tagged `Data` errors, so that running a session never loads `effect/Schema`; their schemas
 * live here. Each one encodes an error to its tag and fields (`{ _tag, ...fields }`, plain JSON data) and decodes
 * them, checked, back to an instance of the class, with its message and its disposition.
 *
 * This module loads `effect/Schema`, so the package's index does not re-export it: import it by its path.
 *
 * @example
 * ```ts
 * import { TetherError } from "@tether/core"
 * import * as TetherErrorSchema from "@tether/core/TetherErrorSchema"
 * import { Schema } from "effect"
 *
 * const encoded = Schema.encodeSync(TetherErrorSchema.QueueFull)(new TetherError.QueueFull({ capacity: 8 }))
 * // { _tag: "QueueFull", capacity: 8 }
 * const error = Schema.decodeUnknownSync(TetherErrorSchema.QueueFull)(encoded)
 * // error instanceof TetherError.QueueFull, error.safeToRequeue === true
 * ```
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as SchemaTransformation from "effect/SchemaTransformation"
import type * as Types from "effect/Types"
import * as EventLog from "./EventLog.ts"
import * as Permission from "./Permission.ts"
import * as SessionRegistry from "./SessionRegistry.ts"
import * as TetherError from "./TetherError.ts"
import * as Turn from "./Turn.ts"

/**
 * The schema of an error class: encoded, its tag and fields; decoded, an instance of the class.
 *
 * @category models
 * @since 0.1.0
 */
export interface ErrorSchema<Self, Tag extends string, Fields extends Schema.Struct.Fields>
  extends Schema.decodeTo<Schema.instanceOf<Self>, Schema.TaggedStruct<Tag, Fields>>
{}

/**
 * The schema of an error class from its tag and fields: what each schema here is made with, and what a provider
 * package makes the schemas of its own errors with (`ClaudeErrorSchema`, `CodexErrorSchema`). The class must take
 * exactly the struct's fields (its constructor) and have them (its instances): a field added to one and not to the
 * other does not compile.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <
  const Tag extends string,
  const Fields extends Schema.Struct.Fields,
  Self extends { readonly _tag: Tag } & Schema.Struct.Type<Fields>
>(
  self: new(fields: Types.VoidIfEmpty<Schema.Struct.Type<Fields>>) => Self,
  tag: Tag,
  fields: Fields
): ErrorSchema<Self, Tag, Fields> =>
  Schema.TaggedStruct(tag, fields).pipe(Schema.decodeTo(
    Schema.instanceOf(self, { identifier: tag }),
    // The signature has checked the types; TypeScript cannot follow them through the struct's type here.
    SchemaTransformation.transform<Self, any>({
      decode: ({ _tag, ...fields }) => new self(fields),
      encode: (error) => error
    })
  ))

// ---------------------------------------------------------------------------------------------------------------
// TetherError
// ---------------------------------------------------------------------------------------------------------------

/**
 * The schema of {@link TetherError.InterruptReason}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const InterruptReason = Schema.Literals(["host", "stall", "turn-timeout", "permission", "evicted", "closed"])

/**
 * The schema of {@link TetherError.ExecutableNotFound}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const ExecutableNotFound = make(TetherError.ExecutableNotFound, "ExecutableNotFound", {
  program: Schema.String,
  searched: Schema.Array(Schema.String)
})

/**
 * The schema of {@link TetherError.SpawnFailed}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const SpawnFailed = make(TetherError.SpawnFailed, "SpawnFailed", {
  program: Schema.String,
  reason: Schema.String
})

/**
 * The schema of {@link TetherError.StartupTimeout}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const StartupTimeout = make(TetherError.StartupTimeout, "StartupTimeout", {
  timeoutMillis: Schema.Finite,
  stderrTail: Schema.String
})

/**
 * The schema of {@link TetherError.HandshakeFailed}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const HandshakeFailed = make(TetherError.HandshakeFailed, "HandshakeFailed", {
  reason: Schema.String,
  stderrTail: Schema.String
})

/**
 * The schema of {@link TetherError.TurnInFlight}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const TurnInFlight = make(TetherError.TurnInFlight, "TurnInFlight", {
  activeTurnId: Schema.String
})

/**
 * The schema of {@link TetherError.QueueFull}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const QueueFull = make(TetherError.QueueFull, "QueueFull", {
  capacity: Schema.Finite
})

/**
 * The schema of {@link TetherError.SessionUnavailable}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const SessionUnavailable = make(TetherError.SessionUnavailable, "SessionUnavailable", {
  status: Schema.String,
  reason: Schema.String
})

/**
 * The schema of {@link TetherError.InvalidPrompt}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const InvalidPrompt = make(TetherError.InvalidPrompt, "InvalidPrompt", {
  reason: Schema.String
})

/**
 * The schema of {@link TetherError.TransportWriteError}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const TransportWriteError = make(TetherError.TransportWriteError, "TransportWriteError", {
  reason: Schema.String
})

/**
 * The schema of {@link TetherError.DeliveryTimeout}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const DeliveryTimeout = make(TetherError.DeliveryTimeout, "DeliveryTimeout", {
  timeoutMillis: Schema.Finite
})

/**
 * The schema of {@link TetherError.CliExited}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const CliExited = make(TetherError.CliExited, "CliExited", {
  exit: Schema.String,
  code: Schema.NullOr(Schema.Finite),
  signal: Schema.NullOr(Schema.String),
  stderrTail: Schema.String,
  acknowledged: Schema.Boolean,
  cause: Schema.optional(Schema.UndefinedOr(Schema.Literal("out-of-memory")))
})

/**
 * The schema of {@link TetherError.TurnInterrupted}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const TurnInterrupted = make(TetherError.TurnInterrupted, "TurnInterrupted", {
  turnId: Schema.String,
  reason: InterruptReason,
  acknowledged: Schema.Boolean,
  written: Schema.Boolean
})

/**
 * The schema of {@link TetherError.SessionRetired}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const SessionRetired = make(TetherError.SessionRetired, "SessionRetired", {
  reason: Schema.String,
  acknowledged: Schema.Boolean
})

/**
 * The schema of {@link TetherError.InterruptTimeout}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const InterruptTimeout = make(TetherError.InterruptTimeout, "InterruptTimeout", {
  turnId: Schema.String,
  reason: InterruptReason,
  timeoutMillis: Schema.Finite,
  acknowledged: Schema.Boolean
})

/**
 * The schema of {@link TetherError.ControlTimeout}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const ControlTimeout = make(TetherError.ControlTimeout, "ControlTimeout", {
  subtype: Schema.String,
  timeoutMillis: Schema.Finite
})

/**
 * The schema of {@link TetherError.ControlFailed}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const ControlFailed = make(TetherError.ControlFailed, "ControlFailed", {
  subtype: Schema.String,
  reason: Schema.String,
  code: Schema.NullOr(Schema.String)
})

/**
 * The schema of {@link TetherError.ProtocolError}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const ProtocolError = make(TetherError.ProtocolError, "ProtocolError", {
  reason: Schema.Literals(["not-json", "too-long", "malformed"]),
  detail: Schema.String,
  linePrefix: Schema.String
})

/**
 * The schema of {@link TetherError.InvalidConfig}.
 *
 * @category TetherError
 * @since 0.1.0
 */
export const InvalidConfig = make(TetherError.InvalidConfig, "InvalidConfig", {
  problems: Schema.Array(Schema.String)
})

// ---------------------------------------------------------------------------------------------------------------
// Turn
// ---------------------------------------------------------------------------------------------------------------

/**
 * The schema of {@link Turn.ApiError}.
 *
 * @category Turn
 * @since 0.1.0
 */
export const ApiError = make(Turn.ApiError, "ApiError", {
  turnId: Schema.String,
  status: Schema.NullOr(Schema.Finite),
  detail: Schema.String
})

/**
 * The schema of {@link Turn.TurnFailed}.
 *
 * @category Turn
 * @since 0.1.0
 */
export const TurnFailed = make(Turn.TurnFailed, "TurnFailed", {
  turnId: Schema.String,
  subtype: Schema.String,
  terminalReason: Schema.NullOr(Schema.String),
  errors: Schema.Array(Schema.String)
})

// ---------------------------------------------------------------------------------------------------------------
// Permission
// ---------------------------------------------------------------------------------------------------------------

/**
 * The schema of {@link Permission.PermissionAlreadyResolved}.
 *
 * @category Permission
 * @since 0.1.0
 */
export const PermissionAlreadyResolved = make(Permission.PermissionAlreadyResolved, "PermissionAlreadyResolved", {
  requestId: Schema.String,
  how: Schema.String
})

/**
 * The schema of {@link Permission.PermissionNotFound}.
 *
 * @category Permission
 * @since 0.1.0
 */
export const PermissionNotFound = make(Permission.PermissionNotFound, "PermissionNotFound", {
  requestId: Schema.String
})

// ---------------------------------------------------------------------------------------------------------------
// EventLog
// ---------------------------------------------------------------------------------------------------------------

/**
 * The schema of {@link EventLog.ReplayUnavailable}.
 *
 * @category EventLog
 * @since 0.1.0
 */
export const ReplayUnavailable = make(EventLog.ReplayUnavailable, "ReplayUnavailable", {
  // Whatever the caller asked for, including NaN: the error reports it as given.
  // @effect-diagnostics-next-line schemaNumber:off
  requestedAfter: Schema.Number,
  oldestAvailable: Schema.Finite,
  latestSeq: Schema.Finite
})

/**
 * The schema of {@link EventLog.Lagged}.
 *
 * @category EventLog
 * @since 0.1.0
 */
export const Lagged = make(EventLog.Lagged, "Lagged", {
  missed: Schema.Finite,
  resumeSeq: Schema.Finite
})

// ---------------------------------------------------------------------------------------------------------------
// SessionRegistry
// ---------------------------------------------------------------------------------------------------------------

/**
 * The schema of {@link SessionRegistry.SessionConflict}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const SessionConflict = make(SessionRegistry.SessionConflict, "SessionConflict", {
  id: Schema.String,
  generation: Schema.Finite,
  liveFingerprint: Schema.String,
  requestedFingerprint: Schema.String
})

/**
 * The schema of {@link SessionRegistry.CapacityExceeded}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const CapacityExceeded = make(SessionRegistry.CapacityExceeded, "CapacityExceeded", {
  id: Schema.String,
  capacity: Schema.Finite,
  waitedMillis: Schema.Finite
})

/**
 * The schema of {@link SessionRegistry.GenerationChanged}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const GenerationChanged = make(SessionRegistry.GenerationChanged, "GenerationChanged", {
  id: Schema.String,
  expected: Schema.Finite,
  current: Schema.NullOr(Schema.Finite)
})

/**
 * The schema of {@link SessionRegistry.SessionNotFound}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const SessionNotFound = make(SessionRegistry.SessionNotFound, "SessionNotFound", {
  id: Schema.String
})

/**
 * The schema of {@link SessionRegistry.RegistryClosed}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const RegistryClosed = make(SessionRegistry.RegistryClosed, "RegistryClosed", {})

/**
 * The schema of {@link SessionRegistry.DormantNotFound}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const DormantNotFound = make(SessionRegistry.DormantNotFound, "DormantNotFound", {
  id: Schema.String
})

/**
 * The schema of {@link SessionRegistry.DormantStateCorrupt}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const DormantStateCorrupt = make(SessionRegistry.DormantStateCorrupt, "DormantStateCorrupt", {
  id: Schema.String,
  reason: Schema.String
})

/**
 * The schema of {@link SessionRegistry.RestoreFailed}. Its `cause` (the start's error) crosses as whatever JSON it
 * encodes to.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const RestoreFailed = make(SessionRegistry.RestoreFailed, "RestoreFailed", {
  id: Schema.String,
  reason: Schema.String,
  cause: Schema.Unknown
})

/**
 * The schema of {@link SessionRegistry.DormantStoreFailed}.
 *
 * @category SessionRegistry
 * @since 0.1.0
 */
export const DormantStoreFailed = make(SessionRegistry.DormantStoreFailed, "DormantStoreFailed", {
  operation: Schema.String,
  reason: Schema.String
})
