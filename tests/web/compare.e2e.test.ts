import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIFF_EDITS_MAX } from '../../domain/html/word-diff.ts';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The compare page (/articles/{id}/revisions/compare?from=&to=) through a real server in headless
 * Chromium with JavaScript off: picked on the article page's history with the keyboard, side by side
 * on a wide screen and inline on a phone, a note linking to both revisions when they are too different
 * to compare, and reached from the activity log.
 */

type Article = {
  id: string;
  title: string;
  body: string;
  revision: number;
  protected_links: { text: string }[];
};

/** `lines` paragraphs, each one word tagged `tag`: two tags share no line and no word. */
const paragraphs = (lines: number, tag: string): string =>
  Array.from({ length: lines }, (_, i) => `<p>${tag}${i}</p>`).join('');

describe('the compare page', () => {
  let web: WebApp;
  let article: Article;
  let large: Article;

  async function getArticle(id: string): Promise<Article> {
    const res = await web.api(`/articles/${id}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Article;
  }
  async function edit(id: string, change: { title?: string; body?: string }): Promise<void> {
    const res = await web.api(`/articles/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(change),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  }
  /** The page's scroll width: no wider than the viewport, nothing to scroll sideways. */
  const scrollWidth = (page: Page): Promise<number> =>
    page.evaluate<number>('document.documentElement.scrollWidth');
  const visible = (page: Page, selector: string): Promise<boolean> => page.isVisible(selector);

  beforeAll(async () => {
    web = await startWebApp({ articles: 2, backlinks: 0 });
    const site = web.demo.sites[0]?.id as string;
    const list = (await (await web.api(`/sites/${site}/articles?per_page=10`)).json()) as {
      data: { id: string }[];
    };
    article = await getArticle(list.data[0]?.id as string);
    large = await getArticle(list.data[1]?.id as string);
    expect(article.protected_links.length).toBeGreaterThan(0);
    // Revision 2: a new title and words added; revision 3: words added again.
    await edit(article.id, {
      title: `${article.title}, revised`,
      body: article.body.replace('</p>', ' with some new words</p>'),
    });
    await edit(article.id, {
      body: article.body.replace('</p>', ' with some new words</p>').replace('</p>', ' and more</p>'),
    });
    // Revisions 2 and 3 of the other: more differing lines than the diff budget's edits.
    for (const tag of ['alpha', 'beta']) {
      await edit(large.id, { body: `${large.body}${paragraphs(DIFF_EDITS_MAX + 500, tag)}` });
    }
  }, 120_000);
  afterAll(async () => {
    await web?.stop();
  });

  it('is picked on the article page with the keyboard, and shows the revisions side by side on a wide screen', async () => {
    // JavaScript on for axe only: the pages' own scripts never load (as with it off).
    const page = await (await noPageScripts(await web.signedIn({ javaScript: true }))).newPage();
    await page.goto(`${web.url}/articles/${article.id}`);
    await expectLabelled(page);
    expect(await page.textContent('label[for=compare-from]')).toBe('From');
    expect(await page.textContent('label[for=compare-to]')).toBe('To');
    // The latest two by default: the change just made.
    expect(await page.inputValue('#compare-from')).toBe('2');
    expect(await page.inputValue('#compare-to')).toBe('3');
    // From: the oldest revision (the options are newest first), then To as it is, then Compare.
    await page.focus('#compare-from');
    await page.keyboard.press('End');
    expect(await page.inputValue('#compare-from')).toBe('1');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string>('document.activeElement?.id')).toBe('compare-to');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string>('document.activeElement?.textContent')).toBe('Compare');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const url = new URL(page.url());
    expect(url.pathname).toBe(`/articles/${article.id}/revisions/compare`);
    expect(Object.fromEntries(url.searchParams)).toEqual({ from: '1', to: '3' });

    expect(await page.textContent('h1')).toBe('Revision 1 compared with revision 3');
    expect(await page.inputValue('#compare-from')).toBe('1');
    expect(await page.inputValue('#compare-to')).toBe('3');
    expect(await page.textContent('#titles')).toContain(article.title);
    expect(await page.textContent('#titles')).toContain(`${article.title}, revised`);
    expect(await visible(page, '.compare-wide')).toBe(true);
    expect(await visible(page, '.compare-narrow')).toBe(false);
    const texts = (selector: string) =>
      page.$$eval(selector, (es) => es.map((e) => e.textContent?.trim() ?? ''));
    const sides = [];
    for (const n of [1, 2]) {
      const section = `.diff-sides section:nth-of-type(${n})`;
      sides.push({
        heading: (await texts(`${section} h3`))[0],
        ins: await texts(`${section} ins`),
        del: await texts(`${section} del`),
      });
    }
    expect(sides.map((s) => s.heading)).toEqual(['Revision 1', 'Revision 3']);
    expect(sides[0]?.ins).toEqual([]);
    expect(sides[1]?.del).toEqual([]);
    expect(sides[1]?.ins.join(' ')).toContain('with some new words');
    expect(sides[1]?.ins.join(' ')).toContain('and more');
    expect(await scrollWidth(page)).toBeLessThanOrEqual(1100);
    await expectLabelled(page);
    await expectAccessible(page, 'the compare page, wide');
    await screenshot(page, 'compare-revisions');
  });

  it('shows the same comparison inline on a phone', async () => {
    const phone = await (await noPageScripts(await web.signedIn({ width: 390, javaScript: true }))).newPage();
    const response = await phone.goto(`${web.url}/articles/${article.id}/revisions/compare?from=1&to=3`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(await visible(phone, '.compare-wide')).toBe(false);
    expect(await visible(phone, '.compare-narrow')).toBe(true);
    expect(await phone.textContent('.compare-narrow ins')).toContain('with some new words');
    expect(await scrollWidth(phone)).toBeLessThanOrEqual(390);
    await expectAccessible(phone, 'the compare page, phone');
    await screenshot(phone, 'compare-revisions-phone');
  });

  it('compares backwards, says so when nothing changed, and refuses what it cannot compare', async () => {
    const page = await (await web.signedIn()).newPage();
    await page.goto(`${web.url}/articles/${article.id}/revisions/compare?from=3&to=1`);
    expect(
      await page.$$eval('.compare-wide del', (ds) => ds.map((d) => d.textContent?.trim()).join(' ')),
    ).toContain('and more');
    await page.goto(`${web.url}/articles/${article.id}/revisions/compare?from=2&to=2`);
    expect(await page.textContent('main')).toContain('The text is the same.');
    const bad = await page.goto(`${web.url}/articles/${article.id}/revisions/compare?from=one&to=2`);
    expect(bad?.status()).toBe(400);
    expect(await page.textContent('#refusal')).toContain('Choose two revisions');
    await expectLabelled(page);
    const unknown = await page.goto(`${web.url}/articles/${article.id}/revisions/compare?from=1&to=9`);
    expect(unknown?.status()).toBe(404);
  });

  it('says when two revisions are too different to compare, linking to both whole', async () => {
    const page = await (await web.signedIn()).newPage();
    const response = await page.goto(`${web.url}/articles/${large.id}/revisions/compare?from=2&to=3`);
    expect(response?.status()).toBe(200);
    expect(await page.textContent('#too-large')).toContain('too long or too different');
    expect(await page.$$eval('#too-large a', (as) => as.map((a) => a.getAttribute('href')))).toEqual([
      `/articles/${large.id}/revisions/2#content`,
      `/articles/${large.id}/revisions/3#content`,
    ]);
    expect(await page.textContent('#titles')).toContain('The title is the same');
    await screenshot(page, 'compare-revisions-too-large');
  });

  it('is linked from the activity log: a record that made revision n opens n-1 against n', async () => {
    const page = await (await web.signedIn()).newPage();
    const link = `/articles/${article.id}/revisions/compare?from=2&to=3`;
    // The edit's record is stored a moment after its answer.
    for (let i = 0; i < 50; i++) {
      await page.goto(`${web.url}/activity?article_id=${article.id}`);
      if (await page.$(`a[href="${link}"]`)) break;
      await page.waitForTimeout(100);
    }
    expect(await page.textContent(`a[href="${link}"]`)).toBe('Changes from revision 2 to 3');
    // The revision's own page is still the cell's first link.
    expect(await page.$(`a[href="/articles/${article.id}/revisions/3"]`)).not.toBeNull();
    await Promise.all([page.waitForNavigation(), page.click(`a[href="${link}"]`)]);
    expect(await page.textContent('h1')).toBe('Revision 2 compared with revision 3');
  });
});
