import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import type { McpTokenVerifier } from '../../apps/server/http/oauth-port.ts';
import { createMetrics, type Metrics } from '../../infra/metrics.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { parseSamples, sampleValue } from '../support/metrics.ts';
import { addSiteWithArticle, catchUpAll, setUpAccount } from '../support/runtime.ts';

/*
 * The instruments of a running app (apps/server/http/metrics.ts, the command handlers, the activity
 * batch): each request observed under its face and route template, each refusal counted under its
 * face and code wherever the face maps it to an answer, each revision by its origin, each activity
 * record's wait in its batch. Two apps in one process count apart.
 */

const MODERN = '2026-07-28';
const TOKEN = 'metrics-test-token-00000000000000000000';

describe.each(backends)('metrics of a running app on %s', (backend) => {
  let test: TestDatabase;
  let runtime: Runtime;
  let metrics: Metrics;
  let app: FastifyInstance;
  let mediaDir: string;
  let key: string;
  let articleId: string;

  beforeAll(async () => {
    test = await createTestDatabase(backend);
    metrics = createMetrics({ defaultMetrics: false });
    runtime = createRuntime(test.handle, { metrics });
    const { accountId } = await setUpAccount(runtime);
    ({ articleId } = await addSiteWithArticle(runtime, accountId));
    ({ key } = await runtime.commands.createApiKey(accountId, { name: 'Metrics key', scope: 'write' }));
    await catchUpAll(runtime.db);
    mediaDir = await mkdtemp(join(tmpdir(), 'cs-metrics-media-'));
    const verifyToken: McpTokenVerifier = async (token) =>
      token === TOKEN
        ? { accountId, scope: 'write', actor: { type: 'oauth_client', id: 'client_m', name: 'Assistant' } }
        : null;
    app = await buildApp({
      runtime,
      config: { PUBLIC_URL: 'http://content-service.test', LOG_LEVEL: 'silent', MEDIA_DIR: mediaDir },
      logger: false,
      verifyToken,
      metrics,
    });
  });
  afterAll(async () => {
    await app?.close();
    await test?.drop();
    if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
  });

  const api = (method: 'GET' | 'PUT', url: string, body?: unknown, headers: Record<string, string> = {}) =>
    app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...headers },
      ...(body ? { payload: body } : {}),
    });
  const tool = (name: string, args: Record<string, unknown>) =>
    app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
        'mcp-name': name,
      },
      payload: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name,
          arguments: args,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientInfo': { name: 'metrics-test', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      },
    });
  const value = async (name: string, labels: Record<string, string> = {}) =>
    sampleValue(await metrics.scrape(), name, labels);
  const requests = (labels: Record<string, string>) =>
    value('content_service_http_request_duration_seconds_count', labels);

  it('observes an API read under its route template, never its URL', async () => {
    const route = { face: 'api', route: '/api/v1/articles/:id', method: 'GET', status: '200' };
    const before = await requests(route);
    expect((await api('GET', `/api/v1/articles/${articleId}`)).statusCode).toBe(200);
    expect(await requests(route)).toBe(before + 1);
    const text = await metrics.scrape();
    expect(text).not.toContain(articleId);
    // Its duration went into the histogram's sum too.
    expect(sampleValue(text, 'content_service_http_request_duration_seconds_sum', route)).toBeGreaterThan(0);
  });

  it('counts an API edit by its origin, and a refused one by its code and not as an edit', async () => {
    const edits = () => value('content_service_edits_total', { origin: 'api', change: 'edit' });
    const refused = () =>
      value('content_service_refusals_total', { face: 'api', code: 'protected_links_modified' });
    const [editsBefore, refusedBefore] = [await edits(), await refused()];

    expect(
      (await api('PUT', `/api/v1/articles/${articleId}`, { title: 'Boiler care, revised' })).statusCode,
    ).toBe(200);
    expect(await edits()).toBe(editsBefore + 1);

    const stripped = await api('PUT', `/api/v1/articles/${articleId}`, { body: '<p>No links left.</p>' });
    expect(stripped.statusCode).toBe(422);
    expect(await refused()).toBe(refusedBefore + 1);
    expect(await edits()).toBe(editsBefore + 1);
    expect(
      await requests({ face: 'api', route: '/api/v1/articles/:id', method: 'PUT', status: '422' }),
    ).toBeGreaterThanOrEqual(1);

    // A stale If-Match: its own code.
    const stale = await api(
      'PUT',
      `/api/v1/articles/${articleId}`,
      { title: 'Stale' },
      { 'if-match': 'W/"1"' },
    );
    expect(stale.statusCode).toBe(412);
    expect(await value('content_service_refusals_total', { face: 'api', code: 'revision_mismatch' })).toBe(1);
  });

  it('counts an MCP edit by origin mcp and an MCP tool refusal under the mcp face', async () => {
    const edits = () => value('content_service_edits_total', { origin: 'mcp', change: 'edit' });
    const before = await edits();
    const ok = await tool('update_article', { article_id: articleId, title: 'Boiler care, by an assistant' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().result.isError).toBeFalsy();
    expect(await edits()).toBe(before + 1);

    const refused = await tool('update_article', { article_id: articleId, body: '<p>Gone.</p>' });
    expect(refused.json().result.isError).toBe(true);
    expect(
      await value('content_service_refusals_total', { face: 'mcp', code: 'protected_links_modified' }),
    ).toBe(1);
    expect(await edits()).toBe(before + 1);
    expect(await requests({ face: 'mcp', route: '/mcp', method: 'POST' })).toBeGreaterThanOrEqual(2);
  });

  it('counts refusals of the pages and of unknown addresses under their face', async () => {
    const before = await value('content_service_refusals_total', { face: 'pages', code: 'not_found' });
    expect((await app.inject({ method: 'GET', url: '/sites/site_nope/no-such-page' })).statusCode).toBe(404);
    expect(await value('content_service_refusals_total', { face: 'pages', code: 'not_found' })).toBe(
      before + 1,
    );
    expect(await requests({ face: 'pages', route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);

    // An API call without a key: unauthenticated, under the api face.
    const unauthenticated = await app.inject({ method: 'GET', url: '/api/v1/sites' });
    expect(unauthenticated.statusCode).toBe(401);
    expect(
      await value('content_service_refusals_total', { face: 'api', code: 'unauthenticated' }),
    ).toBeGreaterThanOrEqual(1);
    // The probes have a face of their own.
    await app.inject({ method: 'GET', url: '/healthz' });
    expect(await requests({ face: 'probes', route: '/healthz' })).toBeGreaterThanOrEqual(1);
  });

  it('observes how long each activity record waited in its batch', async () => {
    const before = await value('content_service_activity_batch_delay_seconds_count');
    await api('GET', `/api/v1/articles/${articleId}`);
    await runtime.commands.flushCalls();
    const text = await metrics.scrape();
    expect(sampleValue(text, 'content_service_activity_batch_delay_seconds_count')).toBeGreaterThan(before);
    expect(sampleValue(text, 'content_service_activity_batch_delay_seconds_sum')).toBeGreaterThan(0);
  });

  it('keeps two apps in one process apart: a request to one is not seen by the other', async () => {
    const other = createMetrics({ defaultMetrics: false });
    const second = await buildApp({
      runtime,
      config: { PUBLIC_URL: 'http://content-service.test', LOG_LEVEL: 'silent', MEDIA_DIR: mediaDir },
      logger: false,
      metrics: other,
    });
    try {
      const route = { face: 'probes', route: '/healthz' };
      const mine = await requests(route);
      await second.inject({ method: 'GET', url: '/healthz' });
      expect(
        sampleValue(await other.scrape(), 'content_service_http_request_duration_seconds_count', route),
      ).toBe(1);
      expect(await requests(route)).toBe(mine);
    } finally {
      await second.close();
    }
  });

  it('has bounded labels: route templates, known methods, no ids', async () => {
    await app.inject({ method: 'PROPFIND' as 'GET', url: `/api/v1/articles/${articleId}` });
    const samples = parseSamples(await metrics.scrape()).filter((s) =>
      s.name.startsWith('content_service_http_request_duration_seconds'),
    );
    for (const s of samples) {
      expect(['api', 'mcp', 'pages', 'probes']).toContain(s.labels.face);
      expect(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other']).toContain(
        s.labels.method,
      );
      expect(s.labels.route === 'unmatched' || s.labels.route?.startsWith('/')).toBe(true);
      expect(s.labels.route).not.toMatch(/art_|site_|acct_/);
    }
  });
});
