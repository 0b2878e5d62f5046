import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FastifyInstance } from 'fastify';
import sharp from 'sharp';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import type { RequestPrincipal } from '../../apps/server/http/auth.ts';
import { createRequestLimiter, type LimitHook } from '../../apps/server/http/limits.ts';
import type { McpTokenVerifier } from '../../apps/server/http/oauth-port.ts';
import { DomainError } from '../../domain/errors.ts';
import type { FetchImage } from '../../infra/media/fetch.ts';
import { listArticles } from '../../projections/articles.ts';
import type { Backend } from './db.ts';
import { createProxiedTestRuntime, type PgProxy } from './pg-proxy.ts';
import { catchUpAll, createTestRuntime, pipelineActor, protectedBody, setUpAccount } from './runtime.ts';

/*
 * A test composition of the app for /mcp: a seeded database, and a token verifier that maps fixed test
 * tokens to principals of the seeded accounts. The product's verifier is the authorization server's
 * (apps/server/oauth/verify.ts); this one only stands in for it so that the MCP endpoint can be tested
 * on its own. It is given to buildApp like any dependency: nothing in the product accepts these tokens.
 */

export type SeededAccount = {
  accountId: string;
  siteId: string;
  otherSiteId: string;
  /** The articles of `siteId`, newest published first (as list_articles orders them). */
  articleIds: string[];
  apiKey: string;
};

export type McpTestApp = {
  app: FastifyInstance;
  runtime: Runtime;
  url: string;
  mcpUrl: string;
  a: SeededAccount;
  b: SeededAccount;
  /** An account with a small request budget (6 a minute), for the shared-limit test. */
  c: SeededAccount;
  tokens: { aWrite: string; aRead: string; bWrite: string; cWrite: string };
  client: { id: string; name: string };
  /** Every log line the app wrote. */
  logs: string[];
  /** The app's MEDIA_DIR (featured images). */
  mediaDir: string;
  /** With `proxied`: the proxy the app's database connections go through (to take PostgreSQL away). */
  proxy: PgProxy | null;
  /** A new token of the test assistant for the account, its own (to revoke without touching the others). */
  issueToken(account: SeededAccount, scope: 'read' | 'write'): string;
  /** Refuses a token from now on, as a disconnect or an expiry does a real one. */
  revokeToken(token: string): void;
  /** Stops the app (which stores the pending activity records) and brings the async read models up to date. */
  drain(): Promise<void>;
  close(): Promise<void>;
};

export const ARTICLES_PER_SITE = 12;
export const BACKLINKS_PER_SITE = 7;
export const SMALL_BUDGET = 6;
export const IMAGE_URL = 'https://images.example.test/photo.png';
/** A second image (other bytes, so another stored file), served by the same stand-in host. */
export const OTHER_IMAGE_URL = 'https://images.example.test/other.png';

export const PLACEHOLDER_PUBLIC_URL = 'http://content-service.test';

const testClient = { id: 'client_test_assistant', name: 'Test Assistant' };

async function seedAccount(runtime: Runtime, name: string): Promise<SeededAccount> {
  const { accountId, siteId, otherSiteId } = await setUpAccount(runtime, name);
  const caller = { origin: 'rewrite' as const, actor: pipelineActor };
  for (let i = 1; i <= ARTICLES_PER_SITE; i++) {
    const day = String(i).padStart(2, '0');
    await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: `Article ${i} of ${name}`,
        body: protectedBody(i),
        url: `https://northside.example/blog/article-${i}`,
        status: i === ARTICLES_PER_SITE ? 'draft' : 'published',
        publishedAt: i === ARTICLES_PER_SITE ? null : `2026-10-${day}T09:00:00Z`,
        targetKeyword: i % 2 === 0 ? 'boiler' : null,
        featuredImage: null,
      },
      caller,
    );
  }
  for (let i = 1; i <= BACKLINKS_PER_SITE; i++) {
    await runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn: `2026-10-${String(i).padStart(2, '0')}`,
      sourceDomain: `source${i}.example`,
      sourceUrl: `https://source${i}.example/page`,
      targetUrl: 'https://northside.example/',
      anchorText: `anchor ${i}`,
      anchorType: 'branded',
      category: i % 3 === 0 ? 'local' : 'industry',
    });
  }
  const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' });
  const articles = await listArticles(runtime.db, { accountId, siteId }, { page: 1, perPage: 100 });
  const articleIds = articles?.rows.map((r) => r.id) ?? [];
  return { accountId, siteId, otherSiteId, articleIds, apiKey: key };
}

/** A 2025-era POST to /mcp as a client sends it (one JSON-RPC request, id 1), with a session id or none. */
export function legacyPost(
  fetchFn: typeof fetch,
  mcpUrl: string,
  token: string,
  body: object,
  session?: string,
): Promise<Response> {
  return fetchFn(mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
  });
}

/** The PNG served at OTHER_IMAGE_URL. */
export function otherImage(): Promise<Buffer> {
  return sharp({ create: { width: 32, height: 24, channels: 3, background: '#cc3366' } })
    .png()
    .toBuffer();
}

/** An image host stand-in: a PNG at IMAGE_URL and OTHER_IMAGE_URL, anything else fails as the real fetcher's refusals do. */
async function fakeImageFetcher(): Promise<FetchImage> {
  const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3366cc' } })
    .png()
    .toBuffer();
  const other = await otherImage();
  return async (url) => {
    if (url === IMAGE_URL) return new Uint8Array(png);
    if (url === OTHER_IMAGE_URL) return new Uint8Array(other);
    throw new DomainError('image_fetch_failed', `The image could not be fetched from ${url}`);
  };
}

/**
 * Builds and starts the app on a free port. PUBLIC_URL is `publicUrl` when something in front of the app
 * is the address clients use (the conformance proxy), else a placeholder: the tests call the app's own
 * address, and PUBLIC_URL only shapes the links and media URLs the app writes.
 */
export async function startMcpTestApp(
  opts: {
    backend?: Backend;
    publicUrl?: string;
    proxied?: boolean;
    /** The app's clock; default a fixed instant. */
    now?: () => Date;
    /** How often open notification streams are checked again; default the product's. */
    streamCheckMs?: number;
  } = {},
): Promise<McpTestApp> {
  const now = opts.now ?? (() => new Date('2026-11-05T12:00:00Z'));
  const db = opts.proxied
    ? await createProxiedTestRuntime({ now })
    : { ...(await createTestRuntime(opts.backend ?? 'postgres', { now })), proxy: null };
  const { runtime } = db;
  const a = await seedAccount(runtime, 'Plumbers Ltd');
  const b = await seedAccount(runtime, 'Dentists Ltd');
  const c = await seedAccount(runtime, 'Bakers Ltd');
  await catchUpAll(runtime.db);

  const tokens = {
    aWrite: 'mcp-test-token-a-write-0000000000000000',
    aRead: 'mcp-test-token-a-read-00000000000000000',
    bWrite: 'mcp-test-token-b-write-0000000000000000',
    cWrite: 'mcp-test-token-c-write-0000000000000000',
  };
  const actor = { type: 'oauth_client' as const, id: testClient.id, name: testClient.name };
  const principals = new Map<string, RequestPrincipal>([
    [tokens.aWrite, { accountId: a.accountId, scope: 'write', actor }],
    [tokens.aRead, { accountId: a.accountId, scope: 'read', actor }],
    [tokens.bWrite, { accountId: b.accountId, scope: 'write', actor }],
    [tokens.cWrite, { accountId: c.accountId, scope: 'write', actor }],
  ]);
  const verifyToken: McpTokenVerifier = async (token) => principals.get(token) ?? null;

  // One limiter for /api/v1 and /mcp, as the product composes it; account C gets a small budget.
  const quiet = { info: () => {}, warn: () => {} };
  const roomy = createRequestLimiter({ perMinute: 100_000, logger: quiet });
  const small = createRequestLimiter({ perMinute: SMALL_BUDGET, logger: quiet });
  const limit: LimitHook = (request, reply) =>
    request.auth?.principal?.accountId === c.accountId
      ? small.hook(request, reply)
      : roomy.hook(request, reply);

  const logs: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const mediaDir = await mkdtemp(join(tmpdir(), 'cs-mcp-media-'));
  const app = await buildApp({
    runtime,
    config: { PUBLIC_URL: opts.publicUrl ?? PLACEHOLDER_PUBLIC_URL, LOG_LEVEL: 'debug', MEDIA_DIR: mediaDir },
    now,
    limit,
    fetchImage: await fakeImageFetcher(),
    verifyToken,
    logger: { level: 'debug', stream },
    ...(opts.streamCheckMs === undefined ? {} : { streamCheckMs: opts.streamCheckMs }),
  }).catch(async (error: unknown) => {
    await db.drop();
    throw error;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  let closed = false;
  const close = async (): Promise<void> => {
    if (!closed) {
      closed = true;
      await app.close();
    }
  };
  return {
    app,
    runtime,
    url,
    mcpUrl: `${url}/mcp`,
    a,
    b,
    c,
    tokens,
    client: testClient,
    logs,
    mediaDir,
    issueToken: (account, scope) => {
      const token = `mcp-test-token-issued-${principals.size}-${'0'.repeat(24)}`;
      principals.set(token, { accountId: account.accountId, scope, actor });
      return token;
    },
    revokeToken: (token) => {
      principals.delete(token);
    },
    proxy: db.proxy,
    async drain() {
      await close();
      await catchUpAll(runtime.db);
    },
    async close() {
      await close();
      await small.close();
      await roomy.close();
      await db.drop();
      await rm(mediaDir, { recursive: true, force: true });
    },
  };
}

/** The SDK's own client, connected to `mcpUrl` with a bearer token. */
export async function connectClient(mcpUrl: string, token: string): Promise<Client> {
  const client = new Client({ name: 'content-service-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}
