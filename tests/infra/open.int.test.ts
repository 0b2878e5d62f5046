import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../infra/config.ts';
import { hasEmbeddedTemplate } from '../../infra/db/embedded-template.ts';
import { migrateToLatest, pendingMigrations } from '../../infra/db/migrate.ts';
import { type AppendedTypes, type DbHandle, type DbLogger, openDatabase } from '../../infra/db/open.ts';
import { createEventStore, type EventStore, type NewEvent } from '../../infra/event-store.ts';
import { IN_TRANSACTION } from '../../infra/projection.ts';
import { backends, createTestDatabase, onPostgres, type TestDatabase } from '../support/db.ts';
import { startPgProxy } from '../support/pg-proxy.ts';
import { PATIENCE } from '../support/wait.ts';

const metadata = { at: '2026-11-21T10:00:00.000Z' };
const event = (type: string): NewEvent => ({ type, data: { type }, metadata });

function storeOn(handle: DbHandle): EventStore<NewEvent> {
  return createEventStore<NewEvent>({ db: handle.db, handle, validate: () => {} });
}

/** Resolves at the next wake-up of `handle`'s onAppended with the types it names, rejects after `ms`. */
function nextWakeup(
  handle: DbHandle,
  ms = 5_000,
  wanted: (types: AppendedTypes) => boolean = () => true,
): Promise<AppendedTypes> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no onAppended wake-up within ${ms} ms`));
    }, ms);
    const unsubscribe = handle.onAppended((types) => {
      if (!wanted(types)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(types);
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function recordingLogger(): DbLogger & { messages: string[] } {
  const messages: string[] = [];
  const record = (_obj: object, msg: string): void => {
    messages.push(msg);
  };
  return { messages, info: record, warn: record, error: record };
}

describe.each(backends)('openDatabase on %s', (backend) => {
  let testDb: TestDatabase;

  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
  }, 60_000);

  afterAll(async () => {
    await testDb?.drop();
  });

  it('reports its kind and the value types both backends share', async () => {
    const { handle } = testDb;
    expect(handle.kind).toBe(backend);
    const row = await sql<{ big: unknown; at: unknown; doc: unknown; xid: unknown; day: unknown }>`
      select 9007199254740993::bigint as big, now() as at, '{"a":[1]}'::jsonb as doc,
        pg_current_xact_id() as xid, '2026-03-01'::date as day
    `.execute(handle.db);
    expect(row.rows[0]).toMatchObject({ big: '9007199254740993', doc: { a: [1] }, day: '2026-03-01' });
    expect(row.rows[0]?.at).toBeInstanceOf(Date);
    expect(typeof row.rows[0]?.xid).toBe('string');
  });

  it('has applied every migration', async () => {
    expect(await pendingMigrations(testDb.handle.db)).toEqual([]);
    expect(await migrateToLatest(testDb.handle.db)).toEqual({ applied: [], newer: [] });
  });

  onPostgres(backend)('compresses bodies and event data with lz4 (PGlite has no lz4)', async () => {
    const { rows } = await sql<{ attname: string; attcompression: string }>`
      select attname, attcompression from pg_attribute
      where (attrelid = 'article_bodies'::regclass and attname = 'body')
         or (attrelid = 'events'::regclass and attname = 'data')
      order by attname`.execute(testDb.handle.db);
    expect(rows).toEqual([
      { attname: 'body', attcompression: 'l' },
      { attname: 'data', attcompression: 'l' },
    ]);
  });

  it('wakes in-process listeners when the event store appends, and stops after unsubscribe', async () => {
    const { handle } = testDb;
    let calls = 0;
    const unsubscribe = handle.onAppended(() => {
      calls += 1;
    });
    await storeOn(handle).append(`article-${randomUUID()}`, [event('A')], { expectedVersion: 'any' });
    // notifyAppended runs before append resolves.
    expect(calls).toBeGreaterThanOrEqual(1);
    unsubscribe();
    const before = calls;
    handle.notifyAppended();
    expect(calls).toBe(before);
  });

  it('tells in-process listeners which types an append wrote', async () => {
    const seen: AppendedTypes[] = [];
    const unsubscribe = testDb.handle.onAppended((types) => seen.push(types));
    await storeOn(testDb.handle).append(`article-${randomUUID()}`, [event('A'), event('B'), event('A')], {
      expectedVersion: 'no_stream',
    });
    unsubscribe();
    // Told before the append resolves (on postgres the NOTIFY may come too, or one of an earlier test).
    expect(seen).toContainEqual(['A', 'B']);
  });

  onPostgres(backend)('tells another process which types an append wrote, through NOTIFY', async () => {
    const other = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://' });
    try {
      // Another wake-up may come first (the listener's own start, another append): the one that names these types.
      const woken = nextWakeup(other, 20_000, (types) => types?.includes('C') === true);
      await storeOn(testDb.handle).append(`article-${randomUUID()}`, [event('C'), event('D')], {
        expectedVersion: 'no_stream',
      });
      // With the types of other appends of the last moment (they go out together).
      expect(await woken).toEqual(expect.arrayContaining(['C', 'D']));
    } finally {
      await other.close();
    }
  });

  onPostgres(backend)('keeps waking other listeners when one throws', async () => {
    const logger = recordingLogger();
    const handle = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://', logger });
    try {
      let woken = false;
      handle.onAppended(() => {
        throw new Error('listener bug');
      });
      handle.onAppended(() => {
        woken = true;
      });
      handle.notifyAppended();
      expect(woken).toBe(true);
      expect(logger.messages).toContain('an onAppended listener threw');
    } finally {
      await handle.close();
    }
  });

  onPostgres(backend)(
    'delivers a NOTIFY to another handle on the same database, only on commit',
    async () => {
      const other = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://' });
      try {
        const woken = nextWakeup(other);
        await storeOn(testDb.handle).append(`article-${randomUUID()}`, [event('A')], {
          expectedVersion: 'no_stream',
        });
        await woken;

        let calls = 0;
        other.onAppended(() => {
          calls += 1;
        });
        const failing = createEventStore<NewEvent>({
          db: testDb.handle.db,
          handle: testDb.handle,
          validate: () => {},
          // Fails in the append's transaction, after its events are written and NOTIFY is sent.
          inline: (_events, at) => {
            if (at.trx === undefined) return IN_TRANSACTION;
            throw new Error('rolled back');
          },
        });
        await expect(
          failing.append(`article-${randomUUID()}`, [event('A')], { expectedVersion: 'no_stream' }),
        ).rejects.toThrow('rolled back');
        await sleep(300);
        expect(calls).toBe(0);
      } finally {
        await other.close();
      }
    },
  );

  onPostgres(backend)(
    'reconnects its LISTEN connection when it drops, wakes listeners once back, and ends it on close',
    async () => {
      const listenPids = async (): Promise<number[]> =>
        (
          await sql<{ pid: number }>`
            select pid from pg_stat_activity
            where datname = current_database() and application_name = 'content-service:listen'
          `.execute(testDb.handle.db)
        ).rows.map((row) => row.pid);
      const others = new Set(await listenPids());
      const logger = recordingLogger();
      const other = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: 'memory://', logger });
      try {
        const [pid] = (await listenPids()).filter((p) => !others.has(p));
        expect(pid).toBeTypeOf('number');
        const back = nextWakeup(other);
        await sql`select pg_terminate_backend(${pid}::integer)`.execute(testDb.handle.db);
        // What was appended while it was down is not known: any type.
        expect(await back).toBeNull();
        expect(logger.messages).toContain('the LISTEN connection to PostgreSQL was lost; reconnecting');

        const woken = nextWakeup(other);
        await storeOn(testDb.handle).append(`article-${randomUUID()}`, [event('A')], {
          expectedVersion: 'no_stream',
        });
        await woken;
        expect((await listenPids()).filter((p) => !others.has(p))).toHaveLength(1);
      } finally {
        await other.close();
      }
      expect((await listenPids()).filter((p) => !others.has(p))).toEqual([]);
    },
    20_000,
  );

  onPostgres(backend)(
    'gives up a LISTEN reconnection that gets no answer, and is back once the server answers',
    async () => {
      const proxy = await startPgProxy(testDb.databaseUrl as string);
      const logger = recordingLogger();
      const other = await openDatabase({ databaseUrl: proxy.url, dataDir: 'memory://', logger });
      try {
        // The server stops answering (a black hole): a reconnection is accepted and never answered.
        proxy.stall();
        await vi.waitFor(() => expect(proxy.stalled()).toBeGreaterThanOrEqual(1), PATIENCE);
        // Given up after 5 s (the connect timeout), then tried again: a wake-up well within 20 s.
        const back = nextWakeup(other, 20_000);
        await proxy.restore();
        // Without a connect timeout the unanswered attempt would wait for good, and nothing comes back.
        expect(await back).toBeNull();
        expect(logger.messages).toContain('reconnecting the LISTEN connection failed; retrying');
      } finally {
        await other.close();
        await proxy.close();
      }
    },
    30_000,
  );

  onPostgres(backend)('fails loudly when PostgreSQL is unreachable', async () => {
    await expect(
      openDatabase({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere', dataDir: 'memory://' }),
    ).rejects.toThrow();
  });
});

describe('openDatabase, embedded', () => {
  let dataDir: string;

  beforeAll(async () => {
    dataDir = join(await mkdtemp(join(tmpdir(), 'cs-pglite-')), 'nested', 'data');
  });

  afterAll(async () => {
    await rm(join(dataDir, '..', '..'), { recursive: true, force: true });
  });

  it('refuses a data folder it cannot write with a message naming DATA_DIR, before the engine opens it', async () => {
    // A regular file where a folder should be: no process, root included, can make the folder there.
    const file = join(dataDir, '..', '..', 'a-file');
    await writeFile(file, 'not a folder');
    const refused = openDatabase({ dataDir: join(file, 'data') });
    await expect(refused).rejects.toBeInstanceOf(ConfigError);
    await expect(refused).rejects.toThrow(
      /^Invalid configuration: DATA_DIR=".*a-file\/data": the embedded database must write there, and it cannot be written \(ENOTDIR\)$/,
    );
  });

  it('creates the data folder from the migrated cluster made at install and keeps the data across a restart', async () => {
    // `npm install` made it (infra/db/embedded-template.ts); without it this test says so, not less.
    expect(await hasEmbeddedTemplate()).toBe(true);
    const first = await openDatabase({ dataDir });
    const streamId = `article-${randomUUID()}`;
    try {
      expect(first.kind).toBe('pglite');
      expect(await pendingMigrations(first.db)).toEqual([]);
      expect(await migrateToLatest(first.db)).toEqual({ applied: [], newer: [] });
      await storeOn(first).append(streamId, [event('A'), event('B')], { expectedVersion: 'no_stream' });
    } finally {
      await first.close();
    }
    // Idempotent.
    await first.close();
    await expect(first.db.selectFrom('events').select('position').execute()).rejects.toThrow();

    const second = await openDatabase({ dataDir });
    try {
      expect(await pendingMigrations(second.db)).toEqual([]);
      // The engine's shared buffers, which it zeroes at every start (pglite-thread.ts).
      const buffers = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(second.db);
      expect(buffers.rows).toEqual([{ shared_buffers: '32MB' }]);
      const events = await storeOn(second).readStream(streamId);
      expect(events.map((e) => [e.version, e.type])).toEqual([
        [1, 'A'],
        [2, 'B'],
      ]);
      const appended = await storeOn(second).append(streamId, [event('C')], { expectedVersion: 2 });
      expect(appended.nextVersion).toBe(3);
    } finally {
      await Promise.all([second.close(), second.close()]);
    }
  }, 60_000);
});
