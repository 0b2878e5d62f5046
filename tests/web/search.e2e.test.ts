import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * Search in headless Chromium with JavaScript off: the labelled search box in every account page's
 * header, used with the keyboard alone; the results page with title links, marked words, filters and
 * pages; a search of only common words answered 400 with its error on the page; a phone's width.
 */

describe('the search box and the search page', () => {
  let web: WebApp;

  beforeAll(async () => {
    web = await startWebApp({ articles: 8 });
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('sends a signed-out person to sign in, coming back to the search', async () => {
    const res = await fetch(`${web.url}/search?q=boiler`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/sign-in?return_to=${encodeURIComponent('/search?q=boiler')}`);
  });

  it('has a labelled search box in the header that the keyboard alone can use', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/sites`);
    const box = page.locator('header.top form[role=search]');
    expect(await box.getAttribute('method')).toBe('get');
    expect(await box.getAttribute('action')).toBe('/search');
    expect((await page.textContent('label[for=header-search]'))?.trim()).toBe('Search articles');
    // Tab from the top of the page to the search box, type, Enter.
    let focused = '';
    for (let i = 0; i < 15 && focused !== 'header-search'; i++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate('document.activeElement && document.activeElement.id');
    }
    expect(focused).toBe('header-search');
    await page.keyboard.type('homeowners');
    await Promise.all([page.waitForURL(/\/search\?q=homeowners$/), page.keyboard.press('Enter')]);
    expect(await page.textContent('h1')).toBe('Search articles');
    // The words stay in the box.
    expect(await page.inputValue('#header-search')).toBe('homeowners');
    const marks = await page.$$eval('ol.search-results mark', (ms) =>
      ms.map((m) => m.textContent?.toLowerCase()),
    );
    expect(marks.length).toBeGreaterThan(0);
    expect(new Set(marks)).toEqual(new Set(['homeowners']));
    const links = await page.$$eval('ol.search-results h3 a', (as) => as.map((a) => a.getAttribute('href')));
    expect(links.length).toBeGreaterThan(0);
    for (const href of links) expect(href).toMatch(/^\/articles\/art_/);
    await expectLabelled(page);
    await screenshot(page, 'search-results');
    // A result's title opens the article.
    await Promise.all([page.waitForURL(/\/articles\/art_/), page.click('ol.search-results h3 a')]);
    await context.close();
  });

  it('filters by site and status, and pages with every filter kept', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    const siteId = web.demo.sites[1]?.id as string;
    const response = await page.goto(
      `${web.url}/search?q=homeowners&site_id=${siteId}&status=published&per_page=1`,
    );
    expect(response?.status()).toBe(200);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(await page.inputValue('#search-site')).toBe(siteId);
    expect(await page.inputValue('#search-status')).toBe('published');
    const next = await page.getAttribute('nav.pager a[rel=next]', 'href');
    expect(next).toBe(`/search?q=homeowners&site_id=${siteId}&status=published&page=2&per_page=1`);
    await context.close();
  });

  it('answers a search of only common words 400, its error on the page in the page style', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    const response = await page.goto(`${web.url}/search?q=the+and`);
    expect(response?.status()).toBe(400);
    expect(await page.textContent('#search-error')).toContain('Search');
    expect(await page.getAttribute('#search-q', 'aria-invalid')).toBe('true');
    expect(await page.textContent('#error-q')).toContain('no word to search for');
    await screenshot(page, 'search-refused');
    await context.close();
  });

  it('fits a phone: no sideways scrolling, the search box on its own line', async () => {
    const context = await web.signedIn({ width: 360 });
    const page = await context.newPage();
    await page.goto(`${web.url}/search?q=inspection`);
    await screenshot(page, 'search-phone');
    const wide = await page.evaluate(
      `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5).map((e) => e.tagName + '.' + e.className + '#' + e.id).slice(0, 8)`,
    );
    expect(wide).toEqual([]);
    await context.close();
  });

  it('shows the empty search box’s whole placeholder and unbroken account links on a 390 px phone', async () => {
    const context = await web.signedIn({ width: 390 });
    const page = await context.newPage();
    await page.goto(`${web.url}/sites`);
    await screenshot(page, 'header-phone');
    // The placeholder's width in the field's own font, against the room inside the field.
    const fit = (await page.evaluate(`(() => {
      const input = document.getElementById('header-search');
      const style = getComputedStyle(input);
      const context = document.createElement('canvas').getContext('2d');
      context.font = style.font;
      const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      return { text: context.measureText(input.placeholder).width, room };
    })()`)) as { text: number; room: number };
    expect(fit.text).toBeGreaterThan(0);
    expect(fit.text).toBeLessThanOrEqual(fit.room);
    // Its label is still the field's name, for a screen reader.
    expect(await page.getByRole('searchbox', { name: 'Search articles' }).count()).toBe(1);
    // "Change password" and "Sign out" each on one line.
    const lines = await page.$$eval('header.top form[action="/sign-out"] :is(a, button)', (els) =>
      els.map((e) => [e.textContent?.trim(), e.getClientRects().length]),
    );
    expect(lines).toEqual([
      ['Change password', 1],
      ['Sign out', 1],
    ]);
    await context.close();
  });
});
