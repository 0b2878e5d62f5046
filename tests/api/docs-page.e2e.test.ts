import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { htmlText } from '../../apps/server/http/html.ts';
import { filterWords, operationMatches, renderReference } from '../../apps/server/web/api-reference.ts';
import { PAGE_HEADERS } from '../../apps/server/web/kit.ts';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { loadOpenApi, type OpenApiDoc } from '../support/openapi.ts';
import { SHOTS, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The API reference at /docs: the service's own page, made on the server from the OpenAPI document
 * (/api/v1/openapi.json), in the site's layout. Public, with the headers of every page (no script);
 * it lists every operation of the document under its tag, with parameters, body and responses; its
 * filter (`?q=`) works without JavaScript; in Chromium it has no serious axe violation, nothing it
 * loads fails, and it fits a 390 px phone in the light and the dark scheme; signed in, it has the
 * account's navigation.
 */

type Operation = { id: string; method: string; path: string; tag: string; summary: string };

/** The document's operations, as the page names them. */
function operationsOf(doc: OpenApiDoc): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, value] of Object.entries(item)) {
      const op = value as { operationId: string; tags: string[]; summary: string };
      ops.push({
        id: `op-${op.operationId.replace(/[^A-Za-z0-9_-]+/g, '-')}`,
        method: method.toUpperCase(),
        path,
        tag: op.tags[0] as string,
        summary: op.summary,
      });
    }
  }
  return ops;
}

/**
 * What the screen shows, under SHOTS, to look at: the page is some 70,000 px tall on a phone, which a
 * full-page capture takes seconds to encode.
 */
async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

describe('the API reference at /docs', () => {
  let web: WebApp;
  let doc: OpenApiDoc;
  let operations: Operation[];

  beforeAll(async () => {
    web = await startWebApp({ articles: 2, backlinks: 2 });
    doc = await loadOpenApi(web.url);
    operations = operationsOf(doc);
  }, 120_000);
  afterAll(async () => {
    await web?.stop();
  });

  /** A page opened in `context`, failing on any request of its load that fails or answers 400 or more. */
  async function open(context: BrowserContext, path: string): Promise<Page> {
    const page = await context.newPage();
    const failed: string[] = [];
    page.on('requestfailed', (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`));
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.url()} ${r.status()}`);
    });
    const answer = await page.goto(`${web.url}${path}`);
    expect(answer?.status(), path).toBe(200);
    await page.waitForLoadState('load');
    expect(failed, path).toEqual([]);
    return page;
  }

  it('is public and answered with the headers of every page: no script, never framed, never kept', async () => {
    const res = await fetch(`${web.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    for (const [name, value] of Object.entries(PAGE_HEADERS)) expect(res.headers.get(name), name).toBe(value);
    expect(res.headers.get('content-security-policy')).not.toContain('script-src');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    const page = await res.text();
    expect(page).not.toMatch(/<script/i);
    expect(page).toContain('<a class="skip-link" href="#main">Skip to content</a>');
    // The same answer headers as the sign-in page, the other public page (its opener policy aside).
    const signIn = await fetch(`${web.url}/sign-in`);
    for (const name of ['cache-control', 'content-security-policy', 'x-frame-options', 'referrer-policy']) {
      expect(res.headers.get(name), name).toBe(signIn.headers.get(name));
    }
    await signIn.text();
  });

  it('lists every operation of the document, by tag, with its parameters, body and responses', async () => {
    const context = await web.browser.newContext({ javaScriptEnabled: false });
    const page = await open(context, '/docs');
    const sections = await page.$$eval('section.api-op', (els) => els.map((el) => el.id));
    expect(sections.sort()).toEqual(operations.map((op) => op.id).sort());
    const nav = await page.$$eval('nav.api-nav a[href^="#op-"]', (as) =>
      as.map((a) => a.getAttribute('href')),
    );
    expect(nav.sort()).toEqual(operations.map((op) => `#${op.id}`).sort());
    for (const op of operations) {
      const section = page.locator(`#${op.id}`);
      const title = (await section.locator('h3').textContent()) ?? '';
      expect(title.replace(/\s+/g, ' ').trim(), op.id).toBe(`${op.method} ${op.path}`);
      expect(await section.textContent(), op.id).toContain(op.summary);
      // Under its tag's section.
      expect(await page.locator(`#tag-${op.tag} #${op.id}`).count(), op.id).toBe(1);
    }
    // An edit: its parameters (name, in, required, type), its body's schema resolved, its responses.
    const edit = page.locator('#op-update_article');
    const params = await edit
      .locator('table.api-params tbody tr')
      .evaluateAll((rows) =>
        rows.map((r) => [...r.querySelectorAll('td')].slice(0, 4).map((td) => td.textContent?.trim())),
      );
    expect(params).toContainEqual(['id', 'path', 'yes', 'string']);
    expect(params).toContainEqual(['if-match', 'header', 'no', 'string']);
    // biome-ignore lint/performance/useDomNodeTextContent: the text as laid out, a space between blocks
    const text = (await edit.innerText()).replace(/\s+/g, ' ');
    expect(text).toContain('Request body (required)');
    expect(text).toContain('EditArticleInput');
    expect(text).toContain('200 OK');
    // $ref resolved and nested: the response's protected links are listed with their fields.
    expect(text).toMatch(/protected_links array of ProtectedLink object required/);
    expect(text).toMatch(/kind string required one of "backlink", "internal"/);
    // Nullable fields say so; shared errors link to the introduction.
    expect(text).toMatch(/published_at string \(date-time\) required nullable/);
    expect(await edit.locator('a[href="#error-412"]').count()).toBe(1);
    // The introduction: base URL, keys, errors, pages, limits; the guides are not served.
    // biome-ignore lint/performance/useDomNodeTextContent: the text as laid out, a space between blocks
    const intro = (await page.locator('.api-intro').innerText()).replace(/\s+/g, ' ');
    for (const words of [
      `${web.url}/api/v1/sites`,
      'Authorization: Bearer <key>',
      'problem+json',
      'per_page',
      'RateLimit-Policy',
      'this server does not serve it',
    ]) {
      expect(intro).toContain(words);
    }
    expect(await page.locator('#error-412').count()).toBe(1);
    await context.close();
  });

  it('filters the operations on the server, with a form that works without JavaScript', async () => {
    const context = await web.browser.newContext({ javaScriptEnabled: false });
    const page = await open(context, '/docs');
    await page.fill('#api-filter', 'webhooks POST');
    await Promise.all([page.waitForURL(/\/docs\?q=webhooks\+POST$/), page.press('#api-filter', 'Enter')]);
    const expected = operations
      .filter((op) => op.tag === 'webhooks' && op.method === 'POST')
      .map((op) => op.id);
    expect(expected.length).toBeGreaterThan(1);
    expect((await page.$$eval('section.api-op', (els) => els.map((el) => el.id))).sort()).toEqual(
      expected.sort(),
    );
    expect(await page.textContent('#api-filter-count')).toContain(
      `${expected.length} of ${operations.length} operations match`,
    );
    expect(await page.inputValue('#api-filter')).toBe('webhooks POST');
    // Filtered, the introduction gives way to the results, one link away.
    expect(await page.locator('.api-intro').count()).toBe(0);
    await screenshot(page, 'docs-filtered');
    // Nothing matches: said, with the way back to every operation.
    await page.goto(`${web.url}/docs?q=${encodeURIComponent('no such operation')}`);
    expect(await page.locator('section.api-op').count()).toBe(0);
    expect(await page.textContent('#api-filter-count')).toContain('No operation matches “no such operation”');
    await Promise.all([page.waitForURL(`${web.url}/docs`), page.click('#api-filter-count a')]);
    expect(await page.locator('section.api-op').count()).toBe(operations.length);
    await context.close();
  });

  for (const scheme of ['light', 'dark'] as const) {
    it(`has no serious axe violation and fits a 390 px phone, ${scheme}, signed in or not`, async () => {
      const pages = [
        { path: '/docs', signedIn: false },
        { path: '/docs?q=article', signedIn: true },
      ];
      for (const { path, signedIn } of pages) {
        const context = signedIn
          ? await web.signedIn({ javaScript: true, width: 390 })
          : await web.browser.newContext({ viewport: { width: 390, height: 844 } });
        await noPageScripts(context);
        const page = await open(context, path);
        await page.emulateMedia({ colorScheme: scheme });
        const name = `${path} ${scheme}${signedIn ? ' signed in' : ''}`;
        expect(await page.evaluate('document.documentElement.scrollWidth'), name).toBeLessThanOrEqual(390);
        const header = ((await page.textContent('header.top')) ?? '').trim();
        if (signedIn) expect(header, name).toContain(web.demo.email);
        else expect(header, name).toBe('Content Service');
        await expectAccessible(page, name);
        await screenshot(page, `docs-390-${scheme}${signedIn ? '-signed-in-filtered' : ''}`);
        await page.close();
        if (!signedIn) await context.close();
      }
    }, 180_000);
  }

  it('shows its navigation beside the operations on a wide screen', async () => {
    // A wide screen: the navigation beside the operations.
    const wide = await web.browser.newContext({
      viewport: { width: 1280, height: 900 },
      javaScriptEnabled: false,
    });
    const page = await open(wide, '/docs#op-update_article');
    const [nav, first] = await Promise.all([
      page.locator('nav.api-nav').boundingBox(),
      page.locator('#op-update_article').boundingBox(),
    ]);
    expect((nav?.x ?? 0) + (nav?.width ?? 0)).toBeLessThan(first?.x ?? 0);
    await screenshot(page, 'docs-1280');
    await wide.close();
  });
});

describe('the reference, rendered from a document', () => {
  const doc = {
    openapi: '3.1.0',
    info: { title: 'T', version: '1' },
    servers: [{ url: 'https://api.example' }],
    tags: [{ name: 'things', description: 'The things.' }],
    paths: {
      '/api/v1/things/{id}': {
        get: {
          operationId: 'get_thing',
          tags: ['things'],
          summary: 'Get a <thing>',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': {
              description: 'The thing',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
            },
          },
        },
      },
    },
    components: {
      schemas: {
        Thing: {
          type: 'object',
          required: ['id'],
          properties: {
            id: { type: 'string' },
            kind: { type: 'string', enum: ['a', 'b'] },
            parent: { anyOf: [{ $ref: '#/components/schemas/Thing' }, { type: 'null' }] },
            note: { type: ['string', 'null'], maxLength: 10 },
          },
        },
      },
    },
  };

  it('resolves $refs (a cycle once), shows enums and nullables, escapes what the document says', () => {
    const ref = renderReference(doc);
    expect(ref.total).toBe(1);
    const op = ref.groups[0]?.operations[0];
    if (!op) throw new Error('no operation rendered');
    const section = htmlText(op.section);
    expect(section).toContain('Get a &lt;thing&gt;');
    expect(section).not.toContain('<thing>');
    expect(section).toContain('<code>&quot;a&quot;</code>, <code>&quot;b&quot;</code>');
    expect(section).toContain('<span class="schema-name">Thing</span> object');
    // The cycle: Thing's parent is a Thing, named, not expanded again; and nullable.
    expect(section).toContain(
      '<code class="schema-prop">parent</code> <span class="schema-type"><span class="schema-name">Thing</span> (as above)</span> <span class="tag">nullable</span>',
    );
    expect(section).toMatch(
      /<code class="schema-prop">note<\/code> <span class="schema-type">string<\/span> <span class="tag">nullable<\/span>/,
    );
    expect(section).toContain('at most 10 characters');
  });

  it('keeps an operation when it has every word of the filter', () => {
    const op = { haystack: 'get\n/api/v1/things/{id}\nget_thing\nthings\nget a <thing>' };
    expect(operationMatches(op, filterWords('GET things'))).toBe(true);
    expect(operationMatches(op, filterWords('  '))).toBe(true);
    expect(operationMatches(op, filterWords('put things'))).toBe(false);
    expect(filterWords('x'.repeat(500)).join('').length).toBe(200);
  });
});
