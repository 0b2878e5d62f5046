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

  it('cleans pasted HTML to what the server allows: a pasted protected marker is an ordinary link, no image, no handler', async () => {
    errors.length = 0;
    await page.goto(`${web.url}/articles/${articleId}/edit`);
    await page.waitForSelector('.rich-editor-content');
    await page.click('.rich-editor-content h2');
    await page.keyboard.press('End');
    const pasted =
      '<a data-service-protected="backlink" data-service-id="bl_pasted" href="https://pasted.example/">' +
      '<img src="x" onerror="window.pwned = 1">Pasted link</a> <script>window.pwned = 2</script>' +
      '<b onclick="window.pwned = 3">and bold</b>';
    // A paste as the browser delivers it: a ClipboardEvent carrying the HTML in its DataTransfer.
    await page.evaluate(`(() => {
      const data = new DataTransfer();
      data.setData('text/html', ${JSON.stringify(pasted)});
      data.setData('text/plain', 'Pasted link and bold');
      const event = new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true });
      document.querySelector('.rich-editor-content').dispatchEvent(event);
    })()`);
    const content = page.locator('.rich-editor-content');
    await content.locator('a', { hasText: 'Pasted link' }).waitFor();
    expect(await content.locator('img').count()).toBe(0);
    expect(await content.locator('[onerror], [onclick], script').count()).toBe(0);
    const link = content.locator('a', { hasText: 'Pasted link' });
    expect(await link.getAttribute('href')).toBe('https://pasted.example/');
    expect(await link.getAttribute('data-service-protected')).toBeNull();
    expect(await link.getAttribute('data-service-id')).toBeNull();
    // The blocks of the body as loaded are still the only atoms (ProseMirror makes a leaf node uneditable).
    expect(await content.locator('[data-service-protected]').count()).toBe(protectedBefore.length);
    expect(await content.locator('[data-service-protected][contenteditable="false"]').count()).toBe(
      protectedBefore.length,
    );
    expect(await content.locator('[contenteditable="false"]').count()).toBe(protectedBefore.length);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    expect(await content.textContent()).toContain('Pasted link');
    expect(await content.textContent()).toContain('and bold');
    // Chromium checks the page's policy as it parses a handler attribute, even in the inert document
    // the pasted HTML is cleaned in: one report per handler of the clipboard, nothing run (no pwned).
    const blocked = (e: string) => e.startsWith('Executing inline event handler violates');
    expect(errors.filter(blocked)).toHaveLength(2);
    expect(errors.filter((e) => !blocked(e))).toEqual([]);
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
    // The article page loads its featured image from the demo's https host, which does not answer here.
    expect(errors.filter((e) => !e.startsWith('Failed to load resource: net::ERR_'))).toEqual([]);
  });
});
