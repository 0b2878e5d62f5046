import { type Expression, type Kysely, type RawBuilder, type SqlBool, sql, type Transaction } from 'kysely';
import type { EventMetadata } from '../domain/event.ts';
import type { DomainEvent } from '../domain/events.ts';
import { createCommitGroup } from './commit-group.ts';
import type { DbHandle } from './db/open.ts';
import type { Database, Db } from './db/schema.ts';
import { ALWAYS_NAMED } from './db/statement-cache.ts';
import { uuidv7 } from './ids.ts';
import { IN_TRANSACTION, type InlineStatement, type InTransaction, type Pending } from './projection.ts';
import { bound, detached, inSpan, inSpanSync } from './telemetry/spans.ts';

/*
 * The event store: one append-only `events` table in PostgreSQL (or PGlite), optimistic
 * concurrency per stream through its `streams` row, and a global log that subscribers read in
 * (transaction_id, position) order without ever skipping an event (see readAllEvents).
 *
 * Positions and transaction ids are JS `bigint` in this module's API; in SQL rows they are
 * decimal strings (see infra/db/schema.ts).
 *
 * The store is typed over an event union `E` (the domain's, DomainEvent, unless a caller names
 * another): `append` takes events of the union, reads give them back with their data narrowed by
 * type. Every event is validated on append (`validate`), so a read trusts the rows it decodes
 * (`toStoredEvent`); a reader of one stream may name the narrower union that stream holds.
 */

/**
 * What the stream's version must be for an append to go through: a number N means exactly N
 * (0 means the stream does not exist yet, the same as 'no_stream': a stream only comes into being
 * with its first event), 'no_stream' means it must not exist, 'any' skips the check.
 */
export type ExpectedVersion = number | 'no_stream' | 'any';

/** The shape of every event the store takes: domain events have it (the bound of a store's union). */
export interface NewEvent {
  readonly type: string;
  readonly data: unknown;
  readonly metadata: EventMetadata;
}

/** Where an event sits once stored: its stream version and its place in the global log. */
export interface EventPlace {
  position: bigint;
  transactionId: bigint;
  eventId: string;
  streamId: string;
  version: number;
  recordedAt: Date;
}

/** An event as the store reads it back: one of the union (its data narrowed by `type`) and its place. */
export type StoredEvent<E extends NewEvent = DomainEvent> = E & EventPlace;

/** A place in the global log; subscribers read events after it in (transaction_id, position) order. */
export interface LogPosition {
  transactionId: bigint;
  position: bigint;
}

/** Before every event. */
export const START: LogPosition = Object.freeze({ transactionId: 0n, position: 0n });

/** The stream's version was not the expected one: someone else appended first. */
export class ConcurrencyError extends Error {
  readonly streamId: string;
  readonly expected: ExpectedVersion;
  /** The stream's version when the conflict was detected (0: no such stream). */
  readonly actual: number;

  constructor(streamId: string, expected: ExpectedVersion, actual: number) {
    super(
      `Stream ${streamId}: expected ${expected === 'no_stream' ? 'no stream' : `version ${expected}`}, ` +
        `but it is ${actual === 0 ? 'missing' : `at version ${actual}`}`,
    );
    this.name = 'ConcurrencyError';
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}

interface ValidationIssue {
  readonly path: ReadonlyArray<PropertyKey>;
  readonly message: string;
  readonly code?: string;
}

/** An event's data or metadata does not match its schema; nothing was written. */
export class EventValidationError extends Error {
  readonly type: string;
  readonly issues: readonly ValidationIssue[];

  constructor(type: string, issues: readonly ValidationIssue[], options?: { cause?: unknown }) {
    const summary = issues.map(
      (issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`,
    );
    super(`Invalid ${type} event: ${summary.join('; ')}`, options);
    this.name = 'EventValidationError';
    this.type = type;
    this.issues = issues;
  }
}

export interface AppendResult<E extends NewEvent = DomainEvent> {
  /** The stream's version after the append: the version of its last event. */
  nextVersion: number;
  positions: bigint[];
  events: StoredEvent<E>[];
}

export interface ReadAllOptions {
  /** Only events of these types (the log order and checkpoints are unaffected). */
  types?: readonly string[];
  /** Read inside this transaction (e.g. a projection runner's, which also writes its checkpoint). */
  trx?: Kysely<Database>;
}

/**
 * A condition the append's own statement checks with the version claim (an API key still unrevoked):
 * false, nothing is written and `refusal()` is thrown instead of a ConcurrencyError.
 */
export interface Precondition {
  holds: RawBuilder<SqlBool>;
  refusal: () => Error;
  /** Names the check: two preconditions with the same `id` are the same check (checked once when combined). */
  id?: string;
}

export interface AppendOptions {
  expectedVersion: ExpectedVersion;
  precondition?: Precondition | undefined;
  /**
   * Writes that must commit with the events or not at all (a credential: apps/application/commands/credentials.ts): run in the
   * append's transaction before the insert, so the inline projectors see them; a conflict rolls them back.
   */
  alongside?: (trx: Transaction<Database>) => Promise<void>;
  /**
   * false: the append's transaction commits without waiting for the WAL flush (`synchronous_commit`
   * off for it alone): records whose loss in a crash of PostgreSQL is acceptable (the activity log).
   */
  synchronousCommit?: boolean;
}

export interface EventStore<E extends NewEvent = DomainEvent> {
  append<A extends E>(streamId: string, events: readonly A[], opts: AppendOptions): Promise<AppendResult<A>>;
  /**
   * The stream's events, ordered by version; `from` and `to` are inclusive versions. `S`: the events
   * the stream holds (an aggregate's union), when the caller knows it narrower than the store's.
   * `onlyLast`: a string property of the events' data (an article's `body`) that only the last event
   * of the range holding it keeps; the others are read without it. A fold whose events replace that
   * property whole ends in the same state, and the large values it would overwrite are neither sent
   * by the database nor parsed here (the kept one arrives as text, never as JSON to parse).
   */
  readStream<S extends E = E>(
    streamId: string,
    opts?: { from?: number; to?: number; onlyLast?: string },
  ): Promise<StoredEvent<S>[]>;
  /** Up to `limit` events after `after`, in (transaction_id, position) order; see readAllEvents. */
  readAll(after: LogPosition, limit: number, opts?: ReadAllOptions): Promise<StoredEvent<E>[]>;
  /** The newest position readAll can return now; START on an empty log. */
  headPosition(): Promise<LogPosition>;
}

export interface EventStoreDeps<E extends NewEvent = DomainEvent> {
  db: Db;
  /** Told after each commit which types were appended (it wakes subscribers in this process and others). */
  handle: Pick<DbHandle, 'notifyAppended'>;
  /** Throws on an invalid event; called for every event before the database is touched. */
  validate: (event: NewEvent) => void;
  /** Inline projections: run inside the append's transaction after the insert; a throw rolls the append back. */
  inline?: (events: readonly StoredEvent<E>[], trx: Transaction<Database>) => Promise<void>;
  /**
   * The same inline projections of one event as statements run within the append's own statement
   * (`inlineStatements` in projection-runner.ts); `IN_TRANSACTION` from it: `inline` in a transaction.
   */
  inlineStatements?: (
    events: readonly Pending<E>[],
    db: Db,
    appended: Expression<SqlBool>,
  ) => InlineStatement[] | InTransaction;
  /**
   * The inline projections of several streams' runs as statements whose number does not grow with the
   * runs' (`inlineGroupStatements` in projection-runner.ts), for a group of appends at known versions;
   * `IN_TRANSACTION` from it, or none: each append of the group brings its own statements.
   */
  inlineGroupStatements?: (
    runs: readonly (readonly Pending<E>[])[],
    appendedStreams: RawBuilder<unknown>,
  ) => InlineStatement[] | InTransaction;
  /**
   * The streams whose one-statement appends may share a statement, and so a commit, with other
   * streams' (group commit: infra/commit-group.ts): only streams whose inline projections write rows of
   * their own stream alone. Two appends in one statement must never change the same row: PostgreSQL
   * keeps only one of two changes of a row made by one statement's parts.
   */
  groupCommits?: (streamId: string) => boolean;
}

/** Group commit: at most this many group statements at once, each of at most this many appends. */
const GROUPS_IN_FLIGHT = 2;
const GROUP_APPENDS = 8;

export function createEventStore<E extends NewEvent = DomainEvent>(deps: EventStoreDeps<E>): EventStore<E> {
  const { db, handle, validate, inline, inlineStatements, inlineGroupStatements, groupCommits } = deps;
  const group =
    groupCommits === undefined
      ? undefined
      : createCommitGroup<GroupMember>({
          maxInFlight: GROUPS_IN_FLIGHT,
          maxItems: GROUP_APPENDS,
          // The group holds this store's appends only: their events are of E.
          send: (members) => sendGroup(db, members, inlineGroupStatements as GroupStatements | undefined),
        });

  const validateAll = (events: readonly NewEvent[]): void => {
    for (const event of events) {
      try {
        validate(event);
      } catch (err) {
        if (err instanceof EventValidationError) throw err;
        throw new EventValidationError(String(event.type), issuesOf(err), { cause: err });
      }
    }
  };

  const store: EventStore<E> = {
    async append<A extends E>(
      streamId: string,
      events: readonly A[],
      { expectedVersion, alongside, precondition, synchronousCommit }: AppendOptions,
    ): Promise<AppendResult<A>> {
      assertStreamId(streamId);
      assertExpectedVersion(expectedVersion);
      validateAll(events);

      if (events.length === 0) {
        // Nothing to write, but a stale expectation is still a conflict, and a precondition still refuses.
        if (precondition !== undefined && !(await holds(db, precondition.holds)))
          throw precondition.refusal();
        const actual = await streamVersion(db, streamId);
        if (!matches(expectedVersion, actual)) throw new ConcurrencyError(streamId, expectedVersion, actual);
        return { nextVersion: actual, positions: [], events: [] };
      }

      // Serialised once: what is stored, what the inline projections see and what a replay reads
      // back are the same JSON (undefined properties dropped, dates as strings...).
      const rows = events.map((event) => ({
        eventId: uuidv7(),
        type: event.type,
        data: toJson(event.type, 'data', event.data ?? null),
        metadata: toJson(event.type, 'metadata', event.metadata),
      }));

      // What the inline projections see and the append returns: the events as a replay reads them.
      const parsed = rows.map((row) => ({ data: JSON.parse(row.data), metadata: JSON.parse(row.metadata) }));
      const toStored = (inserted: readonly InsertedRow[]): StoredEvent<A>[] => {
        const byId = new Map(inserted.map((row) => [row.event_id, row]));
        return rows.map((row, index) => {
          const returned = byId.get(row.eventId);
          if (returned === undefined) throw new Error(`event ${row.eventId} was not returned by its insert`);
          // The event as given (one of A), read back from its JSON.
          return {
            position: BigInt(returned.position),
            transactionId: BigInt(returned.transaction_id),
            eventId: row.eventId,
            streamId,
            version: returned.version,
            type: row.type,
            data: parsed[index]?.data,
            metadata: parsed[index]?.metadata,
            recordedAt: returned.recorded_at,
          } as StoredEvent<A>;
        });
      };
      /** An append that wrote nothing: its precondition refused it, or the stream was not at the expected version. */
      const refusedOrConflict = async (executor: Kysely<Database>): Promise<never> => {
        if (precondition !== undefined && !(await holds(executor, precondition.holds))) {
          throw precondition.refusal();
        }
        throw new ConcurrencyError(streamId, expectedVersion, await streamVersion(executor, streamId));
      };
      const run = async (executor: Kysely<Database>, statements: readonly InlineStatement[]) => {
        const { rows: inserted } = await appendStatement(
          { streamId, expectedVersion, rows, precondition: precondition?.holds },
          statements,
        ).execute(executor);
        if (inserted.length === 0) return refusedOrConflict(executor);
        return toStored(inserted);
      };

      // Events whose versions are known ahead, and inline projectors that can say what they change as
      // statements: the events and their read models are written by one statement (one round trip, no
      // transaction left open between statements while this process does other work). Otherwise a
      // transaction: the insert, then each inline projector's `apply`.
      const base =
        expectedVersion === 'no_stream'
          ? 0
          : typeof expectedVersion === 'number'
            ? expectedVersion
            : undefined;
      const inTransaction = () =>
        db.transaction().execute(async (trx) => {
          if (synchronousCommit === false)
            await sql`select set_config('synchronous_commit', 'off', true)`.execute(trx);
          if (alongside !== undefined) {
            await lockEventsForAppend(trx);
            await alongside(trx);
          }
          const result = await run(trx, []);
          if (inline !== undefined) {
            await inSpan('inline projections', IN_TRANSACTION_SPAN, () => inline(result, trx));
          }
          return result;
        });
      // The events as given (of A), read back from their JSON.
      const pending =
        inlineStatements !== undefined &&
        alongside === undefined &&
        synchronousCommit !== false &&
        base !== undefined
          ? rows.map(
              (row, index) =>
                ({
                  type: row.type,
                  ...parsed[index],
                  eventId: row.eventId,
                  streamId,
                  version: base + index + 1,
                }) as Pending<A>,
            )
          : undefined;
      const statementsOf = (appended: Expression<SqlBool>) =>
        pending === undefined || inlineStatements === undefined
          ? IN_TRANSACTION
          : inSpanSync('inline projections', IN_STATEMENT_SPAN, (span) => {
              const made = inlineStatements(pending, db, appended);
              // A projector that can only apply in a transaction: the transaction's span follows.
              if (made === IN_TRANSACTION)
                span.setAttribute('content_service.projection.mode', 'in_transaction');
              else span.setAttribute('content_service.projection.statements', made.length);
              return made;
            });
      /** The append on its own: one statement, or a transaction. */
      const alone = () => {
        const statements = statementsOf(APPENDED);
        return statements !== IN_TRANSACTION ? run(db, statements) : inTransaction();
      };
      const stored =
        pending !== undefined && group !== undefined && groupCommits?.(streamId) === true
          ? await new Promise<StoredEvent<A>[]>((resolve, reject) => {
              const answer = (work: Promise<StoredEvent<A>[]>) => work.then(resolve, reject);
              group.add({
                claim: { streamId, expectedVersion, rows, precondition: precondition?.holds },
                preconditionId: precondition === undefined ? undefined : (precondition.id ?? uuidv7()),
                pending,
                // What its statement's text depends on: the events' types and the properties their data has.
                shape: `${precondition === undefined ? '' : 'checked '}${parsed
                  .map((event, index) => `${rows[index]?.type}(${Object.keys(event.data ?? {}).join()})`)
                  .join(' ')}`,
                statements: bound(statementsOf),
                inserted: bound((inserted: readonly InsertedRow[]) =>
                  answer(inserted.length > 0 ? Promise.resolve(toStored(inserted)) : refusedOrConflict(db)),
                ),
                alone: bound(() => answer(alone())),
              });
            })
          : await alone();

      // The wake-up says which types were appended: a subscriber of other types need not look.
      handle.notifyAppended([...new Set(events.map((event) => event.type))]);
      const last = stored.at(-1);
      return {
        nextVersion: last === undefined ? 0 : last.version,
        positions: stored.map((event) => event.position),
        events: stored,
      };
    },

    async readStream<S extends E = E>(
      streamId: string,
      opts: { from?: number; to?: number; onlyLast?: string } = {},
    ): Promise<StoredEvent<S>[]> {
      const { from, to, onlyLast } = opts;
      if (onlyLast !== undefined) return readStreamKeepingLast<S>(db, streamId, onlyLast, from, to);
      let query = db.selectFrom('events').select(storedColumns).where('stream_id', '=', streamId);
      if (from !== undefined) query = query.where('version', '>=', from);
      if (to !== undefined) query = query.where('version', '<=', to);
      const rows = await query.orderBy('version').execute();
      return rows.map((row) => toStoredEvent<S>(row));
    },

    readAll(after, limit, opts = {}) {
      return readAllEvents<E>(opts.trx ?? db, after, limit, { types: opts.types });
    },

    headPosition() {
      return headPosition(db);
    },
  };
  return {
    ...store,
    // Each append is a span (`append article`), the inline projections' one inside it.
    append: (streamId, events, opts) =>
      inSpan(
        `append ${streamType(streamId)}`,
        {
          attributes: () => ({
            'content_service.stream.id': streamId,
            'content_service.stream.expected_version': String(opts.expectedVersion),
            'content_service.event.types': events.map((event) => event.type),
          }),
        },
        () => store.append(streamId, events, opts),
      ),
  };
}

/**
 * The inline projections' span. Within the append's one statement, it covers making their statements
 * (they run in the append's statement: its pg span, beside this one); in a transaction, their `apply`
 * and its statements (its pg spans, inside this one).
 */
const IN_STATEMENT_SPAN = { attributes: () => ({ 'content_service.projection.mode': 'in_statement' }) };
const IN_TRANSACTION_SPAN = { attributes: () => ({ 'content_service.projection.mode': 'in_transaction' }) };

/** readStream with `onlyLast`: one statement, the kept property's value read as text. */
async function readStreamKeepingLast<E extends NewEvent>(
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

interface StoredRow {
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

type InsertedRow = {
  event_id: string;
  position: string;
  transaction_id: string;
  version: number;
  recorded_at: Date;
};

/** True in an inline projector's statement when the append's insert inserted its events (see appendStatement). */
const APPENDED = sql<SqlBool>`exists (select from appended)`;

/** An event as the append's statement sends it: its data and metadata as serialised. */
type EventRow = { eventId: string; type: string; data: string; metadata: string };

/** What one append claims and inserts: the stream, its expected version, its events, its precondition. */
type Claim = {
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
function appendStatement(claim: Claim, statements: readonly InlineStatement[]): RawBuilder<InsertedRow> {
  return sql<InsertedRow>`
    with ${appendQueries('', claim, statements)}
    select event_id, position, transaction_id, version, recorded_at from appended`;
}

/**
 * One statement of several appends to different streams (group commit), each with its own WITH
 * queries (`_1`, `_2`... after their names) and its inline projectors' statements (made with its own
 * `appended_N`): each claims its own version, and one whose claim fails inserts and changes nothing,
 * as alone. The rows say which append inserted them (`member`, from 1).
 */
function groupStatement(
  members: readonly { claim: Claim; statements: readonly InlineStatement[] }[],
): RawBuilder<InsertedRow & { member: number }> {
  const queries = members.map((m, index) => appendQueries(`_${index + 1}`, m.claim, m.statements));
  const selects = members.map(
    (_, index) =>
      sql`select ${sql.raw(String(index + 1))}::integer as member, event_id, position, transaction_id, version, recorded_at from ${sql.raw(`appended_${index + 1}`)}`,
  );
  // Few texts (one per number of appends and their shapes), each over the usual limit: named anyway.
  return sql`${sql.raw(ALWAYS_NAMED)}
    with ${sql.join(queries, sql`, `)}
    ${sql.join(selects, sql` union all `)}`;
}

/** The WITH queries of one append (`claim`, `appended`, `inline_N`, each name followed by `suffix`). */
function appendQueries(
  suffix: string,
  claim: Claim,
  statements: readonly InlineStatement[],
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
function eventRecord(row: EventRow, n: number, prefix: string): string {
  return `{${prefix}"event_id":"${row.eventId}","n":${n},"type":${JSON.stringify(row.type)},"data":${row.data},"metadata":${row.metadata}}`;
}

/** One append waiting in the commit group: what it claims, and how it is answered. */
type GroupMember = {
  claim: Claim;
  /** Names its precondition (the same check, the same name); none without one. */
  preconditionId: string | undefined;
  /** Its events with their versions (the expected version plus one, on): what the inline projections see. */
  pending: readonly Pending<NewEvent>[];
  /** Appends of one shape make statements of one text: only they go together (see sendGroup). */
  shape: string;
  /** Its inline projectors' statements, made with its place's `appended`; IN_TRANSACTION: it goes alone. */
  statements: (appended: Expression<SqlBool>) => InlineStatement[] | InTransaction;
  /** Answers it from the rows the group's statement inserted for it (none: refused, or a conflict). */
  inserted: (rows: readonly InsertedRow[]) => Promise<unknown>;
  /** Sends it on its own, and answers it. */
  alone: () => Promise<unknown>;
};

/**
 * Sends appends of different streams together: one statement, so one transaction and one commit
 * (one WAL flush) for each group of appends of one shape. Appends of one shape make one text for each
 * number of them, which PostgreSQL keeps prepared (infra/db/statement-cache.ts): few texts, however
 * mixed the appends. An append whose projectors need a transaction, or the only one of its shape, goes
 * alone; should a group's statement fail (a constraint one append broke, a deadlock with another
 * process), nothing of it was written, and each goes again alone, failing or not on its own. Streams
 * in id order, so that the statements of several processes lock them in the same order. Every member
 * is answered; the statement belongs to no caller's trace.
 */
async function sendGroup(
  db: Db,
  members: readonly GroupMember[],
  grouped: GroupStatements | undefined,
): Promise<void> {
  const sorted = [...members].sort((a, b) => compareIds(a.claim.streamId, b.claim.streamId));
  await Promise.all(
    [...Map.groupBy(sorted, (member) => member.shape).values()].map((same) => sendShape(db, same, grouped)),
  );
}

/** The inline projections' statements of a group of runs (EventStoreDeps.inlineGroupStatements). */
type GroupStatements = (
  runs: readonly (readonly Pending<NewEvent>[])[],
  appendedStreams: RawBuilder<unknown>,
) => InlineStatement[] | InTransaction;

/** Appends of one shape, in stream id order: as one statement (see sendGroup). */
async function sendShape(
  db: Db,
  members: readonly GroupMember[],
  grouped: GroupStatements | undefined,
): Promise<void> {
  const settable = grouped === undefined ? [] : settableOf(members);
  const statements =
    grouped !== undefined && settable.length > 1 ? setStatements(settable, grouped) : IN_TRANSACTION;
  if (statements === IN_TRANSACTION) return sendEach(db, members);
  await Promise.all([
    sendSet(db, settable, statements),
    sendEach(
      db,
      members.filter((member) => !settable.includes(member)),
    ),
  ]);
}

/** A group's appends to existing streams at their versions, as one set statement (see setGroupStatement). */
async function sendSet(
  db: Db,
  members: readonly GroupMember[],
  statements: readonly InlineStatement[],
): Promise<void> {
  let inserted: (InsertedRow & { stream_id: string })[] | undefined;
  try {
    inserted = (await detached(() => setGroupStatement(members, statements).execute(db))).rows;
  } catch {
    await Promise.all(members.map((member) => member.alone()));
    return;
  }
  const byStream = Map.groupBy(inserted, (row) => row.stream_id);
  await Promise.all(members.map((member) => member.inserted(byStream.get(member.claim.streamId) ?? [])));
}

/** Appends of one shape, each with its own statements, as one statement (groupStatement), or alone. */
async function sendEach(db: Db, members: readonly GroupMember[]): Promise<void> {
  const [first] = members;
  if (first === undefined) return;
  if (members.length === 1) {
    await first.alone();
    return;
  }
  const together: { member: GroupMember; claim: Claim; statements: InlineStatement[] }[] = [];
  const apart: Promise<unknown>[] = [];
  for (const member of members) {
    const appended = sql<SqlBool>`exists (select from ${sql.raw(`appended_${together.length + 1}`)})`;
    let statements: InlineStatement[] | InTransaction;
    try {
      statements = member.statements(appended);
    } catch {
      statements = IN_TRANSACTION;
    }
    if (statements === IN_TRANSACTION) apart.push(member.alone());
    else together.push({ member, claim: member.claim, statements });
  }
  const [sole] = together;
  if (sole !== undefined && together.length === 1) apart.push(sole.member.alone());
  else if (together.length > 1) {
    let inserted: (InsertedRow & { member: number })[] | undefined;
    try {
      inserted = (await detached(() => groupStatement(together).execute(db))).rows;
    } catch {
      apart.push(...together.map((t) => t.member.alone()));
    }
    if (inserted !== undefined) {
      const byMember = Map.groupBy(inserted, (row) => row.member);
      apart.push(...together.map((t, index) => t.member.inserted(byMember.get(index + 1) ?? [])));
    }
  }
  await Promise.all(apart);
}

/**
 * The inline projections of a group's settable appends (settableOf) as statements that do not grow
 * with it, when every inline projector that handles their events has a group form; else
 * IN_TRANSACTION (each append brings its own statements: groupStatement).
 */
function setStatements(
  members: readonly GroupMember[],
  grouped: GroupStatements,
): InlineStatement[] | InTransaction {
  try {
    return grouped(
      members.map((member) => member.pending),
      APPENDED_STREAMS,
    );
  } catch {
    return IN_TRANSACTION;
  }
}

/**
 * The appends a set statement can carry: those that claim a version of a stream that exists (`update
 * streams`), one per stream (a second append to a stream of the group goes with the others).
 */
function settableOf(members: readonly GroupMember[]): GroupMember[] {
  const streams = new Set<string>();
  return members.filter(({ claim }) => {
    if (typeof claim.expectedVersion !== 'number' || claim.expectedVersion < 1) return false;
    if (streams.has(claim.streamId)) return false;
    streams.add(claim.streamId);
    return true;
  });
}

/** The streams whose version claim succeeded, in a group's set statement (see setGroupStatement). */
const APPENDED_STREAMS = sql`(select stream_id from appended)`;

/**
 * A group of appends, each to its own existing stream at its expected version, as one statement whose
 * parts do not grow with the group: one version claim of every stream (the claims one JSON parameter),
 * one insert of every event (one JSON parameter), and the inline projections' group statements, each
 * changing only the rows of streams whose claim succeeded. One whose claim fails (a conflict, its
 * precondition refused) inserts and changes nothing, as alone. Preconditions named alike are one
 * condition; different ones are checked each for its own append. The rows say which stream they are
 * of (an append is of one stream, and no two of the group share one).
 */
function setGroupStatement(
  members: readonly GroupMember[],
  statements: readonly InlineStatement[],
): RawBuilder<InsertedRow & { stream_id: string }> {
  const claims = JSON.stringify(
    members.map(({ claim }, index) => ({
      member: index + 1,
      stream_id: claim.streamId,
      expected: claim.expectedVersion,
      count: claim.rows.length,
    })),
  );
  const events = `[${members
    .flatMap(({ claim }, index) =>
      claim.rows.map((row, n) => eventRecord(row, n + 1, `"member":${index + 1},`)),
    )
    .join(',')}]`;
  const projections = statements.map(
    (statement, index) => sql`, ${sql.raw(`inline_${index}`)} as (${statement})`,
  );
  return sql`${sql.raw(ALWAYS_NAMED)}
    with claim as (
      update streams s set version = s.version + c.count, updated_at = now()
      from jsonb_to_recordset(${claims}::jsonb) as c (member integer, stream_id text, expected integer, count integer)
      where s.stream_id = c.stream_id and s.version = c.expected and ${preconditionsOf(members)}
      returning c.member, s.stream_id, s.version, c.count
    ),
    appended as (
      insert into events (event_id, stream_id, version, type, data, metadata)
      select r.event_id, c.stream_id, c.version - c.count + r.n, r.type, r.data, r.metadata
      from claim c join jsonb_to_recordset(${events}::jsonb) as r (member integer, event_id uuid, n integer, type text, data jsonb, metadata jsonb)
        on r.member = c.member
      order by c.member, r.n
      returning stream_id, event_id, position, transaction_id::text as transaction_id, version, recorded_at
    )${sql.join(projections, sql``)}
    select stream_id, event_id, position, transaction_id, version, recorded_at from appended`;
}

/** The members' preconditions as one condition on the claim's row `c` (its `member`, from 1). */
function preconditionsOf(members: readonly GroupMember[]): RawBuilder<SqlBool> {
  const [first] = members;
  if (members.every((member) => member.preconditionId === first?.preconditionId)) {
    return first?.claim.precondition ?? sql<SqlBool>`true`;
  }
  const cases = members.flatMap(({ claim }, index) =>
    claim.precondition === undefined
      ? []
      : [sql`when ${sql.raw(String(index + 1))} then (${claim.precondition})`],
  );
  return sql<SqlBool>`(case c.member ${sql.join(cases, sql` `)} else true end)`;
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The statement that moves the stream's version forward by `count` if it is as expected, returning
 * the new version (no row on a conflict). The `streams` row is what serialises writers of a stream:
 * a concurrent writer waits on its row lock (or on its key, for a new stream) and then finds the
 * version changed.
 */
function claimVersions(
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
async function holds(executor: Kysely<Database>, condition: RawBuilder<SqlBool>): Promise<boolean> {
  const { rows } = await sql<{ holds: boolean }>`select ${condition} as holds`.execute(executor);
  return rows[0]?.holds === true;
}

async function streamVersion(executor: Kysely<Database>, streamId: string): Promise<number> {
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

function matches(expected: ExpectedVersion, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return actual === 0;
  return expected === actual;
}

/** A stream id's prefix before the first `-` (`article-4f1c...` → `article`); without a `-`, the whole id. */
export function streamType(streamId: string): string {
  const dash = streamId.indexOf('-');
  return dash === -1 ? streamId : streamId.slice(0, dash);
}

function assertStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0)
    throw new TypeError('streamId must be a non-empty string');
}

function assertExpectedVersion(expected: ExpectedVersion): void {
  if (expected === 'any' || expected === 'no_stream') return;
  if (!Number.isSafeInteger(expected) || expected < 0) {
    throw new TypeError(
      `expectedVersion must be a non-negative integer, 'no_stream' or 'any': ${String(expected)}`,
    );
  }
}

/** A validator's complaint as validation issues (zod's `issues`, or the error's message). */
export function issuesOf(err: unknown): ValidationIssue[] {
  if (typeof err === 'object' && err !== null && 'issues' in err && Array.isArray(err.issues)) {
    return err.issues.map((issue: unknown): ValidationIssue => {
      const { path, message, code } = (issue ?? {}) as { path?: unknown; message?: unknown; code?: unknown };
      return {
        path: Array.isArray(path) ? (path as PropertyKey[]) : [],
        message: typeof message === 'string' ? message : String(message),
        ...(typeof code === 'string' ? { code } : {}),
      };
    });
  }
  return [{ path: [], message: err instanceof Error ? err.message : String(err) }];
}
