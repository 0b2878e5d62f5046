import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOTS, screenshot, signIn, startWebApp, type WebApp } from '../support/web.ts';
import { connectAssistant } from './site-helpers.ts';

/*
 * The Connect Site page in headless Chromium, JavaScript off: assistants of the same name told apart
 * (their address, when they connected, when they were last used), and a refused webhook shown where
 * the person is, at the top of the screen, linked to the field to correct.
 */

describe('the Connect Site page', () => {
  let web: WebApp;

  beforeAll(async () => {
    web = await startWebApp({ articles: 1, backlinks: 0 });
    await connectAssistant(web, {
      grantId: 'grant_same_1',
      clientId: 'client_same_1',
      name: 'Claude',
      host: 'claude.ai',
      daysAgo: 9,
    });
    await connectAssistant(web, {
      grantId: 'grant_same_2',
      clientId: 'client_same_2',
      name: 'Claude',
      host: 'localhost:6274',
      daysAgo: 2,
    });
  }, 120_000);
  afterAll(async () => {
    await web?.stop();
  });

  /** The assistants' rows, one array of cell texts each. */
  const assistantRows = (page: Page): Promise<string[][]> =>
    page.$$eval('#assistants tbody tr', (rows) =>
      rows.map((r) => [...r.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim())),
    );

  it('tells two assistants of the same name apart, and disconnects the one chosen', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    await page.goto(`${web.url}/connect`);
    const headers = await page.$$eval('#assistants thead th', (ths) => ths.map((th) => th.textContent));
    expect(headers.slice(0, 5)).toEqual(['Assistant', 'Address', 'Access', 'Connected', 'Last used']);
    const day = (daysAgo: number): string =>
      new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    const rows = await assistantRows(page);
    expect(rows.map((r) => r.slice(0, 3))).toEqual([
      ['Claude', 'claude.ai', 'read and write'],
      ['Claude', 'localhost:6274', 'read and write'],
    ]);
    expect(rows[0]?.[3]).toContain(day(9));
    expect(rows[1]?.[3]).toContain(day(2));
    expect(rows.every((r) => r[4]?.startsWith(day(0)))).toBe(true);
    // Each Disconnect button names its assistant by name, address and since when.
    const buttons = await page.$$eval('#assistants button', (bs) =>
      bs.map((b) => b.getAttribute('aria-label')),
    );
    expect(buttons).toEqual([
      expect.stringMatching(
        /^Disconnect Claude \(claude\.ai, connected \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\)$/,
      ),
      expect.stringMatching(/^Disconnect Claude \(localhost:6274, connected /),
    ]);
    await screenshot(page, 'connect-assistants');
    await Promise.all([
      page.waitForNavigation(),
      page.click('#assistants button[aria-label^="Disconnect Claude (localhost:6274"]'),
    ]);
    expect((await assistantRows(page)).map((r) => r[1])).toEqual(['claude.ai']);
    await context.close();
  });

  for (const [width, height] of [
    [1280, 800],
    [390, 844],
  ] as const) {
    it(`shows a refused webhook at the top of the screen, linked to its field, at ${width}x${height}`, async () => {
      const context = await web.browser.newContext({ viewport: { width, height }, javaScriptEnabled: false });
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await page.goto(`${web.url}/connect`);
      await page.fill('#webhook-url', 'http://hooks.example.com/plain');
      await page.check('#webhook-event-backlink-acquired');
      await Promise.all([page.waitForNavigation(), page.click('#add-webhook button[type=submit]')]);
      const error = await page.$eval('#webhook-error', (el) => {
        const box = el.getBoundingClientRect();
        return { top: box.top, bottom: box.bottom, text: (el.textContent ?? '').trim() };
      });
      expect(error.text).toMatch(/^The URL must be an https URL/);
      expect(error.top).toBeGreaterThanOrEqual(0);
      expect(error.bottom).toBeLessThanOrEqual(height);
      // The field to correct is on the screen too, and the message links to it.
      const field = await page.$eval('#webhook-url', (el) => el.getBoundingClientRect().bottom);
      expect(field).toBeLessThanOrEqual(height);
      expect(await page.getAttribute('#webhook-error a', 'href')).toBe('#webhook-url');
      expect(await page.getAttribute('#webhook-url', 'aria-describedby')).toBe('webhook-error');
      // What the person sees: the screen, not the whole page.
      await page.screenshot({ path: join(SHOTS, `connect-webhook-error-${width}.png`) });
      await page.click('#webhook-error a');
      expect(await page.evaluate('document.activeElement.id')).toBe('webhook-url');
      await context.close();
    });
  }

  it('shows a new key once, on the page after the form (a reload makes none), with a Copy button', async () => {
    for (const [width, scheme] of [
      [1280, 'light'],
      [390, 'dark'],
    ] as const) {
      const context = await web.browser.newContext({
        viewport: { width, height: 844 },
        colorScheme: scheme,
        permissions: ['clipboard-read', 'clipboard-write'],
      });
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await page.goto(`${web.url}/connect`);
      const keyRows = async (): Promise<number> => page.locator('#keys tbody tr').count();
      const before = await keyRows();
      await page.fill('#key-name', `Copied ${width}`);
      const statuses: number[] = [];
      page.on('response', (r) => {
        if (new URL(r.url()).pathname.startsWith('/connect')) statuses.push(r.status());
      });
      await Promise.all([
        page.waitForNavigation(),
        page.click('form[action="/connect/keys"] button[type=submit]'),
      ]);
      // The form was answered with a 303 to the page: the key is in neither address.
      expect(statuses).toEqual([303, 200]);
      expect(page.url()).toBe(`${web.url}/connect#new-key`);
      const key = await page.inputValue('#new-key-value');
      expect(key).toMatch(/^cs_live_/);
      expect(await page.getAttribute('#new-key-value', 'readonly')).toBe('');
      expect(await page.textContent('label[for="new-key-value"]')).toBe(`The key “Copied ${width}”`);
      expect(await keyRows()).toBe(before + 1);
      // With the service's script, a Copy button that copies it and says so.
      await page.click('#new-key button[data-copy]');
      await page.waitForFunction(
        "document.getElementById('new-key-value-status')?.textContent === 'Copied.'",
      );
      expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
      expect(await page.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(page, `connect-new-key-${width}-${scheme}`);
      // The key works, and a reload neither shows it again nor makes another.
      const ok = await fetch(`${web.url}/api/v1/sites`, { headers: { authorization: `Bearer ${key}` } });
      expect(ok.status).toBe(200);
      await page.reload();
      expect(await page.isVisible('#new-key')).toBe(false);
      expect(await page.content()).not.toContain(key);
      expect(await keyRows()).toBe(before + 1);
      await context.close();
    }
  });

  it('shows the new key in a read-only field to select without JavaScript, the Copy button hidden', async () => {
    const context = await web.signedIn({ width: 390 });
    const page = await context.newPage();
    await page.goto(`${web.url}/connect`);
    await page.fill('#key-name', 'Selected by hand');
    await Promise.all([
      page.waitForNavigation(),
      page.click('form[action="/connect/keys"] button[type=submit]'),
    ]);
    const key = await page.inputValue('#new-key-value');
    expect(key).toMatch(/^cs_live_/);
    expect(await page.isVisible('#new-key button[data-copy]')).toBe(false);
    // Selected whole by a click and Ctrl+A, as a person copies it by hand.
    await page.click('#new-key-value');
    await page.keyboard.press('Control+A');
    const selected =
      "(f => f.value.slice(f.selectionStart, f.selectionEnd))(document.getElementById('new-key-value'))";
    expect(await page.evaluate(selected)).toBe(key);
    await screenshot(page, 'connect-new-key-390-no-script');
    await context.close();
  });
});
