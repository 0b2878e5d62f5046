import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import {
  findOperation,
  loadOpenApi,
  type ObservedResponse,
  type OpenApiDoc,
  validateResponse,
} from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

type Seed = { account_id: string; api_key: string; sites: { id: string; domain: string }[] };
type Json = Record<string, unknown>;
/** A response as this test keeps it: headers as a plain object with lower-case names. */
type Observed = ObservedResponse & { headers: Record<string, string | undefined> };

/** Not localhost: the document lists PUBLIC_URL as its server, and the linter rightly objects to localhost there. */
const PUBLIC_URL = 'https://content.acme.test';

/** The read paths of CONTRACT, with the parameters each takes. */
const readPaths: [template: string, parameters: string[]][] = [
  ['/api/v1/sites', ['page', 'per_page']],
  ['/api/v1/sites/{id}/articles', ['id', 'from', 'to', 'status', 'as_of', 'page', 'per_page']],
  ['/api/v1/articles/{id}', ['id', 'as_of', 'if-none-match']],
  ['/api/v1/sites/{id}/backlinks', ['id', 'from', 'to', 'category', 'page', 'per_page']],
  ['/api/v1/sites/{id}/stats', ['id', 'period', 'as_of']],
  ['/api/v1/activity', ['from', 'to', 'source', 'site_id', 'article_id', 'page', 'per_page']],
];

describe('OpenAPI document and reference', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let seed: Seed;
  let doc: OpenApiDoc;
  let siteId: string;

  async function call(path: string, headers: Record<string, string> = {}): Promise<Observed> {
    const res = await fetch(`${server.url}${path}`, { headers }).catch((error: unknown) => {
      const logs = server.logs().slice(-20).join('\n');
      throw new Error(`GET ${path} failed; the server's last lines:\n${logs}`, { cause: error });
    });
    const text = await res.text();
    const json = (res.headers.get('content-type') ?? '').includes('json') && text !== '';
    return {
      method: 'GET',
      path,
      status: res.status,
      headers: Object.fromEntries(res.headers.entries()),
      body: json ? JSON.parse(text) : text,
    };
  }
  const withKey = (path: string, headers: Record<string, string> = {}): Promise<Observed> =>
    call(path, { authorization: `Bearer ${seed.api_key}`, ...headers });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string };
    const r = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '3'], env);
    if (r.code !== 0) throw new Error(`seed-demo failed: ${r.stderr}`);
    seed = JSON.parse(r.stdout) as Seed;
    siteId = seed.sites[0]?.id as string;
    server = await startServer({ ...env, PUBLIC_URL });
    doc = await loadOpenApi(server.url);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('is OpenAPI 3.1 and lints clean with the recommended rules', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    expect(doc.info.description?.length).toBeGreaterThan(100);
    expect(doc.servers).toEqual([{ url: PUBLIC_URL }]);

    const config = await createConfig({
      extends: ['recommended'],
      rules: {
        // A private hosted service: there is no licence to state.
        'info-license': 'off',
        // Stricter than recommended: every 4xx must say application/problem+json, as the error handler sends.
        'operation-4xx-problem-details-rfc7807': 'error',
      },
    });
    const problems = await lintFromString({
      source: JSON.stringify(doc),
      absoluteRef: `${server.url}/api/v1/openapi.json`,
      config,
    });
    expect(
      problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`),
    ).toEqual([]);
  });

  it('is public, not rate-limited and not in the activity log', async () => {
    const marker = `openapi-probe-${Date.now()}`;
    const res = await call('/api/v1/openapi.json', { 'x-request-id': marker, 'x-api-key': seed.api_key });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['x-request-id']).toMatch(/^req_/);
    expect(res.headers.ratelimit).toBeUndefined();
    expect(res.body).toEqual(doc);

    // A later recorded call shows the activity log has caught up past the document's fetch.
    const after = `after-probe-${Date.now()}`;
    expect((await withKey('/api/v1/sites', { 'x-request-id': after })).status).toBe(200);
    let ids: string[] = [];
    // Backing off keeps this well inside the account's 60 requests a minute.
    for (let i = 0; i < 15 && !ids.includes(after); i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** i, 2_000)));
      const page = (await withKey('/api/v1/activity?per_page=100')).body as {
        data: { client_request_id: string }[];
      };
      ids = page.data.map((a) => a.client_request_id);
    }
    expect(ids).toContain(after);
    expect(ids).not.toContain(marker);
  });

  it.each(readPaths)(
    'documents %s with its parameters, security, responses and headers',
    (template, names) => {
      const op = doc.paths[template]?.get as Json | undefined;
      expect(op, template).toBeDefined();
      const operation = op as Json;
      expect(operation.summary).toEqual(expect.any(String));
      expect(operation.operationId).toEqual(expect.any(String));
      expect(operation.security).toEqual([{ bearerAuth: [] }, { apiKey: [] }]);

      const parameters = (operation.parameters as Json[]).filter((p) => !('$ref' in p));
      expect(parameters.map((p) => p.name).sort()).toEqual([...names].sort());
      for (const p of parameters) {
        expect(p.description, `${template} ${String(p.name)}`).toEqual(expect.any(String));
        if (p.in === 'path') expect(p.required).toBe(true);
      }
      const byName = new Map(parameters.map((p) => [p.name, p.schema as Json]));
      if (names.includes('per_page')) {
        expect(byName.get('per_page')).toMatchObject({
          type: 'integer',
          minimum: 1,
          maximum: 100,
          default: 20,
        });
        expect(byName.get('page')).toMatchObject({ type: 'integer', minimum: 1, default: 1 });
      }
      if (names.includes('period')) expect(byName.get('period')).toMatchObject({ default: 'this_month' });

      const responses = operation.responses as Record<string, Json>;
      const expected = ['200', '400', '401', '429', '500', '503'];
      if (template.includes('{id}')) expected.push('404');
      if (template === '/api/v1/articles/{id}') expected.push('304');
      expect(Object.keys(responses).sort()).toEqual(expected.sort());
      const components = doc.components as Record<string, Record<string, Json>>;
      const resolved = (r: Json): Json =>
        typeof r.$ref === 'string' ? (components.responses?.[r.$ref.split('/').pop() as string] as Json) : r;
      for (const [status, response] of Object.entries(responses)) {
        const r = resolved(response);
        const content = Object.keys((r.content as Json | undefined) ?? {});
        if (status === '304') expect(content).toEqual([]);
        else
          expect(content).toEqual([Number(status) >= 400 ? 'application/problem+json' : 'application/json']);
        const headers = Object.keys(r.headers as Json);
        expect(headers).toContain('X-Request-Id');
        // A failure before the limiter ran (the key lookup's database) leaves no RateLimit fields.
        if (status !== '500' && status !== '503')
          expect(headers).toEqual(expect.arrayContaining(['RateLimit-Policy', 'RateLimit']));
        if (status === '401') expect(headers).toContain('WWW-Authenticate');
        if (status === '429' || status === '503') expect(headers).toContain('Retry-After');
      }
      const ok = Object.keys(resolved(responses['200'] as Json).headers as Json);
      if (names.includes('per_page')) expect(ok).toContain('Link');
      if (template === '/api/v1/articles/{id}') {
        expect(ok).toContain('ETag');
        expect(Object.keys(resolved(responses['304'] as Json).headers as Json)).toContain('ETag');
      }
    },
  );

  it('serves the reference at /docs: one page made from the document, nothing from elsewhere', async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    // No script; the one stylesheet and the icon of every page, from this server.
    expect(html).not.toMatch(/<script/i);
    const assets = [...html.matchAll(/<(?:link|img)[^>]*(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.sort()).toEqual(['/favicon.svg', '/web/style.css']);
    // Every operation of the document, under the base URL it names.
    expect(html).toContain(`${PUBLIC_URL}/api/v1/sites`);
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const op of Object.values(item) as { operationId: string }[]) {
        expect(html, `${op.operationId} ${path}`).toContain(
          `id="op-${op.operationId.replace(/[^A-Za-z0-9_-]+/g, '-')}"`,
        );
      }
    }
    // swagger-ui's files and its copy of the document are gone.
    for (const gone of [
      '/docs/json',
      '/docs/static/swagger-ui-bundle.js',
      '/docs/static/swagger-initializer.js',
    ]) {
      expect((await fetch(`${server.url}${gone}`)).status, gone).toBe(404);
    }
  });

  it('accepts real responses of every read endpoint: 200, 304, 400, 401 and 404', async () => {
    const site = `/api/v1/sites/${siteId}`;
    const articles = await withKey(`${site}/articles?per_page=2`);
    const articleId = (articles.body as { data: { id: string }[] }).data[0]?.id as string;
    const article = await withKey(`/api/v1/articles/${articleId}`);
    const observed: Observed[] = [
      await withKey('/api/v1/sites'),
      await call('/api/v1/sites?per_page=1', { 'x-api-key': seed.api_key }),
      articles,
      await withKey(`${site}/articles?status=published&from=2000-01-01&to=2100-12-31`),
      article,
      await withKey(`/api/v1/articles/${articleId}`, { 'if-none-match': article.headers.etag as string }),
      await withKey(`${site}/backlinks?category=industry`),
      await withKey(`${site}/backlinks?page=99`),
      await withKey(`${site}/stats`),
      await withKey(`${site}/stats?period=last_30_days`),
      await withKey('/api/v1/activity?source=api'),
      // 400s
      await withKey('/api/v1/sites?per_page=101'),
      await withKey(`${site}/articles?from=2026-02-01&to=2026-01-01`),
      await withKey('/api/v1/sites?page=1&page=2'),
      await withKey(`${site}/stats?period=next_week`),
      // 401s
      await call('/api/v1/sites'),
      await call(`/api/v1/articles/${articleId}`, { 'x-api-key': 'not-a-key' }),
      // 404s
      await withKey('/api/v1/sites/site_nope/articles'),
      await withKey('/api/v1/articles/art_nope'),
    ];
    expect(observed.map((r) => r.status)).toEqual([
      200, 200, 200, 200, 200, 304, 200, 200, 200, 200, 200, 400, 400, 400, 400, 401, 401, 404, 404,
    ]);
    expect(observed.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });

  it('rejects what the document does not allow, so a pass means something', async () => {
    const real = await withKey('/api/v1/sites');
    expect(validateResponse(doc, real)).toEqual([]);
    const body = structuredClone(real.body) as { data: Json[]; meta?: unknown; links: Json };
    (body.data[0] as Json).created_at = 'yesterday';
    (body.data[0] as Json).owner = 'someone';
    delete body.meta;
    const wrongBody = validateResponse(doc, { ...real, body });
    expect(wrongBody.join('\n')).toMatch(/\/data\/0\/created_at/);
    expect(wrongBody.join('\n')).toMatch(/owner/);
    expect(wrongBody.join('\n')).toMatch(/meta/);

    const missing = await withKey('/api/v1/articles/art_nope');
    const asJson = { ...missing.headers, 'content-type': 'application/json' };
    expect(validateResponse(doc, { ...missing, headers: asJson }).join('\n')).toMatch(
      /Content-Type application\/json is not documented/,
    );
    const noRequestId = Object.fromEntries(
      Object.entries(real.headers).filter(([k]) => k !== 'x-request-id'),
    );
    expect(validateResponse(doc, { ...real, headers: noRequestId })).toEqual([
      expect.stringMatching(/required header X-Request-Id is missing/),
    ]);
    expect(validateResponse(doc, { ...real, headers: { ...real.headers, link: undefined } })).toEqual([
      expect.stringMatching(/required header Link is missing/),
    ]);
    const article = await withKey(`/api/v1/articles/${await firstArticle()}`);
    expect(
      validateResponse(doc, { ...article, headers: { ...article.headers, etag: '"3"' } }).join('\n'),
    ).toMatch(/header ETag/);
    expect(validateResponse(doc, { ...real, status: 418 }).join('\n')).toMatch(
      /status 418 is not documented/,
    );
    expect(validateResponse(doc, { ...real, path: '/api/v1/nowhere' }).join('\n')).toMatch(
      /no documented path/,
    );
    expect(validateResponse(doc, { ...real, method: 'DELETE' }).join('\n')).toMatch(
      /DELETE is not documented/,
    );
    expect(findOperation(doc, 'GET', `/api/v1/sites/${siteId}/stats?period=2026-01`)?.template).toBe(
      '/api/v1/sites/{id}/stats',
    );
  });

  it('accepts a real 429 once the address without a key has used its minute', async () => {
    let last: Observed | undefined;
    for (let i = 0; i < 200 && last?.status !== 429; i++) last = await call('/api/v1/sites');
    expect(last?.status).toBe(429);
    expect(last?.headers['retry-after']).toMatch(/^\d+$/);
    expect(validateResponse(doc, last as Observed)).toEqual([]);
  });

  async function firstArticle(): Promise<string> {
    const list = await withKey(`/api/v1/sites/${siteId}/articles?per_page=1`);
    return (list.body as { data: { id: string }[] }).data[0]?.id as string;
  }
});
