import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The editor with JavaScript on: the rich editor (TipTap, bundled at install) replaces the textarea,
 * protected blocks are atoms that no keystroke removes, and saving is the same edit as the plain form.
 */
describe('the rich editor, JavaScript on', () => {
  let web: WebApp;
  let context: BrowserContext;
  let page: Page;
  let articleId: string;
  let protectedBefore: unknown[];
  const errors: string[] = [];

  type Article = { body: string; revision: number; protected_links: unknown[] };
  const article = async (): Promise<Article> =>
    (await (await web.api(`/articles/${articleId}`)).json()) as Article;

  beforeAll(async () => {
    web = await startWebApp();
    const list = (await (await web.api(`/sites/${web.demo.sites[0]?.id}/articles`)).json()) as {
      data: { id: string }[];
    };
    for (const { id } of list.data) {
      articleId = id;
      protectedBefore = (await article()).protected_links;
      if (protectedBefore.length > 0) break;
    }
    expect(protectedBefore.length).toBeGreaterThan(0);
    context = await web.signedIn({ javaScript: true });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('replaces the textarea with the rich editor, protected links shown as blocks', async () => {
    await page.goto(`${web.url}/articles/${articleId}/edit`);
    await page.waitForSelector('.rich-editor-content');
    expect(await page.isHidden('textarea#body')).toBe(true);
    expect(await page.getAttribute('form.editor-form', 'data-rich-editor')).toBe('on');
    expect(await page.locator('[contenteditable=true] [data-service-protected]').count()).toBe(
      protectedBefore.length,
    );
    expect(errors).toEqual([]);
    await screenshot(page, 'rich-editor');
  });

  it('refuses to remove a protected block: selecting it and pressing Backspace, or clearing everything', async () => {
    errors.length = 0;
    const blocks = page.locator('[contenteditable=true] [data-service-protected]');
    await blocks.first().click();
    await page.keyboard.press('Backspace');
    await page.keyboard.press('Delete');
    expect(await blocks.count()).toBe(protectedBefore.length);
    await page.click('.rich-editor-content p');
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Backspace');
    expect(await blocks.count()).toBe(protectedBefore.length);
    expect(errors).toEqual([]);
  });

  it('saves what was typed as a revision of the editor, every protected link intact', async () => {
    errors.length = 0;
    const before = await article();
    // A fresh page: what the refused keys above left selected plays no part.
    await page.goto(`${web.url}/articles/${articleId}/edit`);
    await page.waitForSelector('.rich-editor-content');
    await page.click('.rich-editor-content h2');
    await page.keyboard.press('End');
    await page.keyboard.type(' Typed in the rich editor.');
    await page.fill('#reason', 'Rich editor test');
    await Promise.all([page.waitForNavigation(), page.click('form.editor-form button[type=submit]')]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}`);
    const after = await article();
    expect(after.revision).toBe(before.revision + 1);
    expect(after.body).toContain('Typed in the rich editor.');
    expect(after.protected_links).toEqual(protectedBefore);
    const revisions = (await (await web.api(`/articles/${articleId}/revisions?per_page=1`)).json()) as {
      data: { origin: string; actor: { type: string }; reason: string }[];
    };
    expect(revisions.data[0]).toMatchObject({
      origin: 'editor',
      actor: { type: 'user' },
      reason: 'Rich editor test',
    });
    // The article page shows external images as their alt text (its policy loads images from the service only).
    expect(errors.filter((e) => !e.includes("img-src 'self'"))).toEqual([]);
  });
});
