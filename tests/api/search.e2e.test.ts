import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SEARCH_QUERY_MAX, SNIPPET_MAX } from '../../domain/article/search.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * `GET /api/v1/articles?q=` through a real server: the list envelope, an edit found by its new words
 * as soon as it is answered, the 400s naming q, another account's site as a 404 and its articles
 * never found, the activity record, and every answer as the OpenAPI document says.
 */

const PUBLIC = 'https://content.example.test';

type Seed = { account_id: string; api_key: string; sites: { id: string; domain: string }[] };
type Hit = {
  id: string;
  site_id: string;
  title: string;
  match: { score: number; snippet: string; highlights: [number, number][] };
};
type List<T> = {
  data: T[];
  meta: { page: number; per_page: number; total: number; total_pages: number };
  links: Record<'self' | 'first' | 'last' | 'prev' | 'next', string | null>;
};
type Problem = { status: number; code: string; errors?: { in: string; name: string; message: string }[] };

describe('searching articles through the API', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let a: Seed;
  let b: Seed;
  let client: ReturnType<typeof recordingClient>;
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string };
    const seed = async (n: string): Promise<Seed> => {
      const r = await cli(
        ['seed-demo', '--json', '--sites', '2', '--articles', '6', '--backlinks', '1', '--seed', n],
        env,
      );
      if (r.code !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout) as Seed;
    };
    a = await seed('1');
    b = await seed('2');
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000', PUBLIC_URL: PUBLIC });
    client = recordingClient(server.url);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it("answers the list envelope of the account's matches, with links and the Link header", async () => {
    const r = await client.get('/api/v1/articles?q=homeowners&per_page=2', a.api_key);
    expect(r.status).toBe(200);
    const list = r.body as List<Hit>;
    expect(list.meta.total).toBeGreaterThan(2);
    expect(list.data).toHaveLength(2);
    const sites = new Set(a.sites.map((s) => s.id));
    for (const hit of list.data) {
      expect(sites.has(hit.site_id)).toBe(true);
      expect(hit.match.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX);
      for (const [start, end] of hit.match.highlights as [number, number][]) {
        expect(hit.match.snippet.slice(start, end).toLowerCase()).toBe('homeowners');
      }
    }
    expect(list.links.next).toBe(`${PUBLIC}/api/v1/articles?q=homeowners&page=2&per_page=2`);
    expect(r.headers.link).toContain('rel="next"');
    // Every match of the account, on its pages: none of the other account's.
    const all = (await client.get('/api/v1/articles?q=homeowners&per_page=100', a.api_key)).body as List<Hit>;
    expect(all.data.every((hit) => sites.has(hit.site_id))).toBe(true);
  });

  it('finds an edit by its new words as soon as the edit is answered', async () => {
    const [site] = a.sites;
    const first = (await client.get(`/api/v1/sites/${site?.id}/articles?per_page=1`, a.api_key))
      .body as List<{
      id: string;
    }>;
    const id = first.data[0]?.id as string;
    const article = (await client.get(`/api/v1/articles/${id}`, a.api_key)).body as { body: string };
    const put = await client.call('PUT', `/api/v1/articles/${id}`, {
      key: a.api_key,
      body: { title: 'Quokka habitats', body: `${article.body}<p>Wombat burrows are deep.</p>` },
    });
    expect(put.status).toBe(200);
    const byTitle = (await client.get('/api/v1/articles?q=quokka', a.api_key)).body as List<Hit>;
    expect(byTitle.data.map((h) => h.id)).toEqual([id]);
    const byBody = (await client.get('/api/v1/articles?q=%22wombat+burrows%22', a.api_key)).body as List<Hit>;
    expect(byBody.data.map((h) => h.id)).toEqual([id]);
    const [hit] = byBody.data;
    const words = hit?.match.highlights.map(([s, e]) => hit.match.snippet.slice(s, e).toLowerCase());
    expect(words).toEqual(['wombat', 'burrows']);
    // Not the other account's to find.
    expect(((await client.get('/api/v1/articles?q=quokka', b.api_key)).body as List<Hit>).data).toEqual([]);
  });

  it.each([
    ['no q', '/api/v1/articles'],
    ['an empty q', '/api/v1/articles?q='],
    ['a q of only common words', '/api/v1/articles?q=the+and+of'],
    ['a q that is too long', `/api/v1/articles?q=${'a'.repeat(SEARCH_QUERY_MAX + 1)}`],
  ])('refuses %s with a 400 naming q', async (_name, path) => {
    const r = await client.get(path, a.api_key);
    expect(r.status).toBe(400);
    expect(r.headers['content-type']).toContain('application/problem+json');
    const problem = r.body as Problem;
    expect(problem.code).toBe('invalid_request');
    expect(problem.errors).toEqual([{ in: 'query', name: 'q', message: expect.any(String) }]);
  });

  it("refuses other bad parameters as lists do, and answers another account's site as a missing one", async () => {
    expect((await client.get('/api/v1/articles?q=homeowners&per_page=101', a.api_key)).status).toBe(400);
    expect((await client.get('/api/v1/articles?q=homeowners&status=gone', a.api_key)).status).toBe(400);
    expect(
      (await client.get('/api/v1/articles?q=homeowners&from=2026-02-01&to=2026-01-01', a.api_key)).status,
    ).toBe(400);
    expect((await client.get('/api/v1/articles?q=homeowners&colour=red', a.api_key)).status).toBe(400);
    const foreign = await client.get(`/api/v1/articles?q=homeowners&site_id=${b.sites[0]?.id}`, a.api_key);
    expect(foreign.status).toBe(404);
    expect((foreign.body as Problem).code).toBe('not_found');
    const own = await client.get(`/api/v1/articles?q=homeowners&site_id=${a.sites[1]?.id}`, a.api_key);
    expect((own.body as List<Hit>).data.every((h) => h.site_id === a.sites[1]?.id)).toBe(true);
  });

  it('refuses a key revoked after the server knew it, whether the search finds anything or not', async () => {
    for (const path of ['/api/v1/articles?q=homeowners', '/api/v1/articles?q=zebrafish']) {
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Seen, then revoked'], env))
          .stdout,
      ) as { key_id: string; api_key: string };
      expect((await client.get(path, k.api_key)).status).toBe(200);
      const revoked = await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env);
      expect(revoked.code).toBe(0);
      const r = await client.get(path, k.api_key);
      expect(r.status).toBe(401);
      expect((r.body as Problem).code).toBe('unauthenticated');
    }
  });

  it('records every search in the activity log as search_articles', async () => {
    const r = await client.get('/api/v1/articles?q=inspection', a.api_key, {
      'x-request-id': 'search-probe-1',
    });
    expect(r.status).toBe(200);
    const record = await vi.waitFor(async () => {
      const page = (await client.get('/api/v1/activity?per_page=100', a.api_key)).body as List<{
        operation: string;
        status: number;
        client_request_id: string | null;
      }>;
      const found = page.data.find((x) => x.client_request_id === 'search-probe-1');
      expect(found).toBeDefined();
      return found;
    }, PATIENCE);
    expect(record).toMatchObject({ operation: 'search_articles', status: 200 });
  });

  it('answers as the OpenAPI document says, which documents the search with its parameters', async () => {
    const doc = await loadOpenApi(server.url);
    const op = (doc.paths['/api/v1/articles'] as Record<string, { parameters?: { name?: string }[] }>)?.get;
    // Besides the X-Request-Id header every operation refers to.
    const names = op?.parameters?.flatMap((p) => (p.name === undefined ? [] : [p.name]));
    expect(names?.sort()).toEqual(['from', 'page', 'per_page', 'q', 'site_id', 'status', 'to'].sort());
    const api = client.recorded.filter((r) => r.path.startsWith('/api/v1/'));
    expect(api.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });
});
