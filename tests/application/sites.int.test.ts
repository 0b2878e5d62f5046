import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, type Principal, unwrap } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import { everyDay } from '../../apps/application/sites.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { refusal } from '../support/errors.ts';
import {
  apiKeyActor,
  catchUpAll,
  createTestRuntime,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

/*
 * The sites' use cases of the web pages: the overview with its counts and the period report, as the
 * application answers them for any face.
 */

describe('the sites use cases', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let mine: { accountId: string; siteId: string; otherSiteId: string };
  let theirs: { accountId: string; siteId: string };

  const app = (): Application =>
    createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => new Date('2026-11-20T12:00:00Z'),
      editLimit: {
        take: async () => ({
          policy: { name: 'edits', quota: 1, window: 'utc-day' },
          allowed: true,
          remaining: 1,
          resetSeconds: 1,
        }),
      },
      media: createDirectoryMediaStore('/nonexistent'),
      fetchImage: async () => new Uint8Array(),
    });
  const principal = (accountId: string): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'editor',
    scope: 'read',
  });

  let n = 0;
  async function article(siteId: string, status: 'published' | 'draft', publishedAt: string | null) {
    n++;
    await runtime.commands.createArticle(
      mine.accountId,
      {
        siteId,
        title: `Article ${n}`,
        body: protectedBody(n),
        url: `https://northside.example/a-${n}`,
        status,
        publishedAt,
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: apiKeyActor },
    );
  }
  async function backlink(siteId: string, acquiredOn: string, category: 'industry' | 'local') {
    await runtime.commands.acquireBacklink(mine.accountId, {
      siteId,
      acquiredOn,
      sourceDomain: 'news.example',
      sourceUrl: `https://news.example/${acquiredOn}/${category}`,
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside',
      anchorType: 'branded',
      category,
    });
  }

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    // November 2026 (this month): 2 published on the 3rd, 1 on the 20th, a draft; October: 1.
    await article(mine.siteId, 'published', '2026-11-03T08:00:00Z');
    await article(mine.siteId, 'published', '2026-11-03T17:00:00Z');
    await article(mine.siteId, 'published', '2026-11-20T09:00:00Z');
    await article(mine.siteId, 'draft', null);
    await article(mine.siteId, 'published', '2026-10-31T23:59:00Z');
    await backlink(mine.siteId, '2026-11-01', 'industry');
    await backlink(mine.siteId, '2026-11-01', 'local');
    await backlink(mine.siteId, '2026-11-30', 'local');
    await backlink(mine.siteId, '2026-10-15', 'industry');
    await backlink(mine.siteId, '2026-10-22', 'industry');
    await backlink(mine.otherSiteId, '2026-11-10', 'local');
    await catchUpAll(runtime.db);
  });

  afterAll(async () => {
    await drop?.();
  });

  it("gives each of the account's sites with its articles and this month's counts", async () => {
    const call = callOf(principal(mine.accountId));
    const overview = unwrap(await app().sites.overview(call, { page: 1, per_page: 10 }));
    expect(overview.meta).toEqual({ page: 1, per_page: 10, total: 2, total_pages: 1 });
    expect(overview.data.map((s) => [s.id, s.name, s.articles, s.this_month])).toEqual([
      [
        mine.siteId,
        'Northside Plumbing',
        5,
        { from: '2026-11-01', to: '2026-11-30', articles_published: 3, backlinks: 3 },
      ],
      [
        mine.otherSiteId,
        'Harbour Dental',
        0,
        { from: '2026-11-01', to: '2026-11-30', articles_published: 0, backlinks: 1 },
      ],
    ]);
    const rival = unwrap(
      await app().sites.overview(callOf(principal(theirs.accountId)), { page: 1, per_page: 10 }),
    );
    expect(rival.data.map((s) => s.id)).not.toContain(mine.siteId);
  });

  it('gets one site of the account, and answers another account as a missing one', async () => {
    const call = callOf(principal(mine.accountId));
    const site = await app().sites.get(call, mine.siteId);
    expect(unwrap(site)).toMatchObject({ id: mine.siteId, domain: 'northside.example' });
    expect(site.subject.siteId).toBe(mine.siteId);
    expect(await refusal(app().sites.get(callOf(principal(theirs.accountId)), mine.siteId))).toBe(
      'not_found',
    );
  });

  it('reports every day of the month, its totals as the stats, and compares its days so far with as many days of the month before', async () => {
    const call = callOf(principal(mine.accountId));
    const report = unwrap(await app().sites.report(call, mine.siteId, 'this_month'));
    expect(report.site.id).toBe(mine.siteId);
    expect(report.days).toHaveLength(30);
    expect(report.days[0]).toEqual({
      date: '2026-11-01',
      articles_published: 0,
      backlinks_industry: 1,
      backlinks_local: 1,
    });
    expect(report.days[2]).toMatchObject({ date: '2026-11-03', articles_published: 2 });
    expect(report.days[29]).toEqual({
      date: '2026-11-30',
      articles_published: 0,
      backlinks_industry: 0,
      backlinks_local: 1,
    });
    const stats = unwrap(await app().sites.stats(call, mine.siteId, 'this_month'));
    expect(report.stats).toEqual(stats);
    expect(report.stats).toMatchObject({ articles: { published: 3 }, backlinks: { total: 3, industry: 1 } });
    // Today is the 20th: the 1st to the 20th of November against the 1st to the 20th of October.
    expect(report.comparison.partial).toBe(true);
    expect(report.comparison.now).toEqual({
      site_id: mine.siteId,
      period: { key: 'this_month', from: '2026-11-01', to: '2026-11-20' },
      articles: { published: 3 },
      backlinks: { total: 2, industry: 1, local: 1 },
    });
    expect(report.comparison.before).toEqual({
      site_id: mine.siteId,
      period: { key: 'previous', from: '2026-10-01', to: '2026-10-20' },
      articles: { published: 0 },
      backlinks: { total: 1, industry: 1, local: 0 },
    });
  });

  it('compares a month that has ended with the whole month before', async () => {
    const call = callOf(principal(mine.accountId));
    const report = unwrap(await app().sites.report(call, mine.siteId, '2026-10'));
    expect(report.comparison.partial).toBe(false);
    expect(report.comparison.now).toEqual(report.stats);
    expect(report.comparison.now).toMatchObject({ articles: { published: 1 }, backlinks: { industry: 2 } });
    expect(report.comparison.before).toEqual({
      ...unwrap(await app().sites.stats(call, mine.siteId, '2026-09')),
      period: { key: 'previous', from: '2026-09-01', to: '2026-09-30' },
    });
  });

  it('compares the last 30 days with the 30 days before', async () => {
    const report = unwrap(
      await app().sites.report(callOf(principal(mine.accountId)), mine.siteId, 'last_30_days'),
    );
    expect(report.stats.period).toEqual({ key: 'last_30_days', from: '2026-10-22', to: '2026-11-20' });
    expect(report.comparison.partial).toBe(false);
    expect(report.comparison.now).toEqual(report.stats);
    expect(report.comparison.before.period).toEqual({
      key: 'previous',
      from: '2026-09-22',
      to: '2026-10-21',
    });
    expect(report.days).toHaveLength(30);
    // The 31st of October and the 22nd of October are in the window; the 30th of November is not.
    expect(report.stats).toMatchObject({ articles: { published: 4 }, backlinks: { industry: 2, local: 1 } });
    expect(report.comparison.before).toMatchObject({
      articles: { published: 0 },
      backlinks: { industry: 1 },
    });
  });

  it("refuses an unknown period, and another account's site, as the API does", async () => {
    const call = callOf(principal(mine.accountId));
    expect(await refusal(app().sites.report(call, mine.siteId, 'next_year'))).toBe('invalid_request');
    expect(await refusal(app().sites.report(call, mine.siteId, '2026-13'))).toBe('invalid_request');
    expect(
      await refusal(app().sites.report(callOf(principal(theirs.accountId)), mine.siteId, 'this_month')),
    ).toBe('not_found');
    expect(await refusal(app().sites.report(call, 'site_missing', 'this_month'))).toBe('not_found');
  });

  it('fills the days without a bucket with zeros (everyDay)', () => {
    expect(
      everyDay({ from: '2024-02-28', to: '2024-03-01' }, [
        { day: '2024-02-29', articles_published: 1, backlinks_industry: 2, backlinks_local: 3 },
      ]),
    ).toEqual([
      { date: '2024-02-28', articles_published: 0, backlinks_industry: 0, backlinks_local: 0 },
      { date: '2024-02-29', articles_published: 1, backlinks_industry: 2, backlinks_local: 3 },
      { date: '2024-03-01', articles_published: 0, backlinks_industry: 0, backlinks_local: 0 },
    ]);
  });
});
