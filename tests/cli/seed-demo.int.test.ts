import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedDemo } from '../../apps/cli/seed-demo.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { createTestRuntime } from '../support/runtime.ts';

const DAY = 86_400_000;

describe('seed-demo', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
  });
  afterAll(async () => drop?.());

  it("never makes a site's first article a draft: every demo site has an article in its list", async () => {
    const now = new Date('2026-11-02T10:00:00.000Z');
    const sites: string[] = [];
    // Twenty fixed seeds of six sites with one article each: a roll makes about one in twelve a draft.
    for (let seed = 1; seed <= 20; seed++) {
      const result = await seedDemo(runtime, { sites: 6, articles: 1, backlinks: 0, seed, quiet: true }, now);
      sites.push(...result.sites.map((s) => s.id));
    }
    const rows = await sql<{ site_id: string; status: string; published_at: Date | null }>`
      select site_id, status, published_at from articles where site_id in (${sql.join(sites)})`.execute(
      runtime.db,
    );
    expect(rows.rows).toHaveLength(sites.length);
    expect(rows.rows.filter((r) => r.status === 'draft' || r.published_at === null)).toEqual([]);
    // The rolls that said draft: published a day before `now`.
    const dayBefore = rows.rows.filter((r) => r.published_at?.getTime() === now.getTime() - DAY);
    expect(dayBefore.length).toBeGreaterThan(0);
  });
});
