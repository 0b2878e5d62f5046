import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTICLE_META_KEY, RESOURCE_PAGE_SIZE } from '../../apps/server/mcp/resources.ts';
import { listActivity } from '../../projections/activity.ts';
import {
  ARTICLES_PER_SITE,
  connectClient,
  type McpTestApp,
  SMALL_BUDGET,
  startMcpTestApp,
} from '../support/mcp-app.ts';

/*
 * The MCP resources, resource templates, prompts and completions of /mcp, in both protocol eras (the SDK's
 * 2.x client negotiating 2026-07-28, and in its legacy mode with the 2025 handshake): what they answer,
 * the cursor of resources/list, tenancy (another account's ids read as not found and complete to nothing),
 * the errors, the request limit, and the activity record of each.
 */

type Era = 'modern' | 'legacy';
const ERAS: Era[] = ['modern', 'legacy'];
const EXTRA_SITES = RESOURCE_PAGE_SIZE;

async function connect(mcpUrl: string, token: string, era: Era): Promise<Client> {
  const client = new Client(
    { name: 'content-service-tests-resources', version: '1.0.0' },
    { versionNegotiation: { mode: era === 'modern' ? 'auto' : 'legacy' } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The JSON-RPC error a call ended with. */
async function failure(call: Promise<unknown>): Promise<{ code: number; message: string; data: unknown }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ProtocolError) return { code: error.code, message: error.message, data: error.data };
    throw error;
  }
  throw new Error('the call succeeded');
}

/** The first page of resources/list as a 2026-07-28 request gets it, without the client's walk over the pages. */
async function firstPage(token: string): Promise<{ resources: { uri: string }[]; nextCursor?: string }> {
  const response = await fetch(mcpUrlOf(), {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'resources/list',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'resources/list',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  return ((await response.json()) as { result: { resources: { uri: string }[]; nextCursor?: string } })
    .result;
}

let mcpUrlOf: () => string = () => '';

const text = (content: { type: string; text?: string } | undefined): string =>
  content?.type === 'text' ? (content.text ?? '') : '';

describe('MCP resources, prompts and completions', () => {
  let t: McpTestApp;
  const clients: Record<Era, { a: Client; b: Client }> = {} as never;

  beforeAll(async () => {
    t = await startMcpTestApp();
    mcpUrlOf = () => t.mcpUrl;
    // Account B gets more sites than one page of resources/list.
    for (let i = 1; i <= EXTRA_SITES; i++) {
      await t.runtime.commands.addSite(t.b.accountId, {
        name: `Branch ${i}`,
        domain: `branch-${i}.example`,
        url: `https://branch-${i}.example/`,
      });
    }
    for (const era of ERAS) {
      clients[era] = {
        a: await connect(t.mcpUrl, t.tokens.aWrite, era),
        b: await connect(t.mcpUrl, t.tokens.bWrite, era),
      };
    }
  });
  afterAll(async () => {
    for (const era of ERAS) for (const client of Object.values(clients[era] ?? {})) await client.close();
    await t?.close();
  });

  describe.each(ERAS)('in the %s era', (era) => {
    const a = () => clients[era].a;
    const b = () => clients[era].b;
    const tool = async (name: string, args: Record<string, unknown>) =>
      (await a().callTool({ name, arguments: args })).structuredContent as Record<string, unknown>;

    it('states resources, prompts and completions among its capabilities', () => {
      expect(a().getProtocolEra()).toBe(era);
      const capabilities = a().getServerCapabilities();
      expect(capabilities?.resources).toBeDefined();
      expect(capabilities?.prompts).toBeDefined();
      expect(capabilities?.completions).toBeDefined();
    });

    it("lists the account's sites as resources, a page at a time with a cursor", async () => {
      const mine = await a().listResources();
      expect(mine.resources.map((r) => r.uri)).toEqual([
        `content-service://sites/${t.a.siteId}`,
        `content-service://sites/${t.a.otherSiteId}`,
      ]);
      expect(mine.resources[0]).toMatchObject({
        name: 'northside.example',
        title: 'Northside Plumbing',
        mimeType: 'application/json',
      });
      expect(mine.nextCursor).toBeUndefined();

      // The client walks the pages itself when given no cursor.
      const all = await b().listResources();
      expect(all.resources).toHaveLength(EXTRA_SITES + 2);
      expect(new Set(all.resources.map((r) => r.uri)).size).toBe(EXTRA_SITES + 2);
      expect(all.resources.some((r) => r.uri === `content-service://sites/${t.a.siteId}`)).toBe(false);
      // Page by page: the first page (as it comes over the wire) names the next.
      const first = await firstPage(t.tokens.bWrite);
      expect(first.resources).toHaveLength(RESOURCE_PAGE_SIZE);
      expect(first.nextCursor).toEqual(expect.any(String));
      const second = await b().listResources({ cursor: first.nextCursor });
      expect(second.resources).toHaveLength(EXTRA_SITES + 2 - RESOURCE_PAGE_SIZE);
      expect(second.nextCursor).toBeUndefined();
      expect([...first.resources, ...second.resources].map((r) => r.uri)).toEqual(
        all.resources.map((r) => r.uri),
      );

      const bad = await failure(a().listResources({ cursor: 'not-a-cursor' }));
      expect(bad.code).toBe(-32602);
    });

    it('lists the three templates', async () => {
      const { resourceTemplates } = await a().listResourceTemplates();
      expect(resourceTemplates.map((r) => [r.uriTemplate, r.mimeType])).toEqual([
        ['content-service://articles/{article_id}', 'text/html'],
        ['content-service://articles/{article_id}/revisions/{revision}', 'text/html'],
        ['content-service://sites/{site_id}/reports/{period}', 'application/json'],
      ]);
    });

    it('reads a site as JSON, as list_sites gives it', async () => {
      const uri = `content-service://sites/${t.a.siteId}`;
      const read = await a().readResource({ uri });
      const listed = (await tool('list_sites', {})).data as Record<string, unknown>[];
      expect(read.contents).toHaveLength(1);
      expect(read.contents[0]).toMatchObject({ uri, mimeType: 'application/json' });
      expect(JSON.parse(text({ type: 'text', ...read.contents[0] }))).toEqual(listed[0]);
    });

    it('reads an article as its HTML body with its metadata in _meta, as get_article gives them', async () => {
      const articleId = t.a.articleIds[0] as string;
      const uri = `content-service://articles/${articleId}`;
      const read = await a().readResource({ uri });
      const { body, ...meta } = await tool('get_article', { article_id: articleId });
      const [content] = read.contents;
      expect(content).toMatchObject({ uri, mimeType: 'text/html', text: body });
      expect(content?._meta?.[ARTICLE_META_KEY]).toEqual(meta);
      expect(meta).toMatchObject({ site_id: t.a.siteId, revision: 1, status: 'published' });
      expect((meta.protected_links as unknown[]).length).toBe(2);
    });

    it('reads a revision of an article, in the same shape with that revision’s record', async () => {
      const articleId = t.a.articleIds[2] as string;
      const uri = `content-service://articles/${articleId}/revisions/1`;
      const read = await a().readResource({ uri });
      const revision = await tool('get_revision', { article_id: articleId, revision: 1 });
      const [content] = read.contents;
      expect(content).toMatchObject({ uri, mimeType: 'text/html', text: revision.body });
      const meta = content?._meta?.[ARTICLE_META_KEY] as Record<string, unknown>;
      expect(meta).toMatchObject({
        id: articleId,
        site_id: t.a.siteId,
        revision: 1,
        title: revision.title,
        status: revision.status,
        published_at: revision.published_at,
        featured_image: null,
        origin: 'rewrite',
      });
      expect((meta.protected_links as { kind: string }[]).map((l) => l.kind)).toEqual([
        'backlink',
        'internal',
      ]);
      expect(meta).not.toHaveProperty('body');
    });

    it("reads a site's report for a period as JSON and as text", async () => {
      const uri = `content-service://sites/${t.a.siteId}/reports/2026-10`;
      const read = await a().readResource({ uri });
      const [json, words] = read.contents;
      expect(json).toMatchObject({ uri, mimeType: 'application/json' });
      expect(words).toMatchObject({ uri, mimeType: 'text/plain' });
      const report = JSON.parse(text({ type: 'text', ...json })) as {
        stats: unknown;
        days: unknown[];
        comparison: { before: { period: { from: string } } };
      };
      const stats = await tool('get_stats', { site_id: t.a.siteId, period: '2026-10' });
      expect(report.stats).toEqual(stats);
      expect(report.days).toHaveLength(31);
      expect(report.comparison.before.period.from).toBe('2026-09-01');
      expect(text({ type: 'text', ...words })).toContain(`${ARTICLES_PER_SITE - 1} articles published`);
    });

    it("reads another account's ids as not found, with the error of an unknown id", async () => {
      const theirs = `content-service://articles/${t.b.articleIds[0]}`;
      const unknown = 'content-service://articles/art_00000000000000000000000000';
      const [refused, missing] = await Promise.all([
        failure(a().readResource({ uri: theirs })),
        failure(a().readResource({ uri: unknown })),
      ]);
      expect(refused).toEqual({
        code: -32602,
        message: `No article ${t.b.articleIds[0]}`,
        data: { uri: theirs },
      });
      expect(missing).toEqual({
        code: -32602,
        message: 'No article art_00000000000000000000000000',
        data: { uri: unknown },
      });
      for (const uri of [
        `content-service://sites/${t.b.siteId}`,
        `content-service://sites/${t.b.siteId}/reports/this_month`,
        `content-service://articles/${t.b.articleIds[0]}/revisions/1`,
        `content-service://articles/${t.a.articleIds[0]}/revisions/99`,
        'content-service://nothing/here',
        'https://example.com/',
      ]) {
        expect(await failure(a().readResource({ uri })), uri).toMatchObject({ code: -32602, data: { uri } });
      }
      const badPeriod = await failure(
        a().readResource({ uri: `content-service://sites/${t.a.siteId}/reports/someday` }),
      );
      expect(badPeriod).toMatchObject({ code: -32602, data: { code: 'invalid_request' } });
    });

    it('lists the three prompts with their arguments', async () => {
      const { prompts } = await a().listPrompts();
      expect(
        prompts.map((p) => [p.name, (p.arguments ?? []).map((arg) => [arg.name, arg.required])]),
      ).toEqual([
        [
          'monthly_report',
          [
            ['site_id', true],
            ['period', true],
          ],
        ],
        [
          'improve_article',
          [
            ['article_id', true],
            ['goal', false],
          ],
        ],
        [
          'review_changes',
          [
            ['article_id', true],
            ['from', true],
            ['to', true],
          ],
        ],
      ]);
    });

    it('gets monthly_report with the period’s statistics and the comparison with the period before', async () => {
      const got = await a().getPrompt({
        name: 'monthly_report',
        arguments: { site_id: t.a.siteId, period: '2026-10' },
      });
      expect(got.messages).toHaveLength(1);
      const [message] = got.messages;
      expect(message?.role).toBe('user');
      const words = text(message?.content as { type: string; text?: string });
      expect(words).toContain('Write the report of the website Northside Plumbing');
      expect(words).toContain('2026-10-01 to 2026-10-31');
      expect(words).toContain(`${ARTICLES_PER_SITE - 1} articles published`);
      expect(words).toContain('Compared with the period before, 2026-09-01 to 2026-09-30');
    });

    it('gets improve_article with the protected links, the rule and preview before update', async () => {
      const articleId = t.a.articleIds[0] as string;
      const got = await a().getPrompt({
        name: 'improve_article',
        arguments: { article_id: articleId, goal: 'Mention boilers' },
      });
      const words = text(got.messages[0]?.content as { type: string; text?: string });
      const article = await tool('get_article', { article_id: articleId });
      expect(words).toContain('Goal: Mention boilers');
      for (const link of article.protected_links as { id: string }[]) expect(words).toContain(link.id);
      expect(words).toContain('exactly as it is');
      expect(words.indexOf('preview_article_edit')).toBeLessThan(words.indexOf('update_article'));
      expect(words).toContain(article.body as string);
    });

    it('gets review_changes with the comparison of two revisions', async () => {
      const articleId = t.a.articleIds[3] as string;
      const got = await a().getPrompt({
        name: 'review_changes',
        arguments: { article_id: articleId, from: '1', to: '1' },
      });
      const words = text(got.messages[0]?.content as { type: string; text?: string });
      expect(words).toContain(`Review the changes to article ${articleId} from revision 1 to revision 1`);
      expect(words).toContain('The title is the same');
    });

    it("refuses a prompt of another account's id as not found, and invalid arguments naming each", async () => {
      const theirs = await failure(
        a().getPrompt({ name: 'improve_article', arguments: { article_id: t.b.articleIds[0] as string } }),
      );
      const unknown = await failure(
        a().getPrompt({
          name: 'improve_article',
          arguments: { article_id: 'art_00000000000000000000000000' },
        }),
      );
      expect(theirs).toMatchObject({ code: -32602, data: { code: 'not_found' } });
      expect(theirs.message).toBe(`No article ${t.b.articleIds[0]}`);
      expect(unknown.message).toBe('No article art_00000000000000000000000000');
      const invalid = await failure(
        a().getPrompt({
          name: 'review_changes',
          arguments: { article_id: t.a.articleIds[0] as string, from: 'x' },
        }),
      );
      expect(invalid).toMatchObject({ code: -32602, data: { code: 'invalid_request' } });
      expect(
        ((invalid.data as { errors: { name: string }[] }).errors ?? []).map((e) => e.name).sort(),
      ).toEqual(['from', 'to']);
      expect((await failure(a().getPrompt({ name: 'no_such_prompt' }))).code).toBe(-32602);
    });

    it('completes site_id by name, domain or id, and nothing of another account', async () => {
      const complete = (value: string, client = a()) =>
        client.complete({
          ref: { type: 'ref/prompt', name: 'monthly_report' },
          argument: { name: 'site_id', value },
        });
      expect((await complete('north')).completion).toMatchObject({
        values: [t.a.siteId],
        total: 1,
        hasMore: false,
      });
      expect((await complete('HARBOUR.')).completion.values).toEqual([t.a.otherSiteId]);
      expect((await complete('')).completion.values).toEqual([t.a.siteId, t.a.otherSiteId]);
      expect((await complete(t.b.siteId.slice(0, 20))).completion.values).toEqual([]);
      expect((await complete('branch-')).completion.values).toEqual([]);
      expect((await complete('branch-', b())).completion).toMatchObject({ total: EXTRA_SITES });
    });

    it('completes article_id by title, within the site given in the context', async () => {
      const complete = (value: string, siteId?: string) =>
        a().complete({
          ref: { type: 'ref/resource', uri: 'content-service://articles/{article_id}' },
          argument: { name: 'article_id', value },
          ...(siteId ? { context: { arguments: { site_id: siteId } } } : {}),
        });
      const ones = (await complete('article 1')).completion;
      // Article 1, 10, 11 and 12 of the account.
      expect(ones.total).toBe(4);
      const titles = await Promise.all(
        ones.values.map(async (id) => (await tool('get_article', { article_id: id })).title),
      );
      expect(titles).toEqual([
        'Article 1 of Plumbers Ltd',
        'Article 10 of Plumbers Ltd',
        'Article 11 of Plumbers Ltd',
        'Article 12 of Plumbers Ltd',
      ]);
      expect((await complete('article 1', t.a.siteId)).completion.total).toBe(4);
      expect((await complete('article 1', t.a.otherSiteId)).completion.values).toEqual([]);
      expect((await complete('article 1', t.b.siteId)).completion.values).toEqual([]);
      expect((await complete('Article 1 of Dentists')).completion.values).toEqual([]);
      // At most 100 values, with the total.
      const all = (await complete('')).completion;
      expect(all.values.length).toBeLessThanOrEqual(100);
      expect(all.total).toBe(ARTICLES_PER_SITE);
    });

    it('completes period in the forms get_stats takes', async () => {
      const complete = (value: string) =>
        a().complete({
          ref: { type: 'ref/resource', uri: 'content-service://sites/{site_id}/reports/{period}' },
          argument: { name: 'period', value },
        });
      expect((await complete('last')).completion.values).toEqual(['last_month', 'last_30_days']);
      // "Today" is 2026-11-05 in the test app.
      const months = (await complete('2026')).completion.values;
      expect(months[0]).toBe('2026-11');
      expect(months).toHaveLength(11);
      const everything = (await complete('')).completion;
      expect(everything.values.slice(0, 4)).toEqual(['this_month', 'last_month', 'last_30_days', '2026-11']);
      expect(everything.values).toHaveLength(3 + 24);
      for (const period of everything.values) {
        const stats = await tool('get_stats', { site_id: t.a.siteId, period });
        expect(stats.site_id, period).toBe(t.a.siteId);
      }
      expect((await complete('1969')).completion.values).toEqual([]);
    });

    it('completes revision numbers of the article in the context, and none of another account', async () => {
      const articleId = t.a.articleIds[4] as string;
      const edit = await a().callTool({
        name: 'update_article',
        arguments: { article_id: articleId, title: `Edited in the ${era} era` },
      });
      expect(edit.isError).toBeFalsy();
      const complete = (name: string, id: string, value = '') =>
        a().complete({
          ref: { type: 'ref/prompt', name: 'review_changes' },
          argument: { name, value },
          context: { arguments: { article_id: id } },
        });
      const revisions = (await complete('from', articleId)).completion.values;
      expect(revisions[0]).toBe(String(era === 'modern' ? 2 : 3));
      expect(revisions.at(-1)).toBe('1');
      expect((await complete('to', articleId, '1')).completion.values).toEqual(['1']);
      expect((await complete('from', t.b.articleIds[0] as string)).completion.values).toEqual([]);
      const withoutArticle = await a().complete({
        ref: { type: 'ref/resource', uri: 'content-service://articles/{article_id}/revisions/{revision}' },
        argument: { name: 'revision', value: '' },
      });
      expect(withoutArticle.completion.values).toEqual([]);
      const unknownRef = await failure(
        a().complete({ ref: { type: 'ref/prompt', name: 'nope' }, argument: { name: 'site_id', value: '' } }),
      );
      expect(unknownRef.code).toBe(-32602);
    });
  });

  it("serves the SDK's 1.x client (2025 era) the same resources, prompts and completions", async () => {
    const client = await connectClient(t.mcpUrl, t.tokens.aWrite);
    try {
      const modern = clients.modern.a;
      const articleId = t.a.articleIds[5] as string;
      const uri = `content-service://articles/${articleId}`;
      expect((await client.listResources()).resources).toEqual((await modern.listResources()).resources);
      expect((await client.readResource({ uri })).contents).toEqual(
        (await modern.readResource({ uri })).contents,
      );
      const args = { article_id: articleId };
      expect((await client.getPrompt({ name: 'improve_article', arguments: args })).messages).toEqual(
        (await modern.getPrompt({ name: 'improve_article', arguments: args })).messages,
      );
      const request = {
        ref: { type: 'ref/prompt' as const, name: 'monthly_report' },
        argument: { name: 'site_id', value: 'north' },
      };
      expect((await client.complete(request)).completion).toEqual(
        (await modern.complete(request)).completion,
      );
      const missing = await client
        .readResource({ uri: `content-service://articles/${t.b.articleIds[0]}` })
        .then(
          () => null,
          (error: { code?: number; data?: unknown }) => ({ code: error.code, data: error.data }),
        );
      expect(missing).toEqual({
        code: -32602,
        data: { uri: `content-service://articles/${t.b.articleIds[0]}` },
      });
    } finally {
      await client.close();
    }
  });

  it('answers a read over the request limit with a rate_limited error, and records it', async () => {
    const client = await connect(t.mcpUrl, t.tokens.cWrite, 'modern');
    const uri = `content-service://sites/${t.c.siteId}`;
    let refused: Awaited<ReturnType<typeof failure>> | null = null;
    for (let i = 0; i <= SMALL_BUDGET && !refused; i++) {
      refused = await client.readResource({ uri }).then(
        () => null,
        (error: unknown) =>
          error instanceof ProtocolError
            ? { code: error.code, message: error.message, data: error.data }
            : null,
      );
    }
    await client.close();
    expect(refused).toMatchObject({ code: -32000, data: { code: 'rate_limited' } });
  });

  describe('after the calls', () => {
    it('recorded every read, prompt and completion like a tool call: source mcp, the OAuth client, the outcome', async () => {
      for (const era of ERAS) for (const client of Object.values(clients[era])) await client.close();
      await t.drain();
      const records = async (accountId: string) =>
        (await listActivity(t.runtime.db, accountId, { page: 1, perPage: 500, source: 'mcp' })).rows;
      const mine = await records(t.a.accountId);
      for (const row of mine) {
        expect(row.actor).toEqual({ type: 'oauth_client', id: t.client.id, name: t.client.name });
      }
      const ops = new Set(mine.map((r) => r.operation));
      for (const operation of [
        'list_resources',
        'read_site',
        'read_article',
        'read_revision',
        'read_report',
        'read_resource',
        'prompt_monthly_report',
        'prompt_improve_article',
        'prompt_review_changes',
        'complete_site_id',
        'complete_article_id',
        'complete_period',
        'complete_revision',
      ]) {
        expect(ops, operation).toContain(operation);
      }
      const article = mine.filter(
        (r) => r.operation === 'read_article' && r.article_id === t.a.articleIds[0] && r.status === 200,
      );
      // Read once in each era.
      expect(article).toHaveLength(2);
      expect(article[0]?.site_id).toBe(t.a.siteId);
      // Another account's article: recorded in the caller's log as not found, and nowhere in the other's.
      const refused = mine.filter(
        (r) => r.operation === 'read_article' && r.article_id === t.b.articleIds[0],
      );
      // Once in each era, once by the 1.x client.
      expect(refused.map((r) => r.status)).toEqual([404, 404, 404]);
      expect(mine.some((r) => r.operation === 'prompt_review_changes' && r.status === 400)).toBe(true);
      const theirs = await records(t.b.accountId);
      expect(theirs.some((r) => r.article_id === t.b.articleIds[0] && r.operation === 'read_article')).toBe(
        false,
      );
      const limited = await records(t.c.accountId);
      expect(limited.some((r) => r.operation === 'read_site' && r.status === 429)).toBe(true);
    });
  });
});
