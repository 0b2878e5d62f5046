import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Client as LegacySdkClient } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { listActivity } from '../../projections/activity.ts';
import { connectClient, IMAGE_URL, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';

/*
 * Both protocol eras of /mcp, through the app on a real port: the SDK's 2.x client negotiating the
 * 2026-07-28 revision (server/discover, no handshake, a `_meta` envelope on every request) and in its
 * legacy mode (the 2025 `initialize` handshake), beside the 1.x client the other MCP tests use. The
 * tools must answer the same in every era; only the error results differ (code and detail also in
 * structuredContent on 2026-07-28).
 */

const MODERN = '2026-07-28';
const ALL_TOOLS = [
  'list_sites',
  'list_articles',
  'get_article',
  'search_articles',
  'list_backlinks',
  'get_stats',
  'update_article',
  'preview_article_edit',
  'replace_featured_image',
  'list_revisions',
  'get_revision',
  'compare_revisions',
  'restore_revision',
  'list_activity',
];
const WRITE_TOOLS = ['update_article', 'replace_featured_image', 'restore_revision'];

type ToolResult = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
  _meta?: Record<string, unknown>;
};

/** The SDK's 2.x client on /mcp with a bearer token: `auto` negotiates (2026-07-28 here), `legacy` does not. */
async function connect2(mcpUrl: string, token: string, mode: 'auto' | 'legacy'): Promise<Client> {
  const client = new Client(
    { name: 'content-service-tests-2x', version: '1.0.0' },
    { versionNegotiation: { mode } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

describe('/mcp in both protocol eras', () => {
  let t: McpTestApp;
  let modern: Client;
  let modernRead: Client;
  let modernOther: Client;
  let legacy2: Client;
  let legacy1: LegacySdkClient;

  const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as ToolResult;
  const call1 = async (name: string, args: Record<string, unknown> = {}) =>
    (await legacy1.callTool({ name, arguments: args })) as ToolResult;
  /** A POST to /mcp as a 2026-07-28 client sends it: the revision in the header and in `_meta`. */
  const modernRaw = (method: string, token: string, version = MODERN, params: object = {}) =>
    fetch(t.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': version,
        'mcp-method': method,
        ...('name' in params ? { 'mcp-name': String(params.name) } : {}),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': version,
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });

  beforeAll(async () => {
    t = await startMcpTestApp();
    modern = await connect2(t.mcpUrl, t.tokens.aWrite, 'auto');
    modernRead = await connect2(t.mcpUrl, t.tokens.aRead, 'auto');
    modernOther = await connect2(t.mcpUrl, t.tokens.bWrite, 'auto');
    legacy2 = await connect2(t.mcpUrl, t.tokens.aWrite, 'legacy');
    legacy1 = await connectClient(t.mcpUrl, t.tokens.aWrite);
  });
  afterAll(async () => {
    for (const client of [modern, modernRead, modernOther, legacy2, legacy1]) await client?.close();
    await t?.close();
  });

  describe('a 2026-07-28 client', () => {
    it('discovers the server without a handshake and negotiates 2026-07-28', async () => {
      expect(modern.getProtocolEra()).toBe('modern');
      expect(modern.getNegotiatedProtocolVersion()).toBe(MODERN);
      expect(modern.getServerVersion()?.name).toBe('content-service');
      expect(modern.getInstructions()).toContain('list_sites');
      expect(modern.getServerCapabilities()?.tools).toBeDefined();
      expect(legacy2.getProtocolEra()).toBe('legacy');
    });

    it('lists the same tools as both 2025-era clients: names, schemas and annotations', async () => {
      const [m, l2, l1] = await Promise.all([modern.listTools(), legacy2.listTools(), legacy1.listTools()]);
      expect(m.tools.map((tool) => tool.name)).toEqual(ALL_TOOLS);
      const shape = (tools: typeof m.tools) =>
        tools.map(({ name, title, description, inputSchema, outputSchema, annotations }) => ({
          name,
          title,
          description,
          inputSchema,
          outputSchema,
          annotations,
        }));
      expect(shape(m.tools)).toEqual(shape(l2.tools));
      expect(shape(m.tools)).toEqual(shape(l1.tools as typeof m.tools));
      const read = await modernRead.listTools();
      expect(read.tools.map((tool) => tool.name)).toEqual(ALL_TOOLS.filter((n) => !WRITE_TOOLS.includes(n)));
    });

    it('calls every read tool with the answers the 2025-era clients get', async () => {
      const [articleId] = t.a.articleIds;
      const reads: [string, Record<string, unknown>][] = [
        ['list_sites', {}],
        ['list_articles', { site_id: t.a.siteId, per_page: 5 }],
        ['get_article', { article_id: articleId }],
        ['search_articles', { q: 'partner', per_page: 5 }],
        ['list_backlinks', { site_id: t.a.siteId }],
        ['get_stats', { site_id: t.a.siteId, period: 'last_30_days' }],
        ['list_revisions', { article_id: articleId }],
        ['get_revision', { article_id: articleId, revision: 1 }],
        ['compare_revisions', { article_id: articleId, from: 1, to: 1 }],
        ['preview_article_edit', { article_id: articleId, title: 'Only a look' }],
      ];
      for (const [name, args] of reads) {
        const [m, l2, l1] = await Promise.all([
          call(modern, name, args),
          call(legacy2, name, args),
          call1(name, args),
        ]);
        expect(m.isError, `${name}: ${m.content[0]?.text}`).toBeFalsy();
        expect(m.structuredContent, name).toEqual(l1.structuredContent);
        expect(m.content, name).toEqual(l1.content);
        expect(l2.structuredContent, name).toEqual(l1.structuredContent);
      }
    });

    it('calls every write tool; the revisions it makes have origin mcp and the OAuth client as actor', async () => {
      const articleId = t.a.articleIds[1] as string;
      const before = (await call(modern, 'get_article', { article_id: articleId })).structuredContent as {
        revision: number;
      };
      const updated = await call(modern, 'update_article', {
        article_id: articleId,
        title: 'Edited in the 2026 era',
        reason: 'modern client',
        expected_revision: before.revision,
      });
      expect(updated.isError, updated.content[0]?.text).toBeFalsy();
      expect(updated.structuredContent).toMatchObject({ changed: true, revision: before.revision + 1 });
      const image = await call(modern, 'replace_featured_image', { article_id: articleId, url: IMAGE_URL });
      expect(image.isError, image.content[0]?.text).toBeFalsy();
      expect(image.structuredContent).toMatchObject({ revision: before.revision + 2 });
      const restored = await call(modern, 'restore_revision', { article_id: articleId, revision: 1 });
      expect(restored.isError, restored.content[0]?.text).toBeFalsy();
      expect(restored.structuredContent).toMatchObject({ revision: before.revision + 3, changed: true });

      const revisions = (await call(modern, 'list_revisions', { article_id: articleId }))
        .structuredContent as {
        data: { revision: number; origin: string; actor: unknown }[];
      };
      const made = revisions.data.filter((r) => r.revision > before.revision);
      expect(made).toHaveLength(3);
      for (const r of made) {
        expect(r.origin).toBe('mcp');
        expect(r.actor).toEqual({ type: 'oauth_client', id: t.client.id, name: t.client.name });
      }
      // idempotency_key works the same on this era: a retry answers the first call, no second revision.
      const retried = { article_id: articleId, title: 'Retried in 2026', idempotency_key: 'eras-retry-1' };
      const once = await call(modern, 'update_article', retried);
      const again = await call(modern, 'update_article', retried);
      expect(once.isError, once.content[0]?.text).toBeFalsy();
      expect(again.structuredContent).toEqual(once.structuredContent);
      expect(once.structuredContent).toMatchObject({ revision: before.revision + 4 });
      const latest = (await call(modern, 'get_article', { article_id: articleId })).structuredContent as {
        revision: number;
      };
      expect(latest.revision).toBe(before.revision + 4);
      const activity = await call(modern, 'list_activity', { source: 'mcp', per_page: 5 });
      expect(activity.isError, activity.content[0]?.text).toBeFalsy();
    });

    it('answers errors with code and detail in structuredContent as well as _meta; 2025-era clients get _meta only', async () => {
      const args = { site_id: t.b.siteId };
      const m = await call(modern, 'list_articles', args);
      expect(m.isError).toBe(true);
      expect(m.structuredContent).toMatchObject({ code: 'not_found', detail: expect.any(String) });
      expect(m._meta?.[ERROR_META_KEY]).toEqual(m.structuredContent);
      const bad = await call(modern, 'list_articles', { site_id: t.a.siteId, per_page: 500, colour: 'red' });
      expect(bad.structuredContent).toMatchObject({ code: 'invalid_request' });
      expect(((bad.structuredContent?.errors ?? []) as { name: string }[]).map((e) => e.name).sort()).toEqual(
        ['colour', 'per_page'],
      );
      const scope = await call(modernRead, 'update_article', { article_id: t.a.articleIds[0], title: 'x' });
      expect(scope.structuredContent).toMatchObject({ code: 'insufficient_scope' });
      for (const old of [await call(legacy2, 'list_articles', args), await call1('list_articles', args)]) {
        expect(old.isError).toBe(true);
        expect(old.structuredContent).toBeUndefined();
        expect(old._meta?.[ERROR_META_KEY]).toEqual(m._meta?.[ERROR_META_KEY]);
        expect(old.content).toEqual(m.content);
      }
    });

    it("keeps each account's data to itself", async () => {
      const theirs = await call(modernOther, 'list_sites');
      expect(((theirs.structuredContent?.data ?? []) as { id: string }[]).map((s) => s.id)).toEqual([
        t.b.siteId,
        t.b.otherSiteId,
      ]);
      for (const [name, args] of [
        ['list_articles', { site_id: t.a.siteId }],
        ['get_article', { article_id: t.a.articleIds[0] }],
        ['update_article', { article_id: t.a.articleIds[0], title: 'Not yours' }],
      ] as const) {
        const refused = await call(modernOther, name, args);
        expect(refused.structuredContent, name).toMatchObject({ code: 'not_found' });
      }
    });

    it('gives true cache hints: discover public, tools/list private to the caller, none on tool calls', async () => {
      const discovered = await modernRaw('server/discover', t.tokens.aWrite);
      // The HTTP answer itself is never for a shared HTTP cache: the hints are MCP's, for MCP clients.
      expect(discovered.headers.get('cache-control')).toBe('private, no-store');
      const discover = (await discovered.json()) as {
        result: { ttlMs: number; cacheScope: string; supportedVersions: string[] };
      };
      expect(discover.result.supportedVersions).toContain(MODERN);
      expect(discover.result).toMatchObject({ cacheScope: 'public', ttlMs: expect.any(Number) });
      expect(discover.result.ttlMs).toBeGreaterThan(0);
      const listed = async (token: string) =>
        (
          (await (await modernRaw('tools/list', token)).json()) as {
            result: { ttlMs: number; cacheScope: string; tools: { name: string }[] };
          }
        ).result;
      const write = await listed(t.tokens.aWrite);
      const read = await listed(t.tokens.aRead);
      // The list depends on the grant: never to be shared across callers.
      expect(write.tools.length).not.toBe(read.tools.length);
      for (const result of [write, read]) expect(result.cacheScope).toBe('private');
      const called = (await (
        await modernRaw('tools/call', t.tokens.aWrite, MODERN, { name: 'list_sites', arguments: {} })
      ).json()) as { result: Record<string, unknown> };
      expect(called.result?.structuredContent, JSON.stringify(called)).toBeDefined();
      expect(called.result).not.toHaveProperty('ttlMs');
      expect(called.result).not.toHaveProperty('cacheScope');
    });

    it('answers a revision it does not serve with -32022 naming the supported ones', async () => {
      const res = await modernRaw('tools/list', t.tokens.aWrite, '2099-01-01');
      expect(res.status).toBe(400);
      const body = (await res.json()) as {
        id: unknown;
        error: { code: number; data: { supported: string[]; requested: string } };
      };
      expect(body.error.code).toBe(-32022);
      expect(body.error.data.supported).toContain(MODERN);
      expect(body.error.data.requested).toBe('2099-01-01');
    });

    it('negotiates initialize as the 2025 revisions say: a known version is kept, an unknown one gets 2025-11-25', async () => {
      const initialize = async (protocolVersion: string) => {
        const res = await fetch(t.mcpUrl, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${t.tokens.aWrite}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
          }),
        });
        expect(res.headers.get('content-type')).toContain('application/json');
        return ((await res.json()) as { result: { protocolVersion: string } }).result.protocolVersion;
      };
      expect(await initialize('2025-06-18')).toBe('2025-06-18');
      expect(await initialize('2099-01-01')).toBe('2025-11-25');
    });

    it('asks for a token like the 2025 era: 401 naming the resource metadata and the scope', async () => {
      const res = await modernRaw('server/discover', 'not-a-known-token');
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('resource_metadata=');
      expect(res.headers.get('www-authenticate')).toContain('scope="content:read content:write"');
    });
  });

  describe('after the calls', () => {
    it('recorded the 2026-era tool calls with source mcp and the OAuth client, like the 2025-era ones', async () => {
      for (const client of [modern, modernRead, modernOther, legacy2, legacy1]) await client.close();
      await t.drain();
      const records = await listActivity(t.runtime.db, t.a.accountId, {
        page: 1,
        perPage: 100,
        source: 'mcp',
      });
      const ops = records.rows.map((r) => r.operation);
      // A preview is recorded as its operation, articles.preview, whichever face asks for it.
      const operationOf = (name: string): string =>
        name === 'preview_article_edit' ? 'articles.preview' : name;
      for (const name of ALL_TOOLS) expect(ops, name).toContain(operationOf(name));
      for (const row of records.rows) {
        expect(row.actor).toEqual({ type: 'oauth_client', id: t.client.id, name: t.client.name });
      }
      // Every read tool was called by three clients, one of them in the 2026 era.
      expect(records.rows.filter((r) => r.operation === 'get_revision')).toHaveLength(3);
    });
  });
});
