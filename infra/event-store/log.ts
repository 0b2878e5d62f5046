import { type Kysely, sql, type Transaction } from 'kysely';
import type { EventMetadata } from '../../domain/event.ts';
import type { DomainEvent } from '../../domain/events.ts';
import type { Database, Db } from '../db/schema.ts';
import { type EventPlace, type LogPosition, type NewEvent, START, type StoredEvent } from './types.ts';

/*
 * Reading the log: a stream's events, the global log in (transaction_id, position) order below its
 * horizon (readAllEvents, readBatch, logHorizon), and subscribers' checkpoints.
 */

/** readStream with `onlyLast`: one statement, the kept property's value read as text. */
export async function readStreamKeepingLast<E extends NewEvent>(
  db: Db,
  streamId: string,
  property: string,
  from: number | undefined,
  to: number | undefined,
): Promise<StoredEvent<E>[]> {
  const range = sql`events.stream_id = ${streamId}${from === undefined ? sql`` : sql` and events.version >= ${from}`}${
    to === undefined ? sql`` : sql` and events.version <= ${to}`
  }`;
  const { rows } = await sql<StoredRow & { kept: string | null }>`
    with last as (select max(version) as version from events where ${range} and data ? ${property})
    select position, transaction_id::text as transaction_id, event_id, stream_id, events.version, type,
      data - ${property} as data, metadata, recorded_at,
      case when events.version = last.version then data ->> ${property} end as kept
    from events, last where ${range} order by events.version`.execute(db);
  return rows.map((row) => {
    const event = toStoredEvent<E>(row);
    if (row.kept === null) return event;
    return { ...event, data: { ...(event.data as object), [property]: row.kept } } as StoredEvent<E>;
  });
}

/** EventStore.lastValue: read backwards from `atOrBefore` to the first event holding the property. */
export async function lastValueInStream(
  db: Db,
  streamId: string,
  property: string,
  atOrBefore: number,
): Promise<string | null> {
  const { rows } = await sql<{ value: string }>`select data ->> ${property} as value from events
    where stream_id = ${streamId} and version <= ${atOrBefore} and data ? ${property}
    order by version desc limit 1`.execute(db);
  return rows[0]?.value ?? null;
}

/** The columns of an event as read back; `toStoredEvent` turns such a row into a StoredEvent. */
export const storedColumns = [
  'position',
  sql<string>`transaction_id::text`.as('transaction_id'),
  'event_id',
  'stream_id',
  'version',
  'type',
  'data',
  'metadata',
  'recorded_at',
] as const;

export interface StoredRow {
  position: string;
  transaction_id: string;
  event_id: string;
  stream_id: string;
  version: number;
  type: string;
  data: unknown;
  metadata: EventMetadata;
  recorded_at: Date;
}

/**
 * A row of `events` as a stored event of the union `E` its reader names: rows are trusted, as every
 * event was validated on append.
 */
export function toStoredEvent<E extends NewEvent = DomainEvent>(row: StoredRow): StoredEvent<E> {
  return {
    position: BigInt(row.position),
    transactionId: BigInt(row.transaction_id),
    eventId: row.event_id,
    streamId: row.stream_id,
    version: row.version,
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
  } as StoredEvent<E>;
}

/**
 * The first event of a type in a stream, or undefined: a stream that holds one event of its kind (a
 * site's monthly report) read by its id, on any executor (a replica's included).
 */
export async function firstEventOfType<E extends NewEvent>(
  executor: Kysely<Database>,
  streamId: string,
  type: E['type'],
): Promise<StoredEvent<E> | undefined> {
  const row = await executor
    .selectFrom('events')
    .select(storedColumns)
    .where('stream_id', '=', streamId)
    .where('type', '=', type)
    .orderBy('version')
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? undefined : toStoredEvent<E>(row);
}

/**
 * Up to `limit` events after `after` in (transaction_id, position) order, on `executor` (the
 * database or a transaction).
 *
 * Why not simply `position > after.position`: positions come from an identity sequence when a
 * row is inserted, but become visible when their transaction commits. Transaction A can take
 * position 10, transaction B position 11, and B commit first; a reader that sees 11 and
 * checkpoints there never sees 10 once A commits.
 *
 * Instead this orders by the writing transaction's id, then position, and only returns events of
 * transactions below the log's horizon (`logHorizon`): the oldest transaction still appending to
 * `events`. Every appending transaction below it has ended, and every later one gets a larger id,
 * so no event can ever appear before a returned one: the order up to the returned events is final
 * and `(transaction_id, position)` is a safe checkpoint. The price: an event waits until every
 * transaction that began appending before it has ended. A transaction that never appends, in this
 * database or another, holds nobody back.
 */
export async function readAllEvents<E extends NewEvent = DomainEvent>(
  executor: Kysely<Database>,
  after: LogPosition,
  limit: number,
  opts: {
    types?: readonly string[] | undefined;
    /**
     * Every committed event the statement sees, those of transactions at or past the oldest one still
     * open included. Only for a reader that reads the log once and stops (retireCheckpoint): a
     * transaction still open may yet commit an event before these, which a reader that carried on
     * from the last of them would skip.
     */
    heldBackToo?: boolean;
  } = {},
): Promise<StoredEvent<E>[]> {
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new RangeError(`limit must be a positive integer: ${limit}`);
  if (opts.types !== undefined && opts.types.length === 0) return [];
  const horizon = opts.heldBackToo === true ? undefined : await logHorizon(executor);
  let query = executor
    .selectFrom('events')
    .select(storedColumns)
    .where(
      sql<boolean>`(transaction_id, position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)`,
    );
  if (horizon !== undefined) query = query.where(sql<boolean>`transaction_id < ${horizon}::xid8`);
  if (opts.types !== undefined) query = query.where('type', 'in', opts.types);
  // Order by the xid8 column itself: the selected `transaction_id` is its text form (an alias ORDER BY
  // would resolve to), which sorts '100000' before '99999' and cannot use the index.
  const rows = await query
    .orderBy(sql`events.transaction_id`)
    .orderBy(sql`events.position`)
    .limit(limit)
    .execute();
  return rows.map((row) => toStoredEvent<E>(row));
}

/** What a subscriber of some event types read, and how far through the log that read it. */
interface SubscriberBatch<E extends NewEvent = DomainEvent> {
  /** Up to `limit` events of its types after `after`, in (transaction_id, position) order. */
  events: StoredEvent<E>[];
  /**
   * The position its checkpoint can move to: the last event when the batch is full; otherwise the
   * head of the log as the same statement saw it (every event of its types up to there is in
   * `events`), or `after` on an empty log.
   */
  through: LogPosition;
  /**
   * Whether the statement saw committed events past the head: events of transactions younger than
   * one still appending, which a read a moment later may return.
   */
  heldBack: boolean;
}

/**
 * readAllEvents for a subscriber of `types` (an async projector), with `through`. A subscriber that
 * moved its checkpoint only to its own last event would, with every read, scan every event of other
 * types appended since (the activity log's records, under load), more each time until an event of its
 * own came: a rare type made a read cost tens of milliseconds. With the checkpoint moved to `through`,
 * a read covers what was appended since the last one.
 *
 * The horizon first (logHorizon), then one statement, so one snapshot: the head is the newest event
 * below the horizon (see readAllEvents), every event up to it is final, and the events are read up to it.
 */
export async function readBatch<E extends NewEvent = DomainEvent>(
  executor: Kysely<Database>,
  after: LogPosition,
  limit: number,
  types: readonly string[],
): Promise<SubscriberBatch<E>> {
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new RangeError(`limit must be a positive integer: ${limit}`);
  if (types.length === 0) return { events: [], through: after, heldBack: false };
  const horizon = await logHorizon(executor);
  const { rows } = await sql<
    Partial<StoredRow> & {
      head_transaction_id: string | null;
      head_position: string | null;
      held_back: boolean;
    }
  >`
    with head as (
      select transaction_id, position from events
      where transaction_id < ${horizon}::xid8
      order by transaction_id desc, position desc
      limit 1
    ), held as (
      select exists (
        select 1 from events where transaction_id >= ${horizon}::xid8
      ) as held_back
    )
    select e.position, e.transaction_id::text as transaction_id, e.event_id, e.stream_id, e.version,
      e.type, e.data, e.metadata, e.recorded_at,
      head.transaction_id::text as head_transaction_id, head.position as head_position, held.held_back
    from held left join head on true left join lateral (
      select * from events
      where (events.transaction_id, events.position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)
        and (events.transaction_id, events.position) <= (head.transaction_id, head.position)
        and events.type in (${sql.join(types.map((type) => sql`${type}`))})
      order by events.transaction_id, events.position
      limit ${limit}
    ) e on true`.execute(executor);
  const first = rows[0];
  const heldBack = first?.held_back === true;
  if (first?.head_transaction_id == null || first.head_position == null)
    return { events: [], through: after, heldBack };
  const events = rows.filter((row) => row.position != null).map((row) => toStoredEvent<E>(row as StoredRow));
  const last = events.at(-1);
  if (events.length === limit && last) return { events, through: positionOf(last), heldBack };
  const head = { transactionId: BigInt(first.head_transaction_id), position: BigInt(first.head_position) };
  return { events, through: isAfter(head, after) ? head : after, heldBack };
}

/**
 * The log's horizon, as xid8 text: every event of a transaction below it is final (its transaction
 * has ended and is visible to any later snapshot), and no transaction below it can still append.
 *
 * It is the oldest id among the transactions that hold (or wait for) a lock on `events` that allows
 * writing it, in this database, and otherwise the next id to be assigned. Appending takes that lock
 * before the transaction has an id (the insert's own statement locks every table it names before it
 * writes anything; an append in a transaction that writes other tables first takes it explicitly,
 * see `lockEventsForAppend`), so a transaction that gets its id after this look cannot end up below
 * it, and one that had its id before is in the list or has ended. `pg_locks` names a transaction by
 * its 32-bit id; it is widened to xid8 by its distance from the snapshot's xmax, less than 2^31 either
 * way (a transaction still running can have an id at or past the xmax).
 *
 * Its own statement, before the statement that reads below it: a statement's snapshot is taken when
 * the statement starts, so a transaction that ended between that and the look at `pg_locks` would be
 * below the horizon and yet invisible to it. A statement that starts after this one has ended sees it.
 * Unlike the server-wide `pg_snapshot_xmin`, a transaction that never appends (a bulk load in another
 * database, a report holding a snapshot, a lock on `streams`) holds nobody back.
 */
export async function logHorizon(executor: Kysely<Database>): Promise<string> {
  const { rows } = await sql<{ horizon: string; isolation: string }>`
    with next as (select pg_snapshot_xmax(pg_current_snapshot())::text::bigint as id),
    appending as (
      select x.transactionid::text::bigint as id
      from pg_locks r join pg_locks x on x.virtualtransaction = r.virtualtransaction
      where r.locktype = 'relation'
        and r.database = (select oid from pg_database where datname = current_database())
        and r.relation = 'events'::regclass
        and r.mode in ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
        and x.locktype = 'transactionid' and x.mode = 'ExclusiveLock' and x.granted
    )
    select least(next.id, min(next.id + (widened.delta - case when widened.delta >= 2147483648 then 4294967296 else 0 end)))::text
      as horizon, current_setting('transaction_isolation') as isolation
    from next left join appending on true
      left join lateral (select ((appending.id - next.id) % 4294967296 + 4294967296) % 4294967296 as delta) widened on true
    group by next.id`.execute(executor);
  const row = rows[0];
  if (row === undefined) throw new Error('the log horizon statement returned no row');
  // A transaction that keeps one snapshot would read below the horizon with a snapshot older than it.
  if (row.isolation !== 'read committed')
    throw new Error(`the log is read in read committed transactions only, not ${row.isolation}`);
  return row.horizon;
}

/**
 * Takes the lock on `events` an append holds to its commit, before the transaction writes anything
 * else (and so before it has an id): the log's readers then see it appending from the moment it can
 * have an id below theirs (logHorizon). An append's own statement takes it anyway; a transaction
 * whose first write is elsewhere (an append with writes `alongside`) takes it first with this.
 */
export async function lockEventsForAppend(trx: Transaction<Database>): Promise<void> {
  await sql`lock table events in row exclusive mode`.execute(trx);
}

/**
 * The newest event of each of these streams among `types` after `after`, up to the log's head (every
 * event final: see readBatch), by stream id; a stream with none is left out. One index probe per
 * stream (`events (stream_id, version)`): for a few streams, such as an MCP session's subscriptions.
 */
export async function newestAfter(
  executor: Kysely<Database>,
  streamIds: readonly string[],
  after: LogPosition,
  types: readonly string[],
): Promise<Map<string, LogPosition>> {
  if (streamIds.length === 0 || types.length === 0) return new Map();
  const horizon = await logHorizon(executor);
  const { rows } = await sql<{ stream_id: string; transaction_id: string; position: string }>`
    select distinct on (stream_id) stream_id, transaction_id::text as transaction_id, position
    from events
    where stream_id in (${sql.join(streamIds.map((id) => sql`${id}`))})
      and type in (${sql.join(types.map((type) => sql`${type}`))})
      and transaction_id < ${horizon}::xid8
      and (transaction_id, position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)
    order by stream_id, transaction_id desc, position desc`.execute(executor);
  return new Map(
    rows.map((r) => [r.stream_id, { transactionId: BigInt(r.transaction_id), position: BigInt(r.position) }]),
  );
}

/** A position as text (`<transaction id>-<position>`): an id for what is sent of it, such as an SSE event's. */
export function positionText(at: LogPosition): string {
  return `${at.transactionId}-${at.position}`;
}

/** The position `positionText` wrote, or null for any other text. */
export function positionOfText(text: string): LogPosition | null {
  const match = /^(\d{1,20})-(\d{1,20})$/.exec(text);
  if (!match) return null;
  return { transactionId: BigInt(match[1] as string), position: BigInt(match[2] as string) };
}

/** Whether `a` comes after `b` in the log's (transaction_id, position) order. */
export function isAfter(a: LogPosition, b: LogPosition): boolean {
  return (
    a.transactionId > b.transactionId || (a.transactionId === b.transactionId && a.position > b.position)
  );
}

function positionOf(event: EventPlace): LogPosition {
  return { transactionId: event.transactionId, position: event.position };
}

/** The newest position readAllEvents can return now (START on an empty log). */
export function headPosition(executor: Kysely<Database>): Promise<LogPosition> {
  return newestPosition(executor, { readable: true });
}

/**
 * The newest committed event's position (START on an empty log), held back or not: where a reader
 * must get to to have seen everything committed now. headPosition is as far as it can read now; the
 * two differ while a transaction older than the newest events is still appending.
 */
export function committedHead(executor: Kysely<Database>): Promise<LogPosition> {
  return newestPosition(executor, { readable: false });
}

/** The newest event's position, of those readAllEvents can return now (`readable`) or of all committed. */
async function newestPosition(executor: Kysely<Database>, opts: { readable: boolean }): Promise<LogPosition> {
  const horizon = opts.readable ? await logHorizon(executor) : undefined;
  let query = executor
    .selectFrom('events')
    .select(['position', sql<string>`transaction_id::text`.as('transaction_id')]);
  if (horizon !== undefined) query = query.where(sql<boolean>`transaction_id < ${horizon}::xid8`);
  const row = await query
    .orderBy(sql`events.transaction_id`, 'desc')
    .orderBy(sql`events.position`, 'desc')
    .limit(1)
    .executeTakeFirst();
  return row === undefined
    ? START
    : { transactionId: BigInt(row.transaction_id), position: BigInt(row.position) };
}

/**
 * A subscriber's checkpoint (START when it has none). Use it in the transaction that writes the
 * rows the next batch produces and the new checkpoint. `forUpdate` locks the checkpoint row
 * (creating it at START if missing) so that concurrent runners of the same subscriber take turns.
 */
export async function readCheckpoint(
  trx: Kysely<Database>,
  name: string,
  opts: { forUpdate?: boolean } = {},
): Promise<LogPosition> {
  if (opts.forUpdate === true) {
    await trx
      .insertInto('checkpoints')
      .values({ name, transaction_id: sql<string>`'0'::xid8`, position: '0' })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
  }
  let query = trx
    .selectFrom('checkpoints')
    .select(['position', sql<string>`transaction_id::text`.as('transaction_id')])
    .where('name', '=', name);
  if (opts.forUpdate === true) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row === undefined
    ? START
    : { transactionId: BigInt(row.transaction_id), position: BigInt(row.position) };
}

/** Stores a subscriber's checkpoint (insert or update). */
export async function writeCheckpoint(trx: Kysely<Database>, name: string, pos: LogPosition): Promise<void> {
  await trx
    .insertInto('checkpoints')
    .values({
      name,
      transaction_id: sql<string>`${String(pos.transactionId)}::text::xid8`,
      position: String(pos.position),
      updated_at: sql<Date>`now()`,
    })
    .onConflict((oc) =>
      oc.column('name').doUpdateSet({
        transaction_id: sql<string>`excluded.transaction_id`,
        position: sql<string>`excluded.position`,
        updated_at: sql<Date>`now()`,
      }),
    )
    .execute();
}

/** Which of these streams have events. */
export async function existingStreams(
  executor: Kysely<Database>,
  streamIds: readonly string[],
): Promise<Set<string>> {
  if (streamIds.length === 0) return new Set();
  const rows = await executor
    .selectFrom('streams')
    .select('stream_id')
    .where('stream_id', 'in', streamIds)
    .execute();
  return new Set(rows.map((r) => r.stream_id));
}
