import { createHash } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type CallToolResult, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { DIFF_EDITS_MAX } from '../../domain/html/word-diff.ts';
import { listActivity } from '../../projections/activity.ts';
import {
  ARTICLES_PER_SITE,
  BACKLINKS_PER_SITE,
  connectClient,
  IMAGE_URL,
  type McpTestApp,
  OTHER_IMAGE_URL,
  otherImage,
  PLACEHOLDER_PUBLIC_URL,
  SMALL_BUDGET,
  startMcpTestApp,
} from '../support/mcp-app.ts';
import { mediaFiles } from '../support/media.ts';
import { PATIENCE } from '../support/wait.ts';

const addFormats = addFormatsImport.default;

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

type ErrorInfo = {
  code: string;
  detail: string;
  errors?: { id?: string; change?: string; name?: string; message?: string }[];
};
type Change = {
  id: string;
  revision: number;
  changed: boolean;
  title: string;
  body: string;
  featured_image: { url: string; width: number; height: number } | null;
};
type ListOut<T> = {
  data: T[];
  meta: { page: number; per_page: number; total: number; total_pages: number };
  next_page: number | null;
};
type RevisionOut = {
  revision: number;
  title: string;
  origin: string;
  actor: { type: string; id: string; name: string };
  reason: string | null;
  restored_from: number | null;
};

const textOf = (result: CallToolResult): string =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const errorOf = (result: CallToolResult): ErrorInfo => {
  expect(result.isError).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  return result._meta?.[ERROR_META_KEY] as ErrorInfo;
};

describe('/mcp through the SDK client', () => {
  let t: McpTestApp;
  let write: Client;
  let read: Client;
  let other: Client;
  const validators = new Map<string, ValidateFunction>();

  /** Calls a tool; a successful result must validate against the outputSchema tools/list advertised. */
  async function call(
    client: Client,
    name: string,
    args: Record<string, unknown> = {},
  ): Promise<CallToolResult> {
    const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
    if (!result.isError) {
      const validate = validators.get(name);
      expect(validate, `no outputSchema for ${name}`).toBeDefined();
      expect(validate?.(result.structuredContent), JSON.stringify(validate?.errors)).toBe(true);
      expect(textOf(result).length).toBeGreaterThan(0);
    }
    return result;
  }
  const structured = <T>(result: CallToolResult): T => {
    expect(result.isError, textOf(result)).toBeFalsy();
    return result.structuredContent as T;
  };
  const api = async (path: string, key: string): Promise<Response> =>
    fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const rawMcp = (body: unknown, headers: Record<string, string> = {}, method = 'POST'): Promise<Response> =>
    fetch(t.mcpUrl, {
      method,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      ...(method === 'POST' ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });

  beforeAll(async () => {
    t = await startMcpTestApp();
    write = await connectClient(t.mcpUrl, t.tokens.aWrite);
    read = await connectClient(t.mcpUrl, t.tokens.aRead);
    other = await connectClient(t.mcpUrl, t.tokens.bWrite);
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    for (const tool of (await write.listTools()).tools) {
      if (tool.outputSchema) validators.set(tool.name, ajv.compile(tool.outputSchema));
    }
  });
  afterAll(async () => {
    for (const client of [write, read, other]) await client?.close();
    await t?.close();
  });

  describe('tools/list', () => {
    it('lists every tool with input and output schemas, a description and all four hints', async () => {
      const { tools } = await write.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(ALL_TOOLS);
      for (const tool of tools) {
        expect(tool.description?.length, tool.name).toBeGreaterThan(80);
        expect(tool.title).toBeTruthy();
        expect(tool.inputSchema.type).toBe('object');
        expect(tool.inputSchema.additionalProperties).toBe(false);
        expect(tool.outputSchema?.type).toBe('object');
        expect(JSON.stringify(tool.inputSchema)).not.toContain('$ref');
        expect(JSON.stringify(tool.outputSchema)).not.toContain('$ref');
        const a = tool.annotations ?? {};
        for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) {
          expect(typeof a[hint], `${tool.name}.${hint}`).toBe('boolean');
        }
        expect(a.readOnlyHint, tool.name).toBe(!WRITE_TOOLS.includes(tool.name));
      }
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      expect(byName.get('replace_featured_image')?.annotations?.openWorldHint).toBe(true);
      expect(byName.get('update_article')?.description).toContain('data-service-protected');
      expect(byName.get('update_article')?.description).toContain('200 article edits per UTC day');
      expect(byName.get('list_articles')?.description).toContain('YYYY-MM-DD');
      const properties = (byName.get('list_articles')?.inputSchema.properties ?? {}) as Record<
        string,
        { maximum?: number }
      >;
      const perPage = properties.per_page;
      expect(perPage?.maximum).toBe(100);
      expect(byName.get('list_articles')?.inputSchema.required).toEqual(['site_id']);
    });

    it('hides the write tools from a read-only grant, which cannot call them either', async () => {
      const { tools } = await read.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(ALL_TOOLS.filter((name) => !WRITE_TOOLS.includes(name)));
      const [articleId] = t.a.articleIds;
      const refused = await call(read, 'update_article', { article_id: articleId, title: 'Not allowed' });
      expect(errorOf(refused).code).toBe('insufficient_scope');
      expect(textOf(refused)).toContain('allowed to read only');
    });
  });

  describe('read tools', () => {
    it('list_sites answers the API’s sites, in the same shape', async () => {
      const out = structured<ListOut<{ id: string }>>(await call(write, 'list_sites'));
      expect(out.data.map((site) => site.id)).toEqual([t.a.siteId, t.a.otherSiteId]);
      expect(out.meta).toEqual({ page: 1, per_page: 20, total: 2, total_pages: 1 });
      expect(out.next_page).toBeNull();
      const fromApi = (await (await api('/api/v1/sites', t.a.apiKey)).json()) as { data: unknown[] };
      expect(out.data).toEqual(fromApi.data);
    });

    it('list_articles pages can be followed to the end with next_page', async () => {
      const seen: string[] = [];
      let page: number | null = 1;
      let calls = 0;
      while (page !== null) {
        const result = await call(write, 'list_articles', { site_id: t.a.siteId, per_page: 5, page });
        const out = structured<ListOut<{ id: string }>>(result);
        expect(out.meta).toMatchObject({ page, per_page: 5, total: ARTICLES_PER_SITE, total_pages: 3 });
        if (out.next_page !== null) expect(textOf(result)).toContain(`page: ${out.next_page}`);
        else expect(textOf(result)).toContain('last page');
        seen.push(...out.data.map((article) => article.id));
        page = out.next_page;
        calls++;
      }
      expect(calls).toBe(3);
      expect(seen).toEqual(t.a.articleIds);
      const past = structured<ListOut<unknown>>(
        await call(write, 'list_articles', { site_id: t.a.siteId, page: 9 }),
      );
      expect(past).toMatchObject({ data: [], next_page: null });
    });

    it('list_articles filters by status and dates, and names the ids in its text', async () => {
      const result = await call(write, 'list_articles', {
        site_id: t.a.siteId,
        status: 'published',
        from: '2026-10-03',
        to: '2026-10-05',
      });
      const out = structured<ListOut<{ id: string; published_at: string }>>(result);
      expect(out.data.map((a) => a.published_at.slice(0, 10))).toEqual([
        '2026-10-05',
        '2026-10-04',
        '2026-10-03',
      ]);
      for (const article of out.data) expect(textOf(result)).toContain(article.id);
    });

    it('get_article answers the API’s article, with the body and protected links in its text', async () => {
      const articleId = t.a.articleIds[3] as string;
      const result = await call(write, 'get_article', { article_id: articleId });
      const out = structured<{ body: string; protected_links: { id: string }[] }>(result);
      const fromApi = await (await api(`/api/v1/articles/${articleId}`, t.a.apiKey)).json();
      expect(out).toEqual(fromApi);
      expect(out.protected_links.map((l) => l.id)).toHaveLength(2);
      const text = textOf(result);
      expect(text).toContain(out.body);
      for (const link of out.protected_links) expect(text).toContain(link.id);
    });

    it('get_article with as_of answers the API’s article as it stood then, and refuses a future instant', async () => {
      const articleId = t.a.articleIds[3] as string;
      const now = (await (await api(`/api/v1/articles/${articleId}`, t.a.apiKey)).json()) as {
        updated_at: string;
      };
      const result = await call(write, 'get_article', { article_id: articleId, as_of: now.updated_at });
      const out = structured<{ as_of: string; revision: number }>(result);
      const fromApi = await (
        await api(`/api/v1/articles/${articleId}?as_of=${now.updated_at}`, t.a.apiKey)
      ).json();
      expect(out).toEqual(fromApi);
      expect(out.as_of).toBe(now.updated_at);
      expect(textOf(result)).toContain(`as it stood at ${now.updated_at}`);
      const before = await call(write, 'get_article', {
        article_id: articleId,
        as_of: '2000-01-01T00:00:00Z',
      });
      expect(errorOf(before).code).toBe('not_found');
      const ahead = await call(write, 'get_article', {
        article_id: articleId,
        as_of: new Date(Date.now() + 3_600_000).toISOString(),
      });
      expect(errorOf(ahead)).toMatchObject({
        code: 'invalid_request',
        errors: [{ in: 'arguments', name: 'as_of', message: 'must not be in the future' }],
      });
      const malformed = await call(write, 'get_article', { article_id: articleId, as_of: 'last week' });
      expect(errorOf(malformed).errors?.[0]).toMatchObject({ in: 'arguments', name: 'as_of' });
    });

    it('list_articles and get_stats with as_of answer the API’s list and statistics as they stood then', async () => {
      // The test app's clock stands still at this instant.
      const at = '2026-11-05T12:00:00Z';
      await vi.waitFor(async () => {
        const list = await call(write, 'list_articles', { site_id: t.a.siteId, per_page: 3, as_of: at });
        const out = structured<ListOut<{ id: string }> & { meta: { as_of: string } }>(list);
        const fromApi = (await (
          await api(`/api/v1/sites/${t.a.siteId}/articles?per_page=3&as_of=${at}`, t.a.apiKey)
        ).json()) as { data: unknown; meta: unknown };
        expect(out.meta.as_of).toBe(at);
        expect({ data: out.data, meta: out.meta }).toEqual({ data: fromApi.data, meta: fromApi.meta });
        expect(textOf(list)).toContain(`as the list stood at ${at}`);
      }, PATIENCE);
      const stats = await call(write, 'get_stats', { site_id: t.a.siteId, period: 'this_month', as_of: at });
      expect(structured(stats)).toEqual(
        await (
          await api(`/api/v1/sites/${t.a.siteId}/stats?period=this_month&as_of=${at}`, t.a.apiKey)
        ).json(),
      );
      expect(textOf(stats)).toContain(`as it stood at ${at}`);
      const ahead = await call(write, 'get_stats', {
        site_id: t.a.siteId,
        as_of: new Date(Date.now() + 3_600_000).toISOString(),
      });
      expect(errorOf(ahead)).toMatchObject({
        code: 'invalid_request',
        errors: [{ in: 'arguments', name: 'as_of', message: 'must not be in the future' }],
      });
    });

    it('list_backlinks, get_stats and list_activity answer the API’s shapes', async () => {
      const backlinks = structured<ListOut<{ category: string }>>(
        await call(write, 'list_backlinks', { site_id: t.a.siteId, category: 'local' }),
      );
      expect(backlinks.meta.total).toBe(Math.floor(BACKLINKS_PER_SITE / 3));
      expect(backlinks.data.every((b) => b.category === 'local')).toBe(true);
      const stats = await call(write, 'get_stats', { site_id: t.a.siteId, period: '2026-10' });
      expect(structured(stats)).toEqual({
        site_id: t.a.siteId,
        period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
        articles: { published: ARTICLES_PER_SITE - 1 },
        backlinks: { total: BACKLINKS_PER_SITE, industry: 5, local: 2 },
      });
      expect(textOf(stats)).toContain('11 articles published');
      const fromApi = await (
        await api(`/api/v1/sites/${t.a.siteId}/stats?period=2026-10`, t.a.apiKey)
      ).json();
      expect(structured(stats)).toEqual(fromApi);
      const thisMonth = structured<{ period: { key: string; from: string } }>(
        await call(write, 'get_stats', { site_id: t.a.siteId }),
      );
      expect(thisMonth.period).toMatchObject({ key: 'this_month', from: '2026-11-01' });
      await call(write, 'list_activity', { source: 'api' });
    });

    it('refuses invalid arguments as invalid_request naming each one, with the API’s messages', async () => {
      const tooMany = await call(write, 'list_articles', { site_id: t.a.siteId, per_page: 101 });
      expect(errorOf(tooMany)).toMatchObject({
        code: 'invalid_request',
        errors: [{ in: 'arguments', name: 'per_page', message: 'must be at most 100' }],
      });
      expect(textOf(tooMany)).toContain('per_page: must be at most 100');
      const range = await call(write, 'list_backlinks', {
        site_id: t.a.siteId,
        from: '2026-10-05',
        to: '2026-10-01',
      });
      expect(errorOf(range).errors).toEqual([
        { in: 'arguments', name: 'from', message: 'must not be after to' },
      ]);
      const unknown = await call(write, 'get_stats', {
        site_id: t.a.siteId,
        period: 'yesterday',
        colour: 'red',
      });
      expect(
        errorOf(unknown)
          .errors?.map((e) => e.name)
          .sort(),
      ).toEqual(['colour', 'period']);
      const missing = await call(write, 'get_article', {});
      expect(errorOf(missing).errors?.[0]).toMatchObject({ name: 'article_id' });
      const nothing = await call(write, 'update_article', { article_id: t.a.articleIds[0] });
      expect(errorOf(nothing).errors?.[0]).toMatchObject({
        name: 'title',
        message: 'give a title, a body, or both',
      });
    });

    it('an unknown tool is a JSON-RPC invalid-params error', async () => {
      await expect(write.callTool({ name: 'drop_database', arguments: {} })).rejects.toSatisfy(
        (error: unknown) => error instanceof McpError && error.code === -32602,
      );
    });
  });

  describe('another account', () => {
    it('a token of account A never reaches account B: B’s ids are as unknown as made-up ones', async () => {
      const site = errorOf(await call(write, 'list_articles', { site_id: t.b.siteId }));
      const madeUpSite = errorOf(await call(write, 'list_articles', { site_id: 'site_made_up' }));
      expect(site.code).toBe('not_found');
      expect(madeUpSite.code).toBe('not_found');
      expect(site.detail.replace(t.b.siteId, 'ID')).toBe(madeUpSite.detail.replace('site_made_up', 'ID'));
      for (const tool of ['list_backlinks', 'get_stats']) {
        expect(errorOf(await call(write, tool, { site_id: t.b.siteId })).code).toBe('not_found');
      }
      const articleId = t.b.articleIds[0] as string;
      for (const [tool, args] of [
        ['get_article', {}],
        ['list_revisions', {}],
        ['get_revision', { revision: 1 }],
        ['compare_revisions', { from: 1, to: 1 }],
        ['update_article', { title: 'Taken over' }],
        ['replace_featured_image', { url: IMAGE_URL }],
        ['restore_revision', { revision: 1 }],
      ] as const) {
        const refused = errorOf(await call(write, tool, { article_id: articleId, ...args }));
        expect(refused.code, tool).toBe('not_found');
        expect(refused.detail, tool).not.toContain(t.b.siteId);
      }
      // B's own call on its site is in B's log; A's log, asked for that site, holds only A's refused
      // calls naming it (the ids A sent), never B's activity.
      expect((await call(other, 'get_article', { article_id: articleId })).isError).toBeFalsy();
      await t.runtime.commands.flushCalls();
      const bOwn = await listActivity(t.runtime.db, t.b.accountId, {
        page: 1,
        perPage: 100,
        siteId: t.b.siteId,
      });
      expect(bOwn.rows.map((r) => [r.operation, r.status])).toContainEqual(['get_article', 200]);
      const activity = structured<ListOut<{ operation: string; status: number }>>(
        await call(write, 'list_activity', { site_id: t.b.siteId }),
      );
      expect(activity.data.map((r) => [r.operation, r.status]).sort()).toEqual([
        ['get_stats', 404],
        ['list_articles', 404],
        ['list_backlinks', 404],
      ]);
      // B's own token still sees its article unchanged.
      const own = structured<{ title: string; revision: number }>(
        await call(other, 'get_article', { article_id: articleId }),
      );
      expect(own).toMatchObject({ revision: 1, title: 'Article 11 of Dentists Ltd' });
    });
  });

  describe('write tools', () => {
    it('update_article creates a revision with origin mcp and the OAuth client as actor', async () => {
      const articleId = t.a.articleIds[0] as string;
      const before = structured<{ body: string; revision: number }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      const result = await call(write, 'update_article', {
        article_id: articleId,
        title: 'A clearer title',
        body: `<p>New first paragraph.</p>${before.body}`,
        reason: 'clearer intro',
        expected_revision: before.revision,
      });
      const change = structured<Change>(result);
      expect(change).toMatchObject({
        id: articleId,
        revision: before.revision + 1,
        changed: true,
        title: 'A clearer title',
      });
      expect(textOf(result)).toContain(`revision ${before.revision + 1}`);
      const revisions = structured<ListOut<RevisionOut>>(
        await call(write, 'list_revisions', { article_id: articleId }),
      );
      expect(revisions.data[0]).toMatchObject({
        revision: before.revision + 1,
        origin: 'mcp',
        reason: 'clearer intro',
        actor: { type: 'oauth_client', id: t.client.id, name: t.client.name },
      });
      // The API sees the same revision.
      const fromApi = (await (
        await api(`/api/v1/articles/${articleId}/revisions`, t.a.apiKey)
      ).json()) as ListOut<RevisionOut>;
      expect(fromApi.data[0]).toEqual(revisions.data[0]);
      // The same edit again changes nothing and creates no revision.
      const again = structured<Change>(
        await call(write, 'update_article', { article_id: articleId, title: 'A clearer title' }),
      );
      expect(again).toMatchObject({ changed: false, revision: before.revision + 1 });
      // A stale expected_revision is refused.
      const stale = await call(write, 'update_article', {
        article_id: articleId,
        title: 'Stale',
        expected_revision: before.revision,
      });
      expect(errorOf(stale).code).toBe('revision_mismatch');
    });

    it('refuses an edit that drops or rewrites protected links, naming the blocks and the markup to keep', async () => {
      const articleId = t.a.articleIds[1] as string;
      const before = structured<{ body: string; revision: number; protected_links: { id: string }[] }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      const [backlink, internal] = before.protected_links.map((l) => l.id) as [string, string];
      const rewritten = before.body
        .replace(/<a [^>]*data-service-id="bl_[^"]*"[^>]*>[^<]*<\/a>/, '')
        .replace('our services', 'our great services');
      const result = await call(write, 'update_article', { article_id: articleId, body: rewritten });
      const info = errorOf(result);
      expect(info.code).toBe('protected_links_modified');
      expect(info.errors).toEqual([
        { id: backlink, change: 'removed' },
        { id: internal, change: 'rewritten' },
      ]);
      const text = textOf(result);
      expect(text).toContain(`${backlink}: removed`);
      expect(text).toContain(`${internal}: rewritten`);
      // The exact markup of each block, as get_article's body has it.
      const markup = before.body.match(/<a [^>]*data-service-protected[^>]*>[^<]*<\/a>/g) ?? [];
      expect(markup).toHaveLength(2);
      for (const block of markup) expect(text).toContain(block);
      expect(text).toContain('copy it verbatim');
      const after = structured<{ revision: number; body: string }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      expect(after).toMatchObject({ revision: before.revision, body: before.body });
      // Forging a protected block is refused too.
      const forged = errorOf(
        await call(write, 'update_article', {
          article_id: articleId,
          body: `${before.body}<p><a href="https://evil.example/" data-service-protected="backlink" data-service-id="bl_evil">x</a></p>`,
        }),
      );
      expect(forged.errors).toEqual([{ id: 'bl_evil', change: 'forged' }]);
    });

    it('replace_featured_image fetches, checks and stores the image as a new revision', async () => {
      const articleId = t.a.articleIds[2] as string;
      const result = await call(write, 'replace_featured_image', {
        article_id: articleId,
        url: IMAGE_URL,
        alt: 'A blue square',
      });
      const change = structured<Change>(result);
      expect(change).toMatchObject({ changed: true, revision: 2 });
      expect(change.featured_image).toMatchObject({ alt: 'A blue square', width: 64, height: 48 });
      expect(change.featured_image?.url.startsWith(`${PLACEHOLDER_PUBLIC_URL}/media/`)).toBe(true);
      const stored = await fetch(`${t.url}${new URL(change.featured_image?.url ?? '').pathname}`);
      expect(stored.status).toBe(200);
      expect(stored.headers.get('content-type')).toBe('image/png');
      const failed = errorOf(
        await call(write, 'replace_featured_image', {
          article_id: articleId,
          url: 'https://images.example.test/missing.png',
        }),
      );
      expect(failed.code).toBe('image_fetch_failed');
    });

    it('replace_featured_image stores nothing for a write refused with a stale expected_revision', async () => {
      const articleId = t.a.articleIds[8] as string;
      const before = structured<{ revision: number }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      const files = await mediaFiles(t.mediaDir);
      const stale = errorOf(
        await call(write, 'replace_featured_image', {
          article_id: articleId,
          url: OTHER_IMAGE_URL,
          expected_revision: before.revision + 1,
        }),
      );
      expect(stale.code).toBe('revision_mismatch');
      expect(await mediaFiles(t.mediaDir)).toEqual(files);
      const key = `${createHash('sha256')
        .update(await otherImage())
        .digest('hex')}.png`;
      expect((await fetch(`${t.url}/media/${key}`)).status).toBe(404);
      const after = structured<{ revision: number }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      expect(after.revision).toBe(before.revision);
      // The same image with the current revision is stored and served.
      const accepted = structured<Change>(
        await call(write, 'replace_featured_image', {
          article_id: articleId,
          url: OTHER_IMAGE_URL,
          expected_revision: before.revision,
        }),
      );
      expect(accepted.featured_image?.url).toBe(`${PLACEHOLDER_PUBLIC_URL}/media/${key}`);
      expect((await fetch(`${t.url}/media/${key}`)).status).toBe(200);
    });

    it('states the daily edit limit beside the request limit on a write', async () => {
      const res = await rawMcp(
        {
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: {
            name: 'update_article',
            arguments: { article_id: t.a.articleIds[5], title: 'Over raw HTTP' },
          },
        },
        { authorization: `Bearer ${t.tokens.aWrite}`, 'x-request-id': 'mcp-raw-7' },
      );
      expect(res.status).toBe(200);
      // The service makes the request id; the client's own is kept as client_request_id (checked below).
      expect(res.headers.get('x-request-id')).toMatch(/^req_/);
      expect(res.headers.get('ratelimit-policy')).toBe('"requests";q=100000;w=60, "edits";q=200;w=86400');
      expect(res.headers.get('ratelimit')).toMatch(/^"requests";r=\d+;t=\d+, "edits";r=\d+;t=\d+$/);
      const body = (await res.json()) as { id: number; result: CallToolResult };
      expect(body.id).toBe(7);
      expect(structured<Change>(body.result)).toMatchObject({ changed: true, title: 'Over raw HTTP' });
    });

    it('a retry with the same idempotency_key returns the first answer and makes no second revision', async () => {
      const articleId = t.a.articleIds[6] as string;
      const before = structured<{ revision: number }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      const args = { article_id: articleId, title: 'Retried safely', idempotency_key: 'mcp-retry-1' };
      const first = structured<Change>(await call(write, 'update_article', args));
      expect(first).toMatchObject({ revision: before.revision + 1, changed: true });
      // Meanwhile the article moves on: the retry still answers what the first call did.
      structured(await call(write, 'update_article', { article_id: articleId, title: 'Moved on' }));
      const retried = structured<Change>(await call(write, 'update_article', args));
      expect(retried).toEqual(first);
      const revisions = structured<ListOut<RevisionOut>>(
        await call(write, 'list_revisions', { article_id: articleId }),
      );
      expect(revisions.data.map((r) => r.revision)).toEqual(
        [before.revision + 2, before.revision + 1, 1].slice(0, revisions.data.length),
      );
      expect(revisions.data.filter((r) => r.title === 'Retried safely')).toHaveLength(1);
      // The same key for other arguments is refused, naming the argument; a malformed key too.
      const other = await call(write, 'update_article', { ...args, title: 'Something else' });
      expect(errorOf(other).code).toBe('invalid_request');
      const malformed = await call(write, 'update_article', { ...args, idempotency_key: 'has space' });
      expect(errorOf(malformed).code).toBe('invalid_request');
      // restore_revision with a key: one new revision however often it is sent.
      const restoreArgs = { article_id: articleId, revision: 1, idempotency_key: 'mcp-restore-1' };
      const restored = structured<Change>(await call(write, 'restore_revision', restoreArgs));
      expect(structured<Change>(await call(write, 'restore_revision', restoreArgs))).toEqual(restored);
      const after = structured<ListOut<RevisionOut>>(
        await call(write, 'list_revisions', { article_id: articleId }),
      );
      expect(after.data.filter((r) => r.restored_from === 1)).toHaveLength(1);
    });

    it('get_revision shows an earlier version and restore_revision brings it back as a new revision', async () => {
      const articleId = t.a.articleIds[4] as string;
      const original = structured<{ body: string; title: string }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      structured(await call(write, 'update_article', { article_id: articleId, title: 'Changed title' }));
      const first = await call(write, 'get_revision', { article_id: articleId, revision: 1 });
      expect(structured(first)).toMatchObject({
        revision: 1,
        title: original.title,
        body: original.body,
        origin: 'rewrite',
      });
      expect(textOf(first)).toContain('restore_revision');
      const restored = structured<Change>(
        await call(write, 'restore_revision', {
          article_id: articleId,
          revision: 1,
          reason: 'back to the original',
        }),
      );
      expect(restored).toMatchObject({ revision: 3, title: original.title, changed: true });
      const [latest] = structured<ListOut<RevisionOut>>(
        await call(write, 'list_revisions', { article_id: articleId }),
      ).data;
      expect(latest).toMatchObject({
        revision: 3,
        origin: 'mcp',
        restored_from: 1,
        actor: { type: 'oauth_client' },
      });
      expect(errorOf(await call(write, 'get_revision', { article_id: articleId, revision: 9 })).code).toBe(
        'not_found',
      );
    });
  });

  describe('compare_revisions', () => {
    type Comparison = {
      article_id: string;
      from: number;
      to: number;
      title: { before: string; after: string };
      granularity: string;
      changes: { op: string; text: string }[];
    };
    /** `lines` paragraphs, each one word tagged `tag`: two tags share no line and no word. */
    const paragraphs = (lines: number, tag: string): string =>
      Array.from({ length: lines }, (_, i) => `<p>${tag}${i}</p>`).join('');

    it('gives both titles and the word diff, and says in its text how many words changed', async () => {
      const articleId = t.a.articleIds[7] as string;
      const original = structured<{ body: string; title: string; protected_links: { text: string }[] }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      structured(
        await call(write, 'update_article', {
          article_id: articleId,
          title: 'Compared title',
          body: `${original.body}<p>Three more words.</p>`,
        }),
      );
      const result = await call(read, 'compare_revisions', { article_id: articleId, from: 1, to: 2 });
      const c = structured<Comparison>(result);
      expect(c).toMatchObject({
        article_id: articleId,
        from: 1,
        to: 2,
        title: { before: original.title, after: 'Compared title' },
        granularity: 'word',
      });
      expect(c.changes.filter((x) => x.op !== 'equal').map((x) => [x.op, x.text.trim()])).toEqual([
        ['insert', 'Three more words.'],
      ]);
      for (const link of original.protected_links) {
        expect(c.changes.some((x) => x.text.includes(link.text))).toBe(true);
      }
      expect(textOf(result)).toContain(`The title changed from "${original.title}" to "Compared title".`);
      expect(textOf(result)).toContain('3 words inserted, 0 deleted');
      const same = await call(read, 'compare_revisions', { article_id: articleId, from: 2, to: 2 });
      expect(structured<Comparison>(same).changes.every((x) => x.op === 'equal')).toBe(true);
      expect(textOf(same)).toContain('The title is the same');
      expect(textOf(same)).toContain('The text is the same.');
      const back = structured<Comparison>(
        await call(read, 'compare_revisions', { article_id: articleId, from: 2, to: 1 }),
      );
      expect(back.changes.filter((x) => x.op !== 'equal').map((x) => x.op)).toEqual(['delete']);
    });

    it('refuses an unknown revision, bad arguments, and texts too different to compare', async () => {
      const articleId = t.a.articleIds[7] as string;
      expect(
        errorOf(await call(read, 'compare_revisions', { article_id: articleId, from: 1, to: 9 })).code,
      ).toBe('not_found');
      const bad = errorOf(await call(read, 'compare_revisions', { article_id: articleId, from: 0, to: 'x' }));
      expect(bad.code).toBe('invalid_request');
      expect(bad.errors?.map((e) => e.name).sort()).toEqual(['from', 'to']);
      const { body } = structured<{ body: string }>(
        await call(write, 'get_article', { article_id: articleId }),
      );
      // More differing lines than the diff budget's edits, twice.
      for (const tag of ['alpha', 'beta']) {
        structured(
          await call(write, 'update_article', {
            article_id: articleId,
            body: `${body}${paragraphs(DIFF_EDITS_MAX + 500, tag)}`,
          }),
        );
      }
      const refused = await call(read, 'compare_revisions', { article_id: articleId, from: 3, to: 4 });
      const info = errorOf(refused);
      expect(info.code).toBe('diff_too_large');
      expect(textOf(refused)).toContain('get_revision');
    });
  });

  describe('HTTP', () => {
    it('answers 401 with WWW-Authenticate pointing at the resource metadata, without or with a bad token', async () => {
      const initialize = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      };
      const metadata = `${PLACEHOLDER_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp`;
      const none = await rawMcp(initialize);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${metadata}", scope="content:read content:write"`,
      );
      expect(((await none.json()) as { code: string }).code).toBe('unauthenticated');
      const bad = await rawMcp(initialize, { authorization: 'Bearer not-a-known-token' });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('www-authenticate')).toBe(
        `Bearer error="invalid_token", resource_metadata="${metadata}", scope="content:read content:write"`,
      );
      const apiKey = await rawMcp(initialize, { authorization: `Bearer ${t.a.apiKey}` });
      expect(apiKey.status).toBe(401);
      for (const method of ['GET', 'DELETE']) {
        const refused = await rawMcp(undefined, {}, method);
        expect(refused.status).toBe(401);
        expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=');
      }
      await expect(connectClient(t.mcpUrl, 'not-a-known-token')).rejects.toThrow();
    });

    it('refuses JSON-RPC batches, unreadable JSON, GET and DELETE (stateless), and foreign origins', async () => {
      const auth = { authorization: `Bearer ${t.tokens.aWrite}` };
      const batch = await rawMcp(
        [
          { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          { jsonrpc: '2.0', id: 2, method: 'tools/list' },
        ],
        auth,
      );
      expect(batch.status).toBe(400);
      expect(await batch.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
      const garbage = await rawMcp('{"jsonrpc": "2.0", ', auth);
      expect(garbage.status).toBe(400);
      expect(await garbage.json()).toMatchObject({ error: { code: -32700 } });
      for (const method of ['GET', 'DELETE']) {
        const refused = await rawMcp(undefined, auth, method);
        expect(refused.status).toBe(405);
        expect(refused.headers.get('allow')).toBe('POST');
      }
      const foreign = await rawMcp(
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { ...auth, origin: 'https://evil.example' },
      );
      expect(foreign.status).toBe(403);
      const own = await rawMcp(
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { ...auth, origin: PLACEHOLDER_PUBLIC_URL },
      );
      expect(own.status).toBe(200);
      expect(own.headers.get('x-request-id')).toBeTruthy();
      expect(own.headers.get('ratelimit')).toMatch(/^"requests";r=\d+;t=\d+$/);
      expect(own.headers.get('mcp-session-id')).toBeNull();
    });

    it('one request budget per account for the API and MCP together', async () => {
      const mcpCall = (name: string): Promise<Response> =>
        rawMcp(
          { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } },
          { authorization: `Bearer ${t.tokens.cWrite}` },
        );
      const remaining = (res: Response): number =>
        Number(/r=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1]);
      const seen: number[] = [];
      for (let i = 0; i < SMALL_BUDGET; i++) {
        const res = i % 2 === 0 ? await api('/api/v1/sites', t.c.apiKey) : await mcpCall('list_sites');
        expect(res.status).toBe(200);
        seen.push(remaining(res));
      }
      expect(seen).toEqual([5, 4, 3, 2, 1, 0]);
      const apiRefused = await api('/api/v1/sites', t.c.apiKey);
      expect(apiRefused.status).toBe(429);
      // A tool call over the budget is a tool error the model can act on, with Retry-After.
      const toolRefused = await mcpCall('list_sites');
      expect(toolRefused.status).toBe(200);
      expect(Number(toolRefused.headers.get('retry-after'))).toBeGreaterThan(0);
      const body = (await toolRefused.json()) as { result: CallToolResult };
      expect(body.result.isError).toBe(true);
      expect(errorOf(body.result).code).toBe('rate_limited');
      // Anything else over the budget is an HTTP 429.
      const listRefused = await rawMcp(
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { authorization: `Bearer ${t.tokens.cWrite}` },
      );
      expect(listRefused.status).toBe(429);
      expect(listRefused.headers.get('retry-after')).toBeTruthy();
      // Other accounts are not affected.
      expect((await api('/api/v1/sites', t.a.apiKey)).status).toBe(200);
    });
  });

  describe('after the calls', () => {
    it('recorded every tool call with source mcp, the OAuth client, the tool, the ids and the outcome', async () => {
      for (const client of [write, read, other]) await client.close();
      await t.drain();
      const records = await listActivity(t.runtime.db, t.a.accountId, {
        page: 1,
        perPage: 100,
        source: 'mcp',
      });
      const rows = records.rows;
      expect(rows.length).toBeGreaterThan(20);
      for (const row of rows) {
        expect(row.actor).toEqual({ type: 'oauth_client', id: t.client.id, name: t.client.name });
        expect(ALL_TOOLS).toContain(row.operation);
        expect(row.request_id).toMatch(/^req_/);
      }
      expect(rows.find((r) => r.client_request_id === 'mcp-raw-7')).toMatchObject({
        operation: 'update_article',
        status: 200,
      });
      const updates = rows.filter((r) => r.operation === 'update_article' && r.status === 200);
      expect(updates.length).toBeGreaterThan(0);
      expect(updates[0]).toMatchObject({ site_id: t.a.siteId, article_id: expect.any(String) });
      const statuses = new Set(rows.map((r) => r.status));
      for (const status of [200, 400, 403, 404, 412, 422]) expect(statuses, String(status)).toContain(status);
      const listArticles = rows.find((r) => r.operation === 'list_articles' && r.status === 200);
      expect(listArticles).toMatchObject({ site_id: t.a.siteId, article_id: null, revision: null });
      // A write that changed the article names the revision it created; a read, a refusal and an edit
      // that changed nothing name none.
      const firstEdits = updates.filter((r) => r.article_id === t.a.articleIds[0]);
      expect(firstEdits.map((r) => r.revision).sort()).toEqual([2, null]);
      for (const operation of ['replace_featured_image', 'restore_revision']) {
        const done = rows.filter((r) => r.operation === operation && r.status === 200);
        expect(done.length, operation).toBeGreaterThan(0);
        // A retry answered from its idempotency key created nothing and names no revision.
        expect(
          done.some((r) => typeof r.revision === 'number' && r.revision > 1),
          operation,
        ).toBe(true);
        expect(
          done.every((r) => r.revision === null || r.revision > 1),
          operation,
        ).toBe(true);
      }
      expect(rows.filter((r) => r.status !== 200).every((r) => r.revision === null)).toBe(true);
      expect(rows.filter((r) => !WRITE_TOOLS.includes(r.operation)).every((r) => r.revision === null)).toBe(
        true,
      );
      // The refused tool call of account C is recorded with 429.
      const c = await listActivity(t.runtime.db, t.c.accountId, { page: 1, perPage: 100, source: 'mcp' });
      expect(c.rows.map((r) => r.status).sort()).toEqual([200, 200, 200, 429]);
      // B's records stay B's.
      const b = await listActivity(t.runtime.db, t.b.accountId, { page: 1, perPage: 100, source: 'mcp' });
      expect(b.rows.every((r) => r.operation === 'get_article')).toBe(true);
    });

    it('never wrote a token in a log line', () => {
      const all = t.logs.join('');
      expect(all.length).toBeGreaterThan(0);
      for (const token of [...Object.values(t.tokens), 'not-a-known-token']) expect(all).not.toContain(token);
    });
  });
});
