import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';
import { anotherAccountsSite, apiJson, stats, waitForReadModels } from './site-helpers.ts';

/*
 * `/sites` and `/sites/{id}` in headless Chromium with JavaScript off: the lists against the API's
 * answers, the filters typed with the keyboard, paging, refused filters, another account's site.
 */

const ARTICLES = 30;
const BACKLINKS = 26;

type ArticleList = { data: { id: string; title: string }[]; meta: { total: number; total_pages: number } };
type BacklinkList = {
  data: { id: string; category: string; source_domain: string }[];
  meta: { total: number };
};

describe('the sites pages', () => {
  let web: WebApp;
  let context: BrowserContext;
  let site: { id: string; domain: string };

  beforeAll(async () => {
    web = await startWebApp({ articles: ARTICLES, backlinks: BACKLINKS });
    await waitForReadModels(web, BACKLINKS);
    context = await web.signedIn();
    site = web.demo.sites[0] as { id: string; domain: string };
  });
  afterAll(async () => {
    await web?.stop();
  });

  async function open(path: string): Promise<{ page: Page; status: number }> {
    const page = await context.newPage();
    const response = await page.goto(`${web.url}${path}`);
    return { page, status: response?.status() ?? 0 };
  }

  const cells = (page: Page, table: string, column: number): Promise<string[]> =>
    page.$$eval(
      `#${table} tbody tr`,
      (rows, c) => rows.map((r) => r.children[c]?.textContent?.trim() ?? ''),
      column,
    );

  it("lists the account's sites with their articles and this month's counts, each linking to its page", async () => {
    const { page, status } = await open('/sites');
    expect(status).toBe(200);
    const rows = await page.$$eval('#sites tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim())),
    );
    expect(rows).toHaveLength(2);
    const month = new Date().toISOString().slice(0, 7);
    for (const [i, demo] of web.demo.sites.entries()) {
      const articles = await apiJson<ArticleList>(web, `/sites/${demo.id}/articles?per_page=1`);
      const monthly = await stats(web, demo.id, month);
      expect(rows[i]?.slice(1, 5)).toEqual([
        demo.domain,
        String(articles.meta.total),
        String(monthly.articles.published),
        String(monthly.backlinks.total),
      ]);
    }
    const links = await page.$$eval('#sites tbody td:first-child a', (as) =>
      as.map((a) => a.getAttribute('href')),
    );
    expect(links).toEqual(web.demo.sites.map((s) => `/sites/${s.id}`));
    expect(await page.getAttribute('nav.site a[href="/sites"]', 'aria-current')).toBe('page');
    await screenshot(page, 'sites');
    const narrow = await web.signedIn({ width: 390 });
    const small = await narrow.newPage();
    await small.goto(`${web.url}/sites`);
    expect(await small.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(small, 'sites-390');
  });

  it("pages through a site's articles as the API lists them, each linking to its article", async () => {
    const { page } = await open('/sites');
    await Promise.all([page.waitForNavigation(), page.click(`#sites a[href="/sites/${site.id}"]`)]);
    expect(new URL(page.url()).pathname).toBe(`/sites/${site.id}`);
    expect(await page.textContent('h1')).toBe('Northside Plumbing');
    const api = await apiJson<ArticleList>(web, `/sites/${site.id}/articles?per_page=20`);
    expect(
      await page.$$eval('#articles tbody td:first-child a', (as) => as.map((a) => a.getAttribute('href'))),
    ).toEqual(api.data.map((a) => `/articles/${a.id}`));
    expect(await page.textContent('#articles-count')).toContain(`${ARTICLES} articles`);
    expect(await page.textContent('nav[aria-label="Pages of articles"]')).toContain('Page 1 of 2');
    await expectLabelled(page);
    await screenshot(page, 'site');

    await Promise.all([
      page.waitForNavigation(),
      page.click('nav[aria-label="Pages of articles"] a[rel=next]'),
    ]);
    const second = await apiJson<ArticleList>(web, `/sites/${site.id}/articles?per_page=20&page=2`);
    expect(await cells(page, 'articles', 0)).toEqual(second.data.map((a) => a.title));
    expect(await page.textContent('nav[aria-label="Pages of articles"]')).toContain('Page 2 of 2');
    expect(await page.$('nav[aria-label="Pages of articles"] a[rel=next]')).toBeNull();
    await Promise.all([
      page.waitForNavigation(),
      page.click('nav[aria-label="Pages of articles"] a[rel=prev]'),
    ]);
    expect(new URL(page.url()).searchParams.get('page')).toBe('1');
  });

  it('filters the articles by dates and status typed with the keyboard, as the API does', async () => {
    const { page } = await open(`/sites/${site.id}`);
    const from = new Date(Date.now() - 90 * 86_400_000).toISOString().slice(0, 10);
    const to = new Date().toISOString().slice(0, 10);
    await page.fill('#from', from);
    await page.fill('#to', to);
    await page.selectOption('#status', 'published');
    await Promise.all([page.waitForNavigation(), page.press('#to', 'Enter')]);
    const url = new URL(page.url());
    expect(Object.fromEntries(url.searchParams)).toEqual({ from, to, status: 'published' });
    const api = await apiJson<ArticleList>(
      web,
      `/sites/${site.id}/articles?from=${from}&to=${to}&status=published&per_page=20`,
    );
    expect(api.meta.total).toBeGreaterThan(0);
    expect(api.meta.total).toBeLessThan(ARTICLES);
    expect(await cells(page, 'articles', 0)).toEqual(api.data.map((a) => a.title));
    expect(new Set(await cells(page, 'articles', 1))).toEqual(new Set(['Published']));
    // The form shows the filter it applied.
    expect(await page.inputValue('#from')).toBe(from);
    expect(await page.inputValue('#status')).toBe('published');
    await screenshot(page, 'site-filtered');
  });

  it('filters and pages the backlinks by category, keeping the articles filter', async () => {
    const { page } = await open(`/sites/${site.id}?status=published`);
    const all = await apiJson<BacklinkList>(web, `/sites/${site.id}/backlinks?per_page=20`);
    expect(await cells(page, 'backlinks', 1)).toEqual(all.data.map((b) => b.source_domain));
    expect(await page.textContent('nav[aria-label="Pages of backlinks"]')).toContain('Page 1 of 2');

    await page.selectOption('#category', 'local');
    await Promise.all([page.waitForNavigation(), page.click('#backlink-filters button')]);
    const url = new URL(page.url());
    expect(url.searchParams.get('category')).toBe('local');
    expect(url.searchParams.get('status')).toBe('published');
    const local = await apiJson<BacklinkList>(web, `/sites/${site.id}/backlinks?category=local&per_page=20`);
    expect(local.meta.total).toBeGreaterThan(0);
    expect(local.meta.total).toBeLessThan(BACKLINKS);
    expect(await page.textContent('#backlinks-count')).toContain(`${local.meta.total} backlink`);
    expect(new Set(await cells(page, 'backlinks', 3))).toEqual(new Set(['Local']));

    const { page: second } = await open(`/sites/${site.id}?backlinks_page=2`);
    const api = await apiJson<BacklinkList>(web, `/sites/${site.id}/backlinks?per_page=20&page=2`);
    expect(await cells(second, 'backlinks', 1)).toEqual(api.data.map((b) => b.source_domain));
    expect(await second.textContent('nav[aria-label="Pages of backlinks"]')).toContain('Page 2 of 2');
  });

  it('shows the form again with what is wrong for refused filters, never a server error', async () => {
    const { page } = await open(`/sites/${site.id}`);
    await page.fill('#from', '2026-05-10');
    await page.fill('#to', '2026-05-01');
    const [response] = await Promise.all([page.waitForNavigation(), page.press('#from', 'Enter')]);
    expect(response?.status()).toBe(400);
    expect(await page.textContent('#filter-errors')).toContain(
      'Published from: must not be after the end date',
    );
    expect(await page.inputValue('#from')).toBe('2026-05-10');
    expect(await page.inputValue('#to')).toBe('2026-05-01');
    expect(await page.$('#articles')).toBeNull();
    await screenshot(page, 'site-bad-filter');

    const odd = await open(`/sites/${site.id}?status=lost&page=0&category=global&from=2026-02-30`);
    expect(odd.status).toBe(400);
    const errors = await odd.page.$$eval('#filter-errors li', (lis) => lis.map((li) => li.textContent));
    expect(errors).toEqual([
      'Published from: must be a date YYYY-MM-DD',
      'Status: must be one of draft, scheduled, published, archived',
      'Page of articles: must be a whole number from 1',
      'Category: must be one of industry, local',
    ]);
    const twice = await open(`/sites/${site.id}?page=1&page=2`);
    expect(twice.status).toBe(400);
    expect(await twice.page.textContent('#filter-errors')).toContain('Page of articles: must be given once');
  });

  it("answers another account's site and an unknown one with the not-found page", async () => {
    const theirs = await anotherAccountsSite(web);
    for (const id of [theirs, 'site_unknown']) {
      const { page, status } = await open(`/sites/${id}`);
      expect(status).toBe(404);
      expect(await page.textContent('h1')).toBe('Not found');
      expect(await page.$('#article-filters')).toBeNull();
    }
    const { page } = await open(`/sites/${theirs}?status=lost`);
    expect(await page.textContent('h1')).toBe('Not found');
    await screenshot(page, 'site-not-found');
  });

  it('sends a signed-out person to sign in, coming back to the page', async () => {
    const res = await fetch(`${web.url}/sites/${site.id}?status=draft`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(
      `/sign-in?return_to=${encodeURIComponent(`/sites/${site.id}?status=draft`)}`,
    );
  });

  it('fits a phone: no sideways scrolling, the tables as labelled rows', async () => {
    const narrow = await web.signedIn({ width: 390 });
    const page = await narrow.newPage();
    const res = await page.goto(`${web.url}/sites/${site.id}`);
    expect(res?.headers()['cache-control']).toBe('no-store');
    expect(res?.headers()['content-security-policy']).toContain("style-src 'self'");
    expect(await page.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(page, 'site-390');
  });
});
