import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot, signIn, startWebApp, type WebApp } from '../support/web.ts';

/** A request to the server's own socket under another `Host` than its PUBLIC_URL's (its status and headers). */
function askAs(
  url: string,
  host: string,
  path: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/*
 * The web app's front door and its navigation, through a real server in headless Chromium.
 */
describe('home and navigation', () => {
  let web: WebApp;

  beforeAll(async () => {
    web = await startWebApp();
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('sends a signed-out person to sign in, coming back to their sites', async () => {
    const res = await fetch(`${web.url}/`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/sign-in?return_to=%2Fsites');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('sends a signed-in person to their sites, and every page links the sections, marking the current one', async () => {
    const context = await web.signedIn();
    const page = await context.newPage();
    const response = await page.goto(`${web.url}/`);
    expect(new URL(page.url()).pathname).toBe('/sites');
    expect(response).not.toBeNull();
    await page.goto(`${web.url}/connect`);
    const links = await page.$$eval('nav.site a', (as) =>
      as.map((a) => [a.textContent, a.getAttribute('href'), a.getAttribute('aria-current')]),
    );
    expect(links).toEqual([
      ['Sites', '/sites', null],
      ['Activity', '/activity', null],
      ['Connect Site', '/connect', 'page'],
    ]);
    expect(await page.textContent('header.top')).toContain(web.demo.email);
    await screenshot(page, 'connect-with-navigation');
  });

  it('sends a page asked for under another name of the server to PUBLIC_URL, and nothing for programs', async () => {
    // The server's PUBLIC_URL is http://127.0.0.1:<port>; http://localhost:<port> is the same server.
    const other = `localhost:${new URL(web.url).port}`;
    for (const method of ['GET', 'HEAD']) {
      const res = await askAs(web.url, other, '/sign-in?return_to=%2Fconnect', method);
      expect(res.status, method).toBe(307);
      expect(res.headers.location, method).toBe(`${web.url}/sign-in?return_to=%2Fconnect`);
    }
    expect((await askAs(web.url, other, '/no-such-page')).headers.location).toBe(`${web.url}/no-such-page`);
    // A form is not redirected (its origin is checked as before), nor what programs and probes ask for.
    expect((await askAs(web.url, other, '/sign-in', 'POST')).status).not.toBe(307);
    for (const [path, status] of [
      ['/api/v1/sites', 401],
      ['/mcp', 401],
      ['/healthz', 200],
      ['/readyz', 200],
      ['/.well-known/oauth-authorization-server', 200],
      ['/docs', 200],
      ['/web/style.css', 200],
      ['/favicon.ico', 200],
    ] as const) {
      expect((await askAs(web.url, other, path)).status, path).toBe(status);
    }
    // Under PUBLIC_URL's own host: served.
    expect((await askAs(web.url, new URL(web.url).host, '/sign-in')).status).toBe(200);
  });

  it('lets a person who opened http://localhost:<port> sign in (no "form has expired")', async () => {
    const context = await web.browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`http://localhost:${new URL(web.url).port}/`);
    expect(page.url()).toBe(`${web.url}/sign-in?return_to=%2Fsites`);
    await page.fill('#email', web.demo.email);
    await page.fill('#password', web.demo.password);
    await Promise.all([page.waitForNavigation(), page.press('#password', 'Enter')]);
    expect(page.url()).toBe(`${web.url}/sites`);
    expect(await page.textContent('header.top')).toContain(web.demo.email);
    await context.close();
  });

  it('sends /login and the like on to the sign-in page, keeping the query', async () => {
    for (const path of ['/login', '/log-in', '/signin']) {
      const res = await fetch(`${web.url}${path}?return_to=%2Factivity`, { redirect: 'manual' });
      expect(res.status, path).toBe(303);
      expect(res.headers.get('location'), path).toBe('/sign-in?return_to=%2Factivity');
    }
    const context = await web.browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${web.url}/login`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    await signIn(page, web.url, web.demo);
    await context.close();
  });
});
