import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import * as migration from '../../infra/db/migrations/2026-11-29-019-title-search.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { createArticlesProjector } from '../../projections/articles.ts';
import { backends } from '../support/db.ts';
import { createTestRuntime, pipelineActor, setUpAccount, snapshotTables } from '../support/runtime.ts';

/*
 * Migration 019: the title's and target keyword's search words move out of the body's vector into
 * `article_title_search`, as they were (the language they were made in is kept), and back on `down`.
 */
describe.each(backends)('title search words (migration 019) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  it('splits the vectors an older service wrote as a rebuild makes them, and joins them back', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    for (const [title, keyword] of [
      ['Boiler pressure explained', 'boiler pressure'],
      ['Radiators in winter', null],
    ] as const) {
      await runtime.commands.createArticle(
        accountId,
        {
          siteId,
          title,
          body: '<p>Why the gauge drops, and what to do about the <em>boiler</em>.</p>',
          url: `https://northside.example/blog/${title.length}`,
          status: 'published',
          publishedAt: '2026-10-01T09:00:00Z',
          targetKeyword: keyword,
          featuredImage: null,
        },
        { origin: 'rewrite', actor: pipelineActor },
      );
    }
    const tables = ['article_bodies', 'article_title_search'] as const;
    const split = await snapshotTables(runtime.db, tables);

    await migration.down(runtime.db);
    // As migration 018 made them: one vector of the body (C), the title (A) and the keyword (B).
    const joined = await sql<{ same: boolean }>`select bool_and(b.search = (
        setweight(to_tsvector('english', b.body), 'C')
        || setweight(to_tsvector('english', a.title), 'A')
        || setweight(to_tsvector('english', coalesce(a.target_keyword, '')), 'B'))) as same
      from article_bodies b join articles a on a.id = b.article_id`.execute(runtime.db);
    expect(joined.rows[0]?.same).toBe(true);

    await migration.up(runtime.db);
    expect(await snapshotTables(runtime.db, tables)).toEqual(split);
    // The body's vector is kept in its row (storage main): a search reads it with the row.
    const storage = await sql<{ attstorage: string }>`select attstorage from pg_attribute
      where attrelid = 'article_bodies'::regclass and attname = 'search'`.execute(runtime.db);
    expect(storage.rows[0]?.attstorage).toBe('m');
    await rebuild(runtime.db, createArticlesProjector(undefined, runtime.searchLanguage));
    expect(await snapshotTables(runtime.db, tables)).toEqual(split);
  });
});
