import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../support/process.ts';
import { expectLabelled, screenshot, signIn, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The article page, the revision page and restore, through a real server in headless Chromium with
 * JavaScript off (on only where it proves that no script runs), the keyboard where a person types.
 */

type Article = {
  id: string;
  title: string;
  body: string;
  revision: number;
  status: string;
  url: string;
  target_keyword: string | null;
  word_count: number;
  featured_image: { url: string; alt: string } | null;
  protected_links: { id: string; kind: string; text: string; href: string }[];
};
type Revision = {
  revision: number;
  origin: string;
  actor: { type: string; name: string };
  reason: string | null;
  restored_from: number | null;
};

describe('the article pages', () => {
  let web: WebApp;
  let articles: Article[];

  beforeAll(async () => {
    web = await startWebApp({ articles: 3, backlinks: 2 });
    articles = [];
    for (const site of web.demo.sites) {
      const res = await web.api(`/sites/${site.id}/articles?per_page=10`);
      expect(res.status).toBe(200);
      const list = (await res.json()) as { data: { id: string }[] };
      for (const { id } of list.data) articles.push(await getArticle(id));
    }
    expect(articles.length).toBe(6);
  });
  afterAll(async () => {
    await web?.stop();
  });

  async function getArticle(id: string): Promise<Article> {
    const res = await web.api(`/articles/${id}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Article;
  }

  async function revisions(id: string): Promise<Revision[]> {
    const res = await web.api(`/articles/${id}/revisions?per_page=100`);
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: Revision[] }).data;
  }

  async function edit(article: Article, change: { title?: string; body?: string; reason?: string }) {
    const res = await web.api(`/articles/${article.id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'if-match': `W/"${article.revision}"` },
      body: JSON.stringify(change),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as Article;
  }

  /** The first paragraph of a body with words added at its end (protected links untouched). */
  const withWords = (body: string, words: string) => body.replace('</p>', ` ${words}</p>`);

  /** The page's scroll width: no wider than the viewport, nothing to scroll sideways. */
  const pageWidth = (page: Page) => page.evaluate<number>('document.documentElement.scrollWidth');

  const texts = (page: Page, selector: string) =>
    page.$$eval(selector, (els) => els.map((e) => e.textContent?.replace(/\s+/g, ' ').trim() ?? ''));

  it('shows the article: facts, featured image, the text, protected links, history and the editor link', async () => {
    const original = articles[0] as Article;
    const edited = await edit(original, {
      title: `Updated: ${original.title}`,
      body: withWords(original.body, 'Radiators hum quietly.'),
      reason: 'Freshened the intro',
    });
    const context = await web.signedIn();
    const page = await context.newPage();
    const response = await page.goto(`${web.url}/articles/${original.id}`);
    expect(response?.status()).toBe(200);
    const headers = response?.headers() ?? {};
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(headers['cache-control']).toBe('no-store');

    expect(await page.textContent('h1')).toBe(edited.title);
    const facts = Object.fromEntries(
      await page.$$eval('dl.facts dt', (dts) =>
        dts.map((dt) => [dt.textContent?.trim(), dt.nextElementSibling?.textContent?.trim()]),
      ),
    );
    expect(facts.Status).toContain(edited.status === 'published' ? 'Published' : '');
    expect(facts.URL).toBe(edited.url);
    expect(facts['Target keyword']).toBe(edited.target_keyword ?? 'none');
    expect(facts['Word count']).toBe(String(edited.word_count));
    expect(facts.Revision).toMatch(/^2 /);
    if (edited.featured_image) {
      expect(await page.getAttribute('figure.featured img', 'alt')).toBe(edited.featured_image.alt);
      expect(await page.getAttribute('figure.featured img', 'src')).toBe(edited.featured_image.url);
    }
    // The stored body rendered as HTML inside an <article>.
    expect(await page.textContent('article.article-body')).toContain('Radiators hum quietly.');
    expect(await page.$$eval('article.article-body p', (ps) => ps.length)).toBeGreaterThan(1);
    // Its protected links.
    const cells = await texts(page, 'table.links tbody td');
    const links = Array.from({ length: cells.length / 3 }, (_, i) => cells.slice(3 * i, 3 * i + 3));
    expect(links).toEqual(edited.protected_links.map((l) => [l.kind, l.text, l.href]));
    expect(links.length).toBeGreaterThan(0);
    // Its history: newest first, origin, actor, reason, each revision linking to its page.
    const rows = await texts(page, 'table.history tbody tr');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/Revision 2 current .* API Demo key \(API key\) Freshened the intro/);
    expect(rows[1]).toMatch(
      /Revision 1 .* Content pipeline Demo data \(service\) none given Restore revision 1/,
    );
    expect(await page.getAttribute('#revision-2 a', 'href')).toBe(`/articles/${original.id}/revisions/2`);
    expect(await page.$('#revision-2 a.button')).toBeNull();
    expect(await page.getAttribute('#revision-1 a.button', 'href')).toBe(
      `/articles/${original.id}/revisions/1/restore`,
    );
    expect(await page.getAttribute('a.button.primary', 'href')).toBe(`/articles/${original.id}/edit`);
    // Headings in order: one h1, then h2 sections.
    const levels = await page.$$eval('main h1, main h2, main h3', (hs) =>
      hs.map((h) => Number(h.tagName[1])),
    );
    expect(levels[0]).toBe(1);
    for (let i = 1; i < levels.length; i++)
      expect((levels[i] ?? 0) - (levels[i - 1] ?? 0)).toBeLessThanOrEqual(1);
    await screenshot(page, 'article');
    await page.setViewportSize({ width: 390, height: 800 });
    expect(await pageWidth(page)).toBeLessThanOrEqual(390);
    await screenshot(page, 'article-phone');
  });

  it('renders a body with script-looking content inert: no script element, nothing runs', async () => {
    const article = articles[1] as Article;
    const hostile =
      '<p>Before <script>document.title = "pwned"; window.pwned = 1;</script>after.</p>' +
      '<p><img src="/nothing.png" alt="x" onerror="document.title=\'pwned\'">' +
      '<a href="javascript:document.title=\'pwned\'">click</a> &lt;script&gt;alert(1)&lt;/script&gt; stays text</p>';
    await edit(article, { body: `${hostile}${article.body}`, reason: 'Hostile test' });
    // JavaScript on: were anything to slip through, it could run.
    const context = await web.signedIn({ javaScript: true });
    const page = await context.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    const response = await page.goto(`${web.url}/articles/${article.id}`);
    expect(response?.status()).toBe(200);
    await page.waitForLoadState('load');
    const body = page.locator('article.article-body');
    expect(await body.locator('script').count()).toBe(0);
    expect(await body.locator('[onerror]').count()).toBe(0);
    expect(await body.locator('a[href^="javascript:"]').count()).toBe(0);
    expect(await body.textContent()).toContain('<script>alert(1)</script> stays text');
    expect(await page.title()).not.toContain('pwned');
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect(dialogs).toEqual([]);
    await screenshot(page, 'article-hostile-body');
  });

  it('shows a revision: its content, word diffs against the one before and the current one, Restore', async () => {
    const article = await getArticle((articles[0] as Article).id);
    const context = await web.signedIn();
    const page = await context.newPage();

    expect((await page.goto(`${web.url}/articles/${article.id}/revisions/2`))?.status()).toBe(200);
    expect(await page.textContent('h1')).toMatch(/Revision 2\s+current/);
    expect(await texts(page, '#diff-previous ins')).toEqual(['Updated:', 'Radiators hum quietly.']);
    expect(await page.textContent('.diff-legend')).toMatch(
      /Added words are underlined, removed words struck through/,
    );
    expect(await page.$('#diff-current')).toBeNull();
    expect(await page.$('a[href$="/revisions/2/restore"]')).toBeNull();
    await screenshot(page, 'revision-current');

    expect((await page.goto(`${web.url}/articles/${article.id}/revisions/1`))?.status()).toBe(200);
    expect(await page.textContent('#against-previous')).toContain('The first revision');
    // From revision 1 to the current version: the words the edit added.
    expect(await texts(page, '#diff-current ins')).toEqual(['Updated:', 'Radiators hum quietly.']);
    expect(await texts(page, '#diff-current del')).toEqual([]);
    expect(await page.textContent('h3.revision-title')).toBe((articles[0] as Article).title);
    expect(await page.textContent('section[aria-labelledby=content] article.article-body')).not.toContain(
      'Radiators',
    );
    expect(await page.getAttribute('a.button.primary', 'href')).toBe(
      `/articles/${article.id}/revisions/1/restore`,
    );
    await screenshot(page, 'revision-earlier');
    await page.setViewportSize({ width: 390, height: 800 });
    expect(await pageWidth(page)).toBeLessThanOrEqual(390);
    await screenshot(page, 'revision-earlier-phone');

    expect((await page.goto(`${web.url}/articles/${article.id}/revisions/9`))?.status()).toBe(404);
    expect((await page.goto(`${web.url}/articles/${article.id}/revisions/zero`))?.status()).toBe(404);
  });

  it('restores an earlier revision after a confirmation that shows what will change', async () => {
    const article = await getArticle((articles[0] as Article).id);
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/articles/${article.id}`);
    await Promise.all([page.waitForNavigation(), page.click('#revision-1 a.button')]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${article.id}/revisions/1/restore`);
    expect(await page.textContent('h1')).toBe('Restore revision 1?');
    await expectLabelled(page);
    // From the current version back to revision 1: the edit's words go.
    expect(await texts(page, '#diff-restore del')).toEqual(['Updated:', 'Radiators hum quietly.']);
    expect(await page.getAttribute('input[name=expected_revision]', 'value')).toBe(String(article.revision));
    expect(await page.$('input[name=csrf]')).not.toBeNull();
    await screenshot(page, 'restore-confirm');

    await page.focus('#reason');
    await page.keyboard.type('The intro was better before');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${article.id}`);
    expect(await page.textContent('#restored')).toContain('revision 3 has the content of revision 1');
    expect(await page.textContent('h1')).toBe((articles[0] as Article).title);
    expect(await page.textContent('#revision-3')).toMatch(
      /restores revision 1.*Editor.*\(person\).*The intro was better before/s,
    );
    await screenshot(page, 'article-restored');

    const history = await revisions(article.id);
    expect(history[0]).toMatchObject({
      revision: 3,
      origin: 'editor',
      actor: { type: 'user' },
      reason: 'The intro was better before',
      restored_from: 1,
    });
    const now = await getArticle(article.id);
    expect(now.body).toBe((articles[0] as Article).body);
    expect(now.title).toBe((articles[0] as Article).title);

    // Revision 1 again: the content is already the current one, so nothing changes.
    await page.goto(`${web.url}/articles/${article.id}/revisions/1/restore`);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit].primary')]);
    expect(await page.textContent('#restored')).toContain('nothing was changed');
    expect((await revisions(article.id)).map((r) => r.revision)).toEqual([3, 2, 1]);
  });

  it('refuses a restore confirmed on a version that has changed since, showing the new changes', async () => {
    const article = articles[2] as Article;
    const second = await edit(article, { body: withWords(article.body, 'First change.'), reason: 'One' });
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/articles/${article.id}/revisions/1/restore`);
    expect(await page.getAttribute('input[name=expected_revision]', 'value')).toBe('2');
    // Meanwhile, another change through the API.
    await edit(second, { body: withWords(second.body, 'Second change.'), reason: 'Two' });

    await page.focus('#reason');
    await page.keyboard.type('Undo the changes');
    const [response] = await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(response?.status()).toBe(412);
    expect(await page.textContent('#refusal')).toContain('changed since you opened this page');
    expect(await page.textContent('#refusal')).toContain('now at revision 3');
    // The person's reason is kept; the form now confirms against revision 3 and shows its changes.
    expect(await page.inputValue('#reason')).toBe('Undo the changes');
    expect(await page.getAttribute('input[name=expected_revision]', 'value')).toBe('3');
    expect((await texts(page, '#diff-restore del')).join(' ')).toMatch(/First change\..*Second change\./);
    await screenshot(page, 'restore-stale');
    expect((await revisions(article.id)).map((r) => r.revision)).toEqual([3, 2, 1]);

    await Promise.all([page.waitForNavigation(), page.click('button[type=submit].primary')]);
    expect(await page.textContent('#restored')).toContain('revision 4 has the content of revision 1');
  });

  it('refuses a restore that would remove a protected link placed since, naming it', async () => {
    const article = articles[3] as Article;
    const anchor =
      '<a href="https://partner.example/boilers" data-service-protected="backlink" data-service-id="bl_new">boiler partner</a>';
    const file = join(web.env.DATA_DIR as string, 'rewrite.jsonl');
    await writeFile(
      file,
      `${JSON.stringify({
        account_id: web.demo.account_id,
        article_id: article.id,
        body: `<p>See our ${anchor}.</p>${article.body}`,
        reason: 'Placed a backlink',
      })}\n`,
    );
    const ingested = await cli(['ingest', 'rewrites', '--file', file], web.env);
    expect(ingested.code, ingested.stderr).toBe(0);

    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/articles/${article.id}/revisions/1/restore`);
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('button[type=submit].primary'),
    ]);
    expect(response?.status()).toBe(422);
    expect(await page.textContent('#refusal')).toContain('would remove protected links');
    expect(await texts(page, '#protected-refused li')).toEqual([
      'backlink link “boiler partner” to https://partner.example/boilers (would be removed)',
    ]);
    await screenshot(page, 'restore-refused-protected');
    expect((await revisions(article.id)).map((r) => r.revision)).toEqual([2, 1]);
  });

  it('answers another account’s article, and a malformed id, with a 404 page', async () => {
    const other = { email: 'other.articles@example.com', password: 'another password 2026' };
    const created = await cli(
      ['accounts', 'create', '--name', 'Other Person', '--email', other.email, '--password', other.password],
      web.env,
    );
    expect(created.code, created.stderr).toBe(0);
    const context = await web.browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await signIn(page, web.url, other);
    const id = (articles[4] as Article).id;
    for (const path of [
      `/articles/${id}`,
      `/articles/${id}/revisions/1`,
      `/articles/${id}/revisions/1/restore`,
    ]) {
      const response = await page.goto(`${web.url}${path}`);
      expect(response?.status(), path).toBe(404);
      expect(await page.textContent('h1')).toBe('Not found');
      expect(await page.textContent('main')).not.toContain((articles[4] as Article).title);
    }
    await screenshot(page, 'article-not-found');
    const malformed = await page.goto(`${web.url}/articles/${encodeURIComponent('<x>')}`);
    expect(malformed?.status()).toBe(404);
    await context.close();
  });

  it('sends a signed-out person to sign in, coming back to the article', async () => {
    const id = (articles[5] as Article).id;
    const res = await fetch(`${web.url}/articles/${id}`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/sign-in?return_to=${encodeURIComponent(`/articles/${id}`)}`);
  });

  it('renders what was stored under earlier rules safely: a body link asking for its opener gets none, a script URL is no link', async () => {
    const article = articles[5] as Article;
    // A page on another origin (another port), which a link of the body opens in a new tab.
    const outside = createServer((_request, response) => {
      response
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<!doctype html><title>Outside</title><p>Outside');
    });
    await new Promise<void>((resolve) => outside.listen(0, '127.0.0.1', resolve));
    const outsideUrl = `http://127.0.0.1:${(outside.address() as AddressInfo).port}/`;
    // Stored as it could be before the sanitiser gave such links rel="noopener noreferrer" and before
    // ingestion took http(s) URLs only: written into the read model directly.
    const client = new pg.Client({ connectionString: web.env.DATABASE_URL });
    await client.connect();
    try {
      await client.query('update article_bodies set body = $2 where article_id = $1', [
        article.id,
        `<p>Read <a href="${outsideUrl}" target="_blank" rel="opener">outside</a>.</p>`,
      ]);
      await client.query('update articles set url = $2 where id = $1', [
        article.id,
        'javascript:document.title="pwned"',
      ]);
    } finally {
      await client.end();
    }
    const context = await web.signedIn({ javaScript: true });
    const page = await context.newPage();
    await page.goto(`${web.url}/articles/${article.id}`);
    expect(await page.locator('a[href^="javascript:"]').count()).toBe(0);
    expect(await page.textContent('main')).toContain('javascript:document.title="pwned"');
    const [opened] = await Promise.all([
      context.waitForEvent('page'),
      page.click('article.article-body a[target="_blank"]'),
    ]);
    await opened.waitForURL(outsideUrl);
    await opened.waitForLoadState('load');
    expect(await opened.evaluate<boolean>('window.opener === null')).toBe(true);
    await context.close();
    await new Promise((resolve) => outside.close(resolve));
  });
});
