import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import type { Preview } from '../support/preview.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * POST /api/v1/articles/{id}/preview through a real server: the verdict of an edit, checked and not
 * made (no revision, not an edit for the daily limit, recorded as `articles.preview`), refused as the
 * PUT is (412 stale, 404 another account's, 400 bad input).
 */

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type List<T> = { data: T[] };
type Activity = { operation: string; request_id: string; article_id: string | null; revision: number | null };

async function seedAccount(env: Record<string, string>, n: string): Promise<Seed> {
  const r = await cli(
    ['seed-demo', '--json', '--sites', '1', '--articles', '6', '--backlinks', '0', '--seed', n],
    env,
  );
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seed;
}

/** The first element carrying data-service-protected in a body (the seeded articles have some). */
function protectedBlock(body: string): string {
  const match = /<a [^>]*data-service-protected[^>]*>.*?<\/a>/.exec(body);
  if (!match) throw new Error('the seeded article has no protected link');
  return match[0];
}

describe('POST /api/v1/articles/{id}/preview', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let client: ReturnType<typeof recordingClient>;
  let a: Seed;
  let b: Seed;
  let readKey: string;
  let article: { id: string; body: string; title: string; revision: number };
  let articleB: string;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string };
    a = await seedAccount(env, '1');
    b = await seedAccount(env, '2');
    readKey = (
      JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--scope', 'read'], env)).stdout,
      ) as { api_key: string }
    ).api_key;
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000' });
    client = recordingClient(server.url);
    const items = (await client.get(`/api/v1/sites/${a.sites[0]?.id}/articles?per_page=100`, a.api_key))
      .body as List<{ id: string }>;
    for (const item of items.data) {
      const full = (await client.get(`/api/v1/articles/${item.id}`, a.api_key)).body as typeof article;
      if (full.body.includes('data-service-protected')) {
        article = full;
        break;
      }
    }
    const itemsB = (await client.get(`/api/v1/sites/${b.sites[0]?.id}/articles?per_page=1`, b.api_key))
      .body as List<{ id: string }>;
    articleB = itemsB.data[0]?.id as string;
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  const preview = (id: string, body: unknown, headers: Record<string, string> = {}, key = a.api_key) =>
    client.call('POST', `/api/v1/articles/${id}/preview`, { key, body, headers });

  it('answers the verdict: sanitised body, word count, what is removed, the protected links, the diff', async () => {
    const body = `${article.body}<p onclick="steal()">Brand new words<script>alert(1)</script></p>`;
    const r = await preview(article.id, { title: 'A previewed title', body, reason: 'ignored' });
    expect(r.status).toBe(200);
    const p = r.body as Preview;
    expect(p).toMatchObject({
      article_id: article.id,
      base_revision: article.revision,
      would_change: true,
      title: 'A previewed title',
      protected_links: { ok: true, errors: [] },
    });
    expect(p.body).not.toContain('script');
    expect(p.body).not.toContain('onclick');
    expect(p.sanitized.map((s) => s.reason).sort()).toEqual(['event_handler', 'unsafe_element']);
    expect(p.diff).toContainEqual({ op: 'insert', text: expect.stringContaining('Brand new words') });
    expect(p.diff?.every((d) => ['equal', 'insert', 'delete'].includes(d.op))).toBe(true);
    // The edit then makes exactly that.
    const put = await client.call('PUT', `/api/v1/articles/${article.id}`, {
      key: a.api_key,
      body: { title: 'A previewed title', body },
    });
    expect(put.status).toBe(200);
    const change = put.body as Preview & { revision: number; changed: boolean };
    expect(change).toMatchObject({
      changed: true,
      revision: article.revision + 1,
      title: p.title,
      body: p.body,
      word_count: p.word_count,
      sanitized: p.sanitized,
    });
    article = { ...article, body: change.body, title: change.title, revision: change.revision };
  });

  it('makes no revision, no edit for the daily limit, and is recorded as articles.preview with no revision', async () => {
    const first = await client.call('PUT', `/api/v1/articles/${article.id}`, {
      key: a.api_key,
      body: { title: `Counted ${Date.now()}` },
    });
    expect(first.status).toBe(200);
    const before = Number(/"edits";r=(\d+)/.exec(first.headers.ratelimit ?? '')?.[1]);
    const revision = (first.body as { revision: number }).revision;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await preview(
        article.id,
        { title: `Only looked at ${i}` },
        { 'x-request-id': `pv-${i}-${Date.now()}` },
      );
      expect(r.status).toBe(200);
      expect((r.body as Preview).would_change).toBe(true);
      // A request for the request limit, not an edit.
      expect(r.headers.ratelimit).toMatch(/"requests"/);
      expect(r.headers.ratelimit).not.toMatch(/"edits"/);
      ids.push(r.headers['x-request-id'] as string);
    }
    const got = await client.get(`/api/v1/articles/${article.id}`, a.api_key);
    expect(got.headers.etag).toBe(`W/"${revision}"`);
    const second = await client.call('PUT', `/api/v1/articles/${article.id}`, {
      key: a.api_key,
      body: { title: `Counted again ${Date.now()}` },
    });
    expect(Number(/"edits";r=(\d+)/.exec(second.headers.ratelimit ?? '')?.[1])).toBe(before - 1);
    article = { ...article, revision: (second.body as { revision: number }).revision };
    const records = await vi.waitFor(async () => {
      const list = (await client.get(`/api/v1/activity?article_id=${article.id}&per_page=100`, a.api_key))
        .body as List<Activity>;
      const found = list.data.filter((r) => ids.includes(r.request_id));
      expect(found).toHaveLength(3);
      return found;
    }, PATIENCE);
    for (const record of records) {
      expect(record).toMatchObject({ operation: 'articles.preview', article_id: article.id, revision: null });
    }
  });

  it('says not ok with the errors a PUT is refused with: removed, rewritten, forged', async () => {
    const block = protectedBlock(article.body);
    const cases = [
      article.body.replace(block, ''),
      article.body.replace(block, block.replace(/>([^<]*)<\/a>$/, '>other words</a>')),
      `${article.body}<p><a href="https://x.example" data-service-protected="backlink" data-service-id="bl_forged">x</a></p>`,
    ];
    for (const body of cases) {
      const r = await preview(article.id, { body });
      expect(r.status).toBe(200);
      const p = r.body as Preview;
      expect(p.protected_links.ok).toBe(false);
      expect(p.would_change).toBe(false);
      const put = await client.call('PUT', `/api/v1/articles/${article.id}`, {
        key: a.api_key,
        body: { body },
      });
      expect(put.status).toBe(422);
      expect(put.body).toMatchObject({ code: 'protected_links_modified', errors: p.protected_links.errors });
    }
  });

  it('says would_change false for the article as it is', async () => {
    const now = (await client.get(`/api/v1/articles/${article.id}`, a.api_key)).body as typeof article;
    const r = await preview(article.id, { title: now.title, body: now.body });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ would_change: false, protected_links: { ok: true } });
    expect((r.body as Preview).diff?.every((d) => d.op === 'equal')).toBe(true);
  });

  it('refuses a stale If-Match with 412, and takes the current one', async () => {
    const stale = await preview(article.id, { title: 'x' }, { 'if-match': `W/"${article.revision - 1}"` });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ code: 'revision_mismatch' });
    const current = await preview(article.id, { title: 'x' }, { 'if-match': `W/"${article.revision}"` });
    expect(current.status).toBe(200);
  });

  it("answers 404 for another account's article and an unknown one", async () => {
    expect((await preview(articleB, { title: 'mine now' })).status).toBe(404);
    expect((await preview('art_00000000000000000000000000', { title: 'x' })).status).toBe(404);
  });

  it('refuses bad input with the 400s of the PUT', async () => {
    const bad = [
      {},
      { title: '' },
      { title: 'x'.repeat(301) },
      { title: 'bell\u0007' },
      { body: `<p>${'x'.repeat(2 * 1024 * 1024)}</p>` },
      { body: '<p>nul\u0000</p>' },
    ];
    for (const body of bad) {
      const r = await preview(article.id, body);
      const put = await client.call('PUT', `/api/v1/articles/${article.id}`, { key: a.api_key, body });
      expect(r.status).toBe(400);
      expect(put.status).toBe(400);
      expect((r.body as { errors: unknown }).errors).toEqual((put.body as { errors: unknown }).errors);
    }
  });

  it('lets a read-only key preview (it changes nothing), not edit', async () => {
    const r = await preview(article.id, { title: 'Read-only look' }, {}, readKey);
    expect(r.status).toBe(200);
    const put = await client.call('PUT', `/api/v1/articles/${article.id}`, {
      key: readKey,
      body: { title: 'Read-only look' },
    });
    expect(put.status).toBe(403);
  });

  it('every answer above matches the OpenAPI document', async () => {
    const doc = await loadOpenApi(server.url);
    expect(client.recorded.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });
});
