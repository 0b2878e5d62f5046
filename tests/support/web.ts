import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { expect } from 'vitest';
import { freePort } from '../oauth/helpers.ts';
import { launchBrowser } from './browser.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { cli, ROOT } from './process.ts';
import { type ServerProcess, startServer } from './server.ts';

/** Where page tests leave their screenshots (git ignores test-results/; CI keeps it as an artefact). */
export const SHOTS = join(ROOT, 'test-results', 'screenshots');

/** The demo account a web test signs in as, with what `seed-demo --json` made for it. */
export type DemoAccount = {
  account_id: string;
  email: string;
  password: string;
  api_key: string;
  sites: { id: string; domain: string }[];
};

export type WebApp = {
  server: ServerProcess;
  /** The server's address, also its PUBLIC_URL (the forms check their Origin against it). */
  url: string;
  demo: DemoAccount;
  browser: Browser;
  /** Environment of the server's database, for the CLI (`cli(args, env)`). */
  env: Record<string, string>;
  /** A browser context signed in as the demo account (JavaScript off unless asked). */
  signedIn(opts?: { javaScript?: boolean; width?: number }): Promise<BrowserContext>;
  /** Calls the API as the demo account's write key. */
  api(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
};

/**
 * A real server on a free port over a fresh PostgreSQL database, seeded with a demo account
 * (`seed-demo`: two sites, articles with protected links, backlinks), and headless Chromium.
 */
export async function startWebApp(
  opts: { articles?: number; backlinks?: number; env?: Record<string, string>; browserArgs?: string[] } = {},
): Promise<WebApp> {
  await mkdir(SHOTS, { recursive: true });
  const dir = await mkdtemp(join(tmpdir(), 'cs-web-e2e-'));
  const db: TestDatabase = await createTestDatabase('postgres');
  const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir, MEDIA_DIR: join(dir, 'media') };
  // A start that fails part way leaves nothing behind (afterAll has no `stop` to call then).
  const undo: Array<() => Promise<unknown>> = [
    () => rm(dir, { recursive: true, force: true }),
    () => db.drop(),
  ];
  const undone = async (err: unknown): Promise<never> => {
    for (const step of undo.reverse()) await step().catch(() => {});
    throw err;
  };
  const seeded = await cli(
    [
      'seed-demo',
      '--json',
      '--sites',
      '2',
      '--articles',
      String(opts.articles ?? 6),
      '--backlinks',
      String(opts.backlinks ?? 12),
      '--seed',
      '7',
    ],
    env,
  ).catch(undone);
  if (seeded.code !== 0) await undone(new Error(`seed-demo failed: ${seeded.stderr}`));
  const demo = JSON.parse(seeded.stdout) as DemoAccount;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = await startServer({ ...env, ...opts.env, PORT: String(port), PUBLIC_URL: url }).catch(
    undone,
  );
  undo.push(() => server.stop());
  const browser = await launchBrowser(opts.browserArgs).catch(undone);
  const contexts: BrowserContext[] = [];
  return {
    server,
    url,
    demo,
    browser,
    env,
    async signedIn(o = {}) {
      const context = await browser.newContext({
        javaScriptEnabled: o.javaScript ?? false,
        viewport: { width: o.width ?? 1100, height: 800 },
      });
      contexts.push(context);
      // The sign-in page stays open (closed with the context): its renderer then serves the
      // context's next pages, where closing it would have Chromium start another, at a second or
      // more of CPU each on a busy machine.
      const page = await context.newPage();
      await signIn(page, url, demo);
      return context;
    },
    api: (path, init = {}) =>
      fetch(`${url}/api/v1${path}`, {
        ...init,
        headers: { authorization: `Bearer ${demo.api_key}`, ...(init.headers ?? {}) },
      }),
    async stop() {
      for (const context of contexts) await context.close().catch(() => {});
      await browser.close().catch(() => {});
      await server.stop();
      await db.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Signs in on the sign-in page with the keyboard, as a person would. */
export async function signIn(
  page: Page,
  url: string,
  who: { email: string; password: string },
): Promise<void> {
  await page.goto(`${url}/sign-in`);
  await page.fill('#email', who.email);
  await page.fill('#password', who.password);
  await Promise.all([page.waitForNavigation(), page.press('#password', 'Enter')]);
  // Signed in: the header names the person.
  expect(await page.textContent('header.top')).toContain(who.email);
}

/** Every form field has a label that names it. */
export async function expectLabelled(page: Page): Promise<void> {
  const labels = new Map(
    await page.$$eval('label[for]', (ls) => ls.map((l) => [l.getAttribute('for'), l.textContent?.trim()])),
  );
  const fields = await page.$$eval('input:not([type=hidden]), textarea, select', (fs) =>
    fs.map((f) => [f.getAttribute('id'), f.getAttribute('name')]),
  );
  const unlabelled = fields.filter(([id]) => !(id && labels.get(id))).map(([, name]) => name);
  expect(unlabelled).toEqual([]);
}

/**
 * A full-page screenshot under SHOTS, for a person to look at. `timeoutMs`: for a page slow to paint
 * (Playwright's default is 30 s). Chromium can refuse a capture while its compositor is starved of
 * CPU (`Page.captureScreenshot`: "Unable to capture screenshot", seen with both cores busy): that
 * refusal is asked again, up to three times; any other error is the test's.
 */
export async function screenshot(page: Page, name: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.screenshot({
        path: join(SHOTS, `${name}.png`),
        fullPage: true,
        ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
      });
      return;
    } catch (error) {
      if (attempt >= 3 || !String(error).includes('Unable to capture screenshot')) throw error;
    }
  }
}

/** A support staff member, made with the CLI as an operator does (`staff create`). */
export type StaffMember = { name: string; email: string; password: string };

export async function createStaff(web: WebApp, who: StaffMember): Promise<void> {
  const made = await cli(
    ['staff', 'create', '--name', who.name, '--email', who.email, '--password', who.password],
    web.env,
  );
  expect(made.code, made.stderr).toBe(0);
}

/** Signs a staff member in; they land on /staff (the header names them, not their email). */
export async function staffSignIn(page: Page, url: string, who: StaffMember): Promise<void> {
  await page.goto(`${url}/sign-in`);
  await page.fill('#email', who.email);
  await page.fill('#password', who.password);
  await Promise.all([page.waitForNavigation(), page.press('#password', 'Enter')]);
  expect(new URL(page.url()).pathname).toBe('/staff');
}

/**
 * The id of a site's first article, given a second revision through the API (so that revision 1 has
 * a restore page).
 */
export async function articleWithTwoRevisions(web: WebApp, siteId: string, title: string): Promise<string> {
  const list = (await (await web.api(`/sites/${siteId}/articles`)).json()) as { data: { id: string }[] };
  const articleId = list.data[0]?.id as string;
  const edit = await web.api(`/articles/${articleId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title, reason: 'A second revision' }),
  });
  expect(edit.status).toBe(200);
  return articleId;
}

/** The demo account's articles that have protected links, as GET article answers them, site by site. */
export async function articlesWithProtectedLinks<A extends { protected_links: unknown[] }>(
  web: WebApp,
): Promise<A[]> {
  const found: A[] = [];
  for (const site of web.demo.sites) {
    const res = await web.api(`/sites/${site.id}/articles?per_page=100`);
    const { data } = (await res.json()) as { data: { id: string }[] };
    for (const item of data) {
      const full = (await (await web.api(`/articles/${item.id}`)).json()) as A;
      if (full.protected_links.length > 0) found.push(full);
    }
  }
  return found;
}
