import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { SNIPPET_MAX } from '../../domain/article/search.ts';
import { connectClient, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';

/*
 * `search_articles` through the MCP SDK's client: listed read-only with its schemas and a description
 * that says when to use it, its answer the API's hits (checked against its outputSchema) with a text
 * summary, an edit made with update_article found at once, and the refusals (stop words only,
 * another account's site) as tool errors naming q.
 */

const addFormats = addFormatsImport.default;

type Hit = { id: string; site_id: string; match: { snippet: string; highlights: [number, number][] } };
type Found = { data: Hit[]; meta: { total: number }; next_page: number | null };
type ErrorInfo = { code: string; errors?: { in?: string; name?: string }[] };

const textOf = (result: CallToolResult): string =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe('search_articles through the SDK client', () => {
  let t: McpTestApp;
  let write: Client;
  let other: Client;
  let validate: ((value: unknown) => boolean) | undefined;

  async function search(client: Client, args: Record<string, unknown>): Promise<CallToolResult> {
    return (await client.callTool({ name: 'search_articles', arguments: args })) as CallToolResult;
  }
  const found = (result: CallToolResult): Found => {
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(validate?.(result.structuredContent)).toBe(true);
    return result.structuredContent as Found;
  };

  beforeAll(async () => {
    t = await startMcpTestApp();
    write = await connectClient(t.mcpUrl, t.tokens.aWrite);
    other = await connectClient(t.mcpUrl, t.tokens.bWrite);
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    const tool = (await write.listTools()).tools.find((x) => x.name === 'search_articles');
    if (tool?.outputSchema) validate = ajv.compile(tool.outputSchema);
  });
  afterAll(async () => {
    for (const client of [write, other]) await client?.close();
    await t?.close();
  });

  it('is listed read-only, with an output schema and a description telling when to use it', async () => {
    const tool = (await write.listTools()).tools.find((x) => x.name === 'search_articles');
    expect(tool?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(tool?.description).toContain('find an article');
    expect(tool?.inputSchema.required).toEqual(['q']);
    expect(validate).toBeDefined();
  });

  it('finds the account’s articles with snippets and a text summary, never another account’s', async () => {
    const out = found(await search(write, { q: 'partner', per_page: 5 }));
    expect(out.meta.total).toBeGreaterThan(5);
    expect(out.next_page).toBe(2);
    const sites = new Set([t.a.siteId, t.a.otherSiteId]);
    for (const hit of out.data) {
      expect(sites.has(hit.site_id)).toBe(true);
      expect(hit.match.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX);
    }
    const result = await search(write, { q: 'partner', per_page: 5 });
    expect(textOf(result)).toContain('[partner]');
    expect(textOf(result)).toContain('page: 2');
    const [mine] = t.a.articleIds;
    const theirs = found(await search(other, { q: 'partner', per_page: 100 }));
    expect(theirs.data.map((h) => h.id)).not.toContain(mine);
  });

  it('finds an edit made with update_article by its new words at once', async () => {
    const articleId = t.a.articleIds[1] as string;
    const edited = (await write.callTool({
      name: 'update_article',
      arguments: { article_id: articleId, title: 'Axolotl aquarium care' },
    })) as CallToolResult;
    expect(edited.isError, textOf(edited)).toBeFalsy();
    const out = found(await search(write, { q: 'axolotl' }));
    expect(out.data.map((h) => h.id)).toEqual([articleId]);
  });

  it('refuses a search of only common words and answers another account’s site as missing', async () => {
    const refused = await search(write, { q: 'the of and' });
    expect(refused.isError).toBe(true);
    const info = refused._meta?.[ERROR_META_KEY] as ErrorInfo;
    expect(info.code).toBe('invalid_request');
    expect(info.errors).toEqual([expect.objectContaining({ in: 'arguments', name: 'q' })]);
    const foreign = await search(write, { q: 'partner', site_id: t.b.siteId });
    expect((foreign._meta?.[ERROR_META_KEY] as ErrorInfo | undefined)?.code).toBe('not_found');
  });
});
