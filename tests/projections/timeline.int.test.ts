import fc from 'fast-check';
import { type Expression, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import type { ActivitySource } from '../../domain/activity/events.ts';
import type { Db } from '../../infra/db/schema.ts';
import { offsetOf } from '../../projections/projector.ts';
import {
  accountTimeline,
  STAFF_LOOKS,
  type TimelineQuery,
  timelineStatements,
} from '../../projections/timeline.ts';
import { insertLongLog, planNodes } from '../support/activity-log.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { apiKeyActor, createTestRuntime, pipelineActor, setUpAccount } from '../support/runtime.ts';

/*
 * Support staff's timeline of an account: each side (revisions, activity records) gives its newest
 * entries up to the page's end and the page is cut from the two merged; the total is summed from the
 * kept counts. For any filters and page it answers what the plain statement over both read models
 * answers: every entry interleaved newest first, ties by key, counted.
 */

/** The timeline as one statement over every revision and record of the account: what a page must be. */
async function everything(db: Db, accountId: string, q: TimelineQuery) {
  const from = q.from ? sql`and t.at >= ${new Date(`${q.from}T00:00:00Z`)}` : sql``;
  const to = q.to ? sql`and t.at < ${new Date(Date.parse(`${q.to}T00:00:00Z`) + 86_400_000)}` : sql``;
  const kind = q.kind ? sql`and t.kind = ${q.kind}` : sql``;
  const article = q.articleId ? sql`and t.article_id = ${q.articleId}` : sql``;
  const look = sql`coalesce(t.operation in (${sql.join([...STAFF_LOOKS])}), false)`;
  const looks = q.staffLooks ? sql`` : sql`and not ${look}`;
  const matched = sql`from (
    select 'revision' as kind, r.created_at as at, r.article_id || ':' || r.revision as key, r.article_id,
           null::text as operation
      from revisions r join articles a on a.id = r.article_id where a.account_id = ${accountId}
    union all
    select 'activity', v.at, v.id, v.article_id, v.operation from activity v where v.account_id = ${accountId}
  ) t where true ${from} ${to} ${kind} ${article}`;
  const rows = await sql<{ kind: string; key: string }>`select t.kind, t.key ${matched} ${looks}
    order by t.at desc, t.key desc limit ${q.perPage} offset ${offsetOf(q)}`.execute(db);
  const count = await sql<{
    n: number;
    looks: number;
  }>`select count(*) filter (where true ${looks})::integer as n,
    count(*) filter (where ${look})::integer as looks ${matched}`.execute(db);
  return {
    keys: rows.rows.map((r) => `${r.kind} ${r.key}`),
    total: count.rows[0]?.n ?? 0,
    staffLooks: count.rows[0]?.looks ?? 0,
  };
}

const DAYS = ['2026-10-01', '2026-10-02', '2026-10-03', '2026-10-04'];

describe.each(backends)('support staff’s timeline of an account on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let clock = new Date('2026-10-01T08:00:00.000Z');
  let accountId: string;
  const articles: string[] = [];
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend, { now: () => clock }));
    const account = await setUpAccount(runtime);
    accountId = account.accountId;
    // Another account's entries, which its timeline never shows.
    const other = await setUpAccount(runtime, 'Harbour Dental');
    await runtime.commands.recordCall({
      accountId: other.accountId,
      source: 'api',
      actor: apiKeyActor,
      operation: 'list_sites',
      siteId: null,
      articleId: null,
      status: 200,
      requestId: null,
      durationMs: 1,
    });
    // Three articles edited over four days, at instants shared with records (ties by key), and
    // records of every kind between them: calls about an article or none, and staff's looks.
    const at = (day: number, hour: number) =>
      new Date(`${DAYS[day]}T${String(hour).padStart(2, '0')}:00:00.000Z`);
    for (let day = 0; day < DAYS.length; day++) {
      for (let hour = 6; hour < 18; hour += 3) {
        clock = at(day, hour);
        if (articles.length < 3 && hour === 6) {
          const { articleId } = await runtime.commands.createArticle(
            accountId,
            {
              siteId: account.siteId,
              title: `Article ${articles.length}`,
              body: `<p>Body ${day}.</p>`,
              url: `https://northside.example/blog/${articles.length}`,
              status: 'draft',
              publishedAt: null,
              targetKeyword: null,
              featuredImage: null,
            },
            { origin: 'rewrite', actor: pipelineActor },
          );
          articles.push(articleId);
        }
        const articleId = articles[(day + hour) % articles.length] ?? null;
        if (hour % 2 === 0 && articleId) {
          await runtime.commands.editArticle(
            accountId,
            articleId,
            { title: `Edited on ${DAYS[day]} at ${hour}` },
            { origin: 'api', actor: apiKeyActor },
          );
        }
        for (const [operation, source, about] of [
          ['get_article', 'api', articleId],
          ['list_sites', 'mcp', null],
          [(day + hour) % 2 === 0 ? 'staff_view' : 'staff_search', 'system', hour === 9 ? articleId : null],
        ] as const) {
          await runtime.commands.recordCall({
            accountId,
            source: source as ActivitySource,
            actor: apiKeyActor,
            operation,
            siteId: about ? account.siteId : null,
            articleId: about,
            status: 200,
            requestId: null,
            durationMs: 1,
          });
        }
      }
    }
  }, 120_000);
  afterAll(async () => drop?.());

  it('answers every page, filter and total as the plain statement over both read models', async () => {
    const { db } = runtime;
    const everyEntry = await everything(db, accountId, { page: 1, perPage: 1000, staffLooks: true });
    // The data is what the test means: both kinds, looks, ties of a revision and a record.
    expect(everyEntry.total).toBeGreaterThan(60);
    expect(everyEntry.staffLooks).toBeGreaterThan(10);
    expect(everyEntry.keys.some((k) => k.startsWith('revision'))).toBe(true);
    await fc.assert(
      fc.asyncProperty(
        fc.record(
          {
            from: fc.constantFrom(...DAYS),
            to: fc.constantFrom(...DAYS),
            kind: fc.constantFrom('revision' as const, 'activity' as const),
            articleId: fc.constantFrom(...articles, 'art_unknown'),
            staffLooks: fc.boolean(),
          },
          { requiredKeys: [] },
        ),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 25 }),
        async (filters, page, perPage) => {
          const q: TimelineQuery = { page, perPage, ...filters };
          const got = await accountTimeline(db, accountId, q);
          const want = await everything(db, accountId, q);
          expect({
            keys: got.rows.map(
              (e) => `${e.kind} ${e.kind === 'revision' ? `${e.articleId}:${e.revision}` : e.id}`,
            ),
            total: got.total,
            staffLooks: got.staffLooks,
          }).toEqual(want);
        },
      ),
      { numRuns: backend === 'pglite' ? 60 : 150 },
    );
  }, 120_000);
});

describe.each(backends)('support staff’s timeline of a long log on %s', (backend) => {
  let testDb: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
    db = testDb.handle.db;
    // 20,000 calls, one in a hundred a staff member's look.
    await insertLongLog(db, 'acc_long', 20_000, { lookEvery: 100 });
  }, 120_000);
  afterAll(async () => {
    await testDb?.drop();
  });

  it('reads a page’s records up to its end, sums the records’ counts and counts the looks from their index', async () => {
    const q: TimelineQuery = { page: 3, perPage: 50 };
    const page = await accountTimeline(db, 'acc_long', q);
    expect(page.rows).toHaveLength(50);
    expect([page.total, page.staffLooks]).toEqual([19_800, 200]);
    const statements = timelineStatements(db, 'acc_long', q);
    const scans = (await planNodes(db, statements.page, true)).filter(
      (n) => n['Relation Name'] === 'activity',
    );
    expect(scans.map((n) => n['Index Name'])).toEqual(['activity_account_at']);
    // The page's end (150) and the looks skipped on the way.
    expect(scans[0]?.['Actual Rows']).toBeLessThanOrEqual(150);
    const records = await planNodes(db, statements.records as Expression<unknown>, true);
    expect(records.map((n) => n['Relation Name']).filter(Boolean)).toEqual(['activity_counts']);
    const looks = await planNodes(db, statements.looks as Expression<unknown>, true);
    expect(looks.flatMap((n) => n['Index Name'] ?? [])).toEqual(['activity_staff_looks']);
  });
});
