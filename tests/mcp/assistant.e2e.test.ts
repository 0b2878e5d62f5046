import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client as Client2,
  type OAuthClientProvider as OAuthClientProvider2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransport2,
  UnauthorizedError as UnauthorizedError2,
} from '@modelcontextprotocol/client';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort, startCallback } from '../oauth/helpers.ts';
import { launchBrowser } from '../support/browser.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * An assistant no one on the team wrote: the MCP SDK's own client with its own OAuth client logic,
 * given only PUBLIC_URL/mcp (the 1.x client, 2025 era; then the 2.x client on the 2026-07-28 era). It discovers the authorization server from the 401, registers itself,
 * sends the person to the authorization page; the person (headless Chromium, JavaScript off) signs in
 * and clicks Allow; the client exchanges the code and calls every tool. Then the person disconnects it
 * on the Connect Site page, and its next call is refused. The Connect Site page's API keys are used too.
 */

type Seed = { account_id: string; email: string; password: string; api_key: string; sites: { id: string }[] };

/** The SDK's client-side OAuth state, in memory, as an assistant keeps it. */
function memoryProvider(redirectUrl: string, onRedirect: (url: URL) => void): OAuthClientProvider {
  let info: OAuthClientInformationMixed | undefined;
  let tokens: OAuthTokens | undefined;
  let verifier = '';
  return {
    get redirectUrl() {
      return redirectUrl;
    },
    get clientMetadata(): OAuthClientMetadata {
      return {
        client_name: 'SDK Test Assistant',
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      };
    },
    clientInformation: () => info,
    saveClientInformation: (i) => {
      info = i;
    },
    tokens: () => tokens,
    saveTokens: (t) => {
      tokens = t;
    },
    redirectToAuthorization: (url) => onRedirect(url),
    saveCodeVerifier: (v) => {
      verifier = v;
    },
    codeVerifier: () => verifier,
  };
}

/** The same in-memory OAuth state, for the SDK's 2.x client (whose stored types are its own). */
function memoryProvider2(
  name: string,
  redirectUrl: string,
  onRedirect: (url: URL) => void,
): OAuthClientProvider2 {
  let info: Parameters<NonNullable<OAuthClientProvider2['saveClientInformation']>>[0] | undefined;
  let tokens: Parameters<OAuthClientProvider2['saveTokens']>[0] | undefined;
  let verifier = '';
  return {
    get redirectUrl() {
      return redirectUrl;
    },
    get clientMetadata() {
      return {
        client_name: name,
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      };
    },
    clientInformation: () => info,
    saveClientInformation: (i) => {
      info = i;
    },
    tokens: () => tokens,
    saveTokens: (t) => {
      tokens = t;
    },
    redirectToAuthorization: (url) => onRedirect(url),
    saveCodeVerifier: (v) => {
      verifier = v;
    },
    codeVerifier: () => verifier,
  };
}

type ToolResult = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
  _meta?: Record<string, unknown>;
};

describe('an MCP client connects with OAuth sign-in and consent', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let callback: Awaited<ReturnType<typeof startCallback>>;
  let person: Seed;
  let other: Seed;
  let provider: OAuthClientProvider;
  let authorizationUrl: URL | undefined;
  let client: Client;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-assistant-'));
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir };
    const seed = async (): Promise<Seed> => {
      const r = await cli(
        ['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '4'],
        env,
      );
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as Seed;
    };
    person = await seed();
    other = await seed();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = await startServer({ ...env, PORT: String(port), PUBLIC_URL: base });
    callback = await startCallback();
    browser = await launchBrowser();
    context = await browser.newContext({ javaScriptEnabled: false });
    provider = memoryProvider(callback.url, (url) => {
      authorizationUrl = url;
    });
  });

  afterAll(async () => {
    await client?.close().catch(() => {});
    await context?.close();
    await browser?.close();
    await callback?.close();
    await server?.stop();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const transport = (): StreamableHTTPClientTransport =>
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
  const call = async (name: string, args: Record<string, unknown> = {}): Promise<ToolResult> =>
    (await client.callTool({ name, arguments: args })) as ToolResult;

  /** Signs the person in and clicks Allow: the query of the redirect back to the client (code, iss, state). */
  async function signInAndAllow(page: Page, url: URL, name = 'SDK Test Assistant'): Promise<URLSearchParams> {
    await page.goto(url.href);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    await page.fill('#email', person.email);
    await page.fill('#password', person.password);
    await page.click('button[type=submit]');
    expect(await page.textContent('h1')).toBe(`Connect ${name} to your account?`);
    await page.click('button[value=allow]');
    await page.waitForURL((u) => u.href.startsWith(callback.url));
    const params = new URL(page.url()).searchParams;
    expect(params.get('code')).toBeTruthy();
    return params;
  }

  it('discovers, registers, sends the person to sign in and Allow, and gets a token', async () => {
    client = new Client({ name: 'sdk-test-assistant', version: '1.0.0' });
    const first = transport();
    await expect(client.connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(authorizationUrl?.origin).toBe(base);
    expect(authorizationUrl?.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorizationUrl?.searchParams.get('resource')).toBe(`${base}/mcp`);
    const page = await context.newPage();
    const code = (await signInAndAllow(page, authorizationUrl as URL)).get('code') as string;
    await page.close();
    await first.finishAuth(code);
    expect((await provider.tokens())?.access_token).toBeTruthy();
    client = new Client({ name: 'sdk-test-assistant', version: '1.0.0' });
    await client.connect(transport());
  });

  it('lists every tool and calls each of them for the account that allowed it', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'compare_revisions',
        'get_article',
        'get_revision',
        'get_stats',
        'list_activity',
        'list_articles',
        'list_backlinks',
        'list_revisions',
        'list_sites',
        'preview_article_edit',
        'replace_featured_image',
        'restore_revision',
        'search_articles',
        'update_article',
      ].sort(),
    );
    const sites = (await call('list_sites')).structuredContent as { data: { id: string }[] };
    expect(sites.data.map((s) => s.id)).toEqual(person.sites.map((s) => s.id));
    const siteId = person.sites[0]?.id as string;
    const articles = (await call('list_articles', { site_id: siteId })).structuredContent as {
      data: { id: string }[];
    };
    expect(articles.data).toHaveLength(3);
    const articleId = articles.data[0]?.id as string;
    const article = (await call('get_article', { article_id: articleId })).structuredContent as {
      body: string;
      revision: number;
    };
    expect(article.body).toContain('data-service-protected');
    const found = (await call('search_articles', { q: 'homeowners' })).structuredContent as {
      data: { site_id: string }[];
    };
    expect(found.data.every((hit) => person.sites.some((s) => s.id === hit.site_id))).toBe(true);
    const backlinks = (await call('list_backlinks', { site_id: siteId })).structuredContent as {
      meta: { total: number };
    };
    expect(backlinks.meta.total).toBe(4);
    const stats = (await call('get_stats', { site_id: siteId, period: 'last_30_days' }))
      .structuredContent as { site_id: string };
    expect(stats.site_id).toBe(siteId);

    const updated = await call('update_article', {
      article_id: articleId,
      title: 'Edited by the assistant',
      reason: 'clearer title',
    });
    expect(updated.isError).toBeFalsy();
    expect(updated.structuredContent).toMatchObject({
      revision: article.revision + 1,
      changed: true,
      title: 'Edited by the assistant',
    });
    const revisions = (await call('list_revisions', { article_id: articleId })).structuredContent as {
      data: { revision: number; origin: string; actor: { type: string; name: string }; reason: string }[];
    };
    expect(revisions.data[0]).toMatchObject({
      origin: 'mcp',
      reason: 'clearer title',
      actor: { type: 'oauth_client', name: 'SDK Test Assistant' },
    });
    const first = (await call('get_revision', { article_id: articleId, revision: 1 })).structuredContent as {
      title: string;
    };
    expect(first.title).not.toBe('Edited by the assistant');
    const compared = await call('compare_revisions', { article_id: articleId, from: 1, to: 2 });
    expect(compared.isError).toBeFalsy();
    expect(compared.structuredContent).toMatchObject({
      from: 1,
      to: 2,
      title: { before: first.title, after: 'Edited by the assistant' },
    });
    expect(compared.content[0]?.text).toContain('The text is the same.');
    const restored = await call('restore_revision', { article_id: articleId, revision: 1 });
    expect(restored.structuredContent).toMatchObject({ changed: true });
    const refused = await call('replace_featured_image', {
      article_id: articleId,
      url: 'http://images.example/x.png',
    });
    expect(refused.isError).toBe(true);
    expect(refused.content[0]?.text).toContain('image_fetch_failed');
    const protectedRefusal = await call('update_article', {
      article_id: articleId,
      body: '<p>No links any more.</p>',
    });
    expect(protectedRefusal.isError).toBe(true);
    expect(protectedRefusal.content[0]?.text).toContain('protected_links_modified');
    // The activity log is an async read model: give it a moment to catch up.
    let recorded = false;
    for (let i = 0; i < 50 && !recorded; i++) {
      const activity = (await call('list_activity', { source: 'mcp', per_page: 100 })).structuredContent as {
        data: { operation: string; actor: { type: string } }[];
      };
      recorded = activity.data.some(
        (a) => a.operation === 'update_article' && a.actor.type === 'oauth_client',
      );
      if (!recorded) await new Promise((r) => setTimeout(r, 100));
    }
    expect(recorded).toBe(true);
  });

  it("never reaches another account's sites or articles", async () => {
    for (const [tool, args] of [
      ['list_articles', { site_id: other.sites[0]?.id as string }],
      ['list_backlinks', { site_id: other.sites[0]?.id as string }],
      ['get_stats', { site_id: other.sites[0]?.id as string }],
    ] as const) {
      const theirs = await call(tool, args);
      const nobody = await call(tool, { site_id: 'site_does_not_exist' });
      expect(theirs.isError, tool).toBe(true);
      expect(theirs.content[0]?.text, tool).toContain('not_found');
      expect(theirs.content[0]?.text?.replace(/site_\w+/g, 'ID')).toBe(
        nobody.content[0]?.text?.replace(/site_\w+/g, 'ID'),
      );
    }
  });

  it('the person sees the assistant on the Connect Site page, disconnects it, and its next call is refused', async () => {
    // The client keeps its session's notification stream open (the SDK opens it after initialize).
    const session = (client.transport as StreamableHTTPClientTransport).sessionId as string;
    await vi.waitFor(
      () =>
        expect(
          server.logs().some((l) => l.includes('MCP session stream opened') && l.includes(session)),
        ).toBe(true),
      PATIENCE,
    );
    const page = await context.newPage();
    await page.goto(`${base}/connect`);
    expect(await page.textContent('#mcp-url')).toBe(`${base}/mcp`);
    expect(await page.textContent('#assistants')).toContain('SDK Test Assistant');
    await page.click('#assistants button[type=submit]');
    await page.waitForURL(`${base}/connect`);
    expect(await page.textContent('#no-assistants')).toContain('No assistant is connected');
    await page.close();
    // Its open stream ended with the disconnect (before the page was answered), not at the next check.
    const ended = (await server.logsNow()).filter(
      (l) => l.includes('MCP stream ended') && l.includes(session),
    );
    expect(ended.join('\n')).toContain('its access token is no longer valid');
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${(await provider.tokens())?.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain(
      `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    );
  });

  it('creates an API key on the Connect Site page (shown once), which works until revoked there', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/connect`);
    await page.fill('#key-name', 'Reporting script');
    await page.selectOption('#key-scope', 'read');
    await page.click('form[action="/connect/keys"] button[type=submit]');
    const key = (await page.inputValue('#new-key-value')).trim();
    expect(key).toMatch(/^cs_live_/);
    expect(await page.textContent('#keys')).toContain('Reporting script');
    const ok = await fetch(`${base}/api/v1/sites`, { headers: { authorization: `Bearer ${key}` } });
    expect(ok.status).toBe(200);
    await page.goto(`${base}/connect`);
    expect(await page.content()).not.toContain(key);
    const row = page.locator('#keys tr', { hasText: 'Reporting script' });
    await row.locator('button[type=submit]').click();
    await page.waitForURL(`${base}/connect`);
    expect(await page.locator('#keys tr', { hasText: 'Reporting script' }).textContent()).toContain(
      'revoked',
    );
    await page.close();
    const refused = await fetch(`${base}/api/v1/sites`, { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(401);
  });

  it('the Connect Site page asks to sign in first', async () => {
    const fresh = await browser.newContext({ javaScriptEnabled: false });
    const page = await fresh.newPage();
    await page.goto(`${base}/connect`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    expect(new URL(page.url()).searchParams.get('return_to')).toBe('/connect');
    await fresh.close();
  });

  it('a 2026-07-28 client (the SDK 2.x) signs in and is allowed the same way, then calls the tools without a handshake', async () => {
    const name = 'SDK 2 Test Assistant';
    let url: URL | undefined;
    const provider2 = memoryProvider2(name, callback.url, (u) => {
      url = u;
    });
    const transport2 = () =>
      new StreamableHTTPClientTransport2(new URL(`${base}/mcp`), { authProvider: provider2 });
    const options = { versionNegotiation: { mode: 'auto' as const } };
    let client2 = new Client2({ name: 'sdk-2-test-assistant', version: '1.0.0' }, options);
    const first = transport2();
    await expect(client2.connect(first)).rejects.toBeInstanceOf(UnauthorizedError2);
    expect(url?.origin).toBe(base);
    expect(url?.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url?.searchParams.get('resource')).toBe(`${base}/mcp`);
    // The scope the 401 named (the client adds offline_access for its refresh token).
    expect(url?.searchParams.get('scope')?.split(' ')).toEqual(
      expect.arrayContaining(['content:read', 'content:write']),
    );
    const fresh = await browser.newContext({ javaScriptEnabled: false });
    const page = await fresh.newPage();
    // The 2.x client checks the authorization response's issuer (RFC 9207): it gets the whole query.
    const answer = await signInAndAllow(page, url as URL, name);
    await fresh.close();
    expect(answer.get('iss')).toBe(base);
    await first.finishAuth(answer);
    client2 = new Client2({ name: 'sdk-2-test-assistant', version: '1.0.0' }, options);
    await client2.connect(transport2());
    try {
      expect(client2.getProtocolEra()).toBe('modern');
      expect(client2.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      const { tools } = await client2.listTools();
      expect(tools).toHaveLength(14);
      const call2 = async (tool: string, args: Record<string, unknown> = {}) =>
        (await client2.callTool({ name: tool, arguments: args })) as ToolResult;
      const sites = (await call2('list_sites')).structuredContent as { data: { id: string }[] };
      expect(sites.data.map((s) => s.id)).toEqual(person.sites.map((s) => s.id));
      const siteId = person.sites[0]?.id as string;
      const articles = (await call2('list_articles', { site_id: siteId })).structuredContent as {
        data: { id: string }[];
      };
      const articleId = articles.data[1]?.id as string;
      const updated = await call2('update_article', { article_id: articleId, title: 'Edited in 2026' });
      expect(updated.isError, updated.content[0]?.text).toBeFalsy();
      const revisions = (await call2('list_revisions', { article_id: articleId })).structuredContent as {
        data: { origin: string; actor: { type: string; name: string } }[];
      };
      expect(revisions.data[0]).toMatchObject({ origin: 'mcp', actor: { type: 'oauth_client', name } });
      const theirs = await call2('list_articles', { site_id: other.sites[0]?.id as string });
      expect(theirs.isError).toBe(true);
      expect(theirs.structuredContent).toMatchObject({ code: 'not_found' });
    } finally {
      await client2.close();
    }
  });
});
