import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import * as migration from '../../infra/db/migrations/2026-12-01-027-search-serial.ts';
import { backends, onPostgres } from '../support/db.ts';
import { createTestRuntime } from '../support/runtime.ts';

/*
 * Migration 027: the tables a search reads are never scanned by parallel workers (docs/performance.md,
 * "Search"), whatever the planner would otherwise choose; other tables keep PostgreSQL's choice.
 */
const SEARCHED = ['articles', 'article_title_search', 'article_bodies'] as const;

describe.each(backends)('searched tables without parallel workers (migration 027) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  const options = async (): Promise<Record<string, string[] | null>> => {
    const { rows } = await sql<{ relname: string; reloptions: string[] | null }>`
      select relname, reloptions from pg_class
      where relname in (${sql.join([...SEARCHED, 'events'])}) and relkind = 'r'`.execute(runtime.db);
    return Object.fromEntries(rows.map((row) => [row.relname, row.reloptions]));
  };

  it('sets parallel_workers = 0 on the searched tables only, and resets it on down', async () => {
    expect(await options()).toEqual({
      articles: ['parallel_workers=0'],
      article_title_search: ['parallel_workers=0'],
      article_bodies: ['parallel_workers=0'],
      events: null,
    });
    await migration.down(runtime.db);
    expect(await options()).toEqual({
      articles: null,
      article_title_search: null,
      article_bodies: null,
      events: null,
    });
    await migration.up(runtime.db);
    expect((await options()).articles).toEqual(['parallel_workers=0']);
  });

  // Parallel plans made free: the planner then scans any table it may with workers.
  onPostgres(backend)(
    'plans a scan of a searched table without workers, where another table gets them',
    async () => {
      const plans = await runtime.db.transaction().execute(async (trx) => {
        for (const setting of [
          'parallel_setup_cost',
          'parallel_tuple_cost',
          'min_parallel_table_scan_size',
          'min_parallel_index_scan_size',
        ])
          await sql`select set_config(${setting}, '0', true)`.execute(trx);
        const plan = async (table: string): Promise<string> => {
          const { rows } = await sql<{
            'QUERY PLAN': string;
          }>`explain select count(*) from ${sql.table(table)}`.execute(trx);
          return rows.map((row) => row['QUERY PLAN']).join('\n');
        };
        return Object.fromEntries(
          await Promise.all([...SEARCHED, 'events'].map(async (table) => [table, await plan(table)])),
        ) as Record<string, string>;
      });
      expect(plans.events).toContain('Gather');
      for (const table of SEARCHED) expect(plans[table], table).not.toContain('Gather');
    },
  );
});
