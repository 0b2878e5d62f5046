import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import type { ActivitySource, CallsRecorded } from '../../domain/activity/events.ts';
import * as migration from '../../infra/db/migrations/2026-12-01-024-activity-counts.ts';
import type { Db } from '../../infra/db/schema.ts';
import { projectInTransaction, type Stored } from '../../infra/projection.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { activityProjector, listActivity } from '../../projections/activity.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { apiKeyActor, createTestRuntime, setUpAccount, snapshotTables } from '../support/runtime.ts';

const ACCOUNTS = ['acc_1', 'acc_2'];
const SITES = ['site_a', 'site_b'];
const SOURCES: ActivitySource[] = ['api', 'mcp', 'web', 'system'];
/** Instants on both sides of UTC midnights, so that a day's bucket takes exactly its own records. */
const INSTANTS = [
  '2026-10-31T00:00:00.000Z',
  '2026-10-31T23:59:59.999Z',
  '2026-11-01T00:00:00.000Z',
  '2026-11-01T12:00:00.000Z',
  '2026-11-02T23:59:59.999Z',
  '2026-11-30T08:00:00.000Z',
];
const DAYS = ['2026-10-30', '2026-10-31', '2026-11-01', '2026-11-02', '2026-11-30', '2026-12-01'];

/** A batch of one account's calls; ids repeat across batches, as a replay or an import repeats them. */
const batch = fc.record({
  account: fc.constantFrom(...ACCOUNTS),
  calls: fc.array(
    fc.record({
      id: fc.integer({ min: 0, max: 40 }),
      at: fc.constantFrom(...INSTANTS),
      source: fc.constantFrom(...SOURCES),
      site: fc.option(fc.constantFrom(...SITES), { nil: null }),
    }),
    { minLength: 1, maxLength: 8 },
  ),
});

type Batch = typeof batch extends fc.Arbitrary<infer T> ? T : never;

function eventOf(step: Batch, i: number): Stored<CallsRecorded> {
  return {
    type: 'CallsRecorded',
    data: {
      accountId: step.account,
      calls: step.calls.map((c) => ({
        activityId: `act_${c.id}`,
        at: c.at,
        source: c.source,
        actor: { type: 'api_key' as const, id: 'key_1', name: 'Key' },
        operation: 'get_article',
        siteId: c.site,
        articleId: null,
        status: 200,
        requestId: `req_${i}`,
        durationMs: 1,
      })),
    },
    metadata: { at: '2026-12-01T00:00:00Z' },
    position: BigInt(i + 1),
    transactionId: 1000n,
    eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    streamId: `activity-${step.account}`,
    version: i + 1,
  } as Stored<CallsRecorded>;
}

/** The ids of the records a filter keeps, newest first, read from the rows themselves: what a page and its total must say. */
async function keptIds(
  db: Db,
  accountId: string,
  f: { from?: string; to?: string; source?: ActivitySource; siteId?: string },
): Promise<string[]> {
  let q = db.selectFrom('activity').where('account_id', '=', accountId);
  if (f.source) q = q.where('source', '=', f.source);
  if (f.siteId) q = q.where('site_id', '=', f.siteId);
  if (f.from) q = q.where('at', '>=', new Date(`${f.from}T00:00:00Z`));
  if (f.to) q = q.where('at', '<', new Date(Date.parse(`${f.to}T00:00:00Z`) + 86_400_000));
  const rows = await q.select('id').orderBy('at', 'desc').orderBy('id', 'desc').execute();
  return rows.map((r) => r.id);
}

const filter = fc.record(
  {
    from: fc.constantFrom(...DAYS),
    to: fc.constantFrom(...DAYS),
    source: fc.constantFrom(...SOURCES),
    siteId: fc.constantFrom(...SITES),
  },
  { requiredKeys: [] },
);

describe.each(backends)('the activity log’s totals on %s', (backend) => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('a page and its total are the records its filters keep, however the records came (batches, replays)', async () => {
    const { db } = testDb.handle;
    await fc.assert(
      fc.asyncProperty(
        fc.array(batch, { minLength: 1, maxLength: 12 }),
        fc.array(filter, { minLength: 1, maxLength: 6 }),
        async (steps, filters) => {
          await db.transaction().execute(async (trx) => {
            for (const table of activityProjector.tables)
              await sql`delete from ${sql.table(table)}`.execute(trx);
          });
          // Each batch in a transaction of its own, as the activity batcher stores them.
          for (const [i, step] of steps.entries()) {
            await db
              .transaction()
              .execute((trx) => projectInTransaction(activityProjector, [eventOf(step, i)], trx));
          }
          for (const accountId of ACCOUNTS) {
            for (const [i, f] of [{}, ...filters].entries()) {
              // The first page or the second, so that the offset is bound as well as the filters.
              const q = { page: 1 + (i % 2), perPage: 3, ...f };
              const page = await listActivity(db, accountId, q);
              const ids = await keptIds(db, accountId, f);
              expect(page.total, JSON.stringify(q)).toBe(ids.length);
              expect(
                page.rows.map((r) => r.id),
                JSON.stringify(q),
              ).toEqual(ids.slice((q.page - 1) * 3, q.page * 3));
            }
          }
          // The counts kept as the records came equal the counts the migration makes from the rows.
          const kept = await sql<{ row: string }>`
            select concat_ws(' ', account_id, day, source, site_id, n) as row from activity_counts order by 1`.execute(
            db,
          );
          const made = await sql<{ row: string }>`
            select concat_ws(' ', account_id, (at at time zone 'UTC')::date, source, coalesce(site_id, ''), count(*)) as row
            from activity group by account_id, (at at time zone 'UTC')::date, source, coalesce(site_id, '') order by 1`.execute(
            db,
          );
          expect(kept.rows).toEqual(made.rows);
        },
      ),
      { numRuns: backend === 'pglite' ? 20 : 50 },
    );
  }, 120_000);
});

/*
 * Migration 024: the counts of the records already there, made from their rows; every later insert
 * counted by the table's trigger, including a plain insert as the release before this one makes during
 * a rolling upgrade; a rebuild of the projection gives the same counts.
 */
describe.each(backends)('activity counts (migration 024) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let clock = new Date('2026-10-01T08:00:00.000Z');
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend, { now: () => clock }));
  }, 60_000);
  afterAll(async () => drop?.());

  it('counts the records already there, those any later insert adds, and the same after a rebuild', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const record = (at: string, source: ActivitySource, site: string | null) => {
      clock = new Date(at);
      return runtime.commands.recordCall({
        accountId,
        source,
        actor: apiKeyActor,
        operation: 'list_sites',
        siteId: site,
        articleId: null,
        status: 200,
        requestId: null,
        durationMs: 2,
      });
    };
    await record('2026-10-01T23:59:59.000Z', 'api', siteId);
    await record('2026-10-02T00:00:00.000Z', 'api', siteId);
    await record('2026-10-02T09:00:00.000Z', 'mcp', null);
    const { db } = runtime;
    const tables = ['activity_counts'] as const;
    const total = async (f: { from?: string; to?: string; source?: ActivitySource; siteId?: string } = {}) =>
      (await listActivity(db, accountId, { page: 1, perPage: 1, ...f })).total;
    // The account's setup is in its log too (a key made from the CLI): counted as the rest.
    const before = await total();
    expect(await total({ from: '2026-10-02', to: '2026-10-02' })).toBe(2);
    expect(await total({ to: '2026-10-01', source: 'api' })).toBe(1);
    expect(await total({ siteId })).toBe(2);
    const counts = await snapshotTables(db, tables);

    await migration.down(db);
    await migration.up(db);
    expect(await snapshotTables(db, tables)).toEqual(counts);

    // The statement of the release before: the rows alone.
    await sql`insert into activity (id, account_id, at, source, actor, operation, site_id, status, duration_ms)
      values ('act_older_release', ${accountId}, '2026-10-02T10:00:00Z', 'api', ${JSON.stringify(apiKeyActor)}::jsonb,
        'list_sites', ${siteId}, 200, 1)`.execute(db);
    expect(await total()).toBe(before + 1);
    expect(await total({ from: '2026-10-02', source: 'api', siteId })).toBe(2);
    await sql`delete from activity where id = 'act_older_release'`.execute(db);
    await sql`update activity_counts set n = n - 1 where account_id = ${accountId} and day = '2026-10-02' and source = 'api'`.execute(
      db,
    );

    await rebuild(db, activityProjector);
    expect(await snapshotTables(db, tables)).toEqual(counts);
    expect(await total()).toBe(before);
  });
});
