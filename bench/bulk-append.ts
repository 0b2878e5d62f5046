import { sql } from 'kysely';
import type { DomainEvent } from '../domain/events.ts';
import {
  ConcurrencyError,
  type EventStoreDeps,
  EventValidationError,
  issuesOf,
  type NewEvent,
  type StoredEvent,
  streamType,
  toJson,
  toStoredEvent,
} from '../infra/event-store.ts';
import { uuidv7 } from '../infra/ids.ts';
import { inTransaction, runProjected } from '../infra/projection.ts';

/*
 * The benchmark's bulk loader: many *new* streams in one transaction, so that bench/dataset.ts can
 * write a million backlinks where one transaction per stream would take hours. The service appends
 * through `EventStore.append` (infra/event-store.ts), whose rules this loader keeps.
 *
 * Same rules as `EventStore.append` with expected version `no_stream`, for every stream at once:
 * every event is validated before the database is touched; the `streams` rows and the events are
 * written with a few multi-row statements (`unnest` of arrays: the statement's size does not grow
 * with its parameters' count); `transaction_id` takes its default (`pg_current_xact_id()`), so the
 * global log and its readers work unchanged; the inline projectors run in the same transaction; the
 * append notifies like a single one. A stream that exists already makes the whole batch fail with a
 * `ConcurrencyError`, and nothing of it is written.
 */

/** A new stream and its events (versions 1..n in this order). */
export interface NewStream<E extends NewEvent = DomainEvent> {
  streamId: string;
  events: readonly E[];
}

interface BulkAppendResult<E extends NewEvent = DomainEvent> {
  /** Every event written, stream after stream in the order given, each stream's in version order. */
  events: StoredEvent<E>[];
}

/** What the bulk path needs: the same dependencies as `createEventStore` (the same validator and inline projectors). */
export type BulkAppendDeps<E extends NewEvent = DomainEvent> = EventStoreDeps<E>;

type Row = {
  eventId: string;
  streamId: string;
  version: number;
  type: string;
  data: string;
  metadata: string;
};

/**
 * Appends `streams`, all new, in one transaction (see above). Give a batch a size that suits one
 * transaction (a few thousand events); callers importing millions call this once per batch.
 */
export async function appendNew<E extends NewEvent = DomainEvent>(
  deps: BulkAppendDeps<E>,
  streams: readonly NewStream<E>[],
): Promise<BulkAppendResult<E>> {
  const { db, handle, validate, inline } = deps;
  const rows = prepare(streams, validate);
  if (rows.length === 0) return { events: [] };

  // Locked in one order whatever the caller's, so that two overlapping bulk appends cannot deadlock.
  const sorted = [...streams].sort((a, b) =>
    a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0,
  );

  const types = [...new Set(rows.map((row) => row.type))];
  const stored = await db.transaction().execute(async (trx) => {
    const created = await sql<{ stream_id: string }>`
      insert into streams (stream_id, version, stream_type)
      select s.stream_id, s.version, s.stream_type
        from unnest(${sorted.map((s) => s.streamId)}::text[], ${sorted.map((s) => s.events.length)}::integer[],
                    ${sorted.map((s) => streamType(s.streamId))}::text[])
             with ordinality as s(stream_id, version, stream_type, n)
       order by s.n
      on conflict (stream_id) do nothing
      returning stream_id`.execute(trx);
    if (created.rows.length !== streams.length) {
      const fresh = new Set(created.rows.map((r) => r.stream_id));
      const taken = streams.find((s) => !fresh.has(s.streamId)) as NewStream<E>;
      const actual = await trx
        .selectFrom('streams')
        .select('version')
        .where('stream_id', '=', taken.streamId)
        .executeTakeFirst();
      throw new ConcurrencyError(taken.streamId, 'no_stream', actual?.version ?? 0);
    }

    const inserted = await sql<{
      event_id: string;
      position: string;
      transaction_id: string;
      recorded_at: Date;
    }>`
      insert into events (event_id, stream_id, version, type, data, metadata)
      select e.event_id, e.stream_id, e.version, e.type, e.data, e.metadata
        from unnest(${rows.map((r) => r.eventId)}::uuid[], ${rows.map((r) => r.streamId)}::text[],
                    ${rows.map((r) => r.version)}::integer[], ${rows.map((r) => r.type)}::text[],
                    ${rows.map((r) => r.data)}::jsonb[], ${rows.map((r) => r.metadata)}::jsonb[])
             with ordinality as e(event_id, stream_id, version, type, data, metadata, n)
       order by e.n
      returning event_id, position, transaction_id::text as transaction_id, recorded_at`.execute(trx);
    const byId = new Map(inserted.rows.map((row) => [row.event_id, row]));
    const result = rows.map((row) => {
      const returned = byId.get(row.eventId);
      if (returned === undefined) throw new Error(`event ${row.eventId} was not returned by its insert`);
      // The event as given (one of E), read back from its JSON as a replay reads it.
      return toStoredEvent<E>({
        ...returned,
        stream_id: row.streamId,
        version: row.version,
        type: row.type,
        data: JSON.parse(row.data),
        metadata: JSON.parse(row.metadata),
      });
    });
    // Readers (and inline rebuilds) rely on a stream's events being in the log in version order.
    for (let i = 1; i < result.length; i++) {
      const before = result[i - 1] as StoredEvent<E>;
      const event = result[i] as StoredEvent<E>;
      if (before.streamId === event.streamId && before.position >= event.position) {
        throw new Error(`stream ${event.streamId}: positions out of version order`);
      }
    }
    if (inline !== undefined) await runProjected(trx, await inline(result, inTransaction(trx)));
    return result;
  });

  handle.notifyAppended(types);
  return { events: stored };
}

/** Checks the batch and serialises its events once (what is stored is what the inline projectors see). */
function prepare(streams: readonly NewStream<NewEvent>[], validate: (event: NewEvent) => void): Row[] {
  const seen = new Set<string>();
  const rows: Row[] = [];
  for (const stream of streams) {
    const { streamId, events } = stream;
    if (typeof streamId !== 'string' || streamId.length === 0)
      throw new TypeError('streamId must be a non-empty string');
    if (seen.has(streamId))
      throw new TypeError(
        `stream ${streamId} is given twice; give each new stream once, with all its events`,
      );
    seen.add(streamId);
    if (events.length === 0) throw new TypeError(`stream ${streamId} has no events; a new stream needs one`);
    events.forEach((event, index) => {
      try {
        validate(event);
      } catch (err) {
        if (err instanceof EventValidationError) throw err;
        throw new EventValidationError(String(event.type), issuesOf(err), { cause: err });
      }
      rows.push({
        eventId: uuidv7(),
        streamId,
        version: index + 1,
        type: event.type,
        data: toJson(event.type, 'data', event.data ?? null),
        metadata: toJson(event.type, 'metadata', event.metadata),
      });
    });
  }
  return rows;
}
