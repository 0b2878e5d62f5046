import { randomUUID } from 'node:crypto';
import { type Expression, type SqlBool, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { EventMetadata } from '../../domain/event.ts';
import { openDatabase } from '../../infra/db/open.ts';
import type { Database } from '../../infra/db/schema.ts';
import {
  ConcurrencyError,
  createEventStore,
  type EventStore,
  type EventStoreDeps,
  EventValidationError,
  type LogPosition,
  type NewEvent,
  readAllEvents,
  readBatch,
  readCheckpoint,
  START,
  type StoredEvent,
  writeCheckpoint,
} from '../../infra/event-store.ts';
import {
  IN_TRANSACTION,
  type InTransaction,
  type Pending,
  type Project,
  runsOf,
  type Statement,
} from '../../infra/projection.ts';
import {
  backends,
  createTestDatabase,
  onPostgres,
  type TestDatabase,
  testDatabaseUrl,
} from '../support/db.ts';

const metadata: EventMetadata = { at: '2026-11-21T10:00:00.000Z', requestId: 'req-1' };

function event(type: string, data: unknown = {}): NewEvent {
  return { type, data, metadata };
}

function newStream(label: string): string {
  return `article-${label}-${randomUUID()}`;
}

function compareLog(a: LogPosition, b: LogPosition): number {
  if (a.transactionId !== b.transactionId) return a.transactionId < b.transactionId ? -1 : 1;
  if (a.position !== b.position) return a.position < b.position ? -1 : 1;
  return 0;
}

/** `items.at(index)`, failing the test when it is missing. */
function nth<T>(items: readonly T[], index: number): T {
  const item = items.at(index);
  if (item === undefined) throw new Error(`no item at ${index} of ${items.length}`);
  return item;
}

function increasing(values: readonly bigint[]): boolean {
  return values.every((value, i) => i === 0 || nth(values, i - 1) < value);
}

function mine(events: readonly StoredEvent<NewEvent>[], streams: readonly string[]): StoredEvent<NewEvent>[] {
  return events.filter((e) => streams.includes(e.streamId));
}

/** The first event of a stream as a row of `events`, for a test's transaction to insert past the store. */
function rawEvent(streamId: string, type: string) {
  return {
    event_id: randomUUID(),
    stream_id: streamId,
    version: 1,
    type,
    data: '{}',
    metadata: JSON.stringify(metadata),
  };
}

function logPositionOf(event: StoredEvent<NewEvent>): LogPosition {
  return { transactionId: event.transactionId, position: event.position };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The inline projections of a test store, the store's one `inline` (infra/projection.ts), from what
 * they do in the append's transaction, within one append's statement (one stream's events) and within
 * a commit group's statement (several streams' runs); a part not given: IN_TRANSACTION there.
 */
type InlineParts = {
  inTransaction?:
    | ((events: readonly StoredEvent<NewEvent>[], trx: Transaction<Database>) => Promise<void>)
    | undefined;
  statements?:
    | ((run: readonly Pending<NewEvent>[], appended: Expression<SqlBool>) => Statement[] | InTransaction)
    | undefined;
  groupStatements?:
    | ((
        runs: readonly (readonly Pending<NewEvent>[])[],
        appended: (stream: Expression<string>) => Expression<SqlBool>,
      ) => Statement[] | InTransaction)
    | undefined;
};

function inlineOf(parts: InlineParts): Project<NewEvent> {
  return (events, at) => {
    const { trx } = at;
    if (trx !== undefined) {
      return (async () => {
        await parts.inTransaction?.(events as readonly StoredEvent<NewEvent>[], trx);
        return [];
      })();
    }
    const runs = runsOf(events);
    const [run] = runs;
    if (run === undefined) return [];
    if (runs.length === 1)
      return parts.statements?.(run, at.appended(run[0]?.streamId ?? '')) ?? IN_TRANSACTION;
    return parts.groupStatements?.(runs, at.appended) ?? IN_TRANSACTION;
  };
}

describe.each(backends)('event store on %s', (backend) => {
  let testDb: TestDatabase;
  let store: EventStore<NewEvent>;
  let storeWith: (deps: Partial<EventStoreDeps<NewEvent>> & InlineParts) => EventStore<NewEvent>;

  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
    storeWith = ({ inTransaction, statements, groupStatements, ...deps }) =>
      createEventStore<NewEvent>({
        db: testDb.handle.db,
        handle: testDb.handle,
        validate: () => {},
        ...(inTransaction || statements || groupStatements
          ? { inline: inlineOf({ inTransaction, statements, groupStatements }) }
          : {}),
        ...deps,
      });
    store = storeWith({});
  }, 60_000);

  afterAll(async () => {
    await testDb?.drop();
  });

  /** Rows in `events`, committed or not yet readable: "nothing was appended" without waiting. */
  async function eventCount(): Promise<number> {
    const row = await testDb.handle.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * The events of `streams` that readAll returns after `after`, once there are at least `count`.
   * An event becomes readable when every older writing transaction on the server has ended, in
   * any database: other test files (and other runs) on the same server hold readers back for a
   * moment, and make headPosition() lag. So tests poll, and only look at their own streams.
   * Once readable, an event stays readable.
   */
  async function readable(
    after: LogPosition,
    streams: readonly string[],
    count: number,
  ): Promise<StoredEvent<NewEvent>[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const events = mine(await store.readAll(after, 100_000), streams);
      if (events.length >= count || Date.now() > deadline) return events;
      await sleep(5);
    }
  }

  describe('append and readStream', () => {
    it('round-trips events with 1-based versions, global positions and ids', async () => {
      const streamId = newStream('roundtrip');
      const data = { title: 'Hello', tags: ['a', 'b'], nested: { n: 1, none: null } };
      const result = await store.append(
        streamId,
        [event('ArticleCreated', data), event('ArticleEdited', [1, 'two']), event('ArticleEdited', 'text')],
        { expectedVersion: 'no_stream' },
      );

      expect(result.nextVersion).toBe(3);
      expect(result.positions).toHaveLength(3);
      expect(result.positions.every((position) => typeof position === 'bigint')).toBe(true);
      expect(increasing(result.positions)).toBe(true);
      expect(new Set(result.events.map((e) => e.transactionId)).size).toBe(1);

      const read = await store.readStream(streamId);
      expect(read).toEqual(result.events);
      expect(read.map((e) => e.version)).toEqual([1, 2, 3]);
      expect(read.map((e) => e.data)).toEqual([data, [1, 'two'], 'text']);
      const first = nth(read, 0);
      expect(first).toMatchObject({ streamId, type: 'ArticleCreated', metadata });
      expect(first.eventId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(first.recordedAt).toBeInstanceOf(Date);
      expect(typeof first.transactionId).toBe('bigint');

      const stream = await testDb.handle.db
        .selectFrom('streams')
        .selectAll()
        .where('stream_id', '=', streamId)
        .executeTakeFirstOrThrow();
      expect(stream).toMatchObject({ version: 3, stream_type: 'article' });
    });

    it('stores what a replay reads back: data goes through JSON once', async () => {
      const streamId = newStream('json');
      const result = await store.append(
        streamId,
        [event('ArticleCreated', { at: new Date('2026-01-02T03:04:05.000Z'), gone: undefined })],
        { expectedVersion: 'no_stream' },
      );
      expect(nth(result.events, 0).data).toEqual({ at: '2026-01-02T03:04:05.000Z' });
      expect(nth(await store.readStream(streamId), 0).data).toEqual(nth(result.events, 0).data);
    });

    it('continues versions and reads ranges with inclusive from/to', async () => {
      const streamId = newStream('ranges');
      await store.append(streamId, [event('A'), event('B'), event('C')], { expectedVersion: 'no_stream' });
      const second = await store.append(streamId, [event('D'), event('E')], { expectedVersion: 3 });
      expect(second.nextVersion).toBe(5);
      expect(second.events.map((e) => e.version)).toEqual([4, 5]);

      const versions = async (opts: { from?: number; to?: number }): Promise<number[]> =>
        (await store.readStream(streamId, opts)).map((e) => e.version);
      expect(await versions({})).toEqual([1, 2, 3, 4, 5]);
      expect(await versions({ from: 2, to: 4 })).toEqual([2, 3, 4]);
      expect(await versions({ from: 4 })).toEqual([4, 5]);
      expect(await versions({ to: 2 })).toEqual([1, 2]);
      expect(await versions({ from: 3, to: 3 })).toEqual([3]);
      expect(await versions({ from: 6 })).toEqual([]);
      expect(await store.readStream(newStream('missing'))).toEqual([]);
    });

    it('reads a property (onlyLast) only in the last event of the range that has it, the rest as stored', async () => {
      const streamId = newStream('onlylast');
      const big = `<p>${'word '.repeat(50_000)}"quoted" \\ and ünïcode</p>`;
      await store.append(
        streamId,
        [
          event('ArticleCreated', { title: 't1', body: '<p>one</p>', n: 1 }),
          event('ArticleEdited', { title: 't2' }),
          event('ArticleEdited', { body: big, nested: { body: 'not this one' } }),
          event('ArticleEdited', { title: 't4' }),
        ],
        { expectedVersion: 'no_stream' },
      );
      const all = await store.readStream(streamId);
      const read = (opts: { from?: number; to?: number }) =>
        store.readStream(streamId, { ...opts, onlyLast: 'body' });
      const withoutBody = (data: unknown): unknown => {
        const { body: _, ...rest } = data as Record<string, unknown>;
        return rest;
      };

      const whole = await read({});
      expect(whole.map((e) => e.version)).toEqual([1, 2, 3, 4]);
      expect(whole.map((e) => e.data)).toEqual([
        withoutBody(nth(all, 0).data),
        nth(all, 1).data,
        nth(all, 2).data,
        nth(all, 3).data,
      ]);
      expect((nth(whole, 2).data as { body: string }).body).toBe(big);
      expect(whole.map(({ data: _, ...rest }) => rest)).toEqual(all.map(({ data: _, ...rest }) => rest));

      expect((await read({ to: 2 })).map((e) => e.data)).toEqual([nth(all, 0).data, nth(all, 1).data]);
      expect((await read({ from: 2, to: 2 })).map((e) => e.data)).toEqual([nth(all, 1).data]);
      expect((await read({ from: 4 })).map((e) => e.data)).toEqual([nth(all, 3).data]);
      expect(await store.readStream(newStream('missing'), { onlyLast: 'body' })).toEqual([]);
    });

    it('takes the stream type from the id prefix', async () => {
      const plain = `standalone${randomUUID().replaceAll('-', '')}`;
      await store.append(plain, [event('A')], { expectedVersion: 'no_stream' });
      await store.append(`site-${randomUUID()}`, [event('A')], { expectedVersion: 'no_stream' });
      const types = await testDb.handle.db
        .selectFrom('streams')
        .select(['stream_id', 'stream_type'])
        .where('stream_id', '=', plain)
        .execute();
      expect(types).toEqual([{ stream_id: plain, stream_type: plain }]);
    });
  });

  describe('expected version', () => {
    it('refuses a number that is not the current version', async () => {
      const streamId = newStream('mismatch');
      await store.append(streamId, [event('A'), event('B')], { expectedVersion: 'no_stream' });

      const error = await store
        .append(streamId, [event('C')], { expectedVersion: 1 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConcurrencyError);
      expect(error).toMatchObject({ streamId, expected: 1, actual: 2 });
      await expect(store.append(streamId, [event('C')], { expectedVersion: 3 })).rejects.toMatchObject({
        expected: 3,
        actual: 2,
      });
      expect((await store.readStream(streamId)).map((e) => e.type)).toEqual(['A', 'B']);
    });

    it('refuses a number on a stream that does not exist', async () => {
      const streamId = newStream('missing');
      await expect(store.append(streamId, [event('A')], { expectedVersion: 2 })).rejects.toMatchObject({
        name: 'ConcurrencyError',
        expected: 2,
        actual: 0,
      });
      expect(await store.readStream(streamId)).toEqual([]);
    });

    it("refuses 'no_stream', and 0 which means the same, on an existing stream", async () => {
      const streamId = newStream('exists');
      await store.append(streamId, [event('A')], { expectedVersion: 0 });
      for (const expectedVersion of ['no_stream', 0] as const) {
        const error = await store
          .append(streamId, [event('B')], { expectedVersion })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConcurrencyError);
        expect(error).toMatchObject({ expected: expectedVersion, actual: 1 });
      }
      expect((await store.readStream(streamId)).map((e) => e.type)).toEqual(['A']);
    });

    it("'any' appends to a new or an existing stream", async () => {
      const streamId = newStream('any');
      expect((await store.append(streamId, [event('A')], { expectedVersion: 'any' })).nextVersion).toBe(1);
      expect(
        (await store.append(streamId, [event('B'), event('C')], { expectedVersion: 'any' })).nextVersion,
      ).toBe(3);
      expect((await store.readStream(streamId)).map((e) => [e.version, e.type])).toEqual([
        [1, 'A'],
        [2, 'B'],
        [3, 'C'],
      ]);
    });

    it('rejects a malformed expected version before any SQL', async () => {
      await expect(store.append(newStream('bad'), [event('A')], { expectedVersion: -1 })).rejects.toThrow(
        TypeError,
      );
      await expect(store.append(newStream('bad'), [event('A')], { expectedVersion: 1.5 })).rejects.toThrow(
        TypeError,
      );
    });

    it('an empty append writes nothing and returns the current version, but still checks the expectation', async () => {
      const streamId = newStream('empty');
      expect(await store.append(streamId, [], { expectedVersion: 'no_stream' })).toEqual({
        nextVersion: 0,
        positions: [],
        events: [],
      });
      await store.append(streamId, [event('A'), event('B')], { expectedVersion: 'no_stream' });
      expect((await store.append(streamId, [], { expectedVersion: 2 })).nextVersion).toBe(2);
      expect((await store.append(streamId, [], { expectedVersion: 'any' })).nextVersion).toBe(2);
      await expect(store.append(streamId, [], { expectedVersion: 1 })).rejects.toBeInstanceOf(
        ConcurrencyError,
      );
      expect(await store.readStream(streamId)).toHaveLength(2);
    });

    it('a precondition that does not hold refuses the append with its own error and writes nothing, for every expectation', async () => {
      const streamId = newStream('precondition');
      const flag = `precondition-${crypto.randomUUID()}`;
      await sql`create table if not exists precondition_flags (name text primary key)`.execute(
        testDb.handle.db,
      );
      const precondition = {
        holds: sql<SqlBool>`exists (select 1 from precondition_flags where name = ${flag})`,
        refusal: () => new Error('the flag is down'),
      };
      for (const expectedVersion of ['no_stream', 'any', 0] as const) {
        await expect(store.append(streamId, [event('A')], { expectedVersion, precondition })).rejects.toThrow(
          'the flag is down',
        );
      }
      await expect(store.append(streamId, [], { expectedVersion: 'any', precondition })).rejects.toThrow(
        'the flag is down',
      );
      expect(await store.readStream(streamId)).toEqual([]);
      await sql`insert into precondition_flags (name) values (${flag})`.execute(testDb.handle.db);
      await store.append(streamId, [event('A')], { expectedVersion: 'no_stream', precondition });
      await store.append(streamId, [event('B')], { expectedVersion: 1, precondition });
      await store.append(streamId, [event('C')], { expectedVersion: 'any', precondition });
      expect((await store.append(streamId, [], { expectedVersion: 'any', precondition })).nextVersion).toBe(
        3,
      );
      // Holding, a stale expectation is still a conflict.
      await expect(
        store.append(streamId, [event('D')], { expectedVersion: 2, precondition }),
      ).rejects.toBeInstanceOf(ConcurrencyError);
      await sql`delete from precondition_flags where name = ${flag}`.execute(testDb.handle.db);
      await expect(
        store.append(streamId, [event('D')], { expectedVersion: 3, precondition }),
      ).rejects.toThrow('the flag is down');
      expect((await store.readStream(streamId)).map((e) => e.type)).toEqual(['A', 'B', 'C']);
    });

    it('lets exactly one of two concurrent writers at the same expected version win', async () => {
      for (let round = 0; round < 10; round += 1) {
        const streamId = newStream('race');
        const expectedVersion = round % 2 === 0 ? 'no_stream' : 1;
        if (expectedVersion === 1)
          await store.append(streamId, [event('Seed')], { expectedVersion: 'no_stream' });
        const writers = ['left', 'right'].map((who) =>
          store.append(streamId, [event(`${who}-1`), event(`${who}-2`)], { expectedVersion }),
        );
        const outcomes = await Promise.allSettled(writers);
        const won = outcomes.filter((o) => o.status === 'fulfilled');
        const lost = outcomes.filter((o) => o.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect(nth(lost, 0).reason).toBeInstanceOf(ConcurrencyError);
        const winner = nth(outcomes, 0).status === 'fulfilled' ? 'left' : 'right';
        const seed = expectedVersion === 1 ? ['Seed'] : [];
        expect((await store.readStream(streamId)).map((e) => e.type)).toEqual([
          ...seed,
          `${winner}-1`,
          `${winner}-2`,
        ]);
      }
    });
  });

  describe('readAll', () => {
    it('pages through the log in (transaction_id, position) order, optionally by type', async () => {
      const head = await store.headPosition();
      const streamId = newStream('paging');
      await store.append(streamId, [event('Kept'), event('Other'), event('Kept')], {
        expectedVersion: 'no_stream',
      });
      await store.append(streamId, [event('Other'), event('Kept')], { expectedVersion: 3 });

      const all = await readable(head, [streamId], 5);
      expect(all.map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
      const last = logPositionOf(nth(all, -1));
      expect(compareLog(await store.headPosition(), last)).toBeGreaterThanOrEqual(0);

      const paged: StoredEvent<NewEvent>[] = [];
      let after = head;
      for (;;) {
        const page = await store.readAll(after, 2);
        if (page.length === 0) break;
        expect(page.length).toBeLessThanOrEqual(2);
        paged.push(...page);
        after = logPositionOf(nth(page, -1));
      }
      expect(mine(paged, [streamId])).toEqual(all);

      const kept = mine(await store.readAll(head, 100_000, { types: ['Kept'] }), [streamId]);
      expect(kept.map((e) => e.version)).toEqual([1, 3, 5]);
      expect(await store.readAll(head, 100, { types: [] })).toEqual([]);
      expect(mine(await store.readAll(last, 100_000), [streamId])).toEqual([]);
    });

    it('reads everything from START and refuses a non-positive limit', async () => {
      const all = await store.readAll(START, 1_000_000);
      expect(all.length).toBeGreaterThan(0);
      for (let i = 1; i < all.length; i += 1) {
        expect(compareLog(logPositionOf(nth(all, i - 1)), logPositionOf(nth(all, i)))).toBe(-1);
      }
      await expect(store.readAll(START, 0)).rejects.toThrow(RangeError);
    });

    it('can read inside a caller transaction', async () => {
      const head = await store.headPosition();
      const streamId = newStream('trx');
      await store.append(streamId, [event('A')], { expectedVersion: 'no_stream' });
      await readable(head, [streamId], 1);
      const read = await testDb.handle.db
        .transaction()
        .execute((trx) => store.readAll(head, 100_000, { trx }));
      expect(mine(read, [streamId]).map((e) => e.type)).toEqual(['A']);
    });

    it('sees every event exactly once, in order, while 50 writers append concurrently', async () => {
      const writers = 50;
      const appendsPerWriter = 4;
      const eventsPerAppend = 3;
      const total = writers * appendsPerWriter * eventsPerAppend;
      const prefix = `article-load${randomUUID().slice(0, 8)}`;
      const start = await store.headPosition();

      // The inline hook widens the window between taking a position and committing, so commits
      // come out of position order all the time. On postgres the reader has its own pool (like a
      // worker process) so that it keeps reading while the writers hold every writer connection;
      // on pglite everything shares the one connection and is interleaved by the pool.
      const writerStore = storeWith({ inTransaction: () => sleep(Math.random() * 2) });
      const readerHandle =
        backend === 'postgres'
          ? await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://' })
          : testDb.handle;
      const readerStore = createEventStore<NewEvent>({
        db: readerHandle.db,
        handle: readerHandle,
        validate: () => {},
      });

      let writing = true;
      let aborted = false;
      // Everything read; `start` may lag behind earlier tests' events (see `readable`).
      const seen: StoredEvent<NewEvent>[] = [];
      const ours = (): StoredEvent<NewEvent>[] => seen.filter((e) => e.streamId.startsWith(prefix));
      const reader = (async () => {
        let after = start;
        let count = 0;
        // Until the writers are done and every event was read (or a deadline), then once more:
        // that last read must find nothing (no duplicates, nothing extra).
        const deadline = Date.now() + 30_000;
        while (!aborted && (writing || (count < total && Date.now() < deadline))) {
          const batch = await readerStore.readAll(after, 17);
          if (batch.length > 0) {
            seen.push(...batch);
            count += batch.filter((e) => e.streamId.startsWith(prefix)).length;
            after = logPositionOf(nth(batch, -1));
          } else {
            await sleep(1);
          }
        }
        seen.push(...(await readerStore.readAll(after, 17)));
      })();

      const writes = Array.from({ length: writers }, async (_, w) => {
        const streamId = `${prefix}-${w}`;
        let version = 0;
        for (let a = 0; a < appendsPerWriter; a += 1) {
          const batch = Array.from({ length: eventsPerAppend }, (_, i) => event('Loaded', { w, a, i }));
          const result = await writerStore.append(streamId, batch, { expectedVersion: version });
          version = result.nextVersion;
        }
      });
      try {
        await Promise.all(writes);
      } catch (err) {
        aborted = true;
        throw err;
      } finally {
        writing = false;
        await reader.finally(() => (readerHandle === testDb.handle ? undefined : readerHandle.close()));
      }

      const ids = seen.map((e) => e.eventId);
      expect(new Set(ids).size).toBe(ids.length);
      for (let i = 1; i < seen.length; i += 1) {
        expect(compareLog(logPositionOf(nth(seen, i - 1)), logPositionOf(nth(seen, i)))).toBe(-1);
      }
      expect(ours()).toHaveLength(total);
      const versionsByStream = new Map<string, number[]>();
      for (const e of ours())
        versionsByStream.set(e.streamId, [...(versionsByStream.get(e.streamId) ?? []), e.version]);
      expect(versionsByStream.size).toBe(writers);
      const expected = Array.from({ length: appendsPerWriter * eventsPerAppend }, (_, i) => i + 1);
      for (const versions of versionsByStream.values()) expect(versions).toEqual(expected);
    }, 60_000);

    onPostgres(backend)(
      'holds back an event committed before an older transaction that is still open',
      async () => {
        const { db } = testDb.handle;
        const head = await store.headPosition();
        const streams = [newStream('a'), newStream('b')] as const;

        // A takes the lower position and the lower transaction id, and stays open.
        const a = await db.startTransaction().execute();
        try {
          const aRow = await a
            .insertInto('events')
            .values(rawEvent(streams[0], 'A'))
            .returning('position')
            .executeTakeFirstOrThrow();
          // B appends through the store and commits, with a higher position.
          const b = await store.append(streams[1], [event('B')], { expectedVersion: 'no_stream' });
          expect(nth(b.positions, 0) > BigInt(aRow.position)).toBe(true);

          // A reader ordering by position alone would return B now, checkpoint past A and lose it.
          expect(mine(await store.readAll(head, 100_000), streams)).toEqual([]);
          expect(compareLog(await store.headPosition(), logPositionOf(nth(b.events, 0)))).toBe(-1);
          await a.commit().execute();
        } catch (err) {
          await a.rollback().execute();
          throw err;
        }
        expect((await readable(head, streams, 2)).map((e) => e.type)).toEqual(['A', 'B']);
      },
    );

    it('a subscriber batch moves past events of other types to the head, and reads its own', async () => {
      const rare = `Rare${randomUUID().slice(0, 8)}`;
      const start = await store.headPosition();
      const streamId = newStream('rare');
      const commons = await store.append(streamId, [event('Common'), event('Common'), event('Common')], {
        expectedVersion: 'no_stream',
      });
      await readable(start, [streamId], 3);
      const empty = await readBatch(testDb.handle.db, start, 10, [rare]);
      expect(empty.events).toEqual([]);
      // Past the three events of another type: the next read starts after them.
      expect(compareLog(empty.through, logPositionOf(nth(commons.events, -1)))).toBeGreaterThanOrEqual(0);

      const own = await store.append(
        streamId,
        [event(rare, { n: 1 }), event('Common'), event(rare, { n: 2 })],
        {
          expectedVersion: 3,
        },
      );
      await readable(start, [streamId], 6);
      const full = await readBatch(testDb.handle.db, empty.through, 1, [rare]);
      expect(full.events.map((e) => e.data)).toEqual([{ n: 1 }]);
      // A full batch stops at its last event: the rest is read next time.
      expect(full.through).toEqual(logPositionOf(nth(own.events, 0)));
      const rest = await readBatch(testDb.handle.db, full.through, 10, [rare]);
      expect(rest.events.map((e) => e.data)).toEqual([{ n: 2 }]);
      expect(compareLog(rest.through, logPositionOf(nth(own.events, -1)))).toBeGreaterThanOrEqual(0);
      // (`heldBack` says whether another test's transaction holds events back: not this test's matter.)
      expect(await readBatch(testDb.handle.db, rest.through, 10, [rare])).toMatchObject({
        events: [],
        through: rest.through,
      });
      expect(await readBatch(testDb.handle.db, START, 10, [])).toEqual({
        events: [],
        through: START,
        heldBack: false,
      });
      await expect(readBatch(testDb.handle.db, START, 0, [rare])).rejects.toThrow(RangeError);
    });

    onPostgres(backend)(
      'a subscriber batch never moves past an event of its type held back by an open transaction',
      async () => {
        const { db } = testDb.handle;
        const rare = `Rare${randomUUID().slice(0, 8)}`;
        const start = await store.headPosition();
        const streams = [newStream('held'), newStream('common')] as const;
        // A appends an event of the subscriber's type and stays open; B appends other types and commits.
        const a = await db.startTransaction().execute();
        try {
          await a.insertInto('events').values(rawEvent(streams[0], rare)).execute();
          const b = await store.append(streams[1], [event('Common'), event('Common')], {
            expectedVersion: 'no_stream',
          });
          const seen = await readBatch(db, start, 10, [rare]);
          expect(seen.events).toEqual([]);
          // B's events are committed but behind A: the read says so.
          expect(seen.heldBack).toBe(true);
          // The head it may move to is below A's transaction, so before B's events too.
          expect(compareLog(seen.through, logPositionOf(nth(b.events, 0)))).toBe(-1);
          await a.commit().execute();
          let after = seen.through;
          const read: StoredEvent<NewEvent>[] = [];
          const deadline = Date.now() + 10_000;
          while (read.length === 0 && Date.now() < deadline) {
            const batch = await readBatch(db, after, 10, [rare]);
            read.push(...batch.events);
            after = batch.through;
            if (read.length === 0) await sleep(5);
          }
          expect(read.map((e) => [e.streamId, e.type])).toEqual([[streams[0], rare]]);
        } catch (err) {
          await a.rollback().execute();
          throw err;
        }
      },
    );

    it('readAllEvents with heldBackToo reads every committed event of its types, in order, a page at a time, held back or not', async () => {
      const { db } = testDb.handle;
      const rare = `Rare${randomUUID().slice(0, 8)}`;
      const start = await store.headPosition();
      const streams = [newStream('open'), newStream('visible')] as const;
      // On PostgreSQL, A appends an event of the type and stays open, then B appends and commits: B's
      // events are behind A's transaction, where readBatch stops, and A's are not committed.
      const a = backend === 'postgres' ? await db.startTransaction().execute() : undefined;
      try {
        await a?.insertInto('events').values(rawEvent(streams[0], rare)).execute();
        const b = await store.append(
          streams[1],
          [event(rare, { n: 1 }), event('Common'), event(rare, { n: 2 })],
          {
            expectedVersion: 'no_stream',
          },
        );
        if (a) expect((await readBatch(db, start, 10, [rare])).events).toEqual([]);
        const all = { types: [rare], heldBackToo: true };
        const first = await readAllEvents(db, start, 1, all);
        expect(first.map((e) => [e.streamId, e.data])).toEqual([[streams[1], { n: 1 }]]);
        const rest = await readAllEvents(db, logPositionOf(nth(first, 0)), 10, all);
        expect(rest.map((e) => [e.streamId, e.data])).toEqual([[streams[1], { n: 2 }]]);
        expect(rest.map((e) => e.position)).toEqual([nth(b.events, 2).position]);
        expect(await readAllEvents(db, logPositionOf(nth(rest, 0)), 10, all)).toEqual([]);
      } finally {
        await a?.rollback().execute();
      }
    });

    onPostgres(backend)(
      'is held back by no transaction that does not append: in another database, on the neighbour tables, or reading the log',
      async () => {
        const { db } = testDb.handle;
        const start = await store.headPosition();
        // Each holds a transaction id, open through the append and the reads.
        const elsewhere = new pg.Client({ connectionString: testDatabaseUrl() });
        await elsewhere.connect();
        const holders = [
          await db.startTransaction().execute(),
          await db.startTransaction().execute(),
          await db.startTransaction().execute(),
        ] as const;
        try {
          // Another database of the server: a write transaction (a bulk load, a migration).
          await elsewhere.query('begin');
          await elsewhere.query(`create temp table horizon_probe (x int)`);
          await elsewhere.query('insert into horizon_probe values (1)');
          // This database, the log's neighbours: a stream row locked, a checkpoint written.
          await sql`select stream_id from streams limit 1 for update`.execute(holders[0]);
          await writeCheckpoint(holders[0], `probe-${randomUUID()}`, START);
          // This database, the log itself read (a share lock on events) by a transaction with an id.
          await holders[1]
            .selectFrom('events')
            .select((eb) => eb.fn.countAll().as('n'))
            .execute();
          await sql`select pg_current_xact_id()`.execute(holders[1]);
          // A lock on events that lets others write it but not itself (a vacuum, an index built concurrently).
          await sql`lock table events in share update exclusive mode`.execute(holders[2]);
          await sql`select pg_current_xact_id()`.execute(holders[2]);

          const streamId = newStream('unheld');
          const appended = await store.append(streamId, [event('Unheld')], { expectedVersion: 'no_stream' });
          // No waiting: the event is below the horizon as soon as its append has returned.
          expect(mine(await store.readAll(start, 100_000), [streamId]).map((e) => e.eventId)).toEqual([
            nth(appended.events, 0).eventId,
          ]);
          const batch = await readBatch(db, start, 10, ['Unheld']);
          expect(batch.events.map((e) => e.eventId)).toContain(nth(appended.events, 0).eventId);
          expect(compareLog(await store.headPosition(), logPositionOf(nth(appended.events, 0)))).toBe(0);
        } finally {
          for (const holder of holders) await holder.rollback().execute();
          await elsewhere.query('rollback');
          await elsewhere.end();
        }
      },
    );

    onPostgres(backend)(
      'never skips an append whose transaction wrote elsewhere first (writes alongside): it holds readers back from its first write',
      async () => {
        const { db } = testDb.handle;
        const start = await store.headPosition();
        const streams = [newStream('alongside'), newStream('later')] as const;
        let wrote: () => void = () => {};
        const written = new Promise<void>((resolve) => {
          wrote = resolve;
        });
        let proceed: () => void = () => {};
        const proceeding = new Promise<void>((resolve) => {
          proceed = resolve;
        });
        // A's transaction writes a credential (and so has its id), then waits before its insert.
        const a = store.append(streams[0], [event('Alongside')], {
          expectedVersion: 'no_stream',
          alongside: async (trx) => {
            await trx
              .insertInto('credentials')
              .values({ holder_id: streams[0], kind: 'password', secret: 'x', updated_at: new Date() })
              .execute();
            wrote();
            await proceeding;
          },
        });
        try {
          await written;
          // B's transaction is younger than A's and commits first.
          const b = await store.append(streams[1], [event('Later')], { expectedVersion: 'no_stream' });
          // A reader now must not pass B: A, older, may still append below it.
          const seen = await readBatch(db, start, 10, ['Alongside', 'Later']);
          expect(mine(seen.events, [...streams])).toEqual([]);
          expect(seen.heldBack).toBe(true);
          expect(compareLog(seen.through, logPositionOf(nth(b.events, 0)))).toBe(-1);
          expect(mine(await store.readAll(start, 100_000), [...streams])).toEqual([]);
          proceed();
          await a;
          const read: StoredEvent<NewEvent>[] = [];
          let after = seen.through;
          const deadline = Date.now() + 10_000;
          while (read.length < 2 && Date.now() < deadline) {
            const batch = await readBatch(db, after, 10, ['Alongside', 'Later']);
            read.push(...mine(batch.events, [...streams]));
            after = batch.through;
            if (read.length < 2) await sleep(5);
          }
          expect(read.map((e) => e.type)).toEqual(['Alongside', 'Later']);
        } finally {
          proceed();
          await a.catch(() => {});
        }
      },
    );

    it('a subscriber of one type sees each of its events once, in order, while 30 writers append', async () => {
      const rare = `Rare${randomUUID().slice(0, 8)}`;
      const prefix = `article-sub${randomUUID().slice(0, 8)}`;
      const writers = 30;
      const appendsPerWriter = 4;
      const writerStore = storeWith({ inTransaction: () => sleep(Math.random() * 2) });
      const readerHandle =
        backend === 'postgres'
          ? await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://' })
          : testDb.handle;
      let after = await store.headPosition();
      let writing = true;
      const seen: StoredEvent<NewEvent>[] = [];
      const reader = (async () => {
        const deadline = Date.now() + 30_000;
        while (writing || (seen.length < writers * appendsPerWriter && Date.now() < deadline)) {
          const batch = await readBatch(readerHandle.db, after, 7, [rare]);
          seen.push(...batch.events);
          after = batch.through;
          if (batch.events.length === 0) await sleep(1);
        }
        seen.push(...(await readBatch(readerHandle.db, after, 7, [rare])).events);
      })();
      try {
        await Promise.all(
          Array.from({ length: writers }, async (_, w) => {
            let version = 0;
            for (let a = 0; a < appendsPerWriter; a += 1) {
              // One event of the subscriber's type among others.
              const batch = [event('Common'), event(rare, { w, a }), event('Common')];
              version = (await writerStore.append(`${prefix}-${w}`, batch, { expectedVersion: version }))
                .nextVersion;
            }
          }),
        );
      } finally {
        writing = false;
        await reader.finally(() => (readerHandle === testDb.handle ? undefined : readerHandle.close()));
      }
      expect(seen.every((e) => e.type === rare)).toBe(true);
      expect(seen).toHaveLength(writers * appendsPerWriter);
      expect(new Set(seen.map((e) => e.eventId)).size).toBe(seen.length);
      for (let i = 1; i < seen.length; i += 1) {
        expect(compareLog(logPositionOf(nth(seen, i - 1)), logPositionOf(nth(seen, i)))).toBe(-1);
      }
    }, 60_000);

    onPostgres(backend)(
      'returns a later position of an older transaction first, and the earlier position after its commit',
      async () => {
        const { db } = testDb.handle;
        const head = await store.headPosition();
        const streams = { A: newStream('a'), B: newStream('b') };
        const rawEvent = (type: 'A' | 'B') => ({
          event_id: randomUUID(),
          stream_id: streams[type],
          version: 1,
          type,
          data: '{}',
          metadata: JSON.stringify(metadata),
        });

        const b = await db.startTransaction().execute();
        const a = await db.startTransaction().execute();
        let aOpen = true;
        let bOpen = true;
        try {
          // B gets its transaction id first; A then inserts first (lower position); B inserts and commits.
          await b.selectNoFrom((eb) => eb.fn<string>('pg_current_xact_id').as('xid')).execute();
          const aRow = await a
            .insertInto('events')
            .values(rawEvent('A'))
            .returning('position')
            .executeTakeFirstOrThrow();
          const bRow = await b
            .insertInto('events')
            .values(rawEvent('B'))
            .returning('position')
            .executeTakeFirstOrThrow();
          expect(BigInt(aRow.position) < BigInt(bRow.position)).toBe(true);
          await b.commit().execute();
          bOpen = false;

          // B is final (every transaction older than it has ended); A is still open.
          const first = await readable(head, [streams.A, streams.B], 1);
          expect(first.map((e) => e.type)).toEqual(['B']);
          // A position-only checkpoint here (B's position) would skip A, whose position is lower.
          const checkpoint = logPositionOf(nth(first, 0));

          await a.commit().execute();
          aOpen = false;
          const next = await readable(checkpoint, [streams.A, streams.B], 1);
          expect(next.map((e) => e.type)).toEqual(['A']);
          expect(nth(next, 0).position < nth(first, 0).position).toBe(true);
          expect(nth(next, 0).transactionId > nth(first, 0).transactionId).toBe(true);
        } finally {
          if (aOpen) await a.rollback().execute();
          if (bOpen) await b.rollback().execute();
        }
      },
    );
  });

  describe('validation', () => {
    const ArticleCreated = z.object({ title: z.string().min(1) });
    const validate = (e: NewEvent): void => {
      if (e.type === 'ArticleCreated') ArticleCreated.parse(e.data);
    };

    it('throws before writing anything when one event is invalid', async () => {
      const validating = storeWith({ validate });
      const before = await eventCount();
      const streamId = newStream('invalid');

      const error = await validating
        .append(
          streamId,
          [event('ArticleCreated', { title: 'ok' }), event('ArticleCreated', { title: 42 })],
          {
            expectedVersion: 'no_stream',
          },
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EventValidationError);
      expect(error).toMatchObject({
        type: 'ArticleCreated',
        issues: [{ path: ['title'], code: 'invalid_type' }],
      });
      expect((error as Error).cause).toBeInstanceOf(z.ZodError);

      expect(await validating.readStream(streamId)).toEqual([]);
      expect(await eventCount()).toBe(before);
      const stream = await testDb.handle.db
        .selectFrom('streams')
        .select('version')
        .where('stream_id', '=', streamId)
        .executeTakeFirst();
      expect(stream).toBeUndefined();
    });

    it('refuses data JSON cannot carry', async () => {
      const streamId = newStream('json');
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      for (const data of [{ n: 1n }, cyclic]) {
        await expect(
          store.append(streamId, [event('A', data)], { expectedVersion: 'any' }),
        ).rejects.toMatchObject({
          name: 'EventValidationError',
          issues: [{ path: ['data'] }],
        });
      }
      expect(await store.readStream(streamId)).toEqual([]);
    });

    it('passes through an EventValidationError thrown by the validator', async () => {
      const own = new EventValidationError('X', [{ path: ['a'], message: 'nope' }]);
      const validating = storeWith({
        validate: () => {
          throw own;
        },
      });
      await expect(
        validating.append(newStream('own'), [event('X')], { expectedVersion: 'any' }),
      ).rejects.toBe(own);
    });
  });

  describe('inline projections', () => {
    it('roll the append back when they throw', async () => {
      const before = await eventCount();
      const streamId = newStream('inline-fail');
      let notified = 0;
      const failing = createEventStore<NewEvent>({
        db: testDb.handle.db,
        handle: {
          notifyAppended: () => {
            notified += 1;
          },
        },
        validate: () => {},
        inline: inlineOf({
          inTransaction: async (events, trx) => {
            await writeCheckpoint(trx, `inline-fail-${streamId}`, logPositionOf(nth(events, 0)));
            throw new Error('projection failed');
          },
        }),
      });
      await expect(failing.append(streamId, [event('A')], { expectedVersion: 'no_stream' })).rejects.toThrow(
        'projection failed',
      );
      expect(notified).toBe(0);
      expect(await store.readStream(streamId)).toEqual([]);
      expect(await eventCount()).toBe(before);
      expect(await readCheckpoint(testDb.handle.db, `inline-fail-${streamId}`)).toEqual(START);
      // The stream was not created either: a fresh no_stream append still works.
      expect((await store.append(streamId, [event('A')], { expectedVersion: 'no_stream' })).nextVersion).toBe(
        1,
      );
    });

    it('run in the append transaction, and their writes land with the events', async () => {
      const streamId = newStream('inline-ok');
      const seen: StoredEvent<NewEvent>[] = [];
      const projecting = storeWith({
        inTransaction: async (events, trx) => {
          seen.push(...events);
          // The events are visible inside the transaction; the rows written here commit with them.
          const own = await trx
            .selectFrom('events')
            .select('event_id')
            .where('stream_id', '=', streamId)
            .execute();
          expect(own).toHaveLength(events.length);
          await writeCheckpoint(trx, `inline-ok-${streamId}`, logPositionOf(nth(events, -1)));
        },
      });
      const result = await projecting.append(streamId, [event('A'), event('B')], {
        expectedVersion: 'no_stream',
      });
      expect(seen).toEqual(result.events);
      expect(await readCheckpoint(testDb.handle.db, `inline-ok-${streamId}`)).toEqual(
        logPositionOf(nth(result.events, -1)),
      );
    });
  });

  describe('writes alongside (a credential with the event that says it was set)', () => {
    it('commit with the events, seen by the inline projections, and roll back on a conflict', async () => {
      const streamId = newStream('alongside');
      const credentialOf = (holder: string) =>
        testDb.handle.db.selectFrom('credentials').select('secret').where('holder_id', '=', holder).execute();
      let seenByProjection: unknown[] = [];
      const projecting = storeWith({
        inTransaction: async (_events, trx) => {
          seenByProjection = await trx
            .selectFrom('credentials')
            .select('secret')
            .where('holder_id', '=', streamId)
            .execute();
        },
        // Statements would be used for one event of a known version; alongside writes need a transaction.
        statements: () => [],
      });
      const write = (secret: string) => async (trx: Transaction<Database>) => {
        await trx
          .insertInto('credentials')
          .values({ holder_id: streamId, kind: 'password', secret, updated_at: new Date() })
          .onConflict((oc) => oc.columns(['holder_id', 'kind']).doUpdateSet({ secret }))
          .execute();
      };
      await projecting.append(streamId, [event('A')], {
        expectedVersion: 'no_stream',
        alongside: write('one'),
      });
      expect(seenByProjection).toEqual([{ secret: 'one' }]);
      expect(await credentialOf(streamId)).toEqual([{ secret: 'one' }]);

      const before = await eventCount();
      await expect(
        projecting.append(streamId, [event('B')], { expectedVersion: 0, alongside: write('two') }),
      ).rejects.toBeInstanceOf(ConcurrencyError);
      expect(await credentialOf(streamId)).toEqual([{ secret: 'one' }]);
      expect(await eventCount()).toBe(before);
    });
  });

  describe('commit without the WAL flush (synchronousCommit: false, the activity records)', () => {
    it("turns synchronous_commit off for the append's transaction alone", async () => {
      const settings: string[] = [];
      const observing = storeWith({
        inTransaction: async (_events, trx) => {
          const { rows } = await sql<{
            s: string;
          }>`select current_setting('synchronous_commit') as s`.execute(trx);
          settings.push(rows[0]?.s ?? '');
        },
      });
      const { rows } = await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(
        testDb.handle.db,
      );
      const serverDefault = rows[0]?.s;
      await observing.append(newStream('async'), [event('A')], {
        expectedVersion: 'any',
        synchronousCommit: false,
      });
      await observing.append(newStream('sync'), [event('A')], { expectedVersion: 'any' });
      expect(settings).toEqual(['off', serverDefault]);
    });
  });

  describe('inline projections as statements (one statement for the event and its read models)', () => {
    /** A read-model write as a projector gives it: a checkpoint row named after the event, only if appended. */
    const marker = (name: string, when: Expression<SqlBool>) => sql`
      insert into checkpoints (name, transaction_id, position, updated_at)
      select ${name}, '0'::xid8, 0, now() where ${when}`;
    async function markers(prefix: string): Promise<string[]> {
      const rows = await testDb.handle.db
        .selectFrom('checkpoints')
        .select('name')
        .where('name', 'like', `${prefix}%`)
        .orderBy('name')
        .execute();
      return rows.map((row) => row.name);
    }

    it('write the event and their rows together, seeing the event as a replay reads it, with its version', async () => {
      const streamId = newStream('stmt-ok');
      const seen: unknown[] = [];
      let transactionPath = 0;
      const projecting = storeWith({
        inTransaction: async () => {
          transactionPath += 1;
        },
        statements: (run, appended) => {
          seen.push(run);
          return run.flatMap((pending) => [
            marker(`${streamId}-${pending.version}a`, appended),
            marker(`${streamId}-${pending.version}b`, appended),
          ]);
        },
      });
      const first = await projecting.append(streamId, [event('A', { n: 1, skip: undefined })], {
        expectedVersion: 'no_stream',
      });
      const second = await projecting.append(streamId, [event('B')], { expectedVersion: 1 });
      const third = await projecting.append(streamId, [event('C', { n: 3 }), event('D')], {
        expectedVersion: 2,
      });
      expect(transactionPath).toBe(0);
      expect(seen).toEqual([
        [
          {
            type: 'A',
            data: { n: 1 },
            metadata,
            eventId: nth(first.events, 0).eventId,
            streamId,
            version: 1,
          },
        ],
        [{ type: 'B', data: {}, metadata, eventId: nth(second.events, 0).eventId, streamId, version: 2 }],
        [
          {
            type: 'C',
            data: { n: 3 },
            metadata,
            eventId: nth(third.events, 0).eventId,
            streamId,
            version: 3,
          },
          { type: 'D', data: {}, metadata, eventId: nth(third.events, 1).eventId, streamId, version: 4 },
        ],
      ]);
      expect(third.nextVersion).toBe(4);
      expect(await store.readStream(streamId)).toEqual([...first.events, ...second.events, ...third.events]);
      expect(await markers(streamId)).toEqual(
        [1, 2, 3, 4].flatMap((v) => [`${streamId}-${v}a`, `${streamId}-${v}b`]),
      );
    });

    it('write nothing on a conflict: ConcurrencyError, and neither the event nor their rows', async () => {
      const streamId = newStream('stmt-conflict');
      const projecting = storeWith({
        statements: (run, appended) =>
          run.map((pending) => marker(`${streamId}-v${pending.version}`, appended)),
      });
      await projecting.append(streamId, [event('A')], { expectedVersion: 'no_stream' });
      await expect(projecting.append(streamId, [event('B')], { expectedVersion: 0 })).rejects.toBeInstanceOf(
        ConcurrencyError,
      );
      await expect(projecting.append(streamId, [event('B')], { expectedVersion: 5 })).rejects.toMatchObject({
        actual: 1,
      });
      expect(await store.readStream(streamId)).toHaveLength(1);
      expect(await markers(streamId)).toEqual([`${streamId}-v1`]);
    });

    it('roll the event back when one of them fails', async () => {
      const streamId = newStream('stmt-fail');
      const projecting = storeWith({
        statements: () => [sql`insert into checkpoints (name) values (null)`],
      });
      const before = await eventCount();
      await expect(
        projecting.append(streamId, [event('A')], { expectedVersion: 'no_stream' }),
      ).rejects.toThrow();
      expect(await eventCount()).toBe(before);
      expect(await store.readStream(streamId)).toEqual([]);
    });

    it('share one statement and one commit across streams while the database is busy (group commit), each append failing alone', async () => {
      const streams = Array.from({ length: 10 }, (_, i) => newStream(`group-${i}`));
      let transactionPath = 0;
      const projecting = storeWith({
        inTransaction: async () => {
          transactionPath += 1;
        },
        statements: ([pending], appended) =>
          pending === undefined || pending.type === 'Undecided'
            ? IN_TRANSACTION
            : pending.type === 'Boom'
              ? [sql`insert into checkpoints (name) values (null)`]
              : [marker(`${pending.streamId}-v${pending.version}`, appended)],
        groupCommits: () => true,
      });
      // Ten at once: two go at once, alone; the eight that arrive meanwhile go together as one statement.
      const created = await Promise.all(
        streams.map((streamId) =>
          projecting.append(streamId, [event('A')], { expectedVersion: 'no_stream' }),
        ),
      );
      const transactions = new Set(created.map((r) => nth(r.events, 0).transactionId));
      expect(transactions.size).toBe(3);
      expect(created.map((r) => r.nextVersion)).toEqual(streams.map(() => 1));
      for (const streamId of streams) expect(await markers(streamId)).toEqual([`${streamId}-v1`]);

      // A stale expectation, a projector's failing statement and one that needs a transaction, among others.
      const second = await Promise.allSettled(
        streams.map((streamId, i) =>
          projecting.append(streamId, [event(i === 5 ? 'Boom' : i === 7 ? 'Undecided' : 'B')], {
            expectedVersion: i === 3 ? 0 : 1,
          }),
        ),
      );
      expect(second.map((r) => r.status)).toEqual(
        streams.map((_, i) => (i === 3 || i === 5 ? 'rejected' : 'fulfilled')),
      );
      expect((second[3] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
      expect((second[5] as PromiseRejectedResult).reason).not.toBeInstanceOf(ConcurrencyError);
      expect(transactionPath).toBe(1);
      for (const [i, streamId] of streams.entries()) {
        const versions = (await store.readStream(streamId)).map((e) => e.version);
        expect(versions).toEqual(i === 3 || i === 5 ? [1] : [1, 2]);
        expect(await markers(streamId)).toEqual(
          i === 3 || i === 5 || i === 7 ? [`${streamId}-v1`] : [`${streamId}-v1`, `${streamId}-v2`],
        );
      }

      // Appends of two shapes (their data's properties differ): each shape goes as a statement of its own.
      const third = await Promise.all(
        streams.map((streamId, i) =>
          projecting.append(streamId, [i % 2 === 0 ? event('C') : event('C', { n: i })], {
            expectedVersion: i === 3 || i === 5 ? 1 : 2,
          }),
        ),
      );
      const shapesByTransaction = Map.groupBy(
        third.map((r, i) => ({ transaction: nth(r.events, 0).transactionId, shape: i % 2 })),
        (t) => t.transaction,
      );
      expect(shapesByTransaction.size).toBeLessThan(streams.length);
      for (const same of shapesByTransaction.values()) expect(new Set(same.map((t) => t.shape)).size).toBe(1);
    });

    it('go as one set statement for a group at known versions (inlineGroupStatements), each append claiming, failing and refused alone', async () => {
      const streams = Array.from({ length: 10 }, (_, i) => newStream(`set-${i}`));
      await sql`create table if not exists precondition_flags (name text primary key)`.execute(
        testDb.handle.db,
      );
      const up = `set-up-${crypto.randomUUID()}`;
      const down = `set-down-${crypto.randomUUID()}`;
      await sql`insert into precondition_flags (name) values (${up})`.execute(testDb.handle.db);
      const flag = (name: string) => ({
        holds: sql<SqlBool>`exists (select 1 from precondition_flags where name = ${name})`,
        refusal: () => new Error(`the flag ${name === up ? 'up' : 'down'} is down`),
        id: name,
      });
      const groups: string[][][] = [];
      let fails = false;
      const projecting = storeWith({
        statements: (run, appended) =>
          run.map((pending) => marker(`${pending.streamId}-v${pending.version}`, appended)),
        groupStatements: (runs, appended) => {
          groups.push(runs.map((run) => run.map((pending) => `${pending.streamId}-v${pending.version}`)));
          if (fails) return [sql`insert into checkpoints (name) values (null)`];
          const names = runs.flatMap((run) =>
            run.map((pending) => `${pending.streamId}-v${pending.version}`),
          );
          const owners = runs.flatMap((run) => run.map((pending) => pending.streamId));
          return [
            sql`insert into checkpoints (name, transaction_id, position, updated_at)
              select m.name, '0'::xid8, 0, now() from unnest(${names}::text[], ${owners}::text[]) as m (name, stream_id)
              where ${appended(sql<string>`m.stream_id`)}`,
          ];
        },
        groupCommits: () => true,
      });
      await Promise.all(
        streams.map((streamId) =>
          projecting.append(streamId, [event('A')], { expectedVersion: 'no_stream' }),
        ),
      );
      // New streams are claimed by an insert: never a set statement.
      expect(groups).toEqual([]);

      // Two events each, every append with the same precondition (one condition for all), one stale
      // (expecting a version its stream has not reached).
      const second = await Promise.allSettled(
        streams.map((streamId, i) =>
          projecting.append(streamId, [event('B'), event('C')], {
            expectedVersion: i === 4 ? 2 : 1,
            precondition: flag(up),
          }),
        ),
      );
      expect(second.map((r) => r.status)).toEqual(
        streams.map((_, i) => (i === 4 ? 'rejected' : 'fulfilled')),
      );
      expect((second[4] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
      expect(groups.length).toBeGreaterThan(0);
      expect(groups.flat().every((run) => run.length === 2)).toBe(true);
      const transactions = new Set(
        second.flatMap((r) => (r.status === 'fulfilled' ? r.value.events.map((e) => e.transactionId) : [])),
      );
      expect(transactions.size).toBeLessThan(streams.length - 1);
      for (const [i, streamId] of streams.entries()) {
        const stored = await store.readStream(streamId);
        expect(stored.map((e) => [e.version, e.type])).toEqual(
          i === 4
            ? [[1, 'A']]
            : [
                [1, 'A'],
                [2, 'B'],
                [3, 'C'],
              ],
        );
        const fulfilled = second[i];
        if (fulfilled?.status === 'fulfilled') expect(fulfilled.value.events).toEqual(stored.slice(1));
        expect(await markers(streamId)).toEqual(
          i === 4 ? [`${streamId}-v1`] : [`${streamId}-v1`, `${streamId}-v2`, `${streamId}-v3`],
        );
      }

      // Different preconditions: each append is refused by its own only.
      groups.length = 0;
      const third = await Promise.allSettled(
        streams.map((streamId, i) =>
          projecting.append(streamId, [event('D')], {
            expectedVersion: i === 4 ? 1 : 3,
            ...(i % 3 === 0 ? {} : { precondition: flag(i % 3 === 1 ? up : down) }),
          }),
        ),
      );
      expect(third.map((r) => r.status)).toEqual(
        streams.map((_, i) => (i % 3 === 2 ? 'rejected' : 'fulfilled')),
      );
      for (const [i, r] of third.entries()) {
        if (r.status === 'rejected') expect(String(r.reason)).toContain('the flag down is down');
        const versions = (await store.readStream(streams[i] as string)).map((e) => e.version);
        expect(versions.at(-1)).toBe(i % 3 === 2 ? (i === 4 ? 1 : 3) : i === 4 ? 2 : 4);
      }
      expect(groups.length).toBeGreaterThan(0);

      // A group statement that fails: each append goes again alone, with its own statements.
      groups.length = 0;
      fails = true;
      const fourth = await Promise.all(
        streams.map((streamId, i) => {
          const at = i === 4 ? 2 : i % 3 === 2 ? 3 : 4;
          return projecting.append(streamId, [event('E')], { expectedVersion: at });
        }),
      );
      expect(groups.length).toBeGreaterThan(0);
      for (const [i, streamId] of streams.entries()) {
        const version = nth(fourth[i]?.events ?? [], 0).version;
        expect(await markers(`${streamId}-v${version}`)).toEqual([`${streamId}-v${version}`]);
      }
    });

    it('give way to the transaction and `inline` when a projector cannot (IN_TRANSACTION), or for expected version any', async () => {
      const streamId = newStream('stmt-fallback');
      let transactionPath = 0;
      const projecting = storeWith({
        inTransaction: async () => {
          transactionPath += 1;
        },
        statements: (run) => (run.some((pending) => pending.type === 'Undecided') ? IN_TRANSACTION : []),
      });
      await projecting.append(streamId, [event('Undecided')], { expectedVersion: 'no_stream' });
      await projecting.append(streamId, [event('A'), event('Undecided')], { expectedVersion: 1 });
      await projecting.append(streamId, [event('A')], { expectedVersion: 'any' });
      expect(transactionPath).toBe(3);
      await projecting.append(streamId, [event('A'), event('B')], { expectedVersion: 4 });
      expect(transactionPath).toBe(3);
    });
  });

  describe('checkpoints', () => {
    it('start at START, and store and overwrite a position', async () => {
      const { db } = testDb.handle;
      const name = `cp-${randomUUID()}`;
      expect(await readCheckpoint(db, name)).toEqual(START);
      const big = { transactionId: 9_007_199_254_740_993n, position: 9_007_199_254_740_995n };
      await writeCheckpoint(db, name, big);
      expect(await readCheckpoint(db, name)).toEqual(big);
      await writeCheckpoint(db, name, { transactionId: 12n, position: 34n });
      expect(await readCheckpoint(db, name)).toEqual({ transactionId: 12n, position: 34n });
    });

    it('can be read for update in the transaction that advances them', async () => {
      const { db } = testDb.handle;
      const name = `cp-lock-${randomUUID()}`;
      const head = await store.headPosition();
      const streamId = newStream('cp');
      const appended = await store.append(streamId, [event('A')], { expectedVersion: 'no_stream' });
      await readable(head, [streamId], 1);
      await db.transaction().execute(async (trx) => {
        const from = await readCheckpoint(trx, name, { forUpdate: true });
        expect(from).toEqual(START);
        const batch = mine(await store.readAll(head, 100_000, { trx }), [streamId]);
        await writeCheckpoint(trx, name, logPositionOf(nth(batch, -1)));
      });
      expect(await readCheckpoint(db, name)).toEqual(logPositionOf(nth(appended.events, 0)));
    });
  });
});
