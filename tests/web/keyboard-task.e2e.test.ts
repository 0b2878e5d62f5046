import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../support/process.ts';
import { screenshot, startWebApp, type WebApp } from '../support/web.ts';
import { apiJson } from './site-helpers.ts';

/*
 * The keyboard-only task, in Chromium with JavaScript on and no mouse: sign in, find last month's
 * article, edit its title, save (in place: the editor stays). Every Tab, Shift+Tab and Enter is a stop; the test counts them and
 * holds the count below what the same task took before the skip link, the breadcrumbs and the way on
 * from the sign-in page (docs/web.md, "The keyboard-only task").
 */

/** Stops the task took on the pages without the skip link and with the signed-in dead end. */
const STOPS_BEFORE = 75;

/** Last month's first and last day, as YYYY-MM-DD (UTC). */
function lastMonth(today = new Date()): { from: string; to: string; mid: string } {
  const first = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 1));
  const last = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 0));
  const mid = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 15, 12));
  return {
    from: first.toISOString().slice(0, 10),
    to: last.toISOString().slice(0, 10),
    mid: mid.toISOString(),
  };
}

/** A date as a person types it into Chromium's date field (en-US: month, day, year). */
const typed = (isoDate: string): string => {
  const [y, m, d] = isoDate.split('-');
  return `${m}${d}${y}`;
};

/** A keyboard that counts its stops: Tab, Shift+Tab and Enter. */
function keyboard(page: Page) {
  let stops = 0;
  const press = async (key: 'Tab' | 'Shift+Tab' | 'Enter'): Promise<void> => {
    stops += 1;
    await page.keyboard.press(key);
  };
  return {
    get stops(): number {
      return stops;
    },
    press,
    /**
     * Tabs forward until `selector` has the focus, as a person does; on a "Skip to content" link, when
     * the target is in the page's main part, follows it (Enter) instead of tabbing through the header.
     */
    async tabTo(selector: string): Promise<void> {
      for (let i = 0; i < 150; i += 1) {
        const where = (await page.evaluate(`(() => {
          const active = document.activeElement;
          const target = document.querySelector(${JSON.stringify(selector)});
          return {
            there: target !== null && active === target,
            skip: active instanceof HTMLAnchorElement && active.textContent.trim() === 'Skip to content' &&
              (document.querySelector('main')?.contains(target) ?? false),
          };
        })()`)) as { there: boolean; skip: boolean };
        if (where.there) return;
        await press(where.skip ? 'Enter' : 'Tab');
      }
      throw new Error(`the keyboard did not reach ${selector} in 150 stops`);
    },
    /** Enter on the focused element, waiting for the page it opens. */
    async follow(): Promise<void> {
      await Promise.all([page.waitForNavigation(), press('Enter')]);
    },
  };
}

describe('the keyboard-only task', () => {
  let web: WebApp;
  let site: { id: string; domain: string };

  beforeAll(async () => {
    web = await startWebApp({ articles: 4, backlinks: 2 });
    site = web.demo.sites[0] as { id: string; domain: string };
    // Last month's article, on the first site.
    const file = join(web.env.DATA_DIR as string, 'last-month.jsonl');
    const { mid } = lastMonth();
    await writeFile(
      file,
      `${JSON.stringify({
        account_id: web.demo.account_id,
        site_id: site.id,
        title: "Last month's article",
        body: '<p>Written last month.</p>',
        url: `https://${site.domain}/last-month`,
        status: 'published',
        published_at: mid,
      })}\n`,
    );
    const ingested = await cli(['ingest', 'articles', '--file', file], web.env);
    expect(ingested.code, ingested.stderr).toBe(0);
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('signs in, finds last month’s article, edits and saves it with fewer stops than before', async () => {
    const context = await web.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const keys = keyboard(page);
    const { from, to } = lastMonth();

    // Sign in.
    await page.goto(`${web.url}/sign-in`);
    await keys.tabTo('#email');
    await page.keyboard.type(web.demo.email);
    await keys.tabTo('#password');
    await page.keyboard.type(web.demo.password);
    await keys.follow();
    if (new URL(page.url()).pathname !== '/sites') {
      await keys.tabTo('a[href="/sites"]');
      await keys.follow();
    }
    expect(new URL(page.url()).pathname).toBe('/sites');

    // Find last month's article: the site, its articles filtered to last month, the newest of them.
    await keys.tabTo(`#sites a[href="/sites/${site.id}"]`);
    await keys.follow();
    await keys.tabTo('#from');
    await page.keyboard.type(typed(from));
    await keys.tabTo('#to');
    await page.keyboard.type(typed(to));
    await keys.tabTo('#article-filters button[type=submit]');
    await keys.follow();
    expect(new URL(page.url()).searchParams.get('from')).toBe(from);
    const first = '#articles tbody tr:first-child a';
    const articleId = ((await page.getAttribute(first, 'href')) ?? '').split('/').pop() as string;
    await keys.tabTo(first);
    await keys.follow();
    const article = await apiJson<{ published_at: string }>(web, `/articles/${articleId}`);
    expect(article.published_at.slice(0, 10) >= from && article.published_at.slice(0, 10) <= to).toBe(true);

    // Edit its title and save.
    await keys.tabTo(`a[href="/articles/${articleId}/edit"]`);
    await keys.follow();
    await keys.tabTo('#title');
    await page.keyboard.type('Edited from the keyboard');
    await keys.tabTo('#reason');
    await page.keyboard.type('Keyboard only');
    await keys.tabTo('.editor-form button.primary[type=submit]');
    // Saved in place: the editor stays, and says so under the buttons.
    await keys.press('Enter');
    await page.waitForSelector('#save-status:has-text("Saved as revision")');
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}/edit`);
    const saved = await apiJson<{ title: string }>(web, `/articles/${articleId}`);
    expect(saved.title).toBe('Edited from the keyboard');
    await screenshot(page, 'keyboard-task-saved');

    console.log(`keyboard-only task: ${keys.stops} stops (before: ${STOPS_BEFORE})`);
    expect(keys.stops).toBeLessThan(STOPS_BEFORE);
    await context.close();
  });
});
