import { mkdir } from 'node:fs/promises';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { authorizeUrl, createPerson, type Person, PUBLIC_CLIENT, pkce } from '../oauth/helpers.ts';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { launchBrowser } from '../support/browser.ts';
import { csrfOf, type InjectBrowser, injectBrowser } from '../support/inject-browser.ts';
import { createProxiedTestRuntime, type PgProxy } from '../support/pg-proxy.ts';
import { addSiteWithArticle, pipelineActor } from '../support/runtime.ts';
import { PATIENCE } from '../support/wait.ts';
import { SHOTS, screenshot } from '../support/web.ts';

/*
 * The web pages while PostgreSQL is away (the app's connections go through a proxy the test cuts:
 * open connections dropped, new ones refused, as in a restart): loading a page or sending a form is
 * answered with the 503 page, in the pages' layout, with Retry-After; never a 500, never JSON, never
 * the driver's words; a form sent then applied nothing, and sent again once the database is back, works.
 */

const PUBLIC_URL = 'http://cs.example.test';
/** What must never reach a person: the driver's and the server's words. */
const DRIVER_WORDS =
  /ECONNREFUSED|ECONNRESET|127\.0\.0\.1|cs_test_|SQLSTATE|Connection terminated|select |postgres/i;

let app: FastifyInstance;
let runtime: Runtime;
let proxy: PgProxy;
let drop: () => Promise<void>;
let dana: Person;
let siteId: string;
let articleId: string;

/** A browser without scripts, its forms sent from the service's own origin. */
const browser = (): InjectBrowser => injectBrowser(app, { headers: { origin: PUBLIC_URL } });

/** Runs `work` with PostgreSQL away, and brings it back whatever happens. */
async function whileAway<T>(work: () => Promise<T>): Promise<T> {
  await proxy.cut();
  // The pool notices its idle connections are gone before the request is made.
  await vi.waitFor(() => expect(runtime.handle.pool.idleCount).toBe(0), PATIENCE);
  try {
    return await work();
  } finally {
    await proxy.restore();
  }
}

/** The 503 page: the layout's HTML, Retry-After, the pages' headers, plain words only. */
function expectUnavailablePage(res: LightMyRequestResponse, what: string): void {
  expect(res.statusCode, what).toBe(503);
  expect(res.headers['content-type'], what).toBe('text/html; charset=utf-8');
  expect(res.headers['retry-after'], what).toBe('5');
  expect(res.headers['cache-control'], what).toBe('no-store');
  expect(res.headers['content-security-policy'], what).toContain("frame-ancestors 'none'");
  expect(res.body, what).toContain('<title>Briefly unavailable · Content Service</title>');
  expect(res.body, what).toContain('<h1>The service is briefly unavailable</h1>');
  expect(res.body, what).toContain('Try again in a few seconds.');
  expect(res.body, what).not.toMatch(DRIVER_WORDS);
}

beforeAll(async () => {
  const test = await createProxiedTestRuntime();
  ({ runtime, proxy, drop } = test);
  dana = await createPerson(runtime);
  ({ siteId, articleId } = await addSiteWithArticle(runtime, dana.accountId));
  const caller = { origin: 'rewrite' as const, actor: pipelineActor };
  await runtime.commands.editArticle(dana.accountId, articleId, { title: 'Boiler care, rewritten' }, caller);
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL, LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-away' },
    logger: false,
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

describe('web pages while PostgreSQL is away', () => {
  it('sign-in: the page loads, sending the form is the 503 page, sending it again later signs in', async () => {
    const b = browser();
    const away = await whileAway(async () => {
      // The empty form needs no database (no session yet, the CSRF token is an HMAC).
      const form = await b.get('/sign-in');
      expect(form.statusCode).toBe(200);
      const sent = await b.post('/sign-in', {
        csrf: csrfOf(form.body),
        email: dana.email,
        password: dana.password,
      });
      return { form, sent };
    });
    expectUnavailablePage(away.sent, 'POST /sign-in');
    expect(away.sent.body).toContain('the change was either made in full or not at all');
    expect(away.sent.cookies.find((c) => c.name === 'cs_session')).toBeUndefined();

    const again = await b.post('/sign-in', {
      csrf: csrfOf(away.form.body),
      email: dana.email,
      password: dana.password,
    });
    expect(again.statusCode).toBe(303);
  });

  it('every page of a signed-in person is the 503 page, with a link to load it again', async () => {
    const b = browser();
    const form = await b.get('/sign-in');
    expect(
      (await b.post('/sign-in', { csrf: csrfOf(form.body), email: dana.email, password: dana.password }))
        .statusCode,
    ).toBe(303);
    const paths = [
      '/',
      '/sites',
      `/sites/${siteId}`,
      `/sites/${siteId}/report?period=2026-10`,
      `/articles/${articleId}`,
      `/articles/${articleId}/edit`,
      `/articles/${articleId}/revisions/1`,
      '/activity',
      '/connect',
      '/account/password',
      '/staff',
      '/oauth/interaction/abcdefghijklmnop',
    ];
    const pages = await whileAway(async () => {
      const out: [string, LightMyRequestResponse][] = [];
      for (const path of paths) out.push([path, await b.get(path)]);
      return out;
    });
    for (const [path, res] of pages) {
      expectUnavailablePage(res, path);
      expect(res.body, path).toContain(`<a href="${path.replaceAll('&', '&amp;')}">Load the page again</a>`);
    }
    // Back: the pages load again.
    expect((await b.get(`/articles/${articleId}`)).statusCode).toBe(200);
  });

  it("an assistant's consent page opened before signing in is the 503 page, not an expired request", async () => {
    const b = browser();
    const registered = await app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { 'content-type': 'application/json' },
      payload: { ...PUBLIC_CLIENT, redirect_uris: ['http://127.0.0.1:43117/callback'] },
    });
    expect(registered.statusCode).toBe(201);
    const { challenge } = pkce();
    const authorize = authorizeUrl(PUBLIC_URL, {
      response_type: 'code',
      client_id: (registered.json() as { client_id: string }).client_id,
      redirect_uri: 'http://127.0.0.1:43117/callback',
      scope: 'content:read',
      state: 'abc',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: `${PUBLIC_URL}/mcp`,
    });
    const started = await b.get(`${authorize.pathname}${authorize.search}`);
    const interaction = String(started.headers.location);
    expect(interaction).toMatch(/^\/oauth\/interaction\//);

    const res = await whileAway(() => b.get(interaction));
    expectUnavailablePage(res, interaction);
    // Once back, the interaction goes on: to sign-in, then back here.
    const after = await b.get(interaction);
    expect(after.statusCode).toBe(303);
    expect(after.headers.location).toContain('/sign-in?return_to=');
  });

  it('a form sent while away (restore a revision) applied nothing; sent again once back, it applies', async () => {
    const b = browser();
    const signIn = await b.get('/sign-in');
    await b.post('/sign-in', { csrf: csrfOf(signIn.body), email: dana.email, password: dana.password });
    const confirm = await b.get(`/articles/${articleId}/revisions/1/restore`);
    expect(confirm.statusCode).toBe(200);
    const form = { csrf: csrfOf(confirm.body), expected_revision: '2', reason: 'Back to the first title' };
    const action = `/articles/${articleId}/revisions/1/restore`;

    const sent = await whileAway(() => b.post(action, form));
    expectUnavailablePage(sent, `POST ${action}`);
    expect(sent.body).toContain('the change was either made in full or not at all');
    expect(sent.body).toContain('reload the page to see which before you send it again');

    // Still at revision 2: no revision 3 was made.
    expect(await runtime.commands.articleAt(dana.accountId, articleId, 2)).toMatchObject({
      title: 'Boiler care, rewritten',
    });
    await expect(runtime.commands.articleAt(dana.accountId, articleId, 3)).rejects.toMatchObject({
      code: 'not_found',
    });

    const again = await b.post(action, form);
    expect(again.statusCode).toBe(303);
    expect(again.headers.location).toBe(`/articles/${articleId}?restored=3`);
  });
});

describe('the 503 page in Chromium', () => {
  it('reads well, is accessible with and without JavaScript, and its link loads the page again from the keyboard', async () => {
    await mkdir(SHOTS, { recursive: true });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const b = browser();
    const form = await b.get('/sign-in');
    const signedIn = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email,
      password: dana.password,
    });
    const session = signedIn.cookies.find((c) => c.name === 'cs_session');
    expect(session?.value).toBeTruthy();
    const chromium = await launchBrowser();
    try {
      for (const look of [
        { width: 1100, scheme: 'light', scripts: false },
        { width: 390, scheme: 'dark', scripts: false },
        { width: 1100, scheme: 'light', scripts: true },
      ] as const) {
        const tag = `${look.width}-${look.scheme}-${look.scripts ? 'js' : 'nojs'}`;
        const plain = await chromium.newContext({
          viewport: { width: look.width, height: 800 },
          colorScheme: look.scheme,
        });
        const context = look.scripts ? plain : await noPageScripts(plain);
        await context.addCookies([{ name: 'cs_session', value: session?.value as string, url: address }]);
        const page = await context.newPage();
        // What the page loads besides itself (its stylesheet, its scripts) needs no database.
        const failed: string[] = [];
        page.on('response', (r) => {
          if (r.request().resourceType() !== 'document' && r.status() >= 400)
            failed.push(`${r.status()} ${r.url()}`);
        });
        const path = `/articles/${articleId}`;
        await whileAway(async () => {
          const res = await page.goto(`${address}${path}`);
          expect(res?.status(), tag).toBe(503);
          await expect
            .poll(() => page.textContent('h1'), PATIENCE)
            .toBe('The service is briefly unavailable');
          expect(await page.title()).toBe('Briefly unavailable · Content Service');
          expect(await page.locator('link[rel=stylesheet]').count(), tag).toBeGreaterThan(0);
          await expectAccessible(page, `503 page (${tag})`);
          await screenshot(page, `unavailable-${tag}`);
        });
        // Back: the keyboard reaches the link, and Enter on it loads the article.
        let focused = '';
        for (let i = 0; i < 10 && focused !== 'Load the page again'; i++) {
          await page.keyboard.press('Tab');
          focused = ((await page.locator(':focus').textContent()) ?? '').trim();
        }
        expect(focused, tag).toBe('Load the page again');
        const [loaded] = await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
        expect(loaded?.status(), tag).toBe(200);
        expect(new URL(page.url()).pathname, tag).toBe(path);
        expect(await page.textContent('h1'), tag).toMatch(/^Boiler care/);
        expect(failed, tag).toEqual([]);
        await context.close();
      }
    } finally {
      await chromium.close();
    }
  }, 60_000);
});
