import { type Expression, type Kysely, type SqlBool, sql, type Transaction } from 'kysely';
import type { DomainEvent } from '../domain/events.ts';
import type { DbHandle } from './db/open.ts';
import type { Database, Db } from './db/schema.ts';
import {
  APPENDED,
  appendStatement,
  assertExpectedVersion,
  assertStreamId,
  holds,
  type InsertedRow,
  matches,
  streamVersion,
  toJson,
} from './event-store/append.ts';
import { createAppendGroup } from './event-store/group.ts';
import {
  headPosition,
  lastValueInStream,
  lockEventsForAppend,
  readAllEvents,
  readStreamKeepingLast,
  storedColumns,
  toStoredEvent,
} from './event-store/log.ts';
import {
  ConcurrencyError,
  EventValidationError,
  type ExpectedVersion,
  issuesOf,
  type LogPosition,
  type NewEvent,
  type Precondition,
  type StoredEvent,
  streamType,
} from './event-store/types.ts';
import { uuidv7 } from './ids.ts';
import {
  IN_TRANSACTION,
  inStatement,
  inTransaction,
  type Pending,
  type Project,
  runProjected,
  type Statement,
} from './projection.ts';
import { bound, inSpan, inSpanSync } from './telemetry/spans.ts';

export { toJson } from './event-store/append.ts';
export {
  committedHead,
  existingStreams,
  firstEventOfType,
  headPosition,
  isAfter,
  lockEventsForAppend,
  logHorizon,
  readAllEvents,
  readBatch,
  readCheckpoint,
  storedColumns,
  toStoredEvent,
  writeCheckpoint,
} from './event-store/log.ts';
export {
  ConcurrencyError,
  type EventPlace,
  EventValidationError,
  type ExpectedVersion,
  issuesOf,
  type LogPosition,
  type NewEvent,
  type Precondition,
  START,
  type StoredEvent,
  streamType,
} from './event-store/types.ts';

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
 *
 * This module is the store's public entry: the store itself (`createEventStore`: appends, alone or
 * grouped, and reads) and, re-exported, the log's readers for subscribers. Its parts, by concern:
 * event-store/types.ts (events, places, errors), append.ts (one append's SQL), group.ts (group
 * commit's SQL and answers), log.ts (reading streams, the global log and checkpoints).
 */

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
  /**
   * The value of a string property of the events' data (an article's `body`) in the stream's last
   * event at or before version `atOrBefore` that holds it; null when none does. Read as text.
   */
  lastValue(streamId: string, property: string, atOrBefore: number): Promise<string | null>;
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
  /**
   * The inline projections, one `project` for them all (`inlineProjection` in projection-runner.ts):
   * asked first for statements to run within the append's own statement (a commit group's: within
   * the group's); when it answers IN_TRANSACTION, the append runs in a transaction and it projects
   * the stored events there after the insert. A throw rolls the append back.
   */
  inline?: Project<E>;
  /**
   * The streams whose one-statement appends may share a statement, and so a commit, with other
   * streams' (group commit: infra/commit-group.ts): only streams whose inline projections write rows of
   * their own stream alone. Two appends in one statement must never change the same row: PostgreSQL
   * keeps only one of two changes of a row made by one statement's parts.
   */
  groupCommits?: (streamId: string) => boolean;
}

export function createEventStore<E extends NewEvent = DomainEvent>(deps: EventStoreDeps<E>): EventStore<E> {
  const { db, handle, validate, inline, groupCommits } = deps;
  const group =
    groupCommits === undefined
      ? undefined
      : // The group holds this store's appends only: their events are of E.
        createAppendGroup(db, inline as Project<NewEvent> | undefined);

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
      const run = async (executor: Kysely<Database>, statements: readonly Statement[]) => {
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
      // transaction: the insert, then the inline projections of the stored events.
      const base =
        expectedVersion === 'no_stream'
          ? 0
          : typeof expectedVersion === 'number'
            ? expectedVersion
            : undefined;
      const inItsTransaction = () =>
        db.transaction().execute(async (trx) => {
          if (synchronousCommit === false)
            await sql`select set_config('synchronous_commit', 'off', true)`.execute(trx);
          if (alongside !== undefined) {
            await lockEventsForAppend(trx);
            await alongside(trx);
          }
          const result = await run(trx, []);
          if (inline !== undefined) {
            await inSpan('inline projections', IN_TRANSACTION_SPAN, async () =>
              runProjected(trx, await inline(result, inTransaction(trx))),
            );
          }
          return result;
        });
      // The events as given (of A), read back from their JSON.
      const pending =
        inline !== undefined && alongside === undefined && synchronousCommit !== false && base !== undefined
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
        pending === undefined || inline === undefined
          ? IN_TRANSACTION
          : inSpanSync('inline projections', IN_STATEMENT_SPAN, (span) => {
              const made = inStatement(inline(pending, { appended: () => appended }));
              // A projector that can only apply in a transaction: the transaction's span follows.
              if (made === IN_TRANSACTION)
                span.setAttribute('content_service.projection.mode', 'in_transaction');
              else span.setAttribute('content_service.projection.statements', made.length);
              return made;
            });
      /** The append on its own: one statement, or a transaction. */
      const alone = () => {
        const statements = statementsOf(APPENDED);
        return statements !== IN_TRANSACTION ? run(db, statements) : inItsTransaction();
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

    lastValue(streamId, property, atOrBefore) {
      return lastValueInStream(db, streamId, property, atOrBefore);
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
