import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot, startWebApp, type WebApp } from '../support/web.ts';

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
});
