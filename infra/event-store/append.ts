import { type Kysely, type RawBuilder, type SqlBool, sql } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { Statement } from '../projection.ts';
import { EventValidationError, type ExpectedVersion, streamType } from './types.ts';

/*
 * The append of one stream as SQL: the version claim, the insert of its events, and the inline
 * projections' statements as WITH queries of the same statement.
 */

export type InsertedRow = {
  event_id: string;
  position: string;
  transaction_id: string;
  version: number;
  recorded_at: Date;
};

/** True in an inline projector's statement when the append's insert inserted its events (see appendStatement). */
export const APPENDED = sql<SqlBool>`exists (select from appended)`;

/** An event as the append's statement sends it: its data and metadata as serialised. */
export type EventRow = { eventId: string; type: string; data: string; metadata: string };

/** What one append claims and inserts: the stream, its expected version, its events, its precondition. */
export type Claim = {
  streamId: string;
  expectedVersion: ExpectedVersion;
  rows: readonly EventRow[];
  precondition: RawBuilder<SqlBool> | undefined;
};

/**
 * The append as one statement: the version claim and the insert (no row claimed, a conflict: no
 * row inserted), and the inline projectors' statements, if any, as further WITH queries (changing
 * nothing unless `appended` has its row). The events go as one JSON parameter (their data and
 * metadata as serialised), so that the statement's text is the same for any number of events and is
 * prepared once.
 */
export function appendStatement(claim: Claim, statements: readonly Statement[]): RawBuilder<InsertedRow> {
  return sql<InsertedRow>`
    with ${appendQueries('', claim, statements)}
    select event_id, position, transaction_id, version, recorded_at from appended`;
}

/** The WITH queries of one append (`claim`, `appended`, `inline_N`, each name followed by `suffix`). */
export function appendQueries(
  suffix: string,
  claim: Claim,
  statements: readonly Statement[],
): RawBuilder<unknown> {
  const { streamId, expectedVersion, rows, precondition } = claim;
  const recordset = `[${rows.map((row, index) => eventRecord(row, index + 1, '')).join(',')}]`;
  const claimed = sql.raw(`claim${suffix}`);
  const projections = statements.map(
    (statement, index) => sql`, ${sql.raw(`inline${suffix}_${index}`)} as (${statement})`,
  );
  return sql`${claimed} as (${claimVersions(streamId, expectedVersion, rows.length, precondition ?? sql<SqlBool>`true`)}),
    ${sql.raw(`appended${suffix}`)} as (
      insert into events (event_id, stream_id, version, type, data, metadata)
      select r.event_id, ${streamId}::text, ${claimed}.version - ${rows.length}::integer + r.n, r.type, r.data, r.metadata
      from ${claimed}, jsonb_to_recordset(${recordset}::jsonb) as r (event_id uuid, n integer, type text, data jsonb, metadata jsonb)
      order by r.n
      returning event_id, position, transaction_id::text as transaction_id, version, recorded_at
    )${sql.join(projections, sql``)}`;
}

/**
 * An event as a row of the append's JSON parameter: its id, its place `n` in the append (from 1),
 * its type, and its data and metadata as serialised (`prefix`: more properties, each followed by a comma).
 */
export function eventRecord(row: EventRow, n: number, prefix: string): string {
  return `{${prefix}"event_id":"${row.eventId}","n":${n},"type":${JSON.stringify(row.type)},"data":${row.data},"metadata":${row.metadata}}`;
}

/**
 * The statement that moves the stream's version forward by `count` if it is as expected, returning
 * the new version (no row on a conflict). The `streams` row is what serialises writers of a stream:
 * a concurrent writer waits on its row lock (or on its key, for a new stream) and then finds the
 * version changed.
 */
export function claimVersions(
  streamId: string,
  expected: ExpectedVersion,
  count: number,
  precondition: RawBuilder<SqlBool>,
): RawBuilder<{ version: number }> {
  const type = streamType(streamId);
  if (expected === 'any') {
    return sql`
      insert into streams (stream_id, version, stream_type)
      select ${streamId}, ${count}::integer, ${type} where ${precondition}
      on conflict (stream_id) do update set version = streams.version + excluded.version, updated_at = now()
      returning version`;
  }
  if (expected === 'no_stream' || expected === 0) {
    return sql`
      insert into streams (stream_id, version, stream_type)
      select ${streamId}, ${count}::integer, ${type} where ${precondition}
      on conflict (stream_id) do nothing
      returning version`;
  }
  return sql`
    update streams set version = version + ${count}::integer, updated_at = now()
    where stream_id = ${streamId} and version = ${expected}::integer and ${precondition}
    returning version`;
}

/** Whether a precondition holds now (after an append that wrote nothing: refused, or a conflict). */
export async function holds(executor: Kysely<Database>, condition: RawBuilder<SqlBool>): Promise<boolean> {
  const { rows } = await sql<{ holds: boolean }>`select ${condition} as holds`.execute(executor);
  return rows[0]?.holds === true;
}

export async function streamVersion(executor: Kysely<Database>, streamId: string): Promise<number> {
  const row = await executor
    .selectFrom('streams')
    .select('version')
    .where('stream_id', '=', streamId)
    .executeTakeFirst();
  return row?.version ?? 0;
}

/**
 * An event's data or metadata as JSON text; an EventValidationError when JSON cannot carry it (a
 * bigint, a cycle, undefined).
 */
export function toJson(type: string, field: 'data' | 'metadata', value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new EventValidationError(
      type,
      [{ path: [field], message: `not serialisable as JSON: ${String(err)}` }],
      {
        cause: err,
      },
    );
  }
  if (json === undefined)
    throw new EventValidationError(type, [{ path: [field], message: 'not serialisable as JSON' }]);
  return json;
}

export function matches(expected: ExpectedVersion, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return actual === 0;
  return expected === actual;
}

export function assertStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0)
    throw new TypeError('streamId must be a non-empty string');
}

export function assertExpectedVersion(expected: ExpectedVersion): void {
  if (expected === 'any' || expected === 'no_stream') return;
  if (!Number.isSafeInteger(expected) || expected < 0) {
    throw new TypeError(
      `expectedVersion must be a non-negative integer, 'no_stream' or 'any': ${String(expected)}`,
    );
  }
}
