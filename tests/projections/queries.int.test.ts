import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { listActivity } from '../../projections/activity.ts';
import {
  type ArticleListQuery,
  findArticle,
  findArticleHead,
  listArticles,
} from '../../projections/articles.ts';
import { type BacklinkListQuery, listBacklinks } from '../../projections/backlinks.ts';
import { type Period, resolvePeriod, siteStats } from '../../projections/site-stats.ts';
import { findSite, listSites } from '../../projections/sites.ts';
import { backends } from '../support/db.ts';
import {
  apiKeyActor,
  catchUpAll,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

describe.each(backends)('read-model queries on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let accountId: string;
  let siteId: string;
  let otherSiteId: string;
  const ids: string[] = [];

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    ({ accountId, siteId, otherSiteId } = await setUpAccount(runtime));
    const c = runtime.commands;
    // Two articles share a publication time: the tie is broken by id, newest id first.
    const times = [
      '2026-10-01T10:00:00Z',
      '2026-10-15T10:00:00Z',
      '2026-10-15T10:00:00Z',
      '2026-11-02T10:00:00Z',
      null,
    ];
    for (const [i, publishedAt] of times.entries()) {
      const { articleId } = await c.createArticle(
        accountId,
        {
          siteId,
          title: `A${i}`,
          body: `${protectedBody(i)}<p>one two three</p>`,
          url: `https://northside.example/${i}`,
          status: publishedAt ? 'published' : 'draft',
          publishedAt,
          targetKeyword: 'kw',
          featuredImage: null,
        },
        { origin: 'rewrite', actor: pipelineActor },
      );
      ids.push(articleId);
    }
    for (const [i, day] of ['2026-10-03', '2026-10-20', '2026-11-05', '2026-11-05'].entries()) {
      await c.acquireBacklink(accountId, {
        siteId,
        acquiredOn: day,
        sourceDomain: 'src.example',
        sourceUrl: `https://src.example/${i}`,
        targetUrl: 'https://northside.example/',
        anchorText: 'a',
        anchorType: 'branded',
        category: i === 1 ? 'local' : 'industry',
      });
    }
    await c.recordCall({
      accountId,
      source: 'api',
      actor: apiKeyActor,
      operation: 'list_sites',
      siteId: null,
      articleId: null,
      status: 200,
      requestId: 'r1',
      durationMs: 3,
    });
    await catchUpAll(runtime.db);
  });
  afterAll(async () => drop());

  /** The account's reads of one of its sites (defined: the site is the account's). */
  const scoped = async <T>(read: Promise<T | undefined>): Promise<T> => {
    const result = await read;
    if (result === undefined) throw new Error('the site is not the account’s');
    return result;
  };
  const articlesOf = (site: string, q: ArticleListQuery) =>
    scoped(listArticles(runtime.db, { accountId, siteId: site }, q));
  const backlinksOf = (site: string, q: BacklinkListQuery) =>
    scoped(listBacklinks(runtime.db, { accountId, siteId: site }, q));
  const statsOf = (site: string, period: Period) =>
    scoped(siteStats(runtime.db, { accountId, siteId: site }, period));

  it('reads of a site that is not the account’s find nothing, whether it exists or not', async () => {
    for (const scope of [
      { accountId: 'acc_other', siteId },
      { accountId, siteId: 'site_unknown' },
    ]) {
      expect(await listArticles(runtime.db, scope, { page: 1, perPage: 10 })).toBeUndefined();
      expect(
        await listArticles(runtime.db, scope, { page: 1, perPage: 10, from: '2026-01-01' }),
      ).toBeUndefined();
      expect(await listBacklinks(runtime.db, scope, { page: 1, perPage: 10 })).toBeUndefined();
      expect(
        await listBacklinks(runtime.db, scope, { page: 1, perPage: 10, to: '2026-12-31' }),
      ).toBeUndefined();
      expect(await siteStats(runtime.db, scope, resolvePeriod('2026-10', new Date()))).toBeUndefined();
    }
  });

  it('lists sites of the account only, oldest first, with totals', async () => {
    const page = await listSites(runtime.db, accountId, { page: 1, perPage: 1 });
    expect(page.total).toBe(2);
    expect(page.rows.map((s) => s.id)).toEqual([siteId]);
    expect(await findSite(runtime.db, 'acc_other', siteId)).toBeUndefined();
  });

  it('lists articles newest first, ties by id, undated last, paged with a total', async () => {
    const all = await articlesOf(siteId, { page: 1, perPage: 100 });
    const [i0, i1, i2, i3, i4] = ids as [string, string, string, string, string];
    const tie = [i1, i2].sort().reverse();
    expect(all.rows.map((a) => a.id)).toEqual([i3, ...tie, i0, i4]);
    expect(all.total).toBe(5);
    const page2 = await articlesOf(siteId, { page: 2, perPage: 2 });
    expect(page2.rows.map((a) => a.id)).toEqual([tie[1], i0]);
    const past = await articlesOf(siteId, { page: 9, perPage: 2 });
    expect(past).toEqual({ rows: [], total: 5 });
    expect(all.rows[0]?.word_count).toBeGreaterThan(3);
  });

  it('filters articles by inclusive UTC dates and by status', async () => {
    const oct = await articlesOf(siteId, {
      page: 1,
      perPage: 100,
      from: '2026-10-01',
      to: '2026-10-15',
    });
    expect(oct.total).toBe(3);
    const drafts = await articlesOf(siteId, { page: 1, perPage: 100, status: 'draft' });
    expect(drafts.rows.map((a) => a.title)).toEqual(['A4']);
    expect((await articlesOf(otherSiteId, { page: 1, perPage: 10 })).total).toBe(0);
  });

  it('finds one article with its body, for its own account only', async () => {
    const article = await findArticle(runtime.db, accountId, ids[0] as string);
    expect(article?.body).toContain('data-service-protected');
    expect(await findArticle(runtime.db, 'acc_other', ids[0] as string)).toBeUndefined();
  });

  it("finds an article's site and revision without its body, for its own account only, and refuses a revoked key", async () => {
    const id = ids[0] as string;
    expect(await findArticleHead(runtime.db, accountId, id)).toEqual({ siteId, revision: 1 });
    expect(await findArticleHead(runtime.db, 'acc_other', id)).toBeUndefined();
    const key = await runtime.commands.createApiKey(accountId, { name: 'Short-lived', scope: 'read' });
    expect(await findArticleHead(runtime.db, accountId, id, key.keyId)).toEqual({ siteId, revision: 1 });
    await runtime.commands.revokeApiKey(accountId, key.keyId);
    await expect(findArticleHead(runtime.db, accountId, id, key.keyId)).rejects.toMatchObject({
      code: 'unauthenticated',
    });
  });

  it('lists backlinks newest first, by date range and category', async () => {
    const all = await backlinksOf(siteId, { page: 1, perPage: 10 });
    expect(all.rows.map((b) => b.acquired_on)).toEqual([
      '2026-11-05',
      '2026-11-05',
      '2026-10-20',
      '2026-10-03',
    ]);
    expect(all.rows[0]?.id.localeCompare(all.rows[1]?.id ?? '')).toBe(1);
    expect((await backlinksOf(siteId, { page: 1, perPage: 10, category: 'local' })).total).toBe(1);
    expect(
      (
        await backlinksOf(siteId, {
          page: 1,
          perPage: 10,
          from: '2026-10-20',
          to: '2026-10-20',
        })
      ).total,
    ).toBe(1);
  });

  /** The site's statistics as the data above makes them, before any status changes (2026-11-10). */
  const october = { articles_published: 3, backlinks_industry: 1, backlinks_local: 1 };
  const november = { articles_published: 1, backlinks_industry: 2, backlinks_local: 0 };

  it('answers each statistics call for its own site, period and account: the statement compiled once binds every value', async () => {
    const today = new Date('2026-11-10T12:00:00Z');
    const { accountId: otherAccount } = await runtime.commands.openAccount({
      name: 'Elsewhere',
      email: 'stats-elsewhere@example.com',
    });
    const { siteId: elsewhere } = await runtime.commands.addSite(otherAccount, {
      name: 'Elsewhere',
      domain: 'stats-elsewhere.example',
      url: 'https://stats-elsewhere.example/',
    });
    // Alternated, so that each call follows one with other values (the site is named twice in it).
    for (let round = 0; round < 2; round++) {
      expect(await statsOf(siteId, resolvePeriod('2026-10', today))).toEqual(october);
      expect(await statsOf(otherSiteId, resolvePeriod('2026-10', today))).toEqual({
        articles_published: 0,
        backlinks_industry: 0,
        backlinks_local: 0,
      });
      expect(await statsOf(siteId, resolvePeriod('2026-11', today))).toEqual(november);
      expect(
        await siteStats(runtime.db, { accountId, siteId: elsewhere }, resolvePeriod('2026-10', today)),
      ).toBeUndefined();
      expect(
        await siteStats(runtime.db, { accountId: otherAccount, siteId }, resolvePeriod('2026-10', today)),
      ).toBeUndefined();
      expect(await statsOf(siteId, resolvePeriod('last_30_days', today))).toMatchObject({
        backlinks_local: 1,
      });
    }
  });

  it('answers period statistics from the buckets, and a status change moves the count', async () => {
    const today = new Date('2026-11-10T12:00:00Z');
    expect(await statsOf(siteId, resolvePeriod('2026-10', today))).toEqual(october);
    expect(await statsOf(siteId, resolvePeriod('this_month', today))).toEqual(november);
    expect(await statsOf(siteId, resolvePeriod('last_30_days', today))).toEqual({
      articles_published: 3,
      backlinks_industry: 2,
      backlinks_local: 1,
    });
    await runtime.commands.changeArticleStatus(
      accountId,
      ids[0] as string,
      { status: 'archived' },
      { origin: 'rewrite', actor: pipelineActor },
    );
    await runtime.commands.changeArticleStatus(
      accountId,
      ids[4] as string,
      { status: 'published', publishedAt: '2026-11-09T08:00:00+02:00' },
      { origin: 'rewrite', actor: pipelineActor },
    );
    await catchUpAll(runtime.db);
    expect((await statsOf(siteId, resolvePeriod('2026-10', today))).articles_published).toBe(2);
    expect((await statsOf(siteId, resolvePeriod('this_month', today))).articles_published).toBe(2);
    expect(await statsOf(siteId, resolvePeriod('2025-01', today))).toEqual({
      articles_published: 0,
      backlinks_industry: 0,
      backlinks_local: 0,
    });
  });

  it('list totals come from the per-site counts and agree with the rows, by status and category', async () => {
    for (const status of ['draft', 'scheduled', 'published', 'archived'] as const) {
      const listed = await articlesOf(siteId, { page: 1, perPage: 100, status });
      expect(listed.total).toBe(listed.rows.length);
    }
    const all = await articlesOf(siteId, { page: 1, perPage: 1 });
    expect(all.total).toBe(5);
    for (const category of ['industry', 'local'] as const) {
      const listed = await backlinksOf(siteId, { page: 1, perPage: 100, category });
      expect(listed.total).toBe(listed.rows.length);
    }
    expect((await backlinksOf(siteId, { page: 1, perPage: 1 })).total).toBe(4);
  });

  it('lists activity: calls and the pipeline’s own changes', async () => {
    const page = await listActivity(runtime.db, accountId, { page: 1, perPage: 100 });
    expect(
      page.rows.some((r) => r.source === 'api' && r.operation === 'list_sites' && r.request_id === 'r1'),
    ).toBe(true);
    expect(page.rows.filter((r) => r.source === 'rewrite' && r.operation === 'create_article')).toHaveLength(
      5,
    );
    const calls = await listActivity(runtime.db, accountId, { page: 1, perPage: 100, source: 'api' });
    expect(calls.total).toBe(1);
  });
});
