import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The activity log page (`/activity`) in headless Chromium with JavaScript off: records with their
 * revision links, the API's filters as a GET form, pages, and bad filters.
 */

type Row = Record<string, string>;
/** What the row reader uses of a DOM element (the tests are typed without the DOM library). */
type Cell = {
  getAttribute(name: string): string | null;
  textContent: string | null;
  querySelector(selector: string): Cell | null;
};

/** The table's rows, each cell by its column's label, and each link's address by column. */
async function rowsOf(page: Page): Promise<{ cells: Row; links: Row }[]> {
  return page.$$eval('table.activity-log tbody tr', (trs) =>
    trs.map((tr) => {
      const cells: Record<string, string> = {};
      const links: Record<string, string> = {};
      for (const td of Array.from(tr.querySelectorAll('td')) as unknown as Cell[]) {
        const label = td.getAttribute('data-label') ?? '';
        cells[label] = td.textContent?.replace(/\s+/g, ' ').trim() ?? '';
        const a = td.querySelector('a');
        if (a) links[label] = a.getAttribute('href') ?? '';
      }
      return { cells, links };
    }),
  );
}

describe('the activity log page', () => {
  let web: WebApp;
  let articleId: string;
  let siteId: string;

  beforeAll(async () => {
    web = await startWebApp();
    siteId = web.demo.sites[0]?.id as string;
    const list = (await (await web.api(`/sites/${siteId}/articles?per_page=1`)).json()) as {
      data: { id: string }[];
    };
    articleId = list.data[0]?.id as string;
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('sends a signed-out person to sign in, coming back to the log', async () => {
    const res = await fetch(`${web.url}/activity?source=api`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(
      `/sign-in?return_to=${encodeURIComponent('/activity?source=api')}`,
    );
  });

  it('shows an edit made through the API with a link to the revision it created', async () => {
    const edit = await web.api(`/articles/${articleId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'if-match': 'W/"1"' },
      body: JSON.stringify({ title: 'Boilers, serviced every year', reason: 'clearer' }),
    });
    expect(edit.status).toBe(200);
    const context = await web.signedIn();
    const page = await context.newPage();
    // The call's record is stored a moment after its answer.
    let rows: { cells: Row; links: Row }[] = [];
    for (let i = 0; i < 50; i++) {
      const response = await page.goto(`${web.url}/activity`);
      expect(response?.status()).toBe(200);
      rows = await rowsOf(page);
      if (rows.some((r) => r.cells.Operation === 'Update article')) break;
      await page.waitForTimeout(100);
    }
    const response = await page.goto(`${web.url}/activity`);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(response?.headers()['content-security-policy']).toContain("default-src 'none'");
    expect(await page.$eval('nav.site a[aria-current=page]', (a) => a.textContent)).toBe('Activity');
    expect(await page.$$eval('h1, h2', (hs) => hs.map((h) => `${h.tagName} ${h.textContent}`))).toEqual([
      'H1 Activity',
      'H2 Filters',
      'H2 Records',
    ]);
    const updated = rows.find((r) => r.cells.Operation === 'Update article');
    expect(updated?.cells).toMatchObject({
      Source: 'API',
      Article: 'Boilers, serviced every year',
      // The revision, and its changes from the one before (the compare page).
      Revision: 'Revision 2 Changes from revision 1 to 2',
      Status: '200 OK',
    });
    expect(updated?.cells.Who).toMatch(/API key$/);
    expect(updated?.cells['Request id']).toMatch(/^req_[0-9a-z]{26}$/);
    expect(updated?.links).toEqual({
      Site: `/sites/${siteId}`,
      Article: `/articles/${articleId}`,
      Revision: `/articles/${articleId}/revisions/2`,
    });
    // A read created no revision: no link. Newest first.
    const read = rows.find((r) => r.cells.Operation === 'List articles');
    expect(read?.cells.Revision).toBe('—');
    const times = rows.map((r) => r.cells['Time (UTC)'] ?? '');
    expect(times).toEqual([...times].sort().reverse());
    await expectLabelled(page);
    await screenshot(page, 'activity');
    // The record opens the revision it created.
    await Promise.all([page.waitForNavigation(), page.click(`a[href="/articles/${articleId}/revisions/2"]`)]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}/revisions/2`);
    expect(await page.textContent('h1')).toContain('Revision 2');
    expect(await page.textContent('main')).toContain('Boilers, serviced every year');

    const phone = await (await web.signedIn({ width: 390 })).newPage();
    await phone.goto(`${web.url}/activity`);
    // Nothing wider than the screen: the table stacks its cells.
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(phone, 'activity-phone');
  });

  it('filters by source, site and article with the form, and pages through the records keeping the filters', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/activity`);
    // A person picks the pipeline's changes of the first site and sends the form from the keyboard.
    await page.selectOption('#source', 'rewrite');
    await page.selectOption('#site_id', siteId);
    await page.focus('#article_id');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const url = new URL(page.url());
    expect(url.pathname).toBe('/activity');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      from: '',
      to: '',
      source: 'rewrite',
      site_id: siteId,
      article_id: '',
    });
    const created = await rowsOf(page);
    // The seed's six articles of the site, each created by the pipeline as revision 1.
    expect(created).toHaveLength(6);
    for (const r of created) {
      expect(r.cells).toMatchObject({
        Source: 'Content pipeline',
        Operation: 'Create article',
        Revision: 'Revision 1',
      });
      expect(r.links.Site).toBe(`/sites/${siteId}`);
      expect(r.links.Revision).toBe(`${r.links.Article}/revisions/1`);
    }
    expect(await page.inputValue('#source')).toBe('rewrite');

    // One article, typed in.
    await page.selectOption('#site_id', '');
    await page.fill('#article_id', '');
    await page.focus('#article_id');
    await page.keyboard.type(articleId);
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const one = await rowsOf(page);
    expect(one).toHaveLength(1);
    expect(one[0]?.links.Article).toBe(`/articles/${articleId}`);
    await screenshot(page, 'activity-filtered');

    // Pages of five: the links keep the filters and the page size.
    await page.goto(`${web.url}/activity?source=rewrite&per_page=5`);
    expect(await page.textContent('nav.pager')).toContain('Page 1 of 3 · 12 records');
    expect(await page.$('nav.pager a[rel=prev]')).toBeNull();
    const first = (await rowsOf(page)).map((r) => r.links.Article);
    await Promise.all([page.waitForNavigation(), page.click('nav.pager a[rel=next]')]);
    expect(new URL(page.url()).search).toBe('?source=rewrite&page=2&per_page=5');
    const second = (await rowsOf(page)).map((r) => r.links.Article);
    expect(second).toHaveLength(5);
    expect(second.filter((a) => first.includes(a))).toEqual([]);
    await Promise.all([page.waitForNavigation(), page.click('nav.pager a[rel=next]')]);
    expect(await rowsOf(page)).toHaveLength(2);
    expect(await page.$('nav.pager a[rel=next]')).toBeNull();
    expect(await page.textContent('nav.pager')).toContain('Page 3 of 3');
    await screenshot(page, 'activity-last-page');
    await Promise.all([page.waitForNavigation(), page.click('nav.pager a[rel=prev]')]);
    expect((await rowsOf(page)).map((r) => r.links.Article)).toEqual(second);

    // Past the end, and nothing matching.
    await page.goto(`${web.url}/activity?source=rewrite&per_page=5&page=9`);
    expect(await page.textContent('#no-records')).toContain('no records on this page');
    await page.goto(`${web.url}/activity?source=system`);
    expect(await page.textContent('#no-records')).toBe('No activity matches these filters.');
  });

  it('brings the form back with each bad filter named, keeping what was asked', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/activity`);
    await page.fill('#from', '2026-11-10');
    await page.fill('#to', '2026-11-01');
    await page.fill('#article_id', 'not an id!');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('form.filters button[type=submit]'),
    ]);
    expect(response?.status(), page.url()).toBe(400);
    expect(await page.textContent('[role=alert]')).toContain('These filters cannot be used');
    expect(await page.textContent('#error-from')).toBe('From must not be after to');
    expect(await page.textContent('#error-article_id')).toMatch(/^Article id /);
    expect(await page.getAttribute('#from', 'aria-describedby')).toBe('error-from');
    expect(await page.getAttribute('#article_id', 'aria-invalid')).toBe('true');
    expect(await page.inputValue('#from')).toBe('2026-11-10');
    expect(await page.inputValue('#to')).toBe('2026-11-01');
    expect(await page.inputValue('#article_id')).toBe('not an id!');
    expect(await page.$('table.activity-log')).toBeNull();
    await expectLabelled(page);
    await screenshot(page, 'activity-bad-filters');

    // Corrected, the same form shows records.
    await page.fill('#to', '2099-12-31');
    await page.fill('#article_id', '');
    const [fixed] = await Promise.all([
      page.waitForNavigation(),
      page.click('form.filters button[type=submit]'),
    ]);
    expect(fixed?.status()).toBe(200);
    expect(await page.$('[role=alert]')).toBeNull();

    // A page size the API refuses is named too, with a way back.
    const big = await page.goto(`${web.url}/activity?per_page=500&source=api`);
    expect(big?.status()).toBe(400);
    expect(await page.textContent('[role=alert]')).toContain('Per page must be at most 100');
    expect(await page.getAttribute('text=Show the first page with these filters', 'href')).toBe(
      '/activity?source=api',
    );
  });
});
