import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DIFF_EDITS_MAX } from '../../domain/html/word-diff.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * GET /api/v1/articles/{id}/revisions/compare?from=&to=: two revisions by replay, their titles and a
 * word diff of their text in which a protected link is one unit; refused as every read is (400, 404),
 * and over the diff budget with 422 diff_too_large linking to both revisions; recorded in the log.
 */

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type Change = { op: 'equal' | 'insert' | 'delete'; text: string };
type Comparison = {
  article_id: string;
  from: number;
  to: number;
  title: { before: string; after: string };
  granularity: 'word' | 'line';
  changes: Change[];
};
type Problem = {
  status: number;
  code: string;
  detail: string;
  errors?: { in: string; name: string }[];
  links?: Record<string, string>;
};
type Article = { id: string; title: string; body: string; protected_links: { text: string }[] };

async function seedAccount(env: Record<string, string>): Promise<Seed> {
  const r = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '0'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seed;
}

/** The text before (`equal` and `delete`) or after (`equal` and `insert`), spaces collapsed. */
const side = (changes: Change[], op: 'delete' | 'insert'): string =>
  changes
    .filter((c) => c.op === 'equal' || c.op === op)
    .map((c) => c.text)
    .join('')
    .replace(/\s+/g, ' ')
    .trim();

/** `lines` paragraphs, each one word tagged `tag`: two tags share no line and no word. */
const paragraphs = (lines: number, tag: string): string =>
  Array.from({ length: lines }, (_, i) => `<p>${tag}${i}</p>`).join('');

describe('comparing two revisions through a real server', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let client: ReturnType<typeof recordingClient>;
  let a: Seed;
  let b: Seed;
  let article: Article;
  let large: Article;
  let otherArticle: string;

  const compare = (id: string, query: string, key = a.api_key, headers?: Record<string, string>) =>
    client.get(`/api/v1/articles/${id}/revisions/compare${query}`, key, headers);
  const put = (id: string, body: unknown) =>
    client.call('PUT', `/api/v1/articles/${id}`, { key: a.api_key, body });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string };
    a = await seedAccount(env);
    b = await seedAccount(env);
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000', EDIT_LIMIT_PER_DAY: '100000' });
    client = recordingClient(server.url);
    const articlesOf = async (seed: Seed) =>
      (
        (await client.get(`/api/v1/sites/${seed.sites[0]?.id}/articles?per_page=10`, seed.api_key)).body as {
          data: { id: string }[];
        }
      ).data;
    const [first, second] = await articlesOf(a);
    const full = async (id: string) =>
      (await client.get(`/api/v1/articles/${id}`, a.api_key)).body as Article;
    article = await full(first?.id as string);
    large = await full(second?.id as string);
    otherArticle = (await articlesOf(b))[0]?.id as string;
    expect(article.protected_links.length).toBeGreaterThan(0);
    // Revision 2: a new title, and words added right before the first protected link.
    const link = /<a [^>]*data-service-protected[^>]*>/.exec(article.body)?.[0] as string;
    const r2 = await put(article.id, {
      title: `${article.title} (revised)`,
      body: article.body.replace(link, `fresh words ${link}`),
    });
    expect(r2.status).toBe(200);
    // Revisions 2 and 3 of the other article: more differing lines than the diff budget's edits.
    const lines = DIFF_EDITS_MAX + 500;
    expect((await put(large.id, { body: `${large.body}${paragraphs(lines, 'alpha')}` })).status).toBe(200);
    expect((await put(large.id, { body: `${large.body}${paragraphs(lines, 'beta')}` })).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('answers the titles and a word diff in which a protected link is one unit', async () => {
    const r = await compare(article.id, '?from=1&to=2');
    expect(r.status).toBe(200);
    const c = r.body as Comparison;
    expect(c).toMatchObject({
      article_id: article.id,
      from: 1,
      to: 2,
      title: { before: article.title, after: `${article.title} (revised)` },
      granularity: 'word',
    });
    expect(c.changes.filter((x) => x.op !== 'equal')).toEqual([{ op: 'insert', text: 'fresh words ' }]);
    // Each protected link's text is inside one stretch, never split between two.
    for (const { text } of article.protected_links) {
      expect(c.changes.some((x) => x.text.includes(text.replace(/\s+/g, ' ')))).toBe(true);
    }
    expect(side(c.changes, 'insert')).toContain('fresh words');
    expect(side(c.changes, 'delete')).not.toContain('fresh words');
  });

  it('compares backwards when to is before from, and a revision with itself as all equal', async () => {
    const back = (await compare(article.id, '?from=2&to=1')).body as Comparison;
    expect(back.title).toEqual({ before: `${article.title} (revised)`, after: article.title });
    expect(back.changes.filter((x) => x.op !== 'equal')).toEqual([{ op: 'delete', text: 'fresh words ' }]);
    const same = await compare(article.id, '?from=2&to=2');
    expect(same.status).toBe(200);
    const c = same.body as Comparison;
    expect(c.changes.every((x) => x.op === 'equal')).toBe(true);
    expect(c.title.before).toBe(c.title.after);
  });

  it('is not taken for a revision number by /revisions/{n}', async () => {
    const r = await client.get(`/api/v1/articles/${article.id}/revisions/2`, a.api_key);
    expect(r.status).toBe(200);
    expect((r.body as { revision: number }).revision).toBe(2);
  });

  it('refuses bad, missing and unknown parameters with 400 naming them', async () => {
    for (const [query, name] of [
      ['?from=0&to=2', 'from'],
      ['?from=1&to=two', 'to'],
      ['?from=1', 'to'],
      ['', 'from'],
      ['?from=1&to=2&colour=red', 'colour'],
      ['?from=1.5&to=2', 'from'],
    ] as const) {
      const r = await compare(article.id, query);
      expect(r.status, query).toBe(400);
      const p = r.body as Problem;
      expect(p.code).toBe('invalid_request');
      expect(
        p.errors?.map((e) => [e.in, e.name]),
        query,
      ).toContainEqual(['query', name]);
    }
  });

  it('answers 404 for a revision the article does not have, an unknown article and another account’s', async () => {
    for (const [id, query] of [
      [article.id, '?from=1&to=9'],
      [article.id, '?from=7&to=1'],
      ['art_unknown', '?from=1&to=1'],
      [otherArticle, '?from=1&to=1'],
    ] as const) {
      const r = await compare(id, query);
      expect(r.status, `${id}${query}`).toBe(404);
      expect((r.body as Problem).code).toBe('not_found');
    }
    // The other account reads its own article.
    expect((await compare(otherArticle, '?from=1&to=1', b.api_key)).status).toBe(200);
  });

  it('refuses revisions too different to compare with 422 diff_too_large, linking to both', async () => {
    const r = await compare(large.id, '?from=2&to=3');
    expect(r.status).toBe(422);
    expect(r.headers['content-type']).toContain('application/problem+json');
    const p = r.body as Problem;
    expect(p.code).toBe('diff_too_large');
    expect(p.links).toEqual({
      from: `/api/v1/articles/${large.id}/revisions/2`,
      to: `/api/v1/articles/${large.id}/revisions/3`,
    });
    for (const href of Object.values(p.links ?? {})) {
      expect((await client.get(href, a.api_key)).status).toBe(200);
    }
  });

  it('records each comparison in the activity log, refused ones included', async () => {
    await compare(article.id, '?from=1&to=2', a.api_key, { 'x-request-id': 'compare-ok' });
    await compare(large.id, '?from=2&to=3', a.api_key, { 'x-request-id': 'compare-too-large' });
    type Record = {
      operation: string;
      status: number;
      article_id: string | null;
      site_id: string | null;
      revision: number | null;
      client_request_id: string | null;
    };
    const records = await vi.waitFor(async () => {
      const page = (await client.get('/api/v1/activity?per_page=100', a.api_key)).body as { data: Record[] };
      const found = ['compare-ok', 'compare-too-large'].map((id) =>
        page.data.find((x) => x.client_request_id === id),
      );
      expect(found.every(Boolean)).toBe(true);
      return found as Record[];
    }, PATIENCE);
    expect(records[0]).toMatchObject({
      operation: 'compare_revisions',
      status: 200,
      article_id: article.id,
      site_id: a.sites[0]?.id,
      revision: null,
    });
    expect(records[1]).toMatchObject({ operation: 'compare_revisions', status: 422, article_id: large.id });
  });

  it('answers as the OpenAPI document says', async () => {
    const doc = await loadOpenApi(server.url);
    const op = doc.paths['/api/v1/articles/{id}/revisions/compare']?.get as { responses: object } | undefined;
    expect(Object.keys(op?.responses ?? {})).toEqual(expect.arrayContaining(['200', '400', '404', '422']));
    const seen = client.recorded.filter((r) => r.path.includes('/revisions/compare'));
    expect(seen.map((r) => r.status)).toEqual(expect.arrayContaining([200, 400, 404, 422]));
    expect(seen.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });
});
