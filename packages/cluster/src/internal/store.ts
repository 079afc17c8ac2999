/**
 * What the cluster keeps of each session in its database (PostgreSQL), besides Effect's own shard locks and
 * message storage: the session's record (its generation, configuration, state, the runner holding it, how far its
 * events go), the CLI's conversation files in chunks, the turn ledger that keeps a prompt from running twice, and
 * the durable events.
 *
 * Every write of a generation is fenced: it happens only while the session's record still names that generation,
 * so a runner that lost a session (its shard moved while it was paused or cut off) can never overwrite what the
 * next owner saved.
 *
 * @internal
 */
import * as Arr from "effect/Array"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type * as Files from "./files.ts"

/** How many seqs a generation reserves at a time: a runner that dies may have handed out any seq below them. */
export const seqBlock = 10_000

export type State = "live" | "dormant" | "evicted"

/** A session's record. */
export interface Record {
  readonly generation: number
  readonly state: State
  readonly runner: string | null
  readonly fingerprint: string
  readonly config: unknown
  readonly conversationId: string | undefined
  readonly durable: boolean
  /** Events up to this seq are saved (durable) or were never handed out. */
  readonly seq: number
  /** No generation handed out a seq above this. */
  readonly ceiling: number
  readonly files: { readonly [path: string]: Files.Tracked }
  readonly createdAt: number
  readonly updatedAt: number
}

/** The record's generation is no longer the one that writes: another runner owns the session now. */
export class Fenced extends Data.TaggedError("Fenced")<{ readonly id: string; readonly generation: number }> {}

/** What `begin` found and decided for a new generation. */
export interface Begun {
  readonly generation: number
  /** The cluster seq of the generation's local seq 0. */
  readonly base: number
  readonly ceiling: number
  readonly conversationId: string | undefined
  readonly files: ReadonlyArray<{ readonly path: string; readonly data: Uint8Array }>
  readonly tracked: { readonly [path: string]: Files.Tracked }
  readonly durable: boolean
  /** How the previous generation ended: `new` (none), `clean` (released and saved), `lost` (its runner died). */
  readonly previous: "new" | "clean" | "lost" | "reset"
  /** The address of the runner a `lost` generation was live on (`host:port`). */
  readonly previousRunner?: string | undefined
}

/** A turn in the ledger. */
export interface LedgerTurn {
  readonly promptId: string
  readonly generation: number
  readonly turnId: string | null
  readonly state: "dispatched" | "completed" | "failed"
  readonly outcome: unknown
}

/** What a save writes. */
export interface Save {
  readonly conversationId: string | undefined
  readonly changes: ReadonlyArray<Files.Change>
  readonly tracked: { readonly [path: string]: Files.Tracked }
  readonly events: ReadonlyArray<StoredEvent>
  /** Events up to this seq are saved (or were never handed out, for a final save). */
  readonly seq: number
  readonly turns: ReadonlyArray<{
    readonly promptId: string
    readonly turnId: string
    readonly state: "completed" | "failed"
    readonly outcome: unknown
  }>
  /** The generation ends with this save: the record becomes dormant. */
  readonly final: boolean
}

/** A turn's outcome for the ledger, with the generation that ran it. */
export interface Completion {
  readonly promptId: string
  readonly generation: number
  readonly turnId: string
  readonly state: "completed" | "failed"
  readonly outcome: unknown
}

/** A saved event, or a gap (`gapTo`: the seqs up to it are lost). */
export interface StoredEvent {
  readonly seq: number
  readonly generation: number
  readonly turnId: string | undefined
  readonly event: unknown
  readonly gapTo?: number | undefined
}

const num = (u: unknown): number => typeof u === "number" ? u : Number(u)

const time = (u: unknown): number => u instanceof Date ? u.getTime() : new Date(String(u)).getTime()

const json = (u: unknown): unknown => typeof u === "string" ? JSON.parse(u) : u

/** The migrations of the cluster's tables, with their prefix. */
const migrations = (prefix: string) =>
  Migrator.fromRecord({
    "0001_create_tables": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const t = (name: string) => sql(`${prefix}_${name}`)
      yield* sql`
        CREATE TABLE IF NOT EXISTS ${t("sessions")} (
          entity_type TEXT NOT NULL,
          id TEXT NOT NULL,
          generation BIGINT NOT NULL,
          state TEXT NOT NULL,
          runner TEXT,
          fingerprint TEXT NOT NULL,
          config JSONB,
          conversation_id TEXT,
          durable BOOLEAN NOT NULL DEFAULT FALSE,
          seq BIGINT NOT NULL DEFAULT 0,
          seq_ceiling BIGINT NOT NULL DEFAULT 0,
          files JSONB NOT NULL DEFAULT '{}'::jsonb,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          PRIMARY KEY (entity_type, id)
        )`
      yield* sql`
        CREATE TABLE IF NOT EXISTS ${t("chunks")} (
          entity_type TEXT NOT NULL,
          id TEXT NOT NULL,
          path TEXT NOT NULL,
          chunk INTEGER NOT NULL,
          data BYTEA NOT NULL,
          PRIMARY KEY (entity_type, id, path, chunk)
        )`
      yield* sql`
        CREATE TABLE IF NOT EXISTS ${t("turns")} (
          entity_type TEXT NOT NULL,
          id TEXT NOT NULL,
          prompt_id TEXT NOT NULL,
          generation BIGINT NOT NULL,
          turn_id TEXT,
          state TEXT NOT NULL,
          outcome JSONB,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          PRIMARY KEY (entity_type, id, prompt_id)
        )`
      yield* sql`
        CREATE TABLE IF NOT EXISTS ${t("events")} (
          entity_type TEXT NOT NULL,
          id TEXT NOT NULL,
          seq BIGINT NOT NULL,
          generation BIGINT NOT NULL,
          turn_id TEXT,
          gap_to BIGINT,
          event JSONB,
          PRIMARY KEY (entity_type, id, seq)
        )`
    })
  })

/** The store of one entity type (one registry), in tables named with `prefix`. */
export const make = Effect.fnUntraced(function*(options: {
  readonly entityType: string
  readonly prefix: string
  /** Run the migrations first (runners do; clients only read). */
  readonly migrate?: boolean | undefined
}) {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  if (options.migrate !== false) {
    yield* Migrator.make({})({ loader: migrations(options.prefix), table: `${options.prefix}_migrations` })
  }
  const type = options.entityType
  const sessions = sql(`${options.prefix}_sessions`)
  const chunks = sql(`${options.prefix}_chunks`)
  const turns = sql(`${options.prefix}_turns`)
  const events = sql(`${options.prefix}_events`)

  const toRecord = (row: { readonly [key: string]: unknown }): Record => ({
    generation: num(row.generation),
    state: row.state as State,
    runner: (row.runner as string | null) ?? null,
    fingerprint: row.fingerprint as string,
    config: json(row.config),
    conversationId: (row.conversation_id as string | null) ?? undefined,
    durable: row.durable === true,
    seq: num(row.seq),
    ceiling: num(row.seq_ceiling),
    files: (json(row.files) ?? {}) as Record["files"],
    createdAt: time(row.created_at),
    updatedAt: time(row.updated_at)
  })

  const firstRecord = (rows: ReadonlyArray<{ readonly [key: string]: unknown }>): Record | undefined =>
    rows.length === 0 ? undefined : toRecord(rows[0])

  const read = (id: string): Effect.Effect<Record | undefined, SqlError> =>
    Effect.map(sql`SELECT * FROM ${sessions} WHERE entity_type = ${type} AND id = ${id}`, firstRecord)

  /** {@link read}, the row locked for the transaction. */
  const lock = (id: string): Effect.Effect<Record | undefined, SqlError> =>
    Effect.map(sql`SELECT * FROM ${sessions} WHERE entity_type = ${type} AND id = ${id} FOR UPDATE`, firstRecord)

  /**
   * The record's generation, locked for the transaction; fails with `Fenced` unless it is `generation` and the host
   * has not evicted the session since (an eviction keeps the generation: a save that comes late, written again after
   * the database returned, must not bring an evicted session back).
   */
  const fence = (id: string, generation: number) =>
    Effect.flatMap(
      sql`SELECT generation, state FROM ${sessions} WHERE entity_type = ${type} AND id = ${id} FOR UPDATE`,
      (rows) =>
        rows.length === 1 && num(rows[0].generation) === generation && rows[0].state !== "evicted"
          ? Effect.void
          : Effect.fail(new Fenced({ id, generation }))
    )

  const forget = (id: string) =>
    Effect.all([
      sql`DELETE FROM ${chunks} WHERE entity_type = ${type} AND id = ${id}`,
      sql`DELETE FROM ${turns} WHERE entity_type = ${type} AND id = ${id}`,
      sql`DELETE FROM ${events} WHERE entity_type = ${type} AND id = ${id}`
    ], { discard: true })

  const readFiles = (id: string) =>
    Effect.map(
      sql`SELECT path, data FROM ${chunks} WHERE entity_type = ${type} AND id = ${id} ORDER BY path, chunk`,
      (rows) => {
        const parts = new Map<string, Array<Uint8Array>>()
        for (const row of rows) {
          const path = row.path as string
          const list = parts.get(path) ?? []
          list.push(row.data as Uint8Array)
          parts.set(path, list)
        }
        return [...parts].map(([path, list]) => ({ path, data: Buffer.concat(list) }))
      }
    )

  /**
   * Starts the session's next generation on `runner`: creates the record, or bumps the generation of the record
   * left by the previous one. A previous generation that is still `live` was lost with its runner: its seqs up to
   * its ceiling may have been handed out, so the new generation starts above them, and (for durable events) the
   * seqs it did not save are recorded as a gap. `reset` starts a new conversation (a replaced configuration, or a
   * session the host evicted).
   */
  const begin = (id: string, init: {
    readonly runner: string
    readonly fingerprint: string
    readonly config: unknown
    readonly durable: boolean
    readonly reset: boolean
  }): Effect.Effect<Begun, SqlError> =>
    sql.withTransaction(Effect.gen(function*() {
      const record = yield* lock(id)
      if (record === undefined) {
        yield* sql`
          INSERT INTO ${sessions} (entity_type, id, generation, state, runner, fingerprint, config, durable, seq, seq_ceiling)
          VALUES (${type}, ${id}, 1, 'live', ${init.runner}, ${init.fingerprint}, ${JSON.stringify(init.config)}::jsonb,
                  ${init.durable}, 0, ${seqBlock})
          ON CONFLICT DO NOTHING`
        return {
          generation: 1,
          base: 0,
          ceiling: seqBlock,
          conversationId: undefined,
          files: [],
          tracked: {},
          durable: init.durable,
          previous: "new"
        } satisfies Begun
      }
      const reset = init.reset || record.state === "evicted"
      const clean = record.state === "dormant"
      const base = reset ? Math.max(record.seq, record.ceiling) : clean ? record.seq : record.ceiling
      const generation = record.generation + 1
      const durable = reset ? init.durable : record.durable
      if (reset) {
        yield* forget(id)
      } else if (!clean && durable && record.seq < base) {
        // The lost generation's unsaved events: one gap row, so that a subscriber replaying the log is told.
        yield* sql`
          INSERT INTO ${events} (entity_type, id, seq, generation, gap_to)
          VALUES (${type}, ${id}, ${record.seq + 1}, ${record.generation}, ${base})
          ON CONFLICT DO NOTHING`
      }
      yield* sql`
        UPDATE ${sessions} SET
          generation = ${generation}, state = 'live', runner = ${init.runner},
          fingerprint = ${reset ? init.fingerprint : record.fingerprint},
          config = ${JSON.stringify(reset ? init.config : record.config)}::jsonb,
          conversation_id = ${reset ? null : record.conversationId ?? null},
          durable = ${durable},
          files = ${reset ? "{}" : JSON.stringify(record.files)}::jsonb,
          seq = ${base}, seq_ceiling = ${base + seqBlock}, updated_at = now()
        WHERE entity_type = ${type} AND id = ${id}`
      const files = reset ? [] : yield* readFiles(id)
      return {
        generation,
        base,
        ceiling: base + seqBlock,
        conversationId: reset ? undefined : record.conversationId,
        files,
        tracked: reset ? {} : record.files,
        durable,
        previous: reset ? "reset" : clean ? "clean" : "lost",
        previousRunner: reset || clean ? undefined : record.runner ?? undefined
      } satisfies Begun
    }))

  /**
   * Records a prompt in the ledger for `generation`, before it is written to the CLI. `claimed` when it is new;
   * else the turn the ledger already has for that prompt id (a send the cluster delivered again, after the runner
   * that had it died). `fenced` when `generation` is no longer the session's live one, with the live generation
   * (`current`: another runner's), or `null` when none is live (it ended, or the host evicted the session).
   */
  const claim = (id: string, promptId: string, generation: number): Effect.Effect<
    { readonly _tag: "Claimed" } | { readonly _tag: "Existing"; readonly turn: LedgerTurn } | {
      readonly _tag: "Fenced"
      readonly current: number | null
    },
    SqlError
  > =>
    Effect.gen(function*() {
      const inserted = yield* sql`
        INSERT INTO ${turns} (entity_type, id, prompt_id, generation, state)
        SELECT ${type}, ${id}, ${promptId}, ${generation}, 'dispatched'
        WHERE EXISTS (
          SELECT 1 FROM ${sessions}
          WHERE entity_type = ${type} AND id = ${id} AND generation = ${generation} AND state = 'live'
        )
        ON CONFLICT DO NOTHING
        RETURNING prompt_id`
      if (inserted.length === 1) return { _tag: "Claimed" } as const
      const existing = yield* turn(id, promptId)
      if (existing !== undefined) return { _tag: "Existing", turn: existing } as const
      const record = yield* read(id)
      const current = record !== undefined && record.state === "live" && record.generation !== generation
        ? record.generation
        : null
      return { _tag: "Fenced", current } as const
    })

  /** Takes a claim back: the prompt was refused before anything was written to the CLI. */
  const unclaim = (id: string, promptId: string, generation: number) =>
    sql`
      DELETE FROM ${turns}
      WHERE entity_type = ${type} AND id = ${id} AND prompt_id = ${promptId} AND generation = ${generation}
        AND state = 'dispatched'`.pipe(Effect.asVoid)

  const turn = (id: string, promptId: string): Effect.Effect<LedgerTurn | undefined, SqlError> =>
    Effect.map(
      sql`SELECT * FROM ${turns} WHERE entity_type = ${type} AND id = ${id} AND prompt_id = ${promptId}`,
      (rows) =>
        rows.length === 0 ? undefined : {
          promptId,
          generation: num(rows[0].generation),
          turnId: (rows[0].turn_id as string | null) ?? null,
          state: rows[0].state as LedgerTurn["state"],
          outcome: json(rows[0].outcome)
        }
    )

  /**
   * Saves what a generation did since its last save, fenced by the generation, in one transaction; in one statement
   * when there are no conversation files and no events to write (the record and the ledger's turns only).
   */
  const save = (id: string, generation: number, save: Save): Effect.Effect<void, SqlError | Fenced> =>
    save.changes.length === 0 && save.events.length === 0
      ? saveRecord(id, generation, save)
      : saveAll(id, generation, save)

  /**
   * A save of the record and the ledger's turns alone, in one round trip instead of a transaction's five (BEGIN, the
   * fence, the turns, the record, COMMIT): the record's update is the fence (it matches only the generation's row, not
   * evicted, and a concurrent \`begin\` holds the row until it commits, after which the row no longer matches), and
   * the turns are written only when it matched. Every sub-statement of one statement commits together.
   */
  const saveRecord = (id: string, generation: number, save: Save): Effect.Effect<void, SqlError | Fenced> => {
    const ended = save.turns.map((turn) => ({
      prompt_id: turn.promptId,
      turn_id: turn.turnId,
      state: turn.state,
      outcome: turn.outcome ?? null
    }))
    return Effect.flatMap(
      sql`
        WITH fenced AS (
          UPDATE ${sessions} SET
            conversation_id = COALESCE(${save.conversationId ?? null}, conversation_id),
            files = ${JSON.stringify(save.tracked)}::jsonb,
            seq = GREATEST(seq, ${save.seq}),
            state = ${save.final ? "dormant" : "live"},
            updated_at = now()
          WHERE entity_type = ${type} AND id = ${id} AND generation = ${generation} AND state <> 'evicted'
          RETURNING 1
        ), ledger AS (
          UPDATE ${turns} AS l SET turn_id = t.turn_id, state = t.state, outcome = COALESCE(t.outcome, 'null'::jsonb)
          FROM jsonb_to_recordset(${JSON.stringify(ended)}::jsonb)
            AS t(prompt_id TEXT, turn_id TEXT, state TEXT, outcome JSONB)
          WHERE l.entity_type = ${type} AND l.id = ${id} AND l.prompt_id = t.prompt_id AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1
        )
        SELECT (SELECT count(*) FROM fenced) AS fenced`,
      (rows) => num(rows[0]?.fenced) === 1 ? Effect.void : Effect.fail(new Fenced({ id, generation }))
    )
  }

  const saveAll = (id: string, generation: number, save: Save): Effect.Effect<void, SqlError | Fenced> =>
    sql.withTransaction(Effect.gen(function*() {
      yield* fence(id, generation)
      for (const change of save.changes) {
        if (change.mode === "replace") {
          yield* sql`DELETE FROM ${chunks} WHERE entity_type = ${type} AND id = ${id} AND path = ${change.path}`
        }
        yield* sql`
          INSERT INTO ${chunks} (entity_type, id, path, chunk, data)
          VALUES (${type}, ${id}, ${change.path}, ${change.chunk}, ${Buffer.from(change.data)})
          ON CONFLICT (entity_type, id, path, chunk) DO UPDATE SET data = EXCLUDED.data`
      }
      if (save.events.length > 0) {
        const rows = save.events.map((event): { readonly [column: string]: unknown } => ({
          entity_type: type,
          id,
          seq: event.seq,
          generation: event.generation,
          turn_id: event.turnId ?? null,
          gap_to: event.gapTo ?? null,
          event: event.event === undefined ? null : JSON.stringify(event.event)
        }))
        if (Arr.isReadonlyArrayNonEmpty(rows)) {
          yield* sql`INSERT INTO ${events} ${sql.insert(rows)} ON CONFLICT DO NOTHING`
        }
      }
      for (const turn of save.turns) {
        yield* sql`
          UPDATE ${turns} SET turn_id = ${turn.turnId}, state = ${turn.state},
            outcome = ${JSON.stringify(turn.outcome ?? null)}::jsonb
          WHERE entity_type = ${type} AND id = ${id} AND prompt_id = ${turn.promptId}`
      }
      yield* sql`
        UPDATE ${sessions} SET
          conversation_id = COALESCE(${save.conversationId ?? null}, conversation_id),
          files = ${JSON.stringify(save.tracked)}::jsonb,
          seq = GREATEST(seq, ${save.seq}),
          state = ${save.final ? "dormant" : "live"},
          updated_at = now()
        WHERE entity_type = ${type} AND id = ${id}`
    }))

  /**
   * Writes the outcomes of turns into the ledger, each only while its row is still the `dispatched` claim of the
   * generation that ran it. Not fenced by the session's generation: a turn's outcome is a fact about that turn, and
   * it must reach the ledger even after its session moved (a save that failed while the database was down, or that
   * was fenced), so that a retry with its prompt id is answered with it instead of as lost.
   */
  const complete = (id: string, completions: ReadonlyArray<Completion>): Effect.Effect<void, SqlError> =>
    sql.withTransaction(Effect.forEach(completions, (turn) =>
      sql`
        UPDATE ${turns} SET turn_id = ${turn.turnId}, state = ${turn.state},
          outcome = ${JSON.stringify(turn.outcome ?? null)}::jsonb
        WHERE entity_type = ${type} AND id = ${id} AND prompt_id = ${turn.promptId}
          AND generation = ${turn.generation} AND state = 'dispatched'`, { discard: true }))

  /** Moves the generation's ceiling up, before it hands out seqs past the current one. */
  const extend = (id: string, generation: number, ceiling: number) =>
    sql`
      UPDATE ${sessions} SET seq_ceiling = GREATEST(seq_ceiling, ${ceiling})
      WHERE entity_type = ${type} AND id = ${id} AND generation = ${generation}`.pipe(Effect.asVoid)

  /** The host is done with the session: its conversation, ledger and events go; its generation count stays. */
  const evict = (id: string): Effect.Effect<boolean, SqlError> =>
    sql.withTransaction(Effect.gen(function*() {
      const record = yield* lock(id)
      if (record === undefined || record.state === "evicted") return false
      yield* forget(id)
      yield* sql`
        UPDATE ${sessions} SET state = 'evicted', runner = NULL, conversation_id = NULL, files = '{}'::jsonb,
          seq = GREATEST(seq, seq_ceiling), updated_at = now()
        WHERE entity_type = ${type} AND id = ${id}`
      return true
    }))

  /** Saved events (and gaps) after `seq`, in order, at most `limit`. */
  const eventsAfter = (id: string, seq: number, limit: number): Effect.Effect<ReadonlyArray<StoredEvent>, SqlError> =>
    Effect.map(
      sql`
        SELECT seq, generation, turn_id, gap_to, event FROM ${events}
        WHERE entity_type = ${type} AND id = ${id} AND seq > ${seq}
        ORDER BY seq LIMIT ${limit}`,
      (rows) =>
        rows.map((row) => ({
          seq: num(row.seq),
          generation: num(row.generation),
          turnId: (row.turn_id as string | null) ?? undefined,
          gapTo: row.gap_to === null ? undefined : num(row.gap_to),
          event: json(row.event)
        }))
    )

  /** The saved events of one turn, in order. */
  const turnEvents = (id: string, turnId: string): Effect.Effect<ReadonlyArray<StoredEvent>, SqlError> =>
    Effect.map(
      sql`
        SELECT seq, generation, turn_id, event FROM ${events}
        WHERE entity_type = ${type} AND id = ${id} AND turn_id = ${turnId}
        ORDER BY seq`,
      (rows) =>
        rows.map((row) => ({
          seq: num(row.seq),
          generation: num(row.generation),
          turnId,
          event: json(row.event)
        }))
    )

  /** Every session record that is not evicted, oldest use first. */
  const list = Effect.map(
    sql`SELECT * FROM ${sessions} WHERE entity_type = ${type} AND state <> 'evicted' ORDER BY updated_at`,
    (rows) => rows.map((row) => ({ id: row.id as string, record: toRecord(row) }))
  )

  return { read, begin, claim, unclaim, turn, save, complete, extend, evict, eventsAfter, turnEvents, list } as const
})

/** The store of one registry. */
export type Store = Effect.Success<ReturnType<typeof make>>
