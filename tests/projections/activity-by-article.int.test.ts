import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as migration from '../../infra/db/migrations/2026-12-01-025-activity-by-article.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type ActivityQuery, activityPage, activityTotal, listActivity } from '../../projections/activity.ts';
import { indexesOf, insertLongLog } from '../support/activity-log.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';

/*
 * The activity log filtered by article (migration 025): a page and its total read the article's own
 * records from `activity_article`, not the account's whole log, and answer what the log holds.
 */

const ACCOUNT = 'acc_long_log';
const OTHER = 'acc_other';
const RARE = 'art_rare';

describe.each(backends)('the activity log filtered by article on %s', (backend) => {
  let testDb: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
    db = testDb.handle.db;
    // A long log: 20,000 records over 200 articles and none, newest first in time; three records
    // about a rare article among the oldest; another account's refused call that names it.
    await insertLongLog(db, ACCOUNT, 20_000, { articles: 200, articleEvery: 2 });
    await sql`
      insert into activity (id, account_id, at, source, actor, operation, site_id, article_id, status, duration_ms)
      values ('act_rare_1', ${ACCOUNT}, '2026-10-01T09:00:00Z', 'api', '{"type":"api_key","id":"key_1","name":"Key"}', 'get_article', 'site_1', ${RARE}, 200, 1),
             ('act_rare_2', ${ACCOUNT}, '2026-10-02T09:00:00Z', 'mcp', '{"type":"oauth_client","id":"cli_1","name":"Assistant"}', 'update_article', 'site_1', ${RARE}, 200, 1),
             ('act_rare_3', ${ACCOUNT}, '2026-10-02T09:00:00Z', 'web', '{"type":"user","id":"usr_1","name":"Ann"}', 'update_article', 'site_1', ${RARE}, 422, 1),
             ('act_refused', ${OTHER}, '2026-10-03T09:00:00Z', 'api', '{"type":"api_key","id":"key_2","name":"Other"}', 'get_article', null, ${RARE}, 404, 1)`.execute(
      db,
    );
    await sql`analyze activity`.execute(db);
  }, 120_000);
  afterAll(async () => {
    await testDb?.drop();
  });

  const rare: ActivityQuery = { page: 1, perPage: 2, articleId: RARE };

  it('lists the article’s records, newest first, ties by id, and counts them, the account’s alone', async () => {
    const first = await listActivity(db, ACCOUNT, rare);
    expect(first.rows.map((r) => r.id)).toEqual(['act_rare_3', 'act_rare_2']);
    expect(first.total).toBe(3);
    const second = await listActivity(db, ACCOUNT, { ...rare, page: 2 });
    expect(second.rows.map((r) => r.id)).toEqual(['act_rare_1']);
    expect(second.total).toBe(3);
    expect((await listActivity(db, ACCOUNT, { ...rare, source: 'mcp' })).rows.map((r) => r.id)).toEqual([
      'act_rare_2',
    ]);
    expect((await listActivity(db, ACCOUNT, { ...rare, from: '2026-10-02' })).total).toBe(2);
    const other = await listActivity(db, OTHER, rare);
    expect([other.rows.map((r) => r.id), other.total]).toEqual([['act_refused'], 1]);
    // A common article’s page: the newest of its 100 records.
    const common = await listActivity(db, ACCOUNT, { page: 1, perPage: 3, articleId: 'art_4' });
    expect(common.rows.map((r) => r.id)).toEqual(['act_000004', 'act_000204', 'act_000404']);
    expect(common.total).toBe(100);
  });

  it('reads the page and the total from the article’s index, not the account’s log', async () => {
    expect(await indexesOf(db, activityPage(db, ACCOUNT, rare))).toContain('activity_article');
    expect(await indexesOf(db, activityPage(db, ACCOUNT, rare))).not.toContain('activity_account_at');
    expect(await indexesOf(db, activityTotal(db, ACCOUNT, rare))).toContain('activity_article');
    expect(await indexesOf(db, activityTotal(db, ACCOUNT, rare))).not.toContain('activity_account_at');
  });

  it('answers the same without the index (migration 025 down), and takes it back up', async () => {
    const before = await listActivity(db, ACCOUNT, rare);
    await migration.down(db);
    expect(await indexesOf(db, activityPage(db, ACCOUNT, rare))).not.toContain('activity_article');
    expect(await listActivity(db, ACCOUNT, rare)).toEqual(before);
    await migration.up(db);
    expect(await indexesOf(db, activityPage(db, ACCOUNT, rare))).toContain('activity_article');
    expect(await listActivity(db, ACCOUNT, rare)).toEqual(before);
  });
});
