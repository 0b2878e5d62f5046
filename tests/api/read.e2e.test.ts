import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Article } from '../../apps/application/articles.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type Recorded, recordingClient } from '../support/http.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/** Links are absolute, on the address clients use (PUBLIC_URL), not the one the process listens on. */
const PUBLIC = 'https://content.example.test';

type Seed = { account_id: string; api_key: string; sites: { id: string; domain: string }[] };
type List<T> = {
  data: T[];
  meta: { page: number; per_page: number; total: number; total_pages: number };
  links: Record<'self' | 'first' | 'last' | 'prev' | 'next', string | null>;
};
type ArticleItem = {
  id: string;
  site_id: string;
  published_at: string | null;
  status: string;
  revision: number;
};
type BacklinkItem = { id: string; acquired_on: string; category: string };
type Activity = {
  id: string;
  operation: string;
  status: number;
  request_id: string;
  client_request_id: string | null;
  site_id: string | null;
  article_id: string | null;
  source: string;
  actor: { type: string; id: string };
  duration_ms: number;
};

describe('read API v1 through a real server', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let env: Record<string, string>;
  let a: Seed;
  let b: Seed;
  let readKey: { key_id: string; api_key: string };
  let client: ReturnType<typeof recordingClient>;
  let siteA: string;
  let siteB: string;
  let articleA: string;
  let articleB: string;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string };
    const seed = async (n: string): Promise<Seed> => {
      const r = await cli(
        ['seed-demo', '--json', '--sites', '2', '--articles', '7', '--backlinks', '12', '--seed', n],
        env,
      );
      if (r.code !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout) as Seed;
    };
    a = await seed('1');
    b = await seed('2');
    const k = await cli(
      ['keys', 'create', '--account', a.account_id, '--name', 'Reporting', '--scope', 'read'],
      env,
    );
    readKey = JSON.parse(k.stdout) as { key_id: string; api_key: string };
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000', PUBLIC_URL: PUBLIC });
    client = recordingClient(server.url);
    siteA = a.sites[0]?.id as string;
    siteB = b.sites[0]?.id as string;
    const list = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=1`, a.api_key))
      .body as List<ArticleItem>;
    articleA = list.data[0]?.id as string;
    const listB = (await client.get(`/api/v1/sites/${siteB}/articles?per_page=1`, b.api_key))
      .body as List<ArticleItem>;
    articleB = listB.data[0]?.id as string;
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  /** A's record of the call that sent `clientRequestId` as its own X-Request-Id. */
  async function activityFor(clientRequestId: string): Promise<Activity> {
    return vi.waitFor(async () => {
      const page = (await client.get('/api/v1/activity?per_page=100', a.api_key)).body as List<Activity>;
      const found = page.data.find((x) => x.client_request_id === clientRequestId);
      expect(found, `the record of ${clientRequestId}`).toBeDefined();
      return found as Activity;
    }, PATIENCE);
  }

  describe('API keys', () => {
    it('accepts the key in Authorization: Bearer or X-API-Key, and both when they agree', async () => {
      expect((await client.get('/api/v1/sites', a.api_key)).status).toBe(200);
      expect((await client.get('/api/v1/sites', undefined, { 'x-api-key': a.api_key })).status).toBe(200);
      expect((await client.get('/api/v1/sites', a.api_key, { 'x-api-key': a.api_key })).status).toBe(200);
      expect(
        (await client.get('/api/v1/sites', undefined, { authorization: `bearer ${a.api_key}` })).status,
      ).toBe(200);
    });

    it.each([
      ['no key', {}],
      ['two different keys', { authorization: 'Bearer KEY_A', 'x-api-key': 'KEY_B' }],
      ['a malformed key', { 'x-api-key': 'not-a-key' }],
      ['an unknown key', { 'x-api-key': `cs_live_${'0'.repeat(48)}` }],
      ['another scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ])('refuses %s with 401 problem+json and WWW-Authenticate', async (_name, headers) => {
      const h = Object.fromEntries(
        Object.entries(headers).map(([k, v]) => [
          k,
          v.replace('KEY_A', a.api_key).replace('KEY_B', b.api_key),
        ]),
      );
      const r = await client.get('/api/v1/sites', undefined, h);
      expect(r.status).toBe(401);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.headers['www-authenticate']).toMatch(/^Bearer realm="content-service"/);
      expect(r.body).toMatchObject({
        status: 401,
        code: 'unauthenticated',
        request_id: r.headers['x-request-id'],
      });
    });

    it('refuses a key in the query string even when it is valid', async () => {
      const r = await client.get(`/api/v1/sites?api_key=${a.api_key}`);
      expect(r.status).toBe(401);
      expect((r.body as { detail: string }).detail).toContain('query string');
    });

    it('a revoked key stops working on the next request', async () => {
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Short-lived'], env)).stdout,
      ) as {
        key_id: string;
        api_key: string;
      };
      expect((await client.get('/api/v1/sites', k.api_key)).status).toBe(200);
      expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(0);
      const r = await client.get('/api/v1/sites', k.api_key);
      expect(r.status).toBe(401);
      expect((r.body as { detail: string }).detail).toContain('revoked');
    });

    it('a key the server knows, revoked, is refused on its next call of every route (the check folded into the read too)', async () => {
      const paths = [
        `/api/v1/articles/${articleA}`,
        '/api/v1/articles/art_unknown',
        `/api/v1/sites/${siteA}/articles?per_page=5`,
        `/api/v1/sites/${siteA}/articles?from=2020-01-01`,
        `/api/v1/sites/${siteA}/backlinks`,
        `/api/v1/sites/${siteA}/backlinks?to=2030-01-01`,
        `/api/v1/sites/${siteA}/stats`,
        `/api/v1/sites/${siteB}/stats`,
        '/api/v1/sites',
        '/api/v1/activity',
      ];
      // Twenty CLI processes (a create and a revoke per path): the time is theirs, sized for a busy machine.
      for (const path of paths) {
        const k = JSON.parse(
          (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Seen, then revoked'], env))
            .stdout,
        ) as { key_id: string; api_key: string };
        // Used once (the server now knows the key), revoked from another process, used again.
        expect([200, 404]).toContain((await client.get(path, k.api_key)).status);
        expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(
          0,
        );
        for (let i = 0; i < 2; i++) {
          const r = await client.get(path, k.api_key);
          expect(r.status, path).toBe(401);
          expect((r.body as { detail: string }).detail, path).toContain('revoked');
          expect(r.headers['www-authenticate'], path).toContain('error="invalid_token"');
        }
      }
    }, 240_000);

    it('a read-scoped key reads everything', async () => {
      expect((await client.get(`/api/v1/sites/${siteA}/stats`, readKey.api_key)).status).toBe(200);
    });
  });

  describe('lists', () => {
    it('sites: the account’s own, with the envelope and the same links in a Link header', async () => {
      const r = await client.get('/api/v1/sites?per_page=1', a.api_key);
      const body = r.body as List<{
        id: string;
        name: string;
        domain: string;
        url: string;
        created_at: string;
      }>;
      expect(body.meta).toEqual({ page: 1, per_page: 1, total: 2, total_pages: 2 });
      expect(body.data.map((s) => s.id)).toEqual([siteA]);
      expect(body.data[0]?.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(body.links.next).toBe(`${PUBLIC}/api/v1/sites?page=2&per_page=1`);
      expect(body.links.prev).toBeNull();
      expect(body.links.last).toBe(`${PUBLIC}/api/v1/sites?page=2&per_page=1`);
      expect(r.headers.link).toContain(`<${PUBLIC}/api/v1/sites?page=2&per_page=1>; rel="next"`);
      expect(r.headers.link).toContain('rel="self"');
      expect(r.headers.link).not.toContain('rel="prev"');
      const all = (await client.get('/api/v1/sites', b.api_key)).body as List<{ id: string }>;
      expect(all.data.map((s) => s.id).sort()).toEqual(b.sites.map((s) => s.id).sort());
    });

    it('articles: defaults, newest first with ties by id, stable pages, an empty page past the end', async () => {
      const all = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=100`, a.api_key))
        .body as List<ArticleItem>;
      expect(all.meta).toMatchObject({ total: 7, per_page: 100, total_pages: 1 });
      const dated = all.data.filter((x) => x.published_at !== null);
      for (let i = 1; i < dated.length; i++) {
        const prev = dated[i - 1] as ArticleItem;
        const cur = dated[i] as ArticleItem;
        expect(
          (prev.published_at ?? '') > (cur.published_at ?? '') ||
            (prev.published_at === cur.published_at && prev.id > cur.id),
        ).toBe(true);
      }
      const firstDefault = (await client.get(`/api/v1/sites/${siteA}/articles`, a.api_key))
        .body as List<ArticleItem>;
      expect(firstDefault.meta).toMatchObject({ page: 1, per_page: 20 });
      const pages: string[] = [];
      for (let page = 1; page <= 4; page++) {
        const p = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=2&page=${page}`, a.api_key))
          .body as List<ArticleItem>;
        pages.push(...p.data.map((x) => x.id));
        if (page === 4) expect(p.links.next).toBeNull();
      }
      expect(pages).toEqual(all.data.map((x) => x.id));
      const past = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=2&page=9`, a.api_key))
        .body as List<ArticleItem>;
      expect(past.data).toEqual([]);
      expect(past.meta).toMatchObject({ page: 9, total: 7, total_pages: 4 });
      expect(past.links.prev).toContain('page=4');
    });

    it('articles: from/to are inclusive UTC dates on published_at, status filters, the filters stay in the links', async () => {
      const all = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=100`, a.api_key))
        .body as List<ArticleItem>;
      const day = String(all.data.find((x) => x.published_at)?.published_at).slice(0, 10);
      const r = (await client.get(`/api/v1/sites/${siteA}/articles?from=${day}&to=${day}`, a.api_key))
        .body as List<ArticleItem>;
      expect(r.data.length).toBeGreaterThan(0);
      expect(r.data.every((x) => x.published_at?.startsWith(day))).toBe(true);
      expect(r.links.self).toContain(`from=${day}`);
      for (const status of ['draft', 'scheduled', 'published', 'archived']) {
        const s = (
          await client.get(`/api/v1/sites/${siteA}/articles?status=${status}&per_page=100`, a.api_key)
        ).body as List<ArticleItem>;
        expect(s.data.every((x) => x.status === status)).toBe(true);
        expect(s.meta.total).toBe(all.data.filter((x) => x.status === status).length);
      }
    });

    it('backlinks: newest first, by inclusive dates and by category', async () => {
      const all = (await client.get(`/api/v1/sites/${siteA}/backlinks?per_page=100`, a.api_key))
        .body as List<BacklinkItem>;
      expect(all.meta.total).toBe(12);
      const days = all.data.map((x) => x.acquired_on);
      expect([...days].sort().reverse()).toEqual(days);
      const industry = (
        await client.get(`/api/v1/sites/${siteA}/backlinks?category=industry&per_page=100`, a.api_key)
      ).body as List<BacklinkItem>;
      const local = (
        await client.get(`/api/v1/sites/${siteA}/backlinks?category=local&per_page=100`, a.api_key)
      ).body as List<BacklinkItem>;
      expect(industry.data.every((x) => x.category === 'industry')).toBe(true);
      expect(industry.meta.total + local.meta.total).toBe(12);
      const day = days[0] as string;
      const one = (await client.get(`/api/v1/sites/${siteA}/backlinks?from=${day}&to=${day}`, a.api_key))
        .body as List<BacklinkItem>;
      expect(one.data.every((x) => x.acquired_on === day)).toBe(true);
      expect(one.meta.total).toBe(days.filter((d) => d === day).length);
    });
  });

  describe('one article', () => {
    it('has its full body, its protected links and its revision as a weak ETag; If-None-Match gives 304', async () => {
      const r = await client.get(`/api/v1/articles/${articleA}`, a.api_key);
      expect(r.status).toBe(200);
      const article = r.body as {
        body: string;
        revision: number;
        protected_links: { id: string; kind: string; href: string; text: string }[];
      };
      expect(article.body).toContain('data-service-protected');
      expect(article.protected_links.map((l) => l.kind).sort()).toEqual(['backlink', 'internal']);
      expect(r.headers.etag).toBe(`W/"${article.revision}"`);
      const again = await client.get(`/api/v1/articles/${articleA}`, a.api_key, {
        'if-none-match': r.headers.etag as string,
      });
      expect(again.status).toBe(304);
    });

    /** GET article A with headers, the body as the bytes sent. */
    const raw = async (
      key: string,
      headers: Record<string, string> = {},
      id = articleA,
    ): Promise<{ status: number; headers: Headers; text: string }> => {
      const res = await fetch(`${server.url}/api/v1/articles/${id}`, {
        headers: { authorization: `Bearer ${key}`, ...headers },
      });
      return { status: res.status, headers: res.headers, text: await res.text() };
    };

    it('is sent as the JSON of its object: compact, its fields in the order of the OpenAPI document', async () => {
      const r = await raw(a.api_key);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(Number(r.headers.get('content-length'))).toBe(Buffer.byteLength(r.text));
      expect(JSON.stringify(JSON.parse(r.text))).toBe(r.text);
      expect(Object.keys(JSON.parse(r.text))).toEqual(Object.keys(Article.shape));
    });

    it('If-None-Match: 304 with no body on the current ETag only; recorded in the activity log', async () => {
      const current = await raw(a.api_key);
      const etag = current.headers.get('etag') as string;
      const notModified = await raw(a.api_key, { 'if-none-match': etag, 'x-request-id': 'e2e-304-1' });
      expect(notModified.status).toBe(304);
      expect(notModified.text).toBe('');
      expect(notModified.headers.get('etag')).toBe(etag);
      expect(notModified.headers.get('cache-control')).toBe('private, no-store');
      expect(notModified.headers.get('x-request-id')).toMatch(/^req_/);
      expect(notModified.headers.get('ratelimit')).toBeTruthy();
      // No body: neither its type nor a length (a client that trusts the length would wait for bytes).
      expect(notModified.headers.get('content-type')).toBeNull();
      expect(notModified.headers.get('content-length')).toBeNull();
      // Anything but the current ETag, exactly, is answered in full.
      const revision = etag.slice(3, -1);
      for (const other of [
        'W/"0"',
        `"${revision}"`,
        `W/"0", ${etag}`,
        '*',
        `W/"${revision}0"`,
        'W/"99999999999"',
      ]) {
        const full = await raw(a.api_key, { 'if-none-match': other });
        expect(full.status, other).toBe(200);
        expect(full.text, other).toBe(current.text);
        expect(full.headers.get('etag'), other).toBe(etag);
      }
      expect(await activityFor('e2e-304-1')).toMatchObject({
        operation: 'get_article',
        status: 304,
        article_id: articleA,
        site_id: siteA,
        revision: null,
      });
    });

    it("another account's article with its current ETag is the 404 of an unknown id", async () => {
      const etag = (await raw(b.api_key, {}, articleB)).headers.get('etag') as string;
      const theirs = await raw(a.api_key, { 'if-none-match': etag }, articleB);
      const nobody = await raw(a.api_key, { 'if-none-match': etag }, 'art_does_not_exist');
      expect(theirs.status).toBe(404);
      expect(nobody.status).toBe(404);
      const strip = (text: string): unknown => {
        const { request_id, instance, detail, ...rest } = JSON.parse(text) as Record<string, string>;
        return { ...rest, detail: detail?.replace(/art_\w+/, 'ID') };
      };
      expect(strip(theirs.text)).toEqual(strip(nobody.text));
    });

    it("as_of: the article as it stood then with as_of echoed and that revision's ETag; 404 before it existed, 400 for a future or malformed instant", async () => {
      const now = (await client.get(`/api/v1/articles/${articleA}`, a.api_key)).body as {
        revision: number;
        updated_at: string;
        title: string;
      };
      const at = await client.get(`/api/v1/articles/${articleA}?as_of=${now.updated_at}`, a.api_key);
      expect(at.status).toBe(200);
      const past = at.body as { revision: number; title: string; as_of: string; body: string };
      expect(at.headers.etag).toBe(`W/"${past.revision}"`);
      expect(past).toMatchObject({ revision: now.revision, title: now.title, as_of: now.updated_at });
      expect(past.body).toContain('data-service-protected');

      const before = await client.get(`/api/v1/articles/${articleA}?as_of=2000-01-01T00:00:00Z`, a.api_key);
      expect(before.status).toBe(404);
      const theirs = await client.get(`/api/v1/articles/${articleB}?as_of=${now.updated_at}`, a.api_key);
      expect(theirs.status).toBe(404);

      const future = new Date(Date.now() + 3_600_000).toISOString();
      const ahead = await client.get(`/api/v1/articles/${articleA}?as_of=${future}`, a.api_key);
      expect(ahead.status).toBe(400);
      expect(ahead.body).toMatchObject({ code: 'invalid_request', errors: [{ name: 'as_of', in: 'query' }] });
      for (const bad of ['yesterday', '2026-11-01', '2026-11-01T09:00:00%2B01:00']) {
        const r = await client.get(`/api/v1/articles/${articleA}?as_of=${bad}`, a.api_key);
        expect(r.status, bad).toBe(400);
        expect(r.body, bad).toMatchObject({ code: 'invalid_request', errors: [{ name: 'as_of' }] });
      }
    });

    it('a key the server knows, revoked, is refused with the current ETag too', async () => {
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Cached copy'], env)).stdout,
      ) as { key_id: string; api_key: string };
      const etag = (await raw(k.api_key)).headers.get('etag') as string;
      expect((await raw(k.api_key, { 'if-none-match': etag })).status).toBe(304);
      expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(0);
      const refused = await raw(k.api_key, { 'if-none-match': etag });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
    });
  });

  describe('stats', () => {
    it('answers every period, defaulting to this_month, with inclusive UTC dates', async () => {
      const now = new Date();
      const month = now.toISOString().slice(0, 7);
      const def = (await client.get(`/api/v1/sites/${siteA}/stats`, a.api_key)).body as {
        period: { key: string; from: string; to: string };
      };
      expect(def.period).toMatchObject({ key: 'this_month', from: `${month}-01` });
      const backlinks = (await client.get(`/api/v1/sites/${siteA}/backlinks?per_page=100`, a.api_key))
        .body as List<BacklinkItem>;
      let sum = 0;
      const months = new Set(backlinks.data.map((x) => x.acquired_on.slice(0, 7)));
      for (const m of months) {
        const s = (await client.get(`/api/v1/sites/${siteA}/stats?period=${m}`, a.api_key)).body as {
          site_id: string;
          period: { key: string };
          backlinks: { total: number; industry: number; local: number };
          articles: { published: number };
        };
        expect(s.site_id).toBe(siteA);
        expect(s.period.key).toBe(m);
        expect(s.backlinks.total).toBe(s.backlinks.industry + s.backlinks.local);
        expect(s.backlinks.total).toBe(backlinks.data.filter((x) => x.acquired_on.startsWith(m)).length);
        sum += s.backlinks.total;
      }
      expect(sum).toBe(12);
      for (const period of ['last_month', 'last_30_days']) {
        expect((await client.get(`/api/v1/sites/${siteA}/stats?period=${period}`, a.api_key)).status).toBe(
          200,
        );
      }
    });

    it('as_of on the list and the stats: as they stood then, as_of echoed (and kept in the links); 400 for a future instant, 404 for another account', async () => {
      const at = `${new Date().toISOString().slice(0, 19)}Z`;
      const months = [
        'this_month',
        ...new Set(
          (
            (await client.get(`/api/v1/sites/${siteA}/backlinks?per_page=100`, a.api_key))
              .body as List<BacklinkItem>
          ).data.map((x) => x.acquired_on.slice(0, 7)),
        ),
      ];
      // The read models that keep the past follow the log: read as of now, they come to equal the current ones.
      const current = (await client.get(`/api/v1/sites/${siteA}/articles?per_page=2`, a.api_key))
        .body as List<{
        id: string;
      }>;
      await vi.waitFor(async () => {
        const then = await client.get(`/api/v1/sites/${siteA}/articles?per_page=2&as_of=${at}`, a.api_key);
        expect(then.status).toBe(200);
        const body = then.body as typeof current & { meta: { as_of: string } };
        expect(body.data).toEqual(current.data);
        expect(body.meta).toEqual({ ...current.meta, as_of: at });
        expect(body.links.next).toContain(`as_of=${encodeURIComponent(at)}`);
      }, PATIENCE);
      for (const period of months) {
        const now = (await client.get(`/api/v1/sites/${siteA}/stats?period=${period}`, a.api_key)).body;
        const then = await client.get(`/api/v1/sites/${siteA}/stats?period=${period}&as_of=${at}`, a.api_key);
        expect(then.status).toBe(200);
        expect(then.body).toEqual({ ...(now as object), as_of: at });
      }
      const before = await client.get(`/api/v1/sites/${siteA}/stats?as_of=2000-01-15T00:00:00Z`, a.api_key);
      expect(before.body).toMatchObject({
        period: { key: 'this_month', from: '2000-01-01', to: '2000-01-31' },
        articles: { published: 0 },
        backlinks: { total: 0 },
      });
      const empty = await client.get(`/api/v1/sites/${siteA}/articles?as_of=2000-01-01T00:00:00Z`, a.api_key);
      expect((empty.body as List<unknown>).meta.total).toBe(0);

      const future = new Date(Date.now() + 3_600_000).toISOString();
      for (const path of [
        `/sites/${siteA}/articles?as_of=${future}`,
        `/sites/${siteA}/stats?as_of=${future}`,
      ]) {
        const r = await client.get(`/api/v1${path}`, a.api_key);
        expect(r.status, path).toBe(400);
        expect(r.body, path).toMatchObject({
          code: 'invalid_request',
          errors: [{ name: 'as_of', in: 'query' }],
        });
      }
      for (const path of [`/sites/${siteB}/articles?as_of=${at}`, `/sites/${siteB}/stats?as_of=${at}`]) {
        expect((await client.get(`/api/v1${path}`, a.api_key)).status, path).toBe(404);
      }
    });
  });

  describe('tenancy', () => {
    it("another account's ids get exactly the 404 of ids that do not exist, on every endpoint", async () => {
      const paths = (site: string, article: string): string[] => [
        `/api/v1/sites/${site}/articles`,
        `/api/v1/sites/${site}/backlinks`,
        `/api/v1/sites/${site}/stats`,
        `/api/v1/articles/${article}`,
      ];
      const theirs = paths(siteB, articleB);
      const nobody = paths('site_does_not_exist', 'art_does_not_exist');
      for (const [i, path] of theirs.entries()) {
        const r = await client.get(path, a.api_key);
        const n = await client.get(nobody[i] as string, a.api_key);
        expect(r.status).toBe(404);
        expect(n.status).toBe(404);
        const strip = (x: Recorded): unknown => {
          const { request_id, instance, detail, ...rest } = x.body as Record<string, string>;
          return { ...rest, detail: detail?.replace(/(site|art)_\w+/, 'ID') };
        };
        expect(strip(r)).toEqual(strip(n));
        expect(Object.keys(r.headers).sort()).toEqual(Object.keys(n.headers).sort());
      }
      const sites = (await client.get('/api/v1/sites?per_page=100', a.api_key)).body as List<{ id: string }>;
      expect(sites.data.map((s) => s.id)).not.toContain(siteB);
      const activity = (await client.get(`/api/v1/activity?site_id=${siteB}`, a.api_key))
        .body as List<Activity>;
      expect(activity.data.every((x) => x.actor.id !== '' && x.site_id === siteB)).toBe(true);
    });
  });

  describe('bad input', () => {
    it.each([
      ['/api/v1/sites?per_page=101', 'per_page', 'at most 100'],
      ['/api/v1/sites?per_page=0', 'per_page', '1 or more'],
      ['/api/v1/sites?page=0', 'page', '1 or more'],
      ['/api/v1/sites?page=abc', 'page', 'whole number'],
      ['/api/v1/sites?page=1.5', 'page', 'whole number'],
      ['/api/v1/sites?color=blue', 'color', 'not a known parameter'],
      ['/api/v1/sites?page=1&page=2', 'page', 'once'],
      ['/api/v1/sites/SITE/articles?from=2026-13-01', 'from', 'YYYY-MM-DD'],
      ['/api/v1/sites/SITE/articles?from=2026-11-05&to=2026-11-01', 'from', 'after to'],
      ['/api/v1/sites/SITE/articles?status=deleted', 'status', ''],
      ['/api/v1/sites/SITE/backlinks?category=national', 'category', ''],
      ['/api/v1/sites/SITE/stats?period=2026-13', 'period', 'YYYY-MM'],
      ['/api/v1/sites/SITE/stats?period=yesterday', 'period', 'YYYY-MM'],
      ['/api/v1/activity?source=fax', 'source', ''],
    ])('%s is a 400 that names %s', async (path, name, message) => {
      const r = await client.get(path.replace('SITE', siteA), a.api_key);
      expect(r.status).toBe(400);
      expect(r.headers['content-type']).toContain('application/problem+json');
      const body = r.body as { code: string; errors: { in: string; name: string; message: string }[] };
      expect(body.code).toBe('invalid_request');
      expect(body.errors).toContainEqual(expect.objectContaining({ in: 'query', name }));
      expect(body.errors.find((e) => e.name === name)?.message).toContain(message);
    });

    it('nothing a client sends in a query string produces a 500 (property)', async () => {
      const paths = [
        `/api/v1/sites`,
        `/api/v1/sites/${siteA}/articles`,
        `/api/v1/sites/${siteA}/backlinks`,
        `/api/v1/sites/${siteA}/stats`,
        '/api/v1/activity',
      ];
      const names = fc.constantFrom(
        'page',
        'per_page',
        'from',
        'to',
        'status',
        'category',
        'period',
        'source',
        'site_id',
        'x',
        '',
        '%',
        '[]',
      );
      const value = fc.oneof(
        fc.string(),
        fc.integer().map(String),
        fc.constantFrom('2026-02-30', '-1', '1e3', '%00', '%ZZ', 'null', '[]'),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...paths),
          fc.array(fc.tuple(names, value), { maxLength: 4 }),
          async (path, pairs) => {
            const qs = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
            const res = await fetch(`${server.url}${path}?${qs}`, {
              headers: { authorization: `Bearer ${a.api_key}` },
            });
            await res.arrayBuffer();
            expect(res.status).toBeLessThan(500);
          },
        ),
        { numRuns: 150 },
      );
      for (const raw of ['%', '%ZZ', 'a=%E0%A4%A', '&&&', '=x']) {
        const res = await fetch(`${server.url}/api/v1/sites?${raw}`, {
          headers: { authorization: `Bearer ${a.api_key}` },
        });
        expect(res.status).toBeLessThan(500);
      }
    });
  });

  describe('activity log', () => {
    it("makes every request id itself, and keeps a client's own X-Request-Id apart as client_request_id", async () => {
      const forged = await client.get(`/api/v1/sites/${siteA}/stats`, a.api_key, {
        'x-request-id': 'req_victim123',
      });
      expect(forged.status).toBe(200);
      const requestId = forged.headers['x-request-id'];
      expect(requestId).toMatch(/^req_[0-9a-z]{26}$/);
      expect(await activityFor('req_victim123')).toMatchObject({
        operation: 'get_stats',
        request_id: requestId,
        client_request_id: 'req_victim123',
      });
      // An id that is not a valid one (a space, too long) is not kept at all.
      const invalid = await client.get(`/api/v1/sites/${siteA}/stats`, a.api_key, {
        'x-request-id': 'two words',
      });
      expect(invalid.headers['x-request-id']).toMatch(/^req_/);
      const long = await client.get(`/api/v1/sites/${siteA}/stats`, a.api_key, {
        'x-request-id': 'x'.repeat(129),
      });
      expect(long.headers['x-request-id']).toMatch(/^req_/);
      await activityFor('req_victim123');
      const records = await vi.waitFor(async () => {
        const data = ((await client.get('/api/v1/activity?per_page=100', a.api_key)).body as List<Activity>)
          .data;
        const ids = new Set(data.map((r) => r.request_id));
        expect(ids).toContain(invalid.headers['x-request-id']);
        expect(ids).toContain(long.headers['x-request-id']);
        return data;
      }, PATIENCE);
      for (const r of [invalid, long]) {
        expect(records.find((x) => x.request_id === r.headers['x-request-id'])).toMatchObject({
          client_request_id: null,
        });
      }
      // A problem's request_id is the service's too.
      const refused = await client.get('/api/v1/sites?per_page=500', a.api_key, { 'x-request-id': 'mine-1' });
      expect(refused.headers['x-request-id']).toMatch(/^req_/);
      expect(refused.body).toMatchObject({ request_id: refused.headers['x-request-id'] });
    });

    it('records every call with a known key, refused ones included', async () => {
      const ok = await client.get(`/api/v1/sites/${siteA}/articles`, a.api_key, {
        'x-request-id': 'e2e-ok-1',
      });
      expect(ok.headers['x-request-id']).not.toBe('e2e-ok-1');
      await client.get(`/api/v1/sites/${siteA}/articles?per_page=500`, a.api_key, {
        'x-request-id': 'e2e-bad-1',
      });
      await client.get(`/api/v1/sites/${siteB}/stats`, a.api_key, { 'x-request-id': 'e2e-404-1' });
      await client.get(`/api/v1/articles/${articleA}`, readKey.api_key, { 'x-request-id': 'e2e-article-1' });
      const okRecord = await activityFor('e2e-ok-1');
      expect(okRecord).toMatchObject({
        source: 'api',
        operation: 'list_articles',
        site_id: siteA,
        status: 200,
        actor: { type: 'api_key' },
      });
      expect(okRecord?.duration_ms).toBeGreaterThanOrEqual(0);
      expect(await activityFor('e2e-bad-1')).toMatchObject({ operation: 'list_articles', status: 400 });
      expect(await activityFor('e2e-404-1')).toMatchObject({
        operation: 'get_stats',
        status: 404,
        site_id: siteB,
      });
      expect(await activityFor('e2e-article-1')).toMatchObject({
        operation: 'get_article',
        article_id: articleA,
        site_id: siteA,
        actor: { type: 'api_key', id: readKey.key_id },
      });
      const b404 = (await client.get('/api/v1/activity?per_page=100', b.api_key)).body as List<Activity>;
      expect(b404.data.some((x) => x.client_request_id === 'e2e-404-1')).toBe(false);
    });

    it('records a call whose client hangs up before the answer', async () => {
      const { port } = new URL(server.url);
      await new Promise<void>((resolve) => {
        const req = request({
          host: '127.0.0.1',
          port,
          path: `/api/v1/sites/${siteA}/backlinks?per_page=100`,
          headers: { authorization: `Bearer ${a.api_key}`, 'x-request-id': 'e2e-hangup-1' },
        });
        req.on('error', () => resolve());
        req.on('finish', () => {
          req.destroy();
          resolve();
        });
        req.end();
      });
      const record = await activityFor('e2e-hangup-1');
      expect(record).toMatchObject({ operation: 'list_backlinks', site_id: siteA });
      expect([200, 499]).toContain(record?.status);
    });

    it('filters by source, site, article and dates', async () => {
      const today = new Date().toISOString().slice(0, 10);
      const r = (
        await client.get(
          `/api/v1/activity?source=api&site_id=${siteA}&from=${today}&to=${today}&per_page=100`,
          a.api_key,
        )
      ).body as List<Activity>;
      expect(r.data.length).toBeGreaterThan(0);
      expect(r.data.every((x) => x.source === 'api' && x.site_id === siteA)).toBe(true);
      const rewrites = (await client.get('/api/v1/activity?source=rewrite&per_page=5', a.api_key))
        .body as List<Activity>;
      expect(rewrites.meta.total).toBe(14);
      expect(rewrites.data.every((x) => x.operation === 'create_article')).toBe(true);
    });
  });

  it('every response received above matches the OpenAPI document', async () => {
    const doc = await loadOpenApi(server.url);
    const api = client.recorded.filter((r) => r.path.startsWith('/api/v1/'));
    expect(api.length).toBeGreaterThan(60);
    expect(api.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });

  it('remembers when a key was last used (written in batches, flushed on shutdown)', async () => {
    await client.get('/api/v1/sites', readKey.api_key);
    await server.stop();
    const listed = await cli(['keys', 'list', '--account', a.account_id], env);
    const keys = listed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { key_id: string; last_used_at: string | null });
    expect(keys.find((k) => k.key_id === readKey.key_id)?.last_used_at).toMatch(/^\d{4}-/);
  });
});
