import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedEncoding } from '../../apps/server/openapi.ts';
import { startTestApp, type TestApp } from '../oauth/helpers.ts';
import { launchBrowser } from '../support/browser.ts';

/*
 * The API reference at /docs (swagger-ui) in headless Chromium, under its Content-Security-Policy:
 * it renders every operation and "Try it out" calls the API, with no violation of the policy, and it
 * can be framed by no one; its 2 MB of swagger-ui files are sent compressed and kept by the browser.
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

  it('sends swagger-ui compressed, kept by the browser for a day and revalidated by its ETag', async () => {
    const { request } = await import('node:http');
    /** One GET with these headers, the body as it came (not decompressed, unlike fetch). */
    const get = (path: string, headers: Record<string, string>) =>
      new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>(
        (resolve, reject) => {
          request(`${t.url}${path}`, { headers }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
            );
          })
            .on('error', reject)
            .end();
        },
      );
    const dir = join(
      dirname(createRequire(import.meta.url).resolve('@fastify/swagger-ui/package.json')),
      'static',
    );
    const bundle = await readFile(join(dir, 'swagger-ui-bundle.js'));
    const path = '/docs/static/swagger-ui-bundle.js';

    const br = await get(path, { 'accept-encoding': 'gzip, deflate, br' });
    expect(br.status).toBe(200);
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toContain('accept-encoding');
    expect(br.headers['cache-control']).toBe('public, max-age=86400');
    expect(br.body.length).toBeLessThan(bundle.length / 3);
    expect(brotliDecompressSync(br.body).equals(bundle)).toBe(true);

    const gz = await get(path, { 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).equals(bundle)).toBe(true);
    const plain = await get(path, {});
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.equals(bundle)).toBe(true);

    const etag = br.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await get(path, { 'accept-encoding': 'br', 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers['content-security-policy']).toContain("default-src 'none'");

    // The document the page loads, compressed too.
    const json = await get('/docs/json', { 'accept-encoding': 'br' });
    expect(json.headers['content-encoding']).toBe('br');
    expect(JSON.parse(brotliDecompressSync(json.body).toString()).openapi).toBe('3.1.0');
  });

  it('reads Accept-Encoding as browsers send it', () => {
    expect(acceptedEncoding('gzip, deflate, br, zstd')).toBe('br');
    expect(acceptedEncoding('gzip;q=1.0, br;q=0')).toBe('gzip');
    expect(acceptedEncoding('identity')).toBeNull();
    expect(acceptedEncoding(undefined)).toBeNull();
  });
});
