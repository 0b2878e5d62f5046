import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, registerClient } from '../oauth/helpers.ts';
import { launchBrowser } from '../support/browser.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli, ROOT } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

/*
 * The pages of the account area and the authorization server's error page as a person meets them: a
 * real server, headless Chromium with JavaScript off, the keyboard only. Each page is screenshotted to
 * test-results/screenshots/ for a person to look at.
 */

const SHOTS = join(ROOT, 'test-results', 'screenshots');

describe('pages in a browser, JavaScript off, keyboard only', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let browser: Browser;
  let context: BrowserContext;
  const person = { name: 'Dana Plumber', email: 'dana.pages@example.com', password: 'old password 12345' };

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'cs-pages-e2e-'));
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir };
    const created = await cli(
      ['accounts', 'create', '--name', person.name, '--email', person.email, '--password', person.password],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    // The forms check their Origin against PUBLIC_URL: the address the browser uses.
    const port = await freePort();
    server = await startServer({ ...env, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` });
    browser = await launchBrowser();
    context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1000, height: 700 } });
  });
  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await server?.stop();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Every form field has a label that names it. */
  async function expectLabelled(page: Page): Promise<void> {
    const labels = new Map(
      await page.$$eval('label[for]', (ls) => ls.map((l) => [l.getAttribute('for'), l.textContent?.trim()])),
    );
    const fields = await page.$$eval('input:not([type=hidden]), textarea, select', (fs) =>
      fs.map((f) => [f.getAttribute('id'), f.getAttribute('name')]),
    );
    const unlabelled = fields.filter(([id]) => !(id && labels.get(id))).map(([, name]) => name);
    expect(unlabelled).toEqual([]);
  }

  it('signs in and changes the password with the keyboard; a wrong current password is said on the page', async () => {
    const page = await context.newPage();
    await page.goto(`${server.url}/account/password`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    await page.focus('#email');
    await page.keyboard.type(person.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(person.password);
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(new URL(page.url()).pathname).toBe('/account/password');
    await expectLabelled(page);
    await page.screenshot({ path: join(SHOTS, 'account-password.png'), fullPage: true });

    await page.focus('input[type=password]');
    await page.keyboard.type('not the password');
    await page.keyboard.press('Tab');
    await page.keyboard.type('a new password 2026');
    await page.keyboard.press('Tab');
    await page.keyboard.type('a new password 2026');
    await page.keyboard.press('Enter');
    await page.waitForLoadState();
    expect(await page.textContent('[role=alert]')).toContain('not your current password');
    await page.screenshot({ path: join(SHOTS, 'account-password-refused.png'), fullPage: true });

    await page.focus('input[type=password]');
    await page.keyboard.type(person.password);
    await page.keyboard.press('Tab');
    await page.keyboard.type('a new password 2026');
    await page.keyboard.press('Tab');
    await page.keyboard.type('a new password 2026');
    await page.keyboard.press('Enter');
    await page.waitForURL(/changed=1/);
    expect(await page.textContent('main')).toMatch(/changed/i);
    await page.screenshot({ path: join(SHOTS, 'account-password-changed.png'), fullPage: true });
    await page.close();
  });

  it('an authorization request that is wrong before the person acts stays on the service, on its error page', async () => {
    const registered = await registerClient(server.url, {
      client_name: 'Somebody’s assistant',
      redirect_uris: ['https://elsewhere.example/landing'],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    });
    expect(registered.status).toBe(201);
    const { client_id } = (await registered.json()) as { client_id: string };
    const page = await context.newPage();
    const url = new URL('/oauth/authorize', server.url);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id,
      redirect_uri: 'https://elsewhere.example/landing',
      scope: 'content:read',
      state: 'xyz',
    }).toString();
    const response = await page.goto(url.href);
    expect(response?.status()).toBe(400);
    expect(new URL(page.url()).host).toBe(new URL(server.url).host);
    expect(await page.textContent('h1')).toBeTruthy();
    expect(await page.textContent('body')).toMatch(/PKCE|code_challenge/);
    await page.screenshot({ path: join(SHOTS, 'oauth-error.png'), fullPage: true });
    await page.close();
  });
});
