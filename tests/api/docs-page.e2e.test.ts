import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../oauth/helpers.ts';
import { launchBrowser } from '../support/browser.ts';

/*
 * The API reference at /docs (swagger-ui) in headless Chromium, under its Content-Security-Policy:
 * it renders every operation and "Try it out" calls the API, with no violation of the policy, and it
 * can be framed by no one.
 */

let t: TestApp;
let browser: Browser;

beforeAll(async () => {
  t = await startTestApp();
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('/docs', () => {
  it('is sent with a Content-Security-Policy, never framed, never sniffed', async () => {
    for (const path of [
      '/docs',
      '/docs/',
      '/docs/static/swagger-ui-bundle.js',
      '/docs/static/swagger-initializer.js',
      '/docs/json',
    ]) {
      const res = await fetch(`${t.url}${path}`);
      expect(res.status, path).toBe(200);
      const policy = res.headers.get('content-security-policy') ?? '';
      expect(policy, path).toContain("default-src 'none'");
      expect(policy, path).toContain("script-src 'self'");
      expect(policy, path).toContain("frame-ancestors 'none'");
      expect(policy, path).not.toContain('unsafe-eval');
      expect(policy, path).not.toMatch(/script-src[^;]*unsafe-inline/);
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      await res.arrayBuffer();
    }
  });

  it('renders every operation and runs "Try it out" with no violation of its policy', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    // Every violation of the policy, as the page sees it, becomes a console error.
    await page.addInitScript({
      content:
        "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sample + ' at ' + e.sourceFile + ':' + e.lineNumber + ':' + e.columnNumber));",
    });
    const answer = await page.goto(`${t.url}/docs`);
    expect(answer?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.waitForSelector('.opblock-summary');
    const operations = await page.$$eval('.opblock-summary-path', (paths) => paths.map((p) => p.textContent));
    expect(operations).toContain('/api/v1/sites');
    expect(operations.length).toBeGreaterThan(10);

    // Try it out: GET /api/v1/sites without a key, answered 401 by the API from the page.
    const sites = page
      .locator('.opblock', { has: page.locator('.opblock-summary-path', { hasText: /^\/api\/v1\/sites$/ }) })
      .first();
    await sites.locator('.opblock-summary').click();
    await sites.getByRole('button', { name: 'Try it out' }).click();
    await sites.getByRole('button', { name: 'Execute' }).click();
    await expect
      .poll(async () =>
        sites.locator('.live-responses-table tbody .response-col_status').first().textContent(),
      )
      .toContain('401');
    expect(problems.filter((p) => !p.includes('401'))).toEqual([]);
    await context.close();
  });
});
