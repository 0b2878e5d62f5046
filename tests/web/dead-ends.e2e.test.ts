import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { cli } from '../support/process.ts';
import { screenshot, signIn, startWebApp, type WebApp } from '../support/web.ts';

/*
 * No page is a dead end, in Chromium with JavaScript off: every page starts with "Skip to content",
 * has the service's icon (no request of a page load fails), an article's pages lead back to its site,
 * the sign-in page sends a signed-in person on, and an account without sites says who adds them.
 */

describe('ways on from every page', () => {
  let web: WebApp;
  let context: BrowserContext;
  let article: { id: string; title: string; site_id: string };
  let siteName: string;

  beforeAll(async () => {
    web = await startWebApp();
    context = await web.signedIn();
    const site = web.demo.sites[0] as { id: string };
    const list = (await (await web.api(`/sites/${site.id}/articles`)).json()) as {
      data: { id: string; title: string; site_id: string }[];
    };
    article = list.data[0] as typeof article;
    // A second revision, for the revision and restore pages.
    const edit = await web.api(`/articles/${article.id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title: `${article.title}, revised`, reason: 'A second revision' }),
    });
    expect(edit.status).toBe(200);
    article.title = `${article.title}, revised`;
    const sites = (await (await web.api('/sites')).json()) as { data: { id: string; name: string }[] };
    siteName = sites.data.find((s) => s.id === site.id)?.name as string;
  });
  afterAll(async () => {
    await web?.stop();
  });

  /**
   * Opens `path`, failing on any request of the load to the service that fails or answers 400 or more
   * (the demo's featured images are on other hosts, which the pages' policy does not allow).
   */
  async function open(ctx: BrowserContext, path: string, icon = false): Promise<Page> {
    const page = await ctx.newPage();
    const failed: string[] = [];
    const ours = (url: string): boolean => url.startsWith(`${web.url}/`);
    page.on('requestfailed', (r) => {
      if (ours(r.url())) failed.push(`${r.url()} ${r.failure()?.errorText}`);
    });
    page.on('response', (r) => {
      if (ours(r.url()) && r.status() >= 400 && r.url() !== `${web.url}${path}`) {
        failed.push(`${r.url()} ${r.status()}`);
      }
    });
    // A new context's first page asks for the icon, once the page has loaded.
    const asked = icon ? page.waitForResponse((r) => new URL(r.url()).pathname === '/favicon.svg') : null;
    await page.goto(`${web.url}${path}`);
    if (asked) expect((await asked).status()).toBe(200);
    expect(failed, path).toEqual([]);
    return page;
  }

  it('starts every page with "Skip to content", shown on focus, leading to the main part', async () => {
    const first =
      "document.querySelector('a[href], button, input:not([type=hidden]), select, textarea').textContent";
    const signInPage = await open(await web.browser.newContext({ javaScriptEnabled: false }), '/sign-in');
    expect(await signInPage.evaluate(first)).toBe('Skip to content');
    for (const path of ['/sites', `/articles/${article.id}`, '/activity']) {
      const page = await open(context, path);
      expect(await page.evaluate(first), path).toBe('Skip to content');
      // Hidden until focused.
      expect(await page.$eval('a.skip-link', (a) => a.getBoundingClientRect().bottom)).toBeLessThanOrEqual(0);
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.textContent'), path).toBe('Skip to content');
      expect(await page.$eval('a.skip-link', (a) => a.getBoundingClientRect().top)).toBeGreaterThanOrEqual(0);
      if (path === '/sites') await screenshot(page, 'skip-link-focused');
      await page.keyboard.press('Enter');
      expect(await page.evaluate('document.activeElement.id'), path).toBe('main');
      // The next stop is the page's own first link or field, not the header's.
      await page.keyboard.press('Tab');
      expect(await page.evaluate("!!document.activeElement.closest('main')"), path).toBe(true);
      await page.close();
    }
  });

  it('serves its icon with a long cache, at the address pages link and at /favicon.ico', async () => {
    for (const path of ['/favicon.svg', '/favicon.ico']) {
      const res = await fetch(`${web.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toBe('image/svg+xml');
      expect(res.headers.get('cache-control'), path).toBe('public, max-age=2592000, immutable');
      expect(await res.text(), path).toContain('<svg');
    }
    // A browser loading the pages asks for the icon, and nothing of a load fails (no 404 for it).
    for (const path of ['/sites', `/articles/${article.id}`, '/activity', '/connect']) {
      const fresh = await web.signedIn();
      const page = await open(fresh, path, true);
      expect(await page.getAttribute('link[rel=icon]', 'href')).toBe('/favicon.svg');
      await fresh.close();
    }
  });

  it("leads from an article's pages back to its site: Sites › site › article", async () => {
    const crumbs = async (page: Page): Promise<[string, string | null, string | null][]> =>
      page.$$eval('nav[aria-label=Breadcrumb] li > *', (items) =>
        items.map((i) => [i.textContent ?? '', i.getAttribute('href'), i.getAttribute('aria-current')]),
      );
    const head: [string, string | null, string | null][] = [
      ['Sites', '/sites', null],
      [siteName, `/sites/${article.site_id}`, null],
    ];
    const articleLink: [string, string | null, string | null] = [
      article.title,
      `/articles/${article.id}`,
      null,
    ];
    const pages: [string, [string, string | null, string | null][], string][] = [
      [`/articles/${article.id}`, [...head, [article.title, null, 'page']], 'crumbs-article'],
      [
        `/articles/${article.id}/revisions/1`,
        [...head, articleLink, ['Revision 1', null, 'page']],
        'crumbs-revision',
      ],
      [
        `/articles/${article.id}/revisions/1/restore`,
        [
          ...head,
          articleLink,
          ['Revision 1', `/articles/${article.id}/revisions/1`, null],
          ['Restore', null, 'page'],
        ],
        'crumbs-restore',
      ],
      [`/articles/${article.id}/edit`, [...head, articleLink, ['Edit', null, 'page']], 'crumbs-edit'],
    ];
    for (const [path, expected, shot] of pages) {
      const page = await open(context, path);
      expect(await crumbs(page), path).toEqual(expected);
      if (shot === 'crumbs-article') await screenshot(page, shot);
      await page.close();
    }
    const phone = await web.signedIn({ width: 390 });
    const small = await open(phone, `/articles/${article.id}/revisions/1/restore`);
    expect(await small.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(small, 'crumbs-restore-390');
  });

  it('sends a signed-in person on from the sign-in page', async () => {
    const page = await context.newPage();
    await page.goto(`${web.url}/sign-in`);
    expect(new URL(page.url()).pathname).toBe('/sites');
    await page.goto(`${web.url}/sign-in?return_to=%2Factivity`);
    expect(new URL(page.url()).pathname).toBe('/activity');
    await page.close();
  });

  it('tells a new account without sites who adds them and what to do meanwhile', async () => {
    const person = { name: 'Nina New', email: 'nina.new@example.com', password: 'a new password 2026' };
    const made = await cli(
      ['accounts', 'create', '--name', person.name, '--email', person.email, '--password', person.password],
      web.env,
    );
    expect(made.code, made.stderr).toBe(0);
    for (const [width, scheme] of [
      [1280, 'light'],
      [390, 'dark'],
    ] as const) {
      const ctx = await web.browser.newContext({
        javaScriptEnabled: false,
        viewport: { width, height: 800 },
        colorScheme: scheme,
      });
      const page = await ctx.newPage();
      await signIn(page, web.url, person);
      expect(new URL(page.url()).pathname).toBe('/sites');
      const text = (await page.textContent('#no-sites')) ?? '';
      expect(text).toContain('Your sites are added by the service, not on these pages');
      expect(text).toContain('create an API key');
      expect(text).toContain('connect an AI assistant');
      expect(await page.getAttribute('#no-sites a', 'href')).toBe('/connect');
      expect(await page.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(page, `sites-empty-${width}`);
      await ctx.close();
    }
  });

  it('stays accessible: axe finds nothing serious on the empty sites page', async () => {
    const ctx = await noPageScripts(await web.browser.newContext({ colorScheme: 'dark' }));
    const page = await ctx.newPage();
    await signIn(page, web.url, { email: 'nina.new@example.com', password: 'a new password 2026' });
    await expectAccessible(page, 'sites-empty');
    await ctx.close();
  });

  it('answers an address that is no page with the 404 page and a way on, in a browser; programs get problem+json', async () => {
    for (const [width, scheme] of [
      [1280, 'light'],
      [390, 'dark'],
    ] as const) {
      const ctx = await web.browser.newContext({
        javaScriptEnabled: false,
        viewport: { width, height: 800 },
        colorScheme: scheme,
      });
      for (const path of ['/dashboard', '/settings', '/sitse']) {
        const page = await ctx.newPage();
        const response = await page.goto(`${web.url}${path}`);
        expect(response?.status(), path).toBe(404);
        expect(response?.headers()['content-type'], path).toBe('text/html; charset=utf-8');
        expect(await page.textContent('h1'), path).toBe('Not found');
        const links = await page.$$eval('#not-a-page a', (as) => as.map((a) => a.getAttribute('href')));
        expect(links, path).toEqual(['/sites', '/sign-in']);
        expect(await page.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(width);
        if (path === '/dashboard') await screenshot(page, `not-a-page-${width}-${scheme}`);
        await page.close();
      }
      // `/logout` says where signing out is.
      const page = await ctx.newPage();
      expect((await page.goto(`${web.url}/logout`))?.status()).toBe(404);
      expect(await page.textContent('#not-a-page')).toContain(
        'To sign out, use Sign out at the top of any page',
      );
      if (width === 390) await screenshot(page, 'not-a-page-logout-390');
      await page.close();
      // Followed, the way on leads to sign-in.
      const onward = await ctx.newPage();
      await onward.goto(`${web.url}/dashboard`);
      await Promise.all([onward.waitForNavigation(), onward.click('#not-a-page a[href="/sites"]')]);
      expect(new URL(onward.url()).pathname).toBe('/sign-in');
      await ctx.close();
    }
    // What programs ask for, and anything under the API, MCP or the discovery documents, stays
    // problem+json (under /oauth/ the authorization server answers for itself).
    const browserAccept = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
    for (const [path, accept] of [
      ['/dashboard', '*/*'],
      ['/dashboard', 'application/json'],
      ['/dashboard', 'application/json, text/html;q=0.5'],
      ['/api/v1/nope', browserAccept],
      ['/api', browserAccept],
      ['/mcp/nope', browserAccept],
      ['/.well-known/nope', browserAccept],
    ] as const) {
      const res = await fetch(`${web.url}${path}`, { headers: { accept } });
      expect(res.status, `${path} ${accept}`).toBe(404);
      expect(res.headers.get('content-type'), `${path} ${accept}`).toMatch(/^application\/problem\+json/);
    }
  });

  it('stays accessible: axe finds nothing serious on the 404 page', async () => {
    const ctx = await noPageScripts(await web.browser.newContext({ colorScheme: 'light' }));
    const page = await ctx.newPage();
    await page.goto(`${web.url}/dashboard`);
    await expectAccessible(page, 'not-a-page');
    await ctx.close();
  });
});
