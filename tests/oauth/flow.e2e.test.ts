import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { freePort, PUBLIC_CLIENT, pkce, registerClient, startCallback, tokenRequest } from './helpers.ts';

/*
 * The authorization flow as a person meets it: the real server as a process, a real browser (headless
 * Chromium, JavaScript off: the pages must work without it), a local redirect target standing in for
 * the assistant. Sign in on the page, see who asks for what, Allow (or Deny), then the assistant's side:
 * code exchange with PKCE and `resource`, refresh with rotation, revocation. Last, the server's log is
 * searched for every secret that went by.
 */

describe('connecting an assistant in a browser', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let base: string;
  let callback: Awaited<ReturnType<typeof startCallback>>;
  let browser: Browser;
  let context: BrowserContext;
  const person = {
    name: 'Dana Plumber',
    email: 'dana.e2e@example.com',
    password: 'correct horse battery staple',
  };
  /** Everything secret the test saw: none of it may appear in the server's log. */
  const secrets: string[] = [person.password];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-oauth-e2e-'));
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir };
    const created = await cli(
      ['accounts', 'create', '--name', person.name, '--email', person.email, '--password', person.password],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = await startServer({ ...env, PORT: String(port), PUBLIC_URL: base });
    callback = await startCallback();
    browser = await launchBrowser();
    context = await browser.newContext({ javaScriptEnabled: false });
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await callback?.close();
    await server?.stop();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  async function newClient(name: string): Promise<string> {
    const res = await registerClient(base, {
      ...PUBLIC_CLIENT,
      client_name: name,
      redirect_uris: [callback.url],
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { client_id: string }).client_id;
  }

  function authorizeUrl(clientId: string, challenge: string): string {
    const url = new URL('/oauth/authorize', base);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: callback.url,
      scope: 'content:read content:write',
      state: 'state-1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: `${base}/mcp`,
    }).toString();
    return url.href;
  }

  it('signs in, shows the consent page, and on Allow gives the assistant a code it exchanges for tokens', async () => {
    const clientId = await newClient('E2E Assistant');
    const { verifier, challenge } = pkce();
    const page = await context.newPage();
    // The pages of the sign-in keep an opener: an assistant may run it in a popup it waits on.
    const openerPolicies: (string | undefined)[] = [];
    page.on('response', (response) => {
      if (response.request().isNavigationRequest() && response.url().startsWith(base)) {
        openerPolicies.push(response.headers()['cross-origin-opener-policy']);
      }
    });
    await page.goto(authorizeUrl(clientId, challenge));

    expect(new URL(page.url()).pathname).toBe('/sign-in');
    expect(await page.textContent('h1')).toBe('Sign in');
    await page.fill('#email', person.email);
    await page.fill('#password', 'not my password');
    await page.click('button[type=submit]');
    expect(await page.textContent('.error')).toContain('do not match an account');
    await page.fill('#password', person.password);
    await page.click('button[type=submit]');

    expect(new URL(page.url()).pathname).toMatch(/^\/oauth\/interaction\//);
    expect(await page.textContent('h1')).toBe('Connect E2E Assistant to your account?');
    const details = (await page.textContent('dl')) ?? '';
    expect(details).toContain('E2E Assistant');
    expect(details).toContain(new URL(callback.url).host);
    expect(details).toContain(`${person.name} (${person.email})`);
    expect(details).toContain('Read and write');

    await page.click('button[value=allow]');
    await page.waitForURL((url) => url.href.startsWith(callback.url));
    expect(openerPolicies.length).toBeGreaterThan(3);
    expect(openerPolicies.filter((policy) => policy !== undefined)).toEqual([]);
    const back = new URL(page.url());
    expect(back.searchParams.get('state')).toBe('state-1');
    expect(back.searchParams.get('iss')).toBe(base);
    const code = back.searchParams.get('code') ?? '';
    expect(code).not.toBe('');
    secrets.push(code);
    for (const cookie of await context.cookies(base)) secrets.push(cookie.value);
    await page.close();

    const tokens = await tokenRequest(base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
      resource: `${base}/mcp`,
    });
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
    expect(tokens.body).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      scope: 'content:read content:write',
    });
    const access = tokens.body.access_token ?? '';
    const refresh = tokens.body.refresh_token ?? '';
    secrets.push(access, refresh);
    // Refresh rotates: a new pair, and the old refresh token is refused.
    const rotated = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: refresh,
      client_id: clientId,
    });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    const refresh2 = rotated.body.refresh_token ?? '';
    secrets.push(rotated.body.access_token ?? '', refresh2);
    expect(refresh2).not.toBe(refresh);
    const old = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: refresh,
      client_id: clientId,
    });
    expect(old.status).toBe(400);
    expect(old.body.error).toBe('invalid_grant');
    // Using an old refresh token again is taken as theft: the whole connection is revoked.
    const afterReuse = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: refresh2,
      client_id: clientId,
    });
    expect(afterReuse.body.error).toBe('invalid_grant');

    // A code works once; a replayed code is refused (and would revoke what it gave).
    const replay = await tokenRequest(base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
    });
    expect(replay.body.error).toBe('invalid_grant');
  });

  it('revokes a refresh token (RFC 7009): it cannot be used again', async () => {
    const clientId = await newClient('Revoking Assistant');
    const { verifier, challenge } = pkce();
    const page = await context.newPage();
    await page.goto(authorizeUrl(clientId, challenge));
    // Still signed in: straight to the consent page.
    expect(await page.textContent('h1')).toBe('Connect Revoking Assistant to your account?');
    await page.click('button[value=allow]');
    await page.waitForURL((url) => url.href.startsWith(callback.url));
    const code = new URL(page.url()).searchParams.get('code') ?? '';
    await page.close();
    const tokens = await tokenRequest(base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
    });
    const refresh = tokens.body.refresh_token ?? '';
    secrets.push(code, tokens.body.access_token ?? '', refresh);
    const revoked = await fetch(`${base}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: refresh,
        client_id: clientId,
        token_type_hint: 'refresh_token',
      }).toString(),
    });
    expect(revoked.status).toBe(200);
    const after = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: refresh,
      client_id: clientId,
    });
    expect(after.body.error).toBe('invalid_grant');
  });

  it('on Deny sends the assistant access_denied and no code', async () => {
    const clientId = await newClient('Unwanted Assistant');
    const { challenge } = pkce();
    const page = await context.newPage();
    await page.goto(authorizeUrl(clientId, challenge));
    expect(await page.textContent('h1')).toBe('Connect Unwanted Assistant to your account?');
    await page.click('button[value=deny]');
    await page.waitForURL((url) => url.href.startsWith(callback.url));
    const back = new URL(page.url());
    await page.close();
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('refuses a forged consent POST (wrong CSRF token) even with the browser cookies', async () => {
    const clientId = await newClient('Forged Assistant');
    const { challenge } = pkce();
    const page = await context.newPage();
    await page.goto(authorizeUrl(clientId, challenge));
    const consentUrl = page.url();
    await page.close();
    const before = callback.hits.length;
    const forged = await context.request.post(consentUrl, {
      form: { csrf: 'forged', decision: 'allow' },
      headers: { origin: base },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    expect(await forged.text()).toContain('This form has expired');
    const crossSite = await context.request.post(consentUrl, {
      form: { decision: 'allow' },
      headers: { origin: 'https://evil.example' },
      maxRedirects: 0,
    });
    expect(crossSite.status()).toBe(403);
    expect(callback.hits.length).toBe(before);
  });

  it('never writes a password, code, token or cookie to the log', async () => {
    const log = (await server.logsNow()).join('\n');
    expect(log).toContain('connection allowed');
    for (const secret of secrets.filter((s) => s.length >= 8)) {
      expect(log.includes(secret), `a secret (${secret.slice(0, 4)}...) is in the log`).toBe(false);
    }
  });
});
