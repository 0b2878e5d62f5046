import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { listActivity } from '../../projections/activity.ts';
import { connectClient, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';

/*
 * /mcp as an attacker tries it: bad bytes in id and text arguments. Each call is refused as
 * invalid_request naming the argument, and no one's activity record is lost on its account.
 */

type ErrorInfo = { code: string; errors?: { name?: string }[] };
const errorOf = (result: CallToolResult): ErrorInfo => {
  expect(result.isError).toBe(true);
  return result._meta?.[ERROR_META_KEY] as ErrorInfo;
};

describe('/mcp hardening', () => {
  let t: McpTestApp;
  let a: Client;
  let b: Client;

  beforeAll(async () => {
    t = await startMcpTestApp();
    a = await connectClient(t.mcpUrl, t.tokens.aWrite);
    b = await connectClient(t.mcpUrl, t.tokens.bWrite);
  });
  afterAll(async () => {
    for (const client of [a, b]) await client?.close();
    await t?.close();
  });

  const call = async (client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;

  it('a NUL in an id argument is refused naming it, and the calls beside it, of any account, are all recorded', async () => {
    const articleB = t.b.articleIds[0] as string;
    for (let i = 0; i < 5; i++) {
      const [bad, edit, read] = await Promise.all([
        call(a, 'get_article', { article_id: 'art_\u0000' }),
        call(b, 'update_article', { article_id: articleB, title: `Try ${i}` }),
        call(b, 'get_article', { article_id: articleB }),
      ]);
      const info = errorOf(bad);
      expect(info.code).toBe('invalid_request');
      expect(info.errors?.[0]?.name).toBe('article_id');
      expect(edit.isError, JSON.stringify(edit.content)).toBeFalsy();
      expect(read.isError).toBeFalsy();
    }
    const badList = await call(a, 'list_articles', { site_id: '\u0000' });
    expect(errorOf(badList).errors?.[0]?.name).toBe('site_id');
    await t.runtime.commands.flushCalls();
    const ofB = (await listActivity(t.runtime.db, t.b.accountId, { page: 1, perPage: 100 })).rows;
    expect(ofB.filter((r) => r.operation === 'update_article' && r.status === 200)).toHaveLength(5);
    expect(ofB.filter((r) => r.operation === 'get_article' && r.status === 200)).toHaveLength(5);
    const ofA = (await listActivity(t.runtime.db, t.a.accountId, { page: 1, perPage: 100 })).rows;
    const refused = ofA.filter((r) => r.operation === 'get_article' && r.status === 400);
    expect(refused).toHaveLength(5);
    for (const r of refused) expect(r.article_id).toBeNull();
  });

  it.each([
    ['title', { title: 'Boilers\u0000' }],
    ['reason', { title: 'Boilers', reason: 'why\u0000' }],
    ['body', { body: '<p>\ud800</p>' }],
  ])('update_article with a bad %s is refused naming it, and changes nothing', async (name, edit) => {
    const articleA = t.a.articleIds[1] as string;
    const before = (await call(a, 'get_article', { article_id: articleA })).structuredContent as {
      revision: number;
    };
    const result = await call(a, 'update_article', { article_id: articleA, ...edit });
    const info = errorOf(result);
    expect(info.code).toBe('invalid_request');
    expect(info.errors?.map((e) => e.name)).toContain(name);
    const after = (await call(a, 'get_article', { article_id: articleA })).structuredContent as {
      revision: number;
    };
    expect(after.revision).toBe(before.revision);
  });

  it('answers carry Cache-Control: private, no-store', async () => {
    const response = await fetch(t.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${t.tokens.aRead}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'list_sites', arguments: {} },
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('private, no-store');
    const refused = await fetch(t.mcpUrl, { method: 'POST', body: '{}' });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('cache-control')).toBe('private, no-store');
  });
});
