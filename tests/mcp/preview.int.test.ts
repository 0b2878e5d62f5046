import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_META_KEY } from '../../apps/server/mcp/tool-errors.ts';
import { listActivity } from '../../projections/activity.ts';
import { connectClient, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import type { Preview } from '../support/preview.ts';

/*
 * preview_article_edit through the SDK client: listed read-only and idempotent (also to a read-only
 * grant), the verdict update_article then follows, nothing changed, recorded as articles.preview.
 */

const addFormats = addFormatsImport.default;

type ErrorInfo = { code: string; errors?: { id?: string; change?: string }[] };

/** The code of a tool error (undefined for a result that is none). */
const codeOf = (result: CallToolResult): string | undefined =>
  (result._meta?.[ERROR_META_KEY] as ErrorInfo | undefined)?.code;
const textOf = (result: CallToolResult): string =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe('preview_article_edit', () => {
  let t: McpTestApp;
  let write: Client;
  let read: Client;
  let validate: (value: unknown) => boolean;

  beforeAll(async () => {
    t = await startMcpTestApp();
    write = await connectClient(t.mcpUrl, t.tokens.aWrite);
    read = await connectClient(t.mcpUrl, t.tokens.aRead);
    const tool = (await write.listTools()).tools.find((x) => x.name === 'preview_article_edit');
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    validate = ajv.compile(tool?.outputSchema ?? {});
  });
  afterAll(async () => {
    for (const client of [write, read]) await client?.close();
    await t?.close();
  });

  const call = async (client: Client, name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  const previewOf = (result: CallToolResult): Preview => {
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(validate(result.structuredContent)).toBe(true);
    return result.structuredContent as Preview;
  };
  const articleOf = async (id: string) =>
    (await call(write, 'get_article', { article_id: id })).structuredContent as {
      title: string;
      body: string;
      revision: number;
    };

  it('is listed read-only and idempotent, to a read-only grant too; update_article points to it', async () => {
    for (const client of [write, read]) {
      const { tools } = await client.listTools();
      const tool = tools.find((x) => x.name === 'preview_article_edit');
      expect(tool?.annotations).toMatchObject({
        readOnlyHint: true,
        idempotentHint: true,
        destructiveHint: false,
      });
      expect(Object.keys(tool?.inputSchema.properties ?? {}).sort()).toEqual([
        'article_id',
        'body',
        'expected_revision',
        'title',
      ]);
      expect(tool?.outputSchema?.type).toBe('object');
    }
    const update = (await write.listTools()).tools.find((x) => x.name === 'update_article');
    expect(update?.description).toContain('preview_article_edit');
  });

  it('answers the verdict update_article then follows, and changes nothing', async () => {
    const id = t.a.articleIds[0] as string;
    const before = await articleOf(id);
    const body = `${before.body}<p onclick="x()">Fresh words<script>alert(1)</script></p>`;
    const result = await call(write, 'preview_article_edit', {
      article_id: id,
      title: 'Previewed',
      body,
      expected_revision: before.revision,
    });
    const p = previewOf(result);
    expect(p).toMatchObject({ base_revision: before.revision, would_change: true, title: 'Previewed' });
    expect(p.protected_links).toEqual({ ok: true, errors: [] });
    expect(p.diff).toContainEqual({ op: 'insert', text: expect.stringContaining('Fresh words') });
    expect(textOf(result)).toMatch(/^Would be saved/);
    expect(textOf(result)).toContain('event_handler');
    expect((await articleOf(id)).revision).toBe(before.revision);
    await t.runtime.commands.flushCalls();
    const records = await listActivity(t.runtime.db, t.a.accountId, { page: 1, perPage: 100, articleId: id });
    expect(records.rows.map((r) => [r.operation, r.status, r.revision])).toContainEqual([
      'articles.preview',
      200,
      null,
    ]);
    const saved = await call(write, 'update_article', { article_id: id, title: 'Previewed', body });
    expect(saved.structuredContent).toMatchObject({
      changed: true,
      revision: before.revision + 1,
      title: p.title,
      body: p.body,
      word_count: p.word_count,
      sanitized: p.sanitized,
    });
    const again = previewOf(
      await call(write, 'preview_article_edit', { article_id: id, title: 'Previewed', body }),
    );
    expect(again.would_change).toBe(false);
    expect(textOf(await call(write, 'preview_article_edit', { article_id: id, title: 'Previewed' }))).toMatch(
      /^Would change nothing/,
    );
  });

  it('says which protected links an edit would be refused for, as update_article is refused', async () => {
    const id = t.a.articleIds[1] as string;
    const before = await articleOf(id);
    const body = before.body.replace(/<a [^>]*data-service-protected[^>]*>.*?<\/a>/, '');
    expect(body).not.toBe(before.body);
    const result = await call(read, 'preview_article_edit', { article_id: id, body });
    const p = previewOf(result);
    expect(p.protected_links.ok).toBe(false);
    expect(p.would_change).toBe(false);
    expect(textOf(result)).toMatch(/^Would be refused \(protected_links_modified\)/);
    const refused = await call(write, 'update_article', { article_id: id, body });
    expect(refused.isError).toBe(true);
    const info = refused._meta?.[ERROR_META_KEY] as ErrorInfo;
    expect(info.code).toBe('protected_links_modified');
    expect(info.errors).toEqual(p.protected_links.errors);
  });

  it('refuses a stale expected_revision, another account’s article and bad arguments', async () => {
    const id = t.a.articleIds[2] as string;
    const before = await articleOf(id);
    const stale = await call(write, 'preview_article_edit', {
      article_id: id,
      title: 'x',
      expected_revision: before.revision + 1,
    });
    expect(codeOf(stale)).toBe('revision_mismatch');
    const theirs = await call(write, 'preview_article_edit', { article_id: t.b.articleIds[0], title: 'x' });
    expect(codeOf(theirs)).toBe('not_found');
    for (const args of [{}, { title: '' }, { title: 'x'.repeat(301) }]) {
      const bad = await call(write, 'preview_article_edit', { article_id: id, ...args });
      expect(codeOf(bad)).toBe('invalid_request');
    }
  });
});
