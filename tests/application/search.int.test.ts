import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, type Outcome, type Principal, unwrap } from '../../apps/application/call.ts';
import type { Application } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { MARK_END, MARK_START, SEARCH_RANKED_MAX, SNIPPET_MAX } from '../../domain/article/search.ts';
import { DomainError } from '../../domain/errors.ts';
import { mergeSearchPending } from '../../infra/jobs/housekeeping.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { createArticlesProjector, searchArticles, walksTitles } from '../../projections/articles.ts';
import { backends } from '../support/db.ts';
import { refusal } from '../support/errors.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  readingApplication,
  setUpAccount,
  snapshotTables,
} from '../support/runtime.ts';

/*
 * Full-text search of an account's articles (`articles.search`) on both backends: what matches, in
 * which order, with which snippet, and never another account's article.
 */

describe.each(backends)('searching articles (%s)', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let app: Application;
  let mine: { accountId: string; siteId: string; otherSiteId: string };
  let theirs: { accountId: string; siteId: string; otherSiteId: string };
  const ids: Record<string, string> = {};
  const principal = (accountId: string): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'api',
    scope: 'write',
  });
  const search = (q: string, more: Record<string, unknown> = {}, accountId = mine.accountId) =>
    app.articles.search(callOf(principal(accountId)), { q, page: 1, per_page: 20, ...more });
  const found = async (q: string, more: Record<string, unknown> = {}): Promise<string[]> =>
    unwrap(await search(q, more)).data.map((hit) => hit.id);
  const nameOf = (id: string): string | undefined => Object.entries(ids).find(([, v]) => v === id)?.[0];
  const names = async (q: string, more: Record<string, unknown> = {}): Promise<(string | undefined)[]> =>
    (await found(q, more)).map(nameOf);

  const longBody =
    `<p>${'Pipes and fittings are covered in the first part of this guide. '.repeat(12)}</p>` +
    '<p>When the <strong>pressure</strong> gauge drops below one bar, top up the system.</p>' +
    `<p>${'Radiators come last, with a word on &amp; valves. '.repeat(12)}</p>`;

  async function article(
    name: string,
    accountId: string,
    siteId: string,
    data: {
      title: string;
      body: string;
      targetKeyword?: string;
      status?: 'published' | 'draft';
      at?: string;
    },
  ): Promise<void> {
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: data.title,
        body: data.body,
        url: `https://northside.example/blog/${name}`,
        status: data.status ?? 'published',
        publishedAt: data.status === 'draft' ? null : (data.at ?? '2026-10-01T09:00:00Z'),
        targetKeyword: data.targetKeyword ?? null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    ids[name] = articleId;
  }

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    app = readingApplication(runtime, () => new Date());
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    await article('titled', mine.accountId, mine.siteId, {
      title: 'Boiler pressure explained',
      body: '<p>Why the gauge drops and what to do about it.</p>',
      at: '2026-09-01T09:00:00Z',
    });
    await article('mentioned', mine.accountId, mine.siteId, {
      title: 'Garden design for small yards',
      body: '<p>Keep the shed away from the boiler flue, and plan the beds first.</p>',
      at: '2026-10-01T09:00:00Z',
    });
    await article('combi', mine.accountId, mine.otherSiteId, {
      title: 'Radiators in winter',
      body: '<p>A combi boiler heats water on demand; a gas supply is needed.</p>',
      at: '2026-10-02T09:00:00Z',
    });
    await article('keyword', mine.accountId, mine.siteId, {
      title: 'Heating questions',
      body: '<p>Answers to what customers ask most.</p>',
      targetKeyword: 'underfloor heating',
      status: 'draft',
    });
    await article('long', mine.accountId, mine.siteId, { title: 'A long guide', body: longBody });
    await article('late', mine.accountId, mine.otherSiteId, {
      title: 'Low loss headers',
      // The searched words past the body's start, after a link; a word whose stem does not begin it
      // ("happy", stem "happi") further on.
      body:
        `<p>${'Balancing a system takes patience and a steady hand. '.repeat(30)}</p>` +
        `<p><a href="https://example.com/${'x'.repeat(150)}">The guide</a> says: fit a hydraulic separator last.</p>` +
        `<p>${'Flush the circuit before filling it again. '.repeat(30)}Customers are happy with it.</p>`,
    });
    await article('foreign', theirs.accountId, theirs.siteId, {
      title: 'Boiler pressure for rivals',
      body: '<p>The boiler of another account, combi boiler and all.</p>',
    });
  });

  afterAll(async () => {
    await drop?.();
  });

  it('ranks a match in the title above matches in the body, then newest published first', async () => {
    expect(await names('boiler')).toEqual(['titled', 'combi', 'mentioned']);
    const [first] = unwrap(await search('boiler')).data;
    expect(first?.match.score).toBeGreaterThan(0);
    // Words in any form: "boilers" is "boiler".
    expect(await names('boilers')).toEqual(['titled', 'combi', 'mentioned']);
  });

  it('finds a phrase only in its order, leaves out -excluded words, and takes either side of `or`', async () => {
    expect(await names('"combi boiler"')).toEqual(['combi']);
    expect(await names('"boiler combi"')).toEqual([]);
    expect((await names('boiler -gas')).sort()).toEqual(['mentioned', 'titled']);
    expect((await names('shed or winter')).sort()).toEqual(['combi', 'mentioned']);
    expect(await names('underfloor')).toEqual(['keyword']);
  });

  it('matches the words in the title and keyword together or in the body, and excludes a word found in any of them', async () => {
    // "pressure" is in one title, "drops" in that article's body: apart, they do not make a match.
    expect(await names('pressure drops')).toEqual(['long']);
    expect((await names('pressure')).sort()).toEqual(['long', 'titled']);
    // "gauge" is in the body of both: excluded, whichever side held "pressure".
    expect(await names('pressure -gauge')).toEqual([]);
    expect(await names('boiler pressure -gauge')).toEqual([]);
    expect(await names('heating underfloor')).toEqual(['keyword']);
  });

  it('refuses a search of only common words, or of nothing, naming q', async () => {
    for (const q of ['the and of', '   ', '!!']) {
      const outcome = await search(q);
      expect(outcome.ok).toBe(false);
      const error = (outcome as Extract<Outcome<unknown>, { ok: false }>).error as DomainError;
      expect(error).toBeInstanceOf(DomainError);
      expect(error.code).toBe('invalid_request');
      expect(error.errors).toEqual([{ in: 'query', name: 'q', message: expect.any(String) }]);
    }
  });

  it("never finds another account's articles, and answers another account's site as a missing one", async () => {
    const all = await found('boiler pressure rivals');
    expect(all).toEqual([]);
    expect(await found('boiler')).not.toContain(ids.foreign);
    expect(await refusal(search('boiler', { site_id: theirs.siteId }))).toBe('not_found');
    expect(await refusal(search('boiler', { site_id: 'site_missing' }))).toBe('not_found');
    const theirsFound = unwrap(await search('boiler', {}, theirs.accountId)).data.map((h) => h.id);
    expect(theirsFound).toEqual([ids.foreign]);
  });

  it('filters by site, status and publication dates, and pages with the total', async () => {
    expect(await names('boiler', { site_id: mine.otherSiteId })).toEqual(['combi']);
    expect(await names('heating', { status: 'draft' })).toEqual(['keyword']);
    expect(await names('boiler', { from: '2026-10-01', to: '2026-10-01' })).toEqual(['mentioned']);
    const page = unwrap(await search('boiler', { per_page: 2, page: 2 }));
    expect(page.data.map((h) => nameOf(h.id))).toEqual(['mentioned']);
    expect(page.meta).toEqual({ page: 2, per_page: 2, total: 3, total_pages: 2 });
    const past = unwrap(await search('boiler', { per_page: 2, page: 5 }));
    expect(past.data).toEqual([]);
    expect(past.meta.total).toBe(3);
  });

  it('gives a plain-text snippet of at most SNIPPET_MAX characters whose highlights are the matched words', async () => {
    const [hit] = unwrap(await search('pressure gauge', { site_id: mine.siteId })).data.filter(
      (h) => h.id === ids.long,
    );
    expect(hit).toBeDefined();
    if (!hit) return;
    const { snippet, highlights } = hit.match;
    expect(snippet.length).toBeLessThanOrEqual(SNIPPET_MAX);
    expect(snippet).not.toMatch(/[<>]/);
    expect([...snippet].some((c) => c === MARK_START || c === MARK_END)).toBe(false);
    expect(highlights.length).toBeGreaterThan(0);
    for (const [start, end] of highlights) {
      expect(['pressure', 'gauge']).toContain(snippet.slice(start, end).toLowerCase());
    }
    // A word past the start of a long body is found and shown too.
    const late = unwrap(await search('hydraulic separator')).data;
    expect(late.map((h) => nameOf(h.id))).toEqual(['late']);
    const lateHit = late[0]?.match;
    expect(lateHit?.highlights.map(([start, end]) => lateHit.snippet.slice(start, end))).toEqual([
      'hydraulic',
      'separator',
    ]);
    // The words around them, and none of the link's markup.
    expect(lateHit?.snippet).toMatch(/The guide says: fit a hydraulic separator last\./);
    expect(lateHit?.snippet).not.toMatch(/x{3}|href/);
    // Another form of the word (stem "separ") is found where it is written.
    const inflected = unwrap(await search('separators')).data.find((h) => h.id === ids.late)?.match;
    expect(inflected?.highlights.map(([start, end]) => inflected.snippet.slice(start, end))).toEqual([
      'separator',
    ]);
    // So is a word whose stem does not begin it.
    const happy = unwrap(await search('happy')).data.find((h) => h.id === ids.late)?.match;
    expect(happy?.highlights.map(([start, end]) => happy.snippet.slice(start, end))).toEqual(['happy']);
    const amp = unwrap(await search('valves')).data.find((h) => h.id === ids.long);
    expect(amp?.match.snippet).toContain('& valves');
  });

  it('finds an edit by its new words as soon as the edit is answered, title alone or body', async () => {
    const call = callOf(principal(mine.accountId));
    unwrap(
      await app.articles.edit(call, { articleId: ids.mentioned as string, title: 'Patio paving ideas' }),
    );
    expect(await names('patio')).toEqual(['mentioned']);
    // A new title keeps the body's words.
    expect(await names('shed')).toEqual(['mentioned']);
    expect(await names('garden')).toEqual([]);
    unwrap(
      await app.articles.edit(call, {
        articleId: ids.mentioned as string,
        body: '<p>Lay the slabs on a bed of sharp sand.</p>',
      }),
    );
    expect(await names('slabs sand')).toEqual(['mentioned']);
    expect(await names('shed')).toEqual([]);
    expect(await names('patio')).toEqual(['mentioned']);
  });

  it("finds the same articles whether an edit's words wait in the indexes' pending lists or are merged into them", async () => {
    const call = callOf(principal(mine.accountId));
    unwrap(
      await app.articles.edit(call, {
        articleId: ids.mentioned as string,
        title: 'Patio paving and pergola ideas',
        body: '<p>Lay the slabs on a bed of sharp sand under the pergola.</p>',
      }),
    );
    const searches = ['pergola', 'slabs sand', 'patio', 'shed', 'pressure'];
    const pending = await Promise.all(searches.map((q) => names(q)));
    expect(pending.slice(0, 3)).toEqual([['mentioned'], ['mentioned'], ['mentioned']]);
    const merged = await mergeSearchPending({ db: runtime.db });
    expect(merged.titles).toBeGreaterThan(0);
    expect(merged.bodies).toBeGreaterThan(0);
    expect(await mergeSearchPending({ db: runtime.db })).toEqual({ titles: 0, bodies: 0 });
    expect(await Promise.all(searches.map((q) => names(q)))).toEqual(pending);
  });

  it('rebuilds the search vectors as the edits left them', async () => {
    const before = await snapshotTables(runtime.db, ['article_bodies', 'article_title_search']);
    await rebuild(runtime.db, createArticlesProjector(undefined, runtime.searchLanguage));
    expect(await snapshotTables(runtime.db, ['article_bodies', 'article_title_search'])).toEqual(before);
    expect(await names('patio')).toEqual(['mentioned']);
  });

  // The title side read newest first (`walked`) or found through its GIN index (`found`): the same page
  // and total for every search, filter and exclusion.
  it('answers the same whether the titles are read newest first or found through their index', async () => {
    let hits = 0;
    for (const text of [
      'boiler',
      'boiler pressure',
      'boiler -combi',
      '"boiler pressure"',
      'radiators or garden',
      'heating',
      'guide',
      'underfloor',
      'water -gas',
      '-combi',
    ])
      for (const more of [
        {},
        { siteId: mine.siteId },
        { status: 'draft' as const },
        { from: '2026-10-01' },
      ]) {
        const q = {
          accountId: mine.accountId,
          text,
          language: runtime.searchLanguage,
          page: 1,
          perPage: 20,
          ...more,
        };
        const walked = await searchArticles(runtime.db, q, { titles: 'walked' });
        expect(walked, `${text} ${JSON.stringify(more)}`).toEqual(
          await searchArticles(runtime.db, q, { titles: 'found' }),
        );
        if (walked.kind === 'page') hits += walked.page.rows.length;
      }
    expect(hits).toBeGreaterThan(20);
  });

  it.skipIf(backend !== 'postgres')(
    'ranks and counts the newest SEARCH_RANKED_MAX of a search that matches more, and still finds an older one by a rarer word',
    async () => {
      const many = await setUpAccount(runtime, 'Lighthouse Ltd');
      const extra = 3;
      const day = (i: number) => new Date(Date.UTC(2020, 0, 1) + i * 3_600_000).toISOString();
      for (let start = 0; start < SEARCH_RANKED_MAX + extra; start += 50) {
        await Promise.all(
          Array.from({ length: Math.min(50, SEARCH_RANKED_MAX + extra - start) }, (_, k) =>
            article(`lamp-${start + k}`, many.accountId, many.siteId, {
              title: start + k === 0 ? 'The oldest keeper' : `Keeper ${start + k}`,
              body: '<p>The lighthouse lamp turns all night.</p>',
              at: day(start + k),
            }),
          ),
        );
      }
      const page = unwrap(await search('lighthouse lamp', { per_page: 100 }, many.accountId));
      expect(page.meta.total).toBe(SEARCH_RANKED_MAX);
      // The newest first among equals: the oldest `extra` are past the ranked ones.
      expect(page.data[0]?.id).toBe(ids[`lamp-${SEARCH_RANKED_MAX + extra - 1}`]);
      const older = unwrap(await search('oldest keeper', {}, many.accountId));
      expect(older.data.map((hit) => hit.id)).toEqual([ids['lamp-0']]);
      // A word of every title: at least √(SEARCH_RANKED_MAX × the account's 1,003 articles) titles hold
      // it, so its titles are read newest first; a rarer one's are found through the index. Both answer
      // as the other way would.
      const words = { accountId: many.accountId, language: runtime.searchLanguage };
      expect(await walksTitles(runtime.db, { ...words, text: 'keeper' })).toBe(true);
      expect(await walksTitles(runtime.db, { ...words, text: 'oldest keeper' })).toBe(false);
      const keepers = unwrap(await search('keeper', { per_page: 100 }, many.accountId));
      expect(keepers.meta.total).toBe(SEARCH_RANKED_MAX);
      expect(keepers.data[0]?.id).toBe(ids[`lamp-${SEARCH_RANKED_MAX + extra - 1}`]);
      for (const text of ['keeper', 'oldest keeper', 'keeper -oldest']) {
        const q = { ...words, text, page: 2, perPage: 100 };
        expect(await searchArticles(runtime.db, q, { titles: 'walked' })).toEqual(
          await searchArticles(runtime.db, q, { titles: 'found' }),
        );
      }
    },
    120_000,
  );
});
