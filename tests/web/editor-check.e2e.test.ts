import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { PATIENCE } from '../support/wait.ts';
import {
  articlesWithProtectedLinks,
  expectLabelled,
  screenshot,
  startWebApp,
  type WebApp,
} from '../support/web.ts';

/*
 * The editor's "Check changes" (`POST /articles/{id}/preview`, the form's second submit button) in
 * headless Chromium: with JavaScript off, the form again with the person's text and, above it, what
 * saving would do (removed markup, protected links in words, the word diff), announced as a status;
 * nothing saved; recorded as `articles.preview`. With the rich editor on, the same.
 */

type ProtectedLink = { id: string; text: string };
type Article = {
  id: string;
  title: string;
  body: string;
  revision: number;
  protected_links: ProtectedLink[];
};

describe('the editor’s Check changes', () => {
  let web: WebApp;
  let articles: Article[];

  async function article(id: string): Promise<Article> {
    return (await (await web.api(`/articles/${id}`)).json()) as Article;
  }
  function take(): Article {
    const next = articles.shift();
    if (!next) throw new Error('the seed has too few articles with protected links');
    return next;
  }
  async function openEditor(id: string, opts: { axe?: boolean; javaScript?: boolean } = {}): Promise<Page> {
    const context = opts.axe
      ? await noPageScripts(await web.signedIn({ javaScript: true }))
      : await web.signedIn({ javaScript: opts.javaScript ?? false, width: 1100 });
    const page = await context.newPage();
    expect((await page.goto(`${web.url}/articles/${id}/edit`))?.status()).toBe(200);
    return page;
  }
  /** Presses Enter on the Check changes button; the answer's status. */
  async function check(page: Page): Promise<number> {
    await page.focus('form.editor-form button[value=check]');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.waitForNavigation(),
      page.keyboard.press('Enter'),
    ]);
    expect(response.url()).toBe(`${web.url}${new URL(page.url()).pathname}`);
    return response.status();
  }

  beforeAll(async () => {
    web = await startWebApp({ articles: 6 });
    articles = await articlesWithProtectedLinks<Article>(web);
    expect(articles.length).toBeGreaterThanOrEqual(3);
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('shows what saving would do above the form, keeps the unsaved text, saves nothing', async () => {
    const a = take();
    const page = await openEditor(a.id);
    await page.focus('#title');
    await page.keyboard.press('End');
    await page.keyboard.type(' (checked)');
    await page.focus('#body');
    await page.keyboard.press('ControlOrMeta+End');
    await page.keyboard.type('\n<p onclick="steal()">Words only checked<script>alert(1)</script></p>');
    expect(await check(page)).toBe(200);
    expect(new URL(page.url()).pathname).toBe(`/articles/${a.id}/preview`);
    expect(await page.title()).toContain('Checked changes to');
    const verdict = await page.locator('#check-verdict');
    expect(await verdict.getAttribute('role')).toBe('status');
    expect(await verdict.textContent()).toContain(`Saving this would make revision ${a.revision + 1}`);
    const removed = await page.textContent('#removed');
    expect(removed).toContain('onclick="steal()"');
    expect(removed).toContain('script event handler');
    expect(await page.textContent('#removed-heading')).toBe('Would be removed when saving');
    expect(await page.textContent('#check-title')).toContain(`${a.title} (checked)`);
    expect(await page.textContent('#check .diff')).toContain('Words only checked');
    expect(await page.textContent('#check .diff ins')).toContain('Words only checked');
    // The person's text, as typed, is still in the form; nothing is saved.
    expect(await page.inputValue('#title')).toBe(`${a.title} (checked)`);
    expect(await page.inputValue('#body')).toBe(
      `${a.body}\n<p onclick="steal()">Words only checked<script>alert(1)</script></p>`,
    );
    expect((await article(a.id)).revision).toBe(a.revision);
    await expectLabelled(page);
    await screenshot(page, 'editor-check');
    // Saved from here: the revision the check announced.
    await page.focus('form.editor-form button.primary');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const now = await article(a.id);
    expect(now.revision).toBe(a.revision + 1);
    expect(now.title).toBe(`${a.title} (checked)`);
    // The check is in the activity log as articles.preview, with no revision.
    await vi.waitFor(async () => {
      const res = await web.api(`/activity?article_id=${a.id}&per_page=100`);
      const records = (
        (await res.json()) as { data: { operation: string; revision: number | null; source: string }[] }
      ).data;
      expect(records).toContainEqual(
        expect.objectContaining({ operation: 'articles.preview', revision: null, source: 'editor' }),
      );
    }, PATIENCE);
  });

  it('names the protected links saving would be refused for, in words, and is accessible', async () => {
    const a = take();
    const link = a.protected_links[0] as ProtectedLink;
    const page = await openEditor(a.id, { axe: true });
    const element = new RegExp(`<a[^>]*data-service-id="${link.id}"[^>]*>(.*?)</a>`, 's');
    const without = a.body.replace(element, '$1');
    await page.fill('#body', without);
    expect(await check(page)).toBe(200);
    expect(await page.textContent('#check-verdict')).toContain('Saving this would be refused');
    const named = await page.textContent('#check-protected');
    expect(named).toContain(link.id);
    expect(named).toContain(link.text);
    expect(named).toContain('removed');
    expect(await page.textContent('#protected-links li.refused')).toContain(link.text);
    expect(await page.locator('#repair button').count()).toBe(1);
    expect(await page.inputValue('#body')).toBe(without);
    expect((await article(a.id)).revision).toBe(a.revision);
    await screenshot(page, 'editor-check-refused');
    await expectAccessible(page, 'the checked edit');
  });

  it('works the same with the rich editor on', async () => {
    const a = take();
    const page = await openEditor(a.id, { javaScript: true });
    expect(await page.getAttribute('form.editor-form', 'data-rich-editor')).toBe('on');
    await page.focus('#title');
    await page.keyboard.press('End');
    await page.keyboard.type(' again');
    expect(await check(page)).toBe(200);
    expect(await page.textContent('#check-verdict')).toContain(
      `Saving this would make revision ${a.revision + 1}`,
    );
    expect(await page.textContent('#check-title')).toContain(`${a.title} again`);
    // The rich editor writes the body back as it serialises it: the same words, the markup maybe not.
    expect(await page.textContent('#check-body')).toMatch(/^The (body is the same|words are the same)/);
    expect(await page.inputValue('#title')).toBe(`${a.title} again`);
    expect((await article(a.id)).revision).toBe(a.revision);
    await screenshot(page, 'editor-check-rich');
  });
});
