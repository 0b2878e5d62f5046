import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The daily edit limit on the web pages: the same budget as the API's (one per account), refused with
 * the API's status and Retry-After, the person's text kept, nothing changed.
 */
describe('the edit limit on the web pages', () => {
  let web: WebApp;
  let articleId: string;

  beforeAll(async () => {
    // A day of one edit, so that one API edit uses it up.
    web = await startWebApp({ env: { EDIT_LIMIT_PER_DAY: '1' } });
    const list = (await (await web.api(`/sites/${web.demo.sites[0]?.id}/articles?per_page=1`)).json()) as {
      data: { id: string }[];
    };
    articleId = list.data[0]?.id as string;
    const edit = await web.api(`/articles/${articleId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'The one edit of the day' }),
    });
    expect(edit.status).toBe(200);
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('refuses a restore once the day’s edits are used up, on the confirmation page, with Retry-After', async () => {
    const page = await (await web.signedIn()).newPage();
    await page.goto(`${web.url}/articles/${articleId}/revisions/1/restore`);
    await page.fill('#reason', 'Back to the original');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('main form[action$="/restore"] button[type=submit]'),
    ]);
    expect(response?.status()).toBe(429);
    expect(Number(response?.headers()['retry-after'])).toBeGreaterThan(0);
    expect(await page.textContent('main')).toContain('article edits for today');
    expect(await page.inputValue('#reason')).toBe('Back to the original');
    await screenshot(page, 'restore-edit-limit');
    const article = (await (await web.api(`/articles/${articleId}`)).json()) as { revision: number };
    expect(article.revision).toBe(2);
  });

  it('refuses a save in the editor the same way, with Retry-After, keeping the text', async () => {
    const page = await (await web.signedIn()).newPage();
    await page.goto(`${web.url}/articles/${articleId}/edit`);
    await page.fill('#title', 'A second edit today');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('form.editor-form button.primary'),
    ]);
    expect(response?.status()).toBe(429);
    // The API's fields: Retry-After, and the edits policy beside the others.
    expect(Number(response?.headers()['retry-after'])).toBeGreaterThan(0);
    expect(response?.headers()['ratelimit-policy']).toContain('"edits";q=1;');
    expect(await page.inputValue('#title')).toBe('A second edit today');
    const article = (await (await web.api(`/articles/${articleId}`)).json()) as {
      revision: number;
      title: string;
    };
    expect(article).toMatchObject({ revision: 2, title: 'The one edit of the day' });
  });
});
