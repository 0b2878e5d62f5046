import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, type Principal, unwrap } from '../../apps/application/call.ts';
import type { Application } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import type { BacklinkCategory } from '../../domain/backlink/events.ts';
import { backends } from '../support/db.ts';
import { refusal } from '../support/errors.ts';
import {
  apiKeyActor,
  catchUpAll,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  readingApplication,
  setUpAccount,
} from '../support/runtime.ts';

/*
 * A site's article list and statistics as they stood at an instant (`articles.list` and `sites.stats`
 * with `as_of`), on both backends, with a controlled clock: the articles that existed then with their
 * status, dates, featured image and revision then; the statistics from the backlinks recorded by then
 * and the articles' status then. Read now, they equal the current list and statistics.
 */
describe.each(backends)('a list and statistics as of an instant (%s)', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let app: Application;
  let clock = new Date('2026-10-05T09:00:00.000Z');
  let mine: { accountId: string; siteId: string };
  let theirs: { accountId: string; siteId: string };
  let first: string;
  let second: string;
  const principal = (accountId: string): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'api',
    scope: 'write',
  });
  const call = (accountId = mine.accountId) => callOf(principal(accountId));
  const caller = { origin: 'api' as const, actor: apiKeyActor };
  const page = { page: 1, per_page: 20 };
  const listAsOf = (asOf: string | undefined, more: { status?: 'published' | 'draft' | 'archived' } = {}) =>
    app.articles.list(call(), mine.siteId, { ...page, ...more, as_of: asOf });
  const statsAsOf = (period: string, asOf?: string) => app.sites.stats(call(), mine.siteId, period, asOf);
  const article = (title: string, published: string | null) =>
    runtime.commands.createArticle(
      mine.accountId,
      {
        siteId: mine.siteId,
        title,
        body: protectedBody(title.length),
        url: `https://northside.example/blog/${title.toLowerCase().replaceAll(' ', '-')}`,
        status: published ? 'published' : 'draft',
        publishedAt: published,
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
  const backlink = (acquiredOn: string, category: BacklinkCategory) =>
    runtime.commands.acquireBacklink(mine.accountId, {
      siteId: mine.siteId,
      acquiredOn,
      sourceDomain: 'news.example',
      sourceUrl: `https://news.example/${acquiredOn}/${category}/${clock.getTime()}`,
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside',
      anchorType: 'branded',
      category,
    });

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend, { now: () => clock }));
    app = readingApplication(runtime, () => clock);
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    // 5 October: the first article, published that day.
    ({ articleId: first } = await article('Boiler checks', '2026-10-05T09:00:00Z'));
    // 10 October: the second, a draft.
    clock = new Date('2026-10-10T09:00:00.000Z');
    ({ articleId: second } = await article('Radiator bleeding', null));
    // 20 October: three October backlinks recorded.
    clock = new Date('2026-10-20T10:00:00.000Z');
    await backlink('2026-10-03', 'industry');
    await backlink('2026-10-03', 'industry');
    await backlink('2026-10-15', 'local');
    // 3 November: a late October backlink.
    clock = new Date('2026-11-03T12:00:00.000Z');
    await backlink('2026-10-28', 'local');
    // 4 November: the draft published, backdated into October; the first one retitled.
    clock = new Date('2026-11-04T12:00:00.000Z');
    await runtime.commands.changeArticleStatus(
      mine.accountId,
      second,
      { status: 'published', publishedAt: '2026-10-25T08:00:00Z' },
      caller,
    );
    clock = new Date('2026-11-04T13:00:00.000Z');
    await runtime.commands.editArticle(mine.accountId, first, { title: 'Winter boiler checks' }, caller);
    // 5 November: the first one gets a featured image, then is archived.
    clock = new Date('2026-11-05T09:00:00.000Z');
    await runtime.commands.replaceFeaturedImage(
      mine.accountId,
      first,
      {
        featuredImage: {
          url: 'https://content.example/media/boiler.png',
          alt: 'A boiler',
          width: 800,
          height: 600,
        },
      },
      caller,
    );
    clock = new Date('2026-11-05T10:00:00.000Z');
    await runtime.commands.changeArticleStatus(
      mine.accountId,
      first,
      { status: 'archived', publishedAt: '2026-10-05T09:00:00Z' },
      caller,
    );
    clock = new Date('2026-11-10T09:00:00.000Z');
    await catchUpAll(runtime.db);
  });

  afterAll(async () => {
    await drop?.();
  });

  it('lists the articles that existed then, each with its status and revision then', async () => {
    const reported = unwrap(await listAsOf('2026-11-01T00:05:00Z'));
    expect(reported.meta).toEqual({
      page: 1,
      per_page: 20,
      total: 2,
      total_pages: 1,
      as_of: '2026-11-01T00:05:00Z',
    });
    expect(
      reported.data.map((a) => [a.id, a.title, a.status, a.published_at, a.revision, a.featured_image]),
    ).toEqual([
      [first, 'Boiler checks', 'published', '2026-10-05T09:00:00Z', 1, null],
      [second, 'Radiator bleeding', 'draft', null, 1, null],
    ]);
    expect(reported.data[0]?.updated_at).toBe('2026-10-05T09:00:00Z');

    const early = unwrap(await listAsOf('2026-10-07T00:00:00Z'));
    expect(early.data.map((a) => a.id)).toEqual([first]);
    expect(unwrap(await listAsOf('2026-10-01T00:00:00Z')).meta.total).toBe(0);

    // Between the retitle (13:00) and the featured image (next day): the new title, no image yet.
    const retitled = unwrap(await listAsOf('2026-11-04T13:00:00Z'));
    expect(retitled.data.map((a) => [a.id, a.title, a.status, a.revision, a.featured_image])).toEqual([
      [second, 'Radiator bleeding', 'published', 2, null],
      [first, 'Winter boiler checks', 'published', 2, null],
    ]);
    const pictured = unwrap(await listAsOf('2026-11-05T09:30:00Z'));
    expect(pictured.data.find((a) => a.id === first)?.featured_image?.url).toBe(
      'https://content.example/media/boiler.png',
    );
  });

  it('filters and pages by the status then', async () => {
    const then = unwrap(await listAsOf('2026-11-01T00:05:00Z', { status: 'published' }));
    expect(then.data.map((a) => a.id)).toEqual([first]);
    expect(then.meta.total).toBe(1);
    const now = unwrap(await listAsOf('2026-11-10T00:00:00Z', { status: 'archived' }));
    expect(now.data.map((a) => a.id)).toEqual([first]);
    const second_page = unwrap(
      await app.articles.list(call(), mine.siteId, { page: 2, per_page: 1, as_of: '2026-11-01T00:05:00Z' }),
    );
    expect(second_page.data.map((a) => a.id)).toEqual([second]);
    expect(second_page.meta).toMatchObject({ page: 2, total: 2, total_pages: 2 });
  });

  it('read now, equals the current list', async () => {
    const current = unwrap(await listAsOf(undefined));
    const asOfNow = unwrap(await listAsOf('2026-11-10T09:00:00Z'));
    expect(asOfNow.data).toEqual(current.data);
    expect(asOfNow.meta).toEqual({ ...current.meta, as_of: '2026-11-10T09:00:00Z' });
  });

  it('counts what had been recorded by then: the October report as made on 1 November', async () => {
    expect(unwrap(await statsAsOf('2026-10', '2026-11-01T00:05:00Z'))).toEqual({
      site_id: mine.siteId,
      period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
      articles: { published: 1 },
      backlinks: { total: 3, industry: 2, local: 1 },
      as_of: '2026-11-01T00:05:00Z',
    });
    // Before the backlinks were recorded, and before anything.
    expect(unwrap(await statsAsOf('2026-10', '2026-10-20T09:59:59Z')).backlinks.total).toBe(0);
    expect(unwrap(await statsAsOf('2026-10', '2026-09-01T00:00:00Z'))).toMatchObject({
      articles: { published: 0 },
      backlinks: { total: 0 },
    });
    // After the backdated publication and before the archiving: both articles count.
    expect(unwrap(await statsAsOf('2026-10', '2026-11-05T09:59:59Z')).articles.published).toBe(2);
  });

  it('counts a relative period from the instant’s day', async () => {
    const then = unwrap(await statsAsOf('this_month', '2026-10-20T12:00:00Z'));
    expect(then.period).toEqual({ key: 'this_month', from: '2026-10-01', to: '2026-10-31' });
    expect(then.backlinks).toEqual({ total: 3, industry: 2, local: 1 });
    expect(unwrap(await statsAsOf('last_month', '2026-11-01T00:05:00Z')).period.key).toBe('last_month');
  });

  it('read now, equals the current statistics', async () => {
    for (const period of ['2026-10', '2026-11', 'this_month', 'last_30_days']) {
      const { as_of: echoed, ...asOfNow } = unwrap(await statsAsOf(period, '2026-11-10T09:00:00Z'));
      expect(echoed).toBe('2026-11-10T09:00:00Z');
      expect(asOfNow).toEqual(unwrap(await statsAsOf(period)));
    }
    expect(unwrap(await statsAsOf('2026-10'))).toMatchObject({
      articles: { published: 1 },
      backlinks: { total: 4, industry: 2, local: 2 },
    });
  });

  it('refuses a future instant naming as_of, and never shows another account’s site', async () => {
    for (const outcome of [
      await listAsOf('2026-11-10T09:00:01Z'),
      await statsAsOf('2026-10', '2026-12-01T00:00:00Z'),
    ]) {
      expect(outcome.ok).toBe(false);
      if (outcome.ok) continue;
      expect(outcome.error).toMatchObject({
        code: 'invalid_request',
        errors: [{ in: 'query', name: 'as_of', message: 'must not be in the future' }],
      });
    }
    const asOf = '2026-11-01T00:00:00Z';
    expect(
      await refusal(app.articles.list(call(theirs.accountId), mine.siteId, { ...page, as_of: asOf })),
    ).toBe('not_found');
    expect(await refusal(app.sites.stats(call(theirs.accountId), mine.siteId, '2026-10', asOf))).toBe(
      'not_found',
    );
  });
});
