import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type DecodedSpan, type OtlpReceiver, SPAN_KIND, startOtlpReceiver } from '../support/otlp.ts';
import { cli, ROOT } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';
import { PATIENCE } from '../support/wait.ts';
import { type Receiver, startReceiver } from '../webhooks/helpers.ts';

/*
 * Traces of the real server, exported over OTLP (http/protobuf) to a receiver in this test that
 * decodes them (tests/support/otlp.ts): one edit through the API is one trace (the HTTP server span
 * with its route, the use case, decide, append, the inline projections, pg spans under them), and the
 * webhook delivery it causes links to it. On PostgreSQL with BullMQ on Redis, and on the embedded
 * default (PGlite, in-process jobs), whose spans arrive only when the server stops (a batch delay of a
 * minute): what SIGTERM flushes.
 */

type Seeded = { account_id: string; api_key: string; sites: Array<{ id: string }> };

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** Text of the edits that must appear in no span (bodies stay out of traces). */
const BODY_MARK = 'body-text-never-in-a-span';
const HOOK_TOKEN = 'hook-token-never-in-a-span';

function api(server: ServerProcess, key: string) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
}

/** A trace's spans by id, and what each span's parents are named, nearest first. */
function treeOf(spans: readonly DecodedSpan[], traceId: string) {
  const trace = spans.filter((s) => s.traceId === traceId);
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  const parentOf = (s: DecodedSpan): DecodedSpan | undefined => byId.get(s.parentSpanId);
  const ancestors = (s: DecodedSpan): DecodedSpan[] => {
    const out: DecodedSpan[] = [];
    for (let p = parentOf(s); p; p = parentOf(p)) out.push(p);
    return out;
  };
  const childrenOf = (s: DecodedSpan): DecodedSpan[] => trace.filter((c) => c.parentSpanId === s.spanId);
  const describe = (): string => trace.map((s) => `${'  '.repeat(ancestors(s).length)}${s.name}`).join('\n');
  return { trace, ancestors, childrenOf, describe };
}

function only(spans: DecodedSpan[], what: string): DecodedSpan {
  expect(spans.length, what).toBe(1);
  return spans[0] as DecodedSpan;
}

const isPg = (s: DecodedSpan): boolean => s.attributes['db.system.name'] === 'postgresql';

type Setup = {
  name: string;
  env: () => Promise<{ env: Record<string, string>; cleanup: () => Promise<void> }>;
  /** The spans arrive only when the server stops (a long batch delay). */
  flushedAtStop: boolean;
  redis: boolean;
};

const SETUPS: Setup[] = [
  {
    name: 'PostgreSQL and Redis (BullMQ)',
    redis: true,
    flushedAtStop: false,
    env: async () => {
      const db: TestDatabase = await createTestDatabase('postgres');
      const prefix = `test-traces-${process.pid}`;
      return {
        env: {
          DATABASE_URL: db.databaseUrl as string,
          DATA_DIR: '/nonexistent',
          REDIS_URL: TEST_REDIS_URL,
          JOBS_PREFIX: prefix,
          RATE_LIMIT_KEY_PREFIX: `${prefix}:rl`,
          OTEL_BSP_SCHEDULE_DELAY: '100',
          OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e',
        },
        cleanup: async () => {
          await db.drop();
          const redis = new Redis(TEST_REDIS_URL);
          const keys = await redis.keys(`${prefix}:*`);
          if (keys.length > 0) await redis.del(...keys);
          await redis.quit();
        },
      };
    },
  },
  {
    name: 'the embedded default (PGlite, in-process jobs)',
    redis: false,
    flushedAtStop: true,
    env: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'cs-traces-'));
      return {
        env: {
          DATA_DIR: dataDir,
          OTEL_BSP_SCHEDULE_DELAY: '60000',
          OTEL_SERVICE_NAME: 'content-service-embedded',
        },
        cleanup: () => rm(dataDir, { recursive: true, force: true }),
      };
    },
  },
];

describe.each(SETUPS)('traces on $name', (setup) => {
  let collector: OtlpReceiver & { errors: string[] };
  let hooks: Receiver;
  let server: ServerProcess | undefined;
  let cleanup: () => Promise<void>;
  let account: Seeded;
  let call: ReturnType<typeof api>;
  let articleId: string;
  /** The answers of the two edits: a plain one and one with an Idempotency-Key. */
  const edits: { plain?: Record<string, unknown>; keyed?: Record<string, unknown> } = {};
  /** The spans, once every test's edits are made (at once, or after the stop for the embedded default). */
  let spans: DecodedSpan[] = [];

  beforeAll(async () => {
    collector = await startOtlpReceiver();
    hooks = await startReceiver();
    const made = await setup.env();
    cleanup = made.cleanup;
    const env = { ...made.env, OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32' };
    const seeded = await cli(
      // Some demo articles are drafts, not listed by date: eight, so that one at least is listed.
      ['seed-demo', '--json', '--sites', '1', '--articles', '8', '--backlinks', '0'],
      env,
    );
    if (seeded.code !== 0) throw new Error(seeded.stderr);
    account = JSON.parse(seeded.stdout) as Seeded;
    server = await startServer({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    call = api(server, account.api_key);
    const hook = await call('POST', '/webhooks', {
      url: `${hooks.url('/hooks')}?token=${HOOK_TOKEN}`,
      events: ['article.updated'],
    });
    expect(hook.status).toBe(201);
    const list = await call('GET', `/sites/${account.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`);
    articleId = (list.json.data as Array<{ id: string }>)[0]?.id as string;
    if (!articleId) throw new Error(`no article: ${JSON.stringify(list)}`);
    // The body as it is, protected links and all, and a paragraph more.
    const body = String((await call('GET', `/articles/${articleId}`)).json.body);

    const plain = await call('PUT', `/articles/${articleId}`, {
      title: 'Traced edit',
      body: `${body}<p>${BODY_MARK}</p>`,
    });
    expect(plain.status, JSON.stringify(plain.json)).toBe(200);
    edits.plain = plain.json;
    const keyed = await call(
      'PUT',
      `/articles/${articleId}`,
      { title: 'Traced edit, with a key', body: `${body}<p>${BODY_MARK} again</p>` },
      { 'idempotency-key': 'traced-edit-1' },
    );
    expect(keyed.status).toBe(200);
    edits.keyed = keyed.json;
    // Both edits' messages delivered: their delivery spans are made.
    await vi.waitFor(() => expect(hooks.received.length).toBeGreaterThanOrEqual(2), PATIENCE);
    if (setup.flushedAtStop) {
      // Nothing exported yet (a batch waits a minute): the stop's flush is what sends them.
      expect(collector.spans.filter((s) => s.name === 'articles.edit')).toEqual([]);
      expect(await server.stop()).toBe(0);
      server = undefined;
    }
    await vi.waitFor(() => {
      const delivered = collector.spans.filter((s) => s.name === 'deliver webhook');
      const edited = collector.spans.filter((s) => s.name === 'articles.edit');
      expect(edited.length).toBe(2);
      expect(delivered.length).toBeGreaterThanOrEqual(2);
      // A delivery's BullMQ spans (process, and the add it follows) end after it, maybe in a later batch.
      const known = new Set(collector.spans.map((s) => s.spanId));
      const parentOf = (spanId: string) =>
        collector.spans.find((s) => s.spanId === spanId)?.parentSpanId ?? '';
      for (const delivery of delivered) {
        if (delivery.parentSpanId === '') continue;
        expect(known.has(delivery.parentSpanId)).toBe(true);
        const grandparent = parentOf(delivery.parentSpanId);
        if (grandparent !== '') expect(known.has(grandparent)).toBe(true);
      }
      // The HTTP server spans end after their use cases: wait for the two edits' too.
      expect(
        collector.spans.filter((s) => s.kind === SPAN_KIND.server && s.name === 'PUT /api/v1/articles/:id'),
      ).toHaveLength(2);
    }, PATIENCE);
    spans = collector.spans;
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
    await collector?.close();
    await hooks?.close();
    await cleanup?.();
  });

  /** The use case span of the edit that made `revision`, and its trace. */
  function editTrace(revision: unknown) {
    const useCase = only(
      spans.filter(
        (s) => s.name === 'articles.edit' && s.attributes['content_service.article.revision'] === revision,
      ),
      `articles.edit of revision ${String(revision)}`,
    );
    return { useCase, ...treeOf(spans, useCase.traceId) };
  }

  it('receives OTLP protobuf it can decode, from the service as named by the OTEL_* variables', () => {
    expect(collector.errors).toEqual([]);
    expect(collector.requests.length).toBeGreaterThan(0);
    for (const request of collector.requests) {
      expect(request).toEqual({ path: '/v1/traces', contentType: 'application/x-protobuf' });
    }
    const { useCase } = editTrace(edits.plain?.revision);
    expect(useCase.scope).toBe('content-service');
    expect(useCase.resource).toMatchObject({
      'service.name': setup.flushedAtStop ? 'content-service-embedded' : 'content-service',
      'service.version': VERSION,
      'content_service.process': 'server',
      'telemetry.sdk.language': 'nodejs',
    });
    if (!setup.flushedAtStop) expect(useCase.resource['deployment.environment.name']).toBe('e2e');
  });

  it('makes one edit one trace: route, use case, decide, append, inline projections, pg spans', () => {
    const revision = edits.plain?.revision;
    expect(revision).toEqual(expect.any(Number));
    const { useCase, trace, ancestors, childrenOf, describe: shape } = editTrace(revision);

    // The HTTP server span is the trace's root, named by the route.
    const root = only(
      trace.filter((s) => s.parentSpanId === ''),
      `one root in\n${shape()}`,
    );
    expect(root).toMatchObject({
      name: 'PUT /api/v1/articles/:id',
      kind: SPAN_KIND.server,
      scope: '@opentelemetry/instrumentation-http',
    });
    expect(root.attributes).toMatchObject({
      'http.request.method': 'PUT',
      'http.route': '/api/v1/articles/:id',
      'http.response.status_code': 200,
      'url.path': `/api/v1/articles/${articleId}`,
    });
    // fastify's request span under it, then the route's handler, then the use case.
    const chain = ancestors(useCase).map((s) => s.name);
    expect(chain.at(-1)).toBe(root.name);
    expect(chain).toContain('request');
    expect(trace.find((s) => s.name === 'request')?.attributes['http.route']).toBe('/api/v1/articles/:id');
    expect(useCase.kind).toBe(SPAN_KIND.internal);
    expect(useCase.attributes).toMatchObject({
      'content_service.account.id': account.account_id,
      'content_service.origin': 'api',
      'content_service.actor.type': 'api_key',
      'content_service.site.id': account.sites[0]?.id,
      'content_service.article.id': articleId,
      'content_service.article.revision': revision,
    });

    // Under the use case: the reads before the command (pg), decide, then append.
    const under = childrenOf(useCase);
    const decide = only(
      under.filter((s) => s.name === 'decide article'),
      `decide under the use case in\n${shape()}`,
    );
    expect(decide.attributes).toMatchObject({
      'content_service.stream.id': `article-${articleId}`,
      'content_service.decide.attempt': 1,
      'content_service.event.types': ['ArticleEdited'],
    });
    expect(under.filter(isPg).length).toBeGreaterThan(0);
    const append = only(
      under.filter((s) => s.name === 'append article'),
      `append under the use case in\n${shape()}`,
    );
    // The inline projections' statements, and the event's insert with them in one pg statement.
    const inline = only(
      childrenOf(append).filter((s) => s.name === 'inline projections'),
      `inline projections under append in\n${shape()}`,
    );
    expect(inline.attributes['content_service.projection.mode']).toBe('in_statement');
    expect(inline.attributes['content_service.projection.statements']).toBeGreaterThan(0);
    const insert = childrenOf(append).filter(isPg);
    expect(insert.map((s) => String(s.attributes['db.query.text']))).toContainEqual(
      expect.stringMatching(/insert into events/),
    );
    if (setup.redis) {
      // The edit counted against the daily limit in Redis.
      expect(
        trace.some((s) => s.attributes['db.system.name'] === 'redis' && ancestors(s).includes(useCase)),
      ).toBe(true);
    }
    // No body, no key, in any attribute of the trace.
    const everything = JSON.stringify(trace.map((s) => [s.attributes, s.events, s.links]));
    expect(everything).not.toContain(BODY_MARK);
    expect(everything).not.toContain(account.api_key);
  });

  it('runs the inline projections in the append’s transaction when the edit has an Idempotency-Key, pg spans under each', () => {
    const { useCase, childrenOf, describe: shape } = editTrace(edits.keyed?.revision);
    const append = only(
      childrenOf(useCase).filter((s) => s.name === 'append article'),
      shape(),
    );
    const inline = only(
      childrenOf(append).filter((s) => s.name === 'inline projections'),
      shape(),
    );
    expect(inline.attributes['content_service.projection.mode']).toBe('in_transaction');
    const projectors = childrenOf(inline).map((s) => s.name);
    expect(projectors).toEqual(expect.arrayContaining(['project articles@1', 'project revisions@1']));
    const articles = childrenOf(inline).find((s) => s.name === 'project articles@1') as DecodedSpan;
    expect(childrenOf(articles).filter(isPg).length).toBeGreaterThan(0);
    // The transaction's own statements (begin, the insert, commit) are under append.
    expect(
      childrenOf(append)
        .filter(isPg)
        .map((s) => s.attributes['db.query.text']),
    ).toEqual(expect.arrayContaining(['begin', 'commit']));
  });

  it('links the webhook delivery an edit causes to the edit’s trace', () => {
    const { useCase, trace } = editTrace(edits.plain?.revision);
    const decide = trace.find((s) => s.name === 'decide article') as DecodedSpan;
    const deliveries = spans.filter(
      (s) => s.name === 'deliver webhook' && s.links.some((l) => l.traceId === useCase.traceId),
    );
    const delivery = only(deliveries, 'one delivery linked to the edit');
    // A trace of its own (it ran later, maybe elsewhere), linked to the decision that made its event.
    expect(delivery.traceId).not.toBe(useCase.traceId);
    expect(delivery.links).toEqual([{ traceId: useCase.traceId, spanId: decide.spanId, attributes: {} }]);
    expect(delivery.attributes).toMatchObject({
      'content_service.account.id': account.account_id,
      'content_service.webhook.attempt': 1,
      'content_service.webhook.delivery.status': 'succeeded',
      'content_service.webhook.status_code': 204,
    });
    const { trace: deliveryTrace, childrenOf, ancestors } = treeOf(spans, delivery.traceId);
    // The POST (undici), with the URL's query values redacted.
    const post = only(
      childrenOf(delivery).filter((s) => s.kind === SPAN_KIND.client && !isPg(s)),
      'the POST under the delivery',
    );
    expect(post).toMatchObject({ name: 'POST', scope: '@opentelemetry/instrumentation-undici' });
    expect(post.attributes['url.full']).toBe(`${hooks.url('/hooks')}?token=REDACTED`);
    expect(post.attributes['http.response.status_code']).toBe(204);
    expect(JSON.stringify(deliveryTrace.map((s) => s.attributes))).not.toContain(HOOK_TOKEN);
    // Recording the attempt: a pg span under the delivery.
    expect(childrenOf(delivery).some(isPg)).toBe(true);
    // The receiver got the delivery's trace context.
    expect(
      hooks.received.some((r) =>
        String(r.headers.traceparent).startsWith(`00-${delivery.traceId}-${post.spanId}-`),
      ),
    ).toBe(true);
    if (setup.redis) {
      // BullMQ's job: the delivery runs in its `process` span, a child of the span that added the job.
      expect(ancestors(delivery).map((s) => `${s.scope}:${s.name}`)).toEqual([
        'bullmq:process webhooks',
        'bullmq:add webhooks.webhook.deliver',
      ]);
    } else {
      expect(delivery.parentSpanId).toBe('');
    }
  });
});
