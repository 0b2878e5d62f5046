import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Client as LegacySdkClient } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../apps/server/app.ts';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { listActivity } from '../../projections/activity.ts';
import { connectClient, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import { createProxiedTestRuntime } from '../support/pg-proxy.ts';

/*
 * A tool call that finds PostgreSQL away (the app's connections go through a proxy the test cuts: open
 * connections dropped, new ones refused, as in a restart) is a tool error the model can act on: code
 * `unavailable`, the API's detail, when to call again, and none of the driver's words; it is logged at
 * warn, not as a failure; its activity record says 503; a write cut off this way changed nothing.
 */

type ToolResult = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
  _meta?: Record<string, unknown>;
};

const DETAIL = 'The service is briefly unavailable; retry in 5 s.';
/** What must never reach a model: the driver's and the server's words. */
const DRIVER_WORDS =
  /ECONNREFUSED|ECONNRESET|127\.0\.0\.1|cs_test_|SQLSTATE|Connection terminated|select |insert |postgres|internal/i;

describe('MCP tool calls while PostgreSQL is away', () => {
  let t: McpTestApp;
  let legacy: LegacySdkClient;
  let modern: Client;

  beforeAll(async () => {
    t = await startMcpTestApp({ proxied: true });
    legacy = await connectClient(t.mcpUrl, t.tokens.aWrite);
    modern = new Client(
      { name: 'content-service-tests-2x', version: '1.0.0' },
      { versionNegotiation: { mode: 'auto' } },
    );
    await modern.connect(
      new StreamableHTTPClientTransport(new URL(t.mcpUrl), {
        requestInit: { headers: { authorization: `Bearer ${t.tokens.aWrite}` } },
      }),
    );
  }, 60_000);

  afterAll(async () => {
    await legacy?.close();
    await modern?.close();
    await t?.close();
  });

  /**
   * One call with PostgreSQL away: cut, call, restore at once. Activity records are stored in batches
   * a moment after their calls (up to 100 ms): the earlier calls' are stored before the cut, and this
   * call's once the database is back, as after a short restart.
   */
  async function whileAway(call: () => Promise<unknown>): Promise<ToolResult> {
    const proxy = t.proxy;
    if (!proxy) throw new Error('the test app was started without a proxy');
    await t.runtime.commands.flushCalls();
    await proxy.cut();
    // The pool notices its idle connections are gone before the call is made.
    await new Promise((r) => setTimeout(r, 100));
    try {
      return (await call()) as ToolResult;
    } finally {
      await proxy.restore();
    }
  }

  function expectUnavailable(result: ToolResult): void {
    expect(result.isError).toBe(true);
    expect(result._meta?.[ERROR_META_KEY]).toEqual({ code: 'unavailable', detail: DETAIL });
    const text = result.content.map((c) => c.text ?? '').join('\n');
    expect(text).toContain(`Error unavailable: ${DETAIL}`);
    expect(text).toContain('Wait 5 seconds, then call again.');
    expect(JSON.stringify(result)).not.toMatch(DRIVER_WORDS);
  }

  it('is a tool error `unavailable` on both eras, logged at warn, recorded as 503; a write changes nothing', async () => {
    const articleId = t.a.articleIds[0] as string;
    expect((await legacy.callTool({ name: 'list_sites', arguments: {} })).isError).toBeFalsy();

    const read = await whileAway(() => legacy.callTool({ name: 'list_sites', arguments: {} }));
    expectUnavailable(read);
    expect(read.structuredContent).toBeUndefined();

    const write = await whileAway(() =>
      legacy.callTool({
        name: 'update_article',
        arguments: { article_id: articleId, title: 'Written while away', idempotency_key: 'away-1' },
      }),
    );
    expectUnavailable(write);

    // The 2026-07-28 era also carries the code and detail in structuredContent.
    const modernRead = await whileAway(() =>
      modern.callTool({ name: 'get_article', arguments: { article_id: articleId } }),
    );
    expectUnavailable(modernRead);
    expect(modernRead.structuredContent).toEqual({ code: 'unavailable', detail: DETAIL });

    // Back: the edit cut off was not made; the same call now is.
    const after = (await legacy.callTool({
      name: 'get_article',
      arguments: { article_id: articleId },
    })) as ToolResult;
    expect(after.isError).toBeFalsy();
    expect(after.structuredContent).toMatchObject({ revision: 1 });
    const retried = (await legacy.callTool({
      name: 'update_article',
      arguments: { article_id: articleId, title: 'Written while away', idempotency_key: 'away-1' },
    })) as ToolResult;
    expect(retried.isError).toBeFalsy();
    expect(retried.structuredContent).toMatchObject({ revision: 2, title: 'Written while away' });

    const lines = t.logs.map((l) => JSON.parse(l) as { level: number; msg: string });
    const warned = lines.filter(
      (l) => l.msg === 'the database is unavailable; MCP tool call answered unavailable',
    );
    expect(warned).toHaveLength(3);
    expect(warned.every((l) => l.level === 40)).toBe(true);
    expect(lines.filter((l) => l.msg === 'MCP tool call failed')).toEqual([]);

    await t.drain();
    const records = await listActivity(t.runtime.db, t.a.accountId, { page: 1, perPage: 100, source: 'mcp' });
    const outcomes = records.rows.map((r) => [r.operation, r.status]);
    expect(outcomes).toEqual(
      expect.arrayContaining([
        ['list_sites', 503],
        ['update_article', 503],
        ['get_article', 503],
        ['update_article', 200],
      ]),
    );
    const away = records.rows.find((r) => r.operation === 'update_article' && r.status === 503);
    expect(away).toMatchObject({ article_id: articleId, revision: null });
  }, 60_000);
});

/*
 * Before any tool runs, /mcp checks the access token, which reads the database: with PostgreSQL away
 * that check cannot be made, and the request is answered as the API answers it (HTTP 503 problem+json,
 * Retry-After), not as an unknown token.
 */
describe('/mcp requests while PostgreSQL is away, with the product token verifier', () => {
  it('answer 503 problem+json with Retry-After', async () => {
    const { runtime, proxy, drop } = await createProxiedTestRuntime();
    const app = await buildApp({
      runtime,
      config: {
        PUBLIC_URL: 'http://content-service.test',
        LOG_LEVEL: 'silent',
        MEDIA_DIR: '/tmp/cs-mcp-away',
      },
      logger: false,
    });
    try {
      await proxy.cut();
      const res = await app.inject({
        method: 'POST',
        url: '/mcp',
        headers: {
          authorization: `Bearer ${'a'.repeat(43)}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        payload: {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'list_sites', arguments: {} },
        },
      });
      expect(res.statusCode).toBe(503);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.headers['retry-after']).toBe('5');
      expect(res.json()).toMatchObject({ code: 'unavailable', detail: DETAIL });
      expect(res.body).not.toMatch(DRIVER_WORDS);
    } finally {
      await proxy.restore();
      await app.close();
      await drop();
    }
  }, 60_000);
});
