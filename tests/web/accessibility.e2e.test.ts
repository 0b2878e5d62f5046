import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import {
  articleWithTwoRevisions,
  createStaff,
  screenshot,
  signIn,
  staffSignIn,
  startWebApp,
  type WebApp,
} from '../support/web.ts';

/*
 * axe-core on every page of the web app (WCAG 2.0/2.1 A and AA, best practices): no serious or
 * critical violation, JavaScript off, at 1100 px and on a phone (390 px), in the light and the dark
 * colour scheme; the editor also with JavaScript on (the rich editor).
 */
const staff = { name: 'Ada Access', email: 'ada.access@example.com', password: 'support password 2026' };

const LOOKS = [
  { width: 1100, scheme: 'light' },
  { width: 390, scheme: 'light' },
  { width: 1100, scheme: 'dark' },
  { width: 390, scheme: 'dark' },
] as const;

describe('accessibility (axe-core)', () => {
  let web: WebApp;
  let siteId: string;
  let articleId: string;

  beforeAll(async () => {
    web = await startWebApp();
    await createStaff(web, staff);
    siteId = web.demo.sites[0]?.id as string;
    articleId = await articleWithTwoRevisions(web, siteId, 'An accessible title');
  }, 120_000);
  afterAll(async () => {
    await web?.stop();
  });

  /** A context at this width and colour scheme; the pages' own scripts are off unless asked. */
  const newContext = async (width: number, scheme: 'light' | 'dark', pageScripts = false) => {
    const context = await web.browser.newContext({ viewport: { width, height: 800 }, colorScheme: scheme });
    return pageScripts ? context : noPageScripts(context);
  };

  /** Opens each path in the context and checks it; returns nothing, fails on the first bad page. */
  const check = async (context: BrowserContext, paths: string[], tag: string): Promise<void> => {
    const page = await context.newPage();
    for (const path of paths) {
      const response = await page.goto(`${web.url}${path}`);
      expect(response?.status(), path).toBe(200);
      const name = `a11y-${tag}-${path
        .replace(/[a-z]{3,4}_[0-9a-z]{26}/g, 'id')
        .replace(/[^a-z0-9]+/gi, '-')
        .replace(/^-|-+$/g, '')}`;
      await expectAccessible(page, `${path} (${tag})`);
      if (tag.startsWith('1100-light') || tag.startsWith('390-dark')) await screenshot(page, name);
    }
    await page.close();
  };

  /** "View as of…" this second (UTC), after every revision the test made. */
  const asOfNow = (): string => {
    const now = new Date().toISOString();
    return `date=${now.slice(0, 10)}&time=${now.slice(11, 19)}`;
  };

  it('fails a page with serious violations, naming each rule and element', async () => {
    const context = await newContext(1100, 'light');
    const page = await context.newPage();
    await page.setContent(
      '<!doctype html><html lang="en"><title>Bad</title><main><img src="x.png" id="no-alt"><input id="bare"></main></html>',
    );
    const failure = await expectAccessible(page, 'a bad page').then(
      () => '',
      (e: Error) => e.message,
    );
    expect(failure).toContain('critical image-alt');
    expect(failure).toContain('#no-alt');
    expect(failure).toContain('label');
    await context.close();
  });

  for (const { width, scheme } of LOOKS) {
    const tag = `${width}-${scheme}`;

    it(`the sign-in page, ${tag}`, async () => {
      const context = await newContext(width, scheme);
      await check(context, ['/sign-in'], tag);
      await context.close();
    });

    it(`an account's pages, ${tag}`, async () => {
      const context = await newContext(width, scheme);
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await check(
        context,
        [
          '/sites',
          `/sites/${siteId}`,
          `/sites/${siteId}/report`,
          `/articles/${articleId}`,
          `/articles/${articleId}/revisions/1`,
          `/articles/${articleId}/revisions/1/restore`,
          `/articles/${articleId}/revisions/compare?from=1&to=1`,
          `/articles/${articleId}/as-of?${asOfNow()}`,
          `/articles/${articleId}/edit`,
          `/articles/${articleId}/featured-image`,
          '/activity',
          '/search?q=homeowners',
          '/connect',
          '/account/password',
        ],
        tag,
      );
      await context.close();
    }, 120_000);

    it(`the support staff's pages, ${tag}`, async () => {
      const context = await newContext(width, scheme);
      const page = await context.newPage();
      await staffSignIn(page, web.url, staff);
      await check(
        context,
        [
          '/staff',
          `/staff?q=${encodeURIComponent(web.demo.email.slice(0, 8))}`,
          `/staff/accounts/${web.demo.account_id}`,
          `/staff/articles/${articleId}`,
          `/staff/articles/${articleId}/as-of?${asOfNow()}`,
          '/staff/audit',
        ],
        `${tag}-staff`,
      );
      await context.close();
    }, 60_000);

    it(`the rich editor (JavaScript on), ${tag}`, async () => {
      const context = await newContext(width, scheme, true);
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await page.goto(`${web.url}/articles/${articleId}/edit`);
      await page.waitForSelector('.rich-editor-content');
      await expectAccessible(page, `rich editor (${tag})`);
      if (tag === '1100-light' || tag === '390-dark') await screenshot(page, `a11y-${tag}-rich-editor`);
      await context.close();
    }, 60_000);
  }
});
