import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import * as migration from '../../infra/db/migrations/2026-11-30-021-as-of-history.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { backlinksProjector } from '../../projections/backlinks.ts';
import { backends } from '../support/db.ts';
import { catchUpAll, createTestRuntime, setUpAccount, snapshotTables } from '../support/runtime.ts';

/*
 * Migration 021: the backlinks an older service projected get the time their events were recorded,
 * as the projector now writes it (a rebuild gives the same rows), and `article_history` starts empty
 * for its projector to fill from the log.
 */
describe.each(backends)('as_of history (migration 021) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let clock = new Date('2026-10-01T08:00:00.000Z');
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend, { now: () => clock }));
  }, 60_000);
  afterAll(async () => drop?.());

  it('fills recorded_at of the backlinks already there from their events', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    for (const [i, day] of ['2026-10-02', '2026-10-09', '2026-10-16'].entries()) {
      clock = new Date(`${day}T10:00:0${i}.250Z`);
      await runtime.commands.acquireBacklink(accountId, {
        siteId,
        acquiredOn: day,
        sourceDomain: 'news.example',
        sourceUrl: `https://news.example/${day}`,
        targetUrl: 'https://northside.example/',
        anchorText: 'Northside',
        anchorType: 'branded',
        category: i === 1 ? 'local' : 'industry',
      });
    }
    await catchUpAll(runtime.db);
    const tables = ['backlinks'] as const;
    const projected = await snapshotTables(runtime.db, tables);
    const times = await sql<{
      recorded_at: Date;
    }>`select recorded_at from backlinks order by acquired_on`.execute(runtime.db);
    expect(times.rows.map((r) => r.recorded_at.toISOString())).toEqual([
      '2026-10-02T10:00:00.250Z',
      '2026-10-09T10:00:01.250Z',
      '2026-10-16T10:00:02.250Z',
    ]);

    await migration.down(runtime.db);
    const columns = await sql<{ n: number }>`select count(*)::int as n from information_schema.columns
      where table_name = 'backlinks' and column_name = 'recorded_at'`.execute(runtime.db);
    expect(columns.rows[0]?.n).toBe(0);
    await migration.up(runtime.db);
    expect(await snapshotTables(runtime.db, tables)).toEqual(projected);
    await rebuild(runtime.db, backlinksProjector);
    expect(await snapshotTables(runtime.db, tables)).toEqual(projected);
    const history = await sql<{ n: number }>`select count(*)::int as n from article_history`.execute(
      runtime.db,
    );
    expect(history.rows[0]?.n).toBe(0);
  });
});
